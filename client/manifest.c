/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: reading a saved --blocks manifest (see manifest.h).
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
#include "helpers.h"
#include "jsonread.h"
#include "manifest.h"
#include "messages.h"
#include "options.h"
#include "minmax.h"
#include "signals.h"
#include "util.h"

/* Longer text lines are not a manifest's. */
#define LINE_MAX_LEN 512
/* Longer JSON strings neither (a name, escaped, at most). */
#define TEXT_MAX 65536

/* One line of the manifest. */
struct entry {
  uint64_t offset, length;
  bool zero;
  uint8_t digest[BLK_DIGEST_MAX];
};

/* JSON members, to refuse repeated ones. */
enum {
  K_NAME = 1, K_NAME_HEX = 2, K_DIGEST = 4, K_BLOCK_SIZE = 8, K_SIZE = 16,
  K_METHOD = 32, K_ZERO_HASH = 64, K_BLOCKS = 128, K_CHECKSUM = 256,
};

struct manifest {
  const char *path;
  FILE *fp;
  off_t start;                  /* where the manifest starts in fp */
  bool json;
  unsigned long lineno;         /* for messages */

  /* The header. */
  struct blk_params p;
  bool have_params;
  uint64_t size, nblocks;

  /* JSON reading. */
  struct json_reader rd;
  unsigned seen;                /* K_* members read */
  bool first_entry;
  char digest_name[BLK_DIGEST_NAME_MAX];
  uint64_t block_size;
  char zero_hash[2 * BLK_DIGEST_MAX + 1];

  /* Checking the entries: where the next one must start. */
  uint64_t pos;

  /* The root it carries (root_hex, checked against the digests folded
   * as they are read, each time they are read), if any.
   */
  char root_hex[2 * BLK_DIGEST_MAX + 1];
  uint8_t root[BLK_DIGEST_MAX];
  struct blk_root fold;
  bool have_fold;

  /* manifest_digests: the entry being handed out, blocks
   * [cur_block, cur_end) of it.
   */
  struct entry cur;
  uint64_t cur_block, cur_end, next_block;
};

static int __attribute__ ((format (printf, 2, 3)))
fail (struct manifest *m, const char *fmt, ...)
{
  va_list ap;
  char *msg;

  /* Reads cut short by SIGINT are no news: nbdsum is stopping. */
  if (stop_signal ())
    return -1;
  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) == -1)
    msg = NULL;
  va_end (ap);
  if (m->lineno)
    error_at (m->path, "line %lu: %s", m->json ? m->rd.line : m->lineno,
              msg ? msg : fmt);
  else
    error_at (m->path, "%s", msg ? msg : fmt);
  free (msg);
  return -1;
}

/* A decimal number as nbdsum writes them: digits, no leading zero,
 * at most INT64_MAX.
 */
static bool
parse_number (const char *s, uint64_t *v)
{
  uint64_t r = 0;

  if (*s == '\0' || (s[0] == '0' && s[1] != '\0'))
    return false;
  for (; *s; s++) {
    if (!isdigit ((unsigned char) *s) ||
        r > ((uint64_t) INT64_MAX - (*s - '0')) / 10)
      return false;
    r = r * 10 + (*s - '0');
  }
  *v = r;
  return true;
}

/* A block digest in hex, of the header's digest length. */
static int
parse_hex (struct manifest *m, const char *s, size_t len, uint8_t *out)
{
  const size_t want = 2 * m->p.digest.len;

  if (len != want)
    return fail (m, "a %s digest has %zu hex digits, not %zu",
                 m->p.digest.name, want, len);
  for (size_t i = 0; i < len; i += 2) {
    const int hi = blk_hex_value (s[i]), lo = blk_hex_value (s[i + 1]);
    if (hi == -1 || lo == -1)
      return fail (m, "invalid hex digest");
    out[i / 2] = hi << 4 | lo;
  }
  return 0;
}

static int
set_params (struct manifest *m, const char *digest, uint64_t block_size,
            uint64_t size)
{
  const char *msg;

  if ((msg = blk_params_init (&m->p, digest, block_size)) != NULL)
    return fail (m, "digest '%s', block size %" PRIu64 ": %s",
                 digest, block_size, msg);
  m->have_params = true;
  m->size = size;
  m->nblocks = blk_block_count (size, m->p.block_size);
  if (blk_root_init (&m->fold, &m->p) == -1)
    return fail (m, "%s failed", m->p.digest.name);
  m->have_fold = true;
  return 0;
}

/* The root as the manifest writes it: the digest's length in hex. */
static int
parse_root (struct manifest *m)
{
  if (m->root_hex[0] == '\0')
    return 0;
  return parse_hex (m, m->root_hex, strlen (m->root_hex), m->root);
}

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
    if (stop_signal ())
      return -1;
    r = blk_root_add (&m->fold, m->p.zero_run, k);
    n -= k;
  }
  return r == -1 ? fail (m, "%s failed", m->p.digest.name) : 0;
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
    return fail (m, "%s failed", m->p.digest.name);
  if (memcmp (got, m->root, m->p.digest.len) != 0) {
    blk_hex (got, m->p.digest.len, hex);
    m->lineno = 0;
    return fail (m, "its block digests give the checksum %s, not the %s "
                 "it carries: corrupt or edited", hex, m->root_hex);
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
    return fail (m, "offset %" PRIu64 ", expected %" PRIu64 " (blocks must "
                 "be listed in order, without gaps or overlaps)",
                 e->offset, m->pos);
  if (e->offset >= m->size)
    return fail (m, "offset %" PRIu64 " is beyond the image's size %"
                 PRIu64, e->offset, m->size);
  if (e->zero) {
    if (e->length == 0 || e->length % bs != 0 ||
        e->length > m->size - e->offset)
      return fail (m, "a zero run of %" PRIu64 " bytes at %" PRIu64
                   " is not whole %" PRIu32 " byte blocks within the "
                   "image's %" PRIu64 " bytes",
                   e->length, e->offset, bs, m->size);
  }
  else {
    const uint32_t want = blk_block_len (m->size, bs, e->offset / bs);
    if (e->length != want)
      return fail (m, "the block at offset %" PRIu64 " is %" PRIu32
                   " bytes long, not %" PRIu64, e->offset, want, e->length);
  }
  m->pos = e->offset + e->length;
  return 0;
}

/* Text manifests. */

/* One line without its newline: 1, or 0 at the end, -1 on errors. */
static int
read_line (struct manifest *m, char *buf)
{
  size_t n = 0;
  int c;

  m->lineno++;
  /* One thread reads a manifest: no locking per character. */
  while ((c = getc_unlocked (m->fp)) != EOF && c != '\n') {
    if (c == '\0' || n == LINE_MAX_LEN - 1)
      return fail (m, "not a manifest line (binary data, or too long)");
    buf[n++] = c;
  }
  if (c == EOF) {
    if (ferror (m->fp))
      return fail (m, "%s", strerror (errno));
    if (n == 0)
      return 0;
    return fail (m, "truncated: no newline at its end");
  }
  buf[n] = '\0';
  return 1;
}

/* Cut line into exactly n fields separated by single spaces. */
static bool
split (char *line, char **fields, int n)
{
  for (int i = 0; i < n; i++) {
    fields[i] = line;
    line = strchr (line, ' ');
    if ((line == NULL) != (i == n - 1) || fields[i][0] == ' ')
      return false;
    if (line)
      *line++ = '\0';
  }
  return fields[n - 1][0] != '\0';
}

/* '# DIGEST BLOCK-SIZE SIZE CHECKSUM', or without the checksum as
 * nbdsum wrote it before manifests carried one.
 */
static int
text_read_header (struct manifest *m)
{
  char line[LINE_MAX_LEN], copy[LINE_MAX_LEN], *f[4];
  uint64_t bs, size;
  int r, n = 4;

  if ((r = read_line (m, line)) == -1)
    return -1;
  if (r == 0)
    return fail (m, "empty: not a manifest");
  memcpy (copy, line, sizeof copy);
  if (strncmp (line, "# ", 2) != 0 ||
      (!split (line + 2, f, n) && !split (copy + 2, f, --n)) ||
      !parse_number (f[1], &bs) || !parse_number (f[2], &size))
    return fail (m, "not a manifest header "
                 "'# DIGEST BLOCK-SIZE SIZE CHECKSUM'");
  m->root_hex[0] = '\0';
  if (n == 4) {
    if (strlen (f[3]) >= sizeof m->root_hex)
      return fail (m, "the checksum is too long");
    strcpy (m->root_hex, f[3]);
  }
  if (set_params (m, f[0], bs, size) == -1 || parse_root (m) == -1)
    return -1;
  return 0;
}

static int
text_next_entry (struct manifest *m, struct entry *e)
{
  char line[LINE_MAX_LEN], *f[3];
  int r;

  if ((r = read_line (m, line)) <= 0)
    return r;
  if (!split (line, f, 3) || !parse_number (f[0], &e->offset) ||
      !parse_number (f[1], &e->length))
    return fail (m, "not a manifest line 'OFFSET LENGTH HEX' or "
                 "'OFFSET LENGTH zero'");
  e->zero = strcmp (f[2], "zero") == 0;
  if (!e->zero && parse_hex (m, f[2], strlen (f[2]), e->digest) == -1)
    return -1;
  return 1;
}

/* JSON manifests: the document of --blocks --json. */

/* The reader's failures, as the manifest's. */
static int
next_token (struct manifest *m)
{
  return json_next (&m->rd) == -1 ? fail (m, "%s", m->rd.error) : 0;
}

static int
expect (struct manifest *m, int c)
{
  return json_expect (&m->rd, c) == -1 ? fail (m, "%s", m->rd.error) : 0;
}

static int
next_key (struct manifest *m, bool *first, char *key, size_t size)
{
  const int r = json_next_key (&m->rd, first, key, size);

  return r == -1 ? fail (m, "%s", m->rd.error) : r;
}

static int
string_value (struct manifest *m, const char *key)
{
  if (next_token (m) == -1)
    return -1;
  if (m->rd.type != JSON_STRING)
    return fail (m, "\"%s\" must be a string", key);
  return 0;
}

static int
number_value (struct manifest *m, const char *key, uint64_t *v)
{
  if (next_token (m) == -1)
    return -1;
  if (m->rd.type != JSON_NUMBER || !parse_number (m->rd.text, v))
    return fail (m, "\"%s\" must be a whole number from 0 to 2^63-1", key);
  return 0;
}

/* The members of the top object: before "blocks" (after == false), up
 * to and including its '['; after it, up to the end of the document.
 */
static int
json_members (struct manifest *m, bool after)
{
  static const struct { const char *key; unsigned bit; } keys[] = {
    { "name", K_NAME }, { "name-hex", K_NAME_HEX }, { "digest", K_DIGEST },
    { "block-size", K_BLOCK_SIZE }, { "size", K_SIZE },
    { "method", K_METHOD }, { "zero-hash", K_ZERO_HASH },
    { "blocks", K_BLOCKS }, { "checksum", K_CHECKSUM },
  };
  bool first = !after;
  char key[32];
  uint64_t size = 0;
  int r;

  if (!after && expect (m, '{') == -1)
    return -1;
  while ((r = next_key (m, &first, key, sizeof key)) == 1) {
    unsigned bit = 0;

    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
      if (strcmp (key, keys[i].key) == 0)
        bit = keys[i].bit;
    if (strcmp (key, "error") == 0 || strcmp (key, "interrupted") == 0) {
      if (string_value (m, key) == -1)
        return -1;
      return fail (m, "the --blocks run that wrote it %s: %s",
                   key[0] == 'e' ? "failed" : "was interrupted",
                   m->rd.text);
    }
    if (bit == 0)
      return fail (m, "unknown key \"%s\"", key);
    if (m->seen & bit)
      return fail (m, "\"%s\" is repeated", key);
    m->seen |= bit;
    switch (bit) {
    case K_DIGEST:
      if (string_value (m, key) == -1)
        return -1;
      snprintf (m->digest_name, sizeof m->digest_name, "%s", m->rd.text);
      if (strlen (m->rd.text) >= sizeof m->digest_name)
        return fail (m, "unknown digest");
      break;
    case K_BLOCK_SIZE:
      if (number_value (m, key, &m->block_size) == -1)
        return -1;
      break;
    case K_SIZE:
      if (number_value (m, key, &size) == -1)
        return -1;
      m->size = size;
      break;
    case K_ZERO_HASH:
      if (string_value (m, key) == -1)
        return -1;
      snprintf (m->zero_hash, sizeof m->zero_hash, "%s", m->rd.text);
      if (strlen (m->rd.text) >= sizeof m->zero_hash)
        return fail (m, "\"zero-hash\" is too long");
      break;
    case K_CHECKSUM:
      if (after)
        return fail (m, "\"checksum\" must come before \"blocks\"");
      if (string_value (m, key) == -1)
        return -1;
      if (strlen (m->rd.text) >= sizeof m->root_hex)
        return fail (m, "\"checksum\" is too long");
      strcpy (m->root_hex, m->rd.text);
      break;
    case K_BLOCKS:
      if ((m->seen & (K_DIGEST | K_BLOCK_SIZE | K_SIZE)) !=
          (K_DIGEST | K_BLOCK_SIZE | K_SIZE))
        return fail (m, "\"digest\", \"block-size\" and \"size\" must come "
                     "before \"blocks\"");
      if (set_params (m, m->digest_name, m->block_size, m->size) == -1 ||
          parse_root (m) == -1 || expect (m, '[') == -1)
        return -1;
      m->first_entry = true;
      return 0;
    default:
      if (string_value (m, key) == -1)
        return -1;
    }
  }
  if (r == -1)
    return -1;
  if (!after)
    return fail (m, "no \"blocks\": not a manifest");
  if (next_token (m) == -1)
    return -1;
  if (m->rd.type != JSON_EOF)
    return fail (m, "more after the end of the document");
  return 0;
}

static int
json_next_entry (struct manifest *m, struct entry *e)
{
  unsigned seen = 0;
  bool first = true;
  char key[16];
  int r;

  if (next_token (m) == -1)
    return -1;
  if (json_is (&m->rd, ']'))
    return 0;
  if (!m->first_entry) {
    if (!json_is (&m->rd, ','))
      return fail (m, "expected ',' or ']' in \"blocks\"");
    if (next_token (m) == -1)
      return -1;
  }
  m->first_entry = false;
  if (!json_is (&m->rd, '{'))
    return fail (m, "expected a block object");
  e->zero = false;
  while ((r = next_key (m, &first, key, sizeof key)) == 1) {
    unsigned bit;

    if (strcmp (key, "offset") == 0) {
      bit = 1;
      if (number_value (m, key, &e->offset) == -1)
        return -1;
    }
    else if (strcmp (key, "length") == 0) {
      bit = 2;
      if (number_value (m, key, &e->length) == -1)
        return -1;
    }
    else if (strcmp (key, "hash") == 0) {
      bit = 4;
      if (string_value (m, key) == -1 ||
          parse_hex (m, m->rd.text, m->rd.len, e->digest) == -1)
        return -1;
    }
    else if (strcmp (key, "zero") == 0) {
      bit = 8;
      if (next_token (m) == -1)
        return -1;
      if (m->rd.type != JSON_WORD || strcmp (m->rd.text, "true") != 0)
        return fail (m, "\"zero\" must be true");
      e->zero = true;
    }
    else
      return fail (m, "unknown key \"%s\" in a block", key);
    if (seen & bit)
      return fail (m, "\"%s\" is repeated", key);
    seen |= bit;
  }
  if (r == -1)
    return -1;
  if (seen != (1 | 2 | 4) && seen != (1 | 2 | 8))
    return fail (m, "a block needs \"offset\", \"length\", and either "
                 "\"hash\" or \"zero\"");
  return 1;
}

/* Both kinds. */

/* From the start of the file: the header, up to the first entry. */
static int
read_header (struct manifest *m)
{
  if (fseeko (m->fp, m->start, SEEK_SET) == -1)
    return fail (m, "%s", strerror (errno));
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
    if (json_members (m, false) == -1)
      return -1;
    if ((m->seen & K_ZERO_HASH) != 0) {
      char hex[2 * BLK_DIGEST_MAX + 1];
      blk_hex (m->p.zero_digest, m->p.digest.len, hex);
      if (strcasecmp (hex, m->zero_hash) != 0)
        return fail (m, "\"zero-hash\" is not the digest of a zero block");
    }
    return 0;
  }
  return text_read_header (m);
}

static int
next_entry (struct manifest *m, struct entry *e)
{
  int r = m->json ? json_next_entry (m, e) : text_next_entry (m, e);

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
        return fail (m, "%s", strerror (errno));
      if (c == EOF)
        return fail (m, "empty: not a manifest");
      return fail (m, "not a manifest of nbdsum --blocks (which starts "
                   "with '#', or '{' in JSON)");
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
  const char *dir = temp_dir ();
  CLEANUP_FREE char *path = NULL;
  FILE *tmp = NULL;
  char buf[65536];
  size_t n;
  int fd;

  if (asprintf (&path, "%s/nbdsum-manifest.XXXXXX", dir) == -1) {
    path = NULL;
    return fail (m, "out of memory");
  }
  if ((fd = mkstemp (path)) == -1)
    return fail (m, "cannot make a temporary copy in %s: %s", dir,
                 strerror (errno));
  unlink (path);
  if ((tmp = fdopen (fd, "w+")) == NULL) {
    close (fd);
    return fail (m, "cannot make a temporary copy: %s", strerror (errno));
  }
  fputc (first, tmp);
  /* A signal cuts a read short, but the next one would wait again. */
  while (!stop_signal () && (n = fread (buf, 1, sizeof buf, m->fp)) > 0)
    fwrite (buf, 1, n, tmp);
  if (stop_signal () || ferror (m->fp)) {
    fclose (tmp);
    return fail (m, "%s", strerror (errno));
  }
  if (fflush (tmp) == EOF || ferror (tmp)) {
    fclose (tmp);
    return fail (m, "cannot make a temporary copy in %s: %s", dir,
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
    return fail (m, "changed while nbdsum read it");
  return 0;
}

struct manifest *
manifest_open (const char *path)
{
  return manifest_open_visit (path, NULL, NULL);
}

struct manifest *
manifest_open_visit (const char *path, manifest_visit_fn *visit,
                     void *opaque)
{
  struct manifest *m = calloc (1, sizeof *m);
  struct entry e;
  int first = 0, r = 0;

  if (m == NULL) {
    error_at (path, "out of memory");
    return NULL;
  }
  m->path = path;
  m->fp = strcmp (path, "-") == 0 ? stdin : fopen (path, "r");
  if (m->fp == NULL) {
    fail (m, "%s", strerror (errno));
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
    fail (m, "out of memory");
    goto err;
  }

  /* All of it first. */
  if (read_header (m) == -1)
    goto err;
  while (!stop_signal () && (r = next_entry (m, &e)) == 1)
    if (visit)
      visit (opaque, &m->p, e.offset / m->p.block_size,
             blk_block_count (e.length, m->p.block_size),
             e.zero ? NULL : e.digest);
  if (stop_signal () || r == -1 || (m->json && json_members (m, true) == -1))
    goto err;
  if (m->pos != m->size) {
    m->lineno = 0;
    fail (m, "the blocks listed end at offset %" PRIu64 ", before the "
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
    return fail (m, "blocks asked out of order");
  for (uint64_t b = first; b < first + count; b++) {
    if (b == m->cur_end) {
      const int r = next_entry (m, &m->cur);
      if (r == -1)
        return -1;
      if (r == 0)
        return fail (m, "changed while nbdsum read it (it ends early)");
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
manifest_hash_spec (const struct manifest *m, const struct hash_spec *spec,
                    struct hash_spec *out)
{
  if (spec->digest && !blk_digest_same (spec->digest, m->p.digest.name)) {
    error_at (m->path, "the manifest was made with %s, not %s",
              m->p.digest.name, spec->digest);
    return -1;
  }
  if (spec->block_size && spec->block_size != m->p.block_size) {
    error_at (m->path, "the manifest was made with %" PRIu32 " byte blocks, "
              "not %" PRIu64, m->p.block_size, spec->block_size);
    return -1;
  }
  *out = (struct hash_spec) { m->p.digest.name, m->p.block_size, NULL };
  return 0;
}
