/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the block table's sparse tree of chunks (see
 * table-internal.h): finding a block's slot, splitting markers into
 * chunks and nodes, giving back what says nothing a marker cannot, and
 * each block's digest.  Everything here is called with t->lock held.
 * Merging stamps is the write clock's decision, asked through
 * t->stamps_needed.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "minmax.h"
#include "table-internal.h"

struct chunk blk_all_zero_marker;

/* Chunks covered by one slot of a node at level l (1: chunks). */
static inline uint64_t
slot_span (unsigned l)
{
  return UINT64_C (1) << (NODE_BITS * (l - 1));
}

static inline unsigned
slot_index (uint64_t ci, unsigned l)
{
  return (ci >> (NODE_BITS * (l - 1))) & (NODE_SLOTS - 1);
}

/* The slot that decides chunk ci: a chunk, or a marker covering ci
 * and, with *span, this many chunks from ci on (to the end of the
 * marker's subtree).  *gen is a marker's stamp.
 */
void *
blk_tree_find (const struct blk_table *t, uint64_t ci, uint64_t *gen,
               uint64_t *span)
{
  void *s = t->tree;
  uint64_t g = t->tree_wgen, covered = t->nchunks;
  unsigned l;

  for (l = t->depth; l > 0 && !IS_MARKER (s); l--) {
    const struct node *n = s;
    const unsigned i = slot_index (ci, l);
    s = n->slot[i];
    g = n->wgen[i];
    covered = slot_span (l);
  }
  if (gen)
    *gen = g;
  if (span) {
    /* From ci to the end of its subtree, and of the table. */
    const uint64_t last = l == t->depth ? t->nchunks - 1
      : ci | (covered - 1);
    *span = MIN (last, t->nchunks - 1) - ci + 1;
  }
  return s;
}

static inline struct chunk *
chunk_at (const struct blk_table *t, uint64_t ci)
{
  return blk_tree_find (t, ci, NULL, NULL);
}

/* The marker slot covering ci, to change it in place; NULL when ci
 * has a chunk.
 */
static void **
marker_slot (struct blk_table *t, uint64_t ci, uint64_t **gen,
             uint64_t *first, uint64_t *count)
{
  void **sp = &t->tree;
  uint64_t *gp = &t->tree_wgen, span = 0;

  for (unsigned l = t->depth; l > 0 && !IS_MARKER (*sp); l--) {
    struct node *n = *sp;
    const unsigned i = slot_index (ci, l);
    sp = &n->slot[i];
    gp = &n->wgen[i];
    span = slot_span (l);
  }
  if (!IS_MARKER (*sp))
    return NULL;
  *gen = gp;
  if (span == 0) {              /* the root */
    *first = 0;
    *count = t->nchunks;
  }
  else {
    *first = ci & ~(span - 1);
    *count = MIN (t->nchunks - *first, span);
  }
  return sp;
}

void
blk_tree_free (struct blk_table *t, void *s, unsigned l)
{
  if (IS_MARKER (s))
    return;
  if (l == 0) {
    struct chunk *c = s;
    free (c->digests);
    free (c);
    return;
  }
  struct node *n = s;
  for (unsigned i = 0; i < NODE_SLOTS; i++)
    blk_tree_free (t, n->slot[i], l - 1);
  free (n);
}

/* Replace a node whose slots all hold the same marker by that marker
 * (with the newest stamp).  Returns true if it did.
 */
static bool
collapse (struct blk_table *t, void **sp, uint64_t *gp, unsigned l,
          uint64_t first)
{
  struct node *n = *sp;
  const uint64_t valid_chunks = t->nchunks - first;
  const uint64_t span = slot_span (l);
  const unsigned nvalid = valid_chunks / span >= NODE_SLOTS ? NODE_SLOTS
    : (valid_chunks + span - 1) / span;
  uint64_t gen = 0;

  /* A node filled in order differs at its end until it is full: say
   * so at once, not after comparing every slot before it.
   */
  if (n->slot[nvalid - 1] != n->slot[0])
    return false;
  for (unsigned i = 0; i < nvalid; i++) {
    if (!IS_MARKER (n->slot[i]) || n->slot[i] != n->slot[0])
      return false;
    if (n->wgen[i] > gen)
      gen = n->wgen[i];
  }
  if (t->stamps_needed (t, gen))
    return false;
  *sp = n->slot[0];
  *gp = gen;
  free (n);
  t->nnodes--;
  return true;
}

/* Set the slot of chunk ci to a chunk, or to a marker with stamp gen,
 * creating nodes on the way and collapsing uniform ones after.
 * Returns -1 (ENOMEM) only when a node was needed.
 */
int
blk_tree_set (struct blk_table *t, uint64_t ci, void *value, uint64_t gen)
{
  void **path_sp[16];
  uint64_t *path_gp[16];
  void **sp = &t->tree;
  uint64_t *gp = &t->tree_wgen;
  unsigned l;

  for (l = t->depth; l > 0; l--) {
    if (IS_MARKER (*sp)) {
      struct node *n = malloc (sizeof *n);
      if (n == NULL)
        return -1;
      for (unsigned i = 0; i < NODE_SLOTS; i++) {
        n->slot[i] = *sp;
        n->wgen[i] = *gp;
      }
      *sp = n;
      t->nnodes++;
    }
    path_sp[l] = sp;
    path_gp[l] = gp;
    struct node *n = *sp;
    const unsigned i = slot_index (ci, l);
    sp = &n->slot[i];
    gp = &n->wgen[i];
  }
  *sp = value;
  *gp = IS_MARKER (value) ? gen : 0;

  for (l = 1; l <= t->depth && IS_MARKER (value); l++) {
    const uint64_t first = ci & ~(slot_span (l) * NODE_SLOTS - 1);
    if (!collapse (t, path_sp[l], path_gp[l], l, first))
      break;
    value = *path_sp[l];
  }
  return 0;
}

/* Collapse the nodes above chunk ci that have become uniform. */
static void
collapse_up (struct blk_table *t, uint64_t ci)
{
  void **path_sp[16];
  uint64_t *path_gp[16];
  void **sp = &t->tree;
  uint64_t *gp = &t->tree_wgen;
  unsigned l;

  for (l = t->depth; l > 0 && !IS_MARKER (*sp); l--) {
    struct node *n = *sp;
    const unsigned i = slot_index (ci, l);
    path_sp[l] = sp;
    path_gp[l] = gp;
    sp = &n->slot[i];
    gp = &n->wgen[i];
  }
  if (!IS_MARKER (*sp))
    return;                     /* a chunk: blk_tree_compact decides */
  for (l++; l <= t->depth; l++) {
    const uint64_t first = ci & ~(slot_span (l) * NODE_SLOTS - 1);
    if (!collapse (t, path_sp[l], path_gp[l], l, first))
      break;
  }
}

/* Blocks in chunks [first, first+count). */
uint64_t
blk_tree_chunk_blocks (const struct blk_table *t, uint64_t first,
                       uint64_t count)
{
  const uint64_t end = (first + count) * CHUNK_BLOCKS;

  return MIN (end, t->nblocks) - first * CHUNK_BLOCKS;
}

/* Out of memory splitting a marker: forget everything under it and
 * stamp it gen, coarser but safe.
 */
void
blk_tree_coarsen (struct blk_table *t, uint64_t ci, uint64_t gen)
{
  uint64_t *gp, first, count;
  void **sp = marker_slot (t, ci, &gp, &first, &count);

  if (sp == NULL)
    return;
  if (*sp == ALL_ZERO) {
    t->nknown -= blk_tree_chunk_blocks (t, first, count);
    if (first * CHUNK_BLOCKS < t->folded)
      t->fold_dirty = true;
  }
  *sp = NULL;
  if (gen > *gp)
    *gp = gen;
  t->root_valid = false;
}

uint64_t
blk_tree_block_wgen (const struct blk_table *t, uint64_t b)
{
  uint64_t gen;
  struct chunk *c = blk_tree_find (t, b / CHUNK_BLOCKS, &gen, NULL);

  return IS_MARKER (c) ? gen : c->wgen[b % CHUNK_BLOCKS];
}

/* Turn a NULL or ALL_ZERO slot into an allocated chunk. */
struct chunk *
blk_tree_materialize (struct blk_table *t, uint64_t ci)
{
  uint64_t gen;
  void *s = blk_tree_find (t, ci, &gen, NULL);
  struct chunk *c;

  if (!IS_MARKER (s))
    return s;
  c = calloc (1, sizeof *c);
  if (c == NULL)
    return NULL;
  if (s == ALL_ZERO)
    c->known = chunk_mask (t, ci);
  for (int i = 0; i < CHUNK_BLOCKS; i++)
    c->wgen[i] = gen;
  if (blk_tree_set (t, ci, c, 0) == -1) {
    free (c);
    return NULL;
  }
  t->nallocated++;
  return c;
}

/* Give back a chunk that says nothing a slot cannot say. */
void
blk_tree_compact (struct blk_table *t, uint64_t ci)
{
  struct chunk *c = chunk_at (t, ci);
  uint64_t gen = 0;

  if (IS_MARKER (c) || c->data != 0 ||
      (c->known != 0 && c->known != chunk_mask (t, ci)))
    return;
  for (int i = 0; i < CHUNK_BLOCKS; i++)
    if (c->wgen[i] > gen)
      gen = c->wgen[i];
  if (t->stamps_needed (t, gen))
    return;
  /* The path to an existing chunk exists: this cannot fail. */
  blk_tree_set (t, ci, c->known ? ALL_ZERO : NULL, gen);
  if (c->digests)
    t->ndigest_arrays--;
  free (c->digests);
  free (c);
  t->nallocated--;
}

/* Returns the digest of a known block, or NULL. */
const uint8_t *
blk_tree_get_digest (const struct blk_table *t, uint64_t b)
{
  const struct chunk *c = chunk_at (t, b / CHUNK_BLOCKS);
  const uint64_t bit = UINT64_C (1) << (b % CHUNK_BLOCKS);

  if (c == NULL)
    return NULL;
  if (c == ALL_ZERO || ((c->known & bit) && !(c->data & bit)))
    return zero_digest (t, b);
  if (c->known & bit)
    return c->digests + (b % CHUNK_BLOCKS) * t->len;
  return NULL;
}

/* Record one block; digest NULL means zero.  Returns -1 on ENOMEM
 * (the block then simply stays unknown).
 */
int
blk_tree_set_block (struct blk_table *t, uint64_t b, const uint8_t *digest)
{
  const uint64_t ci = b / CHUNK_BLOCKS, i = b % CHUNK_BLOCKS;
  const uint64_t bit = UINT64_C (1) << i;
  const uint8_t *old = blk_tree_get_digest (t, b);
  struct chunk *c;

  /* Two hashers raced on the same block: nothing changes. */
  if (old && memcmp (old, digest ? digest : zero_digest (t, b), t->len) == 0)
    return 0;
  c = blk_tree_materialize (t, ci);
  if (c == NULL)
    return -1;
  if (digest && c->digests == NULL) {
    c->digests = malloc (CHUNK_BLOCKS * t->len);
    if (c->digests == NULL) {
      blk_tree_compact (t, ci);
      return -1;
    }
    t->ndigest_arrays++;
  }
  t->nknown += !(c->known & bit);
  t->ndata -= !!(c->data & bit);
  c->known |= bit;
  if (digest) {
    c->data |= bit;
    t->ndata++;
    memcpy (c->digests + i * t->len, digest, t->len);
  }
  else
    c->data &= ~bit;
  if (b < t->folded)
    t->fold_dirty = true;       /* a new value under the fold */
  blk_tree_compact (t, ci);
  return 0;
}

/* Give back what the blocks [first, first+count) no longer need. */
void
blk_tree_tidy (struct blk_table *t, uint64_t first, uint64_t count)
{
  const uint64_t end = MIN (first + count, t->nblocks);
  uint64_t ci, span;

  if (first >= end)
    return;
  for (ci = first / CHUNK_BLOCKS; ci * CHUNK_BLOCKS < end; ci += span) {
    void *s = blk_tree_find (t, ci, NULL, &span);
    if (!IS_MARKER (s))
      blk_tree_compact (t, ci);
    /* Once per leaf node, and at the end of the range. */
    if (IS_MARKER (s) &&
        ((ci + span) % NODE_SLOTS == 0 || (ci + span) * CHUNK_BLOCKS >= end))
      collapse_up (t, ci);
  }
}
