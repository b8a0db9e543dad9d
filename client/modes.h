/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: its modes, one file each, as nbdinfo has them; main
 * (nbdsum.c) runs the one the options chose.  A mode asks inputs
 * (input.h) for checksums or block digests and prints them.  Each
 * takes the arguments after the options (never none: main makes that
 * standard input) and the hash spec of -d and --block-size, and
 * returns the exit status.
 *
 *   mode-sums.c            NAME...          a checksum line each
 *   mode-check.c           -c FILE...       verify checksum lines
 *   mode-diff.c            --diff A B       where two images differ
 *                          --diff --manifest=M B
 *   mode-blocks.c          --blocks NAME    its manifest
 *   mode-check-manifest.c  --check-manifest FILE...
 *   mode-bmap.c            --bmap NAME      its bmaptool block map
 */
#ifndef NBDSUM_MODES_H
#define NBDSUM_MODES_H

#include "options.h"

typedef int mode_fn (char **args, int nargs, const struct hash_spec *spec);

extern mode_fn mode_sums;
extern mode_fn mode_check;
extern mode_fn mode_diff;
extern mode_fn mode_blocks;
extern mode_fn mode_check_manifest;
extern mode_fn mode_bmap;

#endif /* NBDSUM_MODES_H */
