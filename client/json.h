/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: --json, one JSON document per run on standard output,
 * written as results come so that a long run streams.
 *
 * Containers nest; a key is given for members of objects and NULL for
 * array elements and the document itself.  A compact container is
 * written on one line; the others put each member on its own line.
 */
#ifndef NBDSUM_JSON_H
#define NBDSUM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

extern void json_begin_object (const char *key, bool compact);
extern void json_begin_array (const char *key, bool compact);
/* End the innermost container (and the document, at depth 0). */
extern void json_end (void);
/* End containers until depth are open. */
extern void json_end_to (int depth);
/* Containers open: 0 before and after the document. */
extern int json_depth (void);

extern void json_string (const char *key, const char *s);
extern void json_uint (const char *key, uint64_t v);
extern void json_seconds (const char *key, double v);
extern void json_bool (const char *key, bool v);

/* A file or input name: a string with bytes that are not UTF-8 each
 * replaced by U+FFFD, and then, only for such names, member KEY-hex
 * holding the name's bytes in hex.
 */
extern void json_name (const char *key, const char *name);

/* Interrupted by sig: close the document with "interrupted": "SIGxxx"
 * at its top level, if one is open.
 */
extern void json_interrupted (int sig);

/* Is s valid UTF-8 (no overlong forms, no surrogates)? */
extern bool json_utf8_valid (const char *s);

#endif /* NBDSUM_JSON_H */
