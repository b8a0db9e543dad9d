/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the connections of an input hashed over NBD, and the loop
 * that keeps each connection busy.
 *
 * The inputs that hash over NBD (input-view.c, input-plain-view.c) embed
 * struct endpoint in their state.  endpoint_run gives each connection
 * a thread with its own poll loop keeping up to R requests in flight,
 * asking the input to refill it as requests complete.
 */
#ifndef NBDSUM_ENDPOINT_H
#define NBDSUM_ENDPOINT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libnbd.h>

#include "blkhash.h"
#include "options.h"
#include "progress.h"
#include "source.h"

/* Image bytes a connection takes on at a time: one NBD_CMD_CACHE
 * request server-side, one block status segment client-side.  It also
 * bounds the bytes of reads in flight per connection, and so the size
 * of any request buffer.
 */
#define SPAN_BYTES (UINT64_C (64) * 1024 * 1024)

struct endpoint;

/* Called in connection i's thread while it has fewer than
 * ep->requests in flight: issue one more request on it.  Returns 1 if
 * it did, 0 when there is nothing left to do, -1 on error (after
 * failing the endpoint).
 */
typedef int endpoint_refill_fn (struct endpoint *ep, unsigned i);
/* Before the run, when a bar is drawn: tell ep->progress the image's
 * data bytes, if they can be known (datamap.h).
 */
typedef void endpoint_scan_fn (struct endpoint *ep);

struct conn {
  struct endpoint *ep;
  unsigned index;
  struct nbd_handle *h;
  unsigned in_flight;           /* only its own thread touches it */
  pthread_t thread;
  void *priv;                   /* the input's per-connection state */
};

struct endpoint {
  endpoint_refill_fn *refill;
  endpoint_scan_fn *scan;       /* NULL: the bar counts all bytes */
  bool scan_always;             /* scan even without a bar */
  struct source *src;           /* where the input is; not owned */
  struct conn conns[MAX_CONNECTIONS];
  unsigned nconns;
  unsigned requests;            /* in flight per connection */

  /* The digest and block size in use: points to own_params once it is
   * initialised (from the view header, or from the hash spec).
   */
  const struct blk_params *params;
  struct blk_params own_params;
  uint64_t size, nblocks;       /* the image's */

  struct progress progress;
  atomic_bool failed;
  pthread_mutex_t lock;         /* first_error */
  char *first_error;
  int first_errno;              /* the server's, when it names the cause */
};

/* An asynchronous request on blocks [first, first+count), freed by
 * request_free when libnbd retires it.
 */
struct request {
  struct endpoint *ep;
  struct conn *c;
  uint64_t first, count;
  uint8_t *buf;                 /* read requests only */
  double started;               /* now () when issued */
};
extern struct request *request_new (struct conn *c, uint64_t first,
                                    uint64_t count, size_t buf_size);
extern void request_free (void *opaque);

/* Set up ep, with h as connection 0. */
extern void endpoint_init (struct endpoint *ep, endpoint_refill_fn *refill,
                           struct source *src, struct nbd_handle *h);
/* Close the connections (killing a private server first if requests
 * are still in flight).  src is left open.
 */
extern void endpoint_close (struct endpoint *ep);
/* Close the idle connections but the first n: what is left to read
 * needs one, or none, and descriptors may be few (ulimit -n), or a
 * server admit one client at a time.
 */
extern void endpoint_keep (struct endpoint *ep, unsigned n);
/* Record the first error; the loops stop issuing requests. */
extern void endpoint_fail (struct endpoint *ep, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
/* The same for a view's read of the digests of the image bytes from
 * offset, which the server failed with err: said in the words of our
 * own server's log when it has any (local_server_cause).
 */
extern void endpoint_fail_hash (struct endpoint *ep, uint64_t offset,
                                int err);
/* Open connections 1..C-1 like connection 0, to export_name (NULL:
 * the URI's): C when the server allows multi-conn, else just the one.
 */
extern int endpoint_connect_rest (struct endpoint *ep,
                                  const char *export_name);
/* Run the refill/poll loop on every connection until done,
 * updating progress (after ep->scan).  Returns 0 or -1 (error
 * printed).
 */
extern int endpoint_run (struct endpoint *ep);
/* A read of ep's view after its run failed (source_error says why):
 * print "WHAT: why", why in our own server's words when its log has
 * them, or when it quit alone (local_server_cause); the connections
 * are closed first, as nbdkit exits only once its clients left.
 */
extern void endpoint_read_failed (struct endpoint *ep, const char *what);
/* The same for a read that failed with err, which said said (NULL:
 * err's words); every other connection to the server is closed.
 */
extern void endpoint_report (struct endpoint *ep, const char *what, int err,
                             const char *said);

#endif /* NBDSUM_ENDPOINT_H */
