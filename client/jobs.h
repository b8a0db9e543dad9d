/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: -j, several inputs hashed at once, output as if one at a
 * time.
 *
 * The modes that hash many inputs (plain checksums, -c) hand each
 * input to jobs_hash and each piece of output that is not an input's
 * to jobs_then, in order.  Callbacks run in that order, in this
 * process, each after the messages its input printed: the same code
 * prints what it prints without -j, so the output is the same.
 *
 * With -j 1 (the default) jobs_hash hashes in this process and calls
 * back at once, and jobs_then calls at once: nbdsum as it always was.
 * With -j N each input is hashed by a child process of its own (fork,
 * no exec: it runs input_hash and hands back the result), at most N
 * at a time; see jobs.c.
 */
#ifndef NBDSUM_JOBS_H
#define NBDSUM_JOBS_H

#include <stdbool.h>

#include "options.h"
#include "result.h"

/* File descriptors a run of n jobs needs, roughly: two pipes' ends per
 * job, and this process's own.
 */
#define JOBS_FDS(n) (32 + 2 * (n))

/* What input_hash gave for an input. */
struct job_outcome {
  const char *name;             /* as given to jobs_hash */
  int r;                        /* 0, or -1 (messages printed) */
  struct result res;            /* if r == 0 */
  char *error;                  /* with keep_messages: messages, or NULL */
};

/* An input's turn: out is its outcome, or NULL when the run was
 * interrupted first (then print nothing, only free opaque).
 */
typedef void jobs_done_fn (void *opaque, const struct job_outcome *out);
/* Output's turn: print it, or with cancelled (interrupted first) only
 * free opaque.
 */
typedef void jobs_action_fn (void *opaque, bool cancelled);

/* Start a run hashing up to n inputs at once (exits if out of
 * memory).
 */
extern void jobs_begin (unsigned n);
/* The run has n inputs in all (for progress; else known at the end). */
extern void jobs_expect (unsigned n);
/* Hash name (kept valid by the caller until done is called) as spec
 * says and call done in its turn, with the messages printed for it
 * (on standard error, as they came) before; keep_messages: also keep
 * them in out->error, as messages_capture does for --json.  Waits
 * while N inputs are being hashed or waiting their turn.
 */
extern void jobs_hash (const char *name, const struct hash_spec *spec,
                       bool keep_messages, jobs_done_fn *done, void *opaque);
/* Call fn in its turn, after every input and output before it. */
extern void jobs_then (jobs_action_fn *fn, void *opaque);
/* Wait until every callback was called, end the run's progress and
 * free the run.  After a signal: every input still being hashed is
 * stopped (its job gets the signal) and waited for.
 */
extern void jobs_finish (void);

#endif /* NBDSUM_JOBS_H */
