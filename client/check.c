/* nbdsum: --check, like sha256sum -c.
 *
 * Lines are 'CHECKSUM  NAME' or 'BLKHASH-DIGEST/BLOCKSIZE (NAME) =
 * CHECKSUM' (nbdsum's and blkhash-file's formats), mixed in any order,
 * read by blk_sum_line_parse in lib/sumline.c.  A tagged line is
 * hashed as its tag says; -d and --block-size only apply to untagged
 * lines, which mean sha256 and 64K without them.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "check.h"
#include "checksum.h"
#include "local.h"
#include "messages.h"
#include "options.h"
#include "signals.h"
#include "sumline.h"

struct tally {
  unsigned lines, mismatched, unreadable, malformed;
};

static void
report (const char *name, const char *verdict)
{
  const bool escape = blk_name_needs_escape (name);

  if (escape)
    putchar ('\\');
  blk_fput_name (stdout, name, escape);
  printf (": %s\n", verdict);
  fflush (stdout);
}

/* --ignore-missing: a local file that does not exist. */
static bool
missing (const char *name)
{
  return !is_uri (name) && strcmp (name, "-") != 0 &&
    access (name, F_OK) == -1 && errno == ENOENT;
}

static int
check_one_file (const char *path, const struct hash_spec *untagged,
                size_t hexlen, struct tally *t)
{
  FILE *fp = strcmp (path, "-") == 0 ? stdin : fopen (path, "r");
  struct blk_sum_line sl;
  char *line = NULL, *name;
  size_t size = 0;
  unsigned lines = 0, lineno = 0, verified = 0;

  if (fp == NULL) {
    fprintf (stderr, "%s: %s: %m\n", progname, path);
    return -1;
  }
  while (!stop_signal () && getline (&line, &size, fp) != -1) {
    lineno++;
    if (blk_sum_line_parse (line, hexlen, &sl) == -1) {
      t->malformed++;
      if (opts->warn)
        fprintf (stderr, "%s: %s: %u: improperly formatted checksum line "
                 "(%s)\n", progname, path, lineno, sl.error);
      continue;
    }
    lines++;
    name = sl.name;
    /* The tag says how the line was made: it wins over -d. */
    const struct hash_spec tagged = { sl.digest, sl.block_size };
    const struct hash_spec *spec = sl.tagged ? &tagged : untagged;
    if (opts->ignore_missing && missing (name))
      continue;
    verified++;
    struct result res;
    const int r = checksum_one (name, spec, &res);
    /* Interrupted: this line has no verdict. */
    if (stop_signal ())
      break;
    if (r == -1) {
      t->unreadable++;
      if (!opts->status)
        report (name, "FAILED open or read");
    }
    else if (strcasecmp (res.hex, sl.hex) != 0) {
      t->mismatched++;
      if (!opts->status)
        report (name, "FAILED");
    }
    else if (!opts->quiet && !opts->status)
      report (name, "OK");
  }
  free (line);
  if (fp != stdin)
    fclose (fp);
  t->lines += lines;
  if (stop_signal ())
    return -1;
  if (lines == 0) {
    fprintf (stderr, "%s: %s: no properly formatted checksum lines found\n",
             progname, path);
    return -1;
  }
  if (verified == 0) {
    fprintf (stderr, "%s: %s: no file was verified\n", progname, path);
    return -1;
  }
  return 0;
}

static void
warn (unsigned n, const char *one, const char *many)
{
  if (n && !opts->status)
    fprintf (stderr, "%s: WARNING: %u %s\n", progname, n, n == 1 ? one : many);
}

int
check_files (char **files, int n, const struct hash_spec *spec)
{
  struct tally t = { 0 };
  struct blk_digest d;
  const char *msg;
  size_t hexlen;
  int status = EXIT_SUCCESS;
  /* An untagged line was made with the defaults, whatever the server's
   * are now, unless -d and --block-size say otherwise.
   */
  const struct hash_spec untagged = {
    spec->digest ? spec->digest : BLK_DEFAULT_DIGEST,
    spec->block_size ? spec->block_size : BLK_DEFAULT_BLOCK_SIZE,
  };

  /* Untagged lines must have the length of that digest. */
  if ((msg = blk_digest_init (&d, untagged.digest)) != NULL) {
    fprintf (stderr, "%s: %s\n", progname, msg);
    return EXIT_FAILURE;
  }
  hexlen = 2 * d.len;
  blk_digest_free (&d);

  for (int i = 0; i < n && !stop_signal (); i++)
    if (check_one_file (files[i], &untagged, hexlen, &t) == -1)
      status = EXIT_FAILURE;
  if (stop_signal ())
    return EXIT_FAILURE;
  warn (t.malformed, "line is improperly formatted",
        "lines are improperly formatted");
  warn (t.unreadable, "listed file could not be read",
        "listed files could not be read");
  warn (t.mismatched, "computed checksum did NOT match",
        "computed checksums did NOT match");
  if (t.mismatched || t.unreadable || (opts->strict && t.malformed))
    status = EXIT_FAILURE;
  return status;
}
