/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: stopping cleanly on SIGHUP, SIGINT, SIGPIPE and SIGTERM
 * (see signals.h), and the processes the handler itself passes a
 * signal on to (-j jobs) or kills (the servers nbdsum started), and
 * the private sockets and directories it removes, so that none is
 * left behind whatever comes after.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "helpers.h"
#include "messages.h"
#include "options.h"
#include "signals.h"

static const int stop_signals[] = { SIGHUP, SIGINT, SIGPIPE, SIGTERM };
static sigset_t handled;                /* those of them we handle */
static volatile sig_atomic_t caught;
static int stop_pipe[2] = { -1, -1 };

/* Read by the handler: pids (0: a free slot) that a pid_t fits in.
 * Jobs get every stop signal this process gets; servers' process
 * groups are killed when a second signal ends it at once.
 */
#define MAX_SERVERS 16
static volatile sig_atomic_t jobs[MAX_JOBS];
static volatile sig_atomic_t servers[MAX_SERVERS];

/* Read by the handler too: the servers' private sockets and their
 * directories, removed when a second signal ends us (unlink and rmdir
 * are async-signal-safe).  A slot's state is FREE, then BUSY while it
 * is written, READY once the handler may read it.
 */
enum { FREE, BUSY, READY };
static struct private_dir {
  int state;                    /* __atomic_* only */
  char dir[SIGNALS_PATH_MAX], sock[SIGNALS_PATH_MAX];
} private_dirs[MAX_SERVERS];

static void
send_all (volatile sig_atomic_t *pids, size_t n, int sig, bool group)
{
  for (size_t i = 0; i < n; i++) {
    const pid_t pid = pids[i];
    if (pid > 0)
      kill (group ? -pid : pid, sig);
  }
}

/* In the handler: what stop_signals_remove_on_end registered. */
static void
remove_private_dirs (void)
{
  for (size_t i = 0; i < MAX_SERVERS; i++) {
    struct private_dir *d = &private_dirs[i];
    if (__atomic_load_n (&d->state, __ATOMIC_ACQUIRE) == READY) {
      unlink (d->sock);
      rmdir (d->dir);
    }
  }
}

static void
on_stop_signal (int sig)
{
  const int saved_errno = errno;

  if (caught == 0) {
    caught = sig;
    /* Here, not later in the loop: a second signal may end us first. */
    send_all (jobs, MAX_JOBS, sig, false);
    /* Non-blocking, and only the first byte matters. */
    ssize_t r = write (stop_pipe[1], "", 1);
    (void) r;
  }
  else if (sig != SIGPIPE) {
    /* Asked twice: end now, as if nbdsum had no handler, and so do
     * the jobs, told twice too; our servers die first, rather than
     * outlive us or abort on connections gone mid-request.  (SIGPIPE
     * comes again with every write to a closed pipe.)
     */
    struct sigaction sa = { .sa_handler = SIG_DFL };
    send_all (jobs, MAX_JOBS, sig, false);
    send_all (servers, MAX_SERVERS, SIGKILL, true);
    remove_private_dirs ();
    sigemptyset (&sa.sa_mask);
    sigaction (sig, &sa, NULL);
    raise (sig);
  }
  errno = saved_errno;
}

/* pids is the handler's: a slot is written whole (sig_atomic_t). */
static bool
slot_set (volatile sig_atomic_t *pids, size_t n, pid_t old, pid_t pid)
{
  for (size_t i = 0; i < n; i++)
    if (pids[i] == old) {
      pids[i] = pid;
      return true;
    }
  return false;
}

void
stop_signals_pass_on (pid_t pid)
{
  /* At most MAX_JOBS jobs at once: always room. */
  slot_set (jobs, MAX_JOBS, 0, pid);
}

void
stop_signals_kill_on_end (pid_t pgid)
{
  /* Servers at once: one per input of the run, a few. */
  slot_set (servers, MAX_SERVERS, 0, pgid);
}

void
stop_signals_remove_on_end (const char *dir, const char *sock)
{
  if (strlen (dir) >= SIGNALS_PATH_MAX || strlen (sock) >= SIGNALS_PATH_MAX)
    return;
  for (size_t i = 0; i < MAX_SERVERS; i++) {
    struct private_dir *d = &private_dirs[i];
    int expected = FREE;
    if (__atomic_compare_exchange_n (&d->state, &expected, BUSY, false,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      strcpy (d->dir, dir);
      strcpy (d->sock, sock);
      __atomic_store_n (&d->state, READY, __ATOMIC_RELEASE);
      return;
    }
  }
}

void
stop_signals_forget_dir (const char *dir)
{
  for (size_t i = 0; i < MAX_SERVERS; i++) {
    struct private_dir *d = &private_dirs[i];
    if (__atomic_load_n (&d->state, __ATOMIC_ACQUIRE) == READY &&
        strcmp (d->dir, dir) == 0) {
      __atomic_store_n (&d->state, FREE, __ATOMIC_RELEASE);
      return;
    }
  }
}

int
stop_signals_on_parent_death (void)
{
  struct sigaction old;

  /* Left ignored (nbdsum started so), SIGTERM would do nothing. */
  if (sigaction (SIGTERM, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
    return SIGKILL;
  return SIGTERM;
}

void
stop_signals_forget (pid_t pid)
{
  if (pid > 0 && !slot_set (jobs, MAX_JOBS, pid, 0))
    slot_set (servers, MAX_SERVERS, pid, 0);
}

void
catch_stop_signals (void)
{
  struct sigaction sa = { .sa_handler = on_stop_signal };

  if (pipe2 (stop_pipe, O_CLOEXEC | O_NONBLOCK) == -1) {
    fprintf (stderr, "%s: pipe2: %m\n", progname);
    exit (EXIT_FAILURE);
  }
  /* No SA_RESTART: a read from a terminal or a pipe must end too.
   * One handler at a time: a second signal is one too many.
   */
  sigemptyset (&sa.sa_mask);
  for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
    sigaddset (&sa.sa_mask, stop_signals[i]);
  sigemptyset (&handled);
  for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++) {
    struct sigaction old;

    /* Left ignored, as nohup and shells' background jobs expect. */
    if (sigaction (stop_signals[i], NULL, &old) == 0 &&
        old.sa_handler == SIG_IGN)
      continue;
    if (sigaction (stop_signals[i], &sa, NULL) == 0)
      sigaddset (&handled, stop_signals[i]);
  }
}

void
stop_signals_renew (void)
{
  /* The parent's jobs and servers are not this job's. */
  for (size_t i = 0; i < MAX_JOBS; i++)
    jobs[i] = 0;
  for (size_t i = 0; i < MAX_SERVERS; i++) {
    servers[i] = 0;
    __atomic_store_n (&private_dirs[i].state, FREE, __ATOMIC_RELEASE);
  }
  if (pipe2 (stop_pipe, O_CLOEXEC | O_NONBLOCK) == -1) {
    fprintf (stderr, "%s: pipe2: %m\n", progname);
    _exit (EXIT_FAILURE);
  }
}

int
stop_signal (void)
{
  return caught;
}

int
stop_fd (void)
{
  return stop_pipe[0];
}

int
stop_signals_open (const char *path, int flags)
{
  struct pollfd fds[2];
  struct stat st;
  int fd, fl, err;

  /* Only a FIFO read waits for the other end. */
  if ((flags & O_ACCMODE) != O_RDONLY || stat (path, &st) == -1 ||
      !S_ISFIFO (st.st_mode))
    return open (path, flags);
  if ((fd = open (path, flags | O_NONBLOCK)) == -1)
    return -1;
  /* A writer, as a blocking open(2) waits for (no event until one
   * comes), or a signal, even one that came before poll (the pipe).
   */
  for (;;) {
    if (stop_signal ()) {
      close (fd);
      errno = EINTR;
      return -1;
    }
    fds[0] = (struct pollfd) { .fd = fd, .events = POLLIN };
    fds[1] = (struct pollfd) { .fd = stop_fd (), .events = POLLIN };
    if (poll (fds, 2, -1) == -1 && errno != EINTR)
      goto err;
    if (fds[0].revents)
      break;
  }
  if ((fl = fcntl (fd, F_GETFL)) == -1 ||
      fcntl (fd, F_SETFL, fl & ~O_NONBLOCK) == -1)
    goto err;
  return fd;

 err:
  err = errno;
  close (fd);
  errno = err;
  return -1;
}

double
stop_deadline (void)
{
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static double deadline;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&lock);

  if (deadline == 0)
    deadline = now () + DRAIN_SECONDS;
  return deadline;
}

int
stop_poll_timeout (void)
{
  double left;

  if (!stop_signal ())
    return -1;
  left = stop_deadline () - now ();
  return left <= 0 ? 0 : (int) (left * 1000) + 1;
}

void
stop_signals_block (sigset_t *saved)
{
  pthread_sigmask (SIG_BLOCK, &handled, saved);
}

void
stop_signals_restore (const sigset_t *saved)
{
  pthread_sigmask (SIG_SETMASK, saved, NULL);
}

void
stop_signals_default (void)
{
  for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
    if (sigismember (&handled, stop_signals[i]))
      signal (stop_signals[i], SIG_DFL);
}

/* Everything is closed and cleaned up: end as the signal would have
 * ended us, so that shells and callers see it (and say nothing about
 * SIGPIPE).
 */
void
die_of_signal (int sig)
{
  sigset_t set;

  signal (sig, SIG_DFL);
  sigemptyset (&set);
  sigaddset (&set, sig);
  pthread_sigmask (SIG_UNBLOCK, &set, NULL);
  raise (sig);
  _exit (128 + sig);
}
