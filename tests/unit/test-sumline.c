/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/sumline.c */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "sumline.h"
#include "tap.h"

#define HEX8 "0123abCD"
#define SHA1_HEX "da39a3ee5e6b4b0d3255bfef95601890afd80709"
#define MD5_HEX "d41d8cd98f00b204e9800998ecf8427e"
#define SHA512_256_HEX \
  "c672b8d1ef56ed28ab87c3622c5114069bdd3ad7b8f9737498d0c01ecef0967a"

/* Does line parse (hex length 8 for untagged lines) to want_name? */
static int
parses (const char *line, const char *want_name)
{
  char *copy = strdup (line);
  struct blk_sum_line sl;
  int r = copy && blk_sum_line_parse (copy, 8, &sl) == NULL &&
    !sl.tagged && strcmp (sl.hex, HEX8) == 0 &&
    strcmp (sl.name, want_name) == 0;

  free (copy);
  return r;
}

/* Does a tagged line parse to these parts? */
static int
parses_tagged (const char *line, const char *digest, uint32_t block_size,
               const char *hex, const char *name)
{
  char *copy = strdup (line);
  struct blk_sum_line sl;
  int r = copy && blk_sum_line_parse (copy, 64, &sl) == NULL && sl.tagged &&
    strcmp (sl.digest, digest) == 0 && sl.block_size == block_size &&
    strcmp (sl.hex, hex) == 0 && strcmp (sl.name, name) == 0;

  free (copy);
  return r;
}

/* Does a tagged line parse with this format (NULL: none)? */
static int
parses_format (const char *line, const char *format)
{
  char *copy = strdup (line);
  struct blk_sum_line sl;
  int r = copy && blk_sum_line_parse (copy, 64, &sl) == NULL && sl.tagged &&
    (format ? sl.format && strcmp (sl.format, format) == 0
     : sl.format == NULL);

  free (copy);
  return r;
}

/* Malformed, with a reason. */
static int
malformed (const char *line)
{
  char *copy = strdup (line);
  struct blk_sum_line sl;
  const char *msg = copy ? blk_sum_line_parse (copy, 8, &sl) : NULL;
  int r = msg != NULL && *msg;

  free (copy);
  return r;
}

/* What blk_fput_sum_line writes. */
static char *
written_as (unsigned flags, const char *digest, uint64_t block_size,
            const char *format, const char *hex, const char *name,
            size_t *len)
{
  char *buf = NULL;
  FILE *fp = open_memstream (&buf, len);

  if (fp == NULL)
    abort ();
  blk_fput_sum_line (fp, flags, digest, block_size, format, hex, name);
  fclose (fp);
  return buf;
}

static char *
written (unsigned flags, const char *digest, uint64_t block_size,
         const char *hex, const char *name, size_t *len)
{
  return written_as (flags, digest, block_size, NULL, hex, name, len);
}

/* Is blk_name_encode (name) want? */
static int
encodes (const char *name, const char *want)
{
  char *got = blk_name_encode (name);
  int r = got && strcmp (got, want) == 0;

  if (!r)
    printf ("# '%s' encoded as '%s', not '%s'\n", name, got ? got : "NULL",
            want);
  free (got);
  return r;
}

/* A second reading of the encoding, to check it is injective: decode
 * strictly (every '%' followed by two upper-case hex digits), in a
 * new string, or NULL if s is not an encoding.
 */
static char *
decode (const char *s)
{
  static const char hex[] = "0123456789ABCDEF";
  char *out = malloc (strlen (s) + 1), *q = out;

  for (; out && *s; s++) {
    const char *hi, *lo;
    if (*s != '%') {
      *q++ = *s;
      continue;
    }
    if (s[1] == '\0' || s[2] == '\0' ||
        (hi = strchr (hex, s[1])) == NULL ||
        (lo = strchr (hex, s[2])) == NULL) {
      free (out);
      return NULL;
    }
    *q++ = (char) ((hi - hex) << 4 | (lo - hex));
    s += 2;
  }
  if (out)
    *q = '\0';
  return out;
}

/* Names of random bytes (seed printed; SUMLINE_SEED another): each
 * encoding is of the allowed characters only, starts with neither '.'
 * nor '-', decodes to the name (so distinct names have distinct
 * encodings), and is a line's name as written, without escapes.
 */
static void
encode_random (unsigned seed, int rounds)
{
  static const char allowed[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+-%";
  int bad = 0;

  srand (seed);
  for (int i = 0; i < rounds && !bad; i++) {
    char name[32], line[256];
    const size_t n = 1 + rand () % (sizeof name - 1);
    char *enc, *dec;
    struct blk_sum_line sl;
    FILE *fp;

    for (size_t j = 0; j < n; j++)
      name[j] = 1 + rand () % 255;
    /* Often from the characters that matter most. */
    if (rand () % 2)
      for (size_t j = 0; j < n; j++)
        name[j] = "./-%:a\\\n "[rand () % 9];
    name[n] = '\0';
    enc = blk_name_encode (name);
    dec = enc ? decode (enc) : NULL;
    if (enc == NULL || dec == NULL || strcmp (dec, name) != 0 ||
        strspn (enc, allowed) != strlen (enc) || enc[0] == '.' ||
        enc[0] == '-' || blk_name_needs_escape (enc))
      bad = 1;
    else if ((fp = fmemopen (line, sizeof line, "w")) != NULL) {
      blk_fput_sum_line (fp, 0, "sha256", 65536, NULL, HEX8, enc);
      fclose (fp);
      if (blk_sum_line_parse (line, 8, &sl) != NULL ||
          strcmp (sl.name, enc) != 0)
        bad = 1;
    }
    if (bad)
      printf ("# seed %u, round %d: encoding '%s' as '%s'\n", seed, i,
              name, enc ? enc : "NULL");
    free (enc);
    free (dec);
  }
  ok (!bad, "random names encode injectively to plain file names "
      "(seed %u)", seed);
}

int
main (void)
{
  ok (encodes ("disk.img", "disk.img") && encodes ("A-z_0+9.x", "A-z_0+9.x"),
      "encoding keeps a plain file name");
  ok (encodes ("/dev/zero", "%2Fdev%2Fzero"), "encoding: an absolute path");
  ok (encodes ("nbd://h/x", "nbd%3A%2F%2Fh%2Fx"), "encoding: a URI");
  ok (encodes ("../../etc/passwd", "%2E.%2F..%2Fetc%2Fpasswd"),
      "encoding: a relative path upwards");
  ok (encodes ("-rf", "%2Drf") && encodes (".hidden", "%2Ehidden") &&
      encodes (".", "%2E") && encodes ("..", "%2E."),
      "encoding: a leading '-' or '.'");
  ok (encodes ("a%b", "a%25b") && encodes ("%2F", "%252F"),
      "encoding: '%%' itself");
  ok (encodes ("[ sh -c x ]", "%5B%20sh%20-c%20x%20%5D") &&
      encodes ("a\\b\nc\r", "a%5Cb%0Ac%0D") &&
      encodes ("\xc3\xa9", "%C3%A9"),
      "encoding: spaces, what sumline escapes, bytes past ASCII");
  ok (encodes ("", ""), "encoding: the empty name");
  {
    const char *env = getenv ("SUMLINE_SEED");
    encode_random (env ? (unsigned) strtoul (env, NULL, 10)
                   : 1, 100000);
  }

  ok (parses (HEX8 "  disk.img", "disk.img"), "text mode");
  ok (parses (HEX8 " *disk.img", "disk.img"), "binary mode");
  ok (parses (HEX8 "  disk.img\n", "disk.img"), "newline dropped");
  ok (parses (HEX8 "  disk.img\r\n", "disk.img"), "CRLF dropped");
  ok (parses (HEX8 "  a b\\c", "a b\\c"), "no escapes without '\\'");
  ok (parses ("\\" HEX8 "  a\\\\b\\nc", "a\\b\nc"), "escapes");
  ok (parses ("\\" HEX8 "  a\\r", "a\r"), "sha256sum's \\r escape");
  ok (parses (HEX8 "  BLKHASH-SHA1/1M (x) = " SHA1_HEX,
              "BLKHASH-SHA1/1M (x) = " SHA1_HEX),
      "an untagged line whose name looks like a tagged line");
  ok (malformed ("\\" HEX8 "  a\\b"), "unknown escape");
  ok (malformed ("\\" HEX8 "  a\\"), "escape at the end");
  ok (malformed (HEX8 "0  disk.img"), "hex too long");
  ok (malformed ("0123abC  disk.img"), "hex too short");
  ok (malformed ("0123abCx  disk.img"), "not hex");
  ok (malformed (HEX8 " disk.img"), "one space");
  ok (malformed (HEX8 "  "), "no name");
  ok (malformed (HEX8), "hex alone");
  ok (malformed (""), "empty line");
  ok (malformed ("\\"), "lone backslash");

  /* Tagged lines. */
  ok (parses_tagged ("BLKHASH-SHA1/1M (disk.img) = " SHA1_HEX "\n",
                     "sha1", 1 << 20, SHA1_HEX, "disk.img"),
      "tagged: sha1/1M");
  ok (parses_tagged ("blkhash-Sha1/1m (disk.img) = " SHA1_HEX,
                     "sha1", 1 << 20, SHA1_HEX, "disk.img"),
      "tagged: prefix, digest and size suffix in any case");
  ok (parses_tagged ("BLKHASH-SHA-1/1048576 (d) = " SHA1_HEX "\r\n",
                     "sha1", 1 << 20, SHA1_HEX, "d"),
      "tagged: an alias is the canonical digest; size in bytes; CRLF");
  ok (parses_tagged ("BLKHASH-SHA512-256/64KiB (x) = " SHA512_256_HEX,
                     "sha512-256", 65536, SHA512_256_HEX, "x"),
      "tagged: a digest with '-' in its name, KiB");
  ok (parses_tagged ("BLKHASH-MD5/4K (a (b)) = c) = " MD5_HEX,
                     "md5", 4096, MD5_HEX, "a (b)) = c"),
      "tagged: the name ends at the last ')'");
  ok (parses_tagged ("\\BLKHASH-MD5/4K (a\\\\b\\nc\\r) = " MD5_HEX,
                     "md5", 4096, MD5_HEX, "a\\b\nc\r"),
      "tagged: escapes");
  ok (parses_tagged ("BLKHASH-MD5/4K (a\\b) = " MD5_HEX,
                     "md5", 4096, MD5_HEX, "a\\b"),
      "tagged: no escapes without '\\'");
  ok (parses_tagged ("BLKHASH-MD5/4K (x) = " "D41D8CD98F00B204E9800998ECF8427E",
                     "md5", 4096, "D41D8CD98F00B204E9800998ECF8427E", "x"),
      "tagged: upper-case hex");
  ok (malformed ("BLKHASH-NOSUCH/64K (x) = " SHA1_HEX), "unknown digest");
  ok (malformed ("BLKHASH-SHA1/1000 (x) = " SHA1_HEX), "bad block size");
  ok (malformed ("BLKHASH-SHA1/0 (x) = " SHA1_HEX), "block size 0");
  ok (malformed ("BLKHASH-SHA1/64Q (x) = " SHA1_HEX), "bad size suffix");
  ok (malformed ("BLKHASH-SHA1/ (x) = " SHA1_HEX), "no block size");
  ok (malformed ("BLKHASH-SHA1 (x) = " SHA1_HEX), "no '/'");
  ok (malformed ("BLKHASH-/64K (x) = " SHA1_HEX), "no digest");
  ok (malformed ("BLKHASH-SHA1/64K (x) " SHA1_HEX), "no ') = '");
  ok (malformed ("BLKHASH-SHA1/64K (x)= " SHA1_HEX), "no space before '='");
  ok (malformed ("BLKHASH-SHA1/64K  (x) = " SHA1_HEX), "two spaces");
  ok (malformed ("BLKHASH-SHA1/64K x = " SHA1_HEX), "no '('");
  ok (malformed ("BLKHASH-SHA1/64K () = " SHA1_HEX), "empty name");
  ok (malformed ("BLKHASH-SHA1/64K (x) = " MD5_HEX), "hex of another digest");
  ok (malformed ("BLKHASH-SHA1/64K (x) = " SHA1_HEX " "), "trailing space");
  ok (malformed ("BLKHASH-SHA1/64K (x) = " SHA1_HEX "0"), "hex too long");
  ok (malformed ("BLKHASH-SHA1/64K (x) = "), "no hex");
  ok (malformed ("\\BLKHASH-SHA1/64K (a\\q) = " SHA1_HEX), "bad escape");
  ok (malformed ("BLAKHASH-SHA1/64K (x) = " SHA1_HEX), "another prefix");
  ok (malformed ("BLKHASH-SHA1/99999999999999999999999999999999999 (x) = "
                 SHA1_HEX), "a block size too long to read");

  /* Tagged lines with a format. */
  ok (parses_tagged ("BLKHASH-SHA1/1M:vpc (disk.vhd) = " SHA1_HEX,
                     "sha1", 1 << 20, SHA1_HEX, "disk.vhd") &&
      parses_format ("BLKHASH-SHA1/1M:vpc (disk.vhd) = " SHA1_HEX, "vpc"),
      "tagged with a format");
  ok (parses_format ("blkhash-sha1/64k:Parallels (x) = " SHA1_HEX,
                     "parallels"), "a format in any case, canonical");
  ok (parses_format ("BLKHASH-SHA1/64K:raw (a:b) = " SHA1_HEX, "raw") &&
      parses_format ("BLKHASH-SHA1/64K (a:b) = " SHA1_HEX, NULL),
      "':' in the name is the name's");
  ok (malformed ("BLKHASH-SHA1/64K:vhd (x) = " SHA1_HEX), "unknown format");
  ok (malformed ("BLKHASH-SHA1/64K:luks (x) = " SHA1_HEX),
      "luks is not a format nbdsum reads");
  ok (malformed ("BLKHASH-SHA1/64K:auto (x) = " SHA1_HEX), "nor auto");
  ok (malformed ("BLKHASH-SHA1/64K: (x) = " SHA1_HEX), "an empty format");
  ok (malformed ("BLKHASH-SHA1/64K:raw: (x) = " SHA1_HEX), "two ':'");
  ok (malformed ("BLKHASH-SHA1/64K:raw(x) = " SHA1_HEX), "no space after it");
  ok (malformed ("BLKHASH-SHA1:raw/64K (x) = " SHA1_HEX),
      "the format after the block size, not the digest");

  {
    size_t len;
    char *buf;

    buf = written (0, "sha256", 65536, "abcd", "plain.img", &len);
    ok (strcmp (buf, "abcd  plain.img\n") == 0, "untagged line");
    free (buf);
    buf = written (0, "sha256", 65536, "abcd", "a\\b\nc", &len);
    ok (strcmp (buf, "\\abcd  a\\\\b\\nc\n") == 0,
        "sum lines escape like sha256sum");
    free (buf);
    buf = written (0, "sha256", 65536, "abcd", "c\r", &len);
    ok (strcmp (buf, "\\abcd  c\\r\n") == 0, "carriage returns too");
    free (buf);
    buf = written (BLK_SUM_TAGGED, "sha1", 1 << 20, "abcd", "disk.img", &len);
    ok (strcmp (buf, "BLKHASH-SHA1/1M (disk.img) = abcd\n") == 0,
        "tagged line");
    free (buf);
    buf = written (BLK_SUM_TAGGED, "sha512-256", 98304, "abcd", "x", &len);
    ok (strcmp (buf, "BLKHASH-SHA512-256/96K (x) = abcd\n") == 0,
        "tagged line: 96K");
    free (buf);
    buf = written (BLK_SUM_TAGGED, "md5", 4096, "abcd", "a\nb", &len);
    ok (strcmp (buf, "\\BLKHASH-MD5/4K (a\\nb) = abcd\n") == 0,
        "tagged line escaped, '\\' first as cksum writes it");
    free (buf);
    buf = written_as (0, "sha256", 65536, "vpc", "abcd", "disk.vhd", &len);
    ok (strcmp (buf, "BLKHASH-SHA256/64K:vpc (disk.vhd) = abcd\n") == 0,
        "a format makes the line tagged, even for sha256/64K");
    free (buf);
    buf = written_as (BLK_SUM_TAGGED, "sha1", 1 << 20, "raw", "abcd", "a\nb",
                      &len);
    ok (strcmp (buf, "\\BLKHASH-SHA1/1M:raw (a\\nb) = abcd\n") == 0,
        "tagged line with a format, escaped");
    free (buf);
    buf = written (BLK_SUM_ZERO, "sha256", 65536, "abcd", "a\\b\nc", &len);
    ok (len == 12 && memcmp (buf, "abcd  a\\b\nc\0", 12) == 0,
        "-z: NUL ends the line, no escapes");
    free (buf);
    buf = written (BLK_SUM_ZERO | BLK_SUM_TAGGED, "sha1", 4096, "abcd",
                   "a\nb", &len);
    ok (len == sizeof "BLKHASH-SHA1/4K (a\nb) = abcd" &&
        memcmp (buf, "BLKHASH-SHA1/4K (a\nb) = abcd", len) == 0,
        "-z tagged: NUL ends the line, no escapes");
    free (buf);
  }
  {
    char line[] = "BLKHASH-SHA1/64K (x) = "
      "0123456789abcdef0123456789abcdef01234567 \n";
    char junk[] = "BLKHASH-SHA1/64K (x) = "
      "0123456789abcdef0123456789abcdef0123456z\n";
    struct blk_sum_line sl;
    const char *why = blk_sum_line_parse (line, 64, &sl);
    ok (why && strcmp (why, "a space or tab after the checksum") == 0,
        "a space after a tagged line's checksum is said to be one (%s)",
        why ? why : "accepted");
    why = blk_sum_line_parse (junk, 64, &sl);
    ok (why && strcmp (why, "the checksum is not hex digits") == 0,
        "a checksum with a letter that is not hex is said to be so");
  }
  /* Plain digests, BSD-tagged as sha256sum --tag writes them. */
  {
    char l1[] = "SHA1 (disk.img) = " SHA1_HEX "\r\n";
    char l2[] = "md5 (a (b)) = D41D8CD98F00B204E9800998ECF8427E";
    char l3[] = "SHA1:qcow2 (d.qcow2) = " SHA1_HEX;
    char l4[] = "SHA1 (x) = " MD5_HEX;
    char l5[] = "SHA256 (x) = " SHA1_HEX;
    char l6[] = "SHA1(x)= " SHA1_HEX;
    char l7[] = "\\SHA1 (a\\nb) = " SHA1_HEX;
    struct blk_sum_line sl;
    const char *why;

    ok (blk_sum_line_parse (l1, 64, &sl) == NULL && sl.plain && sl.tagged &&
        strcmp (sl.digest, "sha1") == 0 && sl.block_size == 0 &&
        sl.format == NULL && strcmp (sl.name, "disk.img") == 0 &&
        strcmp (sl.hex, SHA1_HEX) == 0, "a plain SHA1 line, CRLF");
    ok (blk_sum_line_parse (l2, 64, &sl) == NULL && sl.plain &&
        strcmp (sl.digest, "md5") == 0 && strcmp (sl.name, "a (b)") == 0,
        "any case of tag and hex; ')' in the name");
    ok (blk_sum_line_parse (l3, 64, &sl) == NULL && sl.plain &&
        sl.format && strcmp (sl.format, "qcow2") == 0,
        "a plain line with a format");
    why = blk_sum_line_parse (l4, 64, &sl);
    ok (why && strstr (why, "length"), "a plain line of the wrong length "
        "is refused (%s)", why ? why : "accepted");
    ok (blk_sum_line_parse (l5, 64, &sl) != NULL, "SHA256 is 64 digits");
    ok (blk_sum_line_parse (l6, 64, &sl) != NULL,
        "openssl dgst's form is not sha256sum's");
    ok (blk_sum_line_parse (l7, 64, &sl) == NULL && sl.plain &&
        strcmp (sl.name, "a\nb") == 0, "a plain line escaped");
    ok (blk_plain_tag ("sha512") && strcmp (blk_plain_tag ("sha512"),
                                            "SHA512") == 0 &&
        blk_plain_tag ("shake128") == NULL, "plain tags");
  }
  {
    char *buf;
    size_t len;
    FILE *fp = open_memstream (&buf, &len);

    blk_fput_plain_line (fp, BLK_SUM_TAGGED, "sha256", NULL, "ab", "x y");
    blk_fput_plain_line (fp, 0, "md5", NULL, "ab", "a\nb");
    blk_fput_plain_line (fp, BLK_SUM_TAGGED, "blake3", "qcow2", "ab", "d");
    fclose (fp);
    ok (strcmp (buf, "SHA256 (x y) = ab\n\\ab  a\\nb\n"
                "BLAKE3:qcow2 (d) = ab\n") == 0,
        "plain lines written as sha256sum writes them");
    free (buf);
  }
  {
    /* A range: after the format, in tagged lines of either kind. */
    char l1[] = "BLKHASH-SHA1/4K:qcow2@1M+4097 (d) = "
      "da39a3ee5e6b4b0d3255bfef95601890afd80709";
    char l2[] = "sha256@0+512 (d) = "
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    char l3[] = "MD5@0+0 (d) = d41d8cd98f00b204e9800998ecf8427e";
    char l4[] = "BLKHASH-SHA1/4K@1M (d) = "
      "da39a3ee5e6b4b0d3255bfef95601890afd80709";
    struct blk_sum_line sl;
    const struct blk_range r = { 1 << 20, 512 };
    char *buf;
    size_t len;
    FILE *fp;

    ok (blk_sum_line_parse (l1, 64, &sl) == NULL && !sl.plain &&
        sl.block_size == 4096 && strcmp (sl.format, "qcow2") == 0 &&
        sl.range.offset == 1 << 20 && sl.range.length == 4097,
        "a blkhash line with a format and a range");
    ok (blk_sum_line_parse (l2, 64, &sl) == NULL && sl.plain &&
        sl.range.offset == 0 && sl.range.length == 512,
        "a plain line with a range");
    ok (blk_sum_line_parse (l3, 64, &sl) != NULL &&
        blk_sum_line_parse (l4, 64, &sl) != NULL,
        "an empty range, or one without a length, is refused");
    fp = open_memstream (&buf, &len);
    blk_fput_sum_line_range (fp, 0, "sha256", 65536, NULL, &r, "ab", "x");
    blk_fput_plain_line_range (fp, 0, "sha256", "raw", &r, "ab", "y");
    fclose (fp);
    ok (strcmp (buf, "BLKHASH-SHA256/64K@1M+512 (x) = ab\n"
                "SHA256:raw@1M+512 (y) = ab\n") == 0,
        "a range makes a line tagged");
    free (buf);
  }
  ok (!blk_name_needs_escape ("x y") && blk_name_needs_escape ("x\n"),
      "only backslash, newline and CR need escaping");
  ok (!blk_sum_needs_tag ("sha256", 65536) &&
      blk_sum_needs_tag ("sha1", 65536) &&
      blk_sum_needs_tag ("sha256", 1 << 20) &&
      blk_sum_needs_tag ("sha512", 65536),
      "a tag unless sha256 and 64K");
  return done_testing ();
}
