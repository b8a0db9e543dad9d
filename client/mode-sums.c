/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum NAME...: the checksum of each input, as sha256sum prints
 * them, or with --json an element of "inputs" each; -j hashes several
 * at once (jobs.h), printed in input order all the same.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "input.h"
#include "jobs.h"
#include "json.h"
#include "modes.h"
#include "signals.h"
#include "sumline.h"

/* A checksum line says how to verify it: tagged with its digest and
 * block size unless they are the defaults (or as --tag, --untagged),
 * and with the format a file was given, which probing might not find
 * again (--untagged: not even that, as sha256sum's lines), and the
 * range of --range (always tagged: --untagged refuses it).
 */
static void
print_sum_line (const struct result *res)
{
  unsigned flags = opts->zero ? BLK_SUM_ZERO : 0;

  /* --no-names: the value alone, as b3sum --no-names, for scripts. */
  if (opts->no_names) {
    printf ("%s%c", res->hex, opts->zero ? '\0' : '\n');
    return;
  }
  /* A plain digest, as sha256sum --tag prints it (sha256sum's own
   * form with --untagged), with the format when the file was read as
   * another than raw: a line without one is checked against the bytes.
   */
  if (res->plain) {
    if (opts->tag != TAG_NEVER)
      flags |= BLK_SUM_TAGGED;
    blk_fput_plain_line_range (stdout, flags, res->digest,
                               res->format[0] &&
                               strcmp (res->format, "raw") != 0
                               ? res->format : NULL, &res->range, res->hex,
                               res->name);
    return;
  }
  if (opts->tag == TAG_ALWAYS ||
      (opts->tag == TAG_AUTO &&
       blk_sum_needs_tag (res->digest, res->block_size)))
    flags |= BLK_SUM_TAGGED;
  blk_fput_sum_line_range (stdout, flags, res->digest, res->block_size,
                           res->format_given && opts->tag != TAG_NEVER
                           ? res->format : NULL, &res->range, res->hex,
                           res->name);
}

/* --json: an input without a checksum, and why. */
static void
json_failed (const char *name, const char *error)
{
  json_begin_object (NULL, true);
  json_name ("name", name);
  json_string ("error", error ? error : "failed");
  json_end ();
}

/* One input's turn: its checksum line, or with --json its element of
 * "inputs".
 */
static void
input_done (const struct job_outcome *out, unsigned *failed)
{
  if (out == NULL)
    return;
  if (out->r == -1) {
    (*failed)++;
    if (opts->json) {
      json_failed (out->name, out->error);
      stdout_flush ();
    }
    return;
  }
  if (opts->json) {
    json_begin_object (NULL, true);
    json_name ("name", out->res.name);
    result_json_members (&out->res);
    json_end ();
  }
  else
    print_sum_line (&out->res);
  stdout_flush ();
}

/* With --json, the document when views among the inputs stopped the
 * run, with every input and why it was not hashed.
 */
static void
json_refused (char **names, int n, char **errors)
{
  json_begin_object (NULL, false);
  json_begin_array ("inputs", false);
  for (int i = 0; i < n; i++)
    json_failed (names[i], errors[i] ? errors[i] : INPUT_VIEW_REFUSED);
  json_end ();
  json_uint ("failed", n);
  json_end ();
}

int
mode_sums (char **args, int nargs, const struct hash_spec *spec)
{
  struct job_item item;
  struct jobs *j;
  unsigned failed = 0;

  if (input_views_refused (args, nargs, opts->json ? json_refused : NULL))
    return EXIT_FAILURE;
  if (opts->json) {
    json_begin_object (NULL, false);
    json_begin_array ("inputs", false);
  }
  /* One input: nothing to do at once, and its own bar. */
  j = jobs_begin (nargs > 1 ? opts->jobs : 1, nargs);
  for (int i = 0; i < nargs && !stop_signal (); i++) {
    jobs_hash (j, args[i], spec, opts->json, NULL);
    while (jobs_next (j, false, &item))
      input_done (item.out, &failed);
  }
  while (jobs_next (j, true, &item))
    input_done (item.out, &failed);
  jobs_end (j);
  if (opts->json && !stop_signal ()) {
    json_end ();
    json_uint ("failed", failed);
    json_end ();
  }
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
