/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: sets of byte ranges (sorted, disjoint,
 * merged as they come) in bounded memory, for the gate: what a session
 * wrote, what it read, which ranges it learned are zeros.
 *
 * At most BLKHASH_RANGES_MAX ranges.  What happens to one more depends
 * on what the set is for: a set that may claim more than it holds (the
 * bytes a client has covered: claiming more only judges sooner, and
 * the judge reads what it was not given) merges the ranges with the
 * smallest gaps between them, down to half, and says so (merged); one
 * that must not (zeros, where a merged gap would be hashed as zeros)
 * drops the new range.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "minmax.h"

static int
compare_u64 (const void *a, const void *b)
{
  const uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

  return x < y ? -1 : x > y;
}

/* Merge the ranges whose gaps are smallest until half are left.
 * false if out of memory (nothing merged).
 */
static bool
ranges_halve (struct blkhash_ranges *r)
{
  uint64_t *gaps, limit;
  size_t i, j, merges;

  if (r->n < 2)
    return false;
  gaps = malloc ((r->n - 1) * sizeof *gaps);
  if (gaps == NULL)
    return false;
  for (i = 0; i + 1 < r->n; i++)
    gaps[i] = r->v[i + 1].a - r->v[i].b;
  qsort (gaps, r->n - 1, sizeof *gaps, compare_u64);
  merges = r->n / 2;
  limit = gaps[merges - 1];
  free (gaps);
  /* Gaps up to limit go, but no more than merges of them (ties). */
  for (i = 0, j = 0; i < r->n; i++) {
    if (j > 0 && merges > 0 && r->v[i].a - r->v[j - 1].b <= limit) {
      r->v[j - 1].b = r->v[i].b;
      merges--;
    }
    else
      r->v[j++] = r->v[i];
  }
  r->n = j;
  r->merged = true;
  return true;
}

bool
blkhash_ranges_add (struct blkhash_ranges *r, uint64_t a, uint64_t b,
                    bool may_merge)
{
  size_t lo = 0, hi = r->n, j;

  if (a >= b)
    return true;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (r->v[mid].b < a)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (j = lo; j < r->n && r->v[j].a <= b; j++) {
    a = MIN (a, r->v[j].a);
    b = MAX (b, r->v[j].b);
  }
  if (j == lo) {                /* a range of its own */
    if (r->n == r->cap) {
      const size_t cap = r->cap ? 2 * r->cap : 16;
      struct blkhash_range *v = cap <= BLKHASH_RANGES_MAX
        ? realloc (r->v, cap * sizeof *v) : NULL;
      if (v) {
        r->v = v;
        r->cap = cap;
      }
      else if (!may_merge || !ranges_halve (r))
        return false;
      else                      /* its place moved: again */
        return blkhash_ranges_add (r, a, b, may_merge);
    }
    memmove (&r->v[lo + 1], &r->v[lo], (r->n - lo) * sizeof *r->v);
    r->n++;
  }
  else {
    memmove (&r->v[lo + 1], &r->v[j], (r->n - j) * sizeof *r->v);
    r->n -= j - lo - 1;
  }
  r->v[lo] = (struct blkhash_range) { a, b };
  return true;
}

/* The first range ending after a (r->n if none). */
static size_t
ranges_after (const struct blkhash_ranges *r, uint64_t a)
{
  size_t lo = 0, hi = r->n;

  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (r->v[mid].b <= a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

bool
blkhash_ranges_covers (const struct blkhash_ranges *r, uint64_t a,
                       uint64_t b)
{
  size_t i;

  if (a >= b)
    return true;
  i = ranges_after (r, a);
  return i < r->n && r->v[i].a <= a && r->v[i].b >= b;
}

uint64_t
blkhash_ranges_end_at (const struct blkhash_ranges *r, uint64_t a)
{
  const size_t i = ranges_after (r, a);

  return i < r->n && r->v[i].a <= a ? r->v[i].b : a;
}

uint64_t
blkhash_ranges_next (const struct blkhash_ranges *r, uint64_t a)
{
  const size_t i = ranges_after (r, a);

  if (i == r->n)
    return UINT64_MAX;
  return MAX (r->v[i].a, a);
}

void
blkhash_ranges_clear (struct blkhash_ranges *r)
{
  r->n = 0;
  r->merged = false;
}

void
blkhash_ranges_free (struct blkhash_ranges *r)
{
  free (r->v);
  memset (r, 0, sizeof *r);
}
