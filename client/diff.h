/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: --diff and --blocks. */
#ifndef NBDSUM_DIFF_H
#define NBDSUM_DIFF_H

#include "options.h"

/* Print where images a and b differ, b hashed like a (spec, then what
 * a's server chose).  Returns the exit status: 0 equal, 1 different, 2
 * on errors.
 */
extern int diff_images (const char *a, const char *b,
                        const struct hash_spec *spec);
/* The same, with A's digests from the manifest at path manifest (as
 * --blocks printed them), b hashed with its digest and block size.
 */
extern int diff_manifest (const char *manifest, const char *b,
                          const struct hash_spec *spec);
/* Print the digest of every block of name.  Returns the exit status. */
extern int print_blocks (const char *name, const struct hash_spec *spec);

#endif /* NBDSUM_DIFF_H */
