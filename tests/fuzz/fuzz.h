/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: what the fuzz targets share.
 *
 * Each fuzz-*.c is one libFuzzer target.  It is linked with libFuzzer
 * by make fuzz (clang), and with driver.c for make check.
 */
#ifndef BLKHASH_FUZZ_H
#define BLKHASH_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* A property every input must keep.  abort() is what both drivers
 * catch and report with the input.
 */
#define PROPERTY(cond)                                                  \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf (stderr, "%s:%d: property failed: %s\n",                  \
               __FILE__, __LINE__, #cond);                              \
      abort ();                                                         \
    }                                                                   \
  } while (0)

/* The input as a C string, as it would reach a parser from argv, an
 * export name or a line: up to its first NUL.
 */
static inline char *
fuzz_string (const uint8_t *data, size_t size)
{
  char *s = malloc (size + 1);

  if (s == NULL)
    abort ();
  memcpy (s, data, size);
  s[size] = '\0';
  return s;
}

static inline char *
fuzz_strdup (const char *s)
{
  char *r = strdup (s);

  if (r == NULL)
    abort ();
  return r;
}

#endif /* BLKHASH_FUZZ_H */
