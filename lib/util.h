/* nbdkit-blkhash: sizes, hex and view names. */
#ifndef BLKHASH_UTIL_H
#define BLKHASH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Parse "123", "64K", "1M", "2G", "1T" (powers of 1024, optional "iB"
 * or "B").  Returns NULL on success, else a static message.
 */
extern const char *blk_parse_size (const char *s, uint64_t *out);

/* Lower-case hex of len bytes into out (2*len+1 bytes). */
extern void blk_hex (const uint8_t *buf, size_t len, char *out);

/* Checksum lines as sha256sum writes them: a NAME containing '\\' or a
 * newline is written with "\\\\" and "\\n" escapes, and the line then
 * starts with '\\'.
 */
extern bool blk_name_needs_escape (const char *name);
extern void blk_fput_name (FILE *fp, const char *name, bool escape);
/* "HEX  NAME\n" */
extern void blk_fput_sum_line (FILE *fp, const char *hex, const char *name);

/* "@blkhash", the marker that turns an export name into its view. */
#define BLK_VIEW_MARKER "@blkhash"

/* A view name NAME@blkhash[:DIGEST[/BLOCKSIZE]] split into its parts. */
struct blk_view_name {
  char *base;                   /* NAME, malloc'd */
  char *digest;                 /* DIGEST or NULL (default), malloc'd */
  uint64_t block_size;          /* 0 = default */
};

/* Returns 1 if name is a view name (parts filled, free with
 * blk_view_name_free), 0 if it is not, -1 with *msg set if it is a
 * malformed view name (or out of memory).
 */
extern int blk_view_name_parse (const char *name, struct blk_view_name *v,
                                const char **msg);
extern void blk_view_name_free (struct blk_view_name *v);

/* Build NAME@blkhash[:DIGEST][/BLOCKSIZE] (malloc'd, NULL on ENOMEM).
 * digest may be NULL and block_size 0 for the defaults.
 */
extern char *blk_view_name_build (const char *base, const char *digest,
                                  uint64_t block_size);

#endif /* BLKHASH_UTIL_H */
