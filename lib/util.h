/* nbdkit-blkhash: sizes and hex. */
#ifndef BLKHASH_UTIL_H
#define BLKHASH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Parse "123", "64K", "1M", "2G", "1T" (powers of 1024, optional "iB"
 * or "B").  Returns NULL on success, else a static message.
 */
extern const char *blk_parse_size (const char *s, uint64_t *out);

/* Lower-case hex of len bytes into out (2*len+1 bytes). */
extern void blk_hex (const uint8_t *buf, size_t len, char *out);

#endif /* BLKHASH_UTIL_H */
