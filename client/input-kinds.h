/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the kinds of input, for input_open (input.c) to choose
 * among, and for --since to build on a view's connections.  Nothing
 * else includes this.
 *
 *   input-view.c    the server hashes: its blkhash view
 *   input-plain-view.c    --plain: the server hashes: its plain-digest
 *                         view
 *   input-front.c   a private filter in front of a server without one
 *   input-since.c   --since: a manifest, and the blocks changed since
 *   input-saved.c   a saved --blocks manifest (--diff, --check-manifest)
 *   input-stream.c  bytes read to their end (standard input, a pipe),
 *                   blkhash or --plain
 *   view-open.c     what the views' inputs share: going to a view,
 *                   checking it
 */
#ifndef NBDSUM_INPUT_KINDS_H
#define NBDSUM_INPUT_KINDS_H

#include <stdbool.h>
#include <stdint.h>

#include <libnbd.h>

#include "endpoint.h"
#include "header.h"
#include "input.h"
#include "input-ops.h"
#include "options.h"
#include "source.h"

/* Hex digits of the nonce nbdsum puts in view names (16 bytes). */
#define BLK_VIEW_NONCE_LEN 32

/* What view_input_open hands to front_open when the server has no
 * view of the image.
 */
struct fallback {
  /* The first connection, still negotiating (option mode) after the
   * server refused the view, or NULL: front_open connects anew.
   */
  struct nbd_handle *h;
  /* The image's export name as libnbd had it, to go to with h. */
  char *export_name;
  /* When --connect-timeout runs out for h (0: never); after
   * front_retry, for the next try's connection.
   */
  double deadline;
  /* Why the server does not hash, malloc'd: said once the image is
   * open, so that an image that cannot be opened is not announced as
   * hashed client-side.
   */
  char *notice;
  /* The front's message, taken by front_retry, for front_failed. */
  char *why;
};

/* input-view.c: returns 1 with *in open, 0 when the server has no
 * view of src (*fb filled in), -1 on error (printed).  src is the
 * input's on success.  flags are input_open's: a view that cannot be
 * checked while it is open is checked once its connections are closed,
 * with the spot check (a views-only one: that its image is refused),
 * when its checksum is read, or with INPUT_DIGESTS, by input_verify
 * (INPUT_VERIFY; without, it is trusted, saying so).
 */
extern int view_input_open (struct source *src, const struct hash_spec *spec,
                            unsigned flags, struct input **in,
                            struct fallback *fb);
/* view-open.c: going to a view (input-bmap.c too) and checking it.
 * view_go connects to src (by fb->deadline, if not 0: front_retry's)
 * and goes to the view name_of names for the export, as negotiating.
 * Returns 1 on the view (*vg the caller's), 0
 * when the server has no such export (*fb filled in, with a notice
 * that names the view as what), -1 on error (printed).
 */
typedef char *view_name_fn (const char *base, const struct hash_spec *spec,
                            const char *nonce);
struct view_go {
  struct nbd_handle *h;         /* on the view */
  char *base;                   /* the image's export name, malloc'd */
  char *view_name;              /* malloc'd, with the nonce */
  char *shown;                  /* malloc'd, without: for messages */
  /* Fresh and random, in the view's name: the header must echo it. */
  char nonce[BLK_VIEW_NONCE_LEN + 1];
};
extern int view_go (struct source *src, const struct hash_spec *spec,
                    view_name_fn *name_of, const char *what,
                    struct view_go *vg, struct fallback *fb);
/* Done with vg: its connection closed, saying goodbye first if
 * goodbye (a server admitting a client at a time is then free for the
 * next), its names freed.
 */
extern void view_go_end (struct view_go *vg, bool goodbye);
/* The header of view h, in buf, and h's size: 1, 0 if h is too small
 * to be a view, -1 on error (printed, naming it as header).
 */
extern int view_header_bytes (const char *name, struct nbd_handle *h,
                              const char *header,
                              uint8_t buf[BLK_VIEW_HEADER_SIZE],
                              int64_t *view_size);
/* Does export base, asked on a connection of its own, have the size
 * the view view_name's header hdr describes (with a range: is hdr of
 * the range's size, and the export long enough to hold it)?  1 if so,
 * 0 if the server will not say (a notice, view_unchecked's); with
 * later, 2 then instead, silently: the caller checks once the view is
 * closed (a server that admits one client at a time).  -1 if not
 * (error printed).  A header that says the server serves only views:
 * 0 if the export is refused, -1 if it is served, else as above (the
 * caller's later check: that it is refused).
 */
extern int view_check_image (struct source *src, const char *base,
                             const char *view_name,
                             const struct blk_header *hdr,
                             const struct blk_range *range, bool later);
/* view_check_image's later check of a views-only view, once it is
 * closed: 0 if its image base is refused, or cannot be asked (a
 * notice, view_unchecked's); -1 if it is served (error printed) or
 * after a signal.
 */
extern int view_check_views_only (struct source *src, const char *base,
                                  const char *view_name);
/* The connection of a spot check (spot_check's, spot_check_bmap's) to
 * the image base of a view, gone to it.  With later (the view's name:
 * its connections are closed first), NULL if the server does not serve
 * it (*r -1, error printed), or admits no connection (*r 0,
 * view_unchecked's notice); without, NULL on any failure (*r -1, error
 * printed as name's, of spot-checking what: "view", "bmap"), flags
 * added to source_connect's.  *r -1 too after a signal.
 */
extern struct nbd_handle *view_image (struct source *src, const char *base,
                                      const char *later, unsigned flags,
                                      const char *name, const char *what,
                                      int *r);

/* The view's header did not echo the nonce of its name: not made for
 * this request by the filter (a file named like a view, or a server
 * without the filter answering every name with the image).  Sets fb's
 * notice, naming the view as what.
 */
extern void view_not_echoed (const struct view_go *vg, const char *what,
                             struct fallback *fb);
/* The blkhash view, or the plain-digest one: view_go, then the header
 * read, under the size limit and, unless src->behind, of the image
 * (*checked: what view_check_image said, later passed on, else 0).
 * Returns as view_go: 1 with *vg and *hdr the caller's, else *vg freed
 * and closed.
 */
extern int view_open (struct source *src, const struct hash_spec *spec,
                      bool plain, bool later, struct view_go *vg,
                      struct blk_header *hdr, int *checked,
                      struct fallback *fb);

/* input-plain-view.c: as view_input_open, for --plain (spec->plain):
 * the plain-digest view NAME@digest:ALG.
 */
extern int plain_view_input_open (struct source *src,
                                  const struct hash_spec *spec,
                                  struct input **in, struct fallback *fb);

/* input-front.c: a private nbdkit --filter=blkhash in front of src's
 * server, for the views its server does not have (fb: what
 * view_input_open left, or empty with --client-side), once the image
 * is checked (it opens; under the size limit) and fb's notice said.
 * Takes src and what fb holds; NULL on error (printed, src closed).
 */
extern struct source *front_open (struct source *src, struct fallback *fb,
                                  const struct hash_spec *spec);
/* The front src has no view after all (its server went?): say why,
 * and free what fb holds.
 */
extern void front_failed (struct source *src, struct fallback *fb);
/* The front src has no view because its first connection to the
 * server was closed before the greeting (a server admitting one client
 * at a time, whose slot is not free yet: see source_connect)?  Then
 * wait, free what fb holds and return true, while retry allows: the
 * caller asks again, fb->deadline bounding the next connection.
 * retry->first is when the first try began, retry->pause 0.
 */
extern bool front_retry (struct source *src, struct fallback *fb,
                         struct source_retry *retry);
/* Did the server refuse or drop the private nbdkit's connection to it
 * (what it said kept in fb->why, for front_failed)?
 */
extern bool front_refused (struct source *src, struct fallback *fb);

/* input-view.c: the connections of a view input view_input_open
 * opened, for --since to run with a refill of its own (conns' priv are
 * its own) and to read its sample's digests from.
 */
extern struct endpoint *view_input_endpoint (struct input *in);

/* input-client.c, for --since on a server that admits one client at a
 * time: which blocks to hash, and the digests of those.
 */
struct client_select {
  /* Called in connection h's thread for each segment of blocks
   * [first, first+count): set skip[i] for each block not to hash
   * (skip is all false on entry).  Returns 0, or -1 after
   * endpoint_fail.
   */
  int (*select) (void *opaque, struct endpoint *ep, struct nbd_handle *h,
                 uint64_t first, uint64_t count, bool *skip);
  void *opaque;
};
/* Takes src (closed on error).  NULL on error (printed). */
extern struct input *client_input_open (struct source *src,
                                        const struct hash_spec *spec,
                                        const struct client_select *select);
/* Its connections, to run them and to read its sample from. */
extern struct endpoint *client_input_endpoint (struct input *in);
/* After the run: the digests of blocks [first, first+count) in out,
 * need[i] set for each block not hashed.  Returns the count of those.
 */
extern uint64_t client_input_lookup (struct input *in, uint64_t first,
                                     uint64_t count, uint8_t *out,
                                     bool *need);

/* input-since.c: name now, from the manifest opts->since and the
 * blocks the bitmap opts->dirty_bitmap says were written.  NULL on
 * error (printed).
 */
extern struct input *since_input_open (const char *name,
                                       const struct hash_spec *spec);

/* input-saved.c: the saved manifest at path ("-": standard input),
 * checked.  NULL on error (printed).
 */
extern struct input *saved_input_open (const char *path);

/* input-stream.c: the bytes fd gives (owned: closed with the input),
 * hashed as spec says (a format other than raw is refused).  NULL on
 * error (printed).
 */
extern struct input *stream_input_open (const char *name, int fd,
                                        const struct hash_spec *spec);

#endif /* NBDSUM_INPUT_KINDS_H */
