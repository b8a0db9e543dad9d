/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: view names. */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkhash.h"
#include "util.h"
#include "viewname.h"

/* The last occurrence of marker followed by the end of the name, by
 * ':' or by ',' (the nonce), or NULL.
 */
static const char *
find_one (const char *name, const char *marker)
{
  const size_t mlen = strlen (marker);
  const char *found = NULL, *p;

  for (p = strstr (name, marker); p; p = strstr (p + 1, marker))
    if (p[mlen] == '\0' || p[mlen] == ':' || p[mlen] == ',')
      found = p;
  return found;
}

/* The last marker of any kind; *plain says which (and *bmap, for
 * @bmap, which has *plain set too: no block size).
 */
static const char *
find_marker (const char *name, bool *plain, bool *bmap)
{
  const char *v = find_one (name, BLK_VIEW_MARKER);
  const char *d = find_one (name, BLK_PLAIN_MARKER);
  const char *b = find_one (name, BLK_BMAP_MARKER);

  *bmap = b && (v == NULL || b > v) && (d == NULL || b > d);
  if (*bmap) {
    *plain = true;
    return b;
  }
  *plain = d && (v == NULL || d > v);
  return *plain ? d : v;
}

bool
blk_nonce_valid (const char *s)
{
  const size_t n = strspn (s, "0123456789abcdef");

  return n > 0 && n <= BLK_NONCE_MAX && s[n] == '\0';
}

size_t
blk_view_name_shown_len (const char *name)
{
  const char *p = NULL, *q;

  for (q = strstr (name, BLK_NONCE_OPTION); q;
       q = strstr (q + 1, BLK_NONCE_OPTION))
    p = q;
  if (p && blk_nonce_valid (p + strlen (BLK_NONCE_OPTION)))
    return p - name;
  return strlen (name);
}

/* A range's message, as a view name's: which part was wrong. */
static const char *
range_message (const char *msg)
{
  static const struct { const char *from, *to; } said[] = {
    { "a range of LENGTH 0 is empty",
      "range=: a range of LENGTH 0 is empty" },
    { "a range's end (OFFSET+LENGTH) is past 2^63-1 bytes",
      "range=: its end (OFFSET+LENGTH) is past 2^63-1 bytes" },
  };

  for (size_t i = 0; i < sizeof said / sizeof said[0]; i++)
    if (strcmp (msg, said[i].from) == 0)
      return said[i].to;
  return "range= is not OFFSET+LENGTH (sizes with K, M, G... suffixes)";
}

const char *
blk_view_name_parse (const char *name, struct blk_view_name *v,
                     bool *is_view)
{
  const char *slash, *msg, *comma, *after;
  bool plain, inner_plain, bmap, inner_bmap;
  const char *m = find_marker (name, &plain, &bmap);
  char *opts_buf = NULL, *opts;

  memset (v, 0, sizeof *v);
  *is_view = m != NULL;
  if (m == NULL)
    return NULL;

  v->base = strndup (name, m - name);
  if (v->base == NULL)
    goto enomem;
  /* "a@blkhash@blkhash" would be the view of a view: refused, so that
   * no name can mean the data of another view's base.
   */
  if (find_marker (v->base, &inner_plain, &inner_bmap)) {
    msg = "more than one " BLK_VIEW_MARKER ", " BLK_PLAIN_MARKER " or "
      BLK_BMAP_MARKER " marker (a view has no view)";
    goto bad;
  }
  v->plain = plain;
  v->bmap = bmap;
  /* The options, then ",range=OFFSET+LENGTH", then ",nonce=HEX", in
   * this order, each at most once, and nothing else.
   */
  m += strlen (bmap ? BLK_BMAP_MARKER
               : plain ? BLK_PLAIN_MARKER : BLK_VIEW_MARKER);
  comma = strchr (m, ',');
  if (comma &&
      strncmp (comma, BLK_RANGE_OPTION, strlen (BLK_RANGE_OPTION)) == 0) {
    const char *r = comma + strlen (BLK_RANGE_OPTION);
    const char *rend = strchr (r, ',');
    const size_t rlen = rend ? (size_t) (rend - r) : strlen (r);
    if ((msg = blk_parse_range_n (r, rlen, &v->range)) != NULL) {
      msg = range_message (msg);
      goto bad;
    }
    after = rend;
  }
  else
    after = comma;
  if (after) {
    if (strncmp (after, BLK_NONCE_OPTION, strlen (BLK_NONCE_OPTION)) != 0) {
      msg = "unknown view option after ',' (only " BLK_RANGE_OPTION
        "OFFSET+LENGTH, then " BLK_NONCE_OPTION "HEX)";
      goto bad;
    }
    if (!blk_nonce_valid (after + strlen (BLK_NONCE_OPTION))) {
      msg = strstr (after, BLK_RANGE_OPTION)
        ? BLK_RANGE_OPTION " comes before " BLK_NONCE_OPTION
        : "a nonce is 1 to 64 lower-case hex digits";
      goto bad;
    }
    if ((v->nonce = strdup (after + strlen (BLK_NONCE_OPTION))) == NULL)
      goto enomem;
  }
  if ((opts_buf = strndup (m, comma ? (size_t) (comma - m) : strlen (m)))
      == NULL)
    goto enomem;
  opts = opts_buf;
  if (bmap && *opts != '\0') {
    msg = "a bmap view has no options (sha256 of 4K blocks)";
    goto bad;
  }
  if (bmap && v->range.length) {
    msg = "a bmap view maps the whole image (no " BLK_RANGE_OPTION ")";
    goto bad;
  }
  if (plain && *opts == ':') {
    opts++;
    if (*opts == '\0') {
      msg = "empty digest name after ':'";
      goto bad;
    }
    /* OpenSSL's names hold '/' (SHA2-512/256): only a block size
     * after the last one is a mistake.
     */
    if ((slash = strrchr (opts, '/')) != NULL) {
      uint64_t bs;
      if (blk_parse_size (slash + 1, &bs) == NULL &&
          blk_check_block_size (bs) == NULL) {
        msg = "a plain digest has no block size";
        goto bad;
      }
    }
    v->digest = strdup (opts);
    if (v->digest == NULL)
      goto enomem;
  }
  else if (*opts == ':') {
    opts++;
    slash = strchr (opts, '/');
    size_t dlen = slash ? (size_t) (slash - opts) : strlen (opts);
    if (dlen > 0) {
      v->digest = strndup (opts, dlen);
      if (v->digest == NULL)
        goto enomem;
    }
    if (slash) {
      if ((msg = blk_parse_size (slash + 1, &v->block_size)) != NULL)
        goto bad;
      /* 0 means "the default" inside, never on the wire. */
      if (v->block_size == 0) {
        msg = BLK_BLOCK_SIZE_RULE;
        goto bad;
      }
    }
    else if (dlen == 0) {
      msg = "empty view options after ':'";
      goto bad;
    }
  }
  else if (*opts != '\0') {
    msg = "unexpected view options";
    goto bad;
  }
  free (opts_buf);
  return NULL;

 enomem:
  msg = "out of memory";
 bad:
  free (opts_buf);
  blk_view_name_free (v);
  return msg;
}

void
blk_view_name_free (struct blk_view_name *v)
{
  free (v->base);
  free (v->digest);
  free (v->nonce);
  v->base = v->digest = v->nonce = NULL;
  v->range.offset = v->range.length = 0;
}

char *
blk_view_name_build (const char *base, const char *digest,
                     uint64_t block_size, const char *nonce)
{
  return blk_view_name_build_range (base, digest, block_size, NULL, nonce);
}

char *
blk_plain_view_name_build (const char *base, const char *digest,
                           const char *nonce)
{
  return blk_plain_view_name_build_range (base, digest, NULL, nonce);
}

/* ",range=OFFSET+LENGTH" into out, or "" for no range. */
static const char *
range_part (const struct blk_range *range,
            char out[sizeof BLK_RANGE_OPTION + BLK_RANGE_STR_MAX])
{
  char r[BLK_RANGE_STR_MAX];

  out[0] = '\0';
  if (range && range->length)
    snprintf (out, sizeof BLK_RANGE_OPTION + BLK_RANGE_STR_MAX,
              BLK_RANGE_OPTION "%s", blk_format_range (range, r));
  return out;
}

char *
blk_view_name_build_range (const char *base, const char *digest,
                           uint64_t block_size,
                           const struct blk_range *range, const char *nonce)
{
  char *s = NULL;
  char bs[BLK_BLOCK_SIZE_STR_MAX];
  char rp[sizeof BLK_RANGE_OPTION + BLK_RANGE_STR_MAX];
  int r;

  r = asprintf (&s, "%s" BLK_VIEW_MARKER "%s%s%s%s%s%s%s", base,
                digest || block_size ? ":" : "", digest ? digest : "",
                block_size ? "/" : "",
                block_size ? blk_format_block_size (block_size, bs) : "",
                range_part (range, rp),
                nonce ? BLK_NONCE_OPTION : "", nonce ? nonce : "");
  return r == -1 ? NULL : s;
}

char *
blk_plain_view_name_build_range (const char *base, const char *digest,
                                 const struct blk_range *range,
                                 const char *nonce)
{
  char rp[sizeof BLK_RANGE_OPTION + BLK_RANGE_STR_MAX];
  char *s = NULL;

  if (asprintf (&s, "%s" BLK_PLAIN_MARKER "%s%s%s%s%s", base,
                digest ? ":" : "", digest ? digest : "",
                range_part (range, rp),
                nonce ? BLK_NONCE_OPTION : "", nonce ? nonce : "") == -1)
    return NULL;
  return s;
}

char *
blk_bmap_view_name_build (const char *base, const char *nonce)
{
  char *s = NULL;

  if (asprintf (&s, "%s" BLK_BMAP_MARKER "%s%s", base,
                nonce ? BLK_NONCE_OPTION : "", nonce ? nonce : "") == -1)
    return NULL;
  return s;
}
