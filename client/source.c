/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: where an input is served (see source.h): URIs checked for
 * views, files served by a private nbdkit, and connections to either
 * (the calls on them: source-io.c).
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "http-probe.h"
#include "local.h"
#include "messages.h"
#include "names.h"
#include "options.h"
#include "signals.h"
#include "source.h"
#include "util.h"
#include "viewname.h"

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
  double deadline = 0;
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

/* -v, or libnbd's own switch (LIBNBD_DEBUG=1), which our callback
 * would otherwise silence.
 */
static bool
debug_shown (void)
{
  const char *e = getenv ("LIBNBD_DEBUG");

  return opts->verbose || (e && strcmp (e, "1") == 0);
}

/* libnbd's debug messages: while connecting, whether the greeting
 * came (source_connect_debug); when shown, each, as libnbd's own
 * handler writes it, through messages_put: it quotes what a server
 * sent (an option's error text).
 */
static int
debug_message (void *handle_name, const char *context, const char *msg)
{
  source_connect_debug (msg);
  if (!debug_shown ())
    return 0;
  flockfile (stderr);
  fputs ("libnbd: debug: ", stderr);
  messages_put (handle_name ? handle_name : "nbd", false);
  fputs (": ", stderr);
  messages_put (context, false);
  fputs (": ", stderr);
  messages_put (msg, false);
  fputc ('\n', stderr);
  funlockfile (stderr);
  return 0;
}

/* Turn on h's debug messages, written by debug_message (libnbd frees
 * the handle's name with the callback, even when setting it fails).
 * Without -v, only until connected, and only with libnbd 1.14
 * (SOURCE_DEBUG_CONNECTING): libnbd says each call.
 */
static int
set_debug (struct nbd_handle *h)
{
  const nbd_debug_callback cb = {
    debug_message, nbd_get_handle_name (h), free
  };

  if (nbd_set_debug_callback (h, cb) == -1)
    return -1;
  return nbd_set_debug (h, true);
}

bool
source_handshake_failed (const struct source *src, unsigned flags)
{
  /* Stopped mid-handshake: our own server goes first, or it would
   * complain of the client that vanished, and gently, so that it
   * cleans up; timed out, it is stuck, and would not stop on SIGTERM
   * either.  But not while it serves another connection of ours: then
   * what is stuck is this one (the nbd plugin's, to a server that
   * admits fewer clients than it said), and the server is stopped
   * hard only at the end.
   */
  const bool timed_out = src->server && source_errno () == ETIMEDOUT;

  if (timed_out && (flags & SOURCE_EXTRA))
    local_server_abandoned (src->server);
  else if (timed_out)
    local_server_kill (src->server);
  else if (stop_signal ())
    local_server_end (src->server);
  return timed_out && !(flags & SOURCE_EXTRA);
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
  struct source_retry retry = { now (), 0 };
  double until = limit ? retry.first + limit : 0;
  struct nbd_handle *h = NULL;
  bool timed_out, ungreeted = false;

  source_error_clear ();
  if (deadline && *deadline && (until == 0 || *deadline < until))
    until = *deadline;
  if (deadline)
    *deadline = until;
  if (stop_signal ())
    return NULL;
  /* A server that admits one client at a time (nbdkit --filter=limit
   * limit=1) frees its slot only once it has seen the last client go,
   * which can be after nbdsum's next connection came: that one is
   * closed before the greeting.  So it is tried again, a little later,
   * unless it is an extra one of -C (given up on alone); a [ CMD ]'s
   * server too, while it runs.
   */
  for (;;) {
    if ((h = nbd_create ()) == NULL ||
        ((SOURCE_DEBUG_CONNECTING || debug_shown ()) &&
         set_debug (h) == -1) ||
        nbd_set_opt_mode (h, true) == -1 ||
        nbd_set_uri_allow_local_file (h, true) == -1 ||
        nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1)
      goto err;
    for (size_t i = 0; i < SOURCE_META_CONTEXTS && src->meta_contexts[i];
         i++)
      if (nbd_add_meta_context (h, src->meta_contexts[i]) == -1)
        goto err;
    if (source_connect_uri (h, src->uri, until) == 0) {
      ungreeted = false;        /* a later failure is another's */
      if (SOURCE_DEBUG_CONNECTING && !debug_shown () &&
          nbd_set_debug (h, false) == -1)
        goto err;
      break;
    }
    /* Not our own server: one that closes before greeting is dying. */
    ungreeted = source_closed_ungreeted () && !(flags & SOURCE_EXTRA) &&
      (src->server == NULL ||
       (local_server_is_command (src->server) &&
        !local_server_exited (src->server)));
    /* A signal in the wait goes to err too: nothing is said. */
    if (!ungreeted || !source_retry_wait (&retry))
      goto err;
    nbd_close (h);
    h = NULL;
  }
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
  timed_out = source_handshake_failed (src, flags);
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
        /* Not a server that admits one client, then. */
        error_at (src->name, "%s (the %s serving it exited)",
                  source_closed_ungreeted () ? SOURCE_UNGREETED
                  : source_error (), local_server_what (src->server));
      free (why);
    }
    else
      error_at (src->name, "%s%s", source_error (), source_hint (h));
  }
  nbd_close (h);
  return NULL;
}
