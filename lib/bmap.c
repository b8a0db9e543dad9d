/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the bmap view's layout beyond its header (bmap.h). */
#include <config.h>

#include <string.h>

#include "bmap.h"
#include "minmax.h"
#include "util.h"

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
  blk_put_le (buf, s->ranges, 8);
  blk_put_le (buf + 8, s->mapped_blocks, 8);
  blk_put_le (buf + 16, s->max_ranges, 8);
  blk_put_le (buf + 24, s->status, 4);
  blk_put_le (buf + 32, s->stopped_at, 8);
}

void
blk_bmap_summary_decode (const uint8_t *buf, struct blk_bmap_summary *s)
{
  s->ranges = blk_get_le (buf, 8);
  s->mapped_blocks = blk_get_le (buf + 8, 8);
  s->max_ranges = blk_get_le (buf + 16, 8);
  s->status = blk_get_le (buf + 24, 4);
  s->stopped_at = blk_get_le (buf + 32, 8);
}

void
blk_bmap_range_encode (const struct blk_bmap_range *r, uint8_t *buf)
{
  blk_put_le (buf, r->first, 8);
  blk_put_le (buf + 8, r->last, 8);
  memcpy (buf + 16, r->digest, BLK_BMAP_DIGEST_LEN);
}

void
blk_bmap_range_decode (const uint8_t *buf, struct blk_bmap_range *r)
{
  r->first = blk_get_le (buf, 8);
  r->last = blk_get_le (buf + 8, 8);
  memcpy (r->digest, buf + 16, BLK_BMAP_DIGEST_LEN);
}
