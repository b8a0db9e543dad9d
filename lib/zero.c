/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: fast all-zero detection. */
#include <config.h>

#include <string.h>

#include "minmax.h"
#include "zero.h"

/* Check a 16-byte prefix by hand, then let memcmp (vectorised in libc)
 * compare the buffer with itself shifted by 16 bytes: if the prefix is
 * zero and buf[i] == buf[i+16] everywhere, every byte is zero.  Data
 * blocks usually fail within the first few bytes.  The technique is
 * nbdkit's is_zero() (common/include/iszero.h), which checks the first
 * 16 bytes the same way.
 */
bool
blk_is_zero (const void *buf, size_t len)
{
  const unsigned char *p = buf;
  size_t i, head = MIN (len, (size_t) 16);

  for (i = 0; i < head; i++)
    if (p[i])
      return false;
  return len <= 16 || memcmp (p, p + 16, len - 16) == 0;
}
