/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what the command line refuses, for options.c: the values
 * options cannot take, each --format against the inputs it applies to,
 * the options that do not go together or with the inputs given, and
 * the status a usage error exits with.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "blkhash.h"
#include "helpers.h"
#include "imgformat.h"
#include "messages.h"
#include "names.h"
#include "option-checks.h"
#include "sumline.h"

/* Usage errors exit 1, or 2 with --diff, where 1 means "the images
 * differ" (as cmp and diff do).
 */
static int usage_status = EXIT_FAILURE;

void
set_usage_status (int argc, char **argv)
{
  for (int i = 1; i < argc && strcmp (argv[i], "--") != 0; i++)
    /* As getopt_long takes them: "--di" and "--ma" are ambiguous. */
    if (long_option_is (argv[i], "diff", 3, NULL) ||
        long_option_is (argv[i], "manifest", 3, NULL))
      usage_status = 2;
}

void
usage_error (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "%s: ", progname);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  exit (usage_status);
}

void
usage_try_help (void)
{
  fprintf (stderr, "Try '%s --help' for more information.\n", progname);
  exit (usage_status);
}

/* --format's argument: a format's static name, or NULL for auto. */
static const char *
parse_format (const char *arg)
{
  const char *format;

  if (strcasecmp (arg, "auto") == 0)
    return NULL;
  if ((format = blk_image_format (arg)) != NULL)
    return format;
  if (strcasecmp (arg, "luks") == 0)
    usage_error ("--format=%s: luks images are encrypted: nbdsum "
                 "cannot read their guest content without the secret (serve "
                 "it yourself, with qemu-nbd --object secret,... as "
                 "[ CMD ], or give --format=raw for its bytes)", arg);
  usage_error ("--format=%s: unknown format (nbdsum reads "
               BLK_IMAGE_FORMATS_LIST "; auto probes)", arg);
}

struct given_format *
apply_formats (const struct options *o, const struct format_option *fo,
               int nfo, char **inputs, int ninputs, bool implicit_stdin,
               size_t *ngiven)
{
  struct given_format *given;

  if (nfo && (o->check || o->check_manifest || o->since))
    usage_error ("--format does not go with --check (a checksum "
                 "line carries its format), --check-manifest or --since");
  given = calloc (ninputs ? ninputs : 1, sizeof *given);
  if (given == NULL)
    usage_error ("out of memory");
  *ngiven = 0;
  for (int k = 0; k < nfo; k++) {
    const char *format = parse_format (fo[k].arg);
    const int end = k + 1 < nfo ? fo[k + 1].first : ninputs;
    int local = 0;

    /* Only a tagged line records a format: -c would probe the file
     * (a plain line's reader takes the bytes: raw).
     */
    if (format && o->tag == TAG_NEVER &&
        !(o->plain && strcmp (format, "raw") == 0))
      usage_error ("--untagged does not go with --format=%s: an "
                   "untagged line cannot record the format, and -c would "
                   "probe the file instead (leave out --untagged)",
                   fo[k].arg);

    for (int i = fo[k].first; i < end; i++) {
      /* A stream is its bytes (input-stream.c says so of other streams). */
      if (name_is_stdin (inputs[i]) && format &&
          strcmp (format, "raw") != 0) {
        if (implicit_stdin)
          usage_error ("--format=%s applies to no local file (it "
                       "applies to the files after it; standard input, read "
                       "when none is given, only takes --format=raw)",
                       fo[k].arg);
        usage_error ("--format=%s does not apply to standard "
                     "input: nbdsum hashes a stream's bytes (--format=raw)",
                     fo[k].arg);
      }
      if (name_is_local (inputs[i]) ||
          (name_is_http (inputs[i]) && format && strcmp (format, "raw") == 0)) {
        local++;
        if (format)
          given[(*ngiven)++] = (struct given_format) { inputs[i], format };
      }
      else if (format && name_is_http (inputs[i]))
        usage_error ("--format=%s does not apply to %s: a URL is "
                     "hashed as its bytes (raw), never read as an image "
                     "format (download it first)", fo[k].arg, inputs[i]);
      else if (format)
        usage_error ("--format=%s does not apply to %s: it is "
                     "hashed as its server serves it", fo[k].arg, inputs[i]);
    }
    if (local == 0)
      usage_error ("--format=%s applies to no local file (it "
                   "applies to the files after it)", fo[k].arg);
  }
  /* Only the user's word for a format lets names outside be followed. */
  if (o->allow_backing && *ngiven == 0)
    usage_error ("--allow-backing applies to the local files "
                 "whose format --format gives (a probed format, or a "
                 "checksum line's, never lets an image name files outside "
                 "its directory)");
  return given;
}

/* --plain=ALG: a digest with a tag sha256sum's family writes
 * (blk_plain_tag), by its canonical name, static.
 */
const char *
parse_plain_digest (const char *arg)
{
  static const char *const names[] = {
    "md5", "sha1", "sha224", "sha256", "sha384", "sha512", "blake3",
  };
  struct blk_digest d;
  const char *msg;

  if ((msg = blk_digest_init (&d, arg)) == NULL) {
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (strcmp (d.name, names[i]) == 0 && blk_plain_tag (names[i])) {
        blk_digest_free (&d);
        return names[i];
      }
    blk_digest_free (&d);
  }
  usage_error ("--plain=%s: %s", arg,
               msg ? msg : "not a digest that sha256sum, md5sum and their "
               "kin print (md5, sha1, sha224, sha256, sha384, sha512, "
               "blake3)");
}

unsigned
parse_count (const char *opt, const char *arg, unsigned max)
{
  char *end;
  long v = strtol (arg, &end, 10);

  if (*arg == '\0' || *end != '\0' || v < 1 || v > (long) max)
    usage_error ("%s must be a number from 1 to %u: '%s'", opt, max, arg);
  return v;
}

unsigned
parse_spot_check (const char *arg)
{
  char *end;
  long v = strtol (arg, &end, 10);

  if (*arg == '\0' || *end != '\0' || v < 0 || v > MAX_SPOT_CHECK)
    usage_error ("--spot-check must be a number of blocks from 0 "
                 "(none) to %d: '%s'", MAX_SPOT_CHECK, arg);
  return v;
}

double
parse_seconds (const char *opt, const char *arg, unsigned max)
{
  char *end;
  double v;

  errno = 0;
  v = strtod (arg, &end);
  if (*arg == '\0' || *end != '\0' || errno || !(v >= 0) || v > max)
    usage_error ("%s must be a number of seconds from 0 (no limit) "
                 "to %u: '%s'", opt, max, arg);
  return v;
}

/* As curl sends it: one line (no control character but a tab could
 * end it and start another header), and a name.  Its value may be a
 * secret: never printed.
 */
void
check_http_header (const char *arg)
{
  const size_t name = strcspn (arg, ":");
  bool bad = name == 0 || arg[name] != ':';

  for (size_t i = 0; !bad && arg[i]; i++)
    bad = ((unsigned char) arg[i] < ' ' && arg[i] != '\t') ||
      arg[i] == 0x7f || (i < name && strchr (" \t\"(),/;<=>?@[\\]{}", arg[i]));
  if (bad)
    usage_error ("--http-header: a header is NAME: VALUE on one "
                 "line, its name a token (one is not; its value is not "
                 "shown)");
  /* curl sends a header given for one it sets itself instead: every
   * read would ask the same range, or get the whole file.
   */
  if ((name == 5 && strncasecmp (arg, "Range", 5) == 0) ||
      (name == 8 && strncasecmp (arg, "If-Range", 8) == 0))
    usage_error ("--http-header: %.*s is nbdsum's to send (it reads "
                 "a URL in ranges)", (int) name, arg);
}

void
check_combinations (const struct options *o, char *const *inputs, int nargs)
{
  /* A plain digest is of the bytes: no blocks, nor a blkhash digest. */
  if (o->plain) {
    const char *other = o->blocks ? "--blocks"
      : o->diff ? "--diff"
      : o->since ? "--since"
      : o->check_manifest ? "--check-manifest"
      : o->block_size ? "--block-size"
      : o->digest ? "-d (--digest)" : NULL;
    if (other)
      usage_error ("--plain does not go with %s: a plain digest "
                   "is of the whole image's bytes (give its digest as "
                   "--plain=ALG)", other);
  }
  /* A bmap is sha256 of 4K blocks, of one image, on standard output. */
  if (o->bmap &&
      (o->check || o->diff || o->blocks || o->since ||
       o->check_manifest || o->plain || o->json ||
       o->client_side || o->digest || o->block_size ||
       o->no_names || o->tag != TAG_AUTO || o->zero ||
       o->jobs > 1 || o->range.length || nargs != 1 ||
       name_is_stdin (inputs[0])))
    usage_error ("--bmap needs one image (not standard input), "
                 "and goes with no other mode, nor with --plain, --json, "
                 "--client-side, -d, --block-size, -j, --range or the line "
                 "options: a bmap is bmaptool's, sha256 of 4K blocks");
  /* Part of an image is hashed by the server's filter, and its line
   * says which part (-c reads it there).
   */
  if (o->range.length) {
    const char *other = o->check ? "--check (a checksum line carries "
      "its range)"
      : o->blocks ? "--blocks" : o->diff ? "--diff"
      : o->since ? "--since" : o->check_manifest ? "--check-manifest"
      : o->client_side ? "--client-side (only the server's filter "
      "hashes part of an image)"
      : o->tag == TAG_NEVER ? "--untagged (an untagged line cannot say "
      "the range, and -c would check the whole image)" : NULL;
    if (other)
      usage_error ("--range does not go with %s", other);
  }
  if ((o->diff && (o->check || o->blocks)) || (o->check && o->blocks))
    usage_error ("--check, --diff and --blocks do not go together");
  if ((o->status || o->ignore_missing || o->strict || o->warn) && !o->check)
    usage_error ("--status, --ignore-missing, --strict and --warn "
                 "only go with --check");
  if (o->no_names &&
      (o->check || o->diff || o->blocks || o->json || o->tag != TAG_AUTO))
    usage_error ("--no-names only goes with plain checksums: not "
                 "with --check, --diff, --blocks, --json, --tag or "
                 "--untagged");
  /* As sha256sum: -c reads lines of either form, ending with newlines
   * (coreutils 9.1 refuses --zero when verifying, too).
   */
  if ((o->tag != TAG_AUTO || o->zero) && o->check)
    usage_error ("--tag, --untagged and --zero are not supported "
                 "when verifying checksums");
  if ((o->tag != TAG_AUTO || o->zero) && (o->diff || o->blocks || o->json))
    usage_error ("--tag, --untagged and --zero only change checksum "
                 "lines: not with --diff, --blocks or --json");
  if (!o->since != !o->dirty_bitmap)
    usage_error ("--since and --dirty-bitmap go together: the "
                 "manifest of the image then, and the bitmap of what was "
                 "written since");
  if (o->immutable_backing && !o->since)
    usage_error ("--immutable-backing only goes with --since");
  if (o->since && (o->check || o->diff || o->check_manifest))
    usage_error ("--since does not go with --check, --diff or "
                 "--check-manifest");
  if (o->since && nargs != 1)
    usage_error ("--since needs one image, the one MANIFEST was "
                 "made of");
  if (o->check_manifest &&
      (o->check || o->diff || o->blocks || o->json ||
       o->no_names || o->client_side))
    usage_error ("--check-manifest goes with no other mode, nor "
                 "with --json, --no-names or --client-side");
  if (o->check_manifest && nargs == 0)
    usage_error ("--check-manifest needs the manifests to check");
  if (o->manifest && !o->diff)
    usage_error ("--manifest only goes with --diff");
  if (o->diff && o->manifest && nargs != 1)
    usage_error ("--diff --manifest=FILE needs one image");
  if (o->diff && !o->manifest && nargs != 2)
    usage_error ("--diff needs two images");
  if (o->blocks && nargs != 1)
    usage_error ("--blocks needs one image");
  /* Block digests need an image that can be read anywhere. */
  for (int i = 0; (o->diff || o->blocks || o->since) && i < nargs; i++)
    if (name_is_stdin (inputs[i]))
      usage_error ("%s: standard input cannot be an image with "
                   "%s (save it to a file first)", inputs[i],
                   o->diff ? "--diff" : o->since ? "--since" : "--blocks");
  /* A URL has no dirty bitmap; --http-* apply to URLs (or -c's). */
  int urls = 0;
  for (int i = 0; i < nargs; i++)
    urls += name_is_http (inputs[i]);
  if (o->since && urls)
    usage_error ("--since needs a dirty bitmap, and a URL has none");
  if ((o->nhttp_headers || o->http_insecure || o->http_timeout_given) &&
      urls == 0 && !o->check)
    usage_error ("--http-header, --http-insecure and --http-timeout apply "
                 "to http:// and https:// inputs only");
}
