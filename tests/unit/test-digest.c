/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/digest.c */
#include <config.h>

#include <stdbool.h>
#include <string.h>

#include "digest.h"
#include "util.h"
#include "tap.h"

struct listed {
  bool sha256, shake128, shake256, kmac, blake3;
};

static void
find_listed (const char *names, size_t len, void *opaque)
{
  struct listed *l = opaque;

  if (strstr (names, "sha256") && len == 32)
    l->sha256 = true;
  if (strncmp (names, "shake128, ", 10) == 0 && len == 16)
    l->shake128 = true;
  if (strncmp (names, "shake256, ", 10) == 0 && len == 32)
    l->shake256 = true;
  if (strstr (names, "kmac"))
    l->kmac = true;
  if (strcmp (names, "blake3") == 0 && len == 32)
    l->blake3 = true;
}

/* The digest of buf, as the construction computes one, with a context
 * reused.
 */
static int
digest_buf (const struct blk_digest *d, struct blk_ctx *ctx, const void *buf,
            size_t len, uint8_t *out)
{
  if (blk_ctx_init (ctx, d) == -1 || blk_ctx_update (ctx, buf, len) == -1)
    return -1;
  return blk_ctx_final (ctx, out);
}

/* Hex of name(msg) through the wrapper, with a guard after the digest:
 * exactly d.len bytes are written.  NULL if the name is refused.
 */
static const char *
digest_hex (const char *name, struct blk_ctx *ctx, const char *msg,
            size_t *len)
{
  static char hex[2 * BLK_DIGEST_MAX + 1];
  uint8_t out[BLK_DIGEST_MAX + 8];
  struct blk_digest d;

  if (blk_digest_init (&d, name) != NULL)
    return NULL;
  memset (out, 0xa5, sizeof out);
  *len = d.len;
  if (digest_buf (&d, ctx, msg, strlen (msg), out) == -1 ||
      out[d.len] != 0xa5 || out[d.len + 7] != 0xa5) {
    blk_digest_free (&d);
    return "failed";
  }
  blk_hex (out, d.len, hex);
  blk_digest_free (&d);
  return hex;
}

int
main (void)
{
  struct blk_digest d;
  uint8_t out[BLK_DIGEST_MAX];
  char hex[2 * BLK_DIGEST_MAX + 1];
  struct blk_ctx *ctx = blk_ctx_new (), *copy = blk_ctx_new ();
  struct listed listed = { false };
  const char *msg, *h;
  size_t len = 0;

  ok (blk_digest_init (&d, "sha256") == NULL && d.len == 32,
      "sha256 is 32 bytes");
  ok (digest_buf (&d, ctx, "abc", 3, out) == 0, "hash abc");
  blk_hex (out, d.len, hex);
  ok (strcmp (hex, "ba7816bf8f01cfea414140de5dae2223"
              "b00361a396177a9cb410ff61f20015ad") == 0,
      "sha256(abc) is the FIPS 180-2 answer");
  /* The context is reusable. */
  ok (digest_buf (&d, ctx, "", 0, out) == 0, "hash empty");
  blk_hex (out, d.len, hex);
  ok (strcmp (hex, "e3b0c44298fc1c149afbf4c8996fb924"
              "27ae41e4649b934ca495991b7852b855") == 0,
      "sha256('') with a reused context");
  blk_digest_free (&d);

  ok (blk_digest_init (&d, "SHA1") == NULL && d.len == 20 &&
      strcmp (d.name, "sha1") == 0, "names are case-insensitive, kept "
      "lower-case");
  blk_digest_free (&d);
  ok (blk_digest_init (&d, "md5") == NULL && d.len == 16, "md5");
  blk_digest_free (&d);
  ok (blk_digest_init (&d, "blake2b512") == NULL && d.len == 64,
      "blake2b512 is 64 bytes");
  blk_digest_free (&d);
  ok (blk_digest_init (&d, "sha3-256") == NULL && d.len == 32, "sha3-256");
  blk_digest_free (&d);

  ok (blk_digest_init (&d, "nosuchdigest") != NULL && d.md == NULL,
      "unknown digest rejected");
  ok (blk_digest_init (&d, "") != NULL, "empty name rejected");

  /* shake at OpenSSL 3.0's default lengths, whatever the version. */
  ok (blk_digest_init (&d, "shake128") == NULL && d.len == 16 && d.xof &&
      strcmp (d.name, "shake128") == 0, "shake128 is 16 bytes");
  blk_digest_free (&d);
  ok (blk_digest_init (&d, "shake256") == NULL && d.len == 32 && d.xof &&
      strcmp (d.name, "shake256") == 0, "shake256 is 32 bytes");
  blk_digest_free (&d);
  ok (blk_digest_init (&d, "SHAKE-128") == NULL && d.len == 16 &&
      strcmp (d.name, "shake128") == 0, "SHAKE-128 is shake128");
  blk_digest_free (&d);
  ok (blk_digest_init (&d, "2.16.840.1.101.3.4.2.12") == NULL &&
      d.len == 32 && strcmp (d.name, "shake256") == 0,
      "shake256's OID is shake256");
  blk_digest_free (&d);
  ok (blk_digest_init (&d, "sha256") == NULL && !d.xof,
      "sha256 is not extendable-output");
  blk_digest_free (&d);
  /* FIPS 202 answers, cut at 16 and 32 bytes. */
  h = digest_hex ("shake128", ctx, "", &len);
  ok (h && len == 16 && strcmp (h, "7f9c2ba4e88f827d616045507605853e") == 0,
      "shake128('') is 16 bytes of the FIPS 202 answer");
  h = digest_hex ("shake256", ctx, "", &len);
  ok (h && len == 32 && strcmp (h, "46b9dd2b0ba88d13233b3feb743eeb24"
                                "3fcd52ea62b81b82b50c27646ed5762f") == 0,
      "shake256('') is 32 bytes of the FIPS 202 answer");
  h = digest_hex ("shake128", ctx, "abc", &len);
  ok (h && strcmp (h, "5881092dd818bf5cf8a3ddb793fbcba7") == 0,
      "shake128(abc)");
  /* A context finished as an XOF serves a fixed-length digest next. */
  h = digest_hex ("sha256", ctx, "abc", &len);
  ok (h && strcmp (h, "ba7816bf8f01cfea414140de5dae2223"
                   "b00361a396177a9cb410ff61f20015ad") == 0,
      "sha256 after shake with the same context");
  msg = blk_digest_init (&d, "keccak-kmac-128");
  ok (msg && strstr (msg, "only shake128 and shake256") && d.md == NULL,
      "another extendable-output digest is refused: %s", msg);
  ok (blk_digest_init (&d, "sha256;rm") != NULL, "odd characters rejected");
  ok (blk_digest_init (&d, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
      != NULL, "over-long name rejected");

  blk_digest_list (find_listed, &listed);
  ok (listed.sha256, "the digest list names sha256, 32 bytes");
  ok (listed.shake128 && listed.shake256,
      "the digest list names shake128, 16 bytes, and shake256, 32 bytes");
  ok (!listed.kmac, "the digest list leaves out what is refused");
  ok (listed.blake3 == blk_digest_have_blake3 (),
      "the digest list names blake3, 32 bytes, exactly when built with it");

  /* A copy goes on from where the original was, and leaves it be. */
  for (int i = 0; i < 2; i++) {
    const char *name = i == 0 ? "sha256" : "blake3";
    uint8_t a[BLK_DIGEST_MAX], b[BLK_DIGEST_MAX];

    if (blk_digest_init (&d, name) != NULL) {
      ok (i == 1 && !blk_digest_have_blake3 (), "no %s to copy", name);
      continue;
    }
    ok (blk_ctx_init (ctx, &d) == 0 && blk_ctx_update (ctx, "ab", 2) == 0 &&
        blk_ctx_copy (copy, ctx) == 0 && blk_ctx_update (copy, "c", 1) == 0 &&
        blk_ctx_final (copy, a) == 0 && digest_buf (&d, copy, "abc", 3, b) == 0
        && memcmp (a, b, d.len) == 0, "%s: a copy of H(ab) + c is H(abc)",
        name);
    ok (blk_ctx_update (ctx, "x", 1) == 0 && blk_ctx_final (ctx, a) == 0 &&
        digest_buf (&d, copy, "abx", 3, b) == 0 && memcmp (a, b, d.len) == 0,
        "%s: the original goes on as H(abx)", name);
    blk_digest_free (&d);
  }

  /* blake3: the official test answers, or a clear refusal. */
  if (blk_digest_have_blake3 ()) {
    ok (blk_digest_init (&d, "BLAKE3") == NULL && d.len == 32 && d.blake3 &&
        strcmp (d.name, "blake3") == 0, "blake3 is 32 bytes, any case");
    blk_digest_free (&d);
    h = digest_hex ("blake3", ctx, "", &len);
    ok (h && len == 32 && strcmp (h, "af1349b9f5f9a1a6a0404dea36dcc949"
                                  "9bcb25c9adc112b7cc9a93cae41f3262") == 0,
        "blake3('') is the reference answer");
    h = digest_hex ("blake3", ctx, "abc", &len);
    ok (h && strcmp (h, "6437b3ac38465133ffb63b75273a8db5"
                     "48c558465d79db03fd359c6cd5bd9d85") == 0,
        "blake3(abc) is the reference answer");
    h = digest_hex ("sha256", ctx, "abc", &len);
    ok (h && strcmp (h, "ba7816bf8f01cfea414140de5dae2223"
                     "b00361a396177a9cb410ff61f20015ad") == 0,
        "sha256 after blake3 with the same context");
    ok (!blk_digest_same ("blake3", "sha256") &&
        blk_digest_same ("blake3", "Blake3"), "blake3 is itself only");
  }
  else {
    msg = blk_digest_init (&d, "blake3");
    ok (msg && strstr (msg, "no blake3") && strstr (msg, "libblake3"),
        "without libblake3, blake3 is refused saying why: %s", msg);
  }

  blk_ctx_free (ctx);
  blk_ctx_free (copy);
  ok (blk_digest_same ("sha256", "SHA2-256") &&
      blk_digest_same ("SHAKE-128", "shake128") &&
      !blk_digest_same ("sha256", "sha512") &&
      !blk_digest_same ("nosuch", "nosuch"),
      "blk_digest_same: aliases are one digest, unknown names none");
  return done_testing ();
}
