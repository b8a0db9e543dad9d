/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: what an import was sent, checked and kept in
 * the record the gate judges it by (record.c; expectimport.c keeps one
 * per session and content), and the value of it.
 *
 * An import is judged only from the bytes the filter returned to the
 * client in that session: never from bytes read again from the plugin,
 * never from digests computed for anyone else (a view, passive
 * hashing, another session).  A source that serves other bytes on
 * another fetch (a hostile URL, a mirror replaced midway, mirrors out
 * of step behind a balancer) is judged by what this client got.  So
 * each read's data is taken before its reply:
 *
 * - Granules are the value's blocks (their digests are then the block
 *   digests, their root the value) or, for a plain digest, 256K.  A
 *   granule the client got whole, in one read or in parts kept until
 *   they make it whole (held.c), has its digest in a table of the
 *   record's own.  Zeros a client learned from extents count as zeros
 *   (what it writes); bytes it read count as read.
 * - Bytes sent twice (a re-read, before or after the verdict; zeros
 *   learned over bytes read) must be the bytes sent before: compared
 *   with the bytes kept, or with the granule's digest, and a re-read
 *   of part of a granule fetches the whole granule again to check it
 *   against its digest.  Else the read fails.
 * - The import is complete when every granule is.  A blkhash value is
 *   the table's root; a plain digest hashes the bytes in order as they
 *   come (readfollow.c).
 * - Whatever the record cannot take (past held.c's bounds, a failed
 *   check) fails the read that brought it, so its bytes never reach the
 *   client, logged "cannot verify what was sent: WHY".
 *
 * lock guards everything here but the table (its own lock); hashing a
 * read's own buffer and plugin reads happen outside it.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "minmax.h"
#include "sent.h"
#include "table.h"

/* Granules looked up in the table at a time. */
#define BATCH 256

/* Hash held granule g, now whole, and store its digest.  lock held;
 * 0, or -1 with *err set.
 */
static int
gran_complete (struct blkhash_sent *s, struct held_gran *g, int *err)
{
  struct blk_ctx *ctx = blkhash_thread_ctx ();
  uint8_t d[BLK_DIGEST_MAX];
  uint8_t *data = g->data;
  bool zero = false;
  int r;

  if (ctx == NULL)
    return sent_fail (s, err, "out of memory");
  if (data == NULL) {
    if ((data = malloc (g->len)) == NULL)
      return sent_fail (s, err, "out of memory");
    if (held_get (&s->held, g, 0, g->len, data) == -1) {
      free (data);
      return sent_fail (s, err, "%s", s->held.why);
    }
  }
  r = blk_hash_block (s->p, ctx, data, g->len, d, &zero);
  if (data != g->data)
    free (data);
  if (r == -1)
    return sent_fail (s, err, "%s failed", s->p->digest.name);
  blk_table_store (s->t, g->idx, 1, d, &zero, NULL, s->snapshot);
  return 0;
}

/* May g go (nothing needs its bytes: a blkhash value's granule once
 * whole; a plain digest's once whole and behind the digest)?
 */
static bool
gran_spent (const struct blkhash_sent *s, const struct held_gran *g)
{
  return g->have == g->len &&
    (s->run == NULL || (g->idx + 1) * (uint64_t) s->gsize <= s->pos ||
     s->pos >= s->size);
}

/* One request's span over the granules. */
struct span {
  uint64_t offset, end;         /* bytes */
  const uint8_t *buf;           /* NULL: zeros */
  uint64_t first, n;            /* granules wholly inside */
  const uint8_t *dg;            /* their digests (buf), n of them */
  const bool *zero;
  uint64_t verified[2];         /* granules checked by a fetch of their own */
  unsigned nverified;
};

/* Granule gi's part of sp: [*a, *b) in the granule; its bytes at *src
 * (NULL: zeros); whether it is whole.
 */
static bool
span_part (const struct blkhash_sent *s, const struct span *sp, uint64_t gi,
           uint32_t *a, uint32_t *b, const uint8_t **src)
{
  const uint64_t ga = gi * s->gsize;

  *a = MAX (sp->offset, ga) - ga;
  *b = MIN (sp->end, ga + sent_gran_len (s, gi)) - ga;
  *src = sp->buf ? sp->buf + (ga + *a - sp->offset) : NULL;
  return *a == 0 && *b == sent_gran_len (s, gi);
}

/* Check sp against what was sent before.  lock held.  0: it agrees;
 * 1: granule *widen is known and read in part, to be checked by a
 * fetch of its own; -1 with *err set.
 */
static int
span_check (struct blkhash_sent *s, struct span *sp, uint64_t *widen,
            int *err)
{
  const size_t L = s->p->digest.len;
  const uint64_t g0 = sp->offset / s->gsize;
  const uint64_t g1 = (sp->end - 1) / s->gsize + 1;
  uint8_t d[BATCH * BLK_DIGEST_MAX], z[BLK_DIGEST_MAX];
  bool need[BATCH];
  uint64_t snap;

  for (uint64_t b0 = g0; b0 < g1; b0 += BATCH) {
    const uint64_t nb = MIN (g1 - b0, (uint64_t) BATCH);
    blk_table_lookup (s->t, b0, nb, d, need, &snap);
    for (uint64_t gi = b0; gi < b0 + nb; gi++) {
      struct held_gran *g = held_find (&s->held, gi);
      const uint8_t *src, *want;
      uint32_t a, b, at;
      const bool whole = span_part (s, sp, gi, &a, &b, &src);
      int r;

      if (g && (r = held_compare (&s->held, g, a, b, src, &at)) != 0)
        return r == -1 ? sent_fail (s, err, "%s", s->held.why)
          : sent_fail (s, err, "the source served the byte at offset %"
                       PRIu64 " other than this session sent it before",
                       gi * s->gsize + at);
      if (g || need[gi - b0])
        continue;
      /* Known whole: the same digest, or a fetch of its own. */
      if (whole && sp->buf)
        want = sp->dg + (gi - sp->first) * L;
      else if (whole) {
        if (sent_zero_digest (s, gi, z) == -1)
          return sent_fail (s, err, "%s failed", s->p->digest.name);
        want = z;
      }
      else {
        bool done = false;
        for (unsigned i = 0; i < sp->nverified; i++)
          done |= sp->verified[i] == gi;
        if (done)
          continue;
        *widen = gi;
        return 1;
      }
      if (memcmp (want, d + (gi - b0) * L, L) != 0)
        return sent_fail (s, err, "the source served block %" PRIu64 " (%"
                          PRIu32 " bytes at offset %" PRIu64 ") other than "
                          "this session sent it before", gi,
                          sent_gran_len (s, gi), gi * s->gsize);
    }
  }
  return 0;
}

/* Check sp's part of known granule gi by fetching it whole: its
 * digest must be the one sent, and sp's part of it sp's bytes.  No
 * lock held; 0, or -1 with *err set.
 */
static int
span_widen (nbdkit_next *next, struct blkhash_sent *s, const struct span *sp,
            uint64_t gi, int *err)
{
  const uint32_t len = sent_gran_len (s, gi);
  const uint32_t piece = blkhash_read_most (next, len);
  const uint64_t ga = gi * s->gsize;
  struct blk_ctx *ctx = blkhash_thread_ctx ();
  uint8_t d[BLK_DIGEST_MAX], want[BLK_DIGEST_MAX];
  const uint8_t *src;
  uint32_t a, b;
  bool need, zero;
  uint64_t snap;
  uint8_t *tmp;
  int r = 0;

  if (ctx == NULL || (tmp = malloc (len)) == NULL)
    return sent_fail (s, err, "out of memory");
  span_part (s, sp, gi, &a, &b, &src);
  for (uint32_t o = 0; r == 0 && o < len; o += piece)
    if (next->pread (next, tmp + o, MIN (piece, len - o), ga + o, 0,
                     err) == -1)
      r = sent_fail (s, err, "reading block %" PRIu64 " again to check "
                     "the part sent again failed: %s", gi, strerror (*err));
  if (r == 0 && blk_hash_block (s->p, ctx, tmp, len, d, &zero) == -1)
    r = sent_fail (s, err, "%s failed", s->p->digest.name);
  blk_table_lookup (s->t, gi, 1, want, &need, &snap);
  if (r == 0 && memcmp (d, want, s->p->digest.len) != 0)
    r = sent_fail (s, err, "the source serves block %" PRIu64 " (%" PRIu32
                   " bytes at offset %" PRIu64 ") other than this session "
                   "sent it before", gi, len, ga);
  if (r == 0) {
    for (uint32_t o = a; o < b; o++)
      if (tmp[o] != (src ? src[o - a] : 0)) {
        r = sent_fail (s, err, "the source served the byte at offset %"
                       PRIu64 " other than this session sent it before",
                       ga + o);
        break;
      }
  }
  free (tmp);
  return r;
}

/* New granules sp needs kept now, and (a plain digest's) granules it
 * may need kept for the digest, which are reserved.  lock held.
 */
static void
span_needs (struct blkhash_sent *s, const struct span *sp, uint64_t *now,
            uint64_t *later)
{
  const uint64_t g0 = sp->offset / s->gsize;
  const uint64_t g1 = (sp->end - 1) / s->gsize + 1;

  *now = *later = 0;
  /* Only the two ends can be parts. */
  for (uint64_t gi = g0; gi < g1; gi = gi + 1 < g1 - 1 ? g1 - 1 : gi + 1) {
    const uint8_t *src;
    uint32_t a, b;
    if (!span_part (s, sp, gi, &a, &b, &src) &&
        held_find (&s->held, gi) == NULL) {
      bool need;
      uint64_t snap;
      blk_table_lookup (s->t, gi, 1, NULL, &need, &snap);
      *now += need;
    }
  }
  if (s->run && sp->buf)
    for (uint64_t i = 0; i < sp->n; i++) {
      const uint64_t gi = sp->first + i;
      if (!sp->zero[i] && (gi + 1) * (uint64_t) s->gsize > s->pos &&
          held_find (&s->held, gi) == NULL)
        (*later)++;
    }
}

/* Record sp, checked and with room.  lock held; 0, or -1 with *err
 * set (then only a failure of the file or of memory: granules recorded
 * before it stay, as sent bytes the client may never have, which later
 * reads of them are checked against).
 */
static int
span_record (struct blkhash_sent *s, const struct span *sp, int *err)
{
  const uint64_t g0 = sp->offset / s->gsize;
  const uint64_t g1 = (sp->end - 1) / s->gsize + 1;
  uint64_t zrun = 0, zlen = 0;

  for (uint64_t gi = g0; gi <= g1; gi++) {
    struct held_gran *g = gi < g1 ? held_find (&s->held, gi) : NULL;
    const uint8_t *src;
    uint32_t a = 0, b = 0;
    bool whole = false, need = false;
    uint64_t snap;
    int64_t added;

    if (gi < g1) {
      whole = span_part (s, sp, gi, &a, &b, &src);
      blk_table_lookup (s->t, gi, 1, NULL, &need, &snap);
    }
    /* Runs of zeros learned whole, unknown and not kept: at once. */
    if (gi < g1 && whole && !sp->buf && need && g == NULL) {
      if (zlen == 0)
        zrun = gi;
      zlen++;
      s->got += b;
      continue;
    }
    if (zlen) {
      blk_table_store_zero (s->t, zrun, zlen, s->snapshot);
      zlen = 0;
    }
    if (gi == g1)
      break;
    if (whole && sp->buf && g == NULL) {
      if (need) {
        blk_table_store (s->t, gi, 1, sp->dg + (gi - sp->first) *
                         s->p->digest.len, &sp->zero[gi - sp->first], NULL,
                         s->snapshot);
        s->got += b;
      }
      continue;
    }
    if (!need && g == NULL)
      continue;                 /* sent before, checked */
    /* A part, or the rest of a granule kept in part. */
    if ((added = held_put (&s->held, gi, a, b, src, false, &g)) == -1)
      return sent_fail (s, err, "%s", s->held.why);
    s->got += added;
    if (need && g->have == g->len && gran_complete (s, g, err) == -1)
      return -1;
    if (gran_spent (s, g))
      held_drop (&s->held, g);
  }
  return 0;
}

/* Check, make room for and record sp, then (a plain digest) give it
 * to the digest.  The reader leaves.  0, or -1 with *err set.
 */
static int
sent_span (nbdkit_next *next, struct blkhash_sent *s, struct span *sp,
           bool is_read, bool *complete, int *err)
{
  uint64_t widen, now, later;
  int r;

  pthread_mutex_lock (&s->lock);
  while ((r = span_check (s, sp, &widen, err)) == 1) {
    pthread_mutex_unlock (&s->lock);
    r = span_widen (next, s, sp, widen, err);
    pthread_mutex_lock (&s->lock);
    if (r == -1)
      goto out;
    sp->verified[sp->nverified++] = widen;
  }
  if (r == -1)
    goto out;
  span_needs (s, sp, &now, &later);
  if (!held_room (&s->held, now + later)) {
    r = sent_fail (s, err, "%s", s->held.why);
    goto out;
  }
  if ((r = span_record (s, sp, err)) == -1)
    goto out;
  if (s->run && is_read) {
    s->held.reserved += later;
    s->promised++;
    follow_data (s, sp->buf, sp->offset, sp->end - sp->offset, later);
    is_read = false;            /* it left */
    /* What the digest could not keep or hash (logged): its bytes do
     * not go out unverified.
     */
    if (s->failed) {
      r = sent_fail (s, err, "the digest of what was sent could not keep "
                     "or hash it");
      goto out;
    }
  }
  else if (s->run && !s->busy) {
    /* Zeros at the digest's position: hash them on. */
    s->busy = true;
    follow_drain (s);
    s->busy = false;
    pthread_cond_broadcast (&s->moved);
  }
  *complete = blk_table_unknown (s->t) == 0;
 out:
  if (is_read)
    sent_leave (s);
  pthread_mutex_unlock (&s->lock);
  if (r == 0)
    blk_table_fold (s->t, false, BLKHASH_FOLD_BUDGET);
  return r;
}

int
blkhash_sent_read (nbdkit_next *next, struct blkhash_sent *s,
                   const void *buf, uint64_t offset, uint32_t count,
                   bool *complete, int *err)
{
  const size_t L = s->p->digest.len;
  struct span sp = { .offset = offset, .end = offset + count, .buf = buf };
  uint8_t *dg = NULL;
  bool *zero = NULL;
  uint64_t last;
  int r;

  *complete = false;
  if (count == 0) {
    blkhash_sent_leave (s);
    return 0;
  }
  /* Granules sent whole, hashed from the buffer before any lock. */
  sp.first = (offset + s->gsize - 1) / s->gsize;
  last = sp.end >= s->size ? blk_block_count (s->size, s->gsize)
    : sp.end / s->gsize;
  sp.n = last > sp.first ? last - sp.first : 0;
  if (sp.n) {
    struct blk_ctx *ctx = blkhash_thread_ctx ();
    dg = malloc (sp.n * L);
    zero = calloc (sp.n, sizeof *zero);
    if (ctx == NULL || dg == NULL || zero == NULL) {
      r = sent_fail (s, err, "out of memory");
      goto out;
    }
    for (uint64_t i = 0; i < sp.n; i++) {
      const uint64_t gi = sp.first + i;
      if (blk_hash_block (s->p, ctx, sp.buf + (gi * s->gsize - offset),
                          sent_gran_len (s, gi), dg + i * L, &zero[i]) == -1) {
        r = sent_fail (s, err, "%s failed", s->p->digest.name);
        goto out;
      }
    }
  }
  sp.dg = dg;
  sp.zero = zero;
  r = sent_span (next, s, &sp, true, complete, err);
  free (dg);
  free (zero);
  return r;

 out:
  blkhash_sent_leave (s);
  free (dg);
  free (zero);
  return r;
}

int
blkhash_sent_zero (nbdkit_next *next, struct blkhash_sent *s,
                   uint64_t offset, uint64_t count, bool *complete, int *err)
{
  struct span sp = { .offset = offset, .end = MIN (offset + count, s->size) };

  *complete = false;
  if (sp.end <= sp.offset)
    return 0;
  return sent_span (next, s, &sp, false, complete, err);
}

int
blkhash_sent_final (struct blkhash_sent *s, uint8_t *out, int *err)
{
  if (s->run) {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&s->lock);
    return follow_final (s, out, err);
  }
  if (blk_table_root (s->t, out) == -1)
    return sent_fail (s, err, "%s",
                      errno == EAGAIN ? "blocks not sent are missing"
                      : "the digest of the blocks sent failed");
  return 0;
}
