/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum -c FILE..., --check: verify checksum lines, like sha256sum -c.
 *
 * Lines are 'CHECKSUM  NAME' or 'BLKHASH-DIGEST/BLOCKSIZE (NAME) =
 * CHECKSUM' (nbdsum's and blkhash-file's formats), mixed in any order,
 * read by blk_sum_line_parse in lib/sumline.c.  A tagged line is
 * hashed as its tag says, its file read as the format the tag names,
 * if any; -d and --block-size only apply to untagged lines, which mean
 * sha256 and 64K without them.  With -j, jobs.c
 * hashes several lines' inputs at once; verdicts and everything else
 * printed go through it, to come out in order.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>

#include "helpers.h"
#include "jobs.h"
#include "json.h"
#include "messages.h"
#include "modes.h"
#include "signals.h"
#include "sumline.h"

struct tally {
  unsigned lines, mismatched, unreadable, malformed;
};

/* --json, unless --status silences everything. */
static bool
json_wanted (void)
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
  if (!json_wanted ()) {
    blk_fput_verdict (stdout, name, v);
    stdout_flush ();
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
  stdout_flush ();
}

/* An error of the checksum file itself. */
static void
file_error (const char *path, const char *msg)
{
  error_at (path, "%s", msg);
  if (json_wanted ())
    json_string ("error", msg);
}

/* --ignore-missing: a local file that does not exist. */
static bool
missing (const char *name)
{
  return !is_uri (name) && strcmp (name, "-") != 0 &&
    access (name, F_OK) == -1 && errno == ENOENT;
}

/* A checksum file being checked, until its end is printed. */
struct file_check {
  const char *path;
  struct tally *t;
  int *status;                  /* mode_check's */
  bool opened;
  int open_errno;
  int read_errno;               /* a read failed: why, else 0 */
  unsigned lines, verified, malformed, untagged_failed;
};

/* A line being checked, until its verdict is printed. */
struct line_check {
  struct file_check *fc;
  unsigned lineno;
  bool tagged;
  char *name, *expected;
};

/* An improperly formatted line, for --warn. */
struct malformed_line {
  const char *path;
  unsigned lineno;
  const char *why;              /* static */
};

static void * __attribute__ ((malloc))
alloc_or_exit (size_t size)
{
  void *p = calloc (1, size);

  if (p == NULL) {
    error_msg ("out of memory");
    exit (EXIT_FAILURE);
  }
  return p;
}

static char *
strdup_or_exit (const char *s)
{
  char *p = strdup (s);

  if (p == NULL) {
    error_msg ("out of memory");
    exit (EXIT_FAILURE);
  }
  return p;
}

/* The file's beginning: with --json its object, or why it could not
 * be opened.
 */
static void
file_begin (void *opaque, bool cancelled)
{
  struct file_check *fc = opaque;

  if (cancelled) {
    if (!fc->opened)
      free (fc);
    return;
  }
  if (json_wanted ()) {
    json_begin_object (NULL, false);
    json_name ("file", fc->path);
  }
  if (!fc->opened) {
    file_error (fc->path, strerror (fc->open_errno));
    if (json_wanted ())
      json_end ();
    *fc->status = EXIT_FAILURE;
    free (fc);
    return;
  }
  if (json_wanted ())
    json_begin_array ("results", false);
}

static void
warn_malformed (void *opaque, bool cancelled)
{
  struct malformed_line *ml = opaque;

  if (!cancelled)
    fprintf (stderr, "%s: %s: %u: improperly formatted checksum line (%s)\n",
             progname, ml->path, ml->lineno, ml->why);
  free (ml);
}

/* A line's verdict, once its input was hashed. */
static void
line_done (void *opaque, const struct job_outcome *out)
{
  struct line_check *lc = opaque;
  struct file_check *fc = lc->fc;
  struct tally *t = fc->t;

  if (out == NULL)
    ;
  else if (out->r == -1) {
    t->unreadable++;
    if (!opts->status)
      verdict (lc->lineno, lc->name, lc->expected, "FAILED open or read",
               NULL, out->error);
  }
  else if (strcasecmp (out->res.hex, lc->expected) != 0) {
    t->mismatched++;
    fc->untagged_failed += !lc->tagged;
    if (!opts->status)
      verdict (lc->lineno, lc->name, lc->expected, "FAILED", &out->res, NULL);
  }
  else if (!opts->quiet && !opts->status)
    verdict (lc->lineno, lc->name, lc->expected, "OK", &out->res, NULL);
  free (lc->name);
  free (lc->expected);
  free (lc);
}

#define STDIN_IS_FILE "standard input is the checksum file being read: " \
  "it cannot be hashed too"
#define NAMES_FILE "the checksum file being read: it cannot be hashed too"

/* A line naming the checksum file being read (-, /dev/stdin, the
 * file's own name...): its verdict in its turn, as if hashing it had
 * failed.
 */
static void
line_refused (void *opaque, bool cancelled)
{
  struct line_check *lc = opaque;
  const char *why = strcmp (lc->name, "-") == 0 ? STDIN_IS_FILE : NAMES_FILE;
  struct job_outcome out = { .name = lc->name, .r = -1 };

  if (cancelled) {
    line_done (lc, NULL);
    return;
  }
  error_at (lc->name, "%s", why);
  out.error = (char *) why;
  line_done (lc, &out);
}

/* Is name the checksum file being read (file: its fstat), under any
 * name?  A pipe's rest would be hashed as a stream, swallowing the
 * lines after it.  (- is standard input, not a file named so, when
 * the checksum file is not.)
 */
static bool
names_file (const char *name, const struct stat *file)
{
  struct stat st;

  return !is_uri (name) && strcmp (name, "-") != 0 &&
    stat (name, &st) == 0 &&
    st.st_dev == file->st_dev && st.st_ino == file->st_ino;
}

/* The file's end: its counts, and why it failed as a whole. */
static void
file_end (void *opaque, bool cancelled)
{
  struct file_check *fc = opaque;
  const char *path = fc->path;

  if (cancelled) {
    free (fc);
    return;
  }
  fc->t->lines += fc->lines;
  fc->t->malformed += fc->malformed;
  if (json_wanted ()) {
    json_end ();
    json_uint ("lines", fc->lines);
    json_uint ("verified", fc->verified);
    json_uint ("malformed", fc->malformed);
  }
  /* Every line failed, none tagged: most likely sha256sum's. */
  if (fc->verified && fc->untagged_failed == fc->verified && !opts->status)
    notice_at (path, "no line matched: if the lines come from sha256sum, "
               "they are plain sha256 checksums of the bytes, which nbdsum "
               "does not compute (it prints and checks blkhash checksums)");
  /* As sha256sum: the lines read were checked, the file fails. */
  if (fc->read_errno) {
    char *msg = NULL;
    if (asprintf (&msg, "read error: %s", strerror (fc->read_errno)) == -1)
      msg = NULL;
    file_error (path, msg ? msg : "read error");
    free (msg);
  }
  else if (fc->lines == 0)
    file_error (path, "no properly formatted checksum lines found");
  else if (fc->verified == 0)
    file_error (path, "no file was verified");
  if (json_wanted ())
    json_end ();
  if (fc->read_errno || fc->lines == 0 || fc->verified == 0)
    *fc->status = EXIT_FAILURE;
  free (fc);
}

/* Read the file's lines and hand each to jobs.c, and what is printed
 * around them, in order (with -j several lines are hashed at once).
 */
static void
check_one_file (const char *path, const struct hash_spec *untagged,
                size_t hexlen, struct tally *t, int *status)
{
  /* Not inherited by the servers nbdsum starts. */
  FILE *fp = strcmp (path, "-") == 0 ? stdin : fopen (path, "re");
  int open_errno = errno;
  struct file_check *fc;
  struct blk_sum_line sl;
  struct stat st;
  const char *msg;
  char *line = NULL, *name;
  size_t size = 0;
  unsigned lineno = 0;

  /* A fifo nobody writes to: the signal ended the wait in open. */
  if (fp == NULL && stop_signal ())
    return;
  fc = alloc_or_exit (sizeof *fc);
  /* A directory opens, and fails the first read: say what it is. */
  if (fp && fstat (fileno (fp), &st) == -1) {
    open_errno = errno;
    if (fp != stdin)
      fclose (fp);
    fp = NULL;
  }
  if (fp && S_ISDIR (st.st_mode)) {
    if (fp != stdin)
      fclose (fp);
    fp = NULL;
    open_errno = EISDIR;
  }
  *fc = (struct file_check) {
    .path = path, .t = t, .status = status, .opened = fp != NULL,
    .open_errno = open_errno,
  };
  jobs_then (file_begin, fc);
  if (fp == NULL)
    return;
  for (;;) {
    errno = 0;
    if (stop_signal () || getline (&line, &size, fp) == -1)
      break;
    /* Failed midway: a line cut short, not to be checked. */
    if (ferror (fp))
      break;
    lineno++;
    if ((msg = blk_sum_line_parse (line, hexlen, &sl)) != NULL) {
      fc->malformed++;
      /* A line with a digest this build lacks is not malformed, but
       * cannot be read here: always say why.
       */
      if (opts->warn || msg == blk_digest_no_blake3) {
        struct malformed_line *ml = alloc_or_exit (sizeof *ml);
        *ml = (struct malformed_line) { path, lineno, msg };
        jobs_then (warn_malformed, ml);
      }
      continue;
    }
    fc->lines++;
    name = sl.name;
    /* The tag says how the line was made: it wins over -d. */
    const struct hash_spec tagged = { sl.digest, sl.block_size, sl.format };
    const struct hash_spec *spec = sl.tagged ? &tagged : untagged;
    if (opts->ignore_missing && missing (name))
      continue;
    fc->verified++;
    struct line_check *lc = alloc_or_exit (sizeof *lc);
    *lc = (struct line_check) {
      .fc = fc, .lineno = lineno, .tagged = sl.tagged,
      .name = strdup_or_exit (name), .expected = strdup_or_exit (sl.hex),
    };
    /* Its bytes are the rest of this file: refused, whatever -j. */
    if ((fp == stdin && strcmp (name, "-") == 0) || names_file (name, &st))
      jobs_then (line_refused, lc);
    else
      jobs_hash (lc->name, spec, json_wanted (), line_done, lc);
  }
  /* A signal interrupts a read: that is no read error. */
  if (ferror (fp) && !stop_signal ())
    fc->read_errno = errno ? errno : EIO;
  free (line);
  if (fp != stdin)
    fclose (fp);
  /* Interrupted: the file has no end (it is freed all the same). */
  jobs_then (file_end, fc);
}

static void
warn (unsigned n, const char *one, const char *many)
{
  if (n && !opts->status)
    fprintf (stderr, "%s: WARNING: %u %s\n", progname, n, n == 1 ? one : many);
}

int
mode_check (char **files, int n, const struct hash_spec *spec)
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

  if (json_wanted ()) {
    json_begin_object (NULL, false);
    json_begin_array ("files", false);
  }
  jobs_begin (opts->jobs);
  for (int i = 0; i < n && !stop_signal (); i++)
    check_one_file (files[i], &untagged, hexlen, &t, &status);
  jobs_finish ();
  if (stop_signal ())
    return EXIT_FAILURE;
  if (json_wanted ()) {
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
