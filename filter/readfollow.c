/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the plain digest of an import
 * (blkhash-expect=ALG:HEX), hashed in order from the bytes the client
 * was sent, as sent.c records them.
 *
 * A plain digest is a chain, hashed in order, but clients read out of
 * order: nbdcopy's connections each copy 128 MiB slices of their own,
 * qemu-img keeps several requests in flight.  So each read, once the
 * record has its data and before its reply, waits for its turn: when
 * the digest has reached its offset, it hashes its own buffer (no
 * copy), then whatever waits at the new position: bytes the record
 * keeps (held.c: blocks read in part, data kept ahead) and zeros the
 * client learned from extents.
 *
 * A reader waits only while someone else can move the digest on: a
 * thread hashing, a reader in flight that does not wait, or a waiting
 * one whose turn has come.  When nobody can (a client that waits for
 * each reply, all of nbdkit's threads waiting), it waits GRACE_NS for
 * another reader to come (given up after GRACE_MISSES waits in vain in
 * a row, until two are in flight at once again), then the record keeps
 * its data (its room was reserved when the read was recorded) and it
 * leaves.  Nothing is read from the plugin: the digest is of the bytes
 * sent.  The judge (follow_final) waits for the readers that still owe
 * the digest their data, then hashes everything kept.
 *
 * Every function here runs with the record's lock held; hashing drops
 * it with busy set: only the busy thread moves pos, and a granule the
 * digest has not passed is never freed.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "minmax.h"
#include "sent.h"

/* How long a reader waits for another to arrive when nobody else can
 * move the digest on, and after how many waits in vain in a row
 * readers stop waiting so.
 */
#define GRACE_NS (10 * 1000 * 1000)
#define GRACE_MISSES 4
/* Zeros hashed in one step (the lock is taken between steps). */
#define ZERO_STEP (UINT64_C (1) << 30)

/* Can someone other than this reader (not waiting) move pos on? */
static bool
follow_moving (const struct blkhash_sent *s)
{
  if (s->busy || s->inflight - 1 > s->waiting)
    return true;
  for (const struct sent_waiter *w = s->waiters; w; w = w->next)
    if (w->offset <= s->pos)
      return true;              /* its turn, it is waking */
  return false;
}

/* Hash len bytes of buf (or zeros if buf is NULL) at pos; the lock is
 * dropped meanwhile.  busy is ours.
 */
static void
follow_hash (struct blkhash_sent *s, const uint8_t *buf, uint64_t len)
{
  int err, r;

  pthread_mutex_unlock (&s->lock);
  r = buf ? blkhash_plain_update (s->run, buf, len, &err)
    : blkhash_plain_zeros (s->run, len, &err);
  pthread_mutex_lock (&s->lock);
  if (r == -1)
    s->failed = true;
  else {
    s->pos = blkhash_plain_pos (s->run);
    pthread_cond_broadcast (&s->moved);
  }
}

/* The digest moved on from from: granules it passed, and that the
 * record has whole, are not needed any more.
 */
static void
follow_passed (struct blkhash_sent *s, uint64_t from)
{
  if (s->held.count == 0)
    return;
  for (uint64_t gi = from / s->gsize; gi * s->gsize < s->pos; gi++) {
    struct held_gran *g = held_find (&s->held, gi);
    if (g && g->have == g->len &&
        ((gi + 1) * s->gsize <= s->pos || s->pos >= s->size))
      held_drop (&s->held, g);
  }
}

void
follow_drain (struct blkhash_sent *s)
{
  while (!s->failed && s->pos < s->size) {
    const uint64_t from = s->pos, gi = from / s->gsize;
    const uint64_t ga = gi * s->gsize;
    struct held_gran *g = held_find (&s->held, gi);
    const uint32_t e = g ? held_run (g, from - ga) : from - ga;

    if (e > from - ga) {
      const uint32_t n = e - (from - ga);
      if (g->data)
        follow_hash (s, g->data + (from - ga), n);
      else {
        uint8_t *tmp = malloc (n);
        if (tmp == NULL || held_get (&s->held, g, from - ga, e, tmp) == -1) {
          blkhash_error ("blkhash: export '%s': cannot verify what was "
                         "sent: %s", s->name,
                         tmp ? s->held.why : "out of memory");
          free (tmp);
          s->failed = true;
          break;
        }
        follow_hash (s, tmp, n);
        free (tmp);
      }
      s->from_held += n;
    }
    else if (g == NULL && sent_gran_zero (s, gi)) {
      /* Zeros learned from extents, up to what is kept or not known. */
      uint64_t end = MIN (ga + s->gsize, s->size);
      while (end < s->size && end - from < ZERO_STEP &&
             held_find (&s->held, end / s->gsize) == NULL &&
             sent_gran_zero (s, end / s->gsize))
        end = MIN (end + s->gsize, s->size);
      s->zeroed += end - from;
      follow_hash (s, NULL, end - from);
    }
    else
      break;
    follow_passed (s, from);
  }
}

/* Wait as a reader whose turn has not come, until deadline (NULL:
 * until woken); false if the deadline passed.
 */
static bool
follow_wait (struct blkhash_sent *s, uint64_t offset,
             const struct timespec *deadline)
{
  struct sent_waiter w = { .offset = offset, .next = s->waiters };
  int r = 0;

  s->waiters = &w;
  s->waiting++;
  if (deadline)
    r = pthread_cond_timedwait (&s->moved, &s->lock, deadline);
  else
    pthread_cond_wait (&s->moved, &s->lock);
  s->waiting--;
  for (struct sent_waiter **wp = &s->waiters; *wp; wp = &(*wp)->next)
    if (*wp == &w) {
      *wp = w.next;
      break;
    }
  return r != ETIMEDOUT;
}

/* Have the record keep what the digest still needs of [offset, end)
 * of buf: the granules this read brought whole (their room reserved;
 * *reserved counts what is left); its parts are kept already.
 */
static void
follow_keep (struct blkhash_sent *s, const uint8_t *buf, uint64_t offset,
             uint64_t end, uint64_t *reserved)
{
  for (uint64_t gi = MAX (offset, s->pos) / s->gsize;
       gi * s->gsize < end; gi++) {
    const uint64_t ga = gi * s->gsize;
    const uint64_t gend = MIN (ga + s->gsize, s->size);
    struct held_gran *g = held_find (&s->held, gi);

    if (ga < offset || gend > end)
      continue;                 /* a part: kept already */
    if (g ? g->have == g->len : sent_gran_zero (s, gi))
      continue;
    /* Whole, even what the digest has passed: a granule kept is kept
     * whole once it is known, which re-reads are checked against.
     */
    if (held_put (&s->held, gi, 0, gend - ga, buf + (ga - offset),
                  *reserved > 0, &g) == -1) {
      blkhash_error ("blkhash: export '%s': cannot verify what was sent: "
                     "%s", s->name, s->held.why);
      s->failed = true;
      return;
    }
    if (*reserved)
      (*reserved)--;
  }
}

void
follow_data (struct blkhash_sent *s, const uint8_t *buf, uint64_t offset,
             uint32_t count, uint64_t reserved)
{
  const uint64_t end = offset + count;
  struct timespec deadline = { 0 };
  bool graced = false;          /* its wait for another reader is over */
  uint64_t from;

  for (;;) {
    if (s->failed || s->pos >= end)
      goto leave;               /* nothing new in it */
    if (!s->busy && s->pos >= offset)
      break;                    /* its turn */
    if (follow_moving (s)) {
      follow_wait (s, offset, NULL);
      continue;
    }
    /* Nobody else can: another reader may be about to come (the next
     * request of a client's other connection).
     */
    if (!graced && s->grace_misses < GRACE_MISSES) {
      if (deadline.tv_sec == 0) {
        clock_gettime (CLOCK_MONOTONIC, &deadline);
        deadline.tv_nsec += GRACE_NS;
        deadline.tv_sec += deadline.tv_nsec / 1000000000;
        deadline.tv_nsec %= 1000000000;
      }
      if (!follow_wait (s, offset, &deadline)) {
        graced = true;
        if (!follow_moving (s))
          s->grace_misses++;
      }
      continue;
    }
    follow_keep (s, buf, offset, end, &reserved);
    goto leave;
  }
  s->busy = true;
  from = s->pos;
  s->in_turn += end - from;
  follow_hash (s, buf + (from - offset), end - from);
  follow_passed (s, from);
  follow_drain (s);
  s->busy = false;
 leave:
  /* Room it reserved and did not use. */
  s->held.reserved -= MIN (reserved, s->held.reserved);
  s->promised--;
  s->inflight--;
  pthread_cond_broadcast (&s->moved);
}

int
follow_final (struct blkhash_sent *s, uint8_t *out, int *err)
{
  int r;

  while (!s->done && (s->busy || s->promised))
    pthread_cond_wait (&s->moved, &s->lock);
  if (!s->done) {
    s->busy = true;
    follow_drain (s);
    if (s->failed || s->pos < s->size) {
      s->busy = false;
      pthread_cond_broadcast (&s->moved);
      if (s->failed)
        return sent_fail (s, err, "hashing the bytes sent failed");
      return sent_fail (s, err, "bytes from offset %" PRIu64 " were "
                        "never kept", s->pos);
    }
    pthread_mutex_unlock (&s->lock);
    r = blkhash_plain_final (NULL, s->run, s->digest, err);
    pthread_mutex_lock (&s->lock);
    s->busy = false;
    pthread_cond_broadcast (&s->moved);
    if (r == -1)
      return -1;
    s->done = true;
    blkhash_debug ("blkhash: export '%s': the plain digest of the import: %"
                   PRIu64 " bytes hashed in turn, %" PRIu64 " from what was "
                   "kept, %" PRIu64 " zeros, of %" PRIu64, s->name, s->in_turn,
                   s->from_held, s->zeroed, s->size);
  }
  memcpy (out, s->digest, blkhash_expected->len);
  return 0;
}
