/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: holes, the blocks an image's extents say read as
 * zero, so that they need not be read.  Shared by the filter (nbdkit
 * extents) and nbdsum (NBD block status).
 */
#ifndef BLKHASH_HOLES_H
#define BLKHASH_HOLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes [offset, offset+length) of the image; zero: they read as zero. */
struct blk_extent {
  uint64_t offset, length;
  bool zero;
};

/* The blocks [*b0, *b1) lying wholly inside the zero bytes [start,
 * end) of an image of size bytes in blocks of block_size bytes (none
 * when *b0 >= *b1).  A short last block counts when end reaches the
 * image end.  The one rule for "a block the extents say is zero".
 */
extern void blk_zero_blocks (uint64_t start, uint64_t end,
                             uint32_t block_size, uint64_t size,
                             uint64_t *b0, uint64_t *b1);

/* Extents given in order, adjacent or overlapping zero extents taken
 * as one: servers cut extents where they like (nbdkit at 4 GiB - 1
 * bytes, a plugin at its own chunks), and a block straddling such a
 * cut is still a hole.  Each run of zero bytes, once it ends, gives
 * the blocks wholly inside it (blk_zero_blocks) to hole_run, if any:
 *
 *   struct blk_holes h;
 *   blk_holes_begin (&h, block_size, size, hole_run, opaque);
 *   for each extent, in order, over one call or many: blk_holes_add
 *   blk_holes_end (&h);
 *
 * Extents may be unaligned, reach outside the image, and overlap.
 */
struct blk_holes {
  uint32_t block_size;
  uint64_t size;
  void (*hole_run) (void *opaque, uint64_t b0, uint64_t b1);
  void *opaque;
  bool in_zero;                 /* zero bytes [start, end) pending */
  uint64_t start, end;
  uint64_t first, count;        /* blk_holes_begin_marks: the range */
  bool *hole;                   /* ... and its marks */
};
extern void blk_holes_begin (struct blk_holes *h, uint32_t block_size,
                             uint64_t size,
                             void (*hole_run) (void *opaque, uint64_t b0,
                                               uint64_t b1),
                             void *opaque);
/* The same, setting hole[b - first] for every hole block b of [first,
 * first+count); entries not set are left as they are.
 */
extern void blk_holes_begin_marks (struct blk_holes *h, uint32_t block_size,
                                   uint64_t size, uint64_t first,
                                   uint64_t count, bool *hole);
extern void blk_holes_add (struct blk_holes *h, const struct blk_extent *e);
extern void blk_holes_end (struct blk_holes *h);

/* The next run of true entries of a[0..count) at or after *i: returns
 * true with the run in [*i, *i + *n), false (*n = 0) when there is
 * none.  For runs of holes, and of blocks to read:
 *
 *   for (uint64_t i = 0, n; blk_next_run (a, count, &i, &n); i += n)
 */
extern bool blk_next_run (const bool *a, uint64_t count, uint64_t *i,
                          uint64_t *n);

#endif /* BLKHASH_HOLES_H */
