/* nbdkit-blkhash: reading checksum lines, as sha256sum -c does.
 *
 * The writer is blk_fput_sum_line in util.h.
 */
#ifndef BLKHASH_SUMLINE_H
#define BLKHASH_SUMLINE_H

#include <stddef.h>

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
