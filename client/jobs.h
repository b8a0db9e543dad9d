/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: -j, several inputs hashed at once, handed back in the order
 * they were given, as if hashed one at a time.
 *
 * The modes that hash many inputs (plain checksums, -c) queue each
 * input with jobs_hash, and a mark with jobs_mark for each piece of
 * their output that is not an input's (a file's beginning, a warning),
 * and take the items back with jobs_next, oldest first, each once done
 * and after the messages its input printed: the loop that prints them
 * is the same with -j as without, and so is the output.
 *
 * With -j 1 (the default) an input is hashed in this process when it
 * is queued, and the queue is full once it holds anything: each item
 * comes back at once, nbdsum as it always was.  With -j N each input
 * is hashed by a child process of its own, at most N at a time (why
 * processes: jobs.c; the child: job.c).
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

/* What hashing an input gave. */
struct job_outcome {
  const char *name;             /* as given to jobs_hash */
  int r;                        /* 0, or -1 (messages printed) */
  struct result res;            /* if r == 0 */
  char *error;                  /* with keep_messages: messages, or NULL */
};

/* An item handed back by jobs_next. */
struct job_item {
  void *tag;                    /* the caller's, as queued */
  /* An input's outcome, or NULL for a mark, and for every item after a
   * signal (then print nothing, only free the tag).
   */
  const struct job_outcome *out;
  bool cancelled;               /* a signal came first */
};

struct jobs;

/* Start a run hashing up to n inputs at once; inputs: how many there
 * are (for progress; 0: known at the end).  Exits if out of memory.
 */
extern struct jobs *jobs_begin (unsigned n, unsigned inputs);
/* Queue name (kept valid by the caller until it is handed back),
 * hashed as spec says; keep_messages: also keep its messages in
 * out->error, as messages_capture does for --json.
 */
extern void jobs_hash (struct jobs *j, const char *name,
                       const struct hash_spec *spec, bool keep_messages,
                       void *tag);
/* Queue a mark, handed back in its turn. */
extern void jobs_mark (struct jobs *j, void *tag);
/* The oldest item, once done, in *item (its outcome good until the
 * next call): true.  false when there is none: the queue is empty, or
 * the oldest is not done yet, unless wait is true or the queue is full
 * (then it waits).  After each jobs_hash or jobs_mark, take every item
 * there is: then there is room for the next.
 */
extern bool jobs_next (struct jobs *j, bool wait, struct job_item *item);
/* After the last item: end the run's progress and free it. */
extern void jobs_end (struct jobs *j);

#endif /* NBDSUM_JOBS_H */
