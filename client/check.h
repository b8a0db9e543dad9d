/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: --check, like sha256sum -c. */
#ifndef NBDSUM_CHECK_H
#define NBDSUM_CHECK_H

#include "options.h"

/* Check the lines of each file, hashing their inputs as spec says.
 * Returns the exit status.
 */
extern int check_files (char **files, int n, const struct hash_spec *spec);

/* --check-manifest: is each manifest whole, and do its block digests
 * give the checksum it carries?  Returns the exit status.
 */
extern int check_manifests (char **files, int n);

#endif /* NBDSUM_CHECK_H */
