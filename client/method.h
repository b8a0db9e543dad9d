/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: opening an input with a hashing method.  The server hashes
 * when it serves a blkhash view of the image; otherwise the client
 * does, going on with the connection the server-side attempt left.
 */
#ifndef NBDSUM_METHOD_H
#define NBDSUM_METHOD_H

#include <libnbd.h>

#include "endpoint.h"
#include "options.h"
#include "source.h"

/* What server_side_open hands to client_side_open when the server has
 * no view of the input.
 */
struct fallback {
  /* The first connection, still negotiating (option mode) after the
   * server refused the view, or NULL: client-side connects anew.
   */
  struct nbd_handle *h;
  /* The image's export name as libnbd had it, to go to with h. */
  char *export_name;
  /* When --connect-timeout runs out for h (0: never). */
  double deadline;
  /* Why the server does not hash, malloc'd: said once the image is
   * open, so that an image that cannot be opened is not announced as
   * hashed client-side.
   */
  char *notice;
};

/* serverside.c: returns 1 with *ep ready, 0 when the server has no
 * view of src (said on stderr, and *fb filled in), -1 on error
 * (printed).
 */
extern int server_side_open (struct source *src, const struct hash_spec *spec,
                             struct endpoint **ep, struct fallback *fb);

/* Client-side, the blocks whose digests come from elsewhere
 * (--since: a manifest) are not hashed.
 */
struct cs_select {
  /* Called in connection h's thread for each segment of blocks
   * [first, first+count): set skip[i] for each block not to hash
   * (skip is all false on entry).  Returns 0, or -1 after
   * endpoint_fail.
   */
  int (*select) (void *opaque, struct endpoint *ep, struct nbd_handle *h,
                 uint64_t first, uint64_t count, bool *skip);
  void *opaque;
};

/* clientside.c: takes what fb holds (NULL or empty: connect anew).
 * select may be NULL: every block.  NULL on error (printed).
 */
extern struct endpoint *client_side_open (struct source *src,
                                          const struct hash_spec *spec,
                                          struct fallback *fb,
                                          const struct cs_select *select);

/* After a client-side run: the digests known of blocks [first,
 * first+count) in out, need[i] set for each block not hashed.  Returns
 * the count of those.
 */
extern uint64_t client_side_lookup (struct endpoint *ep, uint64_t first,
                                    uint64_t count, uint8_t *out, bool *need);

#endif /* NBDSUM_METHOD_H */
