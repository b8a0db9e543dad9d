/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: messages on standard error. */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "messages.h"

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

static void
vmessage (const char *name, const char *fmt, va_list ap)
{
  const int saved_errno = errno;
  char *msg;
  va_list ap2;

  va_copy (ap2, ap);
  if (vasprintf (&msg, fmt, ap2) == -1) {
    /* No memory: print it at least. */
    errno = saved_errno;
    fprintf (stderr, "%s: %s%s", progname, name ? name : "", name ? ": " : "");
    vfprintf (stderr, fmt, ap);
    fputc ('\n', stderr);
  }
  else {
    fprintf (stderr, "%s: %s%s%s\n", progname, name ? name : "",
             name ? ": " : "", msg);
    keep (name, msg);
    free (msg);
  }
  va_end (ap2);
}

void
error_at (const char *name, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vmessage (name, fmt, ap);
  va_end (ap);
}

void
error_msg (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vmessage (NULL, fmt, ap);
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
  fprintf (stderr, "%s: %s%s", progname, name ? name : "", name ? ": " : "");
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
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
