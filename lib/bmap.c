/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the bmap view's layout beyond its header (bmap.h). */
#include <config.h>

#include <string.h>

#include "bmap.h"
#include "minmax.h"

static void
put_le (uint8_t *p, uint64_t v, int bytes)
{
  for (int i = 0; i < bytes; i++)
    p[i] = v >> (8 * i);
}

static uint64_t
get_le (const uint8_t *p, int bytes)
{
  uint64_t v = 0;

  for (int i = bytes - 1; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

uint64_t
blk_bmap_table_offset (const struct blk_header *h)
{
  const uint64_t n = h->block_count;

  return BLK_VIEW_DIGESTS_OFFSET + (n + 4095) / 4096 * 4096;
}

/* Ranges are apart by a block at least: never more than half the
 * blocks, rounded up.
 */
uint64_t
blk_bmap_table_entries (const struct blk_header *h)
{
  const uint64_t blocks = blk_bmap_blocks (h->image_size);

  return MIN (BLK_BMAP_MAX_RANGES, blocks / 2 + blocks % 2);
}

uint64_t
blk_bmap_view_size (const struct blk_header *h)
{
  return blk_bmap_table_offset (h) +
    blk_bmap_table_entries (h) * BLK_BMAP_ENTRY_SIZE;
}

void
blk_bmap_summary_encode (const struct blk_bmap_summary *s, uint8_t *buf)
{
  memset (buf, 0, BLK_BMAP_SUMMARY_SIZE);
  put_le (buf, s->ranges, 8);
  put_le (buf + 8, s->mapped_blocks, 8);
  put_le (buf + 16, s->max_ranges, 8);
  put_le (buf + 24, s->status, 4);
  put_le (buf + 32, s->stopped_at, 8);
}

void
blk_bmap_summary_decode (const uint8_t *buf, struct blk_bmap_summary *s)
{
  s->ranges = get_le (buf, 8);
  s->mapped_blocks = get_le (buf + 8, 8);
  s->max_ranges = get_le (buf + 16, 8);
  s->status = get_le (buf + 24, 4);
  s->stopped_at = get_le (buf + 32, 8);
}

void
blk_bmap_range_encode (const struct blk_bmap_range *r, uint8_t *buf)
{
  put_le (buf, r->first, 8);
  put_le (buf + 8, r->last, 8);
  memcpy (buf + 16, r->digest, BLK_BMAP_DIGEST_LEN);
}

void
blk_bmap_range_decode (const uint8_t *buf, struct blk_bmap_range *r)
{
  r->first = get_le (buf, 8);
  r->last = get_le (buf + 8, 8);
  memcpy (r->digest, buf + 16, BLK_BMAP_DIGEST_LEN);
}
