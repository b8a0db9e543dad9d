/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --bmap: the server's bmap view NAME@bmap (see
 * nbdkit-blkhash-filter(1), lib/bmap.h).  The server scans the image
 * and hashes each mapped range next to the storage; here one
 * connection drives it with NBD_CMD_CACHE of the span bytes, BMAP_SPANS
 * spans (MiB of image) per request, several in flight, then reads the
 * summary and the table: only the ranges cross the network.
 *
 * The view's name carries a fresh nonce that its header must echo (a
 * file named like the view is not believed), and every range is
 * checked: in order, apart, inside the image, counted as the summary
 * says.  A server without the view is refused: a bmap needs the
 * filter next to the storage (a local file always has it).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "header.h"
#include "helpers.h"
#include "input-bmap.h"
#include "input-kinds.h"
#include "local.h"
#include "messages.h"
#include "minmax.h"
#include "names.h"
#include "signals.h"
#include "source.h"
#include "util.h"
#include "viewname.h"
#include "zero.h"

/* Spans per NBD_CMD_CACHE, one segment of the server's: at most 64
 * MiB of work per request; and requests in flight, segments scanned
 * at once.
 */
#define BMAP_SPANS 64
#define BMAP_REQUESTS 4
/* Table bytes read at a time (a multiple of the entry size). */
#define TABLE_READ (21845 * BLK_BMAP_ENTRY_SIZE)

static char *
bmap_name_of (const char *base, const struct hash_spec *spec,
              const char *nonce)
{
  return blk_bmap_view_name_build (base, nonce);
}

struct cache_req {
  uint64_t first;               /* span */
  int error;                    /* errno of the reply */
  bool done;
};

static int
cache_done (void *opaque, int *error)
{
  struct cache_req *r = opaque;

  r->error = *error;
  r->done = true;
  return 1;
}

/* NBD_CMD_CACHE over every span, BMAP_SPANS each (one segment of the
 * server's), BMAP_REQUESTS in flight: the server scans that many
 * segments at once.  After a failure or a signal no more are sent,
 * but those in flight are waited for (after a signal, until its
 * deadline): nbdkit 1.32 aborts when its client hangs up under
 * requests.  0, or -1 (error printed, but for a signal).
 */
static int
cache_all (const char *name, struct local_server *server,
           struct nbd_handle *h, uint64_t nspans)
{
  struct cache_req reqs[BMAP_REQUESTS];
  const struct cache_req *failed = NULL;
  uint64_t next = 0;
  unsigned busy = 0;

  for (unsigned i = 0; i < BMAP_REQUESTS; i++)
    reqs[i] = (struct cache_req) { .done = true };
  while ((next < nspans && failed == NULL && !stop_signal ()) || busy) {
    int timeout;

    for (unsigned i = 0; i < BMAP_REQUESTS; i++) {
      struct cache_req *r = &reqs[i];
      if (!r->done)
        continue;
      if (r->error && failed == NULL)
        failed = r;
      if (failed || stop_signal () || next >= nspans)
        continue;
      *r = (struct cache_req) { .first = next };
      if (nbd_aio_cache (h, MIN ((uint64_t) BMAP_SPANS, nspans - next),
                         BLK_VIEW_DIGESTS_OFFSET + next,
                         (nbd_completion_callback) {
                           .callback = cache_done, .user_data = r }, 0)
          == -1) {
        error_at (name, "%s", nbd_get_error ());
        return -1;
      }
      next += MIN ((uint64_t) BMAP_SPANS, nspans - next);
    }
    busy = nbd_aio_in_flight (h);
    /* After a signal, those in flight get until its deadline. */
    if (busy && ((timeout = stop_poll_timeout ()) == 0 ||
                 source_poll (h, timeout) == -1)) {
      /* Requests left in flight: our own server is killed now, as in
       * endpoint_close, not asked to stop (it would wait for them).
       */
      local_server_kill (server);
      if (!stop_signal ())
        error_at (name, "%s", source_error ());
      else if (timeout == 0)
        error_at (name, "1 connection still had requests in flight after "
                  "%d seconds: closing it anyway", DRAIN_SECONDS);
      return -1;
    }
  }
  if (stop_signal ())
    return -1;
  /* The replies that came with the last poll. */
  for (unsigned i = 0; i < BMAP_REQUESTS && failed == NULL; i++)
    if (reqs[i].error)
      failed = &reqs[i];
  if (failed) {
    char *cause;

    /* Goodbye first: nbdkit, asked why, exits once its clients left. */
    source_shutdown (h);
    cause = local_server_cause (server, failed->error);
    error_at (name, "the server failed to map image bytes from %" PRIu64
              ": %s", failed->first * BLK_PLAIN_SPAN_SIZE,
              cause ? cause : strerror (failed->error));
    free (cause);
    return -1;
  }
  return 0;
}

/* Read and check the header: 1 if it is this request's bmap view, 2
 * if it is not the filter's (too small to echo the nonce, or not
 * echoing it: nothing said), -1 if it echoes the nonce but is not
 * believed otherwise, or on error (printed).
 */
static int
read_header (const char *name, const struct view_go *vg,
             struct blk_header *hdr)
{
  uint8_t buf[BLK_VIEW_HEADER_SIZE];
  int64_t view_size;
  const char *msg;
  const int r = view_header_bytes (name, vg->h, "the bmap view's header",
                                   buf, &view_size);

  if (r != 1)
    return r == 0 ? 2 : -1;
  /* The nonce first: without its echo nothing else is the filter's
   * (a server without the filter answers every name with the image).
   */
  if (!blk_header_echoes (buf, sizeof buf, vg->nonce))
    return 2;
  msg = blk_bmap_header_decode (buf, sizeof buf, hdr);
  if (msg == NULL &&
      (!blk_digest_same (hdr->digest_name, BLK_BMAP_DIGEST) ||
       hdr->digest_len != BLK_BMAP_DIGEST_LEN ||
       hdr->block_size != BLK_PLAIN_SPAN_SIZE))
    msg = "not sha256 in 1 MiB spans";
  if (msg == NULL && (uint64_t) view_size != blk_bmap_view_size (hdr))
    msg = "its size does not match its header";
  if (msg) {
    error_at (name, "the bmap view '%s' is not believed: %s", vg->shown,
              msg);
    return -1;
  }
  return 1;
}

/* Drive the scan, then read the summary and the table into bm. */
static int
read_bmap (const char *name, struct local_server *server,
           const struct view_go *vg,
           const struct blk_header *hdr, struct bmap *bm)
{
  struct nbd_handle *h = vg->h;
  const uint64_t table = blk_bmap_table_offset (hdr);
  const uint64_t entries = blk_bmap_table_entries (hdr);
  uint8_t sbuf[BLK_BMAP_SUMMARY_SIZE];
  struct blk_bmap_summary sum;
  uint8_t *buf = NULL;
  uint64_t mapped = 0;

  if (nbd_can_cache (h) == 1 &&
      cache_all (name, server, h, hdr->block_count) == -1)
    return -1;
  if (source_pread (h, sbuf, sizeof sbuf, BLK_BMAP_SUMMARY_OFFSET) == -1) {
    if (!stop_signal ())
      error_at (name, "reading the bmap: %s", source_error ());
    return -1;
  }
  blk_bmap_summary_decode (sbuf, &sum);
  if (sum.status == BLK_BMAP_TOO_MANY) {
    error_at (name, "the image has more than %" PRIu64 " mapped ranges "
              "(the bmap view's limit; one that did not fit starts at "
              "byte %" PRIu64 "): too fragmented for a bmap",
              sum.max_ranges, sum.stopped_at);
    return -1;
  }
  if (sum.status != BLK_BMAP_COMPLETE || sum.max_ranges > entries ||
      sum.ranges > entries) {
    error_at (name, "the bmap view '%s' has a bad summary (status %" PRIu32
              ", %" PRIu64 " ranges of %" PRIu64 "): not trusting it",
              vg->shown, sum.status, sum.ranges, sum.max_ranges);
    return -1;
  }
  bm->image_size = hdr->image_size;
  bm->blocks = blk_bmap_blocks (hdr->image_size);
  bm->nranges = sum.ranges;
  if (sum.ranges &&
      ((bm->ranges = calloc (sum.ranges, sizeof *bm->ranges)) == NULL ||
       (buf = malloc (TABLE_READ)) == NULL)) {
    error_at (name, "out of memory for %" PRIu64 " ranges", sum.ranges);
    return -1;
  }
  for (uint64_t k = 0; k < sum.ranges; ) {
    const uint64_t n = MIN (sum.ranges - k,
                            (uint64_t) TABLE_READ / BLK_BMAP_ENTRY_SIZE);
    if (source_pread (h, buf, n * BLK_BMAP_ENTRY_SIZE,
                      table + k * BLK_BMAP_ENTRY_SIZE) == -1) {
      if (!stop_signal ())
        error_at (name, "reading the bmap: %s", source_error ());
      free (buf);
      return -1;
    }
    for (uint64_t i = 0; i < n; i++, k++) {
      struct blk_bmap_range *r = &bm->ranges[k];
      blk_bmap_range_decode (buf + i * BLK_BMAP_ENTRY_SIZE, r);
      /* In order, not overlapping, inside the image. */
      if (r->first > r->last || r->last >= bm->blocks ||
          (k > 0 && r->first <= bm->ranges[k - 1].last)) {
        error_at (name, "the bmap view '%s' has a bad range %" PRIu64
                  "-%" PRIu64 " (of %" PRIu64 " blocks): not trusting it",
                  vg->shown, r->first, r->last, bm->blocks);
        free (buf);
        return -1;
      }
      mapped += r->last - r->first + 1;
    }
  }
  free (buf);
  if (mapped != sum.mapped_blocks) {
    error_at (name, "the bmap view '%s' counts %" PRIu64 " mapped blocks "
              "but its ranges hold %" PRIu64 ": not trusting it", vg->shown,
              sum.mapped_blocks, mapped);
    return -1;
  }
  bm->mapped_blocks = mapped;
  return 0;
}

/* The spot check's draw: xorshift64*, seeded by getrandom (or, for
 * tests, NBDSUM_SPOT_SEED).
 */
static uint64_t
draw (uint64_t *rng, uint64_t n)
{
  *rng ^= *rng >> 12;
  *rng ^= *rng << 25;
  *rng ^= *rng >> 27;
  return (*rng * UINT64_C (2685821657736338717)) % n;
}

/* Is block b in a range of bm? */
static bool
block_mapped (const struct bmap *bm, uint64_t b)
{
  uint64_t lo = 0, hi = bm->nranges;

  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (bm->ranges[mid].last < b)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < bm->nranges && bm->ranges[lo].first <= b;
}

/* The server's word checked here, on a connection to the image: of
 * --spot-check's N draws, half are ranges read and hashed (those of
 * SPOT_RANGE_MAX bytes or fewer), half blocks outside every range,
 * which must read as zeros (a bmap that leaves out data would copy
 * without an error: bmaptool checks only the ranges it has).  0, or
 * -1 (error printed).
 */
#define SPOT_RANGE_MAX (UINT64_C (4) * 1024 * 1024)
static int
spot_check_bmap (const char *name, struct source *src, const char *base,
                 const char *shown, const struct bmap *bm, bool later)
{
  const char *seed = getenv ("NBDSUM_SPOT_SEED");
  const unsigned count = opts->spot_check;
  const uint64_t size = bm->image_size;
  struct nbd_handle *h = NULL;
  struct blk_ctx *ctx = NULL;
  struct blk_digest d = { 0 };
  uint8_t *buf = NULL, sum[BLK_DIGEST_MAX];
  uint64_t rng;
  int r = -1;

  if (count == 0 || bm->blocks == 0)
    return 0;
  if (seed && *seed)
    rng = strtoull (seed, NULL, 0) | 1;
  else if (getrandom (&rng, sizeof rng, 0) != sizeof rng) {
    error_at (name, "getrandom: %m");
    return -1;
  }
  rng |= 1;
  if (blk_digest_init (&d, BLK_BMAP_DIGEST) != NULL ||
      (ctx = blk_ctx_new ()) == NULL ||
      (buf = malloc (SPOT_RANGE_MAX)) == NULL) {
    error_at (name, "out of memory");
    goto out;
  }
  /* The view's connection closed first (see spot_check). */
  if ((h = view_image (src, base, later ? shown : NULL, 0, name, "bmap",
                       &r)) == NULL)
    goto out;
  r = -1;
  if (nbd_get_size (h) != (int64_t) size) {
    error_at (name, "spot-checking the bmap: its image now has %" PRIi64
              " bytes, not %" PRIu64 ": not trusting it", nbd_get_size (h),
              size);
    goto out;
  }
  for (unsigned i = 0; i < count; i++) {
    const bool range = i % 2 == 0;
    const struct blk_bmap_range *e = NULL;
    uint64_t first, last, off, len;

    if (range) {
      if (bm->nranges == 0)
        continue;
      e = &bm->ranges[draw (&rng, bm->nranges)];
      first = e->first;
      last = e->last;
    }
    else {
      first = last = draw (&rng, bm->blocks);
      if (block_mapped (bm, first))
        continue;
    }
    off = first * BLK_BMAP_BLOCK_SIZE;
    len = MIN ((last + 1) * BLK_BMAP_BLOCK_SIZE, size) - off;
    if (len > SPOT_RANGE_MAX)
      continue;
    if (source_pread (h, buf, len, off) == -1) {
      if (!stop_signal ())
        error_at (name, "spot-checking the bmap: reading %" PRIu64
                  " bytes at %" PRIu64 ": %s", len, off, source_error ());
      goto out;
    }
    if (!range && !blk_is_zero (buf, len)) {
      error_at (name, "the bmap view '%s' leaves out data at block %"
                PRIu64 " (offset %" PRIu64 "): not trusting it; or the "
                "image changed during the run", shown, first, off);
      goto out;
    }
    if (range) {
      if (blk_ctx_init (ctx, &d) == -1 ||
          blk_ctx_update (ctx, buf, len) == -1 ||
          blk_ctx_final (ctx, sum) == -1) {
        error_at (name, "sha256 failed");
        goto out;
      }
      if (memcmp (sum, e->digest, BLK_BMAP_DIGEST_LEN) != 0) {
        error_at (name, "the bmap view '%s' disagrees with its data at "
                  "blocks %" PRIu64 "-%" PRIu64 " (offset %" PRIu64 "): "
                  "not trusting it; or the image changed during the run",
                  shown, first, last, off);
        goto out;
      }
    }
  }
  r = 0;
 out:
  if (h) {
    source_shutdown (h);
    nbd_close (h);
  }
  free (buf);
  blk_ctx_free (ctx);
  blk_digest_free (&d);
  return r;
}

/* The largest image mapped: the limit of a plain digest (the scan is
 * in order, as one).
 */
static bool
bmap_size_refused (const char *name, const char *what, uint64_t size)
{
  const uint64_t max = options_max_size (true);
  char l[BLK_LIMIT_STR_MAX];

  if (size <= max)
    return false;
  error_at (name, "%s %" PRIu64 " bytes, over the limit of %s for a bmap: "
            SIZE_LIFTS, what, size, blk_format_limit (max, l));
  return true;
}

static bool
bmap_size_refused_view (const char *name, const char *shown, uint64_t size)
{
  char *what = NULL;
  bool r;

  if (asprintf (&what, "the view '%s' says the image is", shown) == -1)
    what = NULL;
  r = bmap_size_refused (name, what ? what : "the view says the image is",
                         size);
  free (what);
  return r;
}

/* No bmap view: an image over the limit is why, when nbdsum's own
 * filter had that limit (a private server's log says the same).
 */
static bool
bmap_refused_for_size (const char *name, struct source *src,
                       struct fallback *fb)
{
  int64_t size = -1;

  if (fb->h && nbd_set_export_name (fb->h, fb->export_name) != -1 &&
      source_go (fb->h, fb->deadline) != -1)
    size = nbd_get_size (fb->h);
  if (size < 0 || !bmap_size_refused (name, "the image is", size))
    return false;
  if (src->server)
    free (local_server_message (src->server));
  return true;
}

/* Go to src's bmap view and read its header: 1 on the view, 0 when
 * src has none (*fb filled in; a view too small for a header, or not
 * echoing the nonce, is none), -1 on error (printed).
 */
static int
go_bmap (struct source *src, const struct hash_spec *spec,
         struct view_go *vg, struct blk_header *hdr, struct fallback *fb)
{
  int r = view_go (src, spec, bmap_name_of, "bmap view", vg, fb);

  if (r != 1)
    return r;
  r = read_header (src->name, vg, hdr);
  if (r == 2)
    view_not_echoed (vg, "bmap view", fb);
  /* Not a view: gone before a filter in front connects. */
  if (r != 1)
    view_go_end (vg, r == 2);
  return r == 2 ? 0 : r;
}

int
bmap_fetch (const char *name, const struct hash_spec *spec_in,
            struct bmap *bm)
{
  struct hash_spec spec = *spec_in;
  struct fallback fb = { NULL, NULL, 0, NULL, NULL };
  struct view_go vg = { 0 };
  struct blk_header hdr;
  struct source *src;
  int r, checked = 1;

  memset (bm, 0, sizeof *bm);
  /* The whole image, always. */
  memset (&spec.range, 0, sizeof spec.range);
  spec.format = options_format (name);
  if (spec.format && !name_is_local (name) && !name_is_http (name)) {
    error_at (name, "a format (%s) applies to local files only: this "
              "input is mapped as its server serves it", spec.format);
    return -1;
  }
  if ((src = source_open_as (name, spec.format)) == NULL)
    return -1;
  r = go_bmap (src, &spec, &vg, &hdr, &fb);
  /* A server without the filter: nbdsum's private one in front of it
   * maps it (input-front.c); a local file's has the filter already.
   */
  if (r == 0 && !(src->server && local_server_format (src->server))) {
    struct source_retry retry;

    if ((src = front_open (src, &fb, &spec)) == NULL)
      return -1;
    /* Its first try starts now (see served_input_open). */
    retry = (struct source_retry) { now (), 0 };
    do
      r = go_bmap (src, &spec, &vg, &hdr, &fb);
    while (r == 0 && front_retry (src, &fb, &retry));
    /* A server that refused our nbdkit would refuse its size too. */
    if (r == 0 && (front_refused (src, &fb) ||
                   !bmap_refused_for_size (name, src, &fb))) {
      front_failed (src, &fb);
      r = -1;
    }
  }
  else if (r == 0 && !bmap_refused_for_size (name, src, &fb)) {
    error_at (name, "the server has no bmap view (%s): --bmap needs "
              "nbdkit --filter=blkhash (of a version with --bmap) next to "
              "the storage; give the image's file, or serve it through "
              "the filter", fb.notice ? fb.notice : "no such export");
  }
  if (r == 0) {
    if (fb.h) {
      source_shutdown (fb.h);
      nbd_close (fb.h);
    }
    free (fb.export_name);
    free (fb.notice);
    free (fb.why);
  }
  if (r == 1) {
    if (hdr.image_size == 0) {
      error_at (name, "the image is empty: a bmap maps blocks, and it has "
                "none (bmaptool create refuses one too)");
      r = -1;
    }
    if (r == 1 && bmap_size_refused_view (name, vg.shown, hdr.image_size))
      r = -1;
    /* nbdsum's own filter in front of a server is not checked.  A
     * view that could not be while it was open (a server admitting one
     * client) is, as in checksum mode, by the spot check once it is
     * read and closed.
     */
    if (r == 1 && !src->behind &&
        (checked = view_check_image (src, vg.base, vg.shown, &hdr,
                                     &spec.range,
                                     opts->spot_check > 0)) == -1)
      r = -1;
    if (r == 1 && read_bmap (name, src->server, &vg, &hdr, bm) == -1)
      r = -1;
    if (r == 1 && checked == 2) {
      source_shutdown (vg.h);
      nbd_close (vg.h);
      vg.h = NULL;
    }
    if (r == 1 && checked == 2 && (hdr.flags & BLK_VIEW_FLAG_VIEWS_ONLY)) {
      if (view_check_views_only (src, vg.base, vg.shown) == -1)
        r = -1;
    }
    else if (r == 1 && !src->behind && checked >= 1 &&
             spot_check_bmap (name, src, vg.base, vg.shown, bm,
                              checked == 2) == -1)
      r = -1;
    view_go_end (&vg, true);
  }
  source_close (src);
  if (r != 1)
    bmap_free (bm);
  return r == 1 ? 0 : -1;
}

void
bmap_free (struct bmap *bm)
{
  free (bm->ranges);
  bm->ranges = NULL;
}
