/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: command line.  Options apply to every input wherever they
 * are, but --format, which applies to the local files after it: getopt
 * returns the inputs in order among the options.  What it refuses is
 * option-checks.c's.  Also what the others take from the options (see
 * options.h): a hash spec's defaults, the size limit's refusal, and the
 * environment manifests are read in.
 */
#include <config.h>

#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "blkhash.h"
#include "helpers.h"
#include "manifest.h"
#include "messages.h"
#include "option-checks.h"
#include "options.h"
#include "signals.h"
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
static struct given_format *given;
static size_t ngiven;

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
    OPT_RANGE, OPT_REPLY_TIMEOUT,
    OPT_BMAP,
  };
  static const struct option long_options[] = {
    { "connections", required_argument, NULL, 'C' },
    { "requests", required_argument, NULL, 'R' },
    { "connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT },
    { "reply-timeout", required_argument, NULL, OPT_REPLY_TIMEOUT },
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
    case OPT_REPLY_TIMEOUT:
      parsed.reply_timeout = parse_seconds ("--reply-timeout", optarg,
                                            MAX_CONNECT_TIMEOUT);
      break;
    case 'd': {
      struct blk_digest d;
      if ((msg = blk_digest_init (&d, optarg)) != NULL)
        usage_error ("--digest %s: %s", optarg, msg);
      blk_digest_free (&d);
      parsed.digest = optarg;
      break;
    }
    case OPT_PLAIN:
      parsed.plain = true;
      parsed.plain_digest = parse_plain_digest (optarg ? optarg : "sha256");
      break;
    case OPT_BLOCK_SIZE:
      if ((msg = blk_parse_size (optarg, &parsed.block_size)) != NULL)
        usage_error ("--block-size %s: %s", optarg, msg);
      /* nbdcopy --blkhash takes any power of two: say why not here. */
      if ((msg = blk_check_block_size (parsed.block_size)) != NULL)
        usage_error ("--block-size %s: %s (nbdcopy --blkhash takes other "
                     "powers of two too; nbdsum keeps blksum's range, see "
                     "nbdsum(1))", optarg, msg);
      break;
    case OPT_MAX_SIZE:
      if ((msg = blk_parse_size (optarg, &parsed.max_size)) != NULL)
        usage_error ("--max-size=%s: %s (0: no limit)", optarg, msg);
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
      if ((msg = blk_parse_range (optarg, &parsed.range)) != NULL)
        usage_error ("--range=%s: %s", optarg, msg);
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
      messages_quiet ();
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
      if (optarg && fcntl (parsed.progress_fd, F_GETFD) == -1)
        usage_error ("--progress=%s: file descriptor %d is not open (as "
                     "in 3>FILE)", optarg, parsed.progress_fd);
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
      if (*optarg == '\0')
        usage_error ("--dirty-bitmap needs a bitmap's name");
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
      usage_try_help ();
    }
  }

  /* After "--", inputs only. */
  while (optind < argc)
    inputs[nargs++] = argv[optind++];
  check_combinations (&parsed, inputs, nargs);
  /* No input is standard input (main): a --format=raw is for it. */
  implicit_stdin = nargs == 0 && nfo > 0 && !parsed.check &&
    !parsed.check_manifest;
  if (implicit_stdin)
    inputs[nargs++] = (char *) "-";
  given = apply_formats (&parsed, fo, nfo, inputs, nargs, implicit_stdin,
                         &ngiven);
  /* The inputs last in argv, in order, for main. */
  for (int i = 0; i < nargs; i++)
    argv[argc - nargs + i] = inputs[i];
  *first_arg = argc - nargs;
  free (inputs);
  free (fo);
  held[0] = held[1] = NULL;
}
