/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: where an image's data is (see datamap.h). */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "datamap.h"
#include "helpers.h"
#include "holes.h"
#include "minmax.h"
#include "signals.h"
#include "source.h"

/* Block status is asked for this much image at a time: under the
 * 4 GiB that one NBD request can describe, in whole MiB.
 */
#define SCAN_BYTES (UINT64_C (4095) << 20)

void
data_map_free (struct data_map *m)
{
  free (m->holes);
  m->holes = NULL;
  m->nholes = m->alloc = 0;
  m->known = false;
}

/* Append the hole [start, end), after all earlier ones.  -1 when there
 * are too many to keep.
 */
static int
add_hole (struct data_map *m, uint64_t start, uint64_t end)
{
  struct data_hole *last = m->nholes ? &m->holes[m->nholes - 1] : NULL;

  if (last && start < last->end)
    start = last->end;
  if (start >= end)
    return 0;
  if (last && last->end == start) {
    last->end = end;
    return 0;
  }
  if (m->nholes == m->alloc) {
    const size_t n = m->alloc ? 2 * m->alloc : 64;
    struct data_hole *runs;

    if (n > DATAMAP_MAX_RUNS ||
        (runs = realloc (m->holes, n * sizeof *runs)) == NULL)
      return -1;
    m->holes = runs;
    m->alloc = n;
  }
  m->holes[m->nholes++] = (struct data_hole) { start, end };
  return 0;
}

struct scan {
  struct data_map *m;
  struct blk_holes holes;       /* runs of zero extents */
  uint64_t covered;             /* image bytes described so far */
  bool failed;
};

/* The blocks the inputs skip, a run of zero extents' (lib/holes.c). */
static void
scan_hole_run (void *opaque, uint64_t b0, uint64_t b1)
{
  struct scan *s = opaque;
  const uint64_t bs = s->holes.block_size, size = s->m->size;

  if (add_hole (s->m, b0 * bs, MIN (b1 * bs, size)) == -1)
    s->failed = true;
}

static int
scan_extent (void *opaque, const char *metacontext, uint64_t offset,
             uint32_t *entries, size_t nr_entries, int *error)
{
  struct scan *s = opaque;
  const uint64_t size = s->m->size;

  if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0 ||
      offset != s->covered)
    return 0;
  for (size_t i = 0; i + 1 < nr_entries && s->covered < size; i += 2) {
    const struct blk_extent e = {
      .offset = s->covered, .length = entries[i],
      .zero = entries[i + 1] & LIBNBD_STATE_ZERO,
    };
    blk_holes_add (&s->holes, &e);
    s->covered = MIN (s->covered + entries[i], size);
  }
  return 0;
}

void
data_map_scan (struct data_map *m, struct nbd_handle *h, uint64_t size,
               uint32_t block_size)
{
  const double deadline = now () + DATAMAP_SECONDS;
  struct scan s = { .m = m };
  uint64_t holes = 0;

  data_map_free (m);
  m->size = size;
  blk_holes_begin (&s.holes, block_size, size, scan_hole_run, &s);
  if (block_size == 0 ||
      nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) != 1)
    goto out;
  while (s.covered < size) {
    const uint64_t before = s.covered;

    if (stop_signal () || now () > deadline ||
        source_block_status (h, MIN (size - s.covered, SCAN_BYTES),
                             s.covered, (nbd_extent_callback) {
                               .callback = scan_extent, .user_data = &s })
        == -1 ||
        s.failed || s.covered == before)
      goto out;
  }
  blk_holes_end (&s.holes);
  if (s.failed)
    goto out;
  for (size_t i = 0; i < m->nholes; i++)
    holes += m->holes[i].end - m->holes[i].start;
  m->data = size - holes;
  m->known = true;
 out:
  if (!m->known)
    data_map_free (m);
}

/* The first hole ending after offset. */
static size_t
first_hole_after (const struct data_map *m, uint64_t offset)
{
  size_t lo = 0, hi = m->nholes;

  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (m->holes[mid].end <= offset)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

uint64_t
data_map_data_in (const struct data_map *m, uint64_t offset,
                  uint64_t length)
{
  const uint64_t end = offset + length;
  uint64_t data = length;

  for (size_t i = first_hole_after (m, offset);
       i < m->nholes && m->holes[i].start < end; i++)
    data -= MIN (end, m->holes[i].end) - MAX (offset, m->holes[i].start);
  return data;
}

uint64_t
data_map_reach (const struct data_map *m, uint64_t offset, uint64_t data,
                uint64_t most)
{
  const uint64_t limit = MIN (offset + most, m->size);
  uint64_t pos = offset;

  if (!m->known)
    return MIN (data, limit - offset);
  for (size_t i = first_hole_after (m, offset); pos < limit && data > 0; i++) {
    const uint64_t hole = i < m->nholes ? m->holes[i].start : m->size;
    if (pos < hole) {
      const uint64_t take = MIN (data, MIN (hole, limit) - pos);
      pos += take;
      data -= take;
    }
    if (i < m->nholes && data > 0)
      pos = MAX (pos, MIN (m->holes[i].end, limit));
    if (i >= m->nholes)
      break;
  }
  return pos - offset;
}
