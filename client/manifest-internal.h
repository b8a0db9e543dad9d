/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the manifest's parts (see manifest.h), for manifest.c,
 * manifest-text.c and manifest-json.c alone.
 */
#ifndef NBDSUM_MANIFEST_INTERNAL_H
#define NBDSUM_MANIFEST_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "blkhash.h"
#include "jsonread.h"
#include "manifest.h"

/* Longer text lines are not a manifest's. */
#define LINE_MAX_LEN 512
/* Longer JSON strings neither (a name, escaped, at most). */
#define TEXT_MAX 65536

/* One line of the manifest. */
struct entry {
  uint64_t offset, length;
  bool zero;
  uint8_t digest[BLK_DIGEST_MAX];
};

/* JSON members, to refuse repeated ones. */
enum {
  K_NAME = 1, K_NAME_HEX = 2, K_DIGEST = 4, K_BLOCK_SIZE = 8, K_SIZE = 16,
  K_METHOD = 32, K_ZERO_HASH = 64, K_BLOCKS = 128, K_CHECKSUM = 256,
};

struct manifest {
  const char *path;
  const struct manifest_env *env;
  FILE *fp;
  off_t start;                  /* where the manifest starts in fp */
  bool json;
  unsigned long lineno;         /* for messages */

  /* The header. */
  struct blk_params p;
  bool have_params;
  uint64_t size, nblocks;

  /* JSON reading. */
  struct json_reader rd;
  unsigned seen;                /* K_* members read */
  bool first_entry;
  char digest_name[BLK_DIGEST_NAME_MAX];
  uint64_t block_size;
  char zero_hash[2 * BLK_DIGEST_MAX + 1];

  /* Checking the entries: where the next one must start. */
  uint64_t pos;

  /* The root it carries (root_hex, checked against the digests folded
   * as they are read, each time they are read), if any.
   */
  char root_hex[2 * BLK_DIGEST_MAX + 1];
  uint8_t root[BLK_DIGEST_MAX];
  struct blk_root fold;
  bool have_fold;

  /* manifest_digests: the entry being handed out, blocks
   * [cur_block, cur_end) of it.
   */
  struct entry cur;
  uint64_t cur_block, cur_end, next_block;
};

/* manifest-fields.c: has the caller been told to stop? */
extern bool manifest_stopped (const struct manifest *m);
/* Say why m is refused (with its line, once it has one).  Returns -1
 * (nothing said once the caller was told to stop).
 */
extern int manifest_fail (struct manifest *m, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
/* A decimal number as nbdsum writes them: digits, no leading zero, at
 * most INT64_MAX.
 */
extern bool manifest_parse_number (const char *s, uint64_t *v);
/* A block digest in hex, of the header's digest length. */
extern int manifest_parse_hex (struct manifest *m, const char *s, size_t len,
                               uint8_t *out);
/* The header's digest, block size and size, and the root it carries
 * (root_hex, or none) parsed.
 */
extern int manifest_set_header (struct manifest *m, const char *digest,
                                uint64_t block_size, uint64_t size);

/* manifest-text.c: the header, and each entry: 1, or 0 at the end, -1
 * on errors.
 */
extern int manifest_text_header (struct manifest *m);
extern int manifest_text_entry (struct manifest *m, struct entry *e);
/* Write the header; an entry (digest NULL: a zero run). */
extern void manifest_text_write_header (const struct manifest_writer *w,
                                        const char *root_hex);
extern void manifest_text_write_entry (const struct manifest_writer *w,
                                       uint64_t offset, uint64_t length,
                                       const char *hex);

/* manifest-json.c: the same in JSON.  The members of the top object
 * before "blocks" (after == false), up to its '['; after, up to the
 * end of the document.
 */
extern int manifest_json_members (struct manifest *m, bool after);
extern int manifest_json_entry (struct manifest *m, struct entry *e);
extern void manifest_json_write_header (const struct manifest_writer *w,
                                        const char *root_hex,
                                        const char *method);
extern void manifest_json_write_entry (const struct manifest_writer *w,
                                       uint64_t offset, uint64_t length,
                                       const char *hex);
extern void manifest_json_write_end (const struct manifest_writer *w);

#endif /* NBDSUM_MANIFEST_INTERNAL_H */
