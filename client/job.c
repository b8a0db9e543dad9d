/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: one -j job (see job.h): its child process, which hashes
 * one input exactly as nbdsum does without -j, and the parent's side
 * of its two pipes.
 *
 * The child's standard error (and output, which hashing never writes:
 * whatever would be written there goes to the messages) is one pipe:
 * the parent copies it to its standard error when the job's turn
 * comes, and as it comes while the job is the oldest one, so messages
 * come out in input order, as without -j.  The other carries records:
 * progress (image bytes done), then the outcome (result.h's encoding
 * of the result, and the messages kept for --json).  Its end of file
 * says that the child is gone (the child made it close-on-exec, so no
 * server it starts holds it).
 *
 * Signals: the child has a process group of its own (but one reading
 * standard input, which may be the terminal), so a terminal's ^C
 * reaches the parent only, whose handler passes it on (signals.c).  A
 * child whose parent dies anyway (SIGKILL) gets SIGTERM from the
 * kernel (PR_SET_PDEATHSIG; SIGKILL if SIGTERM is ignored): no job
 * outlives the run.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "input.h"
#include "job.h"
#include "messages.h"
#include "progress.h"
#include "signals.h"

/* A child's records to the parent: a header, then len bytes. */
enum { RECORD_PROGRESS = 1, RECORD_OUTCOME = 2 };
struct record_header {
  uint32_t type, len;
};
struct progress_record {
  uint64_t done, total;
};
/* The outcome: r, then if r is 0 the result (result_encode), then the
 * messages kept.
 */
struct outcome_record {
  int32_t r;
};

/* In a child: the records' pipe. */
static int child_records_fd = -1;
/* The parent, for its children to check that it still lives. */
static pid_t parent_pid;

static bool
buffer_append (struct job_buffer *b, const void *data, size_t len)
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

void
job_free (struct job *j)
{
  free (j->records.data);
  free (j->held.data);
  free (j->out.error);
  j->records = j->held = (struct job_buffer) { NULL, 0, 0 };
  j->out.error = NULL;
}

/* ---------------------------------------------------------------- */
/* In the child. */

/* Close nbdsum's own descriptors but keep: they are close-on-exec
 * (pipes, the checksum file, sockets), where descriptors the user
 * gave nbdsum (/dev/fd/4 as an input) are not, and stay the job's.
 */
static void
close_own (int keep)
{
  int fds[256];
  size_t n;

  /* In rounds: a directory being read is not changed under it. */
  do {
    DIR *d = opendir ("/proc/self/fd");
    struct dirent *e;
    struct rlimit rl;

    /* No descriptor left to read the directory with (the run is at
     * ulimit -n), or no /proc: try them all, a few.
     */
    if (d == NULL) {
      if (getrlimit (RLIMIT_NOFILE, &rl) == -1 ||
          rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 65536)
        rl.rlim_cur = 65536;
      for (int fd = 3; (rlim_t) fd < rl.rlim_cur; fd++) {
        const int flags = fd != keep ? fcntl (fd, F_GETFD) : -1;
        if (flags != -1 && (flags & FD_CLOEXEC))
          close (fd);
      }
      return;
    }
    n = 0;
    while ((e = readdir (d)) != NULL && n < sizeof fds / sizeof fds[0]) {
      const int fd = atoi (e->d_name);
      const int flags = fd > 2 && fd != keep && fd != dirfd (d)
        ? fcntl (fd, F_GETFD) : -1;
      if (flags != -1 && (flags & FD_CLOEXEC))
        fds[n++] = fd;
    }
    closedir (d);
    for (size_t i = 0; i < n; i++)
      close (fds[i]);
  } while (n == sizeof fds / sizeof fds[0]);
}

static int
write_all (int fd, const void *data, size_t len)
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

static void
child_record (uint32_t type, const void *data, size_t len,
              const void *more, size_t more_len)
{
  const struct record_header h = { type, len + more_len };

  /* The parent gone, a record is lost: SIGPIPE stops this job. */
  if (write_all (child_records_fd, &h, sizeof h) == 0 &&
      write_all (child_records_fd, data, len) == 0 && more_len)
    write_all (child_records_fd, more, more_len);
}

static void
child_progress (uint64_t done, uint64_t total, bool final)
{
  const struct progress_record p = { done, total };

  (void) final;
  child_record (RECORD_PROGRESS, &p, sizeof p, NULL, 0);
}

/* The job's child: hash j's input as nbdsum does one, hand back the
 * outcome, exit.  The stop signals are blocked (saved: the mask to
 * restore) since before fork.
 */
static void __attribute__ ((noreturn))
child (struct job *j, int records_fd, int err_fd, const sigset_t *saved)
{
  struct outcome_record o = { 0 };
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
  if (!j->reads_stdin)
    setpgid (0, 0);
  /* Standard input is for the one job that reads it: others and their
   * servers must not read the terminal from a background group.
   */
  if (!j->reads_stdin && (fd = open ("/dev/null", O_RDONLY)) >= 0) {
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
   * The user's descriptors stay: an input may name one.
   */
  close_own (records_fd);
  child_records_fd = records_fd;
  stop_signals_renew ();
  /* Its progress goes to the parent, which draws the run. */
  progress_report_to (opts->progress_bar || opts->progress_lines
                      ? child_progress : progress_silent);
  stop_signals_restore (saved);

  if (j->keep_messages)
    messages_capture (j->name);
  o.r = input_hash (j->name, &j->spec, &res);
  if (j->keep_messages)
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
  child_record (RECORD_OUTCOME, record, sizeof o + len, error,
                error ? strlen (error) : 0);
  free (record);
  free (error);
  /* Not exit: nothing of the parent's stdio or atexit is this job's. */
  _exit (EXIT_SUCCESS);
}

/* ---------------------------------------------------------------- */
/* In the parent. */

void
job_print_err (const char *data, size_t len)
{
  if (len == 0)
    return;
  progress_run_erase ();
  fwrite (data, 1, len, stderr);
  fflush (stderr);
}

void
job_fail (struct job *j, const char *fmt, ...)
{
  char *msg = NULL, *line = NULL;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) == -1)
    msg = NULL;
  va_end (ap);
  j->finished = true;
  j->out.r = -1;
  free (j->out.error);
  j->out.error = NULL;
  if (j->keep_messages && msg)
    j->out.error = strdup (msg);
  if (asprintf (&line, "%s: %s: %s\n", progname, j->name,
                msg ? msg : "out of memory") != -1) {
    if (!buffer_append (&j->held, line, strlen (line)))
      job_print_err (line, strlen (line));
    free (line);
  }
  free (msg);
}

int
job_start (struct job *j)
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
  j->records_fd = records[0];
  j->err_fd = err[0];
  /* The child must not run our handler before it has its own pipe,
   * and our handler must know the child before it runs again.
   */
  parent_pid = getpid ();
  stop_signals_block (&saved);
  pid = fork ();
  if (pid == 0)
    child (j, records[1], err[1], &saved);
  saved_errno = errno;
  /* Also here, so that the group exists whichever runs first. */
  if (pid > 0 && !j->reads_stdin)
    setpgid (pid, pid);
  if (pid > 0)
    stop_signals_pass_on (pid);
  stop_signals_restore (&saved);
  close (records[1]);
  close (err[1]);
  if (pid == -1) {
    close (j->records_fd);
    close (j->err_fd);
    j->records_fd = j->err_fd = -1;
    errno = saved_errno;
    return -1;
  }
  fcntl (j->records_fd, F_SETFL, O_NONBLOCK);
  fcntl (j->err_fd, F_SETFL, O_NONBLOCK);
  j->pid = pid;
  j->start = now ();
  return 0;
}

/* Take in the complete records read from j's child. */
static void
take_records (struct job *j)
{
  size_t off = 0;

  while (j->records.len - off >= sizeof (struct record_header)) {
    struct record_header h;
    const char *data;

    memcpy (&h, j->records.data + off, sizeof h);
    if (j->records.len - off - sizeof h < h.len)
      break;
    data = j->records.data + off + sizeof h;
    if (h.type == RECORD_PROGRESS && h.len == sizeof (struct progress_record)) {
      struct progress_record p;
      memcpy (&p, data, sizeof p);
      j->done_bytes = p.done;
      j->total_bytes = p.total;
    }
    else if (h.type == RECORD_OUTCOME &&
             h.len >= sizeof (struct outcome_record)) {
      struct outcome_record o;
      size_t rlen = 0, elen;
      memcpy (&o, data, sizeof o);
      if (o.r == 0 && h.len >= sizeof o + RESULT_WIRE_SIZE)
        rlen = RESULT_WIRE_SIZE;
      elen = h.len - sizeof o - rlen;
      j->out.r = rlen ? 0 : -1;
      memset (&j->out.res, 0, sizeof j->out.res);
      j->out.res.name = j->name;
      if (rlen)
        result_decode (data + sizeof o, j->name, &j->out.res);
      free (j->out.error);
      /* NULL without memory, as messages_captured. */
      j->out.error = elen ? strndup (data + sizeof o + rlen, elen) : NULL;
      j->finished = true;
    }
    off += sizeof h + h.len;
  }
  if (off) {
    memmove (j->records.data, j->records.data + off, j->records.len - off);
    j->records.len -= off;
  }
}

bool
job_read (struct job *j, int fd, bool oldest, bool stopping)
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
    if (fd == j->records_fd) {
      if (!buffer_append (&j->records, buf, n)) {
        job_fail (j, "out of memory");
        return false;
      }
      take_records (j);
    }
    /* The oldest job's messages go out as they come; stopping too,
     * its last words (a private nbdkit that would not stop), as
     * nbdsum without -j prints them.  The others' wait their turn.
     */
    else if (oldest) {
      job_print_err (j->held.data, j->held.len);
      j->held.len = 0;
      job_print_err (buf, n);
    }
    else if (!stopping && !buffer_append (&j->held, buf, n))
      return false;
    if ((size_t) n < sizeof buf)
      return true;
  }
}

void
job_reap (struct job *j, bool oldest, bool stopping)
{
  int status = 0;

  close (j->records_fd);
  j->records_fd = -1;
  /* Once reaped its pid may be another process's. */
  stop_signals_forget (j->pid);
  while (waitpid (j->pid, &status, 0) == -1 && errno == EINTR)
    ;
  j->pid = 0;
  /* Servers the child started may still hold its standard error: take
   * what is there, not wait for its end.
   */
  if (j->err_fd >= 0) {
    job_read (j, j->err_fd, oldest, stopping);
    close (j->err_fd);
    j->err_fd = -1;
  }
  if (j->finished || stopping)
    return;
  if (WIFSIGNALED (status))
    job_fail (j, "its job was killed by SIG%s",
              sigabbrev_np (WTERMSIG (status)) ?: "?");
  else
    job_fail (j, "its job ended without a result (exit status %d)",
              WEXITSTATUS (status));
}
