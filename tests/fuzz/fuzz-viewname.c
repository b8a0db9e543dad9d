/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Fuzz target: view names NAME@blkhash[:DIGEST[/BLOCKSIZE]] and
 * NAME@digest[:DIGEST], as the filter gets them from any client as the
 * export name.
 *
 * Whether a name is a view is checked against a plain reading of the
 * rule, and a view name's parts, built into a name again with
 * blk_view_name_build_range, must parse back to the same parts.  A
 * range (",range=OFFSET+LENGTH") is never empty nor ends past 2^63-1,
 * and is spelt after the options and before the nonce.
 */
#include <config.h>

#include <stdbool.h>

#include "blkhash.h"
#include "util.h"
#include "viewname.h"
#include "fuzz.h"

#define MARKER_LEN (sizeof BLK_VIEW_MARKER - 1)
#define PLAIN_LEN (sizeof BLK_PLAIN_MARKER - 1)

static bool
marker_at (const char *p, const char *marker, size_t len)
{
  return strncmp (p, marker, len) == 0 &&
    (p[len] == '\0' || p[len] == ':' || p[len] == ',');
}

/* The rule, slowly: some "@blkhash" or "@digest" followed by the end,
 * ':' or ',' (the nonce).
 */
static bool
is_view_name (const char *name)
{
  for (const char *p = name; *p; p++)
    if (marker_at (p, BLK_VIEW_MARKER, MARKER_LEN) ||
        marker_at (p, BLK_PLAIN_MARKER, PLAIN_LEN))
      return true;
  return false;
}

static bool
same_parts (const struct blk_view_name *a, const struct blk_view_name *b)
{
  return strcmp (a->base, b->base) == 0 &&
    (a->digest && b->digest ? strcmp (a->digest, b->digest) == 0
     : a->digest == b->digest) &&
    a->block_size == b->block_size && a->plain == b->plain &&
    (a->nonce && b->nonce ? strcmp (a->nonce, b->nonce) == 0
     : a->nonce == b->nonce) &&
    a->range.offset == b->range.offset && a->range.length == b->range.length;
}

static char *
build (const struct blk_view_name *v)
{
  return v->plain
    ? blk_plain_view_name_build_range (v->base, v->digest, &v->range,
                                       v->nonce)
    : blk_view_name_build_range (v->base, v->digest, v->block_size,
                                 &v->range, v->nonce);
}

static void
check_view (const char *name, const struct blk_view_name *v)
{
  const size_t base_len = strlen (v->base);
  struct blk_view_name again;
  bool view;
  char *built, *rebuilt;

  /* NAME is a prefix, followed by the marker. */
  PROPERTY (strncmp (name, v->base, base_len) == 0);
  PROPERTY (v->plain
            ? strncmp (name + base_len, BLK_PLAIN_MARKER, PLAIN_LEN) == 0
            : strncmp (name + base_len, BLK_VIEW_MARKER, MARKER_LEN) == 0);
  PROPERTY (!v->plain || v->block_size == 0);
  PROPERTY (v->digest == NULL || v->plain ||
            (*v->digest != '\0' && strchr (v->digest, '/') == NULL));
  PROPERTY (v->block_size <= INT64_MAX);
  built = build (v);
  PROPERTY (built != NULL);
  /* A nonce is spelt last: ",nonce=HEX". */
  if (v->nonce) {
    const size_t n = strlen (v->nonce), len = strlen (built);
    PROPERTY (blk_nonce_valid (v->nonce));
    PROPERTY (len > n + strlen (BLK_NONCE_OPTION) &&
              strcmp (built + len - n, v->nonce) == 0 &&
              strncmp (built + len - n - strlen (BLK_NONCE_OPTION),
                       BLK_NONCE_OPTION, strlen (BLK_NONCE_OPTION)) == 0);
  }
  /* A range: never empty, ending by 2^63-1, spelt last but the nonce
   * as ",range=" and blk_format_range's spelling.
   */
  size_t range_len = 0;
  PROPERTY (v->range.length || v->range.offset == 0);
  if (v->range.length) {
    char r[BLK_RANGE_STR_MAX];
    const size_t n = strlen (blk_format_range (&v->range, r));
    const size_t len = strlen (built) -
      (v->nonce ? strlen (BLK_NONCE_OPTION) + strlen (v->nonce) : 0);
    struct blk_range back;
    range_len = strlen (BLK_RANGE_OPTION) + n;
    PROPERTY (v->range.offset <= INT64_MAX - v->range.length);
    PROPERTY (len > range_len &&
              strncmp (built + len - range_len, BLK_RANGE_OPTION,
                       strlen (BLK_RANGE_OPTION)) == 0 &&
              strncmp (built + len - n, r, n) == 0);
    PROPERTY (blk_parse_range (r, &back) == NULL &&
              back.offset == v->range.offset &&
              back.length == v->range.length);
  }
  if (v->block_size) {
    /* The block size is spelt last but the range and nonce, shortest
     * (K or M for every valid blkhash block size, 96K included), and
     * reads back.
     */
    char bs[BLK_BLOCK_SIZE_STR_MAX];
    const size_t n = strlen (blk_format_block_size (v->block_size, bs));
    const size_t len = strlen (built) - range_len -
      (v->nonce ? strlen (BLK_NONCE_OPTION) + strlen (v->nonce) : 0);
    uint64_t back;
    PROPERTY (len > n && built[len - n - 1] == '/' &&
              strncmp (built + len - n, bs, n) == 0);
    PROPERTY (blk_parse_size (bs, &back) == NULL && back == v->block_size);
    if (blk_check_block_size (v->block_size) == NULL)
      PROPERTY (bs[n - 1] == 'K' || bs[n - 1] == 'M');
    if (v->block_size % 1024 != 0)
      PROPERTY (bs[n - 1] >= '0' && bs[n - 1] <= '9');
  }
  PROPERTY (blk_view_name_parse (built, &again, &view) == NULL && view);
  PROPERTY (same_parts (v, &again));

  /* The built spelling is canonical: building again changes nothing. */
  rebuilt = build (&again);
  PROPERTY (rebuilt != NULL && strcmp (built, rebuilt) == 0);
  blk_view_name_free (&again);
  free (built);
  free (rebuilt);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *name = fuzz_string (data, size);
  struct blk_view_name v;
  const char *msg;
  bool view;

  msg = blk_view_name_parse (name, &v, &view);
  PROPERTY (view == is_view_name (name));
  PROPERTY (view || msg == NULL);
  if (view && msg == NULL) {
    check_view (name, &v);
    blk_view_name_free (&v);
  }
  else {
    /* Nothing is left to free. */
    PROPERTY (v.base == NULL && v.digest == NULL && v.nonce == NULL &&
              v.range.offset == 0 && v.range.length == 0);
    if (msg)
      PROPERTY (*msg != '\0');
    /* An explicit block size 0 is refused with the block size rule. */
    if (msg && strcmp (msg, BLK_BLOCK_SIZE_RULE) == 0)
      PROPERTY (strchr (name, '/') != NULL);
  }
  free (name);
  return 0;
}
