/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the bytes the gate keeps for an import (see
 * sent.c): parts of granules a client was sent that cannot be hashed
 * yet, a block read in parts until it is whole, or data that arrived
 * ahead of a plain digest's position.
 *
 * A granule's bytes are in memory while the import's granules there
 * take at most HELD_MEMORY, else in a slot of an unlinked file in
 * $TMPDIR (/var/tmp if unset), up to blkhash-expect-spill bytes of
 * slots.  Which of its bytes a granule holds is a sorted list of
 * ranges; the granules, their lists and the hash table take at most
 * HELD_META.  Nothing is ever dropped to make room: a put that does
 * not fit fails and says which bound it met, and the gate fails the
 * read (sent.c), so that what the client got is always known.
 *
 * The caller holds the record's lock around every call.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "minmax.h"
#include "sent.h"
#include "util.h"
#include "zero.h"

/* Bytes read from the file at a time to compare. */
#define CMP_CHUNK 16384

void
held_init (struct blkhash_held *h, uint32_t gsize, uint64_t size,
           uint64_t spill_max)
{
  memset (h, 0, sizeof *h);
  h->gsize = gsize;
  h->size = size;
  h->spill_max = spill_max;
  h->fd = -1;
}

void
held_fini (struct blkhash_held *h)
{
  for (size_t i = 0; i < h->nbuckets; i++) {
    struct held_gran *g, *next;
    for (g = h->buckets[i]; g; g = next) {
      next = g->next;
      free (g->data);
      free (g->r);
      free (g);
    }
  }
  free (h->buckets);
  free (h->free_slots);
  if (h->fd >= 0)
    close (h->fd);
  memset (h, 0, sizeof *h);
  h->fd = -1;
}

static size_t
bucket (uint64_t idx, size_t n)
{
  return (idx * UINT64_C (0x9E3779B97F4A7C15)) >> 32 & (n - 1);
}

struct held_gran *
held_find (const struct blkhash_held *h, uint64_t idx)
{
  struct held_gran *g;

  if (h->count == 0)
    return NULL;
  for (g = h->buckets[bucket (idx, h->nbuckets)]; g; g = g->next)
    if (g->idx == idx)
      return g;
  return NULL;
}

/* Granules the file can still take. */
static uint64_t
file_room (const struct blkhash_held *h)
{
  const uint64_t most = h->spill_max / h->gsize;

  return h->nfree + (most > h->slots ? most - h->slots : 0);
}

static void
room_message (struct blkhash_held *h)
{
  char mem[32], spill[32];

  snprintf (h->why, sizeof h->why,
            "it keeps %zu blocks of %" PRIu32 " bytes the client got in "
            "part or ahead of the digest, all that %s in memory and "
            "blkhash-expect-spill=%s in a file hold (a larger "
            "blkhash-expect-spill lifts the bound)",
            h->count, h->gsize,
            blk_format_block_size (HELD_MEMORY, mem),
            blk_format_block_size (h->spill_max, spill));
}

bool
held_room (struct blkhash_held *h, uint64_t n)
{
  const uint64_t in_mem = (HELD_MEMORY - MIN (h->mem, HELD_MEMORY)) /
    h->gsize;

  if (h->meta + n * sizeof (struct held_gran) > HELD_META) {
    snprintf (h->why, sizeof h->why,
              "reads in more than %" PRIu64 " MiB of separate pieces",
              HELD_META >> 20);
    return false;
  }
  if (in_mem + file_room (h) < h->reserved + n) {
    room_message (h);
    return false;
  }
  return true;
}

/* The file, created unlinked on first use; -1 with why set. */
static int
open_file (struct blkhash_held *h)
{
  const char *dir = getenv ("TMPDIR");
  char *path = NULL;

  if (h->fd >= 0)
    return 0;
  if (dir == NULL || *dir == '\0')
    dir = "/var/tmp";
#ifdef O_TMPFILE
  h->fd = open (dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (h->fd == -1 && asprintf (&path, "%s/blkhash-expect.XXXXXX", dir) != -1) {
    h->fd = mkostemp (path, O_CLOEXEC);
    if (h->fd >= 0)
      unlink (path);
    free (path);
  }
  if (h->fd == -1) {
    snprintf (h->why, sizeof h->why, "cannot make a file in %s for data "
              "read ahead (TMPDIR): %s", dir, strerror (errno));
    return -1;
  }
  return 0;
}

static int
file_io (struct blkhash_held *h, bool write, void *buf, size_t len,
         off_t off)
{
  while (len) {
    ssize_t r = write ? pwrite (h->fd, buf, len, off)
      : pread (h->fd, buf, len, off);
    if (r <= 0) {
      snprintf (h->why, sizeof h->why, "the file in TMPDIR for data read "
                "ahead failed: %s", r == 0 ? "short read" : strerror (errno));
      return -1;
    }
    buf = (uint8_t *) buf + r;
    len -= r;
    off += r;
  }
  return 0;
}

static off_t
slot_off (const struct blkhash_held *h, const struct held_gran *g,
          uint32_t a)
{
  return (off_t) g->slot * h->gsize + a;
}

/* A new granule idx, in memory or in the file; NULL with why set. */
static struct held_gran *
gran_new (struct blkhash_held *h, uint64_t idx, bool reserved)
{
  struct held_gran *g;

  if (reserved && h->reserved)
    h->reserved--;
  else if (!held_room (h, 1))
    return NULL;
  if (h->count >= h->nbuckets) {
    const size_t n = h->nbuckets ? 2 * h->nbuckets : 64;
    struct held_gran **b = calloc (n, sizeof *b);
    if (b == NULL)
      goto enomem;
    for (size_t i = 0; i < h->nbuckets; i++)
      while (h->buckets[i]) {
        struct held_gran *x = h->buckets[i];
        h->buckets[i] = x->next;
        x->next = b[bucket (x->idx, n)];
        b[bucket (x->idx, n)] = x;
      }
    free (h->buckets);
    h->meta += (n - h->nbuckets) * sizeof *b;
    h->buckets = b;
    h->nbuckets = n;
  }
  g = calloc (1, sizeof *g);
  if (g == NULL)
    goto enomem;
  g->idx = idx;
  g->len = MIN (h->size - idx * h->gsize, (uint64_t) h->gsize);
  g->slot = -1;
  if (h->mem + h->gsize <= HELD_MEMORY) {
    if ((g->data = malloc (g->len)) == NULL) {
      free (g);
      goto enomem;
    }
    h->mem += g->len;
  }
  else if (open_file (h) == -1) {
    free (g);
    return NULL;
  }
  else
    g->slot = h->nfree ? h->free_slots[--h->nfree] : (int64_t) h->slots++;
  g->next = h->buckets[bucket (idx, h->nbuckets)];
  h->buckets[bucket (idx, h->nbuckets)] = g;
  h->count++;
  h->meta += sizeof *g;
  h->peak = MAX (h->peak, h->count);
  return g;

 enomem:
  snprintf (h->why, sizeof h->why, "out of memory");
  return NULL;
}

void
held_drop (struct blkhash_held *h, struct held_gran *g)
{
  struct held_gran **gp;

  for (gp = &h->buckets[bucket (g->idx, h->nbuckets)]; *gp != g;
       gp = &(*gp)->next)
    ;
  *gp = g->next;
  if (g->data) {
    h->mem -= g->len;
    free (g->data);
  }
  else {
    if (h->nfree == h->free_cap) {
      const size_t cap = 2 * h->free_cap + 16;
      int64_t *v = realloc (h->free_slots, cap * sizeof *v);
      if (v) {
        h->free_slots = v;
        h->free_cap = cap;
      }
    }
    if (h->nfree < h->free_cap)
      h->free_slots[h->nfree++] = g->slot;
    /* else out of memory: the slot is not used again (the file's
     * bound still holds: slots counts it).
     */
  }
  h->meta -= sizeof *g + g->cap * sizeof *g->r;
  h->count--;
  free (g->r);
  free (g);
}

/* The first range of g ending at or after a. */
static uint32_t
range_at (const struct held_gran *g, uint32_t a)
{
  uint32_t lo = 0, hi = g->nr;

  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (g->r[mid].b < a)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

uint32_t
held_run (const struct held_gran *g, uint32_t a)
{
  const uint32_t i = range_at (g, a);

  return i < g->nr && g->r[i].a <= a && g->r[i].b > a ? g->r[i].b : a;
}

int
held_compare (struct blkhash_held *h, const struct held_gran *g, uint32_t a,
              uint32_t b, const uint8_t *buf, uint32_t *at)
{
  uint8_t tmp[CMP_CHUNK];

  for (uint32_t i = range_at (g, a); i < g->nr && g->r[i].a < b; i++) {
    const uint32_t x = MAX (a, g->r[i].a), y = MIN (b, g->r[i].b);
    for (uint32_t o = x; o < y; ) {
      const uint32_t n = MIN (y - o, (uint32_t) CMP_CHUNK);
      const uint8_t *have = g->data ? g->data + o : tmp;
      if (g->data == NULL &&
          file_io (h, false, tmp, n, slot_off (h, g, o)) == -1)
        return -1;
      if (buf ? memcmp (have, buf + (o - a), n) != 0
          : !blk_is_zero (have, n)) {
        for (uint32_t k = 0; k < n; k++)
          if (have[k] != (buf ? buf[o - a + k] : 0)) {
            *at = o + k;
            return 1;
          }
      }
      o += n;
    }
  }
  return 0;
}

/* Record [a, b) in g's list: the bytes it did not hold, or -1 with
 * why set.
 */
static int64_t
ranges_add (struct blkhash_held *h, struct held_gran *g, uint32_t a,
            uint32_t b)
{
  uint32_t lo = range_at (g, a), j;
  int64_t added = b - a;

  for (j = lo; j < g->nr && g->r[j].a <= b; j++)
    added -= MIN (b, g->r[j].b) - MAX (a, g->r[j].a);
  if (j == lo && g->nr == g->cap) {
    const uint32_t cap = g->cap ? 2 * g->cap : 4;
    struct held_range *r;
    if (h->meta + (cap - g->cap) * sizeof *r > HELD_META) {
      snprintf (h->why, sizeof h->why, "reads in more than %" PRIu64
                " MiB of separate pieces", HELD_META >> 20);
      return -1;
    }
    if ((r = realloc (g->r, cap * sizeof *r)) == NULL) {
      snprintf (h->why, sizeof h->why, "out of memory");
      return -1;
    }
    h->meta += (cap - g->cap) * sizeof *r;
    g->r = r;
    g->cap = cap;
  }
  if (j > lo) {
    a = MIN (a, g->r[lo].a);
    b = MAX (b, g->r[j - 1].b);
    memmove (&g->r[lo + 1], &g->r[j], (g->nr - j) * sizeof *g->r);
    g->nr -= j - lo - 1;
  }
  else {
    memmove (&g->r[lo + 1], &g->r[lo], (g->nr - lo) * sizeof *g->r);
    g->nr++;
  }
  g->r[lo] = (struct held_range) { a, b };
  g->have += added;
  return added;
}

int64_t
held_put (struct blkhash_held *h, uint64_t idx, uint32_t a, uint32_t b,
          const uint8_t *buf, bool reserved, struct held_gran **gp)
{
  static const uint8_t zeros[CMP_CHUNK];
  struct held_gran *g = held_find (h, idx);
  bool made = false;
  int64_t added;

  if (g == NULL) {
    if ((g = gran_new (h, idx, reserved)) == NULL)
      return -1;
    made = true;
  }
  /* The data first: a failed write leaves the list as it was. */
  if (g->data && buf)
    memcpy (g->data + a, buf, b - a);
  else if (g->data)
    memset (g->data + a, 0, b - a);
  else
    for (uint32_t o = a; o < b; ) {
      const uint32_t n = buf ? b - o : MIN (b - o, (uint32_t) CMP_CHUNK);
      if (file_io (h, true, (void *) (buf ? buf + (o - a) : zeros), n,
                   slot_off (h, g, o)) == -1)
        goto failed;
      o += n;
    }
  if ((added = ranges_add (h, g, a, b)) == -1)
    goto failed;
  *gp = g;
  return added;

 failed:
  if (made)
    held_drop (h, g);
  return -1;
}

int
held_get (struct blkhash_held *h, const struct held_gran *g, uint32_t a,
          uint32_t b, uint8_t *out)
{
  if (g->data) {
    memcpy (out, g->data + a, b - a);
    return 0;
  }
  return file_io (h, false, out, b - a, slot_off (h, g, a));
}
