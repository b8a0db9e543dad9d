/* nbdsum: print blkhash checksums of NBD exports. */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "nbdsum.h"

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

int
main (int argc, char **argv)
{
  struct options opts;
  int first, i, status = EXIT_SUCCESS;

  parse_options (argc, argv, &opts, &first);
  for (i = first; i < argc; i++) {
    struct result res;
    if (remote_checksum (argv[i], &opts, &res) == -1) {
      status = EXIT_FAILURE;
      continue;
    }
    printf ("%s  %s\n", res.hex, argv[i]);
    fflush (stdout);
  }
  if (fflush (stdout) == EOF || ferror (stdout)) {
    perror ("nbdsum: stdout");
    status = EXIT_FAILURE;
  }
  return status;
}
