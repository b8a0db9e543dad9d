/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum -c FILE..., --check: verify checksum lines, like sha256sum -c.
 *
 * Lines are 'CHECKSUM  NAME' or 'BLKHASH-DIGEST/BLOCKSIZE (NAME) =
 * CHECKSUM' (nbdsum's and blkhash-file's formats), mixed in any order,
 * read by blk_sum_line_parse in lib/sumline.c, and plain digests
 * of the bytes as sha256sum --tag writes them ('SHA256 (NAME) =
 * CHECKSUM'; with --plain[=ALG], untagged lines are such digests too,
 * as sha256sum writes them).  A tagged line is hashed as its tag says,
 * its file read as the format the tag names, if any (a plain line
 * without one: its bytes); -d and --block-size only apply to untagged
 * lines, which mean sha256 and 64K without them.  '#' lines are
 * comments (Fedora's CHECKSUM files have them), and a clear-signed
 * file (gpg --clearsign) is read for its signed lines only, its
 * signature not checked (say so).  A line naming a local path that is
 * not a regular file (a device, a FIFO, a socket, a directory) fails,
 * found by stat, never opened: a checksum file may come from anyone,
 * and /dev/zero never ends, a FIFO blocks.  Everything printed is a
 * turn, queued in order (jobs.h) and printed when it comes back: with
 * -j several lines' inputs are hashed at once, and the output is the
 * same.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>

#include "helpers.h"
#include "jobs.h"
#include "json.h"
#include "local.h"
#include "messages.h"
#include "modes.h"
#include "names.h"
#include "signals.h"
#include "sumline.h"
#include "unarmour.h"
#include "util.h"

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
  return name_kind (name) == NAME_FILE &&
    access (name, F_OK) == -1 && errno == ENOENT;
}

/* A checksum file being checked, until its end is printed. */
struct file_check {
  const char *path;
  bool opened;
  int open_errno;
  int read_errno;               /* a read failed: why, else 0 */
  const char *armour_error;     /* its PGP armour fails it: why */
  unsigned lines, verified, malformed;
  unsigned untagged_failed;     /* blkhash lines without a tag FAILED */
  bool stdin_said;              /* a '-' line's failure explained */
};

/* What is printed in its turn: each queued (jobs.h), in order. */
struct turn {
  enum {
    FILE_BEGIN,                 /* with --json its object, or why not */
    MALFORMED,                  /* an improperly formatted line */
    UNSIGNED,                   /* a clear-signed file's notice */
    LINE,                       /* a line's verdict, its input hashed */
    LINE_REFUSED,               /* a line naming the file being read */
    FILE_END,                   /* its counts, and why it failed */
  } what;
  struct file_check *fc;
  unsigned lineno;
  const char *why;              /* MALFORMED, LINE_REFUSED: static, */
  char *why_owned;              /* ... or this, LINE_REFUSED's */
  bool tagged;                  /* LINE */
  bool reads_stdin;             /* LINE: hashes standard input */
  char *name, *expected;        /* LINE, LINE_REFUSED */
};

/* The whole run's. */
struct check_run {
  struct jobs *jobs;
  const struct hash_spec *untagged;
  size_t hexlen;                /* of untagged lines */
  unsigned lines, mismatched, unreadable, malformed;
  int status;
  bool stdin_read;              /* a checksum file is standard input */
};

static void
file_begin (struct check_run *run, struct file_check *fc)
{
  if (json_wanted ()) {
    json_begin_object (NULL, false);
    json_name ("file", fc->path);
  }
  if (!fc->opened) {
    file_error (fc->path, strerror (fc->open_errno));
    if (json_wanted ())
      json_end ();
    run->status = EXIT_FAILURE;
    return;
  }
  if (json_wanted ())
    json_begin_array ("results", false);
}

#define STDIN_IS_FILE "standard input is a checksum file being read: " \
  "it cannot be hashed too"
#define NAMES_FILE "the checksum file being read: it cannot be hashed too"
#define STDIN_TERMINAL "standard input is a terminal here: give the " \
  "image on it (nbdsum -c FILE < IMAGE), or its name in the line"
#define CHECKS_FILES "nbdsum -c checks regular files only"

static void
line_done (struct check_run *run, const struct turn *tn,
           const struct job_outcome *out)
{
  if (out->r == -1) {
    run->unreadable++;
    if (!opts->status)
      verdict (tn->lineno, tn->name, tn->expected, "FAILED open or read",
               NULL, out->error);
  }
  else if (strcasecmp (out->res.hex, tn->expected) != 0) {
    run->mismatched++;
    tn->fc->untagged_failed += !tn->tagged;
    if (!opts->status) {
      verdict (tn->lineno, tn->name, tn->expected, "FAILED", &out->res,
               NULL);
      /* Once a file: the first '-' line read standard input to its end. */
      if (tn->reads_stdin && !tn->fc->stdin_said) {
        if (out->res.size == 0)
          notice_at (tn->name, "a line for standard input, which was "
                     "empty: give the image on it (nbdsum -c FILE < IMAGE)");
        else
          notice_at (tn->name, "a line for standard input: checked "
                     "against the %" PRIu64 " bytes given on it",
                     out->res.size);
        tn->fc->stdin_said = true;
      }
    }
  }
  else if (!opts->quiet && !opts->status)
    verdict (tn->lineno, tn->name, tn->expected, "OK", &out->res, NULL);
}

/* A line naming the checksum file being read (-, /dev/stdin, the
 * file's own name...): its verdict, as if hashing it had failed.
 */
static void
line_refused (struct check_run *run, const struct turn *tn)
{
  const struct job_outcome out = {
    .name = tn->name, .r = -1, .error = (char *) tn->why,
  };
  const char *why = tn->why;

  error_at (tn->name, "%s", why);
  line_done (run, tn, &out);
}

static void
file_end (struct check_run *run, struct file_check *fc)
{
  const char *path = fc->path;
  char bs[BLK_BLOCK_SIZE_STR_MAX];

  run->lines += fc->lines;
  run->malformed += fc->malformed;
  if (json_wanted ()) {
    json_end ();
    json_uint ("lines", fc->lines);
    json_uint ("verified", fc->verified);
    json_uint ("malformed", fc->malformed);
  }
  /* An untagged line failed: it may be sha256sum's (md5sum's...), which
   * nothing in it tells from nbdsum's.  Whatever the file's name, and
   * for one line as for all.
   */
  if (fc->untagged_failed && !opts->status)
    notice_at (path, "%u untagged line%s FAILED: untagged lines are "
               "blkhash %s/%s checksums; if these are sha256sum's (plain "
               "digests of the bytes), check them with --plain",
               fc->untagged_failed,
               fc->untagged_failed == 1 ? "" : "s", run->untagged->digest,
               blk_format_block_size (run->untagged->block_size, bs));
  /* As sha256sum: the lines read were checked, the file fails. */
  if (fc->read_errno) {
    char *msg = NULL;
    if (asprintf (&msg, "read error: %s", strerror (fc->read_errno)) == -1)
      msg = NULL;
    file_error (path, msg ? msg : "read error");
    free (msg);
  }
  else if (fc->armour_error)
    file_error (path, fc->armour_error);
  else if (fc->lines == 0)
    file_error (path, "no properly formatted checksum lines found");
  else if (fc->verified == 0)
    file_error (path, "no file was verified");
  if (json_wanted ())
    json_end ();
  if (fc->read_errno || fc->armour_error || fc->lines == 0 ||
      fc->verified == 0)
    run->status = EXIT_FAILURE;
}

/* Print a turn (unless a signal came first), and free it. */
static void
take_turn (struct check_run *run, const struct job_item *item)
{
  struct turn *tn = item->tag;

  if (!item->cancelled) {
    switch (tn->what) {
    case FILE_BEGIN:
      file_begin (run, tn->fc);
      break;
    case MALFORMED:
      warning_at (tn->fc->path, "%u: improperly formatted checksum line "
                  "(%s)", tn->lineno, tn->why);
      break;
    case UNSIGNED:
      /* Not a notice -q silences: the file looks signed, and is not
       * checked as such.
       */
      if (!opts->status)
        warning_at (tn->fc->path, "PGP signature not checked (verify it "
                    "with gpgv)");
      break;
    case LINE:
      line_done (run, tn, item->out);
      break;
    case LINE_REFUSED:
      line_refused (run, tn);
      break;
    case FILE_END:
      file_end (run, tn->fc);
      break;
    }
  }
  /* The file's own turns end with FILE_END, or FILE_BEGIN if it could
   * not be opened.
   */
  if (tn->what == FILE_END || (tn->what == FILE_BEGIN && !tn->fc->opened))
    free (tn->fc);
  free (tn->name);
  free (tn->expected);
  free (tn->why_owned);
  free (tn);
}

/* Queue a turn of fc's (an input to hash: name, as spec says), then
 * print every turn that is done.
 */
static void
queue (struct check_run *run, struct turn *tn, const struct hash_spec *spec)
{
  struct job_item item;

  if (spec)
    jobs_hash (run->jobs, tn->name, spec, json_wanted (), tn);
  else
    jobs_mark (run->jobs, tn);
  while (jobs_next (run->jobs, false, &item))
    take_turn (run, &item);
}

static struct turn *
new_turn (int what, struct file_check *fc, unsigned lineno)
{
  struct turn *tn = calloc_or_exit (1, sizeof *tn);

  tn->what = what;
  tn->fc = fc;
  tn->lineno = lineno;
  return tn;
}

/* Would hashing name read standard input, as a stream (-, or
 * /dev/stdin, /proc/self/fd/0... while it is a pipe or a terminal)?
 * A regular file or a device there is opened afresh by its name.
 */
static bool
reads_stdin (const char *name)
{
  struct stat in;

  if (name_is_stdin (name))
    return true;
  return names_stdin (name) && fstat (STDIN_FILENO, &in) == 0 &&
    !S_ISREG (in.st_mode) && !S_ISBLK (in.st_mode);
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

  return name_kind (name) == NAME_FILE && stat (name, &st) == 0 &&
    st.st_dev == file->st_dev && st.st_ino == file->st_ino;
}

/* A line naming a local path that is not a regular file: why it is
 * refused, in a new string; else NULL (a missing or unreadable file
 * fails as it is hashed, saying why).  stat, not open: opening a FIFO
 * waits for a writer, and a device may be one no line should open.
 */
static char *
not_regular (const char *name)
{
  struct stat st;
  const char *what;
  bool hashable = true;         /* nbdsum NAME hashes it */
  char *msg;

  if (name_kind (name) != NAME_FILE || stat (name, &st) == -1)
    return NULL;
  if (S_ISREG (st.st_mode) && !local_kernel_file (name))
    return NULL;
  if (S_ISREG (st.st_mode))
    what = "a file of the kernel's (/proc, /sys)";
  else if (S_ISCHR (st.st_mode))
    what = "a character device";
  else if (S_ISBLK (st.st_mode))
    what = "a block device";
  else if (S_ISFIFO (st.st_mode))
    what = "a FIFO";
  else {
    what = S_ISDIR (st.st_mode) ? "a directory"
      : S_ISSOCK (st.st_mode) ? "a socket" : "not a regular file";
    hashable = false;
  }
  if (asprintf (&msg, "%s: " CHECKS_FILES "%s%s%s", what,
                hashable ? " (hash it directly: nbdsum " : "",
                hashable ? name : "", hashable ? ")" : "") == -1) {
    error_msg ("out of memory");
    exit (EXIT_FAILURE);
  }
  return msg;
}

/* How a line is hashed, in *spec (returned): as its tag says, or as
 * the run's untagged lines.  A plain line without a format is of the
 * bytes: a local file read as raw, whatever it holds (what sha256sum
 * read).
 */
static const struct hash_spec *
line_spec (const struct check_run *run, const struct blk_sum_line *sl,
           struct hash_spec *spec)
{
  const bool local = name_is_local (sl->name);

  if (sl->tagged)
    *spec = (struct hash_spec) {
      sl->digest, sl->block_size, sl->format, sl->plain, sl->range
    };
  else
    *spec = *run->untagged;
  if (spec->plain && spec->format == NULL && local)
    spec->format = "raw";
  return spec;
}

/* Read the file's lines and queue each, with what is printed around
 * them (with -j several lines are hashed at once).
 */
static void
check_one_file (struct check_run *run, const char *path)
{
  /* Not inherited by the servers nbdsum starts. */
  const int fd = name_is_stdin (path) ? STDIN_FILENO
    : stop_signals_open (path, O_RDONLY | O_CLOEXEC);
  FILE *fp = fd == STDIN_FILENO ? stdin : fd >= 0 ? fdopen (fd, "r") : NULL;
  int open_errno = errno;

  if (fd > STDIN_FILENO && fp == NULL)
    close (fd);
  struct file_check *fc;
  struct blk_sum_line sl;
  struct stat st;
  struct turn *tn;
  const char *msg;
  char *line = NULL, *name, *text;
  size_t size = 0;
  unsigned lineno = 0;
  enum armour armour = ARMOUR_NONE;
  bool signed_file = false;
  const char *armour_error;

  /* A fifo nobody writes to: the signal ended the wait in open. */
  if (fp == NULL && stop_signal ())
    return;
  fc = calloc_or_exit (1, sizeof *fc);
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
    .path = path, .opened = fp != NULL, .open_errno = open_errno,
  };
  queue (run, new_turn (FILE_BEGIN, fc, 0), NULL);
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
    text = unarmour (line, lineno, &armour, &signed_file, &armour_error);
    if (armour_error && fc->armour_error == NULL)
      fc->armour_error = armour_error;
    if (text == NULL) {
      if (signed_file && lineno == 1)
        queue (run, new_turn (UNSIGNED, fc, lineno), NULL);
      continue;
    }
    if ((msg = blk_sum_line_parse (text, run->hexlen, &sl)) != NULL) {
      fc->malformed++;
      /* A line with a digest this build lacks is not malformed, but
       * cannot be read here: always say why.
       */
      if (opts->warn || msg == blk_digest_no_blake3) {
        tn = new_turn (MALFORMED, fc, lineno);
        tn->why = msg;
        queue (run, tn, NULL);
      }
      continue;
    }
    fc->lines++;
    name = sl.name;
    /* The tag says how the line was made: it wins over -d. */
    struct hash_spec line_hs;
    const struct hash_spec *spec = line_spec (run, &sl, &line_hs);
    if (opts->ignore_missing && missing (name))
      continue;
    fc->verified++;
    /* Its bytes are the rest of this file: refused, whatever -j.  Nor
     * is a terminal waited on.
     */
    const bool is_stdin = reads_stdin (name);
    char *not_file = NULL;
    const char *refused =
      names_file (name, &st) ? NAMES_FILE
      : is_stdin && run->stdin_read ? STDIN_IS_FILE
      : is_stdin && isatty (STDIN_FILENO) ? STDIN_TERMINAL
      : is_stdin ? NULL : (not_file = not_regular (name));
    tn = new_turn (refused ? LINE_REFUSED : LINE, fc, lineno);
    tn->why = refused;
    tn->why_owned = not_file;
    tn->reads_stdin = is_stdin;
    /* What the hint of a file of failures is about: blkhash lines. */
    tn->tagged = sl.tagged || spec->plain;
    tn->name = strdup_or_exit (name);
    tn->expected = strdup_or_exit (sl.hex);
    queue (run, tn, refused ? NULL : spec);
  }
  /* A signal interrupts a read: that is no read error. */
  if (ferror (fp) && !stop_signal ())
    fc->read_errno = errno ? errno : EIO;
  else if (fc->armour_error == NULL && !stop_signal ())
    fc->armour_error = unarmour_end (armour);
  free (line);
  if (fp != stdin)
    fclose (fp);
  queue (run, new_turn (FILE_END, fc, 0), NULL);
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
  struct check_run run = { .status = EXIT_SUCCESS };
  struct job_item item;
  struct blk_digest d;
  const char *msg;
  /* An untagged line was made with the defaults, whatever the server's
   * are now, unless -d and --block-size say otherwise.
   */
  const struct hash_spec untagged = hash_spec_or_defaults (spec);

  /* Untagged lines must have the length of that digest. */
  if ((msg = blk_digest_init (&d, untagged.digest)) != NULL) {
    fprintf (stderr, "%s: %s\n", progname, msg);
    return EXIT_FAILURE;
  }
  run.hexlen = 2 * d.len;
  run.untagged = &untagged;
  blk_digest_free (&d);

  if (json_wanted ()) {
    json_begin_object (NULL, false);
    json_begin_array ("files", false);
  }
  /* A line that reads standard input would swallow a checksum file
   * read from it, whichever comes first.
   */
  for (int i = 0; i < n; i++)
    run.stdin_read |= reads_stdin (files[i]);
  run.jobs = jobs_begin (opts->jobs, 0);
  for (int i = 0; i < n && !stop_signal (); i++)
    check_one_file (&run, files[i]);
  while (jobs_next (run.jobs, true, &item))
    take_turn (&run, &item);
  jobs_end (run.jobs);
  if (stop_signal ())
    return EXIT_FAILURE;
  if (json_wanted ()) {
    json_end ();
    json_uint ("mismatched", run.mismatched);
    json_uint ("unreadable", run.unreadable);
    json_uint ("malformed", run.malformed);
    json_end ();
  }
  warn (run.malformed, "line is improperly formatted",
        "lines are improperly formatted");
  warn (run.unreadable, "listed file could not be read",
        "listed files could not be read");
  warn (run.mismatched, "computed checksum did NOT match",
        "computed checksums did NOT match");
  if (run.mismatched || run.unreadable || (opts->strict && run.malformed))
    run.status = EXIT_FAILURE;
  return run.status;
}
