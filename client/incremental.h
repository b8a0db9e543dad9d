/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: --since=MANIFEST --dirty-bitmap=NAME (see incremental.c). */
#ifndef NBDSUM_INCREMENTAL_H
#define NBDSUM_INCREMENTAL_H

#include <stdint.h>

#include "endpoint.h"
#include "options.h"

struct incremental;

/* Check the manifest opts->since, open name with the bitmap
 * opts->dirty_bitmap, hash what changed and fold the root.  spec's
 * digest and block size may only repeat the manifest's.  NULL on
 * error (printed).
 */
extern struct incremental *incremental_open (const char *name,
                                             const struct hash_spec *spec);
extern void incremental_close (struct incremental *inc);

/* The image's endpoint: its params, size, progress. */
extern const struct endpoint *
incremental_endpoint (const struct incremental *inc);
/* The checksum now. */
extern const uint8_t *incremental_root (const struct incremental *inc);
/* Blocks hashed (or found to be holes) rather than taken from the
 * manifest.
 */
extern uint64_t incremental_hashed (const struct incremental *inc);
/* Clean blocks hashed as a sample and found equal to the manifest's. */
extern uint64_t incremental_sampled (const struct incremental *inc);

/* The digests of blocks [first, first+count) now, one after another
 * in out.  Calls go forward from block 0.  Returns 0, or -1 (error
 * printed).
 */
extern int incremental_digests (struct incremental *inc, uint64_t first,
                                uint64_t count, uint8_t *out);

#endif /* NBDSUM_INCREMENTAL_H */
