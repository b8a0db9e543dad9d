/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: --diff (where do two images differ?) and --blocks (the
 * per-block manifest).  Both compare or print block digests; through
 * blkhash views only digests cross the network.  --diff --manifest
 * compares a saved manifest (manifest.c) with an image.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "cleanup.h"
#include "diff.h"
#include "endpoint.h"
#include "incremental.h"
#include "json.h"
#include "manifest.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"
#include "signals.h"
#include "util.h"

/* Blocks compared or printed per round of digest reads. */
#define WINDOW 65536

/* Open name and hash it, for its block digests (and root, if not
 * NULL).
 */
static struct endpoint *
open_hashed (const char *name, const struct hash_spec *spec, uint8_t *root)
{
  struct endpoint *ep = input_open (name, spec);
  uint8_t unused[BLK_DIGEST_MAX];

  if (ep && ep->ops->checksum (ep, root ? root : unused) == -1) {
    input_close (ep);
    return NULL;
  }
  return ep;
}

/* One side of a comparison: an image, hashed, or (A only) a saved
 * manifest.
 */
struct side {
  const char *name;
  struct endpoint *ep;
  struct manifest *m;
  const struct blk_params *params;
  uint64_t size, nblocks;
};

static int
side_digests (struct side *s, uint64_t first, uint64_t count, uint8_t *out)
{
  if (s->m)
    return manifest_digests (s->m, first, count, out);
  return s->ep->ops->digests (s->ep, first, count, out);
}

static void
side_close (struct side *s)
{
  input_close (s->ep);
  manifest_close (s->m);
}

/* --json: what was opened, or why it could not be (not when a signal
 * stopped it: the document then ends "interrupted").
 */
static void
json_side (const char *key, const struct side *s, const char *error)
{
  if (stop_signal ())
    return;
  json_begin_object (key, true);
  json_name ("name", s->name);
  if (s->ep == NULL && s->m == NULL)
    json_string ("error", error ? error : "failed");
  else {
    if (s->m)
      json_bool ("manifest", true);
    else
      json_string ("method", s->ep->ops->name);
    json_uint ("size", s->size);
  }
  json_end ();
}

/* Open side s: the image name, hashed as spec says, or the saved
 * manifest at name when spec is NULL.
 */
static int
open_side (const char *key, struct side *s, const char *name,
           const struct hash_spec *spec)
{
  CLEANUP_FREE char *error = NULL;

  s->name = name;
  if (opts->json)
    messages_capture (name);
  if (spec)
    s->ep = open_hashed (name, spec, NULL);
  else
    s->m = manifest_open (name);
  if (opts->json)
    error = messages_captured ();
  if (s->ep) {
    s->params = s->ep->params;
    s->size = s->ep->size;
    s->nblocks = s->ep->nblocks;
  }
  else if (s->m) {
    s->params = manifest_params (s->m);
    s->size = manifest_size (s->m);
    s->nblocks = blk_block_count (s->size, s->params->block_size);
  }
  if (opts->json)
    json_side (key, s, error);
  return s->ep || s->m ? 0 : -1;
}

struct runs {
  uint64_t start, end;          /* current run, empty if equal */
  uint64_t bytes, count;
};

static void
flush_run (struct runs *r)
{
  if (r->end == r->start)
    return;
  if (opts->json) {
    json_begin_object (NULL, true);
    json_uint ("offset", r->start);
    json_uint ("length", r->end - r->start);
    json_end ();
  }
  else
    printf ("%" PRIu64 " %" PRIu64 "\n", r->start, r->end - r->start);
  r->bytes += r->end - r->start;
  r->count++;
  r->start = r->end;
}

static void
add_range (struct runs *r, uint64_t start, uint64_t end)
{
  if (start != r->end)
    flush_run (r);
  if (r->end == r->start)
    r->start = start;
  r->end = end;
}

/* Print where a and b differ.  Returns the exit status. */
static int
compare (struct side *a, struct side *b)
{
  CLEANUP_FREE uint8_t *da = NULL, *db = NULL;
  struct runs runs = { 0 };
  uint64_t common, bs, max_size;
  size_t L;

  if (a->params->digest.len != b->params->digest.len ||
      a->params->block_size != b->params->block_size) {
    error_msg ("%s and %s were hashed differently", a->name, b->name);
    return 2;
  }

  L = a->params->digest.len;
  bs = a->params->block_size;
  common = MIN (a->nblocks, b->nblocks);
  max_size = MAX (a->size, b->size);
  da = malloc (WINDOW * L);
  db = malloc (WINDOW * L);
  if (da == NULL || db == NULL) {
    error_msg ("out of memory");
    return 2;
  }
  if (opts->json) {
    json_string ("digest", a->params->digest.name);
    json_uint ("block-size", bs);
    json_begin_array ("ranges", false);
  }
  for (uint64_t w = 0; w < common; w += WINDOW) {
    const uint64_t n = MIN (common - w, (uint64_t) WINDOW);
    if (stop_signal () || side_digests (a, w, n, da) == -1 ||
        side_digests (b, w, n, db) == -1)
      return 2;
    for (uint64_t i = 0; i < n; i++) {
      if (memcmp (da + i * L, db + i * L, L) != 0) {
        const uint64_t start = (w + i) * bs;
        add_range (&runs, start, MIN (start + bs, max_size));
      }
    }
  }
  /* Whatever only the larger image has differs. */
  if (a->size != b->size) {
    add_range (&runs, MAX (runs.end, MIN (a->size, b->size)), max_size);
  }
  flush_run (&runs);
  if (stop_signal ())
    return 2;
  if (opts->json) {
    json_end ();
    json_uint ("differing-bytes", runs.bytes);
    json_uint ("differing-ranges", runs.count);
  }
  /* The summary, but not beside the JSON document that holds it. */
  if (runs.count && !opts->json)
    notice_at (NULL, "%s and %s differ in %" PRIu64 " bytes (%" PRIu64
               " range%s, compared in %" PRIu64 " byte blocks)", a->name,
               b->name, runs.bytes, runs.count, runs.count == 1 ? "" : "s",
               bs);
  return runs.count ? 1 : 0;
}

/* A is image a, or the manifest at path manifest when a is NULL. */
static int
diff (const char *manifest, const char *a, const char *b,
      const struct hash_spec *spec)
{
  struct side sa = { 0 }, sb = { 0 };
  struct hash_spec spec_b;
  CLEANUP_FREE char *error = NULL;
  int status = 2;

  if (opts->json)
    json_begin_object (NULL, false);
  if (manifest) {
    if (open_side ("a", &sa, manifest, NULL) == -1)
      goto out;
    if (opts->json)
      messages_capture (NULL);
    if (manifest_hash_spec (sa.m, spec, &spec_b) == -1)
      goto out;
  }
  else {
    if (open_side ("a", &sa, a, spec) == -1)
      goto out;
    /* B must be hashed the same way as A (whatever A's server chose). */
    spec_b = (struct hash_spec) {
      spec->digest ? spec->digest : sa.params->digest.name,
      spec->block_size ? spec->block_size : sa.params->block_size,
      NULL,
    };
  }
  if (opts->json)
    free (messages_captured ());
  if (open_side ("b", &sb, b, &spec_b) == -1)
    goto out;
  if (opts->json)
    messages_capture (NULL);
  status = compare (&sa, &sb);

 out:
  if (opts->json) {
    error = messages_captured ();
    if (!stop_signal ()) {
      /* An error of neither input alone (those are in theirs). */
      if (status == 2 && error) {
        json_end_to (1);
        json_string ("error", error);
      }
      json_end_to (0);
    }
  }
  side_close (&sa);
  side_close (&sb);
  return status;
}

int
diff_images (const char *a, const char *b, const struct hash_spec *spec)
{
  return diff (NULL, a, b, spec);
}

int
diff_manifest (const char *manifest, const char *b,
               const struct hash_spec *spec)
{
  return diff (manifest, NULL, b, spec);
}

static void
print_block_line (uint64_t offset, uint64_t length, const char *hex)
{
  if (opts->json) {
    json_begin_object (NULL, true);
    json_uint ("offset", offset);
    json_uint ("length", length);
    if (hex)
      json_string ("hash", hex);
    else
      json_bool ("zero", true);
    json_end ();
  }
  else
    printf ("%" PRIu64 " %" PRIu64 " %s\n", offset, length,
            hex ? hex : "zero");
}

/* What --blocks prints: an image hashed, or with --since its blocks
 * now.
 */
struct block_list {
  struct endpoint *ep;
  struct incremental *inc;
  const struct endpoint *iep;   /* ep, or inc's */
  uint8_t root[BLK_DIGEST_MAX];
};

static int
block_list_open (struct block_list *bl, const char *name,
                 const struct hash_spec *spec)
{
  if (opts->since) {
    if ((bl->inc = incremental_open (name, spec)) == NULL)
      return -1;
    bl->iep = incremental_endpoint (bl->inc);
    memcpy (bl->root, incremental_root (bl->inc), bl->iep->params->digest.len);
    return 0;
  }
  if ((bl->ep = open_hashed (name, spec, bl->root)) == NULL)
    return -1;
  bl->iep = bl->ep;
  return 0;
}

static int
block_list_digests (struct block_list *bl, uint64_t first, uint64_t count,
                    uint8_t *out)
{
  if (bl->inc)
    return incremental_digests (bl->inc, first, count, out);
  return bl->ep->ops->digests (bl->ep, first, count, out);
}

static void
block_list_close (struct block_list *bl)
{
  incremental_close (bl->inc);
  input_close (bl->ep);
}

int
print_blocks (const char *name, const struct hash_spec *spec)
{
  struct block_list bl = { NULL };
  const struct endpoint *ep;
  CLEANUP_FREE uint8_t *d = NULL;
  CLEANUP_FREE char *error = NULL;
  char hex[2 * BLK_DIGEST_MAX + 1];
  uint64_t zero_start = 0, zero_len = 0;
  int status = EXIT_FAILURE;

  if (opts->json) {
    json_begin_object (NULL, false);
    json_name ("name", name);
    messages_capture (name);
  }
  if (block_list_open (&bl, name, spec) == -1)
    goto out;
  ep = bl.iep;
  if ((d = malloc (WINDOW * ep->params->digest.len)) == NULL) {
    error_at (name, "out of memory");
    goto out;
  }
  blk_hex (bl.root, ep->params->digest.len, hex);
  if (opts->json) {
    json_string ("digest", ep->params->digest.name);
    json_uint ("block-size", ep->params->block_size);
    json_uint ("size", ep->size);
    json_string ("method", ep->ops->name);
    json_string ("checksum", hex);
    blk_hex (ep->params->zero_digest, ep->params->digest.len, hex);
    json_string ("zero-hash", hex);
    json_begin_array ("blocks", false);
  }
  else
    printf ("# %s %" PRIu32 " %" PRIu64 " %s\n", ep->params->digest.name,
            ep->params->block_size, ep->size, hex);
  for (uint64_t w = 0; w < ep->nblocks; w += WINDOW) {
    const uint64_t n = MIN (ep->nblocks - w, (uint64_t) WINDOW);
    if (block_list_digests (&bl, w, n, d) == -1)
      goto out;
    for (uint64_t i = 0; i < n; i++) {
      /* Stop at a signal (SIGPIPE from "| head"), or when standard
       * output fails with SIGPIPE ignored.
       */
      if (stop_signal () || ferror (stdout))
        goto out;
      const uint64_t b = w + i, off = b * ep->params->block_size;
      const uint32_t len = blk_block_len (ep->size, ep->params->block_size, b);
      const uint8_t *digest = d + i * ep->params->digest.len;
      /* Runs of full zero blocks make one line. */
      if (len == ep->params->block_size &&
          memcmp (digest, ep->params->zero_digest,
                  ep->params->digest.len) == 0) {
        if (zero_len == 0)
          zero_start = off;
        zero_len += len;
        continue;
      }
      if (zero_len)
        print_block_line (zero_start, zero_len, NULL);
      zero_len = 0;
      blk_hex (digest, ep->params->digest.len, hex);
      print_block_line (off, len, hex);
    }
  }
  if (zero_len)
    print_block_line (zero_start, zero_len, NULL);
  status = EXIT_SUCCESS;
 out:
  if (opts->json) {
    error = messages_captured ();
    if (!stop_signal ()) {
      if (status != EXIT_SUCCESS) {
        json_end_to (1);
        json_string ("error", error ? error : "failed");
      }
      json_end_to (0);
    }
  }
  block_list_close (&bl);
  return status;
}
