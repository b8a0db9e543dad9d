/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: libnbd's blocking calls, made of its asynchronous ones and
 * one poll loop that a signal or a deadline ends (see source-io.h),
 * and why the last of them failed in each thread.
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
#include "local.h"
#include "options.h"
#include "signals.h"
#include "source-io.h"
#include "viewname.h"

/* How long a server may take to hang up once told to. */
#define HANGUP_SECONDS 2

/* Why the last source_* call failed in this thread when the reason is
 * nbdsum's (a signal, a timeout, a lost connection); NULL: libnbd's.
 */
static _Thread_local const char *failure;
static _Thread_local int failure_errno;
static _Thread_local char failure_buf[512];
/* source_connect_uri: the server's greeting was read; it failed for
 * the server closing the connection before that.
 */
static _Thread_local bool greeted, ungreeted;

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
   * libnbd before 1.16 only calls "Operation not supported".  One
   * without fixed newstyle has no options to refuse: ENOTSUP is
   * libnbd's own.
   */
  if (source_errno () == ENOTSUP && nbd_get_tls (h) == LIBNBD_TLS_DISABLE &&
      nbd_aio_is_negotiating (h) &&
      (nbd_get_handshake_flags (h) & LIBNBD_HANDSHAKE_FLAG_FIXED_NEWSTYLE))
    return ": the server requires TLS: use an nbds:// URI with "
      "tls-psk-file= or tls-certificates=";
  return "";
}


void
source_error_clear (void)
{
  failure = NULL;
}

int
source_poll (struct nbd_handle *h, int timeout)
{
  const unsigned dir = nbd_aio_get_direction (h);
  struct pollfd fds[2];
  bool silence = false;
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
  /* The pipe stays readable once a signal came: then only the server,
   * and never past the signal's deadline, whatever the caller chose
   * (it may have chosen before the signal came: no limit, or a
   * handshake's).
   */
  fds[1].fd = stop_fd ();
  if (stop_signal ()) {
    const int left = stop_poll_timeout ();
    fds[1].fd = -1;
    if (timeout < 0 || timeout > left)
      timeout = left;
  }
  fds[1].events = POLLIN;
  fds[1].revents = 0;
  /* --reply-timeout: requests wait, and the server neither answers nor
   * takes more for that long.  A poll that returns with nothing is
   * that silence, since each event ends a poll.  (A handshake has
   * --connect-timeout instead.)  Not after a signal: its deadline,
   * the 5 s its message names, bounds the wait for those in flight.
   */
  if (opts->reply_timeout && !stop_signal () && nbd_aio_in_flight (h) > 0) {
    const int limit = (int) (opts->reply_timeout * 1000) + 1;
    if (timeout < 0 || timeout > limit) {
      timeout = limit;
      silence = true;
    }
  }

  r = poll (fds, 2, timeout);
  if (r == -1) {
    if (errno == EINTR)
      return 0;
    return fail (errno, "poll: %s", strerror (errno));
  }
  if (r == 0 && silence)
    return fail (ETIMEDOUT, "timed out waiting for the server's reply "
                 "(--reply-timeout=%g)", opts->reply_timeout);
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
    const char *state;

    switch (until) {
    case UNTIL_NEGOTIATED:
      if (!nbd_aio_is_connecting (h))
        return 0;
      /* Past connecting and reading the greeting: its magic and its
       * flags (greeting_came's 18 bytes).
       */
      state = nbd_connection_state (h);
      if (state && strncmp (state, "CONNECT", 7) != 0 &&
          strncmp (state, "MAGIC", 5) != 0 &&
          strncmp (state, "NEWSTYLE.RECV_GFLAGS", 20) != 0)
        greeted = true;
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
      if (deadline == 0 || deadline > stop_deadline ())
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

bool
source_hung_up (void)
{
  return source_errno () == ECONNRESET ||
    strstr (source_error (), "server disconnected unexpectedly") != NULL;
}

static int
closed_ungreeted (void)
{
  return fail (ECONNRESET, "%s (does it admit one client at a time?)",
               SOURCE_UNGREETED);
}

/* Did h's server send its whole greeting?  libnbd can read it and the
 * close after it in one call (nbd_aio_connect_uri's, or one
 * nbd_aio_notify_read), so a state seen between calls cannot say:
 * libnbd 1.16 counts the bytes received (the newstyle greeting's 18;
 * the oldstyle one is longer), 1.14 says it only in its debug
 * transitions (source_connect_debug).
 */
#define GREETING_BYTES 18
static bool
greeting_came (struct nbd_handle *h)
{
#ifdef HAVE_NBD_STATS_BYTES_RECEIVED
  return greeted || nbd_stats_bytes_received (h) >= GREETING_BYTES;
#else
  (void) h;
  return greeted;
#endif
}

int
source_connect_uri (struct nbd_handle *h, const char *uri, double deadline)
{
  /* A failure of nbd_aio_connect_uri is libnbd's: not the last try's
   * (a server that closed it, then died: the connect is refused).
   */
  failure = NULL;
  greeted = ungreeted = false;
  /* It runs the handshake as far as it can without waiting: over TCP
   * the close of a busy server can be read in it, or a greeting and
   * the close after it (greeting_came tells them apart).
   */
  if (nbd_aio_connect_uri (h, uri) == -1) {
    ungreeted = !greeting_came (h) && !stop_signal () && source_hung_up ();
    return ungreeted ? closed_ungreeted () : -1;
  }
  if (source_wait (h, UNTIL_NEGOTIATED, 0, deadline, NULL) == -1) {
    /* Closed or reset, not a timeout, a signal, a refused connect or
     * bytes that are no greeting (an HTTP server, an oldstyle one's
     * bad flags).  Said in nbdsum's words: libnbd's depend on when it
     * saw the socket close.
     */
    ungreeted = !greeting_came (h) && !stop_signal () && source_hung_up ();
    if (ungreeted)
      return closed_ungreeted ();
    return -1;
  }
  if (nbd_aio_is_negotiating (h))
    return 0;
  /* Ready without options (oldstyle): it has one unnamed export, and
   * views are export names.  (libnbd negotiates with newstyle without
   * the fixed flag: see view_go.)
   */
  if (nbd_aio_is_ready (h))
    return fail (EPROTONOSUPPORT, "the server speaks NBD's %s protocol, "
                 "without options (no export names, so no views): nbdsum "
                 "needs a newstyle server", nbd_get_protocol (h));
  ungreeted = !greeting_came (h);
  if (nbd_aio_is_closed (h))
    return ungreeted ? closed_ungreeted ()
      : fail (ECONNRESET, "the server closed the connection");
  /* Dead: libnbd said why. */
  return -1;
}

bool
source_closed_ungreeted (void)
{
  return ungreeted;
}

void
source_connect_debug (const char *msg)
{
  /* The greeting came (see greeting_came): newstyle's flags too, its
   * 18 bytes as with 1.16 (a cut one is a close before it); oldstyle's
   * magic.
   */
  if (strcmp (msg, "transition: NEWSTYLE.RECV_GFLAGS -> "
              "NEWSTYLE.CHECK_GFLAGS") == 0 ||
      (strncmp (msg, "transition: MAGIC.", 18) == 0 &&
       strstr (msg, " -> OLDSTYLE.")))
    greeted = true;
}

bool
source_retry_wait (struct source_retry *r)
{
  struct pollfd p = { .fd = stop_fd (), .events = POLLIN };
  const double t = now ();
  double until, left;

  if (r->first == 0)
    r->first = t;
  r->pause = r->pause ? r->pause * 2 : 0.05;
  until = t + r->pause;
  if (until > r->first + SOURCE_RETRY_SECONDS ||
      (source_retry_deadline (r) && until >= source_retry_deadline (r)))
    return false;
  while (!stop_signal () && (left = until - now ()) > 0)
    poll (&p, 1, (int) (left * 1000) + 1);
  return !stop_signal ();
}

double
source_retry_deadline (const struct source_retry *r)
{
  return opts->connect_timeout ? r->first + opts->connect_timeout : 0;
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

/* Has the server of h hung up (or shut its side)?  Nothing to say
 * goodbye to then: ours is stopped once a failure is named
 * (local_server_cause), and libnbd 1.14's nbd_aio_disconnect reads the
 * command it has just freed when its write fails (EPIPE).
 */
static bool
server_gone (struct nbd_handle *h)
{
  struct pollfd p = { .fd = nbd_aio_get_fd (h), .events = POLLRDHUP };

  return p.fd == -1 ||
    (poll (&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)));
}

void
source_shutdown (struct nbd_handle *h)
{
  double deadline = now () + HANGUP_SECONDS;
  int r;

  failure = NULL;
  if (nbd_aio_is_ready (h) && nbd_aio_in_flight (h) == 0 && server_gone (h))
    return;
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
