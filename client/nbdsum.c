/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: print or check blkhash checksums of disk images.  This file
 * owns main: the process (descriptors, limits, signals), the options,
 * and running the mode they chose (modes.h).  A mode asks inputs
 * (input.h) for checksums or block digests; input_open chooses what
 * kind of input each name is.
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

#include "endpoint.h"
#include "helpers.h"
#include "jobs.h"
#include "json.h"
#include "local-command.h"
#include "local.h"
#include "messages.h"
#include "minmax.h"
#include "modes.h"
#include "names.h"
#include "options.h"
#include "signals.h"

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
  int i, j, k, out = 0, commands = 0;

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
    if (++commands > MAX_COMMANDS) {
      fprintf (stderr, "%s: at most %d [ CMD ] inputs\n", progname,
               MAX_COMMANDS);
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

/* The modes, and the exit status each gives for an error. */
static const struct mode {
  mode_fn *run;
  int error_status;
} modes[] = {
  { mode_sums, EXIT_FAILURE },
  { mode_check, EXIT_FAILURE },
  { mode_check_manifest, EXIT_FAILURE },
  { mode_diff, 2 },             /* as diff(1): 1 says they differ */
  { mode_blocks, EXIT_FAILURE },
  { mode_bmap, EXIT_FAILURE },
};

/* The mode the options chose (parse_options allows one). */
static const struct mode *
chosen_mode (void)
{
  if (opts->check)
    return &modes[1];
  if (opts->check_manifest)
    return &modes[2];
  if (opts->diff)
    return &modes[3];
  if (opts->blocks)
    return &modes[4];
  if (opts->bmap)
    return &modes[5];
  return &modes[0];
}

int
main (int argc, char **argv)
{
  const struct mode *mode;
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
  mode = chosen_mode ();

  /* Inputs are hashed as the options say (--diff: B as A was). */
  const struct hash_spec spec = {
    opts->plain ? opts->plain_digest : opts->digest, opts->block_size, NULL,
    opts->plain, opts->range,
  };

  /* No input: standard input, as sha256sum does. */
  args = &argv[first];
  nargs = argc - first;
  if (nargs == 0) {
    args = stdin_only;
    nargs = 1;
  }
  status = mode->run (args, nargs, &spec);
  /* What is still buffered goes first: a reader gone (| head) sends
   * SIGPIPE now, and nbdsum dies of it, as it would have mid-run.
   */
  err = stdout_error ();
  if (stop_signal ()) {
    /* The document ends, valid, saying so. */
    if (opts->json) {
      json_interrupted (stop_signal ());
      stdout_flush ();
    }
    die_of_signal (stop_signal ());
  }
  /* As sha256sum says it. */
  if (err != 0) {
    error_msg ("write error: %s", strerror (err));
    status = mode->error_status;
  }
  return status;
}
