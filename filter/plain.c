/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: plain digests of the whole content (what
 * sha256sum, md5sum... print for the bytes the export serves), and the
 * read-only NAME@digest:DIGEST view that serves them.
 *
 *   0     header (BLKPLAN1, sizes, digest name), 4096 bytes
 *   4096  the digest of the whole content, zero padded to 4096 bytes
 *   8192  one byte per 1 MiB span of the image: 1 once it is hashed
 *
 * A plain digest is a chain: it can only be computed in order, on one
 * thread, and nothing of it can be kept per block.  So the state is
 * the connection's own (the view is not multi-conn), and the client
 * drives it in steps: CACHE of span bytes hashes on through the end of
 * the last span asked for, and reading the digest hashes whatever is
 * left.  Holes the plugin's extents report as zeros are hashed as
 * zeros without reading; data is read a piece at a time, the next
 * piece by a reader thread (readahead.c) while this one hashes, when
 * the plugin takes parallel requests.
 *
 * A write through the filter while a digest is computed voids it:
 * reading the digest then fails with EIO and the next request starts
 * over (writes from outside nbdkit cannot be seen, as for the blkhash
 * view).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "filter.h"
#include "minmax.h"
#include "viewname.h"

/* One plugin read, and one digest update of zeros. */
#define PIECE_SIZE (1024 * 1024)
/* Extents asked for at a time. */
#define EXTENTS_WINDOW (UINT64_C (64) * 1024 * 1024)
/* A zero run shorter than this is read rather than split out. */
#define MIN_ZERO_RUN (256 * 1024)

static uint8_t zeros[PIECE_SIZE];

struct blkhash_plain {
  const struct blk_digest *d;
  uint64_t size;
  uint64_t pos;                 /* [0, pos) is hashed */
  uint32_t piece;               /* the largest read, PIECE_SIZE or less */
  bool written;                 /* what is left to hash was written: no
                                   extents to ask for */
  struct blk_ctx *ctx;
  uint8_t *buf[2];              /* PIECE_SIZE each, from the first read */
  bool done;
  uint8_t digest[BLK_DIGEST_MAX];
};

struct blkhash_plain *
blkhash_plain_new (const struct blk_digest *d, uint64_t size)
{
  struct blkhash_plain *p = calloc (1, sizeof *p);

  if (p == NULL || (p->ctx = blk_ctx_new ()) == NULL) {
    blkhash_error ("blkhash: out of memory");
    free (p);
    return NULL;
  }
  if (blk_ctx_init (p->ctx, d) == -1) {
    blkhash_error ("blkhash: %s failed", d->name);
    blkhash_plain_free (p);
    return NULL;
  }
  p->d = d;
  p->size = size;
  return p;
}

void
blkhash_plain_free (struct blkhash_plain *p)
{
  if (p == NULL)
    return;
  blk_ctx_free (p->ctx);
  free (p->buf[0]);
  free (p->buf[1]);
  free (p);
}

uint64_t
blkhash_plain_pos (const struct blkhash_plain *p)
{
  return p->pos;
}

static int
plain_update (struct blkhash_plain *p, const void *buf, size_t len, int *err)
{
  if (blk_ctx_update (p->ctx, buf, len) == -1) {
    blkhash_error ("blkhash: %s failed", p->d->name);
    *err = EIO;
    return -1;
  }
  p->pos += len;
  return 0;
}

int
blkhash_plain_update (struct blkhash_plain *p, const void *buf, size_t len,
                      int *err)
{
  return plain_update (p, buf, MIN (len, p->size - p->pos), err);
}

int
blkhash_plain_zeros (struct blkhash_plain *p, uint64_t len, int *err)
{
  len = MIN (len, p->size - p->pos);
  while (len) {
    const size_t n = MIN (len, (uint64_t) PIECE_SIZE);
    if (plain_update (p, zeros, n, err) == -1 || blkhash_should_stop (err))
      return -1;
    len -= n;
  }
  return 0;
}

/* A piece of [off, end): zeros to hash without reading, or data. */
struct piece {
  uint64_t off;
  uint32_t len;
  bool zero;
};

/* The piece at off, from the extents of a window ending at end (NULL:
 * the plugin has none, all data).
 */
static struct piece
plain_piece (struct nbdkit_extents *exts, uint64_t off, uint64_t end,
             uint32_t most)
{
  struct piece pc = { .off = off };
  uint64_t zero_end = off;

  for (size_t i = 0; exts && i < nbdkit_extents_count (exts); i++) {
    const struct nbdkit_extent e = nbdkit_get_extent (exts, i);
    if (e.offset + e.length <= zero_end)
      continue;
    if (e.offset > zero_end || !(e.type & NBDKIT_EXTENT_ZERO))
      break;
    zero_end = e.offset + e.length;
  }
  zero_end = MIN (zero_end, end);
  if (zero_end - off >= MIN_ZERO_RUN || (zero_end == end && zero_end > off)) {
    pc.zero = true;
    pc.len = MIN (zero_end - off, (uint64_t) PIECE_SIZE);
  }
  else
    pc.len = MIN (end - off, (uint64_t) most);
  return pc;
}

static int
plain_read (nbdkit_next *next, void *buf, const struct piece *pc, int *err)
{
  if (next->pread (next, buf, pc->len, pc->off, 0, err) == -1) {
    errno = *err;
    blkhash_error ("blkhash: reading %" PRIu32 " bytes at %" PRIu64
                   " failed: %m", pc->len, pc->off);
    return -1;
  }
  atomic_fetch_add (&blkhash_stats.read_bytes, pc->len);
  return 0;
}

/* Hash [p->pos, end) of the window whose extents are exts. */
static int
plain_window (nbdkit_next *next, struct blkhash_plain *p,
              struct nbdkit_extents *exts, uint64_t end, int *err)
{
  struct blkhash_reader *rd = NULL;
  bool ahead = false;           /* buf[1] holds, or rd reads, pc2 */
  struct piece pc2 = { 0 };
  int r = 0;

  while (r == 0 && p->pos < end) {
    const struct piece pc = plain_piece (exts, p->pos, end, p->piece);
    /* Zeros too: a sparse terabyte is minutes of hashing. */
    if (pc.zero) {
      r = plain_update (p, zeros, pc.len, err);
      if (r == 0 && blkhash_should_stop (err))
        r = -1;
      continue;
    }
    if (ahead && pc2.off == pc.off) {
      uint8_t *t = p->buf[0];
      if (rd && blkhash_reader_finish (rd, err) == -1)
        r = -1;
      rd = NULL;
      ahead = false;
      p->buf[0] = p->buf[1];
      p->buf[1] = t;
    }
    else if (plain_read (next, p->buf[0], &pc, err) == -1)
      r = -1;
    if (r == -1)
      break;
    /* The next piece is read while this one is hashed. */
    if (pc.off + pc.len < end && blkhash_plugin_parallel) {
      pc2 = plain_piece (exts, pc.off + pc.len, end, p->piece);
      if (!pc2.zero && (rd = blkhash_reader_get ()) != NULL) {
        blkhash_reader_start (rd, next, p->buf[1], pc2.len, pc2.off);
        ahead = true;
        atomic_fetch_add (&blkhash_stats.paired_reads, 1);
      }
    }
    r = plain_update (p, p->buf[0], pc.len, err);
    if (r == 0 && blkhash_should_stop (err))
      r = -1;
  }
  if (rd) {
    int e2;
    blkhash_reader_finish (rd, &e2);
  }
  return r;
}

int
blkhash_plain_advance (nbdkit_next *next, struct blkhash_plain *p,
                       uint64_t end, int *err)
{
  bool extents;

  end = MIN (end, p->size);
  if (p->pos >= end)
    return 0;                   /* next may be NULL then */
  extents = !p->written && blkhash_extents_usable (next);
  p->piece = blkhash_read_most (next, PIECE_SIZE);
  for (int i = 0; i < 2; i++)
    if (p->buf[i] == NULL && (p->buf[i] = malloc (PIECE_SIZE)) == NULL) {
      blkhash_error ("blkhash: out of memory");
      *err = ENOMEM;
      return -1;
    }
  while (p->pos < end) {
    const uint64_t wend = MIN (end, p->pos + EXTENTS_WINDOW);
    struct nbdkit_extents *exts = NULL;
    int r;

    if (extents &&
        (exts = nbdkit_extents_full (next, wend - p->pos, p->pos, 0,
                                     err)) == NULL)
      return -1;
    r = plain_window (next, p, exts, wend, err);
    if (exts)
      nbdkit_extents_free (exts);
    if (r == -1)
      return -1;
  }
  return 0;
}

int
blkhash_plain_final (nbdkit_next *next, struct blkhash_plain *p,
                     uint8_t *out, int *err)
{
  if (!p->done) {
    if (blkhash_plain_advance (next, p, p->size, err) == -1)
      return -1;
    if (blk_ctx_final (p->ctx, p->digest) == -1) {
      blkhash_error ("blkhash: %s failed", p->d->name);
      *err = EIO;
      return -1;
    }
    p->done = true;
  }
  memcpy (out, p->digest, p->d->len);
  return 0;
}

/* The view: one connection's run, started over after a write voids
 * it.
 */
struct blkhash_plain_view {
  struct blk_header h;
  uint8_t header[BLK_VIEW_HEADER_SIZE];
  struct blk_digest d;
  pthread_mutex_t lock;         /* the run is a chain: one request at a
                                   time works on it, plugin I/O and all */
  struct blkhash_plain *run;
  uint64_t stamp;               /* writes before the run began */
  const char *name;             /* the export's, for messages */
};

struct blkhash_plain_view *
blkhash_plain_view_new (const char *name, const char *digest, uint64_t size,
                        uint32_t flags, const char *nonce)
{
  struct blkhash_plain_view *v = calloc (1, sizeof *v);
  const char *msg;

  if (v == NULL) {
    blkhash_error ("calloc: %m");
    return NULL;
  }
  if ((msg = blk_digest_init (&v->d, digest)) != NULL) {
    blkhash_error ("blkhash: export '%s" BLK_PLAIN_MARKER ":%s': %s",
                   name, digest, msg);
    free (v);
    return NULL;
  }
  pthread_mutex_init (&v->lock, NULL);
  v->name = name;
  blk_plain_header_init (&v->h, size, v->d.name, v->d.len);
  v->h.flags = flags;
  if (nonce)
    snprintf (v->h.nonce, sizeof v->h.nonce, "%s", nonce);
  blk_header_encode (&v->h, v->header);
  return v;
}

void
blkhash_plain_view_free (struct blkhash_plain_view *v)
{
  if (v == NULL)
    return;
  blkhash_plain_free (v->run);
  blk_digest_free (&v->d);
  pthread_mutex_destroy (&v->lock);
  free (v);
}

int64_t
blkhash_plain_view_size (const struct blkhash_plain_view *v)
{
  return blk_view_size (&v->h);
}

const char *
blkhash_plain_view_digest (const struct blkhash_plain_view *v)
{
  return v->d.name;
}

/* The run, started if there is none; v->lock held. */
static struct blkhash_plain *
view_run (struct blkhash_plain_view *v, int *err)
{
  if (v->run == NULL) {
    blkhash_writes_stamp (&v->stamp);
    v->run = blkhash_plain_new (&v->d, v->h.image_size);
    if (v->run == NULL)
      *err = ENOMEM;
  }
  return v->run;
}

/* A write through the filter since the run began voids it. */
static int
view_check_writes (struct blkhash_plain_view *v, int *err)
{
  if (!blkhash_writes_since (v->stamp))
    return 0;
  blkhash_error ("blkhash: export '%s' was written while its %s was "
                 "computed: ask again", v->name, v->d.name);
  blkhash_plain_free (v->run);
  v->run = NULL;
  *err = EIO;
  return -1;
}

/* Hash through the end of span byte (relative to 8192) end - 1. */
static int
view_advance (nbdkit_next *next, struct blkhash_plain_view *v, uint64_t end,
              int *err)
{
  struct blkhash_plain *run = view_run (v, err);

  if (run == NULL)
    return -1;
  if (blkhash_plain_advance (next, run, end * BLK_PLAIN_SPAN_SIZE,
                             err) == -1 ||
      view_check_writes (v, err) == -1)
    return -1;
  return 0;
}

int
blkhash_plain_view_pread (nbdkit_next *next, struct blkhash_plain_view *v,
                          void *buf, uint32_t count, uint64_t offset,
                          int *err)
{
  uint8_t *dst = buf;
  const uint64_t end = offset + count;
  const uint64_t root_end = BLK_VIEW_ROOT_OFFSET + v->d.len;

  memset (buf, 0, count);
  if (offset < BLK_VIEW_HEADER_SIZE) {
    const uint64_t to = MIN (end, (uint64_t) BLK_VIEW_HEADER_SIZE);
    memcpy (dst, v->header + offset, to - offset);
  }
  if (offset >= root_end && end <= BLK_VIEW_DIGESTS_OFFSET)
    return 0;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&v->lock);
  if (offset < root_end && end > BLK_VIEW_ROOT_OFFSET) {
    uint8_t digest[BLK_DIGEST_MAX];
    const uint64_t from = MAX (offset, (uint64_t) BLK_VIEW_ROOT_OFFSET);
    const uint64_t to = MIN (end, root_end);
    struct blkhash_plain *run = view_run (v, err);

    if (run == NULL || blkhash_plain_final (next, run, digest, err) == -1 ||
        view_check_writes (v, err) == -1)
      return -1;
    memcpy (dst + (from - offset), digest + (from - BLK_VIEW_ROOT_OFFSET),
            to - from);
  }
  if (end > BLK_VIEW_DIGESTS_OFFSET) {
    /* Span i is hashed once the run is past its end (or the image's). */
    const uint64_t pos = v->run ? blkhash_plain_pos (v->run) : 0;
    const uint64_t from = MAX (offset, (uint64_t) BLK_VIEW_DIGESTS_OFFSET);
    for (uint64_t i = from - BLK_VIEW_DIGESTS_OFFSET;
         i < end - BLK_VIEW_DIGESTS_OFFSET; i++) {
      const uint64_t span_end = MIN ((i + 1) * BLK_PLAIN_SPAN_SIZE,
                                     v->h.image_size);
      dst[BLK_VIEW_DIGESTS_OFFSET + i - offset] = pos >= span_end;
    }
  }
  return 0;
}

int
blkhash_plain_view_cache (nbdkit_next *next, struct blkhash_plain_view *v,
                          uint32_t count, uint64_t offset, int *err)
{
  const uint64_t end = offset + count;

  if (end <= BLK_VIEW_DIGESTS_OFFSET)
    return 0;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&v->lock);
  return view_advance (next, v, end - BLK_VIEW_DIGESTS_OFFSET, err);
}

/* A plain digest that follows an upload (blkhash-expect): the writers
 * take turns hashing, on their own threads, the prefix of the image
 * that is written whole, reading it back from the plugin a step at a
 * time, so that at the flush only the rest is left.  A write behind
 * where the digest has gone (or is going) voids it: the next step
 * starts over from 0.
 */
#define FOLLOW_STEP (UINT64_C (32) * 1024 * 1024)

struct blkhash_plain_follow {
  const struct blk_digest *d;
  uint64_t size;
  pthread_mutex_t lock;
  pthread_cond_t idle;          /* busy became false */
  struct blkhash_plain *run;
  uint64_t follow_to;           /* the run has gone, or is going, here */
  bool busy;                    /* a thread advances or finishes it */
  bool void_run;                /* a write behind follow_to */
};

struct blkhash_plain_follow *
blkhash_plain_follow_new (const struct blk_digest *d, uint64_t size)
{
  struct blkhash_plain_follow *f = calloc (1, sizeof *f);

  if (f == NULL) {
    blkhash_error ("blkhash: out of memory");
    return NULL;
  }
  f->d = d;
  f->size = size;
  pthread_mutex_init (&f->lock, NULL);
  pthread_cond_init (&f->idle, NULL);
  return f;
}

void
blkhash_plain_follow_free (struct blkhash_plain_follow *f)
{
  if (f == NULL)
    return;
  blkhash_plain_free (f->run);
  pthread_cond_destroy (&f->idle);
  pthread_mutex_destroy (&f->lock);
  free (f);
}

void
blkhash_plain_follow_written (struct blkhash_plain_follow *f,
                              uint64_t offset)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&f->lock);
  if (offset < f->follow_to)
    f->void_run = true;
}

/* Take the run for this thread: wait (or with wait false, give up)
 * while another has it, start it over if it is void.  f->lock held;
 * NULL if out of memory or given up.
 */
static struct blkhash_plain *
follow_take (struct blkhash_plain_follow *f, bool wait)
{
  while (f->busy) {
    if (!wait)
      return NULL;
    pthread_cond_wait (&f->idle, &f->lock);
  }
  if (f->void_run || f->run == NULL) {
    blkhash_plain_free (f->run);
    f->run = blkhash_plain_new (f->d, f->size);
    f->follow_to = 0;
    f->void_run = false;
  }
  if (f->run)
    f->busy = true;
  return f->run;
}

static void
follow_give_back (struct blkhash_plain_follow *f, bool failed)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&f->lock);
  f->busy = false;
  if (failed)
    f->void_run = true;
  pthread_cond_broadcast (&f->idle);
}

void
blkhash_plain_follow_step (nbdkit_next *next, struct blkhash_plain_follow *f,
                           uint64_t written_to)
{
  struct blkhash_plain *run;
  uint64_t to;
  int err = 0, r;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&f->lock);
    if (f->busy || (!f->void_run && written_to <= f->follow_to))
      return;
    if ((run = follow_take (f, false)) == NULL)
      return;
    to = MIN (written_to, blkhash_plain_pos (run) + FOLLOW_STEP);
    if (to <= blkhash_plain_pos (run)) {
      f->busy = false;
      pthread_cond_broadcast (&f->idle);
      return;
    }
    f->follow_to = to;
  }
  /* Written whole: data (its zeros read as zeros). */
  run->written = true;
  r = blkhash_plain_advance (next, run, to, &err);
  run->written = false;
  if (r == -1)
    nbdkit_debug ("blkhash: following the upload failed: the flush reads "
                  "it all");
  follow_give_back (f, r == -1);
}

int
blkhash_plain_follow_final (nbdkit_next *next, struct blkhash_plain_follow *f,
                            uint8_t *out, int *err)
{
  struct blkhash_plain *run;
  int r;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&f->lock);
    if ((run = follow_take (f, true)) == NULL) {
      blkhash_error ("blkhash: out of memory");
      *err = ENOMEM;
      return -1;
    }
    /* Any write from now on is behind it. */
    f->follow_to = f->size + 1;
    nbdkit_debug ("blkhash: the plain digest followed the upload to %"
                  PRIu64 " of %" PRIu64 " bytes", blkhash_plain_pos (run),
                  f->size);
  }
  r = blkhash_plain_final (next, run, out, err);
  follow_give_back (f, r == -1);
  return r;
}

struct plain_run {
  nbdkit_next *next;
  struct blkhash_plain *p;              /* or f */
  struct blkhash_plain_follow *f;
  uint8_t *out;
  int err, r;
};

static void *
plain_final_run (void *opaque)
{
  struct plain_run *pr = opaque;

  blkhash_exit_grace ();
  pr->r = pr->f ? blkhash_plain_follow_final (pr->next, pr->f, pr->out,
                                              &pr->err)
    : blkhash_plain_final (pr->next, pr->p, pr->out, &pr->err);
  return NULL;
}

/* The plain digest on a thread of its own while the caller waits:
 * off nbdkit's threads the client that is leaving does not stop it,
 * only nbdkit's exit.
 */
int
blkhash_plain_final_detached (nbdkit_next *next, struct blkhash_plain *p,
                              struct blkhash_plain_follow *f, uint8_t *out,
                              int *err)
{
  struct plain_run pr = { .next = next, .p = p, .f = f, .out = out };
  pthread_t thread;
  int r;

  if ((r = pthread_create (&thread, NULL, plain_final_run, &pr)) != 0) {
    errno = r;
    blkhash_error ("blkhash: pthread_create: %m");
    *err = r;
    return -1;
  }
  pthread_join (thread, NULL);
  if (pr.r == -1)
    *err = pr.err;
  return pr.r;
}
