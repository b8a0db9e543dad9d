/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the block table's write clock (see table.h for the
 * design): writes in flight, the stamps they leave on blocks, and
 * storing only digests no write can have made stale.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "minmax.h"
#include "table-internal.h"

/* Can writes in flight tell stamps up to gen apart?  Then one stamp
 * for many blocks would make a write that began before gen think its
 * blocks were contested: keep the detail until it ends.
 */
bool
blk_clock_stamps_needed (const struct blk_table *t, uint64_t gen)
{
  if (t->merge_held)
    return true;
  for (const struct blk_write *w = t->writes; w; w = w->next)
    if (w->start < gen)
      return true;
  return false;
}

static bool
in_flight (const struct blk_table *t, uint64_t first, uint64_t count)
{
  for (const struct blk_write *w = t->writes; w; w = w->next)
    if (w->first < first + count && first < w->first + w->count)
      return true;
  return false;
}

static bool
storable (const struct blk_table *t, uint64_t b, uint64_t snapshot,
          bool check_writes)
{
  return snapshot != 0 && blk_tree_block_wgen (t, b) <= snapshot &&
    !(check_writes && in_flight (t, b, 1));
}

/* Did another write touch block b while w was in flight?  It may be
 * in flight still, or have ended since w began.
 */
static bool
contested (const struct blk_table *t, const struct blk_write *w, uint64_t b)
{
  return in_flight (t, b, 1) || blk_tree_block_wgen (t, b) > w->start;
}

/* Forget [first, first+count) and stamp it with write clock gen.  When
 * w is given, blocks that another write contested get gen + 1, so
 * that w's own snapshot (gen) cannot store them.
 */
static void
forget (struct blk_table *t, uint64_t first, uint64_t count, uint64_t gen,
        const struct blk_write *w)
{
  uint64_t b = first, end = first + count;

  if (count && first < t->folded)
    t->fold_dirty = true;
  while (b < end) {
    const uint64_t ci = b / CHUNK_BLOCKS;
    const uint64_t cstart = ci * CHUNK_BLOCKS;
    const uint64_t cend = cstart + CHUNK_BLOCKS;
    uint64_t slot_gen;
    struct chunk *c = blk_tree_find (t, ci, &slot_gen, NULL);
    const uint64_t stop = MIN (end, cend);

    if (b == cstart && stop == cend && IS_MARKER (c)) {
      /* One stamp for the whole chunk. */
      uint64_t g = gen;
      if (w && (in_flight (t, cstart, CHUNK_BLOCKS) || slot_gen > w->start))
        g = gen + 1;
      if (blk_tree_set (t, ci, NULL, g) == 0) {
        if (c == ALL_ZERO)
          t->nknown -= __builtin_popcountll (chunk_mask (t, ci));
        b = stop;
        continue;
      }
    }
    if ((c = blk_tree_materialize (t, ci)) != NULL) {
      for (uint64_t x = b; x < stop; x++) {
        const uint64_t bit = UINT64_C (1) << (x - cstart);
        const uint64_t g = w && contested (t, w, x) ? gen + 1 : gen;
        t->nknown -= !!(c->known & bit);
        t->ndata -= !!(c->data & bit);
        c->known &= ~bit;
        c->data &= ~bit;
        c->wgen[x - cstart] = g;
      }
      blk_tree_compact (t, ci);
    }
    else {
      /* Out of memory: forget the whole subtree, coarser but safe. */
      blk_tree_coarsen (t, ci, gen + 1);
    }
    b = stop;
  }
  t->root_valid = false;
}

void
blk_clock_store (struct blk_table *t, uint64_t first, uint64_t count,
                 const uint8_t *digests, const bool *zero, const bool *which,
                 uint64_t snapshot)
{
  const bool check = in_flight (t, first, count);

  if (t->forgets)
    return;
  for (uint64_t i = 0; i < count; i++) {
    const uint64_t b = first + i;
    if ((which && !which[i]) || !storable (t, b, snapshot, check))
      continue;
    blk_tree_set_block (t, b, zero && zero[i] ? NULL : digests + i * t->len);
  }
}

void
blk_clock_store_zero (struct blk_table *t, uint64_t first, uint64_t count,
                      uint64_t snapshot)
{
  const bool check = in_flight (t, first, count);
  uint64_t b = first, end = first + count;

  if (t->forgets)
    return;
  while (b < end) {
    const uint64_t ci = b / CHUNK_BLOCKS;
    const uint64_t cstart = ci * CHUNK_BLOCKS;
    const uint64_t cend = MIN (cstart + CHUNK_BLOCKS, t->nblocks);

    uint64_t slot_gen, span;
    void *s = blk_tree_find (t, ci, &slot_gen, &span);

    if (s == ALL_ZERO) {
      /* Known zero up to the end of the marker's subtree. */
      const uint64_t mend = blk_tree_chunk_blocks (t, ci, span) + cstart;
      b = MIN (end, mend);
      continue;
    }
    /* Whole untouched chunks of a hole cost nothing. */
    if (b == cstart && end >= cend && s == NULL &&
        snapshot != 0 && slot_gen <= snapshot &&
        !(check && in_flight (t, cstart, cend - cstart)) &&
        blk_tree_set (t, ci, ALL_ZERO, slot_gen) == 0) {
      t->nknown += cend - cstart;
      if (cstart < t->folded)
        t->fold_dirty = true;
      b = cend;
      continue;
    }
    if (storable (t, b, snapshot, check))
      blk_tree_set_block (t, b, NULL);
    b++;
  }
}

void
blk_table_write_begin (struct blk_table *t, struct blk_write *w,
                       uint64_t first, uint64_t count)
{
  /* A write through a larger export of the same image may reach past
   * this table's blocks.
   */
  w->first = MIN (first, t->nblocks);
  w->count = MIN (count, t->nblocks - w->first);
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  w->start = t->clock;
  w->next = t->writes;
  t->writes = w;
}

void
blk_table_write_end (struct blk_table *t, struct blk_write *w,
                     const struct blk_written *done)
{
  struct blk_write **pp;
  uint64_t gen;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  for (pp = &t->writes; *pp != w; pp = &(*pp)->next)
    ;
  *pp = w->next;

  /* gen for our blocks, gen + 1 for those another write contested:
   * the plugin may have applied the two in either order.
   */
  t->clock += 2;
  gen = t->clock - 1;

  /* In the same critical section, so nothing can blk_tree_coarsen the stamps
   * between forgetting the blocks and storing what was written; and no
   * merging of stamps until then either, or a neighbour's stamp would
   * make our own blocks look contested.
   */
  t->merge_held = true;
  forget (t, w->first, w->count, gen, w);
  if (done && done->count) {
    if (done->digests)
      blk_clock_store (t, done->first, done->count, done->digests, done->zero,
                    NULL, gen);
    else
      blk_clock_store_zero (t, done->first, done->count, gen);
  }
  t->merge_held = false;
  blk_tree_tidy (t, w->first, w->count);
}

/* blk_table_reset with t->lock held. */
static void
reset_locked (struct blk_table *t)
{
  /* As a write over every block ending now: one stamp newer than any
   * snapshot taken so far, so nothing computed from an earlier lookup
   * is stored, and writes in flight see their blocks contested.
   */
  blk_tree_free (t, t->tree, t->depth);
  t->clock += 2;
  t->tree = NULL;
  t->tree_wgen = t->clock - 1;
  t->nknown = t->ndata = 0;
  t->nallocated = t->ndigest_arrays = t->nnodes = 0;
  if (t->folded > 0)
    t->fold_dirty = true;
  t->root_valid = false;
}

void
blk_table_reset (struct blk_table *t)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  reset_locked (t);
}

void
blk_table_forget_begin (struct blk_table *t)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  t->forgets++;
}

void
blk_table_forget_end (struct blk_table *t)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  reset_locked (t);
  t->forgets--;
}
