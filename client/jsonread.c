/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a streaming JSON token reader (see jsonread.h), used by
 * manifest.c to read the JSON of --blocks --json.
 *
 * Why not a library: a manifest lists every block of the image, 16 Mi
 * objects for a 1 TiB image in 64K blocks, about 1.6 GB of JSON, and
 * nbdsum reads it twice in bounded memory.  json-c and jansson, the
 * JSON libraries of Debian and Fedora, build the whole document in
 * memory before the caller sees any of it.  yajl streams, but its
 * upstream has been unmaintained since 2014.  The grammar nbdsum
 * needs is small: tokens here, the structure of a manifest, with its
 * own rules, in manifest.c.  Strings are decoded strictly (escapes,
 * surrogate pairs; no raw control characters, no NUL); numbers and
 * words are handed over as text for the caller to judge.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonread.h"
#include "util.h"

static int __attribute__ ((format (printf, 2, 3)))
json_fail (struct json_reader *r, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (r->error, sizeof r->error, fmt, ap);
  va_end (ap);
  return -1;
}

int
json_reader_init (struct json_reader *r, FILE *fp, size_t max)
{
  memset (r, 0, sizeof *r);
  if ((r->text = malloc (max)) == NULL)
    return -1;
  r->fp = fp;
  r->max = max;
  json_reader_reset (r);
  return 0;
}

void
json_reader_free (struct json_reader *r)
{
  free (r->text);
  r->text = NULL;
}

void
json_reader_reset (struct json_reader *r)
{
  r->line = 1;
  r->type = JSON_EOF;
  r->len = 0;
  r->text[0] = '\0';
  r->error[0] = '\0';
}

static int
json_get (struct json_reader *r)
{
  const int c = getc (r->fp);

  if (c == '\n')
    r->line++;
  return c;
}

static int
json_add_char (struct json_reader *r, int c)
{
  if (r->len >= r->max - 1)
    return json_fail (r, "a string or number is too long");
  r->text[r->len++] = c;
  r->text[r->len] = '\0';
  return 0;
}

static int
json_add_utf8 (struct json_reader *r, uint32_t c)
{
  uint8_t b[4];
  int n;

  if (c < 0x80)
    return json_add_char (r, c);
  if (c < 0x800) {
    b[0] = 0xc0 | c >> 6;
    n = 2;
  }
  else if (c < 0x10000) {
    b[0] = 0xe0 | c >> 12;
    n = 3;
  }
  else {
    b[0] = 0xf0 | c >> 18;
    n = 4;
  }
  for (int i = 1; i < n; i++)
    b[i] = 0x80 | (c >> (6 * (n - 1 - i)) & 0x3f);
  for (int i = 0; i < n; i++)
    if (json_add_char (r, b[i]) == -1)
      return -1;
  return 0;
}

static int
json_read_u_escape (struct json_reader *r, uint32_t *v)
{
  *v = 0;
  for (int i = 0; i < 4; i++) {
    const int d = blk_hex_value (json_get (r));
    if (d == -1)
      return json_fail (r, "invalid \\u escape");
    *v = *v << 4 | d;
  }
  return 0;
}

static int
json_read_string (struct json_reader *r)
{
  uint32_t u, lo;
  int c;

  for (;;) {
    c = json_get (r);
    if (c == EOF)
      return json_fail (r, "unterminated string");
    if (c == '"')
      return 0;
    if (c < 0x20)
      return json_fail (r, "control character in a string");
    if (c != '\\') {
      if (json_add_char (r, c) == -1)
        return -1;
      continue;
    }
    switch (c = json_get (r)) {
    case '"': case '\\': case '/': break;
    case 'b': c = '\b'; break;
    case 'f': c = '\f'; break;
    case 'n': c = '\n'; break;
    case 'r': c = '\r'; break;
    case 't': c = '\t'; break;
    case 'u':
      if (json_read_u_escape (r, &u) == -1)
        return -1;
      if (u >= 0xd800 && u <= 0xdbff) {
        if (json_get (r) != '\\' || json_get (r) != 'u' ||
            json_read_u_escape (r, &lo) == -1 || lo < 0xdc00 || lo > 0xdfff)
          return json_fail (r, "invalid \\u escape (a lone surrogate)");
        u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
      }
      else if ((u >= 0xdc00 && u <= 0xdfff) || u == 0)
        return json_fail (r, "invalid \\u escape");
      if (json_add_utf8 (r, u) == -1)
        return -1;
      continue;
    default:
      return json_fail (r, "invalid escape in a string");
    }
    if (json_add_char (r, c) == -1)
      return -1;
  }
}

int
json_next (struct json_reader *r)
{
  int c;

  do
    c = json_get (r);
  while (c == ' ' || c == '\t' || c == '\n' || c == '\r');
  r->len = 0;
  r->text[0] = '\0';
  if (c == EOF) {
    if (ferror (r->fp))
      return json_fail (r, "%s", strerror (errno));
    r->type = JSON_EOF;
    return 0;
  }
  if (strchr ("{}[]:,", c)) {
    r->type = JSON_PUNCT;
    r->punct = c;
    return 0;
  }
  if (c == '"') {
    r->type = JSON_STRING;
    return json_read_string (r);
  }
  if (c == '-' || isdigit (c) || isalpha (c)) {
    r->type = isalpha (c) ? JSON_WORD : JSON_NUMBER;
    do {
      if (json_add_char (r, c) == -1)
        return -1;
      c = getc (r->fp);
    } while (c != EOF && (isalnum (c) || strchr ("-+.", c)));
    if (c != EOF)
      ungetc (c, r->fp);
    return 0;
  }
  return json_fail (r, "not JSON: unexpected character 0x%02x",
                    (unsigned) c);
}

bool
json_is (const struct json_reader *r, int c)
{
  return r->type == JSON_PUNCT && r->punct == c;
}

int
json_expect (struct json_reader *r, int c)
{
  if (json_next (r) == -1)
    return -1;
  if (!json_is (r, c))
    return json_fail (r, "expected '%c'", c);
  return 0;
}

/* The next member of an object or array ending in close: 1 (its first
 * token read), 0 at close, or -1.
 */
static int
next_member (struct json_reader *r, bool *first, int close)
{
  if (json_next (r) == -1)
    return -1;
  if (json_is (r, close))
    return 0;
  if (!*first) {
    if (!json_is (r, ','))
      return json_fail (r, "expected ',' or '%c'", close);
    if (json_next (r) == -1)
      return -1;
  }
  *first = false;
  return 1;
}

int
json_next_key (struct json_reader *r, bool *first, char *key, size_t size)
{
  const int k = next_member (r, first, '}');

  if (k != 1)
    return k;
  if (r->type != JSON_STRING)
    return json_fail (r, "expected a key");
  if (r->len >= size)
    return json_fail (r, "unknown key");
  memcpy (key, r->text, r->len + 1);
  return json_expect (r, ':') == -1 ? -1 : 1;
}

int
json_next_element (struct json_reader *r, bool *first)
{
  return next_member (r, first, ']');
}

int
json_skip_value (struct json_reader *r)
{
  int depth = 0;

  for (;;) {
    if (r->type == JSON_EOF)
      return json_fail (r, "truncated");
    if (json_is (r, '{') || json_is (r, '['))
      depth++;
    else if (json_is (r, '}') || json_is (r, ']'))
      depth--;
    if (depth <= 0)
      return 0;
    if (json_next (r) == -1)
      return -1;
  }
}
