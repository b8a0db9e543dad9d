/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: small shared helpers (see helpers.h). */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "minmax.h"
#include <sys/stat.h>

#include "blkhash.h"
#include "helpers.h"
#include "messages.h"
#include "util.h"

const char *
temp_dir (void)
{
  const char *dir = getenv ("TMPDIR");

  return dir && *dir ? dir : "/tmp";
}

bool
long_option_is (const char *arg, const char *name, size_t min,
                const char **value)
{
  size_t len;

  if (strncmp (arg, "--", 2) != 0)
    return false;
  arg += 2;
  len = strcspn (arg, "=");
  if (value)
    *value = arg[len] == '=' ? &arg[len + 1] : NULL;
  return len >= min && len <= strlen (name) && strncmp (arg, name, len) == 0;
}

FILE *
temp_file (const char *name)
{
  char *path;
  FILE *fp = NULL;
  int fd = -1;

  if (asprintf (&path, "%s/nbdsum.XXXXXX", temp_dir ()) == -1) {
    error_at (name, "out of memory");
    return NULL;
  }
  if ((fd = mkstemp (path)) == -1 || unlink (path) == -1 ||
      (fp = fdopen (fd, "w+")) == NULL) {
    error_at (name, "a temporary file in %s: %m (TMPDIR says where)",
              temp_dir ());
    if (fd >= 0)
      close (fd);
  }
  free (path);
  return fp;
}

/* Is path a name of one of this process's descriptors?  Its number,
 * or -1.
 */
static int
own_descriptor (const char *path)
{
  static const char *const std[] = { "/dev/stdin", "/dev/stdout",
                                     "/dev/stderr" };
  char pid_dir[48];
  const char *const dirs[] = { "/dev/fd/", "/proc/self/fd/",
                               "/proc/thread-self/fd/", pid_dir };
  char *end;
  long fd;

  for (int i = 0; i < 3; i++)
    if (strcmp (path, std[i]) == 0)
      return i;
  snprintf (pid_dir, sizeof pid_dir, "/proc/%ld/fd/", (long) getpid ());
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    const size_t n = strlen (dirs[i]);
    if (strncmp (path, dirs[i], n) != 0 || path[n] < '0' || path[n] > '9')
      continue;
    errno = 0;
    fd = strtol (path + n, &end, 10);
    if (*end == '\0' && errno == 0 && fd <= INT_MAX)
      return fd;
  }
  return -1;
}

/* Descriptor fd's file by its path, if it still has that path, else
 * through this process's /proc.
 */
static char *
descriptor_path (int fd)
{
  char link[64], target[PATH_MAX];
  struct stat a, b;
  ssize_t n;
  char *path;

  snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
  n = readlink (link, target, sizeof target - 1);
  if (n > 0 && target[0] == '/' && fstat (fd, &a) == 0) {
    target[n] = '\0';
    if (stat (target, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
      return strdup (target);
  }
  if (asprintf (&path, "/proc/%ld/fd/%d", (long) getpid (), fd) == -1)
    return NULL;
  return path;
}

char *
absolute_path (const char *path)
{
  const int fd = own_descriptor (path);
  char *cwd, *abs;
  size_t len;

  if (fd >= 0)
    return descriptor_path (fd);
  if (path[0] == '/')
    return strdup (path);
  if ((cwd = getcwd (NULL, 0)) == NULL)
    return NULL;
  len = strlen (cwd);
  if (asprintf (&abs, "%s%s%s", cwd, len && cwd[len - 1] == '/' ? "" : "/",
                path) == -1)
    abs = NULL;
  free (cwd);
  return abs;
}

/* Why standard output first failed, or 0: a later flush with nothing
 * left to write says nothing.
 */
static int stdout_errno;

/* Why standard output failed, if it is the first time (errno, set to
 * 0 before the call that failed).
 */
static void
stdout_failed (void)
{
  if (stdout_errno == 0)
    stdout_errno = errno ? errno : EIO;
}

void
stdout_flush (void)
{
  errno = 0;
  if (fflush (stdout) == EOF)
    stdout_failed ();
}

bool
stdout_write (const void *buf, size_t n)
{
  errno = 0;
  if (fwrite (buf, 1, n, stdout) == n)
    return true;
  stdout_failed ();
  return false;
}

int
stdout_error (void)
{
  stdout_flush ();
  if (ferror (stdout) && stdout_errno == 0)
    stdout_errno = EIO;
  return stdout_errno;
}

double
now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Where the path of an NBD URI is: after "scheme://authority", up to
 * the query or the fragment.
 */
static void
uri_path (const char *uri, size_t *start, size_t *end)
{
  const char *p = strstr (uri, "://");

  p = p ? p + 3 : uri;
  *start = p - uri + strcspn (p, "/?#");
  *end = *start + strcspn (uri + *start, "?#");
}

/* uri[start, end) percent-decoded (as libxml2's xmlURIUnescapeString,
 * which libnbd uses).  NULL if out of memory.
 */
static char *
uri_decode (const char *uri, size_t start, size_t end)
{
  char *name, *q;

  if ((q = name = malloc (end - start + 1)) == NULL)
    return NULL;
  for (size_t i = start; i < end; i++) {
    if (uri[i] == '%' && i + 2 < end && blk_hex_value (uri[i + 1]) >= 0 &&
        blk_hex_value (uri[i + 2]) >= 0) {
      *q++ = blk_hex_value (uri[i + 1]) * 16 + blk_hex_value (uri[i + 2]);
      i += 2;
    }
    else
      *q++ = uri[i];
  }
  *q = '\0';
  return name;
}

char *
uri_export_name (const char *uri)
{
  size_t start, end;

  uri_path (uri, &start, &end);
  if (start < end && uri[start] == '/')
    start++;
  return uri_decode (uri, start, end);
}

char *
uri_take_userinfo (const char *uri, char **user, char **password)
{
  const char *auth = strstr (uri, "://");
  const char *at = NULL, *colon;
  char *out;

  *user = *password = NULL;
  if (auth) {
    auth += 3;
    /* The authority ends at the path, query or fragment; in it, the
     * userinfo at its last '@'.
     */
    for (const char *p = auth; *p && !strchr ("/?#", *p); p++)
      if (*p == '@')
        at = p;
  }
  if (at == NULL)
    return strdup (uri);
  if ((out = malloc (strlen (uri) + 1)) == NULL)
    return NULL;
  stpcpy (stpncpy (out, uri, auth - uri), at + 1);
  colon = memchr (auth, ':', at - auth);
  if ((*user = uri_decode (auth, 0, (colon ? colon : at) - auth)) == NULL ||
      (colon && (*password = uri_decode (colon + 1, 0, at - colon - 1))
       == NULL)) {
    free (*user);
    *user = NULL;
    free (out);
    return NULL;
  }
  return out;
}

/* libnbd reads a query as parse_uri_queries does: a parameter ends at
 * the first '&' after it, else at the first ';', else at the end.
 */
static size_t
query_param_len (const char *q)
{
  const char *end = strchr (q, '&');

  if (end == NULL)
    end = strchr (q, ';');
  return end ? (size_t) (end - q) : strlen (q);
}

char *
uri_take_tls_files (const char *uri, char **psk_file, char **certificates)
{
  const char *query = strchr (uri, '?');
  const size_t qend = query ? strcspn (uri, "#") : 0;
  char *out = malloc (strlen (uri) + 1), *o;

  *psk_file = *certificates = NULL;
  if (out == NULL)
    return NULL;
  if (query == NULL || (size_t) (query - uri) > qend) {
    strcpy (out, uri);
    return out;
  }
  o = stpncpy (out, uri, query - uri + 1);
  for (size_t i = query - uri + 1; i < qend; ) {
    const size_t len = MIN (query_param_len (uri + i), qend - i);
    const size_t eq = strcspn (uri + i, "=");
    char *name = uri_decode (uri, i, i + MIN (eq, len)), **take = NULL;

    if (name == NULL)
      goto nomem;
    if (strcmp (name, "tls-psk-file") == 0)
      take = psk_file;
    else if (strcmp (name, "tls-certificates") == 0)
      take = certificates;
    free (name);
    if (take) {
      free (*take);
      if ((*take = uri_decode (uri, i + MIN (eq + 1, len), i + len))
          == NULL)
        goto nomem;
    }
    else {
      /* Kept, with the separator that ends it. */
      o = stpncpy (o, uri + i, len + (i + len < qend));
    }
    i += len + (i + len < qend);
  }
  /* No separator or '?' left dangling. */
  while (o > out && (o[-1] == '&' || o[-1] == ';' || o[-1] == '?'))
    o--;
  strcpy (o, uri + qend);
  return out;

 nomem:
  free (out);
  free (*psk_file);
  free (*certificates);
  *psk_file = *certificates = NULL;
  return NULL;
}

char *
uri_encode (char *dst, const char *src)
{
  static const char hex[] = "0123456789ABCDEF";

  for (const unsigned char *p = (const unsigned char *) src; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
        (*p >= '0' && *p <= '9') || strchr ("-._~/", *p))
      *dst++ = *p;
    else {
      *dst++ = '%';
      *dst++ = hex[*p >> 4];
      *dst++ = hex[*p & 15];
    }
  }
  *dst = '\0';
  return dst;
}

char *
uri_with_export (const char *uri, const char *export)
{
  size_t start, end;
  char *s, *q;

  uri_path (uri, &start, &end);
  s = malloc (start + 1 + 3 * strlen (export) + strlen (uri + end) + 1);
  if (s == NULL)
    return NULL;
  memcpy (s, uri, start);
  q = s + start;
  *q++ = '/';
  q = uri_encode (q, export);
  strcpy (q, uri + end);
  return s;
}

bool
root_agrees (const char *name, const struct blk_params *p,
              const uint8_t *said, const uint8_t *folded)
{
  char s[2 * BLK_DIGEST_MAX + 1], f[2 * BLK_DIGEST_MAX + 1];

  if (memcmp (said, folded, p->digest.len) == 0)
    return true;
  blk_hex (said, p->digest.len, s);
  blk_hex (folded, p->digest.len, f);
  error_at (name, "the server's checksum %s is not the one its block "
            "digests give (%s): not trusting it; or the image changed "
            "during the run", s, f);
  return false;
}

int
fold_digests (const char *name, const struct blk_params *p, uint64_t size,
              uint64_t nblocks, uint64_t window, fold_read_fn *read,
              void *opaque, uint8_t *root)
{
  uint8_t *d = malloc (window * p->digest.len);
  struct blk_root r;
  int ret = -1;

  if (d == NULL || blk_root_init (&r, p) == -1) {
    error_at (name, "out of memory");
    free (d);
    return -1;
  }
  for (uint64_t b = 0; b < nblocks; b += window) {
    const uint64_t n = MIN (nblocks - b, window);
    if (read (opaque, b, n, d) == -1)
      goto out;
    if (blk_root_add (&r, d, n) == -1) {
      error_at (name, "%s failed", p->digest.name);
      goto out;
    }
  }
  if (blk_root_final (&r, size, root) == -1) {
    error_at (name, "%s failed", p->digest.name);
    goto out;
  }
  ret = 0;
 out:
  blk_root_free (&r);
  free (d);
  return ret;
}

void *
calloc_or_exit (size_t n, size_t size)
{
  void *p = calloc (n, size);

  if (p == NULL) {
    error_msg ("out of memory");
    exit (EXIT_FAILURE);
  }
  return p;
}

char *
strdup_or_exit (const char *s)
{
  char *p = strdup (s);

  if (p == NULL) {
    error_msg ("out of memory");
    exit (EXIT_FAILURE);
  }
  return p;
}

bool
in_path (const char *program)
{
  const char *path = getenv ("PATH");
  char *dirs, *dir, *save = NULL, *file;
  bool found = false;

  /* execvp's default, when PATH is unset. */
  if ((dirs = strdup (path ? path : "/bin:/usr/bin")) == NULL)
    return true;                /* the server will say */
  for (dir = strtok_r (dirs, ":", &save); dir && !found;
       dir = strtok_r (NULL, ":", &save)) {
    struct stat st;
    if (asprintf (&file, "%s/%s", *dir ? dir : ".", program) == -1)
      break;
    found = stat (file, &st) == 0 && S_ISREG (st.st_mode) &&
      access (file, X_OK) == 0;
    free (file);
  }
  free (dirs);
  return found;
}
