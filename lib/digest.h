/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: digests looked up by name (OpenSSL's, and BLAKE3
 * from libblake3 where configure found it), and a context that runs
 * either kind.
 */
#ifndef BLKHASH_DIGEST_H
#define BLKHASH_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>

/* Longest digest name stored in the view header (NUL padded). */
#define BLK_DIGEST_NAME_MAX 64
/* Longest digest in bytes, of any kind. */
#define BLK_DIGEST_MAX EVP_MAX_MD_SIZE

struct blk_digest {
  EVP_MD *md;                      /* fetched once, shared read-only;
                                    * NULL for blake3 */
  bool blake3;                     /* libblake3, not OpenSSL */
  size_t len;                      /* digest length in bytes */
  bool xof;                        /* extendable output, cut at len */
  char name[BLK_DIGEST_NAME_MAX];  /* canonical lower-case name */
};

/* Look up a digest by name: blake3 (32 bytes, the length blksum
 * uses) or an OpenSSL name.  Returns NULL on success, else a static
 * message saying why the name is unusable.  Extendable-output digests
 * are shake128 (16 bytes) and shake256 (32 bytes), OpenSSL 3.0's
 * default lengths, which blksum uses.
 */
extern const char *blk_digest_init (struct blk_digest *d, const char *name);
extern void blk_digest_free (struct blk_digest *d);
/* Whether names a and b are one digest (sha-256 is sha256); false if
 * either is unknown.
 */
extern bool blk_digest_same (const char *a, const char *b);

/* Whether this build has BLAKE3, and blk_digest_init's message when
 * it has not (to tell it from a malformed name).
 */
extern bool blk_digest_have_blake3 (void);
extern const char blk_digest_no_blake3[];

/* A digest in progress.  One per thread; the digest it runs is set by
 * blk_ctx_init and must outlive it.  All return 0, or -1 on an OpenSSL
 * failure (libblake3 cannot fail).
 */
struct blk_ctx;

extern struct blk_ctx *blk_ctx_new (void);   /* NULL, errno ENOMEM */
extern void blk_ctx_free (struct blk_ctx *ctx);
/* Start a new digest of kind d, forgetting any in progress. */
extern int blk_ctx_init (struct blk_ctx *ctx, const struct blk_digest *d);
extern int blk_ctx_update (struct blk_ctx *ctx, const void *buf, size_t len);
/* Finish into out (d->len bytes).  ctx needs blk_ctx_init again. */
extern int blk_ctx_final (struct blk_ctx *ctx, uint8_t *out);
/* Make dst a copy of the digest in progress in src. */
extern int blk_ctx_copy (struct blk_ctx *dst, const struct blk_ctx *src);

/* Call fn for every digest blk_digest_init accepts (blake3 first when
 * built with it, then what OpenSSL provides), with all its names,
 * lower-case, joined by ", ", and its length.
 */
extern void blk_digest_list (void (*fn) (const char *names, size_t len,
                                         void *opaque),
                             void *opaque);

#endif /* BLKHASH_DIGEST_H */
