/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --since: the input's state, for input-since.c (the manifest's
 * digests merged with those hashed) and since-server.c (which blocks
 * changed on the server, and their digests) alone.
 */
#ifndef NBDSUM_SINCE_INTERNAL_H
#define NBDSUM_SINCE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "blkhash.h"
#include "endpoint.h"
#include "input-kinds.h"
#include "since-sample.h"

struct incremental {
  struct input in;
  const char *name;
  struct manifest *m;
  struct source *src;           /* the server, with the bitmap */
  struct nbd_handle *status;    /* on it: block status, for every thread */
  pthread_mutex_t status_lock;
  struct input *view;           /* the private filter's view of it */
  /* Or, on a server that admits one client at a time, hashing here on
   * the connection that reads the bitmap (input-client.c).
   */
  struct input *client;
  struct client_select select;
  struct endpoint *ep;          /* its connections */
  struct blk_table *table;      /* digests of the blocks hashed */
  uint64_t snapshot;
  uint64_t seg_blocks, nsegs, read_blocks;
  atomic_uint_fast64_t next_seg;
  char *context;                /* qemu:dirty-bitmap:NAME */
  const char *depth_context;    /* qemu:allocation-depth, or NULL */
  uint64_t old_size, old_nblocks;
  /* The digest of the manifest's short last block if it were zeros. */
  uint8_t short_zero[BLK_DIGEST_MAX];

  /* Clean blocks that the server says read as zeros. */
  struct blk_table *zeros;
  uint64_t zeros_snapshot;

  /* The sample, drawn as fold_root goes (since-sample.c). */
  struct since_sample sample;

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

/* May block b's digest come from the manifest, unless it is dirty? */
static inline bool
reusable (const struct incremental *inc, uint64_t b)
{
  const struct endpoint *ep = inc->ep;
  const uint32_t bs = ep->params->block_size;

  return b < inc->old_nblocks &&
    blk_block_len (inc->old_size, bs, b) == blk_block_len (ep->size, bs, b);
}

/* since-server.c: open the server with the bitmap, and what hashes
 * the blocks it says changed (the private filter's view, or the
 * bitmap's connection: inc->client), on inc->ep, hashing nothing yet.
 * Returns 0, or -1 (error printed).
 */
extern int since_server_open (struct incremental *inc,
                              const struct hash_spec *hs);

#endif /* NBDSUM_SINCE_INTERNAL_H */
