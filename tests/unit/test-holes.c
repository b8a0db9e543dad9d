/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/holes.c */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "holes.h"
#include "tap.h"

/* Each zero extent of exts[0..n) marked on its own, none merged with
 * its neighbours.
 */
static void
mark_each (const struct blk_extent *exts, size_t n, uint32_t block_size,
           uint64_t size, uint64_t first, uint64_t count, bool *hole)
{
  struct blk_holes h;

  for (size_t i = 0; i < n; i++) {
    blk_holes_begin_marks (&h, block_size, size, first, count, hole);
    blk_holes_add (&h, &exts[i]);
    blk_holes_end (&h);
  }
}

#define BS 4096
#define MAXB 16

/* buf[1..count] against want, a string of '1' (hole) and '0' per
 * block of the range; buf[0] and buf[count + 1], around the range,
 * must be untouched.
 */
static int
same_marks (const bool *buf, uint64_t count, const char *want)
{
  if (buf[0] || buf[count + 1])
    return 0;
  for (uint64_t i = 0; i < count; i++)
    if (buf[1 + i] != (want[i] == '1'))
      return 0;
  return strlen (want) == count;
}

/* Mark [first, first+count) of an image of size bytes from one extent
 * and compare with want.
 */
static int
marks_bs (uint32_t bs, uint64_t size, uint64_t first, uint64_t count,
          uint64_t offset, uint64_t length, bool zero, const char *want)
{
  const struct blk_extent e = { offset, length, zero };
  bool buf[MAXB + 2] = { false };

  mark_each (&e, 1, bs, size, first, count, buf + 1);
  return same_marks (buf, count, want);
}

static int
marks (uint64_t size, uint64_t first, uint64_t count,
       uint64_t offset, uint64_t length, bool zero, const char *want)
{
  return marks_bs (BS, size, first, count, offset, length, zero, want);
}

/* Blocks that are not a power of two: 96K, and 12K. */
static void
test_mark_96k (void)
{
  const uint32_t K = 1024, B = 96 * K;
  const uint64_t size = 5 * B + 1000;

  ok (marks_bs (B, size, 0, 6, 64 * K, 256 * K, true, "011000"),
      "96K: a 64K-aligned extent holds blocks 1 and 2 only");
  ok (marks_bs (B, size, 0, 6, B, 2 * B - 1, true, "010000"),
      "96K: a byte short of block 2");
  ok (marks_bs (B, size, 0, 6, 128 * K, size, true, "001111"),
      "96K: to the end, the short last block included");
  ok (marks_bs (B, size, 2, 3, 0, 3 * B, true, "100"),
      "96K: a range from block 2");
  ok (marks_bs (12 * K, 10 * 12 * K, 0, 10, 16 * K, 32 * K, true,
                "0011000000"), "12K: 16K+32K holds blocks 2 and 3");
}

static void
test_mark (void)
{
  const uint64_t size = 8 * BS;

  ok (marks (size, 0, 8, BS, BS, true, "01000000"), "one aligned block");
  ok (marks (size, 0, 8, BS, BS, false, "00000000"), "data is no hole");
  ok (marks (size, 0, 8, 1000, 3 * BS + 500, true, "01100000"),
      "unaligned extent: only the blocks wholly inside");
  ok (marks (size, 0, 8, BS + 1, BS, true, "00000000"),
      "less than a block across a boundary");
  ok (marks (size, 0, 8, 2 * BS, BS - 1, true, "00000000"),
      "one byte short of a block");
  ok (marks (size, 0, 8, 3 * BS, 0, true, "00000000"), "empty extent");
  ok (marks (size, 0, 8, 0, size, true, "11111111"), "the whole image");
  ok (marks (size, 0, 8, 6 * BS, 10 * BS, true, "00000011"),
      "an extent beyond the image end");

  /* 3 blocks, the last one 1000 bytes. */
  ok (marks (2 * BS + 1000, 0, 3, 2 * BS, 1000, true, "001"),
      "short last block: the extent reaches the image end");
  ok (marks (2 * BS + 1000, 0, 3, 2 * BS, 999, true, "000"),
      "short last block: the extent stops a byte short");
  ok (marks (2 * BS + 1000, 0, 3, 2 * BS, BS, true, "001"),
      "short last block: the extent goes past the end");
  ok (marks (2 * BS + 1000, 0, 3, BS + 1, 2 * BS, true, "001"),
      "short last block: an unaligned extent covering it");

  ok (marks (size, 2, 3, 0, size, true, "111"),
      "an extent wider than the range marks only the range");
  ok (marks (size, 2, 3, 0, 3 * BS, true, "100"),
      "an extent ending inside the range");
  ok (marks (size, 2, 3, 4 * BS, 4 * BS, true, "001"),
      "an extent starting inside the range");
  ok (marks (size, 2, 3, 0, 2 * BS, true, "000"),
      "an extent before the range");
  ok (marks (size, 2, 3, 5 * BS, 3 * BS, true, "000"),
      "an extent after the range");
  ok (marks (size, 6, 4, 0, size, true, "1100"),
      "a range beyond the image end stops at its last block");
  ok (marks (UINT64_C (1) << 62, 0, 2, (UINT64_C (1) << 62) - BS,
             UINT64_MAX, true, "00"),
      "a length that would overflow");
}

static void
test_mark_several (void)
{
  const uint64_t size = 8 * BS;
  const struct blk_extent exts[] = {
    { 0, BS + 100, false },
    { BS + 100, 3 * BS, true },       /* blocks 2, 3 */
    { 2 * BS, 2 * BS, true },         /* overlapping: 2, 3 again */
    { 4 * BS + 100, BS, false },
    { 5 * BS, 3 * BS, true },         /* 5, 6, 7 */
  };
  const size_t n = sizeof exts / sizeof exts[0];
  bool all[8] = { false }, windows[8] = { false }, kept[8] = { false };
  int same = 1;

  mark_each (exts, n, BS, size, 0, 8, all);
  /* Overlapping windows of the range, and all extents to each. */
  mark_each (exts, n, BS, size, 0, 4, windows);
  mark_each (exts, n, BS, size, 3, 3, windows + 3);
  mark_each (exts, n, BS, size, 5, 3, windows + 5);
  for (int i = 0; i < 8; i++)
    same &= all[i] == windows[i];
  ok (!all[0] && !all[1] && all[2] && all[3] && !all[4] && all[5] &&
      all[6] && all[7], "several extents, overlapping ones included");
  ok (same, "windows mark what one call does");

  kept[0] = true;
  mark_each (exts, n, BS, size, 0, 8, kept);
  ok (kept[0], "entries already set stay set");
}

/* Feed exts in order to a blk_holes over [first, first+count) and
 * compare with want.
 */
static int
run_marks (uint32_t bs, uint64_t size, uint64_t first, uint64_t count,
           const struct blk_extent *exts, size_t n, const char *want)
{
  bool buf[MAXB + 2] = { false };
  struct blk_holes h;

  blk_holes_begin_marks (&h, bs, size, first, count, buf + 1);
  for (size_t i = 0; i < n; i++)
    blk_holes_add (&h, &exts[i]);
  blk_holes_end (&h);
  return same_marks (buf, count, want);
}

static void
test_runs_of_zero_extents (void)
{
  const uint32_t K = 1024, B = 64 * K;
  const uint64_t size = 8 * B;
  /* nbdkit cuts extents at 4 GiB - 1: a block straddles the cut. */
  const struct blk_extent cut[] = {
    { 0, 100 * K, true }, { 100 * K, size - 100 * K, true },
  };
  const struct blk_extent three[] = {
    { 0, 10 * K, true }, { 10 * K, 100 * K, true },
    { 110 * K, 100 * K, true }, { 210 * K, 300 * K, false },
  };
  const struct blk_extent gap[] = {
    { 0, 100 * K, true }, { 101 * K, 300 * K, true },
  };
  const struct blk_extent data_between[] = {
    { 0, 100 * K, true }, { 100 * K, 1, false },
    { 100 * K + 1, 300 * K, true },
  };
  const struct blk_extent overlap[] = {
    { 0, 200 * K, true }, { 150 * K, 200 * K, true },
  };
  const struct blk_extent backwards[] = {
    { 3 * B, 2 * B, true }, { 0, B, true },
  };
  const uint64_t big = UINT64_C (1) << 62;
  const struct blk_extent huge[] = {
    { 0, big - 1, true }, { big - 1, UINT64_MAX, true },
  };
  bool one[MAXB] = { false }, marked[MAXB] = { false };

  ok (run_marks (B, size, 0, 8, cut, 2, "11111111"),
      "two zero extents cut mid-block are one hole");
  mark_each (cut, 2, B, size, 0, 8, one);
  ok (!one[1], "(each extent on its own leaves the straddling block)");
  ok (run_marks (B, size, 0, 8, three, 4, "11100000"),
      "three adjacent zero extents, then data");
  ok (run_marks (B, size, 0, 8, gap, 2, "10111100"),
      "a gap between zero extents breaks the run");
  ok (run_marks (B, size, 0, 8, data_between, 3, "10111100"),
      "a data byte between zero extents breaks the run");
  ok (run_marks (B, size, 0, 8, overlap, 2, "11111000"),
      "overlapping zero extents are one run");
  ok (run_marks (B, size, 0, 8, backwards, 2, "10011000"),
      "an extent before the run starts its own");
  ok (run_marks (B, size, 2, 3, cut, 2, "111"),
      "a range inside the run");
  ok (run_marks (B, size + 1000, 0, 9, cut, 2, "111111110"),
      "a run short of the image end leaves the short last block");
  ok (run_marks (B, big, 0, 2, huge, 2, "11"),
      "lengths that would overflow the end");

  /* The same extents, added in calls of one and as one list. */
  struct blk_holes h;
  blk_holes_begin_marks (&h, B, size, 0, 8, marked);
  blk_holes_add (&h, &three[0]);
  blk_holes_add (&h, &three[1]);
  blk_holes_add (&h, &three[2]);
  ok (!marked[0], "nothing marked while the run may go on");
  blk_holes_end (&h);
  ok (marked[0] && marked[1] && marked[2] && !marked[3],
      "marked by blk_holes_end");
}

/* A tiny deterministic generator: the same cases on every machine. */
static uint32_t
next_random (uint32_t *state)
{
  *state = *state * 1103515245 + 12345;
  return *state >> 16;
}

/* Random tilings of small images by zero and data extents, in order,
 * fed in random windows: a block is a hole exactly when every byte of
 * it (inside the image) lies in a zero extent, checked byte by byte.
 */
static void
test_runs_random (void)
{
  enum { SIZE_MAX_ = 40000, BSZ = 4096, CASES = 2000 };
  static bool zero_byte[SIZE_MAX_];
  uint32_t state = 2026;
  int bad = 0;

  for (int c = 0; c < CASES && !bad; c++) {
    const uint64_t size = 1 + next_random (&state) % SIZE_MAX_;
    const uint64_t nblocks = (size + BSZ - 1) / BSZ;
    struct blk_extent exts[64];
    size_t n = 0;
    bool hole[16] = { false };
    struct blk_holes h;

    /* Extents of 1 to 9000 bytes tiling [0, size), the last one may
     * reach past the end as servers' may.
     */
    for (uint64_t off = 0; off < size && n < 64; n++) {
      const uint64_t len = 1 + next_random (&state) % 9000;
      exts[n] = (struct blk_extent) { off, len, next_random (&state) % 3 != 0 };
      for (uint64_t b = off; b < off + len && b < size; b++)
        zero_byte[b] = exts[n].zero;
      off += len;
      if (n == 63 && off < size) {      /* the rest: data */
        for (uint64_t b = off; b < size; b++)
          zero_byte[b] = false;
      }
    }
    blk_holes_begin_marks (&h, BSZ, size, 0, nblocks, hole);
    for (size_t i = 0; i < n; i++)
      blk_holes_add (&h, &exts[i]);
    blk_holes_end (&h);
    for (uint64_t b = 0; b < nblocks; b++) {
      bool want = true;
      for (uint64_t x = b * BSZ; x < (b + 1) * BSZ && x < size; x++)
        want &= zero_byte[x];
      if (hole[b] != want) {
        printf ("# case %d: size %" PRIu64 ", block %" PRIu64 ": %d, want %d\n",
              c, size, b, hole[b], want);
        bad = 1;
      }
    }
  }
  ok (!bad, "%d random tilings: holes are the blocks wholly zero", CASES);
}

static int
runs (const char *a, const char *want)
{
  bool v[MAXB];
  const uint64_t count = strlen (a);
  char got[64] = "", *p = got;

  for (uint64_t i = 0; i < count; i++)
    v[i] = a[i] == '1';
  for (uint64_t i = 0, n; blk_next_run (v, count, &i, &n); i += n)
    p += sprintf (p, "%u+%u ", (unsigned) i, (unsigned) n);
  return strcmp (got, want) == 0;
}

static void
test_runs (void)
{
  uint64_t i = 5, n = 7;

  ok (runs ("", ""), "no entries");
  ok (runs ("0000", ""), "no run");
  ok (runs ("1111", "0+4 "), "one run of everything");
  ok (runs ("0110011", "1+2 5+2 "), "runs in the middle and at the end");
  ok (runs ("1010", "0+1 2+1 "), "runs of one");
  ok (!blk_next_run ((const bool[]) { true, false }, 2, &i, &n) &&
      n == 0, "starting past the end finds nothing");
}

struct runs_seen {
  uint64_t b0[8], b1[8];
  unsigned n;
};

static void
record_run (void *opaque, uint64_t b0, uint64_t b1)
{
  struct runs_seen *r = opaque;

  if (r->n < 8) {
    r->b0[r->n] = b0;
    r->b1[r->n] = b1;
  }
  r->n++;
}

/* Runs as nbdsum's progress bar takes them, for a whole image: one
 * call per run of zero extents, with the blocks wholly inside it.
 */
static void
test_hole_runs (void)
{
  const uint32_t K = 1024, B = 64 * K;
  const uint64_t size = 10 * B + 100;
  const struct blk_extent exts[] = {
    { 0, 100 * K, true }, { 100 * K, 60 * K, true },   /* blocks 0-1 */
    { 160 * K, 300 * K, false },
    { 460 * K, 10 * K, true },                         /* none whole */
    { 470 * K, 10 * K, false },
    { 480 * K, 10 * B, true },                         /* 8-10, short */
  };
  struct runs_seen r = { .n = 0 };
  struct blk_holes h;

  blk_holes_begin (&h, B, size, record_run, &r);
  for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
    blk_holes_add (&h, &exts[i]);
  blk_holes_end (&h);
  ok (r.n == 2 && r.b0[0] == 0 && r.b1[0] == 2 && r.b0[1] == 8 &&
      r.b1[1] == 11, "one call per run with whole blocks: [0, 2) and "
      "[8, 11), the short last block included (%u calls)", r.n);
}

int
main (void)
{
  test_mark ();
  test_mark_several ();
  test_runs_of_zero_extents ();
  test_runs_random ();
  test_mark_96k ();
  test_runs ();
  test_hole_runs ();
  return done_testing ();
}
