/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: a plain digest that follows an import's
 * reads (blkhash-expect=ALG:HEX on an export a client reads whole).
 *
 * A plain digest is a chain, hashed in order, but clients read out of
 * order: nbdcopy's connections each copy 128 MiB slices of their own,
 * qemu-img keeps several requests in flight.  So each read, once its
 * data is in hand and before its reply, waits for its turn: when the
 * digest has reached its offset, it hashes its own buffer (no copy),
 * then whatever waits at the new position (copies, zeros).
 *
 * A reader waits only while someone else can move the digest on: a
 * thread hashing, a reader in flight that does not wait, or a waiting
 * one whose turn has come.  When nobody can (a client that waits for
 * each reply, all of nbdkit's threads waiting, or what the digest needs
 * next was let go), the reader keeps a copy of its data in the window
 * (WINDOW_SPAN ahead at most, WINDOW_BYTES in all, the farthest copies
 * given up for nearer ones); failing that it reads the hole at the
 * digest's position from the plugin itself if that is at most
 * FILL_MAX, and takes its turn; failing that it lets its data go.
 * Zeros a client learned from extents are hashed when the digest
 * reaches them.  The judge (blkhash_read_follow_final) hashes the
 * rest, reading from the plugin whatever no reader gave: so the digest
 * is always the content's, and all this only saves reads.
 *
 * lock guards everything but run, which only the thread that set busy
 * touches.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "filter.h"
#include "minmax.h"

#define WINDOW_SPAN (UINT64_C (256) * 1024 * 1024)
#define WINDOW_BYTES (UINT64_C (64) * 1024 * 1024)
#define FILL_MAX (UINT64_C (32) * 1024 * 1024)
/* How long a reader waits for another to arrive when nobody else can
 * move the digest on, and after how many waits in vain in a row
 * readers stop waiting so (until two are in flight at once again).
 */
#define GRACE_NS (10 * 1000 * 1000)
#define GRACE_MISSES 4

struct piece {
  uint64_t off;
  uint32_t len;
  struct piece *next;
  uint8_t data[];
};

/* A reader waiting for its turn. */
struct waiter {
  uint64_t offset;
  struct waiter *next;
};

struct blkhash_read_follow {
  uint64_t size;
  pthread_mutex_t lock;
  pthread_cond_t moved;         /* pos moved, busy or inflight changed */
  struct blkhash_plain *run;
  uint64_t pos;                 /* [0, pos) is hashed */
  bool busy;                    /* a thread hashes at pos */
  bool failed;                  /* hashing failed: the judge fails */
  bool done;
  uint8_t digest[BLK_DIGEST_MAX];
  unsigned inflight;            /* readers between enter and leaving */
  unsigned grace_misses;        /* waits for another reader in vain */
  unsigned held;                /* ... of them waiting for their turn */
  struct waiter *waiters;       /* ... and their offsets */
  struct piece *window;         /* copies ahead of pos, by offset */
  uint64_t window_bytes;
  struct blkhash_ranges zeros;  /* zeros learned from extents */
  /* For the debug line at the end: bytes hashed from readers' buffers,
   * from copies, as zeros, read by readers to fill holes, and read
   * back by the judge.
   */
  uint64_t in_turn, copied, zeroed, filled, read_back;
};

struct blkhash_read_follow *
blkhash_read_follow_new (const struct blk_digest *d, uint64_t size)
{
  struct blkhash_read_follow *f = calloc (1, sizeof *f);
  pthread_condattr_t attr;

  if (f == NULL) {
    nbdkit_error ("blkhash: out of memory");
    return NULL;
  }
  if ((f->run = blkhash_plain_new (d, size)) == NULL) {
    free (f);
    return NULL;
  }
  f->size = size;
  pthread_mutex_init (&f->lock, NULL);
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&f->moved, &attr);
  pthread_condattr_destroy (&attr);
  return f;
}

void
blkhash_read_follow_free (struct blkhash_read_follow *f)
{
  struct piece *p, *next;

  if (f == NULL)
    return;
  for (p = f->window; p; p = next) {
    next = p->next;
    free (p);
  }
  blkhash_ranges_free (&f->zeros);
  blkhash_plain_free (f->run);
  pthread_cond_destroy (&f->moved);
  pthread_mutex_destroy (&f->lock);
  free (f);
}

void
blkhash_read_follow_enter (struct blkhash_read_follow *f)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&f->lock);
  /* Readers in flight together: waiting for one is worth it. */
  if (++f->inflight > 1)
    f->grace_misses = 0;
  pthread_cond_broadcast (&f->moved);
}

/* A reader leaves; lock held. */
static void
follow_leave (struct blkhash_read_follow *f)
{
  f->inflight--;
  pthread_cond_broadcast (&f->moved);
}

void
blkhash_read_follow_leave (struct blkhash_read_follow *f)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&f->lock);
  follow_leave (f);
}

/* Can someone other than this reader (not waiting) move pos on?  lock
 * held.
 */
static bool
follow_moving (const struct blkhash_read_follow *f)
{
  if (f->busy || f->inflight - 1 > f->held)
    return true;
  for (const struct waiter *w = f->waiters; w; w = w->next)
    if (w->offset <= f->pos)
      return true;              /* its turn, it is waking */
  return false;
}

/* Keep a copy of [off, off+len) of buf past pos, giving up copies
 * farther on for it if need be.  lock held; false if it does not fit.
 */
static bool
window_put (struct blkhash_read_follow *f, const uint8_t *buf, uint64_t off,
            uint32_t len)
{
  const uint64_t end = off + len;
  const uint64_t from = MAX (off, f->pos);
  struct piece *p, **pp;

  if (end <= from)
    return true;
  if (end > f->pos + WINDOW_SPAN || end - from > WINDOW_BYTES)
    return false;
  while (f->window_bytes + (end - from) > WINDOW_BYTES) {
    /* The farthest copy goes, if it is farther than this one. */
    for (pp = &f->window; (*pp)->next; pp = &(*pp)->next)
      ;
    if ((*pp)->off <= from)
      return false;
    f->window_bytes -= (*pp)->len;
    f->copied -= (*pp)->len;
    free (*pp);
    *pp = NULL;
  }
  for (pp = &f->window; *pp && (*pp)->off < from; pp = &(*pp)->next)
    ;
  if (*pp && (*pp)->off == from && (*pp)->len >= end - from)
    return true;                /* the same piece, kept already */
  p = malloc (sizeof *p + (end - from));
  if (p == NULL)
    return false;
  p->off = from;
  p->len = end - from;
  memcpy (p->data, buf + (from - off), p->len);
  p->next = *pp;
  *pp = p;
  f->window_bytes += p->len;
  f->copied += p->len;
  return true;
}

/* Hash len bytes of buf (or zeros if buf is NULL) at pos; lock held
 * on entry and exit, not while hashing.  busy is ours.
 */
static void
follow_hash (struct blkhash_read_follow *f, const uint8_t *buf, uint64_t len)
{
  int err, r;

  pthread_mutex_unlock (&f->lock);
  r = buf ? blkhash_plain_update (f->run, buf, len, &err)
    : blkhash_plain_zeros (f->run, len, &err);
  pthread_mutex_lock (&f->lock);
  if (r == -1)
    f->failed = true;
  else {
    f->pos = blkhash_plain_pos (f->run);
    pthread_cond_broadcast (&f->moved);
  }
}

/* Hash what waits at pos: copies and zeros.  lock held, busy ours. */
static void
follow_drain (struct blkhash_read_follow *f)
{
  while (!f->failed && f->pos < f->size) {
    struct piece *p = f->window;
    uint64_t zend;

    if (p && p->off + p->len <= f->pos) {
      f->window = p->next;      /* behind: a copy of a re-read */
      f->window_bytes -= p->len;
      free (p);
      continue;
    }
    if (p && p->off <= f->pos) {
      f->window = p->next;
      f->window_bytes -= p->len;
      follow_hash (f, p->data + (f->pos - p->off), p->off + p->len - f->pos);
      free (p);
      continue;
    }
    zend = MIN (blkhash_ranges_end_at (&f->zeros, f->pos), f->size);
    if (zend <= f->pos)
      break;
    f->zeroed += zend - f->pos;
    follow_hash (f, NULL, zend - f->pos);
  }
}

/* Where the hole at pos ends: at what waits next, or at most to.  lock
 * held.
 */
static uint64_t
follow_hole_end (const struct blkhash_read_follow *f, uint64_t to)
{
  to = MIN (to, blkhash_ranges_next (&f->zeros, f->pos));
  if (f->window)
    to = MIN (to, f->window->off);
  return MIN (to, f->size);
}

/* Read [pos, to) from the plugin and hash it.  lock held, busy ours;
 * 0, or -1 with *err set.
 */
static int
follow_read (nbdkit_next *next, struct blkhash_read_follow *f, uint64_t to,
             int *err)
{
  int r;

  pthread_mutex_unlock (&f->lock);
  r = blkhash_plain_advance (next, f->run, to, err);
  pthread_mutex_lock (&f->lock);
  f->pos = blkhash_plain_pos (f->run);
  pthread_cond_broadcast (&f->moved);
  return r;
}

/* Wait as a reader whose turn has not come, until deadline (NULL:
 * until woken).  lock held; false if the deadline passed.
 */
static bool
follow_wait (struct blkhash_read_follow *f, uint64_t offset,
             const struct timespec *deadline)
{
  struct waiter w = { .offset = offset, .next = f->waiters };
  int r = 0;

  f->waiters = &w;
  f->held++;
  if (deadline)
    r = pthread_cond_timedwait (&f->moved, &f->lock, deadline);
  else
    pthread_cond_wait (&f->moved, &f->lock);
  f->held--;
  for (struct waiter **wp = &f->waiters; *wp; wp = &(*wp)->next)
    if (*wp == &w) {
      *wp = w.next;
      break;
    }
  return r != ETIMEDOUT;
}

void
blkhash_read_follow_data (nbdkit_next *next, struct blkhash_read_follow *f,
                          const void *buf, uint64_t offset, uint32_t count)
{
  const uint64_t end = offset + count;
  struct timespec deadline = { 0 };
  bool graced = false;          /* its wait for another reader is over */
  uint64_t hole;
  int err;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&f->lock);
  for (;;) {
    if (f->done || f->failed || f->pos >= end)
      goto leave;               /* nothing new in it */
    if (!f->busy && f->pos >= offset)
      break;                    /* its turn */
    if (follow_moving (f)) {
      follow_wait (f, offset, NULL);
      continue;
    }
    /* Nobody else can: another reader may be about to come (the next
     * request of a client's other connection).
     */
    if (!graced && f->grace_misses < GRACE_MISSES) {
      if (deadline.tv_sec == 0) {
        clock_gettime (CLOCK_MONOTONIC, &deadline);
        deadline.tv_nsec += GRACE_NS;
        deadline.tv_sec += deadline.tv_nsec / 1000000000;
        deadline.tv_nsec %= 1000000000;
      }
      if (!follow_wait (f, offset, &deadline)) {
        graced = true;
        if (!follow_moving (f))
          f->grace_misses++;
      }
      continue;
    }
    if (window_put (f, buf, offset, count))
      goto leave;
    /* What the digest needs next was let go: read it. */
    hole = follow_hole_end (f, offset) - f->pos;
    if (hole == 0 || hole > FILL_MAX)
      goto leave;
    f->busy = true;
    f->filled += hole;
    /* Failed, it hashed what it read: the judge reads the rest. */
    if (follow_read (next, f, f->pos + hole, &err) == 0)
      follow_drain (f);
    f->busy = false;
    if (f->pos < offset)
      goto leave;
  }
  f->busy = true;
  f->in_turn += end - f->pos;
  follow_hash (f, (const uint8_t *) buf + (f->pos - offset), end - f->pos);
  follow_drain (f);
  f->busy = false;
 leave:
  follow_leave (f);
}

void
blkhash_read_follow_zero (struct blkhash_read_follow *f, uint64_t offset,
                          uint64_t count)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&f->lock);
  if (f->done || f->failed || offset + count <= f->pos)
    return;
  /* Full: forgotten (the judge reads them). */
  blkhash_ranges_add (&f->zeros, offset, offset + count, false);
  if (!f->busy && offset <= f->pos) {
    f->busy = true;
    follow_drain (f);
    f->busy = false;
    pthread_cond_broadcast (&f->moved);
  }
}

int
blkhash_read_follow_final (nbdkit_next *next, struct blkhash_read_follow *f,
                           uint8_t *out, size_t len, int *err)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&f->lock);
  while (f->busy)
    pthread_cond_wait (&f->moved, &f->lock);
  if (!f->done) {
    int r = 0;

    f->busy = true;
    for (;;) {
      uint64_t to;

      follow_drain (f);
      if (f->failed || f->pos >= f->size)
        break;
      /* What no reader gave, up to what waits ahead. */
      to = follow_hole_end (f, f->size);
      f->read_back += to - f->pos;
      if ((r = follow_read (next, f, to, err)) == -1)
        break;
    }
    if (r == 0 && f->failed) {
      nbdkit_error ("blkhash: the digest of the import failed");
      *err = EIO;
      r = -1;
    }
    if (r == 0) {
      pthread_mutex_unlock (&f->lock);
      r = blkhash_plain_final (next, f->run, f->digest, err);
      pthread_mutex_lock (&f->lock);
    }
    f->busy = false;
    pthread_cond_broadcast (&f->moved);
    if (r == -1) {
      f->failed = true;         /* the gate starts over */
      return -1;
    }
    f->done = true;
    nbdkit_debug ("blkhash: the plain digest followed the reads: %" PRIu64
                  " bytes in turn, %" PRIu64 " from copies, %" PRIu64
                  " zeros, %" PRIu64 " read to fill holes, %" PRIu64
                  " read back at the end, of %" PRIu64,
                  f->in_turn, f->copied, f->zeroed, f->filled, f->read_back,
                  f->size);
  }
  memcpy (out, f->digest, len);
  return 0;
}
