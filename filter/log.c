/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: its messages, written so that no client can
 * write to the operator's terminal or log through them.
 *
 * A client names the export it asks for, up to 4096 bytes of its
 * choice, and the filter's messages name the export: escape sequences
 * in it would reach nbdkit's standard error as they are (nbdkit
 * writes messages as given), and a newline would forge a line of
 * nbdkit's own.  The whole message is written with the bytes a
 * terminal acts on as \xHH: none of the filter's own words has them.
 */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "filter.h"

/* The message, escaped, to nbdkit's log function. */
static void
blkhash_log (void (*log) (const char *fmt, ...), const char *fmt,
             va_list ap)
{
  char *msg, *safe = NULL;

  /* %m is errno's words: vasprintf reads errno before anything here
   * can change it.
   */
  if (vasprintf (&msg, fmt, ap) != -1) {
    safe = blk_escape_controls (msg, false);
    free (msg);
  }
  if (safe == NULL)
    log ("blkhash: out of memory for a message");
  else
    log ("%s", safe);
  free (safe);
}

void
blkhash_error (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  blkhash_log (nbdkit_error, fmt, ap);
  va_end (ap);
}

void
blkhash_debug (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  blkhash_log (nbdkit_debug, fmt, ap);
  va_end (ap);
}
