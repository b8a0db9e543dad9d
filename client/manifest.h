/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: reading a saved --blocks manifest, for --diff --manifest,
 * --since and --check-manifest.
 *
 * Text (a line '# DIGEST BLOCK-SIZE SIZE CHECKSUM', then 'OFFSET
 * LENGTH HEX' or 'OFFSET LENGTH zero' lines) or the JSON of --blocks
 * --json.  The whole manifest is checked before it is used: lines in
 * order and without gaps, each block at its length, a zero run of
 * whole blocks, the last line ending at SIZE, and the block digests
 * folding to CHECKSUM (manifests written before it was there have
 * none).  Each later reading checks the same again.
 */
#ifndef NBDSUM_MANIFEST_H
#define NBDSUM_MANIFEST_H

#include <stdbool.h>
#include <stdint.h>

#include "blkhash.h"
#include "options.h"

struct manifest;

/* Read and check the manifest at path ("-": standard input).  NULL on
 * error (printed).
 */
extern struct manifest *manifest_open (const char *path);
/* The same, calling visit for each entry as it is checked: blocks
 * [first, first+count), a run of zero blocks (digest NULL) or one
 * block whose digest p says.  What it was told is only good if the
 * manifest then opens.
 */
typedef void manifest_visit_fn (void *opaque, const struct blk_params *p,
                                uint64_t first, uint64_t count,
                                const uint8_t *digest);
extern struct manifest *manifest_open_visit (const char *path,
                                             manifest_visit_fn *visit,
                                             void *opaque);
extern void manifest_close (struct manifest *m);

/* The digest and block size it was made with, and the image size. */
extern const struct blk_params *manifest_params (const struct manifest *m);
extern uint64_t manifest_size (const struct manifest *m);

/* An image compared with it is hashed as it was made: -d and
 * --block-size (in spec) may only repeat that.  Fills out, or returns
 * -1 (error printed).
 */
extern int manifest_hash_spec (const struct manifest *m,
                               const struct hash_spec *spec,
                               struct hash_spec *out);

/* The checksum it carries, in root: false if it has none. */
extern bool manifest_root (const struct manifest *m, uint8_t *root);

/* Start reading its digests again from block 0.  Returns 0, or -1
 * (error printed).
 */
extern int manifest_rewind (struct manifest *m);

/* The digests of blocks [first, first+count), one after another in
 * out.  Calls must go forward: first is where the last call ended
 * (0 at first).  Returns 0, or -1 (error printed).
 */
extern int manifest_digests (struct manifest *m, uint64_t first,
                             uint64_t count, uint8_t *out);

#endif /* NBDSUM_MANIFEST_H */
