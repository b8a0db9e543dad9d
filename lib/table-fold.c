/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the block table's root, H(digests || le64(size)),
 * folded incrementally over the known prefix of blocks so that the one
 * serial part overlaps the hashing.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "minmax.h"
#include "table-internal.h"

/* Digests the fold copies out of the table at a time, into a buffer
 * that lives only while it folds: a table may be one of thousands (one
 * per export name), most of them idle.
 */
#define FOLD_BUF_BYTES (64 * 1024)

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
         (d = blk_tree_get_digest (t, from + k)) == full_zero) {
    const uint64_t b = from + k, ci = b / CHUNK_BLOCKS;
    uint64_t span, mend;
    /* Whole zero subtrees at once, short of a short last block. */
    if (blk_tree_find (t, ci, NULL, &span) == ALL_ZERO) {
      mend = ci * CHUNK_BLOCKS + blk_tree_chunk_blocks (t, ci, span);
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
    *need_buf = from < t->nblocks && blk_tree_get_digest (t, from) != NULL;
    return 0;
  }
  while (k < max && from + k < t->nblocks &&
         (d = blk_tree_get_digest (t, from + k)) != NULL && d != full_zero) {
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
static enum blk_fold
fold_locked (struct blk_table *t, uint64_t budget)
{
  const uint64_t max = FOLD_BUF_BYTES / t->len;
  CLEANUP_FREE uint8_t *buf = NULL;
  uint64_t done = 0, start, k;
  bool zeros, need_buf, complete;
  enum blk_fold ret = BLK_FOLD_BLOCKED;

  for (;;) {
    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
      if (t->fold_dirty) {
        t->folded = 0;
        t->fold_dirty = false;
        t->root_valid = false;
        if (blk_root_reset (&t->fold) == -1)
          ret = BLK_FOLD_FAILED;
      }
      start = t->folded;
      k = ret != BLK_FOLD_FAILED
        ? gather (t, start, buf, max, &zeros, &need_buf) : 0;
      t->folded = start + k;
      complete = t->folded == t->nblocks && !t->root_valid;
    }
    if (ret == BLK_FOLD_FAILED)
      break;

    if (need_buf) {
      if ((buf = malloc (FOLD_BUF_BYTES)) == NULL) {
        errno = ENOMEM;
        ret = BLK_FOLD_FAILED;
        break;
      }
      continue;
    }
    if (k > 0) {
      /* The expensive part, outside the table lock. */
      if ((zeros ? fold_zeros (t, k) : blk_root_add (&t->fold, buf, k))
          == -1) {
        errno = EIO;
        ret = BLK_FOLD_FAILED;
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
      uint8_t root[BLK_DIGEST_MAX];
      if (blk_root_final (&t->fold, t->size, root) == -1) {
        errno = EIO;
        ret = BLK_FOLD_FAILED;
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
  if (ret == BLK_FOLD_BLOCKED) {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
    if (t->root_valid)
      ret = BLK_FOLD_DONE;
  }
  return ret;
}

enum blk_fold
blk_table_fold (struct blk_table *t, bool wait, uint64_t budget)
{
  enum blk_fold ret;

  /* A trylock, so not ACQUIRE_LOCK_FOR_CURRENT_SCOPE. */
  if (wait)
    pthread_mutex_lock (&t->fold_lock);
  else if (pthread_mutex_trylock (&t->fold_lock) != 0)
    return BLK_FOLD_BLOCKED;
  ret = fold_locked (t, budget);
  pthread_mutex_unlock (&t->fold_lock);
  return ret;
}

enum blk_fold
blk_table_fold_behind (struct blk_table *t, uint64_t end, uint64_t budget)
{
  uint64_t folded;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
    folded = t->folded;
  }
  return blk_table_fold (t, end > folded + budget / t->len, budget);
}

int
blk_table_root (struct blk_table *t, uint8_t *out)
{
  if (blk_table_fold (t, true, 0) == BLK_FOLD_FAILED)
    return -1;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&t->lock);
  if (!t->root_valid) {
    errno = EAGAIN;
    return -1;
  }
  memcpy (out, t->root, t->len);
  return 0;
}
