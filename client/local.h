/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a private nbdkit serving a local file, reached through a
 * Unix socket it inherits (socket activation).
 */
#ifndef NBDSUM_LOCAL_H
#define NBDSUM_LOCAL_H

#include <stdbool.h>

struct local_server;

/* Serve the file at path (name is for messages).  NULL on error
 * (printed).
 */
extern struct local_server *local_server_start (const char *name,
                                                const char *path);
extern const char *local_server_uri (const struct local_server *s);
/* Has the private nbdkit exited (for a clearer error)? */
extern bool local_server_exited (struct local_server *s);
/* Kill it at once, before closing connections that still have requests
 * in flight: a dead server cannot trip over them.
 */
extern void local_server_kill (struct local_server *s);
/* Stop it (SIGTERM, SIGKILL if it lingers) and remove its socket. */
extern void local_server_stop (struct local_server *s);

#endif /* NBDSUM_LOCAL_H */
