/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: one input being hashed, its connections, and the worker
 * loops (see endpoint.h).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "endpoint.h"
#include "helpers.h"
#include "local.h"
#include "messages.h"
#include "options.h"
#include "signals.h"

void
endpoint_fail (struct endpoint *ep, const char *fmt, ...)
{
  va_list ap;
  char *msg = NULL;

  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) == -1)
    msg = NULL;
  va_end (ap);
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&ep->lock);
    if (ep->first_error == NULL)
      ep->first_error = msg;
    else
      free (msg);
  }
  atomic_store (&ep->failed, true);
}

void
endpoint_fail_hash (struct endpoint *ep, uint64_t offset, int err)
{
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&ep->lock);
    if (ep->first_error == NULL)
      ep->first_errno = err;
  }
  endpoint_fail (ep, "server failed to hash image bytes from %" PRIu64,
                 offset);
}

void
endpoint_init (struct endpoint *ep, endpoint_refill_fn *refill,
               struct source *src, struct nbd_handle *h)
{
  ep->refill = refill;
  ep->src = src;
  ep->conns[0] = (struct conn) { .ep = ep, .index = 0, .h = h };
  ep->nconns = 1;
  ep->requests = opts->requests;
  pthread_mutex_init (&ep->lock, NULL);
}

void
endpoint_keep (struct endpoint *ep, unsigned n)
{
  for (unsigned i = n; i < MAX_CONNECTIONS; i++) {
    struct nbd_handle *h = ep->conns[i].h;
    if (h && nbd_aio_in_flight (h) == 0) {
      source_shutdown (h);
      nbd_close (h);
      ep->conns[i].h = NULL;
    }
  }
  ep->nconns = n;
}

/* Close the connections: a failed run's before its server is asked
 * why (local_server_cause stops it, and nbdkit waits for its clients
 * to leave before it exits).
 */
static void
endpoint_hang_up (struct endpoint *ep)
{
  unsigned stuck = 0;

  /* Requests still in flight: a signal came and the server did not
   * answer them in time, or a connection failed.  Our own server is
   * killed before it sees its client vanish under them (nbdkit 1.32
   * aborts then).
   */
  for (unsigned i = 0; i < MAX_CONNECTIONS; i++)
    if (ep->conns[i].h && nbd_aio_in_flight (ep->conns[i].h) > 0)
      stuck++;
  if (stuck) {
    if (stop_signal ())
      error_at (ep->src->name, "%u connection%s still had requests in flight "
                "after %d seconds: closing %s anyway", stuck,
                stuck == 1 ? "" : "s", DRAIN_SECONDS,
                stuck == 1 ? "it" : "them");
    local_server_kill (ep->src->server);
  }
  for (unsigned i = 0; i < MAX_CONNECTIONS; i++) {
    struct nbd_handle *h = ep->conns[i].h;
    if (h) {
      /* Idle: say goodbye (NBD_CMD_DISC) rather than just hang up. */
      source_shutdown (h);
      nbd_close (h);
      ep->conns[i].h = NULL;
    }
  }
}

void
endpoint_close (struct endpoint *ep)
{
  if (ep == NULL)
    return;
  endpoint_hang_up (ep);
  free (ep->first_error);
  pthread_mutex_destroy (&ep->lock);
}

int
endpoint_connect_rest (struct endpoint *ep, const char *export_name)
{
  const unsigned want = nbd_can_multi_conn (ep->conns[0].h) == 1 &&
    !ep->src->single ? opts->connections : 1;

  for (ep->nconns = 1; ep->nconns < want; ep->nconns++) {
    struct conn *c = &ep->conns[ep->nconns];
    const off_t mark = local_server_log_mark (ep->src->server);
    c->h = source_connect (ep->src, export_name,
                           SOURCE_GO | SOURCE_QUIET | SOURCE_EXTRA,
                           NULL);
    if (c->h == NULL && stop_signal ())
      return -1;
    /* Out of descriptors (ulimit -n), or a server that admits fewer
     * clients (nbdkit --filter=limit): fewer connections hash the
     * same.  A server gone fails the first request.
     */
    if (c->h == NULL) {
      /* Our private nbdkit refuses it when the server behind refused
       * its nbd plugin: its log says why.
       */
      char *why = local_server_refusal (ep->src->server, mark);
      if (source_errno () != EMFILE)
        notice_at (ep->src->name, "the server took %u of %u connections "
                   "(%s): hashing over %u", ep->nconns, want,
                   why ? why : source_error (), ep->nconns);
      free (why);
      break;
    }
    c->ep = ep;
    c->index = ep->nconns;
  }
  return 0;
}

struct request *
request_new (struct conn *c, uint64_t first, uint64_t count, size_t buf_size)
{
  struct request *r = calloc (1, sizeof *r);

  if (r == NULL || (buf_size && (r->buf = malloc (buf_size)) == NULL)) {
    free (r);
    endpoint_fail (c->ep, "out of memory");
    return NULL;
  }
  r->ep = c->ep;
  r->c = c;
  r->first = first;
  r->count = count;
  r->started = now ();
  return r;
}

void
request_free (void *opaque)
{
  struct request *r = opaque;

  free (r->buf);
  free (r);
}

struct run_state {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned running;
};

struct worker_arg {
  struct conn *c;
  struct run_state *rs;
};

/* source_poll for a worker: a failure fails the endpoint. */
static int
conn_poll (struct conn *c, int timeout)
{
  if (source_poll (c->h, timeout) == -1) {
    endpoint_fail (c->ep, "%s", source_error ());
    return -1;
  }
  return 0;
}

static void *
conn_loop (void *opaque)
{
  struct worker_arg *a = opaque;
  struct conn *c = a->c;
  struct endpoint *ep = c->ep;

  for (;;) {
    int timeout;

    while (!atomic_load (&ep->failed) && !stop_signal () &&
           c->in_flight < ep->requests)
      if (ep->refill (ep, c->index) <= 0)
        break;
    if (c->in_flight == 0)
      break;
    /* After a signal, the requests in flight get until stop_deadline
     * to finish; endpoint_close deals with any left.
     */
    if ((timeout = stop_poll_timeout ()) == 0)
      break;
    if (conn_poll (c, timeout) == -1)
      break;
  }
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&a->rs->lock);
  a->rs->running--;
  pthread_cond_signal (&a->rs->cond);
  return NULL;
}

int
endpoint_run (struct endpoint *ep)
{
  struct run_state rs = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0
  };
  struct worker_arg args[MAX_CONNECTIONS];
  unsigned started = 0;
  sigset_t saved;
  int r;

  progress_init (&ep->progress, ep->src->name, ep->size);
  /* The data bytes there are: for the bar, and where the input sizes
   * its requests by them (scan_always).  The rate is the hashing's,
   * after that.
   */
  if (ep->scan && (ep->scan_always || progress_drawn ())) {
    ep->scan (ep);
    ep->progress.start = now ();
  }
  /* Signals go to the main thread; the workers hear of them through
   * the pipe, and their syscalls are not interrupted.
   */
  stop_signals_block (&saved);
  for (unsigned i = 0; i < ep->nconns; i++) {
    args[i] = (struct worker_arg) { &ep->conns[i], &rs };
    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&rs.lock);
      rs.running++;
    }
    if ((r = pthread_create (&ep->conns[i].thread, NULL, conn_loop,
                             &args[i])) != 0) {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&rs.lock);
      rs.running--;
      endpoint_fail (ep, "pthread_create: %s", strerror (r));
      break;
    }
    started++;
  }
  stop_signals_restore (&saved);

  /* The main thread only reports progress. */
  pthread_mutex_lock (&rs.lock);
  while (rs.running > 0) {
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait (&rs.cond, &rs.lock, &ts);
    pthread_mutex_unlock (&rs.lock);
    progress_update (&ep->progress, false);
    pthread_mutex_lock (&rs.lock);
  }
  pthread_mutex_unlock (&rs.lock);
  for (unsigned i = 0; i < started; i++)
    pthread_join (ep->conns[i].thread, NULL);

  /* Interrupted: no checksum, and nothing to report. */
  if (stop_signal ()) {
    progress_abandon (&ep->progress);
    return -1;
  }
  if (atomic_load (&ep->failed)) {
    char *cause, *behind;

    endpoint_hang_up (ep);
    cause = local_server_cause (ep->src->server, ep->first_errno);
    /* Our filter in front of our qemu-nbd (--since of a local file):
     * qemu says why, and the status connection reads it directly.
     */
    if (ep->src->behind &&
        (behind = local_server_cause (ep->src->behind->server, 0)) != NULL) {
      free (cause);
      cause = behind;
    }
    /* What our own server saw stands for the errno it sent, or after
     * a message that has none.
     */
    const char *why = cause ? cause
      : ep->first_errno ? strerror (ep->first_errno) : NULL;

    progress_abandon (&ep->progress);
    error_at (ep->src->name, "%s%s%s",
              ep->first_error ? ep->first_error : "failed",
              why == NULL ? "" : ep->first_errno ? ": " : "; ",
              why ? why : "");
    free (cause);
    return -1;
  }
  progress_update (&ep->progress, true);
  return 0;
}

void
endpoint_read_failed (struct endpoint *ep, const char *what)
{
  char *said = strdup (source_error ());

  endpoint_report (ep, what, source_errno (), said);
  free (said);
}

void
endpoint_report (struct endpoint *ep, const char *what, int err,
                 const char *said)
{
  char *cause = NULL;

  if (ep->src->server) {
    endpoint_hang_up (ep);
    cause = local_server_cause (ep->src->server, err);
  }
  error_at (ep->src->name, "%s: %s", what,
            cause ? cause : said ? said : strerror (err));
  free (cause);
}
