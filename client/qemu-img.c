/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: running qemu-img info on a local image and reading what it
 * says (see local.h).  The image is always named by a json: spec that
 * local-chain.c built, which names every file qemu may open: qemu-img
 * info itself opens data files and extents.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jsonread.h"
#include "local.h"
#include "messages.h"
#include "signals.h"

/* qemu-img's error without its name and the spec it could not open:
 * what is left is qemu's reason.
 */
static const char *
reason (char *text, const char *spec)
{
  static const char prog[] = "qemu-img: ", open[] = "Could not open '";
  char *p = text;

  if (strncmp (p, prog, strlen (prog)) == 0)
    p += strlen (prog);
  if (strncmp (p, open, strlen (open)) == 0 &&
      strncmp (p + strlen (open), spec, strlen (spec)) == 0 &&
      strncmp (p + strlen (open) + strlen (spec), "': ", 3) == 0)
    p += strlen (open) + strlen (spec) + 3;
  return *p ? p : "qemu-img info failed";
}

int
local_qemu_img_info (const char *name, const char *layer, const char *spec,
                     local_info_fn *read_info, void *opaque)
{
  const char *argv[] = {
    "qemu-img", "info", "--output=json", "-U", spec, NULL
  };
  struct json_reader r = { 0 };
  char err_text[512] = "";
  sigset_t saved;
  int fds[2], errfds[2], status, parsed = -1;
  FILE *fp;
  pid_t pid;
  ssize_t n;

  if (pipe2 (fds, O_CLOEXEC) == -1) {
    error_at (name, "pipe: %m");
    return -1;
  }
  if (pipe2 (errfds, O_CLOEXEC) == -1) {
    error_at (name, "pipe: %m");
    close (fds[0]);
    close (fds[1]);
    return -1;
  }
  stop_signals_block (&saved);
  pid = fork ();
  if (pid == 0) {
    stop_signals_default ();
    stop_signals_restore (&saved);
    if (dup2 (fds[1], STDOUT_FILENO) == -1 ||
        dup2 (errfds[1], STDERR_FILENO) == -1)
      _exit (126);
    execvp (argv[0], (char **) argv);
    _exit (127);
  }
  stop_signals_restore (&saved);
  close (fds[1]);
  close (errfds[1]);
  if (pid == -1) {
    close (fds[0]);
    close (errfds[0]);
    error_at (name, "fork: %m");
    return -1;
  }
  if ((fp = fdopen (fds[0], "r")) == NULL)
    close (fds[0]);
  else if (json_reader_init (&r, fp, 65536) == 0 && json_next (&r) == 0)
    parsed = read_info (&r, opaque);
  if (fp) {
    /* The rest, so that qemu-img is never stopped by a full pipe. */
    while (getc (fp) != EOF)
      ;
    fclose (fp);
  }
  /* Its first line of error, for ours; the rest is dropped. */
  n = read (errfds[0], err_text, sizeof err_text - 1);
  err_text[n > 0 ? n : 0] = '\0';
  err_text[strcspn (err_text, "\n")] = '\0';
  {
    char sink[4096];
    while (read (errfds[0], sink, sizeof sink) > 0)
      ;
  }
  close (errfds[0]);
  while (waitpid (pid, &status, 0) == -1)
    if (errno != EINTR) {
      error_at (name, "waitpid: %m");
      json_reader_free (&r);
      return -1;
    }
  if (stop_signal ()) {
    json_reader_free (&r);
    return -1;
  }
  if (WIFEXITED (status) && WEXITSTATUS (status) == 127)
    error_at (name, "reading it as its guest content needs qemu-img and "
              "qemu-nbd, which are not installed (Debian: qemu-utils)");
  else if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    error_at (name, "%s%s%sqemu-img: %s", layer ? "its backing file " : "",
              layer ? layer : "", layer ? ": " : "", reason (err_text, spec));
  else if (parsed == -1)
    error_at (name, "cannot read what qemu-img info says: %s",
              r.text ? r.error : "out of memory");
  else {
    json_reader_free (&r);
    return 0;
  }
  json_reader_free (&r);
  return -1;
}
