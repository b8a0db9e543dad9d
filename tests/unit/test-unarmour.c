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

/* Why the last text fails, or NULL. */
static const char *bad;

/* The lines of text (separated by '\n') that unarmour keeps, joined
 * by '|', and whether it saw a signed file; bad set if it fails.
 */
static char *
kept (const char *text, bool *signed_file)
{
  static char out[4096];
  char *copy = strdup (text), *line, *nl;
  enum armour a = ARMOUR_NONE;
  unsigned lineno = 0;
  const char *why = NULL;

  out[0] = '\0';
  *signed_file = false;
  bad = NULL;
  for (line = copy; line; line = nl ? nl + 1 : NULL) {
    char *t;
    if ((nl = strchr (line, '\n')) != NULL)
      *nl = '\0';
    t = unarmour (line, ++lineno, &a, signed_file, &why);
    if (why && !bad)
      bad = why;
    if (t) {
      if (out[0])
        strcat (out, "|");
      strcat (out, t);
    }
  }
  bad = bad ? bad : unarmour_end (a);
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
              "a  x") == 0 && !s && bad,
      "the armour counts only on the first line: later, it fails the file");
  /* What gpgv accepts must not let unsigned lines in. */
  ok (strcmp (kept ("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n \n"
                    "SHA256 (a) = 00\n-----BEGIN PGP SIGNATURE-----\n\n"
                    "AAAA\n-----END PGP SIGNATURE-----\nSHA256 (b) = 11", &s),
              "SHA256 (a) = 00") == 0 && s && !bad,
      "a separator of spaces ends the headers");
  ok (strcmp (kept ("-----BEGIN PGP SIGNED MESSAGE----- \nHash: SHA256\n\n"
                    "SHA256 (a) = 00\n-----BEGIN PGP SIGNATURE-----\t\n\n"
                    "AAAA\n-----END PGP SIGNATURE-----\nSHA256 (b) = 11", &s),
              "SHA256 (a) = 00") == 0 && s && !bad,
      "armour lines with trailing blanks are armour");
  kept ("SHA256 (b) = 11\n-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256"
        "\n\nSHA256 (a) = 00\n-----BEGIN PGP SIGNATURE-----\n", &s);
  ok (bad != NULL, "a signed message after unsigned lines fails the file");
  kept ("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\nSHA256 (a) = 00"
        "\n-----BEGIN PGP SIGNATURE-----\n\nAAAA\n", &s);
  ok (bad != NULL, "a header that is not one fails the file");
  kept ("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nSHA256 (a) = 00",
        &s);
  ok (bad != NULL, "a signed message without its signature fails the file");
  ok (strcmp (kept ("a  x\n\n  \t\nb  y", &s), "a  x|b  y") == 0 && !bad,
      "blank lines are skipped, as sha256sum -c does");
  return done_testing ();
}
