/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: digest and block size combinations, and the
 * size limit (blkhash-max-size).
 */
#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "filter.h"
#include "util.h"

struct params_entry {
  struct blk_params p;
  struct params_entry *next;
};

static pthread_mutex_t params_lock = PTHREAD_MUTEX_INITIALIZER;
static struct params_entry *params_list;

/* Digest names are canonical (lib/digest.c); this also finds a
 * spelling seen before.  Called with params_lock held.
 */
static struct params_entry *
find_params (const char *digest, uint64_t block_size)
{
  struct params_entry *e;

  for (e = params_list; e; e = e->next)
    if (e->p.block_size == block_size &&
        strcasecmp (e->p.digest.name, digest) == 0)
      return e;
  return NULL;
}

const struct blk_params *
blkhash_params_get (const char *what, const char *digest,
                    uint64_t block_size)
{
  struct params_entry *e, *alias;
  const char *msg;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&params_lock);
  e = find_params (digest, block_size);
  if (e == NULL && (e = calloc (1, sizeof *e)) != NULL) {
    if ((msg = blk_params_init (&e->p, digest, block_size)) != NULL) {
      if (what)
        blkhash_error ("blkhash: export '%s': digest '%s' with block "
                       "size %" PRIu64 ": %s", what, digest, block_size, msg);
      else if (blk_check_block_size (block_size))
        blkhash_error ("blkhash-block-size=%" PRIu64 ": %s", block_size,
                       msg);
      else
        blkhash_error ("blkhash-digest=%s: %s", digest, msg);
      free (e);
      e = NULL;
    }
    else if ((alias = find_params (e->p.digest.name, block_size)) != NULL) {
      /* An alias of a digest in use: share its tables. */
      blk_params_free (&e->p);
      free (e);
      e = alias;
    }
    else {
      e->next = params_list;
      params_list = e;
    }
  }
  else if (e == NULL)
    blkhash_error ("calloc: %m");
  return e ? &e->p : NULL;
}

void
blkhash_params_free_all (void)
{
  struct params_entry *e, *next;

  for (e = params_list; e; e = next) {
    next = e->next;
    blk_params_free (&e->p);
    free (e);
  }
  params_list = NULL;
}

/* blkhash-max-size, when given. */
static uint64_t max_size;
static bool max_size_given;

int
blkhash_max_size_config (const char *value)
{
  const int64_t r = nbdkit_parse_size (value);

  if (r == -1) {
    blkhash_error ("blkhash-max-size=%s: not a size (0: no limit)", value);
    return -1;
  }
  max_size = r;
  max_size_given = true;
  return 0;
}

bool
blkhash_size_over (uint64_t size, const struct blk_params *p, char *msg,
                   size_t len)
{
  const bool plain = p == NULL;
  const uint64_t max = max_size_given ? (max_size ? max_size : UINT64_MAX)
    : plain ? BLK_MAX_PLAIN_SIZE : BLK_MAX_SIZE;
  const uint64_t work = plain ? size
    : blk_work_size (size, p->block_size, p->digest.len);
  const bool different = !plain &&
    (p->block_size != 65536 || p->digest.len != 32);
  char h[BLK_HUMAN_STR_MAX], w[BLK_HUMAN_STR_MAX], l[BLK_LIMIT_STR_MAX];

  if (work <= max)
    return false;
  if (msg)
    snprintf (msg, len, "%" PRIu64 " bytes (%s)%s%s%s, over the limit of %s",
              size, blk_format_human (size, h),
              different ? ", in its blocks and digests as much hashing "
              "as " : "", different ? blk_format_human (work, w) : "",
              different ? " in 64K blocks of sha256" : "",
              blk_format_limit (max, l));
  return true;
}
