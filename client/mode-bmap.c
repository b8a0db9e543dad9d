/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --bmap NAME: the image's block map in bmaptool's format 2.0,
 * on standard output, from the ranges its server mapped and hashed
 * (input-bmap.c).  The text is what bmaptool create writes (its
 * comments, its padding), so that the same mapping gives the same
 * file; BmapFileChecksum is the sha256 of the file with that field
 * all "0", as bmaptool copy checks it.
 */
#include <config.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "helpers.h"
#include "input-bmap.h"
#include "messages.h"
#include "modes.h"
#include "util.h"

#define CHECKSUM_LEN 64         /* hex sha256 */

/* A growing text. */
struct text {
  char *s;
  size_t len, cap;
  bool failed;
};

static void __attribute__ ((format (printf, 2, 3)))
add (struct text *t, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (t->failed)
    return;
  for (;;) {
    va_start (ap, fmt);
    n = vsnprintf (t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0,
                   fmt, ap);
    va_end (ap);
    if (n < 0) {
      t->failed = true;
      return;
    }
    if (t->s && t->len + n < t->cap) {
      t->len += n;
      return;
    }
    size_t cap = t->cap ? t->cap * 2 : 65536;
    while (cap < t->len + n + 1)
      cap *= 2;
    char *s = realloc (t->s, cap);
    if (s == NULL) {
      t->failed = true;
      return;
    }
    t->s = s;
    t->cap = cap;
  }
}

/* bmaptool's human_size. */
static void
human (uint64_t size, char *out, size_t len)
{
  static const char *const mods[] = { "KiB", "MiB", "GiB", "TiB" };
  double s = size;

  if (size == 1) {
    snprintf (out, len, "1 byte");
    return;
  }
  if (size < 512) {
    snprintf (out, len, "%" PRIu64 " bytes", size);
    return;
  }
  for (size_t i = 0; i < 4; i++) {
    s /= 1024.0;
    if (s < 1024) {
      snprintf (out, len, "%.1f %s", s, mods[i]);
      return;
    }
  }
  snprintf (out, len, "%.1f EiB", s);
}

/* Write over the padding bmaptool leaves at at, as it does. */
static void
overwrite (struct text *t, size_t at, const char *s)
{
  const size_t n = strlen (s);

  if (!t->failed && at + n <= t->len)
    memcpy (t->s + at, s, n);
}

static void
write_xml (const struct bmap *bm, struct text *t)
{
  char size_h[64], mapped_h[64], line[160], hex[CHECKSUM_LEN + 1];
  size_t count_at, mapped_at, sum_at;
  char digits[32];

  human (bm->image_size, size_h, sizeof size_h);
  add (t,
"<?xml version=\"1.0\" ?>\n"
"<!-- This file contains the block map for an image file, which is basically\n"
"     a list of useful (mapped) block numbers in the image file. In other words,\n"
"     it lists only those blocks which contain data (boot sector, partition\n"
"     table, file-system metadata, files, directories, extents, etc). These\n"
"     blocks have to be copied to the target device. The other blocks do not\n"
"     contain any useful data and do not have to be copied to the target\n"
"     device.\n"
"\n"
"     The block map an optimization which allows to copy or flash the image to\n"
"     the image quicker than copying of flashing the entire image. This is\n"
"     because with bmap less data is copied: <MappedBlocksCount> blocks instead\n"
"     of <BlocksCount> blocks.\n"
"\n"
"     Besides the machine-readable data, this file contains useful commentaries\n"
"     which contain human-readable information like image size, percentage of\n"
"     mapped data, etc.\n"
"\n"
"     The 'version' attribute is the block map file format version in the\n"
"     'major.minor' format. The version major number is increased whenever an\n"
"     incompatible block map format change is made. The minor number changes\n"
"     in case of minor backward-compatible changes. -->\n"
"\n"
"<bmap version=\"2.0\">\n"
"    <!-- Image size in bytes: %s -->\n"
"    <ImageSize> %" PRIu64 " </ImageSize>\n"
"\n"
"    <!-- Size of a block in bytes -->\n"
"    <BlockSize> %d </BlockSize>\n"
"\n"
"    <!-- Count of blocks in the image file -->\n"
"    <BlocksCount> %" PRIu64 " </BlocksCount>\n"
"\n"
"    <!-- Count of mapped blocks: ",
       size_h, bm->image_size, BLK_BMAP_BLOCK_SIZE, bm->blocks);
  count_at = t->len;
  add (t, "%*s or %6s   -->\n", (int) strlen (size_h), "", "");
  add (t, "    <MappedBlocksCount> ");
  mapped_at = t->len;
  snprintf (digits, sizeof digits, "%" PRIu64, bm->blocks);
  add (t, "%*s </MappedBlocksCount>\n\n", (int) strlen (digits), "");
  add (t,
"    <!-- Type of checksum used in this file -->\n"
"    <ChecksumType> sha256 </ChecksumType>\n"
"\n"
"    <!-- The checksum of this bmap file. When it is calculated, the value of\n"
"         the checksum has be zero (all ASCII \"0\" symbols).  -->\n"
"    <BmapFileChecksum> ");
  sum_at = t->len;
  add (t, "%0*d </BmapFileChecksum>\n\n", CHECKSUM_LEN, 0);
  add (t,
"    <!-- The block map which consists of elements which may either be a\n"
"         range of blocks or a single block. The 'chksum' attribute\n"
"         (if present) is the checksum of this blocks range. -->\n"
"    <BlockMap>\n");
  for (uint64_t k = 0; k < bm->nranges; k++) {
    const struct blk_bmap_range *r = &bm->ranges[k];
    blk_hex (r->digest, BLK_BMAP_DIGEST_LEN, hex);
    if (r->first != r->last)
      add (t, "        <Range chksum=\"%s\"> %" PRIu64 "-%" PRIu64
           " </Range>\n", hex, r->first, r->last);
    else
      add (t, "        <Range chksum=\"%s\"> %" PRIu64 " </Range>\n", hex,
           r->first);
  }
  add (t, "    </BlockMap>\n</bmap>\n");

  human (bm->mapped_blocks * BLK_BMAP_BLOCK_SIZE, mapped_h, sizeof mapped_h);
  snprintf (line, sizeof line, "%s or %.1f%%", mapped_h,
            bm->mapped_blocks * 100.0 / bm->blocks);
  overwrite (t, count_at, line);
  snprintf (digits, sizeof digits, "%" PRIu64, bm->mapped_blocks);
  overwrite (t, mapped_at, digits);
  /* The file's own checksum, over the file with it all "0". */
  if (!t->failed) {
    struct blk_digest d;
    struct blk_ctx *ctx = blk_ctx_new ();
    uint8_t sum[BLK_DIGEST_MAX];

    if (ctx == NULL || blk_digest_init (&d, "sha256") != NULL) {
      blk_ctx_free (ctx);
      t->failed = true;
      return;
    }
    if (blk_ctx_init (ctx, &d) == -1 ||
        blk_ctx_update (ctx, t->s, t->len) == -1 ||
        blk_ctx_final (ctx, sum) == -1)
      t->failed = true;
    else {
      blk_hex (sum, d.len, hex);
      overwrite (t, sum_at, hex);
    }
    blk_ctx_free (ctx);
    blk_digest_free (&d);
  }
}

int
mode_bmap (char **args, int nargs, const struct hash_spec *spec)
{
  struct bmap bm;
  struct text t = { NULL, 0, 0, false };
  int status = EXIT_FAILURE;

  if (nargs != 1) {
    error_msg ("--bmap needs one image");
    return EXIT_FAILURE;
  }
  if (bmap_fetch (args[0], spec, &bm) == -1)
    return EXIT_FAILURE;
  write_xml (&bm, &t);
  if (t.failed)
    error_at (args[0], "out of memory for the bmap of %" PRIu64 " ranges",
              bm.nranges);
  else if (fwrite (t.s, 1, t.len, stdout) == t.len)
    status = EXIT_SUCCESS;
  /* A write error is main's to say (stdout_error). */
  free (t.s);
  bmap_free (&bm);
  return status;
}
