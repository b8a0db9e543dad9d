/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: JSON output (see json.h).  A writer is a value: this file
 * depends on lib/ alone, and on no state but json_out's.
 */
#include <config.h>

#include <assert.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "util.h"

struct json_writer json_out;

static FILE *
out (const struct json_writer *w)
{
  return w->fp ? w->fp : stdout;
}

static void
indent (struct json_writer *w, int n)
{
  for (int i = 0; i < n; i++)
    fputs ("  ", out (w));
}

/* Is s valid UTF-8 (no overlong forms, no surrogates)? */
static bool
json_utf8_valid (const char *s)
{
  const unsigned char *p = (const unsigned char *) s;
  size_t n = strlen (s), len;

  for (size_t i = 0; i < n; i += len)
    if ((len = blk_utf8_char (p + i, n - i)) == 0)
      return false;
  return true;
}

/* A JSON string: quotes, backslashes and control characters (C0, DEL,
 * C1) escaped, UTF-8 as it is, any other byte as U+FFFD.
 */
static void
put_string (struct json_writer *w, const char *s)
{
  FILE *fp = out (w);
  const unsigned char *p = (const unsigned char *) s;
  const size_t n = strlen (s);
  size_t len;

  putc ('"', fp);
  for (size_t i = 0; i < n; i += len) {
    const unsigned char c = p[i];

    len = 1;
    switch (c) {
    case '"': fputs ("\\\"", fp); continue;
    case '\\': fputs ("\\\\", fp); continue;
    case '\b': fputs ("\\b", fp); continue;
    case '\f': fputs ("\\f", fp); continue;
    case '\n': fputs ("\\n", fp); continue;
    case '\r': fputs ("\\r", fp); continue;
    case '\t': fputs ("\\t", fp); continue;
    }
    if (c < 0x20 || c == 0x7f)
      fprintf (fp, "\\u%04x", c);
    /* A C1 control (U+009B is a CSI) as the escape it is too. */
    else if (c == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 &&
             p[i + 1] <= 0x9f) {
      fprintf (fp, "\\u%04x", p[i + 1]);
      len = 2;
    }
    else if ((len = blk_utf8_char (p + i, n - i)) == 0) {
      fputs ("\\ufffd", fp);
      len = 1;
    }
    else
      fwrite (p + i, 1, len, fp);
  }
  putc ('"', fp);
}

/* Before any value: the separator from the previous one, and the key
 * in an object.
 */
static void
begin_value (struct json_writer *w, const char *key)
{
  struct json_level *l;

  if (w->depth == 0) {
    assert (key == NULL);
    return;
  }
  l = &w->stack[w->depth - 1];
  assert ((key == NULL) == l->array);
  if (!l->empty)
    putc (',', out (w));
  if (l->compact) {
    if (!l->empty)
      putc (' ', out (w));
  }
  else {
    putc ('\n', out (w));
    indent (w, w->depth);
  }
  l->empty = false;
  if (key) {
    put_string (w, key);
    fputs (": ", out (w));
  }
}

static void
begin (struct json_writer *w, const char *key, bool array, bool compact)
{
  begin_value (w, key);
  assert (w->depth < JSON_MAX_DEPTH);
  /* Inside a line, everything is on that line. */
  if (w->depth > 0 && w->stack[w->depth - 1].compact)
    compact = true;
  w->stack[w->depth++] = (struct json_level) { array, compact, true };
  putc (array ? '[' : '{', out (w));
}

void
jw_begin_object (struct json_writer *w, const char *key, bool compact)
{
  begin (w, key, false, compact);
}

void
jw_begin_array (struct json_writer *w, const char *key, bool compact)
{
  begin (w, key, true, compact);
}

void
jw_end (struct json_writer *w)
{
  struct json_level *l;

  assert (w->depth > 0);
  l = &w->stack[--w->depth];
  if (!l->compact && !l->empty) {
    putc ('\n', out (w));
    indent (w, w->depth);
  }
  putc (l->array ? ']' : '}', out (w));
  if (w->depth == 0)
    putc ('\n', out (w));
}

void
jw_end_to (struct json_writer *w, int d)
{
  while (w->depth > d)
    jw_end (w);
}

void
jw_string (struct json_writer *w, const char *key, const char *s)
{
  begin_value (w, key);
  put_string (w, s);
}

void
jw_uint (struct json_writer *w, const char *key, uint64_t v)
{
  begin_value (w, key);
  fprintf (out (w), "%" PRIu64, v);
}

void
jw_seconds (struct json_writer *w, const char *key, double v)
{
  begin_value (w, key);
  fprintf (out (w), "%.3f", v);
}

void
jw_bool (struct json_writer *w, const char *key, bool v)
{
  begin_value (w, key);
  fputs (v ? "true" : "false", out (w));
}

void
jw_name (struct json_writer *w, const char *key, const char *name)
{
  char hexkey[64];

  jw_string (w, key, name);
  if (json_utf8_valid (name))
    return;
  snprintf (hexkey, sizeof hexkey, "%s-hex", key);
  begin_value (w, hexkey);
  putc ('"', out (w));
  for (const unsigned char *p = (const unsigned char *) name; *p; p++)
    fprintf (out (w), "%02x", *p);
  putc ('"', out (w));
}

void
jw_interrupted (struct json_writer *w, int sig)
{
  char name[32];

  if (w->depth == 0)
    return;
  jw_end_to (w, 1);
  snprintf (name, sizeof name, "SIG%s", sigabbrev_np (sig));
  jw_string (w, "interrupted", name);
  jw_end (w);
}
