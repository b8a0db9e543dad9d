/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the upload gate, every rule of it: the
 * checksum the image written through the filter must have
 * (blkhash-expect=, parsed by expectvalue.c), checked at its flush.
 *
 * A gate per export name that received a write since nbdkit started
 * (a read-only session never makes one, and is never judged).  It
 * keeps, for the current write session (from its first write to the
 * last disconnect), the ranges written, zeroed or trimmed (a sorted
 * list of disjoint ranges, merged as they come: a copy leaves few),
 * and the verdict on the content as it is since the last write.
 *
 * Judged at every flush after a write, before its reply.  Only a
 * mismatch of a complete image fails the flush (EIO): every byte
 * written, zeroed or trimmed in the session, or any image with
 * blkhash-expect-at=flush.  An image written in part may be a writer
 * midway, or one that skipped zeros the target already reads (qemu-img
 * --target-is-zero, allocated zeros that extents call data): a match
 * is a match then too, a mismatch fails nothing.  At the session's end
 * an export written since its last verdict is judged, and a mismatch
 * not yet logged is logged.  A write voids the verdict; a verdict
 * computed while a write through the export was in flight is thrown
 * away.
 *
 * blkhash-file lines of exports written through the filter (results.c
 * asks here, see blkhash_expect_vouches): the checksum while the
 * upload is known to match; else a checksum of zeros, which nbdsum -c
 * reports FAILED whether the line names the source (the upload recipe)
 * or the copy.
 *
 * A plain digest follows the upload (plain.c, blkhash_plain_follow):
 * after each write the writer whose turn it is hashes on through the
 * part of the image written whole from 0, so that the flush hashes
 * only what is left, not the whole image.
 *
 * gates_lock guards the list and every gate's fields; plugin I/O and
 * hashing happen outside it.  Gates live until unload.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "filter.h"
#include "minmax.h"
#include "util.h"

/* Ranges a gate keeps (1 MiB) before it gives up knowing coverage:
 * then only the session's end judges.
 */
#define RANGES_MAX 65536

struct range { uint64_t a, b; };
struct ranges {
  struct range *v;
  size_t n, cap;
  bool overflow;                /* too many: coverage unknown */
};

enum verdict { VERDICT_NONE, VERDICT_PASS, VERDICT_FAIL };

struct gate {
  char *name;
  uint64_t size;
  bool session_over;            /* the next write starts a session */
  struct ranges written;
  uint64_t begun, ended;        /* writes through it this session */
  enum verdict verdict;         /* since the last write */
  bool strict;                  /* ... reached on a strict flush */
  bool logged;                  /* ... a mismatch logged as an error */
  bool judging;                 /* a thread computes its value */
  char got[2 * BLK_DIGEST_MAX + 1];
  struct blkhash_plain_follow *follow;  /* plain digests; may be NULL */
  struct gate *next;
};

static pthread_mutex_t gates_lock = PTHREAD_MUTEX_INITIALIZER;
/* Signalled when a gate stops judging. */
static pthread_cond_t judged_cond = PTHREAD_COND_INITIALIZER;
static struct gate *gates;

/* Add [a, b) to r, merging; when r is full it overflows. */
static void
expect_ranges_add (struct ranges *r, uint64_t a, uint64_t b)
{
  size_t lo = 0, hi = r->n, j;

  if (a >= b || r->overflow)
    return;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (r->v[mid].b < a)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (j = lo; j < r->n && r->v[j].a <= b; j++) {
    a = MIN (a, r->v[j].a);
    b = MAX (b, r->v[j].b);
  }
  if (j == lo) {
    if (r->n == r->cap) {
      const size_t cap = r->cap ? 2 * r->cap : 16;
      struct range *v = cap <= RANGES_MAX
        ? realloc (r->v, cap * sizeof *v) : NULL;
      if (v == NULL) {
        r->overflow = true;
        return;
      }
      r->v = v;
      r->cap = cap;
    }
    memmove (&r->v[lo + 1], &r->v[lo], (r->n - lo) * sizeof *r->v);
    r->n++;
  }
  else {
    memmove (&r->v[lo + 1], &r->v[j], (r->n - j) * sizeof *r->v);
    r->n -= j - lo - 1;
  }
  r->v[lo] = (struct range) { a, b };
}

static bool
expect_covers (const struct ranges *r, uint64_t size)
{
  return !r->overflow &&
    (size == 0 || (r->n == 1 && r->v[0].a == 0 && r->v[0].b >= size));
}

static void
expect_ranges_clear (struct ranges *r)
{
  r->n = 0;
  r->overflow = false;
}

/* The gate of name, or NULL; gates_lock held. */
static struct gate *
expect_find (const char *name)
{
  struct gate *g;

  for (g = gates; g; g = g->next)
    if (strcmp (g->name, name) == 0)
      break;
  return g;
}

int
blkhash_expect_write_begin (struct blkhash_export *e, int *err)
{
  const char *name = blkhash_export_name (e);
  struct gate *g;

  if (blkhash_expected == NULL)
    return 0;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
  g = expect_find (name);
  if (g == NULL) {
    g = calloc (1, sizeof *g);
    if (g == NULL || (g->name = strdup (name)) == NULL) {
      free (g);
      nbdkit_error ("blkhash: export '%s': out of memory for the upload "
                    "gate", name);
      *err = ENOMEM;
      return -1;
    }
    g->session_over = true;
    g->next = gates;
    gates = g;
  }
  if (g->session_over) {        /* a new write session: afresh */
    g->session_over = false;
    g->size = blkhash_export_size (e);
    expect_ranges_clear (&g->written);
    g->begun = g->ended = 0;
    /* No writer is in the follower now: the session was over. */
    blkhash_plain_follow_free (g->follow);
    g->follow = NULL;
    if (blkhash_expected->plain)
      g->follow = blkhash_plain_follow_new (&blkhash_expected->digest,
                                            g->size);
  }
  g->begun++;
  g->verdict = VERDICT_NONE;
  g->logged = false;
  return 0;
}

void
blkhash_expect_write_end (struct blkhash_export *e, uint64_t offset,
                          uint64_t count, bool ok)
{
  struct gate *g;

  if (blkhash_expected == NULL)
    return;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
  g = expect_find (blkhash_export_name (e));
  if (g == NULL)
    return;                     /* write_begin failed */
  if (g->follow)
    blkhash_plain_follow_written (g->follow, offset);
  if (ok) {
    expect_ranges_add (&g->written, offset, offset + count);
  }
  g->ended++;
}

void
blkhash_expect_follow (nbdkit_next *next, struct blkhash_export *e)
{
  struct blkhash_plain_follow *f;
  uint64_t written_to;

  if (blkhash_expected == NULL || !blkhash_expected->plain)
    return;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
    struct gate *g = expect_find (blkhash_export_name (e));
    if (g == NULL || (f = g->follow) == NULL || g->written.overflow ||
        g->written.n == 0 || g->written.v[0].a != 0)
      return;
    written_to = g->written.v[0].b;
  }
  blkhash_plain_follow_step (next, f, written_to);
}

struct plain_run {
  nbdkit_next *next;
  struct blkhash_plain *p;              /* or f */
  struct blkhash_plain_follow *f;
  uint8_t *out;
  int err, r;
};

static void *
expect_plain_run (void *opaque)
{
  struct plain_run *pr = opaque;

  blkhash_exit_grace ();
  pr->r = pr->f ? blkhash_plain_follow_final (pr->next, pr->f, pr->out,
                                              &pr->err)
    : blkhash_plain_final (pr->next, pr->p, pr->out, &pr->err);
  return NULL;
}

/* The plain digest on a thread of its own while the caller waits:
 * off nbdkit's threads the client that is leaving does not stop it,
 * only nbdkit's exit.
 */
static int
expect_plain_detached (nbdkit_next *next, struct blkhash_plain *p,
                       struct blkhash_plain_follow *f, uint8_t *out,
                       int *err)
{
  struct plain_run pr = { .next = next, .p = p, .f = f, .out = out };
  pthread_t thread;
  int r;

  if ((r = pthread_create (&thread, NULL, expect_plain_run, &pr)) != 0) {
    errno = r;
    nbdkit_error ("blkhash: pthread_create: %m");
    *err = r;
    return -1;
  }
  pthread_join (thread, NULL);
  if (pr.r == -1)
    *err = pr.err;
  return pr.r;
}

/* The actual value of the image into out (detached: for the end of a
 * session, see above and blkhash_compute_root_detached).  0, or -1
 * with *err set and nbdkit_error called.
 */
static int
expect_compute (nbdkit_next *next, struct blkhash_export *e,
                struct blkhash_plain_follow *f, bool detached,
                uint8_t *out, int *err)
{
  int r = -1;

  if (f)
    return detached ? expect_plain_detached (next, NULL, f, out, err)
      : blkhash_plain_follow_final (next, f, out, err);
  if (blkhash_expected->plain) {
    struct blkhash_plain *p = blkhash_plain_new (&blkhash_expected->digest,
                                                 blkhash_export_size (e));
    if (p == NULL) {
      *err = ENOMEM;
      return -1;
    }
    r = detached ? expect_plain_detached (next, p, NULL, out, err)
      : blkhash_plain_final (next, p, out, err);
    blkhash_plain_free (p);
  }
  else {
    struct blkhash_table *bt = blkhash_table_get (e, blkhash_expected->params,
                                                  blkhash_export_since (e),
                                                  err);
    if (bt == NULL)
      return -1;
    r = (detached ? blkhash_compute_root_detached : blkhash_compute_root)
      (next, blkhash_table_blocks (bt), out, err);
    blkhash_table_put (e, bt);
    if (r == -1)
      nbdkit_error ("blkhash: export '%s': cannot compute its checksum for "
                    "blkhash-expect: %s", blkhash_export_name (e),
                    strerror (*err));
  }
  return r;
}

/* Judge g: compute, and store the verdict unless a write began or was
 * in flight meanwhile.  One thread at a time computes: the others (the
 * flushes of a writer's other connections) wait for its verdict.
 * Returns the verdict (VERDICT_NONE: raced), or -1 with *err set.
 */
static int
expect_judge (nbdkit_next *next, struct blkhash_export *e, struct gate *g,
              bool strict, bool detached, int *err)
{
  uint8_t got[BLK_DIGEST_MAX];
  struct blkhash_plain_follow *f;
  uint64_t stamp;

  int r;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
    while (g->judging)
      pthread_cond_wait (&judged_cond, &gates_lock);
    /* A match is a match, however complete the image was. */
    if (g->verdict == VERDICT_PASS ||
        (g->verdict != VERDICT_NONE && (g->strict || !strict)))
      return g->verdict;
    if (g->begun != g->ended)
      return VERDICT_NONE;
    stamp = g->begun;
    g->judging = true;
    f = g->follow;
  }
  r = expect_compute (next, e, f, detached, got, err);
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
  g->judging = false;
  pthread_cond_broadcast (&judged_cond);
  if (r == -1)
    return -1;
  if (g->begun != stamp || g->ended != stamp || g->session_over)
    return VERDICT_NONE;
  g->verdict = memcmp (got, blkhash_expected->want,
                       blkhash_expected->len) == 0
    ? VERDICT_PASS : VERDICT_FAIL;
  g->strict = strict;
  blk_hex (got, blkhash_expected->len, g->got);
  return g->verdict;
}

/* Log g's mismatch as an error, once per verdict. */
static void
expect_log_mismatch (struct gate *g, const char *when)
{
  char got[2 * BLK_DIGEST_MAX + 1], want[2 * BLK_DIGEST_MAX + 1];

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
    memcpy (got, g->got, sizeof got);
    g->logged = true;
  }
  blk_hex (blkhash_expected->want, blkhash_expected->len, want);
  nbdkit_error ("blkhash: export '%s': upload does not match "
                "blkhash-expect%s: expected %s:%s, got %s:%s", g->name, when,
                blkhash_expected->tag, want, blkhash_expected->tag, got);
}

int
blkhash_expect_flush (nbdkit_next *next, struct blkhash_export *e, int *err)
{
  struct gate *g;
  enum verdict v;
  bool strict;
  int r;

  if (blkhash_expected == NULL)
    return 0;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
    g = expect_find (blkhash_export_name (e));
    if (g == NULL || g->session_over)
      return 0;                 /* nothing written in this session */
    v = g->verdict;
    strict = g->strict;
  }
  if (v == VERDICT_NONE) {
    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
      strict = blkhash_expected->every_flush ||
        expect_covers (&g->written, g->size);
    }
    /* Written in part (allocated zeros that a writer skipped look
     * like data here) is judged all the same, since a match is a
     * match however the image was written (qemu-img's closing flush);
     * only a mismatch of a complete image fails the flush.
     */
    r = expect_judge (next, e, g, strict, false, err);
    if (r == -1)
      return -1;
    if (r == VERDICT_NONE) {
      nbdkit_debug ("blkhash: export '%s': a write was in flight: not "
                    "judged at this flush", g->name);
      return 0;
    }
    v = r;
  }
  if (v == VERDICT_PASS) {
    nbdkit_debug ("blkhash: export '%s': upload matches blkhash-expect",
                  g->name);
    return 0;
  }
  if (!strict) {
    nbdkit_debug ("blkhash: export '%s': does not match blkhash-expect yet, "
                  "but parts of it were not written: not failing this "
                  "flush (judged again at the next flush after a write, "
                  "and at the session's end)", g->name);
    return 0;
  }
  expect_log_mismatch (g, "");
  *err = EIO;
  return -1;
}

void
blkhash_expect_session_end (nbdkit_next *next, struct blkhash_export *e)
{
  struct gate *g;
  enum verdict v;
  bool logged;
  uint64_t begun;
  int err = 0, r;

  if (blkhash_expected == NULL)
    return;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
    g = expect_find (blkhash_export_name (e));
    if (g == NULL || g->session_over)
      return;
    v = g->verdict;
    logged = g->logged;
    begun = g->begun;
  }
  if (v == VERDICT_NONE && next == NULL)
    nbdkit_error ("blkhash: export '%s': its last connection failed while "
                  "connecting: the upload is not judged", g->name);
  else if (v == VERDICT_NONE) {
    r = expect_judge (next, e, g, true, true, &err);
    if (r == -1)
      nbdkit_error ("blkhash: export '%s': the upload is not judged",
                    g->name);
    else if (r == VERDICT_FAIL)
      expect_log_mismatch (g, " (at the session's end)");
    else if (r == VERDICT_PASS)
      nbdkit_debug ("blkhash: export '%s': upload matches blkhash-expect "
                    "(at the session's end)", g->name);
  }
  else if (v == VERDICT_FAIL && !logged)
    expect_log_mismatch (g, " (at the session's end)");
  /* A client that came while this was judged began a session of its
   * own (nbdkit's): if it wrote, its writes go on counting, and its
   * flushes and its end judge it.
   */
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
  if (g->begun == begun)
    g->session_over = true;
  else
    nbdkit_debug ("blkhash: export '%s': written by a new session while "
                  "the last one's end was judged: judged with the new one",
                  g->name);
}

bool
blkhash_expect_passed (const char *name)
{
  struct gate *g;

  if (blkhash_expected == NULL)
    return false;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
  g = expect_find (name);
  return g && !g->session_over && g->verdict == VERDICT_PASS;
}

bool
blkhash_expect_vouches (const char *name, const uint8_t *root)
{
  enum verdict v;

  if (blkhash_expected == NULL)
    return true;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
    struct gate *g = expect_find (name);
    if (g == NULL)
      return true;              /* never written: not judged */
    v = g->verdict;
  }
  /* The line's checksum is the value judged: no verdict needed. */
  if (blkhash_expect_passive ())
    return memcmp (root, blkhash_expected->want, blkhash_expected->len) == 0;
  return v == VERDICT_PASS;
}

void
blkhash_expect_exit (void)
{
  struct gate *g;

  if (blkhash_expected == NULL)
    return;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&gates_lock);
  for (g = gates; g; g = g->next)
    if (!g->session_over && g->verdict != VERDICT_PASS &&
        !(g->verdict == VERDICT_FAIL && g->logged))
      nbdkit_error ("blkhash: export '%s': nbdkit is exiting while it is in "
                    "use: the upload is %s", g->name,
                    g->verdict == VERDICT_FAIL
                    ? "judged, and does not match blkhash-expect"
                    : "not judged");
}

void
blkhash_expect_free_all (void)
{
  struct gate *g, *next;

  for (g = gates; g; g = next) {
    next = g->next;
    blkhash_plain_follow_free (g->follow);
    free (g->written.v);
    free (g->name);
    free (g);
  }
  gates = NULL;
}
