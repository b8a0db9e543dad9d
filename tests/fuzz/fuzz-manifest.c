/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Fuzz target: --blocks manifests, as nbdsum --diff --manifest,
 * --since and --check-manifest read them (client/manifest.c).
 *
 * A refused manifest says why; an accepted one says nothing, hands out
 * the digest of each block in order, in pieces of any size, and no
 * block past the last.  For text manifests each digest handed out is
 * checked against a second, plain reading of the lines: the line's
 * hex, or the zero digest on a zero run.  One that carries a checksum
 * must have digests that fold to it, and hands out the same digests
 * again after manifest_rewind.
 */
#include <config.h>

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include "blkhash.h"
#include "manifest.h"
#include "messages.h"
#include "minmax.h"
#include "signals.h"
#include "fuzz.h"

/* No signal stops a fuzz run. */
int
stop_signal (void)
{
  return 0;
}

/* Blocks read from an accepted manifest, at most: a line can stand
 * for a zero run of 2^46 blocks.
 */
#define MAX_BLOCKS 4096

/* manifest.c's messages, counted instead of printed (but formatted,
 * for the sanitizers to see the arguments).
 */
const char *progname = "nbdsum";
static unsigned messages;

static void __attribute__ ((format (printf, 1, 0)))
count (const char *fmt, va_list ap)
{
  char buf[256];

  vsnprintf (buf, sizeof buf, fmt, ap);
  messages++;
}

void
error_at (const char *name, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  count (fmt, ap);
  va_end (ap);
}

void
error_msg (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  count (fmt, ap);
  va_end (ap);
}

/* Block b's digest by a plain reading of an accepted text manifest:
 * the line 'OFFSET LENGTH HEX|zero' whose range holds the block.
 */
static void
text_digest (const char *text, const struct blk_params *p, uint64_t b,
             uint8_t *out)
{
  const char *line = strchr (text, '\n') + 1;
  const uint64_t off = b * p->block_size;

  for (; *line; line = strchr (line, '\n') + 1) {
    char *end;
    const uint64_t o = strtoull (line, &end, 10);
    const uint64_t l = strtoull (end + 1, &end, 10);

    PROPERTY (*end == ' ');
    if (off < o || off >= o + l)
      continue;
    if (strncmp (end + 1, "zero\n", 5) == 0) {
      memcpy (out, p->zero_digest, p->digest.len);
      return;
    }
    for (size_t i = 0; i < p->digest.len; i++) {
      char hex[3] = { end[1 + 2 * i], end[2 + 2 * i], '\0' };
      PROPERTY (isxdigit ((unsigned char) hex[0]) &&
                isxdigit ((unsigned char) hex[1]));
      out[i] = strtoul (hex, NULL, 16);
    }
    PROPERTY (end[1 + 2 * p->digest.len] == '\n');
    return;
  }
  PROPERTY (!"a block no line holds");
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const int fd = memfd_create ("manifest", 0);
  struct manifest *m;
  char path[64];

  PROPERTY (fd != -1);
  PROPERTY (write (fd, data, size) == (ssize_t) size);
  snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
  messages = 0;
  m = manifest_open (path);
  if (m == NULL) {
    PROPERTY (messages > 0);
    close (fd);
    return 0;
  }
  PROPERTY (messages == 0);

  const struct blk_params *p = manifest_params (m);
  const uint64_t nblocks = blk_block_count (manifest_size (m), p->block_size);
  const uint64_t n = MIN (nblocks, (uint64_t) MAX_BLOCKS);
  char *text = fuzz_string (data, size);
  uint8_t out[8 * EVP_MAX_MD_SIZE], want[EVP_MAX_MD_SIZE];
  uint64_t b = 0, count;

  /* An accepted text manifest has no NUL, and is all lines. */
  PROPERTY (text[0] != '#' || strlen (text) == size);
  PROPERTY (text[0] != '#' || text[size - 1] == '\n');
  for (unsigned step = 1; b < n; b += count, step = step % 7 + 1) {
    count = MIN (n - b, (uint64_t) step);
    PROPERTY (manifest_digests (m, b, count, out) == 0);
    if (text[0] != '#')
      continue;
    for (uint64_t i = 0; i < count; i++) {
      text_digest (text, p, b + i, want);
      PROPERTY (memcmp (out + i * p->digest.len, want, p->digest.len) == 0);
    }
  }
  /* Nothing past the last block. */
  if (n == nblocks) {
    messages = 0;
    PROPERTY (manifest_digests (m, b, 1, out) == -1);
    PROPERTY (messages == 1);
  }
  /* The checksum it carries is that of the digests, read again. */
  if (manifest_root (m, want) && n == nblocks) {
    struct blk_root r;
    uint8_t got[EVP_MAX_MD_SIZE];

    PROPERTY (manifest_rewind (m) == 0);
    PROPERTY (blk_root_init (&r, p) == 0);
    for (b = 0; b < n; b++) {
      PROPERTY (manifest_digests (m, b, 1, out) == 0);
      PROPERTY (blk_root_add (&r, out, 1) == 0);
    }
    PROPERTY (blk_root_final (&r, manifest_size (m), got) == 0);
    PROPERTY (memcmp (got, want, p->digest.len) == 0);
    blk_root_free (&r);
  }
  free (text);
  manifest_close (m);
  close (fd);
  return 0;
}
