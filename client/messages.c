/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: messages on standard error. */
#include <config.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "messages.h"
#include "util.h"

const char *progname = "nbdsum";

/* Messages kept for --json; connection threads may print too. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool capturing;
static const char *subject;
static char *kept;

static void
keep (const char *name, const char *msg)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&lock);
  char *s;
  int r;

  if (!capturing)
    return;
  if (name && subject && strcmp (name, subject) == 0)
    name = NULL;
  r = asprintf (&s, "%s%s%s%s%s", kept ? kept : "", kept ? "\n" : "",
                name ? name : "", name ? ": " : "", msg);
  if (r == -1)
    return;
  free (kept);
  kept = s;
}

void
messages_put (const char *s, bool lines)
{
  char *safe = blk_escape_controls (s, lines);

  fputs (safe ? safe : "(out of memory for a message)", stderr);
  free (safe);
}

/* "nbdsum: NAME: msg" as one line (threads print too). */
static void
put_line (const char *name, const char *msg)
{
  flockfile (stderr);
  fprintf (stderr, "%s: ", progname);
  if (name) {
    messages_put (name, false);
    fputs (": ", stderr);
  }
  messages_put (msg, false);
  fputc ('\n', stderr);
  funlockfile (stderr);
}

/* One line; an error is also kept for --json, a notice or a warning
 * is not.
 */
static void
vmessage (const char *name, bool error, const char *fmt, va_list ap)
{
  char *msg;

  if (vasprintf (&msg, fmt, ap) == -1)
    put_line (name, "out of memory for a message");
  else {
    put_line (name, msg);
    if (error)
      keep (name, msg);
    free (msg);
  }
}

void
error_at (const char *name, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vmessage (name, true, fmt, ap);
  va_end (ap);
}

void
error_msg (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vmessage (NULL, true, fmt, ap);
  va_end (ap);
}

/* -q, as options.c says: set once, before any thread starts. */
static bool quiet;

void
messages_quiet (void)
{
  quiet = true;
}

void
notice_at (const char *name, const char *fmt, ...)
{
  va_list ap;

  if (quiet)
    return;
  va_start (ap, fmt);
  vmessage (name, false, fmt, ap);
  va_end (ap);
}

void
warning_at (const char *name, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vmessage (name, false, fmt, ap);
  va_end (ap);
}

void
messages_capture (const char *name)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&lock);

  free (kept);
  kept = NULL;
  subject = name;
  capturing = true;
}

char *
messages_captured (void)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&lock);
  char *s = kept;

  kept = NULL;
  capturing = false;
  subject = NULL;
  return s;
}
