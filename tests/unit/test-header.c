/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/header.c */
#include <config.h>

#include <string.h>

#include "bmap.h"
#include "header.h"
#include "tap.h"

static uint64_t
le (const uint8_t *p, int n)
{
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static void
put (uint8_t *p, uint64_t v, int n)
{
  for (int i = 0; i < n; i++)
    p[i] = v >> (8 * i);
}

/* Decode a good header with one field changed. */
static const char *
corrupt (const uint8_t *good, size_t off, uint64_t v, int n)
{
  uint8_t buf[BLK_VIEW_HEADER_SIZE];
  struct blk_header h;

  memcpy (buf, good, sizeof buf);
  put (buf + off, v, n);
  return blk_header_decode (buf, sizeof buf, &h);
}

int
main (void)
{
  struct blk_header h, d;
  uint8_t buf[BLK_VIEW_HEADER_SIZE];
  const uint64_t size = 5ULL * 1024 * 1024 * 1024 + 1;

  blk_header_init (&h, size, 65536, "sha256", 32);
  blk_header_encode (&h, buf);
  ok (memcmp (buf, "BLKHASH1", 8) == 0, "magic at 0");
  ok (le (buf + 8, 4) == 1, "version 1 at 8");
  ok (le (buf + 12, 4) == 4096, "header size at 12");
  ok (le (buf + 16, 8) == size, "image size at 16");
  ok (le (buf + 24, 8) == 81921, "block count at 24 (rounded up)");
  ok (le (buf + 32, 4) == 65536, "block size at 32");
  ok (le (buf + 36, 4) == 32, "digest length at 36");
  ok (le (buf + 40, 8) == 4096, "root offset at 40");
  ok (le (buf + 48, 8) == 8192, "digests offset at 48");
  ok (strcmp ((char *) buf + 56, "sha256") == 0, "digest name at 56");
  {
    int zero = 1;
    for (int i = 56 + 6; i < 4096; i++)
      zero &= buf[i] == 0;
    ok (zero, "rest of the header is zero");
  }
  ok (blk_view_size (&h) == 8192 + 81921 * 32, "view size");

  ok (blk_header_decode (buf, sizeof buf, &d) == NULL &&
      d.image_size == size && d.block_count == 81921 &&
      d.block_size == 65536 && d.digest_len == 32 &&
      strcmp (d.digest_name, "sha256") == 0, "decode what was encoded");

  /* shake128 with 96K blocks: 16 byte digests, 3 blocks of 5 x 64K. */
  {
    uint8_t b2[BLK_VIEW_HEADER_SIZE];
    blk_header_init (&h, 5 * 65536, 98304, "shake128", 16);
    blk_header_encode (&h, b2);
    ok (le (b2 + 24, 8) == 4 && le (b2 + 32, 4) == 98304 &&
        le (b2 + 36, 4) == 16 && strcmp ((char *) b2 + 56, "shake128") == 0,
        "shake128, 96K: 4 blocks, 16 byte digests, the name");
    ok (blk_view_size (&h) == 8192 + 4 * 16, "shake128, 96K: view size");
    ok (blk_header_decode (b2, sizeof b2, &d) == NULL &&
        d.block_size == 98304 && d.block_count == 4 && d.digest_len == 16 &&
        strcmp (d.digest_name, "shake128") == 0,
        "shake128, 96K: decode what was encoded");
    put (b2 + 24, 3, 8);
    ok (blk_header_decode (b2, sizeof b2, &d) != NULL,
        "96K: block count 3 for 5 x 64K rejected");
  }

  blk_header_init (&h, 0, 4096, "blake2b512", 64);
  {
    uint8_t b2[BLK_VIEW_HEADER_SIZE];
    blk_header_encode (&h, b2);
    ok (blk_header_decode (b2, sizeof b2, &d) == NULL &&
        d.block_count == 0 && d.digest_len == 64, "empty image header");
  }

  ok (corrupt (buf, 0, 0x58, 1) != NULL, "bad magic rejected");
  ok (!blk_header_has_magic ((uint8_t *) "QFI\xfb", 4), "short buffer has "
      "no magic");
  ok (corrupt (buf, 8, 2, 4) != NULL, "version 2 rejected");
  ok (corrupt (buf, 12, 512, 4) != NULL, "other header size rejected");
  ok (corrupt (buf, 40, 0, 8) != NULL, "other root offset rejected");
  ok (corrupt (buf, 48, 4096, 8) != NULL, "other digests offset rejected");
  ok (corrupt (buf, 32, 65535, 4) != NULL, "block size not a multiple of 4K");
  ok (corrupt (buf, 32, 100000, 4) != NULL, "block size 100000 rejected");
  ok (corrupt (buf, 32, 1024, 4) != NULL, "block size too small");
  ok (corrupt (buf, 36, 0, 4) != NULL, "digest length 0 rejected");
  ok (corrupt (buf, 36, BLK_DIGEST_MAX + 1, 4) != NULL,
      "digest length above BLK_DIGEST_MAX rejected");
  ok (corrupt (buf, 24, 81920, 8) != NULL, "block count too small");
  ok (corrupt (buf, 24, 81922, 8) != NULL, "block count too large");
  ok (corrupt (buf, 16, UINT64_MAX, 8) != NULL, "impossible image size");
  {
    /* The largest image NBD allows still gives a view that fits. */
    uint8_t b2[BLK_VIEW_HEADER_SIZE];
    struct blk_header x;
    memcpy (b2, buf, sizeof b2);
    put (b2 + 16, INT64_MAX, 8);
    put (b2 + 32, 4096, 4);
    put (b2 + 24, INT64_MAX / 4096 + 1, 8);
    ok (blk_header_decode (b2, sizeof b2, &x) == NULL &&
        blk_view_size (&x) <= INT64_MAX, "a 2^63-1 byte image is accepted");
  }
  ok (corrupt (buf, 56, 0, 1) != NULL, "empty digest name rejected");
  {
    uint8_t b2[BLK_VIEW_HEADER_SIZE];
    struct blk_header x;
    memcpy (b2, buf, sizeof b2);
    memset (b2 + 56, 'a', 64);
    ok (blk_header_decode (b2, sizeof b2, &x) != NULL,
        "unterminated digest name rejected");
  }
  ok (corrupt (buf, 56 + 10, 'x', 1) != NULL,
      "garbage after the digest name rejected");
  {
    struct blk_header x;
    ok (blk_header_decode (buf, 100, &x) != NULL, "truncated header");
  }
  /* The plain-digest view: its own magic, one byte per 1M span. */
  {
    uint8_t b3[BLK_VIEW_HEADER_SIZE];
    struct blk_header p, q;
    blk_plain_header_init (&p, 3 * 1048576 + 1, "sha512", 64);
    blk_header_encode (&p, b3);
    ok (memcmp (b3, "BLKPLAN1", 8) == 0 && le (b3 + 24, 8) == 4 &&
        le (b3 + 32, 4) == 1048576, "plain: magic, span count and size");
    ok (blk_view_size (&p) == 8192 + 4, "plain: view size, a byte a span");
    ok (blk_plain_header_decode (b3, sizeof b3, &q) == NULL && q.plain &&
        q.image_size == 3 * 1048576 + 1 && q.digest_len == 64 &&
        strcmp (q.digest_name, "sha512") == 0, "plain: decode");
    ok (blk_header_decode (b3, sizeof b3, &q) != NULL,
        "a plain header is not a blkhash view");
    blk_header_encode (&h, b3);
    ok (blk_plain_header_decode (b3, sizeof b3, &q) != NULL,
        "a blkhash header is not a plain view");
  }
  /* The bmap view: its own magic, 1M spans, its table (lib/bmap.h). */
  {
    uint8_t b4[BLK_VIEW_HEADER_SIZE], e[BLK_BMAP_ENTRY_SIZE];
    struct blk_header p, q;
    struct blk_bmap_range r = { 7, 9, { 1, 2, 3 } }, r2;
    struct blk_bmap_summary su = { 2, 30, 5, 1, 8192 }, su2;
    uint8_t sb[BLK_BMAP_SUMMARY_SIZE];
    blk_bmap_header_init (&p, 3 * 1048576 + 1, "sha256", 32);
    blk_header_encode (&p, b4);
    ok (memcmp (b4, "BLKBMAP1", 8) == 0 && le (b4 + 24, 8) == 4 &&
        le (b4 + 32, 4) == 1048576, "bmap: magic, span count and size");
    ok (blk_bmap_header_decode (b4, sizeof b4, &q) == NULL && q.bmap &&
        q.plain && q.image_size == 3 * 1048576 + 1,
        "bmap: decode");
    ok (blk_plain_header_decode (b4, sizeof b4, &q) != NULL &&
        blk_header_decode (b4, sizeof b4, &q) != NULL,
        "a bmap header is neither other view's");
    blk_plain_header_init (&p, 1048576, "sha256", 32);
    blk_header_encode (&p, b4);
    ok (blk_bmap_header_decode (b4, sizeof b4, &q) != NULL,
        "a plain header is not a bmap view");
    /* 769 blocks: at most 385 ranges, the table after a 4K of spans. */
    blk_bmap_header_init (&p, 3 * 1048576 + 1, "sha256", 32);
    ok (blk_bmap_table_offset (&p) == 8192 + 4096 &&
        blk_bmap_table_entries (&p) == 385 &&
        blk_bmap_view_size (&p) == 8192 + 4096 + 385 * 48,
        "bmap: table offset, entries, view size");
    blk_bmap_range_encode (&r, e);
    blk_bmap_range_decode (e, &r2);
    ok (le (e, 8) == 7 && le (e + 8, 8) == 9 && e[16] == 1 &&
        r2.first == 7 && r2.last == 9 &&
        memcmp (r.digest, r2.digest, sizeof r.digest) == 0,
        "bmap: a range, both ways");
    blk_bmap_summary_encode (&su, sb);
    blk_bmap_summary_decode (sb, &su2);
    ok (le (sb, 8) == 2 && le (sb + 24, 4) == 1 && le (sb + 32, 8) == 8192 &&
        su2.ranges == 2 && su2.mapped_blocks == 30 && su2.max_ranges == 5 &&
        su2.status == 1 && su2.stopped_at == 8192,
        "bmap: the summary, both ways");
  }

  return done_testing ();
}
