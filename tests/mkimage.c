/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* mkimage: build a test image from a known-answer vector recipe.
 *
 *   mkimage RECIPE FILE
 *
 * RECIPE is SIZE[;EXTENT]... with sizes in bytes or with a K, M, G or T
 * suffix (powers of 1024).  Extents apply left to right:
 *   d:OFFSET+LENGTH:SEED  data: byte x is byte (x mod 32) of
 *                         sha256(SEED ":" decimal(x div 32))
 *   z:OFFSET+LENGTH       zero bytes written (allocated, not a hole)
 * Anything else is a hole.  FILE is created sparse.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#define BUF_SIZE (1024 * 1024)

static void
die (const char *msg, const char *arg)
{
  fprintf (stderr, "mkimage: %s: %s\n", msg, arg);
  exit (EXIT_FAILURE);
}

static uint64_t
parse_size (const char *s, char **end)
{
  uint64_t v = strtoull (s, end, 10);

  if (*end == s)
    die ("expected a size", s);
  switch (**end) {
  case 'K': v <<= 10; (*end)++; break;
  case 'M': v <<= 20; (*end)++; break;
  case 'G': v <<= 30; (*end)++; break;
  case 'T': v <<= 40; (*end)++; break;
  }
  return v;
}

static void
write_all (int fd, const uint8_t *buf, size_t len, uint64_t off)
{
  while (len > 0) {
    ssize_t r = pwrite (fd, buf, len, off);
    if (r == -1)
      die ("pwrite", strerror (errno));
    buf += r;
    len -= r;
    off += r;
  }
}

static void
write_data (int fd, uint64_t off, uint64_t len, const char *seed,
            uint8_t *buf)
{
  uint64_t x = off, end = off + len;
  uint8_t block[EVP_MAX_MD_SIZE];
  uint64_t cached = UINT64_MAX;
  char msg[512];

  while (x < end) {
    size_t n = end - x < BUF_SIZE ? end - x : BUF_SIZE;
    for (size_t i = 0; i < n; i++) {
      const uint64_t group = (x + i) / 32;
      if (group != cached) {
        int m = snprintf (msg, sizeof msg, "%s:%" PRIu64, seed, group);
        if (EVP_Digest (msg, m, block, NULL, EVP_sha256 (), NULL) != 1)
          die ("sha256", "failed");
        cached = group;
      }
      buf[i] = block[(x + i) % 32];
    }
    write_all (fd, buf, n, x);
    x += n;
  }
}

int
main (int argc, char **argv)
{
  char *recipe, *p, *end, *ext, *save = NULL;
  uint8_t *buf;
  uint64_t size;
  int fd;

  if (argc != 3) {
    fprintf (stderr, "usage: mkimage RECIPE FILE\n");
    return EXIT_FAILURE;
  }
  recipe = strdup (argv[1]);
  buf = malloc (BUF_SIZE);
  if (recipe == NULL || buf == NULL)
    die ("out of memory", argv[1]);

  fd = open (argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd == -1)
    die (argv[2], strerror (errno));

  p = strtok_r (recipe, ";", &save);
  if (p == NULL)
    die ("empty recipe", argv[1]);
  size = parse_size (p, &end);
  if (*end)
    die ("bad image size", p);
  if (ftruncate (fd, size) == -1)
    die ("ftruncate", strerror (errno));

  while ((ext = strtok_r (NULL, ";", &save)) != NULL) {
    char kind = ext[0];
    uint64_t off, len;
    if ((kind != 'd' && kind != 'z') || ext[1] != ':')
      die ("bad extent", ext);
    off = parse_size (ext + 2, &end);
    if (*end != '+')
      die ("bad extent", ext);
    len = parse_size (end + 1, &end);
    if (off + len > size)
      die ("extent beyond the image", ext);
    if (kind == 'd') {
      if (*end != ':')
        die ("data extent needs a seed", ext);
      write_data (fd, off, len, end + 1, buf);
    }
    else {
      if (*end)
        die ("bad zero extent", ext);
      memset (buf, 0, BUF_SIZE);
      for (uint64_t x = off; x < off + len; ) {
        size_t n = off + len - x < BUF_SIZE ? off + len - x : BUF_SIZE;
        write_all (fd, buf, n, x);
        x += n;
      }
    }
  }
  if (close (fd) == -1)
    die (argv[2], strerror (errno));
  free (recipe);
  free (buf);
  return EXIT_SUCCESS;
}
