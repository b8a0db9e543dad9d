/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: write the header seed corpus.
 *
 *   mkseeds DIR
 *
 * Valid view headers, from the encoder itself, cut after the bytes
 * that blk_header_decode reads, so that mutations land where it
 * matters; one is whole.  Run by make fuzz-seeds; the output is
 * checked in under tests/fuzz/corpus/header.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "blkhash.h"
#include "header.h"

#define HEADER_USED (56 + BLK_DIGEST_NAME_MAX)

static const struct {
  const char *file;
  uint64_t image_size;
  uint32_t block_size;
  const char *digest;
  uint32_t digest_len;
  size_t len;
} seeds[] = {
  { "sha256-64K-empty", 0, 65536, "sha256", 32, HEADER_USED },
  { "sha256-64K-1", 1, 65536, "sha256", 32, HEADER_USED },
  { "sha256-64K-5G+1", 5ULL << 30 | 1, 65536, "sha256", 32,
    BLK_VIEW_HEADER_SIZE },
  { "sha1-4K-1M", 1 << 20, 4096, "sha1", 20, HEADER_USED },
  { "sha512-16M-1T", 1ULL << 40, 16 << 20, "sha512", 64, HEADER_USED },
  { "md5-4K-max", (uint64_t) INT64_MAX - 4095, 4096, "md5", 16,
    HEADER_USED },
  { "sha3-256-1M-3M", 3 << 20, 1 << 20, "sha3-256", 32, HEADER_USED },
  { "shake128-96K-1M", 1 << 20, 96 * 1024, "shake128", 16, HEADER_USED },
  { "shake256-420K-5G", 5ULL << 30, 4096 * 105, "shake256", 32,
    HEADER_USED },
  { "sha1-1536K-last-4K", (1536 << 10) * 7 + 4096, 1536 << 10, "sha1", 20,
    HEADER_USED },
  { "long-name", 12345, 4096,
    "a-digest-name-of-sixty-three-characters-the-longest-that-fits..",
    48, HEADER_USED },
};

int
main (int argc, char *argv[])
{
  uint8_t buf[BLK_VIEW_HEADER_SIZE];

  if (argc != 2) {
    fprintf (stderr, "usage: mkseeds DIR\n");
    exit (2);
  }
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    struct blk_header h;
    char path[4096];
    FILE *fp;

    blk_header_init (&h, seeds[i].image_size, seeds[i].block_size,
                     seeds[i].digest, seeds[i].digest_len);
    blk_header_encode (&h, buf);
    snprintf (path, sizeof path, "%s/%s", argv[1], seeds[i].file);
    fp = fopen (path, "wb");
    if (fp == NULL || fwrite (buf, seeds[i].len, 1, fp) != 1 ||
        fclose (fp) != 0) {
      perror (path);
      exit (EXIT_FAILURE);
    }
  }
  return 0;
}
