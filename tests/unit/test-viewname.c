/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: lib/viewname.c */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "viewname.h"
#include "tap.h"

static int
view_is (const char *name, const char *base, const char *digest,
         uint64_t bs)
{
  struct blk_view_name v;
  bool view;
  int r = blk_view_name_parse (name, &v, &view) == NULL && view &&
    strcmp (v.base, base) == 0 &&
    (digest ? v.digest && strcmp (v.digest, digest) == 0 : !v.digest) &&
    v.block_size == bs;
  blk_view_name_free (&v);
  return r;
}

static const char *last_msg;

/* 1: a view, 0: not a view, -1: a malformed view name (last_msg). */
static int
view_result (const char *name)
{
  struct blk_view_name v;
  bool view;

  last_msg = blk_view_name_parse (name, &v, &view);
  if (last_msg)
    return -1;
  blk_view_name_free (&v);
  return view;
}

int
main (void)
{
  struct blk_view_name nv;
  bool nview;
  char *s;

  ok (view_is ("disk@blkhash", "disk", NULL, 0), "NAME@blkhash");
  ok (view_is ("@blkhash", "", NULL, 0), "default export view");
  ok (view_is ("disk@blkhash:sha1", "disk", "sha1", 0), "digest suffix");
  ok (view_is ("disk@blkhash:sha256/1M", "disk", "sha256", 1 << 20),
      "digest and block size");
  ok (view_is ("disk@blkhash:/128K", "disk", NULL, 131072),
      "block size only");
  ok (view_result ("a@blkhash@blkhash") == -1 &&
      view_result ("@blkhash@blkhash") == -1 &&
      view_result ("x@blkhash:sha1@blkhash") == -1,
      "more than one marker is refused (a view has no view)");
  ok (view_is ("a@blkhashes@blkhash", "a@blkhashes", NULL, 0),
      "a base name may hold the marker's letters");
  ok (view_result ("disk@blkhash:sha256/0") == -1 &&
      view_result ("disk@blkhash:/0") == -1 && last_msg &&
      strcmp (last_msg, "block size must be a multiple of 4K from 4K to 16M")
      == 0, "block size 0 is refused, saying the rule");
  ok (view_is ("me@host@blkhash:md5", "me@host", "md5", 0),
      "base names may contain @");
  ok (view_result ("disk") == 0, "plain name is not a view");
  ok (view_result ("disk@blkhashes") == 0, "marker must end the name");
  ok (view_result ("disk@blkhash:") == -1, "empty options rejected");
  ok (view_result ("disk@blkhash:sha1/zz") == -1, "bad block size rejected");
  ok (view_is ("disk@blkhash:shake128/96K", "disk", "shake128", 98304),
      "shake128 with 96K blocks");
  ok (view_is ("disk@blkhash:SHAKE-256/12288", "disk", "SHAKE-256", 12288),
      "the digest as given, the block size in bytes");

  s = blk_view_name_build ("disk", NULL, 0, NULL);
  ok (s && strcmp (s, "disk@blkhash") == 0, "build default view name");
  free (s);
  s = blk_view_name_build ("", "sha1", 1 << 20, NULL);
  ok (s && strcmp (s, "@blkhash:sha1/1M") == 0, "build with options");
  ok (s && view_is (s, "", "sha1", 1 << 20), "built name parses back");
  free (s);
  s = blk_view_name_build ("x", NULL, 65536, NULL);
  ok (s && strcmp (s, "x@blkhash:/64K") == 0, "build with block size only");
  free (s);
  s = blk_view_name_build ("", "shake256", 96 * 1024, NULL);
  ok (s && strcmp (s, "@blkhash:shake256/96K") == 0,
      "build shake256 with 96K blocks");
  free (s);
  s = blk_view_name_build ("d", "shake128", 1572864, NULL);
  ok (s && strcmp (s, "d@blkhash:shake128/1536K") == 0,
      "1.5M blocks are spelt 1536K");
  ok (s && view_is (s, "d", "shake128", 1572864), "and parse back");
  free (s);
  /* Plain-digest views. */
  {
    struct blk_view_name v;
    bool view;
    ok (blk_view_name_parse ("disk@digest:sha512", &v, &view) == NULL &&
        view && v.plain && strcmp (v.base, "disk") == 0 &&
        strcmp (v.digest, "sha512") == 0 && v.block_size == 0,
        "NAME@digest:DIGEST");
    blk_view_name_free (&v);
    ok (blk_view_name_parse ("@digest", &v, &view) == NULL && view &&
        v.plain && v.base[0] == '\0' && v.digest == NULL,
        "@digest: the default export, the default digest");
    blk_view_name_free (&v);
    ok (blk_view_name_parse ("d@blkhash", &v, &view) == NULL && view &&
        !v.plain, "a blkhash view is not plain");
    blk_view_name_free (&v);
  }
  ok (view_result ("disk@digest:sha256/64K") == -1 && last_msg &&
      strcmp (last_msg, "a plain digest has no block size") == 0,
      "a plain digest with a block size is refused");
  ok (view_result ("disk@digest:") == -1, "empty digest after ':'");
  {
    struct blk_view_name v;
    bool view;
    ok (blk_view_name_parse ("d@digest:SHA2-512/256", &v, &view) == NULL &&
        view && v.plain && strcmp (v.digest, "SHA2-512/256") == 0,
        "a digest name with '/' (OpenSSL's SHA2-512/256)");
    blk_view_name_free (&v);
  }
  ok (view_result ("d@digest:sha256/1M") == -1,
      "a block size after the last '/' is refused");
  ok (view_result ("a@blkhash@digest:md5") == -1 &&
      view_result ("a@digest@blkhash") == -1 &&
      view_result ("a@digest@digest") == -1,
      "a plain view has no view, nor has a view");
  ok (view_result ("disk@digests") == 0, "@digest must end the name");
  s = blk_plain_view_name_build ("disk", "md5", NULL);
  ok (s && strcmp (s, "disk@digest:md5") == 0, "build NAME@digest:DIGEST");
  free (s);
  s = blk_plain_view_name_build ("", NULL, NULL);
  ok (s && strcmp (s, "@digest") == 0, "build @digest");
  free (s);

  /* The nonce: parsed, built, and left out of what messages show. */
  ok (blk_view_name_parse ("d@blkhash:sha1/4K,nonce=ab09", &nv, &nview) == NULL
      && nview && strcmp (nv.nonce, "ab09") == 0 &&
      strcmp (nv.digest, "sha1") == 0 && nv.block_size == 4096,
      "a nonce after the options");
  blk_view_name_free (&nv);
  ok (blk_view_name_parse ("d@digest,nonce=ff", &nv, &nview) == NULL && nview &&
      nv.plain && nv.digest == NULL && strcmp (nv.nonce, "ff") == 0,
      "a nonce after a plain view's marker");
  blk_view_name_free (&nv);
  ok (blk_view_name_parse ("d@blkhash,nonce=AB", &nv, &nview) != NULL && nview,
      "an upper-case nonce is refused");
  ok (blk_view_name_parse ("d@blkhash,salt=ab", &nv, &nview) != NULL && nview,
      "an unknown option after ',' is refused");
  s = blk_view_name_build ("a,b", NULL, 65536, "0f");
  ok (s && strcmp (s, "a,b@blkhash:/64K,nonce=0f") == 0 &&
      blk_view_name_shown_len (s) == strlen ("a,b@blkhash:/64K"),
      "built with a nonce, shown without: %s", s);
  free (s);
  ok (blk_view_name_shown_len ("x,nonce=zz") == strlen ("x,nonce=zz"),
      "no nonce: all is shown");

  /* The bmap view: no options, a nonce, no view of it. */
  ok (blk_view_name_parse ("d@bmap,nonce=0a", &nv, &nview) == NULL && nview &&
      nv.bmap && nv.plain && nv.digest == NULL &&
      strcmp (nv.base, "d") == 0 && strcmp (nv.nonce, "0a") == 0,
      "NAME@bmap,nonce=HEX");
  blk_view_name_free (&nv);
  ok (view_result ("@bmap") == 1, "@bmap: the default export's");
  ok (view_result ("d@bmap:sha1") == -1 && view_result ("d@bmap:/4K") == -1,
      "a bmap view has no options");
  ok (view_result ("a@bmap@blkhash") == -1 &&
      view_result ("a@blkhash@bmap") == -1 &&
      view_result ("a@digest@bmap") == -1, "a bmap view has no view");
  ok (view_result ("d@bmaps") == 0, "@bmap must end the name");
  ok (blk_view_name_parse ("d@blkhash", &nv, &nview) == NULL && !nv.bmap,
      "NAME@blkhash is no bmap view");
  blk_view_name_free (&nv);
  s = blk_bmap_view_name_build ("disk", "9f");
  ok (s && strcmp (s, "disk@bmap,nonce=9f") == 0, "build NAME@bmap");
  free (s);
  ok (view_result ("d@bmap,range=0+4K") == -1 && strstr (last_msg, "whole"),
      "a bmap view has no range (%s)", last_msg);

  /* A range: after the options, before the nonce; never empty. */
  ok (blk_view_name_parse ("d@blkhash:sha1/4K,range=1M+4097,nonce=ab", &nv,
                           &nview) == NULL && nview &&
      nv.range.offset == 1 << 20 && nv.range.length == 4097 &&
      strcmp (nv.nonce, "ab") == 0 && nv.block_size == 4096,
      "a range, then a nonce");
  blk_view_name_free (&nv);
  ok (blk_view_name_parse ("d@digest:md5,range=0+1", &nv, &nview) == NULL &&
      nview && nv.plain && nv.range.length == 1 && nv.nonce == NULL,
      "a plain view's range");
  blk_view_name_free (&nv);
  ok (view_result ("d@blkhash,range=0+0") == -1 &&
      strstr (last_msg, "range=") && strstr (last_msg, "empty"),
      "an empty range is refused (%s)", last_msg);
  ok (view_result ("d@blkhash,range=8E+1") == -1 &&
      strstr (last_msg, "range="), "an offset past 2^63-1 is refused (%s)",
      last_msg);
  ok (view_result ("d@blkhash,range=9223372036854775807+1") == -1 &&
      strstr (last_msg, "2^63-1"), "an end past 2^63-1 is refused (%s)",
      last_msg);
  ok (view_result ("d@blkhash,range=1M") == -1 &&
      view_result ("d@blkhash,range=1+2+3") == -1 &&
      view_result ("d@blkhash,range=-1+2") == -1 &&
      view_result ("d@blkhash,range=") == -1,
      "a range is OFFSET+LENGTH");
  ok (view_result ("d@blkhash,nonce=ab,range=0+1") == -1 &&
      view_result ("d@blkhash,range=0+1,range=0+1") == -1,
      "the range comes once, before the nonce");
  {
    const struct blk_range r = { 65536, 3 << 20 };
    s = blk_view_name_build_range ("d", "sha1", 0, &r, "0f");
    ok (s && strcmp (s, "d@blkhash:sha1,range=64K+3M,nonce=0f") == 0 &&
        blk_view_name_shown_len (s) == strlen ("d@blkhash:sha1,range=64K+3M"),
        "built with a range: %s", s);
    free (s);
    s = blk_plain_view_name_build_range ("", NULL, &r, NULL);
    ok (s && strcmp (s, "@digest,range=64K+3M") == 0,
        "a plain view built with a range: %s", s);
    free (s);
  }
  return done_testing ();
}
