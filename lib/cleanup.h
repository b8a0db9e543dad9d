/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: scope-bound cleanup (memory, mutexes, rwlocks), in
 * the spirit of nbdkit's common/include/cleanup.h (which nbdkit does
 * not install, hence this copy of the idea).
 */
#ifndef BLKHASH_CLEANUP_H
#define BLKHASH_CLEANUP_H

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

/* Freed when the variable goes out of scope. */
static inline void
blk_cleanup_free (void *ptr)
{
  free (*(void **) ptr);
}
#define CLEANUP_FREE __attribute__ ((cleanup (blk_cleanup_free)))

/* Holds the mutex until the end of the enclosing scope. */
static inline void
blk_cleanup_unlock (pthread_mutex_t **ptr)
{
  int r = pthread_mutex_unlock (*ptr);
  assert (r == 0);
  (void) r;
}
#define BLK_UNIQUE_NAME(base) BLK_UNIQUE_NAME2 (base, __LINE__)
#define BLK_UNIQUE_NAME2(base, n) BLK_UNIQUE_NAME3 (base, n)
#define BLK_UNIQUE_NAME3(base, n) base##n
#define ACQUIRE_LOCK_FOR_CURRENT_SCOPE(mutex)                           \
  __attribute__ ((cleanup (blk_cleanup_unlock)))                        \
  pthread_mutex_t *BLK_UNIQUE_NAME (_lock) = (mutex);                   \
  do {                                                                  \
    int _r = pthread_mutex_lock (BLK_UNIQUE_NAME (_lock));              \
    assert (_r == 0);                                                   \
    (void) _r;                                                          \
  } while (0)

/* Holds the rwlock, shared or exclusive, until the end of the
 * enclosing scope.
 */
static inline void
blk_cleanup_rwunlock (pthread_rwlock_t **ptr)
{
  int r = pthread_rwlock_unlock (*ptr);
  assert (r == 0);
  (void) r;
}
#define BLK_ACQUIRE_RWLOCK(rwlock, how)                                 \
  __attribute__ ((cleanup (blk_cleanup_rwunlock)))                      \
  pthread_rwlock_t *BLK_UNIQUE_NAME (_rwlock) = (rwlock);               \
  do {                                                                  \
    int _r = pthread_rwlock_##how (BLK_UNIQUE_NAME (_rwlock));          \
    assert (_r == 0);                                                   \
    (void) _r;                                                          \
  } while (0)
#define ACQUIRE_RDLOCK_FOR_CURRENT_SCOPE(rwlock) \
  BLK_ACQUIRE_RWLOCK (rwlock, rdlock)
#define ACQUIRE_WRLOCK_FOR_CURRENT_SCOPE(rwlock) \
  BLK_ACQUIRE_RWLOCK (rwlock, wrlock)

#endif /* BLKHASH_CLEANUP_H */
