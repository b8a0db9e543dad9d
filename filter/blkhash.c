/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: server-side blkhash checksums.  This file
 * owns the nbdkit callbacks of connections and requests, which
 * dispatch between data exports and views (config.c: the parameters).
 *
 * Every export NAME is passed through unchanged and gets a read-only
 * companion NAME@blkhash[:DIGEST[/BLOCKSIZE]] serving its block
 * digests and checksum (view.c), computed next to the storage
 * (hasher.c) and shared with what data clients read and write
 * (passive.c) through per-export block tables (exports.c); blkhash-file
 * is results.c's, the upload gate (blkhash-expect) expect.c's.
 * NAME@digest[:DIGEST] serves a plain digest of its content (plain.c),
 * NAME@bmap its mapped ranges and their sha256 (bmap.c).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "cleanup.h"
#include "filter.h"
#include "minmax.h"
#include "viewname.h"

struct handle {
  char *name;                           /* export name (view: its base) */
  const struct blk_params *params;      /* view: its digest and block size */
  struct blkhash_export *e;             /* from prepare to finalize */
  uint64_t since;                       /* view: its session clock */
  struct blkhash_table *table;          /* data: fed by traffic, or NULL;
                                           view: from its first request */
  struct blkhash_table *gtable;         /* data: the gate's, when it has
                                           other parameters, or NULL */
  bool is_view;                         /* NAME@blkhash..., NAME@digest... */
  struct blkhash_view *view;            /* view: from prepare */
  char *plain_digest;                   /* NAME@digest: its digest */
  struct blkhash_plain_view *plain;     /* NAME@digest: from prepare */
  bool is_bmap;                         /* NAME@bmap */
  struct blkhash_bmap_view *bmap;       /* NAME@bmap: from prepare */
  char *nonce;                          /* view: its name's, echoed */
  struct blk_range range;               /* view: its part (length 0: all) */
  struct blkhash_table *stable;         /* range view: the export's, whose
                                           blocks are its own (range.c) */
  uint64_t shared;                      /* range view: how many */
  pthread_mutex_t lock;                 /* view: getting the table */
  bool joined;                          /* data: counted by the gate */
};

static int
blkhash_list_exports (nbdkit_next_list_exports *next, nbdkit_backend *nxdata,
                      int readonly, int is_tls,
                      struct nbdkit_exports *exports)
{
  size_t i, n;
  struct nbdkit_exports *data = nbdkit_exports_new ();
  int ret = -1;

  if (data == NULL || next (nxdata, readonly, data) == -1)
    goto out;

  /* A plugin that only has a default export lists nothing here. */
  n = nbdkit_exports_count (data);
  if (n == 0) {
    ret = nbdkit_add_export (exports, BLK_VIEW_MARKER,
                             "blkhash view of the default export");
    goto out;
  }
  for (i = 0; i < n; i++) {
    const struct nbdkit_export ex = nbdkit_get_export (data, i);
    struct blk_view_name vn;
    bool unreachable;
    char *name, *desc = NULL;
    int r;

    /* A name that is a view name means a view, of another export:
     * neither it nor a view of it can be reached.
     */
    if (blk_view_name_parse (ex.name, &vn, &unreachable) != NULL)
      unreachable = true;
    blk_view_name_free (&vn);
    if (unreachable) {
      blkhash_debug ("blkhash: export '%s' is not listed: its name is a "
                     "view name", ex.name);
      continue;
    }
    /* With blkhash-views-only the plugin's exports are not listed. */
    if (!blkhash_views_only &&
        nbdkit_add_export (exports, ex.name, ex.description) == -1)
      goto out;

    name = blk_view_name_build (ex.name, NULL, 0, NULL);
    if (name == NULL ||
        asprintf (&desc, "blkhash view of %s",
                  ex.name[0] ? ex.name : "the default export") == -1) {
      blkhash_error ("blkhash: out of memory");
      free (name);
      goto out;
    }
    r = nbdkit_add_export (exports, name, desc);
    free (name);
    free (desc);
    if (r == -1)
      goto out;
  }
  ret = 0;
 out:
  if (data)
    nbdkit_exports_free (data);
  return ret;
}

static void *
blkhash_open (nbdkit_next_open *next, nbdkit_context *context,
              int readonly, const char *exportname, int is_tls)
{
  struct blk_view_name vn;
  const char *msg;
  struct handle *h;
  bool view;

  h = calloc (1, sizeof *h);
  if (h == NULL) {
    blkhash_error ("calloc: %m");
    return NULL;
  }
  pthread_mutex_init (&h->lock, NULL);

  if ((msg = blk_view_name_parse (exportname, &vn, &view)) != NULL) {
    blkhash_error ("blkhash: export '%s': %s", exportname, msg);
    goto err;
  }
  if (view) {
    h->nonce = vn.nonce;
    vn.nonce = NULL;
    h->range = vn.range;
    /* A short range's digest tells its bytes (one byte: 256 guesses):
     * a server that serves no data serves no part of it either.
     */
    if (blkhash_views_only && vn.range.length) {
      blkhash_error ("blkhash: export '%s': a view of part of an image is "
                     "refused with blkhash-views-only=true: the digest of "
                     "a short range would tell its bytes", exportname);
      blk_view_name_free (&vn);
      goto err;
    }
  }
  if (view && vn.bmap) {
    h->name = vn.base;
    vn.base = NULL;
    blk_view_name_free (&vn);
    h->is_view = h->is_bmap = true;
    if (next (context, 1, h->name) == -1)
      goto err;
  }
  else if (view && vn.plain) {
    h->name = vn.base;
    h->plain_digest = vn.digest ? vn.digest
      : strdup (BLK_PLAIN_DEFAULT_DIGEST);
    vn.base = vn.digest = NULL;
    if (h->plain_digest == NULL) {
      blkhash_error ("strdup: %m");
      goto err;
    }
    h->is_view = true;
    if (next (context, 1, h->name) == -1)
      goto err;
  }
  else if (view) {
    h->name = vn.base;
    vn.base = NULL;
    h->params = blkhash_params_get (exportname,
                                    vn.digest ? vn.digest
                                    : blkhash_default_params->digest.name,
                                    vn.block_size ? vn.block_size
                                    : blkhash_default_params->block_size);
    blk_view_name_free (&vn);
    if (h->params == NULL)
      goto err;
    h->is_view = true;
    if (next (context, 1, h->name) == -1)
      goto err;
  }
  else if (blkhash_views_only) {
    blkhash_error ("blkhash: export '%s': this server serves only its "
                   "views (blkhash-views-only=true): ask for '%s"
                   BLK_VIEW_MARKER "' or '%s" BLK_PLAIN_MARKER ":sha256'",
                   exportname, exportname, exportname);
    goto err;
  }
  else {
    h->name = strdup (exportname);
    if (h->name == NULL) {
      blkhash_error ("strdup: %m");
      goto err;
    }
    if (next (context, readonly, exportname) == -1)
      goto err;
  }
  return h;

 err:
  pthread_mutex_destroy (&h->lock);
  free (h->plain_digest);
  free (h->nonce);
  free (h->name);
  free (h);
  return NULL;
}

/* The handle leaves its export; the last one out ends the session.
 * next is NULL for a handle that served nothing: one nbdkit closes
 * without finalizing it (the client went while connecting), or whose
 * prepare failed.  It may still be the last one out.
 */
static void
blkhash_leave (nbdkit_next *next, struct handle *h)
{
  bool line_owed = false;
  unsigned users;

  if (h->e == NULL)
    return;
  blkhash_table_put (h->e, h->table);
  blkhash_table_put (h->e, h->gtable);
  blkhash_table_put (h->e, h->stable);
  h->table = h->gtable = h->stable = NULL;
  users = next ? blkhash_export_put (h->e)
    : blkhash_export_abandon (h->e, &line_owed);
  if (users == 0) {
    /* The verdict first: the line depends on it. */
    blkhash_expect_session_end (next, h->e);
    if (blkhash_file && next)
      blkhash_results_session_end (next, h->e);
    else if (blkhash_file && line_owed)
      blkhash_results_session_lost (h->e);
    blkhash_log_stats (h->e);
  }
  /* After its session's end, so that no connection of another size
   * joins a session that is ending.
   */
  if (h->joined)
    blkhash_expect_disconnect (h->e);
  h->joined = false;
  blkhash_export_release (h->e);
  h->e = NULL;
}

static void
blkhash_close (void *handle)
{
  struct handle *h = handle;

  /* nbdkit skips finalize when the handshake fails after prepare. */
  blkhash_leave (NULL, h);
  blkhash_view_free (h->view);
  blkhash_plain_view_free (h->plain);
  blkhash_bmap_view_free (h->bmap);
  pthread_mutex_destroy (&h->lock);
  free (h->plain_digest);
  free (h->nonce);
  free (h->name);
  free (h);
}

static bool
is_view (const struct handle *h)
{
  return h->is_view;
}

static bool
is_plain (const struct handle *h)
{
  return h->plain_digest != NULL;
}

static bool
is_bmap (const struct handle *h)
{
  return h->is_bmap;
}

/* What a view's header says of the server. */
static uint32_t
view_flags (void)
{
  return blkhash_views_only ? BLK_VIEW_FLAG_VIEWS_ONLY : 0;
}

static int
blkhash_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct handle *h = handle;
  int64_t size = next->get_size (next);
  char msg[256];
  int err = 0;

  if (size == -1)
    return -1;
  if (h->range.length && h->range.offset + h->range.length > (uint64_t) size) {
    char r[BLK_RANGE_STR_MAX];
    blkhash_error ("blkhash: export '%s': range=%s ends past its end (%"
                   PRIi64 " bytes)", h->name,
                   blk_format_range (&h->range, r), size);
    return -1;
  }
  /* From here on a range view is of an image of the range's size. */
  const int64_t export_size = size;
  if (h->range.length)
    size = h->range.length;
  /* A view of a huge export would hash for days before it answers. */
  if ((is_plain (h) || is_view (h)) &&
      blkhash_size_over (size, is_plain (h) || is_bmap (h) ? NULL
                         : h->params, msg, sizeof msg)) {
    blkhash_error ("blkhash: export '%s': %s for a %s view: "
                   BLKHASH_MAX_SIZE_LIFTS, h->name, msg,
                   is_bmap (h) ? "bmap" : is_plain (h) ? "plain-digest"
                   : "blkhash");
    return -1;
  }
  h->e = blkhash_export_get (h->name, export_size);
  if (h->e == NULL)
    return -1;
  /* The gate judges one content of one size (an empty one now). */
  if (!is_plain (h) && !is_view (h)) {
    if (blkhash_expect_connect (h->e) == -1) {
      blkhash_leave (NULL, h);
      return -1;
    }
    h->joined = true;
  }

  if (is_plain (h)) {
    h->plain = blkhash_plain_view_new (h->name, h->plain_digest, size,
                                       view_flags (), h->nonce);
    if (h->plain == NULL) {
      blkhash_leave (NULL, h);
      return -1;
    }
  }
  else if (is_bmap (h)) {
    h->bmap = blkhash_bmap_view_new (h->name, size, view_flags (), h->nonce);
    if (h->bmap == NULL) {
      blkhash_leave (NULL, h);
      return -1;
    }
  }
  else if (is_view (h)) {
    /* Its table comes with the first request that needs it, so that
     * running out of memory is that request's ENOMEM.  Its answers
     * cover every change made before it connected.
     */
    h->since = blkhash_cache ? 0 : blkhash_session_tick ();
    h->view = blkhash_view_new (size, h->params, view_flags (), h->nonce);
    if (h->view == NULL) {
      blkhash_leave (NULL, h);  /* served nothing, as if gone */
      return -1;
    }
    if (h->range.length)
      h->shared = blkhash_range_shared_blocks (&h->range,
                                               h->params->block_size,
                                               export_size);
  }
  else if (blkhash_cache || blkhash_file || blkhash_expect_passive ()) {
    /* Passive hashing only saves work later (for blkhash-file at the
     * end of this session, or any later client with blkhash-cache, or
     * blkhash-expect's blkhash value at a flush):
     * without a table the data export is served all the same.
     */
    h->table = blkhash_table_get (h->e, blkhash_default_params,
                                  blkhash_export_since (h->e), &err);
    if (h->table == NULL)
      blkhash_debug ("blkhash: export '%s': serving without passive "
                     "hashing", h->name);
  }
  /* A blkhash value of other parameters: its own table, fed the same
   * way, so that judging an import reads nothing twice.
   */
  if (!is_view (h) && blkhash_expected && !blkhash_expected->plain &&
      blkhash_expected->params != blkhash_default_params) {
    h->gtable = blkhash_table_get (h->e, blkhash_expected->params,
                                   blkhash_export_since (h->e), &err);
    if (h->gtable == NULL)
      blkhash_debug ("blkhash: export '%s': the gate reads what it judges",
                     h->name);
  }
  return 0;
}

/* The view's table in *t, taken by its first request that reaches
 * past the header (*t stays NULL for the header alone).
 */
static int
view_table (struct handle *h, uint32_t count, uint64_t offset,
            struct blk_table **t, int *err)
{
  *t = NULL;
  if (offset + count <= BLK_VIEW_HEADER_SIZE)
    return 0;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&h->lock);
  if (h->table == NULL && h->range.length)
    h->table = blkhash_table_get_range (h->e, h->params, &h->range, h->since,
                                        err);
  else if (h->table == NULL)
    h->table = blkhash_table_get (h->e, h->params, h->since, err);
  if (h->table == NULL)
    return -1;
  /* A block-aligned range's blocks are the export's: reused. */
  if (h->shared && h->stable == NULL) {
    h->stable = blkhash_table_get (h->e, h->params, h->since, err);
    if (h->stable == NULL)
      return -1;
    blkhash_view_set_source (h->view, blkhash_table_blocks (h->stable),
                             h->range.offset / h->params->block_size,
                             h->shared);
  }
  *t = blkhash_table_blocks (h->table);
  return 0;
}

/* The layer a view's hashers read: next, or for a range view its
 * bytes shown at 0 (range.c), in *rn.
 */
static nbdkit_next *
view_next (nbdkit_next *next, const struct handle *h,
           struct blkhash_range_next *rn)
{
  if (h->range.length == 0)
    return next;
  blkhash_range_next_init (rn, next, &h->range);
  return blkhash_range_next (rn);
}

/* A data export's passive table, or NULL. */
static struct blk_table *
data_table (const struct handle *h)
{
  return h->table ? blkhash_table_blocks (h->table) : NULL;
}

/* The gate's table, when it has one of its own, or NULL. */
static struct blk_table *
gate_table (const struct handle *h)
{
  return h->gtable ? blkhash_table_blocks (h->gtable) : NULL;
}

static int
blkhash_finalize (nbdkit_next *next, void *handle)
{
  blkhash_leave (next, handle);
  return 0;
}

static int64_t
blkhash_get_size (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;

  if (is_plain (h))
    return blkhash_plain_view_size (h->plain);
  if (is_bmap (h))
    return blkhash_bmap_view_size (h->bmap);
  return is_view (h) ? blkhash_view_size (h->view) : next->get_size (next);
}

static const char *
blkhash_export_description (nbdkit_next *next, void *handle)
{
  struct handle *h = handle;
  const char *r;
  char *s;

  if (!is_view (h))
    return next->export_description (next);
  if (is_bmap (h)) {
    if (asprintf (&s, "bmap of %s",
                  h->name[0] ? h->name : "the default export") == -1) {
      blkhash_error ("asprintf: %m");
      return NULL;
    }
  }
  else if (is_plain (h)) {
    if (asprintf (&s, "%s of %s", blkhash_plain_view_digest (h->plain),
                  h->name[0] ? h->name : "the default export") == -1) {
      blkhash_error ("asprintf: %m");
      return NULL;
    }
  }
  else if (asprintf (&s, "blkhash view of %s (%s, %" PRIu32 " byte blocks)",
                h->name[0] ? h->name : "the default export",
                h->params->digest.name, h->params->block_size) == -1) {
    blkhash_error ("asprintf: %m");
    return NULL;
  }
  r = nbdkit_strdup_intern (s);
  free (s);
  return r;
}

static int
blkhash_block_size (nbdkit_next *next, void *handle,
                    uint32_t *minimum, uint32_t *preferred, uint32_t *maximum)
{
  struct handle *h = handle;

  if (!is_view (h))
    return next->block_size (next, minimum, preferred, maximum);
  *minimum = 1;
  *preferred = 4096;
  *maximum = 0xffffffff;
  return 0;
}

/* The view is read-only, has no extents of its own (nbdkit reports it
 * all data), and serves CACHE itself; a blkhash view is the same for
 * every connection (multi-conn), a plain one is each connection's.
 */
static int
blkhash_can_write (nbdkit_next *next, void *handle)
{
  return is_view (handle) ? 0 : next->can_write (next);
}

static int
blkhash_can_flush (nbdkit_next *next, void *handle)
{
  return is_view (handle) ? 0 : next->can_flush (next);
}

static int
blkhash_can_trim (nbdkit_next *next, void *handle)
{
  return is_view (handle) ? 0 : next->can_trim (next);
}

static int
blkhash_can_zero (nbdkit_next *next, void *handle)
{
  return is_view (handle) ? NBDKIT_ZERO_NONE : next->can_zero (next);
}

static int
blkhash_can_fast_zero (nbdkit_next *next, void *handle)
{
  return is_view (handle) ? 0 : next->can_fast_zero (next);
}

static int
blkhash_can_extents (nbdkit_next *next, void *handle)
{
  return is_view (handle) ? 0 : next->can_extents (next);
}

static int
blkhash_can_fua (nbdkit_next *next, void *handle)
{
  return is_view (handle) ? NBDKIT_FUA_NONE : next->can_fua (next);
}

static int
blkhash_can_multi_conn (nbdkit_next *next, void *handle)
{
  if (is_plain (handle) || is_bmap (handle))
    return 0;
  return is_view (handle) ? 1 : next->can_multi_conn (next);
}

static int
blkhash_can_cache (nbdkit_next *next, void *handle)
{
  return is_view (handle) ? NBDKIT_CACHE_NATIVE : next->can_cache (next);
}

static int
blkhash_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  struct blkhash_range_next rn;
  struct blkhash_expect_io io;
  int r;

  if (is_view (h)) {
    struct blk_table *t;
    if (is_plain (h))
      r = blkhash_plain_view_pread (view_next (next, h, &rn), h->plain, buf,
                                    count, offset, err);
    else if (is_bmap (h))
      r = blkhash_bmap_view_pread (next, h->bmap, buf, count, offset, err);
    else
      r = view_table (h, count, offset, &t, err) == -1 ? -1
        : blkhash_view_pread (view_next (next, h, &rn), h->view, t, buf,
                              count, offset, err);
    return blkhash_view_failed (r, err);
  }
  /* The gate judges an import at the read that completes it. */
  if (blkhash_expect_read_begin (h->e, &io, true, err) == -1)
    return -1;
  if (data_table (h) || gate_table (h))
    r = blkhash_passive_pread (next, h->e, data_table (h), gate_table (h),
                               buf, count, offset, flags, err);
  else
    r = next->pread (next, buf, count, offset, flags, err);
  if (blkhash_expect_read_end (next, h->e, &io, r == 0 ? buf : NULL, count,
                               offset, err) == -1)
    return -1;
  return r;
}

/* nbdkit answers for a view itself: it has no extents and no flush. */
static int
blkhash_extents (nbdkit_next *next, void *handle, uint32_t count,
                 uint64_t offset, uint32_t flags,
                 struct nbdkit_extents *extents, int *err)
{
  struct handle *h = handle;
  struct blkhash_expect_io io;
  int r;

  if (is_view (h))
    return nbdkit_add_extent (extents, offset, count, 0);
  if (blkhash_expect_read_begin (h->e, &io, false, err) == -1)
    return -1;
  r = blkhash_passive_extents (next, h->e, data_table (h), gate_table (h),
                               count, offset, flags, extents, err);
  if (blkhash_expect_extents_end (next, h->e, &io, r == 0 ? extents : NULL,
                                  count, offset, flags, err) == -1)
    return -1;
  return r;
}

/* A writer waits for its flush before it disconnects, and the
 * disconnect has no reply: the flush is when its blkhash-file line
 * must be there, and the verdict on an upload (blkhash-expect): the
 * line depends on the verdict.
 */
static int
blkhash_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  struct handle *h = handle;
  int r;

  if (is_view (h))
    return 0;
  if (next->flush (next, flags, err) == -1)
    return -1;
  r = blkhash_expect_flush (next, h->e, err);
  blkhash_results_flushed (next, h->e, data_table (h));
  return r;
}

/* nbdkit refuses writes to a read-only export itself; in case. */
static int
view_is_read_only (int *err)
{
  blkhash_error ("blkhash: the view is read-only");
  *err = EROFS;
  return -1;
}

static int
blkhash_pwrite (nbdkit_next *next, void *handle, const void *buf,
                uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  int r;

  if (is_view (h))
    return view_is_read_only (err);
  if (blkhash_expect_write_begin (h->e, err) == -1)
    return -1;
  r = blkhash_passive_pwrite (next, h->e, data_table (h), buf, count,
                              offset, flags, err);
  blkhash_expect_write_end (h->e, offset, count, r == 0);
  if (r == 0)
    blkhash_expect_follow (next, h->e);
  return r;
}

static int
blkhash_zero (nbdkit_next *next, void *handle, uint32_t count,
              uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  int r;

  if (is_view (h))
    return view_is_read_only (err);
  if (blkhash_expect_write_begin (h->e, err) == -1)
    return -1;
  r = blkhash_passive_zero (next, h->e, data_table (h), count, offset,
                            flags, err);
  blkhash_expect_write_end (h->e, offset, count, r == 0);
  if (r == 0)
    blkhash_expect_follow (next, h->e);
  return r;
}

static int
blkhash_trim (nbdkit_next *next, void *handle, uint32_t count,
              uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  int r;

  if (is_view (h))
    return view_is_read_only (err);
  if (blkhash_expect_write_begin (h->e, err) == -1)
    return -1;
  r = blkhash_passive_trim (next, h->e, count, offset, flags, err);
  blkhash_expect_write_end (h->e, offset, count, r == 0);
  if (r == 0)
    blkhash_expect_follow (next, h->e);
  return r;
}

static int
blkhash_cache_request (nbdkit_next *next, void *handle, uint32_t count,
                       uint64_t offset, uint32_t flags, int *err)
{
  struct handle *h = handle;
  struct blkhash_range_next rn;
  int r;

  if (is_view (h)) {
    struct blk_table *t;
    if (is_plain (h))
      r = blkhash_plain_view_cache (view_next (next, h, &rn), h->plain,
                                    count, offset, err);
    else if (is_bmap (h))
      r = blkhash_bmap_view_cache (next, h->bmap, count, offset, err);
    else
      r = view_table (h, count, offset, &t, err) == -1 ? -1
        : blkhash_view_cache (view_next (next, h, &rn), h->view, t, count,
                              offset, err);
    return blkhash_view_failed (r, err);
  }
  return next->cache (next, count, offset, flags, err);
}

/* No .thread_model: without one a filter takes parallel requests,
 * which this one does, and the callback's type differs between nbdkit
 * releases (1.48 passes the next layer's model).
 */
static struct nbdkit_filter filter = {
  .name               = "blkhash",
  /* nbdkit prints its own version for every filter (and refuses a
   * filter built for another), so ours goes where --help shows it.
   */
  .longname           = "nbdkit blkhash filter " PACKAGE_VERSION,
  .description        = "Serve blkhash checksums of every export",
  .load               = blkhash_load,
  .unload             = blkhash_unload,
  .config             = blkhash_config,
  .config_complete    = blkhash_config_complete,
  .config_help        = blkhash_config_help,
#ifdef HAVE_STRUCT_NBDKIT_FILTER_DUMP_PLUGIN
  .dump_plugin        = blkhash_dump_plugin,
#endif
  .get_ready          = blkhash_get_ready,
  .cleanup            = blkhash_cleanup,
  .list_exports       = blkhash_list_exports,
  .open               = blkhash_open,
  .close              = blkhash_close,
  .prepare            = blkhash_prepare,
  .finalize           = blkhash_finalize,
  .get_size           = blkhash_get_size,
  .export_description = blkhash_export_description,
  .block_size         = blkhash_block_size,
  .can_write          = blkhash_can_write,
  .can_flush          = blkhash_can_flush,
  .can_trim           = blkhash_can_trim,
  .can_zero           = blkhash_can_zero,
  .can_fast_zero      = blkhash_can_fast_zero,
  .can_extents        = blkhash_can_extents,
  .can_fua            = blkhash_can_fua,
  .can_multi_conn     = blkhash_can_multi_conn,
  .can_cache          = blkhash_can_cache,
  .pread              = blkhash_pread,
  .pwrite             = blkhash_pwrite,
  .zero               = blkhash_zero,
  .trim               = blkhash_trim,
  .flush              = blkhash_flush,
  .extents            = blkhash_extents,
  .cache              = blkhash_cache_request,
};

NBDKIT_REGISTER_FILTER(filter)
