/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the block table.
 *
 * Digests of the blocks of one image (for one digest and block size),
 * shared by every thread hashing it.  Memory follows the data: blocks
 * are grouped in chunks of 64, chunks in a sparse tree whose slots at
 * any level may say "nothing known" or "all zero" for everything below
 * them; a chunk is allocated only when it holds something else, and
 * digest storage only when it holds a data block.
 *
 * Never storing a stale digest: a hasher takes a snapshot (the write
 * clock) when it looks up the blocks it will compute, and the store is
 * refused for any block that a write ended on after the snapshot, or
 * that a write is still in flight on.  Writers register their block
 * range for the duration of the plugin write; a change the table
 * cannot place registers the whole table (blk_table_forget_begin).
 *
 * The root, H(digests || le64(size)), is folded incrementally over the
 * known prefix of blocks, so the one serial part overlaps the hashing.
 */
#ifndef BLKHASH_TABLE_H
#define BLKHASH_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blkhash.h"

struct blk_table;

/* A write registered with the table (between begin and end). */
struct blk_write {
  uint64_t first, count;        /* blocks touched, even partially */
  uint64_t start;               /* clock when it began */
  struct blk_write *next;
};

/* What a successful write put in its full blocks, for write_end to
 * store: count digests (digests NULL: all zero; zero may mark blocks
 * of zeros).
 */
struct blk_written {
  uint64_t first, count;
  const uint8_t *digests;
  const bool *zero;
};

struct blk_table_stats {
  uint64_t blocks;              /* block count */
  uint64_t known;               /* blocks with a digest (or known zero) */
  uint64_t data;                /* of those, data blocks */
  uint64_t folded;              /* blocks folded into the root */
  uint64_t memory;              /* bytes allocated by the table */
};

/* NULL with errno set on failure. */
extern struct blk_table *blk_table_new (const struct blk_params *p,
                                        uint64_t size);
extern void blk_table_free (struct blk_table *t);

extern const struct blk_params *blk_table_params (const struct blk_table *t);
extern uint64_t blk_table_size (const struct blk_table *t);
extern uint64_t blk_table_blocks (const struct blk_table *t);

/* Copy the known digests of blocks [first, first+count) to out (count
 * digests; NULL to only find what is missing) and set need[i] true for
 * each unknown block, false for each known one.  Returns the number of
 * unknown blocks; *snapshot is what blk_table_store needs.
 */
extern uint64_t blk_table_lookup (struct blk_table *t, uint64_t first,
                                  uint64_t count, uint8_t *out, bool *need,
                                  uint64_t *snapshot);

/* Store computed digests of blocks [first, first+count): digests holds
 * count digests; zero (may be NULL) marks blocks found to be all zero;
 * which (may be NULL: all) marks the blocks to store.  Blocks written
 * since the snapshot are silently not stored.
 */
extern void blk_table_store (struct blk_table *t, uint64_t first,
                             uint64_t count, const uint8_t *digests,
                             const bool *zero, const bool *which,
                             uint64_t snapshot);

/* Mark [first, first+count) as known zero (holes, write zeroes); as
 * for blk_table_store, blocks written since the snapshot are not.
 */
extern void blk_table_store_zero (struct blk_table *t, uint64_t first,
                                  uint64_t count, uint64_t snapshot);

/* Bracket a plugin write (or trim, or zero) of blocks [first,
 * first+count), cut to the table's blocks.  end forgets the blocks
 * and, given done (after a successful write), stores what was written,
 * except blocks another write touched meanwhile (their content depends
 * on the order the plugin applied them).
 */
extern void blk_table_write_begin (struct blk_table *t, struct blk_write *w,
                                   uint64_t first, uint64_t count);
extern void blk_table_write_end (struct blk_table *t, struct blk_write *w,
                                 const struct blk_written *done);

/* Forget every block, as a write over the whole image would, in time
 * proportional to what the table holds: for digests that can no longer
 * be trusted (the image may have changed where the table cannot see).
 */
extern void blk_table_reset (struct blk_table *t);

/* Bracket a change the table cannot place (a write through another
 * export that may share these bytes, anywhere): while one is in
 * flight nothing is stored, and end forgets every block as
 * blk_table_reset does, so nothing looked up before it ends is stored
 * after.  Both take time proportional to what the table holds: none
 * for an empty table.
 */
extern void blk_table_forget_begin (struct blk_table *t);
extern void blk_table_forget_end (struct blk_table *t);

/* Fold the known prefix into the root.  With wait false, returns at
 * once if another thread is folding.  budget bounds the digest bytes
 * folded by this call (0: no bound).
 */
enum blk_fold {
  BLK_FOLD_FAILED = -1,         /* OpenSSL failed, or out of memory */
  BLK_FOLD_BLOCKED,             /* an unknown block, or another thread */
  BLK_FOLD_MORE,                /* the budget stopped it */
  BLK_FOLD_DONE,                /* the root is valid */
};
extern enum blk_fold blk_table_fold (struct blk_table *t, bool wait,
                                     uint64_t budget);

/* The same for a caller that has just completed blocks before end:
 * when that is more than budget's digests past the folded prefix, it
 * waits for the fold and takes its share (wait true).  Holes cost
 * nothing to hash, so without this the work done runs ahead of the
 * one serial part, and the root read after it does all of that (an
 * empty PiB: a quarter of an hour) with nothing to show for it.
 */
extern enum blk_fold blk_table_fold_behind (struct blk_table *t,
                                            uint64_t end, uint64_t budget);

/* The root into out, folding what is known first.  0, or -1 with
 * errno: EAGAIN when some block is still unknown, another when the
 * fold failed.
 */
extern int blk_table_root (struct blk_table *t, uint8_t *out);

/* Blocks without a digest: 0 when the table knows every block. */
extern uint64_t blk_table_unknown (struct blk_table *t);

/* First unknown block at or after from, or the block count. */
extern uint64_t blk_table_next_unknown (struct blk_table *t, uint64_t from);

extern void blk_table_stats (struct blk_table *t,
                             struct blk_table_stats *st);

#endif /* BLKHASH_TABLE_H */
