/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: where an input is served, and connections to it.  A URI
 * names a server; a file gets a private nbdkit (local-nbdkit.c).  Views are
 * never hashed: the server side would hash the view's image, the
 * client side the view's bytes.  Every wait on a connection is one
 * poll loop (source-io.h), so that a signal, --connect-timeout or
 * --reply-timeout ends any.
 */
#ifndef NBDSUM_SOURCE_H
#define NBDSUM_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libnbd.h>

#include "source-io.h"

struct source {
  const char *name;             /* as given on the command line */
  char *uri;                    /* the input's, or the private server's */
  struct local_server *server;  /* private nbdkit, or NULL */
  /* The source a private filter is in front of (source_open_front),
   * owned; NULL if none.
   */
  struct source *behind;
  /* Its server admits only one connection at a time (no multi-conn):
   * so does the filter in front of it.
   */
  bool single;
  /* Other metadata contexts every connection asks for (--since: the
   * dirty bitmap's and the allocation depth), up to a NULL.
   */
#define SOURCE_META_CONTEXTS 2
  const char *meta_contexts[SOURCE_META_CONTEXTS];
};

/* Is name the URI of a blkhash view rather than of an image?  Then say
 * so, and which URI to give instead.
 */
extern bool refuse_view (const char *name);
/* Refuse views; start a private server for a file.  NULL on error
 * (printed).
 */
extern struct source *source_open (const char *name);
/* The same, but a local file is served by qemu-nbd with the dirty
 * bitmap and the allocation depth (--since; local-bitmap.c).
 */
extern struct source *source_open_bitmap (const char *name,
                                          const char *bitmap);
/* The same, a file read as format (NULL: probed; see
 * local_server_start).
 */
extern struct source *source_open_as (const char *name,
                                      const char *format);
/* A private nbdkit --filter=blkhash in front of behind's server (a
 * URI's, or a [ CMD ]'s), which it takes: closed with it, or now on
 * error (printed; NULL).
 */
extern struct source *source_open_front (struct source *behind);
/* Stop the private server, if any. */
extern void source_close (struct source *src);
/* source_connect's flags. */
#define SOURCE_GO    1          /* go to the export: transmission */
#define SOURCE_QUIET 2          /* print nothing; source_error says why */
#define SOURCE_EXTRA 4          /* the server serves another of ours: a
                                   timeout is this connection's own */
/* A handshake with src failed (source_errno says why), on a connection
 * made with flags: what becomes of nbdsum's own server, if src has one
 * (killed, stopped or left to the end).  True if it was killed, stuck.
 */
extern bool source_handshake_failed (const struct source *src,
                                     unsigned flags);
/* Connect to src->uri, export name export_name (NULL: the URI's, which
 * must not be a view), leaving the handle in option mode unless flags
 * has SOURCE_GO.  If deadline is not NULL, *deadline is when
 * --connect-timeout runs out for this connection (0: never), for
 * source_go and source_info on it; if it is not 0 on entry, it comes
 * no later than that (a connection tried again is still the first's).  NULL on error (printed unless
 * SOURCE_QUIET), or quietly after a signal: no new connections then.
 */
extern struct nbd_handle *source_connect (const struct source *src,
                                          const char *export_name,
                                          unsigned flags, double *deadline);

#endif /* NBDSUM_SOURCE_H */
