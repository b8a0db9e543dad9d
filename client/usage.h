/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what it says of itself, for options.c; each exits. */
#ifndef NBDSUM_USAGE_H
#define NBDSUM_USAGE_H

#include <stdio.h>

/* --help on fp, exiting with status (fp stderr: a usage error). */
extern void usage (FILE *fp, int status) __attribute__ ((noreturn));
/* --list-digests: each digest nbdsum accepts, with its length. */
extern void list_digests (void) __attribute__ ((noreturn));
/* --bats-helper: the bats helpers beside a build tree's nbdsum
 * (client/nbdsum, with bats/ beside client/), else the installed
 * ones.
 */
extern void print_bats_helper (void) __attribute__ ((noreturn));
/* --version: ours, then libnbd's, as nbdinfo and nbdcopy. */
extern void print_version (void) __attribute__ ((noreturn));

#endif /* NBDSUM_USAGE_H */
