/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --since: a sample of the clean data blocks (the last one,
 * and others drawn uniformly), read again and compared with the
 * manifest (since-sample.c), for input-since.c alone.
 */
#ifndef NBDSUM_SINCE_SAMPLE_H
#define NBDSUM_SINCE_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blkhash.h"
#include "endpoint.h"

/* Clean data blocks hashed and compared with the manifest, per run. */
#define SAMPLE_MAX 64

struct since_sample {
  struct sample_block {
    uint64_t block;
    uint8_t old[BLK_DIGEST_MAX];        /* the manifest's digest */
    uint8_t now[BLK_DIGEST_MAX];        /* read and hashed */
  } blocks[SAMPLE_MAX];
  size_t n;                     /* blocks[] in use, once checked */
  uint64_t seen;                /* clean data blocks offered */
  uint64_t rng;                 /* splitmix64 state */
  /* The last block offered, held out of the draw until the next. */
  struct sample_block last;
  /* Reading it: the requests in flight, and the first failure; the
   * blocks are hashed here with ctx when they are read (not their
   * digests).
   */
  struct blk_ctx *ctx;
  const struct blk_params *params;
  struct progress *progress;
  unsigned in_flight;
  int read_error;
  uint64_t error_block;
};

/* Start an empty sample, seeded by getrandom(). */
extern void since_sample_init (struct since_sample *s);
/* Offer clean data block b, whose digest in the manifest is old
 * (len bytes), in block order: the last one offered is kept, and of
 * the others SAMPLE_MAX - 1, each with the same probability.
 */
extern void since_sample_offer (struct since_sample *s, uint64_t b,
                                const uint8_t *old, size_t len);
/* Read the sample's digests from the blkhash view on ep's first
 * connection (nbdsum's private filter; unless view is false: read the
 * blocks from the image and hash them), with ep's requests in flight (a signal stops it as it stops endpoint_run).
 * Returns 0 with *differs set to whether a block differs from the
 * manifest (and *block the first that does), or -1 (error printed,
 * name's).
 */
extern int since_sample_check (struct since_sample *s, struct endpoint *ep,
                               bool view, const char *name, bool *differs,
                               uint64_t *block);
extern void since_sample_free (struct since_sample *s);

#endif /* NBDSUM_SINCE_SAMPLE_H */
