/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: messages on standard error. */
#ifndef NBDSUM_MESSAGES_H
#define NBDSUM_MESSAGES_H

#include <stdbool.h>

extern const char *progname;

/* Print "nbdsum: NAME: message" on stderr. */
extern void error_at (const char *name, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
/* Print "nbdsum: message" on stderr. */
extern void error_msg (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));
/* Print "nbdsum: NAME: message" (NAME NULL: "nbdsum: message") on
 * stderr unless -q, for what is not an error: how an input is hashed,
 * a check nbdsum could not make.  Not kept for --json.
 */
extern void notice_at (const char *name, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
/* "nbdsum: NAME: message" even with -q, and not kept for --json: a
 * warning of -c's (-w), as sha256sum prints it.
 */
extern void warning_at (const char *name, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
/* s on stderr, the bytes a terminal acts on (C0 controls but tab,
 * newline too unless lines, DEL, UTF-8's C1) written as \xHH: a name
 * may come from an image, a checksum file or a server.  Messages go
 * through it; the caller locks stderr if it writes more at once.
 */
extern void messages_put (const char *s, bool lines);
/* -q: notices are not printed from now on. */
extern void messages_quiet (void);

/* For --json: also keep the messages printed from now on, until
 * messages_captured.  Those about subject are kept without the name,
 * others (or all, if subject is NULL) as "NAME: message".
 */
extern void messages_capture (const char *subject);
/* Stop keeping them: the messages kept, one per line, to be freed by
 * the caller; NULL if there were none (or no memory for them).
 */
extern char *messages_captured (void);

#endif /* NBDSUM_MESSAGES_H */
