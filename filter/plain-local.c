/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: a plain digest of the whole content, read
 * through the plugin in order, one piece at a time; ranges the
 * extents say read as zeros are hashed as zeros without reading.  A
 * simple sequential stand-in for filter/plain.c (see plain-local.h).
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "minmax.h"
#include "plain-local.h"

/* Bytes asked of the extents at a time, and of one read. */
#define EXTENTS_WINDOW (UINT64_C (64) * 1024 * 1024)
#define PIECE (256 * 1024)

struct blkhash_plain {
  const struct blk_digest *d;
  struct blk_ctx *ctx;
  uint64_t size, pos;
  uint8_t *buf;                 /* PIECE bytes */
};

static const uint8_t zeros[PIECE];

struct blkhash_plain *
blkhash_plain_new (const struct blk_digest *d, uint64_t size)
{
  struct blkhash_plain *p = calloc (1, sizeof *p);

  if (p == NULL || (p->ctx = blk_ctx_new ()) == NULL ||
      (p->buf = malloc (PIECE)) == NULL) {
    nbdkit_error ("blkhash: out of memory");
    blkhash_plain_free (p);
    return NULL;
  }
  if (blk_ctx_init (p->ctx, d) == -1) {
    nbdkit_error ("blkhash: %s failed", d->name);
    blkhash_plain_free (p);
    return NULL;
  }
  p->d = d;
  p->size = size;
  return p;
}

void
blkhash_plain_free (struct blkhash_plain *p)
{
  if (p == NULL)
    return;
  blk_ctx_free (p->ctx);
  free (p->buf);
  free (p);
}

static int
update (struct blkhash_plain *p, const void *buf, size_t len, int *err)
{
  if (blk_ctx_update (p->ctx, buf, len) == -1) {
    nbdkit_error ("blkhash: %s failed", p->d->name);
    *err = EIO;
    return -1;
  }
  return 0;
}

/* [p->pos, p->pos + len): zeros if zero, else read. */
static int
hash_range (nbdkit_next *next, struct blkhash_plain *p, uint64_t len,
            bool zero, int *err)
{
  while (len > 0) {
    const uint32_t n = MIN (len, (uint64_t) PIECE);

    if (blkhash_should_stop (err)) {
      nbdkit_error ("blkhash: plain digest stopped: %s", strerror (*err));
      return -1;
    }
    if (!zero && next->pread (next, p->buf, n, p->pos, 0, err) == -1) {
      if (*err == 0)
        *err = EIO;
      nbdkit_error ("blkhash: reading to hash failed: %s", strerror (*err));
      return -1;
    }
    if (update (p, zero ? zeros : p->buf, n, err) == -1)
      return -1;
    p->pos += n;
    len -= n;
  }
  return 0;
}

int
blkhash_plain_advance (nbdkit_next *next, struct blkhash_plain *p,
                       uint64_t end, int *err)
{
  const bool have_extents = next->can_extents (next) == 1;

  end = MIN (end, p->size);
  while (p->pos < end) {
    const uint64_t len = MIN (end - p->pos, EXTENTS_WINDOW);
    struct nbdkit_extents *exts;

    if (!have_extents) {
      if (hash_range (next, p, len, false, err) == -1)
        return -1;
      continue;
    }
    exts = nbdkit_extents_full (next, len, p->pos, 0, err);
    if (exts == NULL) {
      if (*err == 0)
        *err = EIO;
      nbdkit_error ("blkhash: extents failed: %s", strerror (*err));
      return -1;
    }
    for (size_t i = 0; i < nbdkit_extents_count (exts) && p->pos < end;
         i++) {
      const struct nbdkit_extent x = nbdkit_get_extent (exts, i);
      const uint64_t xend = MIN (x.offset + x.length, end);
      if (xend <= p->pos)
        continue;
      if (hash_range (next, p, xend - p->pos, x.type & NBDKIT_EXTENT_ZERO,
                      err) == -1) {
        nbdkit_extents_free (exts);
        return -1;
      }
    }
    nbdkit_extents_free (exts);
  }
  return 0;
}

int
blkhash_plain_final (nbdkit_next *next, struct blkhash_plain *p,
                     uint8_t *out, int *err)
{
  if (blkhash_plain_advance (next, p, p->size, err) == -1)
    return -1;
  if (blk_ctx_final (p->ctx, out) == -1) {
    nbdkit_error ("blkhash: %s failed", p->d->name);
    *err = EIO;
    return -1;
  }
  return 0;
}
