/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the manifest (see manifest.h): opening one, checking every
 * entry and the checksum it carries, handing out its digests, and
 * writing one; the two forms' lines are manifest-text.c's and
 * manifest-json.c's.
 *
 * A manifest is read more than once: first to check all of it before
 * anything is hashed or printed, then again (and for --since, a third
 * time) as its digests are asked for, so that a manifest of any size
 * needs no memory.  One that cannot be read twice (a pipe) is copied
 * to a temporary file first.  Every entry, and the checksum the
 * digests fold to, is checked again on each reading.
 */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "blkhash.h"
#include "cleanup.h"
#include "manifest-internal.h"
#include "minmax.h"
#include "util.h"

/* Fold an entry's digests, to check the root at the end.  Without a
 * root there is nothing to check: a zero run of an 8 TiB hole would
 * cost 4 GiB of hashing for nothing.  A zero run is folded 16 KiB of
 * digests at a time (microseconds), but a line can claim any length
 * (64 TiB: 32 GiB of digests, many seconds): a signal stops it between
 * two of those.
 */
static int
fold_entry (struct manifest *m, const struct entry *e)
{
  uint64_t n = blk_block_count (e->length, m->p.block_size);
  int r = 0;

  if (m->root_hex[0] == '\0')
    return 0;
  if (!e->zero)
    r = blk_root_add (&m->fold, e->digest, 1);
  while (r == 0 && e->zero && n > 0) {
    const size_t k = MIN (n, (uint64_t) m->p.zero_run_count);
    if (manifest_stopped (m))
      return -1;
    r = blk_root_add (&m->fold, m->p.zero_run, k);
    n -= k;
  }
  return r == -1 ? manifest_fail (m, "%s failed", m->p.digest.name) : 0;
}

/* Once every entry is read: do they fold to the root it carries? */
static int
check_root (struct manifest *m)
{
  uint8_t got[BLK_DIGEST_MAX];
  char hex[2 * BLK_DIGEST_MAX + 1];

  if (m->root_hex[0] == '\0')
    return 0;
  if (blk_root_final (&m->fold, m->size, got) == -1)
    return manifest_fail (m, "%s failed", m->p.digest.name);
  if (memcmp (got, m->root, m->p.digest.len) != 0) {
    blk_hex (got, m->p.digest.len, hex);
    m->lineno = 0;
    return manifest_fail (m, "its block digests give the checksum %s, "
                          "not the %s it carries: corrupt or edited",
                          hex, m->root_hex);
  }
  return 0;
}

/* Each entry starts where the last ended and is whole blocks: a data
 * block at its length, or a run of full zero blocks.
 */
static int
check_entry (struct manifest *m, const struct entry *e)
{
  const uint32_t bs = m->p.block_size;

  if (e->offset != m->pos)
    return manifest_fail (m, "offset %" PRIu64 ", expected %" PRIu64
                          " (blocks must be listed in order, without "
                          "gaps or overlaps)",
                          e->offset, m->pos);
  if (e->offset >= m->size)
    return manifest_fail (m, "offset %" PRIu64 " is beyond the image's size %"
                          PRIu64, e->offset, m->size);
  if (e->zero) {
    if (e->length == 0 || e->length % bs != 0 ||
        e->length > m->size - e->offset)
      return manifest_fail (m, "a zero run of %" PRIu64 " bytes at %" PRIu64
                            " is not whole %" PRIu32 " byte blocks within the "
                            "image's %" PRIu64 " bytes",
                            e->length, e->offset, bs, m->size);
  }
  else {
    const uint32_t want = blk_block_len (m->size, bs, e->offset / bs);
    if (e->length != want)
      return manifest_fail (m, "the block at offset %" PRIu64 " is %" PRIu32
                            " bytes long, not %" PRIu64,
                            e->offset, want, e->length);
  }
  m->pos = e->offset + e->length;
  return 0;
}

/* Both kinds. */

/* From the start of the file: the header, up to the first entry. */
static int
read_header (struct manifest *m)
{
  if (fseeko (m->fp, m->start, SEEK_SET) == -1)
    return manifest_fail (m, "%s", strerror (errno));
  clearerr (m->fp);
  m->lineno = 0;
  m->seen = 0;
  m->pos = 0;
  m->root_hex[0] = '\0';
  m->cur_end = m->next_block = 0;
  if (m->have_fold) {
    blk_root_free (&m->fold);
    m->have_fold = false;
  }
  if (m->have_params) {
    blk_params_free (&m->p);
    m->have_params = false;
  }
  if (m->json) {
    m->lineno = 1;
    json_reader_reset (&m->rd);
    if (manifest_json_members (m, false) == -1)
      return -1;
    if ((m->seen & K_ZERO_HASH) != 0) {
      char hex[2 * BLK_DIGEST_MAX + 1];
      blk_hex (m->p.zero_digest, m->p.digest.len, hex);
      if (strcasecmp (hex, m->zero_hash) != 0)
        return manifest_fail (m, "\"zero-hash\" is not the digest of a "
                              "zero block");
    }
    return 0;
  }
  return manifest_text_header (m);
}

static int
next_entry (struct manifest *m, struct entry *e)
{
  int r = m->json ? manifest_json_entry (m, e) : manifest_text_entry (m, e);

  if (r == 1 && (check_entry (m, e) == -1 || fold_entry (m, e) == -1 ||
                 (m->pos == m->size && check_root (m) == -1)))
    return -1;
  return r;
}

/* Is it a manifest, and which kind?  Leaves fp after the sniffed
 * bytes.
 */
static int
sniff (struct manifest *m, int *first)
{
  int c = getc (m->fp);

  if (c == '#')
    m->json = false;
  else {
    while (c == ' ' || c == '\t' || c == '\n' || c == '\r')
      c = getc (m->fp);
    if (c != '{') {
      if (ferror (m->fp))
        return manifest_fail (m, "%s", strerror (errno));
      if (c == EOF)
        return manifest_fail (m, "empty: not a manifest");
      return manifest_fail (m, "not a manifest of nbdsum --blocks (which "
                            "starts with '#', or '{' in JSON)");
    }
    m->json = true;
  }
  *first = c;
  return 0;
}

/* A pipe cannot be read twice: copy it to an unlinked file in
 * $TMPDIR.
 */
static int
spool (struct manifest *m, int first)
{
  const char *dir = m->env->temp_dir;
  CLEANUP_FREE char *path = NULL;
  FILE *tmp = NULL;
  char buf[65536];
  size_t n;
  int fd;

  if (asprintf (&path, "%s/nbdsum-manifest.XXXXXX", dir) == -1) {
    path = NULL;
    return manifest_fail (m, "out of memory");
  }
  if ((fd = mkstemp (path)) == -1)
    return manifest_fail (m, "cannot make a temporary copy in %s: %s", dir,
                          strerror (errno));
  unlink (path);
  if ((tmp = fdopen (fd, "w+")) == NULL) {
    close (fd);
    return manifest_fail (m, "cannot make a temporary copy: %s",
                          strerror (errno));
  }
  fputc (first, tmp);
  /* A signal cuts a read short, but the next one would wait again. */
  while (!manifest_stopped (m) &&
         (n = fread (buf, 1, sizeof buf, m->fp)) > 0)
    fwrite (buf, 1, n, tmp);
  if (manifest_stopped (m) || ferror (m->fp)) {
    fclose (tmp);
    return manifest_fail (m, "%s", strerror (errno));
  }
  if (fflush (tmp) == EOF || ferror (tmp)) {
    fclose (tmp);
    return manifest_fail (m, "cannot make a temporary copy in %s: %s", dir,
                          strerror (errno));
  }
  if (m->fp != stdin)
    fclose (m->fp);
  m->fp = tmp;
  m->start = 0;
  return 0;
}

int
manifest_rewind (struct manifest *m)
{
  const uint64_t size = m->size;
  const uint32_t bs = m->p.block_size;
  char digest[BLK_DIGEST_NAME_MAX], root[sizeof m->root_hex];

  snprintf (digest, sizeof digest, "%s", m->p.digest.name);
  memcpy (root, m->root_hex, sizeof root);
  if (read_header (m) == -1)
    return -1;
  if (m->size != size || m->p.block_size != bs ||
      strcmp (m->p.digest.name, digest) != 0 ||
      strcmp (m->root_hex, root) != 0)
    return manifest_fail (m, "changed while nbdsum read it");
  return 0;
}

struct manifest *
manifest_open (const char *path, const struct manifest_env *env)
{
  struct manifest *m = calloc (1, sizeof *m);
  struct entry e;
  int first = 0, r = 0;

  if (m == NULL) {
    env->error (path, "out of memory");
    return NULL;
  }
  m->path = path;
  m->env = env;
  m->fp = strcmp (path, "-") == 0 ? stdin : fopen (path, "r");
  if (m->fp == NULL) {
    manifest_fail (m, "%s", strerror (errno));
    goto err;
  }
  /* Standard input may be a file read from where the caller left it. */
  m->start = ftello (m->fp);
  if (sniff (m, &first) == -1)
    goto err;
  if ((m->start == -1 || fseeko (m->fp, m->start, SEEK_SET) == -1) &&
      spool (m, first) == -1)
    goto err;
  if (m->json && json_reader_init (&m->rd, m->fp, TEXT_MAX) == -1) {
    manifest_fail (m, "out of memory");
    goto err;
  }

  /* All of it first. */
  if (read_header (m) == -1)
    goto err;
  while (!manifest_stopped (m) && (r = next_entry (m, &e)) == 1)
    ;
  if (manifest_stopped (m) || r == -1 ||
      (m->json && manifest_json_members (m, true) == -1))
    goto err;
  if (m->pos != m->size) {
    m->lineno = 0;
    manifest_fail (m, "the blocks listed end at offset %" PRIu64 ", before the "
                   "image's end at %" PRIu64 " (truncated?)", m->pos, m->size);
    goto err;
  }

  if (m->size == 0 && check_root (m) == -1)
    goto err;

  /* Then again, as the comparison asks. */
  if (manifest_rewind (m) == -1)
    goto err;
  return m;

 err:
  manifest_close (m);
  return NULL;
}

void
manifest_close (struct manifest *m)
{
  if (m == NULL)
    return;
  if (m->fp && m->fp != stdin)
    fclose (m->fp);
  if (m->have_fold)
    blk_root_free (&m->fold);
  if (m->have_params)
    blk_params_free (&m->p);
  json_reader_free (&m->rd);
  free (m);
}

const struct blk_params *
manifest_params (const struct manifest *m)
{
  return &m->p;
}

uint64_t
manifest_size (const struct manifest *m)
{
  return m->size;
}

bool
manifest_root (const struct manifest *m, uint8_t *root)
{
  if (m->root_hex[0] == '\0')
    return false;
  memcpy (root, m->root, m->p.digest.len);
  return true;
}

int
manifest_digests (struct manifest *m, uint64_t first, uint64_t count,
                  uint8_t *out)
{
  const size_t len = m->p.digest.len;

  if (first != m->next_block || count > m->nblocks - first)
    return manifest_fail (m, "blocks asked out of order");
  for (uint64_t b = first; b < first + count; b++) {
    if (b == m->cur_end) {
      const int r = next_entry (m, &m->cur);
      if (r == -1)
        return -1;
      if (r == 0)
        return manifest_fail (m, "changed while nbdsum read it (it ends "
                              "early)");
      m->cur_block = m->cur.offset / m->p.block_size;
      m->cur_end = m->cur_block + blk_block_count (m->cur.length,
                                                   m->p.block_size);
    }
    memcpy (out + (b - first) * len,
            m->cur.zero ? m->p.zero_digest : m->cur.digest, len);
  }
  m->next_block = first + count;
  return 0;
}

int
manifest_check_made (const struct manifest *m, const char *digest,
                     uint64_t block_size)
{
  char msg[160];

  if (digest && !blk_digest_same (digest, m->p.digest.name))
    snprintf (msg, sizeof msg, "the manifest was made with %s, not %s",
              m->p.digest.name, digest);
  else if (block_size && block_size != m->p.block_size)
    snprintf (msg, sizeof msg, "the manifest was made with %" PRIu32
              " byte blocks, not %" PRIu64, m->p.block_size, block_size);
  else
    return 0;
  m->env->error (m->path, msg);
  return -1;
}

/* Writing. */

void
manifest_write_begin (struct manifest_writer *w, FILE *fp,
                      struct json_writer *json, const struct blk_params *p,
                      uint64_t size, const uint8_t *root, const char *method)
{
  char hex[2 * BLK_DIGEST_MAX + 1];

  *w = (struct manifest_writer) { .fp = fp, .json = json, .p = p,
                                  .size = size };
  blk_hex (root, p->digest.len, hex);
  if (json)
    manifest_json_write_header (w, hex, method);
  else
    manifest_text_write_header (w, hex);
}

static void
write_entry (const struct manifest_writer *w, uint64_t offset,
             uint64_t length, const char *hex)
{
  if (w->json)
    manifest_json_write_entry (w, offset, length, hex);
  else
    manifest_text_write_entry (w, offset, length, hex);
}

/* The run of zero blocks held, as one entry. */
static void
write_zero_run (struct manifest_writer *w)
{
  if (w->zero_len)
    write_entry (w, w->zero_start, w->zero_len, NULL);
  w->zero_len = 0;
}

void
manifest_write_blocks (struct manifest_writer *w, uint64_t first,
                       uint64_t count, const uint8_t *digests)
{
  const struct blk_params *p = w->p;
  char hex[2 * BLK_DIGEST_MAX + 1];

  for (uint64_t i = 0; i < count; i++) {
    const uint64_t b = first + i, off = b * p->block_size;
    const uint32_t len = blk_block_len (w->size, p->block_size, b);
    const uint8_t *digest = digests + i * p->digest.len;

    /* Runs of full zero blocks make one entry. */
    if (len == p->block_size &&
        memcmp (digest, p->zero_digest, p->digest.len) == 0) {
      if (w->zero_len == 0)
        w->zero_start = off;
      w->zero_len += len;
      continue;
    }
    write_zero_run (w);
    blk_hex (digest, p->digest.len, hex);
    write_entry (w, off, len, hex);
  }
}

void
manifest_write_end (struct manifest_writer *w)
{
  write_zero_run (w);
  if (w->json)
    manifest_json_write_end (w);
}
