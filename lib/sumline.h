/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: checksum lines, written as sha256sum and cksum
 * write them and read as sha256sum -c and cksum -c read them.
 *
 * Two forms (see "CHECKSUM LINES" in nbdsum(1)):
 *
 *   HEX  NAME                                  untagged, sha256sum's
 *   BLKHASH-DIGEST/BLOCKSIZE (NAME) = HEX      tagged, cksum --tag's
 *   BLKHASH-DIGEST/BLOCKSIZE:FORMAT (NAME) = HEX
 *
 * and plain digests of the bytes, as sha256sum --tag and md5sum --tag
 * write them (BSD style), with the format after ':' when the image
 * was read as another than raw (which sha256sum -c then refuses):
 *
 *   SHA256 (NAME) = HEX                        plain, tagged
 *   SHA256:FORMAT (NAME) = HEX
 *
 * A checksum of part of the image (nbdsum --range) says which after
 * '@', in either kind of tagged line (which sha256sum -c refuses):
 *
 *   BLKHASH-DIGEST/BLOCKSIZE[:FORMAT]@OFFSET+LENGTH (NAME) = HEX
 *   SHA256[:FORMAT]@OFFSET+LENGTH (NAME) = HEX
 *
 * An untagged line says nothing of how it was made: it means the
 * default digest and block size (sha256, 64K) unless the reader is
 * told otherwise, and a local file read as its bytes probe.  A tagged
 * line carries both, and the image format the file was read as when
 * one was given rather than probed (lib/imgformat.h's names).
 */
#ifndef BLKHASH_SUMLINE_H
#define BLKHASH_SUMLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "digest.h"
#include "imgformat.h"
#include "util.h"

/* The start of a tagged line, any case when read. */
#define BLK_SUM_TAG_PREFIX "BLKHASH-"

/* A NAME containing '\\', a newline or a carriage return is written
 * with "\\\\", "\\n" and "\\r" escapes, as sha256sum does, and the
 * line then starts with '\\' (tagged lines too).
 */
extern bool blk_name_needs_escape (const char *name);
extern void blk_fput_name (FILE *fp, const char *name, bool escape);

/* A name a client chose (an NBD export name), as a line's NAME that
 * nbdsum -c can read only as a plain file name in the current
 * directory: every byte outside [A-Za-z0-9._+-] is written %XX
 * (upper-case hex), '%' included, and so is a leading '.' or '-'.
 * So no '/', no URI, no "[ CMD ]", no option, no hidden file, no
 * "." or "..", and nothing sumline escapes.  Distinct names stay
 * distinct.  A new string, or NULL with errno set.
 */
extern char *blk_name_encode (const char *name);

/* Does a checksum of this digest (canonical name, as blk_digest_init
 * spells it) and block size need a tag to be verified without
 * options?  Yes unless they are the defaults, sha256 and 64K.
 */
extern bool blk_sum_needs_tag (const char *digest, uint64_t block_size);

/* Flags of blk_fput_sum_line. */
#define BLK_SUM_TAGGED 1        /* "BLKHASH-DIGEST/BLOCKSIZE (NAME) = HEX" */
#define BLK_SUM_ZERO   2        /* end with NUL, names not escaped (-z) */

/* Write one line: "HEX  NAME\n", or tagged with digest (upper-cased)
 * and block_size, which only tagged lines use.  A format (a name
 * blk_image_format knows, or NULL) makes the line tagged, whatever
 * flags say, and follows the block size after ':'.
 */
extern void blk_fput_sum_line (FILE *fp, unsigned flags, const char *digest,
                               uint64_t block_size, const char *format,
                               const char *hex, const char *name);

/* The same with "@OFFSET+LENGTH" after the format when range is not
 * NULL and its length not 0; a range makes the line tagged.
 */
extern void blk_fput_sum_line_range (FILE *fp, unsigned flags,
                                     const char *digest, uint64_t block_size,
                                     const char *format,
                                     const struct blk_range *range,
                                     const char *hex, const char *name);

/* The BSD tag of a plain digest (canonical name: md5, sha1, sha224,
 * sha256, sha384, sha512, blake3), upper-case as sha256sum --tag
 * writes it; NULL for a digest that has none.
 */
extern const char *blk_plain_tag (const char *digest);

/* Write one plain line: "TAG (NAME) = HEX" (or with a format,
 * "TAG:FORMAT (NAME) = HEX"), or without BLK_SUM_TAGGED and format
 * "HEX  NAME", as sha256sum writes them.  digest must have a tag.
 */
extern void blk_fput_plain_line (FILE *fp, unsigned flags,
                                 const char *digest, const char *format,
                                 const char *hex, const char *name);

extern void blk_fput_plain_line_range (FILE *fp, unsigned flags,
                                       const char *digest, const char *format,
                                       const struct blk_range *range,
                                       const char *hex, const char *name);

/* Write a verdict on NAME as sha256sum -c does: "NAME: VERDICT",
 * escaped as a line's NAME (with a '\\' first).
 */
extern void blk_fput_verdict (FILE *fp, const char *name,
                              const char *verdict);

/* One line as read. */
struct blk_sum_line {
  char *hex;                    /* into the line */
  char *name;                   /* into the line, unescaped */
  bool tagged;
  bool plain;                   /* a BSD-tagged plain digest line */
  /* Tagged lines only: the digest, by its canonical lower-case name
   * (blk_digest_init's), and the block size (0 for plain lines).
   */
  char digest[BLK_DIGEST_NAME_MAX];
  uint32_t block_size;
  /* The format after the block size, by blk_image_format's static
   * name, or NULL: none (the file is probed).
   */
  const char *format;
  /* After the format, "@OFFSET+LENGTH" (tagged lines only): the
   * checksum is of those bytes; length 0: of the whole image.
   */
  struct blk_range range;
};

/* Parse one line of a checksum file in place.  line is NUL-terminated;
 * trailing '\n' and '\r' are dropped first.
 *
 * Untagged: "HEX  NAME" or "HEX *NAME" (binary mode), HEX exactly
 * hexlen hex digits.  Tagged: "BLKHASH-DIGEST/BLOCKSIZE (NAME) = HEX"
 * where BLKHASH- and DIGEST may be in any case, DIGEST is a digest
 * blk_digest_init knows, BLOCKSIZE is read by blk_parse_size and
 * passes blk_check_block_size, NAME ends at the last ')' of the line,
 * and HEX has the digest's length; BLOCKSIZE may be followed by ':' and
 * a FORMAT blk_image_format knows, in any case.  Plain: "TAG (NAME) =
 * HEX" where TAG is one of blk_plain_tag's, in any case, optionally
 * followed by ':' and a FORMAT, and HEX has the digest's length.  Both
 * tagged kinds may have '@' and a range blk_parse_range reads (up to
 * the space) after the tag and format.  In
 * all, a line
 * starting with '\\' has "\\\\", "\\n" and "\\r" escapes in NAME, and
 * NAME is not empty.
 *
 * Returns NULL with *sl filled, or a static message saying why the
 * line is not well formed (line may then be changed).
 */
extern const char *blk_sum_line_parse (char *line, size_t hexlen,
                                       struct blk_sum_line *sl);

#endif /* BLKHASH_SUMLINE_H */
