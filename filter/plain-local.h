/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: a plain digest of the whole content, in
 * order (sha256sum's), the API of filter/plain.c.  A stand-in until
 * plain.c lands on main: then this header and plain-local.c go, and
 * expect.c takes the declarations from filter.h.
 */
#ifndef NBDKIT_BLKHASH_PLAIN_LOCAL_H
#define NBDKIT_BLKHASH_PLAIN_LOCAL_H

#include "filter.h"

struct blkhash_plain;
/* NULL with nbdkit_error called.  d must outlive it. */
extern struct blkhash_plain *blkhash_plain_new (const struct blk_digest *d,
                                                uint64_t size);
extern void blkhash_plain_free (struct blkhash_plain *p);
/* Hash the content from where it stopped up to end (capped at the
 * size).  0, or -1 with *err set and nbdkit_error called.
 */
extern int blkhash_plain_advance (nbdkit_next *next, struct blkhash_plain *p,
                                  uint64_t end, int *err);
/* Hash what is left; the digest (d->len bytes) into out. */
extern int blkhash_plain_final (nbdkit_next *next, struct blkhash_plain *p,
                                uint8_t *out, int *err);

#endif /* NBDKIT_BLKHASH_PLAIN_LOCAL_H */
