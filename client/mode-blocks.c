/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --blocks: the digest of every block of an image, its
 * manifest (the format: manifest.h), printed as the image is hashed;
 * through a blkhash view only digests cross the network.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "input.h"
#include "json.h"
#include "messages.h"
#include "minmax.h"
#include "modes.h"
#include "signals.h"
#include "util.h"

/* Blocks printed per round of digest reads. */
#define WINDOW 65536

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

/* Print in's blocks, a run of full zero blocks as one line. */
static int
print_blocks (struct input *in, const struct result *res)
{
  const struct blk_params *p = in->params;
  CLEANUP_FREE uint8_t *d = malloc (WINDOW * p->digest.len);
  char hex[2 * BLK_DIGEST_MAX + 1];
  uint64_t zero_start = 0, zero_len = 0;

  if (d == NULL) {
    error_at (in->name, "out of memory");
    return -1;
  }
  if (opts->json) {
    json_string ("digest", res->digest);
    json_uint ("block-size", res->block_size);
    json_uint ("size", res->size);
    json_string ("method", res->method);
    json_string ("checksum", res->hex);
    blk_hex (p->zero_digest, p->digest.len, hex);
    json_string ("zero-hash", hex);
    json_begin_array ("blocks", false);
  }
  else
    printf ("# %s %" PRIu32 " %" PRIu64 " %s\n", res->digest,
            res->block_size, res->size, res->hex);
  for (uint64_t w = 0; w < in->nblocks; w += WINDOW) {
    const uint64_t n = MIN (in->nblocks - w, (uint64_t) WINDOW);
    if (in->ops->digests (in, w, n, d) == -1)
      return -1;
    for (uint64_t i = 0; i < n; i++) {
      /* Stop at a signal (SIGPIPE from "| head"), or when standard
       * output fails with SIGPIPE ignored.
       */
      if (stop_signal () || ferror (stdout))
        return -1;
      const uint64_t b = w + i, off = b * p->block_size;
      const uint32_t len = blk_block_len (in->size, p->block_size, b);
      const uint8_t *digest = d + i * p->digest.len;
      /* Runs of full zero blocks make one line. */
      if (len == p->block_size &&
          memcmp (digest, p->zero_digest, p->digest.len) == 0) {
        if (zero_len == 0)
          zero_start = off;
        zero_len += len;
        continue;
      }
      if (zero_len)
        print_block_line (zero_start, zero_len, NULL);
      zero_len = 0;
      blk_hex (digest, p->digest.len, hex);
      print_block_line (off, len, hex);
    }
  }
  if (zero_len)
    print_block_line (zero_start, zero_len, NULL);
  return 0;
}

/* With --json, the document when the input is a view. */
static void
json_refused (char **names, int n, char **errors)
{
  (void) n;
  json_begin_object (NULL, false);
  json_name ("name", names[0]);
  json_string ("error", errors[0] ? errors[0] : INPUT_VIEW_REFUSED);
  json_end ();
}

int
mode_blocks (char **args, int nargs, const struct hash_spec *spec)
{
  const char *name = args[0];
  CLEANUP_FREE char *error = NULL;
  struct input *in;
  struct result res;
  int status = EXIT_FAILURE;

  if (input_views_refused (args, nargs, opts->json ? json_refused : NULL))
    return EXIT_FAILURE;
  if (opts->json) {
    json_begin_object (NULL, false);
    json_name ("name", name);
    messages_capture (name);
  }
  in = input_open (name, spec, INPUT_DIGESTS);
  if (in && input_checksum (in, &res) == 0 && print_blocks (in, &res) == 0)
    status = EXIT_SUCCESS;
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
  input_close (in);
  return status;
}
