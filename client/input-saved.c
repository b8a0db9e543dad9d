/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the input that is a saved --blocks manifest, one side of
 * --diff --manifest: its block digests as read (manifest.c checks
 * them first), and its checksum, the one it carries (checked against
 * its digests), or for a manifest written before they carried one,
 * the fold of its digests.
 */
#include <config.h>

#include <stdlib.h>

#include "cleanup.h"
#include "helpers.h"
#include "input-kinds.h"
#include "manifest.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"
#include "signals.h"

/* Digests folded at a time, for a manifest without a checksum. */
#define WINDOW 65536

struct saved_input {
  struct input in;
  struct manifest *m;
};

static int
saved_read (void *opaque, uint64_t first, uint64_t n, uint8_t *d)
{
  struct saved_input *s = opaque;

  return stop_signal () ? -1 : manifest_digests (s->m, first, n, d);
}

/* The root its digests give, then back to its first block. */
static int
saved_fold (struct saved_input *s, uint8_t *root)
{
  if (fold_digests (s->in.name, s->in.params, s->in.size, s->in.nblocks,
                    WINDOW, saved_read, s, root) == -1)
    return -1;
  return manifest_rewind (s->m);
}

static int
saved_checksum (struct input *in, uint8_t *root)
{
  struct saved_input *s = container_of (in, struct saved_input, in);

  if (manifest_root (s->m, root))
    return 0;
  return saved_fold (s, root);
}

static int
saved_digests (struct input *in, uint64_t first, uint64_t count,
               uint8_t *out)
{
  struct saved_input *s = container_of (in, struct saved_input, in);

  return manifest_digests (s->m, first, count, out);
}

static void
saved_close (struct input *in)
{
  struct saved_input *s = container_of (in, struct saved_input, in);

  manifest_close (s->m);
  free (s);
}

static const struct input_ops saved_input_ops = {
  .method = "manifest",
  .checksum = saved_checksum,
  .digests = saved_digests,
  .close = saved_close,
};

struct input *
saved_input_open (const char *path)
{
  struct saved_input *s = calloc (1, sizeof *s);

  if (s == NULL) {
    error_at (path, "out of memory");
    return NULL;
  }
  s->in.ops = &saved_input_ops;
  s->in.name = path;
  if ((s->m = manifest_open (path, manifest_env ())) == NULL) {
    saved_close (&s->in);
    return NULL;
  }
  s->in.params = manifest_params (s->m);
  s->in.size = manifest_size (s->m);
  s->in.nblocks = blk_block_count (s->in.size, s->in.params->block_size);
  return &s->in;
}
