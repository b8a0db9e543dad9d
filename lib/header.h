/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the view header (see nbdkit-blkhash-filter(1)). */
#ifndef BLKHASH_HEADER_H
#define BLKHASH_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "digest.h"

#define BLK_VIEW_MAGIC "BLKHASH1"
#define BLK_VIEW_VERSION 1
#define BLK_VIEW_HEADER_SIZE 4096
#define BLK_VIEW_ROOT_OFFSET 4096
#define BLK_VIEW_DIGESTS_OFFSET 8192

/* The plain-digest view NAME@digest:ALG has the same header with its
 * own magic: the digest of the whole content at 4096, then one byte
 * per span of the image (1: hashed), so that CACHE of span bytes
 * drives the work in steps.
 */
#define BLK_PLAIN_MAGIC "BLKPLAN1"
#define BLK_PLAIN_SPAN_SIZE (1024 * 1024)

/* The bmap view NAME@bmap: the same header with its own magic and
 * spans as the plain-digest view's; the rest is lib/bmap.h's.
 */
#define BLK_BMAP_MAGIC "BLKBMAP1"

/* Flags at 120 (older headers: zero there).  At 128, 64 bytes: the
 * nonce the view's name carried (",nonce=HEX"), its hex digits, NUL
 * padded; zeros for a name without one.
 */
/* The server refuses the image's own export (blkhash-views-only). */
#define BLK_VIEW_FLAG_VIEWS_ONLY 1

#define BLK_HEADER_NONCE_MAX 64

struct blk_header {
  uint64_t image_size;
  uint64_t block_count;
  uint32_t block_size;
  uint32_t digest_len;
  char digest_name[BLK_DIGEST_NAME_MAX + 1];
  bool plain;                   /* BLKPLAN1: block_size is the span */
  bool bmap;                    /* BLKBMAP1: the same (and plain) */
  uint32_t flags;               /* BLK_VIEW_FLAG_* */
  char nonce[BLK_HEADER_NONCE_MAX + 1];   /* "" when none */
};

/* Fill h from the image size, block size and digest. */
extern void blk_header_init (struct blk_header *h, uint64_t image_size,
                             uint32_t block_size, const char *digest_name,
                             uint32_t digest_len);

/* Fill h for the plain-digest view of an image (spans of
 * BLK_PLAIN_SPAN_SIZE).
 */
extern void blk_plain_header_init (struct blk_header *h, uint64_t image_size,
                                   const char *digest_name,
                                   uint32_t digest_len);

/* Fill h for the bmap view of an image (spans as the plain view's). */
extern void blk_bmap_header_init (struct blk_header *h, uint64_t image_size,
                                  const char *digest_name,
                                  uint32_t digest_len);

/* Encode into BLK_VIEW_HEADER_SIZE bytes. */
extern void blk_header_encode (const struct blk_header *h, uint8_t *buf);

/* Decode and validate len bytes (at least 120).  Returns NULL, or a
 * static message naming the first problem.
 */
extern const char *blk_header_decode (const uint8_t *buf, size_t len,
                                      struct blk_header *h);

/* The same for a plain-digest view's header (BLKPLAN1). */
extern const char *blk_plain_header_decode (const uint8_t *buf, size_t len,
                                            struct blk_header *h);

/* The same for a bmap view's header (BLKBMAP1). */
extern const char *blk_bmap_header_decode (const uint8_t *buf, size_t len,
                                           struct blk_header *h);

/* Does the header in buf (len bytes) echo nonce, before anything else
 * in it is believed?
 */
extern bool blk_header_echoes (const uint8_t *buf, size_t len,
                               const char *nonce);

/* Only the magic: does this look like a blkhash view at all? */
extern bool blk_header_has_magic (const uint8_t *buf, size_t len);

static inline uint64_t
blk_view_size (const struct blk_header *h)
{
  return BLK_VIEW_DIGESTS_OFFSET +
    h->block_count * (h->plain ? 1 : h->digest_len);
}

#endif /* BLKHASH_HEADER_H */
