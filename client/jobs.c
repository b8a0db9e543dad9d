/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: -j, the pool of jobs (see jobs.h).  This file owns the
 * queue that hands items back in input order, the wait on the jobs'
 * pipes, the run's progress, and stopping the jobs on a signal; one
 * job's process is job.c's.
 *
 * Why processes and not threads: hashing an input is cheap to fork
 * and costly to share.  Its messages, kept for --json, its progress
 * and its private servers (reaped by pid, killed by process group on a
 * second signal) are its process's, so a job forked for one input runs
 * exactly what nbdsum runs for an input without -j.  Measured by
 * bench/jobs: a job costs 0.25 ms more than hashing in the process,
 * 1.2% of the cheapest input that hashes (a 64 KiB local file, 20.5
 * ms: a private nbdkit started and stopped); threads would save that
 * and give up the isolation.  The parent runs no hashing, so it has no
 * other thread when it forks.
 *
 * Bounds: an input is queued only while fewer than N are (being
 * hashed, or done and waiting for an older one), so at most N
 * children, 2N pipe ends in the parent, and N jobs' messages held,
 * each up to JOBS_HELD_MAX bytes before its child is left to wait for
 * its turn; marks take a queue entry each, at most JOBS_QUEUE_FACTOR N
 * entries in all.  Memory and file descriptors do not grow with the
 * number of inputs.
 *
 * Signals: the handler passes a signal on to every job (signals.c) at
 * once: a second signal, as a double ^C or timeout(1) sends, ends the
 * parent before its loop would run.  Each job then stops as nbdsum
 * does (requests in flight answered, private servers stopped) and dies
 * of it; a second signal, passed on too, ends them all at once.  The
 * parent prints nothing more but the messages of the oldest job, waits
 * for all of them (JOBS_LINGER_SECONDS, then ends them), hands every
 * item back as cancelled, and main dies of the signal.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "input.h"
#include "job.h"
#include "jobs.h"
#include "messages.h"
#include "names.h"
#include "progress.h"
#include "signals.h"

/* Bytes of a waiting job's messages held before its child is left to
 * block on its standard error until its turn.
 */
#define JOBS_HELD_MAX (1024 * 1024)
/* Queue entries (inputs and marks) per job. */
#define JOBS_QUEUE_FACTOR 4
/* After a signal, how long the jobs get to stop as nbdsum does
 * (requests answered, private nbdkit stopped), before they are told
 * again (which ends them at once) and then killed.
 */
#define JOBS_LINGER_SECONDS (DRAIN_SECONDS + 10)
#define JOBS_KILL_SECONDS 2
/* How often progress is drawn. */
#define JOBS_TICK_SECONDS 0.2

struct entry {
  bool hash;                    /* an input, else a mark */
  void *tag;
  struct job job;               /* inputs only */
};

struct jobs {
  unsigned max;                 /* N; 1: hashing in this process */
  struct entry *queue;          /* a ring of cap: len entries from head */
  size_t cap, head, len;
  unsigned hashing;             /* inputs in the queue */
  unsigned running;             /* children not yet reaped */
  struct pollfd *fds;
  struct job **owners;          /* of fds */
  /* The item handed back last, until the next call. */
  struct job last;
  /* Progress. */
  bool draw;                    /* -p or --progress=FD */
  struct progress_run run;
  struct progress_input *inputs;
  uint64_t bytes_finished;
  unsigned submitted;
  double last_draw;
  /* After a signal. */
  int stopping;                 /* the signal passed on, or 0 */
  double stop_time;
  int told_again;               /* 0, SIGTERM, then SIGKILL sent */
};

struct jobs *
jobs_begin (unsigned n, unsigned inputs)
{
  struct jobs *j = calloc_or_exit (1, sizeof *j);

  j->max = n ? n : 1;
  /* -j 1: full once it holds anything, so each item comes back at
   * once.
   */
  j->cap = j->max == 1 ? 1 : JOBS_QUEUE_FACTOR * (size_t) j->max;
  j->queue = calloc_or_exit (j->cap, sizeof *j->queue);
  if (j->max > 1) {
    j->fds = calloc_or_exit (2 * j->max + 1, sizeof *j->fds);
    j->owners = calloc_or_exit (2 * j->max + 1, sizeof *j->owners);
    j->inputs = calloc_or_exit (j->max, sizeof *j->inputs);
    j->draw = opts->progress_bar || opts->progress_lines ||
      opts->progress_fd >= 0;
  }
  /* The first drawing after a tick, with the first jobs queued. */
  j->run.start = j->last_draw = now ();
  j->run.total = inputs;
  j->run.total_known = inputs > 0;
  return j;
}

/* No room for another entry (-j 1: for a second one). */
static bool
full (const struct jobs *j)
{
  return j->len == j->cap || (j->len > 0 && j->hashing >= j->max);
}

static struct entry *
at (const struct jobs *j, size_t i)
{
  return &j->queue[(j->head + i) % j->cap];
}

/* A new entry at the end of the queue (the callers made room). */
static struct entry *
push (struct jobs *j, bool hash, void *tag)
{
  struct entry *e = at (j, j->len);

  memset (e, 0, sizeof *e);
  e->hash = hash;
  e->tag = tag;
  e->job.records_fd = e->job.err_fd = -1;
  j->len++;
  if (hash)
    j->hashing++;
  return e;
}

/* The oldest entry leaves the queue; its job stays as j->last. */
static void
pop (struct jobs *j)
{
  struct entry *e = at (j, 0);

  j->head = (j->head + 1) % j->cap;
  j->len--;
  if (e->hash)
    j->hashing--;
  job_free (&j->last);
  j->last = e->job;
}

static void
draw (struct jobs *j, bool final)
{
  size_t n = 0;

  if (!j->draw)
    return;
  j->run.running = j->running;
  j->run.bytes = j->bytes_finished;
  for (size_t i = 0; i < j->len; i++) {
    struct entry *e = at (j, i);
    if (e->hash && e->job.pid) {
      j->run.bytes += e->job.done_bytes;
      j->inputs[n++] = (struct progress_input) {
        e->job.name, e->job.done_bytes, e->job.total_bytes, e->job.start
      };
    }
  }
  progress_run_draw (&j->run, j->inputs, n, final);
  j->last_draw = now ();
}

/* A signal came (the handler passed it on to every job): from now on
 * nothing is printed but the oldest job's messages.
 */
static void
check_signal (struct jobs *j)
{
  const int sig = stop_signal ();

  if (sig == 0 || j->stopping)
    return;
  j->stopping = sig;
  j->stop_time = now ();
  if (j->draw)
    progress_run_abandon ();
}

/* Jobs that outlive JOBS_LINGER_SECONDS after a signal are told again,
 * which ends them at once, then killed.
 */
static void
hurry (struct jobs *j)
{
  const double waited = now () - j->stop_time;
  int sig = 0;

  if (j->told_again == 0 && waited >= JOBS_LINGER_SECONDS)
    sig = SIGTERM;
  else if (j->told_again == SIGTERM &&
           waited >= JOBS_LINGER_SECONDS + JOBS_KILL_SECONDS)
    sig = SIGKILL;
  if (sig == 0)
    return;
  j->told_again = sig;
  for (size_t i = 0; i < j->len; i++) {
    struct entry *e = at (j, i);
    if (e->hash && e->job.pid) {
      /* Its input's name may be freed by now: the job's pid. */
      if (sig == SIGKILL)
        error_msg ("job %d did not stop in %d seconds: killing it",
                   (int) e->job.pid, JOBS_LINGER_SECONDS + JOBS_KILL_SECONDS);
      kill (e->job.pid, sig);
    }
  }
}

/* Reap a job whose child closed its records. */
static void
reap (struct jobs *j, struct job *job)
{
  job_reap (job, &at (j, 0)->job == job, j->stopping != 0);
  j->running--;
  j->bytes_finished += job->done_bytes;
  j->run.done++;
}

/* Wait for the jobs' children to say something, or for a signal, or
 * for the next drawing of progress, and take it in.
 */
static void
wait_jobs (struct jobs *j, bool block)
{
  int timeout = -1, r;
  nfds_t n = 0;

  for (size_t i = 0; i < j->len; i++) {
    struct job *job = &at (j, i)->job;
    if (!at (j, i)->hash || job->pid == 0)
      continue;
    if (job->records_fd >= 0) {
      j->fds[n] = (struct pollfd) { .fd = job->records_fd, .events = POLLIN };
      j->owners[n++] = job;
    }
    /* A waiting job's messages beyond the bound stay in its pipe. */
    if (job->err_fd >= 0 && (i == 0 || job->held.len < JOBS_HELD_MAX)) {
      j->fds[n] = (struct pollfd) { .fd = job->err_fd, .events = POLLIN };
      j->owners[n++] = job;
    }
  }
  if (!j->stopping) {
    j->fds[n] = (struct pollfd) { .fd = stop_fd (), .events = POLLIN };
    j->owners[n++] = NULL;
  }
  if (!block)
    timeout = 0;
  else if (j->stopping)
    timeout = 100;
  else if (j->draw) {
    const double left = j->last_draw + JOBS_TICK_SECONDS - now ();
    timeout = left > 0 ? left * 1000 + 1 : 0;
  }

  r = poll (j->fds, n, timeout);
  if (r == -1 && errno != EINTR) {
    /* Cannot happen with valid descriptors; do not spin. */
    error_msg ("poll: %m");
    sleep (1);
  }
  for (nfds_t i = 0; r > 0 && i < n; i++) {
    struct job *job = j->owners[i];
    const bool oldest = job == &at (j, 0)->job;
    if (job == NULL || j->fds[i].revents == 0)
      continue;
    if (j->fds[i].fd == job->records_fd) {
      if (!job_read (job, job->records_fd, oldest, j->stopping != 0))
        reap (j, job);
    }
    else if (j->fds[i].fd == job->err_fd &&
             !job_read (job, job->err_fd, oldest, j->stopping != 0)) {
      close (job->err_fd);
      job->err_fd = -1;
    }
  }
  check_signal (j);
  if (j->stopping)
    hurry (j);
  else if (j->draw && now () >= j->last_draw + JOBS_TICK_SECONDS)
    draw (j, false);
}

/* Is an input of the queue being hashed with standard input? */
static bool
stdin_busy (const struct jobs *j)
{
  for (size_t i = 0; i < j->len; i++) {
    const struct entry *e = at (j, i);
    if (e->hash && e->job.reads_stdin && e->job.pid)
      return true;
  }
  return false;
}

/* Without -j: the input, here and now, as nbdsum always hashed. */
static void
hash_here (struct job *job)
{
  if (stop_signal ())
    return;
  if (job->keep_messages)
    messages_capture (job->name);
  job->out.r = input_hash (job->name, &job->spec, &job->out.res);
  if (job->keep_messages)
    job->out.error = messages_captured ();
  job->finished = true;
}

/* Start job's child, waiting for a job to end if the system is out
 * of descriptors or processes.
 */
static void
start (struct jobs *j, struct job *job)
{
  struct rlimit rl;

  while (!j->stopping && job_start (job) == -1) {
    if ((errno == EMFILE || errno == ENFILE || errno == EAGAIN ||
         errno == ENOMEM) && j->running > 0) {
      wait_jobs (j, true);
      continue;
    }
    /* Not even one: the run needs more than it has. */
    if (errno == EMFILE && getrlimit (RLIMIT_NOFILE, &rl) == 0)
      job_fail (job, "cannot start a job to hash it: %s (ulimit -n allows "
                "%llu, -j %u needs about %u: raise it, or lower -j)",
                strerror (EMFILE), (unsigned long long) rl.rlim_cur,
                j->max, JOBS_FDS (j->max));
    else
      job_fail (job, "cannot start a job to hash it: %m");
    return;
  }
  if (job->pid)
    j->running++;
}

void
jobs_hash (struct jobs *j, const char *name, const struct hash_spec *spec,
           bool keep_messages, void *tag)
{
  /* Such a job keeps standard input, as nbdsum without -j would read
   * it.
   */
  const bool reads_stdin = j->max > 1 && names_stdin (name);
  struct entry *e;

  check_signal (j);
  /* Standard input for one job at a time. */
  while (!j->stopping && reads_stdin && stdin_busy (j))
    wait_jobs (j, true);
  e = push (j, true, tag);
  e->job.name = name;
  e->job.spec = *spec;
  e->job.keep_messages = keep_messages;
  e->job.reads_stdin = reads_stdin;
  e->job.out.name = name;
  j->submitted++;
  if (j->max == 1)
    hash_here (&e->job);
  else if (!j->stopping)
    start (j, &e->job);
}

void
jobs_mark (struct jobs *j, void *tag)
{
  push (j, false, tag);
}

/* Is the oldest entry's turn done: a mark, or a job with its outcome
 * and reaped?  Stopped: once every job is reaped.
 */
static bool
head_done (const struct jobs *j)
{
  const struct entry *e = at (j, 0);

  if (j->stopping)
    return j->running == 0;
  return !e->hash || (e->job.finished && e->job.pid == 0);
}

bool
jobs_next (struct jobs *j, bool wait, struct job_item *item)
{
  struct entry *e;
  bool hash;

  job_free (&j->last);
  if (j->len == 0)
    return false;
  check_signal (j);
  wait = wait || full (j);
  /* Take in what the jobs said, without waiting, then as asked. */
  if (j->max > 1)
    wait_jobs (j, false);
  for (;;) {
    e = at (j, 0);
    /* Its turn: its messages.  Stopped, the turns are over: nothing is
     * printed but what the oldest job says as it stops.
     */
    if (e->hash && !j->stopping) {
      job_print_err (e->job.held.data, e->job.held.len);
      e->job.held.len = 0;
    }
    if (head_done (j))
      break;
    if (!wait || j->max == 1)
      return false;
    wait_jobs (j, true);
  }
  if (j->draw)
    progress_run_erase ();
  if (!j->stopping)
    j->stopping = stop_signal ();
  hash = e->hash;
  *item = (struct job_item) { .tag = e->tag, .cancelled = j->stopping != 0 };
  pop (j);
  if (hash && !item->cancelled)
    item->out = &j->last.out;
  return true;
}

void
jobs_end (struct jobs *j)
{
  struct job_item item;

  /* Items never taken are cancelled. */
  while (jobs_next (j, true, &item))
    ;
  if (!j->stopping && j->submitted)
    draw (j, true);
  job_free (&j->last);
  free (j->queue);
  free (j->fds);
  free (j->owners);
  free (j->inputs);
  free (j);
}
