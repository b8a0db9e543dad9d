/* nbdsum: one input, its connections, and the worker loops.
 *
 * Each connection has a thread with its own poll loop that keeps up to
 * R requests in flight, asking the method (server-side or client-side)
 * for more work as requests complete.
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

#include "nbdsum.h"
#include "viewname.h"

/* How long connections may take to finish their requests after a
 * signal before nbdsum gives up on them.
 */
#define DRAIN_SECONDS 5

/* Where the path of an NBD URI is: after "scheme://authority", up to
 * the query or the fragment.
 */
static void
uri_path (const char *uri, size_t *start, size_t *end)
{
  const char *p = strstr (uri, "://");

  p = p ? p + 3 : uri;
  *start = p - uri + strcspn (p, "/?#");
  *end = *start + strcspn (uri + *start, "?#");
}

static int
hex_value (char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* The export name of an NBD URI as libnbd takes it: the path without
 * its leading '/', percent-decoded.  NULL if out of memory.
 */
static char *
uri_export_name (const char *uri)
{
  size_t start, end;
  char *name, *q;

  uri_path (uri, &start, &end);
  if (start < end && uri[start] == '/')
    start++;
  if ((q = name = malloc (end - start + 1)) == NULL)
    return NULL;
  for (size_t i = start; i < end; i++) {
    if (uri[i] == '%' && i + 2 < end && hex_value (uri[i + 1]) >= 0 &&
        hex_value (uri[i + 2]) >= 0) {
      *q++ = hex_value (uri[i + 1]) * 16 + hex_value (uri[i + 2]);
      i += 2;
    }
    else
      *q++ = uri[i];
  }
  *q = '\0';
  return name;
}

/* uri with its export name replaced, percent-encoded.  NULL if out of
 * memory.
 */
static char *
uri_with_export (const char *uri, const char *export)
{
  static const char unreserved[] = "-._~/";
  size_t start, end;
  char *s, *q;

  uri_path (uri, &start, &end);
  s = malloc (start + 1 + 3 * strlen (export) + strlen (uri + end) + 1);
  if (s == NULL)
    return NULL;
  memcpy (s, uri, start);
  q = s + start;
  *q++ = '/';
  for (const unsigned char *p = (const unsigned char *) export; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
        (*p >= '0' && *p <= '9') || strchr (unreserved, *p))
      *q++ = *p;
    else
      q += sprintf (q, "%%%02X", *p);
  }
  strcpy (q, uri + end);
  return s;
}

/* " --block-size 1M", as blk_view_name_build spells sizes. */
static void
block_size_option (uint64_t bs, char *buf, size_t len)
{
  if (bs % (1 << 20) == 0)
    snprintf (buf, len, " --block-size %" PRIu64 "M", bs >> 20);
  else if (bs % 1024 == 0)
    snprintf (buf, len, " --block-size %" PRIu64 "K", bs >> 10);
  else
    snprintf (buf, len, " --block-size %" PRIu64, bs);
}

/* If export, named by URI uri, is a view name (well formed or not),
 * say what to give instead and return true.
 */
static bool
refuse_view_export (const char *name, const char *uri, const char *export)
{
  struct blk_view_name v, inner;
  const char *msg = NULL, *marker;
  char *image, *image_uri = NULL, bs[48] = "";
  int r;

  r = blk_view_name_parse (export, &v, &msg);
  if (r == 0)
    return false;

  /* The view's image: its base name, unless that is a view name too
   * (NAME@blkhash@blkhash); then what comes before the first marker.
   */
  if (r == 1 && blk_view_name_parse (v.base, &inner, &msg) == 0)
    image = strdup (v.base);
  else {
    if (r == 1)
      blk_view_name_free (&inner);
    marker = strstr (export, BLK_VIEW_MARKER);
    image = strndup (export, marker ? (size_t) (marker - export)
                     : strlen (export));
  }
  if (image)
    image_uri = uri_with_export (uri, image);
  if (r == 1 && v.block_size)
    block_size_option (v.block_size, bs, sizeof bs);

  error_at (name, "export '%s' is a blkhash view, not a disk image", export);
  if (image_uri == NULL)
    error_at (name, "out of memory");
  else
    error_at (name, "use the image's URI instead: '%s'%s%s%s%s", image_uri,
              r == 1 && (v.digest || v.block_size) ? " with" : "",
              r == 1 && v.digest ? " -d " : "",
              r == 1 && v.digest ? v.digest : "", bs);
  if (r == 1)
    blk_view_name_free (&v);
  free (image);
  free (image_uri);
  return true;
}

bool
refuse_view (const char *name)
{
  char *export;
  bool refused;

  if (!is_uri (name))
    return false;
  if ((export = uri_export_name (name)) == NULL) {
    error_at (name, "out of memory");
    return true;
  }
  refused = refuse_view_export (name, name, export);
  free (export);
  return refused;
}

void
endpoint_fail (struct endpoint *ep, const char *fmt, ...)
{
  va_list ap;
  char *msg = NULL;

  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) == -1)
    msg = NULL;
  va_end (ap);
  pthread_mutex_lock (&ep->lock);
  if (ep->first_error == NULL)
    ep->first_error = msg;
  else
    free (msg);
  pthread_mutex_unlock (&ep->lock);
  atomic_store (&ep->failed, true);
}

struct nbd_handle *
endpoint_connect (struct endpoint *ep, const char *export_name, bool go)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL) {
    error_at (ep->name, "%s", nbd_get_error ());
    return NULL;
  }
  if (nbd_set_opt_mode (h, true) == -1 ||
      nbd_set_uri_allow_local_file (h, true) == -1 ||
      nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1 ||
      nbd_connect_uri (h, ep->uri) == -1)
    goto err;

  /* refuse_view read the URI before connecting; libnbd has the last
   * word on the export it names.
   */
  if (export_name == NULL && ep->server == NULL) {
    char *export = nbd_get_export_name (h);
    bool refused;

    if (export == NULL)
      goto err;
    refused = refuse_view_export (ep->name, ep->uri, export);
    free (export);
    if (refused) {
      nbd_close (h);
      return NULL;
    }
  }

  if ((export_name && nbd_set_export_name (h, export_name) == -1) ||
      (go && nbd_opt_go (h) == -1))
    goto err;
  return h;

 err:
  if (ep->server && local_server_exited (ep->server))
    error_at (ep->name, "%s (the private nbdkit serving it exited: see "
              "its messages above)", nbd_get_error ());
  else
    error_at (ep->name, "%s", nbd_get_error ());
  nbd_close (h);
  return NULL;
}

struct endpoint *
endpoint_open (const char *name)
{
  struct endpoint *ep = calloc (1, sizeof *ep);
  int r = 0;

  if (ep == NULL) {
    error_at (name, "out of memory");
    return NULL;
  }
  ep->name = name;
  pthread_mutex_init (&ep->lock, NULL);
  if (refuse_view (name))
    goto err;
  if (is_uri (name))
    ep->uri = strdup (name);
  else {
    ep->server = local_server_start (name, name);
    if (ep->server == NULL)
      goto err;
    ep->uri = strdup (local_server_uri (ep->server));
  }
  if (ep->uri == NULL) {
    error_at (name, "out of memory");
    goto err;
  }

  /* The server hashes if it can; otherwise we do, and say so. */
  if (!opts.client_side)
    r = server_side_ops.open (ep);
  if (r == -1)
    goto err;
  if (r == 0 && client_side_ops.open (ep) == -1)
    goto err;
  return ep;

 err:
  endpoint_close (ep);
  return NULL;
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
      error_at (ep->name, "%u connection%s still had requests in flight "
                "after %d seconds: closing %s anyway", stuck,
                stuck == 1 ? "" : "s", DRAIN_SECONDS,
                stuck == 1 ? "it" : "them");
    local_server_kill (ep->server);
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
  if (ep->negotiating)
    nbd_close (ep->negotiating);
  /* After the handles: nothing can call back into the method now. */
  if (ep->ops && ep->ops->close)
    ep->ops->close (ep);
  local_server_stop (ep->server);
  free (ep->uri);
  free (ep->base_name);
  free (ep->view_name);
  free (ep->first_error);
  pthread_mutex_destroy (&ep->lock);
  free (ep);
}

/* Open connections 1..C-1 like connection 0: C when the server allows
 * multi-conn, else just the one.
 */
int
endpoint_connect_rest (struct endpoint *ep, const char *export_name)
{
  const unsigned want = nbd_can_multi_conn (ep->conns[0].h) == 1
    ? opts.connections : 1;

  ep->conns[0].ep = ep;
  for (ep->nconns = 1; ep->nconns < want; ep->nconns++) {
    struct conn *c = &ep->conns[ep->nconns];
    c->h = endpoint_connect (ep, export_name, true);
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
  pthread_mutex_lock (&a->rs->lock);
  a->rs->running--;
  pthread_cond_signal (&a->rs->cond);
  pthread_mutex_unlock (&a->rs->lock);
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

  progress_init (&ep->progress, ep->name, ep->size);
  /* Signals go to the main thread; the workers hear of them through
   * the pipe, and their syscalls are not interrupted.
   */
  stop_signals_block (&saved);
  for (unsigned i = 0; i < ep->nconns; i++) {
    args[i] = (struct worker_arg) { &ep->conns[i], &rs };
    pthread_mutex_lock (&rs.lock);
    rs.running++;
    pthread_mutex_unlock (&rs.lock);
    if ((r = pthread_create (&ep->conns[i].thread, NULL, conn_loop,
                             &args[i])) != 0) {
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
    if (opts.progress_bar)
      fputc ('\n', stderr);
    return -1;
  }
  if (atomic_load (&ep->failed)) {
    if (opts.progress_bar)
      fputc ('\n', stderr);
    error_at (ep->name, "%s", ep->first_error ? ep->first_error : "failed");
    return -1;
  }
  progress_update (&ep->progress, true);
  return 0;
}
