/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Fuzz target: --blocks manifests, as nbdsum --diff --manifest,
 * --since and --check-manifest read them (client/manifest.c), linked
 * alone: the reader depends on nothing of nbdsum's.
 *
 * A refused manifest says why; an accepted one says nothing, hands out
 * the digest of each block in order, in pieces of any size, and no
 * block past the last.  For text manifests each digest handed out is
 * checked against a second, plain reading of the lines: the line's
 * hex, or the zero digest on a zero run.  One that carries a checksum
 * must have digests that fold to it, and hands out the same digests
 * again after manifest_rewind; written again by the manifest's writer,
 * in either form, it reads back the same.
 */
#include <config.h>

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include "blkhash.h"
#include "json.h"
#include "manifest.h"
#include "minmax.h"
#include "fuzz.h"

/* Blocks read from an accepted manifest, at most: a line can stand
 * for a zero run of 2^46 blocks.
 */
#define MAX_BLOCKS 4096

/* The reader's messages, counted instead of printed (but looked at,
 * for the sanitizers to see them).
 */
static unsigned messages;

static void
count (const char *path, const char *msg)
{
  PROPERTY (strlen (path) + strlen (msg) > 0);
  messages++;
}

/* No signal stops a fuzz run; a zero run of years is refused by the
 * size limit, as nbdsum's default refuses it.
 */
static const struct manifest_env env = {
  count, NULL, "/tmp", BLK_MAX_SIZE, "--max-size=SIZE lifts it"
};

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

/* Write m again (in JSON if json), and read that back: the same
 * header, checksum root and digests.
 */
static void
rewrite (struct manifest *m, const uint8_t *root, bool json)
{
  const struct blk_params *p = manifest_params (m);
  const uint64_t nblocks = blk_block_count (manifest_size (m), p->block_size);
  const int fd = memfd_create ("rewritten", 0);
  struct json_writer jw = { 0 };
  struct manifest_writer w;
  struct manifest *again;
  uint8_t a[EVP_MAX_MD_SIZE], b[EVP_MAX_MD_SIZE];
  char path[64];
  FILE *fp;

  PROPERTY (fd != -1 && (fp = fdopen (fd, "w")) != NULL);
  PROPERTY (manifest_rewind (m) == 0);
  jw.fp = fp;
  if (json) {
    jw_begin_object (&jw, NULL, false);
    jw_name (&jw, "name", "fuzz");
  }
  manifest_write_begin (&w, fp, json ? &jw : NULL, p, manifest_size (m),
                        root, "client-side");
  for (uint64_t i = 0; i < nblocks; i++) {
    PROPERTY (manifest_digests (m, i, 1, a) == 0);
    manifest_write_blocks (&w, i, 1, a);
  }
  manifest_write_end (&w);
  if (json)
    jw_end (&jw);
  PROPERTY (fflush (fp) == 0);
  snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
  messages = 0;
  again = manifest_open (path, &env);
  PROPERTY (again != NULL && messages == 0);
  PROPERTY (manifest_size (again) == manifest_size (m));
  PROPERTY (strcmp (manifest_params (again)->digest.name, p->digest.name)
            == 0);
  PROPERTY (manifest_params (again)->block_size == p->block_size);
  PROPERTY (manifest_root (again, a) &&
            memcmp (a, root, p->digest.len) == 0);
  PROPERTY (manifest_rewind (m) == 0);
  for (uint64_t i = 0; i < nblocks; i++) {
    PROPERTY (manifest_digests (m, i, 1, a) == 0);
    PROPERTY (manifest_digests (again, i, 1, b) == 0);
    PROPERTY (memcmp (a, b, p->digest.len) == 0);
  }
  manifest_close (again);
  fclose (fp);
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
  m = manifest_open (path, &env);
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
    rewrite (m, want, false);
    rewrite (m, want, true);
  }
  free (text);
  manifest_close (m);
  close (fd);
  return 0;
}
