/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a result's two forms: its --json members, and the bytes a
 * -j job sends its parent (see result.h).
 */
#include <config.h>

#include <string.h>

#include "json.h"
#include "options.h"
#include "result.h"

void
result_json_members (const struct result *res)
{
  json_string ("checksum", res->hex);
  json_string ("digest", res->digest);
  /* A plain digest has no blocks. */
  if (res->plain)
    json_bool ("plain", true);
  else
    json_uint ("block-size", res->block_size);
  json_uint ("size", res->size);
  if (res->range.length) {
    json_uint ("range-offset", res->range.offset);
    json_uint ("range-length", res->range.length);
  }
  json_string ("method", res->method);
  /* 0 too: a plain view, a server that serves only views. */
  if (strcmp (res->method, "server-side") == 0) {
    json_uint ("spot-checked", res->spot_checked);
    json_bool ("root-checked", res->root_checked);
  }
  if (res->format[0])
    json_string ("format", res->format);
  if (res->incremental) {
    json_name ("since", opts->since);
    json_name ("dirty-bitmap", opts->dirty_bitmap);
    json_uint ("blocks-hashed", res->hashed_blocks);
    json_uint ("blocks-sampled", res->sampled_blocks);
    json_uint ("bytes-read", res->read_bytes);
  }
  json_seconds ("seconds", res->seconds);
}

/* Parent and child are one program: the struct itself is the
 * encoding, but for the name, which points into the sender.
 */
void
result_encode (const struct result *res, void *out)
{
  struct result copy = *res;

  copy.name = NULL;
  memcpy (out, &copy, sizeof copy);
}

/* A string member read from a pipe ends within its array. */
#define END_STRING(a) ((a)[sizeof (a) - 1] = '\0')

void
result_decode (const void *in, const char *name, struct result *res)
{
  memcpy (res, in, sizeof *res);
  res->name = name;
  END_STRING (res->hex);
  END_STRING (res->digest);
  END_STRING (res->method);
  END_STRING (res->format);
}
