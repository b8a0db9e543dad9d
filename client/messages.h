/* nbdsum: messages on standard error. */
#ifndef NBDSUM_MESSAGES_H
#define NBDSUM_MESSAGES_H

extern const char *progname;

/* Print "nbdsum: NAME: message" on stderr. */
extern void error_at (const char *name, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

#endif /* NBDSUM_MESSAGES_H */
