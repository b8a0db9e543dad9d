/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: reading a saved --blocks manifest, for --diff --manifest.
 *
 * Text (a line '# DIGEST BLOCK-SIZE SIZE', then 'OFFSET LENGTH HEX' or
 * 'OFFSET LENGTH zero' lines) or the JSON of --blocks --json.  The
 * whole manifest is checked before it is used: lines in order and
 * without gaps, each block at its length, a zero run of whole blocks,
 * the last line ending at SIZE.
 */
#ifndef NBDSUM_MANIFEST_H
#define NBDSUM_MANIFEST_H

#include <stdint.h>

#include "blkhash.h"

struct manifest;

/* Read and check the manifest at path ("-": standard input).  NULL on
 * error (printed).
 */
extern struct manifest *manifest_open (const char *path);
extern void manifest_close (struct manifest *m);

/* The digest and block size it was made with, and the image size. */
extern const struct blk_params *manifest_params (const struct manifest *m);
extern uint64_t manifest_size (const struct manifest *m);

/* The digests of blocks [first, first+count), one after another in
 * out.  Calls must go forward: first is where the last call ended
 * (0 at first).  Returns 0, or -1 (error printed).
 */
extern int manifest_digests (struct manifest *m, uint64_t first,
                             uint64_t count, uint8_t *out);

#endif /* NBDSUM_MANIFEST_H */
