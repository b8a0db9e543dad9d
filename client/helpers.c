/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: small shared helpers (see helpers.h). */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blkhash.h"
#include "helpers.h"

bool
is_uri (const char *arg)
{
  return strncmp (arg, "nbd", 3) == 0 && strstr (arg, "://") != NULL;
}

const char *
temp_dir (void)
{
  const char *dir = getenv ("TMPDIR");

  return dir && *dir ? dir : "/tmp";
}

char *
absolute_path (const char *path)
{
  char *cwd, *abs;
  size_t len;

  if (path[0] == '/')
    return strdup (path);
  if ((cwd = getcwd (NULL, 0)) == NULL)
    return NULL;
  len = strlen (cwd);
  if (asprintf (&abs, "%s%s%s", cwd, len && cwd[len - 1] == '/' ? "" : "/",
                path) == -1)
    abs = NULL;
  free (cwd);
  return abs;
}

/* Why standard output first failed, or 0: a later flush with nothing
 * left to write says nothing.
 */
static int stdout_errno;

void
stdout_flush (void)
{
  errno = 0;
  if (fflush (stdout) == EOF && stdout_errno == 0)
    stdout_errno = errno ? errno : EIO;
}

int
stdout_error (void)
{
  stdout_flush ();
  if (ferror (stdout) && stdout_errno == 0)
    stdout_errno = EIO;
  return stdout_errno;
}

double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

size_t
utf8_char (const unsigned char *p, size_t n)
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

struct hash_spec
hash_spec_or_defaults (const struct hash_spec *spec)
{
  return (struct hash_spec) {
    .digest = spec->digest ? spec->digest : BLK_DEFAULT_DIGEST,
    .block_size = spec->block_size ? spec->block_size
                  : BLK_DEFAULT_BLOCK_SIZE,
    .format = spec->format,
  };
}
