/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: sizes, hex, UTF-8 and control characters. */
#ifndef BLKHASH_UTIL_H
#define BLKHASH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parse "123", "64K", "1M", "2G", "1T", "1P", "1E" (powers of 1024,
 * optional "iB" or "B").  Returns NULL on success, else a static message.
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

/* Longest spelling by blk_format_human, with its NUL. */
#define BLK_HUMAN_STR_MAX 32

/* A size for people to read in messages: "1 PiB", "1.5 TiB", "512
 * bytes" (one decimal when not a whole number of the unit).  Returns
 * out.
 */
extern char *blk_format_human (uint64_t size, char out[BLK_HUMAN_STR_MAX]);

/* A part of an image, OFFSET+LENGTH: nbdsum's --range, a view name's
 * ",range=" and a checksum line's "@" (see nbdsum(1)).  length 0: the
 * whole image (no range).
 */
struct blk_range {
  uint64_t offset, length;
};
/* Longest spelling by blk_format_range, with its NUL. */
#define BLK_RANGE_STR_MAX (2 * BLK_BLOCK_SIZE_STR_MAX)
/* Parse "OFFSET+LENGTH", each as blk_parse_size reads it: a length of
 * 0, or an end past INT64_MAX, is refused.  NULL, or a static message.
 */
extern const char *blk_parse_range (const char *s, struct blk_range *r);
/* The same for the n bytes at s (not NUL-terminated). */
extern const char *blk_parse_range_n (const char *s, size_t n,
                                      struct blk_range *r);
/* "OFFSET+LENGTH", each spelt as blk_format_block_size spells sizes
 * (exact, shortest).  Returns out.
 */
extern char *blk_format_range (const struct blk_range *r,
                               char out[BLK_RANGE_STR_MAX]);

/* A limit in messages: as blk_format_human spells it where that is
 * exact ("1 PiB", "1023 bytes"), else its bytes and that ("999999
 * bytes (976.6 KiB)").  Returns out.
 */
#define BLK_LIMIT_STR_MAX 64
extern char *blk_format_limit (uint64_t size, char out[BLK_LIMIT_STR_MAX]);

/* What a blkhash checksum of an image of size bytes costs, in blocks
 * of block_size with digests of digest_len bytes: as the size of an
 * image in 64K blocks of 32-byte digests (sha256) that costs as much,
 * since the one serial part, the outer hash, is over n * L bytes.  So
 * one size limit holds for every block size and digest.  Saturates at
 * UINT64_MAX.
 */
extern uint64_t blk_work_size (uint64_t size, uint64_t block_size,
                               uint32_t digest_len);

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

/* Length of the UTF-8 character at p (at most n bytes), or 0 if the
 * bytes there are not one: a stray continuation byte, a truncated
 * sequence, an overlong form, a surrogate or a code point beyond
 * U+10FFFF.
 */
extern size_t blk_utf8_char (const unsigned char *p, size_t n);

/* s with the bytes a terminal acts on written as \xHH: C0 controls
 * but tab (and newline if lines), DEL, UTF-8's C1 controls (U+0080 to
 * U+009F; U+009B is a CSI), and every byte that is not well-formed
 * UTF-8 (in an 8-bit charset, 0x9b is a CSI).  Messages name exports,
 * images and files, and clients, images and checksum files choose
 * those.  malloc'd; NULL if out of memory.
 */
extern char *blk_escape_controls (const char *s, bool lines);

/* The bytes little-endian numbers of the formats are written in. */
static inline void
blk_put_le (uint8_t *p, uint64_t v, int bytes)
{
  for (int i = 0; i < bytes; i++)
    p[i] = v >> (8 * i);
}

static inline uint64_t
blk_get_le (const uint8_t *p, int bytes)
{
  uint64_t v = 0;

  for (int i = bytes - 1; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

#endif /* BLKHASH_UTIL_H */
