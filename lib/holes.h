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

/* Set hole[b - first] for every block b of [first, first+count) lying
 * wholly inside one of the zero extents exts[0..n) of an image of size
 * bytes in blocks of block_size bytes.  A short last block counts when
 * the extent reaches the image end.  Extents may be unaligned, reach
 * outside the range or the image, and overlap; entries of hole not
 * set are left as they are, so windows of extents can be marked one
 * call at a time.
 */
extern void blk_holes_mark (const struct blk_extent *exts, size_t n,
                            uint32_t block_size, uint64_t size,
                            uint64_t first, uint64_t count, bool *hole);

/* The next run of true entries of a[0..count) at or after *i: returns
 * true with the run in [*i, *i + *n), false (*n = 0) when there is
 * none.  For runs of holes, and of blocks to read:
 *
 *   for (uint64_t i = 0, n; blk_next_run (a, count, &i, &n); i += n)
 */
extern bool blk_next_run (const bool *a, uint64_t count, uint64_t *i,
                          uint64_t *n);

#endif /* BLKHASH_HOLES_H */
