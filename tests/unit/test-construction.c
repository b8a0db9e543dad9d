/* Unit tests: lib/blkhash.c, checked against a direct computation. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "blkhash.h"
#include "util.h"
#include "tap.h"

/* The construction written out the obvious way, for comparison. */
static void
direct (const char *digest, uint32_t bs, const uint8_t *img, uint64_t size,
        uint8_t *out)
{
  const EVP_MD *md = EVP_get_digestbyname (digest);
  EVP_MD_CTX *outer = EVP_MD_CTX_new ();
  uint8_t d[EVP_MAX_MD_SIZE], le[8];
  unsigned dlen;

  EVP_DigestInit_ex (outer, md, NULL);
  for (uint64_t off = 0; off < size; off += bs) {
    uint64_t len = size - off < bs ? size - off : bs;
    EVP_Digest (img + off, len, d, &dlen, md, NULL);
    EVP_DigestUpdate (outer, d, dlen);
  }
  for (int i = 0; i < 8; i++)
    le[i] = size >> (8 * i);
  EVP_DigestUpdate (outer, le, 8);
  EVP_DigestFinal_ex (outer, out, NULL);
  EVP_MD_CTX_free (outer);
}

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
  EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
  bool zero;

  ok (blk_check_block_size (4096) == NULL, "4K block size is valid");
  ok (blk_check_block_size (16 << 20) == NULL, "16M block size is valid");
  ok (blk_check_block_size (2048) != NULL, "2K is too small");
  ok (blk_check_block_size (32 << 20) != NULL, "32M is too large");
  ok (blk_check_block_size (12288) != NULL, "12K is not a power of two");
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

  ok (blk_blocks_per (64 << 20, 65536) == 1024 &&
      blk_blocks_per (100000, 4096) == 24, "blocks per step: whole blocks");
  ok (blk_blocks_per (4096, 65536) == 1 && blk_blocks_per (0, 4096) == 1,
      "blocks per step: at least one");

  EVP_MD_CTX_free (ctx);
  free (img);
  return done_testing ();
}
