/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a private server's inside, for the files that start one
 * (local.c runs it, local-log.c reads what it says; local-nbdkit.c
 * and local-bitmap.c say what).
 */
#ifndef NBDSUM_LOCAL_SERVER_H
#define NBDSUM_LOCAL_SERVER_H

#include <stdbool.h>
#include <sys/types.h>

#include "local.h"

struct local_server {
  const char *name;             /* the input, for messages */
  const char *what;             /* the program serving it, for messages */
  const char *format;           /* a file's, static; NULL for [ CMD ] */
  char what_buf[64];
  pid_t pid;
  char *dir, *sock, *uri;
  double handshake_limit;       /* seconds, 0: none */
  int log_fd;                   /* our servers' stderr (unlinked), or -1 */
  struct local_pins pins;       /* what its qemu-nbd may hold open */
  bool verified;                /* ... and it was checked once */
  bool cause_told;              /* a failure named from its log */
  int status;                   /* its wait status once reaped, or -1 */
  bool killed;                  /* by nbdsum (SIGKILL to its group) */
  bool abandoned;               /* a connection left in its handshake */
  bool quit_alone;              /* exited, not told to, after a failure */
  bool command;                 /* a [ CMD ]'s: the user's server */
};

/* In the child: the listening socket as fd 3 for systemd-style socket
 * activation (LISTEN_PID, LISTEN_FDS), then argv; with path, argv[0]
 * is looked for in $PATH.
 */
extern void local_exec_activated (int listen_fd, const char *const *argv,
                                  bool path)
  __attribute__ ((noreturn));
/* The same for argv (char **) given as data: a [ CMD ]'s, qemu-nbd's. */
extern void local_exec_command (int listen_fd, const void *data)
  __attribute__ ((noreturn));
/* A server for the input name, started by exec_fn (given data) on a
 * socket of a private directory, in a process group of its own; its
 * standard error taken for local_server_message when ours.  NULL on
 * error (printed).
 */
extern struct local_server *local_serve (const char *name, const char *what,
                                         void (*exec_fn) (int listen_fd,
                                                          const void *data),
                                         const void *data, bool ours);

/* Its log (local-log.c).  A file in dir for a server's standard
 * error, unlinked at once so that nothing is left behind, whatever
 * ends nbdsum: its descriptor, or -1.
 */
extern int local_log_open (const char *dir);
/* What s wrote on its standard error so far, NUL-terminated (NULL if
 * nothing, or out of memory), and the log is emptied.
 */
extern char *local_log_take (struct local_server *s);
/* The log's length now (0 without one), for local_log_cut. */
extern off_t local_log_mark (const struct local_server *s);
/* What s logged since mark about one connection it failed: the text
 * of its last error, and those lines are cut from the log; NULL if
 * none.  The caller frees it.
 */
extern char *local_log_cut (struct local_server *s, off_t mark);
/* local_server_cause's reading of the log of s, which has exited. */
extern char *local_log_cause (struct local_server *s);
/* Does its log so far say why a read failed? */
extern bool local_log_says_why (struct local_server *s);

#endif /* NBDSUM_LOCAL_SERVER_H */
