/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: which lines of a checksum file are checksum lines, as
 * sha256sum -c reads them and as distributions publish them: '#'
 * comments (Fedora's CHECKSUM files), and a clear-signed file (gpg
 * --clearsign, RFC 4880 7.1) read for its signed lines only.
 */
#include <config.h>

#include <stdbool.h>
#include <string.h>

#include "unarmour.h"

#define PGP_BEGIN_SIGNED "-----BEGIN PGP SIGNED MESSAGE-----"
#define PGP_BEGIN_SIGNATURE "-----BEGIN PGP SIGNATURE-----"
#define PGP_END_SIGNATURE "-----END PGP SIGNATURE-----"

/* Is line (its end of line dropped) exactly s? */
static bool
line_is (const char *line, const char *s)
{
  const size_t n = strlen (s);

  return strncmp (line, s, n) == 0 &&
    line[n + strspn (line + n, "\r\n")] == '\0';
}

/* The line to check, or NULL to skip it (the armour, comments), as
 * lineno of a file is read: *a is where it is in a clear-signed file.
 * A dash-escaped line ("- ...") is unescaped.
 */
char *
unarmour (char *line, unsigned lineno, enum armour *a, bool *signed_file)
{
  switch (*a) {
  case ARMOUR_NONE:
    if (lineno == 1 && line_is (line, PGP_BEGIN_SIGNED)) {
      *a = ARMOUR_HEADERS;
      *signed_file = true;
      return NULL;
    }
    break;
  case ARMOUR_HEADERS:
    if (line[strspn (line, "\r\n")] == '\0')
      *a = ARMOUR_SIGNED;
    return NULL;
  case ARMOUR_SIGNED:
    if (line_is (line, PGP_BEGIN_SIGNATURE)) {
      *a = ARMOUR_SIGNATURE;
      return NULL;
    }
    if (strncmp (line, "- ", 2) == 0)
      line += 2;
    break;
  case ARMOUR_SIGNATURE:
    if (line_is (line, PGP_END_SIGNATURE))
      *a = ARMOUR_AFTER;
    return NULL;
  case ARMOUR_AFTER:
    return NULL;
  }
  /* Comments, as in Fedora's CHECKSUM files ("# NAME: N bytes"). */
  if (line[0] == '#')
    return NULL;
  return line;
}
