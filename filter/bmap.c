/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the read-only NAME@bmap view, the image's
 * mapped 4 KiB blocks as ranges with the sha256 of each (what a
 * bmaptool block map holds), computed next to the storage so that
 * only the ranges cross the network.  Its layout is lib/bmap.h's.
 *
 * A range's digest is a chain over its bytes, so the image is cut in
 * segments of 64 MiB that no range crosses (bmaptool takes adjacent
 * ranges as any others), each scanned in order by the request that
 * first needs it: CACHE of span bytes [8192+a, 8192+b) scans the
 * segments of spans a to b-1, several requests in flight scan several
 * segments at once on nbdkit's threads, and reading the summary or the
 * table scans what is left.  The state is the connection's (the view
 * is not multi-conn).
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
/* A segment: the scan's unit of work, one request's, on its thread. */
#define SEGMENT_SIZE (UINT64_C (64) * 1024 * 1024)
#define MAX_SEGMENTS 65536

static const uint8_t zeros[PIECE_SIZE];

/* nbdkit -D blkhash.bmap_max_ranges=N: a lower limit on ranges (tests). */
NBDKIT_DLL_PUBLIC int blkhash_debug_bmap_max_ranges;

/* One segment's scan, by the thread that claimed it. */
struct scan {
  struct blkhash_bmap_view *v;
  uint64_t pos, end;            /* [start, pos) scanned, up to end */
  bool done;                    /* stopped: too many ranges */
  struct blk_ctx *ctx;
  bool open;                    /* a range [first, last] is being hashed */
  uint64_t first, last;
  uint64_t gap;                 /* zero blocks after last, not hashed */
  uint64_t data_blocks, kept_blocks;    /* mapped: data, zeros kept */
  struct blk_bmap_range *ranges;
  size_t nranges, cap;
  uint64_t mapped;
  uint8_t *buf;
};

/* A segment of the image: scanned by one request, apart from others. */
enum { SEG_TODO, SEG_BUSY, SEG_DONE };
struct seg {
  int state;
  struct blk_bmap_range *ranges;
  size_t nranges;
  uint64_t mapped;
};

struct blkhash_bmap_view {
  struct blk_header h;
  uint8_t header[BLK_VIEW_HEADER_SIZE];
  struct blk_digest d;
  uint64_t table, entries;      /* the table's offset and entries */
  uint64_t max_ranges;          /* entries, or fewer (-D) */
  const char *name;             /* the export's, for messages */
  uint64_t seg_size, nsegs;
  pthread_mutex_t lock;
  pthread_cond_t changed;       /* a segment is no longer busy */
  struct seg *segs;
  uint64_t gen;                 /* a void run starts the next */
  bool stamped;
  uint64_t stamp;               /* writes before the run began */
  uint64_t total;               /* ranges so far, every segment's */
  bool too_many;
  uint64_t stopped_at;
  /* All segments done: their ranges, in order, and the summary. */
  struct blk_bmap_range *flat;
  struct blk_bmap_summary sum;
  bool assembled;
};

static int
digest_failed (int *err)
{
  blkhash_error ("blkhash: bmap: sha256 failed");
  *err = EIO;
  return -1;
}

/* Close the open range: its digest, into the segment's list. */
static int
range_close (struct scan *r, int *err)
{
  struct blkhash_bmap_view *v = r->v;
  struct blk_bmap_range *e;
  bool over;

  if (!r->open)
    return 0;
  r->open = false;
  r->gap = 0;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&v->lock);
    over = v->too_many || v->total >= v->max_ranges;
    if (over && !v->too_many) {
      /* Too fragmented: the summary says so, and where. */
      v->too_many = true;
      v->stopped_at = r->first * BS;
    }
    else if (over)
      v->stopped_at = MIN (v->stopped_at, r->first * BS);
    else
      v->total++;
  }
  if (over) {
    r->done = true;
    return 0;
  }
  if (r->nranges == r->cap) {
    const size_t cap = r->cap ? r->cap * 2 : 64;
    e = realloc (r->ranges, cap * sizeof *e);
    if (e == NULL) {
      blkhash_error ("blkhash: bmap: out of memory for %zu ranges", cap);
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
  r->mapped += r->last - r->first + 1;
  return 0;
}

/* n blocks known to read as zeros follow. */
static int
zero_blocks (struct scan *r, uint64_t n, int *err)
{
  if (!r->open)
    return 0;
  r->gap += n;
  return r->gap > MAX_KEPT_GAP ? range_close (r, err) : 0;
}

/* n blocks of data from block b, len bytes at buf (the last block may
 * be short: the image's end).
 */
static int
data_blocks (struct scan *r, uint64_t b, uint64_t n, const uint8_t *buf,
             size_t len, int *err)
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
    else if (range_close (r, err) == -1)
      return -1;
  }
  if (r->done)
    return 0;
  if (!r->open) {
    if (blk_ctx_init (r->ctx, &r->v->d) == -1)
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
read_data (nbdkit_next *next, struct scan *r, uint64_t off, uint64_t end,
           uint32_t most, int *err)
{
  while (off < end && !r->done) {
    const uint32_t len = MIN (end - off, (uint64_t) most);
    size_t i = 0;

    if (next->pread (next, r->buf, len, off, 0, err) == -1) {
      errno = *err;
      blkhash_error ("blkhash: bmap: reading %" PRIu32 " bytes at %" PRIu64
                     " failed: %m", len, off);
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
      if ((zero ? zero_blocks (r, n, err)
           : data_blocks (r, (off + i) / BS, n, r->buf + i, j - i,
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
scan_window (nbdkit_next *next, struct scan *r, struct nbdkit_extents *exts,
             uint64_t wend, uint32_t most, int *err)
{
  const uint64_t size = r->v->h.image_size;
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
      if (read_data (next, r, r->pos, bs, most, err) == -1 ||
          (!r->done && zero_blocks (r, (be - bs + BS - 1) / BS, err) == -1))
        return -1;
      if (!r->done)
        r->pos = be;
    }
    in_run = zero;
    zs = e.offset;
    ze = e.offset + e.length;
  }
  if (!r->done && read_data (next, r, r->pos, wend, most, err) == -1)
    return -1;
  if (!r->done)
    r->pos = wend;
  return 0;
}

/* Scan one segment [r->pos, r->end): its ranges in r. */
static int
scan_segment (nbdkit_next *next, struct scan *r, int *err)
{
  const bool extents = blkhash_extents_usable (next);
  uint32_t most = blkhash_read_most (next, PIECE_SIZE) / BS * BS;

  most = MAX (most, (uint32_t) BS);
  if ((r->ctx = blk_ctx_new ()) == NULL ||
      (r->buf = malloc (PIECE_SIZE)) == NULL) {
    blkhash_error ("blkhash: out of memory");
    *err = ENOMEM;
    return -1;
  }
  while (r->pos < r->end && !r->done) {
    const uint64_t wend = MIN (r->end, r->pos + EXTENTS_WINDOW);
    struct nbdkit_extents *exts = NULL;
    int ret;

    if (extents &&
        (exts = nbdkit_extents_full (next, wend - r->pos, r->pos, 0,
                                     err)) == NULL)
      return -1;
    ret = scan_window (next, r, exts, wend, most, err);
    if (exts)
      nbdkit_extents_free (exts);
    if (ret == -1)
      return -1;
  }
  return range_close (r, err);
}

/* The run voided: every segment to scan again (a busy one's result is
 * dropped when it ends, by its generation).  v->lock held.
 */
static void
run_reset (struct blkhash_bmap_view *v)
{
  for (uint64_t i = 0; i < v->nsegs; i++) {
    free (v->segs[i].ranges);
    v->segs[i].ranges = NULL;
    v->segs[i].nranges = 0;
    v->segs[i].mapped = 0;
    if (v->segs[i].state == SEG_DONE)
      v->segs[i].state = SEG_TODO;
  }
  free (v->flat);
  v->flat = NULL;
  v->assembled = false;
  v->gen++;
  v->stamped = false;
  v->total = 0;
  v->too_many = false;
  v->stopped_at = 0;
}

/* Scan segments [a, b), each by the first request that needs it (one
 * that another is scanning is waited for): requests on other segments
 * run on other threads at once.  Written through the filter while
 * scanned: the run is void, EIO.
 */
static int
view_scan (nbdkit_next *next, struct blkhash_bmap_view *v, uint64_t a,
           uint64_t b, int *err)
{
  for (uint64_t i = a; i < b; i++) {
    struct scan r = { .v = v };
    uint64_t gen;
    int ret;

    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&v->lock);
      while (v->segs[i].state == SEG_BUSY)
        pthread_cond_wait (&v->changed, &v->lock);
      if (v->segs[i].state == SEG_DONE)
        continue;
      if (!v->stamped) {
        blkhash_writes_stamp (&v->stamp);
        v->stamped = true;
      }
      v->segs[i].state = SEG_BUSY;
      gen = v->gen;
    }
    r.pos = i * v->seg_size;
    r.end = MIN (r.pos + v->seg_size, v->h.image_size);
    ret = scan_segment (next, &r, err);
    blk_ctx_free (r.ctx);
    free (r.buf);
    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&v->lock);
      v->segs[i].state = SEG_TODO;
      if (ret == 0 && gen == v->gen && blkhash_writes_since (v->stamp)) {
        blkhash_error ("blkhash: export '%s' was written while its bmap was "
                       "computed: ask again", v->name);
        run_reset (v);
        *err = EIO;
        ret = -1;
      }
      if (ret == 0 && gen == v->gen) {
        v->segs[i] = (struct seg) {
          .state = SEG_DONE, .ranges = r.ranges, .nranges = r.nranges,
          .mapped = r.mapped,
        };
        r.ranges = NULL;
      }
      else if (ret == 0) {
        /* Voided meanwhile: scanned again by whoever needs it. */
        blkhash_error ("blkhash: export '%s' was written while its bmap was "
                       "computed: ask again", v->name);
        *err = EIO;
        ret = -1;
      }
      pthread_cond_broadcast (&v->changed);
    }
    free (r.ranges);
    if (ret == -1)
      return -1;
  }
  return 0;
}

/* Every segment scanned, and their ranges in one table.  v->lock not
 * held.
 */
static int
view_finish (nbdkit_next *next, struct blkhash_bmap_view *v, int *err)
{
  uint64_t k = 0;

  if (view_scan (next, v, 0, v->nsegs, err) == -1)
    return -1;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&v->lock);
  if (v->assembled)
    return 0;
  if (v->stamped && blkhash_writes_since (v->stamp)) {
    blkhash_error ("blkhash: export '%s' was written while its bmap was "
                   "computed: ask again", v->name);
    run_reset (v);
    *err = EIO;
    return -1;
  }
  for (uint64_t i = 0; i < v->nsegs; i++)
    if (v->segs[i].state != SEG_DONE) {
      /* Voided by a write since: this request is stale. */
      blkhash_error ("blkhash: export '%s' was written while its bmap was "
                     "computed: ask again", v->name);
      *err = EIO;
      return -1;
    }
  memset (&v->sum, 0, sizeof v->sum);
  v->sum.max_ranges = v->max_ranges;
  if (v->too_many) {
    v->sum.status = BLK_BMAP_TOO_MANY;
    v->sum.stopped_at = v->stopped_at;
    v->assembled = true;
    return 0;
  }
  if (v->total && (v->flat = malloc (v->total * sizeof *v->flat)) == NULL) {
    blkhash_error ("blkhash: bmap: out of memory for %" PRIu64 " ranges",
                   v->total);
    *err = ENOMEM;
    return -1;
  }
  for (uint64_t i = 0; i < v->nsegs; i++) {
    memcpy (v->flat + k, v->segs[i].ranges,
            v->segs[i].nranges * sizeof *v->flat);
    k += v->segs[i].nranges;
    v->sum.mapped_blocks += v->segs[i].mapped;
  }
  v->sum.ranges = k;
  v->assembled = true;
  return 0;
}

struct blkhash_bmap_view *
blkhash_bmap_view_new (const char *name, uint64_t size, uint32_t flags,
                       const char *nonce)
{
  struct blkhash_bmap_view *v = calloc (1, sizeof *v);
  const char *msg;

  if (v == NULL) {
    blkhash_error ("calloc: %m");
    return NULL;
  }
  if ((msg = blk_digest_init (&v->d, BLK_BMAP_DIGEST)) != NULL) {
    blkhash_error ("blkhash: export '%s" BLK_BMAP_MARKER "': %s", name, msg);
    free (v);
    return NULL;
  }
  /* Segments of 64 MiB, larger for images over 4 TiB (MAX_SEGMENTS). */
  v->seg_size = MAX (SEGMENT_SIZE, (size / MAX_SEGMENTS + BLK_PLAIN_SPAN_SIZE
                                    - 1) / BLK_PLAIN_SPAN_SIZE
                     * BLK_PLAIN_SPAN_SIZE);
  v->nsegs = (size + v->seg_size - 1) / v->seg_size;
  if (v->nsegs && (v->segs = calloc (v->nsegs, sizeof *v->segs)) == NULL) {
    blkhash_error ("calloc: %m");
    blk_digest_free (&v->d);
    free (v);
    return NULL;
  }
  pthread_mutex_init (&v->lock, NULL);
  pthread_cond_init (&v->changed, NULL);
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
  for (uint64_t i = 0; i < v->nsegs; i++)
    free (v->segs[i].ranges);
  free (v->segs);
  free (v->flat);
  blk_digest_free (&v->d);
  pthread_cond_destroy (&v->changed);
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

  memset (buf, 0, count);
  if (offset < BLK_VIEW_HEADER_SIZE) {
    const uint64_t to = MIN (end, (uint64_t) BLK_VIEW_HEADER_SIZE);
    memcpy (dst, v->header + offset, to - offset);
  }
  if (end <= BLK_BMAP_SUMMARY_OFFSET)
    return 0;
  /* The summary and the table: every segment scanned first. */
  if (((offset < sum_end && end > BLK_BMAP_SUMMARY_OFFSET) ||
       end > v->table) && view_finish (next, v, err) == -1)
    return -1;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&v->lock);
  if (offset < sum_end && end > BLK_BMAP_SUMMARY_OFFSET) {
    uint8_t s[BLK_BMAP_SUMMARY_SIZE];
    const uint64_t from = MAX (offset, (uint64_t) BLK_BMAP_SUMMARY_OFFSET);
    const uint64_t to = MIN (end, sum_end);
    blk_bmap_summary_encode (&v->sum, s);
    memcpy (dst + (from - offset), s + (from - BLK_BMAP_SUMMARY_OFFSET),
            to - from);
  }
  if (end > BLK_VIEW_DIGESTS_OFFSET && offset < v->table) {
    /* Span i is scanned once its segment is. */
    const uint64_t from = MAX (offset, (uint64_t) BLK_VIEW_DIGESTS_OFFSET);
    const uint64_t to = MIN (end, BLK_VIEW_DIGESTS_OFFSET +
                             v->h.block_count);
    for (uint64_t i = from - BLK_VIEW_DIGESTS_OFFSET;
         i + BLK_VIEW_DIGESTS_OFFSET < to; i++)
      dst[BLK_VIEW_DIGESTS_OFFSET + i - offset] =
        v->segs[i * BLK_PLAIN_SPAN_SIZE / v->seg_size].state == SEG_DONE;
  }
  if (end > v->table && v->assembled && v->flat) {
    const uint64_t from = MAX (offset, v->table);
    for (uint64_t k = (from - v->table) / BLK_BMAP_ENTRY_SIZE;
         k < v->sum.ranges; k++) {
      uint8_t e[BLK_BMAP_ENTRY_SIZE];
      const uint64_t at = v->table + k * BLK_BMAP_ENTRY_SIZE;
      if (at >= end)
        break;
      blk_bmap_range_encode (&v->flat[k], e);
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
  const uint64_t end = MIN (offset + count,
                            BLK_VIEW_DIGESTS_OFFSET + v->h.block_count);
  uint64_t a, b;

  if (end <= BLK_VIEW_DIGESTS_OFFSET || offset >= end)
    return 0;
  /* Spans [a, b) of 1 MiB: the segments that hold them. */
  a = MAX (offset, (uint64_t) BLK_VIEW_DIGESTS_OFFSET) -
    BLK_VIEW_DIGESTS_OFFSET;
  b = end - BLK_VIEW_DIGESTS_OFFSET;
  return view_scan (next, v, a * BLK_PLAIN_SPAN_SIZE / v->seg_size,
                    (b * BLK_PLAIN_SPAN_SIZE + v->seg_size - 1) / v->seg_size,
                    err);
}
