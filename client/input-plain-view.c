/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --plain: the input whose server hashes it: its plain-digest
 * view, NAME@digest:ALG (see nbdkit-blkhash-filter(1)).
 *
 * A plain digest is one serial pass over the bytes, kept per
 * connection on the server: so one connection, on which NBD_CMD_CACHE
 * of the span bytes [8192+a, 8192+b) makes the server hash through
 * span b-1 (spans of the header's size, 1 MiB).  Requests go in order,
 * PLAIN_SPANS spans each (at most that many MiB of work each, then),
 * two in flight so that the server always has the next; each
 * completing moves the bar.  Then every span byte must read 1 (hashed
 * on this connection), and the digest at 4096 is read.  A server without the view (an older filter, any other server)
 * answers with something that does not decode: nbdsum hashes
 * client-side then, and says so.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "endpoint.h"
#include "header.h"
#include "helpers.h"
#include "input-kinds.h"
#include "messages.h"
#include "minmax.h"
#include "signals.h"

/* Spans per NBD_CMD_CACHE, and such requests in flight. */
#define PLAIN_SPANS 64
#define PLAIN_REQUESTS 2
/* Span bytes read at a time when checking them. */
#define SPAN_READ_BYTES (1024 * 1024)

struct plain_view {
  struct input in;
  struct endpoint ep;
  char *view_name;
  uint64_t nspans, next_span;   /* next_span: its connection's thread */
  uint32_t span_size;           /* the header's (the filter's: 1 MiB) */
  bool use_cache;               /* else reading the digest does it all */
};

static const struct input_ops plain_view_ops;
static endpoint_refill_fn plain_view_refill;

int
plain_view_input_open (struct source *src, const struct hash_spec *spec,
                       struct input **in, struct fallback *fb)
{
  struct view_go vg;
  struct blk_header hdr;
  struct plain_view *v;
  struct endpoint *ep;
  const char *msg;
  int checked;
  const int r = view_open (src, spec, true, false, &vg, &hdr, &checked, fb);

  if (r <= 0)
    return r;
  if ((v = calloc (1, sizeof *v)) == NULL) {
    error_at (src->name, "out of memory");
    view_go_end (&vg, false);
    return -1;
  }
  /* One connection: the name on the wire is not needed again. */
  free (vg.base);
  free (vg.view_name);
  v->in.ops = &plain_view_ops;
  v->in.name = src->name;
  v->in.plain = true;
  v->view_name = vg.shown;
  v->nspans = hdr.block_count;
  v->span_size = hdr.block_size;
  v->use_cache = nbd_can_cache (vg.h) == 1;
  ep = &v->ep;
  /* One connection: the server's digest is this connection's. */
  endpoint_init (ep, plain_view_refill, src, vg.h);
  ep->requests = PLAIN_REQUESTS;
  ep->size = hdr.image_size;
  ep->nblocks = hdr.block_count;
  if ((msg = blk_params_init (&ep->own_params, hdr.digest_name,
                              BLK_DEFAULT_BLOCK_SIZE)) != NULL) {
    error_at (src->name, "%s: %s", hdr.digest_name, msg);
    endpoint_close (ep);
    free (v->view_name);
    free (v);
    return -1;
  }
  ep->params = &ep->own_params;
  v->in.params = ep->params;
  v->in.size = ep->size;
  *in = &v->in;
  return 1;
}

static void
plain_view_close (struct input *in)
{
  struct plain_view *v = container_of (in, struct plain_view, in);
  struct source *src = v->ep.src;

  endpoint_close (&v->ep);
  blk_params_free (&v->ep.own_params);
  free (v->view_name);
  free (v);
  source_close (src);
}

static int
cache_done (void *opaque, int *error)
{
  struct request *r = opaque;
  struct endpoint *ep = r->ep;
  const uint64_t span = container_of (ep, struct plain_view, ep)->span_size;
  const uint64_t start = r->first * span;
  const uint64_t end = MIN ((r->first + r->count) * span, ep->size);

  if (*error)
    endpoint_fail_hash (ep, start, *error);
  else
    progress_add (&ep->progress, end - start, end - start);
  r->c->in_flight--;
  return 1;
}

static int
plain_view_refill (struct endpoint *ep, unsigned i)
{
  struct plain_view *v = container_of (ep, struct plain_view, ep);
  struct conn *c = &ep->conns[i];
  const uint64_t first = v->next_span;
  const uint64_t count = MIN ((uint64_t) PLAIN_SPANS, v->nspans - first);
  struct request *r;

  if (!v->use_cache || count == 0)
    return 0;
  if ((r = request_new (c, first, count, 0)) == NULL)
    return -1;
  if (nbd_aio_cache (c->h, count, BLK_VIEW_DIGESTS_OFFSET + first,
                     (nbd_completion_callback) {
                       .callback = cache_done, .user_data = r,
                       .free = request_free }, 0) == -1) {
    endpoint_fail (ep, "%s", nbd_get_error ());
    return -1;
  }
  v->next_span = first + count;
  c->in_flight++;
  return 1;
}

/* Every span hashed on this connection, as the server says. */
static int
check_spans (struct plain_view *v)
{
  struct endpoint *ep = &v->ep;
  uint8_t *buf = malloc (SPAN_READ_BYTES);
  int r = -1;

  if (buf == NULL) {
    error_at (ep->src->name, "out of memory");
    return -1;
  }
  for (uint64_t s = 0; s < v->nspans; s += SPAN_READ_BYTES) {
    const size_t n = MIN (v->nspans - s, (uint64_t) SPAN_READ_BYTES);
    if (source_pread (ep->conns[0].h, buf, n,
                      BLK_VIEW_DIGESTS_OFFSET + s) == -1) {
      if (!stop_signal ())
        error_at (ep->src->name, "reading the plain-digest view: %s",
                  source_error ());
      goto out;
    }
    for (size_t k = 0; k < n; k++)
      if (buf[k] != 1) {
        error_at (ep->src->name, "the server did not hash span %" PRIu64
                  " of '%s' (it says %u): not trusting its digest",
                  s + k, v->view_name, buf[k]);
        goto out;
      }
  }
  r = 0;
 out:
  free (buf);
  return r;
}

static int
plain_view_checksum (struct input *in, uint8_t *root)
{
  struct plain_view *v = container_of (in, struct plain_view, in);
  struct endpoint *ep = &v->ep;

  if (endpoint_run (ep) == -1)
    return -1;
  if (v->use_cache && check_spans (v) == -1)
    return -1;
  /* Without CACHE this one read does all the work. */
  if (source_pread (ep->conns[0].h, root, ep->params->digest.len,
                    BLK_VIEW_ROOT_OFFSET) == -1) {
    if (!stop_signal ())
      error_at (ep->src->name, "reading the digest: %s", source_error ());
    return -1;
  }
  return 0;
}

static const struct input_ops plain_view_ops = {
  .method = "server-side",
  .checksum = plain_view_checksum,
  .digests = NULL,
  .close = plain_view_close,
};
