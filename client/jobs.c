/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: -j, the pool of jobs (see jobs.h).  This file owns the
 * jobs: their child processes and pipes, the queue that puts their
 * output back in input order, their progress, and stopping them on a
 * signal.
 *
 * Why processes and not threads: hashing an input uses process-wide
 * state (the failure reason in source.c is per thread, but messages
 * kept for --json, the progress bar and the signal flag are per
 * process), and a private nbdkit is reaped by pid.  A child forked
 * for one input has all of it to itself and runs exactly what nbdsum
 * runs for an input without -j.  The parent runs no hashing, so it
 * has no other thread when it forks.
 *
 * A job's child has two pipes to the parent.  Its standard error (and
 * output, which hashing never writes: whatever would be written there
 * goes to the messages) is one: the parent copies it to its standard
 * error when the job's turn comes, and as it comes while the job is
 * the oldest one, so messages come out in input order, as without -j.
 * The other carries records: progress (image bytes done), then the
 * outcome.  Its end of file says that the child is gone (the child
 * made it close-on-exec, so no server it starts holds it).
 *
 * Bounds: a job starts only while fewer than N jobs are in the queue
 * (being hashed, or done and waiting for an older one), so at most N
 * children, 2N pipe ends in the parent, and N jobs' messages held,
 * each up to JOBS_HELD_MAX bytes before its child is left to wait for
 * its turn; output that is not an input's takes a queue entry of its
 * own, at most JOBS_QUEUE_FACTOR N of them in all.  Memory and file
 * descriptors do not grow with the number of inputs.
 *
 * Signals: each child has a process group of its own (but one reading
 * standard input, which may be the terminal), so a terminal's ^C
 * reaches the parent only, whose handler passes the signal on to every
 * child (signals.c), at once: a second signal, as a double ^C or
 * timeout(1) sends, ends the parent before its loop would run.  Each
 * child then stops as nbdsum does (requests in flight answered, private
 * servers stopped) and dies of it; a second signal, passed on too,
 * ends them all at once.  The parent prints nothing more but the
 * messages of the oldest job, waits for all of them
 * (JOBS_LINGER_SECONDS, then ends them), and main dies of the signal.
 * A child whose parent dies anyway (SIGKILL) gets SIGTERM from the
 * kernel (PR_SET_PDEATHSIG; SIGKILL if SIGTERM is ignored): no job
 * outlives the run.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "input.h"
#include "jobs.h"
#include "messages.h"
#include "minmax.h"
#include "progress.h"
#include "signals.h"

/* Bytes of a waiting job's messages held before its child is left to
 * block on its standard error until its turn.
 */
#define JOBS_HELD_MAX (1024 * 1024)
/* Queue entries (inputs and other output) per job. */
#define JOBS_QUEUE_FACTOR 4
/* After a signal, how long the jobs get to stop as nbdsum does
 * (requests answered, private nbdkit stopped), before they are told
 * again (which ends them at once) and then killed.
 */
#define JOBS_LINGER_SECONDS (DRAIN_SECONDS + 10)
#define JOBS_KILL_SECONDS 2
/* How often progress is drawn. */
#define JOBS_TICK_SECONDS 0.2

/* A child's records to the parent: a header, then len bytes. */
enum { RECORD_PROGRESS = 1, RECORD_OUTCOME = 2 };
struct record_header {
  uint32_t type, len;
};
struct progress_record {
  uint64_t done, total;
};
/* The outcome: r, then if r is 0 the result (result_encode), then
 * the messages kept.
 */
struct outcome_record {
  int32_t r;
};

struct buffer {
  char *data;
  size_t len, alloc;
};

struct entry {
  bool hash;                    /* an input (jobs_hash), else jobs_then */
  jobs_done_fn *done;           /* NULL once called */
  jobs_action_fn *action;       /* NULL once called */
  void *opaque;

  /* Inputs only. */
  const char *name;
  struct hash_spec spec;
  bool keep_messages;
  bool reads_stdin;
  pid_t pid;                    /* the child until reaped, else 0 */
  int records_fd, err_fd;       /* read ends, -1 once closed */
  struct buffer records;        /* not yet taken in */
  struct buffer held;           /* messages waiting for the turn */
  bool finished;                /* out is final */
  struct job_outcome out;
  uint64_t done_bytes, total_bytes;
  double start;
};

static struct {
  unsigned max;                 /* N: 1, hashing in this process */
  struct entry *queue;          /* a ring of cap: len entries from head */
  size_t cap, head, len;
  unsigned hashing;             /* inputs in the queue */
  unsigned running;             /* children not yet reaped */
  struct pollfd *fds;
  struct entry **owners;        /* of fds */
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
} jobs;

/* In a child: the records' pipe, as this descriptor. */
#define JOBS_RECORDS_FD 3
static int child_records_fd = -1;
/* The parent, for its children to check that it still lives. */
static pid_t parent_pid;

/* In a child: close every descriptor from fd on. */
static void
jobs_close_from (int fd)
{
  struct rlimit rl;

  if (close_range (fd, ~0U, 0) == 0)
    return;
  /* A kernel before 5.9. */
  if (getrlimit (RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur == RLIM_INFINITY)
    rl.rlim_cur = 65536;
  for (; (rlim_t) fd < rl.rlim_cur; fd++)
    close (fd);
}

static struct entry *
jobs_at (size_t i)
{
  return &jobs.queue[(jobs.head + i) % jobs.cap];
}

static bool
jobs_append (struct buffer *b, const void *data, size_t len)
{
  if (b->len + len > b->alloc) {
    size_t n = b->alloc ? b->alloc : 4096;
    char *p;
    while (n < b->len + len)
      n *= 2;
    if ((p = realloc (b->data, n)) == NULL)
      return false;
    b->data = p;
    b->alloc = n;
  }
  memcpy (b->data + b->len, data, len);
  b->len += len;
  return true;
}

static void
jobs_buffer_free (struct buffer *b)
{
  free (b->data);
  *b = (struct buffer) { NULL, 0, 0 };
}

static int
jobs_write_all (int fd, const void *data, size_t len)
{
  const char *p = data;

  while (len > 0) {
    ssize_t n = write (fd, p, len);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1)
      return -1;
    p += n;
    len -= n;
  }
  return 0;
}

void
jobs_begin (unsigned n)
{
  memset (&jobs, 0, sizeof jobs);
  jobs.max = n ? n : 1;
  if (jobs.max == 1)
    return;
  jobs.cap = JOBS_QUEUE_FACTOR * (size_t) jobs.max;
  jobs.queue = calloc (jobs.cap, sizeof *jobs.queue);
  jobs.fds = calloc (2 * jobs.max + 1, sizeof *jobs.fds);
  jobs.owners = calloc (2 * jobs.max + 1, sizeof *jobs.owners);
  jobs.inputs = calloc (jobs.max, sizeof *jobs.inputs);
  if (!jobs.queue || !jobs.fds || !jobs.owners || !jobs.inputs) {
    error_msg ("out of memory");
    exit (EXIT_FAILURE);
  }
  jobs.draw = opts->progress_bar || opts->progress_fd >= 0;
  jobs.run.start = now ();
}

void
jobs_expect (unsigned n)
{
  jobs.run.total = n;
  jobs.run.total_known = true;
}

/* A new entry at the end of the queue (the callers wait for room). */
static struct entry *
jobs_push (bool hash)
{
  struct entry *e = jobs_at (jobs.len);

  memset (e, 0, sizeof *e);
  e->hash = hash;
  e->records_fd = e->err_fd = -1;
  jobs.len++;
  if (hash)
    jobs.hashing++;
  return e;
}

static void
jobs_pop (void)
{
  struct entry *e = jobs_at (0);

  jobs.head = (jobs.head + 1) % jobs.cap;
  jobs.len--;
  if (e->hash)
    jobs.hashing--;
  jobs_buffer_free (&e->records);
  jobs_buffer_free (&e->held);
  free (e->out.error);
  e->out.error = NULL;
}

/* Call an entry's callback, as cancelled if out is NULL. */
static void
jobs_call (struct entry *e, const struct job_outcome *out)
{
  if (e->hash && e->done) {
    jobs_done_fn *done = e->done;
    e->done = NULL;
    done (e->opaque, out);
  }
  else if (!e->hash && e->action) {
    jobs_action_fn *action = e->action;
    e->action = NULL;
    action (e->opaque, out == NULL);
  }
}

/* ---------------------------------------------------------------- */
/* In the child. */

static void
jobs_child_record (uint32_t type, const void *data, size_t len,
                   const void *more, size_t more_len)
{
  const struct record_header h = { type, len + more_len };

  /* The parent gone, a record is lost: SIGPIPE stops this job. */
  if (jobs_write_all (child_records_fd, &h, sizeof h) == 0 &&
      jobs_write_all (child_records_fd, data, len) == 0 && more_len)
    jobs_write_all (child_records_fd, more, more_len);
}

static void
jobs_child_progress (uint64_t done, uint64_t total, bool final)
{
  const struct progress_record p = { done, total };

  (void) final;
  jobs_child_record (RECORD_PROGRESS, &p, sizeof p, NULL, 0);
}

/* The job's child: hash e's input as nbdsum does one, hand back the
 * outcome, exit.  The stop signals are blocked (saved: the mask to
 * restore) since before fork.
 */
static void __attribute__ ((noreturn))
jobs_child (struct entry *e, int records_fd, int err_fd,
            const sigset_t *saved)
{
  struct outcome_record o = { 0 };
  const bool report = opts->progress_bar;
  struct result res;
  char *error = NULL, *record;
  size_t len;
  int fd;

  /* Nothing the parent had buffered for its standard output may ever
   * be written from here.
   */
  __fpurge (stdout);
  /* Not to outlive the parent, even killed: stop as on a signal (it
   * is blocked until the handler and its pipe are this job's).  It may
   * have died before this call.
   */
  prctl (PR_SET_PDEATHSIG, stop_signals_on_parent_death ());
  if (getppid () != parent_pid)
    raise (stop_signals_on_parent_death ());
  if (!e->reads_stdin)
    setpgid (0, 0);
  /* Standard input is for the one job that reads it: others and their
   * servers must not read the terminal from a background group.
   */
  if (!e->reads_stdin && (fd = open ("/dev/null", O_RDONLY)) >= 0) {
    dup2 (fd, STDIN_FILENO);
    if (fd != STDIN_FILENO)
      close (fd);
  }
  /* Messages (and the private servers' messages, which inherit them)
   * to the parent, in order.
   */
  if (dup2 (err_fd, STDERR_FILENO) == -1 ||
      dup2 (err_fd, STDOUT_FILENO) == -1)
    _exit (EXIT_FAILURE);
  /* Nothing else of the parent's: not the other jobs' pipes, and not
   * the checksum file, whose offset the parent's reading shares (a
   * stdio clean-up at exit, as valgrind runs one, would move it).
   */
  if (dup2 (records_fd, JOBS_RECORDS_FD) == -1 ||
      fcntl (JOBS_RECORDS_FD, F_SETFD, FD_CLOEXEC) == -1)
    _exit (EXIT_FAILURE);
  jobs_close_from (JOBS_RECORDS_FD + 1);
  child_records_fd = JOBS_RECORDS_FD;
  stop_signals_renew ();
  options_for_job ();
  if (report)
    progress_report_to (jobs_child_progress);
  stop_signals_restore (saved);

  if (e->keep_messages)
    messages_capture (e->name);
  o.r = input_hash (e->name, &e->spec, &res);
  if (e->keep_messages)
    error = messages_captured ();
  /* Interrupted: no outcome, as without -j the input has no line. */
  if (stop_signal ())
    die_of_signal (stop_signal ());
  len = o.r == 0 ? RESULT_WIRE_SIZE : 0;
  if ((record = malloc (sizeof o + len)) == NULL)
    _exit (EXIT_FAILURE);
  memcpy (record, &o, sizeof o);
  if (o.r == 0)
    result_encode (&res, record + sizeof o);
  jobs_child_record (RECORD_OUTCOME, record, sizeof o + len, error,
                     error ? strlen (error) : 0);
  free (record);
  free (error);
  /* Not exit: nothing of the parent's stdio or atexit is this job's. */
  _exit (EXIT_SUCCESS);
}

/* ---------------------------------------------------------------- */
/* In the parent. */

/* Standard error, with the progress drawing out of the way. */
static void
jobs_print_err (const char *data, size_t len)
{
  if (len == 0)
    return;
  progress_run_erase ();
  fwrite (data, 1, len, stderr);
  fflush (stderr);
}

/* e failed without an outcome from its child: say why, as its input's
 * error.
 */
static void __attribute__ ((format (printf, 2, 3)))
jobs_fail (struct entry *e, const char *fmt, ...)
{
  char *msg = NULL, *line = NULL;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) == -1)
    msg = NULL;
  va_end (ap);
  e->finished = true;
  e->out.r = -1;
  free (e->out.error);
  e->out.error = NULL;
  if (e->keep_messages && msg)
    e->out.error = strdup (msg);
  if (asprintf (&line, "%s: %s: %s\n", progname, e->name,
                msg ? msg : "out of memory") != -1) {
    if (!jobs_append (&e->held, line, strlen (line)))
      jobs_print_err (line, strlen (line));
    free (line);
  }
  free (msg);
}

/* Start e's child.  -1 with errno if it could not be. */
static int
jobs_start (struct entry *e)
{
  int records[2], err[2], saved_errno;
  sigset_t saved;
  pid_t pid;

  if (pipe2 (records, O_CLOEXEC) == -1)
    return -1;
  if (pipe2 (err, O_CLOEXEC) == -1) {
    saved_errno = errno;
    close (records[0]);
    close (records[1]);
    errno = saved_errno;
    return -1;
  }
  e->records_fd = records[0];
  e->err_fd = err[0];
  /* The child must not run our handler before it has its own pipe,
   * and our handler must know the child before it runs again.
   */
  parent_pid = getpid ();
  stop_signals_block (&saved);
  pid = fork ();
  if (pid == 0)
    jobs_child (e, records[1], err[1], &saved);
  saved_errno = errno;
  /* Also here, so that the group exists whichever runs first. */
  if (pid > 0 && !e->reads_stdin)
    setpgid (pid, pid);
  if (pid > 0)
    stop_signals_pass_on (pid);
  stop_signals_restore (&saved);
  close (records[1]);
  close (err[1]);
  if (pid == -1) {
    close (e->records_fd);
    close (e->err_fd);
    e->records_fd = e->err_fd = -1;
    errno = saved_errno;
    return -1;
  }
  fcntl (e->records_fd, F_SETFL, O_NONBLOCK);
  fcntl (e->err_fd, F_SETFL, O_NONBLOCK);
  e->pid = pid;
  e->start = now ();
  jobs.running++;
  return 0;
}

/* Take in the complete records read from e's child. */
static void
jobs_take_records (struct entry *e)
{
  size_t off = 0;

  while (e->records.len - off >= sizeof (struct record_header)) {
    struct record_header h;
    const char *data;

    memcpy (&h, e->records.data + off, sizeof h);
    if (e->records.len - off - sizeof h < h.len)
      break;
    data = e->records.data + off + sizeof h;
    if (h.type == RECORD_PROGRESS && h.len == sizeof (struct progress_record)) {
      struct progress_record p;
      memcpy (&p, data, sizeof p);
      e->done_bytes = p.done;
      e->total_bytes = p.total;
    }
    else if (h.type == RECORD_OUTCOME &&
             h.len >= sizeof (struct outcome_record)) {
      struct outcome_record o;
      size_t rlen = 0, elen;
      memcpy (&o, data, sizeof o);
      if (o.r == 0 && h.len >= sizeof o + RESULT_WIRE_SIZE)
        rlen = RESULT_WIRE_SIZE;
      elen = h.len - sizeof o - rlen;
      e->out.r = rlen ? 0 : -1;
      memset (&e->out.res, 0, sizeof e->out.res);
      e->out.res.name = e->name;
      if (rlen)
        result_decode (data + sizeof o, e->name, &e->out.res);
      free (e->out.error);
      /* NULL without memory, as messages_captured. */
      e->out.error = elen ? strndup (data + sizeof o + rlen, elen) : NULL;
      e->finished = true;
    }
    off += sizeof h + h.len;
  }
  if (off) {
    memmove (e->records.data, e->records.data + off, e->records.len - off);
    e->records.len -= off;
  }
}

/* Read what e's child wrote on fd (its records or its messages).
 * Returns false at end of file.
 */
static bool
jobs_read (struct entry *e, int fd)
{
  char buf[65536];
  ssize_t n;

  for (;;) {
    n = read (fd, buf, sizeof buf);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1 && errno == EAGAIN)
      return true;
    if (n <= 0)
      return false;
    if (fd == e->records_fd) {
      if (!jobs_append (&e->records, buf, n)) {
        jobs_fail (e, "out of memory");
        return false;
      }
      jobs_take_records (e);
    }
    /* The oldest job's messages go out as they come; stopping too,
     * its last words (a private nbdkit that would not stop), as
     * nbdsum without -j prints them.  The others' wait their turn.
     */
    else if (jobs_at (0) == e) {
      jobs_print_err (e->held.data, e->held.len);
      e->held.len = 0;
      jobs_print_err (buf, n);
    }
    else if (!jobs.stopping && !jobs_append (&e->held, buf, n))
      return false;
    if ((size_t) n < sizeof buf)
      return true;
  }
}

/* e's child closed its records: it is gone, or going.  Reap it, take
 * its last messages, and make sure it has an outcome.
 */
static void
jobs_reap (struct entry *e)
{
  int status = 0;

  close (e->records_fd);
  e->records_fd = -1;
  /* Once reaped its pid may be another process's. */
  stop_signals_forget (e->pid);
  while (waitpid (e->pid, &status, 0) == -1 && errno == EINTR)
    ;
  e->pid = 0;
  jobs.running--;
  /* Servers the child started may still hold its standard error: take
   * what is there, not wait for its end.
   */
  if (e->err_fd >= 0) {
    jobs_read (e, e->err_fd);
    close (e->err_fd);
    e->err_fd = -1;
  }
  jobs.bytes_finished += e->done_bytes;
  jobs.run.done++;
  if (e->finished || jobs.stopping)
    return;
  if (WIFSIGNALED (status))
    jobs_fail (e, "its job was killed by SIG%s",
               sigabbrev_np (WTERMSIG (status)) ?: "?");
  else
    jobs_fail (e, "its job ended without a result (exit status %d)",
               WEXITSTATUS (status));
}

/* Run the callbacks whose turn came, oldest first. */
static void
jobs_advance (void)
{
  while (jobs.len > 0 && !jobs.stopping) {
    struct entry *e = jobs_at (0);

    if (e->hash) {
      jobs_print_err (e->held.data, e->held.len);
      e->held.len = 0;
      if (!e->finished || e->pid)
        return;
    }
    progress_run_erase ();
    jobs_call (e, &e->out);
    jobs_pop ();
  }
}

static void
jobs_draw (bool final)
{
  size_t n = 0;

  if (!jobs.draw)
    return;
  jobs.run.running = jobs.running;
  jobs.run.bytes = jobs.bytes_finished;
  for (size_t i = 0; i < jobs.len; i++) {
    struct entry *e = jobs_at (i);
    if (e->hash && e->pid) {
      jobs.run.bytes += e->done_bytes;
      jobs.inputs[n++] = (struct progress_input) {
        e->name, e->done_bytes, e->total_bytes, e->start
      };
    }
  }
  progress_run_draw (&jobs.run, jobs.inputs, n, final);
  jobs.last_draw = now ();
}

/* A signal came (the handler passed it on to every job): forget the
 * callbacks (in order: an entry's opaque may be needed by later
 * ones).  Nothing is printed any more but the oldest job's messages.
 */
static void
jobs_check_signal (void)
{
  const int sig = stop_signal ();

  if (sig == 0 || jobs.stopping)
    return;
  jobs.stopping = sig;
  jobs.stop_time = now ();
  for (size_t i = 0; i < jobs.len; i++)
    jobs_call (jobs_at (i), NULL);
  if (jobs.draw)
    progress_run_abandon ();
}

/* Jobs that outlive JOBS_LINGER_SECONDS after a signal are told again,
 * which ends them at once, then killed.
 */
static void
jobs_hurry (void)
{
  const double waited = now () - jobs.stop_time;
  int sig = 0;

  if (jobs.told_again == 0 && waited >= JOBS_LINGER_SECONDS)
    sig = SIGTERM;
  else if (jobs.told_again == SIGTERM &&
           waited >= JOBS_LINGER_SECONDS + JOBS_KILL_SECONDS)
    sig = SIGKILL;
  if (sig == 0)
    return;
  jobs.told_again = sig;
  for (size_t i = 0; i < jobs.len; i++) {
    struct entry *e = jobs_at (i);
    if (e->hash && e->pid) {
      /* Its input's name may be freed by now: the job's pid. */
      if (sig == SIGKILL)
        error_msg ("job %d did not stop in %d seconds: killing it",
                   (int) e->pid, JOBS_LINGER_SECONDS + JOBS_KILL_SECONDS);
      kill (e->pid, sig);
    }
  }
}

/* Wait for the jobs' children to say something, or for a signal, or
 * for the next drawing of progress, and take it in.
 */
static void
jobs_wait (void)
{
  int timeout = -1, r;
  nfds_t n = 0;

  for (size_t i = 0; i < jobs.len; i++) {
    struct entry *e = jobs_at (i);
    if (!e->hash || e->pid == 0)
      continue;
    if (e->records_fd >= 0) {
      jobs.fds[n] = (struct pollfd) { .fd = e->records_fd, .events = POLLIN };
      jobs.owners[n++] = e;
    }
    /* A waiting job's messages beyond the bound stay in its pipe. */
    if (e->err_fd >= 0 && (i == 0 || e->held.len < JOBS_HELD_MAX)) {
      jobs.fds[n] = (struct pollfd) { .fd = e->err_fd, .events = POLLIN };
      jobs.owners[n++] = e;
    }
  }
  if (!jobs.stopping) {
    jobs.fds[n] = (struct pollfd) { .fd = stop_fd (), .events = POLLIN };
    jobs.owners[n++] = NULL;
  }
  if (jobs.stopping)
    timeout = 100;
  else if (jobs.draw) {
    const double left = jobs.last_draw + JOBS_TICK_SECONDS - now ();
    timeout = left > 0 ? left * 1000 + 1 : 0;
  }

  r = poll (jobs.fds, n, timeout);
  if (r == -1 && errno != EINTR) {
    /* Cannot happen with valid descriptors; do not spin. */
    error_msg ("poll: %m");
    sleep (1);
  }
  for (nfds_t i = 0; r > 0 && i < n; i++) {
    struct entry *e = jobs.owners[i];
    if (e == NULL || jobs.fds[i].revents == 0)
      continue;
    if (jobs.fds[i].fd == e->records_fd) {
      if (!jobs_read (e, e->records_fd))
        jobs_reap (e);
    }
    else if (jobs.fds[i].fd == e->err_fd && !jobs_read (e, e->err_fd)) {
      close (e->err_fd);
      e->err_fd = -1;
    }
  }
  jobs_check_signal ();
  if (jobs.stopping)
    jobs_hurry ();
  else if (jobs.draw && now () >= jobs.last_draw + JOBS_TICK_SECONDS)
    jobs_draw (false);
}

static bool
jobs_stdin_busy (void)
{
  for (size_t i = 0; i < jobs.len; i++) {
    struct entry *e = jobs_at (i);
    if (e->hash && e->reads_stdin && e->pid)
      return true;
  }
  return false;
}

/* Without -j: the input, here and now, as nbdsum always hashed. */
static void
jobs_hash_here (const char *name, const struct hash_spec *spec,
                bool keep_messages, jobs_done_fn *done, void *opaque)
{
  struct job_outcome out = { .name = name };

  if (stop_signal ()) {
    done (opaque, NULL);
    return;
  }
  if (keep_messages)
    messages_capture (name);
  out.r = input_hash (name, spec, &out.res);
  if (keep_messages)
    out.error = messages_captured ();
  /* A signal may have come after the last request. */
  done (opaque, stop_signal () ? NULL : &out);
  free (out.error);
}

/* Does the input read standard input: -, or another name of what it
 * is (/dev/stdin, /proc/self/fd/0)?  Such a job keeps it, as nbdsum
 * without -j would read it.
 */
static bool
names_stdin (const char *name)
{
  struct stat in, st;

  if (strcmp (name, "-") == 0)
    return true;
  return !is_uri (name) && fstat (STDIN_FILENO, &in) == 0 &&
    stat (name, &st) == 0 &&
    st.st_dev == in.st_dev && st.st_ino == in.st_ino;
}

void
jobs_hash (const char *name, const struct hash_spec *spec,
           bool keep_messages, jobs_done_fn *done, void *opaque)
{
  const bool reads_stdin = names_stdin (name);
  struct rlimit rl;
  struct entry *e;

  if (jobs.max == 1) {
    jobs_hash_here (name, spec, keep_messages, done, opaque);
    return;
  }
  jobs_check_signal ();
  /* Room for one more; standard input for one job at a time. */
  while (!jobs.stopping &&
         (jobs.hashing >= jobs.max || jobs.len == jobs.cap ||
          (reads_stdin && jobs_stdin_busy ()))) {
    jobs_wait ();
    jobs_advance ();
  }
  if (jobs.stopping) {
    done (opaque, NULL);
    return;
  }
  e = jobs_push (true);
  e->done = done;
  e->opaque = opaque;
  e->name = name;
  e->spec = *spec;
  e->keep_messages = keep_messages;
  e->reads_stdin = reads_stdin;
  e->out.name = name;
  jobs.submitted++;
  while (!jobs.stopping && jobs_start (e) == -1) {
    /* Out of descriptors or processes: wait for a job to end. */
    if ((errno == EMFILE || errno == ENFILE || errno == EAGAIN ||
         errno == ENOMEM) && jobs.running > 0) {
      jobs_wait ();
      jobs_advance ();
      continue;
    }
    /* Not even one: the run needs more than it has. */
    if (errno == EMFILE && getrlimit (RLIMIT_NOFILE, &rl) == 0)
      jobs_fail (e, "cannot start a job to hash it: %s (ulimit -n allows "
                 "%llu, -j %u needs about %u: raise it, or lower -j)",
                 strerror (EMFILE), (unsigned long long) rl.rlim_cur,
                 jobs.max, JOBS_FDS (jobs.max));
    else
      jobs_fail (e, "cannot start a job to hash it: %m");
    break;
  }
  jobs_advance ();
}

void
jobs_then (jobs_action_fn *fn, void *opaque)
{
  struct entry *e;

  if (jobs.max == 1) {
    fn (opaque, stop_signal () != 0);
    return;
  }
  jobs_check_signal ();
  while (!jobs.stopping && jobs.len == jobs.cap) {
    jobs_wait ();
    jobs_advance ();
  }
  if (jobs.stopping) {
    fn (opaque, true);
    return;
  }
  e = jobs_push (false);
  e->action = fn;
  e->opaque = opaque;
  jobs_advance ();
}

void
jobs_finish (void)
{
  if (jobs.max == 1)
    return;
  if (!jobs.run.total_known)
    jobs_expect (jobs.submitted);
  jobs_check_signal ();
  jobs_advance ();
  while (jobs.len > 0 && (!jobs.stopping || jobs.running > 0)) {
    jobs_wait ();
    jobs_advance ();
  }
  if (!jobs.stopping && jobs.submitted)
    jobs_draw (true);
  /* Stopped: what is left was forgotten, its children reaped. */
  while (jobs.len > 0)
    jobs_pop ();
  free (jobs.queue);
  free (jobs.fds);
  free (jobs.owners);
  free (jobs.inputs);
  memset (&jobs, 0, sizeof jobs);
}
