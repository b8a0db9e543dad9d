/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the fields both forms of a manifest have (see manifest.h):
 * numbers, hex digests, the header with the checksum it carries, and
 * how a refusal is said.
 */
#include <config.h>

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest-internal.h"
#include "util.h"

bool
manifest_stopped (const struct manifest *m)
{
  return m->env->stopped && m->env->stopped ();
}

int
manifest_fail (struct manifest *m, const char *fmt, ...)
{
  va_list ap;
  char *msg, *line = NULL;

  /* Reads cut short by a signal are no news: the caller is stopping. */
  if (manifest_stopped (m))
    return -1;
  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) == -1)
    msg = NULL;
  va_end (ap);
  if (m->lineno &&
      asprintf (&line, "line %lu: %s", m->json ? m->rd.line : m->lineno,
                msg ? msg : fmt) == -1)
    line = NULL;
  m->env->error (m->path, line ? line : msg ? msg : fmt);
  free (line);
  free (msg);
  return -1;
}

bool
manifest_parse_number (const char *s, uint64_t *v)
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

int
manifest_parse_hex (struct manifest *m, const char *s, size_t len,
                    uint8_t *out)
{
  const size_t want = 2 * m->p.digest.len;

  if (len != want)
    return manifest_fail (m, "a %s digest has %zu hex digits, not %zu",
                          m->p.digest.name, want, len);
  for (size_t i = 0; i < len; i += 2) {
    const int hi = blk_hex_value (s[i]), lo = blk_hex_value (s[i + 1]);
    if (hi == -1 || lo == -1)
      return manifest_fail (m, "invalid hex digest");
    out[i / 2] = hi << 4 | lo;
  }
  return 0;
}

/* The root as the manifest writes it: the digest's length in hex. */
static int
parse_root (struct manifest *m)
{
  if (m->root_hex[0] == '\0')
    return 0;
  return manifest_parse_hex (m, m->root_hex, strlen (m->root_hex), m->root);
}

int
manifest_set_header (struct manifest *m, const char *digest,
                     uint64_t block_size, uint64_t size)
{
  const uint64_t max = m->env->max_size;
  char h[BLK_HUMAN_STR_MAX], w[BLK_HUMAN_STR_MAX], l[BLK_LIMIT_STR_MAX];
  uint64_t work;
  bool different;
  const char *msg;

  if ((msg = blk_params_init (&m->p, digest, block_size)) != NULL)
    return manifest_fail (m, "digest '%s', block size %" PRIu64 ": %s",
                          digest, block_size, msg);
  m->have_params = true;
  /* Before anything is folded: a line may claim a zero run of years.
   * The cost is the outer hash's, whatever the block size.
   */
  work = blk_work_size (size, m->p.block_size, m->p.digest.len);
  different = m->p.block_size != 65536 || m->p.digest.len != 32;
  if (max && work > max)
    return manifest_fail (m, "the image it describes is %" PRIu64 " bytes "
                          "(%s)%s%s%s, over the limit of %s%s%s", size,
                          blk_format_human (size, h),
                          different ? ", in its blocks and digests as "
                          "much hashing as " : "",
                          different ? blk_format_human (work, w) : "",
                          different ? " in 64K blocks of sha256" : "",
                          blk_format_limit (max, l),
                          m->env->max_size_hint ? ": " : "",
                          m->env->max_size_hint ? m->env->max_size_hint : "");
  m->size = size;
  m->nblocks = blk_block_count (size, m->p.block_size);
  if (blk_root_init (&m->fold, &m->p) == -1)
    return manifest_fail (m, "%s failed", m->p.digest.name);
  m->have_fold = true;
  return parse_root (m);
}
