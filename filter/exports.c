/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the shared state of each export and its block
 * tables: who holds them, how long they live, and which tables a write
 * must bracket.
 *
 * An export (name and size) lives while handles use it, and after
 * that only with blkhash-cache=true, at most IDLE_EXPORTS idle ones
 * holding at most IDLE_MEMORY of tables, least recently used out
 * first.  It has one table per digest and block size in use, and one
 * per digest, block size and range for views of part of it (range.c),
 * kept as other view tables are.
 *
 * Sessions.  Digests must not outlive what the filter can vouch for.
 * A table records the session clock when its digests began (since);
 * a user asking for a table with a later clock (a view connected after
 * the table began, a data export whose session began after it) gets it
 * reset first, so every digest it sees was read after that user began.
 * With blkhash-cache=true, users ask with clock 0 and tables last.
 *
 * Aliases.  Plugins often serve one image under every name, or a disk
 * and its partitions (other names, other sizes, the same bytes at
 * other offsets), and the filter cannot tell how exports map onto each
 * other.  So a write (or zero, or trim, failed or not) through one
 * export brackets its own tables by range, and every table of every
 * other export whole, whatever its size: nothing is stored in them
 * while the write is in flight, and its end forgets them
 * (blk_table_forget_end), which costs nothing for a table already
 * empty.  Range bracketing is not enough even for two exports of one
 * size: two partitions of one size at different offsets share bytes at
 * different block numbers.  Every export is marked changed.  Taking
 * the blkhash-file lines out is the caller's (passive.c), not this
 * file's.  The write clock counts the writes through every export, so
 * that a checksum computed with none begun or in flight since its
 * stamp is known to be current (results.c's lines, plain.c's views).
 *
 * Locks, in this order: the gate (data writes hold it shared from
 * begin to end; changing the set of attached tables holds it
 * exclusive, so no table misses a write in flight and none is freed
 * under one), then exports_lock (the list, counts and table
 * references), then a table's own lock (lib/table.c).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "filter.h"
#include "minmax.h"

/* Idle view tables kept per export, by count and by memory. */
#define IDLE_VIEW_TABLES 4
#define IDLE_VIEW_MEMORY (UINT64_C (256) * 1024 * 1024)

struct blkhash_table {
  struct blk_table *t;
  const struct blk_params *p;
  struct blk_range range;       /* length 0: the whole export */
  unsigned refs;                /* users holding it */
  bool attached;                /* writes bracket it, users find it */
  uint64_t last_used;
  uint64_t since;               /* session clock when its digests began */
};

struct blkhash_export {
  char *name;
  uint64_t size;
  unsigned users;               /* handles prepared, not yet gone */
  bool line_owed;               /* a user finished this session and left
                                   its blkhash-file line to the last */
  unsigned refs;                /* users, and work left when they leave */
  uint64_t session;             /* session clock when users became 1 */
  uint64_t last_used;           /* for least recently used */
  atomic_bool changed;          /* a write began since the last
                                   blkhash_export_clear_changed */
  _Atomic uint64_t credit;      /* bytes written through it, not yet
                                   spent reading at a flush */
  atomic_bool holes_marked;     /* a flush this session marked its
                                   holes (blkhash_export_first_look) */
  size_t ntables, alloc;
  struct blkhash_table **tables;
  struct blkhash_export *next;
};

static pthread_rwlock_t gate;
static pthread_mutex_t exports_lock = PTHREAD_MUTEX_INITIALIZER;
static struct blkhash_export *exports;
static uint64_t lru_clock;      /* exports_lock */
static _Atomic uint64_t session_clock;

void
blkhash_exports_init (void)
{
  pthread_rwlockattr_t attr;

  /* Writer preference: attaching a table must not starve behind a
   * steady stream of data writes.
   */
  pthread_rwlockattr_init (&attr);
  pthread_rwlockattr_setkind_np (&attr,
                                 PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init (&gate, &attr);
  pthread_rwlockattr_destroy (&attr);
}

uint64_t
blkhash_session_tick (void)
{
  return atomic_fetch_add (&session_clock, 1) + 1;
}

static void
table_free (struct blkhash_table *bt)
{
  if (bt) {
    blk_table_free (bt->t);
    free (bt);
  }
}

static void
export_free (struct blkhash_export *e)
{
  for (size_t i = 0; i < e->ntables; i++)
    table_free (e->tables[i]);
  free (e->tables);
  free (e->name);
  free (e);
}

struct blkhash_export *
blkhash_export_get (const char *name, uint64_t size)
{
  struct blkhash_export *e;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
  for (e = exports; e; e = e->next)
    if (e->size == size && strcmp (e->name, name) == 0)
      break;
  if (e == NULL) {
    e = calloc (1, sizeof *e);
    if (e == NULL || (e->name = strdup (name)) == NULL) {
      blkhash_error ("blkhash: export '%s': out of memory", name);
      free (e);
      return NULL;
    }
    e->size = size;
    e->next = exports;
    exports = e;
  }
  if (e->users++ == 0) {
    e->session = blkhash_session_tick ();
    atomic_store (&e->holes_marked, false);
  }
  e->refs++;
  return e;
}

unsigned
blkhash_export_put (struct blkhash_export *e)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
  e->line_owed = --e->users > 0;
  return e->users;
}

unsigned
blkhash_export_abandon (struct blkhash_export *e, bool *line_owed)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
  *line_owed = false;
  if (--e->users == 0) {
    *line_owed = e->line_owed;
    e->line_owed = false;
  }
  return e->users;
}

const char *
blkhash_export_name (const struct blkhash_export *e)
{
  return e->name;
}

uint64_t
blkhash_export_size (const struct blkhash_export *e)
{
  return e->size;
}

uint64_t
blkhash_export_since (const struct blkhash_export *e)
{
  if (blkhash_cache)
    return 0;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
  return e->session;
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

void
blkhash_export_credit (struct blkhash_export *e, uint64_t bytes)
{
  atomic_fetch_add (&e->credit, bytes);
}

bool
blkhash_export_spend (struct blkhash_export *e, uint64_t bytes)
{
  uint64_t c = atomic_load (&e->credit);

  do {
    if (c < bytes)
      return false;
  } while (!atomic_compare_exchange_weak (&e->credit, &c, c - bytes));
  return true;
}

bool
blkhash_export_first_look (struct blkhash_export *e)
{
  return !atomic_exchange (&e->holes_marked, true);
}

/* Remove table i from the export; the caller holds the gate exclusive
 * and exports_lock.  Returns the table if nobody holds it (to free
 * outside the locks), else NULL: its last user frees it.
 */
static struct blkhash_table *
detach (struct blkhash_export *e, size_t i)
{
  struct blkhash_table *bt = e->tables[i];

  memmove (&e->tables[i], &e->tables[i + 1],
           (e->ntables - i - 1) * sizeof e->tables[0]);
  e->ntables--;
  bt->attached = false;
  blkhash_debug ("blkhash: export '%s': dropping the %s/%" PRIu32
                 " table%s%s", e->name, bt->p->digest.name, bt->p->block_size,
                 bt->range.length ? " of a range" : "",
                 bt->refs ? " when its users leave" : "");
  return bt->refs ? NULL : bt;
}

/* Bytes held by the tables of e; exports_lock held. */
static uint64_t
export_memory (struct blkhash_export *e)
{
  uint64_t memory = 0;

  for (size_t i = 0; i < e->ntables; i++) {
    struct blk_table_stats st;
    blk_table_stats (e->tables[i]->t, &st);
    memory += st.memory;
  }
  return memory;
}

/* The least recently used idle view table of e, or -1. */
static ssize_t
lru_idle_view (struct blkhash_export *e, size_t *idle, uint64_t *memory)
{
  ssize_t lru = -1;

  *idle = 0;
  *memory = 0;
  for (size_t i = 0; i < e->ntables; i++) {
    const struct blkhash_table *bt = e->tables[i];
    struct blk_table_stats st;
    if (bt->refs || (bt->p == blkhash_default_params && !bt->range.length))
      continue;
    blk_table_stats (bt->t, &st);
    ++*idle;
    *memory += st.memory;
    if (lru == -1 || bt->last_used < e->tables[lru]->last_used)
      lru = i;
  }
  return lru;
}

/* Detach idle view tables of e over the budget into evicted[] (at
 * most max); the caller holds the gate exclusive and exports_lock.
 */
static size_t
evict_views (struct blkhash_export *e, struct blkhash_table **evicted,
             size_t max)
{
  size_t n = 0, idle;
  uint64_t memory;
  ssize_t i;

  while (n < max && (i = lru_idle_view (e, &idle, &memory)) >= 0 &&
         (idle > IDLE_VIEW_TABLES || memory > IDLE_VIEW_MEMORY))
    evicted[n++] = detach (e, i);
  return n;
}

static bool
same_range (const struct blk_range *a, const struct blk_range *b)
{
  return a->offset == b->offset && a->length == b->length;
}

static struct blkhash_table *
find_table (struct blkhash_export *e, const struct blk_params *p,
            const struct blk_range *r)
{
  for (size_t i = 0; i < e->ntables; i++)
    if (e->tables[i]->p == p && same_range (&e->tables[i]->range, r))
      return e->tables[i];
  return NULL;
}

static const struct blk_range whole = { 0, 0 };

/* Take a reference to bt for a user that began at session clock
 * since, first resetting bt if it holds digests from before.
 * exports_lock held.
 */
static void
take (struct blkhash_export *e, struct blkhash_table *bt, uint64_t since)
{
  bt->refs++;
  bt->last_used = ++lru_clock;
  if (bt->since < since) {
    blkhash_debug ("blkhash: export '%s': %s/%" PRIu32 " digests are from "
                   "before this session: computing them again", e->name,
                   bt->p->digest.name, bt->p->block_size);
    blk_table_reset (bt->t);
    bt->since = blkhash_session_tick ();
  }
}

struct blkhash_table *
blkhash_table_find (struct blkhash_export *e, const struct blk_params *p)
{
  struct blkhash_table *bt;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
  bt = find_table (e, p, &whole);
  if (bt)
    take (e, bt, 0);
  return bt;
}

/* Attach *fresh as the table for p, unless another thread was quicker
 * (then take a reference to its table and leave *fresh), and detach
 * idle view tables over the budget into evicted[] (at most max).  The
 * caller holds the gate exclusive.  NULL when out of memory.
 */
static struct blkhash_table *
attach (struct blkhash_export *e, const struct blk_params *p,
        uint64_t since, struct blkhash_table **fresh,
        struct blkhash_table **evicted, size_t max, size_t *nevicted)
{
  struct blkhash_table *bt;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
  /* Another thread was quicker. */
  bt = find_table (e, p, &(*fresh)->range);
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
    bt->since = blkhash_session_tick ();
    e->tables[e->ntables++] = bt;
    blkhash_debug ("blkhash: export '%s': new table for %s, %" PRIu32
                   " byte blocks", e->name, p->digest.name, p->block_size);
  }
  take (e, bt, since);
  *nevicted = evict_views (e, evicted, max);
  return bt;
}

struct blkhash_table *
blkhash_table_get (struct blkhash_export *e, const struct blk_params *p,
                   uint64_t since, int *err)
{
  return blkhash_table_get_range (e, p, &whole, since, err);
}

struct blkhash_table *
blkhash_table_get_range (struct blkhash_export *e, const struct blk_params *p,
                         const struct blk_range *r, uint64_t since, int *err)
{
  struct blkhash_table *bt, *fresh, *evicted[IDLE_VIEW_TABLES + 2];
  size_t nevicted = 0;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
    bt = find_table (e, p, r);
    if (bt) {
      take (e, bt, since);
      return bt;
    }
  }

  /* Built outside the locks; the gate is only for attaching it. */
  fresh = calloc (1, sizeof *fresh);
  if (fresh == NULL ||
      (fresh->t = blk_table_new (p, r->length ? r->length : e->size))
      == NULL) {
    free (fresh);
    blkhash_error ("blkhash: export '%s': cannot allocate a block table "
                   "for %s/%" PRIu32 ": %m", e->name, p->digest.name,
                   p->block_size);
    *err = ENOMEM;
    return NULL;
  }
  fresh->p = p;
  fresh->range = *r;

  {
    ACQUIRE_WRLOCK_FOR_CURRENT_SCOPE (&gate);
    bt = attach (e, p, since, &fresh, evicted,
                 sizeof evicted / sizeof evicted[0], &nevicted);
  }

  table_free (fresh);           /* NULL once attached */
  for (size_t i = 0; i < nevicted; i++)
    table_free (evicted[i]);
  if (bt == NULL) {
    blkhash_error ("blkhash: export '%s': out of memory", e->name);
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
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
    last = --bt->refs == 0 && !bt->attached;
  }
  if (last)
    table_free (bt);
}

struct blk_table *
blkhash_table_blocks (const struct blkhash_table *bt)
{
  return bt->t;
}

/* Idle exports (no users, no references), and their table memory;
 * exports_lock held.  *lru: the least recently used one.
 */
static size_t
count_idle (uint64_t *memory, struct blkhash_export **lru)
{
  size_t n = 0;

  *memory = 0;
  *lru = NULL;
  for (struct blkhash_export *e = exports; e; e = e->next) {
    if (e->refs)
      continue;
    n++;
    *memory += export_memory (e);
    if (*lru == NULL || e->last_used < (*lru)->last_used)
      *lru = e;
  }
  return n;
}

/* Take e out of the list and detach its tables; gate exclusive and
 * exports_lock held.  Nobody refers to it any more.
 */
static void
unlink_export (struct blkhash_export *e)
{
  struct blkhash_export **ep;

  for (ep = &exports; *ep != e; ep = &(*ep)->next)
    ;
  *ep = e->next;
  for (size_t i = 0; i < e->ntables; i++)
    e->tables[i]->attached = false;
}

void
blkhash_export_release (struct blkhash_export *e)
{
  struct blkhash_export *gone = NULL, *lru;
  uint64_t memory;

  {
    ACQUIRE_WRLOCK_FOR_CURRENT_SCOPE (&gate);
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
    if (--e->refs == 0) {
      e->last_used = ++lru_clock;
      /* Without blkhash-cache, digests do not outlive their session. */
      if (!blkhash_cache) {
        unlink_export (e);
        e->next = gone;
        gone = e;
      }
      while (count_idle (&memory, &lru) > BLKHASH_IDLE_EXPORTS ||
             (lru && memory > BLKHASH_IDLE_MEMORY)) {
        blkhash_debug ("blkhash: export '%s': forgetting it, the least "
                       "recently used of the idle exports", lru->name);
        unlink_export (lru);
        lru->next = gone;
        gone = lru;
      }
    }
  }

  while (gone) {
    e = gone->next;
    export_free (gone);
    gone = e;
  }
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

/* The tables a write through e brackets: its own by range, then its
 * tables of ranges and every table of every other export whole (a
 * range's blocks are not the export's: see range.c); every export is
 * marked changed.
 * The caller holds the gate shared.  -1 when out of memory.
 */
static int
write_tables (struct blkhash_export *e, struct blkhash_write *w)
{
  struct blkhash_export *x;
  size_t n = 0;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
  for (x = exports; x; x = x->next) {
    /* Loaded first: no store to a line every writer shares. */
    if (!atomic_load (&x->changed))
      atomic_store (&x->changed, true);
    n += x->ntables;
  }
  if (n > BLKHASH_WRITE_INLINE) {
    w->tables = malloc (n * sizeof w->tables[0]);
    w->writes = malloc (n * sizeof w->writes[0]);
    if (w->tables == NULL || w->writes == NULL)
      return -1;
  }
  for (size_t i = 0; i < e->ntables; i++)
    if (e->tables[i]->range.length == 0)
      w->tables[w->ntables++] = e->tables[i]->t;
  w->nown = w->ntables;
  for (size_t i = 0; i < e->ntables; i++)
    if (e->tables[i]->range.length)
      w->tables[w->ntables++] = e->tables[i]->t;
  for (x = exports; x; x = x->next)
    for (size_t i = 0; x != e && i < x->ntables; i++)
      w->tables[w->ntables++] = x->tables[i]->t;
  return 0;
}

int
blkhash_write_begin (struct blkhash_export *e, struct blkhash_write *w,
                     uint64_t offset, uint64_t count, int *err)
{
  w->tables = w->tables_inline;
  w->writes = w->writes_inline;
  w->ntables = w->nown = 0;

  /* Held until blkhash_write_end: not a scope of this function. */
  pthread_rwlock_rdlock (&gate);
  if (write_tables (e, w) == -1) {
    pthread_rwlock_unlock (&gate);
    write_free (w);
    blkhash_error ("blkhash: out of memory");
    *err = ENOMEM;
    return -1;
  }

  /* Still holding the gate: these tables stay attached until end. */
  for (size_t i = 0; i < w->nown; i++) {
    const uint32_t bs = blk_table_params (w->tables[i])->block_size;
    const uint64_t first = offset / bs;
    const uint64_t end = count ? (offset + count - 1) / bs + 1 : first;
    blk_table_write_begin (w->tables[i], &w->writes[i], first, end - first);
  }
  for (size_t i = w->nown; i < w->ntables; i++)
    blk_table_forget_begin (w->tables[i]);
  return 0;
}

void
blkhash_write_end (struct blkhash_write *w, const struct blk_table *t,
                   const struct blk_written *done)
{
  for (size_t i = 0; i < w->nown; i++)
    blk_table_write_end (w->tables[i], &w->writes[i],
                         w->tables[i] == t ? done : NULL);
  for (size_t i = w->nown; i < w->ntables; i++)
    blk_table_forget_end (w->tables[i]);
  pthread_rwlock_unlock (&gate);
  write_free (w);
}

/* The write clock: data writes through any export that began, and
 * that ended (every table saw them end): equal when none is in flight.
 * results.c counts them, since when a write begins and ends matters to
 * its lines; plain.c's views and results.c take stamps.
 */
static _Atomic uint64_t writes_begun, writes_ended;

void
blkhash_writes_count_begin (void)
{
  atomic_fetch_add (&writes_begun, 1);
}

void
blkhash_writes_count_end (void)
{
  atomic_fetch_add (&writes_ended, 1);
}

bool
blkhash_writes_stamp (uint64_t *stamp)
{
  *stamp = atomic_load (&writes_begun);
  if (atomic_load (&writes_ended) == *stamp)
    return true;
  *stamp = UINT64_MAX;
  return false;
}

bool
blkhash_writes_since (uint64_t stamp)
{
  return atomic_load (&writes_begun) != stamp ||
    atomic_load (&writes_ended) != stamp;
}

void
blkhash_exports_foreach (void (*fn) (struct blkhash_export *e))
{
  struct blkhash_export *e, **list;
  size_t n = 0, i;

  /* A reference each, so that none goes while fn runs without the
   * lock (fn may compute).
   */
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&exports_lock);
    for (e = exports; e; e = e->next)
      n++;
    list = malloc (MAX (n, (size_t) 1) * sizeof *list);
    if (list == NULL)
      return;
    for (i = 0, e = exports; e; e = e->next, i++) {
      e->refs++;
      list[i] = e;
    }
  }
  for (i = 0; i < n; i++) {
    fn (list[i]);
    blkhash_export_release (list[i]);
  }
  free (list);
}

void
blkhash_exports_free_all (void)
{
  struct blkhash_export *e, *enext;

  for (e = exports; e; e = enext) {
    enext = e->next;
    export_free (e);
  }
  exports = NULL;
  pthread_rwlock_destroy (&gate);
}
