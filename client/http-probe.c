/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what a URL's server must answer before nbdkit's curl plugin
 * reads it (see http-probe.h).
 *
 * The curl plugin of nbdkit 1.32 copies whatever body a GET returns
 * into the range it asked for: it checks neither the status (a 200
 * with the whole file, a redirect's page, a 204) nor Content-Range (a
 * 206 of other bytes, another length than HEAD said).  Such a server
 * would have nbdsum print the checksum of bytes it never served as
 * the file, with exit status 0.  So nbdsum first asks for the last
 * bytes itself, as the plugin will, and goes on only if the answer is
 * exactly those bytes of a file of the length HEAD gave.  A server
 * that answers this and then serves other bytes is changing the file
 * under nbdsum (nbdsum(1), SECURITY).
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "http-probe.h"
#include "messages.h"
#include "options.h"
#include "signals.h"

/* Bytes asked for: the last ones (the plugin's last read is there). */
#define PROBE_BYTES 64
#define CONNECT_SECONDS 30L

struct probe {
  char content_range[128];      /* the header's value, or "" */
  uint64_t got;                 /* body bytes */
  uint64_t most;                /* more than this: refuse */
};

static size_t
probe_header (char *buf, size_t size, size_t n, void *opaque)
{
  struct probe *p = opaque;
  const size_t len = size * n;
  static const char name[] = "content-range:";

  if (len > strlen (name) && strncasecmp (buf, name, strlen (name)) == 0) {
    size_t v = strlen (name), e = len;
    while (v < e && (buf[v] == ' ' || buf[v] == '\t'))
      v++;
    while (e > v && strchr ("\r\n \t", buf[e - 1]))
      e--;
    snprintf (p->content_range, sizeof p->content_range, "%.*s",
              (int) (e - v), buf + v);
  }
  return len;
}

static size_t
probe_body (char *buf, size_t size, size_t n, void *opaque)
{
  struct probe *p = opaque;

  (void) buf;
  p->got += size * n;
  /* Stop a server that sends the whole file instead (0: an error). */
  return p->got > p->most ? 0 : size * n;
}

static int
probe_progress (void *opaque, curl_off_t a, curl_off_t b, curl_off_t c,
                curl_off_t d)
{
  (void) opaque; (void) a; (void) b; (void) c; (void) d;
  return stop_signal () != 0;   /* non-zero aborts the transfer */
}

int
http_probe (const char *url, uint64_t size)
{
  const uint64_t first = size > PROBE_BYTES ? size - PROBE_BYTES : 0;
  struct probe p = { .most = size - first };
  struct curl_slist *headers = NULL;
  char range[64], want[128];
  long status = 0;
  CURLcode rc;
  CURL *c;
  int r = -1;

  if (curl_global_init (CURL_GLOBAL_DEFAULT) != 0 ||
      (c = curl_easy_init ()) == NULL) {
    error_at (url, "libcurl failed to start");
    return -1;
  }
  for (unsigned i = 0; i < opts->nhttp_headers; i++) {
    struct curl_slist *l = curl_slist_append (headers, opts->http_headers[i]);
    if (l == NULL)
      goto oom;
    headers = l;
  }
  /* An empty file has no byte to ask for: the whole of it must be. */
  if (size == 0)
    snprintf (range, sizeof range, "0-");
  else
    snprintf (range, sizeof range, "%" PRIu64 "-%" PRIu64, first, size - 1);
  snprintf (want, sizeof want, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64,
            first, size - 1, size);
  curl_easy_setopt (c, CURLOPT_URL, url);
  /* As the curl plugin is told: http and https, no redirect. */
  curl_easy_setopt (c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt (c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt (c, CURLOPT_RANGE, range);
  curl_easy_setopt (c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt (c, CURLOPT_SSL_VERIFYPEER, opts->http_insecure ? 0L : 1L);
  curl_easy_setopt (c, CURLOPT_SSL_VERIFYHOST, opts->http_insecure ? 0L : 2L);
  curl_easy_setopt (c, CURLOPT_CONNECTTIMEOUT, CONNECT_SECONDS);
  curl_easy_setopt (c, CURLOPT_TIMEOUT, (long) opts->http_timeout);
  curl_easy_setopt (c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt (c, CURLOPT_HEADERFUNCTION, probe_header);
  curl_easy_setopt (c, CURLOPT_HEADERDATA, &p);
  curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, probe_body);
  curl_easy_setopt (c, CURLOPT_WRITEDATA, &p);
  curl_easy_setopt (c, CURLOPT_XFERINFOFUNCTION, probe_progress);
  curl_easy_setopt (c, CURLOPT_NOPROGRESS, 0L);

  rc = curl_easy_perform (c);
  curl_easy_getinfo (c, CURLINFO_RESPONSE_CODE, &status);
  if (stop_signal ())
    goto out;                   /* interrupted: nothing to say */
  if (rc == CURLE_WRITE_ERROR)
    error_at (url, "asked for bytes %s of a file of %" PRIu64 " bytes, the "
              "server sent more (HTTP %ld): it does not serve byte ranges "
              "as it says", range, size, status);
  else if (rc == CURLE_OPERATION_TIMEDOUT)
    error_at (url, "asking for bytes %s: no answer within %u seconds: the "
              "server stalled or is too slow (--http-timeout)", range,
              opts->http_timeout);
  else if (rc != CURLE_OK)
    error_at (url, "asking for bytes %s: %s", range, curl_easy_strerror (rc));
  else if (size == 0 && (status == 200 || status == 416) && p.got == 0)
    r = 0;
  else if (size == 0)
    error_at (url, "the server said the file is empty (HEAD), then answered "
              "HTTP %ld with %" PRIu64 " bytes", status, p.got);
  else if (status >= 300 && status < 400)
    error_at (url, "the server answered HTTP %ld (a redirect): nbdsum follows "
              "no redirect (give the URL it leads to)", status);
  else if (status != 206)
    error_at (url, "asked for bytes %s, the server answered HTTP %ld, not "
              "206 (partial content): it does not serve byte ranges as it "
              "says", range, status);
  else if (strcmp (p.content_range, want) != 0)
    error_at (url, "asked for bytes %s of the %" PRIu64 " that HEAD said, the "
              "server sent \"%s\": not trusting its length or its ranges",
              range, size, p.content_range[0] ? p.content_range
              : "no Content-Range");
  else if (p.got != size - first)
    error_at (url, "asked for %" PRIu64 " bytes, the server sent %" PRIu64,
              size - first, p.got);
  else
    r = 0;
  goto out;

 oom:
  error_at (url, "out of memory");
 out:
  curl_slist_free_all (headers);
  curl_easy_cleanup (c);
  return r;
}
