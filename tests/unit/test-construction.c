/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/construction.c, checked against a direct computation. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#ifdef HAVE_BLAKE3
#include <blake3.h>
#endif

#include "blkhash.h"
#include "util.h"
#include "tap.h"

/* The construction written out the obvious way, for comparison;
 * xof_len > 0 finishes every digest at that length.
 */
static void
direct_xof (const char *digest, size_t xof_len, uint32_t bs,
            const uint8_t *img, uint64_t size, uint8_t *out)
{
  const EVP_MD *md = EVP_get_digestbyname (digest);
  EVP_MD_CTX *outer = EVP_MD_CTX_new (), *inner = EVP_MD_CTX_new ();
  uint8_t d[EVP_MAX_MD_SIZE], le[8];
  unsigned dlen = xof_len;

  EVP_DigestInit_ex (outer, md, NULL);
  for (uint64_t off = 0; off < size; off += bs) {
    uint64_t len = size - off < bs ? size - off : bs;
    EVP_DigestInit_ex (inner, md, NULL);
    EVP_DigestUpdate (inner, img + off, len);
    if (xof_len)
      EVP_DigestFinalXOF (inner, d, xof_len);
    else
      EVP_DigestFinal_ex (inner, d, &dlen);
    EVP_DigestUpdate (outer, d, dlen);
  }
  for (int i = 0; i < 8; i++)
    le[i] = size >> (8 * i);
  EVP_DigestUpdate (outer, le, 8);
  if (xof_len)
    EVP_DigestFinalXOF (outer, out, xof_len);
  else
    EVP_DigestFinal_ex (outer, out, NULL);
  EVP_MD_CTX_free (inner);
  EVP_MD_CTX_free (outer);
}

static void
direct (const char *digest, uint32_t bs, const uint8_t *img, uint64_t size,
        uint8_t *out)
{
  direct_xof (digest, 0, bs, img, size, out);
}

#ifdef HAVE_BLAKE3
/* The same with blake3, straight from libblake3. */
static void
direct_blake3 (uint32_t bs, const uint8_t *img, uint64_t size, uint8_t *out)
{
  blake3_hasher outer, inner;
  uint8_t d[BLAKE3_OUT_LEN], le[8];

  blake3_hasher_init (&outer);
  for (uint64_t off = 0; off < size; off += bs) {
    blake3_hasher_init (&inner);
    blake3_hasher_update (&inner, img + off, size - off < bs ? size - off : bs);
    blake3_hasher_finalize (&inner, d, sizeof d);
    blake3_hasher_update (&outer, d, sizeof d);
  }
  for (int i = 0; i < 8; i++)
    le[i] = size >> (8 * i);
  blake3_hasher_update (&outer, le, 8);
  blake3_hasher_finalize (&outer, out, BLAKE3_OUT_LEN);
}
#endif

static void
fill (uint8_t *buf, size_t len, unsigned seed)
{
  for (size_t i = 0; i < len; i++) {
    seed = seed * 1103515245 + 12345;
    buf[i] = seed >> 16;
  }
}

static int
stream (const struct blk_params *p, const uint8_t *img, uint64_t size,
        size_t piece, uint8_t *out)
{
  struct blk_stream s;
  int r = 0;

  if (blk_stream_init (&s, p) == -1)
    return -1;
  for (uint64_t off = 0; off < size && r == 0; off += piece)
    r = blk_stream_update (&s, img + off, size - off < piece ? size - off
                           : piece);
  if (r == 0)
    r = blk_stream_final (&s, out);
  blk_stream_free (&s);
  return r;
}

int
main (void)
{
  const uint32_t bs = 4096;
  const uint64_t size = 7 * bs / 2;    /* 3.5 blocks */
  uint8_t *img = calloc (1, 8 * bs);
  uint8_t a[EVP_MAX_MD_SIZE], b[EVP_MAX_MD_SIZE];
  char hex[2 * EVP_MAX_MD_SIZE + 1];
  struct blk_params p;
  struct blk_ctx *ctx = blk_ctx_new ();
  bool zero;

  ok (blk_check_block_size (4096) == NULL, "4K block size is valid");
  ok (blk_check_block_size (16 << 20) == NULL, "16M block size is valid");
  ok (blk_check_block_size (2048) != NULL, "2K is too small");
  ok (blk_check_block_size (32 << 20) != NULL, "32M is too large");
  ok (blk_check_block_size (12288) == NULL, "12K is valid");
  ok (blk_check_block_size (96 * 1024) == NULL, "96K is valid");
  ok (blk_check_block_size (4096 * 3 * 5 * 7) == NULL, "4K*3*5*7 is valid");
  ok (blk_check_block_size ((16 << 20) - 4096) == NULL, "16M-4K is valid");
  {
    static const uint64_t bad[] = {
      0, 3072, 4095, 4097, 100000, 98305, (16 << 20) + 4096, 32 << 20,
      UINT64_C (1) << 32, UINT64_MAX,
    };
    bool all = true;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      const char *msg = blk_check_block_size (bad[i]);
      all &= msg && strcmp (msg, "block size must be a multiple of 4K from "
                            "4K to 16M") == 0;
    }
    ok (all, "0, 3K, 4095, 4097, 100000, 96K+1, 16M+4K, 32M, 4G, 2^64-1 "
        "are refused, saying the rule");
  }
  ok (blk_params_init (&p, "nosuch", 65536) != NULL, "bad digest refused");

  ok (blk_params_init (&p, "sha256", bs) == NULL, "sha256 with 4K blocks");

  /* Empty image: H(le64(0)), the first known-answer vector. */
  ok (stream (&p, img, 0, 1, a) == 0, "empty image");
  blk_hex (a, 32, hex);
  ok (strcmp (hex, "af5570f5a1810b7af78caf4bc70a660f"
              "0df51e42baf91d4de5b2328de0e83dfc") == 0,
      "empty image equals the vector");

  /* Zero digest is H(block of zeros), used for full zero blocks only. */
  EVP_Digest (img, bs, b, NULL, EVP_sha256 (), NULL);
  ok (memcmp (p.zero_digest, b, 32) == 0, "zero digest is H(4K zeros)");
  ok (blk_hash_block (&p, ctx, img, bs, a, &zero) == 0 && zero &&
      memcmp (a, b, 32) == 0, "a full zero block gets the zero digest");
  EVP_Digest (img, 100, b, NULL, EVP_sha256 (), NULL);
  ok (blk_hash_block (&p, ctx, img, 100, a, &zero) == 0 && zero &&
      memcmp (a, b, 32) == 0, "a short zero block is hashed at its length");
  ok (blk_zero_block_digest (&p, ctx, 100, a) == 0 &&
      memcmp (a, b, 32) == 0, "zero digest of a short hole");

  /* Mixed image: data, zero block, data, short tail. */
  fill (img, bs, 1);
  fill (img + 2 * bs, bs + bs / 2, 2);
  direct ("sha256", bs, img, size, b);
  ok (stream (&p, img, size, size, a) == 0 && memcmp (a, b, 32) == 0,
      "3.5 blocks in one piece match the direct computation");
  ok (stream (&p, img, size, 1000, a) == 0 && memcmp (a, b, 32) == 0,
      "3.5 blocks in 1000 byte pieces match");
  ok (stream (&p, img, size, 1, a) == 0 && memcmp (a, b, 32) == 0,
      "3.5 blocks byte by byte match");
  direct ("sha256", bs, img, 3 * bs, b);
  ok (stream (&p, img, 3 * bs, bs, a) == 0 && memcmp (a, b, 32) == 0,
      "exactly 3 blocks match");

  /* The root can be finished twice and extended after. */
  {
    struct blk_root r;
    uint8_t d[32] = { 1 }, c[EVP_MAX_MD_SIZE];
    ok (blk_root_init (&r, &p) == 0 && blk_root_add (&r, d, 1) == 0 &&
        blk_root_final (&r, 5, a) == 0 && blk_root_final (&r, 5, c) == 0 &&
        memcmp (a, c, 32) == 0, "root final is repeatable");
    ok (blk_root_add (&r, d, 1) == 0 && blk_root_final (&r, 5, c) == 0 &&
        memcmp (a, c, 32) != 0, "root can be extended after final");
    blk_root_free (&r);
  }
  blk_params_free (&p);

  /* Another digest and block size. */
  ok (blk_params_init (&p, "sha1", 8192) == NULL, "sha1 with 8K blocks");
  direct ("sha1", 8192, img, size, b);
  ok (stream (&p, img, size, 777, a) == 0 && memcmp (a, b, 20) == 0,
      "sha1 matches the direct computation");
  blk_params_free (&p);

  /* 96K blocks: 3.5 of them, data, zeros, data, short data, hashed in
   * pieces that are not whole blocks.
   */
  {
    const uint32_t b96 = 96 * 1024;
    const uint64_t s96 = 3 * b96 + b96 / 2;
    uint8_t *big = calloc (1, 4 * b96);
    uint8_t z[EVP_MAX_MD_SIZE];
    struct blk_block_hasher bh;
    bool all = true;

    fill (big, b96, 3);
    fill (big + 2 * b96, b96 + b96 / 2, 4);
    ok (blk_params_init (&p, "sha256", b96) == NULL, "sha256 with 96K blocks");
    EVP_Digest (big + b96, b96, z, NULL, EVP_sha256 (), NULL);
    ok (memcmp (p.zero_digest, z, 32) == 0, "zero digest is H(96K zeros)");
    direct ("sha256", b96, big, s96, b);
    static const size_t pieces[] = { 1000, 4096, 65536, 256 * 1024, 3 << 20 };
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
      all &= stream (&p, big, s96, pieces[i], a) == 0 &&
        memcmp (a, b, 32) == 0;
    ok (all, "96K blocks in 1000, 4K, 64K, 256K and whole pieces match the "
        "direct computation");
    /* A block fed as 64K + 32K, as a 64K-aligned reader would. */
    EVP_Digest (big + 2 * b96, b96, z, NULL, EVP_sha256 (), NULL);
    blk_block_begin (&bh, &p, ctx);
    ok (blk_block_update (&bh, big + 2 * b96, 65536) == 0 &&
        blk_block_update (&bh, big + 2 * b96 + 65536, b96 - 65536) == 0 &&
        blk_block_final (&bh, a, &zero) == 0 && !zero &&
        memcmp (a, z, 32) == 0, "a 96K block in two pieces");
    ok (blk_block_count (s96, b96) == 4 &&
        blk_block_len (s96, b96, 3) == b96 / 2 &&
        blk_blocks_per (256 * 1024, b96) == 2,
        "96K: 4 blocks, the last 48K; 2 whole blocks in 256K");
    blk_params_free (&p);

    /* 4K*3*5*7 = 420K blocks over the same bytes. */
    ok (blk_params_init (&p, "sha1", 4096 * 105) == NULL,
        "sha1 with 420K blocks");
    direct ("sha1", 4096 * 105, big, s96, b);
    ok (stream (&p, big, s96, 65536, a) == 0 && memcmp (a, b, 20) == 0,
        "420K blocks match the direct computation");
    blk_params_free (&p);

    /* shake at 16 and 32 bytes, 96K blocks. */
    ok (blk_params_init (&p, "shake128", b96) == NULL &&
        p.digest.len == 16, "shake128 with 96K blocks");
    direct_xof ("shake128", 16, b96, big, s96, b);
    ok (stream (&p, big, s96, 5000, a) == 0 && memcmp (a, b, 16) == 0,
        "shake128 matches the direct computation at 16 bytes");
    blk_params_free (&p);
    ok (blk_params_init (&p, "shake256", 65536) == NULL &&
        p.digest.len == 32, "shake256 with 64K blocks");
    direct_xof ("shake256", 32, 65536, big, s96, b);
    ok (stream (&p, big, s96, 4096, a) == 0 && memcmp (a, b, 32) == 0,
        "shake256 matches the direct computation at 32 bytes");
    /* The empty image: blksum's vectors. */
    ok (stream (&p, big, 0, 1, a) == 0, "shake256 empty image");
    blk_hex (a, 32, hex);
    ok (strcmp (hex, "119141dce89807096095d9729b0da804"
                "81a492498e235346efc58aa73335a351") == 0,
        "shake256 empty image equals the vector");
    blk_params_free (&p);
    ok (blk_params_init (&p, "shake128", 65536) == NULL &&
        stream (&p, big, 0, 1, a) == 0, "shake128 empty image");
    blk_hex (a, 16, hex);
    ok (strcmp (hex, "7a24b666da345c98c3a400aafd14a51a") == 0,
        "shake128 empty image equals the vector");
    blk_params_free (&p);
    free (big);
  }

  ok (blk_blocks_per (64 << 20, 65536) == 1024 &&
      blk_blocks_per (100000, 4096) == 24, "blocks per step: whole blocks");
  ok (blk_blocks_per (4096, 65536) == 1 && blk_blocks_per (0, 4096) == 1,
      "blocks per step: at least one");

#ifdef HAVE_BLAKE3
  /* blake3: 3.5 blocks of data, zeros, data, short data, and the empty
   * image, whose value vectors-blake3.tsv has from blksum.
   */
  ok (blk_params_init (&p, "blake3", bs) == NULL && p.digest.len == 32,
      "blake3 with 4K blocks");
  direct_blake3 (bs, img, size, b);
  ok (stream (&p, img, size, 1000, a) == 0 && memcmp (a, b, 32) == 0,
      "blake3 in 1000 byte pieces matches libblake3 directly");
  ok (stream (&p, img, 0, 1, a) == 0, "blake3 empty image");
  blk_hex (a, 32, hex);
  ok (strcmp (hex, "71e0a99173564931c0b8acc52d2685a8"
              "e39c64dc52e3d02390fdac2a12b155cb") == 0,
      "blake3 empty image equals the vector");
  blk_params_free (&p);
#else
  ok (blk_params_init (&p, "blake3", bs) != NULL,
      "no blake3 in this build: refused");
#endif

  blk_ctx_free (ctx);
  free (img);
  return done_testing ();
}
