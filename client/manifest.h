/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the --blocks manifest, its one owner: written by --blocks,
 * read by --diff --manifest, --since and --check-manifest.
 *
 * Text (a line '# DIGEST BLOCK-SIZE SIZE CHECKSUM', then 'OFFSET
 * LENGTH HEX' or 'OFFSET LENGTH zero' lines; manifest-text.c) or the
 * JSON of --blocks --json (manifest-json.c).  The whole manifest is
 * checked before it is used (manifest.c): lines in order and without
 * gaps, each block at its length, a zero run of whole blocks, the
 * last line ending at SIZE, and the block digests folding to CHECKSUM
 * (manifests written before it was there have none).  Each later
 * reading checks the same again.
 *
 * It depends on lib/, the JSON reader and writer, and on nothing else
 * of nbdsum's: what it needs of the process, its caller gives it.
 */
#ifndef NBDSUM_MANIFEST_H
#define NBDSUM_MANIFEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "blkhash.h"
#include "json.h"

/* What reading needs of its caller. */
struct manifest_env {
  /* Say why the manifest at path is refused: "line N: why", or why. */
  void (*error) (const char *path, const char *msg);
  /* Has the caller been told to stop?  Reading then fails, and says
   * nothing.  NULL: never.
   */
  bool (*stopped) (void);
  /* Where a manifest that cannot be read twice (a pipe) is copied. */
  const char *temp_dir;
  /* The largest image a manifest may describe (0: any): refused as
   * its header is read, what max_size_hint says ending the message.
   */
  uint64_t max_size;
  const char *max_size_hint;
};

struct manifest;

/* Read and check the manifest at path ("-": standard input).  NULL on
 * error (said).
 */
extern struct manifest *manifest_open (const char *path,
                                       const struct manifest_env *env);
extern void manifest_close (struct manifest *m);

/* The digest and block size it was made with, and the image size. */
extern const struct blk_params *manifest_params (const struct manifest *m);
extern uint64_t manifest_size (const struct manifest *m);

/* An image compared with it is hashed as it was made: digest and
 * block_size (NULL, 0: any) may only repeat that.  0, or -1 (said).
 */
extern int manifest_check_made (const struct manifest *m, const char *digest,
                                uint64_t block_size);

/* The checksum it carries, in root: false if it has none. */
extern bool manifest_root (const struct manifest *m, uint8_t *root);

/* Start reading its digests again from block 0.  Returns 0, or -1
 * (said).
 */
extern int manifest_rewind (struct manifest *m);

/* The digests of blocks [first, first+count), one after another in
 * out.  Calls must go forward: first is where the last call ended
 * (0 at first).  Returns 0, or -1 (said).
 */
extern int manifest_digests (struct manifest *m, uint64_t first,
                             uint64_t count, uint8_t *out);

/* Writing one, as the blocks' digests come.  The caller owns it. */
struct manifest_writer {
  FILE *fp;                     /* the text form */
  struct json_writer *json;     /* or the JSON form, if not NULL */
  const struct blk_params *p;
  uint64_t size;
  uint64_t zero_start, zero_len;        /* a run of zero blocks, held */
};

/* Begin the manifest of an image of size bytes hashed with p (method:
 * how, as --json says) whose checksum is root: in text on fp, or with
 * json as the members of the object json is writing (the --blocks
 * --json document).
 */
extern void manifest_write_begin (struct manifest_writer *w, FILE *fp,
                                  struct json_writer *json,
                                  const struct blk_params *p, uint64_t size,
                                  const uint8_t *root, const char *method);
/* The digests of the next count blocks, from block first. */
extern void manifest_write_blocks (struct manifest_writer *w, uint64_t first,
                                   uint64_t count, const uint8_t *digests);
/* After the last block (JSON: the end of "blocks"). */
extern void manifest_write_end (struct manifest_writer *w);

#endif /* NBDSUM_MANIFEST_H */
