/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Minimal TAP output for the unit tests. */
#ifndef BLKHASH_TAP_H
#define BLKHASH_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_count, tap_failures;

static void __attribute__ ((format (printf, 2, 3)))
ok (int cond, const char *fmt, ...)
{
  va_list ap;

  printf ("%s %d - ", cond ? "ok" : "not ok", ++tap_count);
  va_start (ap, fmt);
  vprintf (fmt, ap);
  va_end (ap);
  putchar ('\n');
  fflush (stdout);
  if (!cond)
    tap_failures++;
}

static int
done_testing (void)
{
  printf ("1..%d\n", tap_count);
  return tap_failures ? 1 : 0;
}

#endif /* BLKHASH_TAP_H */
