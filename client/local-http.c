/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: http:// and https:// inputs, read by nbdkit's curl plugin
 * behind the blkhash filter in a private nbdkit (local.c), and what
 * that nbdkit says when the server fails it, in nbdsum's words.
 *
 * A URL is its bytes: no format is probed from it (a qcow2 from the
 * network could name backing files: nbdsum(1), SECURITY), and one
 * given other than raw is refused.  The URL is one argv element
 * (url=...), never through a shell, without its USER:PASSWORD@ (user=,
 * and the password on a pipe: local users read nbdkit's arguments);
 * curl may use http and https only, and follows no redirect: a
 * redirect could lead the headers of --http-header to another host,
 * or to another scheme.
 */
#include <config.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "local-command.h"
#include "local.h"
#include "messages.h"
#include "names.h"
#include "options.h"
#include "paths.h"

/* nbdkit's command line at most: its fixed part and the options'
 * parameters.
 */
#define FIXED_ARGS 16

/* A URL's password, and --http-header's lines together: at most what
 * a pipe holds before anyone reads it.
 */
#define PASSWORD_MAX 4096
#define HEADERS_MAX 32768

/* A URL nbdsum hands to curl: the scheme names.c took it for, and no
 * byte curl might read otherwise (spaces, control characters: a URL
 * holds them percent-encoded).  NULL, or why not.
 */
static const char *
url_refused (const char *url)
{
  if (!name_is_http (url))
    return "only http:// and https:// URLs are read";
  for (const unsigned char *p = (const unsigned char *) url; *p; p++)
    if (*p <= ' ' || *p == 0x7f)
      return "a URL holds no spaces or control characters (percent-encode "
        "them)";
  if (url[strcspn (url, ":") + 3] == '\0' ||
      strchr ("/?#", url[strcspn (url, ":") + 3]))
    return "the URL names no host";
  return NULL;
}

/* secret on a pipe nbdkit inherits (password=-FD, header-script=cat
 * /dev/fd/FD): not in its arguments, which every local user can read.
 * The descriptor, 10 or above (local.c puts the listening socket at
 * 3), or -1 (error printed).  The caller closes it once nbdkit has
 * started.
 */
static int
secret_fd (const char *name, const char *secret)
{
  const size_t len = strlen (secret);
  int p[2], fd;

  if (pipe2 (p, O_CLOEXEC) == -1) {
    error_at (name, "pipe2: %m");
    return -1;
  }
  if (write (p[1], secret, len) != (ssize_t) len) {
    error_at (name, "writing to a pipe: %m");
    close (p[0]);
    close (p[1]);
    return -1;
  }
  close (p[1]);
  fd = fcntl (p[0], F_DUPFD, 10);
  if (fd == -1)
    error_at (name, "fcntl: %m");
  close (p[0]);
  return fd;
}

/* --http-header's, a line each.  NULL if out of memory. */
static char *
http_header_lines (void)
{
  size_t len = 1;
  char *lines, *p;

  for (unsigned j = 0; j < opts->nhttp_headers; j++)
    len += strlen (opts->http_headers[j]) + 1;
  if ((p = lines = malloc (len)) == NULL)
    return NULL;
  for (unsigned j = 0; j < opts->nhttp_headers; j++)
    p = stpcpy (stpcpy (p, opts->http_headers[j]), "\n");
  *p = '\0';
  return lines;
}

struct local_server *
local_server_start_http (const char *name, const char *format)
{
  const size_t n = FIXED_ARGS;
  char **argv = calloc (n + 1, sizeof *argv);
  char **owned = calloc (n + 1, sizeof *owned);
  struct local_server *s = NULL;
  char *bare = NULL, *user = NULL, *password = NULL, *headers = NULL;
  const char *why;
  size_t i = 0, k = 0;
  int pw_fd = -1, hdr_fd = -1;

  if (argv == NULL || owned == NULL) {
    error_at (name, "out of memory");
    goto out;
  }
  if ((why = url_refused (name)) != NULL) {
    error_at (name, "%s", why);
    goto out;
  }
  /* Whatever a checksum line's tag or --format says: the bytes. */
  if (format && strcmp (format, "raw") != 0) {
    error_at (name, "format %s: a URL is hashed as its bytes (raw); "
              "nbdsum reads no image format over HTTP (download it and "
              "give the file with --format=%s)", format, format);
    goto out;
  }

#define ADD(s) (argv[i++] = (char *) (s))
#define ADDF(...) \
  (asprintf (&owned[k], __VA_ARGS__) == -1 ? (owned[k] = NULL, -1) \
   : (ADD (owned[k++]), 0))
  ADD (NBDKIT);
  ADD ("--exit-with-parent");
  ADD ("--readonly");
  /* The one engine, --client-side too: this nbdkit is ours. */
  if (ADDF ("--filter=%s", local_filter ()) == -1)
    goto oom;
  ADD ("curl");
  /* Its credentials apart: the password on a pipe. */
  if ((bare = uri_take_userinfo (name, &user, &password)) == NULL ||
      ADDF ("url=%s", bare) == -1 ||
      (user && ADDF ("user=%s", user) == -1))
    goto oom;
  if (password) {
    if (strlen (password) > PASSWORD_MAX || strchr (password, '\n')) {
      error_at (name, "the URL's password is over %d bytes or holds a "
                "newline: nbdkit cannot take it", PASSWORD_MAX);
      goto out;
    }
    if ((pw_fd = secret_fd (name, password)) == -1)
      goto out;
    if (ADDF ("password=-%d", pw_fd) == -1)
      goto oom;
  }
  ADD ("protocols=http,https");
  ADD ("followlocation=false");
  if (opts->http_insecure)
    ADD ("sslverify=false");
  /* A stalled server fails the read, not hangs it. */
  if (opts->http_timeout &&
      ADDF ("timeout=%u", opts->http_timeout) == -1)
    goto oom;
  /* The headers' values may be secrets too: a script reads them from
   * a pipe, once (curl keeps them for every request).
   */
  if (opts->nhttp_headers) {
    if ((headers = http_header_lines ()) == NULL)
      goto oom;
    if (strlen (headers) > HEADERS_MAX) {
      error_at (name, "--http-header: over %d bytes in all", HEADERS_MAX);
      goto out;
    }
    if ((hdr_fd = secret_fd (name, headers)) == -1)
      goto out;
    if (ADDF ("header-script=exec cat /dev/fd/%d", hdr_fd) == -1)
      goto oom;
  }
  /* nbdsum's limit is the view's too (the defaults agree). */
  if (opts->max_size_given &&
      ADDF ("blkhash-max-size=%" PRIu64, opts->max_size) == -1)
    goto oom;
#undef ADDF
#undef ADD
  argv[i] = NULL;
  s = local_server_start_private (name, "raw", argv);
  goto out;

 oom:
  error_at (name, "out of memory");
 out:
  if (pw_fd >= 0)
    close (pw_fd);
  if (hdr_fd >= 0)
    close (hdr_fd);
  free (headers);
  for (size_t j = 0; owned && j < k; j++)
    free (owned[j]);
  free (owned);
  free (argv);
  free (bare);
  free (user);
  free (password);
  return s;
}

/* What curl says of a status, a failure to connect, TLS: nbdsum's
 * words, or NULL to keep curl's.
 */
static const char *
status_words (int code)
{
  switch (code) {
  case 401: return "unauthorized: give what it asks with --http-header";
  case 403: return "forbidden";
  case 404: return "not found";
  case 410: return "gone";
  case 416: return "range not satisfiable";
  default: return code >= 500 ? "a server error" : NULL;
  }
}

char *
local_http_message (struct local_server *s)
{
  static const char head[] = "problem doing HEAD request to fetch size of "
    "URL [";
  char *log = local_server_message (s), *msg = NULL, *p, *q;
  const char *words;
  int code, r = 0;

  if (log == NULL)
    return NULL;
  /* The last message is the one that failed the connection (others
   * may have failed before it alike).
   */
  for (p = log; (q = strstr (p + 1, "nbdkit: ")) != NULL; p = q)
    ;
  if ((q = strstr (p, "error: ")) != NULL)
    p = q + strlen ("error: ");
  /* nbdsum names the URL itself. */
  if (strncmp (p, head, strlen (head)) == 0 &&
      (q = strstr (p, "]: ")) != NULL)
    p = q + 3;
  /* curl's words, then its details: ": " when it has none. */
  for (q = p + strlen (p); q > p && strchr (": \n", q[-1]); q--)
    q[-1] = '\0';

  if ((words = strstr (p, "returned error: ")) != NULL &&
      sscanf (words + strlen ("returned error: "), "%d", &code) == 1)
    r = (words = status_words (code))
      ? asprintf (&msg, "the server answered HTTP %d (%s)", code, words)
      : asprintf (&msg, "the server answered HTTP %d", code);
  else if (strstr (p, "does not support 'range'"))
    r = asprintf (&msg, "the server does not serve byte ranges of it (no "
                  "Accept-Ranges: bytes), or redirects it elsewhere: "
                  "nbdsum reads a URL in ranges, and follows no redirect "
                  "(give the URL it leads to)");
  else if (strstr (p, "Timeout was reached"))
    r = asprintf (&msg, "a request took more than %u seconds: the server "
                  "stalled or is too slow (--http-timeout)",
                  opts->http_timeout);
  else if (strstr (p, "could not get length"))
    r = asprintf (&msg, "the server does not say its length "
                  "(Content-Length)");
  else if (strcasestr (p, "certificate"))
    r = asprintf (&msg, "%s (--http-insecure skips the check of the "
                  "server's certificate)", p);
  else
    r = asprintf (&msg, "%s", p);
  free (log);
  return r == -1 ? NULL : msg;
}
