/* nbdsum: command line. */
#include <config.h>

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbdsum.h"
#include "util.h"

static void __attribute__ ((noreturn))
usage (FILE *fp, int status)
{
  fprintf (fp,
"Print blkhash checksums of NBD exports, computed next to the storage\n"
"by nbdkit's blkhash filter.\n"
"\n"
"Usage: %s [OPTION]... URI...\n"
"\n"
"  -C, --connections=N   connections to open (default 4; 1 when the\n"
"                        server does not allow multi-conn)\n"
"  -R, --requests=N      requests in flight per connection (default 16)\n"
"  -d, --digest=NAME     OpenSSL digest (default: the server's, sha256)\n"
"      --block-size=SIZE blkhash block size, e.g. 64K or 1M\n"
"                        (default: the server's, 64K)\n"
"  -h, --help            print this help and exit\n"
"  -V, --version         print the version and exit\n"
"\n"
"Each URI (nbd://, nbd+unix://, nbds://, ...) names an export served\n"
"through 'nbdkit --filter=blkhash'.  One line 'CHECKSUM  URI' is\n"
"printed per URI, like sha256sum.  The exit status is 0 when every\n"
"checksum was computed and 1 otherwise.\n"
"\n"
"Example:\n"
"  nbdkit --filter=blkhash file disk.img\n"
"  %s nbd://localhost\n"
"\n"
"See nbdsum(1) and nbdkit-blkhash-filter(1).\n",
           progname, progname);
  exit (status);
}

static unsigned
parse_count (const char *opt, const char *arg, unsigned max)
{
  char *end;
  long v = strtol (arg, &end, 10);

  if (*arg == '\0' || *end != '\0' || v < 1 || v > (long) max) {
    fprintf (stderr, "%s: %s must be a number from 1 to %u: '%s'\n",
             progname, opt, max, arg);
    exit (EXIT_FAILURE);
  }
  return v;
}

void
parse_options (int argc, char **argv, struct options *opts, int *first_arg)
{
  enum { OPT_BLOCK_SIZE = CHAR_MAX + 1 };
  static const struct option long_options[] = {
    { "connections", required_argument, NULL, 'C' },
    { "requests", required_argument, NULL, 'R' },
    { "digest", required_argument, NULL, 'd' },
    { "block-size", required_argument, NULL, OPT_BLOCK_SIZE },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL }
  };
  const char *msg;
  int c;

  opts->connections = 4;
  opts->requests = 16;
  opts->digest = NULL;
  opts->block_size = 0;

  while ((c = getopt_long (argc, argv, "C:R:d:hV", long_options, NULL))
         != -1) {
    switch (c) {
    case 'C':
      opts->connections = parse_count ("--connections", optarg,
                                       MAX_CONNECTIONS);
      break;
    case 'R':
      opts->requests = parse_count ("--requests", optarg, MAX_REQUESTS);
      break;
    case 'd': {
      struct blk_digest d;
      if ((msg = blk_digest_init (&d, optarg)) != NULL) {
        fprintf (stderr, "%s: --digest %s: %s\n", progname, optarg, msg);
        exit (EXIT_FAILURE);
      }
      blk_digest_free (&d);
      opts->digest = optarg;
      break;
    }
    case OPT_BLOCK_SIZE:
      if ((msg = blk_parse_size (optarg, &opts->block_size)) != NULL ||
          (msg = blk_check_block_size (opts->block_size)) != NULL) {
        fprintf (stderr, "%s: --block-size %s: %s\n", progname, optarg, msg);
        exit (EXIT_FAILURE);
      }
      break;
    case 'h':
      usage (stdout, EXIT_SUCCESS);
    case 'V':
      printf ("%s %s\n", progname, PACKAGE_VERSION);
      exit (EXIT_SUCCESS);
    default:
      fprintf (stderr, "Try '%s --help' for more information.\n", progname);
      exit (EXIT_FAILURE);
    }
  }
  if (optind >= argc) {
    fprintf (stderr, "%s: missing URI\n"
             "Try '%s --help' for more information.\n", progname, progname);
    exit (EXIT_FAILURE);
  }
  *first_arg = optind;
}
