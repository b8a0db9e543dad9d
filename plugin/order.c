/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: where blkhash sits among nbdkit's filters.
 *
 * A filter in front of blkhash sees the views as data exports of the
 * same plugin.  One that keeps data (cache, cow, readahead) can serve
 * view bytes as image data or write them back into the image, and one
 * that makes exports writable (cow) makes the views writable; one that
 * changes bytes, sizes or names (offset, partition, truncate, ...)
 * makes the view describe something else than its data export.  So
 * blkhash must come first, behind only filters that pass requests
 * through unchanged.
 *
 * nbdkit tells a filter nothing of the filters in front of it, but
 * they are on nbdkit's command line, in order, outermost first: read
 * in /proc/self/cmdline.  Without it (not Linux) nothing is checked.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "filter.h"

/* Filters that may sit in front of blkhash: they pass every request,
 * name and answer through, or fail it, and keep no data.
 */
static const char *const pass_through[] = {
  "delay", "error", "exitlast", "exitwhen", "ip", "limit", "log",
  "noparallel", "rate", "stats", NULL,
};

/* nbdkit's name for a --filter argument: "cache" for "cache" and
 * for ".../nbdkit-cache-filter.so".  Returns a pointer into buf.
 */
static const char *
filter_name (const char *arg, char *buf, size_t size)
{
  const char *base = strrchr (arg, '/');
  size_t len;

  base = base ? base + 1 : arg;
  snprintf (buf, size, "%s", base);
  len = strlen (buf);
  if (len > 10 && strcmp (buf + len - 10, "-filter.so") == 0)
    buf[len - 10] = '\0';
  if (strncmp (buf, "nbdkit-", 7) == 0)
    return buf + 7;
  return buf;
}

/* The value of a --filter option at argument i of argv (n of them),
 * getopt's way: "--filter=X", "--filter X", or an unambiguous
 * abbreviation ("--filt=X").  NULL if argument i is not one.
 */
static const char *
filter_option (char **argv, size_t n, size_t *i)
{
  const char *a = argv[*i];
  const size_t len = strcspn (a, "=");

  if (len < 5 || strncmp (a, "--filter", len) != 0)
    return NULL;
  if (a[len] == '=')
    return a + len + 1;
  if (*i + 1 < n)
    return argv[++*i];
  return NULL;
}

static bool
passes_through (const char *name)
{
  for (size_t i = 0; pass_through[i]; i++)
    if (strcmp (name, pass_through[i]) == 0)
      return true;
  return false;
}

/* Split the NUL-separated arguments of /proc/self/cmdline. */
static size_t
split_args (char *buf, size_t len, char ***argv)
{
  size_t n = 0, i;

  for (i = 0; i < len; i++)
    n += buf[i] == '\0';
  *argv = malloc ((n + 1) * sizeof **argv);
  if (*argv == NULL)
    return 0;
  n = 0;
  for (i = 0; i < len; i += strlen (buf + i) + 1)
    (*argv)[n++] = buf + i;
  return n;
}

int
blkhash_order_check (void)
{
  CLEANUP_FREE char *buf = NULL;
  CLEANUP_FREE char **argv = NULL;
  size_t size = 0, len, n;
  FILE *fp;
  char name[256];

  fp = fopen ("/proc/self/cmdline", "re");
  if (fp == NULL) {
    nbdkit_debug ("blkhash: cannot read nbdkit's command line (%m): the "
                  "order of filters is not checked");
    return 0;
  }
  len = getdelim (&buf, &size, EOF, fp);
  fclose (fp);
  if (len == (size_t) -1 || len == 0)
    return 0;
  n = split_args (buf, buf[len - 1] == '\0' ? len : len + 1, &argv);

  for (size_t i = 1; i < n; i++) {
    const char *arg = filter_option (argv, n, &i);
    const char *f;
    if (arg == NULL)
      continue;
    f = filter_name (arg, name, sizeof name);
    if (strcmp (f, "blkhash") == 0)
      return 0;
    if (!passes_through (f)) {
      nbdkit_error ("blkhash: --filter=%s is in front of --filter=blkhash: "
                    "it would see the views as data (serving view bytes "
                    "as image data, writing them into the image, making "
                    "views writable, or describing other bytes than the "
                    "export's).  Give --filter=blkhash first; only "
                    "delay, error, exitlast, exitwhen, ip, limit, log, "
                    "noparallel, rate and stats may come before it.", f);
      return -1;
    }
  }
  return 0;
}
