/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the [ CMD ARGS... ] inputs of the command line, made into
 * names and commands (names.c knows them by those names), and the
 * blkhash filter nbdsum's nbdkit loads, its private one's and a
 * [ nbdkit ... ]'s alike.
 */
#include <config.h>

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "local-command.h"
#include "names.h"
#include "paths.h"

const char *
local_filter (void)
{
  static const char build_tree[] = "/../filter/.libs/nbdkit-blkhash-filter.so";
  static char path[PATH_MAX + sizeof build_tree];
  const char *env = getenv ("NBDSUM_FILTER");
  ssize_t n;

  if (env && *env)
    return env;
  n = readlink ("/proc/self/exe", path, PATH_MAX - 1);
  if (n > 0) {
    path[n] = '\0';
    char *slash = strrchr (path, '/');
    if (slash) {
      strcpy (slash, build_tree);
      if (access (path, R_OK) == 0)
        return path;
    }
  }
  if (access (FILTERDIR "/nbdkit-blkhash-filter.so", R_OK) == 0)
    return FILTERDIR "/nbdkit-blkhash-filter.so";
  return "blkhash";
}

/* In [ nbdkit ... --filter=blkhash ... ], blkhash is the filter this
 * nbdsum was installed with, as for its private nbdkit: with --prefix
 * it is not where nbdkit looks for filters.  false if out of memory.
 */
static bool
command_own_filter (char **argv, size_t n)
{
  const char *prog = strrchr (argv[0], '/'), *filter = local_filter (), *v;

  prog = prog ? prog + 1 : argv[0];
  if (strcmp (prog, "nbdkit") != 0 || strcmp (filter, "blkhash") == 0)
    return true;
  for (size_t i = 1; i < n; i++) {
    if (strcmp (argv[i], "--") == 0)
      break;
    /* nbdkit's --filter, as getopt takes it: --fi at least. */
    if (!long_option_is (argv[i], "filter", 2, &v))
      continue;
    if (v && strcmp (v, "blkhash") == 0) {
      if (asprintf (&argv[i], "--filter=%s", filter) == -1)
        return false;
    }
    else if (!v && i + 1 < n && strcmp (argv[i + 1], "blkhash") == 0)
      argv[++i] = (char *) filter;
  }
  return true;
}

const char *
local_command_add (char **argv, size_t n)
{
  char *name, **cmd;
  size_t len = 2;

  if (n == 0)
    return NULL;
  for (size_t i = 0; i < n; i++)
    len += strlen (argv[i]) + 1;
  name = malloc (len + 2);
  cmd = calloc (n + 1, sizeof *cmd);
  if (name == NULL || cmd == NULL) {
    free (name);
    free (cmd);
    return NULL;
  }
  strcpy (name, "[");
  for (size_t i = 0; i < n; i++) {
    strcat (name, " ");
    strcat (name, argv[i]);
    cmd[i] = argv[i];
  }
  strcat (name, " ]");
  /* The name stays as the user wrote it.  names.c knows it by its
   * address from now on.
   */
  if (!command_own_filter (cmd, n) || !name_add_command (name, cmd)) {
    free (name);
    free (cmd);
    return NULL;
  }
  return name;
}
