/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what kind of thing an input name is, and the table of the
 * [ CMD ] inputs by their names (see names.h).
 */
#include <config.h>

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>

#include "names.h"

/* The [ CMD ARGS... ] inputs, known by their names' addresses. */
static struct command {
  const char *name;
  char **argv;
} commands[MAX_COMMANDS];
static size_t ncommands;

bool
name_add_command (const char *name, char **argv)
{
  if (ncommands == MAX_COMMANDS)
    return false;
  commands[ncommands++] = (struct command) { name, argv };
  return true;
}

char **
name_command (const char *name)
{
  for (size_t i = 0; i < ncommands; i++)
    if (name == commands[i].name)
      return commands[i].argv;
  return NULL;
}

/* A command's name is "[ ... ]": never "-" nor a URI or URL, so the
 * order of the tests does not matter.  Only the two schemes the curl
 * plugin is allowed (local-http.c): any other "x://" is a file's name.
 */
enum name_kind
name_kind (const char *name)
{
  if (strcmp (name, "-") == 0)
    return NAME_STDIN;
  if (name_command (name))
    return NAME_COMMAND;
  if (strncmp (name, "nbd", 3) == 0 && strstr (name, "://") != NULL)
    return NAME_URI;
  if (strncasecmp (name, "http://", 7) == 0 ||
      strncasecmp (name, "https://", 8) == 0)
    return NAME_HTTP;
  return NAME_FILE;
}

bool
name_is_stdin (const char *name)
{
  return name_kind (name) == NAME_STDIN;
}

bool
name_is_uri (const char *name)
{
  return name_kind (name) == NAME_URI;
}

bool
name_is_local (const char *name)
{
  const enum name_kind kind = name_kind (name);

  return kind == NAME_FILE || kind == NAME_STDIN;
}

bool
name_is_http (const char *name)
{
  return name_kind (name) == NAME_HTTP;
}

bool
names_stdin (const char *name)
{
  struct stat in, st;

  if (name_is_stdin (name))
    return true;
  return name_kind (name) == NAME_FILE && fstat (STDIN_FILENO, &in) == 0 &&
    stat (name, &st) == 0 &&
    st.st_dev == in.st_dev && st.st_ino == in.st_ino;
}
