/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: views of part of an export, NAME@blkhash...
 * and NAME@digest... with ",range=OFFSET+LENGTH": the checksum of
 * those bytes as if they were an image of their own.
 *
 * The hashers (hasher.c, root.c, plain.c) read through the layer
 * below, whose bytes begin at 0.  A range view gives them a layer of
 * its own instead, a range next: the export's bytes [OFFSET,
 * OFFSET+LENGTH) shown at [0, LENGTH), as nbdkit's offset filter shows
 * them (offset=, range=), with extents moved alike.  Everything above
 * works unchanged on a table of LENGTH bytes, kept per export, digest,
 * block size and range (exports.c), and bounded as view tables are.
 *
 * When OFFSET is a multiple of the block size, the range's blocks are
 * the export's blocks (its last one may be shorter, when the range
 * ends inside a block short of the export's end): what the export's
 * own table of these parameters already knows is copied in first, so
 * that only the rest is read, and, when it knows everything, the view
 * costs the fold of its part.  Copies are taken as the table's stores
 * are: with a snapshot of the range table taken before looking in the
 * export's, so that a write in between voids them.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "filter.h"
#include "minmax.h"

/* Blocks looked up in the export's table at a time. */
#define PREFILL_BLOCKS 4096

static struct blkhash_range_next *
rn_of (nbdkit_next *n)
{
  /* ops is the first member: n is rn. */
  return (struct blkhash_range_next *) n;
}

/* Clip [offset, offset+count) of the range to it; false if none is
 * left (the hashers never ask for that).
 */
static bool
clip (const struct blkhash_range_next *rn, uint32_t *count, uint64_t offset)
{
  if (offset >= rn->length)
    return false;
  *count = MIN ((uint64_t) *count, rn->length - offset);
  return true;
}

static int64_t
rn_get_size (nbdkit_next *n)
{
  return rn_of (n)->length;
}

static const char *
rn_export_description (nbdkit_next *n)
{
  nbdkit_next *next = rn_of (n)->next;
  return next->export_description (next);
}

static int
rn_block_size (nbdkit_next *n, uint32_t *minimum, uint32_t *preferred,
               uint32_t *maximum)
{
  nbdkit_next *next = rn_of (n)->next;
  return next->block_size (next, minimum, preferred, maximum);
}

static int
rn_false (nbdkit_next *n)
{
  return 0;
}

#define PASS(fn)                                \
  static int                                    \
  rn_##fn (nbdkit_next *n)                      \
  {                                             \
    nbdkit_next *next = rn_of (n)->next;        \
    return next->fn (next);                     \
  }
PASS (prepare)
PASS (finalize)
PASS (can_flush)
PASS (is_rotational)
PASS (can_extents)
PASS (can_fua)
PASS (can_multi_conn)
PASS (can_cache)
#undef PASS

static int
rn_pread (nbdkit_next *n, void *buf, uint32_t count, uint64_t offset,
          uint32_t flags, int *err)
{
  struct blkhash_range_next *rn = rn_of (n);

  if (offset > rn->length || count > rn->length - offset) {
    blkhash_error ("blkhash: a read past the end of range=%" PRIu64 "+%"
                   PRIu64, rn->offset, rn->length);
    *err = EIO;
    return -1;
  }
  return rn->next->pread (rn->next, buf, count, rn->offset + offset, flags,
                          err);
}

static int
rn_cache (nbdkit_next *n, uint32_t count, uint64_t offset, uint32_t flags,
          int *err)
{
  struct blkhash_range_next *rn = rn_of (n);

  if (!clip (rn, &count, offset))
    return 0;
  return rn->next->cache (rn->next, count, rn->offset + offset, flags, err);
}

/* Writes never go through a view's hashers. */
static int
rn_pwrite (nbdkit_next *n, const void *buf, uint32_t count, uint64_t offset,
           uint32_t flags, int *err)
{
  *err = EROFS;
  return -1;
}

static int
rn_flush (nbdkit_next *n, uint32_t flags, int *err)
{
  return 0;
}

static int
rn_trim_zero (nbdkit_next *n, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  *err = EROFS;
  return -1;
}

/* The export's extents of the same bytes, moved to the range. */
static int
rn_extents (nbdkit_next *n, uint32_t count, uint64_t offset, uint32_t flags,
            struct nbdkit_extents *extents, int *err)
{
  struct blkhash_range_next *rn = rn_of (n);
  struct nbdkit_extents *below;
  int r = 0;

  if (!clip (rn, &count, offset))
    return nbdkit_add_extent (extents, offset, 1, 0);
  below = nbdkit_extents_new (rn->offset + offset,
                              rn->offset + offset + count);
  if (below == NULL) {
    *err = errno;
    return -1;
  }
  if (rn->next->extents (rn->next, count, rn->offset + offset, flags, below,
                         err) == -1) {
    nbdkit_extents_free (below);
    return -1;
  }
  for (size_t i = 0; r == 0 && i < nbdkit_extents_count (below); i++) {
    const struct nbdkit_extent e = nbdkit_get_extent (below, i);
    const uint64_t end = MIN (e.offset + e.length, rn->offset + rn->length);
    if (e.offset >= end)
      break;
    r = nbdkit_add_extent (extents, e.offset - rn->offset, end - e.offset,
                           e.type);
  }
  nbdkit_extents_free (below);
  if (r == -1)
    *err = errno;
  return r;
}

void
blkhash_range_next_init (struct blkhash_range_next *rn, nbdkit_next *next,
                         const struct blk_range *range)
{
  memset (rn, 0, sizeof *rn);
  rn->ops.prepare = rn_prepare;
  rn->ops.finalize = rn_finalize;
  rn->ops.get_size = rn_get_size;
  rn->ops.export_description = rn_export_description;
  rn->ops.block_size = rn_block_size;
  rn->ops.can_write = rn_false;
  rn->ops.can_flush = rn_can_flush;
  rn->ops.is_rotational = rn_is_rotational;
  rn->ops.can_trim = rn_false;
  rn->ops.can_zero = rn_false;
  rn->ops.can_fast_zero = rn_false;
  rn->ops.can_extents = rn_can_extents;
  rn->ops.can_fua = rn_can_fua;
  rn->ops.can_multi_conn = rn_can_multi_conn;
  rn->ops.can_cache = rn_can_cache;
  rn->ops.pread = rn_pread;
  rn->ops.pwrite = rn_pwrite;
  rn->ops.flush = rn_flush;
  rn->ops.trim = rn_trim_zero;
  rn->ops.zero = rn_trim_zero;
  rn->ops.extents = rn_extents;
  rn->ops.cache = rn_cache;
  rn->next = next;
  rn->offset = range->offset;
  rn->length = range->length;
}

uint64_t
blkhash_range_shared_blocks (const struct blk_range *range,
                             uint32_t block_size, uint64_t export_size)
{
  const uint64_t n = (range->length + block_size - 1) / block_size;

  if (range->offset % block_size != 0)
    return 0;
  /* A short last block short of the export's end is not the export's
   * block: its bytes are fewer.
   */
  if (range->length % block_size != 0 &&
      range->offset + range->length < export_size)
    return n - 1;
  return n;
}

int
blkhash_range_prefill (struct blk_table *t, struct blk_table *src,
                       uint64_t src_first, uint64_t shared, uint64_t first,
                       uint64_t count, int *err)
{
  const struct blk_params *p = blk_table_params (t);
  const size_t L = p->digest.len;
  const uint64_t end = MIN (first + count, shared);
  CLEANUP_FREE uint8_t *digests = NULL;
  CLEANUP_FREE bool *need = NULL, *have = NULL, *zero = NULL;

  if (first >= end)
    return 0;
  digests = malloc (MIN (end - first, (uint64_t) PREFILL_BLOCKS) * L);
  need = malloc (PREFILL_BLOCKS * sizeof *need);
  have = malloc (PREFILL_BLOCKS * sizeof *have);
  zero = malloc (PREFILL_BLOCKS * sizeof *zero);
  if (digests == NULL || need == NULL || have == NULL || zero == NULL) {
    blkhash_error ("blkhash: out of memory");
    *err = ENOMEM;
    return -1;
  }
  for (uint64_t b = first; b < end; ) {
    const uint64_t n = MIN (end - b, (uint64_t) PREFILL_BLOCKS);
    uint64_t snap, src_snap, missing;

    /* What the range's table lacks, with the snapshot its store
     * needs, taken before the export's table is looked in.
     */
    if (blk_table_lookup (t, b, n, NULL, need, &snap) > 0) {
      missing = blk_table_lookup (src, src_first + b, n, digests, have,
                                  &src_snap);
      if (missing < n) {
        for (uint64_t i = 0; i < n; i++) {
          /* lookup's need: true for unknown; store those known there
           * and unknown here.
           */
          const bool known = !have[i];
          zero[i] = known &&
            memcmp (digests + i * L, p->zero_digest, L) == 0;
          have[i] = known && need[i];
        }
        blk_table_store (t, b, n, digests, zero, have, snap);
      }
    }
    b += n;
  }
  return 0;
}
