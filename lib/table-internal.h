/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the block table's representation, shared by its four
 * files and nothing else: table.c (the public face), table-tree.c (the
 * sparse tree), table-clock.c (the write clock) and table-fold.c (the
 * root).  The tree knows nothing of the clock but a predicate; the
 * clock and the fold use the tree.
 */
#ifndef BLKHASH_TABLE_INTERNAL_H
#define BLKHASH_TABLE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "table.h"

#define CHUNK_BLOCKS 64
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
extern struct chunk blk_all_zero_marker;
#define ALL_ZERO ((void *) &blk_all_zero_marker)
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
  uint8_t tail_zero[BLK_DIGEST_MAX];   /* zero digest of a short last block */

  pthread_mutex_t lock;                 /* everything below */
  void *tree;                           /* slot covering every chunk */
  uint64_t tree_wgen;
  uint64_t clock;                       /* write clock, starts at 1 */
  struct blk_write *writes;             /* writes in flight */
  bool merge_held;                      /* no stamps merged: a write is
                                           ending (see blk_table_write_end) */
  unsigned forgets;                     /* blk_table_forget_begin calls
                                           not yet ended: store nothing */
  /* Must stamps up to gen stay apart (a write in flight could tell
   * them apart)?  The clock's answer (blk_clock_stamps_needed), asked
   * by the tree before it merges slots under one stamp.
   */
  bool (*stamps_needed) (const struct blk_table *t, uint64_t gen);
  uint64_t nknown, ndata, nallocated, ndigest_arrays, nnodes;
  uint64_t folded;                      /* blocks claimed by the fold */
  bool fold_dirty;                      /* a folded block changed */
  bool root_valid;
  uint8_t root[BLK_DIGEST_MAX];

  pthread_mutex_t fold_lock;            /* the fold's context */
  struct blk_root fold;
};

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

/* table-tree.c, all with t->lock held. */
/* The slot deciding chunk ci; *gen its stamp, *span chunks it covers. */
extern void *blk_tree_find (const struct blk_table *t, uint64_t ci,
                            uint64_t *gen, uint64_t *span);
/* Set chunk ci's slot to a chunk, or a marker stamped gen (-1: ENOMEM). */
extern int blk_tree_set (struct blk_table *t, uint64_t ci, void *value,
                         uint64_t gen);
/* Free the subtree s at level l. */
extern void blk_tree_free (struct blk_table *t, void *s, unsigned l);
/* Blocks in chunks [first, first+count). */
extern uint64_t blk_tree_chunk_blocks (const struct blk_table *t,
                                       uint64_t first, uint64_t count);
/* Out of memory: forget the marker's subtree around ci, stamp it gen. */
extern void blk_tree_coarsen (struct blk_table *t, uint64_t ci, uint64_t gen);
/* The stamp of block b. */
extern uint64_t blk_tree_block_wgen (const struct blk_table *t, uint64_t b);
/* Chunk ci allocated (from its marker), or NULL when out of memory. */
extern struct chunk *blk_tree_materialize (struct blk_table *t, uint64_t ci);
/* Give back chunk ci if a marker can say what it says. */
extern void blk_tree_compact (struct blk_table *t, uint64_t ci);
/* The digest of a known block, or NULL. */
extern const uint8_t *blk_tree_get_digest (const struct blk_table *t,
                                           uint64_t b);
/* Record block b's digest (NULL: zero); -1 on ENOMEM. */
extern int blk_tree_set_block (struct blk_table *t, uint64_t b,
                               const uint8_t *digest);
/* Give back what blocks [first, first+count) no longer need. */
extern void blk_tree_tidy (struct blk_table *t, uint64_t first,
                           uint64_t count);

/* table-clock.c, all with t->lock held. */
/* The predicate of t->stamps_needed. */
extern bool blk_clock_stamps_needed (const struct blk_table *t, uint64_t gen);
/* Store digests computed after snapshot where no write made them stale. */
extern void blk_clock_store (struct blk_table *t, uint64_t first,
                             uint64_t count, const uint8_t *digests,
                             const bool *zero, const bool *which,
                             uint64_t snapshot);
/* The same for blocks known to be zero. */
extern void blk_clock_store_zero (struct blk_table *t, uint64_t first,
                                  uint64_t count, uint64_t snapshot);

#endif /* BLKHASH_TABLE_INTERNAL_H */
