/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: stopping cleanly on SIGHUP, SIGINT, SIGPIPE and SIGTERM
 * (see signals.h).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "messages.h"
#include "signals.h"

static const int stop_signals[] = { SIGHUP, SIGINT, SIGPIPE, SIGTERM };
static sigset_t handled;                /* those of them we handle */
static volatile sig_atomic_t caught;
static int stop_pipe[2] = { -1, -1 };

static void
on_stop_signal (int sig)
{
  const int saved_errno = errno;

  if (caught == 0) {
    caught = sig;
    /* Non-blocking, and only the first byte matters. */
    ssize_t r = write (stop_pipe[1], "", 1);
    (void) r;
  }
  else if (sig != SIGPIPE) {
    /* Asked twice: end now, as if nbdsum had no handler.  (SIGPIPE
     * comes again with every write to a closed pipe.)
     */
    struct sigaction sa = { .sa_handler = SIG_DFL };
    sigemptyset (&sa.sa_mask);
    sigaction (sig, &sa, NULL);
    raise (sig);
  }
  errno = saved_errno;
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

double
stop_deadline (void)
{
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static double deadline;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&lock);

  if (deadline == 0) {
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);  /* as now () */
    deadline = ts.tv_sec + ts.tv_nsec / 1e9 + DRAIN_SECONDS;
  }
  return deadline;
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
