/* nbdsum: messages on standard error. */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>

#include "messages.h"

const char *progname = "nbdsum";

void
error_at (const char *name, const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "%s: %s: ", progname, name);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
}
