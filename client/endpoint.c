/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: one input being hashed, its connections, and the worker
 * loops (see endpoint.h).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "endpoint.h"
#include "local.h"
#include "messages.h"
#include "options.h"
#include "signals.h"

/* How long connections may take to finish their requests after a
 * signal before nbdsum gives up on them.
 */
#define DRAIN_SECONDS 5

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
endpoint_init (struct endpoint *ep, const struct method_ops *ops,
               struct source *src, struct nbd_handle *h)
{
  ep->ops = ops;
  ep->src = src;
  ep->conns[0] = (struct conn) { .ep = ep, .index = 0, .h = h };
  ep->nconns = 1;
  ep->requests = opts->requests;
  pthread_mutex_init (&ep->lock, NULL);
}

void
endpoint_close (struct endpoint *ep)
{
  unsigned stuck = 0;

  if (ep == NULL)
    return;

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
      if (nbd_aio_is_ready (h) && nbd_aio_in_flight (h) == 0)
        nbd_shutdown (h, 0);
      nbd_close (h);
    }
  }
  free (ep->first_error);
  free (ep->data_export);
  progress_free (&ep->progress);
  pthread_mutex_destroy (&ep->lock);
  /* After the handles: nothing can call back into the method now.
   * Last: it frees ep.
   */
  ep->ops->close (ep);
}

int
endpoint_connect_rest (struct endpoint *ep, const char *export_name)
{
  const unsigned want = nbd_can_multi_conn (ep->conns[0].h) == 1
    ? opts->connections : 1;

  for (ep->nconns = 1; ep->nconns < want; ep->nconns++) {
    struct conn *c = &ep->conns[ep->nconns];
    c->h = source_connect (ep->src, export_name, true);
    if (c->h == NULL)
      return -1;
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

/* Wait until the server (or, before any came, a signal) needs us, and
 * let libnbd move on: like nbd_poll, but a signal wakes it.  timeout
 * in ms, -1 for none.  Returns 0, or -1 after failing the endpoint.
 */
static int
conn_poll (struct conn *c, int timeout)
{
  struct endpoint *ep = c->ep;
  const unsigned dir = nbd_aio_get_direction (c->h);
  struct pollfd fds[2];
  int r;

  fds[0].fd = nbd_aio_get_fd (c->h);
  fds[0].events = 0;
  fds[0].revents = 0;
  if (dir & LIBNBD_AIO_DIRECTION_READ)
    fds[0].events |= POLLIN;
  if (dir & LIBNBD_AIO_DIRECTION_WRITE)
    fds[0].events |= POLLOUT;
  if (fds[0].fd == -1 || fds[0].events == 0) {
    endpoint_fail (ep, "the connection to the server was lost");
    return -1;
  }
  /* The pipe stays readable once a signal came: then only the server. */
  fds[1].fd = stop_signal () ? -1 : stop_fd ();
  fds[1].events = POLLIN;
  fds[1].revents = 0;

  r = poll (fds, 2, timeout);
  if (r == -1) {
    if (errno == EINTR)
      return 0;
    endpoint_fail (ep, "poll: %s", strerror (errno));
    return -1;
  }
  /* Not both notifications: the first may change what the second
   * means.  Replies first, as nbd_poll does.
   */
  if (fds[0].revents & (POLLIN | POLLHUP))
    r = nbd_aio_notify_read (c->h);
  else if (fds[0].revents & POLLOUT)
    r = nbd_aio_notify_write (c->h);
  else if (fds[0].revents & (POLLERR | POLLNVAL)) {
    endpoint_fail (ep, "the server closed the connection");
    return -1;
  }
  else
    r = 0;
  if (r == -1) {
    endpoint_fail (ep, "%s", nbd_get_error ());
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
  double deadline = 0;

  for (;;) {
    int timeout = -1;

    while (!atomic_load (&ep->failed) && !stop_signal () &&
           c->in_flight < ep->requests)
      if (ep->ops->refill (ep, c->index) <= 0)
        break;
    if (c->in_flight == 0)
      break;
    /* After a signal, the requests in flight get DRAIN_SECONDS to
     * finish; endpoint_close deals with any left.
     */
    if (stop_signal ()) {
      const double t = now ();
      if (deadline == 0)
        deadline = t + DRAIN_SECONDS;
      if (t >= deadline)
        break;
      timeout = (deadline - t) * 1000 + 1;
    }
    if (conn_poll (c, timeout) == -1)
      break;
  }
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&a->rs->lock);
  a->rs->running--;
  pthread_cond_signal (&a->rs->cond);
  return NULL;
}

/* For the bar: the image's extents, from connection 0 unless that is
 * a view, else from a connection of their own, closed at once.
 * Quietly: without them the bar counts all bytes.
 */
static void
scan_extents (struct endpoint *ep)
{
  struct nbd_handle *h = ep->conns[0].h;

  if (ep->data_export) {
    if ((h = nbd_create ()) == NULL)
      return;
    if (nbd_set_opt_mode (h, true) == -1 ||
        nbd_set_uri_allow_local_file (h, true) == -1 ||
        nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1 ||
        nbd_connect_uri (h, ep->src->uri) == -1 ||
        nbd_set_export_name (h, ep->data_export) == -1 ||
        nbd_opt_go (h) == -1 ||
        nbd_get_size (h) != (int64_t) ep->size) {
      nbd_close (h);
      return;
    }
  }
  progress_scan (&ep->progress, h, ep->params->block_size);
  if (h != ep->conns[0].h) {
    nbd_shutdown (h, 0);
    nbd_close (h);
  }
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
  if (opts->progress_bar)
    scan_extents (ep);
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
    if (opts->progress_bar)
      fputc ('\n', stderr);
    return -1;
  }
  if (atomic_load (&ep->failed)) {
    if (opts->progress_bar)
      fputc ('\n', stderr);
    error_at (ep->src->name, "%s", ep->first_error ? ep->first_error : "failed");
    return -1;
  }
  progress_update (&ep->progress, true);
  return 0;
}
