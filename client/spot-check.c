/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the spot check of a view's block digests (spot-check.h),
 * once the root is read: the server answers before it can see the
 * draw (getrandom's).  The last block, the one short block, is always
 * in it; of the others, half are drawn as a data byte's
 * (holes skipped) and half from anywhere, not to take the
 * holes wholly on the server's word.  Repeats are drawn again, a few
 * rounds, then the next blocks not drawn fill the count.  Digests are
 * read, then blocks, a few MiB at a time, hashed as they come.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "cleanup.h"
#include "header.h"
#include "helpers.h"
#include "input-kinds.h"
#include "messages.h"
#include "minmax.h"
#include "signals.h"
#include "source.h"
#include "spot-check.h"
#include "util.h"

#define SPOT_BYTES_IN_FLIGHT (UINT64_C (8) << 20) /* image bytes */
#define DRAW_ROUNDS 8

struct spot {
  const struct blk_params *p;
  uint64_t size;
  uint64_t base;                /* where block 0 is in the image */
  uint64_t *blocks;             /* chosen, in order */
  size_t n;
  uint8_t *said, *now;          /* n digests each: the view's, ours */
  struct blk_ctx *ctx;
  unsigned in_flight;
  int error;                    /* the first failed read's, and its k */
  size_t error_k;
  bool unsaid, error_data;      /* that error, not yet told; a data read's */
};

/* A block (or its digest), read in pieces no larger than the server
 * takes; each piece a request of its own holding a reference.
 */
struct spot_read {
  struct spot *s;
  size_t k;
  bool data;                    /* block k, else its digest */
  uint32_t len;
  unsigned pieces, done, refs;
  int error;
  uint8_t buf[];
};

static int
compare_u64 (const void *a, const void *b)
{
  const uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

  return x < y ? -1 : x > y;
}

/* The blocks, up to want (< nblocks) of them, into out, in order. */
static size_t
choose (uint64_t *out, size_t want, uint64_t nblocks, uint32_t bs,
        const struct data_map *map, uint64_t *rng)
{
  const bool weigh = map->known && map->data > 0;
  size_t n = 1;

  out[0] = nblocks - 1;
  for (unsigned round = 0; round < DRAW_ROUNDS && n < want; round++) {
    /* Data bytes at the end of out, sorted, become blocks in one walk
     * over the holes.
     */
    size_t d = want, h = 0, m = 0;
    uint64_t skipped = 0;

    while (n < d)
      if (weigh && splitmix64 (rng) % 2 != 0)
        out[--d] = splitmix64 (rng) % map->data;
      else
        out[n++] = splitmix64 (rng) % nblocks;
    qsort (out + d, want - d, sizeof *out, compare_u64);
    for (size_t i = d; i < want; i++) {
      for (; h < map->nholes && map->holes[h].start <= out[i] + skipped; h++)
        skipped += map->holes[h].end - map->holes[h].start;
      out[i] = MIN ((out[i] + skipped) / bs, nblocks - 1);
    }
    qsort (out, want, sizeof *out, compare_u64);
    for (size_t i = 0; i < want; i++)
      if (m == 0 || out[i] != out[m - 1])
        out[m++] = out[i];
    n = m;
  }
  if (n < want) {
    const size_t drawn = n;
    for (uint64_t b = splitmix64 (rng) % nblocks; n < want;
         b = (b + 1) % nblocks)
      if (!bsearch (&b, out, drawn, sizeof *out, compare_u64))
        out[n++] = b;
    qsort (out, n, sizeof *out, compare_u64);
  }
  return n;
}

static void
piece_free (void *opaque)
{
  struct spot_read *r = opaque;

  if (--r->refs == 0)
    free (r);
}

/* A piece read, in the main thread (source_poll); once all are, the
 * whole is used.
 */
static int
read_done (void *opaque, int *error)
{
  struct spot_read *r = opaque;
  struct spot *s = r->s;
  const size_t len = s->p->digest.len;
  bool zero;

  if (*error && r->error == 0)
    r->error = *error;
  if (++r->done < r->pieces)
    return 1;
  *error = r->error;
  s->in_flight--;
  if (*error == 0 && !r->data)
    memcpy (s->said + r->k * len, r->buf, len);
  if (*error == 0 && r->data &&
      blk_hash_block (s->p, s->ctx, r->buf, r->len, s->now + r->k * len,
                      &zero) == -1)
    *error = EIO;
  if (*error && s->error == 0) {
    s->error = *error;
    s->error_k = r->k;
  }
  return 1;
}

/* Read the chosen blocks (data) or their digests on h, most at a
 * time.  0, or -1 (error printed, unless after a signal).
 */
static int
read_all (struct spot *s, struct nbd_handle *h, bool data, unsigned most,
          const char *name)
{
  const uint32_t bs = s->p->block_size, dlen = s->p->digest.len;
  /* The largest request the server takes (a plugin's maximum). */
  const int64_t max = nbd_get_block_size (h, LIBNBD_SIZE_MAXIMUM);
  const uint32_t piece = max > 0 && max < 32 * 1024 * 1024
    ? (uint32_t) max : 32 * 1024 * 1024;
  size_t next = 0;
  int timeout;

  for (;;) {
    while (next < s->n && s->in_flight < most && s->error == 0 &&
           !stop_signal ()) {
      const uint64_t b = s->blocks[next];
      const uint32_t len = data ? blk_block_len (s->size, bs, b) : dlen;
      struct spot_read *r = malloc (sizeof *r + len);

      if (r == NULL) {
        error_at (name, "out of memory");
        return -1;
      }
      *r = (struct spot_read) { .s = s, .k = next++, .data = data, .len = len };
      r->pieces = (len + piece - 1) / piece;
      r->refs = r->pieces;
      s->in_flight++;
      /* libnbd frees r once its last piece is retired, also when a
       * request cannot be issued.
       */
      for (uint32_t off = 0, i = 0; i < r->pieces; i++, off += piece) {
        const uint64_t at = data ? s->base + b * bs + off
          : BLK_VIEW_DIGESTS_OFFSET + b * dlen + off;
        if (nbd_aio_pread (h, r->buf + off, MIN (piece, len - off), at,
                           (nbd_completion_callback) {
                             .callback = read_done, .user_data = r,
                             .free = piece_free }, 0) == -1) {
          error_at (name, "spot-checking the view: %s", nbd_get_error ());
          /* The pieces not issued hold no reference to give back. */
          r->refs -= r->pieces - i - 1;
          return -1;
        }
      }
    }
    if (s->in_flight == 0 || (timeout = stop_poll_timeout ()) == 0)
      break;
    if (source_poll (h, timeout) == -1) {
      if (!stop_signal ())
        error_at (name, "spot-checking the view: %s", source_error ());
      return -1;
    }
  }
  /* Told by spot_check once its connection is closed: our own server
   * then says why (endpoint_report).
   */
  if (s->error && !stop_signal ()) {
    s->unsaid = true;
    s->error_data = data;
  }
  return stop_signal () || s->error ? -1 : 0;
}

int
spot_check (struct endpoint *ep, const char *image_export,
            const char *later, const struct blk_range *range,
            const struct data_map *map, unsigned count, uint64_t *checked)
{
  const char *name = ep->src->name, *seed = getenv ("NBDSUM_SPOT_SEED");
  const struct blk_params *p = ep->params;
  const size_t dlen = p->digest.len;
  const unsigned most = MIN ((uint64_t) ep->requests,
                             blk_blocks_per (SPOT_BYTES_IN_FLIGHT,
                                             p->block_size));
  struct spot s = { .p = p, .size = ep->size, .base = range->offset };
  struct nbd_handle *h = NULL;
  uint64_t rng;
  int r = -1;

  *checked = 0;
  /* Later, an empty view's image is still asked its size. */
  if (count == 0 || (ep->nblocks == 0 && !later))
    return 0;
  /* Tests only (nbdsum(1)): the same blocks every run. */
  if (seed && *seed)
    rng = strtoull (seed, NULL, 0);
  else if (getrandom (&rng, sizeof rng, 0) != sizeof rng) {
    error_at (name, "getrandom: %m");
    return -1;
  }
  s.blocks = calloc (count, sizeof *s.blocks);
  s.said = calloc (count, 2 * dlen);
  if (s.blocks == NULL || s.said == NULL || (s.ctx = blk_ctx_new ()) == NULL) {
    error_at (name, "out of memory");
    goto out;
  }
  s.now = s.said + count * dlen;
  if (count >= ep->nblocks)
    for (s.n = 0; s.n < ep->nblocks; s.n++)
      s.blocks[s.n] = s.n;
  else
    s.n = choose (s.blocks, count, ep->nblocks, p->block_size, map, &rng);
  if (read_all (&s, ep->conns[0].h, false, ep->requests, name) == -1)
    goto out;
  /* The view is read no more: a server that admits one client at a
   * time is free for the image's connection once it sees ours go, so
   * it is tried again as nbdsum's own are.
   */
  if (later)
    endpoint_keep (ep, 0);
  if ((h = view_image (ep->src, image_export, later, SOURCE_EXTRA, name,
                       "view", &r)) == NULL)
    goto out;
  r = -1;
  /* A range's blocks lie in an image at least as long as its end.  (Not
   * asked before, later: the view may describe another image.)
   */
  if (range->length
      ? nbd_get_size (h) < (int64_t) (range->offset + range->length)
      : nbd_get_size (h) != (int64_t) ep->size) {
    error_at (name, "spot-checking the view: its image has %" PRIi64
              " bytes, not the %" PRIu64 "%s its view describes: not "
              "trusting it; or the image changed during the run",
              nbd_get_size (h), range->length ? range->offset + range->length
              : ep->size, range->length ? " or more" : "");
    goto out;
  }
  if (read_all (&s, h, true, most, name) == -1)
    goto out;
  for (size_t k = 0; k < s.n; k++)
    if (memcmp (s.said + k * dlen, s.now + k * dlen, dlen) != 0) {
      error_at (name, "the server's view disagrees with its data at block "
                "%" PRIu64 " (offset %" PRIu64 "): not trusting it; or the "
                "image changed during the run", s.blocks[k],
                s.base + s.blocks[k] * p->block_size);
      goto out;
    }
  *checked = s.n;
  r = 0;
 out:
  if (h && s.in_flight == 0)
    source_shutdown (h);
  nbd_close (h);
  if (s.unsaid) {
    char what[128];
    snprintf (what, sizeof what, "spot-checking the view: reading %s %"
              PRIu64, s.error_data ? "block" : "the digest of block",
              s.blocks[s.error_k]);
    endpoint_report (ep, what, s.error, NULL);
  }
  blk_ctx_free (s.ctx);
  free (s.blocks);
  free (s.said);
  return r;
}

static int
root_read (void *opaque, uint64_t first, uint64_t n, uint8_t *digests)
{
  struct endpoint *ep = opaque;
  const size_t len = ep->params->digest.len;

  if (source_pread (ep->conns[0].h, digests, n * len,
                    BLK_VIEW_DIGESTS_OFFSET + first * len) == 0)
    return 0;
  if (!stop_signal ())
    endpoint_read_failed (ep, "checking the view's root");
  return -1;
}

int
root_check (struct endpoint *ep, const uint8_t *root, bool *checked)
{
  const char *name = ep->src->name;
  const struct blk_params *p = ep->params;
  uint8_t folded[BLK_DIGEST_MAX];

  *checked = false;
  if (ep->nblocks > ROOT_CHECK_BYTES / p->digest.len)
    return 0;
  if (fold_digests (name, p, ep->size, ep->nblocks,
                    ROOT_READ_BYTES / p->digest.len, root_read, ep,
                    folded) == -1 ||
      !root_agrees (name, p, root, folded))
    return -1;
  *checked = true;
  return 0;
}
