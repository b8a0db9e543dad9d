/* nbdsum: blkhash checksums of NBD exports, computed by the server. */
#ifndef NBDSUM_H
#define NBDSUM_H

#include <stdbool.h>
#include <stdint.h>

#include <libnbd.h>

#include "blkhash.h"

#define MAX_CONNECTIONS 64
#define MAX_REQUESTS 1024

struct options {
  unsigned connections;         /* -C, default 4 */
  unsigned requests;            /* -R, default 16 */
  const char *digest;           /* -d, NULL: the server's default */
  uint64_t block_size;          /* --block-size, 0: the server's default */
};

/* What one checksum came to. */
struct result {
  char hex[2 * EVP_MAX_MD_SIZE + 1];
  char digest[BLK_DIGEST_NAME_MAX + 1];
  uint32_t block_size;
  uint64_t size;
  unsigned connections;
};

extern const char *progname;

/* Print "nbdsum: NAME: message" on stderr. */
extern void error_at (const char *name, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

/* options.c */
extern void parse_options (int argc, char **argv, struct options *opts,
                           int *first_arg);

/* remote.c: the checksum of uri computed through its blkhash view.
 * Returns 0, or -1 after printing why.
 */
extern int remote_checksum (const char *uri, const struct options *opts,
                            struct result *res);

#endif /* NBDSUM_H */
