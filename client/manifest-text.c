/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the manifest's text form, read and written (see
 * manifest.h): '# DIGEST BLOCK-SIZE SIZE CHECKSUM', then a line
 * 'OFFSET LENGTH HEX' per block or 'OFFSET LENGTH zero' per run of
 * zero blocks.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "manifest-internal.h"

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
      return manifest_fail (m, "not a manifest line (binary data, or too "
                            "long)");
    buf[n++] = c;
  }
  if (c == EOF) {
    if (ferror (m->fp))
      return manifest_fail (m, "%s", strerror (errno));
    if (n == 0)
      return 0;
    return manifest_fail (m, "truncated: no newline at its end");
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
int
manifest_text_header (struct manifest *m)
{
  char line[LINE_MAX_LEN], copy[LINE_MAX_LEN], *f[4];
  uint64_t bs, size;
  int r, n = 4;

  if ((r = read_line (m, line)) == -1)
    return -1;
  if (r == 0)
    return manifest_fail (m, "empty: not a manifest");
  memcpy (copy, line, sizeof copy);
  if (strncmp (line, "# ", 2) != 0 ||
      (!split (line + 2, f, n) && !split (copy + 2, f, --n)) ||
      !manifest_parse_number (f[1], &bs) ||
      !manifest_parse_number (f[2], &size))
    return manifest_fail (m, "not a manifest header "
                          "'# DIGEST BLOCK-SIZE SIZE CHECKSUM'");
  m->root_hex[0] = '\0';
  if (n == 4) {
    if (strlen (f[3]) >= sizeof m->root_hex)
      return manifest_fail (m, "the checksum is too long");
    strcpy (m->root_hex, f[3]);
  }
  return manifest_set_header (m, f[0], bs, size);
}

int
manifest_text_entry (struct manifest *m, struct entry *e)
{
  char line[LINE_MAX_LEN], *f[3];
  int r;

  if ((r = read_line (m, line)) <= 0)
    return r;
  if (!split (line, f, 3) || !manifest_parse_number (f[0], &e->offset) ||
      !manifest_parse_number (f[1], &e->length))
    return manifest_fail (m, "not a manifest line 'OFFSET LENGTH HEX' or "
                          "'OFFSET LENGTH zero'");
  e->zero = strcmp (f[2], "zero") == 0;
  if (!e->zero &&
      manifest_parse_hex (m, f[2], strlen (f[2]), e->digest) == -1)
    return -1;
  return 1;
}

void
manifest_text_write_header (const struct manifest_writer *w,
                            const char *root_hex)
{
  fprintf (w->fp, "# %s %" PRIu32 " %" PRIu64 " %s\n", w->p->digest.name,
           w->p->block_size, w->size, root_hex);
}

void
manifest_text_write_entry (const struct manifest_writer *w, uint64_t offset,
                           uint64_t length, const char *hex)
{
  fprintf (w->fp, "%" PRIu64 " %" PRIu64 " %s\n", offset, length,
           hex ? hex : "zero");
}
