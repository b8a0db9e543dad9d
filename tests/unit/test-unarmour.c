/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: client/unarmour.c, which lines of a checksum file are
 * checked: comments and a clear-signed file's armour are not, and
 * dash-escaped lines are unescaped.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unarmour.h"
#include "tap.h"

/* The lines of text (separated by '\n') that unarmour keeps, joined
 * by '|', and whether it saw a signed file.
 */
static char *
kept (const char *text, bool *signed_file)
{
  static char out[4096];
  char *copy = strdup (text), *line, *nl;
  enum armour a = ARMOUR_NONE;
  unsigned lineno = 0;

  out[0] = '\0';
  *signed_file = false;
  for (line = copy; line; line = nl ? nl + 1 : NULL) {
    char *t;
    if ((nl = strchr (line, '\n')) != NULL)
      *nl = '\0';
    t = unarmour (line, ++lineno, &a, signed_file);
    if (t) {
      if (out[0])
        strcat (out, "|");
      strcat (out, t);
    }
  }
  free (copy);
  return out;
}

int
main (void)
{
  bool s;

  ok (strcmp (kept ("a  x\n# comment\nb  y", &s), "a  x|b  y") == 0 && !s,
      "comments are skipped, other lines kept");
  ok (strcmp (kept ("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n"
                    "# x.iso: 10 bytes\nSHA256 (x.iso) = ab\n"
                    "- -leading dash\n"
                    "-----BEGIN PGP SIGNATURE-----\n\nAAAA\n"
                    "-----END PGP SIGNATURE-----\nSHA256 (evil) = cd", &s),
              "SHA256 (x.iso) = ab|-leading dash") == 0 && s,
      "a clear-signed file: the signed lines only, unescaped");
  ok (strcmp (kept ("-----BEGIN PGP SIGNED MESSAGE-----\r\nHash: SHA256\r\n"
                    "\r\nSHA256 (y) = 01\r\n"
                    "-----BEGIN PGP SIGNATURE-----\r\n", &s),
              "SHA256 (y) = 01\r") == 0 && s,
      "CRLF armour is recognised");
  ok (strcmp (kept ("a  x\n-----BEGIN PGP SIGNED MESSAGE-----\nb  y", &s),
              "a  x|-----BEGIN PGP SIGNED MESSAGE-----|b  y") == 0 && !s,
      "the armour counts only on the first line");
  return done_testing ();
}
