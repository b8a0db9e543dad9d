/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what kind of thing an input name is (standard input, an NBD
 * URI, an http(s) URL, a [ CMD ARGS... ] input, a local file), decided
 * here only, and
 * the table of the [ CMD ] inputs that decides it for them.  At the
 * bottom: libc only.
 */
#ifndef NBDSUM_NAMES_H
#define NBDSUM_NAMES_H

#include <stdbool.h>

enum name_kind {
  NAME_STDIN,                   /* "-" */
  NAME_URI,                     /* nbd...://... */
  NAME_HTTP,                    /* http://... or https://... */
  NAME_COMMAND,                 /* a name name_add_command was given */
  NAME_FILE,                    /* anything else: a local path */
};

/* What name is.  A [ CMD ] input is known by its name's address, not
 * its spelling: a checksum line's "[ x ]" is a file.
 */
extern enum name_kind name_kind (const char *name);

/* name_kind (name) is NAME_STDIN. */
extern bool name_is_stdin (const char *name);
/* name_kind (name) is NAME_URI: it starts "nbd" and has "://". */
extern bool name_is_uri (const char *name);
/* A local file or standard input (which --format applies to), rather
 * than a URI, a URL or a [ CMD ] input, which are hashed as served.
 */
extern bool name_is_local (const char *name);
/* name_kind (name) is NAME_HTTP: it starts http:// or https:// (the
 * scheme in any case), and is read by nbdkit's curl plugin.
 */
extern bool name_is_http (const char *name);

/* Does name stand for standard input: -, or another name of what it
 * is (/dev/stdin, /proc/self/fd/0)?
 */
extern bool names_stdin (const char *name);

/* The [ CMD ARGS... ] inputs local-command.c makes: name (kept, its
 * address is the input's) is served by argv (kept, NULL-terminated).
 * false when MAX_COMMANDS are known already.
 */
#define MAX_COMMANDS 256
extern bool name_add_command (const char *name, char **argv);
/* The command of a name name_add_command was given, or NULL. */
extern char **name_command (const char *name);

#endif /* NBDSUM_NAMES_H */
