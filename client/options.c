/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: command line.  Options apply to every input wherever they
 * are, but --format, which applies to the local files after it: getopt
 * returns the inputs in order among the options.  Also what the others
 * take from the options (see options.h): a hash spec's defaults, the
 * size limit's refusal, and the environment manifests are read in.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>


#include "blkhash.h"
#include "helpers.h"
#include "imgformat.h"
#include "manifest.h"
#include "messages.h"
#include "names.h"
#include "options.h"
#include "signals.h"
#include "sumline.h"
#include "usage.h"
#include "util.h"

static struct options parsed = {
  .connections = 4,
  .requests = 16,
  .progress_fd = -1,
  .jobs = 1,
  .http_timeout = 60,
  .spot_check = SPOT_CHECK_DEFAULT,
};
const struct options *const opts = &parsed;

/* The inputs a --format other than auto applies to, and that format. */
struct given_format {
  const char *name;             /* the input, by its address */
  const char *format;           /* static, lib/imgformat.h's */
};
static struct given_format *given;
static size_t ngiven;

/* Usage errors exit 1, or 2 with --diff, where 1 means "the images
 * differ" (as cmp and diff do).
 */
static int usage_status = EXIT_FAILURE;

static void
set_usage_status (int argc, char **argv)
{
  for (int i = 1; i < argc && strcmp (argv[i], "--") != 0; i++)
    if (strcmp (argv[i], "--diff") == 0 ||
        strncmp (argv[i], "--manifest", 10) == 0)
      usage_status = 2;
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
    fprintf (stderr, "%s: --format=%s: luks images are encrypted: nbdsum "
             "cannot read their guest content without the secret (serve "
             "it yourself, with qemu-nbd --object secret,... as "
             "[ CMD ], or give --format=raw for its bytes)\n",
             progname, arg);
  else
    fprintf (stderr, "%s: --format=%s: unknown format (nbdsum reads "
             BLK_IMAGE_FORMATS_LIST "; auto probes)\n", progname, arg);
  exit (usage_status);
}

/* A --format on the command line: where it was among the inputs. */
struct format_option {
  const char *arg;              /* as given */
  int first;                    /* the first input after it */
};

/* Check each --format against the inputs it applies to (those after it
 * until the next) and keep the format of each local file given one.
 */
static void
apply_formats (const struct format_option *fo, int nfo, char **inputs,
               int ninputs, bool implicit_stdin)
{
  if (nfo && (parsed.check || parsed.check_manifest || parsed.since)) {
    fprintf (stderr, "%s: --format does not go with --check (a checksum "
             "line carries its format), --check-manifest or --since\n",
             progname);
    exit (usage_status);
  }
  given = calloc (ninputs ? ninputs : 1, sizeof *given);
  if (given == NULL) {
    fprintf (stderr, "%s: out of memory\n", progname);
    exit (usage_status);
  }
  for (int k = 0; k < nfo; k++) {
    const char *format = parse_format (fo[k].arg);
    const int end = k + 1 < nfo ? fo[k + 1].first : ninputs;
    int local = 0;

    /* Only a tagged line records a format: -c would probe the file
     * (a plain line's reader takes the bytes: raw).
     */
    if (format && parsed.tag == TAG_NEVER &&
        !(parsed.plain && strcmp (format, "raw") == 0)) {
      fprintf (stderr, "%s: --untagged does not go with --format=%s: an "
               "untagged line cannot record the format, and -c would "
               "probe the file instead (leave out --untagged)\n",
               progname, fo[k].arg);
      exit (usage_status);
    }

    for (int i = fo[k].first; i < end; i++) {
      /* A stream is its bytes (input-stream.c says so of other streams). */
      if (name_is_stdin (inputs[i]) && format &&
          strcmp (format, "raw") != 0) {
        if (implicit_stdin)
          fprintf (stderr, "%s: --format=%s applies to no local file (it "
                   "applies to the files after it; standard input, read "
                   "when none is given, only takes --format=raw)\n",
                   progname, fo[k].arg);
        else
          fprintf (stderr, "%s: --format=%s does not apply to standard "
                   "input: nbdsum hashes a stream's bytes (--format=raw)\n",
                   progname, fo[k].arg);
        exit (usage_status);
      }
      if (name_is_local (inputs[i]) ||
          (name_is_http (inputs[i]) && format && strcmp (format, "raw") == 0)) {
        local++;
        if (format)
          given[ngiven++] = (struct given_format) { inputs[i], format };
      }
      else if (format && name_is_http (inputs[i])) {
        fprintf (stderr, "%s: --format=%s does not apply to %s: a URL is "
                 "hashed as its bytes (raw), never read as an image format "
                 "(download it first)\n", progname, fo[k].arg, inputs[i]);
        exit (usage_status);
      }
      else if (format) {
        fprintf (stderr, "%s: --format=%s does not apply to %s: it is "
                 "hashed as its server serves it\n", progname, fo[k].arg,
                 inputs[i]);
        exit (usage_status);
      }
    }
    if (local == 0) {
      fprintf (stderr, "%s: --format=%s applies to no local file (it "
               "applies to the files after it)\n", progname, fo[k].arg);
      exit (usage_status);
    }
  }
}

const char *
options_format (const char *name)
{
  for (size_t i = 0; i < ngiven; i++)
    if (given[i].name == name)
      return given[i].format;
  return NULL;
}

uint64_t
options_max_size (bool plain)
{
  if (parsed.max_size_given)
    return parsed.max_size ? parsed.max_size : UINT64_MAX;
  return plain ? BLK_MAX_PLAIN_SIZE : BLK_MAX_SIZE;
}

struct hash_spec
hash_spec_or_defaults (const struct hash_spec *spec)
{
  return (struct hash_spec) {
    .digest = spec->digest ? spec->digest : BLK_DEFAULT_DIGEST,
    .block_size = spec->block_size ? spec->block_size
                  : BLK_DEFAULT_BLOCK_SIZE,
    .format = spec->format,
    .plain = spec->plain,
    .range = spec->range,
  };
}

static void
say_refused (const char *path, const char *msg)
{
  error_at (path, "%s", msg);
}

static bool
signalled (void)
{
  return stop_signal () != 0;
}

const struct manifest_env *
manifest_env (void)
{
  static struct manifest_env env = { say_refused, signalled, NULL, 0, NULL };
  const uint64_t max = options_max_size (false);

  /* Only main's thread reads manifests. */
  if (env.temp_dir == NULL) {
    env.temp_dir = temp_dir ();
    env.max_size = max == UINT64_MAX ? 0 : max;
    env.max_size_hint = SIZE_LIFTS;
  }
  return &env;
}

bool
size_refused (const char *name, const char *what, uint64_t size,
              uint64_t block_size, uint32_t digest_len)
{
  const bool plain = block_size == 0;
  const uint64_t max = options_max_size (plain);
  const uint64_t work = blk_work_size (size, block_size, digest_len);
  char h[BLK_HUMAN_STR_MAX], w[BLK_HUMAN_STR_MAX], l[BLK_LIMIT_STR_MAX];
  char bs[BLK_BLOCK_SIZE_STR_MAX];

  if (work <= max)
    return false;
  if (plain || (block_size == 65536 && digest_len == 32))
    error_at (name, "%s %" PRIu64 " bytes (%s), over the limit of %s for %s: "
              SIZE_LIFTS, what, size, blk_format_human (size, h),
              blk_format_limit (max, l),
              plain ? "a plain digest" : "a blkhash checksum");
  else
    error_at (name, "%s %" PRIu64 " bytes (%s): in %s blocks of %" PRIu32
              "-byte digests, as much hashing as %s in 64K blocks of "
              "sha256, over the limit of %s for a blkhash checksum: "
              SIZE_LIFTS, what, size, blk_format_human (size, h),
              blk_format_block_size (block_size, bs), digest_len,
              blk_format_human (work, w), blk_format_limit (max, l));
  return true;
}

/* --plain=ALG: a digest with a tag sha256sum's family writes
 * (blk_plain_tag), by its canonical name, static.
 */
static const char *
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
  fprintf (stderr, "%s: --plain=%s: %s\n", progname, arg,
           msg ? msg : "not a digest that sha256sum, md5sum and their kin "
           "print (md5, sha1, sha224, sha256, sha384, sha512, blake3)");
  exit (usage_status);
}

static unsigned
parse_count (const char *opt, const char *arg, unsigned max)
{
  char *end;
  long v = strtol (arg, &end, 10);

  if (*arg == '\0' || *end != '\0' || v < 1 || v > (long) max) {
    fprintf (stderr, "%s: %s must be a number from 1 to %u: '%s'\n",
             progname, opt, max, arg);
    exit (usage_status);
  }
  return v;
}

/* --spot-check's blocks: 0 (none) to MAX_SPOT_CHECK. */
static unsigned
parse_spot_check (const char *arg)
{
  char *end;
  long v = strtol (arg, &end, 10);

  if (*arg == '\0' || *end != '\0' || v < 0 || v > MAX_SPOT_CHECK) {
    fprintf (stderr, "%s: --spot-check must be a number of blocks from 0 "
             "(none) to %d: '%s'\n", progname, MAX_SPOT_CHECK, arg);
    exit (usage_status);
  }
  return v;
}

/* Seconds, decimals allowed: 0 (no limit) to max. */
static double
parse_seconds (const char *opt, const char *arg, unsigned max)
{
  char *end;
  double v;

  errno = 0;
  v = strtod (arg, &end);
  if (*arg == '\0' || *end != '\0' || errno || !(v >= 0) || v > max) {
    fprintf (stderr, "%s: %s must be a number of seconds from 0 (no limit) "
             "to %u: '%s'\n", progname, opt, max, arg);
    exit (usage_status);
  }
  return v;
}

/* --http-header=NAME: VALUE, as curl sends it: one line (no control
 * character but a tab could end it and start another header), and a
 * name.  Its value may be a secret: never printed.
 */
static void
check_http_header (const char *arg)
{
  const size_t name = strcspn (arg, ":");
  bool bad = name == 0 || arg[name] != ':';

  for (size_t i = 0; !bad && arg[i]; i++)
    bad = ((unsigned char) arg[i] < ' ' && arg[i] != '\t') ||
      arg[i] == 0x7f || (i < name && strchr (" \t\"(),/;<=>?@[\\]{}", arg[i]));
  if (bad) {
    fprintf (stderr, "%s: --http-header: a header is NAME: VALUE on one "
             "line, its name a token (one is not; its value is not "
             "shown)\n", progname);
    exit (usage_status);
  }
  /* curl sends a header given for one it sets itself instead: every
   * read would ask the same range, or get the whole file.
   */
  if ((name == 5 && strncasecmp (arg, "Range", 5) == 0) ||
      (name == 8 && strncasecmp (arg, "If-Range", 8) == 0)) {
    fprintf (stderr, "%s: --http-header: %.*s is nbdsum's to send (it reads "
             "a URL in ranges)\n", progname, (int) name, arg);
    exit (usage_status);
  }
}

void
parse_options (int argc, char **argv, int *first_arg)
{
  enum {
    OPT_BLOCK_SIZE = CHAR_MAX + 1, OPT_FORMAT, OPT_CLIENT_SIDE, OPT_JSON,
    OPT_STATUS, OPT_IGNORE_MISSING, OPT_STRICT, OPT_DIFF, OPT_BLOCKS,
    OPT_LIST_DIGESTS, OPT_MANIFEST, OPT_TAG, OPT_UNTAGGED,
    OPT_CONNECT_TIMEOUT, OPT_NO_NAMES, OPT_BATS_HELPER, OPT_SINCE,
    OPT_DIRTY_BITMAP, OPT_IMMUTABLE_BACKING, OPT_CHECK_MANIFEST,
    OPT_PLAIN, OPT_ALLOW_BACKING, OPT_MAX_SIZE, OPT_SPOT_CHECK,
    OPT_NO_SPOT_CHECK, OPT_HTTP_HEADER, OPT_HTTP_INSECURE, OPT_HTTP_TIMEOUT,
    OPT_RANGE,
    OPT_BMAP,
  };
  static const struct option long_options[] = {
    { "connections", required_argument, NULL, 'C' },
    { "requests", required_argument, NULL, 'R' },
    { "connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT },
    { "jobs", required_argument, NULL, 'j' },
    { "digest", required_argument, NULL, 'd' },
    { "block-size", required_argument, NULL, OPT_BLOCK_SIZE },
    { "plain", optional_argument, NULL, OPT_PLAIN },
    { "format", required_argument, NULL, OPT_FORMAT },
    { "allow-backing", no_argument, NULL, OPT_ALLOW_BACKING },
    { "max-size", required_argument, NULL, OPT_MAX_SIZE },
    { "http-header", required_argument, NULL, OPT_HTTP_HEADER },
    { "http-insecure", no_argument, NULL, OPT_HTTP_INSECURE },
    { "http-timeout", required_argument, NULL, OPT_HTTP_TIMEOUT },
    { "client-side", no_argument, NULL, OPT_CLIENT_SIDE },
    { "range", required_argument, NULL, OPT_RANGE },
    { "spot-check", required_argument, NULL, OPT_SPOT_CHECK },
    { "no-spot-check", no_argument, NULL, OPT_NO_SPOT_CHECK },
    { "tag", no_argument, NULL, OPT_TAG },
    { "untagged", no_argument, NULL, OPT_UNTAGGED },
    { "zero", no_argument, NULL, 'z' },
    { "no-names", no_argument, NULL, OPT_NO_NAMES },
    { "check", no_argument, NULL, 'c' },
    { "quiet", no_argument, NULL, 'q' },
    { "status", no_argument, NULL, OPT_STATUS },
    { "ignore-missing", no_argument, NULL, OPT_IGNORE_MISSING },
    { "strict", no_argument, NULL, OPT_STRICT },
    { "warn", no_argument, NULL, 'w' },
    { "json", no_argument, NULL, OPT_JSON },
    { "progress", optional_argument, NULL, 'p' },
    { "diff", no_argument, NULL, OPT_DIFF },
    { "manifest", required_argument, NULL, OPT_MANIFEST },
    { "blocks", no_argument, NULL, OPT_BLOCKS },
    { "bmap", no_argument, NULL, OPT_BMAP },
    { "since", required_argument, NULL, OPT_SINCE },
    { "dirty-bitmap", required_argument, NULL, OPT_DIRTY_BITMAP },
    { "immutable-backing", no_argument, NULL, OPT_IMMUTABLE_BACKING },
    { "check-manifest", no_argument, NULL, OPT_CHECK_MANIFEST },
    { "list-digests", no_argument, NULL, OPT_LIST_DIGESTS },
    { "bats-helper", no_argument, NULL, OPT_BATS_HELPER },
    { "verbose", no_argument, NULL, 'v' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL }
  };
  const char *msg;
  int c, nargs = 0, nfo = 0;
  bool implicit_stdin;
  /* The inputs in order, and the --format options among them. */
  char **inputs = calloc (argc, sizeof *inputs);
  struct format_option *fo = calloc (argc, sizeof *fo);

  /* Reachable while a usage error may exit: no leak for LeakSanitizer
   * to report.
   */
  static void *volatile held[2];
  /* --http-header's, kept for the run. */
  static const char **headers;

  if (inputs == NULL || fo == NULL) {
    fprintf (stderr, "%s: out of memory\n", progname);
    exit (EXIT_FAILURE);
  }
  held[0] = inputs;
  held[1] = fo;
  if (headers == NULL && (headers = calloc (argc, sizeof *headers)) == NULL) {
    fprintf (stderr, "%s: out of memory\n", progname);
    exit (EXIT_FAILURE);
  }
  parsed.http_headers = headers;
  set_usage_status (argc, argv);
  /* getopt names the program from argv[0]: nbdsum, not its path. */
  argv[0] = (char *) progname;
  /* '-': the inputs come back in order (1), for --format. */
  while ((c = getopt_long (argc, argv, "-C:R:d:j:cphqvVwz", long_options,
                           NULL)) != -1) {
    switch (c) {
    case 1:
      inputs[nargs++] = optarg;
      break;
    case 'C':
      parsed.connections = parse_count ("--connections", optarg,
                                      MAX_CONNECTIONS);
      break;
    case 'R':
      parsed.requests = parse_count ("--requests", optarg, MAX_REQUESTS);
      break;
    case 'j':
      parsed.jobs = parse_count ("--jobs", optarg, MAX_JOBS);
      break;
    case OPT_CONNECT_TIMEOUT:
      parsed.connect_timeout = parse_seconds ("--connect-timeout", optarg,
                                              MAX_CONNECT_TIMEOUT);
      break;
    case 'd': {
      struct blk_digest d;
      if ((msg = blk_digest_init (&d, optarg)) != NULL) {
        fprintf (stderr, "%s: --digest %s: %s\n", progname, optarg, msg);
        exit (usage_status);
      }
      blk_digest_free (&d);
      parsed.digest = optarg;
      break;
    }
    case OPT_PLAIN:
      parsed.plain = true;
      parsed.plain_digest = parse_plain_digest (optarg ? optarg : "sha256");
      break;
    case OPT_BLOCK_SIZE:
      if ((msg = blk_parse_size (optarg, &parsed.block_size)) != NULL) {
        fprintf (stderr, "%s: --block-size %s: %s\n", progname, optarg, msg);
        exit (usage_status);
      }
      if ((msg = blk_check_block_size (parsed.block_size)) != NULL) {
        /* nbdcopy --blkhash takes any power of two: say why not here. */
        fprintf (stderr, "%s: --block-size %s: %s (nbdcopy --blkhash "
                 "takes other powers of two too; nbdsum keeps blksum's "
                 "range, see nbdsum(1))\n", progname, optarg, msg);
        exit (usage_status);
      }
      break;
    case OPT_MAX_SIZE:
      if ((msg = blk_parse_size (optarg, &parsed.max_size)) != NULL) {
        fprintf (stderr, "%s: --max-size=%s: %s (0: no limit)\n", progname,
                 optarg, msg);
        exit (usage_status);
      }
      parsed.max_size_given = true;
      break;
    case OPT_FORMAT:
      fo[nfo++] = (struct format_option) { optarg, nargs };
      break;
    case OPT_ALLOW_BACKING:
      parsed.allow_backing = true;
      break;
    case OPT_HTTP_HEADER:
      check_http_header (optarg);
      headers[parsed.nhttp_headers++] = optarg;
      break;
    case OPT_HTTP_INSECURE:
      parsed.http_insecure = true;
      break;
    case OPT_HTTP_TIMEOUT: {
      /* curl's timeout= is whole seconds: rounded up. */
      const double v = parse_seconds ("--http-timeout", optarg,
                                      MAX_CONNECT_TIMEOUT);
      parsed.http_timeout = (unsigned) v + (v > (unsigned) v);
      parsed.http_timeout_given = true;
      break;
    }
    case OPT_RANGE:
      if ((msg = blk_parse_range (optarg, &parsed.range)) != NULL) {
        fprintf (stderr, "%s: --range=%s: %s\n", progname, optarg, msg);
        exit (usage_status);
      }
      break;
    case OPT_CLIENT_SIDE:
      parsed.client_side = true;
      break;
    case OPT_SPOT_CHECK:
      parsed.spot_check = parse_spot_check (optarg);
      break;
    case OPT_NO_SPOT_CHECK:
      parsed.spot_check = 0;
      break;
    case OPT_TAG:               /* the last of --tag and --untagged wins */
      parsed.tag = TAG_ALWAYS;
      break;
    case OPT_UNTAGGED:
      parsed.tag = TAG_NEVER;
      break;
    case 'z':
      parsed.zero = true;
      break;
    case 'c':
      parsed.check = true;
      break;
    case 'q':
      parsed.quiet = true;
      break;
    case 'v':
      parsed.verbose = true;
      break;
    case OPT_NO_NAMES:
      parsed.no_names = true;
      break;
    case OPT_STATUS:
      parsed.status = true;
      break;
    case OPT_IGNORE_MISSING:
      parsed.ignore_missing = true;
      break;
    case OPT_STRICT:
      parsed.strict = true;
      break;
    case 'w':
      parsed.warn = true;
      break;
    case OPT_JSON:
      parsed.json = true;
      break;
    case 'p':
      if (optarg == NULL)
        parsed.progress_lines =
          !(parsed.progress_bar = isatty (STDERR_FILENO));
      else
        parsed.progress_fd = parse_count ("--progress", optarg, INT_MAX);
      /* Not yet one of nbdsum's own (only 0 to 2 are open so far). */
      if (optarg && fcntl (parsed.progress_fd, F_GETFD) == -1) {
        fprintf (stderr, "%s: --progress=%s: file descriptor %d is not "
                 "open (as in 3>FILE)\n", progname, optarg,
                 parsed.progress_fd);
        exit (usage_status);
      }
      break;
    case OPT_DIFF:
      parsed.diff = true;
      break;
    case OPT_MANIFEST:
      parsed.manifest = optarg;
      break;
    case OPT_BLOCKS:
      parsed.blocks = true;
      break;
    case OPT_BMAP:
      parsed.bmap = true;
      break;
    case OPT_SINCE:
      parsed.since = optarg;
      break;
    case OPT_DIRTY_BITMAP:
      if (*optarg == '\0') {
        fprintf (stderr, "%s: --dirty-bitmap needs a bitmap's name\n",
                 progname);
        exit (usage_status);
      }
      parsed.dirty_bitmap = optarg;
      break;
    case OPT_IMMUTABLE_BACKING:
      parsed.immutable_backing = true;
      break;
    case OPT_CHECK_MANIFEST:
      parsed.check_manifest = true;
      break;
    case OPT_LIST_DIGESTS:
      list_digests ();
    case OPT_BATS_HELPER:
      print_bats_helper ();
    case 'h':
      usage (stdout, EXIT_SUCCESS);
    case 'V':
      print_version ();
    default:
      fprintf (stderr, "Try '%s --help' for more information.\n", progname);
      exit (usage_status);
    }
  }

  /* After "--", inputs only. */
  while (optind < argc)
    inputs[nargs++] = argv[optind++];
  /* A plain digest is of the bytes: no blocks, nor a blkhash digest. */
  if (parsed.plain) {
    const char *other = parsed.blocks ? "--blocks"
      : parsed.diff ? "--diff"
      : parsed.since ? "--since"
      : parsed.check_manifest ? "--check-manifest"
      : parsed.block_size ? "--block-size"
      : parsed.digest ? "-d (--digest)" : NULL;
    if (other) {
      fprintf (stderr, "%s: --plain does not go with %s: a plain digest "
               "is of the whole image's bytes (give its digest as "
               "--plain=ALG)\n", progname, other);
      exit (usage_status);
    }
  }
  /* A bmap is sha256 of 4K blocks, of one image, on standard output. */
  if (parsed.bmap &&
      (parsed.check || parsed.diff || parsed.blocks || parsed.since ||
       parsed.check_manifest || parsed.plain || parsed.json ||
       parsed.client_side || parsed.digest || parsed.block_size ||
       parsed.no_names || parsed.tag != TAG_AUTO || parsed.zero ||
       parsed.jobs > 1 || parsed.range.length || nargs != 1 ||
       name_is_stdin (inputs[0]))) {
    fprintf (stderr, "%s: --bmap needs one image (not standard input), "
             "and goes with no other mode, nor with --plain, --json, "
             "--client-side, -d, --block-size, -j, --range or the line "
             "options: a bmap is bmaptool's, sha256 of 4K blocks\n",
             progname);
    exit (usage_status);
  }
  /* Part of an image is hashed by the server's filter, and its line
   * says which part (-c reads it there).
   */
  if (parsed.range.length) {
    const char *other = parsed.check ? "--check (a checksum line carries "
      "its range)"
      : parsed.blocks ? "--blocks" : parsed.diff ? "--diff"
      : parsed.since ? "--since" : parsed.check_manifest ? "--check-manifest"
      : parsed.client_side ? "--client-side (only the server's filter "
      "hashes part of an image)"
      : parsed.tag == TAG_NEVER ? "--untagged (an untagged line cannot say "
      "the range, and -c would check the whole image)" : NULL;
    if (other) {
      fprintf (stderr, "%s: --range does not go with %s\n", progname, other);
      exit (usage_status);
    }
  }
  if ((parsed.diff && (parsed.check || parsed.blocks)) ||
      (parsed.check && parsed.blocks)) {
    fprintf (stderr, "%s: --check, --diff and --blocks do not go together\n",
             progname);
    exit (usage_status);
  }
  if ((parsed.status || parsed.ignore_missing || parsed.strict ||
       parsed.warn) && !parsed.check) {
    fprintf (stderr, "%s: --status, --ignore-missing, --strict and --warn "
             "only go with --check\n", progname);
    exit (usage_status);
  }
  if (parsed.no_names &&
      (parsed.check || parsed.diff || parsed.blocks || parsed.json ||
       parsed.tag != TAG_AUTO)) {
    fprintf (stderr, "%s: --no-names only goes with plain checksums: not "
             "with --check, --diff, --blocks, --json, --tag or --untagged\n",
             progname);
    exit (usage_status);
  }
  /* As sha256sum: -c reads lines of either form, ending with newlines
   * (coreutils 9.1 refuses --zero when verifying, too).
   */
  if ((parsed.tag != TAG_AUTO || parsed.zero) && parsed.check) {
    fprintf (stderr, "%s: --tag, --untagged and --zero are not supported "
             "when verifying checksums\n", progname);
    exit (usage_status);
  }
  if ((parsed.tag != TAG_AUTO || parsed.zero) &&
      (parsed.diff || parsed.blocks || parsed.json)) {
    fprintf (stderr, "%s: --tag, --untagged and --zero only change checksum "
             "lines: not with --diff, --blocks or --json\n", progname);
    exit (usage_status);
  }
  if (!parsed.since != !parsed.dirty_bitmap) {
    fprintf (stderr, "%s: --since and --dirty-bitmap go together: the "
             "manifest of the image then, and the bitmap of what was "
             "written since\n", progname);
    exit (usage_status);
  }
  if (parsed.immutable_backing && !parsed.since) {
    fprintf (stderr, "%s: --immutable-backing only goes with --since\n",
             progname);
    exit (usage_status);
  }
  if (parsed.since && (parsed.check || parsed.diff || parsed.check_manifest)) {
    fprintf (stderr, "%s: --since does not go with --check, --diff or "
             "--check-manifest\n", progname);
    exit (usage_status);
  }
  if (parsed.since && nargs != 1) {
    fprintf (stderr, "%s: --since needs one image, the one MANIFEST was "
             "made of\n", progname);
    exit (usage_status);
  }
  if (parsed.check_manifest &&
      (parsed.check || parsed.diff || parsed.blocks || parsed.json ||
       parsed.no_names || parsed.client_side)) {
    fprintf (stderr, "%s: --check-manifest goes with no other mode, nor "
             "with --json, --no-names or --client-side\n", progname);
    exit (usage_status);
  }
  if (parsed.check_manifest && nargs == 0) {
    fprintf (stderr, "%s: --check-manifest needs the manifests to check\n",
             progname);
    exit (usage_status);
  }
  if (parsed.manifest && !parsed.diff) {
    fprintf (stderr, "%s: --manifest only goes with --diff\n", progname);
    exit (usage_status);
  }
  if (parsed.diff && parsed.manifest && nargs != 1) {
    fprintf (stderr, "%s: --diff --manifest=FILE needs one image\n",
             progname);
    exit (usage_status);
  }
  if (parsed.diff && !parsed.manifest && nargs != 2) {
    fprintf (stderr, "%s: --diff needs two images\n", progname);
    exit (usage_status);
  }
  if (parsed.blocks && nargs != 1) {
    fprintf (stderr, "%s: --blocks needs one image\n", progname);
    exit (usage_status);
  }
  /* Block digests need an image that can be read anywhere. */
  for (int i = 0;
       (parsed.diff || parsed.blocks || parsed.since) && i < nargs; i++)
    if (name_is_stdin (inputs[i])) {
      fprintf (stderr, "%s: %s: standard input cannot be an image with "
               "%s (save it to a file first)\n", progname, inputs[i],
               parsed.diff ? "--diff" :
               parsed.since ? "--since" : "--blocks");
      exit (usage_status);
    }
  /* A URL has no dirty bitmap; --http-* apply to URLs (or -c's). */
  {
    int urls = 0;
    for (int i = 0; i < nargs; i++)
      urls += name_is_http (inputs[i]);
    if (parsed.since && urls) {
      fprintf (stderr, "%s: --since needs a dirty bitmap, and a URL has "
               "none\n", progname);
      exit (usage_status);
    }
    if ((parsed.nhttp_headers || parsed.http_insecure ||
         parsed.http_timeout_given) && urls == 0 && !parsed.check) {
      fprintf (stderr, "%s: --http-header, --http-insecure and "
               "--http-timeout apply to "
               "http:// and https:// inputs only\n", progname);
      exit (usage_status);
    }
  }
  /* No input is standard input (main): a --format=raw is for it. */
  implicit_stdin = nargs == 0 && nfo > 0 && !parsed.check &&
    !parsed.check_manifest;
  if (implicit_stdin)
    inputs[nargs++] = (char *) "-";
  apply_formats (fo, nfo, inputs, nargs, implicit_stdin);
  /* Only the user's word for a format lets names outside be followed. */
  if (parsed.allow_backing && ngiven == 0) {
    fprintf (stderr, "%s: --allow-backing applies to the local files "
             "whose format --format gives (a probed format, or a checksum "
             "line's, never lets an image name files outside its "
             "directory)\n", progname);
    exit (usage_status);
  }
  /* The inputs last in argv, in order, for main. */
  for (int i = 0; i < nargs; i++)
    argv[argc - nargs + i] = inputs[i];
  *first_arg = argc - nargs;
  free (inputs);
  free (fo);
  held[0] = held[1] = NULL;
}
