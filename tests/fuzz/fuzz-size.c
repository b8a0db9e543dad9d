/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Fuzz target: size strings ("64K", "1MiB"), as given in nbdkit
 * parameters, nbdsum options and view names.
 *
 * blk_parse_size is compared with a second, plain reading of the
 * grammar: DIGITS [K|M|G|T|P|E [i]] [B], any case, at most INT64_MAX.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <strings.h>

#include "util.h"
#include "fuzz.h"

/* The suffixes and their shifts; "i" only after a multiplier. */
static const struct {
  const char *suffix;
  int shift;
} suffixes[] = {
  { "", 0 }, { "b", 0 },
  { "k", 10 }, { "kb", 10 }, { "ki", 10 }, { "kib", 10 },
  { "m", 20 }, { "mb", 20 }, { "mi", 20 }, { "mib", 20 },
  { "g", 30 }, { "gb", 30 }, { "gi", 30 }, { "gib", 30 },
  { "t", 40 }, { "tb", 40 }, { "ti", 40 }, { "tib", 40 },
  { "p", 50 }, { "pb", 50 }, { "pi", 50 }, { "pib", 50 },
  { "e", 60 }, { "eb", 60 }, { "ei", 60 }, { "eib", 60 },
};

/* The expected result: true with *out, or false for an error. */
static bool
expected (const char *s, uint64_t *out)
{
  const size_t ndigits = strspn (s, "0123456789");
  unsigned long long v;

  if (ndigits == 0)
    return false;
  errno = 0;
  v = strtoull (s, NULL, 10);
  if (errno == ERANGE)
    return false;
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    if (strcasecmp (s + ndigits, suffixes[i].suffix) == 0) {
      if (v > (uint64_t) INT64_MAX >> suffixes[i].shift)
        return false;
      *out = (uint64_t) v << suffixes[i].shift;
      return true;
    }
  }
  return false;
}

static void
reparse (const char *fmt_result, uint64_t want)
{
  uint64_t v;

  PROPERTY (blk_parse_size (fmt_result, &v) == NULL);
  PROPERTY (v == want);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *s = fuzz_string (data, size), buf[64];
  uint64_t v = 0, want = 0;
  const char *msg = blk_parse_size (s, &v);
  const bool ok = expected (s, &want);

  PROPERTY (msg == NULL || *msg != '\0');
  PROPERTY ((msg == NULL) == ok);
  if (ok) {
    PROPERTY (v == want);
    PROPERTY (v <= INT64_MAX);
    /* The other spellings of the same size read back the same. */
    snprintf (buf, sizeof buf, "%" PRIu64, v);
    reparse (buf, v);
    if (v % 1024 == 0) {
      snprintf (buf, sizeof buf, "%" PRIu64 "KiB", v >> 10);
      reparse (buf, v);
    }
  }
  free (s);
  return 0;
}
