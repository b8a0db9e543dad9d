/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: making the [ CMD ARGS... ] inputs, served by their own
 * command (local.c starts it; names.c knows them), and the filter
 * nbdsum's nbdkit loads.
 */
#ifndef NBDSUM_LOCAL_COMMAND_H
#define NBDSUM_LOCAL_COMMAND_H

#include <stddef.h>

/* [ CMD ARGS... ] on the command line: its n words argv (kept, not
 * copied) become one input.  Returns its name, "[ CMD ARGS... ]", which
 * names.c's name_kind and name_command know; NULL when out of memory
 * or past MAX_COMMANDS (names.h).
 */
extern const char *local_command_add (char **argv, size_t n);
/* NBDSUM_FILTER, else the build tree's filter when this nbdsum is
 * client/nbdsum of a build tree, else the installed one.
 */
extern const char *local_filter (void);

#endif /* NBDSUM_LOCAL_COMMAND_H */
