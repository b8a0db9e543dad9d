/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the gate, every rule of it but the import's:
 * the checksum an export's content must have (blkhash-expect=, parsed
 * by expectvalue.c), judged when a writer flushes it (an upload, here)
 * and when a client has read it whole (an import, expectimport.c).
 * This file owns the gates, their sessions, connections and verdicts;
 * expect.h shares them with expectimport.c, which calls in here and
 * never the other way.
 *
 * A gate per export name served with blkhash-expect.  Its session is
 * the export's, from the first request after the last session ended to
 * the last client's disconnection; each starts afresh, as the image may
 * have changed outside nbdkit in between.
 *
 * The verdict is on the content, and holds while no write (or zero, or
 * trim) begins through any export: the filter cannot tell which exports
 * share bytes, so a write through any name voids every verdict, and the
 * next flush or completing read judges again.  A verdict is computed
 * with no write in flight; one that a write raced is computed again, up
 * to JUDGE_TRIES times in all.
 *
 * Uploads.  The ranges a session wrote, zeroed or trimmed (ranges.c).
 * Every flush after a write judges, and a mismatch fails it (EIO) once
 * the image is complete: every byte written in the session (or any
 * flush, with blkhash-expect-at=flush).  Past BLKHASH_RANGES_MAX ranges
 * the closest ones merge: the image then counts as complete once the
 * merged ranges cover it and the session wrote as many bytes as it
 * has, so no write pattern escapes.  Writes racing a strict judge
 * every time fail its flush.  At the session's end an export written
 * since its last verdict is judged, a mismatch logged.
 *
 * Imports: see expectimport.c.  A session that read, never wrote and
 * was not judged is logged at its end, here.
 *
 * Digests of uploads.  A blkhash value comes from the export's table
 * of its digest and block size, which passive hashing feeds as data
 * passes (passive.c); the judge computes what the table lacks.  A
 * plain digest follows the upload (plain.c's blkhash_plain_follow:
 * writers hash the part written whole from 0).
 *
 * blkhash-file lines (results.c asks blkhash_expect_vouches): the
 * checksum while the content is known to match; else zeros, which
 * nbdsum -c reports FAILED.
 *
 * expect_gates_lock guards the list, every gate's fields and the write
 * counters; plugin I/O and hashing happen outside it.  Gates live until
 * unload.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "expect.h"
#include "util.h"

#define JUDGE_TRIES 3

pthread_mutex_t expect_gates_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t judged_cond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t writes_cond = PTHREAD_COND_INITIALIZER;
static struct blkhash_gate *gates;
/* Writes through any export that began, and that ended: the content's
 * generation is expect_writes_begun, and it is settled when they are equal.
 */
uint64_t expect_writes_begun, expect_writes_ended;

/* The gate of name, or NULL; expect_gates_lock held. */
static struct blkhash_gate *
expect_find (const char *name)
{
  struct blkhash_gate *g;

  for (g = gates; g; g = g->next)
    if (strcmp (g->name, name) == 0)
      break;
  return g;
}

/* The verdict on the content as it is now; expect_gates_lock held. */
enum verdict
expect_verdict_now (const struct blkhash_gate *g)
{
  return g->verdict_gen == expect_writes_begun ? g->verdict : VERDICT_NONE;
}

void
expect_rs_put (struct blkhash_rsent *rs)
{
  if (--rs->refs == 0) {
    blkhash_sent_free (rs->s);
    free (rs);
  }
}

/* A session starts: nothing of the last one counts.  No request of
 * the last session is in flight (it ended), none of this one yet.
 */
static void
gate_reset (struct blkhash_gate *g, uint64_t size)
{
  g->session_over = false;
  g->size = size;
  g->wrote = false;
  blkhash_ranges_clear (&g->written);
  g->written_bytes = 0;
  blkhash_plain_follow_free (g->follow);
  g->follow = NULL;
  if (blkhash_expected->plain)
    g->follow = blkhash_plain_follow_new (&blkhash_expected->digest, size);
  if (g->rs)
    expect_rs_put (g->rs);
  g->rs = NULL;
  g->verdict = VERDICT_NONE;
  g->logged = false;
}

/* The gate of name, made if need be; expect_gates_lock held.  NULL with
 * *err set if out of memory.
 */
static struct blkhash_gate *
gate_get (const char *name, int *err)
{
  struct blkhash_gate *g = expect_find (name);

  if (g == NULL) {
    g = calloc (1, sizeof *g);
    if (g == NULL || (g->name = strdup (name)) == NULL) {
      free (g);
      blkhash_error ("blkhash: export '%s': out of memory for the gate",
                     name);
      *err = ENOMEM;
      return NULL;
    }
    g->session_over = true;
    g->next = gates;
    gates = g;
  }
  return g;
}

/* A request through e: its gate, in its session.  expect_gates_lock held;
 * NULL with *err set if out of memory, or if e is not of the
 * session's size (expect_connect refuses such connections: in case).
 */
struct blkhash_gate *
expect_gate_enter (struct blkhash_export *e, int *err)
{
  struct blkhash_gate *g = gate_get (blkhash_export_name (e), err);

  if (g == NULL)
    return NULL;
  if (g->session_over)
    gate_reset (g, blkhash_export_size (e));
  else if (g->size != blkhash_export_size (e)) {
    blkhash_error ("blkhash: export '%s': a request of a connection of %"
                   PRIu64 " bytes in a session of %" PRIu64 ": it fails",
                   g->name, blkhash_export_size (e), g->size);
    *err = EIO;
    return NULL;
  }
  g->entered++;
  return g;
}

/* Is the upload complete (see the top)?  expect_gates_lock held. */
static bool
written_whole (const struct blkhash_gate *g)
{
  if (!blkhash_ranges_covers (&g->written, 0, g->size))
    return false;
  return !g->written.merged || g->written_bytes >= g->size;
}

int
blkhash_expect_write_begin (struct blkhash_export *e, int *err)
{
  struct blkhash_gate *g;

  if (blkhash_expected == NULL)
    return 0;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
  if ((g = expect_gate_enter (e, err)) == NULL)
    return -1;
  g->wrote = true;
  expect_writes_begun++;
  return 0;
}

void
blkhash_expect_write_end (struct blkhash_export *e, uint64_t offset,
                          uint64_t count, bool ok)
{
  struct blkhash_gate *own, *g;

  if (blkhash_expected == NULL)
    return;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
  own = expect_find (blkhash_export_name (e));
  expect_writes_ended++;
  pthread_cond_broadcast (&writes_cond);
  if (own && ok) {
    blkhash_ranges_add (&own->written, offset, offset + count, true);
    own->written_bytes += count;
  }
  /* Any export may share these bytes: the digests that followed other
   * uploads start over, and this one's if it was behind it.
   */
  for (g = gates; g; g = g->next)
    if (g->follow && !g->session_over)
      blkhash_plain_follow_written (g->follow, g == own ? offset : 0);
}

void
blkhash_expect_follow (nbdkit_next *next, struct blkhash_export *e)
{
  struct blkhash_plain_follow *f;
  uint64_t written_to;

  if (blkhash_expected == NULL || !blkhash_expected->plain)
    return;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
    struct blkhash_gate *g = expect_find (blkhash_export_name (e));
    /* Merged ranges say more than was written: not followed. */
    if (g == NULL || (f = g->follow) == NULL || g->written.merged ||
        g->written.n == 0 || g->written.v[0].a != 0)
      return;
    written_to = g->written.v[0].b;
  }
  blkhash_plain_follow_step (next, f, written_to);
}

/* The actual value of an upload into out: from the upload follower f
 * if given, else computed afresh (detached:
 * for the end of a session, see blkhash_plain_final_detached and
 * blkhash_compute_root_detached).  0, or -1 with *err set and
 * nbdkit_error called.
 */
static int
expect_compute (nbdkit_next *next, struct blkhash_export *e,
                struct blkhash_plain_follow *f, bool detached,
                uint8_t *out, int *err)
{
  int r = -1;

  if (f)
    return detached ? blkhash_plain_final_detached (next, NULL, f, out, err)
      : blkhash_plain_follow_final (next, f, out, err);
  if (blkhash_expected->plain) {
    struct blkhash_plain *p = blkhash_plain_new (&blkhash_expected->digest,
                                                 blkhash_export_size (e));
    if (p == NULL) {
      *err = ENOMEM;
      return -1;
    }
    r = detached ? blkhash_plain_final_detached (next, p, NULL, out, err)
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
  }
  if (r == -1)
    blkhash_error ("blkhash: export '%s': cannot compute its checksum for "
                   "blkhash-expect: %s", blkhash_export_name (e),
                   strerror (*err));
  return r;
}

/* Judge g's upload as it is: one thread computes, the others (the
 * flushes of a writer's other connections) wait for its verdict.  A
 * write in flight is waited for (wait_writes) or returns JUDGE_RACED
 * at once; one that began while the value was computed makes it
 * compute again.  Returns the verdict, JUDGE_RACED, or -1 with *err
 * set.
 */
static int
expect_judge (nbdkit_next *next, struct blkhash_export *e,
              struct blkhash_gate *g, bool detached, bool wait_writes,
              int *err)
{
  uint8_t got[BLK_DIGEST_MAX];

  for (int tries = 0; tries < JUDGE_TRIES; tries++) {
    struct blkhash_plain_follow *f;
    uint64_t gen;
    int r;

    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
      for (;;) {
        const enum verdict v = expect_verdict_now (g);
        if (v != VERDICT_NONE)
          return v;
        if (g->judging)
          pthread_cond_wait (&judged_cond, &expect_gates_lock);
        else if (expect_writes_begun != expect_writes_ended) {
          if (!wait_writes)
            return JUDGE_RACED;
          pthread_cond_wait (&writes_cond, &expect_gates_lock);
        }
        else
          break;
      }
      gen = expect_writes_begun;
      g->judging = true;
      f = g->follow;
    }
    r = expect_compute (next, e, f, detached, got, err);

    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
    g->judging = false;
    pthread_cond_broadcast (&judged_cond);
    if (r == -1)
      return -1;
    if (expect_writes_begun == gen && expect_writes_ended == gen) {
      g->verdict = memcmp (got, blkhash_expected->want,
                           blkhash_expected->len) == 0
        ? VERDICT_PASS : VERDICT_FAIL;
      g->verdict_gen = gen;
      g->logged = false;
      blk_hex (got, blkhash_expected->len, g->got);
      return g->verdict;
    }
  }
  return JUDGE_RACED;
}

/* Log g's mismatch as an error; what: upload or import. */
void
expect_log_mismatch (struct blkhash_gate *g, const char *what,
                     const char *when)
{
  char got[2 * BLK_DIGEST_MAX + 1], want[2 * BLK_DIGEST_MAX + 1];

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
    memcpy (got, g->got, sizeof got);
    g->logged = true;
  }
  blk_hex (blkhash_expected->want, blkhash_expected->len, want);
  blkhash_error ("blkhash: export '%s': %s does not match "
                 "blkhash-expect%s: expected %s:%s, got %s:%s", g->name, what,
                 when, blkhash_expected->tag, want, blkhash_expected->tag,
                 got);
}

int
blkhash_expect_flush (nbdkit_next *next, struct blkhash_export *e, int *err)
{
  struct blkhash_gate *g;
  bool strict;
  int r;

  if (blkhash_expected == NULL)
    return 0;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
    g = expect_find (blkhash_export_name (e));
    if (g == NULL || g->session_over || !g->wrote)
      return 0;                 /* nothing written in this session */
    strict = blkhash_expected->every_flush || written_whole (g);
  }
  /* Written in part (allocated zeros that a writer skipped look like
   * data here) is judged all the same, since a match is a match
   * however the image was written (qemu-img's closing flush); only a
   * mismatch of a complete image fails the flush.
   */
  r = expect_judge (next, e, g, false, true, err);
  if (r == -1)
    return -1;
  if (r == VERDICT_PASS) {
    blkhash_debug ("blkhash: export '%s': upload matches blkhash-expect",
                   g->name);
    return 0;
  }
  if (!strict) {
    blkhash_debug ("blkhash: export '%s': %s, but parts of it were not "
                   "written: not failing this flush (judged again at the "
                   "next flush after a write, and at the session's end)",
                   g->name, r == JUDGE_RACED
                   ? "writes went on while it was judged"
                   : "does not match blkhash-expect yet");
    return 0;
  }
  if (r == JUDGE_RACED) {
    blkhash_error ("blkhash: export '%s': writes through the filter went on "
                   "while the upload was judged (%d times): the flush fails "
                   "rather than pass an upload not judged", g->name,
                   JUDGE_TRIES);
    *err = EIO;
    return -1;
  }
  expect_log_mismatch (g, "upload", "");
  *err = EIO;
  return -1;
}

/* Judge e, empty: 0, or -1 (a mismatch, logged). */
static int
expect_empty (struct blkhash_export *e)
{
  const char *name = blkhash_export_name (e);
  char got[2 * BLK_DIGEST_MAX + 1], want[2 * BLK_DIGEST_MAX + 1];
  uint8_t d[BLK_DIGEST_MAX];
  struct blkhash_sent *s;
  int err = 0, r;

  /* The value of nothing, as a record of no byte computes it. */
  if ((s = blkhash_sent_new (name, 0, &err)) == NULL)
    return -1;
  r = blkhash_sent_final (s, d, &err);
  blkhash_sent_free (s);
  if (r == -1)
    return -1;
  if (memcmp (d, blkhash_expected->want, blkhash_expected->len) == 0)
    return 0;
  blk_hex (d, blkhash_expected->len, got);
  blk_hex (blkhash_expected->want, blkhash_expected->len, want);
  blkhash_error ("blkhash: export '%s': import does not match "
                 "blkhash-expect: expected %s:%s, got %s:%s (the export is "
                 "empty: the connection is refused)", name,
                 blkhash_expected->tag, want, blkhash_expected->tag, got);
  return -1;
}

int
blkhash_expect_connect (struct blkhash_export *e)
{
  const uint64_t size = blkhash_export_size (e);
  struct blkhash_gate *g;
  int err = 0;

  if (blkhash_expected == NULL)
    return 0;
  if (size == 0 && expect_empty (e) == -1)
    return -1;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
  if ((g = gate_get (blkhash_export_name (e), &err)) == NULL)
    return -1;
  /* A source that tells connections different sizes (a hostile HTTP
   * server's answers to each connection's HEAD) serves two contents.
   */
  if (g->conns && g->conn_size != size) {
    blkhash_error ("blkhash: export '%s': the source has %" PRIu64 " bytes "
                   "for this connection, %" PRIu64 " for the %u others: the "
                   "connection is refused (blkhash-expect judges one "
                   "content)", g->name, size, g->conn_size, g->conns);
    return -1;
  }
  g->conns++;
  g->conn_size = size;
  return 0;
}

void
blkhash_expect_disconnect (struct blkhash_export *e)
{
  struct blkhash_gate *g;

  if (blkhash_expected == NULL)
    return;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
  g = expect_find (blkhash_export_name (e));
  if (g && g->conns)
    g->conns--;
}

/* Bytes sent or known zero of the content as it is; expect_gates_lock held. */
static uint64_t
expect_seen_bytes (const struct blkhash_gate *g)
{
  if (g->rs == NULL || g->rs->gen != expect_writes_begun)
    return 0;
  return blkhash_sent_bytes (g->rs->s);
}

void
blkhash_expect_session_end (nbdkit_next *next, struct blkhash_export *e)
{
  struct blkhash_gate *g;
  enum verdict v;
  bool logged, wrote;
  uint64_t entered, seen;
  int err = 0, r;

  if (blkhash_expected == NULL)
    return;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
    g = expect_find (blkhash_export_name (e));
    /* Another size's export (a view's, a refused connection's) is not
     * the session's.
     */
    if (g == NULL || g->session_over || g->size != blkhash_export_size (e))
      return;
    v = expect_verdict_now (g);
    logged = g->logged;
    wrote = g->wrote;
    entered = g->entered;
    seen = expect_seen_bytes (g);
  }
  if (!wrote && v == VERDICT_NONE && seen == g->size)
    blkhash_error ("blkhash: export '%s' was read whole but not judged "
                   "against blkhash-expect: its judge failed (see above)",
                   g->name);
  else if (!wrote && v == VERDICT_NONE)
    blkhash_error ("blkhash: export '%s' was read in part (%" PRIu64 " of %"
                   PRIu64 " bytes read or known zero) and not written: not "
                   "judged against blkhash-expect (a client that reads it "
                   "whole is)", g->name, seen, g->size);
  else if (v == VERDICT_NONE && next == NULL)
    blkhash_error ("blkhash: export '%s': its last connection failed while "
                   "connecting: the upload is not judged", g->name);
  else if (v == VERDICT_NONE) {
    r = expect_judge (next, e, g, true, false, &err);
    if (r == -1)
      blkhash_error ("blkhash: export '%s': the upload is not judged",
                     g->name);
    else if (r == VERDICT_FAIL)
      expect_log_mismatch (g, "upload", " (at the session's end)");
    else if (r == VERDICT_PASS)
      blkhash_debug ("blkhash: export '%s': upload matches blkhash-expect "
                     "(at the session's end)", g->name);
    else
      blkhash_debug ("blkhash: export '%s': written while the session's "
                     "end was judged: judged with the writes", g->name);
  }
  else if (v == VERDICT_FAIL && !logged)
    expect_log_mismatch (g, wrote ? "upload" : "import",
                         " (at the session's end)");
  /* A client that came while this was judged began a session of its
   * own (nbdkit's): its requests go on counting, and its flushes, its
   * reads and its end judge it.
   */
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
  if (g->entered == entered) {
    g->session_over = true;
    /* Its record (and the file holding data read ahead) goes now. */
    if (g->rs)
      expect_rs_put (g->rs);
    g->rs = NULL;
  }
  else
    blkhash_debug ("blkhash: export '%s': used by a new session while the "
                   "last one's end was judged: judged with the new one",
                   g->name);
}

bool
blkhash_expect_passed (const char *name)
{
  struct blkhash_gate *g;

  if (blkhash_expected == NULL)
    return false;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
  g = expect_find (name);
  return g && !g->session_over && expect_verdict_now (g) == VERDICT_PASS;
}

bool
blkhash_expect_vouches (const char *name, const uint8_t *root)
{
  struct blkhash_gate *g;

  if (blkhash_expected == NULL)
    return true;
  /* The line's checksum is the value judged: no verdict needed. */
  if (blkhash_expect_passive ())
    return memcmp (root, blkhash_expected->want, blkhash_expected->len) == 0;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
  g = expect_find (name);
  return g && expect_verdict_now (g) == VERDICT_PASS;
}

void
blkhash_expect_exit (void)
{
  struct blkhash_gate *g;

  if (blkhash_expected == NULL)
    return;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
  for (g = gates; g; g = g->next) {
    const enum verdict v = expect_verdict_now (g);
    if (!g->session_over && g->wrote && v != VERDICT_PASS &&
        !(v == VERDICT_FAIL && g->logged))
      blkhash_error ("blkhash: export '%s': nbdkit is exiting while it is in "
                     "use: the upload is %s", g->name,
                     v == VERDICT_FAIL
                     ? "judged, and does not match blkhash-expect"
                     : "not judged");
  }
}

void
blkhash_expect_free_all (void)
{
  struct blkhash_gate *g, *next;

  for (g = gates; g; g = next) {
    next = g->next;
    blkhash_plain_follow_free (g->follow);
    if (g->rs)
      expect_rs_put (g->rs);
    blkhash_ranges_free (&g->written);
    free (g->name);
    free (g);
  }
  gates = NULL;
}
