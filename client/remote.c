/* nbdsum: checksums computed by the server through the blkhash view.
 *
 * The block digest range is cut into chunks of about 64 MiB of image.
 * Each connection has a thread with its own poll loop that keeps up to
 * R CACHE requests in flight, taking chunks in order from a shared
 * counter: the server hashes them on as many threads as it has cores
 * and folds the completed prefix into the root as it goes.  Only then
 * is the root read, so almost nothing crosses the network.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "header.h"
#include "nbdsum.h"
#include "util.h"

#define CHUNK_IMAGE_BYTES (UINT64_C (64) * 1024 * 1024)

struct job {
  const char *name;             /* for messages */
  struct blk_header hdr;
  bool use_cache;               /* else drive the server with reads */
  unsigned requests;
  uint64_t chunk_blocks, nchunks;
  atomic_uint_fast64_t next_chunk;
  atomic_bool failed;
  pthread_mutex_t lock;         /* first_error */
  char *first_error;
};

struct conn {
  struct job *job;
  struct nbd_handle *h;
  unsigned in_flight;
  pthread_t thread;
};

struct request {
  struct conn *c;
  uint64_t chunk;
  void *buf;                    /* reads only */
};

static void
job_fail (struct job *job, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static void
job_fail (struct job *job, const char *fmt, ...)
{
  va_list ap;
  char *msg = NULL;

  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) == -1)
    msg = NULL;
  va_end (ap);
  pthread_mutex_lock (&job->lock);
  if (job->first_error == NULL)
    job->first_error = msg;
  else
    free (msg);
  pthread_mutex_unlock (&job->lock);
  atomic_store (&job->failed, true);
}

/* Byte range of a chunk in the view. */
static void
chunk_range (const struct job *job, uint64_t chunk, uint64_t *offset,
             uint64_t *count)
{
  const uint64_t first = chunk * job->chunk_blocks;
  const uint64_t n = job->hdr.block_count - first < job->chunk_blocks
    ? job->hdr.block_count - first : job->chunk_blocks;

  *offset = BLK_VIEW_DIGESTS_OFFSET + first * job->hdr.digest_len;
  *count = n * job->hdr.digest_len;
}

static int
request_done (void *opaque, int *error)
{
  struct request *r = opaque;
  struct job *job = r->c->job;

  if (*error) {
    const uint64_t first = r->chunk * job->chunk_blocks;
    job_fail (job, "server failed to hash image bytes from %" PRIu64
              ": %s", first * job->hdr.block_size, strerror (*error));
  }
  r->c->in_flight--;
  free (r->buf);
  free (r);
  return 1;
}

static int
start_request (struct conn *c, uint64_t chunk)
{
  struct job *job = c->job;
  struct request *r = calloc (1, sizeof *r);
  uint64_t offset, count;
  int64_t cookie;

  if (r == NULL) {
    job_fail (job, "out of memory");
    return -1;
  }
  r->c = c;
  r->chunk = chunk;
  chunk_range (job, chunk, &offset, &count);
  if (job->use_cache)
    cookie = nbd_aio_cache (c->h, count, offset,
                            (nbd_completion_callback) {
                              .callback = request_done, .user_data = r },
                            0);
  else {
    r->buf = malloc (count);
    if (r->buf == NULL) {
      free (r);
      job_fail (job, "out of memory");
      return -1;
    }
    cookie = nbd_aio_pread (c->h, r->buf, count, offset,
                            (nbd_completion_callback) {
                              .callback = request_done, .user_data = r },
                            0);
  }
  if (cookie == -1) {
    job_fail (job, "%s", nbd_get_error ());
    free (r->buf);
    free (r);
    return -1;
  }
  c->in_flight++;
  return 0;
}

static void *
conn_worker (void *opaque)
{
  struct conn *c = opaque;
  struct job *job = c->job;

  for (;;) {
    while (!atomic_load (&job->failed) && c->in_flight < job->requests) {
      const uint64_t chunk = atomic_fetch_add (&job->next_chunk, 1);
      if (chunk >= job->nchunks || start_request (c, chunk) == -1)
        break;
    }
    if (c->in_flight == 0)
      break;
    if (nbd_poll (c->h, -1) == -1) {
      job_fail (job, "%s", nbd_get_error ());
      break;
    }
  }
  return NULL;
}

/* Connect to uri and open the view of its export.  The first call
 * works out the view name; later calls reuse it.
 */
static struct nbd_handle *
open_view (const char *name, const char *uri, const struct options *opts,
           char **view_name)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL) {
    error_at (name, "%s", nbd_get_error ());
    return NULL;
  }
  if (nbd_set_opt_mode (h, true) == -1 ||
      nbd_set_uri_allow_local_file (h, true) == -1 ||
      nbd_connect_uri (h, uri) == -1) {
    error_at (name, "%s", nbd_get_error ());
    goto err;
  }
  if (*view_name == NULL) {
    char *base = nbd_get_export_name (h);
    if (base == NULL) {
      error_at (name, "%s", nbd_get_error ());
      goto err;
    }
    *view_name = blk_view_name_build (base, opts->digest, opts->block_size);
    free (base);
    if (*view_name == NULL) {
      error_at (name, "out of memory");
      goto err;
    }
  }
  if (nbd_set_export_name (h, *view_name) == -1 || nbd_opt_go (h) == -1) {
    error_at (name, "cannot open the blkhash view '%s': %s\n"
              "(is the server running nbdkit --filter=blkhash?)",
              *view_name, nbd_get_error ());
    goto err;
  }
  return h;

 err:
  nbd_close (h);
  return NULL;
}

/* Read and check the header against what was asked. */
static int
read_header (const char *name, struct nbd_handle *h,
             const struct options *opts, struct blk_header *hdr)
{
  uint8_t buf[BLK_VIEW_HEADER_SIZE];
  int64_t view_size = nbd_get_size (h);
  struct blk_digest d;
  const char *msg;
  size_t len;

  if (view_size == -1) {
    error_at (name, "%s", nbd_get_error ());
    return -1;
  }
  if (view_size < BLK_VIEW_DIGESTS_OFFSET) {
    error_at (name, "the export is too small to be a blkhash view "
              "(is the server running nbdkit --filter=blkhash?)");
    return -1;
  }
  if (nbd_pread (h, buf, sizeof buf, 0, 0) == -1) {
    error_at (name, "reading the view header: %s", nbd_get_error ());
    return -1;
  }
  if (!blk_header_has_magic (buf, sizeof buf)) {
    error_at (name, "the export has no blkhash view "
              "(is the server running nbdkit --filter=blkhash?)");
    return -1;
  }
  if ((msg = blk_header_decode (buf, sizeof buf, hdr)) != NULL) {
    error_at (name, "invalid blkhash view header: %s", msg);
    return -1;
  }
  /* The checksum printed must be what the header says it is. */
  if ((msg = blk_digest_init (&d, hdr->digest_name)) != NULL) {
    error_at (name, "invalid blkhash view header: digest '%s': %s",
              hdr->digest_name, msg);
    return -1;
  }
  len = d.len;
  blk_digest_free (&d);
  if (len != hdr->digest_len) {
    error_at (name, "invalid blkhash view header: %s digests are %zu "
              "bytes, not %" PRIu32, hdr->digest_name, len, hdr->digest_len);
    return -1;
  }
  if ((uint64_t) view_size != blk_view_size (hdr)) {
    error_at (name, "invalid blkhash view: its size %" PRIi64 " does not "
              "match the header (%" PRIu64 ")", view_size,
              blk_view_size (hdr));
    return -1;
  }
  if (opts->digest && strcasecmp (opts->digest, hdr->digest_name) != 0) {
    error_at (name, "the server hashed with %s, not %s",
              hdr->digest_name, opts->digest);
    return -1;
  }
  if (opts->block_size && opts->block_size != hdr->block_size) {
    error_at (name, "the server used %" PRIu32 " byte blocks, not %" PRIu64,
              hdr->block_size, opts->block_size);
    return -1;
  }
  return 0;
}

int
remote_checksum (const char *name, const struct options *opts,
                 struct result *res)
{
  struct conn conns[MAX_CONNECTIONS];
  struct job job = {
    .name = name, .requests = opts->requests,
    .lock = PTHREAD_MUTEX_INITIALIZER,
  };
  char *view_name = NULL;
  unsigned nconns = 0, i, want;
  uint8_t root[EVP_MAX_MD_SIZE];
  int ret = -1, r;

  memset (conns, 0, sizeof conns);
  conns[0].h = open_view (name, name, opts, &view_name);
  if (conns[0].h == NULL)
    goto out;
  nconns = 1;
  if (read_header (name, conns[0].h, opts, &job.hdr) == -1)
    goto out;

  want = nbd_can_multi_conn (conns[0].h) == 1 ? opts->connections : 1;
  for (; nconns < want; nconns++) {
    conns[nconns].h = open_view (name, name, opts, &view_name);
    if (conns[nconns].h == NULL)
      goto out;
  }

  job.use_cache = nbd_can_cache (conns[0].h) == 1;
  job.chunk_blocks = CHUNK_IMAGE_BYTES / job.hdr.block_size
    ? CHUNK_IMAGE_BYTES / job.hdr.block_size : 1;
  job.nchunks = (job.hdr.block_count + job.chunk_blocks - 1)
    / job.chunk_blocks;

  for (i = 0; i < nconns; i++) {
    conns[i].job = &job;
    if ((r = pthread_create (&conns[i].thread, NULL, conn_worker,
                             &conns[i])) != 0) {
      errno = r;
      job_fail (&job, "pthread_create: %s", strerror (r));
      break;
    }
  }
  for (unsigned j = 0; j < i; j++)
    pthread_join (conns[j].thread, NULL);
  if (atomic_load (&job.failed)) {
    error_at (name, "%s", job.first_error ? job.first_error : "failed");
    goto out;
  }

  if (nbd_pread (conns[0].h, root, job.hdr.digest_len,
                 BLK_VIEW_ROOT_OFFSET, 0) == -1) {
    error_at (name, "reading the checksum: %s", nbd_get_error ());
    goto out;
  }
  blk_hex (root, job.hdr.digest_len, res->hex);
  snprintf (res->digest, sizeof res->digest, "%s", job.hdr.digest_name);
  res->block_size = job.hdr.block_size;
  res->size = job.hdr.image_size;
  res->connections = nconns;
  ret = 0;

 out:
  for (i = 0; i < nconns; i++) {
    if (ret == 0)
      nbd_shutdown (conns[i].h, 0);
    nbd_close (conns[i].h);
  }
  free (view_name);
  free (job.first_error);
  pthread_mutex_destroy (&job.lock);
  return ret;
}
