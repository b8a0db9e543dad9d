/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the block table (see table.h for the design). */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "table.h"

#define CHUNK_BLOCKS 64
/* Digests the fold copies out of the table at a time, into a buffer
 * that lives only while it folds: a table may be one of thousands (one
 * per export name), most of them idle.
 */
#define FOLD_BUF_BYTES (64 * 1024)

struct chunk {
  uint64_t known;                /* bit i: block i has a digest */
  uint64_t data;                 /* bit i: ... and it is a data block */
  uint8_t *digests;              /* CHUNK_BLOCKS digests, or NULL */
  uint64_t wgen[CHUNK_BLOCKS];   /* clock of the last write that ended */
};

/* A slot of the tree is NULL (nothing known), ALL_ZERO (every block
 * below it is zero), or allocated: a struct chunk at level 0, a struct
 * node above.  A NULL or ALL_ZERO slot carries one write stamp for all
 * the blocks below it, so holes and unknown ranges cost nothing at any
 * size.
 */
static struct chunk all_zero_marker;
#define ALL_ZERO ((void *) &all_zero_marker)
#define IS_MARKER(s) ((s) == NULL || (s) == ALL_ZERO)

#define NODE_BITS 9
#define NODE_SLOTS (1u << NODE_BITS)

struct node {
  void *slot[NODE_SLOTS];
  uint64_t wgen[NODE_SLOTS];     /* stamps of marker slots */
};

struct blk_table {
  const struct blk_params *p;
  uint64_t size, nblocks, nchunks;
  size_t len;                           /* digest length */
  unsigned depth;                       /* levels of nodes above chunks */
  uint8_t tail_zero[EVP_MAX_MD_SIZE];   /* zero digest of a short last block */

  pthread_mutex_t lock;                 /* everything below */
  void *tree;                           /* slot covering every chunk */
  uint64_t tree_wgen;
  uint64_t clock;                       /* write clock, starts at 1 */
  struct blk_write *writes;             /* writes in flight */
  bool merge_held;                      /* no stamps merged: a write is
                                           ending (see write_end) */
  uint64_t nknown, ndata, nallocated, ndigest_arrays, nnodes;
  uint64_t folded;                      /* blocks claimed by the fold */
  bool fold_dirty;                      /* a folded block changed */
  bool root_valid;
  uint8_t root[EVP_MAX_MD_SIZE];

  pthread_mutex_t fold_lock;            /* the fold's context */
  struct blk_root fold;
};

static void free_subtree (struct blk_table *t, void *s, unsigned l);

static inline uint64_t
chunk_mask (const struct blk_table *t, uint64_t ci)
{
  uint64_t n = t->nblocks - ci * CHUNK_BLOCKS;
  return n >= CHUNK_BLOCKS ? UINT64_MAX : (UINT64_C (1) << n) - 1;
}

static inline const uint8_t *
zero_digest (const struct blk_table *t, uint64_t b)
{
  return b == t->nblocks - 1 && t->size % t->p->block_size
    ? t->tail_zero : t->p->zero_digest;
}

struct blk_table *
blk_table_new (const struct blk_params *p, uint64_t size)
{
  struct blk_table *t = calloc (1, sizeof *t);
  EVP_MD_CTX *ctx = NULL;

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
  pthread_mutex_init (&t->lock, NULL);
  pthread_mutex_init (&t->fold_lock, NULL);

  ctx = EVP_MD_CTX_new ();
  if (ctx == NULL ||
      blk_zero_block_digest (p, ctx, size % p->block_size ?
                             size % p->block_size : p->block_size,
                             t->tail_zero) == -1 ||
      blk_root_init (&t->fold, p) == -1)
    goto err;
  EVP_MD_CTX_free (ctx);
  return t;

 err:
  EVP_MD_CTX_free (ctx);
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
  free_subtree (t, t->tree, t->depth);
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

/* --- The tree, all called with t->lock held. --- */

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
static void *
slot_find (const struct blk_table *t, uint64_t ci, uint64_t *gen,
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
  return slot_find (t, ci, NULL, NULL);
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

static void
free_subtree (struct blk_table *t, void *s, unsigned l)
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
    free_subtree (t, n->slot[i], l - 1);
  free (n);
}

/* Can writes in flight tell stamps up to gen apart?  Then one stamp
 * for many blocks would make a write that began before gen think its
 * blocks were contested: keep the detail until it ends.
 */
static bool
stamps_needed (const struct blk_table *t, uint64_t gen)
{
  if (t->merge_held)
    return true;
  for (const struct blk_write *w = t->writes; w; w = w->next)
    if (w->start < gen)
      return true;
  return false;
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

  for (unsigned i = 0; i < nvalid; i++) {
    if (!IS_MARKER (n->slot[i]) || n->slot[i] != n->slot[0])
      return false;
    if (n->wgen[i] > gen)
      gen = n->wgen[i];
  }
  if (stamps_needed (t, gen))
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
static int
slot_set (struct blk_table *t, uint64_t ci, void *value, uint64_t gen)
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
    return;                     /* a chunk: compact decides */
  for (l++; l <= t->depth; l++) {
    const uint64_t first = ci & ~(slot_span (l) * NODE_SLOTS - 1);
    if (!collapse (t, path_sp[l], path_gp[l], l, first))
      break;
  }
}

/* Blocks in chunks [first, first+count). */
static uint64_t
chunk_blocks (const struct blk_table *t, uint64_t first, uint64_t count)
{
  const uint64_t end = (first + count) * CHUNK_BLOCKS;

  return MIN (end, t->nblocks) - first * CHUNK_BLOCKS;
}

/* Out of memory splitting a marker: forget everything under it and
 * stamp it gen, coarser but safe.
 */
static void
coarsen (struct blk_table *t, uint64_t ci, uint64_t gen)
{
  uint64_t *gp, first, count;
  void **sp = marker_slot (t, ci, &gp, &first, &count);

  if (sp == NULL)
    return;
  if (*sp == ALL_ZERO) {
    t->nknown -= chunk_blocks (t, first, count);
    if (first * CHUNK_BLOCKS < t->folded)
      t->fold_dirty = true;
  }
  *sp = NULL;
  if (gen > *gp)
    *gp = gen;
  t->root_valid = false;
}

static uint64_t
block_wgen (const struct blk_table *t, uint64_t b)
{
  uint64_t gen;
  struct chunk *c = slot_find (t, b / CHUNK_BLOCKS, &gen, NULL);

  return IS_MARKER (c) ? gen : c->wgen[b % CHUNK_BLOCKS];
}

/* Turn a NULL or ALL_ZERO slot into an allocated chunk. */
static struct chunk *
materialize (struct blk_table *t, uint64_t ci)
{
  uint64_t gen;
  void *s = slot_find (t, ci, &gen, NULL);
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
  if (slot_set (t, ci, c, 0) == -1) {
    free (c);
    return NULL;
  }
  t->nallocated++;
  return c;
}

/* Give back a chunk that says nothing a slot cannot say. */
static void
compact (struct blk_table *t, uint64_t ci)
{
  struct chunk *c = chunk_at (t, ci);
  uint64_t gen = 0;

  if (IS_MARKER (c) || c->data != 0 ||
      (c->known != 0 && c->known != chunk_mask (t, ci)))
    return;
  for (int i = 0; i < CHUNK_BLOCKS; i++)
    if (c->wgen[i] > gen)
      gen = c->wgen[i];
  if (stamps_needed (t, gen))
    return;
  /* The path to an existing chunk exists: this cannot fail. */
  slot_set (t, ci, c->known ? ALL_ZERO : NULL, gen);
  if (c->digests)
    t->ndigest_arrays--;
  free (c->digests);
  free (c);
  t->nallocated--;
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
  return snapshot != 0 && block_wgen (t, b) <= snapshot &&
    !(check_writes && in_flight (t, b, 1));
}

/* Returns the digest of a known block, or NULL. */
static const uint8_t *
get_digest (const struct blk_table *t, uint64_t b)
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
static int
set_block (struct blk_table *t, uint64_t b, const uint8_t *digest)
{
  const uint64_t ci = b / CHUNK_BLOCKS, i = b % CHUNK_BLOCKS;
  const uint64_t bit = UINT64_C (1) << i;
  const uint8_t *old = get_digest (t, b);
  struct chunk *c;

  /* Two hashers raced on the same block: nothing changes. */
  if (old && memcmp (old, digest ? digest : zero_digest (t, b), t->len) == 0)
    return 0;
  c = materialize (t, ci);
  if (c == NULL)
    return -1;
  if (digest && c->digests == NULL) {
    c->digests = malloc (CHUNK_BLOCKS * t->len);
    if (c->digests == NULL) {
      compact (t, ci);
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
  compact (t, ci);
  return 0;
}

/* Did another write touch block b while w was in flight?  It may be
 * in flight still, or have ended since w began.
 */
static bool
contested (const struct blk_table *t, const struct blk_write *w, uint64_t b)
{
  return in_flight (t, b, 1) || block_wgen (t, b) > w->start;
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
    struct chunk *c = slot_find (t, ci, &slot_gen, NULL);
    const uint64_t stop = MIN (end, cend);

    if (b == cstart && stop == cend && IS_MARKER (c)) {
      /* One stamp for the whole chunk. */
      uint64_t g = gen;
      if (w && (in_flight (t, cstart, CHUNK_BLOCKS) || slot_gen > w->start))
        g = gen + 1;
      if (slot_set (t, ci, NULL, g) == 0) {
        if (c == ALL_ZERO)
          t->nknown -= __builtin_popcountll (chunk_mask (t, ci));
        b = stop;
        continue;
      }
    }
    if ((c = materialize (t, ci)) != NULL) {
      for (uint64_t x = b; x < stop; x++) {
        const uint64_t bit = UINT64_C (1) << (x - cstart);
        const uint64_t g = w && contested (t, w, x) ? gen + 1 : gen;
        t->nknown -= !!(c->known & bit);
        t->ndata -= !!(c->data & bit);
        c->known &= ~bit;
        c->data &= ~bit;
        c->wgen[x - cstart] = g;
      }
      compact (t, ci);
    }
    else {
      /* Out of memory: forget the whole subtree, coarser but safe. */
      coarsen (t, ci, gen + 1);
    }
    b = stop;
  }
  t->root_valid = false;
}

/* Give back what the blocks [first, first+count) no longer need. */
static void
tidy (struct blk_table *t, uint64_t first, uint64_t count)
{
  const uint64_t end = MIN (first + count, t->nblocks);
  uint64_t ci, span;

  if (first >= end)
    return;
  for (ci = first / CHUNK_BLOCKS; ci * CHUNK_BLOCKS < end; ci += span) {
    void *s = slot_find (t, ci, NULL, &span);
    if (!IS_MARKER (s))
      compact (t, ci);
    /* Once per leaf node, and at the end of the range. */
    if (IS_MARKER (s) &&
        ((ci + span) % NODE_SLOTS == 0 || (ci + span) * CHUNK_BLOCKS >= end))
      collapse_up (t, ci);
  }
}

/* --- Public API. --- */

uint64_t
blk_table_lookup (struct blk_table *t, uint64_t first, uint64_t count,
                  uint8_t *out, bool *need, uint64_t *snapshot)
{
  uint64_t unknown = 0;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  *snapshot = t->clock;
  for (uint64_t i = 0; i < count; i++) {
    const uint8_t *d = get_digest (t, first + i);
    need[i] = d == NULL;
    if (d == NULL)
      unknown++;
    else if (out)
      memcpy (out + i * t->len, d, t->len);
  }
  return unknown;
}

static void
store_locked (struct blk_table *t, uint64_t first, uint64_t count,
              const uint8_t *digests, const bool *zero, const bool *which,
              uint64_t snapshot)
{
  const bool check = in_flight (t, first, count);

  for (uint64_t i = 0; i < count; i++) {
    const uint64_t b = first + i;
    if ((which && !which[i]) || !storable (t, b, snapshot, check))
      continue;
    set_block (t, b, zero && zero[i] ? NULL : digests + i * t->len);
  }
}

static void
store_zero_locked (struct blk_table *t, uint64_t first, uint64_t count,
                   uint64_t snapshot)
{
  const bool check = in_flight (t, first, count);
  uint64_t b = first, end = first + count;

  while (b < end) {
    const uint64_t ci = b / CHUNK_BLOCKS;
    const uint64_t cstart = ci * CHUNK_BLOCKS;
    const uint64_t cend = MIN (cstart + CHUNK_BLOCKS, t->nblocks);

    uint64_t slot_gen, span;
    void *s = slot_find (t, ci, &slot_gen, &span);

    if (s == ALL_ZERO) {
      /* Known zero up to the end of the marker's subtree. */
      const uint64_t mend = chunk_blocks (t, ci, span) + cstart;
      b = MIN (end, mend);
      continue;
    }
    /* Whole untouched chunks of a hole cost nothing. */
    if (b == cstart && end >= cend && s == NULL &&
        snapshot != 0 && slot_gen <= snapshot &&
        !(check && in_flight (t, cstart, cend - cstart)) &&
        slot_set (t, ci, ALL_ZERO, slot_gen) == 0) {
      t->nknown += cend - cstart;
      if (cstart < t->folded)
        t->fold_dirty = true;
      b = cend;
      continue;
    }
    if (storable (t, b, snapshot, check))
      set_block (t, b, NULL);
    b++;
  }
}

void
blk_table_store (struct blk_table *t, uint64_t first, uint64_t count,
                 const uint8_t *digests, const bool *zero, const bool *which,
                 uint64_t snapshot)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  store_locked (t, first, count, digests, zero, which, snapshot);
}

void
blk_table_store_zero (struct blk_table *t, uint64_t first, uint64_t count,
                      uint64_t snapshot)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  store_zero_locked (t, first, count, snapshot);
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

  /* In the same critical section, so nothing can coarsen the stamps
   * between forgetting the blocks and storing what was written; and no
   * merging of stamps until then either, or a neighbour's stamp would
   * make our own blocks look contested.
   */
  t->merge_held = true;
  forget (t, w->first, w->count, gen, w);
  if (done && done->count) {
    if (done->digests)
      store_locked (t, done->first, done->count, done->digests, done->zero,
                    NULL, gen);
    else
      store_zero_locked (t, done->first, done->count, gen);
  }
  t->merge_held = false;
  tidy (t, w->first, w->count);
}

void
blk_table_reset (struct blk_table *t)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  /* As a write over every block ending now: one stamp newer than any
   * snapshot taken so far, so nothing computed from an earlier lookup
   * is stored, and writes in flight see their blocks contested.
   */
  free_subtree (t, t->tree, t->depth);
  t->clock += 2;
  t->tree = NULL;
  t->tree_wgen = t->clock - 1;
  t->nknown = t->ndata = 0;
  t->nallocated = t->ndigest_arrays = t->nnodes = 0;
  if (t->folded > 0)
    t->fold_dirty = true;
  t->root_valid = false;
}

/* Collect up to max digests of the known prefix starting at block
 * from.  A run of full zero blocks is returned as *zeros (nothing
 * copied) so the fold can hash it from the prebuilt run; otherwise the
 * digests are copied to buf, or when buf is NULL nothing is and
 * *need_buf says a buffer would have been used.  Returns the number of
 * blocks.
 */
static uint64_t
gather (struct blk_table *t, uint64_t from, uint8_t *buf, uint64_t max,
        bool *zeros, bool *need_buf)
{
  const uint8_t *full_zero = t->p->zero_digest;
  uint64_t k = 0;
  const uint8_t *d;

  *zeros = *need_buf = false;
  while (k < max && from + k < t->nblocks &&
         (d = get_digest (t, from + k)) == full_zero) {
    const uint64_t b = from + k, ci = b / CHUNK_BLOCKS;
    uint64_t span, mend;
    /* Whole zero subtrees at once, short of a short last block. */
    if (slot_find (t, ci, NULL, &span) == ALL_ZERO) {
      mend = ci * CHUNK_BLOCKS + chunk_blocks (t, ci, span);
      if (mend == t->nblocks && zero_digest (t, mend - 1) != full_zero)
        mend--;
      k += MIN (mend - b, max - k);
    }
    else
      k++;
  }
  if (k > 0) {
    *zeros = true;
    return k;
  }
  if (buf == NULL) {
    *need_buf = from < t->nblocks && get_digest (t, from) != NULL;
    return 0;
  }
  while (k < max && from + k < t->nblocks &&
         (d = get_digest (t, from + k)) != NULL && d != full_zero) {
    memcpy (buf + k * t->len, d, t->len);
    k++;
  }
  return k;
}

/* Hash a run of k zero digests from the params' prebuilt run. */
static int
fold_zeros (struct blk_table *t, uint64_t k)
{
  while (k > 0) {
    const uint64_t n = MIN (k, (uint64_t) t->p->zero_run_count);
    if (blk_root_add (&t->fold, t->p->zero_run, n) == -1)
      return -1;
    k -= n;
  }
  return 0;
}

/* blk_table_fold with fold_lock held.  The digests are copied out
 * under the table lock and hashed outside it, through a buffer that
 * lives only while there is something to fold.
 */
static int
fold_locked (struct blk_table *t, uint64_t budget)
{
  const uint64_t max = FOLD_BUF_BYTES / t->len;
  CLEANUP_FREE uint8_t *buf = NULL;
  uint64_t done = 0, start, k;
  bool zeros, need_buf, complete;
  int ret = 0;

  for (;;) {
    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
      if (t->fold_dirty) {
        t->folded = 0;
        t->fold_dirty = false;
        t->root_valid = false;
        if (blk_root_reset (&t->fold) == -1)
          ret = -1;
      }
      start = t->folded;
      k = ret == 0 ? gather (t, start, buf, max, &zeros, &need_buf) : 0;
      t->folded = start + k;
      complete = t->folded == t->nblocks && !t->root_valid;
    }
    if (ret == -1)
      break;

    if (need_buf) {
      if ((buf = malloc (FOLD_BUF_BYTES)) == NULL) {
        errno = ENOMEM;
        ret = -1;
        break;
      }
      continue;
    }
    if (k > 0) {
      /* The expensive part, outside the table lock. */
      if ((zeros ? fold_zeros (t, k) : blk_root_add (&t->fold, buf, k))
          == -1) {
        ret = -1;
        break;
      }
      done += k * t->len;
      if (budget && done >= budget) {
        ret = BLK_FOLD_MORE;
        break;
      }
      continue;
    }
    if (complete) {
      uint8_t root[EVP_MAX_MD_SIZE];
      if (blk_root_final (&t->fold, t->size, root) == -1) {
        ret = -1;
        break;
      }
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
      if (!t->fold_dirty) {
        memcpy (t->root, root, t->len);
        t->root_valid = true;
      }
    }
    break;
  }
  if (ret == 0) {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
    if (t->root_valid)
      ret = BLK_FOLD_DONE;
  }
  return ret;
}

int
blk_table_fold (struct blk_table *t, bool wait, uint64_t budget)
{
  int ret;

  /* A trylock, so not ACQUIRE_LOCK_FOR_CURRENT_SCOPE. */
  if (wait)
    pthread_mutex_lock (&t->fold_lock);
  else if (pthread_mutex_trylock (&t->fold_lock) != 0)
    return BLK_FOLD_BLOCKED;
  ret = fold_locked (t, budget);
  pthread_mutex_unlock (&t->fold_lock);
  return ret;
}

int
blk_table_root (struct blk_table *t, uint8_t *out)
{
  int r = 0;

  if (blk_table_fold (t, true, 0) == -1)
    return -1;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  if (t->root_valid) {
    memcpy (out, t->root, t->len);
    r = 1;
  }
  return r;
}

uint64_t
blk_table_next_unknown (struct blk_table *t, uint64_t from)
{
  uint64_t b = from;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  while (b < t->nblocks) {
    const uint64_t ci = b / CHUNK_BLOCKS;
    uint64_t span;
    const struct chunk *c = slot_find (t, ci, NULL, &span);
    if (c == NULL)
      break;
    if (c == ALL_ZERO) {
      b = ci * CHUNK_BLOCKS + chunk_blocks (t, ci, span);
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
