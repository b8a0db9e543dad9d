/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* stress: writers, data readers and view readers race on one export;
 * after the writers finish and flush, the view's root must equal the
 * checksum of the final content.  Repeated for several rounds.
 *
 *   stress [-s SEED] [-d DIGEST] [-b BLOCK-SIZE] DATA-URI VIEW-URI ROUNDS
 *          [DUMP-FILE]
 *
 * DATA-URI is a writable export served through the blkhash filter,
 * VIEW-URI its view, with DIGEST (default sha256) and BLOCK-SIZE
 * (default 64K).  The final content of the last round is written to
 * DUMP-FILE for an independent check.  Prints one line per round and
 * the last root; exits 1 on a mismatch.  -s SEED (default 0) varies the
 * operations between runs.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libnbd.h>

#include "blkhash.h"
#include "header.h"
#include "util.h"

#define WRITERS 3
#define DATA_READERS 2
#define VIEW_READERS 2
#define OPS_PER_WRITER 300

static const char *data_uri, *view_uri;
static uint64_t bs = 65536;
static int64_t size;
static atomic_bool writers_done;
static unsigned base_seed;

static void
die (const char *what, struct nbd_handle *h)
{
  fprintf (stderr, "stress: %s: %s\n", what, h ? nbd_get_error () : "");
  exit (EXIT_FAILURE);
}

static struct nbd_handle *
open_uri (const char *uri)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL || nbd_connect_uri (h, uri) == -1)
    die (uri, h);
  return h;
}

static uint64_t
rnd (unsigned *seed, uint64_t n)
{
  return ((uint64_t) rand_r (seed) << 31 ^ rand_r (seed)) % n;
}

/* Offsets and lengths that are sometimes block aligned, sometimes not,
 * so full blocks, partial blocks and neighbours all occur.
 */
static void
pick (unsigned *seed, uint64_t *off, uint64_t *len, uint64_t max)
{
  if (rnd (seed, 2)) {
    *off = rnd (seed, size / bs) * bs;
    *len = (1 + rnd (seed, 4)) * bs;
  }
  else {
    *off = rnd (seed, size);
    *len = 1 + rnd (seed, max);
  }
  if (*off + *len > (uint64_t) size)
    *len = size - *off;
}

static void *
writer (void *arg)
{
  unsigned seed = (uintptr_t) arg;
  struct nbd_handle *h = open_uri (data_uri);
  uint8_t *buf = malloc (4 * bs + 200000);
  uint64_t off, len;

  for (int i = 0; i < OPS_PER_WRITER; i++) {
    pick (&seed, &off, &len, 200000);
    switch (rnd (&seed, 6)) {
    case 0:
      if (nbd_zero (h, len, off, 0) == -1)
        die ("zero", h);
      break;
    case 1:
      if (nbd_trim (h, len, off, 0) == -1)
        die ("trim", h);
      break;
    default:
      for (uint64_t j = 0; j < len; j++)
        buf[j] = rand_r (&seed);
      /* Some blocks of zeros in data writes too. */
      if (len > bs && rnd (&seed, 3) == 0)
        memset (buf, 0, bs);
      if (nbd_pwrite (h, buf, len, off, 0) == -1)
        die ("pwrite", h);
    }
  }
  if (nbd_flush (h, 0) == -1)
    die ("flush", h);
  nbd_shutdown (h, 0);
  nbd_close (h);
  free (buf);
  return NULL;
}

/* Reads through the data export feed passive hashing. */
static void *
data_reader (void *arg)
{
  unsigned seed = (uintptr_t) arg;
  struct nbd_handle *h = open_uri (data_uri);
  uint8_t *buf = malloc (4 * bs + 300000);
  uint64_t off, len;

  while (!atomic_load (&writers_done)) {
    pick (&seed, &off, &len, 300000);
    if (nbd_pread (h, buf, len, off, 0) == -1)
      die ("pread", h);
  }
  nbd_shutdown (h, 0);
  nbd_close (h);
  free (buf);
  return NULL;
}

/* CACHE, digest reads and root reads on the view. */
static void *
view_reader (void *arg)
{
  unsigned seed = (uintptr_t) arg;
  struct nbd_handle *h = open_uri (view_uri);
  int64_t vsize = nbd_get_size (h);
  uint8_t buf[4096];

  if (vsize == -1)
    die ("view size", h);
  while (!atomic_load (&writers_done)) {
    uint64_t off = rnd (&seed, vsize - 8192) + 8192;
    uint64_t len = 1 + rnd (&seed, 2048);
    if (off + len > (uint64_t) vsize)
      len = vsize - off;
    switch (rnd (&seed, 3)) {
    case 0:
      if (nbd_cache (h, len, off, 0) == -1)
        die ("cache", h);
      break;
    case 1:
      if (nbd_pread (h, buf, len, off, 0) == -1)
        die ("pread view", h);
      break;
    default:
      if (nbd_pread (h, buf, 16, 4096, 0) == -1)
        die ("pread root", h);
    }
  }
  nbd_shutdown (h, 0);
  nbd_close (h);
  return NULL;
}

/* Checksum of the content read back over NBD, with the streaming
 * construction (not the block table the view uses).
 */
static void
content_checksum (const struct blk_params *p, uint8_t *out, const char *dump)
{
  struct nbd_handle *h = open_uri (data_uri);
  uint8_t *buf = malloc (1 << 20);
  struct blk_stream s;
  FILE *fp = dump ? fopen (dump, "w") : NULL;

  if (buf == NULL || blk_stream_init (&s, p) == -1 || (dump && fp == NULL))
    die ("setup", NULL);
  for (int64_t off = 0; off < size; off += 1 << 20) {
    size_t n = size - off < (1 << 20) ? size - off : (1 << 20);
    if (nbd_pread (h, buf, n, off, 0) == -1)
      die ("pread content", h);
    if (blk_stream_update (&s, buf, n) == -1)
      die ("hash", NULL);
    if (fp && fwrite (buf, 1, n, fp) != n)
      die ("dump", NULL);
  }
  if (blk_stream_final (&s, out) == -1)
    die ("hash", NULL);
  if (fp && fclose (fp) == EOF)
    die ("dump", NULL);
  blk_stream_free (&s);
  free (buf);
  nbd_shutdown (h, 0);
  nbd_close (h);
}

int
main (int argc, char **argv)
{
  struct blk_params p;
  struct nbd_handle *h;
  const char *digest = "sha256", *msg;
  int rounds, failures = 0;
  char hex_view[2 * EVP_MAX_MD_SIZE + 1], hex_content[2 * EVP_MAX_MD_SIZE + 1];

  for (int c; (c = getopt (argc, argv, "s:d:b:")) != -1; ) {
    switch (c) {
    case 's':
      base_seed = strtoul (optarg, NULL, 10) * 1000;
      break;
    case 'd':
      digest = optarg;
      break;
    case 'b':
      if ((msg = blk_parse_size (optarg, &bs)) != NULL) {
        fprintf (stderr, "stress: -b %s: %s\n", optarg, msg);
        return EXIT_FAILURE;
      }
      break;
    default:
      goto usage;
    }
  }
  argc -= optind - 1;
  argv += optind - 1;
  if (argc < 4) {
  usage:
    fprintf (stderr, "usage: stress [-s SEED] [-d DIGEST] [-b BLOCK-SIZE] "
             "DATA-URI VIEW-URI ROUNDS [DUMP]\n");
    return EXIT_FAILURE;
  }
  data_uri = argv[1];
  view_uri = argv[2];
  rounds = atoi (argv[3]);
  if ((msg = blk_params_init (&p, digest, bs)) != NULL) {
    fprintf (stderr, "stress: %s with block size %" PRIu64 ": %s\n", digest,
             bs, msg);
    return EXIT_FAILURE;
  }
  h = open_uri (data_uri);
  size = nbd_get_size (h);
  nbd_close (h);

  for (int r = 0; r < rounds; r++) {
    pthread_t w[WRITERS], d[DATA_READERS], v[VIEW_READERS];
    uint8_t root[EVP_MAX_MD_SIZE], want[EVP_MAX_MD_SIZE];
    const size_t L = p.digest.len;

    atomic_store (&writers_done, false);
    for (int i = 0; i < WRITERS; i++)
      pthread_create (&w[i], NULL, writer,
                      (void *) (uintptr_t) (base_seed + r * 100 + i));
    for (int i = 0; i < DATA_READERS; i++)
      pthread_create (&d[i], NULL, data_reader,
                      (void *) (uintptr_t) (base_seed + r * 100 + 10 + i));
    for (int i = 0; i < VIEW_READERS; i++)
      pthread_create (&v[i], NULL, view_reader,
                      (void *) (uintptr_t) (base_seed + r * 100 + 20 + i));
    for (int i = 0; i < WRITERS; i++)
      pthread_join (w[i], NULL);
    atomic_store (&writers_done, true);
    for (int i = 0; i < DATA_READERS; i++)
      pthread_join (d[i], NULL);
    for (int i = 0; i < VIEW_READERS; i++)
      pthread_join (v[i], NULL);

    /* Writers have finished and flushed: the view must be exact. */
    h = open_uri (view_uri);
    if (nbd_pread (h, root, L, 4096, 0) == -1)
      die ("root", h);
    nbd_close (h);
    content_checksum (&p, want, r == rounds - 1 ? argv[4] : NULL);
    blk_hex (root, L, hex_view);
    blk_hex (want, L, hex_content);
    if (memcmp (root, want, L) != 0) {
      printf ("round %d: MISMATCH view %s content %s\n", r, hex_view,
              hex_content);
      failures++;
    }
    else
      printf ("round %d: ok %s\n", r, hex_view);
    fflush (stdout);
  }
  printf ("%s\n", hex_view);
  blk_params_free (&p);
  return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
