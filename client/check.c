/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: --check, like sha256sum -c, and --check-manifest.
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
#include "cleanup.h"
#include "helpers.h"
#include "json.h"
#include "manifest.h"
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

/* --json, unless --status silences everything. */
static bool
json_out (void)
{
  return opts->json && !opts->status;
}

/* One line's verdict: as sha256sum -c prints it, or with --json an
 * element of its file's "results" (res: the checksum computed, or NULL
 * and why not).
 */
static void
verdict (unsigned lineno, const char *name, const char *expected,
         const char *v, const struct result *res, const char *error)
{
  if (!json_out ()) {
    report (name, v);
    return;
  }
  json_begin_object (NULL, true);
  json_uint ("line", lineno);
  json_name ("name", name);
  json_string ("result", v);
  json_string ("expected", expected);
  if (res) {
    result_json_members (res);
  }
  else
    json_string ("error", error ? error : "failed");
  json_end ();
  fflush (stdout);
}

/* An error of the checksum file itself. */
static void
file_error (const char *path, const char *msg)
{
  error_at (path, "%s", msg);
  if (json_out ())
    json_string ("error", msg);
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
  const int open_errno = errno;
  struct blk_sum_line sl;
  const char *msg;
  char *line = NULL, *name;
  size_t size = 0;
  unsigned lines = 0, lineno = 0, verified = 0, untagged_failed = 0;
  const unsigned malformed = t->malformed;

  if (json_out ()) {
    json_begin_object (NULL, false);
    json_name ("file", path);
  }
  if (fp == NULL) {
    file_error (path, strerror (open_errno));
    if (json_out ())
      json_end ();
    return -1;
  }
  if (json_out ())
    json_begin_array ("results", false);
  while (!stop_signal () && getline (&line, &size, fp) != -1) {
    lineno++;
    if ((msg = blk_sum_line_parse (line, hexlen, &sl)) != NULL) {
      t->malformed++;
      /* Not malformed, but unreadable here: always say why. */
      if (opts->warn || msg == blk_digest_no_blake3)
        fprintf (stderr, "%s: %s: %u: improperly formatted checksum line "
                 "(%s)\n", progname, path, lineno, msg);
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
    CLEANUP_FREE char *error = NULL;
    if (json_out ())
      messages_capture (name);
    const int r = checksum_one (name, spec, &res);
    if (json_out ())
      error = messages_captured ();
    /* Interrupted: this line has no verdict. */
    if (stop_signal ())
      break;
    if (r == -1) {
      t->unreadable++;
      if (!opts->status)
        verdict (lineno, name, sl.hex, "FAILED open or read", NULL, error);
    }
    else if (strcasecmp (res.hex, sl.hex) != 0) {
      t->mismatched++;
      untagged_failed += !sl.tagged;
      if (!opts->status)
        verdict (lineno, name, sl.hex, "FAILED", &res, NULL);
    }
    else if (!opts->quiet && !opts->status)
      verdict (lineno, name, sl.hex, "OK", &res, NULL);
  }
  free (line);
  if (fp != stdin)
    fclose (fp);
  t->lines += lines;
  if (stop_signal ())
    return -1;
  if (json_out ()) {
    json_end ();
    json_uint ("lines", lines);
    json_uint ("verified", verified);
    json_uint ("malformed", t->malformed - malformed);
  }
  /* Every line failed, none tagged: most likely sha256sum's. */
  if (verified && untagged_failed == verified && !opts->status)
    notice_at (path, "no line matched: if the lines come from sha256sum, "
               "they are plain sha256 checksums of the bytes, which nbdsum "
               "does not compute (it prints and checks blkhash checksums)");
  if (lines == 0)
    file_error (path, "no properly formatted checksum lines found");
  else if (verified == 0)
    file_error (path, "no file was verified");
  if (json_out ())
    json_end ();
  return lines == 0 || verified == 0 ? -1 : 0;
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
  const struct hash_spec untagged = hash_spec_or_defaults (spec);

  /* Untagged lines must have the length of that digest. */
  if ((msg = blk_digest_init (&d, untagged.digest)) != NULL) {
    fprintf (stderr, "%s: %s\n", progname, msg);
    return EXIT_FAILURE;
  }
  hexlen = 2 * d.len;
  blk_digest_free (&d);

  if (json_out ()) {
    json_begin_object (NULL, false);
    json_begin_array ("files", false);
  }
  for (int i = 0; i < n && !stop_signal (); i++)
    if (check_one_file (files[i], &untagged, hexlen, &t) == -1)
      status = EXIT_FAILURE;
  if (stop_signal ())
    return EXIT_FAILURE;
  if (json_out ()) {
    json_end ();
    json_uint ("mismatched", t.mismatched);
    json_uint ("unreadable", t.unreadable);
    json_uint ("malformed", t.malformed);
    json_end ();
  }
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

int
check_manifests (char **files, int n)
{
  unsigned failed = 0;

  for (int i = 0; i < n && !stop_signal (); i++) {
    struct manifest *m = manifest_open (files[i]);
    uint8_t root[BLK_DIGEST_MAX];
    bool ok = m != NULL;

    if (m && !manifest_root (m, root)) {
      error_at (files[i], "it carries no checksum (an older nbdsum --blocks "
                "wrote it): its form is right, its digests cannot be "
                "verified");
      ok = false;
    }
    manifest_close (m);
    if (stop_signal ())
      break;
    if (!ok)
      failed++;
    if (!ok || !opts->quiet)
      report (files[i], ok ? "OK" : "FAILED");
  }
  if (failed && !stop_signal ())
    fprintf (stderr, "%s: WARNING: %u of %d manifest%s did not verify\n",
             progname, failed, n, n == 1 ? "" : "s");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
