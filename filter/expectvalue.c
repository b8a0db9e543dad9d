/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the values of blkhash-expect=,
 * blkhash-expect-at= and blkhash-expect-spill= (the gate itself is
 * expect.c's).
 *
 *   ALG:HEX                        ALG sha256, sha512, sha1 or md5: the
 *                                  plain digest of the whole content
 *   blkhash-DIGEST/BLOCKSIZE:HEX   a blkhash value, as nbdsum prints it
 *   blkhash:HEX                    the same with blkhash-digest and
 *                                  blkhash-block-size
 *
 * Names in any case, HEX in either case and of the digest's length.
 * Parsed at config_complete, once the default parameters are known.
 */
#include <config.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "filter.h"
#include "util.h"

const struct blkhash_expected *blkhash_expected;
static struct blkhash_expected ex;
static const char *value_given;         /* NULL: no gate */
static bool at_given;                   /* blkhash-expect-at= */
static bool spill_given;                /* blkhash-expect-spill= */

int
blkhash_expect_config (const char *key, const char *value)
{
  if (strcmp (key, "blkhash-expect") == 0) {
    /* One upload, one value: a second would hide a typo in either. */
    if (value_given) {
      blkhash_error ("blkhash-expect=%s: blkhash-expect is already given "
                     "(%s): give it once", value, value_given);
      return -1;
    }
    value_given = value;
    return 0;
  }
  if (strcmp (key, "blkhash-expect-spill") == 0) {
    const char *msg = blk_parse_size (value, &ex.spill);
    if (msg) {
      blkhash_error ("blkhash-expect-spill=%s: %s", value, msg);
      return -1;
    }
    spill_given = true;
    return 0;
  }
  at_given = true;
  if (strcmp (value, "flush") == 0)
    ex.every_flush = true;
  else if (strcmp (value, "complete") == 0)
    ex.every_flush = false;
  else {
    blkhash_error ("blkhash-expect-at=%s: expected complete or flush", value);
    return -1;
  }
  return 0;
}

/* A blkhash tag after "blkhash-": DIGEST/BLOCKSIZE. */
static int
expect_parse_tag (const char *tag)
{
  const char *slash = strrchr (tag, '/'), *msg;
  uint64_t bs;
  struct blk_digest d;
  char digest[BLK_DIGEST_NAME_MAX];

  if (slash == NULL || slash == tag ||
      (size_t) (slash - tag) >= sizeof digest) {
    blkhash_error ("blkhash-expect=%s: a blkhash value is "
                   "blkhash-DIGEST/BLOCKSIZE:HEX or blkhash:HEX",
                   value_given);
    return -1;
  }
  memcpy (digest, tag, slash - tag);
  digest[slash - tag] = '\0';
  if ((msg = blk_digest_init (&d, digest)) != NULL) {
    blkhash_error ("blkhash-expect=%s: digest '%s': %s", value_given,
                   digest, msg);
    return -1;
  }
  blk_digest_free (&d);
  if ((msg = blk_parse_size (slash + 1, &bs)) != NULL ||
      (msg = blk_check_block_size (bs)) != NULL) {
    blkhash_error ("blkhash-expect=%s: block size '%s': %s", value_given,
                   slash + 1, msg);
    return -1;
  }
  ex.params = blkhash_params_get (NULL, digest, bs);
  return ex.params ? 0 : -1;
}

int
blkhash_expect_ready (void)
{
  static const char *const plain_algs[] = {
    "sha256", "sha512", "sha1", "md5", NULL,
  };
  const char *colon, *hex, *msg;
  char alg[BLK_DIGEST_NAME_MAX], bs[BLK_BLOCK_SIZE_STR_MAX];
  size_t alen, i;

  if (value_given == NULL && (at_given || spill_given)) {
    blkhash_error ("blkhash-expect-%s= needs blkhash-expect=",
                   at_given ? "at" : "spill");
    return -1;
  }
  if (!spill_given)
    ex.spill = BLKHASH_EXPECT_SPILL;
  if (value_given == NULL)
    return 0;
  colon = strrchr (value_given, ':');
  if (colon == NULL || colon == value_given) {
    blkhash_error ("blkhash-expect=%s: expected ALG:HEX (ALG sha256, "
                   "sha512, sha1 or md5) or blkhash-DIGEST/BLOCKSIZE:HEX",
                   value_given);
    return -1;
  }
  hex = colon + 1;
  alen = colon - value_given;
  if (strncasecmp (value_given, "blkhash", 7) == 0 &&
      (alen == 7 || value_given[7] == '-')) {
    char tag[BLK_DIGEST_NAME_MAX + BLK_BLOCK_SIZE_STR_MAX];
    if (alen == 7)
      ex.params = blkhash_default_params;
    else if (alen - 8 >= sizeof tag) {
      blkhash_error ("blkhash-expect=%s: the tag is too long", value_given);
      return -1;
    }
    else {
      memcpy (tag, value_given + 8, alen - 8);
      tag[alen - 8] = '\0';
      if (expect_parse_tag (tag) == -1)
        return -1;
    }
    ex.len = ex.params->digest.len;
    snprintf (ex.tag, sizeof ex.tag, "blkhash-%s/%s",
              ex.params->digest.name,
              blk_format_block_size (ex.params->block_size, bs));
  }
  else {
    for (i = 0; i < alen && i < sizeof alg - 1; i++)
      alg[i] = tolower ((unsigned char) value_given[i]);
    alg[i] = '\0';
    for (i = 0; plain_algs[i] && strcmp (alg, plain_algs[i]) != 0; i++)
      ;
    if (alen >= sizeof alg || plain_algs[i] == NULL) {
      blkhash_error ("blkhash-expect=%s: unknown algorithm '%.*s': expected "
                     "sha256, sha512, sha1 or md5, or a blkhash value "
                     "(blkhash-DIGEST/BLOCKSIZE:HEX, blkhash:HEX)",
                     value_given, (int) alen, value_given);
      return -1;
    }
    if ((msg = blk_digest_init (&ex.digest, alg)) != NULL) {
      blkhash_error ("blkhash-expect=%s: %s: %s", value_given, alg, msg);
      return -1;
    }
    ex.plain = true;
    ex.len = ex.digest.len;
    snprintf (ex.tag, sizeof ex.tag, "%s", alg);
  }

  /* An import's record checks the value's blocks, or 256K granules
   * of sha256 for a plain digest.
   */
  ex.sent_params = ex.plain
    ? blkhash_params_get (NULL, "sha256", BLKHASH_SENT_PLAIN_GRANULE)
    : ex.params;
  if (ex.sent_params == NULL)
    return -1;

  for (i = 0; hex[i]; i++)
    if (blk_hex_value ((unsigned char) hex[i]) == -1) {
      blkhash_error ("blkhash-expect=%s: '%s' is not hex", value_given, hex);
      return -1;
    }
  if (i != 2 * ex.len) {
    blkhash_error ("blkhash-expect=%s: %s takes %zu hex digits, not %zu",
                   value_given, ex.tag, 2 * ex.len, i);
    return -1;
  }
  for (i = 0; i < ex.len; i++)
    ex.want[i] = blk_hex_value (hex[2 * i]) << 4 |
      blk_hex_value (hex[2 * i + 1]);
  blkhash_expected = &ex;
  return 0;
}

bool
blkhash_expect_passive (void)
{
  return blkhash_expected && !ex.plain &&
    ex.params == blkhash_default_params;
}

void
blkhash_expect_value_free (void)
{
  if (ex.plain)
    blk_digest_free (&ex.digest);
  blkhash_expected = NULL;
}

