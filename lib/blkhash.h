/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the blkhash construction.
 *
 * digest = H( H(b1) || ... || H(bn) || le64(size) )
 *
 * blocks of block_size bytes, the last one hashed at its real length,
 * a full block of zeros hashed once (the zero digest) and reused.
 */
#ifndef BLKHASH_BLKHASH_H
#define BLKHASH_BLKHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "minmax.h"

#define BLK_DEFAULT_DIGEST "sha256"
#define BLK_DEFAULT_BLOCK_SIZE (64 * 1024)
/* Block sizes: any multiple of 4K from 4K to 16M, powers of two or
 * not (blksum takes 96K as well as 64K).
 */
#define BLK_MIN_BLOCK_SIZE 4096
#define BLK_MAX_BLOCK_SIZE (16 * 1024 * 1024)
#define BLK_BLOCK_SIZE_RULE "block size must be a multiple of 4K from 4K to 16M"

/* The largest image hashed unless told otherwise (nbdsum --max-size,
 * the filter's blkhash-max-size; 0 there: no limit): about a quarter
 * of an hour of one core's work on an image of holes, measured in
 * bench/RESULTS.md.  A blkhash checksum of holes costs the outer hash
 * over its block digests (0.8 s per TiB at sha256/64K: 1 PiB); a
 * plain digest hashes every byte (11 minutes per TiB of sha256).
 */
#define BLK_MAX_SIZE (UINT64_C (1) << 50)
#define BLK_MAX_PLAIN_SIZE (UINT64_C (1) << 40)

/* The zero digest repeated, to fold runs of holes in few updates. */
#define BLK_ZERO_RUN_BYTES (16 * 1024)

struct blk_params {
  struct blk_digest digest;
  uint32_t block_size;
  uint8_t zero_digest[BLK_DIGEST_MAX];   /* H(block_size zero bytes) */
  uint8_t *zero_run;                      /* zero_run_count of them */
  size_t zero_run_count;
};

/* Returns NULL on success, else a static message. */
extern const char *blk_check_block_size (uint64_t block_size);
/* Returns NULL on success, else a static message.  Not to be copied:
 * blk_params_free frees what it holds.
 */
extern const char *blk_params_init (struct blk_params *p, const char *digest,
                                    uint64_t block_size);
extern void blk_params_free (struct blk_params *p);

static inline uint64_t
blk_block_count (uint64_t size, uint32_t block_size)
{
  return size / block_size + (size % block_size != 0);
}

/* Whole blocks in bytes, at least one: the blocks of a step of work
 * of about bytes.
 */
static inline uint64_t
blk_blocks_per (uint64_t bytes, uint32_t block_size)
{
  return MAX (bytes / block_size, UINT64_C (1));
}

/* Length of block i of an image of size bytes. */
static inline uint32_t
blk_block_len (uint64_t size, uint32_t block_size, uint64_t i)
{
  return MIN (size - i * block_size, (uint64_t) block_size);
}

/* Digest of one block (len <= block_size) at its real length.  A full
 * zero block gets the cached zero digest without hashing.  *zero is set
 * when the block was all zeros.  Returns 0 or -1 (digest failure).
 */
extern int blk_hash_block (const struct blk_params *p, struct blk_ctx *ctx,
                           const void *buf, size_t len,
                           uint8_t *out, bool *zero);

/* One block fed in pieces, so a large block need not be in memory at
 * once.  Leading zero pieces are only counted: a block that stays all
 * zero is never hashed.
 */
struct blk_block_hasher {
  const struct blk_params *p;
  struct blk_ctx *ctx;
  uint64_t len;                 /* bytes fed so far */
  uint64_t pending_zero;        /* leading zero bytes not hashed yet */
  bool started;                 /* ctx holds a digest in progress */
};

extern void blk_block_begin (struct blk_block_hasher *bh,
                             const struct blk_params *p, struct blk_ctx *ctx);
extern int blk_block_update (struct blk_block_hasher *bh, const void *buf,
                             size_t len);
extern int blk_block_final (struct blk_block_hasher *bh, uint8_t *out,
                            bool *zero);

/* Digest of len zero bytes, for holes (len <= block_size). */
extern int blk_zero_block_digest (const struct blk_params *p, struct blk_ctx *ctx,
                                  size_t len, uint8_t *out);

/* The outer hash over block digests and the image size. */
struct blk_root {
  struct blk_ctx *ctx;
  const struct blk_params *p;
};

extern int blk_root_init (struct blk_root *r, const struct blk_params *p);
extern int blk_root_reset (struct blk_root *r);
extern int blk_root_add (struct blk_root *r, const uint8_t *digests,
                         size_t count);
/* Finishes on a copy, so r can still be extended or reset. */
extern int blk_root_final (struct blk_root *r, uint64_t size, uint8_t *out);
extern void blk_root_free (struct blk_root *r);

/* Sequential construction over a byte stream (stdin, reference checks). */
struct blk_stream {
  const struct blk_params *p;
  struct blk_root root;
  struct blk_ctx *ctx;
  uint8_t *buf;                 /* one block */
  size_t fill;
  uint64_t size;
};

extern int blk_stream_init (struct blk_stream *s, const struct blk_params *p);
extern int blk_stream_update (struct blk_stream *s, const void *data,
                              size_t len);
extern int blk_stream_final (struct blk_stream *s, uint8_t *out);
extern void blk_stream_free (struct blk_stream *s);

#endif /* BLKHASH_BLKHASH_H */
