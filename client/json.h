/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: JSON output, written as results come so that a long run
 * streams.  A struct json_writer is one document being written; the
 * run's --json document on standard output is json_out, which the
 * json_* names write to.
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
#include <stdio.h>

#define JSON_MAX_DEPTH 8

struct json_writer {
  FILE *fp;                     /* NULL: standard output */
  int depth;                    /* containers open */
  struct json_level {
    bool array;
    bool compact;
    bool empty;                 /* nothing written in it yet */
  } stack[JSON_MAX_DEPTH];
};

extern void jw_begin_object (struct json_writer *w, const char *key,
                             bool compact);
extern void jw_begin_array (struct json_writer *w, const char *key,
                            bool compact);
/* End the innermost container (and the document, at depth 0). */
extern void jw_end (struct json_writer *w);
/* End containers until depth are open. */
extern void jw_end_to (struct json_writer *w, int depth);

extern void jw_string (struct json_writer *w, const char *key,
                       const char *s);
extern void jw_uint (struct json_writer *w, const char *key, uint64_t v);
extern void jw_seconds (struct json_writer *w, const char *key, double v);
extern void jw_bool (struct json_writer *w, const char *key, bool v);

/* A file or input name: a string with bytes that are not UTF-8 each
 * replaced by U+FFFD, and then, only for such names, member KEY-hex
 * holding the name's bytes in hex.
 */
extern void jw_name (struct json_writer *w, const char *key,
                     const char *name);

/* Interrupted by sig: close the document with "interrupted": "SIGxxx"
 * at its top level, if one is open.
 */
extern void jw_interrupted (struct json_writer *w, int sig);

/* The run's --json document, on standard output. */
extern struct json_writer json_out;

#define json_begin_object(key, compact) \
  jw_begin_object (&json_out, (key), (compact))
#define json_begin_array(key, compact) \
  jw_begin_array (&json_out, (key), (compact))
#define json_end() jw_end (&json_out)
#define json_end_to(depth) jw_end_to (&json_out, (depth))
#define json_string(key, s) jw_string (&json_out, (key), (s))
#define json_uint(key, v) jw_uint (&json_out, (key), (v))
#define json_seconds(key, v) jw_seconds (&json_out, (key), (v))
#define json_bool(key, v) jw_bool (&json_out, (key), (v))
#define json_name(key, name) jw_name (&json_out, (key), (name))
#define json_interrupted(sig) jw_interrupted (&json_out, (sig))

#endif /* NBDSUM_JSON_H */
