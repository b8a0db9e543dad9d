/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the manifest's JSON form, read and written (see
 * manifest.h): the document of --blocks --json, its "blocks" an array
 * of {"offset", "length", "hash"} or {"offset", "length", "zero":
 * true}, read a token at a time (jsonread.h) so that a manifest of any
 * size needs no memory.
 */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "manifest-internal.h"
#include "util.h"

/* The reader's failures, as the manifest's. */
static int
next_token (struct manifest *m)
{
  if (json_next (&m->rd) == -1)
    return manifest_fail (m, "%s", m->rd.error);
  return 0;
}

static int
expect (struct manifest *m, int c)
{
  if (json_expect (&m->rd, c) == -1)
    return manifest_fail (m, "%s", m->rd.error);
  return 0;
}

static int
next_key (struct manifest *m, bool *first, char *key, size_t size)
{
  const int r = json_next_key (&m->rd, first, key, size);

  return r == -1 ? manifest_fail (m, "%s", m->rd.error) : r;
}

static int
string_value (struct manifest *m, const char *key)
{
  if (next_token (m) == -1)
    return -1;
  if (m->rd.type != JSON_STRING)
    return manifest_fail (m, "\"%s\" must be a string", key);
  return 0;
}

static int
number_value (struct manifest *m, const char *key, uint64_t *v)
{
  if (next_token (m) == -1)
    return -1;
  if (m->rd.type != JSON_NUMBER || !manifest_parse_number (m->rd.text, v))
    return manifest_fail (m, "\"%s\" must be a whole number from 0 to "
                          "2^63-1", key);
  return 0;
}

int
manifest_json_members (struct manifest *m, bool after)
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
      return manifest_fail (m, "the --blocks run that wrote it %s: %s",
                            key[0] == 'e' ? "failed" : "was interrupted",
                            m->rd.text);
    }
    if (bit == 0)
      return manifest_fail (m, "unknown key \"%s\"", key);
    if (m->seen & bit)
      return manifest_fail (m, "\"%s\" is repeated", key);
    m->seen |= bit;
    switch (bit) {
    case K_DIGEST:
      if (string_value (m, key) == -1)
        return -1;
      snprintf (m->digest_name, sizeof m->digest_name, "%s", m->rd.text);
      if (strlen (m->rd.text) >= sizeof m->digest_name)
        return manifest_fail (m, "unknown digest");
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
        return manifest_fail (m, "\"zero-hash\" is too long");
      break;
    case K_CHECKSUM:
      if (after)
        return manifest_fail (m, "\"checksum\" must come before \"blocks\"");
      if (string_value (m, key) == -1)
        return -1;
      if (strlen (m->rd.text) >= sizeof m->root_hex)
        return manifest_fail (m, "\"checksum\" is too long");
      strcpy (m->root_hex, m->rd.text);
      break;
    case K_BLOCKS:
      if ((m->seen & (K_DIGEST | K_BLOCK_SIZE | K_SIZE)) !=
          (K_DIGEST | K_BLOCK_SIZE | K_SIZE))
        return manifest_fail (m, "\"digest\", \"block-size\" and \"size\" "
                              "must come before \"blocks\"");
      if (manifest_set_header (m, m->digest_name, m->block_size,
                               m->size) == -1 ||
          expect (m, '[') == -1)
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
    return manifest_fail (m, "no \"blocks\": not a manifest");
  if (next_token (m) == -1)
    return -1;
  if (m->rd.type != JSON_EOF)
    return manifest_fail (m, "more after the end of the document");
  return 0;
}

int
manifest_json_entry (struct manifest *m, struct entry *e)
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
      return manifest_fail (m, "expected ',' or ']' in \"blocks\"");
    if (next_token (m) == -1)
      return -1;
  }
  m->first_entry = false;
  if (!json_is (&m->rd, '{'))
    return manifest_fail (m, "expected a block object");
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
          manifest_parse_hex (m, m->rd.text, m->rd.len, e->digest) == -1)
        return -1;
    }
    else if (strcmp (key, "zero") == 0) {
      bit = 8;
      if (next_token (m) == -1)
        return -1;
      if (m->rd.type != JSON_WORD || strcmp (m->rd.text, "true") != 0)
        return manifest_fail (m, "\"zero\" must be true");
      e->zero = true;
    }
    else
      return manifest_fail (m, "unknown key \"%s\" in a block", key);
    if (seen & bit)
      return manifest_fail (m, "\"%s\" is repeated", key);
    seen |= bit;
  }
  if (r == -1)
    return -1;
  if (seen != (1 | 2 | 4) && seen != (1 | 2 | 8))
    return manifest_fail (m, "a block needs \"offset\", \"length\", and "
                          "either \"hash\" or \"zero\"");
  return 1;
}

void
manifest_json_write_header (const struct manifest_writer *w,
                            const char *root_hex, const char *method)
{
  char hex[2 * BLK_DIGEST_MAX + 1];

  jw_string (w->json, "digest", w->p->digest.name);
  jw_uint (w->json, "block-size", w->p->block_size);
  jw_uint (w->json, "size", w->size);
  jw_string (w->json, "method", method);
  jw_string (w->json, "checksum", root_hex);
  blk_hex (w->p->zero_digest, w->p->digest.len, hex);
  jw_string (w->json, "zero-hash", hex);
  jw_begin_array (w->json, "blocks", false);
}

void
manifest_json_write_entry (const struct manifest_writer *w, uint64_t offset,
                           uint64_t length, const char *hex)
{
  jw_begin_object (w->json, NULL, true);
  jw_uint (w->json, "offset", offset);
  jw_uint (w->json, "length", length);
  if (hex)
    jw_string (w->json, "hash", hex);
  else
    jw_bool (w->json, "zero", true);
  jw_end (w->json);
}

void
manifest_json_write_end (const struct manifest_writer *w)
{
  jw_end (w->json);
}
