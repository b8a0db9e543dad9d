/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a streaming JSON token reader, for manifests of any size in
 * bounded memory (see jsonread.c for why not a library).
 */
#ifndef NBDSUM_JSONREAD_H
#define NBDSUM_JSONREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum json_token { JSON_EOF, JSON_PUNCT, JSON_STRING, JSON_NUMBER, JSON_WORD };

struct json_reader {
  FILE *fp;
  unsigned long line;           /* where the reader is, from 1 */
  enum json_token type;         /* the last token read */
  int punct;                    /* JSON_PUNCT: one of {}[]:, */
  char *text;                   /* STRING (decoded, UTF-8), NUMBER, WORD */
  size_t len, max;
  char error[160];              /* why the last call failed */
};

/* Read tokens from fp, none longer than max bytes.  -1 if out of
 * memory.
 */
extern int json_reader_init (struct json_reader *r, FILE *fp, size_t max);
extern void json_reader_free (struct json_reader *r);

/* Start again at line 1 (after the caller seeks fp). */
extern void json_reader_reset (struct json_reader *r);

/* The next token: 0, or -1 with r->error set. */
extern int json_next (struct json_reader *r);

/* Is the last token the punctuation c? */
extern bool json_is (const struct json_reader *r, int c);

/* The next token must be the punctuation c: 0, or -1 with r->error. */
extern int json_expect (struct json_reader *r, int c);

/* Within an object: the next member's key in key (at most size bytes
 * with its NUL) and its ':'.  1, or 0 at the object's '}', -1 with
 * r->error.  *first is true right after the '{' and is cleared.
 */
extern int json_next_key (struct json_reader *r, bool *first,
                          char *key, size_t size);

/* Within an array: 1 with the next element's first token read, 0 at
 * the array's ']', -1 with r->error.  *first is true right after the
 * '[' and is cleared.
 */
extern int json_next_element (struct json_reader *r, bool *first);

/* Skip the value whose first token was just read: 0, or -1 with
 * r->error.
 */
extern int json_skip_value (struct json_reader *r);

#endif /* NBDSUM_JSONREAD_H */
