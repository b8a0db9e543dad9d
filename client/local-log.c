/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what a private server says on its standard error
 * (local-server.h): kept in an unlinked file of its directory, taken
 * for the messages of a failed start or connection, and read, once
 * it has exited (local.c stops it), for why a read failed.
 */
#include <config.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "local-server.h"

int
local_log_open (const char *dir)
{
  char *path;
  int fd;

  if (asprintf (&path, "%s/log", dir) == -1)
    return -1;
  fd = open (path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
  if (fd >= 0)
    unlink (path);
  free (path);
  return fd;
}

/* Lines of nbdkit that are no news, and no cause of a failure: its
 * handshake with a connection of ours that went (given up on by
 * --connect-timeout, or a signal): "nbdkit: nbd[2]: error: write:
 * NBD_OPT_GO: Broken pipe"; and its word that it is quitting (its
 * sleep, which the filter's long work asks, aborted), which nbdsum
 * either did or tells (it exits untold).  Likewise qemu-nbd's
 * "Disconnect client, due to: ...", one a request in flight, when
 * our nbdkit in front of it went (--since of a local file).  Removed
 * from buf in place.
 */
static bool
no_news (const char *text)
{
  static const char *const starts[] = {
    "write: NBD_OPT_", "read: NBD_OPT_", "aborting sleep because ",
    "blkhash: stopped computing digests: ",
  };

  for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++)
    if (strncmp (text, starts[i], strlen (starts[i])) == 0)
      return true;
  return false;
}

static void
drop_no_news (char *buf)
{
  char *in = buf, *out = buf;

  while (*in) {
    size_t len = strcspn (in, "\n");
    const char *text = memmem (in, len, "error: ", 7);

    len += in[len] == '\n';
    if ((strncmp (in, "nbdkit: ", 8) == 0 && text && no_news (text + 7)) ||
        strncmp (in, "qemu-nbd: Disconnect client, due to: ", 37) == 0)
      in += len;
    else {
      memmove (out, in, len);
      in += len;
      out += len;
    }
  }
  *out = '\0';
}

/* local_log_take, but the log is kept. */
static char *
read_log (struct local_server *s)
{
  struct stat st;
  char *buf;
  ssize_t n;

  if (s->log_fd == -1 || fstat (s->log_fd, &st) == -1 || st.st_size == 0 ||
      (buf = malloc (st.st_size + 1)) == NULL)
    return NULL;
  n = pread (s->log_fd, buf, st.st_size, 0);
  if (n <= 0) {
    free (buf);
    return NULL;
  }
  buf[n] = '\0';
  drop_no_news (buf);
  return buf;
}

char *
local_log_take (struct local_server *s)
{
  char *buf = read_log (s);

  if (buf && ftruncate (s->log_fd, 0) == -1) {
    /* Printed again at the end: better than lost. */
  }
  return buf;
}

char *
local_server_message (struct local_server *s)
{
  char *log = local_log_take (s), *out, *line, *save;
  bool others = false;
  size_t len = 0;

  if (log == NULL)
    return NULL;
  /* qemu-nbd's lines, when there are any: nbdkit's nbd plugin only
   * says that its connection to it broke.
   */
  for (line = log; *line; line += strcspn (line, "\n"), line += *line == '\n')
    others |= strncmp (line, "nbdkit: ", 8) != 0;
  /* A '.' and a space at most between each two lines. */
  out = malloc (2 * strlen (log) + 1);
  if (out == NULL) {
    free (log);
    return NULL;
  }
  for (line = strtok_r (log, "\n", &save); line;
       line = strtok_r (NULL, "\n", &save)) {
    if (others && strncmp (line, "nbdkit: ", 8) == 0)
      continue;
    /* qemu's second line is a sentence of its own. */
    if (len && !strchr (".?!:;", out[len - 1]))
      out[len++] = '.';
    len += sprintf (out + len, "%s%s", len ? " " : "", line);
  }
  free (log);
  if (len == 0) {
    free (out);
    return NULL;
  }
  return out;
}

/* Who s is, in messages: our nbdkit of any kind, or --since's
 * qemu-nbd.
 */
static const char *
log_who (const struct local_server *s)
{
  return strncmp (s->what, "private nbdkit", 14) == 0
    ? "private nbdkit" : s->what;
}

off_t
local_log_mark (const struct local_server *s)
{
  struct stat st;

  if (s->log_fd == -1 || fstat (s->log_fd, &st) == -1)
    return 0;
  return st.st_size;
}

bool
local_said_ungreeted (const char *text)
{
  return text && strncmp (text, "nbd_connect_", 12) == 0 &&
    (strstr (text, "server disconnected unexpectedly") ||
     strstr (text, " is invalid in state CONNECT"));
}

char *
local_log_cut (struct local_server *s, off_t mark)
{
  const char *who = log_who (s);
  char *log, *line, *save, *text = NULL, *out = NULL, *e;
  off_t len = local_log_mark (s) - mark;
  ssize_t n;

  if (len <= 0 || (log = malloc (len + 1)) == NULL)
    return NULL;
  n = pread (s->log_fd, log, len, mark);
  log[n > 0 ? n : 0] = '\0';
  /* The nbd plugin's: "nbdkit: nbd[2]: error: nbd_connect_uri: ...". */
  for (line = strtok_r (log, "\n", &save); line;
       line = strtok_r (NULL, "\n", &save))
    if ((e = strstr (line, "error: ")) != NULL)
      text = e + strlen ("error: ");
  if (local_said_ungreeted (text))
    text = LOCAL_UNGREETED;
  if (text && asprintf (&out, "nbdsum's %s: %s", who, text) == -1)
    out = NULL;
  free (log);
  if (out && ftruncate (s->log_fd, mark) == -1) {
    /* Printed again at the end: better than lost. */
  }
  return out;
}

/* The line of log (which it cuts) that says why a read failed, and
 * how many errors it holds (*n): the first below the filter
 * (qemu-nbd's lines are), else the filter's with an errno's words,
 * consequences of a broken connection last.  NULL if none.
 */
static char *
log_cause (char *log, unsigned *n)
{
  char *line, *save, *cause = NULL;
  int rank = 0;

  *n = 0;
  for (line = strtok_r (log, "\n", &save); line;
       line = strtok_r (NULL, "\n", &save)) {
    char *text = strstr (line, "error: ");
    int this;
    /* qemu-nbd's lines (behind the nbd plugin) say why in its words
     * (qcow2: Image is corrupt: ...), with no "error: " of nbdkit's;
     * not that a client went (drop_no_news), a consequence.
     */
    if (strncmp (line, "nbdkit: ", 8) != 0) {
      (*n)++;
      if (rank < 4)
        rank = 4, cause = line;
      continue;
    }
    if (text == NULL)
      continue;
    text += strlen ("error: ");
    (*n)++;
    /* libnbd's refusal of a call on a connection already broken
     * (nbd_aio_pread: invalid state: CLOSED: ...: Invalid argument,
     * ... is invalid in state DEAD: ...) and the filter's read it
     * failed (EINVAL) are consequences.  Never the filter's bare
     * "reading ... failed".
     */
    if (strncmp (text, "blkhash: ", 9) == 0)
      this = strstr (text, "failed: ") == NULL ? 0
        : strstr (text, "failed: Invalid argument") == NULL ? 3 : 2;
    else
      this = strstr (text, "invalid state: ") != NULL ||
        strstr (text, " is invalid in state ") != NULL ? 1 : 4;
    if (this > rank)
      rank = this, cause = text;
  }
  return cause;
}

bool
local_log_says_why (struct local_server *s)
{
  char *log = read_log (s);
  unsigned n;
  bool r = log && log_cause (log, &n) != NULL;

  free (log);
  return r;
}

char *
local_log_cause (struct local_server *s)
{
  char *log, *line, *cause, *out;
  const char *who = log_who (s);
  unsigned n;
  int r;

  /* Whole lines: qemu-nbd, which can outlive nbdkit a moment, writes
   * its "qemu-nbd: " before the rest.
   */
  if ((log = read_log (s)) != NULL && (line = strrchr (log, '\n')) != NULL)
    line[1] = '\0';
  else if (log)
    *log = '\0';
  cause = log ? log_cause (log, &n) : NULL;
  if (cause == NULL) {
    free (log);
    /* Killed, by a signal nbdsum did not send (the OOM killer's). */
    if (!s->killed && s->status != -1 && WIFSIGNALED (s->status) &&
        WTERMSIG (s->status) != SIGTERM) {
      s->cause_told = true;
      r = asprintf (&out, "the %s serving it was killed by SIG%s", who,
                    sigabbrev_np (WTERMSIG (s->status)) ?: "?");
      return r == -1 ? NULL : out;
    }
    /* Or it quit, as nbdkit does on SIGTERM, SIGINT or SIGHUP. */
    if (s->quit_alone) {
      s->cause_told = true;
      r = asprintf (&out, "the %s serving it was stopped by a signal "
                    "nbdsum did not send", who);
      return r == -1 ? NULL : out;
    }
    /* Nothing of a cause: what it said is local_server_stop's. */
    return NULL;
  }
  s->cause_told = true;
  if (n == 1)
    r = asprintf (&out, "%s (nbdsum's %s)", cause, who);
  else
    r = asprintf (&out, "%s (nbdsum's %s, and %u more error%s)", cause,
                  who, n - 1, n == 2 ? "" : "s");
  free (log);
  return r == -1 ? NULL : out;
}
