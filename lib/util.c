/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: sizes, hex, UTF-8 and control characters. */
#include <config.h>

#include <ctype.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

const char *
blk_parse_size (const char *s, uint64_t *out)
{
  uint64_t v = 0, mult = 1;
  const char *p = s;
  int shift = 0;

  if (!isdigit ((unsigned char) *p))
    return "size must start with a digit";
  for (; isdigit ((unsigned char) *p); p++) {
    if (v > (UINT64_MAX - 9) / 10)
      return "size is too large";
    v = v * 10 + (*p - '0');
  }
  switch (toupper ((unsigned char) *p)) {
  case '\0': break;
  case 'K': shift = 10; p++; break;
  case 'M': shift = 20; p++; break;
  case 'G': shift = 30; p++; break;
  case 'T': shift = 40; p++; break;
  case 'P': shift = 50; p++; break;
  case 'E': shift = 60; p++; break;
  case 'B': break;
  default: return "size has an unknown suffix (use K, M, G, T, P or E)";
  }
  if (shift && (*p == 'i' || *p == 'I'))
    p++;
  if (*p == 'b' || *p == 'B')
    p++;
  if (*p != '\0')
    return "size has trailing characters";
  mult = UINT64_C (1) << shift;
  if (v > INT64_MAX / mult)
    return "size is too large";
  *out = v * mult;
  return NULL;
}

const char *
blk_parse_range_n (const char *s, size_t n, struct blk_range *r)
{
  char buf[2 * BLK_BLOCK_SIZE_STR_MAX + 16];
  const char *msg;
  char *plus;

  if (n >= sizeof buf)
    return "a range is OFFSET+LENGTH: too long";
  memcpy (buf, s, n);
  buf[n] = '\0';
  if ((plus = strchr (buf, '+')) == NULL)
    return "a range is OFFSET+LENGTH: no '+'";
  *plus = '\0';
  if ((msg = blk_parse_size (buf, &r->offset)) != NULL ||
      (msg = blk_parse_size (plus + 1, &r->length)) != NULL)
    return strchr (plus + 1, '+') ? "a range is OFFSET+LENGTH: more than "
      "one '+'" : msg;
  if (r->length == 0)
    return "a range of LENGTH 0 is empty";
  if (r->offset > INT64_MAX - r->length)
    return "a range's end (OFFSET+LENGTH) is past 2^63-1 bytes";
  return NULL;
}

const char *
blk_parse_range (const char *s, struct blk_range *r)
{
  return blk_parse_range_n (s, strlen (s), r);
}

char *
blk_format_range (const struct blk_range *r, char out[BLK_RANGE_STR_MAX])
{
  char a[BLK_BLOCK_SIZE_STR_MAX], b[BLK_BLOCK_SIZE_STR_MAX];

  snprintf (out, BLK_RANGE_STR_MAX, "%s+%s",
            blk_format_block_size (r->offset, a),
            blk_format_block_size (r->length, b));
  return out;
}

char *
blk_format_block_size (uint64_t size, char out[BLK_BLOCK_SIZE_STR_MAX])
{
  if (size && size % (1 << 20) == 0)
    snprintf (out, BLK_BLOCK_SIZE_STR_MAX, "%" PRIu64 "M", size >> 20);
  else if (size && size % 1024 == 0)
    snprintf (out, BLK_BLOCK_SIZE_STR_MAX, "%" PRIu64 "K", size >> 10);
  else
    snprintf (out, BLK_BLOCK_SIZE_STR_MAX, "%" PRIu64, size);
  return out;
}

char *
blk_format_human (uint64_t size, char out[BLK_HUMAN_STR_MAX])
{
  static const char units[] = "KMGTPE";
  int u = -1;

  while (u < 5 && size >> (10 * (u + 2)) > 0)
    u++;
  if (u < 0)
    snprintf (out, BLK_HUMAN_STR_MAX, "%" PRIu64 " bytes", size);
  else if (size % (UINT64_C (1) << (10 * (u + 1))) == 0)
    snprintf (out, BLK_HUMAN_STR_MAX, "%" PRIu64 " %ciB",
              size >> (10 * (u + 1)), units[u]);
  else
    snprintf (out, BLK_HUMAN_STR_MAX, "%.1f %ciB",
              (double) size / (UINT64_C (1) << (10 * (u + 1))), units[u]);
  return out;
}

char *
blk_format_limit (uint64_t size, char out[BLK_LIMIT_STR_MAX])
{
  char h[BLK_HUMAN_STR_MAX];

  if (strchr (blk_format_human (size, h), '.'))
    snprintf (out, BLK_LIMIT_STR_MAX, "%" PRIu64 " bytes (%s)", size, h);
  else
    snprintf (out, BLK_LIMIT_STR_MAX, "%s", h);
  return out;
}

uint64_t
blk_work_size (uint64_t size, uint64_t block_size, uint32_t digest_len)
{
  unsigned __int128 work;

  if (block_size == 0 || digest_len == 0)
    return size;
  /* In proportion, not in whole blocks: 64K blocks of sha256 are the
   * size itself.
   */
  work = (unsigned __int128) size * 65536 * digest_len / 32 / block_size;
  return work > UINT64_MAX ? UINT64_MAX : (uint64_t) work;
}

void
blk_hex (const uint8_t *buf, size_t len, char *out)
{
  static const char digits[] = "0123456789abcdef";

  for (size_t i = 0; i < len; i++) {
    out[2 * i] = digits[buf[i] >> 4];
    out[2 * i + 1] = digits[buf[i] & 15];
  }
  out[2 * len] = '\0';
}

size_t
blk_utf8_char (const unsigned char *p, size_t n)
{
  uint32_t c, min;
  size_t len;

  if (p[0] < 0x80)
    return 1;
  if ((p[0] & 0xe0) == 0xc0) {
    len = 2; c = p[0] & 0x1f; min = 0x80;
  }
  else if ((p[0] & 0xf0) == 0xe0) {
    len = 3; c = p[0] & 0x0f; min = 0x800;
  }
  else if ((p[0] & 0xf8) == 0xf0) {
    len = 4; c = p[0] & 0x07; min = 0x10000;
  }
  else
    return 0;
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    c = c << 6 | (p[i] & 0x3f);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
    return 0;
  return len;
}

char *
blk_escape_controls (const char *s, bool lines)
{
  const size_t len = strlen (s);
  /* At most 4 bytes out for each in: \xHH. */
  char *out = len < SIZE_MAX / 4 ? malloc (4 * len + 1) : NULL, *q = out;

  if (out == NULL)
    return NULL;
  for (const unsigned char *p = (const unsigned char *) s; *p; ) {
    const size_t n = blk_utf8_char (p, len - (p - (const unsigned char *) s));

    /* UTF-8's C1 controls (U+0080 to U+009F), and bytes that are no
     * UTF-8: an 8-bit terminal takes 0x9b for a CSI.
     */
    if (n == 0 || (p[0] == 0xc2 && p[1] <= 0x9f)) {
      for (size_t i = 0; i < (n ? n : 1); i++)
        q += sprintf (q, "\\x%02x", p[i]);
      p += n ? n : 1;
    }
    else if (n == 1 &&
             ((*p < 0x20 && *p != '\t' && !(lines && *p == '\n')) ||
              *p == 0x7f)) {
      q += sprintf (q, "\\x%02x", *p);
      p++;
    }
    else {
      memcpy (q, p, n);
      q += n, p += n;
    }
  }
  *q = '\0';
  return out;
}
