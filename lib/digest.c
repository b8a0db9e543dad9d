/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: digests looked up by name, and the context that
 * runs them.  OpenSSL has no BLAKE3; where configure found libblake3
 * (Debian unstable packages it), blake3 is one more digest, with
 * blksum's output length.  Callers see one kind of context and never
 * which library is behind it.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/objects.h>
#ifdef HAVE_BLAKE3
#include <blake3.h>
#endif

#include "digest.h"

#define BLAKE3_NAME "blake3"
#define BLAKE3_LEN 32           /* BLAKE3_OUT_LEN, what blksum uses */

#ifdef HAVE_BLAKE3
_Static_assert (BLAKE3_OUT_LEN == BLAKE3_LEN, "blake3 output length");
#endif
_Static_assert (BLAKE3_LEN <= BLK_DIGEST_MAX, "blake3 fits");

struct blk_ctx {
  const struct blk_digest *d;   /* the digest in progress */
  EVP_MD_CTX *evp;
#ifdef HAVE_BLAKE3
  blake3_hasher blake3;
#endif
};

/* Extendable-output digests at a fixed length: OpenSSL 3.0's defaults,
 * what blksum gets from EVP_DigestFinal_ex.  They are finished with
 * EVP_DigestFinalXOF at this length, so a later OpenSSL's default (or
 * its lack of one) changes nothing.
 */
static const struct {
  const char *name;             /* an OpenSSL name, for EVP_MD_is_a */
  size_t len;
} xof_lengths[] = {
  { "SHAKE-128", 16 },
  { "SHAKE-256", 32 },
};

/* The length blkhash uses for md, or 0 if it has none. */
static size_t
digest_length (const EVP_MD *md)
{
  int len;

  if (EVP_MD_get_flags (md) & EVP_MD_FLAG_XOF) {
    for (size_t i = 0; i < sizeof xof_lengths / sizeof xof_lengths[0]; i++)
      if (EVP_MD_is_a (md, xof_lengths[i].name))
        return xof_lengths[i].len;
    return 0;
  }
  len = EVP_MD_get_size (md);
  return len > 0 && len <= EVP_MAX_MD_SIZE ? (size_t) len : 0;
}

/* Keep name, lower-case, as the canonical one if it can appear in a
 * view name (no '/', not an OID) and is shorter than best (ties: the
 * first in alphabetical order).
 */
static void
pick_canonical (const char *name, void *opaque)
{
  char *best = opaque, lower[BLK_DIGEST_NAME_MAX];
  size_t n = strlen (name), i;

  if (n == 0 || n >= BLK_DIGEST_NAME_MAX ||
      isdigit ((unsigned char) name[0]))
    return;
  for (i = 0; i < n; i++) {
    if (!isalnum ((unsigned char) name[i]) && strchr ("-_.", name[i]) == NULL)
      return;
    lower[i] = tolower ((unsigned char) name[i]);
  }
  lower[n] = '\0';
  if (best[0] == '\0' || n < strlen (best) ||
      (n == strlen (best) && strcmp (lower, best) < 0))
    memcpy (best, lower, n + 1);
}

const char *
blk_digest_init (struct blk_digest *d, const char *name)
{
  size_t i, n = strlen (name);

  memset (d, 0, sizeof *d);
  if (n == 0)
    return "digest name is empty";
  if (n >= sizeof d->name)
    return "digest name is too long";
  for (i = 0; i < n; i++) {
    if (!isalnum ((unsigned char) name[i]) && strchr ("-_.", name[i]) == NULL)
      return "digest name contains an invalid character";
    d->name[i] = tolower ((unsigned char) name[i]);
  }

  if (strcmp (d->name, BLAKE3_NAME) == 0) {
    if (!blk_digest_have_blake3 ())
      return blk_digest_no_blake3;
    d->blake3 = true;
    d->len = BLAKE3_LEN;
    return NULL;
  }

  /* Fetching once avoids an implicit fetch on every EVP_DigestInit. */
  d->md = EVP_MD_fetch (NULL, d->name, NULL);
  if (d->md == NULL)
    return "unknown digest (nbdsum --list-digests lists those it takes)";
  /* sha256, SHA-256 and sha2-256 are one digest: one name for all,
   * the object's short name where it has one (what every OpenSSL
   * version and the reference tool know).
   */
  {
    char best[BLK_DIGEST_NAME_MAX] = "";
    const int nid = EVP_MD_get_type (d->md);
    if (nid != NID_undef && OBJ_nid2sn (nid))
      pick_canonical (OBJ_nid2sn (nid), best);
    if (best[0] == '\0')
      EVP_MD_names_do_all (d->md, pick_canonical, best);
    if (best[0])
      memcpy (d->name, best, sizeof best);
  }
  d->xof = EVP_MD_get_flags (d->md) & EVP_MD_FLAG_XOF;
  d->len = digest_length (d->md);
  if (d->len == 0) {
    const char *msg = d->xof
      ? "of the extendable-output digests only shake128 and shake256 are "
        "supported"
      : "digest has no usable fixed length";
    blk_digest_free (d);
    return msg;
  }
  return NULL;
}

void
blk_digest_free (struct blk_digest *d)
{
  EVP_MD_free (d->md);
  d->md = NULL;
}

bool
blk_digest_same (const char *a, const char *b)
{
  struct blk_digest da, db;
  bool same;

  if (blk_digest_init (&da, a) != NULL)
    return false;
  if (blk_digest_init (&db, b) != NULL) {
    blk_digest_free (&da);
    return false;
  }
  same = strcmp (da.name, db.name) == 0;
  blk_digest_free (&da);
  blk_digest_free (&db);
  return same;
}

const char blk_digest_no_blake3[] =
  "this build has no blake3: OpenSSL has none, and configure did not "
  "find libblake3 (Debian: libblake3-dev, in unstable)";

bool
blk_digest_have_blake3 (void)
{
#ifdef HAVE_BLAKE3
  return true;
#else
  return false;
#endif
}

struct blk_ctx *
blk_ctx_new (void)
{
  struct blk_ctx *ctx = calloc (1, sizeof *ctx);

  if (ctx == NULL)
    return NULL;
  ctx->evp = EVP_MD_CTX_new ();
  if (ctx->evp == NULL) {
    free (ctx);
    errno = ENOMEM;
    return NULL;
  }
  return ctx;
}

void
blk_ctx_free (struct blk_ctx *ctx)
{
  if (ctx) {
    EVP_MD_CTX_free (ctx->evp);
    free (ctx);
  }
}

int
blk_ctx_init (struct blk_ctx *ctx, const struct blk_digest *d)
{
  ctx->d = d;
#ifdef HAVE_BLAKE3
  if (d->blake3) {
    blake3_hasher_init (&ctx->blake3);
    return 0;
  }
#endif
  return EVP_DigestInit_ex (ctx->evp, d->md, NULL) == 1 ? 0 : -1;
}

int
blk_ctx_update (struct blk_ctx *ctx, const void *buf, size_t len)
{
#ifdef HAVE_BLAKE3
  if (ctx->d->blake3) {
    blake3_hasher_update (&ctx->blake3, buf, len);
    return 0;
  }
#endif
  return EVP_DigestUpdate (ctx->evp, buf, len) == 1 ? 0 : -1;
}

int
blk_ctx_final (struct blk_ctx *ctx, uint8_t *out)
{
  const struct blk_digest *d = ctx->d;
  int r;

#ifdef HAVE_BLAKE3
  if (d->blake3) {
    blake3_hasher_finalize (&ctx->blake3, out, d->len);
    return 0;
  }
#endif
  r = d->xof ? EVP_DigestFinalXOF (ctx->evp, out, d->len)
    : EVP_DigestFinal_ex (ctx->evp, out, NULL);
  return r == 1 ? 0 : -1;
}

int
blk_ctx_copy (struct blk_ctx *dst, const struct blk_ctx *src)
{
  dst->d = src->d;
#ifdef HAVE_BLAKE3
  if (src->d->blake3) {
    dst->blake3 = src->blake3;
    return 0;
  }
#endif
  return EVP_MD_CTX_copy_ex (dst->evp, src->evp) == 1 ? 0 : -1;
}

struct list_state {
  void (*fn) (const char *names, size_t len, void *opaque);
  void *opaque;
};

#define MAX_NAMES 8

struct names {
  char names[MAX_NAMES][BLK_DIGEST_NAME_MAX];
  size_t n;
};

static void
add_name (const char *name, void *opaque)
{
  struct names *n = opaque;
  size_t i;

  /* OIDs are names too, but nobody types them. */
  if (isdigit ((unsigned char) name[0]) || n->n == MAX_NAMES ||
      strlen (name) >= BLK_DIGEST_NAME_MAX)
    return;
  for (i = 0; name[i]; i++)
    n->names[n->n][i] = tolower ((unsigned char) name[i]);
  n->names[n->n][i] = '\0';
  n->n++;
}

/* Shortest first: sha256 before sha-256 and sha2-256. */
static int
compare_names (const void *a, const void *b)
{
  size_t la = strlen (a), lb = strlen (b);

  return la != lb ? (la < lb ? -1 : 1) : strcmp (a, b);
}

static void
list_one (EVP_MD *md, void *opaque)
{
  struct list_state *st = opaque;
  struct names n = { .n = 0 };
  char joined[MAX_NAMES * (BLK_DIGEST_NAME_MAX + 2)] = "";
  const size_t len = digest_length (md);

  if (len == 0)
    return;
  EVP_MD_names_do_all (md, add_name, &n);
  if (n.n == 0)
    return;
  qsort (n.names, n.n, sizeof n.names[0], compare_names);
  for (size_t i = 0; i < n.n; i++) {
    if (i)
      strcat (joined, ", ");
    strcat (joined, n.names[i]);
  }
  st->fn (joined, len, st->opaque);
}

void
blk_digest_list (void (*fn) (const char *names, size_t len, void *opaque),
                 void *opaque)
{
  struct list_state st = { fn, opaque };

  if (blk_digest_have_blake3 ())
    fn (BLAKE3_NAME, BLAKE3_LEN, opaque);
  EVP_MD_do_all_provided (NULL, list_one, &st);
}
