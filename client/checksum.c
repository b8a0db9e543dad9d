/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the checksum of one input, and the choice of method. */
#include <config.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "checksum.h"
#include "helpers.h"
#include "incremental.h"
#include "json.h"
#include "local.h"
#include "messages.h"
#include "method.h"
#include "options.h"
#include "progress.h"
#include "source.h"
#include "stream.h"
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
  if (*format && (is_uri (name) || local_command_argv (name))) {
    error_at (name, "a format (%s) applies to local files only: this "
              "input is hashed as its server serves it", *format);
    return -1;
  }
  return 0;
}

struct endpoint *
input_open (const char *name, const struct hash_spec *spec)
{
  struct fallback fb = { NULL, NULL, 0, NULL };
  struct endpoint *ep = NULL;
  struct source *src;
  const char *format;
  int r = 0;

  if (input_format (name, spec, &format) == -1)
    return NULL;
  if ((src = source_open_as (name, format)) == NULL)
    return NULL;
  /* The server hashes if it can; otherwise we do, going on with the
   * connection it left (it said so).
   */
  if (!opts->client_side)
    r = server_side_open (src, spec, &ep, &fb);
  if (r == 0)
    ep = client_side_open (src, spec, &fb, NULL);
  if (ep == NULL)
    source_close (src);
  return ep;
}

void
input_close (struct endpoint *ep)
{
  struct source *src;

  if (ep == NULL)
    return;
  src = ep->src;
  endpoint_close (ep);
  source_close (src);
}

int
checksum_one (const char *name, const struct hash_spec *spec,
              struct result *res)
{
  uint8_t root[BLK_DIGEST_MAX];
  const double start = now ();
  struct endpoint *ep;
  const char *format;
  int fd = STDIN_FILENO;

  memset (res, 0, sizeof *res);
  res->name = name;
  if (input_format (name, spec, &format) == -1)
    return -1;
  /* Standard input, and files a read hashes but nbdkit cannot serve
   * (with --since, incremental.c refuses them).
   */
  if (strcmp (name, "-") != 0) {
    fd = -1;
    if (!opts->since && !is_uri (name) && !local_command_argv (name) &&
        (fd = local_stream_open (name)) == -2)
      return -1;
  }
  if (fd >= 0) {
    struct blk_params p;
    struct hash_spec stream_spec = *spec;
    stream_spec.format = format;
    const int r = stream_checksum (name, fd, &stream_spec, root, &res->size,
                                   &p);
    if (fd != STDIN_FILENO)
      close (fd);
    if (r == -1)
      return -1;
    blk_hex (root, p.digest.len, res->hex);
    snprintf (res->digest, sizeof res->digest, "%s", p.digest.name);
    res->block_size = p.block_size;
    res->method = "stream";
    snprintf (res->format, sizeof res->format, "raw");
    blk_params_free (&p);
  }
  else if (opts->since) {
    struct incremental *inc = incremental_open (name, spec);
    const struct endpoint *iep;

    if (inc == NULL)
      return -1;
    iep = incremental_endpoint (inc);
    blk_hex (incremental_root (inc), iep->params->digest.len, res->hex);
    snprintf (res->digest, sizeof res->digest, "%s", iep->params->digest.name);
    res->block_size = iep->params->block_size;
    res->size = iep->size;
    res->method = iep->ops->name;
    res->incremental = true;
    res->hashed_blocks = incremental_hashed (inc);
    res->sampled_blocks = incremental_sampled (inc);
    res->read_bytes = atomic_load (&iep->progress.data);
    incremental_close (inc);
  }
  else {
    if ((ep = input_open (name, spec)) == NULL)
      return -1;
    if (ep->ops->checksum (ep, root) == -1) {
      input_close (ep);
      return -1;
    }
    blk_hex (root, ep->params->digest.len, res->hex);
    snprintf (res->digest, sizeof res->digest, "%s", ep->params->digest.name);
    res->block_size = ep->params->block_size;
    res->size = ep->size;
    res->method = ep->ops->name;
    if (ep->src->server && local_server_format (ep->src->server))
      snprintf (res->format, sizeof res->format, "%s",
                local_server_format (ep->src->server));
    input_close (ep);
  }
  res->format_given = format != NULL;
  res->seconds = now () - start;
  return 0;
}

void
result_json_members (const struct result *res)
{
  json_string ("checksum", res->hex);
  json_string ("digest", res->digest);
  json_uint ("block-size", res->block_size);
  json_uint ("size", res->size);
  json_string ("method", res->method);
  if (res->format[0])
    json_string ("format", res->format);
  if (res->incremental) {
    json_name ("since", opts->since);
    json_name ("dirty-bitmap", opts->dirty_bitmap);
    json_uint ("blocks-hashed", res->hashed_blocks);
    json_uint ("blocks-sampled", res->sampled_blocks);
    json_uint ("bytes-read", res->read_bytes);
  }
  json_seconds ("seconds", res->seconds);
}
