/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the record of an import (see sent.h), what
 * sent.c checks each read against and readfollow.c hashes a plain
 * digest from: made and freed, its readers counted in and out, what it
 * knows of a granule (its length, whether it is known zero), and how
 * it fails a request whose bytes cannot be verified.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "sent.h"
#include "table.h"

struct blkhash_sent *
blkhash_sent_new (const char *name, uint64_t size, int *err)
{
  struct blkhash_sent *s = calloc (1, sizeof *s);
  pthread_condattr_t attr;

  if (s == NULL)
    goto enomem;
  s->name = name;
  s->size = size;
  s->p = blkhash_expected->sent_params;
  s->gsize = s->p->block_size;
  if ((s->t = blk_table_new (s->p, size)) == NULL) {
    free (s);
    goto enomem;
  }
  blk_table_lookup (s->t, 0, 0, NULL, NULL, &s->snapshot);
  if (blkhash_expected->plain &&
      (s->run = blkhash_plain_new (&blkhash_expected->digest, size)) == NULL) {
    blk_table_free (s->t);
    free (s);
    *err = ENOMEM;
    return NULL;
  }
  held_init (&s->held, s->gsize, size, blkhash_expected->spill);
  pthread_mutex_init (&s->lock, NULL);
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&s->moved, &attr);
  pthread_condattr_destroy (&attr);
  return s;

 enomem:
  blkhash_error ("blkhash: export '%s': out of memory for the record of "
                 "the import", name);
  *err = ENOMEM;
  return NULL;
}

void
blkhash_sent_free (struct blkhash_sent *s)
{
  if (s == NULL)
    return;
  if (s->held.peak)
    blkhash_debug ("blkhash: export '%s': the import kept at most %" PRIu64
                   " blocks of %" PRIu32 " bytes read in part or ahead",
                   s->name, s->held.peak, s->gsize);
  held_fini (&s->held);
  blkhash_plain_free (s->run);
  blk_table_free (s->t);
  pthread_cond_destroy (&s->moved);
  pthread_mutex_destroy (&s->lock);
  free (s);
}

void
blkhash_sent_enter (struct blkhash_sent *s)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&s->lock);
  /* Readers in flight together: waiting for one is worth it. */
  if (++s->inflight > 1)
    s->grace_misses = 0;
  pthread_cond_broadcast (&s->moved);
}

void
sent_leave (struct blkhash_sent *s)
{
  s->inflight--;
  pthread_cond_broadcast (&s->moved);
}

void
blkhash_sent_leave (struct blkhash_sent *s)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&s->lock);
  sent_leave (s);
}

uint64_t
blkhash_sent_bytes (struct blkhash_sent *s)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&s->lock);
  return s->got;
}

int
sent_fail (struct blkhash_sent *s, int *err, const char *fmt, ...)
{
  char why[512];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (why, sizeof why, fmt, ap);
  va_end (ap);
  blkhash_error ("blkhash: export '%s': cannot verify what was sent: %s: "
                 "the request fails", s->name, why);
  *err = EIO;
  return -1;
}

uint32_t
sent_gran_len (const struct blkhash_sent *s, uint64_t gi)
{
  return blk_block_len (s->size, s->gsize, gi);
}

int
sent_zero_digest (struct blkhash_sent *s, uint64_t gi, uint8_t *out)
{
  struct blk_ctx *ctx;

  if (sent_gran_len (s, gi) == s->gsize) {
    memcpy (out, s->p->zero_digest, s->p->digest.len);
    return 0;
  }
  ctx = blkhash_thread_ctx ();
  return ctx ? blk_zero_block_digest (s->p, ctx, sent_gran_len (s, gi), out)
    : -1;
}

bool
sent_gran_zero (struct blkhash_sent *s, uint64_t gi)
{
  uint8_t d[BLK_DIGEST_MAX], z[BLK_DIGEST_MAX];
  bool need;
  uint64_t snap;

  blk_table_lookup (s->t, gi, 1, d, &need, &snap);
  return !need && sent_zero_digest (s, gi, z) == 0 &&
    memcmp (d, z, s->p->digest.len) == 0;
}
