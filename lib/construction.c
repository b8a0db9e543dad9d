/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: the blkhash construction. */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blkhash.h"
#include "minmax.h"
#include "zero.h"

static int hash_zeros (const struct blk_digest *d, struct blk_ctx *ctx,
                       size_t len, uint8_t *out);
static int update_zeros (struct blk_ctx *ctx, uint64_t n);

const char *
blk_check_block_size (uint64_t block_size)
{
  if (block_size < BLK_MIN_BLOCK_SIZE || block_size > BLK_MAX_BLOCK_SIZE ||
      block_size % BLK_MIN_BLOCK_SIZE != 0)
    return BLK_BLOCK_SIZE_RULE;
  return NULL;
}

const char *
blk_params_init (struct blk_params *p, const char *digest,
                 uint64_t block_size)
{
  const char *msg;
  struct blk_ctx *ctx;
  int r;

  memset (p, 0, sizeof *p);
  if ((msg = blk_check_block_size (block_size)) != NULL)
    return msg;
  if ((msg = blk_digest_init (&p->digest, digest)) != NULL)
    return msg;
  p->block_size = block_size;

  ctx = blk_ctx_new ();
  if (ctx == NULL) {
    blk_digest_free (&p->digest);
    return "out of memory";
  }
  r = hash_zeros (&p->digest, ctx, block_size, p->zero_digest);
  blk_ctx_free (ctx);
  if (r == -1) {
    blk_digest_free (&p->digest);
    return "cannot compute the zero block digest";
  }
  p->zero_run_count = BLK_ZERO_RUN_BYTES / p->digest.len;
  p->zero_run = malloc (p->zero_run_count * p->digest.len);
  if (p->zero_run == NULL) {
    blk_digest_free (&p->digest);
    return "out of memory";
  }
  for (size_t i = 0; i < p->zero_run_count; i++)
    memcpy (p->zero_run + i * p->digest.len, p->zero_digest, p->digest.len);
  return NULL;
}

void
blk_params_free (struct blk_params *p)
{
  blk_digest_free (&p->digest);
  free (p->zero_run);
  p->zero_run = NULL;
}

static int
hash_zeros (const struct blk_digest *d, struct blk_ctx *ctx, size_t len,
            uint8_t *out)
{
  if (blk_ctx_init (ctx, d) == -1 || update_zeros (ctx, len) == -1)
    return -1;
  return blk_ctx_final (ctx, out);
}

int
blk_zero_block_digest (const struct blk_params *p, struct blk_ctx *ctx,
                       size_t len, uint8_t *out)
{
  if (len == p->block_size) {
    memcpy (out, p->zero_digest, p->digest.len);
    return 0;
  }
  return hash_zeros (&p->digest, ctx, len, out);
}

void
blk_block_begin (struct blk_block_hasher *bh, const struct blk_params *p,
                 struct blk_ctx *ctx)
{
  bh->p = p;
  bh->ctx = ctx;
  bh->len = 0;
  bh->pending_zero = 0;
  bh->started = false;
}

/* Feed n zero bytes to the digest in progress. */
static int
update_zeros (struct blk_ctx *ctx, uint64_t n)
{
  static const uint8_t zeros[64 * 1024];

  while (n > 0) {
    size_t k = MIN (n, (uint64_t) sizeof zeros);
    if (blk_ctx_update (ctx, zeros, k) == -1)
      return -1;
    n -= k;
  }
  return 0;
}

int
blk_block_update (struct blk_block_hasher *bh, const void *buf, size_t len)
{
  bh->len += len;
  if (!bh->started) {
    if (blk_is_zero (buf, len)) {
      bh->pending_zero += len;
      return 0;
    }
    if (blk_ctx_init (bh->ctx, &bh->p->digest) == -1 ||
        update_zeros (bh->ctx, bh->pending_zero) == -1)
      return -1;
    bh->started = true;
  }
  return blk_ctx_update (bh->ctx, buf, len);
}

int
blk_block_final (struct blk_block_hasher *bh, uint8_t *out, bool *zero)
{
  *zero = !bh->started;
  if (*zero)
    return blk_zero_block_digest (bh->p, bh->ctx, bh->len, out);
  return blk_ctx_final (bh->ctx, out);
}

int
blk_hash_block (const struct blk_params *p, struct blk_ctx *ctx,
                const void *buf, size_t len, uint8_t *out, bool *zero)
{
  struct blk_block_hasher bh;

  blk_block_begin (&bh, p, ctx);
  if (blk_block_update (&bh, buf, len) == -1)
    return -1;
  return blk_block_final (&bh, out, zero);
}

int
blk_root_init (struct blk_root *r, const struct blk_params *p)
{
  r->p = p;
  r->ctx = blk_ctx_new ();
  if (r->ctx == NULL)
    return -1;
  if (blk_root_reset (r) == -1) {
    blk_root_free (r);
    return -1;
  }
  return 0;
}

int
blk_root_reset (struct blk_root *r)
{
  return blk_ctx_init (r->ctx, &r->p->digest);
}

int
blk_root_add (struct blk_root *r, const uint8_t *digests, size_t count)
{
  return blk_ctx_update (r->ctx, digests, count * r->p->digest.len);
}

int
blk_root_final (struct blk_root *r, uint64_t size, uint8_t *out)
{
  struct blk_ctx *copy = blk_ctx_new ();
  uint8_t le[8];
  int i, ret = -1;

  if (copy == NULL)
    return -1;
  for (i = 0; i < 8; i++)
    le[i] = size >> (8 * i);
  if (blk_ctx_copy (copy, r->ctx) == 0 &&
      blk_ctx_update (copy, le, sizeof le) == 0 &&
      blk_ctx_final (copy, out) == 0)
    ret = 0;
  blk_ctx_free (copy);
  return ret;
}

void
blk_root_free (struct blk_root *r)
{
  blk_ctx_free (r->ctx);
  r->ctx = NULL;
}

int
blk_stream_init (struct blk_stream *s, const struct blk_params *p)
{
  memset (s, 0, sizeof *s);
  s->p = p;
  s->buf = malloc (p->block_size);
  s->ctx = blk_ctx_new ();
  if (s->buf == NULL || s->ctx == NULL || blk_root_init (&s->root, p) == -1) {
    free (s->buf);
    blk_ctx_free (s->ctx);
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

static int
stream_flush_block (struct blk_stream *s, const void *block, size_t len)
{
  uint8_t d[BLK_DIGEST_MAX];
  bool zero;

  if (blk_hash_block (s->p, s->ctx, block, len, d, &zero) == -1)
    return -1;
  return blk_root_add (&s->root, d, 1);
}

int
blk_stream_update (struct blk_stream *s, const void *data, size_t len)
{
  const uint8_t *p = data;
  const size_t bs = s->p->block_size;

  s->size += len;
  while (len > 0) {
    /* Whole blocks straight from the caller's buffer, no copy. */
    if (s->fill == 0 && len >= bs) {
      if (stream_flush_block (s, p, bs) == -1)
        return -1;
      p += bs;
      len -= bs;
      continue;
    }
    size_t n = MIN (bs - s->fill, len);
    memcpy (s->buf + s->fill, p, n);
    s->fill += n;
    p += n;
    len -= n;
    if (s->fill == bs) {
      if (stream_flush_block (s, s->buf, bs) == -1)
        return -1;
      s->fill = 0;
    }
  }
  return 0;
}

int
blk_stream_final (struct blk_stream *s, uint8_t *out)
{
  if (s->fill > 0 && stream_flush_block (s, s->buf, s->fill) == -1)
    return -1;
  s->fill = 0;
  return blk_root_final (&s->root, s->size, out);
}

void
blk_stream_free (struct blk_stream *s)
{
  blk_root_free (&s->root);
  blk_ctx_free (s->ctx);
  free (s->buf);
  s->buf = NULL;
  s->ctx = NULL;
}
