/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: SIGHUP, SIGINT, SIGPIPE and SIGTERM only record the signal
 * and make a pipe readable to wake the poll loops.  nbdsum then issues
 * no new requests, lets those in flight finish, disconnects, stops its
 * private servers and dies of the signal: nbdkit 1.32 aborts when a
 * client vanishes with requests in flight.
 */
#ifndef NBDSUM_SIGNALS_H
#define NBDSUM_SIGNALS_H

#include <signal.h>

/* How long the requests in flight get to be answered after a signal. */
#define DRAIN_SECONDS 5

/* Install the handlers (exits on failure). */
extern void catch_stop_signals (void);
/* In a child process that keeps the handlers (a -j job), with the
 * handled signals blocked since before fork and the inherited pipe's
 * descriptors closed: a pipe of its own, so that its signals wake it
 * and not its parent (exits on failure).
 */
extern void stop_signals_renew (void);
/* The signal caught, or 0. */
extern int stop_signal (void);
/* Readable once a signal was caught (-1 before they are handled). */
extern int stop_fd (void);
/* After a signal: when the requests still in flight are given up on,
 * DRAIN_SECONDS after the first call (one deadline for every
 * connection and thread), in now ()'s seconds.
 */
extern double stop_deadline (void);
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
