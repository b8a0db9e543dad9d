/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: view names, NAME@blkhash[:DIGEST[/BLOCKSIZE]], the
 * export names that select a view (see nbdkit-blkhash-filter(1)).
 * The view's contents are in header.h.
 */
#ifndef BLKHASH_VIEWNAME_H
#define BLKHASH_VIEWNAME_H

#include <stdbool.h>
#include <stdint.h>

/* "@blkhash", the marker that turns an export name into its view;
 * "@digest" into its plain-digest view, NAME@digest[:DIGEST].
 */
#define BLK_VIEW_MARKER "@blkhash"
#define BLK_PLAIN_MARKER "@digest"
/* A plain-digest view without a digest name: sha256sum's. */
#define BLK_PLAIN_DEFAULT_DIGEST "sha256"

/* A view name NAME@blkhash[:DIGEST[/BLOCKSIZE]] split into its parts. */
struct blk_view_name {
  char *base;                   /* NAME, malloc'd */
  char *digest;                 /* DIGEST or NULL (default), malloc'd */
  uint64_t block_size;          /* 0 = default */
  bool plain;                   /* NAME@digest: no block size */
};

/* Is name a view name?  Returns NULL with *is_view set (and, for a
 * view, its parts in v: free with blk_view_name_free), or a static
 * message if it is a malformed view name (or out of memory).
 */
extern const char *blk_view_name_parse (const char *name,
                                        struct blk_view_name *v,
                                        bool *is_view);
extern void blk_view_name_free (struct blk_view_name *v);

/* Build NAME@blkhash[:DIGEST][/BLOCKSIZE] (malloc'd, NULL on ENOMEM).
 * digest may be NULL and block_size 0 for the defaults.
 */
extern char *blk_view_name_build (const char *base, const char *digest,
                                  uint64_t block_size);

/* Build NAME@digest[:DIGEST] (malloc'd, NULL on ENOMEM). */
extern char *blk_plain_view_name_build (const char *base, const char *digest);

#endif /* BLKHASH_VIEWNAME_H */
