/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: shared state per export, and who owns its
 * block tables.
 *
 * An export (name and size) has one table per digest and block size in
 * use.  A table is attached to its export while writes must bracket it
 * and new users may find it, and it is owned by every user holding a
 * reference (a handle, or a computation at disconnect); the last
 * reference to a detached table frees it.  Tables are never refused:
 * idle view tables beyond a small budget are detached, least recently
 * used first.  The table of the default digest and block size (fed by
 * passive hashing, used for blkhash-file) is not evicted.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "filter.h"

/* Idle view tables kept per export, by count and by memory. */
#define IDLE_VIEW_TABLES 4
#define IDLE_VIEW_MEMORY (UINT64_C (256) * 1024 * 1024)

struct blkhash_export {
  char *name;
  uint64_t size;
  unsigned users;               /* handles between prepare and finalize,
                                   under exports_lock */
  atomic_bool changed;          /* a write began since the last
                                   blkhash_export_clear_changed */

  /* Data writes hold the gate shared from begin to end; attaching or
   * detaching a table holds it exclusive, so no table misses a write
   * in flight and none is freed under one.
   */
  pthread_rwlock_t gate;
  pthread_mutex_t lock;         /* the fields below and table refs */
  size_t ntables, alloc;
  struct blkhash_table **tables;
  uint64_t clock;               /* for least recently used */

  struct blkhash_export *next;
};

static pthread_mutex_t exports_lock = PTHREAD_MUTEX_INITIALIZER;
static struct blkhash_export *exports;

struct blkhash_export *
blkhash_export_get (const char *name, uint64_t size)
{
  struct blkhash_export *e;
  pthread_rwlockattr_t attr;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
  for (e = exports; e; e = e->next)
    if (e->size == size && strcmp (e->name, name) == 0)
      break;
  if (e == NULL) {
    e = calloc (1, sizeof *e);
    if (e == NULL || (e->name = strdup (name)) == NULL) {
      nbdkit_error ("blkhash: export '%s': out of memory", name);
      free (e);
      return NULL;
    }
    e->size = size;
    /* Writer preference: attaching a table must not starve behind a
     * steady stream of data writes.
     */
    pthread_rwlockattr_init (&attr);
    pthread_rwlockattr_setkind_np (&attr,
                                   PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init (&e->gate, &attr);
    pthread_rwlockattr_destroy (&attr);
    pthread_mutex_init (&e->lock, NULL);
    e->next = exports;
    exports = e;
  }
  e->users++;
  return e;
}

unsigned
blkhash_export_put (struct blkhash_export *e)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
  return --e->users;
}

const char *
blkhash_export_name (const struct blkhash_export *e)
{
  return e->name;
}

bool
blkhash_export_changed (struct blkhash_export *e)
{
  return atomic_load (&e->changed);
}

void
blkhash_export_clear_changed (struct blkhash_export *e)
{
  atomic_store (&e->changed, false);
}

static void
table_free (struct blkhash_table *bt)
{
  if (bt) {
    blk_table_free (bt->t);
    free (bt);
  }
}

/* Remove table i from the export; the caller holds the gate exclusive
 * and e->lock.  Returns the table if nobody holds it (to free outside
 * the locks), else NULL: its last user frees it.
 */
static struct blkhash_table *
detach (struct blkhash_export *e, size_t i)
{
  struct blkhash_table *bt = e->tables[i];

  memmove (&e->tables[i], &e->tables[i + 1],
           (e->ntables - i - 1) * sizeof e->tables[0]);
  e->ntables--;
  bt->attached = false;
  nbdkit_debug ("blkhash: export '%s': dropping the %s/%" PRIu32
                " table%s", e->name, bt->p->digest.name, bt->p->block_size,
                bt->refs ? " when its users leave" : "");
  return bt->refs ? NULL : bt;
}

/* The least recently used idle view table, or -1. */
static ssize_t
lru_idle_view (struct blkhash_export *e, size_t *idle, uint64_t *memory)
{
  ssize_t lru = -1;

  *idle = 0;
  *memory = 0;
  for (size_t i = 0; i < e->ntables; i++) {
    const struct blkhash_table *bt = e->tables[i];
    struct blk_table_stats st;
    if (bt->refs || bt->p == blkhash_default_params)
      continue;
    blk_table_stats (bt->t, &st);
    ++*idle;
    *memory += st.memory;
    if (lru == -1 || bt->last_used < e->tables[lru]->last_used)
      lru = i;
  }
  return lru;
}

/* Detach idle view tables over the budget into evicted[] (at most
 * max); the caller holds the gate exclusive and e->lock.
 */
static size_t
evict (struct blkhash_export *e, struct blkhash_table **evicted, size_t max)
{
  size_t n = 0, idle;
  uint64_t memory;
  ssize_t i;

  while (n < max && (i = lru_idle_view (e, &idle, &memory)) >= 0 &&
         (idle > IDLE_VIEW_TABLES || memory > IDLE_VIEW_MEMORY))
    evicted[n++] = detach (e, i);
  return n;
}

static struct blkhash_table *
find_table (struct blkhash_export *e, const struct blk_params *p)
{
  for (size_t i = 0; i < e->ntables; i++)
    if (e->tables[i]->p == p)
      return e->tables[i];
  return NULL;
}

struct blkhash_table *
blkhash_table_find (struct blkhash_export *e, const struct blk_params *p)
{
  struct blkhash_table *bt;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&e->lock);
  bt = find_table (e, p);
  if (bt) {
    bt->refs++;
    bt->last_used = ++e->clock;
  }
  return bt;
}

/* Attach *fresh as the table for p, unless another thread was quicker
 * (then take a reference to its table and leave *fresh), and detach
 * idle view tables over the budget into evicted[] (at most max).  The
 * caller holds the gate exclusive.  NULL when out of memory.
 */
static struct blkhash_table *
attach (struct blkhash_export *e, const struct blk_params *p,
        struct blkhash_table **fresh, struct blkhash_table **evicted,
        size_t max, size_t *nevicted)
{
  struct blkhash_table *bt;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&e->lock);
  bt = find_table (e, p);       /* another thread was quicker */
  if (bt == NULL && e->ntables == e->alloc) {
    const size_t n = e->alloc ? 2 * e->alloc : 4;
    struct blkhash_table **tables = realloc (e->tables, n * sizeof *tables);
    if (tables == NULL)
      return NULL;
    e->tables = tables;
    e->alloc = n;
  }
  if (bt == NULL) {
    bt = *fresh;
    *fresh = NULL;
    bt->attached = true;
    e->tables[e->ntables++] = bt;
    nbdkit_debug ("blkhash: export '%s': new table for %s, %" PRIu32
                  " byte blocks", e->name, p->digest.name, p->block_size);
  }
  bt->refs++;
  bt->last_used = ++e->clock;
  *nevicted = evict (e, evicted, max);
  return bt;
}

struct blkhash_table *
blkhash_table_get (struct blkhash_export *e, const struct blk_params *p,
                   int *err)
{
  struct blkhash_table *bt, *fresh, *evicted[IDLE_VIEW_TABLES + 2];
  size_t nevicted = 0;

  bt = blkhash_table_find (e, p);
  if (bt)
    return bt;

  /* Built outside the locks; the gate is only for attaching it. */
  fresh = calloc (1, sizeof *fresh);
  if (fresh == NULL || (fresh->t = blk_table_new (p, e->size)) == NULL) {
    free (fresh);
    nbdkit_error ("blkhash: export '%s': cannot allocate a block table "
                  "for %s/%" PRIu32 ": %m", e->name, p->digest.name,
                  p->block_size);
    *err = ENOMEM;
    return NULL;
  }
  fresh->p = p;

  pthread_rwlock_wrlock (&e->gate);
  bt = attach (e, p, &fresh, evicted, sizeof evicted / sizeof evicted[0],
               &nevicted);
  pthread_rwlock_unlock (&e->gate);

  table_free (fresh);           /* NULL once attached */
  for (size_t i = 0; i < nevicted; i++)
    table_free (evicted[i]);
  if (bt == NULL) {
    nbdkit_error ("blkhash: export '%s': out of memory", e->name);
    *err = ENOMEM;
  }
  return bt;
}

void
blkhash_table_put (struct blkhash_export *e, struct blkhash_table *bt)
{
  bool last;

  if (bt == NULL)
    return;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&e->lock);
    last = --bt->refs == 0 && !bt->attached;
  }
  if (last)
    table_free (bt);
}

void
blkhash_export_release_tables (struct blkhash_export *e)
{
  struct blkhash_table **tables;
  size_t n;
  bool idle;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
    idle = e->users == 0;
  }
  if (!idle)
    return;

  pthread_rwlock_wrlock (&e->gate);
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&e->lock);
    tables = e->tables;
    n = e->ntables;
    for (size_t i = 0; i < n; i++) {
      tables[i]->attached = false;
      if (tables[i]->refs)
        tables[i] = NULL;       /* its last user frees it */
    }
    e->tables = NULL;
    e->ntables = e->alloc = 0;
  }
  pthread_rwlock_unlock (&e->gate);

  for (size_t i = 0; i < n; i++)
    table_free (tables[i]);
  free (tables);
}

/* The arrays of w, when they are not inline. */
static void
write_free (struct blkhash_write *w)
{
  if (w->tables != w->tables_inline)
    free (w->tables);
  if (w->writes != w->writes_inline)
    free (w->writes);
}

/* The tables a write brackets, the export's attached ones.  The caller
 * holds the gate shared.  -1 when out of memory.
 */
static int
write_tables (struct blkhash_export *e, struct blkhash_write *w)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&e->lock);
  w->ntables = e->ntables;
  if (w->ntables > BLKHASH_WRITE_INLINE) {
    w->tables = malloc (w->ntables * sizeof w->tables[0]);
    w->writes = malloc (w->ntables * sizeof w->writes[0]);
    if (w->tables == NULL || w->writes == NULL)
      return -1;
  }
  for (size_t i = 0; i < w->ntables; i++)
    w->tables[i] = e->tables[i]->t;
  return 0;
}

int
blkhash_write_begin (struct blkhash_export *e, struct blkhash_write *w,
                     uint64_t offset, uint64_t count, int *err)
{
  w->e = e;
  w->tables = w->tables_inline;
  w->writes = w->writes_inline;
  atomic_store (&e->changed, true);

  pthread_rwlock_rdlock (&e->gate);
  if (write_tables (e, w) == -1) {
    pthread_rwlock_unlock (&e->gate);
    write_free (w);
    nbdkit_error ("blkhash: out of memory");
    *err = ENOMEM;
    return -1;
  }

  /* Still holding the gate: these tables stay attached until end. */
  for (size_t i = 0; i < w->ntables; i++) {
    const uint32_t bs = blk_table_params (w->tables[i])->block_size;
    const uint64_t first = offset / bs;
    const uint64_t end = count ? (offset + count - 1) / bs + 1 : first;
    blk_table_write_begin (w->tables[i], &w->writes[i], first, end - first);
  }
  return 0;
}

void
blkhash_write_end (struct blkhash_write *w, const struct blk_table *t,
                   const struct blk_written *done)
{
  for (size_t i = 0; i < w->ntables; i++)
    blk_table_write_end (w->tables[i], &w->writes[i],
                         w->tables[i] == t ? done : NULL);
  pthread_rwlock_unlock (&w->e->gate);
  write_free (w);
}

void
blkhash_exports_foreach (void (*fn) (struct blkhash_export *e))
{
  struct blkhash_export *e;

  /* Exports are only freed at unload: the list can be walked. */
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
    e = exports;
  }
  for (; e; e = e->next)
    fn (e);
}

void
blkhash_exports_free_all (void)
{
  struct blkhash_export *e, *enext;

  for (e = exports; e; e = enext) {
    enext = e->next;
    for (size_t i = 0; i < e->ntables; i++)
      table_free (e->tables[i]);
    free (e->tables);
    pthread_rwlock_destroy (&e->gate);
    pthread_mutex_destroy (&e->lock);
    free (e->name);
    free (e);
  }
  exports = NULL;
}
