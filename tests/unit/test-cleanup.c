/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/cleanup.h */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Count what CLEANUP_FREE frees: cleanup.h's free, and only its, is
 * this one (stdlib.h is already included, so its declaration stays).
 */
static int frees;
static void *last_freed;
static void
counting_free (void *ptr)
{
  frees++;
  last_freed = ptr;
  free (ptr);
}
#define free counting_free
#include "cleanup.h"
#undef free

#include "minmax.h"
#include "tap.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Is lock free?  (Taken and given back at once if so.) */
static int
unlocked (void)
{
  if (pthread_mutex_trylock (&lock) != 0)
    return 0;
  pthread_mutex_unlock (&lock);
  return 1;
}

/* Returns from inside the locked scope, at either of two places. */
static int
locked_return (int early)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&lock);
  if (early)
    return !unlocked ();
  return !unlocked () + 1;
}

static void *
freed_on_return (int early)
{
  CLEANUP_FREE char *p = malloc (16);
  void *addr = p;

  if (early)
    return addr;
  p[0] = 'x';
  return addr;
}

static void
test_lock (void)
{
  int held = 0;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&lock);
    held = !unlocked ();
  }
  ok (held, "the lock is held inside its scope");
  ok (unlocked (), "and released at the end of the scope");

  for (int i = 0; i < 3; i++) {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&lock);
    if (i == 1)
      continue;
    if (i == 2)
      break;
  }
  ok (unlocked (), "released by continue and break");

  ok (locked_return (1) == 1 && unlocked (), "released by an early return");
  ok (locked_return (0) == 2 && unlocked (), "released by the last return");

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&lock);
    {
      pthread_mutex_t inner = PTHREAD_MUTEX_INITIALIZER;
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&inner);
      held = pthread_mutex_trylock (&inner) == EBUSY && !unlocked ();
    }
    held = held && !unlocked ();
  }
  ok (held && unlocked (), "nested scopes hold and release their own locks");
}

static pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;

/* Neither reader nor writer holds rwlock. */
static bool
rw_free (void)
{
  if (pthread_rwlock_trywrlock (&rwlock) != 0)
    return false;
  pthread_rwlock_unlock (&rwlock);
  return true;
}

static int
rdlocked_return (int early)
{
  ACQUIRE_RDLOCK_FOR_CURRENT_SCOPE (&rwlock);
  if (early)
    return 1;
  return 2;
}

static void
test_rwlock (void)
{
  bool shared = false, exclusive = false;

  {
    ACQUIRE_RDLOCK_FOR_CURRENT_SCOPE (&rwlock);
    /* Shared: another reader gets in, a writer does not. */
    shared = pthread_rwlock_tryrdlock (&rwlock) == 0;
    if (shared)
      pthread_rwlock_unlock (&rwlock);
    shared = shared && pthread_rwlock_trywrlock (&rwlock) == EBUSY;
  }
  ok (shared && rw_free (), "a read lock is shared, and released at the "
      "end of the scope");
  {
    ACQUIRE_WRLOCK_FOR_CURRENT_SCOPE (&rwlock);
    exclusive = pthread_rwlock_tryrdlock (&rwlock) == EBUSY;
  }
  ok (exclusive && rw_free (), "a write lock is exclusive, and released "
      "at the end of the scope");
  ok (rdlocked_return (1) == 1 && rw_free () &&
      rdlocked_return (0) == 2 && rw_free (), "released by either return");
}

static void
test_free (void)
{
  void *addr;

  frees = 0;
  {
    CLEANUP_FREE char *p = malloc (32);
    addr = p;
    ok (frees == 0, "nothing freed inside the scope");
  }
  ok (frees == 1 && last_freed == addr, "freed at the end of the scope");

  frees = 0;
  addr = freed_on_return (1);
  ok (frees == 1 && last_freed == addr, "freed by an early return");
  frees = 0;
  addr = freed_on_return (0);
  ok (frees == 1 && last_freed == addr, "freed by the last return");

  frees = 0;
  {
    CLEANUP_FREE char *p = NULL;
    (void) p;
  }
  ok (frees == 1 && last_freed == NULL, "a NULL pointer is free (NULL)");

  frees = 0;
  {
    CLEANUP_FREE char *p = malloc (8);
    char *q = p;
    p = realloc (q, 64);        /* the variable's value at scope exit */
    addr = p;
  }
  ok (frees == 1 && last_freed == addr, "frees the pointer's last value");
}

static void
test_minmax (void)
{
  int i = 0, j = 10;
  uint64_t big = UINT64_MAX, small = 1;

  ok (MIN (i++, j++) == 0 && i == 1 && j == 11, "MIN evaluates once");
  ok (MAX (i++, j++) == 11 && i == 2 && j == 12, "MAX evaluates once");
  ok (MIN (-1, 1) == -1 && MAX (-1, 1) == 1, "signed");
  ok (MIN (big, small) == 1 && MAX (big, small) == UINT64_MAX, "uint64_t");
  ok (MIN (MAX (5, 1), 3) == 3 && MAX (MIN (5, 1), 3) == 3, "nested");
  ok (MIN (2, 2) == 2, "equal arguments");
}

int
main (void)
{
  test_lock ();
  test_rwlock ();
  test_free ();
  test_minmax ();
  return done_testing ();
}
