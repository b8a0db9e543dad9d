/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: where an input is served, and connections to it.  A URI
 * names a server; a file gets a private nbdkit (local.c).  Views are
 * never hashed: the server side would hash the view's image, the
 * client side the view's bytes.
 */
#ifndef NBDSUM_SOURCE_H
#define NBDSUM_SOURCE_H

#include <stdbool.h>

#include <libnbd.h>

struct source {
  const char *name;             /* as given on the command line */
  char *uri;                    /* the input's, or the private server's */
  struct local_server *server;  /* private nbdkit, or NULL */
};

/* Is name the URI of a blkhash view rather than of an image?  Then say
 * so, and which URI to give instead.
 */
extern bool refuse_view (const char *name);
/* Refuse views; start a private server for a file.  NULL on error
 * (printed).
 */
extern struct source *source_open (const char *name);
/* Stop the private server, if any. */
extern void source_close (struct source *src);
/* Connect to src->uri, export name export_name (NULL: the URI's, which
 * must not be a view).  The handle is left in option mode when go is
 * false.  NULL on error (printed).
 */
extern struct nbd_handle *source_connect (const struct source *src,
                                          const char *export_name, bool go);

#endif /* NBDSUM_SOURCE_H */
