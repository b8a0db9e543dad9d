/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the gate on imports (see the notes at the top
 * of expect.c for the gate, its sessions and verdicts, which it owns):
 * each read and extents request through a gated export, its record,
 * and the import's verdict.
 *
 * Imports.  What a session was sent since the last write: the bytes
 * each read returned, and zeros it learned from extents (as nbdkit
 * tells the client: the last extent whole), in a record of its own
 * (sent.c), which judges only those bytes: never a fresh read of the
 * plugin, never digests computed for anyone else.  The request that
 * completes the image judges before its reply and fails with EIO on a
 * mismatch; so does every read after that verdict, until a write.
 * Reads after a pass are checked against what was judged; what the
 * record cannot check or keep fails its request ("cannot verify what
 * was sent").  A session that read, never wrote and was not judged is
 * logged at its end (expect.c's blkhash_expect_session_end).
 *
 * The gate, its session and its lock are expect.c's (expect.h): this
 * file calls into it, never the reverse.  Locks are held as there:
 * briefly, never over plugin I/O or hashing.
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "expect.h"
#include "minmax.h"
#include "util.h"

/* A read after a failed verdict fails. */
static int
expect_refuse (struct blkhash_gate *g, int *err)
{
  blkhash_error ("blkhash: export '%s' does not match blkhash-expect: "
                 "reads fail until it is written", g->name);
  *err = EIO;
  return -1;
}

int
blkhash_expect_read_begin (struct blkhash_export *e,
                           struct blkhash_expect_io *io, bool is_read,
                           int *err)
{
  struct blkhash_gate *g;
  struct blkhash_sent *s;

  io->g = NULL;
  io->rs = NULL;
  if (blkhash_expected == NULL)
    return 0;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
  if ((g = expect_gate_enter (e, err)) == NULL)
    return -1;
  io->g = g;
  if (is_read && expect_verdict_now (g) == VERDICT_FAIL)
    return expect_refuse (g, err);
  /* Racing a write, the content is not settled: not recorded. */
  io->gen = expect_writes_begun == expect_writes_ended
    ? expect_writes_begun : UINT64_MAX;
  if (io->gen == UINT64_MAX)
    return 0;
  if (g->rs && g->rs->gen != io->gen) {
    expect_rs_put (g->rs);
    g->rs = NULL;
  }
  if (g->rs == NULL) {
    /* Without a record nothing sent could be judged: the request
     * fails.
     */
    if ((s = blkhash_sent_new (g->name, g->size, err)) == NULL)
      return -1;
    if ((g->rs = calloc (1, sizeof *g->rs)) == NULL) {
      blkhash_sent_free (s);
      blkhash_error ("blkhash: export '%s': out of memory for the gate",
                     g->name);
      *err = ENOMEM;
      return -1;
    }
    g->rs->s = s;
    g->rs->gen = io->gen;
    g->rs->refs = 1;
  }
  io->rs = g->rs;
  io->rs->refs++;
  if (is_read)
    blkhash_sent_enter (io->rs->s);
  return 0;
}

/* The verdict already given, JUDGE_RACED if a write began since rs's
 * content, or VERDICT_NONE; expect_gates_lock held.
 */
static int
expect_import_standing (const struct blkhash_gate *g,
                        const struct blkhash_rsent *rs)
{
  const enum verdict v = expect_verdict_now (g);

  if (v != VERDICT_NONE)
    return v;
  if (rs->gen != expect_writes_begun ||
      expect_writes_begun != expect_writes_ended)
    return JUDGE_RACED;
  return VERDICT_NONE;
}

/* Judge the import recorded in rs, complete: from what was sent.  The
 * verdict, JUDGE_RACED (a write began since), or -1 with *err set.
 */
static int
expect_judge_import (struct blkhash_gate *g, struct blkhash_rsent *rs,
                     int *err)
{
  uint8_t got[BLK_DIGEST_MAX];
  int v;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
    if ((v = expect_import_standing (g, rs)) != VERDICT_NONE)
      return v;
  }
  /* Computed once; the reads that find it complete wait for it. */
  if (blkhash_sent_final (rs->s, got, err) == -1)
    return -1;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
  if ((v = expect_import_standing (g, rs)) != VERDICT_NONE)
    return v;
  g->verdict = memcmp (got, blkhash_expected->want,
                       blkhash_expected->len) == 0
    ? VERDICT_PASS : VERDICT_FAIL;
  g->verdict_gen = rs->gen;
  g->logged = false;
  blk_hex (got, blkhash_expected->len, g->got);
  return g->verdict;
}

/* After a read or extents request of record rs: judge the import if it
 * is complete, and fail on a mismatch; refuse: fail on a mismatch
 * judged before.
 */
static int
expect_settle (struct blkhash_gate *g, struct blkhash_rsent *rs,
               bool complete, bool refuse, int *err)
{
  enum verdict v;
  int r;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
    v = expect_verdict_now (g);
  }
  if (v == VERDICT_NONE && complete && rs) {
    r = expect_judge_import (g, rs, err);
    if (r == -1)
      return -1;
    if (r == JUDGE_RACED) {
      blkhash_error ("blkhash: export '%s' was written while its import "
                     "was judged: the read fails rather than complete an "
                     "import not judged", g->name);
      *err = EIO;
      return -1;
    }
    if (r == VERDICT_PASS) {
      blkhash_debug ("blkhash: export '%s': import matches blkhash-expect",
                     g->name);
      return 0;
    }
    expect_log_mismatch (g, "import", "");
    *err = EIO;
    return -1;
  }
  if (refuse && v == VERDICT_FAIL)
    return expect_refuse (g, err);
  return 0;
}

/* The request is over: its hold on the record goes. */
static void
expect_io_end (struct blkhash_expect_io *io)
{
  if (io->rs) {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&expect_gates_lock);
    expect_rs_put (io->rs);
    io->rs = NULL;
  }
}

int
blkhash_expect_read_end (nbdkit_next *next, struct blkhash_export *e,
                         struct blkhash_expect_io *io, const void *buf,
                         uint32_t count, uint64_t offset, int *err)
{
  bool complete = false;
  int r = 0;

  if (io->g == NULL)
    return 0;
  if (io->rs && buf)
    r = blkhash_sent_read (next, io->rs->s, buf, offset, count, &complete,
                           err);
  else if (io->rs)
    blkhash_sent_leave (io->rs->s);
  if (buf && r == 0)
    r = expect_settle (io->g, io->rs, complete, true, err);
  expect_io_end (io);
  return r;
}

int
blkhash_expect_extents_end (nbdkit_next *next, struct blkhash_export *e,
                            struct blkhash_expect_io *io,
                            struct nbdkit_extents *exts, uint32_t count,
                            uint64_t offset, uint32_t flags, int *err)
{
  const uint64_t end = offset + count;
  bool complete = false;
  int r = 0;

  if (io->g == NULL)
    return 0;
  /* What nbdkit sends (its extents_to_block_descriptors): with
   * REQ_ONE the first extent, cut at the end; else extents until one
   * passes the end, each of at most 4G - 1, so the one after an extent
   * ending at the end too.  The client believes them even where
   * blkhash takes no hole from them (the cache filter behind it).
   */
  for (size_t i = 0; io->rs && exts && r == 0 &&
         i < nbdkit_extents_count (exts); i++) {
    const struct nbdkit_extent x = nbdkit_get_extent (exts, i);
    uint64_t a = MAX (x.offset, offset);
    uint64_t b = x.offset + MIN (x.length, (uint64_t) UINT32_MAX);
    bool c = false;

    if (flags & NBDKIT_FLAG_REQ_ONE)
      b = MIN (b, end);
    if (b > a && (x.type & NBDKIT_EXTENT_ZERO)) {
      r = blkhash_sent_zero (next, io->rs->s, a, b - a, &c, err);
      complete |= c;
    }
    if ((flags & NBDKIT_FLAG_REQ_ONE) || b > end)
      break;
  }
  if (exts && r == 0)
    r = expect_settle (io->g, io->rs, complete, false, err);
  expect_io_end (io);
  return r;
}
