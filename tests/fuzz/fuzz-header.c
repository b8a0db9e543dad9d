/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Fuzz target: the view header, as nbdsum reads it from a server.
 *
 * A header that decodes must be one the filter could have written:
 * consistent fields, a view size that fits NBD's 63 bits, and the
 * same bytes when encoded again.
 */
#include <config.h>

#include "blkhash.h"
#include "header.h"
#include "util.h"
#include "fuzz.h"

/* The bytes blk_header_decode looks at: up to the end of the name. */
#define HEADER_USED (56 + BLK_DIGEST_NAME_MAX)

static int
same_header (const struct blk_header *a, const struct blk_header *b)
{
  return a->image_size == b->image_size &&
    a->block_count == b->block_count &&
    a->block_size == b->block_size &&
    a->digest_len == b->digest_len &&
    strcmp (a->digest_name, b->digest_name) == 0;
}

static void
check_fields (const struct blk_header *h)
{
  const size_t name_len = strnlen (h->digest_name, sizeof h->digest_name);
  uint64_t digests;

  PROPERTY (name_len > 0 && name_len < BLK_DIGEST_NAME_MAX);
  /* The rule, written out: any multiple of 4K from 4K to 16M. */
  PROPERTY (h->block_size % 4096 == 0 && h->block_size >= 4096 &&
            h->block_size <= 16 * 1024 * 1024);
  PROPERTY (blk_check_block_size (h->block_size) == NULL);
  {
    /* Spelt for a view name or a tag, it has a K or M suffix and reads
     * back.
     */
    char bs[BLK_BLOCK_SIZE_STR_MAX];
    const size_t n = strlen (blk_format_block_size (h->block_size, bs));
    uint64_t back;
    PROPERTY (n >= 2 && (bs[n - 1] == 'K' || bs[n - 1] == 'M'));
    PROPERTY (blk_parse_size (bs, &back) == NULL && back == h->block_size);
  }
  PROPERTY (h->digest_len > 0 && h->digest_len <= EVP_MAX_MD_SIZE);
  PROPERTY (h->image_size <= INT64_MAX);
  PROPERTY (h->block_count == blk_block_count (h->image_size,
                                               h->block_size));
  if (h->block_count > 0) {
    uint32_t last = blk_block_len (h->image_size, h->block_size,
                                   h->block_count - 1);
    PROPERTY (last > 0 && last <= h->block_size);
  }

  /* blk_view_size must not wrap, and must fit an NBD export size. */
  PROPERTY (!__builtin_mul_overflow (h->block_count,
                                     (uint64_t) h->digest_len, &digests));
  PROPERTY (digests <= INT64_MAX - BLK_VIEW_DIGESTS_OFFSET);
  PROPERTY (blk_view_size (h) == BLK_VIEW_DIGESTS_OFFSET + digests);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  uint8_t buf[BLK_VIEW_HEADER_SIZE];
  struct blk_header h, again;
  const char *msg;

  msg = blk_header_decode (data, size, &h);
  if (msg != NULL) {
    PROPERTY (*msg != '\0');
    return 0;
  }
  PROPERTY (size >= HEADER_USED);
  PROPERTY (blk_header_has_magic (data, size));
  check_fields (&h);

  /* Decoding checks every byte it reads, so encoding gives them back. */
  blk_header_encode (&h, buf);
  PROPERTY (memcmp (buf, data, HEADER_USED) == 0);
  PROPERTY (blk_header_decode (buf, sizeof buf, &again) == NULL);
  PROPERTY (same_header (&h, &again));

  /* The filter builds headers from the parameters alone. */
  blk_header_init (&again, h.image_size, h.block_size, h.digest_name,
                   h.digest_len);
  PROPERTY (same_header (&h, &again));
  return 0;
}
