/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: sizes and hex. */
#ifndef BLKHASH_UTIL_H
#define BLKHASH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Parse "123", "64K", "1M", "2G", "1T" (powers of 1024, optional "iB"
 * or "B").  Returns NULL on success, else a static message.
 */
extern const char *blk_parse_size (const char *s, uint64_t *out);

/* Longest spelling of a block size by blk_format_block_size, with
 * its NUL.
 */
#define BLK_BLOCK_SIZE_STR_MAX 24

/* The shortest exact spelling of a size, as view names and checksum
 * lines spell block sizes: "1M", "64K", "96K", or bytes ("4095").
 * blk_parse_size reads it back.  Returns out.
 */
extern char *blk_format_block_size (uint64_t size,
                                    char out[BLK_BLOCK_SIZE_STR_MAX]);

/* Lower-case hex of len bytes into out (2*len+1 bytes). */
extern void blk_hex (const uint8_t *buf, size_t len, char *out);
/* The value of hex digit c (either case), or -1.  Inline: manifests
 * are millions of hex digits.
 */
static inline int
blk_hex_value (int c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

#endif /* BLKHASH_UTIL_H */
