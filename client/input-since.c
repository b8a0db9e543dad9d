/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: --since=MANIFEST --dirty-bitmap=NAME, the checksum of an
 * image now from its manifest then and the blocks written since.
 *
 * The blkhash root folds block digests in order, so only the blocks
 * that changed need hashing.  What changed comes from a dirty bitmap
 * the server exports as the metadata context qemu:dirty-bitmap:NAME
 * (qemu-nbd -B NAME, qemu's NBD server); nbdkit exports none, so the
 * blocks are hashed by nbdsum's private nbdkit --filter=blkhash nbd in
 * front of the server (input-front.c): the digests of the blocks to
 * hash are read from its view, C connections with R requests in flight
 * (the filter does not read holes), while one connection of nbdsum's
 * own asks the server for the bitmap, segment by segment (a server
 * that admits one client at a time, without multi-conn, as qemu-nbd
 * without --shared, is hashed here on the bitmap's connection:
 * input-client.c).  A block is hashed
 * when it overlaps a dirty extent, when its data comes from a backing
 * file (qemu:allocation-depth 2 or more: the bitmap does not see
 * writes there), or when its length is not the one it had in the
 * manifest (the image grew: the grown tail, the old short last block,
 * the new one); every other digest is the manifest's.
 *
 * The bitmap is not taken on trust where the server can contradict
 * it: a clean block that the manifest has as data but that reads as
 * zeros now (base:allocation), and a sample of the clean data blocks
 * that differs from the manifest, fail the run.  The sample is drawn
 * uniformly among the blocks whose digest is taken from the manifest
 * and that are data there or on the server now, as the root is
 * folded, then their digests read from the filter's view in a second
 * round (since-sample.c: the
 * probability that it catches a change).  These catch a shrink and
 * regrowth, a disabled bitmap, the manifest of another image or a
 * snapshot served with the image's bitmap; what they cannot catch is
 * a few changed blocks among many, missed by the sample.  An image
 * smaller than the manifest's is refused.  A local qcow2 file is
 * served by qemu-nbd once qemu-img says its bitmap is enabled and
 * consistent (local-bitmap.c).
 *
 * Memory: the block table holds the digests of the blocks hashed, a
 * second one the clean blocks that read as zeros (runs, as holes are
 * kept), the merge one window of digests, and the sample SAMPLE_MAX
 * digests and, while it is read, at most a queue of blocks; the
 * manifest is read as it goes, never held (manifest.c).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "endpoint.h"
#include "helpers.h"
#include "input-kinds.h"
#include "local.h"
#include "manifest.h"
#include "messages.h"
#include "minmax.h"
#include "names.h"
#include "options.h"
#include "signals.h"
#include "since-sample.h"
#include "source.h"
#include "table.h"
#include "util.h"

/* qemu's dirty bitmap context: flag 1 marks dirty extents. */
#define DIRTY_BITMAP_PREFIX "qemu:dirty-bitmap:"
#define DIRTY_FLAG 1
/* qemu's allocation depth: 0 unallocated, 1 the image's own layer, 2
 * and more a backing file's.
 */
#define DEPTH_CONTEXT "qemu:allocation-depth"
#define DEPTH_BACKING 2

/* Blocks merged per round. */
#define WINDOW 65536
/* Image bytes whose digests one request of the view asks for at most:
 * enough requests in flight to keep the filter's threads busy.
 */
#define VIEW_READ_BYTES (1024 * 1024)

struct incremental {
  struct input in;
  const char *name;
  struct manifest *m;
  struct source *src;           /* the server, with the bitmap */
  struct nbd_handle *status;    /* on it: block status, for every thread */
  pthread_mutex_t status_lock;
  struct input *view;           /* the private filter's view of it */
  /* Or, on a server that admits one client at a time, hashing here on
   * the connection that reads the bitmap (input-client.c).
   */
  struct input *client;
  struct client_select select;
  struct endpoint *ep;          /* its connections */
  struct blk_table *table;      /* digests of the blocks hashed */
  uint64_t snapshot;
  uint64_t seg_blocks, nsegs, read_blocks;
  atomic_uint_fast64_t next_seg;
  char *context;                /* qemu:dirty-bitmap:NAME */
  const char *depth_context;    /* DEPTH_CONTEXT, or NULL: not asked */
  uint64_t old_size, old_nblocks;
  /* The digest of the manifest's short last block if it were zeros. */
  uint8_t short_zero[BLK_DIGEST_MAX];

  /* Clean blocks that the server says read as zeros. */
  struct blk_table *zeros;
  uint64_t zeros_snapshot;

  /* The sample, drawn as fold_root goes (since-sample.c). */
  struct since_sample sample;

  /* incremental_digests: the next block, and a window of the
   * manifest's digests.
   */
  uint64_t next;
  uint8_t *old;
  bool *need, *not_zero;

  uint8_t root[BLK_DIGEST_MAX];
  uint64_t hashed;              /* blocks not taken from the manifest */
  uint64_t sampled;             /* clean blocks hashed and compared */
};

/* May block b's digest come from the manifest, unless it is dirty? */
static bool
reusable (const struct incremental *inc, uint64_t b)
{
  const struct endpoint *ep = inc->ep;
  const uint32_t bs = ep->params->block_size;

  return b < inc->old_nblocks &&
    blk_block_len (inc->old_size, bs, b) == blk_block_len (ep->size, bs, b);
}

/* Is d, the manifest's digest of reusable block b, that of zeros? */
static bool
zero_digest (const struct incremental *inc, uint64_t b, const uint8_t *d)
{
  const struct blk_params *p = inc->ep->params;
  const uint32_t len = blk_block_len (inc->old_size, p->block_size, b);

  return memcmp (d, len == p->block_size ? p->zero_digest : inc->short_zero,
                 p->digest.len) == 0;
}

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

/* The run fails: block b was taken as clean but is not. */
static int
missed (struct incremental *inc, uint64_t b, const char *what)
{
  error_at (inc->name, "block %" PRIu64 " (offset %" PRIu64 ") %s: the "
            "bitmap missed a change (it was disabled or started late, a "
            "shrink, a write to a backing file, or the manifest is of "
            "another image); run without --since", b,
            b * inc->ep->params->block_size, what);
  return -1;
}

/* The digests of blocks [first, first+count) now: hashed, or the
 * manifest's, checked against what the server says.  Calls go
 * forward from block 0, as manifest_digests.
 */
static int
incremental_digests (struct incremental *inc, uint64_t first,
                     uint64_t count, uint8_t *out)
{
  const size_t len = inc->ep->params->digest.len;
  uint64_t snapshot;

  while (count > 0) {
    const uint64_t n = MIN (count, (uint64_t) WINDOW);
    const uint64_t old_n = first < inc->old_nblocks
      ? MIN (n, inc->old_nblocks - first) : 0;

    if (first != inc->next) {
      error_at (inc->name, "blocks asked out of order");
      return -1;
    }
    if (inc->client)
      client_input_lookup (inc->client, first, n, out, inc->need);
    else
      blk_table_lookup (inc->table, first, n, out, inc->need, &snapshot);
    blk_table_lookup (inc->zeros, first, n, NULL, inc->not_zero, &snapshot);
    if (old_n && manifest_digests (inc->m, first, old_n, inc->old) == -1)
      return -1;
    for (uint64_t i = 0; i < n; i++) {
      const uint64_t b = first + i;
      const uint8_t *old = inc->old + i * len;

      if (!inc->need[i])
        continue;
      if (i >= old_n || !reusable (inc, b)) {
        error_at (inc->name, "block %" PRIu64 " was not hashed", b);
        return -1;
      }
      if (!inc->not_zero[i] && !zero_digest (inc, b, old))
        return missed (inc, b, "reads as zeros now, but the manifest has "
                       "data there and the bitmap says it was not written");
      memcpy (out + i * len, old, len);
    }
    inc->next = first += n;
    out += n * len;
    count -= n;
  }
  return 0;
}

/* Fold every digest into the root, drawing the sample among the
 * blocks taken from the manifest, then rewind for the callers.
 */
static int
fold_root (struct incremental *inc)
{
  const struct endpoint *ep = inc->ep;
  const size_t len = ep->params->digest.len;
  CLEANUP_FREE uint8_t *d = malloc (WINDOW * len);
  struct blk_root r;
  int ret = -1;

  if (d == NULL) {
    error_at (inc->name, "out of memory");
    return -1;
  }
  if (blk_root_init (&r, ep->params) == -1) {
    error_at (inc->name, "%s failed", ep->params->digest.name);
    return -1;
  }
  for (uint64_t w = 0; w < ep->nblocks; w += WINDOW) {
    const uint64_t n = MIN (ep->nblocks - w, (uint64_t) WINDOW);
    if (stop_signal () || incremental_digests (inc, w, n, d) == -1)
      goto out;
    for (uint64_t i = 0; i < n; i++) {
      const uint8_t *digest = d + i * len;
      /* Data in the manifest, or data on the server now: a zero
       * block written behind the bitmap's back is one of these.
       */
      if (!inc->need[i])
        inc->hashed++;
      else if (!zero_digest (inc, w + i, digest) || inc->not_zero[i])
        since_sample_offer (&inc->sample, w + i, digest, len);
    }
    if (blk_root_add (&r, d, n) == -1) {
      error_at (inc->name, "%s failed", ep->params->digest.name);
      goto out;
    }
  }
  if (blk_root_final (&r, ep->size, inc->root) == -1) {
    error_at (inc->name, "%s failed", ep->params->digest.name);
    goto out;
  }
  if (manifest_rewind (inc->m) == -1)
    goto out;
  inc->next = 0;
  ret = 0;
 out:
  blk_root_free (&r);
  return ret;
}

/* After the fold: read and hash the sample; a block that differs from
 * the manifest fails the run.
 */
static int
check_sample (struct incremental *inc)
{
  bool differs;
  uint64_t b;

  if (since_sample_check (&inc->sample, inc->ep, inc->client == NULL,
                          inc->name, &differs, &b) == -1)
    return -1;
  if (differs)
    return missed (inc, b, "differs from the manifest (it was hashed as "
                   "one of a sample of the clean blocks)");
  inc->sampled = inc->sample.n;
  return 0;
}

/* The manifest, checked, and the hash spec it makes. */
static int
open_manifest (struct incremental *inc, const struct hash_spec *spec,
               struct hash_spec *out)
{
  const struct blk_params *p;
  uint8_t root[BLK_DIGEST_MAX];
  uint32_t last;

  since_sample_init (&inc->sample);
  inc->m = manifest_open (opts->since, manifest_env ());
  if (inc->m == NULL)
    return -1;
  if (!manifest_root (inc->m, root)) {
    error_at (opts->since, "it carries no checksum to verify its block "
              "digests by (an older nbdsum --blocks wrote it): make a new "
              "manifest with nbdsum --blocks");
    return -1;
  }
  p = manifest_params (inc->m);
  inc->old_size = manifest_size (inc->m);
  inc->old_nblocks = blk_block_count (inc->old_size, p->block_size);
  last = inc->old_nblocks
    ? blk_block_len (inc->old_size, p->block_size, inc->old_nblocks - 1) : 0;
  if (last && last < p->block_size) {
    struct blk_ctx *ctx = blk_ctx_new ();
    const int r = ctx ? blk_zero_block_digest (p, ctx, last,
                                               inc->short_zero) : -1;
    blk_ctx_free (ctx);
    if (r == -1) {
      error_at (inc->name, "%s failed", p->digest.name);
      return -1;
    }
  }
  if (manifest_check_made (inc->m, spec->digest, spec->block_size) == -1)
    return -1;
  *out = (struct hash_spec) { p->digest.name, p->block_size, NULL, false,
                             { 0, 0 } };
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
    endpoint_fail (ep, "server failed to hash image bytes from %" PRIu64
                   ": %s", r->first * bs, strerror (*error));
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
  double deadline;
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
static int
open_view (struct incremental *inc, const struct hash_spec *hs)
{
  struct fallback fb = { NULL, NULL, 0, NULL };
  struct source *front;
  struct endpoint *ep;
  int r;

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
  r = view_input_open (front, hs, &inc->view, &fb);
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

static void
incremental_close (struct incremental *inc)
{
  if (inc->ep && inc->view)
    for (unsigned i = 0; i < MAX_CONNECTIONS; i++) {
      free (inc->ep->conns[i].priv);
      inc->ep->conns[i].priv = NULL;
    }
  nbd_close (inc->status);
  if (inc->status)
    pthread_mutex_destroy (&inc->status_lock);
  /* It closes the filter, and the server behind it; else the server. */
  if (inc->view)
    input_close (inc->view);
  else if (inc->client)
    client_input_close (inc->client);
  else
    source_close (inc->src);
  blk_table_free (inc->table);
  manifest_close (inc->m);
  blk_table_free (inc->zeros);
  since_sample_free (&inc->sample);
  free (inc->context);
  free (inc->old);
  free (inc->need);
  free (inc->not_zero);
  free (inc);
}

static int
since_checksum (struct input *in, uint8_t *root)
{
  struct incremental *inc = container_of (in, struct incremental, in);

  memcpy (root, inc->root, in->params->digest.len);
  return 0;
}

static int
since_digests (struct input *in, uint64_t first, uint64_t count,
               uint8_t *out)
{
  return incremental_digests (container_of (in, struct incremental, in),
                              first, count, out);
}

static void
since_close (struct input *in)
{
  incremental_close (container_of (in, struct incremental, in));
}

static const struct input_ops since_input_ops = {
  .method = "client-side",
  .checksum = since_checksum,
  .digests = since_digests,
  .close = since_close,
};

struct input *
since_input_open (const char *name, const struct hash_spec *spec)
{
  struct incremental *inc = calloc (1, sizeof *inc);
  struct hash_spec hs;
  size_t len;

  if (inc == NULL) {
    error_at (name, "out of memory");
    return NULL;
  }
  inc->in.ops = &since_input_ops;
  inc->in.name = inc->name = name;
  if (open_manifest (inc, spec, &hs) == -1)
    goto err;
  if (asprintf (&inc->context, DIRTY_BITMAP_PREFIX "%s",
                opts->dirty_bitmap) == -1) {
    inc->context = NULL;
    error_at (name, "out of memory");
    goto err;
  }
  /* The user's word that no backing file changes, or the depth. */
  if (!opts->immutable_backing)
    inc->depth_context = DEPTH_CONTEXT;
  len = manifest_params (inc->m)->digest.len;
  if ((inc->old = malloc (WINDOW * len)) == NULL ||
      (inc->need = malloc (WINDOW * sizeof *inc->need)) == NULL ||
      (inc->not_zero = malloc (WINDOW * sizeof *inc->not_zero)) == NULL) {
    error_at (name, "out of memory");
    goto err;
  }
  if (name_is_local (name)) {
    if ((inc->src = source_open_bitmap (name, opts->dirty_bitmap)) == NULL)
      goto err;
  }
  else if ((inc->src = source_open (name)) == NULL)
    goto err;
  inc->src->meta_contexts[0] = inc->context;
  inc->src->meta_contexts[1] = inc->depth_context;
  if (open_view (inc, &hs) == -1)
    goto err;
  if ((inc->zeros = blk_table_new (inc->ep->params, inc->ep->size)) == NULL) {
    error_at (name, "out of memory");
    goto err;
  }
  blk_table_lookup (inc->zeros, 0, 0, NULL, NULL, &inc->zeros_snapshot);
  if (endpoint_run (inc->ep) == -1 || fold_root (inc) == -1 ||
      check_sample (inc) == -1)
    goto err;
  inc->in.params = inc->ep->params;
  inc->in.size = inc->ep->size;
  inc->in.nblocks = inc->ep->nblocks;
  inc->in.about.incremental = true;
  inc->in.about.hashed_blocks = inc->hashed;
  inc->in.about.sampled_blocks = inc->sampled;
  inc->in.about.read_bytes = atomic_load (&inc->ep->progress.data);
  return &inc->in;

 err:
  incremental_close (inc);
  return NULL;
}
