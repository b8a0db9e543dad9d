/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/zero.c */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "zero.h"
#include "tap.h"

int
main (void)
{
  static const size_t lens[] = { 0, 1, 15, 16, 17, 31, 32, 33, 4095, 4096,
                                 65536, 65537 };
  unsigned char *buf = calloc (1, 65537 + 64);
  size_t i, pos;
  int all_found;

  for (i = 0; i < sizeof lens / sizeof lens[0]; i++)
    ok (blk_is_zero (buf, lens[i]), "%zu zero bytes are zero", lens[i]);

  /* A single non-zero byte anywhere is found, at any alignment. */
  for (size_t len = 1; len <= 100; len += 33) {
    all_found = 1;
    for (pos = 0; pos < len; pos++) {
      memset (buf, 0, len + 1);
      buf[pos + 1] = 0x80;
      if (blk_is_zero (buf + 1, len))
        all_found = 0;
    }
    ok (all_found, "every non-zero position found in %zu bytes (unaligned)",
        len);
  }
  memset (buf, 0, 65537);
  buf[65535] = 1;
  ok (!blk_is_zero (buf, 65536), "last byte of a 64K block");
  ok (blk_is_zero (buf, 65535), "byte past the length is ignored");
  buf[65535] = 0;
  buf[16] = 1;
  ok (!blk_is_zero (buf, 65536), "byte right after the checked prefix");

  free (buf);
  return done_testing ();
}
