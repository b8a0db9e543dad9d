/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: holes from extents. */
#include <config.h>

#include "blkhash.h"
#include "cleanup.h"
#include "holes.h"

void
blk_holes_mark (const struct blk_extent *exts, size_t n,
                uint32_t block_size, uint64_t size,
                uint64_t first, uint64_t count, bool *hole)
{
  const uint64_t nblocks = blk_block_count (size, block_size);
  const uint64_t stop = MIN (first + count, nblocks);

  for (size_t i = 0; i < n; i++) {
    const uint64_t offset = exts[i].offset;
    const uint64_t end = offset + MIN (exts[i].length, UINT64_MAX - offset);

    if (!exts[i].zero)
      continue;
    /* From the first block starting in the extent to the last one
     * ending in it: only the last block is short, and it ends at the
     * image end.
     */
    const uint64_t b0 = offset / block_size + (offset % block_size != 0);
    const uint64_t b1 = end >= size ? nblocks : end / block_size;
    const uint64_t to = MIN (b1, stop);
    for (uint64_t b = MAX (b0, first); b < to; b++)
      hole[b - first] = true;
  }
}

bool
blk_next_run (const bool *a, uint64_t count, uint64_t *i, uint64_t *n)
{
  uint64_t start = *i, len = 0;

  while (start < count && !a[start])
    start++;
  while (start + len < count && a[start + len])
    len++;
  *i = start;
  *n = len;
  return len > 0;
}
