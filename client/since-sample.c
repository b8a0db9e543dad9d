/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --since: the sample (see since-sample.h).  It is drawn as the
 * root is folded (one thread, in block order: the draw depends on the
 * seed alone, not on which connection took which segment).  The last
 * clean data block is always in it: a shrink and regrowth changes
 * that block, or changes no clean block at all (the blocks after it
 * were zeros and are zeros again), however the regrown blocks read.
 * The others are a reservoir: the i-th block offered replaces a random
 * one of the SAMPLE_MAX - 1 with probability (SAMPLE_MAX - 1)/i.  Then
 * their digests are read in block order from the view of nbdsum's
 * private filter, which reads and hashes each block (or, on a server
 * that admits one client at a time, the blocks are read and hashed
 * here, in the main thread as they come).  If a fraction f of the blocks offered changed behind the
 * bitmap's back, a run finds one with probability at least
 * 1-(1-f)^(SAMPLE_MAX - 1), as nbdsum(1) says, and surely when
 * SAMPLE_MAX or fewer were offered.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "digest.h"
#include "header.h"
#include "helpers.h"
#include "messages.h"
#include "minmax.h"
#include "signals.h"
#include "since-sample.h"
#include "source.h"

/* A read of a block's digest (or of the block), in flight. */
struct sample_read {
  struct since_sample *s;
  struct sample_block *b;
  uint32_t len;                 /* the block's */
  uint8_t buf[];                /* the block, to hash here */
};

void
since_sample_init (struct since_sample *s)
{
  memset (s, 0, sizeof *s);
  if (getrandom (&s->rng, sizeof s->rng, 0) != sizeof s->rng)
    s->rng = (uint64_t) time (NULL) ^ ((uint64_t) getpid () << 32);
}

/* Draw: the i-th block (from 0) replaces a random one of the
 * reservoir's SAMPLE_MAX - 1 with probability (SAMPLE_MAX - 1)/(i+1).
 */
static void
draw (struct since_sample *s, const struct sample_block *b, uint64_t i)
{
  uint64_t slot = i;

  if (slot >= SAMPLE_MAX - 1)
    slot = splitmix64 (&s->rng) % (i + 1);
  if (slot < SAMPLE_MAX - 1)
    s->blocks[slot] = *b;
}

void
since_sample_offer (struct since_sample *s, uint64_t b, const uint8_t *old,
                    size_t len)
{
  /* The one before is not the last: into the draw. */
  if (s->seen > 0)
    draw (s, &s->last, s->seen - 1);
  s->last.block = b;
  memcpy (s->last.old, old, len);
  s->seen++;
}

static int
compare_blocks (const void *a, const void *b)
{
  const struct sample_block *x = a, *y = b;

  return x->block < y->block ? -1 : x->block > y->block;
}

/* A digest of the sample read, or a block to hash (in the main
 * thread, in source_poll).
 */
static int
read_done (void *opaque, int *error)
{
  struct sample_read *r = opaque;
  struct since_sample *s = r->s;
  bool zero;

  s->in_flight--;
  if (*error == 0 && s->ctx &&
      blk_hash_block (s->params, s->ctx, r->buf, r->len, r->b->now,
                      &zero) == -1)
    *error = EIO;
  if (*error) {
    if (s->read_error == 0) {
      s->read_error = *error;
      s->error_block = r->b->block;
    }
    return 1;
  }
  /* Read, for bytes-read; the bar counted it as skipped. */
  progress_add (s->progress, 0, r->len);
  return 1;
}

int
since_sample_check (struct since_sample *s, struct endpoint *ep,
                    bool view, const char *name, bool *differs,
                    uint64_t *block)
{
  const struct blk_params *p = ep->params;
  struct nbd_handle *h = ep->conns[0].h;
  size_t next = 0;

  *differs = false;
  if (s->seen == 0)
    return 0;
  /* The drawn ones, then the last. */
  s->n = MIN (s->seen - 1, (uint64_t) SAMPLE_MAX - 1);
  s->blocks[s->n++] = s->last;
  qsort (s->blocks, s->n, sizeof *s->blocks, compare_blocks);
  s->progress = &ep->progress;
  s->params = p;
  if (!view && (s->ctx = blk_ctx_new ()) == NULL) {
    error_at (name, "out of memory");
    return -1;
  }
  for (;;) {
    int timeout;

    while (next < s->n && s->in_flight < ep->requests &&
           s->read_error == 0 && !stop_signal ()) {
      struct sample_block *b = &s->blocks[next];
      const uint32_t len = blk_block_len (ep->size, p->block_size, b->block);
      struct sample_read *r = malloc (sizeof *r + (view ? 0 : len));

      if (r == NULL) {
        error_at (name, "out of memory");
        return -1;
      }
      *r = (struct sample_read) { s, b, len };
      /* libnbd frees r, also when the request cannot be issued. */
      if (nbd_aio_pread (h, view ? b->now : r->buf,
                         view ? p->digest.len : len,
                         view ? BLK_VIEW_DIGESTS_OFFSET +
                         b->block * p->digest.len : b->block * p->block_size,
                         (nbd_completion_callback) {
                           .callback = read_done, .user_data = r,
                           .free = free }, 0) == -1) {
        error_at (name, "reading the sample: %s", nbd_get_error ());
        return -1;
      }
      s->in_flight++;
      next++;
    }
    if (s->in_flight == 0)
      break;
    if ((timeout = stop_poll_timeout ()) == 0)
      break;
    if (source_poll (h, timeout) == -1) {
      error_at (name, "reading the sample: %s", source_error ());
      return -1;
    }
  }
  if (stop_signal ())
    return -1;
  if (s->read_error) {
    error_at (name, "reading the sample: %s at offset %" PRIu64 ": %s",
              view ? "the digest of the block" : "read",
              s->error_block * p->block_size, strerror (s->read_error));
    return -1;
  }
  for (size_t k = 0; k < s->n; k++)
    if (memcmp (s->blocks[k].now, s->blocks[k].old, p->digest.len) != 0) {
      *differs = true;
      *block = s->blocks[k].block;
      break;
    }
  return 0;
}

void
since_sample_free (struct since_sample *s)
{
  blk_ctx_free (s->ctx);
  s->ctx = NULL;
}
