/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: view names, NAME@blkhash[:DIGEST[/BLOCKSIZE]] and
 * NAME@digest[:DIGEST], the export names that select a view (see
 * nbdkit-blkhash-filter(1)), each optionally followed by
 * ,range=OFFSET+LENGTH (the view of those bytes, as an image of their
 * own), then by ,nonce=HEX:
 * a client's fresh random value, which the view's header echoes (a
 * file named like a view cannot answer one it never saw).  The view's
 * contents are in header.h.
 */
#ifndef BLKHASH_VIEWNAME_H
#define BLKHASH_VIEWNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* "@blkhash", the marker that turns an export name into its view;
 * "@digest" into its plain-digest view, NAME@digest[:DIGEST].
 */
#define BLK_VIEW_MARKER "@blkhash"
#define BLK_PLAIN_MARKER "@digest"
/* "@bmap": NAME@bmap, its mapped ranges and their sha256 (lib/bmap.h). */
#define BLK_BMAP_MARKER "@bmap"
/* ",nonce=": what follows the view's options; at most BLK_NONCE_MAX
 * lower-case hex digits.
 */
#define BLK_NONCE_OPTION ",nonce="
#define BLK_NONCE_MAX 64
/* ",range=": OFFSET+LENGTH (util.h's blk_parse_range), before any
 * nonce.
 */
#define BLK_RANGE_OPTION ",range="

/* A plain-digest view without a digest name: sha256sum's. */
#define BLK_PLAIN_DEFAULT_DIGEST "sha256"

/* A view name NAME@blkhash[:DIGEST[/BLOCKSIZE]] split into its parts. */
struct blk_view_name {
  char *base;                   /* NAME, malloc'd */
  char *digest;                 /* DIGEST or NULL (default), malloc'd */
  uint64_t block_size;          /* 0 = default */
  bool plain;                   /* NAME@digest: no block size */
  bool bmap;                    /* NAME@bmap: no options */
  char *nonce;                  /* HEX or NULL, malloc'd */
  struct blk_range range;       /* length 0: the whole export */
};

/* Is name a view name?  Returns NULL with *is_view set (and, for a
 * view, its parts in v: free with blk_view_name_free), or a static
 * message if it is a malformed view name (or out of memory).
 */
extern const char *blk_view_name_parse (const char *name,
                                        struct blk_view_name *v,
                                        bool *is_view);
extern void blk_view_name_free (struct blk_view_name *v);

/* Build NAME@blkhash[:DIGEST][/BLOCKSIZE][,nonce=HEX] (malloc'd, NULL
 * on ENOMEM).  digest may be NULL and block_size 0 for the defaults,
 * nonce NULL for none.
 */
extern char *blk_view_name_build (const char *base, const char *digest,
                                  uint64_t block_size, const char *nonce);

/* Build NAME@digest[:DIGEST][,nonce=HEX] (malloc'd, NULL on ENOMEM). */
extern char *blk_plain_view_name_build (const char *base, const char *digest,
                                        const char *nonce);

/* Build NAME@bmap[,nonce=HEX] (malloc'd, NULL on ENOMEM). */
extern char *blk_bmap_view_name_build (const char *base, const char *nonce);

/* The same with ",range=OFFSET+LENGTH" before the nonce when range is
 * not NULL and its length not 0.
 */
extern char *blk_view_name_build_range (const char *base, const char *digest,
                                        uint64_t block_size,
                                        const struct blk_range *range,
                                        const char *nonce);
extern char *blk_plain_view_name_build_range (const char *base,
                                              const char *digest,
                                              const struct blk_range *range,
                                              const char *nonce);

/* The length of name without a view's trailing ",nonce=HEX": what
 * messages show (the nonce is for the server, not the user).
 */
extern size_t blk_view_name_shown_len (const char *name);

/* Is s a nonce: 1 to BLK_NONCE_MAX lower-case hex digits? */
extern bool blk_nonce_valid (const char *s);

#endif /* BLKHASH_VIEWNAME_H */
