/* nbdkit-blkhash filter: shared state per export, and blkhash-file. */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "blkhash.h"
#include "util.h"

/* More than enough for a handful of view suffixes on one export. */
#define MAX_TABLES BLKHASH_MAX_TABLES

struct blkhash_export {
  char *name;
  uint64_t size;
  unsigned users;               /* handles between prepare and finalize */

  /* Data writes hold the gate shared from begin to end; adding a table
   * holds it exclusive, so no table misses a write in flight.
   */
  pthread_rwlock_t gate;
  pthread_mutex_t lock;         /* the table list */
  size_t ntables;
  const struct blk_params *params[MAX_TABLES];
  struct blk_table *tables[MAX_TABLES];

  struct blkhash_export *next;
};

/* Checksums for blkhash-file, by export name. */
struct result {
  char *name;
  char hex[2 * EVP_MAX_MD_SIZE + 1];
  struct result *next;
};

static pthread_mutex_t exports_lock = PTHREAD_MUTEX_INITIALIZER;
static struct blkhash_export *exports;
static struct result *results;

static void
free_tables (struct blkhash_export *e)
{
  for (size_t i = 0; i < e->ntables; i++)
    blk_table_free (e->tables[i]);
  e->ntables = 0;
}

struct blkhash_export *
blkhash_export_get (const char *name, uint64_t size)
{
  struct blkhash_export *e;
  pthread_rwlockattr_t attr;

  pthread_mutex_lock (&exports_lock);
  for (e = exports; e; e = e->next)
    if (e->size == size && strcmp (e->name, name) == 0)
      break;
  if (e == NULL) {
    e = calloc (1, sizeof *e);
    if (e == NULL || (e->name = strdup (name)) == NULL) {
      nbdkit_error ("blkhash: %m");
      free (e);
      pthread_mutex_unlock (&exports_lock);
      return NULL;
    }
    e->size = size;
    /* Writer preference: a new view table must not starve behind a
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
  pthread_mutex_unlock (&exports_lock);
  return e;
}

unsigned
blkhash_export_put (struct blkhash_export *e)
{
  unsigned users;

  pthread_mutex_lock (&exports_lock);
  users = --e->users;
  pthread_mutex_unlock (&exports_lock);
  return users;
}

void
blkhash_export_trim (struct blkhash_export *e)
{
  /* Without the cache, digests live only while someone uses them. */
  if (blkhash_cache)
    return;
  pthread_mutex_lock (&exports_lock);
  if (e->users == 0) {
    pthread_rwlock_wrlock (&e->gate);
    pthread_mutex_lock (&e->lock);
    free_tables (e);
    pthread_mutex_unlock (&e->lock);
    pthread_rwlock_unlock (&e->gate);
  }
  pthread_mutex_unlock (&exports_lock);
}

const char *
blkhash_export_name (const struct blkhash_export *e)
{
  return e->name;
}

static struct blk_table *
find_table (struct blkhash_export *e, const struct blk_params *p)
{
  for (size_t i = 0; i < e->ntables; i++)
    if (e->params[i] == p)
      return e->tables[i];
  return NULL;
}

struct blk_table *
blkhash_export_table (struct blkhash_export *e, const struct blk_params *p)
{
  struct blk_table *t;

  pthread_mutex_lock (&e->lock);
  t = find_table (e, p);
  pthread_mutex_unlock (&e->lock);
  if (t)
    return t;

  pthread_rwlock_wrlock (&e->gate);
  pthread_mutex_lock (&e->lock);
  t = find_table (e, p);
  if (t == NULL) {
    if (e->ntables == MAX_TABLES)
      nbdkit_error ("blkhash: export '%s': too many digest and block size "
                    "combinations in use (at most %d)", e->name, MAX_TABLES);
    else if ((t = blk_table_new (p, e->size)) == NULL)
      nbdkit_error ("blkhash: cannot allocate the block table: %m");
    else {
      e->params[e->ntables] = p;
      e->tables[e->ntables++] = t;
      nbdkit_debug ("blkhash: export '%s': new table for %s, %" PRIu32
                    " byte blocks", e->name, p->digest.name, p->block_size);
    }
  }
  pthread_mutex_unlock (&e->lock);
  pthread_rwlock_unlock (&e->gate);
  return t;
}

void
blkhash_write_begin (struct blkhash_export *e, struct blkhash_write *w,
                     uint64_t offset, uint64_t count)
{
  w->e = e;
  pthread_rwlock_rdlock (&e->gate);
  pthread_mutex_lock (&e->lock);
  w->ntables = e->ntables;
  memcpy (w->tables, e->tables, e->ntables * sizeof e->tables[0]);
  pthread_mutex_unlock (&e->lock);

  for (size_t i = 0; i < w->ntables; i++) {
    const uint32_t bs = blk_table_params (w->tables[i])->block_size;
    const uint64_t first = offset / bs;
    const uint64_t end = count ? (offset + count - 1) / bs + 1 : first;
    blk_table_write_begin (w->tables[i], &w->writes[i], first, end - first);
  }
}

void
blkhash_write_end (struct blkhash_write *w, const struct blk_table *t,
                   const struct blk_written *done)
{
  for (size_t i = 0; i < w->ntables; i++)
    blk_table_write_end (w->tables[i], &w->writes[i],
                         w->tables[i] == t ? done : NULL);
  pthread_rwlock_unlock (&w->e->gate);
}

void
blkhash_export_set_result (struct blkhash_export *e, const uint8_t *root)
{
  struct result *r;
  const size_t len = blkhash_default_params->digest.len;

  pthread_mutex_lock (&exports_lock);
  for (r = results; r; r = r->next)
    if (strcmp (r->name, e->name) == 0)
      break;
  if (r == NULL && (r = calloc (1, sizeof *r)) != NULL) {
    if ((r->name = strdup (e->name)) == NULL) {
      free (r);
      r = NULL;
    }
    else {
      r->next = results;
      results = r;
    }
  }
  if (r)
    blk_hex (root, len, r->hex);
  else
    nbdkit_error ("blkhash: cannot record the checksum of '%s': %m", e->name);
  pthread_mutex_unlock (&exports_lock);
}

static int
compare_results (const void *a, const void *b)
{
  return strcmp ((*(const struct result **) a)->name,
                 (*(const struct result **) b)->name);
}

int
blkhash_results_write (void)
{
  struct result **sorted = NULL, *r;
  size_t n = 0, i;
  char *tmp = NULL;
  FILE *fp = NULL;
  int fd = -1, ret = -1;
  bool created = false;

  if (blkhash_file == NULL)
    return 0;

  pthread_mutex_lock (&exports_lock);
  for (r = results; r; r = r->next)
    n++;
  sorted = calloc (n ? n : 1, sizeof *sorted);
  if (sorted == NULL)
    goto out;
  for (i = 0, r = results; r; r = r->next)
    sorted[i++] = r;
  qsort (sorted, n, sizeof *sorted, compare_results);

  /* Write beside the target, then rename: readers never see half. */
  if (asprintf (&tmp, "%s.XXXXXX", blkhash_file) == -1) {
    tmp = NULL;
    goto out;
  }
  fd = mkstemp (tmp);
  if (fd == -1)
    goto out;
  created = true;
  if ((fp = fdopen (fd, "w")) == NULL)
    goto out;
  fd = -1;
  for (i = 0; i < n; i++)
    /* The default export is called "-". */
    blk_fput_sum_line (fp, sorted[i]->hex,
                       sorted[i]->name[0] ? sorted[i]->name : "-");
  if (fflush (fp) == EOF || fsync (fileno (fp)) == -1)
    goto out;
  if (fclose (fp) == EOF) {
    fp = NULL;
    goto out;
  }
  fp = NULL;
  /* mkstemp creates 0600; a checksum file is as public as sha256sum's. */
  {
    mode_t mask = umask (0);
    umask (mask);
    chmod (tmp, 0666 & ~mask);
  }
  if (rename (tmp, blkhash_file) == -1)
    goto out;
  ret = 0;

 out:
  if (ret == -1) {
    nbdkit_error ("blkhash: cannot write blkhash-file %s: %m", blkhash_file);
    if (created)
      unlink (tmp);
  }
  if (fp)
    fclose (fp);
  if (fd != -1)
    close (fd);
  free (tmp);
  free (sorted);
  pthread_mutex_unlock (&exports_lock);
  return ret;
}

void
blkhash_exports_free_all (void)
{
  struct blkhash_export *e, *enext;
  struct result *r, *rnext;

  for (e = exports; e; e = enext) {
    enext = e->next;
    free_tables (e);
    pthread_rwlock_destroy (&e->gate);
    pthread_mutex_destroy (&e->lock);
    free (e->name);
    free (e);
  }
  exports = NULL;
  for (r = results; r; r = rnext) {
    rnext = r->next;
    free (r->name);
    free (r);
  }
  results = NULL;
}
