/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: which lines of a checksum file are checksum lines, as
 * sha256sum -c reads them and as distributions publish them: blank
 * lines and '#' comments are not (Fedora's CHECKSUM files), and a
 * clear-signed file (gpg --clearsign, RFC 4880 7.1) is read for its
 * signed lines only.
 *
 * Whatever gpgv accepts as the signed text must be all that is read:
 * armour lines may end in blanks, the blank line after the headers may
 * hold spaces.  A signed message that does not start the file, a
 * header that is not "Name: value", or a message without its
 * signature fails the file: its unsigned lines could not be told from
 * the signed ones.
 */
#include <config.h>

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "unarmour.h"

#define PGP_BEGIN_SIGNED "-----BEGIN PGP SIGNED MESSAGE-----"
#define PGP_BEGIN_SIGNATURE "-----BEGIN PGP SIGNATURE-----"
#define PGP_END_SIGNATURE "-----END PGP SIGNATURE-----"

/* Is the rest of line blanks and its end of line only? */
static bool
unarmour_blank (const char *line)
{
  return line[strspn (line, " \t\r\n")] == '\0';
}

/* Is line s, but for trailing blanks? */
static bool
unarmour_line_is (const char *line, const char *s)
{
  const size_t n = strlen (s);

  return strncmp (line, s, n) == 0 && unarmour_blank (line + n);
}

/* "Name: value", an armour header. */
static bool
unarmour_header (const char *line)
{
  const char *p = line;

  while (isalnum ((unsigned char) *p) || *p == '-')
    p++;
  return p > line && p[0] == ':' && (p[1] == ' ' || p[1] == '\t');
}

char *
unarmour (char *line, unsigned lineno, enum armour *a, bool *signed_file,
          const char **error)
{
  *error = NULL;
  switch (*a) {
  case ARMOUR_NONE:
    if (unarmour_line_is (line, PGP_BEGIN_SIGNED)) {
      if (lineno != 1) {
        *error = "a clear-signed message that does not start the file: "
          "its unsigned lines cannot be told from the signed ones";
        *a = ARMOUR_BAD;
        return NULL;
      }
      *a = ARMOUR_HEADERS;
      *signed_file = true;
      return NULL;
    }
    break;
  case ARMOUR_HEADERS:
    if (unarmour_blank (line))
      *a = ARMOUR_SIGNED;
    else if (!unarmour_header (line)) {
      *error = "a clear-signed message whose armour headers do not end "
        "in a blank line";
      *a = ARMOUR_BAD;
    }
    return NULL;
  case ARMOUR_SIGNED:
    if (unarmour_line_is (line, PGP_BEGIN_SIGNATURE)) {
      *a = ARMOUR_SIGNATURE;
      return NULL;
    }
    if (unarmour_line_is (line, PGP_BEGIN_SIGNED)) {
      *error = "a clear-signed message inside another";
      *a = ARMOUR_BAD;
      return NULL;
    }
    if (strncmp (line, "- ", 2) == 0)
      line += 2;
    break;
  case ARMOUR_SIGNATURE:
    if (unarmour_line_is (line, PGP_END_SIGNATURE))
      *a = ARMOUR_AFTER;
    return NULL;
  case ARMOUR_AFTER:
  case ARMOUR_BAD:
    return NULL;
  }
  /* Comments, as in Fedora's CHECKSUM files ("# NAME: N bytes"), and
   * blank lines, which sha256sum -c skips too.
   */
  if (line[0] == '#' || unarmour_blank (line))
    return NULL;
  return line;
}

const char *
unarmour_end (enum armour a)
{
  switch (a) {
  case ARMOUR_HEADERS:
  case ARMOUR_SIGNED:
  case ARMOUR_SIGNATURE:
    return "a clear-signed message that ends before its signature does";
  default:
    return NULL;
  }
}
