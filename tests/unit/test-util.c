/* Unit tests: lib/util.c */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "tap.h"

static int
size_is (const char *s, uint64_t want)
{
  uint64_t v;
  return blk_parse_size (s, &v) == NULL && v == want;
}

static int
size_bad (const char *s)
{
  uint64_t v;
  return blk_parse_size (s, &v) != NULL;
}

static int
view_is (const char *name, const char *base, const char *digest,
         uint64_t bs)
{
  struct blk_view_name v;
  const char *msg = NULL;
  int r = blk_view_name_parse (name, &v, &msg) == 1 &&
    strcmp (v.base, base) == 0 &&
    (digest ? v.digest && strcmp (v.digest, digest) == 0 : !v.digest) &&
    v.block_size == bs;
  blk_view_name_free (&v);
  return r;
}

static int
view_result (const char *name)
{
  struct blk_view_name v;
  const char *msg = NULL;
  int r = blk_view_name_parse (name, &v, &msg);
  if (r == 1)
    blk_view_name_free (&v);
  return r;
}

int
main (void)
{
  char hex[16], *s;
  const uint8_t bytes[] = { 0x00, 0x7f, 0xab, 0xff };

  ok (size_is ("0", 0), "0");
  ok (size_is ("65536", 65536), "plain bytes");
  ok (size_is ("64K", 65536), "64K");
  ok (size_is ("64k", 65536), "64k");
  ok (size_is ("1M", 1 << 20), "1M");
  ok (size_is ("1MiB", 1 << 20), "1MiB");
  ok (size_is ("2G", 2ULL << 30), "2G");
  ok (size_is ("1T", 1ULL << 40), "1T");
  ok (size_bad (""), "empty size");
  ok (size_bad ("K"), "suffix only");
  ok (size_bad ("12Q"), "unknown suffix");
  ok (size_bad ("1M2"), "trailing characters");
  ok (size_bad ("-1"), "negative");
  ok (size_bad ("99999999999999999999"), "overflow");
  ok (size_bad ("9000000T"), "overflow after suffix");

  blk_hex (bytes, 4, hex);
  ok (strcmp (hex, "007fabff") == 0, "hex");

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
      view_result ("disk@blkhash:/0") == -1, "block size 0 is refused");
  ok (view_is ("me@host@blkhash:md5", "me@host", "md5", 0),
      "base names may contain @");
  ok (view_result ("disk") == 0, "plain name is not a view");
  ok (view_result ("disk@blkhashes") == 0, "marker must end the name");
  ok (view_result ("disk@blkhash:") == -1, "empty options rejected");
  ok (view_result ("disk@blkhash:sha1/zz") == -1, "bad block size rejected");

  {
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream (&buf, &len);
    blk_fput_sum_line (fp, "abcd", "plain.img");
    blk_fput_sum_line (fp, "abcd", "a\\b\nc");
    fclose (fp);
    ok (strcmp (buf, "abcd  plain.img\n\\abcd  a\\\\b\\nc\n") == 0,
        "sum lines escape like sha256sum");
    ok (!blk_name_needs_escape ("x y") && blk_name_needs_escape ("x\n"),
        "only backslash and newline need escaping");
    free (buf);
  }

  s = blk_view_name_build ("disk", NULL, 0);
  ok (s && strcmp (s, "disk@blkhash") == 0, "build default view name");
  free (s);
  s = blk_view_name_build ("", "sha1", 1 << 20);
  ok (s && strcmp (s, "@blkhash:sha1/1M") == 0, "build with options");
  ok (s && view_is (s, "", "sha1", 1 << 20), "built name parses back");
  free (s);
  s = blk_view_name_build ("x", NULL, 65536);
  ok (s && strcmp (s, "x@blkhash:/64K") == 0, "build with block size only");
  free (s);
  return done_testing ();
}
