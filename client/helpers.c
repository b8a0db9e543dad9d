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
