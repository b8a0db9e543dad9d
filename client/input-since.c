/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: --since=MANIFEST --dirty-bitmap=NAME, the checksum of an
 * image now from its manifest then and the blocks written since.
 *
 * The blkhash root folds block digests in order, so only the blocks
 * that changed need hashing: since-server.c says which, from the
 * server's dirty bitmap, and has them hashed; every other digest is
 * the manifest's, taken here, and the root is folded.
 *
 * The bitmap is not taken on trust where the server can contradict
 * it: a clean block that the manifest has as data but that reads as
 * zeros now (base:allocation), and a sample of the clean data blocks
 * that differs from the manifest, fail the run.  The sample is drawn
 * uniformly among the blocks whose digest is taken from the manifest
 * and that are data there or on the server now, as the root is
 * folded, then their digests read from the filter's view in a second
 * round (since-sample.c: the
 * probability that it catches a change).  These catch a shrink and
 * regrowth, a disabled bitmap, the manifest of another image or a
 * snapshot served with the image's bitmap; what they cannot catch is
 * a few changed blocks among many, missed by the sample.
 *
 * Memory: the block table holds the digests of the blocks hashed, a
 * second one the clean blocks that read as zeros (runs, as holes are
 * kept), the merge one window of digests, and the sample SAMPLE_MAX
 * digests and, while it is read, at most a queue of blocks; the
 * manifest is read as it goes, never held (manifest.c).
 */
#include <config.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "helpers.h"
#include "manifest.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"
#include "signals.h"
#include "since-internal.h"
#include "table.h"

/* Blocks merged per round. */
#define WINDOW 65536

/* Is d, the manifest's digest of reusable block b, that of zeros? */
static bool
zero_digest (const struct incremental *inc, uint64_t b, const uint8_t *d)
{
  const struct blk_params *p = inc->ep->params;
  const uint32_t len = blk_block_len (inc->old_size, p->block_size, b);

  return memcmp (d, len == p->block_size ? p->zero_digest : inc->short_zero,
                 p->digest.len) == 0;
}

/* The run fails: block b was taken as clean but is not. */
static int
missed (struct incremental *inc, uint64_t b, const char *what)
{
  error_at (inc->name, "block %" PRIu64 " (offset %" PRIu64 ") %s: the "
            "bitmap missed a change (it was disabled or started late, a "
            "shrink, a write to a backing file, or the manifest is of "
            "another image); run without --since", b,
            b * inc->ep->params->block_size, what);
  return -1;
}

/* The digests of blocks [first, first+count) now: hashed, or the
 * manifest's, checked against what the server says.  Calls go
 * forward from block 0, as manifest_digests.
 */
static int
incremental_digests (struct incremental *inc, uint64_t first,
                     uint64_t count, uint8_t *out)
{
  const size_t len = inc->ep->params->digest.len;
  uint64_t snapshot;

  while (count > 0) {
    const uint64_t n = MIN (count, (uint64_t) WINDOW);
    const uint64_t old_n = first < inc->old_nblocks
      ? MIN (n, inc->old_nblocks - first) : 0;

    if (first != inc->next) {
      error_at (inc->name, "blocks asked out of order");
      return -1;
    }
    if (inc->client)
      client_input_lookup (inc->client, first, n, out, inc->need);
    else
      blk_table_lookup (inc->table, first, n, out, inc->need, &snapshot);
    blk_table_lookup (inc->zeros, first, n, NULL, inc->not_zero, &snapshot);
    if (old_n && manifest_digests (inc->m, first, old_n, inc->old) == -1)
      return -1;
    for (uint64_t i = 0; i < n; i++) {
      const uint64_t b = first + i;
      const uint8_t *old = inc->old + i * len;

      if (!inc->need[i])
        continue;
      if (i >= old_n || !reusable (inc, b)) {
        error_at (inc->name, "block %" PRIu64 " was not hashed", b);
        return -1;
      }
      if (!inc->not_zero[i] && !zero_digest (inc, b, old))
        return missed (inc, b, "reads as zeros now, but the manifest has "
                       "data there and the bitmap says it was not written");
      memcpy (out + i * len, old, len);
    }
    inc->next = first += n;
    out += n * len;
    count -= n;
  }
  return 0;
}

/* fold_digests' reads: the digests of blocks [w, w+n), counting the
 * blocks hashed and offering those taken from the manifest to the
 * sample.
 */
static int
fold_read (void *opaque, uint64_t w, uint64_t n, uint8_t *d)
{
  struct incremental *inc = opaque;
  const size_t len = inc->ep->params->digest.len;

  if (stop_signal () || incremental_digests (inc, w, n, d) == -1)
    return -1;
  for (uint64_t i = 0; i < n; i++) {
    const uint8_t *digest = d + i * len;
    /* Data in the manifest, or data on the server now: a zero block
     * written behind the bitmap's back is one of these.
     */
    if (!inc->need[i])
      inc->hashed++;
    else if (!zero_digest (inc, w + i, digest) || inc->not_zero[i])
      since_sample_offer (&inc->sample, w + i, digest, len);
  }
  return 0;
}

/* Fold every digest into the root, drawing the sample among the
 * blocks taken from the manifest, then rewind for the callers.
 */
static int
fold_root (struct incremental *inc)
{
  const struct endpoint *ep = inc->ep;

  if (fold_digests (inc->name, ep->params, ep->size, ep->nblocks, WINDOW,
                    fold_read, inc, inc->root) == -1 ||
      manifest_rewind (inc->m) == -1)
    return -1;
  inc->next = 0;
  return 0;
}

/* After the fold: read and hash the sample; a block that differs from
 * the manifest fails the run.
 */
static int
check_sample (struct incremental *inc)
{
  bool differs;
  uint64_t b;

  if (since_sample_check (&inc->sample, inc->ep, inc->client == NULL,
                          inc->name, &differs, &b) == -1)
    return -1;
  if (differs)
    return missed (inc, b, "differs from the manifest (it was hashed as "
                   "one of a sample of the clean blocks)");
  inc->sampled = inc->sample.n;
  return 0;
}

/* The manifest, checked, and the hash spec it makes. */
static int
open_manifest (struct incremental *inc, const struct hash_spec *spec,
               struct hash_spec *out)
{
  const struct blk_params *p;
  uint8_t root[BLK_DIGEST_MAX];
  uint32_t last;

  since_sample_init (&inc->sample);
  inc->m = manifest_open (opts->since, manifest_env ());
  if (inc->m == NULL)
    return -1;
  if (!manifest_root (inc->m, root)) {
    error_at (opts->since, "it carries no checksum to verify its block "
              "digests by (an older nbdsum --blocks wrote it): make a new "
              "manifest with nbdsum --blocks");
    return -1;
  }
  p = manifest_params (inc->m);
  inc->old_size = manifest_size (inc->m);
  inc->old_nblocks = blk_block_count (inc->old_size, p->block_size);
  last = inc->old_nblocks
    ? blk_block_len (inc->old_size, p->block_size, inc->old_nblocks - 1) : 0;
  if (last && last < p->block_size) {
    struct blk_ctx *ctx = blk_ctx_new ();
    const int r = ctx ? blk_zero_block_digest (p, ctx, last,
                                               inc->short_zero) : -1;
    blk_ctx_free (ctx);
    if (r == -1) {
      error_at (inc->name, "%s failed", p->digest.name);
      return -1;
    }
  }
  if (manifest_check_made (inc->m, spec->digest, spec->block_size) == -1)
    return -1;
  *out = (struct hash_spec) { p->digest.name, p->block_size, NULL, false,
                             { 0, 0 } };
  return 0;
}

static void
incremental_close (struct incremental *inc)
{
  if (inc->ep && inc->view)
    for (unsigned i = 0; i < MAX_CONNECTIONS; i++) {
      free (inc->ep->conns[i].priv);
      inc->ep->conns[i].priv = NULL;
    }
  nbd_close (inc->status);
  if (inc->status)
    pthread_mutex_destroy (&inc->status_lock);
  /* It closes the filter, and the server behind it; else the server. */
  if (inc->view)
    input_close (inc->view);
  else if (inc->client)
    input_close (inc->client);
  else
    source_close (inc->src);
  blk_table_free (inc->table);
  manifest_close (inc->m);
  blk_table_free (inc->zeros);
  since_sample_free (&inc->sample);
  free (inc->context);
  free (inc->old);
  free (inc->need);
  free (inc->not_zero);
  free (inc);
}

static int
since_checksum (struct input *in, uint8_t *root)
{
  struct incremental *inc = container_of (in, struct incremental, in);

  memcpy (root, inc->root, in->params->digest.len);
  return 0;
}

static int
since_digests (struct input *in, uint64_t first, uint64_t count,
               uint8_t *out)
{
  return incremental_digests (container_of (in, struct incremental, in),
                              first, count, out);
}

static void
since_close (struct input *in)
{
  incremental_close (container_of (in, struct incremental, in));
}

static const struct input_ops since_input_ops = {
  .method = "client-side",
  .checksum = since_checksum,
  .digests = since_digests,
  .close = since_close,
};

struct input *
since_input_open (const char *name, const struct hash_spec *spec)
{
  struct incremental *inc = calloc (1, sizeof *inc);
  struct hash_spec hs;
  size_t len;

  if (inc == NULL) {
    error_at (name, "out of memory");
    return NULL;
  }
  inc->in.ops = &since_input_ops;
  inc->in.name = inc->name = name;
  if (open_manifest (inc, spec, &hs) == -1)
    goto err;
  len = manifest_params (inc->m)->digest.len;
  if ((inc->old = malloc (WINDOW * len)) == NULL ||
      (inc->need = malloc (WINDOW * sizeof *inc->need)) == NULL ||
      (inc->not_zero = malloc (WINDOW * sizeof *inc->not_zero)) == NULL) {
    error_at (name, "out of memory");
    goto err;
  }
  if (since_server_open (inc, &hs) == -1)
    goto err;
  if ((inc->zeros = blk_table_new (inc->ep->params, inc->ep->size)) == NULL) {
    error_at (name, "out of memory");
    goto err;
  }
  blk_table_lookup (inc->zeros, 0, 0, NULL, NULL, &inc->zeros_snapshot);
  if (endpoint_run (inc->ep) == -1 || fold_root (inc) == -1 ||
      check_sample (inc) == -1)
    goto err;
  inc->in.params = inc->ep->params;
  inc->in.size = inc->ep->size;
  inc->in.nblocks = inc->ep->nblocks;
  inc->in.about.incremental = true;
  inc->in.about.hashed_blocks = inc->hashed;
  inc->in.about.sampled_blocks = inc->sampled;
  inc->in.about.read_bytes = atomic_load (&inc->ep->progress.data);
  return &inc->in;

 err:
  incremental_close (inc);
  return NULL;
}
