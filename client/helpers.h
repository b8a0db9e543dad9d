/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: small helpers its files share, which belong to none of them:
 * NBD URIs' export names, where temporary files go, absolute paths,
 * standard output's errors, the clock, allocation a run needs, programs
 * in PATH, a root checked against the server's, and samples' random
 * numbers.  (What kind of thing a name is, names.h says.)  Beneath the
 * options: nothing here reads them.
 */
#ifndef NBDSUM_HELPERS_H
#define NBDSUM_HELPERS_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

/* The export name of an NBD URI as libnbd takes it (RFC 3986): the
 * path without its leading '/', percent-decoded.  NULL if out of
 * memory.
 */
extern char *uri_export_name (const char *uri);
/* src written at dst with every byte but unreserved ones and '/'
 * percent-encoded (dst has room for 3 * strlen (src) + 1).  Returns
 * the end of dst, its '\0'.
 */
extern char *uri_encode (char *dst, const char *src);
/* uri without the query parameters tls-psk-file and tls-certificates,
 * their values percent-decoded in *psk_file and *certificates (NULL:
 * none; malloc'd): for nbdkit's nbd plugin, whose libnbd may not read
 * local files named in a URI.  NULL if out of memory.
 */
extern char *uri_take_tls_files (const char *uri, char **psk_file,
                                 char **certificates);
/* uri without its userinfo (RFC 3986: "USER:PASSWORD@" before the
 * host), whose parts are percent-decoded in *user and *password (NULL:
 * none; malloc'd).  NULL if out of memory.
 */
extern char *uri_take_userinfo (const char *uri, char **user,
                                char **password);
/* uri with its export name replaced, percent-encoded.  NULL if out of
 * memory.
 */
extern char *uri_with_export (const char *uri, const char *export);

/* Where nbdsum's temporary files go: $TMPDIR, or /tmp if it is unset
 * or empty.
 */
extern const char *temp_dir (void);
/* Is arg the long option --name, spelt in full or as a prefix of at
 * least min letters (as getopt_long takes it, where the prefix is not
 * ambiguous), with =VALUE (returned in *value, if value is not NULL)
 * or without?
 */
extern bool long_option_is (const char *arg, const char *name, size_t min,
                            const char **value);
/* A new file there, already unlinked, open for writing and reading:
 * NULL on error (printed, naming name).
 */
extern FILE *temp_file (const char *name);

/* The path another process (a private server) opens path by: made
 * absolute by prefixing the current directory, otherwise as given:
 * symlinks are not resolved, since qemu finds a relative backing file
 * or extent beside the path it is given (and a leading '/' keeps it
 * from reading a protocol prefix such as "nbd:" in a name).  A name of
 * one of nbdsum's own descriptors (/dev/stdin, /dev/fd/N,
 * /proc/self/fd/N) names the file that descriptor is open on, which
 * is another in the server.  Allocated; NULL with errno set on
 * failure.
 */
extern char *absolute_path (const char *path);

/* fflush (stdout), remembering why it first failed. */
extern void stdout_flush (void);
/* fwrite (buf, 1, n, stdout) the same way: false if it failed. */
extern bool stdout_write (const void *buf, size_t n);
/* After a last flush: 0, or why writing standard output failed (the
 * first error).
 */
extern int stdout_error (void);

/* Seconds on the monotonic clock. */
extern double now (void);

/* The next of a sample's pseudo-random numbers (splitmix64), from a
 * state seeded by getrandom.
 */
static inline uint64_t
splitmix64 (uint64_t *state)
{
  uint64_t z = (*state += UINT64_C (0x9E3779B97F4A7C15));

  z = (z ^ (z >> 30)) * UINT64_C (0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* calloc and strdup for state a run cannot go on without: out of
 * memory, they say so and exit.
 */
extern void *calloc_or_exit (size_t n, size_t size)
  __attribute__ ((malloc));
extern char *strdup_or_exit (const char *s) __attribute__ ((malloc));

/* Can execvp find program, as nbdkit's nbd plugin will? */
extern bool in_path (const char *program);

/* Is folded, the checksum a view's block digests give, the root the
 * server said (both p's digests)?  If not, say so for the input name
 * and return false.
 */
struct blk_params;
extern bool root_agrees (const char *name, const struct blk_params *p,
                         const uint8_t *said, const uint8_t *folded);
/* The root of an image of size bytes (p's), folded from the digests
 * of its nblocks blocks, read window blocks at a time, in order, by
 * read (opaque, first, n, digests), which says its own errors.  0, or
 * -1 (error printed as name's).
 */
typedef int fold_read_fn (void *opaque, uint64_t first, uint64_t n,
                          uint8_t *digests);
extern int fold_digests (const char *name, const struct blk_params *p,
                         uint64_t size, uint64_t nblocks, uint64_t window,
                         fold_read_fn *read, void *opaque, uint8_t *root);
/* The struct of type type whose member member p points to. */
#define container_of(p, type, member) \
  ((type *) ((char *) (p) - offsetof (type, member)))

#endif /* NBDSUM_HELPERS_H */
