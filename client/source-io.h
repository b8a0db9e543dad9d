/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the calls on a connection (source-io.c). */
#ifndef NBDSUM_SOURCE_IO_H
#define NBDSUM_SOURCE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libnbd.h>

/* libnbd's blocking calls, made of its asynchronous ones and one poll
 * loop that also wakes for signals: a signal ends a connection or an
 * option at once, and a request at stop_deadline if it is not
 * answered by then.  After a signal none starts.  They return 0, or
 * -1 with source_error and source_errno saying why, in the calling
 * thread; after a signal, EINTR and nothing to print.  A call cut
 * short (by a signal, a timeout, a lost connection) leaves h only good
 * for nbd_close; a refusal leaves it as it was.
 */
/* NBD_OPT_GO and NBD_OPT_INFO for the export name set on h, by
 * deadline (0: no limit).  A refusal has the server's errno (ENOENT:
 * no such export).
 */
extern int source_go (struct nbd_handle *h, double deadline);
extern int source_info (struct nbd_handle *h, double deadline);
extern int source_pread (struct nbd_handle *h, void *buf, size_t count,
                         uint64_t offset);
extern int source_block_status (struct nbd_handle *h, uint64_t count,
                                uint64_t offset, nbd_extent_callback cb);
/* Say goodbye (NBD_CMD_DISC, or NBD_OPT_ABORT while negotiating) if
 * nothing is in flight, and give the server a moment to hang up: not
 * nbd_shutdown, which waits for ever.  h is still to be closed.
 */
extern void source_shutdown (struct nbd_handle *h);
/* Wait until h needs us, timeout ms pass (-1: no limit) or, unless
 * one came already, a signal, and let libnbd move on: nbd_poll, but
 * a signal wakes it, and requests waiting longer than --reply-timeout
 * on a silent server fail it.  The worker loops keep their requests
 * in flight with it.
 */
extern int source_poll (struct nbd_handle *h, int timeout);
/* Why the last call failed in this thread: nbdsum's reason if it was
 * one of these, else libnbd's.
 */
extern const char *source_error (void);
extern int source_errno (void);
/* What to add to source_error to say the cause, when nbdsum knows it
 * better than libnbd ("" if not): a server that requires TLS.
 */
extern const char *source_hint (struct nbd_handle *h);

/* nbd_connect_uri by deadline (0: no limit), for source_connect. */
extern int source_connect_uri (struct nbd_handle *h, const char *uri,
                               double deadline);
/* Did the last source_connect_uri in this thread fail because the
 * server closed the connection before its greeting was read (not a
 * timeout, a signal or a refused connect)?
 */
extern bool source_closed_ungreeted (void);
/* Note one of libnbd's debug messages of a handle being connected:
 * libnbd 1.14's state transitions say whether the greeting was read
 * (SOURCE_DEBUG_CONNECTING: debug is on while connecting for them).
 */
extern void source_connect_debug (const char *msg);
#ifdef HAVE_NBD_STATS_BYTES_RECEIVED
#define SOURCE_DEBUG_CONNECTING 0
#else
#define SOURCE_DEBUG_CONNECTING 1
#endif
/* Did the last call fail because the server closed or reset the
 * connection (libnbd's words for it vary)?
 */
extern bool source_hung_up (void);
/* What nbdsum says of it. */
#define SOURCE_UNGREETED "the server closed the connection before greeting it"
/* A connection that a server closed before its greeting (one that
 * admits a client at a time frees its slot late) is tried again after
 * 50 ms, then twice as long each time, while the next try comes within
 * SOURCE_RETRY_SECONDS and --connect-timeout of the first try's start:
 * the tries together are one connection's.  By source_connect, and
 * input-front.c for the private nbdkit's.
 */
#define SOURCE_RETRY_SECONDS 5
struct source_retry {
  double first;                 /* the first try began (the caller's) */
  double pause;                 /* the last wait, 0 before it */
};
/* Wait for the next try (true), or false: no time left for one, or a
 * stop signal came (stop_signal says which).
 */
extern bool source_retry_wait (struct source_retry *r);
/* When --connect-timeout runs out for r's tries (0: never). */
extern double source_retry_deadline (const struct source_retry *r);
/* Forget why the last call failed: the next error is libnbd's. */
extern void source_error_clear (void);

#endif /* NBDSUM_SOURCE_IO_H */
