/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --diff: where do two images differ?  A is an image or, with
 * --manifest, a saved manifest; B is hashed as A was.  Their block
 * digests are compared; through blkhash views only digests cross the
 * network.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "digest.h"
#include "input.h"
#include "json.h"
#include "messages.h"
#include "minmax.h"
#include "modes.h"
#include "signals.h"

/* Blocks compared per round of digest reads. */
#define WINDOW 65536

/* --json: what was opened, or why it could not be (not when a signal
 * stopped it: the document then ends "interrupted").
 */
static void
json_side (const char *key, const char *name, const struct input *in,
           const char *error)
{
  if (stop_signal ())
    return;
  json_begin_object (key, true);
  json_name ("name", name);
  if (in == NULL)
    json_string ("error", error ? error : "failed");
  else {
    json_string ("method", input_method (in));
    json_uint ("size", in->size);
  }
  json_end ();
}

/* Open side key of the comparison, name, and hash it.  NULL on error
 * (printed, and with --json in its element).
 */
static struct input *
open_side (const char *key, const char *name, const struct hash_spec *spec,
           unsigned flags)
{
  CLEANUP_FREE char *error = NULL;
  struct result res;
  struct input *in;

  if (opts->json)
    messages_capture (name);
  in = input_open (name, spec, flags | INPUT_DIGESTS | INPUT_VERIFY);
  if (in && input_checksum (in, &res) == -1) {
    input_close (in);
    in = NULL;
  }
  if (opts->json) {
    error = messages_captured ();
    json_side (key, name, in, error);
  }
  return in;
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
compare (struct input *a, struct input *b)
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
    if (stop_signal () || a->ops->digests (a, w, n, da) == -1 ||
        b->ops->digests (b, w, n, db) == -1)
      return 2;
    for (uint64_t i = 0; i < n; i++) {
      if (memcmp (da + i * L, db + i * L, L) != 0) {
        const uint64_t start = (w + i) * bs;
        add_range (&runs, start, MIN (start + bs, max_size));
      }
    }
  }
  /* Each side's word, where it had to wait for its digests read. */
  if (input_verify (a) == -1 || input_verify (b) == -1)
    return 2;
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

/* Does manifest a say another digest or block size than spec asks?
 * Then say so.
 */
static bool
made_otherwise (const struct input *a, const struct hash_spec *spec)
{
  const struct blk_params *p = a->params;

  if (spec->digest && !blk_digest_same (spec->digest, p->digest.name))
    error_at (a->name, "the manifest was made with %s, not %s",
              p->digest.name, spec->digest);
  else if (spec->block_size && spec->block_size != p->block_size)
    error_at (a->name, "the manifest was made with %" PRIu32 " byte "
              "blocks, not %" PRIu64, p->block_size, spec->block_size);
  else
    return false;
  return true;
}

/* With --json, the document when views among the inputs stopped the
 * run: each side, and why it was not hashed.
 */
static void
json_refused (char **names, int n, char **errors)
{
  json_begin_object (NULL, false);
  for (int i = 0; i < n; i++)
    json_side (i == 1 || opts->manifest ? "b" : "a", names[i], NULL,
               errors[i] ? errors[i] : INPUT_VIEW_REFUSED);
  json_end ();
}

int
mode_diff (char **args, int nargs, const struct hash_spec *spec)
{
  struct input *a = NULL, *b = NULL;
  struct hash_spec spec_b;
  CLEANUP_FREE char *error = NULL;
  int status = 2;

  if (input_views_refused (args, nargs, opts->json ? json_refused : NULL))
    return 2;
  if (opts->json)
    json_begin_object (NULL, false);
  /* A is image args[0], or the manifest --manifest names. */
  if (opts->manifest)
    a = open_side ("a", opts->manifest, spec, INPUT_SAVED);
  else
    a = open_side ("a", args[0], spec, 0);
  if (a == NULL)
    goto out;
  if (opts->json)
    messages_capture (NULL);
  /* B is hashed as A was made: -d and --block-size may only repeat
   * what the manifest says (an image A was hashed as they say).
   */
  if (opts->manifest && made_otherwise (a, spec))
    goto out;
  if (opts->json)
    free (messages_captured ());
  /* B must be hashed the same way as A (whatever A's server chose). */
  spec_b = (struct hash_spec) {
    a->params->digest.name, a->params->block_size, NULL, false, { 0, 0 },
  };
  if ((b = open_side ("b", args[nargs - 1], &spec_b, 0)) == NULL)
    goto out;
  if (opts->json)
    messages_capture (NULL);
  status = compare (a, b);

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
  input_close (a);
  input_close (b);
  return status;
}
