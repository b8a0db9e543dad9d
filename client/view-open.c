/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the opening of a server's view, blkhash or plain-digest
 * (for input-view.c, input-plain-view.c; input-bmap.c uses the first
 * step and the image's check): going to it under a fresh nonce,
 * reading its header, checking it against the limits and the image.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "header.h"
#include "input-kinds.h"
#include "local.h"
#include "messages.h"
#include "names.h"
#include "options.h"
#include "signals.h"
#include "util.h"
#include "viewname.h"

/* [ CMD ] without the filter in it: the user chose a plain server,
 * and needs no notice that nbdsum hashes client-side.
 */
static bool
view_filterless_chosen (const char *name)
{
  char **argv = name_command (name);

  if (argv == NULL)
    return false;
  for (; *argv; argv++)
    if (strstr (*argv, "blkhash"))
      return false;
  return true;
}

/* Is the image a view's header hdr describes over the size limit
 * (options_max_size)?  Then say so.
 */
static bool
view_size_refused (struct source *src, const char *view_name,
                   const struct blk_header *hdr, bool plain)
{
  char *what;
  bool r;

  if (asprintf (&what, "the view '%s' says the image is", view_name) == -1)
    what = NULL;
  r = size_refused (src->name, what ? what : "the view says the image is",
                    hdr->image_size, plain ? 0 : hdr->block_size,
                    hdr->digest_len);
  free (what);
  return r;
}

int
view_header_bytes (const char *name, struct nbd_handle *h,
                   const char *header, uint8_t buf[BLK_VIEW_HEADER_SIZE],
                   int64_t *view_size)
{
  if ((*view_size = nbd_get_size (h)) == -1) {
    error_at (name, "%s", nbd_get_error ());
    return -1;
  }
  if (*view_size < BLK_VIEW_DIGESTS_OFFSET)
    return 0;
  if (source_pread (h, buf, BLK_VIEW_HEADER_SIZE, 0) == -1) {
    if (!stop_signal ())
      error_at (name, "reading %s: %s", header, source_error ());
    return -1;
  }
  return 1;
}

/* The views' headers, buf of a view of view_size bytes, decoded into
 * hdr and checked against spec: 1 if it is such a view, 0 if not (hash
 * client-side), 2 if it does not echo nonce (nothing else in it
 * counts), -1 on error (printed).  A blkhash view's: not a view at all
 * is 0, a bad one -1.
 */
static int
decode_view_header (const char *name, const struct hash_spec *spec,
                    const uint8_t *buf, int64_t view_size, const char *nonce,
                    struct blk_header *hdr)
{
  struct blk_digest d;
  const char *msg;
  size_t len;

  if (!blk_header_has_magic (buf, BLK_VIEW_HEADER_SIZE))
    return 0;
  if (!blk_header_echoes (buf, BLK_VIEW_HEADER_SIZE, nonce))
    return 2;
  if ((msg = blk_header_decode (buf, BLK_VIEW_HEADER_SIZE, hdr)) != NULL) {
    error_at (name, "invalid blkhash view header: %s", msg);
    return -1;
  }
  /* The checksum printed must be what the header says it is. */
  if ((msg = blk_digest_init (&d, hdr->digest_name)) != NULL) {
    error_at (name, "invalid blkhash view header: digest '%s': %s",
              hdr->digest_name, msg);
    return -1;
  }
  len = d.len;
  blk_digest_free (&d);
  if (len != hdr->digest_len) {
    error_at (name, "invalid blkhash view header: %s digests are %zu "
              "bytes, not %" PRIu32, hdr->digest_name, len, hdr->digest_len);
    return -1;
  }
  if ((uint64_t) view_size != blk_view_size (hdr)) {
    error_at (name, "invalid blkhash view: its size %" PRIi64 " does not "
              "match the header (%" PRIu64 ")", view_size,
              blk_view_size (hdr));
    return -1;
  }
  /* Digest names are canonical on both sides (sha-256 is sha256). */
  if (spec->digest && !blk_digest_same (spec->digest, hdr->digest_name)) {
    error_at (name, "the server hashed with %s, not %s",
              hdr->digest_name, spec->digest);
    return -1;
  }
  if (spec->block_size && spec->block_size != hdr->block_size) {
    error_at (name, "the server used %" PRIu32 " byte blocks, not %"
              PRIu64, hdr->block_size, spec->block_size);
    return -1;
  }
  return 1;
}

/* A plain-digest view's, of spec's digest: one that does not decode
 * is no such view (hash client-side).
 */
static int
decode_plain_header (const struct hash_spec *spec, const uint8_t *buf,
                     int64_t view_size, const char *nonce,
                     struct blk_header *hdr)
{
  struct blk_digest d;
  size_t len;

  /* Whatever else the export is, its digest is not to be trusted. */
  if (blk_plain_header_decode (buf, BLK_VIEW_HEADER_SIZE, hdr) != NULL ||
      blk_digest_init (&d, hdr->digest_name) != NULL)
    return 0;
  len = d.len;
  blk_digest_free (&d);
  if (len != hdr->digest_len ||
      (uint64_t) view_size != blk_view_size (hdr) ||
      !blk_digest_same (spec->digest, hdr->digest_name))
    return 0;
  return strcmp (hdr->nonce, nonce) == 0 ? 1 : 2;
}

/* The error for a view whose header says its server serves only
 * views, of a server that serves its image base.
 */
static void
view_serves_image (const char *name, const char *view_name,
                   const char *base)
{
  error_at (name, "the view '%s' says its server serves only views, but "
            "it serves %s%s%s too: not trusting it", view_name,
            base[0] ? "export '" : "the default export", base,
            base[0] ? "'" : "");
}

/* The notice that view view_name of input name is taken at its word:
 * its image could not be reached (source_error's words).
 */
static void
view_unchecked (const char *name, const char *view_name)
{
  notice_at (name, "cannot check the view '%s' against its image "
             "(%s); trusting its header", view_name, source_error ());
}

/* Is the view about the image served next to it?  A server may serve
 * any view; one whose header does not even give the export's size is
 * refused.  The size comes from NBD_OPT_INFO on a connection of its
 * own, made while the view is open: asked on the first connection,
 * before it goes to the view, nbdsum would be the export's last client
 * leaving, and a filter with blkhash-file= would hash the whole image
 * then.  A server that admits no other client, or will not say, is
 * asked again once the view is closed (later), else taken at its word
 * (it could as well lie consistently): only a size that differs, or no
 * such export, is refused.
 */
int
view_check_image (struct source *src, const char *base,
                  const char *view_name, const struct blk_header *hdr,
                  const struct blk_range *range, bool later)
{
  const uint64_t image_size = hdr->image_size;
  const bool views_only = hdr->flags & BLK_VIEW_FLAG_VIEWS_ONLY;
  char r[BLK_RANGE_STR_MAX];
  double deadline = 0;
  struct nbd_handle *h;
  int64_t size = -1;

  /* The header's word alone first: whether or not the image is asked. */
  if (range->length && image_size != range->length) {
    error_at (src->name, "the view '%s' describes a %" PRIu64
              " byte image, not the %" PRIu64 " bytes of --range=%s: "
              "not trusting it", view_name, image_size, range->length,
              blk_format_range (range, r));
    return -1;
  }
  /* Extra: the view's connection is held, and a server that admits one
   * client would refuse this one however long it waited.
   */
  h = source_connect (src, base, SOURCE_QUIET | SOURCE_EXTRA, &deadline);
  if (h && source_info (h, deadline) == 0)
    size = nbd_get_size (h);
  /* The flag is the header's word: the server must refuse the image
   * (a disk whose first bytes forge a view, served under every name,
   * does not).
   */
  if (views_only) {
    const bool stopped = stop_signal () != 0;
    /* Busy (one client at a time) is no refusal: asked again later. */
    const bool refused = h && source_errno () == ENOENT;
    if (size != -1)
      view_serves_image (src->name, view_name, base);
    else if (!refused && !stopped && !later)
      view_unchecked (src->name, view_name);
    if (size != -1)
      source_shutdown (h);
    nbd_close (h);
    return size != -1 || stopped ? -1 : !refused && later ? 2 : 0;
  }
  if (size == -1) {
    const bool missing = h && source_errno () == ENOENT;
    const bool stopped = stop_signal () != 0;

    if (missing && !stopped)
      error_at (src->name, "the view '%s' has no image: %s",
                view_name, source_error ());
    else if (!stopped && !later)
      view_unchecked (src->name, view_name);
    else if (stopped)
      local_server_end (src->server);   /* as in view_go */
    nbd_close (h);
    return missing || stopped ? -1 : later ? 2 : 0;
  }
  source_shutdown (h);
  nbd_close (h);
  if (range->length) {
    if (range->offset + range->length > (uint64_t) size) {
      error_at (src->name, "--range=%s ends past the end of the image (%"
                PRIi64 " bytes)", blk_format_range (range, r), size);
      return -1;
    }
    return 1;
  }
  if ((uint64_t) size != image_size) {
    error_at (src->name, "the view '%s' describes a %" PRIu64
              " byte image, but %s%s%s has %" PRIi64 " bytes: not "
              "trusting it", view_name, image_size,
              base[0] ? "export '" : "the default export",
              base, base[0] ? "'" : "", size);
    return -1;
  }
  return 1;
}

/* Connects to the image base of view view_name, whose connections are
 * closed, and asks for it: GO when go, else INFO only.  Returns the
 * handle; or NULL with *r: 0 if the server could not be asked (said:
 * the header is trusted) or refused the name without go (what a
 * views-only view says it does), -1 if it refused it with go (the
 * view has no image: error printed) or after a signal.
 */
static struct nbd_handle *
view_image_ask (struct source *src, const char *base,
                const char *view_name, bool go, int *r)
{
  double deadline = 0;
  struct nbd_handle *h = source_connect (src, base, SOURCE_QUIET,
                                         &deadline);
  bool refused;

  *r = -1;
  if (h && (go ? source_go (h, deadline) : source_info (h, deadline)) == 0)
    return h;
  /* Connected, then asked: a refusal of the name is the server's word
   * that there is no image, not that it is busy.
   */
  refused = h && source_errno () == ENOENT;
  if (h)
    source_handshake_failed (src, 0);   /* as source_connect's */
  if (stop_signal ())
    ;
  else if (refused && go)
    error_at (src->name, "the view '%s' has no image: %s",
              view_name, source_error ());
  else {
    if (!refused)
      view_unchecked (src->name, view_name);
    *r = 0;
  }
  nbd_close (h);
  return NULL;
}

int
view_check_views_only (struct source *src, const char *base,
                       const char *view_name)
{
  int r;
  struct nbd_handle *h = view_image_ask (src, base, view_name, false, &r);

  if (h == NULL)
    return r;
  view_serves_image (src->name, view_name, base);
  source_shutdown (h);
  nbd_close (h);
  return -1;
}

struct nbd_handle *
view_image (struct source *src, const char *base, const char *later,
            unsigned flags, const char *name, const char *what, int *r)
{
  struct nbd_handle *h;

  if (later)
    return view_image_ask (src, base, later, true, r);
  *r = -1;
  h = source_connect (src, base, SOURCE_GO | SOURCE_QUIET | flags, NULL);
  if (h == NULL && !stop_signal ())
    error_at (name, "spot-checking the %s: connecting to its image: %s",
              what, source_error ());
  return h;
}

int
view_go (struct source *src, const struct hash_spec *spec,
         view_name_fn *name_of, const char *what, struct view_go *vg,
         struct fallback *fb)
{
  /* Set by front_retry: this connection is a try again of the first. */
  double deadline = fb->deadline;
  struct nbd_handle *h;
  char *base, *view_name, *notice;
  uint8_t random[BLK_VIEW_NONCE_LEN / 2];

  /* A static file named like the view cannot answer this. */
  if (getrandom (random, sizeof random, 0) != (ssize_t) sizeof random) {
    error_at (src->name, "getrandom: %m");
    return -1;
  }
  blk_hex (random, sizeof random, vg->nonce);
  if ((h = source_connect (src, NULL, 0, &deadline)) == NULL)
    return -1;
  if ((base = nbd_get_export_name (h)) == NULL) {
    error_at (src->name, "%s", nbd_get_error ());
    nbd_close (h);
    return -1;
  }
  /* Newstyle without the fixed flag: NBD_OPT_EXPORT_NAME only, and a
   * name it does not serve closes the connection.  The filter is
   * never behind such a server.
   */
  if (!(nbd_get_handshake_flags (h) & LIBNBD_HANDSHAKE_FLAG_FIXED_NEWSTYLE)) {
    notice = view_filterless_chosen (src->name) ? NULL
      : strdup ("the server speaks NBD's newstyle protocol without the "
                "fixed flag (it cannot refuse a name but by hanging up), "
                "so has no views; hashing client-side");
    *fb = (struct fallback) {
      .h = h, .export_name = base, .deadline = deadline, .notice = notice,
    };
    return 0;
  }
  if ((view_name = name_of (base, spec, vg->nonce)) == NULL ||
      (vg->shown = name_of (base, spec, NULL)) == NULL) {
    error_at (src->name, "out of memory");
    free (view_name);
    free (base);
    nbd_close (h);
    return -1;
  }
  if (nbd_set_export_name (h, view_name) == -1 ||
      source_go (h, deadline) == -1) {
    /* Only an unknown export means "no view"; anything else (TLS
     * required, a dead server, a timeout) is an error to report as it
     * is, and a signal one to keep quiet.
     */
    const int err = source_errno ();
    if (stop_signal () || (err != ENOENT && err != EINVAL)) {
      /* Our own server, cut mid-handshake or stuck in it: as in
       * source_connect (this is the first connection).
       */
      source_handshake_failed (src, 0);
      /* The export named is our private nbdkit's, which waited for
       * its own connection to the server.
       */
      if (!stop_signal () && src->behind && err == ETIMEDOUT)
        error_at (src->name, "%s, with nbdsum's private nbdkit "
                  "--filter=blkhash, waiting for its connection to the "
                  "server", source_error ());
      else if (!stop_signal ())
        error_at (src->name, "%s%s", source_error (), source_hint (h));
      free (base);
      free (view_name);
      free (vg->shown);
      vg->shown = NULL;
      nbd_close (h);
      return -1;
    }
    if (view_filterless_chosen (src->name))
      notice = NULL;
    else if (asprintf (&notice, "no %s '%s' (%s); hashing client-side",
                       what, vg->shown, source_error ()) == -1)
      notice = NULL;
    free (view_name);
    free (vg->shown);
    vg->shown = NULL;
    /* Still negotiating: the client side goes on to the image. */
    *fb = (struct fallback) {
      .h = h, .export_name = base, .deadline = deadline, .notice = notice,
    };
    return 0;
  }
  vg->h = h;
  vg->base = base;
  vg->view_name = view_name;
  return 1;
}

static char *
blkhash_view_name_of (const char *base, const struct hash_spec *spec,
                      const char *nonce)
{
  return blk_view_name_build_range (base, spec->digest, spec->block_size,
                                    &spec->range, nonce);
}

static char *
plain_view_name_of (const char *base, const struct hash_spec *spec,
                    const char *nonce)
{
  return blk_plain_view_name_build_range (base, spec->digest, &spec->range,
                                         nonce);
}

void
view_go_end (struct view_go *vg, bool goodbye)
{
  if (goodbye && vg->h)
    source_shutdown (vg->h);
  nbd_close (vg->h);
  free (vg->base);
  free (vg->view_name);
  free (vg->shown);
  *vg = (struct view_go) { 0 };
}

void
view_not_echoed (const struct view_go *vg, const char *what,
                 struct fallback *fb)
{
  if (asprintf (&fb->notice, "the %s '%s' did not echo the nonce in its "
                "name: not made for this request by nbdkit "
                "--filter=blkhash (a server without it answering every "
                "name with the image, a file named like a view, or a "
                "filter older than nonces); hashing client-side", what,
                vg->shown) == -1)
    fb->notice = NULL;
}

int
view_open (struct source *src, const struct hash_spec *spec, bool plain,
           bool later, struct view_go *vg, struct blk_header *hdr,
           int *checked, struct fallback *fb)
{
  const char *what = plain ? "plain-digest view" : "blkhash view";
  uint8_t buf[BLK_VIEW_HEADER_SIZE];
  int64_t size;
  int r = view_go (src, spec,
                   plain ? plain_view_name_of : blkhash_view_name_of, what,
                   vg, fb);

  *checked = 0;
  if (r <= 0)
    return r;
  r = view_header_bytes (src->name, vg->h, plain ? "the plain-digest "
                         "view's header" : "the view header", buf, &size);
  if (r == 1 && plain)
    r = decode_plain_header (spec, buf, size, vg->nonce, hdr);
  else if (r == 1)
    r = decode_view_header (src->name, spec, buf, size, vg->nonce, hdr);
  if (r == 0 && !view_filterless_chosen (src->name))
    fb->notice = strdup (plain
                         ? "the server has no plain-digest view (is it "
                           "running nbdkit --filter=blkhash, of a version "
                           "with --plain?); hashing client-side"
                         : "the server has no blkhash view (is it running "
                           "nbdkit --filter=blkhash?); hashing client-side");
  if (r == 2) {
    view_not_echoed (vg, what, fb);
    r = 0;
  }
  if (r == 1 && view_size_refused (src, vg->shown, hdr, plain))
    r = -1;
  /* nbdsum's own filter in front of a server: nothing to check. */
  if (r == 1 && !src->behind &&
      (*checked = view_check_image (src, vg->base, vg->shown, hdr,
                                    &spec->range, later)) == -1)
    r = -1;
  /* Not a view: gone before a filter in front connects. */
  if (r <= 0)
    view_go_end (vg, r == 0);
  return r;
}
