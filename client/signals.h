/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: SIGHUP, SIGINT, SIGPIPE and SIGTERM only record the signal,
 * pass it on to the -j jobs and make a pipe readable to wake the poll
 * loops.  nbdsum then issues no new requests, lets those in flight
 * finish, disconnects, stops its private servers and dies of the
 * signal: nbdkit 1.32 aborts when a client vanishes with requests in
 * flight.  A second one ends nbdsum at once, its servers killed first
 * (their sockets and directories removed) and its jobs told twice.
 */
#ifndef NBDSUM_SIGNALS_H
#define NBDSUM_SIGNALS_H

#include <signal.h>
#include <sys/types.h>

/* How long the requests in flight get to be answered after a signal. */
#define DRAIN_SECONDS 5

/* Install the handlers (exits on failure). */
extern void catch_stop_signals (void);
/* In a child process that keeps the handlers (a -j job), with the
 * handled signals blocked since before fork and the inherited pipe's
 * descriptors closed: a pipe of its own, so that its signals wake it
 * and not its parent, and none of the parent's processes to pass
 * signals on to or kill (exits on failure).
 */
extern void stop_signals_renew (void);
/* The handler passes each stop signal on to pid (a -j job, in a
 * process group of its own), from the first: a second one, which ends
 * this process at once, ends the job at once too.  Call with the
 * signals blocked since before fork.
 */
extern void stop_signals_pass_on (pid_t pid);
/* A second signal, which ends this process at once, first kills the
 * process group pgid (a server it started, and what that started).
 */
extern void stop_signals_kill_on_end (pid_t pgid);
/* The longest path (with its NUL) stop_signals_remove_on_end keeps: a
 * Unix socket's.
 */
#define SIGNALS_PATH_MAX 108
/* A second signal, which ends this process at once, also removes the
 * socket sock and then the directory dir (a private server's), after
 * killing the servers; until stop_signals_forget_dir (dir), called once
 * they are removed.  Paths longer than SIGNALS_PATH_MAX are not kept.
 */
extern void stop_signals_remove_on_end (const char *dir, const char *sock);
extern void stop_signals_forget_dir (const char *dir);
/* What a child should get when this process dies (PR_SET_PDEATHSIG):
 * SIGTERM, to stop as on a signal, unless it is ignored.
 */
extern int stop_signals_on_parent_death (void);
/* Before pid is reaped (it may then be reused): neither any more. */
extern void stop_signals_forget (pid_t pid);
/* The signal caught, or 0. */
extern int stop_signal (void);
/* Readable once a signal was caught (-1 before they are handled). */
extern int stop_fd (void);
/* open(2), except that a stop signal ends the wait for a FIFO's writer
 * (-1, EINTR), even one that came a moment before: a blocking open
 * would not see it.
 */
extern int stop_signals_open (const char *path, int flags);
/* After a signal: when the requests still in flight are given up on,
 * DRAIN_SECONDS after the first call (one deadline for every
 * connection and thread), in now ()'s seconds.
 */
extern double stop_deadline (void);
/* A poll's timeout in ms for requests in flight: -1 (none) before a
 * signal, after it what is left until stop_deadline, 0 once passed.
 */
extern int stop_poll_timeout (void);
/* Block the handled signals in this thread (to create threads or
 * processes that must not run the handler), and restore the mask.
 */
extern void stop_signals_block (sigset_t *saved);
extern void stop_signals_restore (const sigset_t *saved);
/* In a child about to exec: the default actions again. */
extern void stop_signals_default (void);
/* Everything is closed and cleaned up: end as the signal would have
 * ended us.
 */
extern void die_of_signal (int sig) __attribute__ ((noreturn));

#endif /* NBDSUM_SIGNALS_H */
