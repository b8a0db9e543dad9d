/* nbdkit-blkhash: checksum lines, written as sha256sum writes them and
 * read as sha256sum -c reads them.
 */
#ifndef BLKHASH_SUMLINE_H
#define BLKHASH_SUMLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A NAME containing '\\', a newline or a carriage return is written
 * with "\\\\", "\\n" and "\\r" escapes, as sha256sum does, and the
 * line then starts with '\\'.
 */
extern bool blk_name_needs_escape (const char *name);
extern void blk_fput_name (FILE *fp, const char *name, bool escape);
/* "HEX  NAME\n" */
extern void blk_fput_sum_line (FILE *fp, const char *hex, const char *name);

/* Split one line of a checksum file in place into its hex and its
 * name: "HEX  NAME" or "HEX *NAME", where a line starting with '\\'
 * has "\\\\", "\\n" and "\\r" escapes in NAME.  line is
 * NUL-terminated; trailing '\n' and '\r' are dropped first.  HEX must
 * be exactly hexlen hex digits and NAME must not be empty.
 *
 * Returns 0 with *hex and *name pointing into line, or -1 if the line
 * is not well formed (line may then be changed).
 */
extern int blk_sum_line_parse (char *line, size_t hexlen,
                               char **hex, char **name);

#endif /* BLKHASH_SUMLINE_H */
