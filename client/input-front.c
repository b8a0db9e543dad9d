/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the one engine for a server without a view of the image, or
 * --client-side: a private nbdkit --filter=blkhash nbd in front of it
 * (local.c), whose views are asked like any server's.  The image's
 * bytes cross to this machine and are hashed here, by the filter.
 * Each of nbdsum's connections to it is one to the server (the nbd
 * plugin's shared=false), so -C and -R keep the queue depth they ask
 * for.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "helpers.h"
#include "input-kinds.h"
#include "local.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"
#include "signals.h"
#include "util.h"

/* The image on the server, checked before the filter is put in front
 * of it: the export must open (its own error, not a missing view's),
 * and its size must be under the limit.  fb's connection (still
 * negotiating, after the server refused a view) goes on to it, or a new
 * one is made.  Returns 0 (*multi_conn set), or -1 (error printed).
 */
static int
check_image (struct source *src, struct fallback *fb, const char *export,
             uint64_t block_size, const char *digest, bool *multi_conn)
{
  const bool plain = block_size == 0;
  const uint64_t def = plain ? BLK_MAX_PLAIN_SIZE : BLK_MAX_SIZE;
  struct nbd_handle *h = fb->h;
  uint32_t digest_len = 32;
  struct blk_digest d;
  int64_t size;

  fb->h = NULL;
  if (h && (nbd_set_export_name (h, export) == -1 ||
            source_go (h, fb->deadline) == -1)) {
    if (!stop_signal ())
      error_at (src->name, "%s%s%s: %s",
                export[0] ? "export '" : "the default export",
                export, export[0] ? "'" : "", source_error ());
    nbd_close (h);
    return -1;
  }
  if (h == NULL && (h = source_connect (src, NULL, SOURCE_GO, NULL)) == NULL)
    return -1;
  size = MAX (nbd_get_size (h), INT64_C (0));
  *multi_conn = nbd_can_multi_conn (h) == 1;
  source_shutdown (h);
  nbd_close (h);
  if (!plain && blk_digest_init (&d, digest) == NULL) {
    digest_len = d.len;
    blk_digest_free (&d);
  }
  if (size_refused (src->name, "the image is", size, block_size, digest_len))
    return -1;
  /* --max-size lifted nbdsum's limit, not the server's. */
  if (fb->notice && (uint64_t) size > def) {
    char l[BLK_LIMIT_STR_MAX];
    notice_at (src->name, "the image is over %s, the blkhash filter's "
               "default blkhash-max-size: a server's filter may have "
               "refused its view for that", blk_format_limit (def, l));
  }
  return 0;
}

struct source *
front_open (struct source *src, struct fallback *fb,
            const struct hash_spec *spec)
{
  const struct hash_spec hs = hash_spec_or_defaults (spec);
  CLEANUP_FREE char *export = fb->export_name;
  CLEANUP_FREE char *notice = fb->notice;
  bool multi_conn = false;

  fb->export_name = fb->notice = NULL;
  if (check_image (src, fb, export ? export : "", spec->plain ? 0
                   : hs.block_size, hs.digest, &multi_conn) == -1) {
    source_close (src);
    return NULL;
  }
  if (notice)
    notice_at (src->name, "%s", notice);
  src->single = !multi_conn;
  return source_open_front (src);
}
