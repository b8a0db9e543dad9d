/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --since: which blocks changed on the server, and their
 * digests (see since-internal.h).
 *
 * What changed comes from a dirty bitmap the server exports as the
 * metadata context qemu:dirty-bitmap:NAME (qemu-nbd -B NAME, qemu's
 * NBD server); nbdkit exports none, so the blocks are hashed by
 * nbdsum's private nbdkit --filter=blkhash nbd in front of the server
 * (input-front.c): the digests of the blocks to hash are read from its
 * view, C connections with R requests in flight (the filter does not
 * read holes), while one connection of nbdsum's own asks the server
 * for the bitmap, segment by segment (a server that admits one client
 * at a time, without multi-conn, as qemu-nbd without --shared, is
 * hashed here on the bitmap's connection: input-client.c).  A block is
 * hashed when it overlaps a dirty extent, when its data comes from a
 * backing file (qemu:allocation-depth 2 or more: the bitmap does not
 * see writes there), or when its length is not the one it had in the
 * manifest (the image grew: the grown tail, the old short last block,
 * the new one); every other digest is the manifest's (input-since.c).
 * An image smaller than the manifest's is refused.  A local qcow2 file
 * is served by qemu-nbd once qemu-img says its bitmap is
 * enabled and consistent (local-bitmap.c).
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "local.h"
#include "messages.h"
#include "minmax.h"
#include "names.h"
#include "options.h"
#include "signals.h"
#include "since-internal.h"
#include "source.h"
#include "table.h"

/* qemu's dirty bitmap context: flag 1 marks dirty extents. */
#define DIRTY_BITMAP_PREFIX "qemu:dirty-bitmap:"
#define DIRTY_FLAG 1
/* qemu's allocation depth: 0 unallocated, 1 the image's own layer, 2
 * and more a backing file's.
 */
#define DEPTH_CONTEXT "qemu:allocation-depth"
#define DEPTH_BACKING 2

/* Image bytes whose digests one request of the view asks for at most:
 * enough requests in flight to keep the filter's threads busy.
 */
#define VIEW_READ_BYTES (1024 * 1024)

/* What the server says of a segment of blocks: the dirty bitmap, the
 * allocation depth, and whether each reads as zeros.
 */
struct status_walk {
  struct incremental *inc;
  uint64_t first, count;        /* the segment, in blocks */
  uint64_t start, end;          /* and in bytes */
  bool *skip;                   /* clean so far */
  bool *nonzero;                /* a byte not described as zero */
  uint64_t dirty_end, depth_end, alloc_end;     /* described up to */
};

static int
status_cb (void *opaque, const char *metacontext, uint64_t offset,
           uint32_t *entries, size_t nr_entries, int *error)
{
  struct status_walk *w = opaque;
  const struct incremental *inc = w->inc;
  const uint32_t bs = inc->ep->params->block_size;
  enum { DIRTY, DEPTH, ALLOC } kind;
  uint64_t *end;

  if (strcmp (metacontext, inc->context) == 0)
    kind = DIRTY, end = &w->dirty_end;
  else if (inc->depth_context &&
           strcmp (metacontext, inc->depth_context) == 0)
    kind = DEPTH, end = &w->depth_end;
  else if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) == 0)
    kind = ALLOC, end = &w->alloc_end;
  else
    return 0;
  /* Only what continues the description counts (a gap in
   * base:allocation would pass for zeros).
   */
  if (offset > *end)
    return 0;
  for (size_t i = 0; i + 1 < nr_entries; i += 2) {
    const uint64_t next = offset + entries[i];
    const uint32_t flags = entries[i + 1];
    const uint64_t lo = MAX (offset, w->start), hi = MIN (next, w->end);
    bool mark;

    switch (kind) {
    case DIRTY: mark = flags & DIRTY_FLAG; break;
    case DEPTH: mark = flags >= DEPTH_BACKING; break;
    default: mark = !(flags & LIBNBD_STATE_ZERO); break;
    }
    /* Every block with a byte in the extent, within the segment. */
    if (mark && lo < hi)
      for (uint64_t b = lo / bs; b < (hi - 1) / bs + 1; b++) {
        if (kind == ALLOC)
          w->nonzero[b - w->first] = true;
        else
          w->skip[b - w->first] = false;
      }
    offset = next;
  }
  if (offset > *end)
    *end = offset;
  return 0;
}

/* Ask until the bitmap and the depth describe the whole segment
 * (missing or short answers never pass for clean), and base:allocation
 * as far as the server says.
 */
static int
describe (struct endpoint *ep, struct nbd_handle *h, struct status_walk *w)
{
  const struct incremental *inc = w->inc;

  for (;;) {
    const char *lagging = w->dirty_end <= w->depth_end
      ? inc->context : inc->depth_context;
    uint64_t pos = MIN (w->dirty_end, w->depth_end), now;

    if (pos >= w->end) {
      if (w->alloc_end >= w->end)
        return 0;
      pos = w->alloc_end;
      lagging = NULL;
    }
    if (source_block_status (h, w->end - pos, pos,
                             (nbd_extent_callback) {
                               .callback = status_cb, .user_data = w })
        == -1) {
      endpoint_fail (ep, "block status of %s: %s", inc->context,
                     source_error ());
      return -1;
    }
    now = lagging ? MIN (w->dirty_end, w->depth_end) : w->alloc_end;
    if (now <= pos) {
      /* Zeros unknown there: those blocks are only not cross-checked. */
      if (lagging == NULL)
        return 0;
      endpoint_fail (ep, "the server did not describe %s at offset %"
                     PRIu64, lagging, pos);
      return -1;
    }
  }
}

/* Set skip[i] for the blocks the manifest has and the server says are
 * clean (not dirty, not from a backing file) among [first,
 * first+count); note those that read as zeros.  Returns 0, or -1 after
 * endpoint_fail.
 */
static int
select_clean (void *opaque, struct endpoint *ep, struct nbd_handle *h,
              uint64_t first, uint64_t count, bool *skip)
{
  struct incremental *inc = opaque;
  const uint32_t bs = ep->params->block_size;
  const uint64_t start = first * bs, end = MIN ((first + count) * bs,
                                                ep->size);
  CLEANUP_FREE bool *nonzero = NULL;
  struct status_walk w = {
    inc, first, count, start, end, skip, NULL,
    start, inc->depth_context ? start : end, start,
  };
  bool any = false;

  for (uint64_t i = 0; i < count; i++)
    any |= skip[i] = reusable (inc, first + i);
  if (!any)
    return 0;
  if ((w.nonzero = nonzero = calloc (count, sizeof *nonzero)) == NULL) {
    endpoint_fail (ep, "out of memory");
    return -1;
  }
  if (describe (ep, h, &w) == -1)
    return -1;
  for (uint64_t i = 0, run = 0; i <= count; i++) {
    const uint64_t b = first + i;
    const bool zero = i < count && skip[i] && !nonzero[i] &&
      MIN ((b + 1) * bs, ep->size) <= w.alloc_end;

    if (zero) {
      run++;
      continue;
    }
    if (run)
      blk_table_store_zero (inc->zeros, b - run, run, inc->zeros_snapshot);
    run = 0;
  }
  return 0;
}

/* Connected on h: the contexts --since needs. */
static int
check_contexts (struct incremental *inc, struct nbd_handle *h)
{
  if (nbd_can_meta_context (h, inc->context) != 1) {
    error_at (inc->name, "the server exports no dirty bitmap '%s' (%s): "
              "serve the image with qemu-nbd -A -B %s, or export the "
              "bitmap from qemu's NBD server", opts->dirty_bitmap,
              inc->context, opts->dirty_bitmap);
    return -1;
  }
  if (inc->depth_context && nbd_can_meta_context (h, DEPTH_CONTEXT) != 1) {
    error_at (inc->name, "the server does not offer %s, so nbdsum cannot "
              "tell the blocks that come from a backing file, whose writes "
              "the bitmap does not see: serve the image with qemu-nbd -A "
              "(qemu's NBD server: allocation-depth), or give "
              "--immutable-backing if it has no backing file or its "
              "backing files never change", DEPTH_CONTEXT);
    return -1;
  }
  if (nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) != 1) {
    error_at (inc->name, "the server does not offer %s: nbdsum cannot "
              "check the bitmap against the image's allocation",
              LIBNBD_CONTEXT_BASE_ALLOCATION);
    return -1;
  }
  return 0;
}

/* The image's size, as the view says: one nbdsum can trust. */
static int
check_size (struct incremental *inc)
{
  if (inc->ep->size < inc->old_size) {
    error_at (inc->name, "%" PRIu64 " bytes, fewer than the %" PRIu64 " of "
              "the manifest: a dirty bitmap does not record what a shrink "
              "discards, and nbdsum cannot know the smallest size the "
              "image went through; run without --since, with --blocks to "
              "start a new chain", inc->ep->size, inc->old_size);
    return -1;
  }
  if (inc->ep->size > inc->old_size)
    notice_at (inc->name, "%" PRIu64 " bytes, %" PRIu64 " in the manifest: "
               "the blocks past its size, and its last if it was short, "
               "are hashed", inc->ep->size, inc->old_size);
  return 0;
}

/* A connection's segment of blocks, and which of them to hash. */
struct since_conn {
  struct incremental *inc;
  uint64_t first, count, pos;   /* blocks; pos is the next to ask */
  bool skip[];                  /* per block of the segment: clean */
};

/* Take the next segment, and find its clean blocks (one thread at a
 * time on the status connection).  1, 0 when none is left, or -1
 * after endpoint_fail.
 */
static int
next_segment (struct endpoint *ep, struct since_conn *sc)
{
  struct incremental *inc = sc->inc;
  const uint64_t seg = atomic_fetch_add (&inc->next_seg, 1);
  uint64_t skipped = 0;
  int r;

  if (seg >= inc->nsegs)
    return 0;
  sc->first = seg * inc->seg_blocks;
  sc->count = MIN (inc->seg_blocks, ep->nblocks - sc->first);
  sc->pos = 0;
  memset (sc->skip, 0, sc->count * sizeof *sc->skip);
  pthread_mutex_lock (&inc->status_lock);
  r = select_clean (inc, ep, inc->status, sc->first, sc->count, sc->skip);
  pthread_mutex_unlock (&inc->status_lock);
  if (r == -1)
    return -1;
  for (uint64_t i = 0; i < sc->count; i++)
    if (sc->skip[i])
      skipped += blk_block_len (ep->size, ep->params->block_size,
                                sc->first + i);
  progress_add (&ep->progress, skipped, 0);
  return 1;
}

static int
digests_done (void *opaque, int *error)
{
  struct request *r = opaque;
  struct endpoint *ep = r->ep;
  struct incremental *inc = ((struct since_conn *) r->c->priv)->inc;
  const uint32_t bs = ep->params->block_size;
  uint64_t bytes = 0;

  r->c->in_flight--;
  if (*error) {
    endpoint_fail_hash (ep, r->first * bs, *error);
    return 1;
  }
  blk_table_store (inc->table, r->first, r->count, r->buf, NULL, NULL,
                   inc->snapshot);
  for (uint64_t b = r->first; b < r->first + r->count; b++)
    bytes += blk_block_len (ep->size, bs, b);
  progress_add (&ep->progress, bytes, bytes);
  return 1;
}

/* endpoint_refill_fn: the digests of the next run of blocks to hash,
 * read from the view.
 */
static int
since_refill (struct endpoint *ep, unsigned i)
{
  struct conn *c = &ep->conns[i];
  struct since_conn *sc = c->priv;
  const size_t len = ep->params->digest.len;
  struct request *r;
  uint64_t n = 0;

  for (;;) {
    while (sc->pos < sc->count && sc->skip[sc->pos])
      sc->pos++;
    if (sc->pos < sc->count)
      break;
    const int s = next_segment (ep, sc);
    if (s <= 0)
      return s;
  }
  while (sc->pos + n < sc->count && n < sc->inc->read_blocks &&
         !sc->skip[sc->pos + n])
    n++;
  if ((r = request_new (c, sc->first + sc->pos, n, n * len)) == NULL)
    return -1;
  if (nbd_aio_pread (c->h, r->buf, n * len,
                     BLK_VIEW_DIGESTS_OFFSET + r->first * len,
                     (nbd_completion_callback) {
                       .callback = digests_done, .user_data = r,
                       .free = request_free }, 0) == -1) {
    endpoint_fail (ep, "%s", nbd_get_error ());
    return -1;
  }
  sc->pos += n;
  c->in_flight++;
  return 1;
}

/* A server that admits one client at a time: hashing here, on the
 * connection that reads the bitmap.
 */
static int
open_client (struct incremental *inc, const struct hash_spec *hs)
{
  inc->select = (struct client_select) { select_clean, inc };
  /* It takes the source. */
  inc->client = client_input_open (inc->src, hs, &inc->select);
  inc->src = NULL;
  if (inc->client == NULL)
    return -1;
  inc->ep = client_input_endpoint (inc->client);
  return check_contexts (inc, inc->ep->conns[0].h) == -1 ||
    check_size (inc) == -1 ? -1 : 0;
}

/* Does the server admit more than one client (multi-conn)?  Asked
 * with NBD_OPT_INFO, not GO: qemu-nbd without --persistent exits when
 * a client that went to the export leaves.  1, 0, or -1 (error
 * printed).
 */
static int
multi_conn (struct incremental *inc)
{
  double deadline = 0;
  struct nbd_handle *h = source_connect (inc->src, NULL, 0, &deadline);
  int r = -1;

  if (h == NULL)
    return -1;
  if (source_info (h, deadline) == -1) {
    if (!stop_signal ())
      error_at (inc->name, "%s%s", source_error (), source_hint (h));
    else
      local_server_end (inc->src->server);      /* as in view_go */
  }
  else
    r = nbd_can_multi_conn (h) == 1;
  source_shutdown (h);
  nbd_close (h);
  return r;
}

/* The server, with the bitmap, on inc->status; then nbdsum's private
 * filter in front of it, and its view on inc->ep.  A server that
 * admits one client at a time would never admit the filter's
 * connection while inc->status reads the bitmap: open_client then.
 */
int
since_server_open (struct incremental *inc, const struct hash_spec *hs)
{
  struct fallback fb = { NULL, NULL, 0, NULL, NULL };
  struct source *front;
  struct endpoint *ep;
  int r;

  if (asprintf (&inc->context, DIRTY_BITMAP_PREFIX "%s",
                opts->dirty_bitmap) == -1) {
    inc->context = NULL;
    error_at (inc->name, "out of memory");
    return -1;
  }
  /* The user's word that no backing file changes, or the depth. */
  if (!opts->immutable_backing)
    inc->depth_context = DEPTH_CONTEXT;
  if (name_is_local (inc->name))
    inc->src = source_open_bitmap (inc->name, opts->dirty_bitmap);
  else
    inc->src = source_open (inc->name);
  if (inc->src == NULL)
    return -1;
  inc->src->meta_contexts[0] = inc->context;
  inc->src->meta_contexts[1] = inc->depth_context;
  if ((r = multi_conn (inc)) != 1)
    return r == 0 ? open_client (inc, hs) : -1;

  if ((inc->status = source_connect (inc->src, NULL, SOURCE_GO, NULL))
      == NULL)
    return -1;
  pthread_mutex_init (&inc->status_lock, NULL);
  if (check_contexts (inc, inc->status) == -1)
    return -1;
  inc->src->single = nbd_can_multi_conn (inc->status) != 1;
  /* It takes the source. */
  front = source_open_front (inc->src);
  inc->src = NULL;
  if (front == NULL)
    return -1;
  r = view_input_open (front, hs, INPUT_DIGESTS, &inc->view, &fb);
  if (r <= 0) {
    if (r == 0)
      front_failed (front, &fb);
    source_close (front);
    return -1;
  }
  inc->ep = ep = view_input_endpoint (inc->view);
  ep->scan = NULL;
  ep->refill = since_refill;
  if (check_size (inc) == -1)
    return -1;
  if ((inc->table = blk_table_new (ep->params, ep->size)) == NULL) {
    error_at (inc->name, "out of memory");
    return -1;
  }
  /* Nothing writes to our table: any snapshot will do. */
  blk_table_lookup (inc->table, 0, 0, NULL, NULL, &inc->snapshot);
  inc->seg_blocks = blk_blocks_per (SPAN_BYTES, ep->params->block_size);
  inc->nsegs = (ep->nblocks + inc->seg_blocks - 1) / inc->seg_blocks;
  inc->read_blocks = blk_blocks_per (VIEW_READ_BYTES,
                                     ep->params->block_size);
  for (unsigned i = 0; i < ep->nconns; i++) {
    struct since_conn *sc = calloc (1, sizeof *sc +
                                    inc->seg_blocks * sizeof *sc->skip);
    if (sc == NULL) {
      error_at (inc->name, "out of memory");
      return -1;
    }
    sc->inc = inc;
    ep->conns[i].priv = sc;
  }
  return 0;
}
