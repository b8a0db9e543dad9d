/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: where an input is served (see source.h): URIs checked for
 * views, files served by a private nbdkit, and connections to either.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "local.h"
#include "messages.h"
#include "source.h"
#include "util.h"
#include "viewname.h"

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

/* The export name of an NBD URI as libnbd takes it: the path without
 * its leading '/', percent-decoded.  NULL if out of memory.
 */
static char *
uri_export_name (const char *uri)
{
  size_t start, end;
  char *name, *q;

  uri_path (uri, &start, &end);
  if (start < end && uri[start] == '/')
    start++;
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

/* uri with its export name replaced, percent-encoded.  NULL if out of
 * memory.
 */
static char *
uri_with_export (const char *uri, const char *export)
{
  static const char unreserved[] = "-._~/";
  size_t start, end;
  char *s, *q;

  uri_path (uri, &start, &end);
  s = malloc (start + 1 + 3 * strlen (export) + strlen (uri + end) + 1);
  if (s == NULL)
    return NULL;
  memcpy (s, uri, start);
  q = s + start;
  *q++ = '/';
  for (const unsigned char *p = (const unsigned char *) export; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
        (*p >= '0' && *p <= '9') || strchr (unreserved, *p))
      *q++ = *p;
    else
      q += sprintf (q, "%%%02X", *p);
  }
  strcpy (q, uri + end);
  return s;
}

/* If export, named by URI uri, is a view name (well formed or not),
 * say what to give instead and return true.
 */
static bool
refuse_view_export (const char *name, const char *uri, const char *export)
{
  struct blk_view_name v, inner;
  const char *msg = NULL, *marker;
  char *image, *image_uri = NULL, bs[48] = "";
  int r;

  r = blk_view_name_parse (export, &v, &msg);
  if (r == 0)
    return false;

  /* The view's image: its base name, unless that is a view name too
   * (NAME@blkhash@blkhash); then what comes before the first marker.
   */
  if (r == 1 && blk_view_name_parse (v.base, &inner, &msg) == 0)
    image = strdup (v.base);
  else {
    if (r == 1)
      blk_view_name_free (&inner);
    marker = strstr (export, BLK_VIEW_MARKER);
    image = strndup (export, marker ? (size_t) (marker - export)
                     : strlen (export));
  }
  if (image)
    image_uri = uri_with_export (uri, image);
  if (r == 1 && v.block_size) {
    char spelt[BLK_BLOCK_SIZE_STR_MAX];
    snprintf (bs, sizeof bs, " --block-size %s",
              blk_format_block_size (v.block_size, spelt));
  }

  error_at (name, "export '%s' is a blkhash view, not a disk image", export);
  if (image_uri == NULL)
    error_at (name, "out of memory");
  else
    error_at (name, "use the image's URI instead: '%s'%s%s%s%s", image_uri,
              r == 1 && (v.digest || v.block_size) ? " with" : "",
              r == 1 && v.digest ? " -d " : "",
              r == 1 && v.digest ? v.digest : "", bs);
  if (r == 1)
    blk_view_name_free (&v);
  free (image);
  free (image_uri);
  return true;
}

bool
refuse_view (const char *name)
{
  char *export;
  bool refused;

  if (!is_uri (name))
    return false;
  if ((export = uri_export_name (name)) == NULL) {
    error_at (name, "out of memory");
    return true;
  }
  refused = refuse_view_export (name, name, export);
  free (export);
  return refused;
}

struct source *
source_open (const char *name)
{
  struct source *src;

  if (refuse_view (name))
    return NULL;
  if ((src = calloc (1, sizeof *src)) == NULL) {
    error_at (name, "out of memory");
    return NULL;
  }
  src->name = name;
  if (is_uri (name))
    src->uri = strdup (name);
  else {
    src->server = local_server_start (name, name);
    if (src->server == NULL)
      goto err;
    src->uri = strdup (local_server_uri (src->server));
  }
  if (src->uri == NULL) {
    error_at (name, "out of memory");
    goto err;
  }
  return src;

 err:
  source_close (src);
  return NULL;
}

void
source_close (struct source *src)
{
  if (src == NULL)
    return;
  local_server_stop (src->server);
  free (src->uri);
  free (src);
}

struct nbd_handle *
source_connect (const struct source *src, const char *export_name, bool go)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL) {
    error_at (src->name, "%s", nbd_get_error ());
    return NULL;
  }
  if (nbd_set_opt_mode (h, true) == -1 ||
      nbd_set_uri_allow_local_file (h, true) == -1 ||
      nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1 ||
      nbd_connect_uri (h, src->uri) == -1)
    goto err;

  /* refuse_view read the URI before connecting; libnbd has the last
   * word on the export it names.
   */
  if (export_name == NULL && src->server == NULL) {
    char *export = nbd_get_export_name (h);
    bool refused;

    if (export == NULL)
      goto err;
    refused = refuse_view_export (src->name, src->uri, export);
    free (export);
    if (refused) {
      nbd_close (h);
      return NULL;
    }
  }

  if ((export_name && nbd_set_export_name (h, export_name) == -1) ||
      (go && nbd_opt_go (h) == -1))
    goto err;
  return h;

 err:
  if (src->server && local_server_exited (src->server))
    error_at (src->name, "%s (the private nbdkit serving it exited: see "
              "its messages above)", nbd_get_error ());
  else
    error_at (src->name, "%s", nbd_get_error ());
  nbd_close (h);
  return NULL;
}
