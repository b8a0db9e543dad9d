/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the input that is a raw image read from a file descriptor
 * (standard input, a pipe, a character device): read sequentially and
 * hashed as it comes, so it has a checksum but no block digests (with
 * --plain, one digest of all its bytes, which input.c reads as raw).
 * qemu cannot read a stream, so one that looks like an image (its
 * first bytes a format's magic, or its last a fixed-size VHD's
 * footer) is refused rather than hashed as bytes, unless --format=raw
 * says the bytes are what is wanted.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "imgformat.h"
#include "input-kinds.h"
#include "messages.h"
#include "names.h"
#include "options.h"
#include "progress.h"
#include "signals.h"
#include "util.h"

/* What the bytes go through: the blkhash construction, or with
 * --plain one digest of them all.
 */
struct stream_hash {
  const struct blk_params *p;
  struct blk_stream s;          /* blkhash */
  struct blk_ctx *ctx;          /* plain */
  uint64_t size;
};

/* 0, or -1 with nothing to free. */
static int
sh_init (struct stream_hash *sh, const struct blk_params *p, bool plain)
{
  sh->p = p;
  sh->size = 0;
  sh->ctx = NULL;
  if (!plain)
    return blk_stream_init (&sh->s, p);
  if ((sh->ctx = blk_ctx_new ()) == NULL)
    return -1;
  if (blk_ctx_init (sh->ctx, &p->digest) == -1) {
    blk_ctx_free (sh->ctx);
    return -1;
  }
  return 0;
}

static int
sh_update (struct stream_hash *sh, const void *buf, size_t n)
{
  sh->size += n;
  return sh->ctx ? blk_ctx_update (sh->ctx, buf, n)
    : blk_stream_update (&sh->s, buf, n);
}

static int
sh_final (struct stream_hash *sh, uint8_t *out)
{
  return sh->ctx ? blk_ctx_final (sh->ctx, out) : blk_stream_final (&sh->s, out);
}

static void
sh_free (struct stream_hash *sh)
{
  if (sh->ctx)
    blk_ctx_free (sh->ctx);
  else
    blk_stream_free (&sh->s);
}

/* Bytes read from the stream at a time. */
#define STREAM_READ_BYTES (1024 * 1024)

/* What a stream is called in messages. */
static const char *
stream_what (const char *name)
{
  return name_is_stdin (name) ? "standard input" : "the stream";
}

/* Its size is known only at its end: refused as it passes the limit
 * (options_max_size), n bytes more about to be hashed.
 */
static bool
stream_over (const char *name, const struct stream_hash *sh, size_t n,
             bool plain)
{
  const uint64_t max = options_max_size (plain);
  char l[BLK_LIMIT_STR_MAX];

  /* A blkhash checksum costs by its blocks and digests. */
  if ((plain ? sh->size + n
       : blk_work_size (sh->size + n, sh->p->block_size, sh->p->digest.len))
      <= max)
    return false;
  error_at (name, "%s passed the limit of %s for %s: " SIZE_LIFTS,
            stream_what (name), blk_format_limit (max, l),
            plain ? "a plain digest" : "a blkhash checksum");
  return true;
}

/* Does the stream look like an image, by its first len bytes (and, at
 * its end, its last BLK_VHD_FOOTER ones)?  Then say so.
 */
static bool
refuse_image (const char *name, const uint8_t *head, size_t len,
              const uint8_t *footer)
{
  struct blk_probe p;

  blk_probe_image (head, len, NULL, footer, &p);
  if (strcmp (p.format, "raw") != 0)
    error_at (name, "%s looks like a %s image: nbdsum hashes a stream's "
              "bytes; give the file's name to hash its guest content, or "
              "--format=raw to hash the bytes", stream_what (name),
              p.format);
  else if (p.fixed_vhd)
    error_at (name, "%s looks like a fixed-size VHD (it ends with a VHD "
              "footer): nbdsum hashes a stream's bytes; give the file's "
              "name and --format=vpc to hash its guest content, or "
              "--format=raw to hash the bytes", stream_what (name));
  else
    return false;
  return true;
}

/* Keep the last BLK_VHD_FOOTER bytes seen in tail. */
static void
keep_tail (uint8_t *tail, size_t *tail_len, const uint8_t *buf, size_t n)
{
  size_t keep;

  if (n >= BLK_VHD_FOOTER) {
    memcpy (tail, buf + n - BLK_VHD_FOOTER, BLK_VHD_FOOTER);
    *tail_len = BLK_VHD_FOOTER;
    return;
  }
  keep = *tail_len < BLK_VHD_FOOTER - n ? *tail_len : BLK_VHD_FOOTER - n;
  memmove (tail, tail + *tail_len - keep, keep);
  memcpy (tail + keep, buf, n);
  *tail_len = keep + n;
}

struct stream_input {
  struct input in;
  int fd;
  struct hash_spec spec;
  struct blk_params params;     /* once hashed */
  bool hashed;
};

/* Hash what fd gives until its end with spec (or the defaults); p is
 * initialised and must be freed by the caller on success.  0, or -1
 * (error printed).  A stream is its bytes: without spec->format, one
 * that looks like another format is refused; spec->format "raw" hashes
 * it all the same; any other format is an error.
 */
static int
stream_checksum (const char *name, int fd, const struct hash_spec *spec,
                 uint8_t *root, uint64_t *size, struct blk_params *p)
{
  const struct hash_spec hs = hash_spec_or_defaults (spec);
  struct stream_hash s;
  struct progress prog;
  uint8_t *buf = malloc (STREAM_READ_BYTES);
  /* Its first bytes, held until there are enough to probe; its last. */
  uint8_t first[BLK_PROBE_HEAD], tail[BLK_VHD_FOOTER];
  size_t held = 0, first_len = 0, tail_len = 0;
  const bool bytes = hs.format && strcmp (hs.format, "raw") == 0;
  bool probing = !bytes;
  const char *msg;
  int ret = -1;

  if (hs.format && !bytes) {
    error_at (name, "--format=%s does not apply to a stream: nbdsum hashes "
              "a stream's bytes (--format=raw); give the file's name to "
              "read it as %s", hs.format, hs.format);
    free (buf);
    return -1;
  }
  if ((msg = blk_params_init (p, hs.digest, hs.block_size)) != NULL) {
    error_at (name, "%s", msg);
    free (buf);
    return -1;
  }
  if (buf == NULL || sh_init (&s, p, hs.plain) == -1) {
    error_at (name, "out of memory");
    free (buf);
    blk_params_free (p);
    return -1;
  }
  /* The size is unknown: progress lines only say we started and ended. */
  progress_init (&prog, name, 0);
  for (;;) {
    /* A signal ends a wait for input: nothing to clean up but this. */
    struct pollfd fds[2] = {
      { .fd = fd, .events = POLLIN }, { .fd = stop_fd (), .events = POLLIN }
    };
    if (poll (fds, 2, -1) == -1 && errno != EINTR) {
      error_at (name, "poll: %m");
      goto out;
    }
    if (stop_signal ())
      goto out;
    ssize_t n = read (fd, buf + held, STREAM_READ_BYTES - held);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1) {
      error_at (name, "read: %m");
      goto out;
    }
    if (n == 0)
      break;
    /* Nothing is hashed until the first bytes were probed. */
    if (probing) {
      held += n;
      if (held < BLK_PROBE_HEAD)
        continue;
      first_len = BLK_PROBE_HEAD;
      memcpy (first, buf, first_len);
      if (refuse_image (name, first, first_len, NULL))
        goto out;
      probing = false;
      n = held;
      held = 0;
    }
    if (stream_over (name, &s, n, hs.plain))
      goto out;
    keep_tail (tail, &tail_len, buf, n);
    if (sh_update (&s, buf, n) == -1) {
      error_at (name, "%s failed", p->digest.name);
      goto out;
    }
    progress_add (&prog, n, n);
  }
  /* A stream shorter than the bytes probed, then its end. */
  if (probing && held > 0) {
    first_len = held;
    memcpy (first, buf, first_len);
    if (refuse_image (name, first, first_len, NULL))
      goto out;
    if (stream_over (name, &s, held, hs.plain))
      goto out;
    keep_tail (tail, &tail_len, buf, held);
    if (sh_update (&s, buf, held) == -1) {
      error_at (name, "%s failed", p->digest.name);
      goto out;
    }
    progress_add (&prog, held, held);
  }
  if (!bytes && tail_len == BLK_VHD_FOOTER &&
      refuse_image (name, first, first_len, tail))
    goto out;
  if (sh_final (&s, root) == -1) {
    error_at (name, "%s failed", p->digest.name);
    goto out;
  }
  *size = s.size;
  progress_update (&prog, true);
  ret = 0;
 out:
  sh_free (&s);
  free (buf);
  if (ret == -1)
    blk_params_free (p);
  return ret;
}

static int
stream_input_checksum (struct input *in, uint8_t *root)
{
  struct stream_input *s = container_of (in, struct stream_input, in);

  if (stream_checksum (in->name, s->fd, &s->spec, root, &in->size,
                       &s->params) == -1)
    return -1;
  s->hashed = true;
  in->params = &s->params;
  in->plain = s->spec.plain;
  in->nblocks = blk_block_count (in->size, s->params.block_size);
  snprintf (in->about.format, sizeof in->about.format, "raw");
  return 0;
}

static void
stream_input_close (struct input *in)
{
  struct stream_input *s = container_of (in, struct stream_input, in);

  if (s->hashed)
    blk_params_free (&s->params);
  if (s->fd != STDIN_FILENO)
    close (s->fd);
  free (s);
}

static const struct input_ops stream_input_ops = {
  .method = "stream",
  .checksum = stream_input_checksum,
  .digests = NULL,
  .close = stream_input_close,
};

struct input *
stream_input_open (const char *name, int fd, const struct hash_spec *spec)
{
  struct stream_input *s = calloc (1, sizeof *s);

  if (s == NULL) {
    error_at (name, "out of memory");
    if (fd != STDIN_FILENO)
      close (fd);
    return NULL;
  }
  s->in.ops = &stream_input_ops;
  s->in.name = name;
  s->fd = fd;
  s->spec = *spec;
  return &s->in;
}
