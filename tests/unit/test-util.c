/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/util.c */
#include <config.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "tap.h"

static int
size_is (const char *s, uint64_t want)
{
  uint64_t v;
  return blk_parse_size (s, &v) == NULL && v == want;
}

static int
size_bad (const char *s)
{
  uint64_t v;
  return blk_parse_size (s, &v) != NULL;
}

/* blk_format_block_size spells size as want, which reads back. */
static int
spelt (uint64_t size, const char *want)
{
  char buf[BLK_BLOCK_SIZE_STR_MAX];
  return blk_format_block_size (size, buf) == buf &&
    strcmp (buf, want) == 0 && size_is (buf, size);
}

int
main (void)
{
  char hex[16];
  const uint8_t bytes[] = { 0x00, 0x7f, 0xab, 0xff };

  ok (size_is ("0", 0), "0");
  ok (size_is ("65536", 65536), "plain bytes");
  ok (size_is ("64K", 65536), "64K");
  ok (size_is ("64k", 65536), "64k");
  ok (size_is ("1M", 1 << 20), "1M");
  ok (size_is ("1MiB", 1 << 20), "1MiB");
  ok (size_is ("2G", 2ULL << 30), "2G");
  ok (size_is ("1T", 1ULL << 40), "1T");
  ok (size_is ("1P", 1ULL << 50) && size_is ("1PiB", 1ULL << 50), "1P");
  ok (size_is ("7E", 7ULL << 60) && size_bad ("8E"), "7E, and 8E too large");
  ok (size_bad (""), "empty size");
  ok (size_bad ("K"), "suffix only");
  ok (size_bad ("12Q"), "unknown suffix");
  ok (size_bad ("1M2"), "trailing characters");
  ok (size_bad ("-1"), "negative");
  ok (size_bad ("99999999999999999999"), "overflow");
  ok (size_bad ("9000000T"), "overflow after suffix");

  {
    char bs[BLK_BLOCK_SIZE_STR_MAX];
    const uint64_t sizes[] = { 4096, 65536, 98304, 1 << 20, 3 << 20,
                               (1 << 20) + 4096, 4095, 1, INT64_MAX };
    ok (strcmp (blk_format_block_size (65536, bs), "64K") == 0, "64K spelt");
    ok (strcmp (blk_format_block_size (1 << 20, bs), "1M") == 0, "1M spelt");
    ok (strcmp (blk_format_block_size (98304, bs), "96K") == 0, "96K spelt");
    ok (strcmp (blk_format_block_size (4095, bs), "4095") == 0,
        "bytes when not a multiple of 1K");
    bool all = true;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      uint64_t v = 0;
      if (blk_parse_size (blk_format_block_size (sizes[i], bs), &v) != NULL ||
          v != sizes[i])
        all = false;
    }
    ok (all, "blk_parse_size reads every spelling back");
  }
  ok (spelt (4096, "4K") && spelt (12288, "12K") && spelt (4096 * 105, "420K"),
      "block sizes in K: 4K 12K 420K");
  ok (spelt (1 << 20, "1M") && spelt (16 << 20, "16M") &&
      spelt (1572864, "1536K"), "block sizes in M: 1M 16M, and 1536K");
  ok (spelt (4097, "4097") && spelt (100000, "100000") && spelt (0, "0"),
      "sizes not in K are bytes");
  {
    char buf[BLK_BLOCK_SIZE_STR_MAX];
    ok (strcmp (blk_format_block_size (UINT64_MAX, buf),
                "18446744073709551615") == 0 &&
        spelt (INT64_MAX & ~INT64_C (1023), "9007199254740991K"),
        "the largest sizes fit");
  }

  {
    char h[BLK_HUMAN_STR_MAX];
    ok (strcmp (blk_format_human (1ULL << 50, h), "1 PiB") == 0 &&
        strcmp (blk_format_human (3ULL << 39, h), "1.5 TiB") == 0 &&
        strcmp (blk_format_human (1023, h), "1023 bytes") == 0 &&
        strcmp (blk_format_human (1024, h), "1 KiB") == 0 &&
        strcmp (blk_format_human (UINT64_MAX, h), "16.0 EiB") == 0,
        "sizes for people: 1 PiB, 1.5 TiB, 1023 bytes, 1 KiB, 16.0 EiB");
    char l[BLK_LIMIT_STR_MAX];
    ok (strcmp (blk_format_limit (1ULL << 40, l), "1 TiB") == 0 &&
        strcmp (blk_format_limit (999999, l), "999999 bytes (976.6 KiB)") == 0 &&
        strcmp (blk_format_limit (100, l), "100 bytes") == 0,
        "limits: 1 TiB, 999999 bytes (976.6 KiB), 100 bytes");
  }

  blk_hex (bytes, 4, hex);
  ok (strcmp (hex, "007fabff") == 0, "hex");
  {
    bool all = true;
    for (int c = -1; c < 256; c++) {
      const char *p = c > 0 ? strchr ("0123456789abcdef", c) : NULL;
      const char *q = c > 0 ? strchr ("0123456789ABCDEF", c) : NULL;
      const int want = p ? p - "0123456789abcdef"
        : q ? q - "0123456789ABCDEF" : -1;
      all &= blk_hex_value (c) == want;
    }
    ok (all, "hex digit values, either case; -1 for anything else");
  }
  /* The outer hash's work, as the size of an image in 64K blocks of
   * sha256 costing as much.
   */
  ok (blk_work_size (1000000, 65536, 32) == 1000000 &&
      blk_work_size (UINT64_C (1) << 50, 4096, 32) == UINT64_C (1) << 54 &&
      blk_work_size (UINT64_C (1) << 40, 65536, 64) == UINT64_C (1) << 41 &&
      blk_work_size (3 << 20, 98304, 32) == 2 << 20 &&
      blk_work_size (UINT64_MAX, 4096, 64) == UINT64_MAX &&
      blk_work_size (12345, 0, 32) == 12345,
      "blk_work_size: in proportion, saturating, plain is the size");
  {
    /* Every byte but NUL, alone and after a C1's lead byte.  A byte
     * of 0x80 or more alone is no UTF-8: escaped too (a terminal in
     * an 8-bit charset takes 0x9b for a CSI).
     */
    bool all = true;
    char in[3] = { 0 }, want[16];
    for (int c = 1; c < 256; c++) {
      char *e;
      in[0] = c;
      if ((c < 0x20 && c != '\t') || c >= 0x7f)
        snprintf (want, sizeof want, "\\x%02x", c);
      else
        snprintf (want, sizeof want, "%c", c);
      e = blk_escape_controls (in, false);
      all &= e && strcmp (e, want) == 0;
      free (e);
      in[0] = (char) 0xc2, in[1] = c;
      e = blk_escape_controls (in, true);
      if (c >= 0x80 && c <= 0x9f)
        snprintf (want, sizeof want, "\\xc2\\x%02x", c);
      else if (c >= 0xa0 && c <= 0xbf)
        snprintf (want, sizeof want, "\xc2%c", c);
      else if ((c < 0x20 && c != '\t' && c != '\n') || c >= 0x7f)
        snprintf (want, sizeof want, "\\xc2\\x%02x", c);
      else
        snprintf (want, sizeof want, "\\xc2%c", c);
      all &= e && strcmp (e, want) == 0;
      free (e);
      in[1] = 0;
    }
    ok (all, "blk_escape_controls: C0 but tab (newline with lines), DEL, "
        "UTF-8's C1 and bytes that are no UTF-8 as \\xHH, every other "
        "byte as it is");
  }
  {
    /* Well-formed UTF-8 as it is; what is not, byte by byte. */
    static const struct { const char *in, *want; } cases[] = {
      { "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
      { "caf\xe9", "caf\\xe9" },                  /* Latin-1 */
      { "a\x9b""31mred", "a\\x9b31mred" },          /* 8-bit CSI */
      { "\xc0\x80", "\\xc0\\x80" },                /* overlong */
      { "\xe2\x82", "\\xe2\\x82" },                /* cut short */
      { "\xe2\x82x", "\\xe2\\x82x" },
      { "\xed\xa0\x80", "\\xed\\xa0\\x80" },       /* a surrogate */
      { "\xe0\x80\xaf", "\\xe0\\x80\\xaf" },       /* overlong */
      { "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80" }, /* past U+10FFFF */
      { "\xf8\x88\x80\x80\x80", "\\xf8\\x88\\x80\\x80\\x80" },
    };
    bool all = true;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      char *e = blk_escape_controls (cases[i].in, false);
      if (e == NULL || strcmp (e, cases[i].want) != 0) {
        printf ("# case %zu: got '%s'\n", i, e ? e : "(null)");
        all = false;
      }
      free (e);
    }
    ok (all, "blk_escape_controls: well-formed UTF-8 as it is, the bytes "
        "of anything else (Latin-1, overlong, cut short, surrogates, "
        "past U+10FFFF) as \\xHH");
  }
  return done_testing ();
}
