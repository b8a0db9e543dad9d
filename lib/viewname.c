/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: view names. */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blkhash.h"
#include "util.h"
#include "viewname.h"

/* The marker must be followed by the end of the name or by ':'; the
 * last such occurrence is the one.
 */
static const char *
find_marker (const char *name)
{
  const size_t mlen = strlen (BLK_VIEW_MARKER);
  const char *found = NULL, *p;

  for (p = strstr (name, BLK_VIEW_MARKER); p;
       p = strstr (p + 1, BLK_VIEW_MARKER))
    if (p[mlen] == '\0' || p[mlen] == ':')
      found = p;
  return found;
}

const char *
blk_view_name_parse (const char *name, struct blk_view_name *v,
                     bool *is_view)
{
  const char *m = find_marker (name), *opts, *slash, *msg;

  memset (v, 0, sizeof *v);
  *is_view = m != NULL;
  if (m == NULL)
    return NULL;

  v->base = strndup (name, m - name);
  if (v->base == NULL)
    goto enomem;
  /* "a@blkhash@blkhash" would be the view of a view: refused, so that
   * no name can mean the data of another view's base.
   */
  if (find_marker (v->base)) {
    msg = "more than one " BLK_VIEW_MARKER " marker (a view has no view)";
    goto bad;
  }
  opts = m + strlen (BLK_VIEW_MARKER);
  if (*opts == ':') {
    opts++;
    slash = strchr (opts, '/');
    size_t dlen = slash ? (size_t) (slash - opts) : strlen (opts);
    if (dlen > 0) {
      v->digest = strndup (opts, dlen);
      if (v->digest == NULL)
        goto enomem;
    }
    if (slash) {
      if ((msg = blk_parse_size (slash + 1, &v->block_size)) != NULL)
        goto bad;
      /* 0 means "the default" inside, never on the wire. */
      if (v->block_size == 0) {
        msg = BLK_BLOCK_SIZE_RULE;
        goto bad;
      }
    }
    else if (dlen == 0) {
      msg = "empty view options after ':'";
      goto bad;
    }
  }
  return NULL;

 enomem:
  msg = "out of memory";
 bad:
  blk_view_name_free (v);
  return msg;
}

void
blk_view_name_free (struct blk_view_name *v)
{
  free (v->base);
  free (v->digest);
  v->base = v->digest = NULL;
}

char *
blk_view_name_build (const char *base, const char *digest,
                     uint64_t block_size)
{
  char *s = NULL;
  char bs[BLK_BLOCK_SIZE_STR_MAX];
  int r;

  r = asprintf (&s, "%s" BLK_VIEW_MARKER "%s%s%s%s", base,
                digest || block_size ? ":" : "", digest ? digest : "",
                block_size ? "/" : "",
                block_size ? blk_format_block_size (block_size, bs) : "");
  return r == -1 ? NULL : s;
}
