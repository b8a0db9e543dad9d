/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the bmap view NAME@bmap (see nbdkit-blkhash-filter(1)):
 * the image's mapped 4 KiB blocks as ranges, each with the sha256 of
 * its bytes, what bmaptool's block map holds.  All integers
 * little-endian.
 *
 *   0     header (header.h, magic BLKBMAP1), spans of 1 MiB; no
 *         range crosses a 64 MiB segment (filter/bmap.c)
 *   4096  summary: the range count, mapped blocks, the table's
 *         entries, a status; reading it finishes the scan
 *   8192  one byte per span: 1 once scanned on this connection
 *   T     the range table, T = 8192 + n rounded up to 4096: entries of
 *         48 bytes, le64 first block, le64 last block (inclusive, as
 *         in a bmap), the sha256 of the range's bytes (the last block
 *         cut at the image's end); past the count, zeros
 */
#ifndef BLKHASH_BMAP_H
#define BLKHASH_BMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "header.h"

#define BLK_BMAP_BLOCK_SIZE 4096
#define BLK_BMAP_DIGEST "sha256"
#define BLK_BMAP_DIGEST_LEN 32
/* The most ranges a view holds (48 MiB of table, some 100 MiB of
 * XML): an image more fragmented than that is refused.
 */
#define BLK_BMAP_MAX_RANGES (UINT64_C (1) << 20)
#define BLK_BMAP_ENTRY_SIZE 48
#define BLK_BMAP_SUMMARY_OFFSET 4096
#define BLK_BMAP_SUMMARY_SIZE 40

/* The summary's status. */
#define BLK_BMAP_COMPLETE 0
#define BLK_BMAP_TOO_MANY 1     /* over max_ranges: the scan stopped */

struct blk_bmap_summary {
  uint64_t ranges;              /* entries used */
  uint64_t mapped_blocks;       /* the ranges' blocks, in all */
  uint64_t max_ranges;          /* entries in the table */
  uint32_t status;              /* BLK_BMAP_* */
  uint64_t stopped_at;          /* BLK_BMAP_TOO_MANY: where a range
                                   that did not fit starts */
};

struct blk_bmap_range {
  uint64_t first, last;         /* 4 KiB blocks, inclusive */
  uint8_t digest[BLK_BMAP_DIGEST_LEN];
};

/* 4 KiB blocks of an image of size bytes (the last may be short). */
static inline uint64_t
blk_bmap_blocks (uint64_t size)
{
  return size / BLK_BMAP_BLOCK_SIZE + (size % BLK_BMAP_BLOCK_SIZE != 0);
}

/* The table's offset, entries, and the view's size, for the header h. */
extern uint64_t blk_bmap_table_offset (const struct blk_header *h);
extern uint64_t blk_bmap_table_entries (const struct blk_header *h);
extern uint64_t blk_bmap_view_size (const struct blk_header *h);

extern void blk_bmap_summary_encode (const struct blk_bmap_summary *s,
                                     uint8_t *buf);
extern void blk_bmap_summary_decode (const uint8_t *buf,
                                     struct blk_bmap_summary *s);
extern void blk_bmap_range_encode (const struct blk_bmap_range *r,
                                   uint8_t *buf);
extern void blk_bmap_range_decode (const uint8_t *buf,
                                   struct blk_bmap_range *r);

#endif /* BLKHASH_BMAP_H */
