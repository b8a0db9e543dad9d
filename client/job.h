/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: one -j job, an input hashed by a child process of its own
 * (job.c), for the pool (jobs.c) alone.
 */
#ifndef NBDSUM_JOB_H
#define NBDSUM_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jobs.h"
#include "options.h"

struct job_buffer {
  char *data;
  size_t len, alloc;
};

struct job {
  const char *name;
  struct hash_spec spec;
  bool keep_messages;
  bool reads_stdin;             /* keeps standard input */
  pid_t pid;                    /* the child until reaped, else 0 */
  int records_fd, err_fd;       /* read ends, -1 once closed */
  struct job_buffer records;    /* not yet taken in */
  struct job_buffer held;       /* messages waiting for the turn */
  bool finished;                /* out is final */
  struct job_outcome out;
  uint64_t done_bytes, total_bytes;     /* its progress */
  double start;
};

/* Start j's child, hashing its input.  -1 with errno if it could not
 * be started.
 */
extern int job_start (struct job *j);
/* Read what j's child wrote on fd (its records, or its messages:
 * printed at once if oldest, else held, unless stopping).  Returns
 * false at end of file.
 */
extern bool job_read (struct job *j, int fd, bool oldest, bool stopping);
/* j's child closed its records: it is gone, or going.  Reap it, take
 * its last messages (as job_read), and make sure it has an outcome
 * (unless stopping).
 */
extern void job_reap (struct job *j, bool oldest, bool stopping);
/* j failed without an outcome from its child: say why, as its input's
 * error (held until its turn).
 */
extern void job_fail (struct job *j, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
/* Print messages on standard error, the progress drawing out of the
 * way.
 */
extern void job_print_err (const char *data, size_t len);
/* Free what j holds. */
extern void job_free (struct job *j);

#endif /* NBDSUM_JOB_H */
