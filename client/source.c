/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: where an input is served (see source.h): URIs checked for
 * views, files served by a private nbdkit, connections to either, and
 * the one loop that waits on them.
 */
#include <config.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "http-probe.h"
#include "local.h"
#include "messages.h"
#include "names.h"
#include "options.h"
#include "progress.h"
#include "signals.h"
#include "source.h"
#include "util.h"
#include "viewname.h"

/* How long a server may take to hang up once told to. */
#define HANGUP_SECONDS 2

/* Why the last source_* call failed in this thread when the reason is
 * nbdsum's (a signal, a timeout, a lost connection); NULL: libnbd's.
 */
static _Thread_local const char *failure;
static _Thread_local int failure_errno;
static _Thread_local char failure_buf[512];

static int __attribute__ ((format (printf, 2, 3)))
fail (int err, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (failure_buf, sizeof failure_buf, fmt, ap);
  va_end (ap);
  failure = failure_buf;
  failure_errno = err;
  return -1;
}

const char *
source_error (void)
{
  const char *msg = failure ? failure : nbd_get_error ();

  return msg ? msg : "unknown error";
}

int
source_errno (void)
{
  return failure ? failure_errno : nbd_get_errno ();
}

const char *
source_hint (struct nbd_handle *h)
{
  /* A server refuses every option but STARTTLS with TLS_REQD, which
   * libnbd before 1.16 only calls "Operation not supported".
   */
  if (source_errno () == ENOTSUP && nbd_get_tls (h) == LIBNBD_TLS_DISABLE &&
      nbd_aio_is_negotiating (h))
    return ": the server requires TLS: use an nbds:// URI with "
      "tls-psk-file= or tls-certificates=";
  return "";
}

/* Views are refused before nbdsum connects anywhere (nbdsum(1),
 * INPUTS), which needs the export name of a URI first; libnbd reads a
 * URI only inside nbd_connect_uri, which connects.  So helpers.c reads
 * the path as libnbd does, and libnbd keeps the last word:
 * source_connect checks the export name it got again.
 */

/* If export, named by URI uri, is a view name (well formed or not),
 * say what to give instead and return true.
 */
static bool
refuse_view_export (const char *name, const char *uri, const char *export)
{
  struct blk_view_name v, inner;
  const char *marker;
  char *image, *image_uri = NULL, bs[48] = "";
  bool is_view, inner_view, parsed;

  parsed = blk_view_name_parse (export, &v, &is_view) == NULL;
  if (!is_view)
    return false;

  /* The view's image: its base name, unless that is a view name too
   * (NAME@blkhash@blkhash); then what comes before the first marker.
   */
  if (parsed && blk_view_name_parse (v.base, &inner, &inner_view) == NULL &&
      !inner_view)
    image = strdup (v.base);
  else {
    if (parsed)
      blk_view_name_free (&inner);
    marker = strstr (export, parsed && v.plain ? BLK_PLAIN_MARKER
                     : BLK_VIEW_MARKER);
    image = strndup (export, marker ? (size_t) (marker - export)
                     : strlen (export));
  }
  if (image)
    image_uri = uri_with_export (uri, image);
  if (parsed && v.block_size) {
    char spelt[BLK_BLOCK_SIZE_STR_MAX];
    snprintf (bs, sizeof bs, " --block-size %s",
              blk_format_block_size (v.block_size, spelt));
  }

  error_at (name, "export '%s' is a %s view, not a disk image", export,
            parsed && v.plain ? "plain-digest" : "blkhash");
  if (image_uri == NULL)
    error_at (name, "out of memory");
  else
    error_at (name, "use the image's URI instead: '%s'%s%s%s%s", image_uri,
              parsed && (v.digest || v.block_size) ? " with" : "",
              parsed && v.digest ? v.plain ? " --plain=" : " -d " : "",
              parsed && v.digest ? v.digest : "", bs);
  if (parsed)
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

  if (!name_is_uri (name))
    return false;
  if ((export = uri_export_name (name)) == NULL) {
    error_at (name, "out of memory");
    return true;
  }
  refused = refuse_view_export (name, name, export);
  free (export);
  return refused;
}

/* Does the server of src's URL serve it (asked once before its views,
 * so that a 404 reads as one, not as a missing view), answering a
 * range as the curl plugin needs (http-probe.c)?  0, or -1 (error
 * printed).
 */
static int
http_check (const struct source *src)
{
  double deadline;
  struct nbd_handle *h = source_connect (src, NULL, 0, &deadline);
  int64_t size;
  char *said;

  if (h == NULL)
    return -1;
  /* NBD_OPT_INFO opens the plugin: curl asks the server (HEAD). */
  if (source_info (h, deadline) == -1) {
    if (!stop_signal ()) {
      said = local_http_message (src->server);
      error_at (src->name, "%s", said ? said : source_error ());
      free (said);
    }
    nbd_close (h);
    return -1;
  }
  size = nbd_get_size (h);
  source_shutdown (h);
  nbd_close (h);
  if (size < 0)
    return -1;
  /* Over every limit: the view refuses it, naming the option. */
  if ((uint64_t) size > options_max_size (false))
    return 0;
  /* The plugin trusts whatever a GET returns: nbdsum does not. */
  return http_probe (src->name, size);
}

/* source_open, a file read as format, and with bitmap a file is
 * qemu-nbd's.
 */
static struct source *
open_source (const char *name, const char *format, const char *bitmap)
{
  struct source *src;
  enum name_kind kind;

  if (refuse_view (name))
    return NULL;
  if ((src = calloc (1, sizeof *src)) == NULL) {
    error_at (name, "out of memory");
    return NULL;
  }
  src->name = name;
  kind = name_kind (name);
  if (kind == NAME_URI)
    src->uri = strdup (name);
  else if (kind == NAME_HTTP) {
    if ((src->server = local_server_start_http (name, format)) == NULL)
      goto err;
    src->uri = strdup (local_server_uri (src->server));
  }
  else if (kind == NAME_COMMAND) {
    src->server = local_server_start_command (name, name_command (name));
    if (src->server == NULL)
      goto err;
    src->uri = strdup (local_server_uri (src->server));
  }
  else {
    src->server = bitmap ? local_server_start_bitmap (name, name, bitmap)
      : local_server_start (name, name, format);
    if (src->server == NULL)
      goto err;
    src->uri = strdup (local_server_uri (src->server));
  }
  if (src->uri == NULL) {
    error_at (name, "out of memory");
    goto err;
  }
  if (kind == NAME_HTTP && http_check (src) == -1)
    goto err;
  return src;

 err:
  source_close (src);
  return NULL;
}

struct source *
source_open (const char *name)
{
  return open_source (name, NULL, NULL);
}

struct source *
source_open_as (const char *name, const char *format)
{
  return open_source (name, format, NULL);
}

struct source *
source_open_bitmap (const char *name, const char *bitmap)
{
  return open_source (name, NULL, bitmap);
}

struct source *
source_open_front (struct source *behind)
{
  struct source *src = calloc (1, sizeof *src);

  if (src == NULL) {
    error_at (behind->name, "out of memory");
    source_close (behind);
    return NULL;
  }
  src->name = behind->name;
  src->behind = behind;
  src->single = behind->single;
  if ((src->server = local_server_start_front (src->name, behind->uri))
      == NULL)
    goto err;
  if ((src->uri = strdup (local_server_uri (src->server))) == NULL) {
    error_at (src->name, "out of memory");
    goto err;
  }
  return src;

 err:
  source_close (src);
  return NULL;
}

void
source_close (struct source *src)
{
  if (src == NULL)
    return;
  /* The filter first: it is a client of the server behind. */
  local_server_stop (src->server);
  source_close (src->behind);
  free (src->uri);
  free (src);
}

int
source_poll (struct nbd_handle *h, int timeout)
{
  const unsigned dir = nbd_aio_get_direction (h);
  struct pollfd fds[2];
  int r;

  failure = NULL;
  fds[0].fd = nbd_aio_get_fd (h);
  fds[0].events = 0;
  fds[0].revents = 0;
  if (dir & LIBNBD_AIO_DIRECTION_READ)
    fds[0].events |= POLLIN;
  if (dir & LIBNBD_AIO_DIRECTION_WRITE)
    fds[0].events |= POLLOUT;
  if (fds[0].fd == -1 || fds[0].events == 0)
    return fail (ENOTCONN, "the connection to the server was lost");
  /* The pipe stays readable once a signal came: then only the server. */
  fds[1].fd = stop_signal () ? -1 : stop_fd ();
  fds[1].events = POLLIN;
  fds[1].revents = 0;

  r = poll (fds, 2, timeout);
  if (r == -1) {
    if (errno == EINTR)
      return 0;
    return fail (errno, "poll: %s", strerror (errno));
  }
  /* Not both notifications: the first may change what the second
   * means.  Replies first, as nbd_poll does.  A hang-up while libnbd
   * waits only to write (a server that closes as soon as it accepts,
   * which admits no more clients) is said as such, not as libnbd's
   * "external event is invalid" in that state.
   */
  if ((fds[0].revents & POLLIN) ||
      ((fds[0].revents & POLLHUP) && (dir & LIBNBD_AIO_DIRECTION_READ)))
    return nbd_aio_notify_read (h);
  if (fds[0].revents & POLLOUT)
    return nbd_aio_notify_write (h);
  if (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL))
    return fail (ECONNRESET, "the server closed the connection (does it "
                 "admit no more clients?)");
  return 0;
}

/* Where a connection that timed out was, from libnbd's state name.
 * That is only meant for debugging: any other is the handshake.
 */
static const char *
handshake_phase (struct nbd_handle *h)
{
  const char *state = nbd_connection_state (h);

  if (state && strncmp (state, "CONNECT", 7) == 0)
    return "connecting to the server";
  if (state && strstr (state, "TLS"))
    return "in the TLS handshake";
  return "in the NBD handshake";
}

/* What source_wait waits for. */
enum until {
  UNTIL_NEGOTIATED,     /* the connection or option done: not connecting */
  UNTIL_COMPLETED,      /* the command cookie answered */
  UNTIL_CLOSED,         /* the server hung up */
};

/* Let libnbd run h, as its blocking calls do, until what until says,
 * a signal, or deadline (0: none; ETIMEDOUT, phase saying where, NULL
 * for the handshake).  A signal ends a connection or an option at
 * once; a command gets until stop_deadline to be answered: nbdkit
 * 1.32 aborts when a client vanishes with requests in flight.
 */
static int
source_wait (struct nbd_handle *h, enum until until, int64_t cookie,
             double deadline, const char *phase)
{
  for (;;) {
    int timeout = -1, r;

    switch (until) {
    case UNTIL_NEGOTIATED:
      if (!nbd_aio_is_connecting (h))
        return 0;
      break;
    case UNTIL_COMPLETED:
      if ((r = nbd_aio_command_completed (h, cookie)) != 0)
        return r == 1 ? 0 : -1;
      break;
    case UNTIL_CLOSED:
      if (nbd_aio_is_closed (h) || nbd_aio_is_dead (h))
        return 0;
      break;
    }
    if (stop_signal ()) {
      if (until == UNTIL_NEGOTIATED)
        return fail (EINTR, "interrupted");
      if (until == UNTIL_COMPLETED &&
          (deadline == 0 || deadline > stop_deadline ()))
        deadline = stop_deadline ();
    }
    if (deadline) {
      const double left = deadline - now ();
      if (left <= 0) {
        if (stop_signal ())
          return fail (EINTR, "interrupted");
        if (phase == NULL)
          phase = handshake_phase (h);
        /* Without the option: a private nbdkit's own limit. */
        if (until == UNTIL_NEGOTIATED && opts->connect_timeout)
          return fail (ETIMEDOUT, "timed out %s (--connect-timeout=%g)",
                       phase, opts->connect_timeout);
        if (until == UNTIL_NEGOTIATED)
          return fail (ETIMEDOUT, "timed out %s (after %d seconds)",
                       phase, LOCAL_HANDSHAKE_SECONDS);
        return fail (ETIMEDOUT, "timed out %s", phase);
      }
      timeout = left * 1000 + 1 < INT_MAX ? left * 1000 + 1 : INT_MAX;
    }
    if (source_poll (h, timeout) == -1)
      return -1;
  }
}

static int
connect_uri (struct nbd_handle *h, const char *uri, double deadline)
{
  if (nbd_aio_connect_uri (h, uri) == -1 ||
      source_wait (h, UNTIL_NEGOTIATED, 0, deadline, NULL) == -1)
    return -1;
  if (nbd_aio_is_negotiating (h) || nbd_aio_is_ready (h))
    return 0;
  if (nbd_aio_is_closed (h))
    return fail (ECONNRESET, "the server closed the connection");
  /* Dead: libnbd said why. */
  return -1;
}

static int
option_done (void *user_data, int *error)
{
  int *err = user_data;

  *err = *error;
  return 1;
}

/* NBD_OPT_GO, or NBD_OPT_INFO if info. */
static int
negotiate (struct nbd_handle *h, bool info, double deadline)
{
  const char *request = info ? "opt_info" : "opt_go";
  char *export, *phase;
  int err = 0, r;

  failure = NULL;
  if (stop_signal ())
    return fail (EINTR, "interrupted");
  if ((export = nbd_get_export_name (h)) == NULL)
    return -1;
  r = asprintf (&phase, "%s %s%.*s%s", info ? "asking about" : "negotiating",
                export[0] ? "export '" : "the default export",
                (int) blk_view_name_shown_len (export), export,
                export[0] ? "'" : "");
  free (export);
  if (r == -1)
    return fail (ENOMEM, "out of memory");
  /* err lives on this stack: after a failure below, the caller only
   * closes h, which calls nothing.
   */
  r = info
    ? nbd_aio_opt_info (h, (nbd_completion_callback) {
        .callback = option_done, .user_data = &err })
    : nbd_aio_opt_go (h, (nbd_completion_callback) {
        .callback = option_done, .user_data = &err });
  if (r == 0)
    r = source_wait (h, UNTIL_NEGOTIATED, 0, deadline, phase);
  free (phase);
  if (r == -1)
    return -1;
  if (err)
    return fail (err, "server replied with error to %s request: %s",
                 request, strerror (err));
  if (!info && !nbd_aio_is_ready (h))
    return fail (EPROTO, "the server did not finish the %s request",
                 request);
  return 0;
}

int
source_go (struct nbd_handle *h, double deadline)
{
  return negotiate (h, false, deadline);
}

int
source_info (struct nbd_handle *h, double deadline)
{
  return negotiate (h, true, deadline);
}

int
source_pread (struct nbd_handle *h, void *buf, size_t count,
              uint64_t offset)
{
  int64_t cookie;

  failure = NULL;
  if (stop_signal ())
    return fail (EINTR, "interrupted");
  cookie = nbd_aio_pread (h, buf, count, offset, NBD_NULL_COMPLETION, 0);
  if (cookie == -1)
    return -1;
  return source_wait (h, UNTIL_COMPLETED, cookie, 0, NULL);
}

int
source_block_status (struct nbd_handle *h, uint64_t count, uint64_t offset,
                     nbd_extent_callback cb)
{
  int64_t cookie;

  failure = NULL;
  if (stop_signal ())
    return fail (EINTR, "interrupted");
  cookie = nbd_aio_block_status (h, count, offset, cb, NBD_NULL_COMPLETION,
                                 0);
  if (cookie == -1)
    return -1;
  return source_wait (h, UNTIL_COMPLETED, cookie, 0, NULL);
}

void
source_shutdown (struct nbd_handle *h)
{
  double deadline = now () + HANGUP_SECONDS;
  int r;

  failure = NULL;
  if (nbd_aio_is_ready (h) && nbd_aio_in_flight (h) == 0)
    r = nbd_aio_disconnect (h, 0);
  else if (nbd_aio_is_negotiating (h))
    r = nbd_aio_opt_abort (h);
  else
    return;
  /* Sent at once if it can be.  After a signal, no waiting past the
   * requests' deadline.
   */
  if (stop_signal () && deadline > stop_deadline ())
    deadline = stop_deadline ();
  if (r == 0)
    source_wait (h, UNTIL_CLOSED, 0, deadline,
                 "waiting for the server to hang up");
}

struct nbd_handle *
source_connect (const struct source *src, const char *export_name,
                unsigned flags, double *deadline)
{
  /* Our own nbdkit has a limit even without --connect-timeout: one
   * stuck starting (out of descriptors, or waiting for qemu-nbd) would
   * hang nbdsum.
   */
  const double limit = opts->connect_timeout ? opts->connect_timeout
    : src->server ? local_server_handshake_limit (src->server) : 0;
  const double until = limit ? now () + limit : 0;
  struct nbd_handle *h = NULL;
  bool timed_out;

  failure = NULL;
  if (deadline)
    *deadline = until;
  if (stop_signal ())
    return NULL;
  if ((h = nbd_create ()) == NULL ||
      (opts->verbose && nbd_set_debug (h, true) == -1) ||
      nbd_set_opt_mode (h, true) == -1 ||
      nbd_set_uri_allow_local_file (h, true) == -1 ||
      nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1)
    goto err;
  for (size_t i = 0; i < SOURCE_META_CONTEXTS && src->meta_contexts[i]; i++)
    if (nbd_add_meta_context (h, src->meta_contexts[i]) == -1)
      goto err;
  if (connect_uri (h, src->uri, until) == -1)
    goto err;
  /* Our own qemu-nbd is up: it may hold only the files checked. */
  if (src->server && local_server_verify (src->server) == -1) {
    local_server_kill (src->server);
    nbd_close (h);
    return NULL;
  }

  /* refuse_view read the URI before connecting; libnbd has the last
   * word on the export it names.
   */
  if (export_name == NULL && src->server == NULL) {
    char *export = nbd_get_export_name (h);
    bool refused;

    if (export == NULL)
      goto err;
    refused = refuse_view_export (src->name, src->uri, export);
    free (export);
    if (refused) {
      nbd_close (h);
      return NULL;
    }
  }

  if ((export_name && nbd_set_export_name (h, export_name) == -1) ||
      ((flags & SOURCE_GO) && source_go (h, until) == -1))
    goto err;
  return h;

 err:
  /* Stopped mid-handshake: our own server goes first, or it would
   * complain of the client that vanished, and gently, so that it
   * cleans up; timed out, it is stuck, and would not stop on SIGTERM
   * either.
   */
  timed_out = src->server && source_errno () == ETIMEDOUT;
  if (timed_out)
    local_server_kill (src->server);
  else if (stop_signal ())
    local_server_end (src->server);
  if (!(flags & SOURCE_QUIET) && !stop_signal ()) {
    char *said;
    if (timed_out)
      error_at (src->name, "%s: killed the %s serving it (stuck)",
                source_error (), local_server_what (src->server));
    /* The curl plugin fails connections, not nbdkit: it says why. */
    else if (src->server && name_is_http (src->name) &&
             (said = local_http_message (src->server)) != NULL) {
      error_at (src->name, "%s", said);
      free (said);
    }
    else if (src->server && local_server_exited (src->server)) {
      char *why = local_server_message (src->server);
      if (why)
        error_at (src->name, "%s", why);
      else
        error_at (src->name, "%s (the %s serving it exited)",
                  source_error (), local_server_what (src->server));
      free (why);
    }
    else
      error_at (src->name, "%s%s", source_error (), source_hint (h));
  }
  nbd_close (h);
  return NULL;
}
