/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a private server's process (local-server.h): a listening
 * Unix socket in a private directory, handed to it by socket
 * activation (LISTEN_FDS), so every connection reaches the same server
 * and none can race its start; its end.  What it says on its standard
 * error is local-log.c's.  What it runs is local-nbdkit.c's,
 * local-bitmap.c's, local-http.c's or a [ CMD ]'s.  The server has a process group of
 * its own: a terminal's ^C is for nbdsum, which disconnects before
 * stopping it.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "helpers.h"
#include "local-server.h"
#include "messages.h"
#include "options.h"
#include "signals.h"

/* How long the private server may take to exit on SIGTERM: when it is
 * done, and when a signal stops nbdsum mid-handshake.
 */
#define STOP_SECONDS 5
#define END_SECONDS 1
/* How long a failed connection waits for our server to exit, in 10 ms
 * ticks.
 */
#define EXIT_WAIT_TICKS 200

void
local_exec_activated (int listen_fd, const char *const *argv, bool path)
{
  char pid[32];

  if (listen_fd != 3) {
    if (dup2 (listen_fd, 3) == -1)
      _exit (126);
    close (listen_fd);
  }
  snprintf (pid, sizeof pid, "%d", (int) getpid ());
  setenv ("LISTEN_PID", pid, 1);
  setenv ("LISTEN_FDS", "1", 1);
  unsetenv ("LISTEN_FDNAMES");
  if (path)
    execvp (argv[0], (char **) argv);
  else
    execv (argv[0], (char **) argv);
  fprintf (stderr, "%s: %s: %m\n", progname, argv[0]);
  _exit (127);
}

void
local_exec_command (int listen_fd, const void *opaque)
{
  local_exec_activated (listen_fd, opaque, true);
}

/* The URI of the Unix socket at path: every byte but unreserved ones
 * and '/' percent-encoded, since libnbd decodes the socket= value and
 * a TMPDIR may hold '#', '&', ';', '%' or a space, which would cut or
 * change the path.  NULL if out of memory.
 */
static char *
socket_uri (const char *path)
{
  static const char prefix[] = "nbd+unix:///?socket=";
  char *uri = malloc (sizeof prefix + 3 * strlen (path));

  if (uri == NULL)
    return NULL;
  uri_encode (stpcpy (uri, prefix), path);
  return uri;
}

struct local_server *
local_serve (const char *name, const char *what,
             void (*exec_fn) (int listen_fd, const void *data),
             const void *data, bool ours)
{
  struct local_server *s = calloc (1, sizeof *s);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  const char *tmpdir = temp_dir ();
  char *tmpl = NULL;
  sigset_t saved;
  struct rlimit rl;
  pid_t parent;
  int lfd = -1, err;

  if (s == NULL) {
    error_at (name, "out of memory");
    return NULL;
  }
  s->name = name;
  s->what = what;
  s->pid = -1;
  s->log_fd = -1;
  s->status = -1;
  /* It inherits our limit (raised as far as allowed at start). */
  if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < LOCAL_SERVER_FDS (opts->connections)) {
    error_at (name, "too few file descriptors for a %s with %u connection%s: "
              "it needs %u, ulimit -n allows %llu (raise it, or lower -C)",
              what, opts->connections, opts->connections == 1 ? "" : "s",
              LOCAL_SERVER_FDS (opts->connections),
              (unsigned long long) rl.rlim_cur);
    goto err;
  }
  if (asprintf (&tmpl, "%s/nbdsumXXXXXX", tmpdir) == -1) {
    tmpl = NULL;
    error_at (name, "out of memory");
    goto err;
  }
  if (strlen (tmpl) + strlen ("/sock") >= sizeof addr.sun_path) {
    error_at (name, "cannot make a private socket in %s: its path would be "
              "too long for a Unix socket; set TMPDIR to a shorter "
              "directory", tmpdir);
    goto err;
  }
  if (mkdtemp (tmpl) == NULL) {
    error_at (name, "cannot make a private directory in %s: %m", tmpdir);
    goto err;
  }
  s->dir = tmpl;
  tmpl = NULL;
  if (asprintf (&s->sock, "%s/sock", s->dir) == -1) {
    s->sock = NULL;
    error_at (name, "out of memory");
    goto err;
  }
  /* Fits, as checked above. */
  _Static_assert (SIGNALS_PATH_MAX >= sizeof addr.sun_path,
                  "a socket's path fits the signal handler's copy");
  stop_signals_remove_on_end (s->dir, s->sock);
  if ((s->uri = socket_uri (s->sock)) == NULL) {
    error_at (name, "out of memory");
    goto err;
  }
  /* What our own servers say goes to a file, so that their failure to
   * start reads as one message naming its cause (qemu-nbd's, not the
   * chain of connections it broke); a [ CMD ]'s stays the user's.
   */
  if (ours && (s->log_fd = local_log_open (s->dir)) == -1) {
    error_at (name, "cannot make a file in %s: %m", s->dir);
    goto err;
  }
  snprintf (addr.sun_path, sizeof addr.sun_path, "%s", s->sock);
  lfd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd == -1 || bind (lfd, (struct sockaddr *) &addr, sizeof addr) == -1 ||
      listen (lfd, SOMAXCONN) == -1) {
    error_at (name, "cannot listen on %s: %m", s->sock);
    goto err;
  }

  /* Until the child has the default actions back, a signal must not
   * run our handler in it.
   */
  stop_signals_block (&saved);
  parent = getpid ();
  s->pid = fork ();
  if (s->pid == 0) {
    stop_signals_default ();
    stop_signals_restore (&saved);
    /* Not to outlive nbdsum, a [ CMD ]'s server too (the private
     * nbdkit has --exit-with-parent).
     */
    prctl (PR_SET_PDEATHSIG, stop_signals_on_parent_death ());
    if (getppid () != parent)
      _exit (126);
    setpgid (0, 0);
    if (s->log_fd >= 0)
      dup2 (s->log_fd, STDERR_FILENO);
    /* nbdsum's standard input may be an input (-), its standard output
     * is for checksums: a server reads nothing, and what it prints
     * goes with its messages.
     */
    int null_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0 && null_fd != STDIN_FILENO) {
      dup2 (null_fd, STDIN_FILENO);
      close (null_fd);
    }
    dup2 (STDERR_FILENO, STDOUT_FILENO);
    /* The listening socket must survive exec as fd 3. */
    int flags = fcntl (lfd, F_GETFD);
    fcntl (lfd, F_SETFD, flags & ~FD_CLOEXEC);
    exec_fn (lfd, data);
  }
  err = errno;
  /* Also here, so that the group exists whichever runs first. */
  if (s->pid > 0) {
    setpgid (s->pid, s->pid);
    stop_signals_kill_on_end (s->pid);
  }
  stop_signals_restore (&saved);
  if (s->pid == -1) {
    errno = err;
    error_at (name, "fork: %m");
    goto err;
  }
  /* Only nbdkit holds the socket now: if it dies, connections fail
   * instead of waiting for it.
   */
  close (lfd);
  return s;

 err:
  if (lfd >= 0)
    close (lfd);
  free (tmpl);
  local_server_stop (s);
  return NULL;
}


const char *
local_server_format (const struct local_server *s)
{
  return s->format;
}

struct local_server *
local_server_start_command (const char *name, char **argv)
{
  struct local_server *s = local_serve (name, argv[0], local_exec_command,
                                        argv, false);

  if (s)
    s->command = true;
  return s;
}

struct local_server *
local_server_start_private (const char *name, const char *format,
                            char **argv)
{
  struct local_server *s = local_serve (name, "private nbdkit",
                                        local_exec_command, argv, true);

  if (s) {
    s->format = format;
    s->handshake_limit = LOCAL_HANDSHAKE_SECONDS;
  }
  return s;
}


/* waitpid (s->pid, flags): true once it is reaped (or is not ours).
 * Its pid may then be another process's: the signal handler forgets
 * it, before another signal, and so does s (-1), so that no later
 * kill reaches a stranger.
 */
static bool
reap_server (struct local_server *s, int flags)
{
  sigset_t saved;
  pid_t r;
  int status;
  bool gone;

  stop_signals_block (&saved);
  r = waitpid (s->pid, &status, flags);
  gone = r == s->pid || (r == -1 && errno == ECHILD);
  if (r == s->pid)
    s->status = status;
  if (gone) {
    stop_signals_forget (s->pid);
    s->pid = -1;
  }
  stop_signals_restore (&saved);
  return gone;
}

/* Wait up to ticks of 10 ms for s to exit and reap it: false if it
 * did not.
 */
static bool
reap (struct local_server *s, int ticks)
{
  const struct timespec tick = { 0, 10 * 1000 * 1000 };

  for (int i = 0; i < ticks; i++) {
    if (reap_server (s, WNOHANG))
      return true;
    if (i + 1 < ticks)
      nanosleep (&tick, NULL);
  }
  return false;
}

bool
local_server_exited (struct local_server *s)
{
  /* Reaped already (source_connect asks twice): it still has. */
  if (s->pid <= 0)
    return s->status != -1;
  /* Ours may be a moment from exiting after the connection broke
   * (nbdkit after qemu-nbd failed): waited for, so that its message is
   * the error.  A [ CMD ]'s is taken as it is now.
   */
  return reap (s, s->log_fd >= 0 ? EXIT_WAIT_TICKS : 1);
}

bool
local_server_is_command (const struct local_server *s)
{
  return s->command;
}

const char *
local_server_what (const struct local_server *s)
{
  return s->what;
}

double
local_server_handshake_limit (const struct local_server *s)
{
  return s->handshake_limit;
}

const char *
local_server_uri (const struct local_server *s)
{
  return s->uri;
}

void
local_server_kill (struct local_server *s)
{
  /* The group: qemu-nbd too, for other formats than raw. */
  if (s && s->pid > 0) {
    kill (-s->pid, SIGKILL);
    s->killed = true;
  }
}

/* SIGTERM, and SIGKILL to its group if it has not exited within
 * STOP_SECONDS (at once if abandoned); reaped either way, and
 * forgotten.  False if it had to be killed unforeseen.
 */
static bool
stop_process (struct local_server *s)
{
  bool exited = true;

  if (s->pid <= 0)
    return true;
  if (!s->abandoned)
    kill (s->pid, SIGTERM);
  if (s->abandoned || !reap (s, STOP_SECONDS * 100)) {
    exited = s->abandoned;      /* foreseen */
    local_server_kill (s);
    while (!reap_server (s, 0) && errno == EINTR)
      ;
  }
  s->pid = -1;
  return exited;
}

void
local_server_abandoned (struct local_server *s)
{
  if (s)
    s->abandoned = true;
}

void
local_server_end (struct local_server *s)
{
  /* nbdkit first, alone: it stops its plugin, which cleans up after
   * itself (the nbd plugin's qemu-nbd and its directory in /tmp);
   * then whatever is left of the group.  The file plugin leaves
   * nothing behind: killed at once, before it can say its client went
   * (SIGTERM can find nbdkit mid-handshake: "write: NBD_OPT_GO: Broken
   * pipe").
   */
  if (s == NULL || s->pid <= 0)
    return;
  if (s->format && strcmp (s->format, "raw") == 0) {
    local_server_kill (s);
    return;
  }
  if (!s->abandoned)
    kill (s->pid, SIGTERM);
  if (s->abandoned || !reap (s, END_SECONDS * 100))
    local_server_kill (s);
}

void
local_server_stop (struct local_server *s)
{
  if (s == NULL)
    return;
  if (!stop_process (s))
    error_at (s->name, "the %s did not exit in %d seconds: killing it",
              s->what, STOP_SECONDS);
  if (s->log_fd >= 0) {
    /* What it said that no failure took (a warning): not lost. */
    char *log = local_log_take (s);
    if (log && !s->cause_told) {
      flockfile (stderr);
      messages_put (log, true);
      funlockfile (stderr);
    }
    free (log);
    close (s->log_fd);
  }
  if (s->sock)
    unlink (s->sock);
  if (s->dir) {
    rmdir (s->dir);
    stop_signals_forget_dir (s->dir);
  }
  local_pins_close (&s->pins);
  free (s->sock);
  free (s->uri);
  free (s->dir);
  free (s);
}

off_t
local_server_log_mark (const struct local_server *s)
{
  return s && s->log_fd >= 0 ? local_log_mark (s) : 0;
}

char *
local_server_refusal (struct local_server *s, off_t mark)
{
  /* Timed out, and left to finish its handshake alone: it has said
   * nothing of it yet.
   */
  if (s == NULL || s->log_fd < 0 || s->abandoned)
    return NULL;
  return local_log_cut (s, mark);
}

char *
local_server_cause (struct local_server *s, int err)
{
  /* Its log is whole once it has exited: the nbd plugin's reader
   * thread says why its connection broke after failing the requests
   * in flight, whose replies can reach us first.  A failure ends the
   * input: nothing more is asked of this server.
   */
  if (s == NULL || s->log_fd < 0)
    return NULL;
  /* nbdkit closed our connection, or answered ESHUTDOWN, and said no
   * more (a failure below it is logged before its reply): it is
   * quitting, on a signal from someone else.  Seen if it exits
   * untold.
   */
  if (s->pid > 0 && (err == ENOTCONN || err == ESHUTDOWN) &&
      !local_log_says_why (s))
    s->quit_alone = reap (s, STOP_SECONDS * 100);
  stop_process (s);
  return local_log_cause (s);
}

int
local_server_verify (struct local_server *s)
{
  if (s->verified || s->pid <= 0)
    return 0;
  s->verified = true;
  return local_pins_verify (s->name, &s->pins, s->pid);
}
