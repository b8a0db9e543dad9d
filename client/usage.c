/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what it says of itself (see usage.h): --help, --version,
 * --list-digests, --bats-helper.
 */
#include <config.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libnbd.h>

#include "blkhash.h"
#include "messages.h"
#include "paths.h"
#include "usage.h"

/* Exit with status, or 1 if standard output could not be written, as
 * sha256sum --version does.
 */
static void __attribute__ ((noreturn))
exit_written (int status)
{
  if (fflush (stdout) == EOF || ferror (stdout)) {
    error_msg ("write error: %m");
    exit (EXIT_FAILURE);
  }
  exit (status);
}

void
usage (FILE *fp, int status)
{
  fprintf (fp,
"Print or check blkhash checksums of disk images, computed next to the\n"
"storage by nbdkit's blkhash filter.\n"
"\n"
"Usage: %s [OPTION]... [INPUT]...            a checksum line each\n"
"       %s -c [OPTION]... FILE...             verify checksum lines\n"
"       %s --diff [OPTION]... A B             where two images differ\n"
"       %s --diff --manifest=M [OPTION]... B\n"
"       %s --blocks [OPTION]... INPUT         every block's digest\n"
"       %s --since=M --dirty-bitmap=NAME [--blocks] [OPTION]... INPUT\n"
"       %s --check-manifest [OPTION]... M...\n"
"\n"
"INPUT: an NBD URI (nbd://HOST/EXPORT, nbd+unix:///EXPORT?socket=PATH...),\n"
"a FILE (raw; qcow2, vmdk and the formats qemu probes: their guest content),\n"
"an http(s):// URL (its bytes), [ CMD ARGS ] (a command serving one, as in\n"
"nbdinfo), or - (a raw stream on standard input; also when none is given).\n"
"A view is the export NAME@blkhash that nbdkit --filter=blkhash serves beside\n"
"NAME; the root is the checksum in it; without one, nbdsum hashes here.\n"
"\n"
"  -C, --connections=N       connections (default 4)\n"
"  -R, --requests=N          requests in flight per connection (default 16)\n"
"      --connect-timeout=S, --reply-timeout=S   give up on a silent server\n"
"  -j, --jobs=N              hash N inputs (or -c lines) at once (default 1)\n"
"  -d, --digest=NAME         an OpenSSL digest, or blake3 (default: the\n"
"                            server's blkhash-digest=, else sha256)\n"
"      --block-size=SIZE     4K to 16M in 4K steps (default: the server's\n"
"                            blkhash-block-size=, else 64K)\n"
"      --plain[=ALG]         digests of the bytes as sha256sum's (md5...)\n"
"      --range=OFF+LEN       of those bytes as an image (by the filter)\n"
"      --format=FMT          read the FILEs after it as FMT (auto: probed)\n"
"      --allow-backing       with --format, follow what images name anywhere\n"
"      --http-header=H, --http-insecure, --http-timeout=S (60)   for URLs\n"
"      --client-side         hash here even where the server has a view\n"
"      --max-size=SIZE       refuse larger inputs (1P; --plain: 1T; 0: none)\n"
"      --spot-check=N, --no-spot-check   check N view blocks here (16)\n"
"      --tag, --untagged     always, never tag lines with digest and size\n"
"  -z, --zero                end lines with NUL, names as they are\n"
"      --no-names            print the checksums alone\n"
"  -c, --check               verify the checksum lines in the FILEs\n"
"  -q, --quiet               no notices; with -c, no OK lines\n"
"      --status, --ignore-missing, --strict, -w, --warn   as sha256sum -c\n"
"      --json                one JSON document (every mode but --bmap)\n"
"  -p, --progress[=FD]       progress on standard error, or N/100 lines on FD\n"
"      --diff, --manifest=M  compare A (or manifest M) with B\n"
"      --blocks, --bmap      print a manifest (see --diff, --since), a bmap\n"
"      --since=M, --dirty-bitmap=NAME, --immutable-backing\n"
"                            from manifest M, hashing only the blocks NAME marks\n"
"      --check-manifest      verify manifests against their checksums\n"
"  -v, --verbose, --list-digests, --bats-helper, -h, --help, -V, --version\n"
"\n"
"-c alone reads 'CHECKSUM  NAME' (blkhash sha256/64K), 'BLKHASH-DIGEST/SIZE\n"
"(NAME) = CHECKSUM', sha256sum --tag's; untagged sha256sum lines need --plain.\n"
"Exit status: 0 if every checksum was computed (and matched, or with\n"
"--diff was equal), 1 if not; --diff exits 2 on errors.\n"
"\n"
"Examples:\n"
"  %s disk.img disk.qcow2 > SUMS && %s -c SUMS\n"
"  nbdkit --filter=blkhash file disk.img; %s nbd://localhost\n"
"\n"
"See nbdsum(1) and nbdkit-blkhash-filter(1).\n",
           progname, progname, progname, progname, progname, progname,
           progname, progname, progname, progname);
  if (fp == stdout)
    exit_written (status);
  exit (status);
}

struct digest_lines {
  char *lines[256];
  size_t n;
};

static void
list_one (const char *names, size_t len, void *opaque)
{
  struct digest_lines *dl = opaque;

  if (dl->n < sizeof dl->lines / sizeof dl->lines[0] &&
      asprintf (&dl->lines[dl->n], "%-40s %3zu bytes", names, len) != -1)
    dl->n++;
}

static int
compare_lines (const void *a, const void *b)
{
  return strcmp (*(char * const *) a, *(char * const *) b);
}

void
list_digests (void)
{
  struct digest_lines dl = { .n = 0 };

  blk_digest_list (list_one, &dl);
  qsort (dl.lines, dl.n, sizeof dl.lines[0], compare_lines);
  for (size_t i = 0; i < dl.n; i++) {
    puts (dl.lines[i]);
    free (dl.lines[i]);
  }
  exit_written (EXIT_SUCCESS);
}

void
print_bats_helper (void)
{
  static const char build_tree[] = "/../bats/blkhash.bash";
  char path[PATH_MAX + sizeof build_tree];
  const ssize_t n = readlink ("/proc/self/exe", path, PATH_MAX - 1);
  char *slash;

  if (n > 0) {
    path[n] = '\0';
    if ((slash = strrchr (path, '/')) != NULL) {
      strcpy (slash, build_tree);
      if (access (path, R_OK) == 0) {
        puts (path);
        exit_written (EXIT_SUCCESS);
      }
    }
  }
  puts (PKGDATADIR "/blkhash.bash");
  exit_written (EXIT_SUCCESS);
}

void
print_version (void)
{
  struct nbd_handle *h = nbd_create ();

  printf ("%s %s\n", progname, PACKAGE_VERSION);
  if (h) {
    printf ("libnbd %s\n", nbd_get_version (h));
    nbd_close (h);
  }
  exit_written (EXIT_SUCCESS);
}
