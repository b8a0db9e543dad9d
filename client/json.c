/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: --json output (see json.h). */
#include <config.h>

#include <assert.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "helpers.h"
#include "json.h"
#include "messages.h"
#include "util.h"

#define MAX_DEPTH 8

static struct level {
  bool array;
  bool compact;
  bool empty;                   /* nothing written in it yet */
} stack[MAX_DEPTH];
static int depth;

static void
indent (int n)
{
  for (int i = 0; i < n; i++)
    fputs ("  ", stdout);
}

bool
json_utf8_valid (const char *s)
{
  const unsigned char *p = (const unsigned char *) s;
  size_t n = strlen (s), len;

  for (size_t i = 0; i < n; i += len)
    if ((len = utf8_char (p + i, n - i)) == 0)
      return false;
  return true;
}

/* A JSON string: quotes, backslashes and control characters escaped,
 * UTF-8 as it is, any other byte as U+FFFD.
 */
static void
put_string (const char *s)
{
  const unsigned char *p = (const unsigned char *) s;
  const size_t n = strlen (s);
  size_t len;

  putchar ('"');
  for (size_t i = 0; i < n; i += len) {
    const unsigned char c = p[i];

    len = 1;
    switch (c) {
    case '"': fputs ("\\\"", stdout); continue;
    case '\\': fputs ("\\\\", stdout); continue;
    case '\b': fputs ("\\b", stdout); continue;
    case '\f': fputs ("\\f", stdout); continue;
    case '\n': fputs ("\\n", stdout); continue;
    case '\r': fputs ("\\r", stdout); continue;
    case '\t': fputs ("\\t", stdout); continue;
    }
    if (c < 0x20 || c == 0x7f)
      printf ("\\u%04x", c);
    else if ((len = utf8_char (p + i, n - i)) == 0) {
      fputs ("\\ufffd", stdout);
      len = 1;
    }
    else
      fwrite (p + i, 1, len, stdout);
  }
  putchar ('"');
}

/* Before any value: the separator from the previous one, and the key
 * in an object.
 */
static void
begin_value (const char *key)
{
  struct level *l;

  if (depth == 0) {
    assert (key == NULL);
    return;
  }
  l = &stack[depth - 1];
  assert ((key == NULL) == l->array);
  if (!l->empty)
    putchar (',');
  if (l->compact) {
    if (!l->empty)
      putchar (' ');
  }
  else {
    putchar ('\n');
    indent (depth);
  }
  l->empty = false;
  if (key) {
    put_string (key);
    fputs (": ", stdout);
  }
}

static void
begin (const char *key, bool array, bool compact)
{
  begin_value (key);
  assert (depth < MAX_DEPTH);
  /* Inside a line, everything is on that line. */
  if (depth > 0 && stack[depth - 1].compact)
    compact = true;
  stack[depth++] = (struct level) { array, compact, true };
  putchar (array ? '[' : '{');
}

void
json_begin_object (const char *key, bool compact)
{
  begin (key, false, compact);
}

void
json_begin_array (const char *key, bool compact)
{
  begin (key, true, compact);
}

void
json_end (void)
{
  struct level *l;

  assert (depth > 0);
  l = &stack[--depth];
  if (!l->compact && !l->empty) {
    putchar ('\n');
    indent (depth);
  }
  putchar (l->array ? ']' : '}');
  if (depth == 0)
    putchar ('\n');
}

void
json_end_to (int d)
{
  while (depth > d)
    json_end ();
}

int
json_depth (void)
{
  return depth;
}

void
json_string (const char *key, const char *s)
{
  begin_value (key);
  put_string (s);
}

void
json_uint (const char *key, uint64_t v)
{
  begin_value (key);
  printf ("%" PRIu64, v);
}

void
json_seconds (const char *key, double v)
{
  begin_value (key);
  printf ("%.3f", v);
}

void
json_bool (const char *key, bool v)
{
  begin_value (key);
  fputs (v ? "true" : "false", stdout);
}

void
json_name (const char *key, const char *name)
{
  json_string (key, name);
  if (!json_utf8_valid (name)) {
    const size_t n = strlen (name);
    CLEANUP_FREE char *hex = malloc (2 * n + 1);
    char hexkey[64];

    snprintf (hexkey, sizeof hexkey, "%s-hex", key);
    if (hex == NULL) {
      fprintf (stderr, "%s: out of memory\n", progname);
      return;
    }
    blk_hex ((const uint8_t *) name, n, hex);
    json_string (hexkey, hex);
  }
}

void
json_interrupted (int sig)
{
  char name[32];

  if (depth == 0)
    return;
  json_end_to (1);
  snprintf (name, sizeof name, "SIG%s", sigabbrev_np (sig));
  json_string ("interrupted", name);
  json_end ();
}
