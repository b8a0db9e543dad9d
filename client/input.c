/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: choosing the kind of an input, once (see input.h), and what
 * every kind shares: its result.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "input-kinds.h"
#include "input.h"
#include "local.h"
#include "messages.h"
#include "names.h"
#include "signals.h"
#include "source.h"
#include "util.h"

/* The format name is to be read as: a checksum line's, else the
 * command line's, else NULL (probed).  A format for a URI or a [ CMD ]
 * is an error (printed): they are hashed as served.
 */
static int
input_format (const char *name, const struct hash_spec *spec,
              const char **format)
{
  *format = spec->format ? spec->format : options_format (name);
  if (*format && !name_is_local (name) && !name_is_http (name)) {
    error_at (name, "a format (%s) applies to local files only: this "
              "input is hashed as its server serves it", *format);
    return -1;
  }
  return 0;
}

/* The views of src: 1 with *in open, 0 when it has none (*fb filled
 * in), -1 on error (printed).
 */
static int
views_open (struct source *src, const struct hash_spec *spec,
            unsigned flags, struct input **in, struct fallback *fb)
{
  return spec->plain ? plain_view_input_open (src, spec, in, fb)
    : view_input_open (src, spec, flags, in, fb);
}

/* Where name is served from: the server hashes if it can; otherwise
 * (or with --client-side) a private filter on this machine does, in
 * front of it (input-front.c; the server left a notice to say why).
 * A local file's private nbdkit has the filter already.
 */
static struct input *
served_input_open (const char *name, const struct hash_spec *spec,
                   unsigned flags)
{
  struct fallback fb = { NULL, NULL, 0, NULL, NULL };
  struct input *in = NULL;
  struct source *src;
  char format[sizeof in->about.format] = "";
  bool local, front = false;
  int r = 0;

  if ((src = source_open_as (name, spec->format)) == NULL)
    return NULL;
  /* The format a local file is read as, for its result. */
  if (src->server && local_server_format (src->server))
    snprintf (format, sizeof format, "%s", local_server_format (src->server));
  /* A plain line without a format means the bytes (as sha256sum's):
   * an untagged one cannot say the file was read as another format.
   */
  if (spec->plain && opts->tag == TAG_NEVER && format[0] &&
      strcmp (format, "raw") != 0) {
    error_at (name, "read as %s: an untagged line cannot say so, and "
              "would be checked against the file's bytes (leave out "
              "--untagged, or give --format=raw for the bytes)", format);
    source_close (src);
    return NULL;
  }
  local = src->server && local_server_format (src->server);
  if (!opts->client_side || local)
    r = views_open (src, spec, flags, &in, &fb);
  if (r == 0) {
    /* front_open takes src. */
    struct source_retry retry;

    front = true;
    if ((src = front_open (src, &fb, spec)) == NULL)
      return NULL;
    /* The private nbdkit's first try starts now: the look at the image
     * and nbdkit's start are not its, and ate its --connect-timeout.
     */
    retry = (struct source_retry) { now (), 0 };
    do
      r = views_open (src, spec, flags, &in, &fb);
    while (r == 0 && front_retry (src, &fb, &retry));
    if (r == 0) {
      front_failed (src, &fb);
      r = -1;
    }
  }
  if (r == -1) {
    source_close (src);
    return NULL;
  }
  memcpy (in->about.format, format, sizeof format);
  in->here = front || opts->client_side;
  return in;
}

struct input *
input_open (const char *name, const struct hash_spec *spec, unsigned flags)
{
  const double start = now ();
  struct hash_spec hs = *spec;
  struct input *in;
  int fd = -1;
  enum name_kind kind;

  if (flags & INPUT_SAVED)
    return saved_input_open (name);
  if (input_format (name, spec, &hs.format) == -1)
    return NULL;
  /* Standard input, and files a read hashes but nbdkit cannot serve:
   * streams, which have no block digests (--since, --diff and --blocks
   * refuse them).
   */
  kind = name_kind (name);
  if (kind == NAME_STDIN)
    fd = STDIN_FILENO;
  else if (kind == NAME_FILE && !opts->since && !(flags & INPUT_DIGESTS) &&
           (fd = local_stream_open (name)) == -2)
    return NULL;
  /* A plain digest of a stream is of its bytes, whatever they look
   * like (what sha256sum gives; qemu cannot read a stream anyway).
   */
  if (fd >= 0 && hs.plain && hs.format == NULL)
    hs.format = "raw";
  if (fd >= 0 && hs.range.length) {
    char r[BLK_RANGE_STR_MAX];
    error_at (name, "--range=%s: a stream is hashed as it is read, whole: "
              "save it to a file first", blk_format_range (&hs.range, r));
    if (fd != STDIN_FILENO)
      close (fd);
    return NULL;
  }
  if (fd >= 0)
    in = stream_input_open (name, fd, &hs);
  else if (opts->since)
    in = since_input_open (name, &hs);
  else
    in = served_input_open (name, &hs, flags);
  if (in == NULL)
    return NULL;
  in->about.format_given = hs.format != NULL;
  in->about.range = hs.range;
  in->opened = start;
  return in;
}

int
input_checksum (struct input *in, struct result *res)
{
  uint8_t root[BLK_DIGEST_MAX];

  if (in->ops->checksum (in, root) == -1)
    return -1;
  *res = in->about;
  res->name = in->name;
  blk_hex (root, in->params->digest.len, res->hex);
  snprintf (res->digest, sizeof res->digest, "%s", in->params->digest.name);
  snprintf (res->method, sizeof res->method, "%s",
            input_method (in));
  res->plain = in->plain;
  res->block_size = in->plain ? 0 : in->params->block_size;
  res->size = in->size;
  res->seconds = now () - in->opened;
  return 0;
}

int
input_hash (const char *name, const struct hash_spec *spec,
            struct result *res)
{
  struct input *in = input_open (name, spec, 0);
  int r;

  memset (res, 0, sizeof *res);
  res->name = name;
  if (in == NULL)
    return -1;
  r = input_checksum (in, res);
  input_close (in);
  return r;
}

bool
input_views_refused (char **names, int n, input_refused_fn *json)
{
  char **errors = NULL;
  bool found = false;

  if (json && (errors = calloc (n, sizeof *errors)) == NULL) {
    error_msg ("out of memory");
    return true;
  }
  for (int i = 0; i < n; i++) {
    if (errors)
      messages_capture (names[i]);
    if (refuse_view (names[i]))
      found = true;
    if (errors)
      errors[i] = messages_captured ();
  }
  if (errors) {
    if (found)
      json (names, n, errors);
    for (int i = 0; i < n; i++)
      free (errors[i]);
    free (errors);
  }
  return found;
}
