/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the view header (see nbdkit-blkhash-filter(1)). */
#ifndef BLKHASH_HEADER_H
#define BLKHASH_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"

#define BLK_VIEW_MAGIC "BLKHASH1"
#define BLK_VIEW_VERSION 1
#define BLK_VIEW_HEADER_SIZE 4096
#define BLK_VIEW_ROOT_OFFSET 4096
#define BLK_VIEW_DIGESTS_OFFSET 8192

struct blk_header {
  uint64_t image_size;
  uint64_t block_count;
  uint32_t block_size;
  uint32_t digest_len;
  char digest_name[BLK_DIGEST_NAME_MAX + 1];
};

/* Fill h from the image size, block size and digest. */
extern void blk_header_init (struct blk_header *h, uint64_t image_size,
                             uint32_t block_size, const char *digest_name,
                             uint32_t digest_len);

/* Encode into BLK_VIEW_HEADER_SIZE bytes. */
extern void blk_header_encode (const struct blk_header *h, uint8_t *buf);

/* Decode and validate len bytes (at least 120).  Returns NULL, or a
 * static message naming the first problem.
 */
extern const char *blk_header_decode (const uint8_t *buf, size_t len,
                                      struct blk_header *h);

/* Only the magic: does this look like a blkhash view at all? */
extern bool blk_header_has_magic (const uint8_t *buf, size_t len);

static inline uint64_t
blk_view_size (const struct blk_header *h)
{
  return BLK_VIEW_DIGESTS_OFFSET + h->block_count * h->digest_len;
}

#endif /* BLKHASH_HEADER_H */
