/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --blocks: the digest of every block of an image, its
 * manifest (written by manifest.h's owner); through a blkhash view
 * only digests cross the network.  The text goes to a temporary file
 * first, printed once its digests fold to the root that heads it: a
 * server's view could say another, and a refusal prints nothing.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "cleanup.h"
#include "helpers.h"
#include "input.h"
#include "json.h"
#include "manifest.h"
#include "messages.h"
#include "minmax.h"
#include "modes.h"
#include "signals.h"

/* Blocks printed per round of digest reads. */
#define WINDOW 65536

/* Copy the manifest from fp to standard output. */
static int
print_spooled (const char *name, FILE *fp)
{
  char buf[65536];
  size_t n;

  if (fflush (fp) == EOF || fseek (fp, 0, SEEK_SET) == -1) {
    error_at (name, "the temporary file: %m");
    return -1;
  }
  while (!stop_signal () && (n = fread (buf, 1, sizeof buf, fp)) > 0)
    if (!stdout_write (buf, n))
      return -1;
  if (ferror (fp)) {
    error_at (name, "the temporary file: %m");
    return -1;
  }
  return stop_signal () ? -1 : 0;
}

/* The manifest being written, for fold_digests' reads. */
struct blocks_out {
  struct input *in;
  struct manifest_writer w;
  FILE *out;
};

static int
write_blocks (void *opaque, uint64_t first, uint64_t n, uint8_t *d)
{
  struct blocks_out *bo = opaque;

  if (bo->in->ops->digests (bo->in, first, n, d) == -1)
    return -1;
  manifest_write_blocks (&bo->w, first, n, d);
  /* Stop at a signal (SIGPIPE from "| head"), or when the output
   * fails (with SIGPIPE ignored, or a full disk).
   */
  return stop_signal () || ferror (bo->out) ? -1 : 0;
}

/* Print the manifest once the digests, folded as they come, give the
 * root that heads it and input_verify passed; with --json, as they
 * come (the document then ends with the error).
 */
static int
print_blocks (struct input *in, const uint8_t *root, const char *method)
{
  const struct blk_params *p = in->params;
  uint8_t folded[BLK_DIGEST_MAX];
  struct blocks_out bo = { .in = in, .out = stdout };
  int ret = -1;

  if (!opts->json && (bo.out = temp_file (in->name)) == NULL)
    return -1;
  manifest_write_begin (&bo.w, bo.out, opts->json ? &json_out : NULL, p,
                        in->size, root, method);
  if (fold_digests (in->name, p, in->size, in->nblocks, WINDOW,
                    write_blocks, &bo, folded) == -1)
    goto out;
  manifest_write_end (&bo.w);
  if (ferror (bo.out)) {
    error_at (in->name, "writing the manifest: %m");
    goto out;
  }
  if (!root_agrees (in->name, p, root, folded) || input_verify (in) == -1)
    goto out;
  ret = bo.out == stdout ? 0 : print_spooled (in->name, bo.out);
 out:
  if (bo.out != stdout)
    fclose (bo.out);
  return ret;
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
  uint8_t root[BLK_DIGEST_MAX];
  struct input *in;
  int status = EXIT_FAILURE;

  if (input_views_refused (args, nargs, opts->json ? json_refused : NULL))
    return EXIT_FAILURE;
  if (opts->json) {
    json_begin_object (NULL, false);
    json_name ("name", name);
    messages_capture (name);
  }
  in = input_open (name, spec, INPUT_DIGESTS | INPUT_VERIFY);
  if (in && in->ops->checksum (in, root) == 0 &&
      print_blocks (in, root, input_method (in)) == 0)
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
