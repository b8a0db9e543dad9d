/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: holes from extents (see holes.h). */
#include <config.h>

#include "blkhash.h"
#include "holes.h"
#include "minmax.h"

void
blk_zero_blocks (uint64_t start, uint64_t end, uint32_t block_size,
                 uint64_t size, uint64_t *b0, uint64_t *b1)
{
  /* From the first block starting in the range to the last one ending
   * in it: only the last block is short, and it ends at the image end.
   */
  *b0 = start / block_size + (start % block_size != 0);
  *b1 = end >= size ? blk_block_count (size, block_size) : end / block_size;
}

/* The end of e, saturated: a length may reach past UINT64_MAX. */
static uint64_t
extent_end (const struct blk_extent *e)
{
  return e->offset + MIN (e->length, UINT64_MAX - e->offset);
}

void
blk_holes_begin (struct blk_holes *h, uint32_t block_size, uint64_t size,
                 void (*hole_run) (void *opaque, uint64_t b0, uint64_t b1),
                 void *opaque)
{
  *h = (struct blk_holes) {
    .block_size = block_size, .size = size,
    .hole_run = hole_run, .opaque = opaque,
  };
}

/* The hole_run of blk_holes_begin_marks. */
static void
mark_run (void *opaque, uint64_t b0, uint64_t b1)
{
  struct blk_holes *h = opaque;

  for (uint64_t b = MAX (b0, h->first); b < MIN (b1, h->first + h->count);
       b++)
    h->hole[b - h->first] = true;
}

void
blk_holes_begin_marks (struct blk_holes *h, uint32_t block_size,
                       uint64_t size, uint64_t first, uint64_t count,
                       bool *hole)
{
  blk_holes_begin (h, block_size, size, mark_run, h);
  h->first = first;
  h->count = count;
  h->hole = hole;
}

void
blk_holes_end (struct blk_holes *h)
{
  uint64_t b0, b1;

  if (!h->in_zero)
    return;
  h->in_zero = false;
  blk_zero_blocks (h->start, h->end, h->block_size, h->size, &b0, &b1);
  if (b0 < b1)
    h->hole_run (h->opaque, b0, b1);
}

void
blk_holes_add (struct blk_holes *h, const struct blk_extent *e)
{
  const uint64_t end = extent_end (e);

  if (h->in_zero && e->zero &&
      e->offset >= h->start && e->offset <= h->end) {
    h->end = MAX (h->end, end);
    return;
  }
  blk_holes_end (h);
  if (e->zero) {
    h->in_zero = true;
    h->start = e->offset;
    h->end = end;
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
