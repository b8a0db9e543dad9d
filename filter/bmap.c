/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the read-only NAME@bmap view, the image's
 * mapped 4 KiB blocks as ranges with the sha256 of each (what a
 * bmaptool block map holds), computed next to the storage so that
 * only the ranges cross the network.  Its layout is lib/bmap.h's.
 *
 * A range's digest is a chain over its bytes: the scan goes in order
 * on one thread, and its state is the connection's (the view is not
 * multi-conn), driven in steps as the plain-digest view is: CACHE of
 * span bytes [8192+a, 8192+b) scans through span b-1, reading the
 * summary or the table finishes it.
 *
 * Mapped: not known to read as zeros.  Runs of zero extents (NBD
 * base:allocation, as bmaptool takes holes) are skipped unread; data
 * is read and its all-zero 4 KiB blocks count as holes too (a qcow2
 * cluster of 64 KiB holding 4 KiB of data maps 4 KiB).  A short run
 * of zero blocks between data is kept in its range (hashed as zeros)
 * while the zeros kept stay within a tenth of the data blocks: the
 * mapped bytes are at most 1.1 times the data, in fewer ranges.  More
 * than BLK_BMAP_MAX_RANGES ranges stop the scan, and the summary says
 * so.  A write through the filter during the scan voids it, as for
 * the plain-digest view.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bmap.h"
#include "cleanup.h"
#include "filter.h"
#include "minmax.h"
#include "viewname.h"
#include "zero.h"

#define BS BLK_BMAP_BLOCK_SIZE
/* One plugin read. */
#define PIECE_SIZE (1024 * 1024)
/* Extents asked for at a time. */
#define EXTENTS_WINDOW (UINT64_C (64) * 1024 * 1024)
/* A run of zero extents shorter than this is read (and found zero). */
#define MIN_ZERO_RUN (64 * 1024)
/* The longest run of zero blocks kept inside a range. */
#define MAX_KEPT_GAP 16

static const uint8_t zeros[PIECE_SIZE];

/* nbdkit -D blkhash.bmap_max_ranges=N: a lower limit on ranges (tests). */
NBDKIT_DLL_PUBLIC int blkhash_debug_bmap_max_ranges;

/* One connection's scan, from byte 0. */
struct bmap_run {
  uint64_t pos;                 /* [0, pos) scanned: 4K aligned, or size */
  bool done;
  struct blk_ctx *ctx;
  bool open;                    /* a range [first, last] is being hashed */
  uint64_t first, last;
  uint64_t gap;                 /* zero blocks after last, not hashed */
  uint64_t data_blocks, kept_blocks;    /* mapped: data, zeros kept */
  struct blk_bmap_range *ranges;
  size_t nranges, cap;
  struct blk_bmap_summary sum;
  uint8_t *buf;
};

struct blkhash_bmap_view {
  struct blk_header h;
  uint8_t header[BLK_VIEW_HEADER_SIZE];
  struct blk_digest d;
  uint64_t table, entries;      /* the table's offset and entries */
  uint64_t max_ranges;          /* entries, or fewer (-D) */
  pthread_mutex_t lock;         /* one request at a time on the run */
  struct bmap_run *run;
  uint64_t stamp;               /* writes before the run began */
  const char *name;             /* the export's, for messages */
};

static void
run_free (struct bmap_run *r)
{
  if (r == NULL)
    return;
  blk_ctx_free (r->ctx);
  free (r->ranges);
  free (r->buf);
  free (r);
}

static int
digest_failed (int *err)
{
  nbdkit_error ("blkhash: bmap: sha256 failed");
  *err = EIO;
  return -1;
}

/* Close the open range: its digest, into the table. */
static int
range_close (struct blkhash_bmap_view *v, struct bmap_run *r, int *err)
{
  struct blk_bmap_range *e;

  if (!r->open)
    return 0;
  r->open = false;
  r->gap = 0;
  if (r->nranges == v->max_ranges) {
    /* Too fragmented: the summary says so, and where. */
    r->sum.status = BLK_BMAP_TOO_MANY;
    r->sum.stopped_at = r->first * BS;
    r->done = true;
    r->pos = v->h.image_size;
    return 0;
  }
  if (r->nranges == r->cap) {
    const size_t cap = r->cap ? r->cap * 2 : 64;
    e = realloc (r->ranges, cap * sizeof *e);
    if (e == NULL) {
      nbdkit_error ("blkhash: bmap: out of memory for %zu ranges", cap);
      *err = ENOMEM;
      return -1;
    }
    r->ranges = e;
    r->cap = cap;
  }
  e = &r->ranges[r->nranges];
  e->first = r->first;
  e->last = r->last;
  if (blk_ctx_final (r->ctx, e->digest) == -1)
    return digest_failed (err);
  r->nranges++;
  r->sum.ranges = r->nranges;
  r->sum.mapped_blocks += r->last - r->first + 1;
  return 0;
}

/* n blocks known to read as zeros follow. */
static int
zero_blocks (struct blkhash_bmap_view *v, struct bmap_run *r, uint64_t n,
             int *err)
{
  if (!r->open)
    return 0;
  r->gap += n;
  return r->gap > MAX_KEPT_GAP ? range_close (v, r, err) : 0;
}

/* n blocks of data from block b, len bytes at buf (the last block may
 * be short: the image's end).
 */
static int
data_blocks (struct blkhash_bmap_view *v, struct bmap_run *r, uint64_t b,
             uint64_t n, const uint8_t *buf, size_t len, int *err)
{
  if (r->open && r->gap) {
    /* Keep the gap while the zeros kept stay within a tenth. */
    if ((r->kept_blocks + r->gap) * 10 <= r->data_blocks) {
      for (uint64_t left = r->gap * BS; left > 0; ) {
        const size_t k = MIN (left, (uint64_t) PIECE_SIZE);
        if (blk_ctx_update (r->ctx, zeros, k) == -1)
          return digest_failed (err);
        left -= k;
      }
      r->kept_blocks += r->gap;
      r->gap = 0;
    }
    else if (range_close (v, r, err) == -1)
      return -1;
  }
  if (r->done)
    return 0;
  if (!r->open) {
    if (blk_ctx_init (r->ctx, &v->d) == -1)
      return digest_failed (err);
    r->open = true;
    r->first = b;
  }
  if (blk_ctx_update (r->ctx, buf, len) == -1)
    return digest_failed (err);
  r->last = b + n - 1;
  r->data_blocks += n;
  return 0;
}

/* Read [off, end) (off 4K aligned; end too, or the image's end) a
 * piece at a time; runs of data blocks are hashed, zero blocks are
 * holes.
 */
static int
read_data (nbdkit_next *next, struct blkhash_bmap_view *v,
           struct bmap_run *r, uint64_t off, uint64_t end, uint32_t most,
           int *err)
{
  while (off < end && !r->done) {
    const uint32_t len = MIN (end - off, (uint64_t) most);
    size_t i = 0;

    if (next->pread (next, r->buf, len, off, 0, err) == -1) {
      nbdkit_error ("blkhash: bmap: reading %" PRIu32 " bytes at %" PRIu64
                    " failed", len, off);
      return -1;
    }
    atomic_fetch_add (&blkhash_stats.read_bytes, len);
    while (i < len && !r->done) {
      const bool zero = blk_is_zero (r->buf + i, MIN (len - i, (size_t) BS));
      size_t j = i + MIN (len - i, (size_t) BS);
      /* The run of blocks like this one. */
      while (j < len &&
             blk_is_zero (r->buf + j, MIN (len - j, (size_t) BS)) == zero)
        j += MIN (len - j, (size_t) BS);
      const uint64_t n = (j - i + BS - 1) / BS;
      if ((zero ? zero_blocks (v, r, n, err)
           : data_blocks (v, r, (off + i) / BS, n, r->buf + i, j - i,
                          err)) == -1)
        return -1;
      i = j;
    }
    off += len;
    if (blkhash_should_stop (err))
      return -1;
  }
  return 0;
}

/* A run of zero extents [zs, ze): its whole blocks, if long enough to
 * skip unread, as *bs..*be (*be the image's end if it reaches it).
 */
static bool
zero_span (uint64_t zs, uint64_t ze, uint64_t size, uint64_t *bs,
           uint64_t *be)
{
  *bs = (zs + BS - 1) / BS * BS;
  *be = ze >= size ? size : ze / BS * BS;
  return *be > *bs && *be - *bs >= MIN ((uint64_t) MIN_ZERO_RUN, size - *bs);
}

/* Scan [r->pos, wend) of a window whose extents are exts (NULL: all
 * data).
 */
static int
scan_window (nbdkit_next *next, struct blkhash_bmap_view *v,
             struct bmap_run *r, struct nbdkit_extents *exts, uint64_t wend,
             uint32_t most, int *err)
{
  const uint64_t size = v->h.image_size;
  const size_t n = exts ? nbdkit_extents_count (exts) : 0;
  uint64_t zs = 0, ze = 0, bs, be;
  bool in_run = false;

  for (size_t i = 0; i <= n && !r->done; i++) {
    struct nbdkit_extent e = { 0 };
    bool zero = false;

    if (i < n) {
      e = nbdkit_get_extent (exts, i);
      if (e.offset >= wend)
        e.offset = wend, e.length = 0;
      e.length = MIN (e.length, wend - e.offset);
      zero = (e.type & NBDKIT_EXTENT_ZERO) && e.length > 0;
    }
    if (zero && in_run && e.offset == ze) {
      ze += e.length;
      continue;
    }
    /* The run so far ends here: skip it if it is long enough. */
    if (in_run && zero_span (MAX (zs, r->pos), ze, size, &bs, &be) &&
        bs >= r->pos) {
      if (read_data (next, v, r, r->pos, bs, most, err) == -1 ||
          (!r->done &&
           zero_blocks (v, r, (be - bs + BS - 1) / BS, err) == -1))
        return -1;
      if (!r->done)
        r->pos = be;
    }
    in_run = zero;
    zs = e.offset;
    ze = e.offset + e.length;
  }
  if (!r->done && read_data (next, v, r, r->pos, wend, most, err) == -1)
    return -1;
  if (!r->done)
    r->pos = wend;
  return 0;
}

/* The run, started if there is none; v->lock held. */
static struct bmap_run *
view_run (struct blkhash_bmap_view *v, int *err)
{
  struct bmap_run *r;

  if (v->run)
    return v->run;
  if ((r = calloc (1, sizeof *r)) == NULL ||
      (r->ctx = blk_ctx_new ()) == NULL) {
    nbdkit_error ("blkhash: out of memory");
    free (r);
    *err = ENOMEM;
    return NULL;
  }
  r->sum.max_ranges = v->max_ranges;
  blkhash_writes_stamp (&v->stamp);
  v->run = r;
  return r;
}

/* Scan on through byte end (capped at the size); at the image's end
 * the last range closes.  v->lock held.
 */
static int
view_advance (nbdkit_next *next, struct blkhash_bmap_view *v, uint64_t end,
              int *err)
{
  const uint64_t size = v->h.image_size;
  struct bmap_run *r = view_run (v, err);
  bool extents;
  uint32_t most;

  if (r == NULL)
    return -1;
  end = MIN (end, size);
  if (r->pos < end) {
    /* Whole blocks but at the end, and at least 4K per read. */
    end = end == size ? size : (end + BS - 1) / BS * BS;
    end = MIN (end, size);
    extents = blkhash_extents_usable (next);
    most = blkhash_read_most (next, PIECE_SIZE) / BS * BS;
    most = MAX (most, (uint32_t) BS);
    if (r->buf == NULL && (r->buf = malloc (PIECE_SIZE)) == NULL) {
      nbdkit_error ("blkhash: out of memory");
      *err = ENOMEM;
      return -1;
    }
    while (r->pos < end && !r->done) {
      const uint64_t wend = MIN (end, r->pos + EXTENTS_WINDOW);
      struct nbdkit_extents *exts = NULL;
      int ret;

      if (extents &&
          (exts = nbdkit_extents_full (next, wend - r->pos, r->pos, 0,
                                       err)) == NULL)
        return -1;
      ret = scan_window (next, v, r, exts, wend, most, err);
      if (exts)
        nbdkit_extents_free (exts);
      if (ret == -1)
        return -1;
    }
  }
  if (r->pos >= size && !r->done) {
    if (range_close (v, r, err) == -1)
      return -1;
    r->done = true;
  }
  /* A write through the filter since the run began voids it. */
  if (blkhash_writes_since (v->stamp)) {
    nbdkit_error ("blkhash: export '%s' was written while its bmap was "
                  "computed: ask again", v->name);
    run_free (v->run);
    v->run = NULL;
    *err = EIO;
    return -1;
  }
  return 0;
}

struct blkhash_bmap_view *
blkhash_bmap_view_new (const char *name, uint64_t size, uint32_t flags,
                       const char *nonce)
{
  struct blkhash_bmap_view *v = calloc (1, sizeof *v);
  const char *msg;

  if (v == NULL) {
    nbdkit_error ("calloc: %m");
    return NULL;
  }
  if ((msg = blk_digest_init (&v->d, BLK_BMAP_DIGEST)) != NULL) {
    nbdkit_error ("blkhash: export '%s" BLK_BMAP_MARKER "': %s", name, msg);
    free (v);
    return NULL;
  }
  pthread_mutex_init (&v->lock, NULL);
  v->name = name;
  blk_bmap_header_init (&v->h, size, v->d.name, v->d.len);
  v->h.flags = flags;
  if (nonce)
    snprintf (v->h.nonce, sizeof v->h.nonce, "%s", nonce);
  blk_header_encode (&v->h, v->header);
  v->table = blk_bmap_table_offset (&v->h);
  v->entries = blk_bmap_table_entries (&v->h);
  v->max_ranges = v->entries;
  if (blkhash_debug_bmap_max_ranges > 0)
    v->max_ranges = MIN (v->max_ranges,
                         (uint64_t) blkhash_debug_bmap_max_ranges);
  return v;
}

void
blkhash_bmap_view_free (struct blkhash_bmap_view *v)
{
  if (v == NULL)
    return;
  run_free (v->run);
  blk_digest_free (&v->d);
  pthread_mutex_destroy (&v->lock);
  free (v);
}

int64_t
blkhash_bmap_view_size (const struct blkhash_bmap_view *v)
{
  return blk_bmap_view_size (&v->h);
}

int
blkhash_bmap_view_pread (nbdkit_next *next, struct blkhash_bmap_view *v,
                         void *buf, uint32_t count, uint64_t offset,
                         int *err)
{
  uint8_t *dst = buf;
  const uint64_t end = offset + count;
  const uint64_t sum_end = BLK_BMAP_SUMMARY_OFFSET + BLK_BMAP_SUMMARY_SIZE;
  struct bmap_run *r;

  memset (buf, 0, count);
  if (offset < BLK_VIEW_HEADER_SIZE) {
    const uint64_t to = MIN (end, (uint64_t) BLK_VIEW_HEADER_SIZE);
    memcpy (dst, v->header + offset, to - offset);
  }
  if (end <= BLK_BMAP_SUMMARY_OFFSET)
    return 0;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&v->lock);
  /* The summary and the table: the scan finished first. */
  if ((offset < sum_end && end > BLK_BMAP_SUMMARY_OFFSET) || end > v->table) {
    if (view_advance (next, v, v->h.image_size, err) == -1)
      return -1;
  }
  r = v->run;
  if (offset < sum_end && end > BLK_BMAP_SUMMARY_OFFSET) {
    uint8_t s[BLK_BMAP_SUMMARY_SIZE];
    const uint64_t from = MAX (offset, (uint64_t) BLK_BMAP_SUMMARY_OFFSET);
    const uint64_t to = MIN (end, sum_end);
    blk_bmap_summary_encode (&r->sum, s);
    memcpy (dst + (from - offset), s + (from - BLK_BMAP_SUMMARY_OFFSET),
            to - from);
  }
  if (end > BLK_VIEW_DIGESTS_OFFSET && offset < v->table) {
    /* Span i is scanned once the run is past its end (or the image's). */
    const uint64_t pos = v->run ? v->run->pos : 0;
    const uint64_t from = MAX (offset, (uint64_t) BLK_VIEW_DIGESTS_OFFSET);
    const uint64_t to = MIN (end, BLK_VIEW_DIGESTS_OFFSET +
                             v->h.block_count);
    for (uint64_t i = from - BLK_VIEW_DIGESTS_OFFSET;
         i + BLK_VIEW_DIGESTS_OFFSET < to; i++) {
      const uint64_t span_end = MIN ((i + 1) * BLK_PLAIN_SPAN_SIZE,
                                     v->h.image_size);
      dst[BLK_VIEW_DIGESTS_OFFSET + i - offset] = pos >= span_end;
    }
  }
  if (end > v->table) {
    const uint64_t from = MAX (offset, v->table);
    for (uint64_t k = (from - v->table) / BLK_BMAP_ENTRY_SIZE;
         k < r->nranges; k++) {
      uint8_t e[BLK_BMAP_ENTRY_SIZE];
      const uint64_t at = v->table + k * BLK_BMAP_ENTRY_SIZE;
      if (at >= end)
        break;
      blk_bmap_range_encode (&r->ranges[k], e);
      for (uint64_t b = MAX (at, offset);
           b < MIN (end, at + BLK_BMAP_ENTRY_SIZE); b++)
        dst[b - offset] = e[b - at];
    }
  }
  return 0;
}

int
blkhash_bmap_view_cache (nbdkit_next *next, struct blkhash_bmap_view *v,
                         uint32_t count, uint64_t offset, int *err)
{
  const uint64_t end = MIN (offset + count, v->table);

  if (end <= BLK_VIEW_DIGESTS_OFFSET)
    return 0;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&v->lock);
  return view_advance (next, v, (end - BLK_VIEW_DIGESTS_OFFSET) *
                       BLK_PLAIN_SPAN_SIZE, err);
}
