/* nbdsum: checksums computed by the server through its blkhash view.
 *
 * The digest area of the view is cut into chunks of about 64 MiB of
 * image.  Connections take chunks in order from a shared counter and
 * send NBD_CMD_CACHE for each: the server hashes them on as many
 * threads as it has cores and folds the completed prefix into the
 * root as it goes.  Then the root is read: almost nothing crosses the
 * network.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nbdsum.h"
#include "viewname.h"

#define CHUNK_IMAGE_BYTES (UINT64_C (64) * 1024 * 1024)

struct server_side {
  uint64_t chunk_blocks, nchunks;
  atomic_uint_fast64_t next_chunk;
  bool use_cache;               /* else drive the server with reads */
};

/* Read and check the header against what was asked.  Returns 1 if
 * valid, 0 if the export is not a view at all, -1 if it is a bad one.
 */
static int
read_header (struct endpoint *ep, struct nbd_handle *h)
{
  struct blk_header *hdr = &ep->hdr;
  uint8_t buf[BLK_VIEW_HEADER_SIZE];
  int64_t view_size = nbd_get_size (h);
  struct blk_digest d;
  const char *msg;
  size_t len;

  if (view_size == -1) {
    error_at (ep->name, "%s", nbd_get_error ());
    return -1;
  }
  if (view_size < BLK_VIEW_DIGESTS_OFFSET)
    return 0;
  if (nbd_pread (h, buf, sizeof buf, 0, 0) == -1) {
    error_at (ep->name, "reading the view header: %s", nbd_get_error ());
    return -1;
  }
  if (!blk_header_has_magic (buf, sizeof buf))
    return 0;
  if ((msg = blk_header_decode (buf, sizeof buf, hdr)) != NULL) {
    error_at (ep->name, "invalid blkhash view header: %s", msg);
    return -1;
  }
  /* The checksum printed must be what the header says it is. */
  if ((msg = blk_digest_init (&d, hdr->digest_name)) != NULL) {
    error_at (ep->name, "invalid blkhash view header: digest '%s': %s",
              hdr->digest_name, msg);
    return -1;
  }
  len = d.len;
  blk_digest_free (&d);
  if (len != hdr->digest_len) {
    error_at (ep->name, "invalid blkhash view header: %s digests are %zu "
              "bytes, not %" PRIu32, hdr->digest_name, len, hdr->digest_len);
    return -1;
  }
  if ((uint64_t) view_size != blk_view_size (hdr)) {
    error_at (ep->name, "invalid blkhash view: its size %" PRIi64 " does not "
              "match the header (%" PRIu64 ")", view_size,
              blk_view_size (hdr));
    return -1;
  }
  if (opts.digest && strcasecmp (opts.digest, hdr->digest_name) != 0) {
    error_at (ep->name, "the server hashed with %s, not %s",
              hdr->digest_name, opts.digest);
    return -1;
  }
  if (opts.block_size && opts.block_size != hdr->block_size) {
    error_at (ep->name, "the server used %" PRIu32 " byte blocks, not %"
              PRIu64, hdr->block_size, opts.block_size);
    return -1;
  }
  return 1;
}

static int
ss_open (struct endpoint *ep)
{
  struct nbd_handle *h = endpoint_connect (ep, NULL, false);
  struct server_side *ss;
  const char *msg;
  char *base;
  int r;

  if (h == NULL)
    return -1;
  base = ep->base_name = nbd_get_export_name (h);
  if (base == NULL) {
    error_at (ep->name, "%s", nbd_get_error ());
    nbd_close (h);
    return -1;
  }
  ep->view_name = blk_view_name_build (base, opts.digest, opts.block_size);
  if (ep->view_name == NULL) {
    error_at (ep->name, "out of memory");
    nbd_close (h);
    return -1;
  }
  if (nbd_set_export_name (h, ep->view_name) == -1 || nbd_opt_go (h) == -1) {
    /* Only an unknown export means "no view"; anything else (TLS
     * required, a dead server) is an error to report as it is.
     */
    const int err = nbd_get_errno ();
    if (err != ENOENT && err != EINVAL) {
      error_at (ep->name, "%s", nbd_get_error ());
      nbd_close (h);
      return -1;
    }
    fprintf (stderr, "%s: %s: no blkhash view '%s' (%s); hashing "
             "client-side\n", progname, ep->name, ep->view_name,
             nbd_get_error ());
    /* Still negotiating: the client side can use it. */
    ep->negotiating = h;
    return 0;
  }
  r = read_header (ep, h);
  if (r == 0)
    fprintf (stderr, "%s: %s: the server has no blkhash view (is it running "
             "nbdkit --filter=blkhash?); hashing client-side\n",
             progname, ep->name);
  if (r <= 0) {
    nbd_close (h);
    return r;
  }

  ep->ops = &server_side_ops;
  ep->conns[0].h = h;
  ep->size = ep->hdr.image_size;
  ep->nblocks = ep->hdr.block_count;
  /* The header's digest and block size, checked above; the zero
   * digest recognises zero blocks in --blocks.
   */
  if ((msg = blk_params_init (&ep->own_params, ep->hdr.digest_name,
                              ep->hdr.block_size)) != NULL) {
    error_at (ep->name, "%s: %s", ep->hdr.digest_name, msg);
    return -1;
  }
  ep->params = &ep->own_params;
  ep->requests = opts.requests;

  ss = calloc (1, sizeof *ss);
  if (ss == NULL) {
    error_at (ep->name, "out of memory");
    return -1;
  }
  ep->priv = ss;
  ss->use_cache = nbd_can_cache (h) == 1;
  ss->chunk_blocks = CHUNK_IMAGE_BYTES / ep->params->block_size
    ? CHUNK_IMAGE_BYTES / ep->params->block_size : 1;
  ss->nchunks = (ep->nblocks + ss->chunk_blocks - 1) / ss->chunk_blocks;
  return endpoint_connect_rest (ep, ep->view_name) == -1 ? -1 : 1;
}

static void
ss_close (struct endpoint *ep)
{
  if (ep->params)
    blk_params_free (&ep->own_params);
  free (ep->priv);
}

/* Blocks of a chunk, and where their digests are in the view. */
static void
chunk_blocks (const struct endpoint *ep, uint64_t chunk, uint64_t *first,
              uint64_t *count)
{
  const struct server_side *ss = ep->priv;

  *first = chunk * ss->chunk_blocks;
  *count = ep->nblocks - *first < ss->chunk_blocks
    ? ep->nblocks - *first : ss->chunk_blocks;
}

static int
request_done (void *opaque, int *error)
{
  struct request *r = opaque;
  struct endpoint *ep = r->ep;
  const uint64_t start = r->first * ep->params->block_size;
  const uint64_t end = (r->first + r->count) * ep->params->block_size;

  if (*error)
    endpoint_fail (ep, "server failed to hash image bytes from %" PRIu64
                   ": %s", start, strerror (*error));
  else
    atomic_fetch_add (&ep->progress.done,
                      (end < ep->size ? end : ep->size) - start);
  r->c->in_flight--;
  return 1;
}

static int
ss_refill (struct endpoint *ep, unsigned i)
{
  struct server_side *ss = ep->priv;
  struct conn *c = &ep->conns[i];
  const uint64_t chunk = atomic_fetch_add (&ss->next_chunk, 1);
  uint64_t first, count, offset, len;
  struct request *r;
  int64_t cookie;

  if (chunk >= ss->nchunks)
    return 0;
  chunk_blocks (ep, chunk, &first, &count);
  offset = BLK_VIEW_DIGESTS_OFFSET + first * ep->params->digest.len;
  len = count * ep->params->digest.len;
  r = request_new (c, first, count, ss->use_cache ? 0 : len);
  if (r == NULL)
    return -1;
  nbd_completion_callback cb = {
    .callback = request_done, .user_data = r, .free = request_free
  };
  cookie = ss->use_cache
    ? nbd_aio_cache (c->h, len, offset, cb, 0)
    : nbd_aio_pread (c->h, r->buf, len, offset, cb, 0);
  if (cookie == -1) {
    endpoint_fail (ep, "%s", nbd_get_error ());
    return -1;
  }
  c->in_flight++;
  return 1;
}

static int
ss_checksum (struct endpoint *ep, uint8_t *root)
{
  if (endpoint_run (ep) == -1)
    return -1;
  if (nbd_pread (ep->conns[0].h, root, ep->params->digest.len,
                 BLK_VIEW_ROOT_OFFSET, 0) == -1) {
    error_at (ep->name, "reading the checksum: %s", nbd_get_error ());
    return -1;
  }
  return 0;
}

/* Only digests cross the network, in pieces of at most 1 MiB. */
static int
ss_digests (struct endpoint *ep, uint64_t first, uint64_t count,
            uint8_t *out)
{
  const uint64_t per_read = (1 << 20) / ep->params->digest.len;

  for (uint64_t b = first; b < first + count; b += per_read) {
    const uint64_t n = first + count - b < per_read ? first + count - b
      : per_read;
    if (stop_signal ())
      return -1;
    if (nbd_pread (ep->conns[0].h, out + (b - first) * ep->params->digest.len,
                   n * ep->params->digest.len,
                   BLK_VIEW_DIGESTS_OFFSET + b * ep->params->digest.len,
                   0) == -1) {
      error_at (ep->name, "reading block digests: %s", nbd_get_error ());
      return -1;
    }
  }
  return 0;
}

const struct method_ops server_side_ops = {
  .name = "server-side",
  .open = ss_open,
  .close = ss_close,
  .checksum = ss_checksum,
  .digests = ss_digests,
  .refill = ss_refill,
};
