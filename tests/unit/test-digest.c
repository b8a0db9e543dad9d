/* Unit tests: lib/digest.c */
#include <config.h>

#include <stdbool.h>
#include <string.h>

#include "digest.h"
#include "util.h"
#include "tap.h"

static void
find_sha256 (const char *names, size_t len, void *opaque)
{
  if (strstr (names, "sha256") && len == 32)
    *(bool *) opaque = true;
}

int
main (void)
{
  struct blk_digest d;
  uint8_t out[EVP_MAX_MD_SIZE];
  char hex[2 * EVP_MAX_MD_SIZE + 1];
  EVP_MD_CTX *ctx = EVP_MD_CTX_new ();
  bool found = false;

  ok (blk_digest_init (&d, "sha256") == NULL && d.len == 32,
      "sha256 is 32 bytes");
  ok (blk_digest_buf (&d, ctx, "abc", 3, out) == 0, "hash abc");
  blk_hex (out, d.len, hex);
  ok (strcmp (hex, "ba7816bf8f01cfea414140de5dae2223"
              "b00361a396177a9cb410ff61f20015ad") == 0,
      "sha256(abc) is the FIPS 180-2 answer");
  /* The context is reusable. */
  ok (blk_digest_buf (&d, ctx, "", 0, out) == 0, "hash empty");
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
  ok (blk_digest_init (&d, "shake128") != NULL && d.md == NULL,
      "extendable-output digest rejected");
  ok (blk_digest_init (&d, "sha256;rm") != NULL, "odd characters rejected");
  ok (blk_digest_init (&d, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
      != NULL, "over-long name rejected");

  blk_digest_list (find_sha256, &found);
  ok (found, "the digest list names sha256, 32 bytes");

  EVP_MD_CTX_free (ctx);
  return done_testing ();
}
