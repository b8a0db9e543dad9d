/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the view header. */
#include <config.h>

#include <string.h>

#include "blkhash.h"
#include "header.h"
#include "util.h"

enum {
  OFF_MAGIC = 0, OFF_VERSION = 8, OFF_HEADER_SIZE = 12, OFF_IMAGE_SIZE = 16,
  OFF_BLOCK_COUNT = 24, OFF_BLOCK_SIZE = 32, OFF_DIGEST_LEN = 36,
  OFF_ROOT = 40, OFF_DIGESTS = 48, OFF_NAME = 56, OFF_FLAGS = 120,
  OFF_NONCE = 128, NONCE_END = OFF_NONCE + BLK_HEADER_NONCE_MAX,
  HEADER_USED = OFF_NAME + BLK_DIGEST_NAME_MAX,
};

void
blk_header_init (struct blk_header *h, uint64_t image_size,
                 uint32_t block_size, const char *digest_name,
                 uint32_t digest_len)
{
  memset (h, 0, sizeof *h);
  h->image_size = image_size;
  h->block_size = block_size;
  h->block_count = blk_block_count (image_size, block_size);
  h->digest_len = digest_len;
  memcpy (h->digest_name, digest_name,
          strnlen (digest_name, BLK_DIGEST_NAME_MAX - 1));
}

void
blk_plain_header_init (struct blk_header *h, uint64_t image_size,
                       const char *digest_name, uint32_t digest_len)
{
  blk_header_init (h, image_size, BLK_PLAIN_SPAN_SIZE, digest_name,
                   digest_len);
  h->plain = true;
}

void
blk_bmap_header_init (struct blk_header *h, uint64_t image_size,
                      const char *digest_name, uint32_t digest_len)
{
  blk_plain_header_init (h, image_size, digest_name, digest_len);
  h->bmap = true;
}

/* The magic of h's kind of view. */
static const char *
magic_of (bool plain, bool bmap)
{
  return bmap ? BLK_BMAP_MAGIC : plain ? BLK_PLAIN_MAGIC : BLK_VIEW_MAGIC;
}

void
blk_header_encode (const struct blk_header *h, uint8_t *buf)
{
  memset (buf, 0, BLK_VIEW_HEADER_SIZE);
  memcpy (buf + OFF_MAGIC, magic_of (h->plain, h->bmap), 8);
  blk_put_le (buf + OFF_VERSION, BLK_VIEW_VERSION, 4);
  blk_put_le (buf + OFF_HEADER_SIZE, BLK_VIEW_HEADER_SIZE, 4);
  blk_put_le (buf + OFF_IMAGE_SIZE, h->image_size, 8);
  blk_put_le (buf + OFF_BLOCK_COUNT, h->block_count, 8);
  blk_put_le (buf + OFF_BLOCK_SIZE, h->block_size, 4);
  blk_put_le (buf + OFF_DIGEST_LEN, h->digest_len, 4);
  blk_put_le (buf + OFF_ROOT, BLK_VIEW_ROOT_OFFSET, 8);
  blk_put_le (buf + OFF_DIGESTS, BLK_VIEW_DIGESTS_OFFSET, 8);
  memcpy (buf + OFF_NAME, h->digest_name,
          strnlen (h->digest_name, BLK_DIGEST_NAME_MAX - 1));
  blk_put_le (buf + OFF_FLAGS, h->flags, 4);
  memcpy (buf + OFF_NONCE, h->nonce,
          strnlen (h->nonce, BLK_HEADER_NONCE_MAX));
}

bool
blk_header_echoes (const uint8_t *buf, size_t len, const char *nonce)
{
  char echo[BLK_HEADER_NONCE_MAX] = { 0 };

  if (len < NONCE_END || strlen (nonce) > BLK_HEADER_NONCE_MAX)
    return false;
  memcpy (echo, nonce, strlen (nonce));
  return memcmp (buf + OFF_NONCE, echo, sizeof echo) == 0;
}

bool
blk_header_has_magic (const uint8_t *buf, size_t len)
{
  return len >= 8 && memcmp (buf, BLK_VIEW_MAGIC, 8) == 0;
}

static const char *
decode (const uint8_t *buf, size_t len, struct blk_header *h, bool plain,
        bool bmap)
{
  const char *name = (const char *) buf + OFF_NAME;
  size_t name_len;

  memset (h, 0, sizeof *h);
  if (len < HEADER_USED)
    return "view header is truncated";
  if (memcmp (buf, magic_of (plain, bmap), 8) != 0)
    return bmap ? "bad magic: not a bmap view"
      : plain ? "bad magic: not a plain-digest view"
      : "bad magic: not a blkhash view";
  if (blk_get_le (buf + OFF_VERSION, 4) != BLK_VIEW_VERSION)
    return "unsupported view format version";
  if (blk_get_le (buf + OFF_HEADER_SIZE, 4) != BLK_VIEW_HEADER_SIZE)
    return "unexpected header size";
  if (blk_get_le (buf + OFF_ROOT, 8) != BLK_VIEW_ROOT_OFFSET ||
      blk_get_le (buf + OFF_DIGESTS, 8) != BLK_VIEW_DIGESTS_OFFSET)
    return "unexpected root or digests offset";

  h->image_size = blk_get_le (buf + OFF_IMAGE_SIZE, 8);
  h->block_count = blk_get_le (buf + OFF_BLOCK_COUNT, 8);
  h->block_size = blk_get_le (buf + OFF_BLOCK_SIZE, 4);
  h->digest_len = blk_get_le (buf + OFF_DIGEST_LEN, 4);
  h->plain = plain;
  h->bmap = bmap;
  /* Read only from a buffer that holds them (120 bytes suffice). */
  if (len >= OFF_FLAGS + 4)
    h->flags = blk_get_le (buf + OFF_FLAGS, 4);
  if (len >= NONCE_END) {
    const char *nonce = (const char *) buf + OFF_NONCE;
    const size_t n = strnlen (nonce, BLK_HEADER_NONCE_MAX);
    for (size_t i = 0; i < n; i++)
      if (!strchr ("0123456789abcdef", nonce[i]))
        return "the nonce is not hex";
    for (size_t i = n; i < BLK_HEADER_NONCE_MAX; i++)
      if (nonce[i] != '\0')
        return "nonce padding is not zero";
    memcpy (h->nonce, nonce, n);
  }

  if (blk_check_block_size (h->block_size) != NULL)
    return "invalid block size (must be a multiple of 4K from 4K to 16M)";
  if (h->digest_len == 0 || h->digest_len > BLK_DIGEST_MAX)
    return "invalid digest length";
  if (h->image_size > INT64_MAX)
    return "impossible image size";
  if (h->block_count != blk_block_count (h->image_size, h->block_size))
    return "block count does not match image size";
  /* The view size must fit the NBD 63-bit size. */
  if (h->block_count > (INT64_MAX - BLK_VIEW_DIGESTS_OFFSET) /
      (plain ? 1 : h->digest_len))
    return "impossible view size";

  name_len = strnlen (name, BLK_DIGEST_NAME_MAX);
  if (name_len == 0)
    return "digest name is empty";
  if (name_len == BLK_DIGEST_NAME_MAX)
    return "digest name is not terminated";
  for (size_t i = name_len; i < BLK_DIGEST_NAME_MAX; i++)
    if (name[i] != '\0')
      return "digest name padding is not zero";
  memcpy (h->digest_name, name, name_len);
  return NULL;
}

const char *
blk_header_decode (const uint8_t *buf, size_t len, struct blk_header *h)
{
  return decode (buf, len, h, false, false);
}

const char *
blk_plain_header_decode (const uint8_t *buf, size_t len, struct blk_header *h)
{
  return decode (buf, len, h, true, false);
}

const char *
blk_bmap_header_decode (const uint8_t *buf, size_t len, struct blk_header *h)
{
  return decode (buf, len, h, true, true);
}
