/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Fuzz target: checksum lines, as nbdsum -c reads them from a file.
 *
 * A line that parses must be well formed: an untagged line has exactly
 * the hex length asked for and no format, a tagged line a digest
 * OpenSSL knows (by its canonical name), a valid block size, the
 * digest's hex length, and no format or one nbdsum reads (by its
 * canonical name); both have a name.  What blk_fput_sum_line writes,
 * tagged or not, with a format or not, is one line and parses back to
 * the same digest, block size, format, hex and name (a format makes
 * it tagged).  The input is also tried as a name to write, in both
 * forms, with and without a format, and with -z.  A plain line (BSD
 * tag, sha256sum --tag's) has a digest with a tag, no block size, and
 * round-trips through blk_fput_plain_line the same way.  The input
 * encoded as a client's export name (blk_name_encode) is of
 * [A-Za-z0-9._+-%] only, starts with neither '.' nor '-', decodes
 * back to the input, and is a line's name unescaped.  A range
 * ("@OFFSET+LENGTH", nbdsum --range) is only in tagged lines, is never
 * empty nor ends past 2^63-1, makes a written line tagged, and round-
 * trips in both kinds.
 */
#include <config.h>

#include <stdbool.h>

#include "blkhash.h"
#include "imgformat.h"
#include "minmax.h"
#include "sumline.h"
#include "fuzz.h"

#define HEX_DIGITS "0123456789abcdefABCDEF"

/* Names nbdsum can write: not empty. */
static bool
writable (const char *name)
{
  const size_t len = strlen (name);

  return len > 0;
}

static bool
has_range (const struct blk_range *r)
{
  return r && r->length;
}

/* The line read back has the range written (none: length 0). */
static void
same_range (const struct blk_sum_line *sl, const struct blk_range *range)
{
  if (has_range (range))
    PROPERTY (sl->tagged && sl->range.offset == range->offset &&
              sl->range.length == range->length);
  else
    PROPERTY (sl->range.offset == 0 && sl->range.length == 0);
}

/* Write a line as nbdsum does (tagged when digest is not NULL; a
 * format needs a digest), and read it back.
 */
static void
round_trip (const char *digest, uint32_t block_size, const char *format,
            const struct blk_range *range, const char *hex, const char *name)
{
  const unsigned flags =
    digest && !format && !has_range (range) ? BLK_SUM_TAGGED : 0;
  char *line = NULL;
  size_t len = 0;
  FILE *fp = open_memstream (&line, &len);
  struct blk_sum_line sl;

  PROPERTY (fp != NULL);
  blk_fput_sum_line_range (fp, flags, digest, block_size, format, range,
                           hex, name);
  PROPERTY (fclose (fp) == 0);
  /* One line, whatever is in the name. */
  PROPERTY (len > 0 && memchr (line, '\n', len) == line + len - 1);
  PROPERTY (blk_sum_line_parse (line, strlen (hex), &sl) == NULL);
  PROPERTY (sl.tagged == (digest != NULL));
  if (digest) {
    PROPERTY (strcmp (sl.digest, digest) == 0);
    PROPERTY (sl.block_size == block_size);
  }
  PROPERTY (sl.format == format);
  same_range (&sl, range);
  PROPERTY (strcmp (hex, sl.hex) == 0);
  PROPERTY (strcmp (name, sl.name) == 0);
  free (line);
}

/* A plain line written as nbdsum --plain does, read back. */
static void
plain_round_trip (const char *digest, const char *format,
                  const struct blk_range *range, const char *hex,
                  const char *name)
{
  char *line = NULL;
  size_t len = 0;
  FILE *fp = open_memstream (&line, &len);
  struct blk_sum_line sl;

  PROPERTY (fp != NULL);
  blk_fput_plain_line_range (fp, BLK_SUM_TAGGED, digest, format, range, hex,
                             name);
  PROPERTY (fclose (fp) == 0);
  PROPERTY (len > 0 && memchr (line, '\n', len) == line + len - 1);
  PROPERTY (blk_sum_line_parse (line, 0, &sl) == NULL);
  PROPERTY (sl.tagged && sl.plain);
  PROPERTY (strcmp (sl.digest, digest) == 0 && sl.block_size == 0);
  PROPERTY (sl.format == format);
  same_range (&sl, range);
  PROPERTY (strcmp (hex, sl.hex) == 0);
  PROPERTY (strcmp (name, sl.name) == 0);
  free (line);
}

/* -z: the same line, unescaped, ending with its only NUL. */
static void
zero_line (const char *digest, uint32_t block_size, const char *format,
           const char *hex, const char *name)
{
  const unsigned flags = digest ? BLK_SUM_TAGGED : 0;
  char *line = NULL, *zline = NULL;
  size_t len = 0, zlen = 0;
  FILE *fp = open_memstream (&line, &len);
  FILE *zfp = open_memstream (&zline, &zlen);

  PROPERTY (fp != NULL && zfp != NULL);
  blk_fput_sum_line (fp, flags, digest, block_size, format, hex, name);
  blk_fput_sum_line (zfp, flags | BLK_SUM_ZERO, digest, block_size, format,
                     hex, name);
  PROPERTY (fclose (fp) == 0 && fclose (zfp) == 0);
  PROPERTY (zlen > 0 && memchr (zline, '\0', zlen) == zline + zlen - 1);
  PROPERTY (strstr (zline, name) != NULL);
  if (!blk_name_needs_escape (name))
    PROPERTY (zlen == len && memcmp (line, zline, len - 1) == 0);
  free (line);
  free (zline);
}

/* blk_name_encode: a plain file name, decoding back to name. */
static void
check_encoded (const char *name)
{
  static const char upper_hex[] = "0123456789ABCDEF";
  char *enc = blk_name_encode (name);
  const char *p, *q = name;

  PROPERTY (enc != NULL);
  PROPERTY (strspn (enc, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                    "0123456789._+-%") == strlen (enc));
  PROPERTY (enc[0] != '.' && enc[0] != '-');
  /* A second reading: each %XX is one byte, all else itself. */
  for (p = enc; *p; q++) {
    if (*p != '%') {
      PROPERTY (*p++ == *q);
      continue;
    }
    PROPERTY (p[1] && strchr (upper_hex, p[1]) &&
              p[2] && strchr (upper_hex, p[2]));
    PROPERTY ((unsigned char) *q ==
              ((strchr (upper_hex, p[1]) - upper_hex) << 4 |
               (strchr (upper_hex, p[2]) - upper_hex)));
    p += 3;
  }
  PROPERTY (*q == '\0');
  if (*enc) {
    PROPERTY (!blk_name_needs_escape (enc));
    round_trip (NULL, 0, NULL, NULL, "0123456789abcdef", enc);
  }
  free (enc);
}

static void
check_line (const char *text, size_t hexlen)
{
  char *line = fuzz_strdup (text);
  struct blk_sum_line sl;
  const char *msg = blk_sum_line_parse (line, hexlen, &sl);

  if (msg == NULL) {
    const size_t n = strlen (sl.hex);

    PROPERTY (strspn (sl.hex, HEX_DIGITS) == n);
    PROPERTY (*sl.name != '\0');
    /* Both point into the line. */
    PROPERTY (sl.hex >= line && sl.hex < line + strlen (text));
    PROPERTY (sl.name > line && sl.name < line + strlen (text));
    if (sl.tagged) {
      struct blk_digest d;
      /* The tag's digest by its canonical name, and its length. */
      PROPERTY (blk_digest_init (&d, sl.digest) == NULL);
      PROPERTY (strcmp (d.name, sl.digest) == 0);
      PROPERTY (n == 2 * d.len);
      blk_digest_free (&d);
      if (sl.plain)
        PROPERTY (sl.block_size == 0 && blk_plain_tag (sl.digest) != NULL);
      else
        PROPERTY (blk_check_block_size (sl.block_size) == NULL);
      PROPERTY (sl.hex > sl.name);
      /* A format nbdsum reads, by its canonical (static) name. */
      if (sl.format)
        PROPERTY (blk_image_format (sl.format) == sl.format);
      /* A range is never empty, and ends by 2^63-1. */
      if (sl.range.length)
        PROPERTY (sl.range.offset <= INT64_MAX - sl.range.length);
      else
        PROPERTY (sl.range.offset == 0);
    }
    else {
      PROPERTY (sl.format == NULL && !sl.plain);
      PROPERTY (sl.range.offset == 0 && sl.range.length == 0);
      PROPERTY (n == hexlen);
      PROPERTY (sl.hex <= line + 1 && sl.name > sl.hex + hexlen);
    }
    if (writable (sl.name) && sl.plain)
      plain_round_trip (sl.digest, sl.format, &sl.range, sl.hex, sl.name);
    else if (writable (sl.name)) {
      round_trip (sl.tagged ? sl.digest : NULL, sl.block_size, sl.format,
                  &sl.range, sl.hex, sl.name);
      zero_line (sl.tagged ? sl.digest : NULL, sl.block_size, sl.format,
                 sl.hex, sl.name);
    }
  }
  else
    PROPERTY (*msg != '\0');
  free (line);
}

/* Tags to write the input under, as nbdsum would. */
static const struct {
  const char *digest;
  uint32_t block_size;
  const char *hex;
} tags[] = {
  { "sha256", 65536,
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
  { "sha1", 1 << 20, "da39a3ee5e6b4b0d3255bfef95601890afd80709" },
  { "md5", 4096, "d41d8cd98f00b204e9800998ecf8427e" },
  { "sha512-256", 16 << 20,
    "c672b8d1ef56ed28ab87c3622c5114069bdd3ad7b8f9737498d0c01ecef0967a" },
};

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *text = fuzz_string (data, size);
  /* The hex length the line has, so most inputs get past it. */
  const size_t n = strspn (text + (text[0] == '\\'), HEX_DIGITS);

  check_line (text, n);
  if (n != 64)
    check_line (text, 64);      /* sha256, nbdsum's default */
  check_encoded (text);
  if (writable (text)) {
    const size_t t = size ? data[0] % (sizeof tags / sizeof tags[0]) : 0;
    size_t nformats = 0;
    const char *format;

    while (blk_image_formats[nformats])
      nformats++;
    format = blk_image_formats[size > 1 ? data[1] % nformats : 0];
    /* A range from the input's bytes: any offset, any length but 0. */
    struct blk_range range = { 0, 1 };
    for (size_t i = 2; i < size && i < 10; i++)
      range.offset = range.offset << 8 | data[i];
    for (size_t i = 10; i < size && i < 18; i++)
      range.length = range.length << 8 | data[i];
    range.offset &= INT64_MAX;
    if (range.offset == INT64_MAX)
      range.offset--;
    range.length = MAX (range.length % (INT64_MAX - range.offset + 1),
                        (uint64_t) 1);
    round_trip (NULL, 0, NULL, NULL, "0123456789abcdef", text);
    round_trip (tags[t].digest, tags[t].block_size, NULL, NULL, tags[t].hex,
                text);
    round_trip (tags[t].digest, tags[t].block_size, format, NULL,
                tags[t].hex, text);
    round_trip (tags[t].digest, tags[t].block_size, NULL, &range,
                tags[t].hex, text);
    round_trip (tags[t].digest, tags[t].block_size, format, &range,
                tags[t].hex, text);
    zero_line (tags[t].digest, tags[t].block_size, NULL, tags[t].hex, text);
    zero_line (tags[t].digest, tags[t].block_size, format, tags[t].hex, text);
    if (blk_plain_tag (tags[t].digest)) {
      plain_round_trip (tags[t].digest, NULL, NULL, tags[t].hex, text);
      plain_round_trip (tags[t].digest, format, NULL, tags[t].hex, text);
      plain_round_trip (tags[t].digest, NULL, &range, tags[t].hex, text);
    }
  }
  free (text);
  return 0;
}
