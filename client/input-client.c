/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --since: hashing here, on the connection that reads the dirty
 * bitmap, for a server that admits one client at a time and exits when
 * it leaves (qemu-nbd without --shared or --persistent: no
 * multi-conn).  Everywhere else nbdsum's private filter hashes
 * (input-front.c); this server would never admit the filter's
 * connection while nbdsum's reads the bitmap, nor stay up for it
 * after (nbdkit's nbd plugin passes on no dirty bitmap).
 *
 * The image is cut into segments of SPAN_BYTES.  A connection takes the
 * next segment, asks block status for it (holes and zero extents are
 * not read), and keeps up to R reads in flight, each of as many whole
 * blocks as fit in 256 KiB (or one larger block); each read
 * is hashed by the connection's thread as it completes, so C
 * connections hash on as many cores.  Digests go to a block table like
 * the filter's, which folds the root as the prefix completes.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "datamap.h"
#include "endpoint.h"
#include "helpers.h"
#include "holes.h"
#include "input-kinds.h"
#include "local.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"
#include "signals.h"
#include "table.h"
#include "util.h"

/* Image bytes per read at most: whole blocks, 192K of 96K blocks (or
 * one block, if larger).
 */
#define IMAGE_READ_BYTES (256 * 1024)
#define FOLD_BUDGET (4 * 1024 * 1024)

struct client_side {
  struct input in;
  struct endpoint ep;
  struct blk_table *table;      /* digests, folded into the root */
  uint64_t seg_blocks, nsegs, read_blocks, snapshot;
  atomic_uint_fast64_t next_seg;
  bool extents;                 /* base:allocation negotiated */
  const struct client_select *select;   /* NULL: hash every block */
};

static const struct input_ops client_input_ops;
static endpoint_refill_fn client_refill;

/* The segment a connection is working through. */
struct client_conn {
  struct blk_ctx *ctx;
  uint64_t first, count, pos;   /* blocks; pos is the next to read */
  bool *hole;                   /* per block of the segment: not read */
  bool *skip;                   /* of those, not hashed at all */
};

static void client_free (struct client_side *cs);

struct input *
client_input_open (struct source *src, const struct hash_spec *spec,
                   const struct client_select *select)
{
  const struct hash_spec hs = hash_spec_or_defaults (spec);
  struct nbd_handle *h = source_connect (src, NULL, SOURCE_GO, NULL);
  struct client_side *cs;
  struct endpoint *ep;
  const char *msg;
  int64_t size;
  unsigned i;

  if (h == NULL) {
    source_close (src);
    return NULL;
  }
  if ((cs = calloc (1, sizeof *cs)) == NULL) {
    error_at (src->name, "out of memory");
    nbd_close (h);
    source_close (src);
    return NULL;
  }
  cs->in.ops = &client_input_ops;
  cs->in.name = src->name;
  ep = &cs->ep;
  endpoint_init (ep, client_refill, src, h);
  if ((size = nbd_get_size (h)) == -1) {
    error_at (src->name, "%s", nbd_get_error ());
    goto err;
  }
  if ((msg = blk_params_init (&ep->own_params, hs.digest,
                              hs.block_size)) != NULL) {
    error_at (src->name, "%s", msg);
    goto err;
  }
  ep->params = &ep->own_params;
  ep->size = size;
  ep->nblocks = blk_block_count (size, ep->params->block_size);
  if ((cs->table = blk_table_new (ep->params, size)) == NULL) {
    error_at (src->name, "out of memory");
    goto err;
  }
  cs->extents = nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == 1;
  cs->select = select;
  cs->seg_blocks = blk_blocks_per (SPAN_BYTES, ep->params->block_size);
  cs->nsegs = (ep->nblocks + cs->seg_blocks - 1) / cs->seg_blocks;
  cs->read_blocks = blk_blocks_per (IMAGE_READ_BYTES, ep->params->block_size);
  /* Nothing writes to our table: any snapshot will do. */
  blk_table_lookup (cs->table, 0, 0, NULL, NULL, &cs->snapshot);

  /* Large blocks: no more than SPAN_BYTES of reads in flight per
   * connection.
   */
  if (ep->requests * cs->read_blocks * ep->params->block_size > SPAN_BYTES)
    ep->requests =
      SPAN_BYTES / (cs->read_blocks * ep->params->block_size) ?: 1;

  if (endpoint_connect_rest (ep, NULL) == -1)
    goto err;
  for (i = 0; i < ep->nconns; i++) {
    struct client_conn *cc = calloc (1, sizeof *cc);
    if (cc == NULL || (cc->ctx = blk_ctx_new ()) == NULL ||
        (cc->hole = malloc (cs->seg_blocks * sizeof *cc->hole)) == NULL ||
        (cc->skip = malloc (cs->seg_blocks * sizeof *cc->skip)) == NULL) {
      if (cc) {
        free (cc->hole);
        blk_ctx_free (cc->ctx);
      }
      free (cc);
      error_at (src->name, "out of memory");
      goto err;
    }
    ep->conns[i].priv = cc;
  }
  cs->in.params = ep->params;
  cs->in.size = ep->size;
  cs->in.nblocks = ep->nblocks;
  return &cs->in;

 err:
  client_free (cs);
  return NULL;
}

/* Close cs's connections and free it, and its source. */
static void
client_free (struct client_side *cs)
{
  struct endpoint *ep = &cs->ep;
  struct source *src = ep->src;

  endpoint_close (ep);
  for (unsigned i = 0; i < MAX_CONNECTIONS; i++) {
    struct client_conn *cc = ep->conns[i].priv;
    if (cc) {
      blk_ctx_free (cc->ctx);
      free (cc->hole);
      free (cc->skip);
      free (cc);
    }
  }
  blk_table_free (cs->table);
  if (ep->params)
    blk_params_free (&ep->own_params);
  free (cs);
  source_close (src);
}

static void
client_close (struct input *in)
{
  client_free (container_of (in, struct client_side, in));
}

struct extent_walk {
  struct endpoint *ep;
  struct client_conn *cc;
  uint64_t covered;             /* image bytes described so far */
  struct blk_holes holes;
};

/* Mark blocks wholly inside runs of extents that read as zero. */
static int
extent_cb (void *opaque, const char *metacontext, uint64_t offset,
           uint32_t *entries, size_t nr_entries, int *error)
{
  struct extent_walk *w = opaque;
  const uint32_t bs = w->ep->params->block_size;
  const uint64_t seg_start = w->cc->first * bs;

  if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0)
    return 0;
  for (size_t i = 0; i + 1 < nr_entries; i += 2) {
    const struct blk_extent e = {
      .offset = offset, .length = entries[i],
      .zero = entries[i + 1] & LIBNBD_STATE_ZERO,
    };
    blk_holes_add (&w->holes, &e);
    offset += entries[i];
  }
  if (offset - seg_start > w->covered)
    w->covered = offset - seg_start;
  return 0;
}

/* Image bytes of the blocks marked in mark[0..count) of the segment. */
static uint64_t
marked_bytes (const struct endpoint *ep, const struct client_conn *cc,
              const bool *mark)
{
  uint64_t bytes = 0;

  for (uint64_t i = 0, n; blk_next_run (mark, cc->count, &i, &n); i += n)
    for (uint64_t b = cc->first + i; b < cc->first + i + n; b++)
      bytes += blk_block_len (ep->size, ep->params->block_size, b);
  return bytes;
}

/* Take the next segment: the blocks to skip, then the holes among the
 * others (stored as zero).
 */
static int
next_segment (struct endpoint *ep, struct conn *c)
{
  struct client_side *cs = container_of (ep, struct client_side, ep);
  struct client_conn *cc = c->priv;
  const uint64_t seg = atomic_fetch_add (&cs->next_seg, 1);
  uint64_t start, len, skipped = 0;

  if (seg >= cs->nsegs)
    return 0;
  cc->first = seg * cs->seg_blocks;
  cc->count = ep->nblocks - cc->first < cs->seg_blocks
    ? ep->nblocks - cc->first : cs->seg_blocks;
  cc->pos = 0;
  memset (cc->hole, 0, cc->count * sizeof *cc->hole);
  memset (cc->skip, 0, cc->count * sizeof *cc->skip);

  if (cs->select) {
    if (cs->select->select (cs->select->opaque, ep, c->h, cc->first,
                            cc->count, cc->skip) == -1)
      return -1;
    for (uint64_t i = 0; i < cc->count; i++)
      skipped += cc->skip[i];
    if (skipped) {
      progress_add (&ep->progress, marked_bytes (ep, cc, cc->skip), 0);
      if (skipped == cc->count) {
        cc->pos = cc->count;
        return 1;
      }
    }
  }

  start = cc->first * ep->params->block_size;
  len = (cc->first + cc->count) * ep->params->block_size < ep->size
    ? cc->count * ep->params->block_size : ep->size - start;
  if (cs->extents) {
    struct extent_walk w = { .ep = ep, .cc = cc };
    blk_holes_begin_marks (&w.holes, ep->params->block_size, ep->size,
                           cc->first, cc->count, cc->hole);
    /* The server may describe less than asked: ask again. */
    while (w.covered < len) {
      const uint64_t before = w.covered;
      if (source_block_status (c->h, len - w.covered, start + w.covered,
                               (nbd_extent_callback) {
                                 .callback = extent_cb, .user_data = &w })
          == -1) {
        endpoint_fail (ep, "block status: %s", source_error ());
        return -1;
      }
      if (w.covered == before)
        break;                  /* no progress: read the rest */
    }
    blk_holes_end (&w.holes);
  }

  /* Holes among the skipped blocks are not ours to store. */
  for (uint64_t i = 0; skipped && i < cc->count; i++)
    if (cc->skip[i])
      cc->hole[i] = false;
  for (uint64_t i = 0, n; blk_next_run (cc->hole, cc->count, &i, &n);
       i += n)
    blk_table_store_zero (cs->table, cc->first + i, n, cs->snapshot);
  /* Holes are done when they are folded (a digest per block). */
  blk_table_fold_behind (cs->table, cc->first + cc->count, FOLD_BUDGET);
  progress_add (&ep->progress, marked_bytes (ep, cc, cc->hole), 0);
  for (uint64_t i = 0; skipped && i < cc->count; i++)
    cc->hole[i] |= cc->skip[i];
  return 1;
}

static int
read_done (void *opaque, int *error)
{
  struct request *r = opaque;
  struct endpoint *ep = r->ep;
  struct client_side *cs = container_of (ep, struct client_side, ep);
  struct client_conn *cc = r->c->priv;
  const struct blk_params *p = ep->params;
  uint8_t digests[(IMAGE_READ_BYTES / BLK_MIN_BLOCK_SIZE) * BLK_DIGEST_MAX];
  bool zero[IMAGE_READ_BYTES / BLK_MIN_BLOCK_SIZE];
  uint64_t bytes = 0;

  r->c->in_flight--;
  if (*error) {
    endpoint_fail (ep, "read at offset %" PRIu64 ": %s",
                   r->first * ep->params->block_size, strerror (*error));
    return 1;
  }
  for (uint64_t i = 0; i < r->count; i++) {
    const uint32_t len = blk_block_len (ep->size, ep->params->block_size,
                                        r->first + i);
    if (blk_hash_block (p, cc->ctx, r->buf + i * p->block_size, len,
                        digests + i * p->digest.len, &zero[i]) == -1) {
      endpoint_fail (ep, "%s failed", ep->params->digest.name);
      return 1;
    }
    bytes += len;
  }
  blk_table_store (cs->table, r->first, r->count, digests, zero, NULL,
                   cs->snapshot);
  blk_table_fold_behind (cs->table, r->first + r->count, FOLD_BUDGET);
  progress_add (&ep->progress, bytes, bytes);
  return 1;
}

static int
client_refill (struct endpoint *ep, unsigned i)
{
  struct client_side *cs = container_of (ep, struct client_side, ep);
  struct conn *c = &ep->conns[i];
  struct client_conn *cc = c->priv;
  struct request *r;
  uint64_t n = 0, bytes;
  int64_t cookie;

  for (;;) {
    while (cc->pos < cc->count && cc->hole[cc->pos])
      cc->pos++;
    if (cc->pos < cc->count)
      break;
    int s = next_segment (ep, c);
    if (s <= 0)
      return s;
  }
  while (cc->pos + n < cc->count && n < cs->read_blocks &&
         !cc->hole[cc->pos + n])
    n++;

  const uint64_t bs = ep->params->block_size;
  bytes = (cc->first + cc->pos + n) * bs < ep->size
    ? n * bs : ep->size - (cc->first + cc->pos) * bs;
  r = request_new (c, cc->first + cc->pos, n, bytes);
  if (r == NULL)
    return -1;
  cookie = nbd_aio_pread (c->h, r->buf, bytes, r->first * bs,
                          (nbd_completion_callback) {
                            .callback = read_done, .user_data = r,
                            .free = request_free }, 0);
  if (cookie == -1) {
    endpoint_fail (ep, "%s", nbd_get_error ());
    return -1;
  }
  cc->pos += n;
  c->in_flight++;
  return 1;
}

struct endpoint *
client_input_endpoint (struct input *in)
{
  return &container_of (in, struct client_side, in)->ep;
}

uint64_t
client_input_lookup (struct input *in, uint64_t first, uint64_t count,
                     uint8_t *out, bool *need)
{
  struct client_side *cs = container_of (in, struct client_side, in);
  uint64_t snapshot;

  return blk_table_lookup (cs->table, first, count, out, need, &snapshot);
}

/* Only its connections (since-server.c) and digests (input-since.c)
 * are asked for.
 */
static const struct input_ops client_input_ops = {
  .method = "client-side",
  .checksum = NULL,
  .digests = NULL,
  .close = client_close,
};
