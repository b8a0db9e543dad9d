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

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datamap.h"
#include "endpoint.h"
#include "header.h"
#include "helpers.h"
#include "input-kinds.h"
#include "local.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"
#include "signals.h"
#include "spot-check.h"
#include "util.h"

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
  bool views_only;              /* its header says so: not spot-checked */
  char *later;                  /* or, once the view is closed: its name */
  bool digests;                 /* read after the checksum: later, by
                                   view_verify */
  uint8_t root[BLK_DIGEST_MAX];  /* the view's, once read */
  struct blk_range range;       /* of the image; length 0: all of it */
};

static const struct input_ops view_input_ops;
static endpoint_refill_fn view_refill;
static endpoint_scan_fn view_scan;
static int view_verify (struct input *in);

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

int
view_input_open (struct source *src, const struct hash_spec *spec,
                 unsigned flags, struct input **in, struct fallback *fb)
{
  struct view_go vg;
  struct blk_header hdr;
  struct view_input *v;
  struct endpoint *ep;
  const char *msg;
  int checked;
  /* The view's connections are closed for its check only when it is
   * read no more, and the check is the spot check's.
   */
  const bool digests = flags & INPUT_DIGESTS;
  const bool later = opts->spot_check > 0 &&
    (!digests || (flags & INPUT_VERIFY));
  const int r = view_open (src, spec, false, later, &vg, &hdr, &checked,
                           fb);

  if (r <= 0)
    return r;
  if ((v = calloc (1, sizeof *v)) == NULL) {
    error_at (src->name, "out of memory");
    view_go_end (&vg, false);
    return -1;
  }
  if (checked == 2)
    v->later = vg.shown;
  else
    free (vg.shown);
  v->in.ops = &view_input_ops;
  v->in.name = src->name;
  ep = &v->ep;
  endpoint_init (ep, view_refill, src, vg.h);
  v->view_name = vg.view_name;
  v->image_export = vg.base;
  /* Not where the image was not there to ask (said so already). */
  v->views_only = hdr.flags & BLK_VIEW_FLAG_VIEWS_ONLY;
  v->spot = checked >= 1 && opts->spot_check > 0 && !v->views_only;
  v->range = spec->range;
  v->digests = digests;
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
  v->use_cache = nbd_can_cache (vg.h) == 1;
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
  free (v->later);
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
  free (v->later);
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
  const off_t mark = local_server_log_mark (ep->src->server);
  struct nbd_handle *h;

  h = source_connect (ep->src, v->image_export,
                      SOURCE_GO | SOURCE_QUIET | SOURCE_EXTRA, NULL);
  /* Only the bar's: our private nbdkit's line of the refusal by the
   * server behind it (one client at a time) is no news either.
   */
  if (h == NULL) {
    free (local_server_refusal (ep->src->server, mark));
    return;
  }
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
    endpoint_fail_hash (ep, start, *error);
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
      endpoint_read_failed (ep, "reading the checksum");
    return -1;
  }
  memcpy (v->root, root, ep->params->digest.len);
  /* Checked once it is closed: now, or once its digests are read. */
  if (v->later)
    return v->digests ? 0 : view_verify (in);
  /* The root first: the server answers before it sees the draw.  The
   * spot check's connection needs a descriptor of its own.
   */
  if (v->spot) {
    endpoint_keep (ep, 1);
    if (spot_check (ep, v->image_export, NULL, &v->range, &v->map,
                    opts->spot_check, &in->about.spot_checked) == -1 ||
        root_check (ep, root, &in->about.root_checked) == -1)
      return -1;
  }
  return 0;
}

/* The check of a view a server would not let be checked while it was
 * open, which closes it.  A views-only view: is its image refused?
 * Else its root must be what its digests give (asked first: the spot
 * check closes the view), then the spot check.
 */
static int
view_verify (struct input *in)
{
  struct view_input *v = container_of (in, struct view_input, in);
  struct endpoint *ep = &v->ep;

  if (v->later == NULL)
    return 0;
  if (v->views_only) {
    endpoint_keep (ep, 0);
    return view_check_views_only (ep->src, v->image_export, v->later);
  }
  /* Later implies the spot check (its count is not 0). */
  if (root_check (ep, v->root, &in->about.root_checked) == -1 ||
      spot_check (ep, v->image_export, v->later, &v->range, &v->map,
                  opts->spot_check, &in->about.spot_checked) == -1)
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
        endpoint_read_failed (ep, "reading block digests");
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
  .verify = view_verify,
  .close = view_close,
};
