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
 * blocks are hashed client-side (clientside.c, its connections and
 * queue depth), and among them holes are not read.  A block is hashed
 * when it overlaps a dirty extent or when its length is not the one
 * it had in the manifest (the image was resized: the grown tail, the
 * old short last block, the new one); every other digest is the
 * manifest's.
 *
 * Memory: the block table holds the digests of the blocks hashed, and
 * the merge one window of digests; the manifest is read as it goes,
 * never held (manifest.c).  The one thing nbdsum cannot check is that
 * the bitmap started when the manifest's image was taken.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "cleanup.h"
#include "endpoint.h"
#include "incremental.h"
#include "manifest.h"
#include "messages.h"
#include "method.h"
#include "minmax.h"
#include "signals.h"
#include "source.h"

/* qemu's dirty bitmap context: flag 1 marks dirty extents. */
#define DIRTY_BITMAP_PREFIX "qemu:dirty-bitmap:"
#define DIRTY_FLAG 1

/* Blocks merged per round. */
#define WINDOW 65536

struct incremental {
  const char *name;
  struct manifest *m;
  struct source *src;
  struct endpoint *ep;
  char *context;                /* qemu:dirty-bitmap:NAME */
  struct cs_select select;
  uint64_t old_size, old_nblocks;

  /* incremental_digests: the next block, and a window of the
   * manifest's digests.
   */
  uint64_t next;
  uint8_t *old;
  bool *need;

  uint8_t root[BLK_DIGEST_MAX];
  uint64_t hashed;              /* blocks not taken from the manifest */
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

struct dirty_walk {
  struct incremental *inc;
  uint64_t first, count;        /* the segment, in blocks */
  bool *skip;
  uint64_t covered;             /* end of the bytes described */
};

static int
dirty_cb (void *opaque, const char *metacontext, uint64_t offset,
          uint32_t *entries, size_t nr_entries, int *error)
{
  struct dirty_walk *w = opaque;
  const uint32_t bs = w->inc->ep->params->block_size;

  if (strcmp (metacontext, w->inc->context) != 0)
    return 0;
  for (size_t i = 0; i + 1 < nr_entries; i += 2) {
    const uint64_t end = offset + entries[i];
    if ((entries[i + 1] & DIRTY_FLAG) && entries[i] > 0) {
      /* Every block with a dirty byte, within the segment. */
      const uint64_t lo = MAX (offset / bs, w->first);
      const uint64_t hi = MIN ((end - 1) / bs + 1, w->first + w->count);
      for (uint64_t b = lo; b < hi; b++)
        w->skip[b - w->first] = false;
    }
    offset = end;
  }
  if (offset > w->covered)
    w->covered = offset;
  return 0;
}

/* cs_select: skip the blocks the manifest has and the bitmap says are
 * clean.
 */
static int
select_clean (void *opaque, struct endpoint *ep, struct nbd_handle *h,
              uint64_t first, uint64_t count, bool *skip)
{
  struct incremental *inc = opaque;
  const uint32_t bs = ep->params->block_size;
  struct dirty_walk w = { inc, first, count, skip, first * bs };
  const uint64_t end = MIN ((first + count) * bs, ep->size);
  bool any = false;

  for (uint64_t i = 0; i < count; i++)
    any |= skip[i] = reusable (inc, first + i);
  if (!any)
    return 0;
  /* Missing or short answers never pass for clean: ask until the
   * bitmap has described the whole segment.
   */
  while (w.covered < end) {
    const uint64_t before = w.covered;
    if (source_block_status (h, end - w.covered, w.covered,
                             (nbd_extent_callback) {
                               .callback = dirty_cb, .user_data = &w })
        == -1) {
      endpoint_fail (ep, "block status of %s: %s", inc->context,
                     source_error ());
      return -1;
    }
    if (w.covered <= before) {
      endpoint_fail (ep, "the server did not describe %s at offset %"
                     PRIu64, inc->context, before);
      return -1;
    }
  }
  return 0;
}

/* The digests of blocks [first, first+count) now: hashed, or the
 * manifest's.  Calls go forward from block 0, as manifest_digests.
 */
int
incremental_digests (struct incremental *inc, uint64_t first,
                     uint64_t count, uint8_t *out)
{
  const size_t len = inc->ep->params->digest.len;

  while (count > 0) {
    const uint64_t n = MIN (count, (uint64_t) WINDOW);
    const uint64_t old_n = first < inc->old_nblocks
      ? MIN (n, inc->old_nblocks - first) : 0;

    if (first != inc->next) {
      error_at (inc->name, "blocks asked out of order");
      return -1;
    }
    client_side_lookup (inc->ep, first, n, out, inc->need);
    if (old_n && manifest_digests (inc->m, first, old_n, inc->old) == -1)
      return -1;
    for (uint64_t i = 0; i < n; i++) {
      if (!inc->need[i])
        continue;
      if (i >= old_n || !reusable (inc, first + i)) {
        error_at (inc->name, "block %" PRIu64 " was not hashed", first + i);
        return -1;
      }
      memcpy (out + i * len, inc->old + i * len, len);
    }
    inc->next = first += n;
    out += n * len;
    count -= n;
  }
  return 0;
}

/* Fold every digest into the root, then rewind for the callers. */
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
    for (uint64_t i = 0; i < n; i++)
      inc->hashed += !inc->need[i];
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

/* The manifest, checked, and the hash spec it makes. */
static int
open_manifest (struct incremental *inc, const struct hash_spec *spec,
               struct hash_spec *out)
{
  uint8_t root[BLK_DIGEST_MAX];

  if ((inc->m = manifest_open (opts->since)) == NULL)
    return -1;
  if (!manifest_root (inc->m, root)) {
    error_at (opts->since, "it carries no checksum to verify its block "
              "digests by (an older nbdsum --blocks wrote it): make a new "
              "manifest with nbdsum --blocks");
    return -1;
  }
  inc->old_size = manifest_size (inc->m);
  inc->old_nblocks = blk_block_count (inc->old_size,
                                      manifest_params (inc->m)->block_size);
  return manifest_hash_spec (inc->m, spec, out);
}

struct incremental *
incremental_open (const char *name, const struct hash_spec *spec)
{
  struct incremental *inc = calloc (1, sizeof *inc);
  struct hash_spec hs;
  size_t len;

  if (inc == NULL) {
    error_at (name, "out of memory");
    return NULL;
  }
  inc->name = name;
  if (open_manifest (inc, spec, &hs) == -1)
    goto err;
  if (asprintf (&inc->context, DIRTY_BITMAP_PREFIX "%s",
                opts->dirty_bitmap) == -1) {
    inc->context = NULL;
    error_at (name, "out of memory");
    goto err;
  }
  len = manifest_params (inc->m)->digest.len;
  if ((inc->old = malloc (WINDOW * len)) == NULL ||
      (inc->need = malloc (WINDOW * sizeof *inc->need)) == NULL) {
    error_at (name, "out of memory");
    goto err;
  }
  if ((inc->src = source_open (name)) == NULL)
    goto err;
  inc->src->meta_context = inc->context;
  inc->select = (struct cs_select) { select_clean, inc };
  if ((inc->ep = client_side_open (inc->src, &hs, NULL,
                                   &inc->select)) == NULL) {
    source_close (inc->src);
    inc->src = NULL;
    goto err;
  }
  if (nbd_can_meta_context (inc->ep->conns[0].h, inc->context) != 1) {
    error_at (name, "the server exports no dirty bitmap '%s' (%s): serve "
              "the image with qemu-nbd -B %s, or export the bitmap from "
              "qemu's NBD server", opts->dirty_bitmap, inc->context,
              opts->dirty_bitmap);
    goto err;
  }
  if (inc->ep->size != inc->old_size)
    notice_at (name, "%" PRIu64 " bytes, %" PRIu64 " in the manifest: the "
               "blocks past the shorter size, and the last of each, are "
               "hashed", inc->ep->size, inc->old_size);
  if (endpoint_run (inc->ep) == -1 || fold_root (inc) == -1)
    goto err;
  return inc;

 err:
  incremental_close (inc);
  return NULL;
}

void
incremental_close (struct incremental *inc)
{
  if (inc == NULL)
    return;
  if (inc->ep)
    input_close (inc->ep);
  manifest_close (inc->m);
  free (inc->context);
  free (inc->old);
  free (inc->need);
  free (inc);
}

const struct endpoint *
incremental_endpoint (const struct incremental *inc)
{
  return inc->ep;
}

const uint8_t *
incremental_root (const struct incremental *inc)
{
  return inc->root;
}

uint64_t
incremental_hashed (const struct incremental *inc)
{
  return inc->hashed;
}
