/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the checksum lines of a checksum file (see unarmour.c). */
#ifndef NBDSUM_UNARMOUR_H
#define NBDSUM_UNARMOUR_H

#include <stdbool.h>

/* Where a line is in a clear-signed file (RFC 4880, 7.1). */
enum armour {
  ARMOUR_NONE,                  /* not signed (or not yet seen) */
  ARMOUR_HEADERS,               /* "Hash:" lines, up to a blank one */
  ARMOUR_SIGNED,                /* the signed lines, dash-escaped */
  ARMOUR_SIGNATURE,             /* the signature block */
  ARMOUR_AFTER,                 /* after it: not signed, not read */
  ARMOUR_BAD,                   /* the file fails: nothing more read */
};

/* The line to check, or NULL to skip it (the armour, comments, blank
 * lines), as line lineno (from 1) of a file is read: *a (ARMOUR_NONE
 * at the start) is where it is, *signed_file set once it is
 * clear-signed.  *error is set (a static message) when the file fails
 * at this line.
 */
extern char *unarmour (char *line, unsigned lineno, enum armour *a,
                       bool *signed_file, const char **error);
/* At the end of the file: why it fails (a message cut short), or
 * NULL.
 */
extern const char *unarmour_end (enum armour a);

#endif /* NBDSUM_UNARMOUR_H */
