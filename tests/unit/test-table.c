/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/table.c */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "minmax.h"
#include "table.h"
#include "tap.h"

#define L 32

/* The 1000 block table of the first tests, its last block short. */
#define BS 4096
#define NBLOCKS UINT64_C (1000)
#define SIZE ((NBLOCKS - 1) * BS + 100)
static struct blk_params p;
static struct blk_table *t;
static uint8_t *all, *out;      /* NBLOCKS digests each */
static bool *need;              /* NBLOCKS */

/* A fake digest per (block, version): content need not be real. */
static void
fake (uint64_t b, unsigned version, uint8_t *d)
{
  memset (d, 0, L);
  memcpy (d, &b, sizeof b);
  d[8] = version;
  d[9] = 0xd5;
}

/* The root over given per-block digests, computed directly. */
static void
expect_root (const struct blk_params *params, uint64_t nblocks,
             uint64_t size, const uint8_t *digests, uint8_t *root)
{
  struct blk_root r;

  blk_root_init (&r, params);
  blk_root_add (&r, digests, nblocks);
  blk_root_final (&r, size, root);
  blk_root_free (&r);
}

struct fill_arg {
  struct blk_table *t;
  uint64_t first, count;
  unsigned version;
};

static void *
fill_range (void *opaque)
{
  struct fill_arg *a = opaque;
  uint8_t *d = malloc (a->count * L);
  bool *unknown = malloc (a->count);
  uint64_t snap;

  /* Small steps, folding as we go, like the filter does. */
  for (uint64_t b = a->first; b < a->first + a->count; b += 7) {
    uint64_t n = a->first + a->count - b < 7 ? a->first + a->count - b : 7;
    blk_table_lookup (a->t, b, n, d, unknown, &snap);
    for (uint64_t i = 0; i < n; i++)
      fake (b + i, a->version, d + i * L);
    blk_table_store (a->t, b, n, d, NULL, unknown, snap);
    blk_table_fold (a->t, false, 4096);
  }
  free (d);
  free (unknown);
  return NULL;
}

/* Holes, then data: the root follows what is stored. */
static void
test_roots (void)
{
  struct blk_table_stats st;
  uint8_t root[BLK_DIGEST_MAX], want[BLK_DIGEST_MAX];
  uint64_t snap;

  t = blk_table_new (&p, SIZE);
  ok (t != NULL && blk_table_blocks (t) == NBLOCKS, "1000 block table");

  ok (blk_table_lookup (t, 0, NBLOCKS, out, need, &snap) == NBLOCKS &&
      need[0] && need[999], "everything unknown at first");
  ok (blk_table_root (t, root) == -1 && errno == EAGAIN,
      "no root while blocks are unknown");

  /* Holes for all, then data for some: roots follow. */
  blk_table_store_zero (t, 0, NBLOCKS, snap);
  blk_table_stats (t, &st);
  ok (st.known == NBLOCKS && st.data == 0, "all known zero");
  ok (blk_table_root (t, root) == 0, "root once all are known");
  {
    /* Direct: a zero image of the same size. */
    uint8_t *img = calloc (1, SIZE);
    struct blk_stream s;
    blk_stream_init (&s, &p);
    blk_stream_update (&s, img, SIZE);
    blk_stream_final (&s, want);
    blk_stream_free (&s);
    free (img);
  }
  ok (memcmp (root, want, L) == 0,
      "zero root equals a zero image, short tail included");

  blk_table_lookup (t, 0, NBLOCKS, all, need, &snap);
  ok (!need[0] && !need[999], "zero blocks are known");
  ok (blk_table_lookup (t, 0, NBLOCKS, NULL, need, &snap) == 0 && !need[5],
      "lookup without copying counts no unknown block");
  for (uint64_t b = 100; b < 200; b++)
    fake (b, 1, all + b * L);
  /* Block 150 to 200 not yet: stored later, out of order. */
  blk_table_store (t, 100, 50, all + 100 * L, NULL, NULL, snap);
  ok (blk_table_root (t, root) == 0, "root after changing blocks");
  expect_root (&p, NBLOCKS, SIZE, all, want);
  /* all[] has 150..199 changed but not stored yet. */
  ok (memcmp (root, want, L) != 0, "root does not count unstored digests");
  blk_table_store (t, 150, 50, all + 150 * L, NULL, NULL, snap);
  ok (blk_table_root (t, root) == 0 && memcmp (root, want, L) == 0,
      "root equals the direct computation after a refold");

  blk_table_stats (t, &st);
  ok (st.data == 100 && st.known == NBLOCKS, "100 data blocks counted");
}

static void
test_snapshots (void)
{
  uint8_t root[BLK_DIGEST_MAX], d[L];
  uint64_t snap, snap2;
  struct blk_write w;

  /* A write makes a snapshot taken before it useless. */
  blk_table_lookup (t, 0, 1, out, need, &snap);
  blk_table_write_begin (t, &w, 5, 2);
  blk_table_write_end (t, &w, NULL);
  blk_table_lookup (t, 5, 2, out, need, &snap2);
  ok (need[0] && need[1], "written blocks are forgotten");
  ok (blk_table_root (t, root) == -1 && errno == EAGAIN,
      "no root with forgotten blocks");
  fake (5, 2, d);
  blk_table_store (t, 5, 1, d, NULL, NULL, snap);
  blk_table_lookup (t, 5, 1, out, need, &snap2);
  ok (need[0], "stale snapshot: store refused");
  {
    struct blk_written done = { 5, 1, d, NULL };
    blk_table_write_begin (t, &w, 5, 1);
    blk_table_write_end (t, &w, &done);
  }
  blk_table_lookup (t, 5, 1, out, need, &snap2);
  ok (!need[0] && memcmp (out, d, L) == 0, "a lone write stores what it wrote");

  /* Store refused while a write is in flight, even with a new
   * snapshot, and after it ends.
   */
  blk_table_write_begin (t, &w, 6, 1);
  blk_table_lookup (t, 6, 1, out, need, &snap);
  fake (6, 3, d);
  blk_table_store (t, 6, 1, d, NULL, NULL, snap);
  blk_table_lookup (t, 6, 1, out, need, &snap2);
  ok (need[0], "no store during a write");
  blk_table_write_end (t, &w, NULL);
  blk_table_store (t, 6, 1, d, NULL, NULL, snap);
  blk_table_lookup (t, 6, 1, out, need, &snap2);
  ok (need[0], "no store after it with a snapshot from during it");
}

static void
test_concurrent_writes (void)
{
  uint64_t snap2;
  struct blk_write w, w2;

  /* Overlapping writes: nobody may store the block both touched. */
  for (uint64_t b = 10; b < 14; b++)
    fake (b, 4, all + b * L);
  {
    struct blk_written d1 = { 10, 4, all + 10 * L, NULL };
    struct blk_written d2 = { 12, 1, all + 12 * L, NULL };
    blk_table_write_begin (t, &w, 10, 4);
    blk_table_write_begin (t, &w2, 12, 1);
    blk_table_write_end (t, &w2, &d2);
    blk_table_write_end (t, &w, &d1);
  }
  blk_table_lookup (t, 10, 4, out, need, &snap2);
  ok (!need[0] && !need[1] && need[2] && !need[3],
      "overlapping writes: only the shared block is lost");
  {
    struct blk_written d1 = { 10, 2, all + 10 * L, NULL };
    struct blk_written d2 = { 12, 2, all + 12 * L, NULL };
    blk_table_write_begin (t, &w, 10, 2);
    blk_table_write_begin (t, &w2, 12, 2);
    blk_table_write_end (t, &w2, &d2);
    blk_table_write_end (t, &w, &d1);
  }
  blk_table_lookup (t, 10, 4, out, need, &snap2);
  ok (!need[0] && !need[1] && !need[2] && !need[3],
      "disjoint concurrent writes both store");
  {
    /* Zero writes store zero; a failed write stores nothing. */
    struct blk_written z = { 12, 2, NULL, NULL };
    blk_table_write_begin (t, &w, 12, 2);
    blk_table_write_end (t, &w, &z);
    blk_table_lookup (t, 12, 2, out, need, &snap2);
    ok (!need[0] && !need[1] && memcmp (out, p.zero_digest, L) == 0,
        "a zero write stores zero digests");
  }
  blk_table_write_begin (t, &w, 12, 2);
  blk_table_write_end (t, &w, NULL);
  blk_table_write_begin (t, &w, 20, 1);
  blk_table_write_end (t, &w, NULL);
  blk_table_lookup (t, 20, 1, out, need, &snap2);
  ok (need[0], "a failed write forgets its block");

  /* A neighbour ending first does not cost the other its blocks, even
   * when its chunk then has nothing to keep.
   */
  {
    struct blk_written d1 = { 64, 4, all + 10 * L, NULL };
    struct blk_written d2 = { 68, 4, all + 10 * L, NULL };
    blk_table_write_begin (t, &w, 64, 4);
    blk_table_write_begin (t, &w2, 68, 4);
    blk_table_write_end (t, &w2, &d2);
    blk_table_write_end (t, &w, &d1);
    blk_table_lookup (t, 64, 8, out, need, &snap2);
    ok (!need[0] && !need[3] && !need[4] && !need[7],
        "adjacent concurrent writes in one chunk both store");
  }
}

/* After the writes above: blocks 6, 12, 13 and 20 are unknown. */
static void
test_next_unknown (void)
{
  ok (blk_table_next_unknown (t, 0) == 5 + 1, "next unknown after 0");
  ok (blk_table_next_unknown (t, 7) == 12, "next unknown after 7");
  ok (blk_table_next_unknown (t, 14) == 20, "next unknown after 14");
  ok (blk_table_next_unknown (t, 21) == NBLOCKS, "none after 21");
  blk_table_free (t);
}

  /* Threads filling disjoint ranges with folds interleaved. */
static void
test_parallel_fill (void)
{
  uint8_t root[BLK_DIGEST_MAX], want[BLK_DIGEST_MAX];
  enum { THREADS = 4 };
  const uint64_t n = 5000;
  pthread_t th[THREADS];
  struct fill_arg args[THREADS];
  uint8_t *exp = malloc (n * L);

  t = blk_table_new (&p, n * BS);
  for (int i = 0; i < THREADS; i++) {
    args[i] = (struct fill_arg) { t, i * n / THREADS, n / THREADS, 7 };
    pthread_create (&th[i], NULL, fill_range, &args[i]);
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join (th[i], NULL);
  for (uint64_t b = 0; b < n; b++)
    fake (b, 7, exp + b * L);
  expect_root (&p, n, n * BS, exp, want);
  ok (blk_table_root (t, root) == 0 && memcmp (root, want, L) == 0,
      "parallel fill and fold give the direct root");
  blk_table_free (t);
  free (exp);
}

  /* Memory follows data: a 4 TiB hole. */
static void
test_big_hole (void)
{
  struct blk_table_stats st;
  uint64_t snap;

  const uint64_t big = 4ULL << 40;
  uint64_t nb = big / 65536, first = 0;
  struct blk_params p64;
  blk_params_init (&p64, "sha256", 65536);
  t = blk_table_new (&p64, big);
  /* Stored in 64 MiB steps like the filter does. */
  for (first = 0; first < nb; first += 1024) {
    blk_table_lookup (t, first, 1, out, need, &snap);
    blk_table_store_zero (t, first, 1024, snap);
  }
  blk_table_stats (t, &st);
  ok (st.known == nb, "4 TiB of holes known");
  ok (st.memory < 32 << 20, "4 TiB of holes in %llu bytes (< 32 MiB)",
      (unsigned long long) st.memory);
  blk_table_free (t);
  blk_params_free (&p64);
}

  /* Zero writes side by side: each stores its blocks; merging one
   * write's stamp into its neighbours must not make the next one look
   * contested (nbdcopy zeroes a sparse source's holes like this).
   */
static void
test_zero_writes (void)
{
  struct blk_table_stats st;
  struct blk_write w;

  struct blk_params p64;
  struct blk_written zw = { 0 };
  bool stored = true;
  blk_params_init (&p64, "sha256", 65536);
  t = blk_table_new (&p64, 1ULL << 30);
  for (uint64_t k = 0; k < 8; k++) {
    blk_table_write_begin (t, &w, k * 2048, 2048);
    zw.first = k * 2048;
    zw.count = 2048;
    blk_table_write_end (t, &w, &zw);
    blk_table_stats (t, &st);
    stored &= st.known == (k + 1) * 2048;
  }
  ok (stored, "side by side zero writes are all stored");
  ok (st.memory < 4096, "and fold back into one marker (%llu bytes)",
      (unsigned long long) st.memory);
  blk_table_free (t);
  blk_params_free (&p64);
}

  /* Any size nbdkit can serve: 2^63-1 bytes at 4K blocks, used at
   * scattered places, against a plain model of what each block holds.
   */
static void
test_huge (void)
{
  struct blk_table_stats st;
  struct blk_write w;
  uint64_t snap;
  const uint64_t huge = INT64_MAX;
  struct blk_params p4;
  enum { NPOS = 64, ROUNDS = 4000 };
  uint64_t pos[NPOS];
  int model[NPOS];              /* -1 unknown, 0 zero, v>0 version */
  unsigned seed = 12345, bad = 0;
  uint8_t dd[L], got[L];
  bool nd;
  struct blk_ctx *ctx = blk_ctx_new ();

  blk_params_init (&p4, "sha256", 4096);
  t = blk_table_new (&p4, huge);
  ok (t != NULL && blk_table_blocks (t) == huge / 4096 + 1,
      "a 2^63-1 byte table opens");
  /* Neighbours, chunk and node boundaries, and the very end. */
  for (int i = 0; i < NPOS; i++) {
    seed = seed * 1103515245 + 12345;
    const uint64_t base = i < 8 ? (uint64_t) i * 64 * 512 - (i > 0)
      : i < 16 ? blk_table_blocks (t) - 1 - (i - 8)
      : ((uint64_t) seed << 24) % blk_table_blocks (t);
    pos[i] = base;
    model[i] = -1;
  }
  for (int r = 0; r < ROUNDS; r++) {
    seed = seed * 1103515245 + 12345;
    const int i = (seed >> 8) % NPOS, op = (seed >> 20) % 4;
    const uint64_t b = pos[i];
    blk_table_lookup (t, b, 1, NULL, &nd, &snap);
    if (op == 0) {                    /* a data digest */
      fake (b, r % 200 + 1, dd);
      blk_table_store (t, b, 1, dd, NULL, NULL, snap);
      for (int j = 0; j < NPOS; j++)
        if (pos[j] == b)
          model[j] = r % 200 + 1;
    }
    else if (op == 1) {               /* a run of zeros */
      const uint64_t n = blk_table_blocks (t) - b < 300
        ? blk_table_blocks (t) - b : 300;
      blk_table_store_zero (t, b, n, snap);
      for (int j = 0; j < NPOS; j++)
        if (pos[j] >= b && pos[j] < b + n)
          model[j] = 0;
    }
    else if (op == 2) {               /* a write forgets */
      const uint64_t n = blk_table_blocks (t) - b < 100
        ? blk_table_blocks (t) - b : 100;
      blk_table_write_begin (t, &w, b, n);
      blk_table_write_end (t, &w, NULL);
      for (int j = 0; j < NPOS; j++)
        if (pos[j] >= b && pos[j] < b + n)
          model[j] = -1;
    }
    /* op 3: only check. */
    for (int j = 0; j < NPOS; j++) {
      const bool known = blk_table_lookup (t, pos[j], 1, got, &nd,
                                           &snap) == 0;
      if (model[j] == -1)
        bad += known;
      else if (!known)
        bad++;
      else {
        if (model[j] == 0)
          blk_zero_block_digest (&p4, ctx, blk_block_len (huge, 4096,
                                                          pos[j]), dd);
        else
          fake (pos[j], model[j], dd);
        bad += memcmp (got, dd, L) != 0;
      }
    }
  }
  ok (bad == 0, "4000 random stores, zero runs and writes agree with "
      "the model (%u mismatches)", bad);
  blk_table_stats (t, &st);
  ok (st.memory < 16 << 20, "scattered use of 2^63-1 bytes costs %llu "
      "bytes (< 16 MiB)", (unsigned long long) st.memory);
  ok (blk_table_next_unknown (t, 0) == 0 || model[0] != -1,
      "next unknown finds the first block");
  blk_table_free (t);
  blk_params_free (&p4);
  blk_ctx_free (ctx);
}

/* 1 PiB known zero (16M blocks: three levels of nodes): the tree
 * collapses to nothing.
 */
static void
test_petabyte_zeros (void)
{
  struct blk_params p4;
  struct blk_table_stats st;
  uint64_t snap;
  bool nd;

  blk_params_init (&p4, "sha256", 16 << 20);
  t = blk_table_new (&p4, UINT64_C (1) << 50);
  for (uint64_t b = 0; b < blk_table_blocks (t); b += 1000) {
    const uint64_t n = blk_table_blocks (t) - b < 1000
      ? blk_table_blocks (t) - b : 1000;
    blk_table_lookup (t, b, 1, NULL, &nd, &snap);
    blk_table_store_zero (t, b, n, snap);
  }
  blk_table_stats (t, &st);
  ok (st.known == blk_table_blocks (t) && st.memory < 4096,
      "1 PiB of zeros known in %llu bytes", (unsigned long long) st.memory);
  ok (blk_table_next_unknown (t, 0) == blk_table_blocks (t),
      "no unknown block in 1 PiB of zeros");
  blk_table_free (t);
  blk_params_free (&p4);
}

/* shake128 (16 byte digests) with 96K blocks: an image of 130 blocks,
 * the last one 5000 bytes, data in every third block, holes stored as
 * zero; the table's root equals the streaming construction's.
 */
static void
test_shake_96k (void)
{
  const uint32_t bs = 96 * 1024;
  const uint64_t nblocks = 130, size = (nblocks - 1) * bs + 5000;
  uint8_t *img = calloc (1, size);
  uint8_t d[BLK_DIGEST_MAX], root[BLK_DIGEST_MAX], want[BLK_DIGEST_MAX];
  struct blk_ctx *ctx = blk_ctx_new ();
  struct blk_params sp;
  struct blk_table *st;
  struct blk_stream s;
  uint64_t snap;
  bool zero, stored = true;

  for (uint64_t b = 0; b < nblocks; b += 3)
    for (uint64_t i = b * bs; i < MIN (size, (b + 1) * bs); i += 97)
      img[i] = b + i;
  ok (blk_params_init (&sp, "shake128", bs) == NULL && sp.digest.len == 16,
      "shake128 with 96K blocks");
  st = blk_table_new (&sp, size);
  ok (st && blk_table_blocks (st) == nblocks, "130 blocks of 96K, 16 bytes");
  blk_table_lookup (st, 0, 0, NULL, NULL, &snap);
  /* Data blocks last first, so the fold waits until the end. */
  for (uint64_t b = 0; b < nblocks; b++)
    if (b % 3)
      blk_table_store_zero (st, b, 1, snap);
  ok (blk_table_root (st, root) == -1 && errno == EAGAIN,
      "no root with data blocks unknown");
  for (uint64_t b = (nblocks - 1) / 3 * 3; ; b -= 3) {
    stored &= blk_hash_block (&sp, ctx, img + b * bs,
                              blk_block_len (size, bs, b), d, &zero) == 0;
    blk_table_store (st, b, 1, d, NULL, NULL, snap);
    if (b == 0)
      break;
  }
  ok (stored, "data blocks hashed");
  ok (blk_stream_init (&s, &sp) == 0 &&
      blk_stream_update (&s, img, size) == 0 &&
      blk_stream_final (&s, want) == 0, "the stream's root");
  blk_stream_free (&s);
  ok (blk_table_root (st, root) == 0 && memcmp (root, want, 16) == 0,
      "the table's root equals the stream's");
  blk_table_free (st);
  blk_params_free (&sp);
  blk_ctx_free (ctx);
  free (img);
}

/* Reset: everything forgotten, nothing from an earlier lookup stored,
 * a write in flight across it stores nothing, and the root follows
 * what is stored after it.
 */
static void
test_reset (void)
{
  struct blk_table *rt = blk_table_new (&p, SIZE);
  struct blk_table_stats st;
  uint8_t root[BLK_DIGEST_MAX], want[BLK_DIGEST_MAX], d[L];
  uint64_t snap, old_snap;
  struct blk_write w;

  for (uint64_t b = 0; b < NBLOCKS; b++)
    fake (b, 1, all + b * L);
  blk_table_lookup (rt, 0, NBLOCKS, NULL, need, &snap);
  blk_table_store (rt, 0, NBLOCKS, all, NULL, NULL, snap);
  ok (blk_table_root (rt, root) == 0, "reset: a full table has a root");

  blk_table_lookup (rt, 0, 1, NULL, need, &old_snap);
  blk_table_write_begin (rt, &w, 3, 1);
  blk_table_reset (rt);
  blk_table_stats (rt, &st);
  ok (st.known == 0 && st.data == 0 && blk_table_next_unknown (rt, 0) == 0,
      "reset forgets every block");
  ok (blk_table_root (rt, root) == -1 && errno == EAGAIN,
      "and the root");
  ok (st.memory < 8192, "and gives back its memory (%llu bytes)",
      (unsigned long long) st.memory);

  fake (0, 2, d);
  blk_table_store (rt, 0, 1, d, NULL, NULL, old_snap);
  blk_table_lookup (rt, 0, 1, NULL, need, &snap);
  ok (need[0], "a lookup from before the reset stores nothing");

  {
    struct blk_written done = { 3, 1, d, NULL };
    fake (3, 2, d);
    blk_table_write_end (rt, &w, &done);
  }
  blk_table_lookup (rt, 3, 1, NULL, need, &snap);
  ok (need[3 - 3], "a write in flight across the reset stores nothing");

  for (uint64_t b = 0; b < NBLOCKS; b++)
    fake (b, 3, all + b * L);
  blk_table_lookup (rt, 0, NBLOCKS, NULL, need, &snap);
  blk_table_store (rt, 0, NBLOCKS, all, NULL, NULL, snap);
  expect_root (&p, NBLOCKS, SIZE, all, want);
  ok (blk_table_root (rt, root) == 0 && memcmp (root, want, L) == 0,
      "after a reset the root is of the digests stored since");
  blk_table_free (rt);
}

/* A change the table cannot place (a write through another export):
 * nothing is stored while it is in flight, nothing looked up before it
 * ended is stored after, and it forgets every block when it ends.
 */
static void
test_forget (void)
{
  struct blk_table *rt = blk_table_new (&p, SIZE);
  struct blk_table_stats st;
  uint8_t root[BLK_DIGEST_MAX], d[L];
  uint64_t snap, old_snap;

  ok (blk_table_unknown (rt) == NBLOCKS, "forget: a new table knows nothing");
  for (uint64_t b = 0; b < NBLOCKS; b++)
    fake (b, 1, all + b * L);
  blk_table_lookup (rt, 0, NBLOCKS, NULL, need, &snap);
  blk_table_store (rt, 0, NBLOCKS - 1, all, NULL, NULL, snap);
  ok (blk_table_unknown (rt) == 1, "one block left unknown");
  blk_table_store_zero (rt, NBLOCKS - 1, 1, snap);
  ok (blk_table_unknown (rt) == 0 && blk_table_root (rt, root) == 0,
      "then none, and a root");

  blk_table_lookup (rt, 0, 1, NULL, need, &old_snap);
  blk_table_forget_begin (rt);
  blk_table_stats (rt, &st);
  ok (st.known == NBLOCKS, "blocks stay known while the change is in flight");
  blk_table_lookup (rt, 0, NBLOCKS, NULL, need, &snap);
  blk_table_forget_begin (rt);          /* two at once */
  blk_table_forget_end (rt);
  blk_table_store (rt, 0, NBLOCKS, all, NULL, NULL, snap);
  blk_table_store_zero (rt, 0, NBLOCKS, snap);
  ok (blk_table_unknown (rt) == NBLOCKS,
      "the first to end forgets every block");
  blk_table_lookup (rt, 0, NBLOCKS, NULL, need, &snap);
  blk_table_store (rt, 0, NBLOCKS, all, NULL, NULL, snap);
  blk_table_store_zero (rt, 0, NBLOCKS, snap);
  ok (blk_table_unknown (rt) == NBLOCKS,
      "nothing is stored while the other is in flight");
  blk_table_forget_end (rt);
  blk_table_store (rt, 0, NBLOCKS, all, NULL, NULL, snap);
  ok (blk_table_unknown (rt) == NBLOCKS,
      "nor after it, from a lookup made while it was in flight");
  fake (0, 2, d);
  blk_table_store (rt, 0, 1, d, NULL, NULL, old_snap);
  ok (blk_table_unknown (rt) == NBLOCKS && blk_table_root (rt, root) == -1,
      "nor from one made before it");

  blk_table_lookup (rt, 0, NBLOCKS, NULL, need, &snap);
  blk_table_store (rt, 0, NBLOCKS, all, NULL, NULL, snap);
  ok (blk_table_unknown (rt) == 0, "a lookup after it stores again");
  {
    struct blk_write w;
    struct blk_written done = { 5, 1, d, NULL };
    blk_table_write_begin (rt, &w, 5, 1);
    blk_table_forget_begin (rt);
    blk_table_forget_end (rt);
    blk_table_write_end (rt, &w, &done);
    blk_table_lookup (rt, 5, 1, NULL, need, &snap);
    ok (need[0], "a write of the table's own export across it stores nothing");
  }
  blk_table_free (rt);
}

/* A write reaching past the table (through a larger export) is cut to
 * its blocks; one wholly past it touches nothing.
 */
static void
test_write_past_end (void)
{
  struct blk_table *rt = blk_table_new (&p, 10 * BS);
  struct blk_table_stats st;
  struct blk_write w;
  uint64_t snap;
  uint8_t *d = malloc (10 * L);

  for (uint64_t b = 0; b < 10; b++)
    fake (b, 1, d + b * L);
  blk_table_lookup (rt, 0, 10, NULL, need, &snap);
  blk_table_store (rt, 0, 10, d, NULL, NULL, snap);
  blk_table_write_begin (rt, &w, 20, 5);
  blk_table_write_end (rt, &w, NULL);
  blk_table_stats (rt, &st);
  ok (st.known == 10, "a write past the end forgets nothing");
  blk_table_write_begin (rt, &w, 8, 100);
  blk_table_write_end (rt, &w, NULL);
  blk_table_stats (rt, &st);
  ok (st.known == 8 && blk_table_next_unknown (rt, 0) == 8,
      "a write across the end forgets its blocks up to the end");
  free (d);
  blk_table_free (rt);
}

/* Thousands of small tables (one per export name) stay small once
 * folded: the fold keeps no buffer between calls.
 */
static void
test_small_tables (void)
{
  struct blk_table_stats st;
  uint64_t total = 0, snap;
  uint8_t root[BLK_DIGEST_MAX];

  for (uint64_t b = 0; b < 128; b++)
    fake (b, 1, all + b * L);
  for (int i = 0; i < 100; i++) {
    struct blk_table *st_t = blk_table_new (&p, UINT64_C (1024) * BS);
    blk_table_lookup (st_t, 0, 128, NULL, need, &snap);
    blk_table_store (st_t, 0, 128, all, NULL, NULL, snap);
    blk_table_fold (st_t, true, 0);
    blk_table_root (st_t, root);
    blk_table_stats (st_t, &st);
    total += st.memory;
    blk_table_free (st_t);
  }
  ok (total / 100 < 24 * 1024,
      "a table with 128 data blocks, folded, holds %llu bytes",
      (unsigned long long) (total / 100));
}

int
main (void)
{
  blk_params_init (&p, "sha256", BS);
  all = malloc (NBLOCKS * L);
  out = malloc (NBLOCKS * L);
  need = malloc (NBLOCKS);

  test_roots ();
  test_snapshots ();
  test_concurrent_writes ();
  test_next_unknown ();

  test_parallel_fill ();
  test_big_hole ();
  test_zero_writes ();
  test_huge ();
  test_petabyte_zeros ();
  test_shake_96k ();
  test_reset ();
  test_forget ();
  test_write_past_end ();
  test_small_tables ();

  blk_params_free (&p);
  free (all);
  free (out);
  free (need);
  return done_testing ();
}
