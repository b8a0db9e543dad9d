/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a private nbdkit for a local file.
 *
 * nbdsum makes a listening Unix socket in a private directory and
 * starts nbdkit on it by socket activation (LISTEN_FDS), so every
 * connection reaches the same server and none can race its start.
 * Raw files are served by the file plugin; qcow2 and the other formats
 * qemu reads by a private qemu-nbd behind nbdkit's nbd plugin, so that
 * the guest content is hashed (for --since, qemu-nbd alone: nbdkit
 * passes on no dirty bitmap).  A file's format is probed as qemu
 * probes it (lib/imgformat.c) unless --format or a checksum line gives
 * it; what nbdsum cannot read as guest content (luks, encrypted qcow2
 * and qcow, a fixed-size VHD qemu takes for raw, any image without
 * qemu-nbd) is refused here, never hashed as its bytes.  The blkhash
 * filter comes from the build tree when nbdsum runs from it
 * (local-command.c finds it).  In front of a server without the
 * filter, or with --client-side, nbdsum runs a private nbdkit
 * --filter=blkhash nbd uri=... (local_server_start_front).  The
 * server has a process group of its own: a terminal's ^C is for
 * nbdsum, which disconnects before stopping it.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
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
#include "imgformat.h"
#include "local-command.h"
#include "local.h"
#include "messages.h"
#include "options.h"
#include "paths.h"
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

struct local_server {
  const char *name;             /* the input, for messages */
  const char *what;             /* the program serving it, for messages */
  const char *format;           /* a file's, static; NULL for [ CMD ] */
  char what_buf[64];
  pid_t pid;
  char *dir, *sock, *uri;
  double handshake_limit;       /* seconds, 0: none */
  int log_fd;                   /* our servers' stderr (unlinked), or -1 */
  struct local_pins pins;       /* what its qemu-nbd may hold open */
  bool verified;                /* ... and it was checked once */
};

/* In the child: the listening socket as fd 3 for systemd-style socket
 * activation (LISTEN_PID, LISTEN_FDS), then argv; with path, argv[0]
 * is looked for in $PATH.
 */
static void __attribute__ ((noreturn))
exec_activated (int listen_fd, const char *const *argv, bool path)
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

/* What a private server for a local file runs: nbdkit's file plugin
 * for a raw file, else qemu-nbd given spec, local_chain_spec's; or,
 * in front of another server, nbdkit's nbd plugin given uri (and the
 * TLS files the URI named, which its libnbd may not read from it).
 */
struct file_server {
  const char *filter, *format, *path, *spec;
  const char *uri, *tls_psk, *tls_certificates;
};

static void __attribute__ ((noreturn))
exec_nbdkit (int listen_fd, const void *opaque)
{
  const struct file_server *f = opaque;
  char *filter_arg, *spec_arg = NULL, *max_arg, *uri_arg = NULL;
  char *psk_arg = NULL, *certs_arg = NULL;
  const char *argv[20];
  int i = 0;

  /* nbdsum has no other thread yet: allocating here is safe.  Each
   * value is an argument of its own: nbdkit splits a parameter at its
   * first '=' only.
   */
  if (asprintf (&filter_arg, "--filter=%s", f->filter ? f->filter : "")
      == -1 ||
      (f->spec && asprintf (&spec_arg, "arg=%s", f->spec) == -1) ||
      (f->uri && asprintf (&uri_arg, "uri=%s", f->uri) == -1) ||
      (f->tls_psk && asprintf (&psk_arg, "tls-psk=%s", f->tls_psk) == -1) ||
      (f->tls_certificates &&
       asprintf (&certs_arg, "tls-certificates=%s",
                 f->tls_certificates) == -1) ||
      asprintf (&max_arg, "blkhash-max-size=%" PRIu64, opts->max_size) == -1)
    _exit (126);

  argv[i++] = NBDKIT;
  argv[i++] = "--exit-with-parent";
  argv[i++] = "--readonly";
  if (f->filter)
    argv[i++] = filter_arg;
  if (f->uri) {
    /* One connection to the server for each of nbdsum's (shared=false,
     * the default for uri=); TLS as the URI's scheme says, as in
     * nbdsum's own libnbd.
     */
    argv[i++] = "nbd";
    argv[i++] = uri_arg;
    argv[i++] = "tls=off";
    if (psk_arg)
      argv[i++] = psk_arg;
    if (certs_arg)
      argv[i++] = certs_arg;
  }
  else if (f->spec == NULL) {
    argv[i++] = "file";
    argv[i++] = f->path;
  }
  else {
    argv[i++] = "nbd";
    argv[i++] = "command=qemu-nbd";
    argv[i++] = "arg=--read-only";
    argv[i++] = spec_arg;
  }
  /* nbdsum's limit is the view's too (the defaults agree). */
  if (f->filter && opts->max_size_given)
    argv[i++] = max_arg;
  argv[i] = NULL;
  exec_activated (listen_fd, argv, false);
}

/* [ CMD ARGS... ]: the user's server. */
static void __attribute__ ((noreturn))
exec_command (int listen_fd, const void *opaque)
{
  exec_activated (listen_fd, opaque, true);
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

/* A server for the input name, started by exec_fn (given data) on a
 * socket of a private directory, in a process group of its own.
 */
/* A file in dir for a server's standard error, unlinked at once so
 * that nothing is left behind, whatever ends nbdsum.
 */
static int
open_log (const char *dir)
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

/* What s wrote on its standard error so far, NUL-terminated (NULL if
 * nothing, or out of memory); the log is emptied.
 */
static char *
take_log (struct local_server *s)
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
  if (ftruncate (s->log_fd, 0) == -1) {
    /* Printed again at the end: better than lost. */
  }
  return buf;
}

static struct local_server *
serve (const char *name, const char *what,
       void (*exec_fn) (int listen_fd, const void *data), const void *data,
       bool ours)
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
  if (exec_fn == exec_nbdkit)
    s->handshake_limit = LOCAL_HANDSHAKE_SECONDS;
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
  if (ours && (s->log_fd = open_log (s->dir)) == -1) {
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

struct local_server *
local_server_start (const char *name, const char *path, const char *format)
{
  struct local_pins pins = { NULL, 0 };
  char *abs;
  struct local_server *s;
  struct file_server f;
  struct stat st;
  int fd;

  /* Check the file here, for a clear message (what it is first: a
   * pipe has no real path).
   */
  if ((fd = open (path, O_RDONLY | O_CLOEXEC)) == -1) {
    if (errno != EINTR || !stop_signal ())
      error_at (name, "%m");
    return NULL;
  }
  if (fstat (fd, &st) == -1) {
    error_at (name, "%m");
    close (fd);
    return NULL;
  }
  if (!S_ISREG (st.st_mode) && !S_ISBLK (st.st_mode)) {
    error_at (name, "not a regular file or block device%s",
              S_ISFIFO (st.st_mode) || S_ISCHR (st.st_mode)
              ? " (nbdsum hashes it as a stream, but --diff and --blocks "
              "need an image: save it to a file first)" : "");
    close (fd);
    return NULL;
  }
  /* A /proc or /sys file: its size is not its length. */
  if (S_ISREG (st.st_mode) && st.st_size == 0 && local_file_has_bytes (fd)) {
    error_at (name, "says it has 0 bytes but has some (a /proc or /sys "
              "file?): nbdsum hashes it as a stream, but --diff and "
              "--blocks need an image: save it to a file first");
    close (fd);
    return NULL;
  }
  /* A format given is not probed, but for encryption. */
  f.format = format && strcmp (format, "raw") == 0 ? format
             : local_file_format (name, fd, format);
  close (fd);
  if (f.format == NULL)
    return NULL;
  if (strcmp (f.format, "raw") != 0 && !in_path ("qemu-nbd")) {
    error_at (name, "a %s image needs qemu-nbd (Debian package "
              "qemu-utils) to be read as its guest content: install it, "
              "or give --format=raw for its bytes", f.format);
    return NULL;
  }
  /* Not realpath: qemu finds a relative backing file or extent beside
   * the path as given, a symlink's own directory.
   */
  if ((abs = absolute_path (path)) == NULL) {
    error_at (name, "%m");
    return NULL;
  }
  /* Every file the image names is checked before qemu opens any. */
  f.spec = NULL;
  if (strcmp (f.format, "raw") != 0 &&
      (f.spec = local_chain_spec (name, abs, f.format,
                                  options_format (name) ? FORMAT_GIVEN
                                  : format ? FORMAT_TAG : FORMAT_PROBED,
                                  NULL, &pins)) == NULL) {
    free (abs);
    return NULL;
  }
  /* --client-side too: this filter is nbdsum's own, on this machine. */
  f.filter = local_filter ();
  f.path = abs;
  f.uri = f.tls_psk = f.tls_certificates = NULL;
  s = serve (name, "private nbdkit", exec_nbdkit, &f, true);
  free (abs);
  free ((char *) f.spec);
  if (s)
    s->pins = pins;
  else
    local_pins_close (&pins);
  if (s) {
    s->format = f.format;
    if (strcmp (f.format, "raw") != 0) {
      snprintf (s->what_buf, sizeof s->what_buf,
                "private nbdkit and qemu-nbd -f %s", f.format);
      s->what = s->what_buf;
    }
  }
  return s;
}

struct local_server *
local_server_start_front (const char *name, const char *uri)
{
  struct file_server f = { .filter = local_filter () };
  char *psk, *certs, *plain_uri = uri_take_tls_files (uri, &psk, &certs);
  struct local_server *s;

  if (plain_uri == NULL) {
    error_at (name, "out of memory");
    return NULL;
  }
  f.uri = plain_uri;
  f.tls_psk = psk;
  f.tls_certificates = certs;
  s = serve (name, "private nbdkit --filter=blkhash nbd", exec_nbdkit, &f,
             true);
  free (plain_uri);
  free (psk);
  free (certs);
  if (s) {
    /* The user's server is as slow to answer as it is, as before;
     * nbdkit holds no file to check, only sockets.
     */
    s->handshake_limit = 0;
    s->verified = true;
  }
  return s;
}

const char *
local_server_format (const struct local_server *s)
{
  return s->format;
}

struct local_server *
local_server_start_command (const char *name, char **argv)
{
  return serve (name, argv[0], exec_command, argv, false);
}

struct local_server *
local_server_start_private (const char *name, const char *format,
                            char **argv)
{
  struct local_server *s = serve (name, "private nbdkit", exec_command,
                                  argv, true);

  if (s) {
    s->format = format;
    s->handshake_limit = LOCAL_HANDSHAKE_SECONDS;
  }
  return s;
}

struct local_server *
local_server_start_bitmap (const char *name, const char *path,
                           const char *bitmap)
{
  char *abs = NULL, *spec = NULL, *alone = NULL, shared[16];
  struct local_pins pins = { NULL, 0 };
  const char *format, *argv[11];
  struct local_server *s = NULL;
  struct stat st;
  int fd, i = 0;

  if ((fd = open (path, O_RDONLY | O_CLOEXEC)) == -1 || fstat (fd, &st) == -1) {
    error_at (name, "%m");
    if (fd >= 0)
      close (fd);
    return NULL;
  }
  if (!S_ISREG (st.st_mode) && !S_ISBLK (st.st_mode)) {
    error_at (name, "not a regular file or block device: --since needs a "
              "qcow2 image with a dirty bitmap");
    close (fd);
    return NULL;
  }
  /* An encrypted qcow2 said so, not as qemu-nbd's failure. */
  format = local_file_format (name, fd, options_format (name));
  close (fd);
  if (format == NULL)
    return NULL;
  if (strcmp (format, "qcow2") != 0) {
    error_at (name, "a %s image has no dirty bitmaps: --since of a local "
              "file needs a qcow2 image with a persistent bitmap "
              "(qemu-img bitmap --add --enable)", format);
    return NULL;
  }
  /* An absolute path, as for any image (see absolute_path); every file
   * it names checked before qemu-img or qemu-nbd opens any.
   */
  if ((abs = absolute_path (path)) == NULL) {
    error_at (name, "%m");
    return NULL;
  }
  if ((spec = local_chain_spec (name, abs, format,
                                options_format (name) ? FORMAT_GIVEN
                                : FORMAT_PROBED, &alone, &pins)) == NULL ||
      local_bitmap_check (name, alone, bitmap) == -1)
    goto out;
  /* Not --persistent: qemu-nbd has no --exit-with-parent, but exits
   * when its last client hangs up, and nbdsum keeps its first
   * connection open until the end.
   */
  snprintf (shared, sizeof shared, "%d", MAX_CONNECTIONS);
  argv[i++] = "qemu-nbd";
  argv[i++] = "--read-only";
  argv[i++] = "--shared";
  argv[i++] = shared;
  argv[i++] = "--allocation-depth";
  argv[i++] = "--bitmap";
  argv[i++] = bitmap;
  argv[i++] = spec;
  argv[i] = NULL;
  s = serve (name, "qemu-nbd", exec_command, argv, true);
  if (s) {
    s->pins = pins;
    pins = (struct local_pins) { NULL, 0 };
  }
 out:
  local_pins_close (&pins);
  free (alone);
  free (spec);
  free (abs);
  return s;
}

/* waitpid (s->pid, flags), and once reaped (its pid may then be
 * reused) the signal handler forgets it, before another signal.
 */
static pid_t
reap_server (struct local_server *s, int flags)
{
  sigset_t saved;
  pid_t r;

  stop_signals_block (&saved);
  r = waitpid (s->pid, NULL, flags);
  if (r == s->pid || (r == -1 && errno == ECHILD))
    stop_signals_forget (s->pid);
  stop_signals_restore (&saved);
  return r;
}

bool
local_server_exited (struct local_server *s)
{
  const struct timespec tick = { 0, 10 * 1000 * 1000 };

  if (s->pid <= 0)
    return false;
  /* Ours may be a moment from exiting after the connection broke
   * (nbdkit after qemu-nbd failed): waited for, so that its message is
   * the error.  A [ CMD ]'s is taken as it is now.
   */
  for (int i = 0; i < (s->log_fd >= 0 ? EXIT_WAIT_TICKS : 1); i++) {
    const pid_t r = reap_server (s, WNOHANG);
    if (r == s->pid || (r == -1 && errno == ECHILD)) {
      s->pid = -1;
      return true;
    }
    if (i + 1 < EXIT_WAIT_TICKS)
      nanosleep (&tick, NULL);
  }
  return false;
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

char *
local_server_message (struct local_server *s)
{
  char *log = take_log (s), *out, *line, *save;
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

void
local_server_kill (struct local_server *s)
{
  /* The group: qemu-nbd too, for other formats than raw. */
  if (s && s->pid > 0)
    kill (-s->pid, SIGKILL);
}

/* Wait up to seconds for s to exit and reap it: false if it did not. */
static bool
reap (struct local_server *s, int seconds)
{
  const struct timespec tick = { 0, 10 * 1000 * 1000 };

  for (int i = 0; i < seconds * 100; i++) {
    const pid_t r = reap_server (s, WNOHANG);
    if (r == s->pid || (r == -1 && errno == ECHILD))
      return true;
    nanosleep (&tick, NULL);
  }
  return false;
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
  kill (s->pid, SIGTERM);
  if (!reap (s, END_SECONDS))
    local_server_kill (s);
}

void
local_server_stop (struct local_server *s)
{
  if (s == NULL)
    return;
  if (s->pid > 0) {
    kill (s->pid, SIGTERM);
    if (!reap (s, STOP_SECONDS)) {
      error_at (s->name, "the %s did not exit in %d seconds: killing it",
                s->what, STOP_SECONDS);
      local_server_kill (s);
      stop_signals_forget (s->pid);
      while (waitpid (s->pid, NULL, 0) == -1 && errno == EINTR)
        ;
    }
  }
  if (s->log_fd >= 0) {
    /* What it said that no failure took (a warning): not lost. */
    char *log = take_log (s);
    if (log)
      fputs (log, stderr);
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

int
local_server_verify (struct local_server *s)
{
  if (s->verified || s->pid <= 0)
    return 0;
  s->verified = true;
  return local_pins_verify (s->name, &s->pins, s->pid);
}
