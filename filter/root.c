/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: a table's root, when it needs everything.
 *
 * A root read (or the completion for blkhash-file) computes whatever
 * block is still unknown on up to blkhash_workers threads, each taking
 * the next step of image with unknown blocks (hasher.c computes them)
 * and folding what it can.  If writes keep invalidating the fold, one
 * pass with a private outer hash ends it.  Work after the client has
 * gone runs on a thread of its own, which only nbdkit's exit stops.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cleanup.h"
#include "filter.h"
#include "minmax.h"

/* The root is completed in steps of this much image. */
#define ROOT_STEP_BYTES (UINT64_C (64) * 1024 * 1024)
/* How long a completion for blkhash-file goes on before it asks
 * whether nbdkit is exiting: nbdkit --run sends its SIGTERM as soon as
 * the command ends, racing with the last client's disconnect.
 */
#define EXIT_GRACE_NS (UINT64_C (10) * 1000 * 1000 * 1000)

/* A completion has seen nbdkit exiting: the others need not ask. */
static atomic_bool exit_seen;

/* Should long work stop?  nbdkit has no call saying "nbdkit is
 * exiting" or "the client has gone", but nbdkit_nanosleep returns -1
 * at once in either case (the client only on a thread serving that
 * connection), so a sleep of zero is a cheap probe between steps.  It
 * also logs an error each time it returns -1, so only work that stops
 * then asks: a completion (quiet_until, monotonic ns, not 0) asks only
 * once its grace has passed, and not at all on a successful copy
 * under nbdkit --run.
 */
static bool
stop_now (uint64_t quiet_until, int *err)
{
  if (quiet_until) {
    if (blkhash_now_ns () < quiet_until)
      return false;
    if (atomic_load (&exit_seen))
      goto stop;
  }
  if (nbdkit_nanosleep (0, 0) == 0)
    return false;
  /* Off nbdkit's threads, the probe sees only nbdkit's exit. */
  if (quiet_until)
    atomic_store (&exit_seen, true);
 stop:
  blkhash_error ("blkhash: stopped computing digests: nbdkit is exiting or "
                 "the client has gone");
  *err = ESHUTDOWN;
  return true;
}

/* This thread's work is a completion (blkhash_exit_grace). */
static __thread uint64_t thread_quiet_until;

void
blkhash_exit_grace (void)
{
  thread_quiet_until = blkhash_now_ns () + EXIT_GRACE_NS;
}

bool
blkhash_should_stop (int *err)
{
  return stop_now (thread_quiet_until, err);
}

/* The root from one pass over all blocks with a private outer hash,
 * for when writes keep invalidating the table's fold.  Each digest was
 * right when it was computed or looked up: as for any read racing with
 * writes, the result is some interleaving of them.
 */
static int
direct_root (nbdkit_next *next, struct blk_table *t, uint64_t step,
             uint64_t quiet_until, uint8_t *root, int *err)
{
  const struct blk_params *p = blk_table_params (t);
  const uint64_t nblocks = blk_table_blocks (t);
  uint8_t *out = malloc (step * p->digest.len);
  struct blk_root r;
  int ret = -1;

  if (out == NULL || blk_root_init (&r, p) == -1) {
    free (out);
    blkhash_error ("blkhash: out of memory");
    *err = ENOMEM;
    return -1;
  }
  for (uint64_t b = 0; b < nblocks; b += step) {
    const uint64_t n = MIN (nblocks - b, step);
    if (stop_now (quiet_until, err) ||
        blkhash_compute (next, t, b, n, out, err) == -1)
      goto out;
    if (blk_root_add (&r, out, n) == -1)
      goto hash_failed;
  }
  if (blk_root_final (&r, blk_table_size (t), root) == -1)
    goto hash_failed;
  ret = 0;
  goto out;

 hash_failed:
  blkhash_error ("blkhash: %s failed", p->digest.name);
  *err = EIO;
 out:
  blk_root_free (&r);
  free (out);
  return ret;
}

/* One root computation shared by several threads: each takes the next
 * step of image with unknown blocks, computes it and folds what it
 * can.
 */
struct root_job {
  nbdkit_next *next;
  struct blk_table *t;
  uint64_t step, nblocks;
  uint64_t quiet_until;         /* a completion: see stop_now */
  pthread_mutex_t lock;         /* cursor, err */
  uint64_t cursor;
  int err;
  atomic_bool stop;
};

static void
root_job_fail (struct root_job *j, int err)
{
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&j->lock);
    if (j->err == 0)
      j->err = err;
  }
  atomic_store (&j->stop, true);
}

static void
root_job_work (struct root_job *j)
{
  const struct blk_params *p = blk_table_params (j->t);
  int err = 0;
  uint64_t b, n;

  while (!atomic_load (&j->stop)) {
    /* Known ranges are skipped here, under the lock, so the scan for
     * unknown blocks stays linear however many threads take steps.
     */
    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&j->lock);
      b = blk_table_next_unknown (j->t, j->cursor);
      n = MIN (j->nblocks - b, j->step);
      j->cursor = b + n;
    }
    if (b >= j->nblocks)
      break;
    if (stop_now (j->quiet_until, &err) ||
        blkhash_compute (j->next, j->t, b, n, NULL, &err) == -1) {
      root_job_fail (j, err);
      break;
    }
    if (blk_table_fold (j->t, false, BLKHASH_FOLD_BUDGET)
        == BLK_FOLD_FAILED) {
      blkhash_error ("blkhash: %s failed", p->digest.name);
      root_job_fail (j, EIO);
      break;
    }
  }
}

static void *
root_job_thread (void *opaque)
{
  root_job_work (opaque);
  return NULL;
}

/* Compute every unknown block on up to blkhash_workers threads, this
 * one included: on a connection's thread, it is the one that notices
 * the client going.
 */
static int
root_job_run (nbdkit_next *next, struct blk_table *t, uint64_t step,
              uint64_t quiet_until, int *err)
{
  /* The scan starts where the first unknown block is: nothing to do
   * (the usual case after a client cached everything) starts no thread.
   */
  struct root_job j = {
    .next = next, .t = t, .step = step, .nblocks = blk_table_blocks (t),
    .quiet_until = quiet_until, .cursor = blk_table_next_unknown (t, 0),
  };
  pthread_t threads[BLKHASH_MAX_WORKERS];
  unsigned nthreads = 0, want = blkhash_workers;
  const uint64_t steps = (j.nblocks - j.cursor + step - 1) / step;

  if (steps == 0)
    return 0;
  if (want > steps)
    want = steps;
  pthread_mutex_init (&j.lock, NULL);
  while (nthreads + 1 < want &&
         pthread_create (&threads[nthreads], NULL, root_job_thread, &j) == 0)
    nthreads++;
  root_job_work (&j);
  for (unsigned i = 0; i < nthreads; i++)
    pthread_join (threads[i], NULL);
  pthread_mutex_destroy (&j.lock);
  if (j.err) {
    *err = j.err;
    return -1;
  }
  return 0;
}

static int
compute_root (nbdkit_next *next, struct blk_table *t, uint64_t quiet_until,
              uint8_t *root, int *err)
{
  const struct blk_params *p = blk_table_params (t);
  const uint64_t step = blk_blocks_per (ROOT_STEP_BYTES, p->block_size);
  enum blk_fold f;
  int attempt;

  /* Usually once: compute what is missing and let the fold finish. */
  for (attempt = 0; attempt < 2; attempt++) {
    if (root_job_run (next, t, step, quiet_until, err) == -1)
      return -1;
    /* What is left of the fold, in steps that can stop. */
    while ((f = blk_table_fold (t, true, BLKHASH_FOLD_BUDGET))
           == BLK_FOLD_MORE)
      if (stop_now (quiet_until, err))
        return -1;
    if (f == BLK_FOLD_FAILED)
      goto fold_failed;
    if (blk_table_root (t, root) == 0)
      return 0;
    if (errno != EAGAIN)        /* else writes made blocks unknown again */
      goto fold_failed;
  }
  nbdkit_debug ("blkhash: writes keep changing the image, computing the "
                "root in one pass");
  return direct_root (next, t, step, quiet_until, root, err);

 fold_failed:
  blkhash_error ("blkhash: %s failed", p->digest.name);
  *err = EIO;
  return -1;
}

int
blkhash_compute_root (nbdkit_next *next, struct blk_table *t, uint8_t *root,
                      int *err)
{
  return compute_root (next, t, 0, root, err);
}

struct detached {
  nbdkit_next *next;
  struct blk_table *t;
  uint8_t *root;
  int err, r;
};

static void *
detached_run (void *opaque)
{
  struct detached *d = opaque;

  d->r = compute_root (d->next, d->t, blkhash_now_ns () + EXIT_GRACE_NS,
                       d->root, &d->err);
  return NULL;
}

/* On a thread nbdkit did not create, nbdkit_nanosleep sees only
 * nbdkit's exit: a connection that is closing must not stop its own
 * completion, and nbdkit's exit stops it only EXIT_GRACE_NS after it
 * started.
 * The caller waits, so the plugin sees one caller at a time as before.
 */
int
blkhash_compute_root_detached (nbdkit_next *next, struct blk_table *t,
                               uint8_t *root, int *err)
{
  struct detached d = { .next = next, .t = t, .root = root };
  pthread_t thread;
  int r;

  r = pthread_create (&thread, NULL, detached_run, &d);
  if (r != 0) {
    errno = r;
    blkhash_error ("blkhash: pthread_create: %m");
    *err = r;
    return -1;
  }
  pthread_join (thread, NULL);
  if (d.r == -1)
    *err = d.err;
  return d.r;
}
