/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: print or check blkhash checksums of disk images.  This file
 * owns main: it parses the options, sends the run to its mode (-c and
 * --check-manifest to check.c, --diff and --blocks to diff.c, plain
 * checksums here, --since with either to incremental.c through them)
 * and prints checksums.  -j hands the inputs to jobs.c, which hashes
 * several at once and calls back here in input order.
 *
 * Hashing one input: checksum_one (checksum.c) opens it with
 * input_open, which picks the method (serverside.c, else
 * clientside.c), whose checksum runs endpoint_run (endpoint.c), one
 * poll loop per connection.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "check.h"
#include "checksum.h"
#include "diff.h"
#include "endpoint.h"
#include "helpers.h"
#include "jobs.h"
#include "json.h"
#include "local.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"
#include "signals.h"
#include "source.h"
#include "sumline.h"

/* A checksum line says how to verify it: tagged with its digest and
 * block size unless they are the defaults (or as --tag, --untagged),
 * and with the format a file was given, which probing might not find
 * again (--untagged: not even that, as sha256sum's lines).
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
  if (opts->tag == TAG_ALWAYS ||
      (opts->tag == TAG_AUTO &&
       blk_sum_needs_tag (res->digest, res->block_size)))
    flags |= BLK_SUM_TAGGED;
  blk_fput_sum_line (stdout, flags, res->digest, res->block_size,
                     res->format_given && opts->tag != TAG_NEVER
                     ? res->format : NULL, res->hex, res->name);
}

/* Print res as a checksum line or, with --json, as an element of
 * "inputs".
 */
static void
print_result (const struct result *res)
{
  if (opts->json) {
    json_begin_object (NULL, true);
    json_name ("name", res->name);
    result_json_members (res);
    json_end ();
  }
  else
    print_sum_line (res);
  stdout_flush ();
}

/* --json: an input without a checksum, and why. */
static void
json_failed (const char *key, const char *name, const char *error)
{
  json_begin_object (key, true);
  json_name ("name", name);
  json_string ("error", error ? error : "failed");
  json_end ();
}

#define NOT_HASHED "not hashed: an input is a blkhash view"

/* --json: the document when views among the inputs stopped the run,
 * with every input and why it was not hashed.
 */
static void
json_refused (char **names, int n, char **errors)
{
  json_begin_object (NULL, false);
  if (opts->diff)
    for (int i = 0; i < n; i++)
      json_failed (i == 1 || opts->manifest ? "b" : "a", names[i],
                   errors[i] ? errors[i] : NOT_HASHED);
  else if (opts->blocks) {
    json_name ("name", names[0]);
    json_string ("error", errors[0] ? errors[0] : NOT_HASHED);
  }
  else {
    json_begin_array ("inputs", false);
    for (int i = 0; i < n; i++)
      json_failed (NULL, names[i], errors[i] ? errors[i] : NOT_HASHED);
    json_end ();
    json_uint ("failed", n);
  }
  json_end ();
}

/* Refuse views among the inputs before anything is hashed (inputs in
 * --check files are refused as their lines come).
 */
static bool
any_view (char **names, int n)
{
  char **errors = NULL;
  bool found = false;

  if (opts->json && (errors = calloc (n, sizeof *errors)) == NULL) {
    error_msg ("out of memory");
    exit (opts->diff ? 2 : EXIT_FAILURE);
  }
  for (int i = 0; i < n; i++) {
    if (errors)
      messages_capture (names[i]);
    if (refuse_view (names[i]))
      found = true;
    if (errors)
      errors[i] = messages_captured ();
  }
  if (errors) {
    if (found)
      json_refused (names, n, errors);
    for (int i = 0; i < n; i++)
      free (errors[i]);
    free (errors);
  }
  return found;
}

/* One input's turn: its checksum line, or with --json its element of
 * "inputs".
 */
static void
input_done (void *opaque, const struct job_outcome *out)
{
  unsigned *failed = opaque;

  if (out == NULL)
    return;
  if (out->r == -1) {
    (*failed)++;
    if (opts->json) {
      json_failed (NULL, out->name, out->error);
      stdout_flush ();
    }
  }
  else
    print_result (&out->res);
}

/* The checksum of each input, -j of them at once.  Returns the exit
 * status.
 */
static int
checksum_inputs (char **args, int nargs, const struct hash_spec *spec)
{
  unsigned failed = 0;

  if (opts->json) {
    json_begin_object (NULL, false);
    json_begin_array ("inputs", false);
  }
  /* One input: nothing to do at once, and its own bar. */
  jobs_begin (nargs > 1 ? opts->jobs : 1);
  jobs_expect (nargs);
  for (int i = 0; i < nargs && !stop_signal (); i++)
    jobs_hash (args[i], spec, opts->json, input_done, &failed);
  jobs_finish ();
  if (opts->json && !stop_signal ()) {
    json_end ();
    json_uint ("failed", failed);
    json_end ();
  }
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* A standard descriptor closed (>&-): hold its number with /dev/null
 * opened the other way, so that using it still fails as closed
 * (EBADF: 'write error: Bad file descriptor', as sha256sum says) but
 * no socket or file nbdsum opens takes it, and the private nbdkit,
 * which refuses to start without them, has it.
 */
static void
hold_std_fds (void)
{
  for (int fd = 0; fd <= 2; fd++)
    if (fcntl (fd, F_GETFD) == -1 && errno == EBADF) {
      /* The lowest free number: fd. */
      const int r = open ("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
      if (r >= 0 && r != fd)
        close (r);
    }
}

/* Raise the soft limit on descriptors towards the hard one, as far as
 * the run needs: its jobs' pipes, and in every process (each inherits
 * it, a private nbdkit too) a server's need for -C connections, with
 * room for nbdsum's own.  Where the hard limit is lower, jobs.c runs
 * fewer jobs at once and local.c refuses to start a server that would
 * run short, naming ulimit -n.
 */
static void
raise_fd_limit (void)
{
  const rlim_t jobs = opts->jobs > 1 ? JOBS_FDS ((rlim_t) opts->jobs) : 0;
  const rlim_t server = 32 + LOCAL_SERVER_FDS ((rlim_t) opts->connections);
  const rlim_t want = MAX (jobs, server);
  struct rlimit rl;

  if (getrlimit (RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur == RLIM_INFINITY ||
      rl.rlim_cur >= want)
    return;
  rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want
    ? rl.rlim_max : want;
  setrlimit (RLIMIT_NOFILE, &rl);
}

/* Each [ CMD ARGS... ] in argv becomes one input, as in nbdinfo and
 * nbdcopy, before getopt sees the command's options.  Returns the new
 * argc; exits on a '[' without its ']'.
 */
static int
collapse_commands (int argc, char **argv)
{
  int i, j, k, out = 0;

  for (i = 0; i < argc; i++) {
    if (i == 0 || strcmp (argv[i], "[") != 0) {
      argv[out++] = argv[i];
      continue;
    }
    for (j = i + 1; j < argc && strcmp (argv[j], "]") != 0; j++)
      ;
    if (j == argc || j == i + 1) {
      fprintf (stderr, "%s: '[' must be followed by a command and ']'\n",
               progname);
      exit (EXIT_FAILURE);
    }
    argv[out++] = (char *) local_command_add (&argv[i + 1], j - i - 1);
    if (argv[out - 1] == NULL) {
      fprintf (stderr, "%s: out of memory\n", progname);
      exit (EXIT_FAILURE);
    }
    i = j;
  }
  for (k = out; k < argc; k++)
    argv[k] = NULL;
  return out;
}

int
main (int argc, char **argv)
{
  int first, nargs, status, err;
  char *stdin_only[] = { (char *) "-" };
  char **args;

  /* Request buffers (never more than a span) are reused instead of
   * mapped and faulted in anew.
   */
  mallopt (M_MMAP_THRESHOLD, SPAN_BYTES);
  hold_std_fds ();

  argc = collapse_commands (argc, argv);
  parse_options (argc, argv, &first);
  raise_fd_limit ();
  catch_stop_signals ();

  /* Inputs are hashed as the options say (--diff: B as A was). */
  const struct hash_spec spec = { opts->digest, opts->block_size, NULL };

  /* No input: standard input, as sha256sum does. */
  args = &argv[first];
  nargs = argc - first;
  if (nargs == 0) {
    args = stdin_only;
    nargs = 1;
  }
  if (opts->check)
    status = check_files (args, nargs, &spec);
  else if (opts->check_manifest)
    status = check_manifests (args, nargs);
  else if (any_view (args, nargs))
    status = opts->diff ? 2 : EXIT_FAILURE;
  else if (opts->diff && opts->manifest)
    status = diff_manifest (opts->manifest, args[0], &spec);
  else if (opts->diff)
    status = diff_images (args[0], args[1], &spec);
  else if (opts->blocks)
    status = print_blocks (args[0], &spec);
  else
    status = checksum_inputs (args, nargs, &spec);
  if (stop_signal ()) {
    /* The document ends, valid, saying so. */
    if (opts->json) {
      json_interrupted (stop_signal ());
      stdout_flush ();
    }
    die_of_signal (stop_signal ());
  }
  /* As sha256sum says it. */
  if ((err = stdout_error ()) != 0) {
    error_msg ("write error: %s", strerror (err));
    status = opts->diff ? 2 : EXIT_FAILURE;
  }
  return status;
}
