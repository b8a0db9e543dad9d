/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: writing and reading checksum lines (sumline.h). */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "blkhash.h"
#include "sumline.h"
#include "util.h"

bool
blk_name_needs_escape (const char *name)
{
  return strpbrk (name, "\\\n\r") != NULL;
}

void
blk_fput_name (FILE *fp, const char *name, bool escape)
{
  for (const char *p = name; *p; p++) {
    if (escape && *p == '\\')
      fputs ("\\\\", fp);
    else if (escape && *p == '\n')
      fputs ("\\n", fp);
    else if (escape && *p == '\r')     /* as sha256sum: a CR ends lines */
      fputs ("\\r", fp);
    else
      fputc (*p, fp);
  }
}

char *
blk_name_encode (const char *name)
{
  static const char hex[] = "0123456789ABCDEF";
  const size_t len = strlen (name);
  char *out, *q;

  if (len > (SIZE_MAX - 1) / 3) {
    errno = ENOMEM;
    return NULL;
  }
  if ((q = out = malloc (3 * len + 1)) == NULL)
    return NULL;
  for (const unsigned char *p = (const unsigned char *) name; *p; p++) {
    /* Not isalnum: the locale's letters are not ASCII's. */
    const bool kept =
      (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
      (*p >= '0' && *p <= '9') || *p == '_' || *p == '+' ||
      ((*p == '.' || *p == '-') && p != (const unsigned char *) name);
    if (kept)
      *q++ = *p;
    else {
      *q++ = '%';
      *q++ = hex[*p >> 4];
      *q++ = hex[*p & 15];
    }
  }
  *q = '\0';
  return out;
}

bool
blk_sum_needs_tag (const char *digest, uint64_t block_size)
{
  return strcmp (digest, BLK_DEFAULT_DIGEST) != 0 ||
    block_size != BLK_DEFAULT_BLOCK_SIZE;
}

/* One line, tagged 'TAG[:FORMAT][@RANGE] (NAME) = HEX' when tagged is
 * true, else 'HEX  NAME'.
 */
static void
fput_line (FILE *fp, unsigned flags, bool tagged, const char *tag,
           const char *format, const struct blk_range *range,
           const char *hex, const char *name)
{
  /* -z: a NUL ends the line, so names go out as they are. */
  const bool zero = flags & BLK_SUM_ZERO;
  const bool escape = !zero && blk_name_needs_escape (name);

  if (escape)
    fputc ('\\', fp);
  if (tagged) {
    fputs (tag, fp);
    if (format)
      fprintf (fp, ":%s", format);
    if (range && range->length) {
      char r[BLK_RANGE_STR_MAX];
      fprintf (fp, "@%s", blk_format_range (range, r));
    }
    fputs (" (", fp);
    blk_fput_name (fp, name, escape);
    fprintf (fp, ") = %s", hex);
  }
  else {
    fprintf (fp, "%s  ", hex);
    blk_fput_name (fp, name, escape);
  }
  fputc (zero ? '\0' : '\n', fp);
}

void
blk_fput_sum_line (FILE *fp, unsigned flags, const char *digest,
                   uint64_t block_size, const char *format, const char *hex,
                   const char *name)
{
  blk_fput_sum_line_range (fp, flags, digest, block_size, format, NULL, hex,
                           name);
}

void
blk_fput_sum_line_range (FILE *fp, unsigned flags, const char *digest,
                         uint64_t block_size, const char *format,
                         const struct blk_range *range, const char *hex,
                         const char *name)
{
  const bool tagged = (flags & BLK_SUM_TAGGED) || format ||
    (range && range->length);
  char tag[sizeof BLK_SUM_TAG_PREFIX + BLK_DIGEST_NAME_MAX +
           BLK_BLOCK_SIZE_STR_MAX];
  char bs[BLK_BLOCK_SIZE_STR_MAX];
  size_t n = strlen (BLK_SUM_TAG_PREFIX);

  /* An untagged line names no digest (it may be NULL). */
  if (!tagged) {
    fput_line (fp, flags, false, NULL, NULL, NULL, hex, name);
    return;
  }
  memcpy (tag, BLK_SUM_TAG_PREFIX, n);
  for (const char *p = digest;
       *p && n < sizeof tag - BLK_BLOCK_SIZE_STR_MAX; p++)
    tag[n++] = toupper ((unsigned char) *p);
  snprintf (tag + n, sizeof tag - n, "/%s",
            blk_format_block_size (block_size, bs));
  fput_line (fp, flags, true, tag, format, range, hex, name);
}

/* The BSD tags coreutils (sha256sum --tag, cksum -a) and b3sum write. */
static const struct plain_tag {
  const char *digest;           /* blk_digest_init's canonical name */
  const char *tag;
} plain_tags[] = {
  { "md5", "MD5" }, { "sha1", "SHA1" }, { "sha224", "SHA224" },
  { "sha256", "SHA256" }, { "sha384", "SHA384" }, { "sha512", "SHA512" },
  { "blake3", "BLAKE3" },
};
#define NR_PLAIN_TAGS (sizeof plain_tags / sizeof plain_tags[0])

const char *
blk_plain_tag (const char *digest)
{
  for (size_t i = 0; i < NR_PLAIN_TAGS; i++)
    if (strcmp (digest, plain_tags[i].digest) == 0)
      return plain_tags[i].tag;
  return NULL;
}

void
blk_fput_plain_line (FILE *fp, unsigned flags, const char *digest,
                     const char *format, const char *hex, const char *name)
{
  blk_fput_plain_line_range (fp, flags, digest, format, NULL, hex, name);
}

void
blk_fput_plain_line_range (FILE *fp, unsigned flags, const char *digest,
                           const char *format, const struct blk_range *range,
                           const char *hex, const char *name)
{
  const char *tag = blk_plain_tag (digest);

  fput_line (fp, flags,
             (flags & BLK_SUM_TAGGED) || format || (range && range->length),
             tag ? tag : digest, format, range, hex, name);
}

void
blk_fput_verdict (FILE *fp, const char *name, const char *verdict)
{
  const bool escape = blk_name_needs_escape (name);

  if (escape)
    fputc ('\\', fp);
  blk_fput_name (fp, name, escape);
  fprintf (fp, ": %s\n", verdict);
}

/* Files edited elsewhere may end lines with "\r\n". */
static void
chomp (char *line)
{
  size_t len = strlen (line);

  while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
    line[--len] = '\0';
}

/* Undo the escapes in place.  -1 on a '\\' not starting one.
 * sha256sum (coreutils 9) also writes "\\r", so accept it.
 */
static int
unescape (char *name)
{
  char *out = name;

  for (const char *p = name; *p; p++) {
    if (*p != '\\')
      *out++ = *p;
    else if (p[1] == '\\')
      *out++ = '\\', p++;
    else if (p[1] == 'n')
      *out++ = '\n', p++;
    else if (p[1] == 'r')
      *out++ = '\r', p++;
    else
      return -1;
  }
  *out = '\0';
  return 0;
}

#define HEX_DIGITS "0123456789abcdefABCDEF"
/* What blk_digest_init allows in a digest name. */
#define DIGEST_CHARS \
  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."
/* What an image format's name may have. */
#define FORMAT_CHARS \
  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

/* "HEX  NAME" or "HEX *NAME", from p.  NULL, or why not. */
static const char *
parse_untagged (char *p, size_t hexlen, struct blk_sum_line *sl)
{
  const size_t n = strspn (p, HEX_DIGITS);

  /* Two spaces, or a space and '*' (binary mode), then the name. */
  if (n == 0 || p[n] != ' ' || (p[n + 1] != ' ' && p[n + 1] != '*'))
    return "neither 'CHECKSUM  NAME' nor "
      "'BLKHASH-DIGEST/BLOCKSIZE (NAME) = CHECKSUM'";
  if (n != hexlen)
    return "the checksum's length is not the digest's (an untagged "
      "line is blkhash sha256 unless -d or --plain says otherwise)";
  if (p[n + 2] == '\0')
    return "no name";
  p[n] = '\0';
  sl->hex = p;
  sl->name = p + n + 2;
  return NULL;
}

/* What follows a tag: "[:FORMAT][@RANGE] (NAME) = HEX", from fmt, HEX of
 * hexlen digits.  NULL, or why not.
 */
static const char *
parse_tag_end (char *fmt, size_t hexlen, struct blk_sum_line *sl)
{
  char *name, *close;
  size_t n;

  /* ":FORMAT", a format given when the line was made. */
  if (*fmt == ':') {
    fmt++;
    n = strspn (fmt, FORMAT_CHARS);
    if ((sl->format = blk_image_format_n (fmt, n)) == NULL)
      return "the image format after ':' is not one nbdsum reads ("
        BLK_IMAGE_FORMATS_LIST ")";
    fmt += n;
  }
  /* "@OFFSET+LENGTH": the checksum is of those bytes. */
  if (*fmt == '@') {
    const char *msg;
    fmt++;
    n = strcspn (fmt, " ");
    if ((msg = blk_parse_range_n (fmt, n, &sl->range)) != NULL)
      return msg;
    fmt += n;
  }
  if (fmt[0] != ' ' || fmt[1] != '(')
    return "the tag is not followed by ' (NAME) = '";

  /* Names are not escaped for ')': the hex has none, so the last one
   * ends the name (as cksum -c reads it).
   */
  name = fmt + 2;
  close = strrchr (name, ')');
  if (close == NULL || strncmp (close, ") = ", 4) != 0)
    return "no ') = ' before the checksum";
  if (close == name)
    return "no name";
  n = strspn (close + 4, HEX_DIGITS);
  if (n > 0 && close[4 + n + strspn (close + 4 + n, " \t")] == '\0' &&
      close[4 + n] != '\0')
    return "a space or tab after the checksum";
  if (close[4 + n] != '\0')
    return "the checksum is not hex digits";
  if (n != hexlen)
    return sl->plain ? "the checksum's length is not its digest's"
      : "the checksum's length is not the tag's digest's";
  *close = '\0';
  sl->hex = close + 4;
  sl->name = name;
  sl->tagged = true;
  return NULL;
}

/* "BLKHASH-DIGEST/BLOCKSIZE[:FORMAT][@RANGE] (NAME) = HEX", from p.
 * NULL, or why not.
 */
static const char *
parse_tagged (char *p, struct blk_sum_line *sl)
{
  char *digest = p + strlen (BLK_SUM_TAG_PREFIX), *size, *fmt;
  char size_str[32];
  struct blk_digest d;
  uint64_t block_size;
  size_t n, hexlen;
  const char *msg;

  n = strspn (digest, DIGEST_CHARS);
  if (n == 0 || digest[n] != '/')
    return "the tag is not BLKHASH-DIGEST/BLOCKSIZE";
  if (n >= sizeof sl->digest)
    return "digest name is too long";
  digest[n] = '\0';
  if ((msg = blk_digest_init (&d, digest)) != NULL)
    return msg;
  memcpy (sl->digest, d.name, sizeof sl->digest);
  hexlen = 2 * d.len;
  blk_digest_free (&d);

  size = digest + n + 1;
  n = strspn (size, DIGEST_CHARS);
  fmt = size + n;
  if (n == 0 || (*fmt != ' ' && *fmt != ':' && *fmt != '@'))
    return "the tag is not followed by ' (NAME) = '";
  if (n >= sizeof size_str)
    return "block size is too long";
  memcpy (size_str, size, n);
  size_str[n] = '\0';
  if ((msg = blk_parse_size (size_str, &block_size)) != NULL ||
      (msg = blk_check_block_size (block_size)) != NULL)
    return msg;
  sl->block_size = block_size;

  return parse_tag_end (fmt, hexlen, sl);
}

/* "TAG[:FORMAT][@RANGE] (NAME) = HEX" of a plain digest, from p, where the
 * tag is known to end at n.  NULL, or why not.
 */
static const char *
parse_plain (char *p, size_t n, const struct plain_tag *pt,
             struct blk_sum_line *sl)
{
  struct blk_digest d;
  const char *msg;
  size_t hexlen;

  if ((msg = blk_digest_init (&d, pt->digest)) != NULL)
    return msg;
  memcpy (sl->digest, d.name, sizeof sl->digest);
  hexlen = 2 * d.len;
  blk_digest_free (&d);
  sl->plain = true;
  return parse_tag_end (p + n, hexlen, sl);
}

/* A plain tag at p ("SHA256 (", "SHA256:" or "SHA256@"), any case, or
 * NULL.
 */
static const struct plain_tag *
plain_tag_at (const char *p, size_t *n)
{
  for (size_t i = 0; i < NR_PLAIN_TAGS; i++) {
    const size_t len = strlen (plain_tags[i].tag);
    if (strncasecmp (p, plain_tags[i].tag, len) == 0 &&
        (strncmp (p + len, " (", 2) == 0 || p[len] == ':' ||
         p[len] == '@')) {
      *n = len;
      return &plain_tags[i];
    }
  }
  return NULL;
}

const char *
blk_sum_line_parse (char *line, size_t hexlen, struct blk_sum_line *sl)
{
  const bool escaped = line[0] == '\\';
  char *p = line + escaped;
  const char *msg;

  const struct plain_tag *pt;
  size_t n;

  memset (sl, 0, sizeof *sl);
  chomp (line);
  /* No hex digit is an 'L': never the start of an untagged line. */
  if (strncasecmp (p, BLK_SUM_TAG_PREFIX, strlen (BLK_SUM_TAG_PREFIX)) == 0)
    msg = parse_tagged (p, sl);
  /* No hex digit is followed by 'L', 'H' or 'D' in a tag: never the
   * start of an untagged line either.
   */
  else if ((pt = plain_tag_at (p, &n)) != NULL)
    msg = parse_plain (p, n, pt, sl);
  else
    msg = parse_untagged (p, hexlen, sl);
  if (msg == NULL && escaped && unescape (sl->name) == -1)
    return "a '\\' in the name that is not \\\\, \\n or \\r";
  return msg;
}
