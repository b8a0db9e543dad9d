/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: hashing what passes through a data export.
 *
 * Full blocks read are hashed from the client's buffer; full blocks
 * written are hashed from the written buffer once the plugin accepted
 * them, and write zeroes marks full blocks zero, on NBD's contract
 * that a successful write reads back (but for plugins known to throw
 * writes away, whose writes only forget).  Every write, trim and
 * zero is bracketed on all tables of every export (exports.c), so
 * digests computed concurrently are never stored stale (see
 * lib/table.h), and takes every blkhash-file line out before the
 * plugin sees it (results.c).  Extents reading as zero mark full
 * blocks zero, where extents can be trusted (order.c).  A read or
 * extents request that leaves the table knowing every block records
 * the export's line before its reply.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "filter.h"
#include "holes.h"
#include "minmax.h"

/* Plugins known to accept writes and throw them away, by the names
 * they give themselves: null reads zeros, ones (nbdkit 1.36) 0xff,
 * whatever was written or zeroed.
 */
static const char *const discards_writes[] = { "null", "ones", NULL };

/* Plugins that give each connection a disk of its own: a view is a
 * connection of its own, and no digest a data connection leads to
 * describes what any other connection reads.
 */
static const char *const disk_per_connection[] = {
  "example3", "tmpdisk", NULL,
};

/* Are written (and zeroed) blocks hashed as written? */
static bool hash_writes = true;

static bool
listed (const char *const *list, const char *name)
{
  for (size_t i = 0; list[i]; i++)
    if (strcmp (name, list[i]) == 0)
      return true;
  return false;
}

int
blkhash_passive_init (void)
{
  const char *name = blkhash_plugin_name ();

  if (listed (disk_per_connection, name)) {
    blkhash_error ("blkhash: the %s plugin gives each connection a disk of "
                   "its own: a view, a connection of its own, cannot describe "
                   "the disk of a data connection, so blkhash cannot serve it",
                   name);
    return -1;
  }
  if (listed (discards_writes, name)) {
    hash_writes = false;
    nbdkit_debug ("blkhash: the %s plugin throws writes away: written "
                  "data is hashed only as read back", name);
  }
  return 0;
}

/* Blocks wholly inside [offset, offset+count): [*first, *first+*n). */
static void
full_blocks (const struct blk_table *t, uint64_t offset, uint64_t count,
             uint64_t *first, uint64_t *n)
{
  const uint32_t bs = blk_table_params (t)->block_size;
  const uint64_t size = blk_table_size (t);
  const uint64_t end = offset + count;
  uint64_t last;

  *first = (offset + bs - 1) / bs;
  /* A short last block is full when the request reaches the end. */
  last = end >= size ? blk_block_count (size, bs) : end / bs;
  *n = last > *first ? last - *first : 0;
}

/* Hash the full blocks of buf (which starts at offset) selected by
 * which, digests to out.
 */
static int
hash_buffer (struct blk_table *t, const uint8_t *buf, uint64_t offset,
             uint64_t first, uint64_t n, const bool *which, uint8_t *out,
             bool *zero, int *err)
{
  const struct blk_params *p = blk_table_params (t);
  const uint64_t size = blk_table_size (t);
  struct blk_ctx *ctx = blkhash_thread_ctx ();

  if (ctx == NULL) {
    *err = ENOMEM;
    return -1;
  }
  for (uint64_t i = 0; i < n; i++) {
    const uint64_t b = first + i;
    if (which && !which[i])
      continue;
    if (blk_hash_block (p, ctx, buf + (b * p->block_size - offset),
                        blk_block_len (size, p->block_size, b),
                        out + i * p->digest.len, &zero[i]) == -1) {
      blkhash_error ("blkhash: %s failed", p->digest.name);
      *err = EIO;
      return -1;
    }
    blkhash_stats.passive_blocks++;
  }
  return 0;
}

/* After a request stored digests in t: if t now knows every block,
 * e's line, before the reply.  O(1) otherwise.
 */
static void
check_complete (struct blkhash_export *e, struct blk_table *t)
{
  if (blkhash_file && blk_table_unknown (t) == 0)
    blkhash_results_complete (e, t);
}

/* What a read needs of one table: its full blocks in the request,
 * which of them it does not know, and its snapshot.
 */
struct read_table {
  struct blk_table *t;
  uint64_t first, n, snapshot;
  uint8_t *out;
  bool *need, *zero;
};

static void
read_table_free (struct read_table *rt)
{
  free (rt->out);
  free (rt->need);
  free (rt->zero);
}

/* Look the blocks up in rt->t before the read: 1 if some are unknown,
 * 0 if none, -1 if out of memory (then nothing is hashed for it).
 */
static int
read_table_lookup (struct read_table *rt, uint64_t offset, uint32_t count)
{
  const size_t L = blk_table_params (rt->t)->digest.len;

  full_blocks (rt->t, offset, count, &rt->first, &rt->n);
  if (rt->n == 0)
    return 0;
  rt->out = malloc (rt->n * L);
  rt->need = malloc (rt->n * sizeof *rt->need);
  rt->zero = calloc (rt->n, sizeof *rt->zero);
  if (rt->out == NULL || rt->need == NULL || rt->zero == NULL)
    return -1;
  /* The snapshot must precede the read: a write that ends after it
   * makes what we read unstorable.
   */
  return blk_table_lookup (rt->t, rt->first, rt->n, rt->out, rt->need,
                           &rt->snapshot) > 0;
}

int
blkhash_passive_pread (nbdkit_next *next, struct blkhash_export *e,
                       struct blk_table *t, struct blk_table *t2,
                       void *buf, uint32_t count, uint64_t offset,
                       uint32_t flags, int *err)
{
  struct read_table rts[2] = { { .t = t }, { .t = t2 } };
  bool any = false;
  int r, i;

  for (i = 0; i < 2; i++) {
    if (rts[i].t == NULL || (i == 1 && t2 == t))
      rts[i].t = NULL;
    else if ((r = read_table_lookup (&rts[i], offset, count)) == -1) {
      for (i = 0; i < 2; i++)
        read_table_free (&rts[i]);
      blkhash_error ("blkhash: out of memory");
      *err = ENOMEM;
      return -1;
    }
    else if (r == 0)
      rts[i].t = NULL;
    any |= rts[i].t != NULL;
  }
  r = next->pread (next, buf, count, offset, flags, err);
  /* A hashing failure must not fail a read that succeeded. */
  for (i = 0; any && r == 0 && i < 2; i++) {
    struct read_table *rt = &rts[i];
    int ignored;
    if (rt->t == NULL ||
        hash_buffer (rt->t, buf, offset, rt->first, rt->n, rt->need,
                     rt->out, rt->zero, &ignored) == -1)
      continue;
    blk_table_store (rt->t, rt->first, rt->n, rt->out, rt->zero, rt->need,
                     rt->snapshot);
    blk_table_fold (rt->t, false, BLKHASH_FOLD_BUDGET);
    if (rt->t == t)
      check_complete (e, rt->t);
  }
  for (i = 0; i < 2; i++)
    read_table_free (&rts[i]);
  return r;
}

struct zero_runs {
  struct blk_table *t;
  uint64_t snapshot, blocks;
};

static void
store_zero_run (void *opaque, uint64_t b0, uint64_t b1)
{
  struct zero_runs *z = opaque;

  blk_table_store_zero (z->t, b0, b1 - b0, z->snapshot);
  z->blocks += b1 - b0;
}

/* Mark the full blocks of t that extents (within [offset, end)) say
 * read as zeros.
 */
static void
extents_mark (struct blkhash_export *e, struct blk_table *t,
              uint64_t snapshot, struct nbdkit_extents *extents,
              uint64_t offset, uint64_t end, bool is_data_table)
{
  struct zero_runs z = { .t = t, .snapshot = snapshot };
  struct blk_holes h;

  blk_holes_begin (&h, blk_table_params (t)->block_size, blk_table_size (t),
                   store_zero_run, &z);
  for (size_t i = 0; i < nbdkit_extents_count (extents); i++) {
    const struct nbdkit_extent x = nbdkit_get_extent (extents, i);
    const uint64_t a = MAX (x.offset, offset);
    const uint64_t b = MIN (x.offset + x.length, end);
    if (a >= b)
      continue;
    const struct blk_extent ze = {
      .offset = a, .length = b - a, .zero = x.type & NBDKIT_EXTENT_ZERO,
    };
    blk_holes_add (&h, &ze);
  }
  blk_holes_end (&h);
  if (z.blocks) {
    blkhash_stats.hole_blocks += z.blocks;
    blk_table_fold (t, false, BLKHASH_FOLD_BUDGET);
    if (is_data_table)
      check_complete (e, t);
  }
}

int
blkhash_passive_extents (nbdkit_next *next, struct blkhash_export *e,
                         struct blk_table *t, struct blk_table *t2,
                         uint32_t count, uint64_t offset, uint32_t flags,
                         struct nbdkit_extents *extents, int *err)
{
  uint64_t s1 = 0, s2 = 0;

  /* Behind the cache filter extents may call data a hole: mark none. */
  if (!blkhash_extents_usable (next))
    t = t2 = NULL;
  if (t2 == t)
    t2 = NULL;
  /* The snapshots must precede the answer, as for a read. */
  if (t)
    blk_table_lookup (t, 0, 0, NULL, NULL, &s1);
  if (t2)
    blk_table_lookup (t2, 0, 0, NULL, NULL, &s2);
  if (next->extents (next, count, offset, flags, extents, err) == -1)
    return -1;
  /* Only within the request: its size bounds the work. */
  if (t)
    extents_mark (e, t, s1, extents, offset, offset + count, true);
  if (t2)
    extents_mark (e, t2, s2, extents, offset, offset + count, false);
  return 0;
}

/* Before a write (or zero, or trim) reaches the plugin: the lines go
 * (results.c), then the tables are bracketed (exports.c).
 */
static int
write_begin (struct blkhash_export *e, struct blkhash_write *w,
             uint64_t offset, uint64_t count, int *err)
{
  blkhash_results_write_begin ();
  if (blkhash_write_begin (e, w, offset, count, err) == -1) {
    blkhash_results_write_end ();
    return -1;
  }
  return 0;
}

/* After it: every table sees it end before results.c does, and the
 * bytes of a write that succeeded (written) are credit for a flush
 * (see results.c).
 */
static void
write_end (struct blkhash_export *e, struct blkhash_write *w,
           const struct blk_table *t, const struct blk_written *done,
           uint64_t written)
{
  blkhash_write_end (w, t, done);
  blkhash_results_write_end ();
  if (blkhash_file && written)
    blkhash_export_credit (e, written);
}

int
blkhash_passive_pwrite (nbdkit_next *next, struct blkhash_export *e,
                        struct blk_table *t, const void *buf,
                        uint32_t count, uint64_t offset, uint32_t flags,
                        int *err)
{
  struct blkhash_write w;
  struct blk_written done = { 0 };
  uint8_t *out = NULL;
  bool *zero = NULL;
  int r, ignored;

  if (!hash_writes)
    t = NULL;                   /* forget only */
  if (write_begin (e, &w, offset, count, err) == -1)
    return -1;
  r = next->pwrite (next, buf, count, offset, flags, err);
  /* Hash while the write is still registered: ending it stores the
   * digests in the same step (see blk_table_write_end).
   */
  if (r == 0 && t) {
    full_blocks (t, offset, count, &done.first, &done.count);
    if (done.count) {
      out = malloc (done.count * blk_table_params (t)->digest.len);
      zero = calloc (done.count, sizeof *zero);
      if (out == NULL || zero == NULL ||
          hash_buffer (t, buf, offset, done.first, done.count, NULL, out,
                       zero, &ignored) == -1)
        done.count = 0;
      done.digests = out;
      done.zero = zero;
    }
  }
  write_end (e, &w, t, r == 0 ? &done : NULL, r == 0 ? count : 0);
  if (r == 0 && done.count)
    blk_table_fold (t, false, BLKHASH_FOLD_BUDGET);
  free (out);
  free (zero);
  return r;
}

int
blkhash_passive_zero (nbdkit_next *next, struct blkhash_export *e,
                      struct blk_table *t, uint32_t count, uint64_t offset,
                      uint32_t flags, int *err)
{
  struct blkhash_write w;
  struct blk_written done = { 0 };
  int r;

  if (!hash_writes)
    t = NULL;                   /* forget only */
  if (write_begin (e, &w, offset, count, err) == -1)
    return -1;
  r = next->zero (next, count, offset, flags, err);
  if (r == 0 && t)
    full_blocks (t, offset, count, &done.first, &done.count);
  write_end (e, &w, t, r == 0 ? &done : NULL, r == 0 ? count : 0);
  if (r == 0 && done.count)
    blk_table_fold (t, false, BLKHASH_FOLD_BUDGET);
  return r;
}

int
blkhash_passive_trim (nbdkit_next *next, struct blkhash_export *e,
                      uint32_t count, uint64_t offset, uint32_t flags,
                      int *err)
{
  struct blkhash_write w;
  int r;

  /* Trimmed data reads back as anything: forget it. */
  if (write_begin (e, &w, offset, count, err) == -1)
    return -1;
  r = next->trim (next, count, offset, flags, err);
  write_end (e, &w, NULL, NULL, r == 0 ? count : 0);
  return r;
}
