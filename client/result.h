/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what hashing one input gave, as the modes print it and as
 * a -j job hands it to the parent (result.c owns both forms).
 */
#ifndef NBDSUM_RESULT_H
#define NBDSUM_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blkhash.h"
#include "imgformat.h"
#include "util.h"

struct result {
  const char *name;
  char hex[2 * BLK_DIGEST_MAX + 1];
  char digest[BLK_DIGEST_NAME_MAX + 1];
  uint32_t block_size;          /* 0: a plain digest */
  bool plain;                   /* a plain digest of the bytes */
  uint64_t size;
  char method[16];              /* server-side, client-side, stream... */
  /* A local file's or stream's format, as read ("" for URIs and
   * [ CMD ]), and whether it was given (--format, a line's) rather
   * than probed: then its line says it.
   */
  char format[BLK_IMAGE_FORMAT_NAME_MAX];
  bool format_given;
  double seconds;
  /* --since: blocks hashed rather than taken from the manifest, clean
   * blocks hashed as a sample to check the manifest by, and the image
   * bytes read for both.
   */
  bool incremental;
  uint64_t hashed_blocks, sampled_blocks, read_bytes;
  /* Server-side: the view's blocks read and hashed here, and found
   * equal to its digests (spot-check.h).
   */
  uint64_t spot_checked;
  bool root_checked;            /* the view's root folded from its digests */
  struct blk_range range;       /* --range, a line's; length 0: all */
};

/* --json: res's members, as nbdsum and nbdsum -c write them. */
extern void result_json_members (const struct result *res);

/* The encoded form, for a pipe: every member but the name, in
 * RESULT_WIRE_SIZE bytes.
 */
#define RESULT_WIRE_SIZE (sizeof (struct result))
extern void result_encode (const struct result *res, void *out);
/* Decode what result_encode wrote, naming it name.  Strings are cut
 * short and ended where the bytes would run past them.
 */
extern void result_decode (const void *in, const char *name,
                           struct result *res);

#endif /* NBDSUM_RESULT_H */
