/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the gate's state, shared by expect.c (which
 * owns it: the gates, their sessions, uploads and verdicts) and
 * expectimport.c (imports), which calls into expect.c through this
 * header and never the reverse.  Only those two include it; the rest
 * of the filter sees filter.h's interface.
 */
#ifndef NBDKIT_BLKHASH_EXPECT_H
#define NBDKIT_BLKHASH_EXPECT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "filter.h"

enum verdict { VERDICT_NONE, VERDICT_PASS, VERDICT_FAIL };
/* From expect_judge: writes kept racing it. */
#define JUDGE_RACED 3

/* An import's record and who holds it (the gate, readers, a judge). */
struct blkhash_rsent {
  struct blkhash_sent *s;
  uint64_t gen;                 /* the content it records */
  unsigned refs;
};

struct blkhash_gate {
  char *name;
  uint64_t size;
  bool session_over;            /* the next request starts a session */
  uint64_t entered;             /* requests through it */
  /* Uploads. */
  bool wrote;                   /* this session */
  struct blkhash_ranges written;
  uint64_t written_bytes;
  struct blkhash_plain_follow *follow;  /* plain digests; may be NULL */
  /* Imports: what was sent of content rs->gen. */
  struct blkhash_rsent *rs;
  /* The verdict on content verdict_gen. */
  enum verdict verdict;
  uint64_t verdict_gen;
  bool logged;                  /* a mismatch logged as an error */
  bool judging;                 /* a thread computes its value */
  char got[2 * BLK_DIGEST_MAX + 1];
  unsigned conns;               /* connections prepared, all of */
  uint64_t conn_size;           /* ... this size */
  struct blkhash_gate *next;
};

/* expect.c: expect_gates_lock guards every gate and the write
 * counters (the content's generation is expect_writes_begun, settled
 * when they are equal).
 */
extern pthread_mutex_t expect_gates_lock;
extern uint64_t expect_writes_begun, expect_writes_ended;
/* The verdict on the content as it is now; expect_gates_lock held. */
extern enum verdict expect_verdict_now (const struct blkhash_gate *g);
/* Drop a hold on a record; expect_gates_lock held. */
extern void expect_rs_put (struct blkhash_rsent *rs);
/* A request through e: its gate, in its session.  expect_gates_lock held;
 * NULL with *err set (out of memory, or a connection of another size).
 */
extern struct blkhash_gate *expect_gate_enter (struct blkhash_export *e,
                                              int *err);
/* Log g's mismatch as an error; what: upload or import.  Takes
 * expect_gates_lock: not held.
 */
extern void expect_log_mismatch (struct blkhash_gate *g, const char *what,
                                 const char *when);

#endif /* NBDKIT_BLKHASH_EXPECT_H */
