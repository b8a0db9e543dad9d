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

/* The message, escaped; NULL if out of memory. */
static char *
blkhash_log_format (const char *fmt, va_list ap)
{
  char *msg, *safe;

  /* %m is errno's words: vasprintf reads errno before anything here
   * can change it.
   */
  if (vasprintf (&msg, fmt, ap) == -1)
    return NULL;
  safe = blk_escape_controls (msg, false);
  free (msg);
  return safe;
}

void
blkhash_error (const char *fmt, ...)
{
  va_list ap;
  char *msg;

  va_start (ap, fmt);
  msg = blkhash_log_format (fmt, ap);
  va_end (ap);
  if (msg == NULL)
    nbdkit_error ("blkhash: out of memory for a message");
  else
    nbdkit_error ("%s", msg);
  free (msg);
}

void
blkhash_debug (const char *fmt, ...)
{
  va_list ap;
  char *msg;

  va_start (ap, fmt);
  msg = blkhash_log_format (fmt, ap);
  va_end (ap);
  if (msg)
    nbdkit_debug ("%s", msg);
  free (msg);
}
