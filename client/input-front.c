/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the one engine for a server without a view of the image, or
 * --client-side: a private nbdkit --filter=blkhash nbd in front of it
 * (local-nbdkit.c), whose views are asked like any server's.  The image's
 * bytes cross to this machine and are hashed here, by the filter.
 * Each of nbdsum's connections to it is one to the server (the nbd
 * plugin's shared=false), so -C and -R keep the queue depth they ask
 * for.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "helpers.h"
#include "input-kinds.h"
#include "local.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"
#include "signals.h"
#include "util.h"

/* The image on the server, checked before the filter is put in front
 * of it: the export must be there (its own error, not a missing
 * view's), and its size under the limit.  fb's connection (still
 * negotiating, after the server refused a view) asks, or a new one.
 * NBD_OPT_INFO, not GO: a server that exits when its first client
 * leaves (qemu-nbd without --persistent) does so only after one went
 * to an export; and one that admits a client at a time (qemu-nbd's
 * --shared=1) must be free when the filter connects.  Returns 0
 * (*multi_conn set), or -1 (error printed).
 */
static int
check_image (struct source *src, struct fallback *fb, uint64_t block_size,
             const char *digest, const struct blk_range *range,
             bool *multi_conn)
{
  const bool plain = block_size == 0;
  const uint64_t def = plain ? BLK_MAX_PLAIN_SIZE : BLK_MAX_SIZE;
  struct nbd_handle *h = fb->h;
  double deadline = fb->deadline;
  CLEANUP_FREE char *export = NULL;
  uint32_t digest_len = 32;
  struct blk_digest d;
  int64_t size;
  bool fixed;

  fb->h = NULL;
  if (h == NULL && (h = source_connect (src, NULL, 0, &deadline)) == NULL)
    return -1;
  if ((fb->export_name && nbd_set_export_name (h, fb->export_name) == -1) ||
      (export = nbd_get_export_name (h)) == NULL) {
    error_at (src->name, "%s", nbd_get_error ());
    nbd_close (h);
    return -1;
  }
  /* Newstyle without the fixed flag has no NBD_OPT_INFO, and hangs up
   * on a name it does not serve: going to it checks it.
   */
  fixed = nbd_get_handshake_flags (h) & LIBNBD_HANDSHAKE_FLAG_FIXED_NEWSTYLE;
  if ((fixed ? source_info (h, deadline) : source_go (h, deadline)) == -1) {
    /* A server without NBD_OPT_INFO (not one requiring TLS, which
     * refuses it too): the view's header has the size, and one
     * connection is safe.
     */
    if (fixed && source_errno () == ENOTSUP && nbd_aio_is_negotiating (h) &&
        !stop_signal () && source_hint (h)[0] == '\0') {
      source_shutdown (h);
      nbd_close (h);
      *multi_conn = false;
      return 0;
    }
    /* A refusal names the export; a timeout says where it was. */
    if (stop_signal ())
      local_server_end (src->server);   /* as in view_go */
    else if (source_errno () == ETIMEDOUT)
      error_at (src->name, "%s", source_error ());
    else if (!fixed && (source_errno () == ENOTCONN || source_hung_up ()))
      error_at (src->name, "%s%s%s: the server hung up when asked for it "
                "(a newstyle server without the fixed flag cannot refuse "
                "a name otherwise)",
                export[0] ? "export '" : "the default export", export,
                export[0] ? "'" : "");
    else
      error_at (src->name, "%s%s%s: %s%s",
                export[0] ? "export '" : "the default export",
                export, export[0] ? "'" : "", source_error (),
                source_hint (h));
    nbd_close (h);
    return -1;
  }
  size = MAX (nbd_get_size (h), INT64_C (0));
  *multi_conn = nbd_can_multi_conn (h) == 1;
  source_shutdown (h);
  nbd_close (h);
  if (!plain && blk_digest_init (&d, digest) == NULL) {
    digest_len = d.len;
    blk_digest_free (&d);
  }
  if (size_refused (src->name, "the image is", size, block_size, digest_len)) {
    /* A private nbdkit's filter (given this limit) said the same. */
    if (src->server)
      free (local_server_message (src->server));
    return -1;
  }
  if (range->length && range->offset + range->length > (uint64_t) size) {
    char r[BLK_RANGE_STR_MAX];
    error_at (src->name, "--range=%s ends past the end of the image (%"
              PRIi64 " bytes)", blk_format_range (range, r), size);
    /* A private nbdkit's filter said the same. */
    if (src->server)
      free (local_server_message (src->server));
    return -1;
  }
  /* --max-size lifted nbdsum's limit, not the server's. */
  if (fb->notice && (uint64_t) size > def) {
    char l[BLK_LIMIT_STR_MAX];
    notice_at (src->name, "the image is over %s, the blkhash filter's "
               "default blkhash-max-size: a server's filter may have "
               "refused its view for that", blk_format_limit (def, l));
  }
  return 0;
}

struct source *
front_open (struct source *src, struct fallback *fb,
            const struct hash_spec *spec)
{
  const struct hash_spec hs = hash_spec_or_defaults (spec);
  const bool local = src->server && local_server_format (src->server);
  bool multi_conn = false;
  int r;

  r = check_image (src, fb, spec->plain ? 0 : hs.block_size, hs.digest,
                   &spec->range, &multi_conn);
  if (r == 0 && fb->notice && !local)
    notice_at (src->name, "%s", fb->notice);
  if (r == 0 && local) {
    /* A local file's private nbdkit has the filter already. */
    front_failed (src, fb);
    r = -1;
  }
  free (fb->export_name);
  free (fb->notice);
  *fb = (struct fallback) { NULL, NULL, 0, NULL, NULL };
  if (r == -1) {
    source_close (src);
    return NULL;
  }
  src->single = !multi_conn;
  return source_open_front (src);
}

/* In what the private nbdkit in front said (why), its nbd plugin's
 * failed connection to the server, libnbd's "nbd_connect_uri: ..."
 * without nbdkit's "nbdkit: nbd[1]: error: " (why is cut after it);
 * else NULL.
 */
static const char *
connect_failed (const struct source *src, char *why)
{
  char *p, *end;

  if (src->behind == NULL || why == NULL ||
      (p = strstr (why, "error: nbd_connect_")) == NULL)
    return NULL;
  p += strlen ("error: ");
  /* Its line only: local_server_message joined them with ". ". */
  if ((end = strstr (p, " nbdkit: ")) != NULL) {
    *end = '\0';
    if (end > p && end[-1] == '.')
      end[-1] = '\0';
  }
  return p;
}

/* What the private nbdkit said of its connection to the server
 * refused (connect_failed), its log kept in fb->why; else NULL.
 */
static const char *
front_refusal (struct source *src, struct fallback *fb)
{
  if (fb->why == NULL)
    fb->why = local_server_message (src->server);
  return connect_failed (src, fb->why);
}

/* Free what fb holds, and empty it. */
static void
front_release (struct fallback *fb)
{
  nbd_close (fb->h);
  free (fb->export_name);
  free (fb->notice);
  free (fb->why);
  *fb = (struct fallback) { NULL, NULL, 0, NULL, NULL };
}

bool
front_refused (struct source *src, struct fallback *fb)
{
  return front_refusal (src, fb) != NULL;
}

bool
front_retry (struct source *src, struct fallback *fb,
             struct source_retry *retry)
{
  const char *refused = front_refusal (src, fb);

  /* libnbd's words for a socket closed before the greeting. */
  if (refused == NULL || stop_signal () || !local_said_ungreeted (refused))
    return false;
  if (!source_retry_wait (retry))
    return false;
  front_release (fb);
  /* The next try's connection is the first's: within its
   * --connect-timeout, as source_connect's own tries are.
   */
  fb->deadline = source_retry_deadline (retry);
  return true;
}

void
front_failed (struct source *src, struct fallback *fb)
{
  const char *refused = front_refusal (src, fb);

  /* The server admitted nbdsum's connections, then refused the
   * filter's (one that takes a client at a time, taken by another
   * job of -j).  Else what nbdkit said, else why the view was not
   * found.  Nothing on a signal: front_retry's wait was cut short.
   */
  if (refused && !stop_signal ())
    error_at (src->name, "the server refused or dropped the connection "
              "of nbdsum's private nbdkit --filter=blkhash to it, after "
              "admitting nbdsum's own (does it take fewer clients?): %s",
              local_said_ungreeted (refused) ? LOCAL_UNGREETED : refused);
  else if (!stop_signal ())
    error_at (src->name, "nbdsum's private nbdkit --filter=blkhash has "
              "no view of it: %s", fb->why ? fb->why : fb->notice ?
              fb->notice : "unknown error");
  front_release (fb);
}
