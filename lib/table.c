/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the block table's public face (see table.h for the
 * design): creating and freeing it, looking digests up, storing them
 * under the write clock's rule, and what it holds.  The mechanisms are
 * table-tree.c, table-clock.c and table-fold.c.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "minmax.h"
#include "table-internal.h"

struct blk_table *
blk_table_new (const struct blk_params *p, uint64_t size)
{
  struct blk_table *t = calloc (1, sizeof *t);
  struct blk_ctx *ctx = NULL;

  if (t == NULL)
    return NULL;
  t->p = p;
  t->size = size;
  t->len = p->digest.len;
  t->nblocks = blk_block_count (size, p->block_size);
  t->nchunks = (t->nblocks + CHUNK_BLOCKS - 1) / CHUNK_BLOCKS;
  for (uint64_t cap = 1; cap < t->nchunks; cap <<= NODE_BITS)
    t->depth++;
  t->clock = 1;
  t->stamps_needed = blk_clock_stamps_needed;
  pthread_mutex_init (&t->lock, NULL);
  pthread_mutex_init (&t->fold_lock, NULL);

  ctx = blk_ctx_new ();
  if (ctx == NULL ||
      blk_zero_block_digest (p, ctx, size % p->block_size ?
                             size % p->block_size : p->block_size,
                             t->tail_zero) == -1 ||
      blk_root_init (&t->fold, p) == -1)
    goto err;
  blk_ctx_free (ctx);
  return t;

 err:
  blk_ctx_free (ctx);
  pthread_mutex_destroy (&t->lock);
  pthread_mutex_destroy (&t->fold_lock);
  free (t);
  errno = ENOMEM;
  return NULL;
}

void
blk_table_free (struct blk_table *t)
{
  if (t == NULL)
    return;
  blk_tree_free (t, t->tree, t->depth);
  blk_root_free (&t->fold);
  pthread_mutex_destroy (&t->lock);
  pthread_mutex_destroy (&t->fold_lock);
  free (t);
}

const struct blk_params *
blk_table_params (const struct blk_table *t) { return t->p; }

uint64_t
blk_table_size (const struct blk_table *t) { return t->size; }

uint64_t
blk_table_blocks (const struct blk_table *t) { return t->nblocks; }

uint64_t
blk_table_lookup (struct blk_table *t, uint64_t first, uint64_t count,
                  uint8_t *out, bool *need, uint64_t *snapshot)
{
  uint64_t unknown = 0;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  *snapshot = t->clock;
  for (uint64_t i = 0; i < count; ) {
    const uint64_t ci = (first + i) / CHUNK_BLOCKS;
    uint64_t span, end;
    const void *s = blk_tree_find (t, ci, NULL, &span);

    /* A marker answers for its whole subtree with one look (an empty
     * terabyte is 16 M blocks); a chunk, block by block.
     */
    end = MIN (count, ci * CHUNK_BLOCKS + blk_tree_chunk_blocks (t, ci, span)
               - first);
    if (s == NULL || (s == ALL_ZERO && out == NULL)) {
      memset (need + i, s == NULL, (end - i) * sizeof *need);
      if (s == NULL)
        unknown += end - i;
      i = end;
      continue;
    }
    for (; i < end; i++) {
      const uint8_t *d = blk_tree_get_digest (t, first + i);
      need[i] = d == NULL;
      if (d == NULL)
        unknown++;
      else if (out)
        memcpy (out + i * t->len, d, t->len);
    }
  }
  return unknown;
}

void
blk_table_store (struct blk_table *t, uint64_t first, uint64_t count,
                 const uint8_t *digests, const bool *zero, const bool *which,
                 uint64_t snapshot)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  blk_clock_store (t, first, count, digests, zero, which, snapshot);
}

void
blk_table_store_zero (struct blk_table *t, uint64_t first, uint64_t count,
                      uint64_t snapshot)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  blk_clock_store_zero (t, first, count, snapshot);
}

uint64_t
blk_table_unknown (struct blk_table *t)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  return t->nblocks - t->nknown;
}

uint64_t
blk_table_next_unknown (struct blk_table *t, uint64_t from)
{
  uint64_t b = from;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  while (b < t->nblocks) {
    const uint64_t ci = b / CHUNK_BLOCKS;
    uint64_t span;
    const struct chunk *c = blk_tree_find (t, ci, NULL, &span);
    if (c == NULL)
      break;
    if (c == ALL_ZERO) {
      b = ci * CHUNK_BLOCKS + blk_tree_chunk_blocks (t, ci, span);
      continue;
    }
    const uint64_t unknown = ~c->known & chunk_mask (t, ci) &
      (UINT64_MAX << (b % CHUNK_BLOCKS));
    if (unknown) {
      b = ci * CHUNK_BLOCKS + __builtin_ctzll (unknown);
      break;
    }
    b = (ci + 1) * CHUNK_BLOCKS;
  }
  return MIN (b, t->nblocks);
}

void
blk_table_stats (struct blk_table *t, struct blk_table_stats *st)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  st->blocks = t->nblocks;
  st->known = t->nknown;
  st->data = t->ndata;
  st->folded = t->folded;
  st->memory = sizeof *t + t->nnodes * sizeof (struct node) +
    t->nallocated * sizeof (struct chunk) +
    t->ndigest_arrays * CHUNK_BLOCKS * t->len;
}
