/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the private nbdkit for a local file, and in front of a
 * server (local.c runs it).
 *
 * Raw files are served by the file plugin; qcow2 and the other formats
 * qemu reads by a private qemu-nbd behind nbdkit's nbd plugin, so that
 * the guest content is hashed (for --since, qemu-nbd alone: nbdkit
 * passes on no dirty bitmap; local-bitmap.c).  A file's format is
 * probed as qemu probes it (lib/imgformat.c) unless --format or a
 * checksum line gives it; what nbdsum cannot read as guest content
 * (luks, encrypted qcow2 and qcow, a fixed-size VHD qemu takes for
 * raw, any image without qemu-nbd) is refused here, never hashed as
 * its bytes.  The blkhash filter comes from the build tree when nbdsum
 * runs from it (local-command.c finds it).  In front of a server
 * without the filter, or with --client-side, nbdsum runs a private
 * nbdkit --filter=blkhash nbd uri=... (local_server_start_front).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "helpers.h"
#include "local-command.h"
#include "local-server.h"
#include "messages.h"
#include "options.h"
#include "paths.h"
#include "signals.h"

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
  /* Below it, requests in the units a server asks for (qemu-nbd serves
   * a qed image in 512 bytes): a --range need not be on them.
   */
  if (f->uri || f->spec)
    argv[i++] = "--filter=blocksize";
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
  local_exec_activated (listen_fd, argv, false);
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
  s = local_serve (name, "private nbdkit", exec_nbdkit, &f, true);
  free (abs);
  free ((char *) f.spec);
  if (s)
    s->pins = pins;
  else
    local_pins_close (&pins);
  if (s) {
    s->format = f.format;
    s->handshake_limit = LOCAL_HANDSHAKE_SECONDS;
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
  s = local_serve (name, "private nbdkit --filter=blkhash nbd", exec_nbdkit,
                   &f, true);
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
