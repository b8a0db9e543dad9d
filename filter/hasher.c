/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: block digests computed through the plugin.
 *
 * Holes come from extents without reading; data is read in large
 * requests into a per-thread buffer (with a reader filling a second
 * one on slow storage, readahead.c), zero blocks are detected before
 * hashing, and only the blocks still unknown are computed.  The
 * whole-root computation that drives this on many threads is root.c's.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "filter.h"
#include "holes.h"
#include "minmax.h"

/* BLKHASH_READ_SIZE, the most one plugin read asks for, is small
 * enough to stay in the CPU cache between the copy and the hash: on the
 * reference machine 64K to 256K reads hash 2 GiB in 0.81 s and 2M reads
 * in 1.0 s.  Reads cover whole blocks (read_size); larger blocks are
 * read in pieces of this size that stop at the block's end.
 */
#define READ_SIZE BLKHASH_READ_SIZE
/* Extents are queried per window of at most this many bytes. */
#define EXTENTS_WINDOW (UINT64_C (1) << 30)

struct worker {
  struct blk_ctx *ctx;
  uint8_t *buf;
  size_t size;
};

static pthread_key_t worker_key;

static void
worker_free (void *opaque)
{
  struct worker *w = opaque;

  if (w) {
    blk_ctx_free (w->ctx);
    free (w->buf);
    free (w);
  }
}

int
blkhash_hasher_init (void)
{
  int r = pthread_key_create (&worker_key, worker_free);

  if (r != 0) {
    errno = r;
    blkhash_error ("pthread_key_create: %m");
    return -1;
  }
  return 0;
}

void
blkhash_hasher_fini (void)
{
  worker_free (pthread_getspecific (worker_key));
  pthread_setspecific (worker_key, NULL);
  pthread_key_delete (worker_key);
}

/* Per-thread hashing context and read buffer of at least size bytes. */
static struct worker *
get_worker (size_t size)
{
  struct worker *w = pthread_getspecific (worker_key);

  if (w == NULL) {
    w = calloc (1, sizeof *w);
    if (w == NULL || (w->ctx = blk_ctx_new ()) == NULL) {
      free (w);
      blkhash_error ("blkhash: out of memory");
      return NULL;
    }
    pthread_setspecific (worker_key, w);
  }
  if (w->size < size) {
    void *p;
    if (posix_memalign (&p, 4096, size) != 0) {
      blkhash_error ("blkhash: cannot allocate a %zu byte buffer", size);
      return NULL;
    }
    free (w->buf);
    w->buf = p;
    w->size = size;
  }
  return w;
}

struct blk_ctx *
blkhash_thread_ctx (void)
{
  struct worker *w = get_worker (0);

  return w ? w->ctx : NULL;
}

/* Set hole[i] for the blocks first+i of [first, first+count) that lie
 * wholly inside runs of extents reading as zero.
 */
static int
find_holes (nbdkit_next *next, struct blk_table *t, uint64_t first,
            uint64_t count, bool *hole, int *err)
{
  const uint32_t bs = blk_table_params (t)->block_size;
  const uint64_t size = blk_table_size (t);
  const uint64_t end = MIN ((first + count) * bs, size);
  struct blk_holes h;

  blk_holes_begin_marks (&h, bs, size, first, count, hole);
  for (uint64_t off = first * bs; off < end; ) {
    const uint64_t len = MIN (end - off, EXTENTS_WINDOW);
    struct nbdkit_extents *exts = nbdkit_extents_full (next, len, off, 0,
                                                       err);
    if (exts == NULL) {
      errno = *err;
      blkhash_error ("blkhash: the extents of %" PRIu64 " bytes at %"
                     PRIu64 " failed: %m", len, off);
      return -1;
    }
    for (size_t i = 0; i < nbdkit_extents_count (exts); i++) {
      const struct nbdkit_extent e = nbdkit_get_extent (exts, i);
      const struct blk_extent z = {
        .offset = e.offset, .length = e.length,
        .zero = e.type & NBDKIT_EXTENT_ZERO,
      };
      blk_holes_add (&h, &z);
    }
    nbdkit_extents_free (exts);
    off += len;
  }
  blk_holes_end (&h);
  return 0;
}

/* Bytes of one read: as many whole blocks as fit in READ_SIZE (192K
 * of 96K blocks), or READ_SIZE of one larger block.
 */
static uint64_t
read_size (uint32_t bs)
{
  return bs <= READ_SIZE ? READ_SIZE / bs * bs : READ_SIZE;
}

uint64_t
blkhash_read_most (nbdkit_next *next, uint64_t most)
{
  uint32_t minimum = 0, preferred = 0, maximum = 0;

  if (next->block_size (next, &minimum, &preferred, &maximum) == -1 ||
      maximum == 0 || maximum >= most)
    return most;
  if (minimum > 1)
    maximum = maximum / minimum * minimum;
  return MAX (maximum, (uint32_t) 1);
}

/* Bytes of the piece of a run that starts at off: a piece of a large
 * block stops at its end.
 */
static uint64_t
piece_len (uint64_t off, uint64_t run_end, uint32_t bs, uint64_t most)
{
  const uint64_t block_end = (off / bs + 1) * bs;

  return MIN (run_end - off, most < bs ? MIN (most, block_end - off) : most);
}

/* Hash buf, the len bytes at off, into bh; each block it ends goes to
 * out and zero.
 */
static int
hash_piece (struct blk_table *t, struct blk_block_hasher *bh,
            struct blk_ctx *ctx, uint64_t first, const uint8_t *buf,
            uint64_t off, uint64_t len, bool *zero, uint8_t *out, int *err)
{
  const struct blk_params *p = blk_table_params (t);
  const uint32_t bs = p->block_size;
  const uint64_t size = blk_table_size (t);

  blkhash_stats.read_bytes += len;
  for (uint64_t pos = 0; pos < len; ) {
    const uint64_t b = (off + pos) / bs;
    const uint64_t b_end = b * bs + blk_block_len (size, bs, b);
    const uint64_t take = MIN (len - pos, b_end - (off + pos));
    if (blk_block_update (bh, buf + pos, take) == -1)
      goto hash_failed;
    pos += take;
    if (off + pos == b_end) {
      if (blk_block_final (bh, out + (b - first) * p->digest.len,
                           &zero[b - first]) == -1)
        goto hash_failed;
      blkhash_stats.computed_blocks++;
      blk_block_begin (bh, p, ctx);
    }
  }
  return 0;

 hash_failed:
  blkhash_error ("blkhash: %s failed", p->digest.name);
  *err = EIO;
  return -1;
}

/* Read and hash the run of blocks [first+i, first+i+n), each read
 * whole blocks or part of one, never the end of one block and the
 * start of the next.  On slow storage a reader may read the next piece
 * while this thread reads and hashes the current one (readahead.c).
 */
static int
hash_run (nbdkit_next *next, struct blk_table *t, struct worker *w,
          uint64_t first, uint64_t i, uint64_t n, bool *zero, uint8_t *out,
          int *err)
{
  const struct blk_params *p = blk_table_params (t);
  const uint32_t bs = p->block_size;
  const uint64_t run_end = MIN ((first + i + n) * bs, blk_table_size (t));
  const uint64_t most = blkhash_read_most (next, read_size (bs));
  uint64_t off = (first + i) * bs;
  struct blk_block_hasher bh;
  int r = 0;

  blk_block_begin (&bh, p, w->ctx);
  while (r == 0 && off < run_end) {
    const uint64_t len = piece_len (off, run_end, bs, most);
    const uint64_t off2 = off + len;
    const uint64_t len2 =
      off2 < run_end ? piece_len (off2, run_end, bs, most) : 0;
    struct blkhash_reader *rd = NULL;
    uint8_t *ahead = NULL;
    uint64_t t0;
    int err2;

    if (len2 && blkhash_readahead_wanted () &&
        (ahead = blkhash_readahead_buffer ()) != NULL &&
        (rd = blkhash_reader_get ()) != NULL)
      blkhash_reader_start (rd, next, ahead, len2, off2);
    t0 = blkhash_now_ns ();
    r = next->pread (next, w->buf, len, off, 0, err);
    blkhash_readahead_note (blkhash_now_ns () - t0);
    /* In the errno's words: nbdkit sends EINVAL for one NBD has no
     * code for (a server gone below: ENOTCONN), and a plugin may say
     * nothing of it.
     */
    if (r == -1) {
      errno = *err;
      blkhash_error ("blkhash: reading %" PRIu64 " bytes at %" PRIu64
                     " failed: %m", len, off);
    }
    if (r == 0)
      r = hash_piece (t, &bh, w->ctx, first, w->buf, off, len, zero, out,
                      err);
    off = off2;
    if (rd == NULL)
      continue;
    /* The buffer is ours again only once the reader is done with it. */
    blkhash_stats.paired_reads++;
    if (blkhash_reader_finish (rd, &err2) == -1) {
      if (r == 0)
        *err = err2;
      r = -1;
    }
    else if (r == 0)
      r = hash_piece (t, &bh, w->ctx, first, ahead, off2, len2, zero,
                      out, err);
    off = off2 + len2;
  }
  return r;
}

/* Read and hash the blocks first+i with data[i] set, digests to out. */
static int
hash_data (nbdkit_next *next, struct blk_table *t, uint64_t first,
           uint64_t count, const bool *data, bool *zero, uint8_t *out,
           int *err)
{
  struct worker *w = get_worker (READ_SIZE);

  if (w == NULL) {
    *err = ENOMEM;
    return -1;
  }
  for (uint64_t i = 0, n; blk_next_run (data, count, &i, &n); i += n)
    if (hash_run (next, t, w, first, i, n, zero, out, err) == -1)
      return -1;
  return 0;
}

/* Store the blocks first+i with hole[i] set as reading zeros. */
static void
store_holes (struct blk_table *t, uint64_t first, uint64_t count,
             const bool *hole, uint64_t snapshot)
{
  for (uint64_t i = 0, n; blk_next_run (hole, count, &i, &n); i += n) {
    blk_table_store_zero (t, first + i, n, snapshot);
    blkhash_stats.hole_blocks += n;
  }
}

/* Digests of blocks [first, first+count) into out, computing and
 * storing those the table does not know.  out may be NULL when only
 * the table is to be filled (CACHE).
 */
int
blkhash_compute (nbdkit_next *next, struct blk_table *t, uint64_t first,
                 uint64_t count, uint8_t *out, int *err)
{
  const struct blk_params *p = blk_table_params (t);
  const size_t len = p->digest.len;
  const uint64_t size = blk_table_size (t);
  /* need: unknown blocks, then those of them to read (data). */
  CLEANUP_FREE bool *need = malloc (count * sizeof *need);
  CLEANUP_FREE bool *hole = calloc (count, sizeof *hole);
  CLEANUP_FREE bool *zero = calloc (count, sizeof *zero);
  CLEANUP_FREE uint8_t *scratch = NULL;
  bool have_data = false;
  uint64_t snapshot, unknown, i;

  if (need == NULL || hole == NULL || zero == NULL)
    goto enomem;

  unknown = blk_table_lookup (t, first, count, out, need, &snapshot);
  if (unknown == 0)
    return 0;
  nbdkit_debug ("blkhash: computing %" PRIu64 " of blocks %" PRIu64
                "..%" PRIu64, unknown, first, first + count - 1);

  if (blkhash_extents_usable (next) &&
      find_holes (next, t, first, count, hole, err) == -1)
    return -1;
  /* Known blocks are neither holes nor data. */
  for (i = 0; i < count; i++) {
    hole[i] = hole[i] && need[i];
    need[i] = need[i] && !hole[i];
    have_data |= need[i];
  }

  if (have_data) {
    if (out == NULL && (out = scratch = malloc (count * len)) == NULL)
      goto enomem;
    if (hash_data (next, t, first, count, need, zero, out, err) == -1)
      return -1;
  }

  /* Runs of holes are stored without copying digests around. */
  store_holes (t, first, count, hole, snapshot);
  if (have_data)
    blk_table_store (t, first, count, out, zero, need, snapshot);

  /* The caller's copy of the holes' digests, a short last block at its
   * real length.
   */
  for (i = 0; out != scratch && i < count; i++) {
    if (!hole[i])
      continue;
    const uint64_t b = first + i;
    struct blk_ctx *ctx = blkhash_thread_ctx ();
    if (ctx == NULL ||
        blk_zero_block_digest (p, ctx, blk_block_len (size, p->block_size, b),
                               out + i * len) == -1) {
      blkhash_error ("blkhash: %s failed", p->digest.name);
      *err = EIO;
      return -1;
    }
  }
  return 0;

 enomem:
  blkhash_error ("blkhash: out of memory");
  *err = ENOMEM;
  return -1;
}

int
blkhash_mark_holes (nbdkit_next *next, struct blk_table *t, int *err)
{
  const uint32_t bs = blk_table_params (t)->block_size;
  const uint64_t n = blk_table_blocks (t);
  /* Blocks asked about at a time: what one extents request covers. */
  const uint64_t window = MAX (EXTENTS_WINDOW / bs, (uint64_t) 1);
  CLEANUP_FREE bool *need = NULL, *hole = NULL;
  uint64_t snapshot;

  if (!blkhash_extents_usable (next))
    return 0;
  need = malloc (MIN (n, window) * sizeof *need);
  hole = malloc (MIN (n, window) * sizeof *hole);
  if (n && (need == NULL || hole == NULL)) {
    blkhash_error ("blkhash: out of memory");
    *err = ENOMEM;
    return -1;
  }
  for (uint64_t b = blk_table_next_unknown (t, 0); b < n;
       b = blk_table_next_unknown (t, b)) {
    const uint64_t count = MIN (n - b, window);

    if (blk_table_lookup (t, b, count, NULL, need, &snapshot) > 0) {
      memset (hole, 0, count * sizeof *hole);
      if (find_holes (next, t, b, count, hole, err) == -1)
        return -1;
      for (uint64_t i = 0; i < count; i++)
        hole[i] = hole[i] && need[i];
      store_holes (t, b, count, hole, snapshot);
    }
    b += count;
  }
  return 0;
}
