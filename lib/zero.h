/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: fast all-zero detection. */
#ifndef BLKHASH_ZERO_H
#define BLKHASH_ZERO_H

#include <stdbool.h>
#include <stddef.h>

extern bool blk_is_zero (const void *buf, size_t len);

#endif /* BLKHASH_ZERO_H */
