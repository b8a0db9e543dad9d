/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the read-only NAME@blkhash view.
 *
 *   0     header (BLKHASH1, sizes, digest name), 4096 bytes
 *   4096  root digest, zero padded to 4096 bytes
 *   8192  block digests, block i at 8192 + i * L
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "filter.h"
#include "minmax.h"

/* Block digests are computed in windows of this many image bytes, so
 * a big request does not allocate in proportion to its size.
 */
#define WINDOW_BYTES (UINT64_C (64) * 1024 * 1024)

struct blkhash_view {
  struct blk_header h;
  uint8_t header[BLK_VIEW_HEADER_SIZE];
  /* A block-aligned range's: the export's table (see range.c). */
  struct blk_table *src;
  uint64_t src_first, shared;
};

void
blkhash_view_set_source (struct blkhash_view *v, struct blk_table *src,
                         uint64_t src_first, uint64_t shared)
{
  v->src = src;
  v->src_first = src_first;
  v->shared = shared;
}

/* What the export's table knows of blocks [first, first+count), first. */
static int
prefill (struct blkhash_view *v, struct blk_table *t, uint64_t first,
         uint64_t count, int *err)
{
  if (v->src == NULL)
    return 0;
  return blkhash_range_prefill (t, v->src, v->src_first, v->shared, first,
                                count, err);
}

struct blkhash_view *
blkhash_view_new (uint64_t size, const struct blk_params *p, uint32_t flags,
                  const char *nonce)
{
  struct blkhash_view *v = calloc (1, sizeof *v);

  if (v == NULL) {
    blkhash_error ("calloc: %m");
    return NULL;
  }
  blk_header_init (&v->h, size, p->block_size, p->digest.name,
                   p->digest.len);
  v->h.flags = flags;
  if (nonce)
    snprintf (v->h.nonce, sizeof v->h.nonce, "%s", nonce);
  blk_header_encode (&v->h, v->header);
  return v;
}

void
blkhash_view_free (struct blkhash_view *v)
{
  free (v);
}

int64_t
blkhash_view_size (const struct blkhash_view *v)
{
  return blk_view_size (&v->h);
}

/* Compute (or look up) block digests [first, first+count) and, when
 * dst is not NULL, copy the bytes [skip, skip+len) of them to dst.
 */
static int
view_digests (nbdkit_next *next, struct blkhash_view *v, struct blk_table *t,
              uint64_t first, uint64_t count, uint8_t *dst, uint64_t skip,
              uint64_t len, int *err)
{
  const size_t L = v->h.digest_len;
  const uint64_t step = blk_blocks_per (WINDOW_BYTES, v->h.block_size);
  CLEANUP_FREE uint8_t *buf = NULL;

  if (dst && (buf = malloc (MIN (count, step) * L)) == NULL) {
    blkhash_error ("blkhash: out of memory");
    *err = ENOMEM;
    return -1;
  }
  for (uint64_t b = first; b < first + count; ) {
    const uint64_t n = MIN (first + count - b, step);
    if ((b > first && blkhash_should_stop (err)) ||
        prefill (v, t, b, n, err) == -1 ||
        blkhash_compute (next, t, b, n, buf, err) == -1)
      return -1;
    if (dst) {
      /* Bytes of this window that the caller asked for. */
      const uint64_t wstart = (b - first) * L, wend = wstart + n * L;
      const uint64_t from = MAX (skip, wstart);
      const uint64_t to = MIN (skip + len, wend);
      if (from < to)
        memcpy (dst + (from - skip), buf + (from - wstart), to - from);
    }
    b += n;
  }
  /* The fold keeps up with the requests (a run of holes is done when
   * its fold is), so the client's progress counts it.
   */
  if (blk_table_fold_behind (t, first + count, BLKHASH_FOLD_BUDGET)
      == BLK_FOLD_FAILED) {
    blkhash_error ("blkhash: %s failed", v->h.digest_name);
    *err = EIO;
    return -1;
  }
  return 0;
}

/* The digest area bytes [start, end) relative to its start. */
static int
view_digest_range (nbdkit_next *next, struct blkhash_view *v,
                   struct blk_table *t, uint64_t start, uint64_t end,
                   uint8_t *dst, int *err)
{
  const size_t L = v->h.digest_len;
  const uint64_t first = start / L;
  const uint64_t last = (end + L - 1) / L;

  return view_digests (next, v, t, first, last - first, dst,
                       start - first * L, end - start, err);
}

int
blkhash_view_pread (nbdkit_next *next, struct blkhash_view *v,
                    struct blk_table *t, void *buf, uint32_t count,
                    uint64_t offset, int *err)
{
  uint8_t *dst = buf;
  const uint64_t end = offset + count;
  const uint64_t root_end = BLK_VIEW_ROOT_OFFSET + v->h.digest_len;

  memset (buf, 0, count);

  if (offset < BLK_VIEW_HEADER_SIZE) {
    const uint64_t to = MIN (end, (uint64_t) BLK_VIEW_HEADER_SIZE);
    memcpy (dst, v->header + offset, to - offset);
  }

  if (offset < root_end && end > BLK_VIEW_ROOT_OFFSET) {
    uint8_t root[BLK_DIGEST_MAX];
    if (prefill (v, t, 0, v->h.block_count, err) == -1 ||
        blkhash_compute_root (next, t, root, err) == -1)
      return -1;
    const uint64_t from = MAX (offset, (uint64_t) BLK_VIEW_ROOT_OFFSET);
    const uint64_t to = MIN (end, root_end);
    memcpy (dst + (from - offset), root + (from - BLK_VIEW_ROOT_OFFSET),
            to - from);
  }

  if (end > BLK_VIEW_DIGESTS_OFFSET) {
    const uint64_t from = MAX (offset, (uint64_t) BLK_VIEW_DIGESTS_OFFSET);
    if (view_digest_range (next, v, t, from - BLK_VIEW_DIGESTS_OFFSET,
                           end - BLK_VIEW_DIGESTS_OFFSET,
                           dst + (from - offset), err) == -1)
      return -1;
  }
  return 0;
}

int
blkhash_view_cache (nbdkit_next *next, struct blkhash_view *v,
                    struct blk_table *t, uint32_t count, uint64_t offset,
                    int *err)
{
  const uint64_t end = offset + count;
  const uint64_t root_end = BLK_VIEW_ROOT_OFFSET + v->h.digest_len;

  if (end > BLK_VIEW_DIGESTS_OFFSET) {
    const uint64_t from = MAX (offset, (uint64_t) BLK_VIEW_DIGESTS_OFFSET);
    if (view_digest_range (next, v, t, from - BLK_VIEW_DIGESTS_OFFSET,
                           end - BLK_VIEW_DIGESTS_OFFSET, NULL, err) == -1)
      return -1;
  }
  if (offset < root_end && end > BLK_VIEW_ROOT_OFFSET) {
    uint8_t root[BLK_DIGEST_MAX];
    if (prefill (v, t, 0, v->h.block_count, err) == -1 ||
        blkhash_compute_root (next, t, root, err) == -1)
      return -1;
  }
  return 0;
}

/* The request was checked before any work (nbdkit checks its bounds; a
 * view has no other), so what failed is below: the plugin, or the
 * storage behind it.  Its EINVAL, and what NBD has no code for (which
 * nbdkit sends as EINVAL: the nbd plugin's server gone is ENOTCONN;
 * EOVERFLOW but for a structured read's DF flag, which views do not
 * take), would blame the client: they go as EIO, the cause in the log.
 */
int
blkhash_view_failed (int r, int *err)
{
  if (r == -1) {
    switch (*err) {
    case EPERM: case EROFS: case EIO: case ENOMEM: case ENOSPC:
    case EDQUOT: case EFBIG: case ENOTSUP: case ESHUTDOWN:
      break;
    default:
      *err = EIO;
    }
  }
  return r;
}
