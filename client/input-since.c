/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: --since=MANIFEST --dirty-bitmap=NAME, the checksum of an
 * image now from its manifest then and the blocks written since.
 *
 * The blkhash root folds block digests in order, so only the blocks
 * that changed need hashing.  What changed comes from a dirty bitmap
 * the server exports as the metadata context qemu:dirty-bitmap:NAME
 * (qemu-nbd -B NAME, qemu's NBD server); nbdkit exports none, so the
 * blocks are hashed client-side (input-client.c, its connections and
 * queue depth), and among them holes are not read.  A block is hashed
 * when it overlaps a dirty extent, when its data comes from a backing
 * file (qemu:allocation-depth 2 or more: the bitmap does not see
 * writes there), or when its length is not the one it had in the
 * manifest (the image grew: the grown tail, the old short last block,
 * the new one); every other digest is the manifest's.
 *
 * The bitmap is not taken on trust where the server can contradict
 * it: a clean block that the manifest has as data but that reads as
 * zeros now (base:allocation), and a sample of the clean data blocks
 * that differs from the manifest, fail the run.  The sample is drawn
 * uniformly among the blocks whose digest is taken from the manifest
 * and that are data there or on the server now, as the root is folded (one thread, in block
 * order: the draw depends on the seed alone, not on which connection
 * took which segment); then those blocks, SAMPLE_MAX at most, are read
 * and hashed in a second round.  So if a fraction f of them changed
 * behind the bitmap's back, the run fails with probability
 * 1-(1-f)^SAMPLE_MAX, as nbdsum(1) says, or surely when they are
 * SAMPLE_MAX or fewer.  These catch a shrink and regrowth, a disabled
 * bitmap, the manifest of another image or a snapshot served with the
 * image's bitmap; what they cannot catch is a few changed blocks among
 * many, missed by the sample.  An image smaller than the manifest's is
 * refused.  A local qcow2 file is served by qemu-nbd (local.c) once
 * qemu-img says its bitmap is enabled and consistent.
 *
 * Memory: the block table holds the digests of the blocks hashed, a
 * second one the clean blocks that read as zeros (runs, as holes are
 * kept), the merge one window of digests, and the sample SAMPLE_MAX
 * digests and, while it is read, at most a queue of blocks; the
 * manifest is read as it goes, never held (manifest.c).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cleanup.h"
#include "digest.h"
#include "endpoint.h"
#include "helpers.h"
#include "input-kinds.h"
#include "jsonread.h"
#include "local.h"
#include "manifest.h"
#include "messages.h"
#include "minmax.h"
#include "signals.h"
#include "source.h"
#include "table.h"

/* qemu's dirty bitmap context: flag 1 marks dirty extents. */
#define DIRTY_BITMAP_PREFIX "qemu:dirty-bitmap:"
#define DIRTY_FLAG 1
/* qemu's allocation depth: 0 unallocated, 1 the image's own layer, 2
 * and more a backing file's.
 */
#define DEPTH_CONTEXT "qemu:allocation-depth"
#define DEPTH_BACKING 2

/* Blocks merged per round. */
#define WINDOW 65536

/* Clean data blocks hashed and compared with the manifest, per run. */
#define SAMPLE_MAX 64

struct sample {
  uint64_t block;
  uint8_t old[BLK_DIGEST_MAX];  /* the manifest's digest */
  uint8_t now[BLK_DIGEST_MAX];  /* read and hashed (check_sample) */
};

struct incremental {
  struct input in;
  const char *name;
  struct manifest *m;
  struct source *src;
  struct input *client;         /* hashing client-side, what changed */
  struct endpoint *ep;          /* its connections */
  char *context;                /* qemu:dirty-bitmap:NAME */
  const char *depth_context;    /* DEPTH_CONTEXT, or NULL: not asked */
  struct client_select select;
  uint64_t old_size, old_nblocks;
  /* The digest of the manifest's short last block if it were zeros. */
  uint8_t short_zero[BLK_DIGEST_MAX];

  /* Clean blocks that the server says read as zeros. */
  struct blk_table *zeros;
  uint64_t zeros_snapshot;

  /* The sample, drawn as fold_root goes (a reservoir over the clean
   * data blocks, seeded by getrandom()), then sorted by block.
   */
  struct sample sample[SAMPLE_MAX];
  size_t nsample;
  uint64_t clean_data;          /* clean data blocks seen while drawing */
  uint64_t rng;                 /* splitmix64 state */
  /* check_sample: its reads in flight, and the first failure. */
  struct blk_ctx *ctx;
  unsigned in_flight;
  int read_error;
  uint64_t error_block;

  /* incremental_digests: the next block, and a window of the
   * manifest's digests.
   */
  uint64_t next;
  uint8_t *old;
  bool *need, *not_zero;

  uint8_t root[BLK_DIGEST_MAX];
  uint64_t hashed;              /* blocks not taken from the manifest */
  uint64_t sampled;             /* clean blocks hashed and compared */
};

/* A read of a block of the sample, in flight. */
struct sample_read {
  struct incremental *inc;
  struct sample *s;
  uint32_t len;
  uint8_t buf[];
};

/* May block b's digest come from the manifest, unless it is dirty? */
static bool
reusable (const struct incremental *inc, uint64_t b)
{
  const struct endpoint *ep = inc->ep;
  const uint32_t bs = ep->params->block_size;

  return b < inc->old_nblocks &&
    blk_block_len (inc->old_size, bs, b) == blk_block_len (ep->size, bs, b);
}

/* Is d, the manifest's digest of reusable block b, that of zeros? */
static bool
zero_digest (const struct incremental *inc, uint64_t b, const uint8_t *d)
{
  const struct blk_params *p = inc->ep->params;
  const uint32_t len = blk_block_len (inc->old_size, p->block_size, b);

  return memcmp (d, len == p->block_size ? p->zero_digest : inc->short_zero,
                 p->digest.len) == 0;
}

/* The sample. */

static uint64_t
splitmix64 (uint64_t *state)
{
  uint64_t z = (*state += UINT64_C (0x9E3779B97F4A7C15));

  z = (z ^ (z >> 30)) * UINT64_C (0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* Clean data block b (data in the manifest, or on the server now),
 * whose digest old is the manifest's: keep a
 * uniform sample of them (reservoir sampling: the i-th replaces a
 * random one of the SAMPLE_MAX with probability SAMPLE_MAX/i).
 */
static void
draw_sample (struct incremental *inc, uint64_t b, const uint8_t *old)
{
  uint64_t slot = inc->clean_data++;

  if (slot >= SAMPLE_MAX)
    slot = splitmix64 (&inc->rng) % inc->clean_data;
  if (slot < SAMPLE_MAX) {
    inc->sample[slot].block = b;
    memcpy (inc->sample[slot].old, old, inc->ep->params->digest.len);
  }
  inc->nsample = MIN (inc->clean_data, (uint64_t) SAMPLE_MAX);
}

static int
compare_samples (const void *a, const void *b)
{
  const struct sample *x = a, *y = b;

  return x->block < y->block ? -1 : x->block > y->block;
}

/* What the server says of a segment of blocks: the dirty bitmap, the
 * allocation depth, and whether each reads as zeros.
 */
struct status_walk {
  struct incremental *inc;
  uint64_t first, count;        /* the segment, in blocks */
  uint64_t start, end;          /* and in bytes */
  bool *skip;                   /* clean so far */
  bool *nonzero;                /* a byte not described as zero */
  uint64_t dirty_end, depth_end, alloc_end;     /* described up to */
};

static int
status_cb (void *opaque, const char *metacontext, uint64_t offset,
           uint32_t *entries, size_t nr_entries, int *error)
{
  struct status_walk *w = opaque;
  const struct incremental *inc = w->inc;
  const uint32_t bs = inc->ep->params->block_size;
  enum { DIRTY, DEPTH, ALLOC } kind;
  uint64_t *end;

  if (strcmp (metacontext, inc->context) == 0)
    kind = DIRTY, end = &w->dirty_end;
  else if (inc->depth_context &&
           strcmp (metacontext, inc->depth_context) == 0)
    kind = DEPTH, end = &w->depth_end;
  else if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) == 0)
    kind = ALLOC, end = &w->alloc_end;
  else
    return 0;
  /* Only what continues the description counts (a gap in
   * base:allocation would pass for zeros).
   */
  if (offset > *end)
    return 0;
  for (size_t i = 0; i + 1 < nr_entries; i += 2) {
    const uint64_t next = offset + entries[i];
    const uint32_t flags = entries[i + 1];
    const uint64_t lo = MAX (offset, w->start), hi = MIN (next, w->end);
    bool mark;

    switch (kind) {
    case DIRTY: mark = flags & DIRTY_FLAG; break;
    case DEPTH: mark = flags >= DEPTH_BACKING; break;
    default: mark = !(flags & LIBNBD_STATE_ZERO); break;
    }
    /* Every block with a byte in the extent, within the segment. */
    if (mark && lo < hi)
      for (uint64_t b = lo / bs; b < (hi - 1) / bs + 1; b++) {
        if (kind == ALLOC)
          w->nonzero[b - w->first] = true;
        else
          w->skip[b - w->first] = false;
      }
    offset = next;
  }
  if (offset > *end)
    *end = offset;
  return 0;
}

/* Ask until the bitmap and the depth describe the whole segment
 * (missing or short answers never pass for clean), and base:allocation
 * as far as the server says.
 */
static int
describe (struct endpoint *ep, struct nbd_handle *h, struct status_walk *w)
{
  const struct incremental *inc = w->inc;

  for (;;) {
    const char *lagging = w->dirty_end <= w->depth_end
      ? inc->context : inc->depth_context;
    uint64_t pos = MIN (w->dirty_end, w->depth_end), now;

    if (pos >= w->end) {
      if (w->alloc_end >= w->end)
        return 0;
      pos = w->alloc_end;
      lagging = NULL;
    }
    if (source_block_status (h, w->end - pos, pos,
                             (nbd_extent_callback) {
                               .callback = status_cb, .user_data = w })
        == -1) {
      endpoint_fail (ep, "block status of %s: %s", inc->context,
                     source_error ());
      return -1;
    }
    now = lagging ? MIN (w->dirty_end, w->depth_end) : w->alloc_end;
    if (now <= pos) {
      /* Zeros unknown there: those blocks are only not cross-checked. */
      if (lagging == NULL)
        return 0;
      endpoint_fail (ep, "the server did not describe %s at offset %"
                     PRIu64, lagging, pos);
      return -1;
    }
  }
}

/* client_select: skip the blocks the manifest has and the server says are
 * clean (not dirty, not from a backing file); note those that read as
 * zeros.
 */
static int
select_clean (void *opaque, struct endpoint *ep, struct nbd_handle *h,
              uint64_t first, uint64_t count, bool *skip)
{
  struct incremental *inc = opaque;
  const uint32_t bs = ep->params->block_size;
  const uint64_t start = first * bs, end = MIN ((first + count) * bs,
                                                ep->size);
  CLEANUP_FREE bool *nonzero = NULL;
  struct status_walk w = {
    inc, first, count, start, end, skip, NULL,
    start, inc->depth_context ? start : end, start,
  };
  bool any = false;

  for (uint64_t i = 0; i < count; i++)
    any |= skip[i] = reusable (inc, first + i);
  if (!any)
    return 0;
  if ((w.nonzero = nonzero = calloc (count, sizeof *nonzero)) == NULL) {
    endpoint_fail (ep, "out of memory");
    return -1;
  }
  if (describe (ep, h, &w) == -1)
    return -1;
  for (uint64_t i = 0, run = 0; i <= count; i++) {
    const uint64_t b = first + i;
    const bool zero = i < count && skip[i] && !nonzero[i] &&
      MIN ((b + 1) * bs, ep->size) <= w.alloc_end;

    if (zero) {
      run++;
      continue;
    }
    if (run)
      blk_table_store_zero (inc->zeros, b - run, run, inc->zeros_snapshot);
    run = 0;
  }
  return 0;
}

/* The run fails: block b was taken as clean but is not. */
static int
missed (struct incremental *inc, uint64_t b, const char *what)
{
  error_at (inc->name, "block %" PRIu64 " (offset %" PRIu64 ") %s: the "
            "bitmap missed a change (it was disabled or started late, a "
            "shrink, a write to a backing file, or the manifest is of "
            "another image); run without --since", b,
            b * inc->ep->params->block_size, what);
  return -1;
}

/* The digests of blocks [first, first+count) now: hashed, or the
 * manifest's, checked against what the server says.  Calls go
 * forward from block 0, as manifest_digests.
 */
static int
incremental_digests (struct incremental *inc, uint64_t first,
                     uint64_t count, uint8_t *out)
{
  const size_t len = inc->ep->params->digest.len;
  uint64_t snapshot;

  while (count > 0) {
    const uint64_t n = MIN (count, (uint64_t) WINDOW);
    const uint64_t old_n = first < inc->old_nblocks
      ? MIN (n, inc->old_nblocks - first) : 0;

    if (first != inc->next) {
      error_at (inc->name, "blocks asked out of order");
      return -1;
    }
    client_input_lookup (inc->client, first, n, out, inc->need);
    blk_table_lookup (inc->zeros, first, n, NULL, inc->not_zero, &snapshot);
    if (old_n && manifest_digests (inc->m, first, old_n, inc->old) == -1)
      return -1;
    for (uint64_t i = 0; i < n; i++) {
      const uint64_t b = first + i;
      const uint8_t *old = inc->old + i * len;

      if (!inc->need[i])
        continue;
      if (i >= old_n || !reusable (inc, b)) {
        error_at (inc->name, "block %" PRIu64 " was not hashed", b);
        return -1;
      }
      if (!inc->not_zero[i] && !zero_digest (inc, b, old))
        return missed (inc, b, "reads as zeros now, but the manifest has "
                       "data there and the bitmap says it was not written");
      memcpy (out + i * len, old, len);
    }
    inc->next = first += n;
    out += n * len;
    count -= n;
  }
  return 0;
}

/* Fold every digest into the root, drawing the sample among the
 * blocks taken from the manifest, then rewind for the callers.
 */
static int
fold_root (struct incremental *inc)
{
  const struct endpoint *ep = inc->ep;
  const size_t len = ep->params->digest.len;
  CLEANUP_FREE uint8_t *d = malloc (WINDOW * len);
  struct blk_root r;
  int ret = -1;

  if (d == NULL) {
    error_at (inc->name, "out of memory");
    return -1;
  }
  if (blk_root_init (&r, ep->params) == -1) {
    error_at (inc->name, "%s failed", ep->params->digest.name);
    return -1;
  }
  for (uint64_t w = 0; w < ep->nblocks; w += WINDOW) {
    const uint64_t n = MIN (ep->nblocks - w, (uint64_t) WINDOW);
    if (stop_signal () || incremental_digests (inc, w, n, d) == -1)
      goto out;
    for (uint64_t i = 0; i < n; i++) {
      const uint8_t *digest = d + i * len;
      /* Data in the manifest, or data on the server now: a zero
       * block written behind the bitmap's back is one of these.
       */
      if (!inc->need[i])
        inc->hashed++;
      else if (!zero_digest (inc, w + i, digest) || inc->not_zero[i])
        draw_sample (inc, w + i, digest);
    }
    if (blk_root_add (&r, d, n) == -1) {
      error_at (inc->name, "%s failed", ep->params->digest.name);
      goto out;
    }
  }
  if (blk_root_final (&r, ep->size, inc->root) == -1) {
    error_at (inc->name, "%s failed", ep->params->digest.name);
    goto out;
  }
  if (manifest_rewind (inc->m) == -1)
    goto out;
  inc->next = 0;
  ret = 0;
 out:
  blk_root_free (&r);
  return ret;
}

/* A read of the sample done: hash the block (in the main thread, in
 * source_poll).
 */
static int
sample_read_done (void *opaque, int *error)
{
  struct sample_read *r = opaque;
  struct incremental *inc = r->inc;
  bool zero;

  inc->in_flight--;
  if (*error == 0 &&
      blk_hash_block (inc->ep->params, inc->ctx, r->buf, r->len, r->s->now,
                      &zero) == -1)
    *error = EIO;
  if (*error) {
    if (inc->read_error == 0) {
      inc->read_error = *error;
      inc->error_block = r->s->block;
    }
    return 1;
  }
  /* Read, for bytes-read; the bar counted it as skipped. */
  progress_add (&inc->ep->progress, 0, r->len);
  return 1;
}

/* After the fold: read and hash the sample, over connection 0 with
 * the queue depth of the run, and compare it with the manifest.  A
 * signal stops it as it stops endpoint_run.
 */
static int
check_sample (struct incremental *inc)
{
  struct endpoint *ep = inc->ep;
  const struct blk_params *p = ep->params;
  struct nbd_handle *h = ep->conns[0].h;
  size_t next = 0;

  if (inc->nsample == 0)
    return 0;
  qsort (inc->sample, inc->nsample, sizeof *inc->sample, compare_samples);
  if ((inc->ctx = blk_ctx_new ()) == NULL) {
    error_at (inc->name, "out of memory");
    return -1;
  }
  for (;;) {
    int timeout = -1;

    while (next < inc->nsample && inc->in_flight < ep->requests &&
           inc->read_error == 0 && !stop_signal ()) {
      struct sample *s = &inc->sample[next];
      const uint32_t len = blk_block_len (ep->size, p->block_size, s->block);
      struct sample_read *r = malloc (sizeof *r + len);

      if (r == NULL) {
        error_at (inc->name, "out of memory");
        return -1;
      }
      r->inc = inc;
      r->s = s;
      r->len = len;
      /* libnbd frees r, also when the request cannot be issued. */
      if (nbd_aio_pread (h, r->buf, len, s->block * p->block_size,
                         (nbd_completion_callback) {
                           .callback = sample_read_done, .user_data = r,
                           .free = free }, 0) == -1) {
        error_at (inc->name, "reading the sample: %s", nbd_get_error ());
        return -1;
      }
      inc->in_flight++;
      next++;
    }
    if (inc->in_flight == 0)
      break;
    if (stop_signal ()) {
      const double t = now (), deadline = stop_deadline ();
      if (t >= deadline)
        break;
      timeout = (deadline - t) * 1000 + 1;
    }
    if (source_poll (h, timeout) == -1) {
      error_at (inc->name, "reading the sample: %s", source_error ());
      return -1;
    }
  }
  if (stop_signal ())
    return -1;
  if (inc->read_error) {
    error_at (inc->name, "reading the sample: read at offset %" PRIu64
              ": %s", inc->error_block * p->block_size, strerror (inc->read_error));
    return -1;
  }
  for (size_t k = 0; k < inc->nsample; k++)
    if (memcmp (inc->sample[k].now, inc->sample[k].old, p->digest.len) != 0)
      return missed (inc, inc->sample[k].block, "differs from the manifest "
                     "(it was hashed as one of a sample of the clean "
                     "blocks)");
  inc->sampled = inc->nsample;
  return 0;
}

/* The manifest, checked, and the hash spec it makes. */
static int
open_manifest (struct incremental *inc, const struct hash_spec *spec,
               struct hash_spec *out)
{
  const struct blk_params *p;
  uint8_t root[BLK_DIGEST_MAX];
  uint32_t last;

  if (getrandom (&inc->rng, sizeof inc->rng, 0) != sizeof inc->rng)
    inc->rng = (uint64_t) time (NULL) ^ ((uint64_t) getpid () << 32);
  inc->m = manifest_open (opts->since, input_manifest_env ());
  if (inc->m == NULL)
    return -1;
  if (!manifest_root (inc->m, root)) {
    error_at (opts->since, "it carries no checksum to verify its block "
              "digests by (an older nbdsum --blocks wrote it): make a new "
              "manifest with nbdsum --blocks");
    return -1;
  }
  p = manifest_params (inc->m);
  inc->old_size = manifest_size (inc->m);
  inc->old_nblocks = blk_block_count (inc->old_size, p->block_size);
  last = inc->old_nblocks
    ? blk_block_len (inc->old_size, p->block_size, inc->old_nblocks - 1) : 0;
  if (last && last < p->block_size) {
    struct blk_ctx *ctx = blk_ctx_new ();
    const int r = ctx ? blk_zero_block_digest (p, ctx, last,
                                               inc->short_zero) : -1;
    blk_ctx_free (ctx);
    if (r == -1) {
      error_at (inc->name, "%s failed", p->digest.name);
      return -1;
    }
  }
  if (manifest_check_made (inc->m, spec->digest, spec->block_size) == -1)
    return -1;
  *out = (struct hash_spec) { p->digest.name, p->block_size, NULL };
  return 0;
}

/* A local file: what qemu-img says of its bitmaps. */

struct bitmap_info {
  const char *bitmap;
  char format[32];
  bool found, enabled, in_use;
};

static int
json_error (struct json_reader *r, const char *msg)
{
  snprintf (r->error, sizeof r->error, "line %lu: %s", r->line, msg);
  return -1;
}

/* Skip the value whose first token was just read. */
static int
skip_value (struct json_reader *r)
{
  int depth = 0;

  for (;;) {
    if (r->type == JSON_EOF)
      return json_error (r, "truncated");
    if (json_is (r, '{') || json_is (r, '['))
      depth++;
    else if (json_is (r, '}') || json_is (r, ']'))
      depth--;
    if (depth <= 0)
      return 0;
    if (json_next (r) == -1)
      return -1;
  }
}

/* In an array: 1 with the next element's first token read, 0 at its
 * ']', -1 on errors.  *first is true right after the '['.
 */
static int
next_element (struct json_reader *r, bool *first)
{
  if (json_next (r) == -1)
    return -1;
  if (json_is (r, ']'))
    return 0;
  if (!*first) {
    if (!json_is (r, ','))
      return json_error (r, "expected ',' or ']'");
    if (json_next (r) == -1)
      return -1;
  }
  *first = false;
  return 1;
}

/* One of "bitmaps": {"flags": [...], "name": ..., "granularity": ...}. */
static int
read_bitmap (struct json_reader *r, struct bitmap_info *bi)
{
  bool first = true, match = false, enabled = false, in_use = false;
  char key[64];
  int k, e;

  if (!json_is (r, '{'))
    return skip_value (r);
  while ((k = json_next_key (r, &first, key, sizeof key)) == 1) {
    if (json_next (r) == -1)
      return -1;
    if (strcmp (key, "name") == 0 && r->type == JSON_STRING)
      match = strcmp (r->text, bi->bitmap) == 0;
    else if (strcmp (key, "flags") == 0 && json_is (r, '[')) {
      bool f = true;
      while ((e = next_element (r, &f)) == 1) {
        if (r->type != JSON_STRING)
          return json_error (r, "a flag that is not a string");
        enabled |= strcmp (r->text, "auto") == 0;
        in_use |= strcmp (r->text, "in-use") == 0;
      }
      if (e == -1)
        return -1;
    }
    else if (skip_value (r) == -1)
      return -1;
  }
  if (k == -1)
    return -1;
  if (match) {
    bi->found = true;
    bi->enabled = enabled;
    bi->in_use = in_use;
  }
  return 0;
}

/* The object whose '{' was just read, at level 0 (the image),
 * 1 ("format-specific") or 2 (its "data", which has "bitmaps").
 */
static int
read_info (struct json_reader *r, struct bitmap_info *bi, int level)
{
  static const char *const path[] = { "format-specific", "data" };
  bool first = true;
  char key[128];
  int k, e;

  if (!json_is (r, '{'))
    return skip_value (r);
  while ((k = json_next_key (r, &first, key, sizeof key)) == 1) {
    if (json_next (r) == -1)
      return -1;
    if (level == 0 && strcmp (key, "format") == 0 &&
        r->type == JSON_STRING)
      snprintf (bi->format, sizeof bi->format, "%s", r->text);
    else if (level < 2 && strcmp (key, path[level]) == 0) {
      if (read_info (r, bi, level + 1) == -1)
        return -1;
    }
    else if (level == 2 && strcmp (key, "bitmaps") == 0 &&
             json_is (r, '[')) {
      bool f = true;
      while ((e = next_element (r, &f)) == 1)
        if (read_bitmap (r, bi) == -1)
          return -1;
      if (e == -1)
        return -1;
    }
    else if (skip_value (r) == -1)
      return -1;
  }
  return k;
}

/* Run qemu-img info --output=json -U on the file at path (absolute):
 * 0 with bi filled in, or -1 (error printed).
 */
static int
qemu_img_info (const char *name, const char *path, struct bitmap_info *bi)
{
  const char *argv[8] = { "qemu-img", "info", "--output=json", "-U" };
  size_t n = 4;
  struct json_reader r = { 0 };
  sigset_t saved;
  int fds[2], status, parsed = -1;
  FILE *fp;
  pid_t pid;

  argv[n] = path;
  if (pipe2 (fds, O_CLOEXEC) == -1) {
    error_at (name, "pipe: %m");
    return -1;
  }
  stop_signals_block (&saved);
  pid = fork ();
  if (pid == 0) {
    stop_signals_default ();
    stop_signals_restore (&saved);
    if (dup2 (fds[1], STDOUT_FILENO) == -1)
      _exit (126);
    execvp (argv[0], (char **) argv);
    _exit (127);
  }
  stop_signals_restore (&saved);
  close (fds[1]);
  if (pid == -1) {
    close (fds[0]);
    error_at (name, "fork: %m");
    return -1;
  }
  if ((fp = fdopen (fds[0], "r")) == NULL)
    close (fds[0]);
  else if (json_reader_init (&r, fp, 65536) == 0 && json_next (&r) == 0)
    parsed = read_info (&r, bi, 0);
  if (fp) {
    /* The rest, so that qemu-img is never stopped by a full pipe. */
    while (getc (fp) != EOF)
      ;
    fclose (fp);
  }
  while (waitpid (pid, &status, 0) == -1)
    if (errno != EINTR) {
      error_at (name, "waitpid: %m");
      json_reader_free (&r);
      return -1;
    }
  if (stop_signal ()) {
    json_reader_free (&r);
    return -1;
  }
  if (WIFEXITED (status) && WEXITSTATUS (status) == 127)
    error_at (name, "--since of a local file runs qemu-img and qemu-nbd, "
              "which are not installed (Debian: qemu-utils)");
  else if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    error_at (name, "qemu-img info failed: it cannot say whether the "
              "image's dirty bitmap is sound");
  else if (parsed == -1)
    error_at (name, "cannot read what qemu-img info says: %s",
              r.text ? r.error : "out of memory");
  else {
    json_reader_free (&r);
    return 0;
  }
  json_reader_free (&r);
  return -1;
}

/* A local file for --since: a qcow2 image whose bitmap is enabled and
 * consistent, or refused.
 */
static int
check_local_bitmap (const char *name)
{
  struct bitmap_info bi = { .bitmap = opts->dirty_bitmap };
  CLEANUP_FREE char *abs = NULL;
  struct stat st;

  /* Not realpath: qemu reads the path as given (see absolute_path). */
  if (stat (name, &st) == -1 || (abs = absolute_path (name)) == NULL) {
    error_at (name, "%m");
    return -1;
  }
  if (!S_ISREG (st.st_mode) && !S_ISBLK (st.st_mode)) {
    error_at (name, "not a regular file or block device: --since needs a "
              "qcow2 image with a dirty bitmap");
    return -1;
  }
  if (qemu_img_info (name, abs, &bi) == -1)
    return -1;
  if (strcmp (bi.format, "qcow2") != 0) {
    error_at (name, "a %s image has no dirty bitmaps: --since of a local "
              "file needs a qcow2 image with a persistent bitmap "
              "(qemu-img bitmap --add --enable)",
              bi.format[0] ? bi.format : "non-qcow2");
    return -1;
  }
  if (!bi.found) {
    error_at (name, "it has no dirty bitmap '%s' (qemu-img bitmap --add "
              "--enable starts one, when the manifest is made)",
              opts->dirty_bitmap);
    return -1;
  }
  if (bi.in_use) {
    error_at (name, "the dirty bitmap '%s' is in use or inconsistent: "
              "qemu has the image open for writing, or stopped without "
              "saving the bitmap (a crash); after a crash, start a new "
              "chain: a full run with --blocks, and a new bitmap",
              opts->dirty_bitmap);
    return -1;
  }
  if (!bi.enabled) {
    error_at (name, "the dirty bitmap '%s' is disabled: it records no "
              "writes, so the blocks it calls clean may have changed; run "
              "without --since (with --blocks for a new manifest)",
              opts->dirty_bitmap);
    return -1;
  }
  return 0;
}

/* Connected: the contexts --since needs, and sizes it can trust. */
static int
check_server (struct incremental *inc)
{
  struct nbd_handle *h = inc->ep->conns[0].h;

  if (nbd_can_meta_context (h, inc->context) != 1) {
    error_at (inc->name, "the server exports no dirty bitmap '%s' (%s): "
              "serve the image with qemu-nbd -A -B %s, or export the "
              "bitmap from qemu's NBD server", opts->dirty_bitmap,
              inc->context, opts->dirty_bitmap);
    return -1;
  }
  if (inc->depth_context && nbd_can_meta_context (h, DEPTH_CONTEXT) != 1) {
    error_at (inc->name, "the server does not offer %s, so nbdsum cannot "
              "tell the blocks that come from a backing file, whose writes "
              "the bitmap does not see: serve the image with qemu-nbd -A "
              "(qemu's NBD server: allocation-depth), or give "
              "--immutable-backing if it has no backing file or its "
              "backing files never change", DEPTH_CONTEXT);
    return -1;
  }
  if (nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) != 1) {
    error_at (inc->name, "the server does not offer %s: nbdsum cannot "
              "check the bitmap against the image's allocation",
              LIBNBD_CONTEXT_BASE_ALLOCATION);
    return -1;
  }
  if (inc->ep->size < inc->old_size) {
    error_at (inc->name, "%" PRIu64 " bytes, fewer than the %" PRIu64 " of "
              "the manifest: a dirty bitmap does not record what a shrink "
              "discards, and nbdsum cannot know the smallest size the "
              "image went through; run without --since, with --blocks to "
              "start a new chain", inc->ep->size, inc->old_size);
    return -1;
  }
  if (inc->ep->size > inc->old_size)
    notice_at (inc->name, "%" PRIu64 " bytes, %" PRIu64 " in the manifest: "
               "the blocks past its size, and its last if it was short, "
               "are hashed", inc->ep->size, inc->old_size);
  return 0;
}

static void
incremental_close (struct incremental *inc)
{
  input_close (inc->client);
  manifest_close (inc->m);
  blk_table_free (inc->zeros);
  blk_ctx_free (inc->ctx);
  free (inc->context);
  free (inc->old);
  free (inc->need);
  free (inc->not_zero);
  free (inc);
}

static int
since_checksum (struct input *in, uint8_t *root)
{
  struct incremental *inc = container_of (in, struct incremental, in);

  memcpy (root, inc->root, in->params->digest.len);
  return 0;
}

static int
since_digests (struct input *in, uint64_t first, uint64_t count,
               uint8_t *out)
{
  return incremental_digests (container_of (in, struct incremental, in),
                              first, count, out);
}

static void
since_close (struct input *in)
{
  incremental_close (container_of (in, struct incremental, in));
}

static const struct input_ops since_input_ops = {
  .method = "client-side",
  .checksum = since_checksum,
  .digests = since_digests,
  .close = since_close,
};

struct input *
since_input_open (const char *name, const struct hash_spec *spec)
{
  struct incremental *inc = calloc (1, sizeof *inc);
  struct hash_spec hs;
  size_t len;

  if (inc == NULL) {
    error_at (name, "out of memory");
    return NULL;
  }
  inc->in.ops = &since_input_ops;
  inc->in.name = inc->name = name;
  if (open_manifest (inc, spec, &hs) == -1)
    goto err;
  if (asprintf (&inc->context, DIRTY_BITMAP_PREFIX "%s",
                opts->dirty_bitmap) == -1) {
    inc->context = NULL;
    error_at (name, "out of memory");
    goto err;
  }
  /* The user's word that no backing file changes, or the depth. */
  if (!opts->immutable_backing)
    inc->depth_context = DEPTH_CONTEXT;
  len = manifest_params (inc->m)->digest.len;
  if ((inc->old = malloc (WINDOW * len)) == NULL ||
      (inc->need = malloc (WINDOW * sizeof *inc->need)) == NULL ||
      (inc->not_zero = malloc (WINDOW * sizeof *inc->not_zero)) == NULL) {
    error_at (name, "out of memory");
    goto err;
  }
  if (!is_uri (name) && !local_command_argv (name)) {
    if (check_local_bitmap (name) == -1 ||
        (inc->src = source_open_bitmap (name, opts->dirty_bitmap)) == NULL)
      goto err;
  }
  else if ((inc->src = source_open (name)) == NULL)
    goto err;
  inc->src->meta_contexts[0] = inc->context;
  inc->src->meta_contexts[1] = inc->depth_context;
  inc->select = (struct client_select) { select_clean, inc };
  /* It takes src, and closes it on error. */
  if ((inc->client = client_input_open (inc->src, &hs, NULL,
                                        &inc->select)) == NULL)
    goto err;
  inc->ep = client_input_endpoint (inc->client);
  if (check_server (inc) == -1)
    goto err;
  if ((inc->zeros = blk_table_new (inc->ep->params, inc->ep->size)) == NULL) {
    error_at (name, "out of memory");
    goto err;
  }
  blk_table_lookup (inc->zeros, 0, 0, NULL, NULL, &inc->zeros_snapshot);
  if (endpoint_run (inc->ep) == -1 || fold_root (inc) == -1 ||
      check_sample (inc) == -1)
    goto err;
  inc->in.params = inc->ep->params;
  inc->in.size = inc->ep->size;
  inc->in.nblocks = inc->ep->nblocks;
  inc->in.about.incremental = true;
  inc->in.about.hashed_blocks = inc->hashed;
  inc->in.about.sampled_blocks = inc->sampled;
  inc->in.about.read_bytes = atomic_load (&inc->ep->progress.data);
  return &inc->in;

 err:
  incremental_close (inc);
  return NULL;
}
