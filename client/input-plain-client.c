/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --plain: the input nbdsum hashes itself, for servers without
 * a plain-digest view, or --client-side: the image's bytes through one
 * digest, strictly in offset order.
 *
 * One connection reads the image in order with up to R reads of
 * PLAIN_READ_BYTES in flight, in a ring of R slots: a read may
 * complete before an earlier one, so the digest takes the slots from
 * the oldest on, each once it is read.  Block status is asked for a
 * segment of SPAN_BYTES at a time; what it says reads as zeros is not
 * read but hashed as zeros (every zero byte still passes through the
 * digest: a plain digest has no shortcut for holes).
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
#include "messages.h"
#include "minmax.h"
#include "signals.h"

/* Bytes per read, and zero bytes hashed per turn of the loop. */
#define PLAIN_READ_BYTES (256 * 1024)
#define ZERO_BYTES (1024 * 1024)
#define MAX_SLOTS 64

/* A read in the ring. */
struct slot {
  struct plain_client *pc;
  uint64_t offset;
  uint32_t len;
  bool busy;                    /* issued, not yet hashed */
  bool done;                    /* read, waiting for its turn */
  uint8_t *buf;
};

/* What block status said of [ext_start, ext_end): zeros or not. */
struct plain_client {
  struct input in;
  struct endpoint ep;
  struct blk_ctx *ctx;
  struct slot slots[MAX_SLOTS];
  unsigned nslots, head, tail;  /* oldest busy, next free */
  uint64_t pos;                 /* next byte to issue */
  uint64_t hashed;              /* bytes through the digest */
  bool extents;                 /* base:allocation negotiated */
  uint64_t ext_end;             /* what is known of pos, up to here */
  bool ext_zero;
};

static const struct input_ops plain_client_ops;
static endpoint_refill_fn plain_client_refill;
static const uint8_t *zeros;    /* ZERO_BYTES of them, shared */

static void plain_client_free (struct plain_client *pc);

struct input *
plain_client_input_open (struct source *src, const struct hash_spec *spec,
                         struct fallback *fb)
{
  struct nbd_handle *h = fallback_go (src, fb, 0, NULL);
  struct plain_client *pc;
  struct endpoint *ep;
  const char *msg;
  int64_t size;

  if (h == NULL)
    return NULL;
  if (zeros == NULL)
    zeros = calloc (1, ZERO_BYTES);
  if (zeros == NULL || (pc = calloc (1, sizeof *pc)) == NULL) {
    error_at (src->name, "out of memory");
    nbd_close (h);
    source_close (src);
    return NULL;
  }
  pc->in.ops = &plain_client_ops;
  pc->in.name = src->name;
  pc->in.plain = true;
  ep = &pc->ep;
  /* One connection: the digest is one sequence. */
  endpoint_init (ep, plain_client_refill, src, h);
  if ((size = nbd_get_size (h)) == -1) {
    error_at (src->name, "%s", nbd_get_error ());
    goto err;
  }
  if ((msg = blk_params_init (&ep->own_params, spec->digest,
                              BLK_DEFAULT_BLOCK_SIZE)) != NULL) {
    error_at (src->name, "%s", msg);
    goto err;
  }
  ep->params = &ep->own_params;
  ep->size = size;
  pc->extents = nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == 1;
  pc->nslots = MIN (ep->requests, (unsigned) MAX_SLOTS);
  ep->requests = pc->nslots;
  if ((pc->ctx = blk_ctx_new ()) == NULL ||
      blk_ctx_init (pc->ctx, &ep->params->digest) == -1) {
    error_at (src->name, "%s failed", spec->digest);
    goto err;
  }
  for (unsigned i = 0; i < pc->nslots; i++) {
    pc->slots[i].pc = pc;
    if ((pc->slots[i].buf = malloc (PLAIN_READ_BYTES)) == NULL) {
      error_at (src->name, "out of memory");
      goto err;
    }
  }
  pc->in.params = ep->params;
  pc->in.size = ep->size;
  return &pc->in;

 err:
  plain_client_free (pc);
  return NULL;
}

/* Close pc's connection (first: no read may land in a freed buffer)
 * and free it, and its source.
 */
static void
plain_client_free (struct plain_client *pc)
{
  struct source *src = pc->ep.src;

  endpoint_close (&pc->ep);
  for (unsigned i = 0; i < MAX_SLOTS; i++)
    free (pc->slots[i].buf);
  blk_ctx_free (pc->ctx);
  if (pc->ep.params)
    blk_params_free (&pc->ep.own_params);
  free (pc);
  source_close (src);
}

static void
plain_client_close (struct input *in)
{
  plain_client_free (container_of (in, struct plain_client, in));
}

static int
update (struct plain_client *pc, const void *buf, size_t len)
{
  if (blk_ctx_update (pc->ctx, buf, len) == -1) {
    endpoint_fail (&pc->ep, "%s failed", pc->ep.params->digest.name);
    return -1;
  }
  pc->hashed += len;
  return 0;
}

/* Hash the reads that are done, oldest first, up to the first that is
 * not.
 */
static void
hash_ready (struct plain_client *pc)
{
  struct slot *s;

  while ((s = &pc->slots[pc->head])->busy && s->done) {
    if (update (pc, s->buf, s->len) == -1)
      return;
    progress_add (&pc->ep.progress, s->len, s->len);
    s->busy = s->done = false;
    pc->head = (pc->head + 1) % pc->nslots;
  }
}

static int
read_done (void *opaque, int *error)
{
  struct slot *s = opaque;
  struct plain_client *pc = s->pc;

  pc->ep.conns[0].in_flight--;
  if (*error) {
    endpoint_fail (&pc->ep, "read at offset %" PRIu64 ": %s", s->offset,
                   strerror (*error));
    return 1;
  }
  s->done = true;
  hash_ready (pc);
  return 1;
}

/* The extent at pos: the first that block status describes from it
 * (merged with those of its kind after it), within a segment.
 */
struct extent_walk {
  uint64_t offset, end;
  bool zero, started;
};

static int
extent_cb (void *opaque, const char *metacontext, uint64_t offset,
           uint32_t *entries, size_t nr_entries, int *error)
{
  struct extent_walk *w = opaque;

  if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0)
    return 0;
  for (size_t i = 0; i + 1 < nr_entries; i += 2) {
    /* Only a zero flag says the bytes read as zeros (a hole may not). */
    const bool zero = entries[i + 1] & LIBNBD_STATE_ZERO;
    if (offset + entries[i] <= w->offset) {
      offset += entries[i];
      continue;
    }
    if (w->started && (zero != w->zero || offset != w->end))
      break;
    if (!w->started) {
      w->zero = zero;
      w->started = true;
    }
    w->end = offset + entries[i];
    offset += entries[i];
  }
  return 0;
}

/* Find what the bytes from pc->pos are.  0, or -1 (endpoint failed). */
static int
next_extent (struct plain_client *pc)
{
  struct endpoint *ep = &pc->ep;
  const uint64_t len = MIN (ep->size - pc->pos, SPAN_BYTES);
  struct extent_walk w = { .offset = pc->pos };

  if (pc->extents &&
      source_block_status (ep->conns[0].h, len, pc->pos,
                           (nbd_extent_callback) {
                             .callback = extent_cb, .user_data = &w })
      == -1) {
    endpoint_fail (ep, "block status: %s", source_error ());
    return -1;
  }
  /* Nothing said (or no extents): read it. */
  if (!w.started || w.end <= pc->pos) {
    w.zero = false;
    w.end = pc->pos + len;
  }
  pc->ext_end = MIN (w.end, pc->pos + len);
  pc->ext_zero = w.zero;
  return 0;
}

static int
plain_client_refill (struct endpoint *ep, unsigned i)
{
  struct plain_client *pc = container_of (ep, struct plain_client, ep);
  struct conn *c = &ep->conns[i];
  struct slot *s;
  uint64_t len;

  if (pc->pos == ep->size)
    return 0;
  if (pc->pos >= pc->ext_end && next_extent (pc) == -1)
    return -1;
  if (pc->ext_zero) {
    /* Zeros go through the digest in their turn: after the reads
     * before them.  Until then, wait for those (in flight).
     */
    if (pc->hashed != pc->pos)
      return 0;
    len = MIN (pc->ext_end - pc->pos, (uint64_t) ZERO_BYTES);
    if (update (pc, zeros, len) == -1)
      return -1;
    progress_add (&ep->progress, len, 0);
    pc->pos += len;
    return 1;
  }
  s = &pc->slots[pc->tail];
  if (s->busy)
    return 0;                   /* every slot in flight or waiting */
  len = MIN (pc->ext_end - pc->pos, (uint64_t) PLAIN_READ_BYTES);
  *s = (struct slot) {
    .pc = pc, .offset = pc->pos, .len = len, .busy = true, .buf = s->buf,
  };
  if (nbd_aio_pread (c->h, s->buf, len, s->offset,
                     (nbd_completion_callback) {
                       .callback = read_done, .user_data = s }, 0) == -1) {
    s->busy = false;
    endpoint_fail (ep, "%s", nbd_get_error ());
    return -1;
  }
  pc->tail = (pc->tail + 1) % pc->nslots;
  pc->pos += len;
  c->in_flight++;
  return 1;
}

static int
plain_client_checksum (struct input *in, uint8_t *root)
{
  struct plain_client *pc = container_of (in, struct plain_client, in);
  struct endpoint *ep = &pc->ep;

  if (endpoint_run (ep) == -1)
    return -1;
  /* Every byte, once, in order: else nbdsum has a bug. */
  if (pc->hashed != ep->size) {
    error_at (ep->src->name, "internal error: %" PRIu64 " of %" PRIu64
              " bytes hashed", pc->hashed, ep->size);
    return -1;
  }
  if (blk_ctx_final (pc->ctx, root) == -1) {
    error_at (ep->src->name, "%s failed", ep->params->digest.name);
    return -1;
  }
  return 0;
}

static const struct input_ops plain_client_ops = {
  .method = "client-side",
  .checksum = plain_client_checksum,
  .digests = NULL,
  .close = plain_client_close,
};
