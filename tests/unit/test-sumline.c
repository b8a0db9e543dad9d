/* Unit tests: lib/sumline.c */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "sumline.h"
#include "tap.h"

#define HEX8 "0123abCD"

/* Does line parse (hex length 8) to want_name? */
static int
parses (const char *line, const char *want_name)
{
  char *copy = strdup (line), *hex, *name;
  int r = copy && blk_sum_line_parse (copy, 8, &hex, &name) == 0 &&
    strcmp (hex, HEX8) == 0 && strcmp (name, want_name) == 0;

  free (copy);
  return r;
}

static int
malformed (const char *line)
{
  char *copy = strdup (line), *hex, *name;
  int r = copy && blk_sum_line_parse (copy, 8, &hex, &name) == -1;

  free (copy);
  return r;
}

int
main (void)
{
  ok (parses (HEX8 "  disk.img", "disk.img"), "text mode");
  ok (parses (HEX8 " *disk.img", "disk.img"), "binary mode");
  ok (parses (HEX8 "  disk.img\n", "disk.img"), "newline dropped");
  ok (parses (HEX8 "  disk.img\r\n", "disk.img"), "CRLF dropped");
  ok (parses (HEX8 "  a b\\c", "a b\\c"), "no escapes without '\\'");
  ok (parses ("\\" HEX8 "  a\\\\b\\nc", "a\\b\nc"), "escapes");
  ok (parses ("\\" HEX8 "  a\\r", "a\r"), "sha256sum's \\r escape");
  ok (malformed ("\\" HEX8 "  a\\b"), "unknown escape");
  ok (malformed ("\\" HEX8 "  a\\"), "escape at the end");
  ok (malformed (HEX8 "0  disk.img"), "hex too long");
  ok (malformed ("0123abC  disk.img"), "hex too short");
  ok (malformed ("0123abCx  disk.img"), "not hex");
  ok (malformed (HEX8 " disk.img"), "one space");
  ok (malformed (HEX8 "  "), "no name");
  ok (malformed (HEX8), "hex alone");
  ok (malformed (""), "empty line");
  ok (malformed ("\\"), "lone backslash");

  {
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream (&buf, &len);
    blk_fput_sum_line (fp, "abcd", "plain.img");
    blk_fput_sum_line (fp, "abcd", "a\\b\nc");
    blk_fput_sum_line (fp, "abcd", "c\r");
    fclose (fp);
    ok (strcmp (buf, "abcd  plain.img\n\\abcd  a\\\\b\\nc\n"
                "\\abcd  c\\r\n") == 0,
        "sum lines escape like sha256sum, carriage returns too");
    ok (!blk_name_needs_escape ("x y") && blk_name_needs_escape ("x\n"),
        "only backslash and newline need escaping");
    free (buf);
  }
  return done_testing ();
}
