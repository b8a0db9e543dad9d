/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: OpenSSL digests looked up by name. */
#ifndef BLKHASH_DIGEST_H
#define BLKHASH_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>

/* Longest digest name stored in the view header (NUL padded). */
#define BLK_DIGEST_NAME_MAX 64

struct blk_digest {
  EVP_MD *md;                      /* fetched once, shared read-only */
  size_t len;                      /* digest length in bytes */
  bool xof;                        /* extendable output, cut at len */
  char name[BLK_DIGEST_NAME_MAX];  /* canonical lower-case name */
};

/* Look up a digest by OpenSSL name.  Returns NULL on success, else a
 * static message saying why the name is unusable.  Extendable-output
 * digests are shake128 (16 bytes) and shake256 (32 bytes), OpenSSL
 * 3.0's default lengths, which blksum uses.
 */
extern const char *blk_digest_init (struct blk_digest *d, const char *name);
extern void blk_digest_free (struct blk_digest *d);
/* Whether names a and b are one digest (sha-256 is sha256); false if
 * either is unknown.
 */
extern bool blk_digest_same (const char *a, const char *b);

/* Finish the digest in ctx into out (d->len bytes).  Returns 0 or -1
 * (OpenSSL failure).
 */
extern int blk_digest_final (const struct blk_digest *d, EVP_MD_CTX *ctx,
                             uint8_t *out);

/* Call fn for every digest OpenSSL provides that blk_digest_init
 * accepts, with all its names, lower-case, joined by ", ", and its
 * length.
 */
extern void blk_digest_list (void (*fn) (const char *names, size_t len,
                                         void *opaque),
                             void *opaque);

#endif /* BLKHASH_DIGEST_H */
