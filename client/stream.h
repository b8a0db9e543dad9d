/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: blkhash of a byte stream (standard input). */
#ifndef NBDSUM_STREAM_H
#define NBDSUM_STREAM_H

#include <stdint.h>

#include "blkhash.h"
#include "options.h"

/* Hash what fd gives until its end with spec (or the defaults); p is
 * initialised and must be freed by the caller on success.  0, or -1
 * (error printed).  A stream is its bytes: without spec->format, one
 * that looks like another format is refused; spec->format "raw" hashes
 * it all the same; any other format is an error.
 */
extern int stream_checksum (const char *name, int fd,
                            const struct hash_spec *spec, uint8_t *root,
                            uint64_t *size, struct blk_params *p);

#endif /* NBDSUM_STREAM_H */
