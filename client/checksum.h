/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the checksum of one input, and the choice of method. */
#ifndef NBDSUM_CHECKSUM_H
#define NBDSUM_CHECKSUM_H

#include <stdbool.h>
#include <stdint.h>

#include "blkhash.h"
#include "endpoint.h"
#include "imgformat.h"
#include "options.h"

/* Output of one checksum. */
struct result {
  const char *name;
  char hex[2 * BLK_DIGEST_MAX + 1];
  char digest[BLK_DIGEST_NAME_MAX + 1];
  uint32_t block_size;
  uint64_t size;
  const char *method;           /* server-side, client-side, stream */
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
};

/* --json: res's members, as nbdsum and nbdsum -c write them. */
extern void result_json_members (const struct result *res);

/* Compute the checksum of name ("-": standard input) as spec says.
 * 0 or -1 (error printed).
 */
extern int checksum_one (const char *name, const struct hash_spec *spec,
                         struct result *res);

/* Open name (a URI or a file) with the method that can hash it,
 * ready for ep->ops->checksum; a file as spec->format, else as
 * --format gave it, else as probed.  NULL on error (printed).
 */
extern struct endpoint *input_open (const char *name,
                                    const struct hash_spec *spec);
/* Close the endpoint, and its source. */
extern void input_close (struct endpoint *ep);

#endif /* NBDSUM_CHECKSUM_H */
