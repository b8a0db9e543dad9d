/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the input whose server hashes it: its blkhash view.
 *
 * Connections take spans of blocks in order from a shared counter and
 * send one NBD_CMD_CACHE of the view's digests for each: the server
 * hashes the C x R spans in flight at once (as many as nbdkit has
 * threads for) and folds the completed prefix into the root as it
 * goes.  Then the root is read: almost nothing crosses the network.
 *
 * A span's size is counted in data bytes, from the image's extents
 * (read first, datamap.h): runs of holes cost nothing and are taken in
 * whole, up to SPAN_BYTES of image.  Progress moves only when a span
 * completes, and the C x R spans started together end together, so on
 * slow storage spans must be small, and fast storage wants them large
 * (per request costs).  A connection's spans start at
 * START_SPAN_BYTES of data, double while one carrying at least half
 * its data takes under SPAN_FAST seconds, and halve when one takes
 * over SPAN_SLOW, down to MIN_SPAN_BYTES; at most SPAN_BYTES, less if
 * an even share of the image per request in flight is less (the
 * storage sees the queue depth asked for).  On slow storage the bar
 * moves every fraction of a second; from the page cache spans reach
 * their largest after a few.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "datamap.h"
#include "endpoint.h"
#include "header.h"
#include "helpers.h"
#include "input-kinds.h"
#include "local.h"
#include "messages.h"
#include "minmax.h"
#include "names.h"
#include "options.h"
#include "signals.h"
#include "spot-check.h"
#include "util.h"
#include "viewname.h"

/* Digests read at a time by --diff and --blocks. */
#define DIGEST_READ_BYTES (1024 * 1024)

struct view_input {
  struct input in;
  struct endpoint ep;
  char *view_name;
  char *image_export;           /* the image's, which has extents */
  struct data_map map;          /* its data, for the bar */
  pthread_mutex_t lock;         /* next_block */
  uint64_t next_block;
  uint64_t span_min, span_max;  /* blocks of data */
  uint64_t span[MAX_CONNECTIONS]; /* each connection's, in its thread */
  bool use_cache;               /* else drive the server with reads */
  bool spot;                    /* its image is there to spot-check */
  struct blk_range range;       /* of the image; length 0: all of it */
};

static const struct input_ops view_input_ops;
static endpoint_refill_fn view_refill;
static endpoint_scan_fn view_scan;

/* Read the header into hdr and check it against what spec asks.
 * Returns 1 if valid, 0 if the export is not a view at all, 2 if it
 * does not echo nonce (so that nothing else in it counts), -1 if it is
 * a bad one.
 */
static int
read_header (const char *name, const struct hash_spec *spec,
             struct nbd_handle *h, const char *nonce, struct blk_header *hdr)
{
  uint8_t buf[BLK_VIEW_HEADER_SIZE];
  int64_t view_size = nbd_get_size (h);
  struct blk_digest d;
  const char *msg;
  size_t len;

  if (view_size == -1) {
    error_at (name, "%s", nbd_get_error ());
    return -1;
  }
  if (view_size < BLK_VIEW_DIGESTS_OFFSET)
    return 0;
  if (source_pread (h, buf, sizeof buf, 0) == -1) {
    if (!stop_signal ())
      error_at (name, "reading the view header: %s", source_error ());
    return -1;
  }
  if (!blk_header_has_magic (buf, sizeof buf))
    return 0;
  if (!blk_header_echoes (buf, sizeof buf, nonce))
    return 2;
  if ((msg = blk_header_decode (buf, sizeof buf, hdr)) != NULL) {
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

/* Spans' sizes: see the top of this file. */
#define MIN_SPAN_BYTES (UINT64_C (1) << 20)
#define START_SPAN_BYTES (UINT64_C (4) << 20)
#define SPAN_FAST 0.25
#define SPAN_SLOW 1.0

static void
span_limits (struct view_input *v)
{
  const struct endpoint *ep = &v->ep;
  const uint32_t bs = ep->params->block_size;
  const uint64_t in_flight = (uint64_t) ep->nconns * ep->requests;
  const uint64_t most = blk_blocks_per (SPAN_BYTES, bs);
  const uint64_t least = blk_blocks_per (MIN_SPAN_BYTES, bs);
  const uint64_t even = (ep->nblocks + in_flight - 1) / in_flight;

  v->span_max = MAX (least, MIN (most, even));
  v->span_min = MIN (least, v->span_max);
  for (unsigned i = 0; i < MAX_CONNECTIONS; i++)
    v->span[i] = MIN (v->span_max,
                      MAX (v->span_min, blk_blocks_per (START_SPAN_BYTES, bs)));
}

bool
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

/* Is the view about the image served next to it?  A server may serve
 * any view; one whose header does not even give the export's size is
 * refused.  The size comes from NBD_OPT_INFO on a connection of its
 * own, made while the view is open: asked on the first connection,
 * before it goes to the view, nbdsum would be the export's last client
 * leaving, and a filter with blkhash-file= would hash the whole image
 * then.  A server that admits no other client, or will not say, is
 * taken at its word (it could as well lie consistently): only a size
 * that differs, or no such export, is refused.
 */
int
view_check_image (struct source *src, const char *base,
                  const char *view_name, const struct blk_header *hdr,
                  const struct blk_range *range)
{
  const uint64_t image_size = hdr->image_size;
  const bool views_only = hdr->flags & BLK_VIEW_FLAG_VIEWS_ONLY;
  double deadline;
  struct nbd_handle *h = source_connect (src, base, SOURCE_QUIET, &deadline);
  int64_t size = -1;

  if (h && source_info (h, deadline) == 0)
    size = nbd_get_size (h);
  /* The flag is the header's word: the server must refuse the image
   * (a disk whose first bytes forge a view, served under every name,
   * does not).
   */
  if (views_only) {
    const bool stopped = stop_signal () != 0;
    if (size != -1)
      error_at (src->name, "the view '%s' says its server serves only "
                "views, but it serves %s%s%s too: not trusting it",
                view_name, base[0] ? "export '" : "the default export",
                base, base[0] ? "'" : "");
    if (size != -1)
      source_shutdown (h);
    nbd_close (h);
    return size != -1 || stopped ? -1 : 0;
  }
  if (size == -1) {
    const bool missing = h && source_errno () == ENOENT;
    const bool stopped = stop_signal () != 0;

    if (missing && !stopped)
      error_at (src->name, "the blkhash view '%s' has no image: %s",
                view_name, source_error ());
    else if (!stopped)
      notice_at (src->name, "cannot check the blkhash view '%s' against "
                 "its image (%s); trusting its header", view_name,
                 source_error ());
    else
      local_server_end (src->server);   /* as in view_go */
    nbd_close (h);
    return missing || stopped ? -1 : 0;
  }
  source_shutdown (h);
  nbd_close (h);
  if (range->length) {
    char r[BLK_RANGE_STR_MAX];
    blk_format_range (range, r);
    if (image_size != range->length) {
      error_at (src->name, "the blkhash view '%s' describes a %" PRIu64
                " byte image, not the %" PRIu64 " bytes of --range=%s: "
                "not trusting it", view_name, image_size, range->length, r);
      return -1;
    }
    if (range->offset + range->length > (uint64_t) size) {
      error_at (src->name, "--range=%s ends past the end of the image (%"
                PRIi64 " bytes)", r, size);
      return -1;
    }
    return 1;
  }
  if ((uint64_t) size != image_size) {
    error_at (src->name, "the blkhash view '%s' describes a %" PRIu64
              " byte image, but %s%s%s has %" PRIi64 " bytes: not "
              "trusting it", view_name, image_size,
              base[0] ? "export '" : "the default export",
              base, base[0] ? "'" : "", size);
    return -1;
  }
  return 1;
}

bool
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
view_go (struct source *src, const struct hash_spec *spec,
         view_name_fn *name_of, const char *what, struct view_go *vg,
         struct fallback *fb)
{
  double deadline;
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
      if (!stop_signal ())
        error_at (src->name, "%s%s", source_error (), source_hint (h));
      /* Cut mid-handshake: our own server goes first (as in
       * source_connect), or it complains of the client that vanished.
       */
      else
        local_server_end (src->server);
      free (base);
      free (view_name);
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

bool
view_echoes (const struct view_go *vg, const struct blk_header *hdr,
             const char *what, struct fallback *fb)
{
  if (hdr && strcmp (hdr->nonce, vg->nonce) == 0)
    return true;
  if (asprintf (&fb->notice, "the %s '%s' did not echo the nonce in its "
                "name: not made for this request by nbdkit --filter=blkhash "
                "(a file named like a view, or a filter older than "
                "nonces?); hashing client-side", what, vg->shown) == -1)
    fb->notice = NULL;
  return false;
}

static char *
blkhash_view_name_of (const char *base, const struct hash_spec *spec,
                      const char *nonce)
{
  return blk_view_name_build_range (base, spec->digest, spec->block_size,
                                    &spec->range, nonce);
}

int
view_input_open (struct source *src, const struct hash_spec *spec,
                 struct input **in, struct fallback *fb)
{
  struct view_go vg;
  struct nbd_handle *h;
  struct blk_header hdr;
  struct view_input *v;
  struct endpoint *ep;
  char *base, *view_name;
  const char *msg;
  bool spot = false;
  int r;

  r = view_go (src, spec, blkhash_view_name_of, "blkhash view", &vg, fb);
  if (r <= 0)
    return r;
  h = vg.h;
  base = vg.base;
  view_name = vg.view_name;
  r = read_header (src->name, spec, h, vg.nonce, &hdr);
  if (r == 0 && !view_filterless_chosen (src->name))
    fb->notice = strdup ("the server has no blkhash view (is it running "
                         "nbdkit --filter=blkhash?); hashing client-side");
  if (r == 2) {
    view_echoes (&vg, NULL, "blkhash view", fb);
    r = 0;
  }
  if (r == 1 && view_size_refused (src, vg.shown, &hdr, false))
    r = -1;
  /* nbdsum's own filter in front of a server: nothing to check. */
  if (r == 1 && !src->behind) {
    const int checked = view_check_image (src, base, vg.shown, &hdr,
                                          &spec->range);
    if (checked == -1)
      r = -1;
    /* Not where the image was not there to ask (said so already). */
    spot = checked == 1;
  }
  free (vg.shown);
  if (r <= 0) {
    free (base);
    free (view_name);
    /* Not a view: gone before a filter in front connects, so that a
     * server admitting a client at a time is free for it.
     */
    if (r == 0)
      source_shutdown (h);
    nbd_close (h);
    return r;
  }

  if ((v = calloc (1, sizeof *v)) == NULL) {
    error_at (src->name, "out of memory");
    free (base);
    free (view_name);
    nbd_close (h);
    return -1;
  }
  v->in.ops = &view_input_ops;
  v->in.name = src->name;
  ep = &v->ep;
  endpoint_init (ep, view_refill, src, h);
  v->view_name = view_name;
  v->image_export = base;
  v->spot = spot && opts->spot_check > 0;
  v->range = spec->range;
  ep->scan = view_scan;
  /* Not only for the bar: the spans are sized by data.  A views-only
   * server serves no extents.
   */
  if (hdr.flags & BLK_VIEW_FLAG_VIEWS_ONLY)
    ep->scan = NULL;
  ep->scan_always = true;
  /* Through nbdsum's filter in front of a server, only for the bar: it
   * is a connection to the server more than -C says (and one a server
   * admitting a client at a time would never answer).
   */
  if (src->behind) {
    ep->scan_always = false;
    if (src->single)
      ep->scan = NULL;
  }
  pthread_mutex_init (&v->lock, NULL);
  ep->size = hdr.image_size;
  ep->nblocks = hdr.block_count;
  /* The header's digest and block size, checked above; the zero
   * digest recognises zero blocks in --blocks.
   */
  if ((msg = blk_params_init (&ep->own_params, hdr.digest_name,
                              hdr.block_size)) != NULL) {
    error_at (src->name, "%s: %s", hdr.digest_name, msg);
    goto err;
  }
  ep->params = &ep->own_params;
  v->use_cache = nbd_can_cache (h) == 1;
  if (endpoint_connect_rest (ep, v->view_name) == -1)
    goto err;
  span_limits (v);
  v->in.params = ep->params;
  v->in.size = ep->size;
  v->in.nblocks = ep->nblocks;
  *in = &v->in;
  return 1;

 err:
  /* src is the caller's again. */
  endpoint_close (ep);
  if (ep->params)
    blk_params_free (&ep->own_params);
  free (v->view_name);
  free (v->image_export);
  free (v);
  return -1;
}

static void
view_close (struct input *in)
{
  struct view_input *v = container_of (in, struct view_input, in);
  struct source *src = v->ep.src;

  endpoint_close (&v->ep);
  if (v->ep.params)
    blk_params_free (&v->ep.own_params);
  free (v->view_name);
  free (v->image_export);
  data_map_free (&v->map);
  pthread_mutex_destroy (&v->lock);
  free (v);
  source_close (src);
}

/* The view has no extents, the image's export has: for the spans and
 * the bar.  A connection of its own, closed at once.
 */
static void
view_scan (struct endpoint *ep)
{
  struct view_input *v = container_of (ep, struct view_input, ep);
  struct nbd_handle *h;

  h = source_connect (ep->src, v->image_export, SOURCE_GO | SOURCE_QUIET,
                      NULL);
  if (h == NULL)
    return;
  if (nbd_get_size (h) == (int64_t) ep->size) {
    data_map_scan (&v->map, h, ep->size, ep->params->block_size);
    if (v->map.known)
      progress_set_data (&ep->progress, v->map.data);
  }
  source_shutdown (h);
  nbd_close (h);
}

static int
request_done (void *opaque, int *error)
{
  struct request *r = opaque;
  struct endpoint *ep = r->ep;
  struct view_input *v = container_of (ep, struct view_input, ep);
  const uint64_t start = r->first * ep->params->block_size;
  const uint64_t end = (r->first + r->count) * ep->params->block_size;
  const uint64_t len = MIN (end, ep->size) - start;

  const double took = now () - r->started;
  const uint64_t data = data_map_data_in (&v->map, start, len);
  uint64_t *span = &v->span[r->c->index];

  if (*error)
    endpoint_fail (ep, "server failed to hash image bytes from %" PRIu64
                   ": %s", start, strerror (*error));
  else
    progress_add (&ep->progress, len, data);
  /* Fast with holes only says nothing of the data's speed. */
  if (took < SPAN_FAST && data >= *span * ep->params->block_size / 2)
    *span = MIN (v->span_max, *span * 2);
  else if (took > SPAN_SLOW)
    *span = MAX (v->span_min, *span / 2);
  r->c->in_flight--;
  return 1;
}

static int
view_refill (struct endpoint *ep, unsigned i)
{
  struct view_input *v = container_of (ep, struct view_input, ep);
  struct conn *c = &ep->conns[i];
  const uint32_t bs = ep->params->block_size;
  uint64_t first, count = 0, offset, len;
  struct request *r;
  int64_t cookie;

  /* span[i] blocks of data, and the holes among them. */
  pthread_mutex_lock (&v->lock);
  first = v->next_block;
  if (first < ep->nblocks) {
    const uint64_t reach = data_map_reach (&v->map, first * bs,
                                           v->span[i] * bs, SPAN_BYTES);
    count = MIN (MAX ((reach + bs - 1) / bs, UINT64_C (1)),
                 ep->nblocks - first);
    v->next_block = first + count;
  }
  pthread_mutex_unlock (&v->lock);
  if (count == 0)
    return 0;
  offset = BLK_VIEW_DIGESTS_OFFSET + first * ep->params->digest.len;
  len = count * ep->params->digest.len;
  r = request_new (c, first, count, v->use_cache ? 0 : len);
  if (r == NULL)
    return -1;
  nbd_completion_callback cb = {
    .callback = request_done, .user_data = r, .free = request_free
  };
  cookie = v->use_cache
    ? nbd_aio_cache (c->h, len, offset, cb, 0)
    : nbd_aio_pread (c->h, r->buf, len, offset, cb, 0);
  if (cookie == -1) {
    endpoint_fail (ep, "%s", nbd_get_error ());
    return -1;
  }
  c->in_flight++;
  return 1;
}

static int
view_checksum (struct input *in, uint8_t *root)
{
  struct view_input *v = container_of (in, struct view_input, in);
  struct endpoint *ep = &v->ep;

  if (endpoint_run (ep) == -1)
    return -1;
  if (source_pread (ep->conns[0].h, root, ep->params->digest.len,
                    BLK_VIEW_ROOT_OFFSET) == -1) {
    if (!stop_signal ())
      error_at (ep->src->name, "reading the checksum: %s", source_error ());
    return -1;
  }
  /* The root first: the server answers before it sees the draw. */
  /* The spot check's connection needs a descriptor of its own. */
  if (v->spot)
    endpoint_keep_one (ep);
  if (v->spot && spot_check (ep, v->image_export, &v->range, &v->map,
                             opts->spot_check, &in->about.spot_checked) == -1)
    return -1;
  /* With the spot check: its root must be what its digests give. */
  if (v->spot && root_check (ep, root, &in->about.root_checked) == -1)
    return -1;
  return 0;
}

/* Only digests cross the network, DIGEST_READ_BYTES at most at a
 * time.
 */
static int
view_digests (struct input *in, uint64_t first, uint64_t count,
              uint8_t *out)
{
  struct endpoint *ep = &container_of (in, struct view_input, in)->ep;
  const uint64_t per_read = DIGEST_READ_BYTES / ep->params->digest.len;

  for (uint64_t b = first; b < first + count; b += per_read) {
    const uint64_t n = MIN (first + count - b, per_read);
    if (source_pread (ep->conns[0].h,
                      out + (b - first) * ep->params->digest.len,
                      n * ep->params->digest.len,
                      BLK_VIEW_DIGESTS_OFFSET + b * ep->params->digest.len)
        == -1) {
      if (!stop_signal ())
        error_at (ep->src->name, "reading block digests: %s",
                  source_error ());
      return -1;
    }
  }
  return 0;
}

struct endpoint *
view_input_endpoint (struct input *in)
{
  return &container_of (in, struct view_input, in)->ep;
}

static const struct input_ops view_input_ops = {
  .method = "server-side",
  .checksum = view_checksum,
  .digests = view_digests,
  .close = view_close,
};
