/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: blkhash-file, every rule of it.
 *
 * One line per export whose checksum is known to be current, in
 * nbdsum's forms (lib/sumline.c): 'HEX  NAME' for sha256 and 64K
 * blocks, else tagged with the digest and block size, so that a plain
 * nbdsum -c verifies every line.
 *
 * A line is recorded when the last client of its export leaves (the
 * checksum completed then, reading what was not yet hashed), and at
 * exit for an export still in use if its table knows every block.  A
 * line that can no longer be vouched for goes at once: a write through
 * any export of the same size (the same image, perhaps, under another
 * name) takes out every line of that size and rewrites the file.  If
 * the file cannot be rewritten (no space, an I/O error), it is removed
 * rather than left with a stale line, and failing that emptied.
 *
 * The file is replaced whole (written beside it, synced, renamed, the
 * directory synced), only when its lines changed: a server that served
 * nobody leaves an existing file alone.  It belongs to one server,
 * which holds PATH.lock (flock) while it runs: a second nbdkit given
 * the same file refuses to start.  The file is never read.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "filter.h"
#include "minmax.h"
#include "sumline.h"
#include "util.h"

/* Digest bytes a fold without plugin I/O may still take, at exit or
 * when a failed connection ends a session (2 TiB of 64K blocks):
 * beyond that, exiting or closing promptly matters more.
 */
#define KNOWN_FOLD_BYTES (UINT64_C (1) << 30)

struct result {
  char *name;
  uint64_t size;                /* of the export, for aliases */
  const struct blk_params *p;   /* how hex was computed */
  char hex[2 * BLK_DIGEST_MAX + 1];
  struct result *next;
};

/* results_lock: the list, dirty and stale_on_disk.  file_lock:
 * writing the file, so that renames happen in the order of the
 * snapshots they hold.
 */
static pthread_mutex_t results_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static struct result *results;
static _Atomic size_t nresults;         /* a cheap look for writes */
static bool dirty;                      /* the file is not the list */
static bool stale_on_disk;              /* ... and holds a line that is
                                           no longer current */
static char *lock_path;
static int lock_fd = -1;

static struct result **
find (const char *name)
{
  struct result **rp;

  for (rp = &results; *rp; rp = &(*rp)->next)
    if (strcmp ((*rp)->name, name) == 0)
      break;
  return rp;
}

/* Take out *rp; results_lock held. */
static void
drop_locked (struct result **rp)
{
  struct result *r = *rp;

  *rp = r->next;
  free (r->name);
  free (r);
  nresults--;
  dirty = stale_on_disk = true;
}

static int
result_set (const char *name, uint64_t size, const uint8_t *root)
{
  struct result **rp, *r;
  int ret = 0;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
    rp = find (name);
    if ((r = *rp) == NULL) {
      r = calloc (1, sizeof *r);
      if (r == NULL || (r->name = strdup (name)) == NULL) {
        free (r);
        r = NULL;
        ret = -1;
      }
      else {
        *rp = r;
        nresults++;
      }
    }
    else
      stale_on_disk = true;     /* the file has its old value */
    if (r) {
      /* Results are always of the default view's table. */
      r->size = size;
      r->p = blkhash_default_params;
      blk_hex (root, r->p->digest.len, r->hex);
      dirty = true;
    }
  }
  if (ret == -1)
    nbdkit_error ("blkhash: cannot record the checksum of '%s': %m", name);
  return ret;
}

static void
result_drop (const char *name)
{
  struct result **rp;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
  rp = find (name);
  if (*rp)
    drop_locked (rp);
  else
    /* Even without a line of ours: the file may hold one from before. */
    dirty = true;
}

static int
compare_lines (const void *a, const void *b)
{
  return strcmp ((*(const struct result *const *) a)->name,
                 (*(const struct result *const *) b)->name);
}

static void
free_snapshot (struct result **lines, size_t n)
{
  for (size_t i = 0; lines && i < n; i++) {
    if (lines[i])
      free (lines[i]->name);
    free (lines[i]);
  }
  free (lines);
}

/* A sorted copy of the results, taken under the lock; clears dirty. */
static struct result **
snapshot (size_t *n)
{
  struct result **lines, *r;
  size_t i = 0;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
    *n = 0;
    for (r = results; r; r = r->next)
      ++*n;
    lines = calloc (MAX (*n, (size_t) 1), sizeof *lines);
    for (r = results; lines && r; r = r->next) {
      lines[i] = calloc (1, sizeof *r);
      if (lines[i] == NULL || (lines[i]->name = strdup (r->name)) == NULL)
        break;
      lines[i]->p = r->p;
      memcpy (lines[i]->hex, r->hex, sizeof r->hex);
      i++;
    }
    if (lines && i == *n)
      dirty = false;
  }

  if (lines && i < *n) {
    free_snapshot (lines, *n);
    errno = ENOMEM;
    return NULL;
  }
  if (lines)
    qsort (lines, *n, sizeof *lines, compare_lines);
  return lines;
}

/* A new file beside blkhash-file, created with the usual permissions
 * (0666 less the umask, applied by open itself: no umask call in a
 * threaded process).  Its name in *tmp.
 */
static int
create_temp (char **tmp)
{
  static _Atomic unsigned counter;

  for (int tries = 0; tries < 100; tries++) {
    int fd;
    if (asprintf (tmp, "%s.%ld.%u.tmp", blkhash_file, (long) getpid (),
                  atomic_fetch_add (&counter, 1)) == -1) {
      *tmp = NULL;
      return -1;
    }
    fd = open (*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST)
      return fd;
    free (*tmp);
  }
  *tmp = NULL;
  errno = EEXIST;
  return -1;
}

/* The directory's entry for the rename on disk too. */
static int
sync_directory (void)
{
  CLEANUP_FREE char *dir = strdup (blkhash_file);
  int fd, r;

  if (dir == NULL)
    return -1;
  *strrchr (dir, '/') = '\0';   /* blkhash_file is absolute */
  fd = open (dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd == -1)
    return -1;
  r = fsync (fd);
  close (fd);
  return r;
}

/* Write the lines beside the target, then rename: readers never see
 * half a file.  -1 with errno set.
 */
static int
write_file (struct result **lines, size_t n)
{
  char *tmp = NULL;
  FILE *fp = NULL;
  int fd, ret = -1, saved;

  if ((fd = create_temp (&tmp)) == -1)
    goto out;
  if ((fp = fdopen (fd, "w")) == NULL) {
    close (fd);
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    const struct blk_params *p = lines[i]->p;
    blk_fput_sum_line (fp, blk_sum_needs_tag (p->digest.name, p->block_size)
                       ? BLK_SUM_TAGGED : 0, p->digest.name, p->block_size,
                       NULL, lines[i]->hex, lines[i]->name[0]
                       ? lines[i]->name : blkhash_file_name);
  }
  if (fflush (fp) == EOF || fsync (fileno (fp)) == -1)
    goto out;
  if (fclose (fp) == EOF) {
    fp = NULL;
    goto out;
  }
  fp = NULL;
  if (rename (tmp, blkhash_file) == -1 || sync_directory () == -1)
    goto out;
  ret = 0;

 out:
  saved = errno;
  if (fp)
    fclose (fp);
  if (ret == -1 && tmp)
    unlink (tmp);
  free (tmp);
  errno = saved;
  return ret;
}

/* The file could not be written and holds a line that is no longer
 * current: remove it, or failing that empty it.  Says which on stderr.
 */
static void
discard_file (int write_errno)
{
  const char *done;
  int fd;

  if (unlink (blkhash_file) == 0 || errno == ENOENT)
    done = "removed it";
  else if ((fd = open (blkhash_file, O_WRONLY | O_TRUNC | O_CLOEXEC)) >= 0) {
    close (fd);
    done = "emptied it";
  }
  else {
    nbdkit_error ("blkhash: cannot write blkhash-file %s (%s) nor remove "
                  "it (%m): it may hold stale checksums", blkhash_file,
                  strerror (write_errno));
    return;
  }
  nbdkit_error ("blkhash: cannot write blkhash-file %s (%s): %s rather "
                "than leave a stale checksum in it", blkhash_file,
                strerror (write_errno), done);
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
  stale_on_disk = false;
}

/* Rewrite the file if its lines changed.  0 or -1 (error printed). */
static int
results_write (void)
{
  struct result **lines;
  size_t n;
  int ret;
  bool stale;

  if (blkhash_file == NULL)
    return 0;
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&file_lock);
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
    if (!dirty)
      return 0;
    stale = stale_on_disk;
  }
  lines = snapshot (&n);
  ret = lines ? write_file (lines, n) : -1;
  free_snapshot (lines, n);
  if (ret == 0) {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
    if (!dirty)
      stale_on_disk = false;
    return 0;
  }

  {
    const int e = errno;
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
    dirty = true;               /* try again next time */
    errno = e;
  }
  if (stale)
    discard_file (errno);
  else
    nbdkit_error ("blkhash: cannot write blkhash-file %s: %m (no line in "
                  "it is stale, but it lacks the newest)", blkhash_file);
  return -1;
}

void
blkhash_results_forget_size (uint64_t size)
{
  struct result **rp;
  bool dropped = false;

  if (atomic_load (&nresults) == 0)
    return;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
    for (rp = &results; *rp; ) {
      if ((*rp)->size == size) {
        nbdkit_debug ("blkhash: an export of %" PRIu64 " bytes is being "
                      "written: '%s' leaves blkhash-file", size,
                      (*rp)->name);
        drop_locked (rp);
        dropped = true;
      }
      else
        rp = &(*rp)->next;
    }
  }
  if (dropped)
    results_write ();
}

void
blkhash_results_session_end (nbdkit_next *next, struct blkhash_export *e)
{
  const char *name = blkhash_export_name (e);
  uint8_t root[BLK_DIGEST_MAX];
  struct blkhash_table *bt;
  int err = 0, r = -1;

  /* Writes from here on make this result stale. */
  blkhash_export_clear_changed (e);
  bt = blkhash_table_get (e, blkhash_default_params,
                          blkhash_export_since (e), &err);
  if (bt) {
    r = blkhash_compute_root_detached (next, blkhash_table_blocks (bt),
                                       root, &err);
    blkhash_table_put (e, bt);
  }
  if (r == 0 && blkhash_export_changed (e)) {
    nbdkit_debug ("blkhash: export '%s' was written while its checksum "
                  "was computed: its next disconnect records it", name);
    result_drop (name);
  }
  else if (r == 0)
    result_set (name, blkhash_export_size (e), root);
  else {
    nbdkit_error ("blkhash: export '%s': cannot compute its checksum (%s): "
                  "no line for it in %s", name,
                  err == ESHUTDOWN ? "nbdkit is exiting" : strerror (err),
                  blkhash_file);
    result_drop (name);
  }
  results_write ();
}

/* The root from the digests the table holds, without plugin I/O:
 * false unless it knows every block and folding what is left costs
 * little.
 */
static bool
known_root (struct blkhash_table *bt, uint8_t *root)
{
  struct blk_table *t = blkhash_table_blocks (bt);
  struct blk_table_stats st;

  blk_table_stats (t, &st);
  return st.known == st.blocks &&
    (st.blocks - st.folded) * blkhash_default_params->digest.len
    <= KNOWN_FOLD_BYTES &&
    blk_table_root (t, root) == 0;
}

void
blkhash_results_session_lost (struct blkhash_export *e)
{
  const char *name = blkhash_export_name (e);
  uint8_t root[BLK_DIGEST_MAX];
  struct blkhash_table *bt;
  bool have_root = false;
  int err = 0;

  blkhash_export_clear_changed (e);
  bt = blkhash_table_get (e, blkhash_default_params,
                          blkhash_export_since (e), &err);
  if (bt) {
    have_root = known_root (bt, root);
    blkhash_table_put (e, bt);
  }
  if (have_root && !blkhash_export_changed (e))
    result_set (name, blkhash_export_size (e), root);
  else {
    nbdkit_error ("blkhash: export '%s': its last connection failed while "
                  "connecting, and the session did not read every block: "
                  "no line for it in %s (connect again to record one)",
                  name, blkhash_file);
    result_drop (name);
  }
  results_write ();
}

/* At exit, an export written since its checksum was recorded (its
 * last client still connected, or its completion stopped): the line
 * comes back only if the table knows every block.  No plugin I/O
 * here: nbdkit is exiting.
 */
static void
exit_result (struct blkhash_export *e)
{
  struct blkhash_table *bt;
  uint8_t root[BLK_DIGEST_MAX];
  bool have_root = false;

  if (!blkhash_export_changed (e))
    return;
  bt = blkhash_table_find (e, blkhash_default_params);
  if (bt) {
    have_root = known_root (bt, root);
    blkhash_table_put (e, bt);
  }
  if (have_root)
    result_set (blkhash_export_name (e), blkhash_export_size (e), root);
  else {
    nbdkit_error ("blkhash: export '%s' changed and its checksum is not "
                  "complete at exit: no line for it in %s",
                  blkhash_export_name (e), blkhash_file);
    result_drop (blkhash_export_name (e));
  }
}

void
blkhash_results_exit (void)
{
  if (blkhash_file == NULL)
    return;
  blkhash_exports_foreach (exit_result);
  results_write ();
}

int
blkhash_results_open (const char *path)
{
  struct stat st;
  CLEANUP_FREE char *dir = NULL;

  /* Refused now, not when the first client leaves. */
  if (path[0] == '\0' || path[strlen (path) - 1] == '/') {
    nbdkit_error ("blkhash-file=%s: names a directory, not a file", path);
    return -1;
  }
  if (stat (path, &st) == 0 && !S_ISREG (st.st_mode)) {
    nbdkit_error ("blkhash-file=%s: %s", path, S_ISDIR (st.st_mode)
                  ? "is a directory, not a file" : "is not a regular file");
    return -1;
  }
  if ((dir = strdup (path)) == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  *strrchr (dir, '/') = '\0';   /* path is absolute */
  if (access (dir[0] ? dir : "/", W_OK) == -1) {
    nbdkit_error ("blkhash-file=%s: cannot write in directory %s: %m", path,
                  dir[0] ? dir : "/");
    return -1;
  }

  /* One server per file: each would replace the other's lines. */
  if (asprintf (&lock_path, "%s.lock", path) == -1) {
    lock_path = NULL;
    nbdkit_error ("asprintf: %m");
    return -1;
  }
  /* Read-only: an open file for writing would keep its file system
   * from being remounted read-only.
   */
  lock_fd = open (lock_path, O_RDONLY | O_CREAT | O_CLOEXEC, 0666);
  if (lock_fd == -1) {
    nbdkit_error ("blkhash-file=%s: cannot create %s: %m", path, lock_path);
    return -1;
  }
  if (flock (lock_fd, LOCK_EX | LOCK_NB) == -1) {
    if (errno == EWOULDBLOCK)
      nbdkit_error ("blkhash-file=%s: another nbdkit is using it (it holds "
                    "%s): give each server a file of its own", path,
                    lock_path);
    else
      nbdkit_error ("blkhash-file=%s: cannot lock %s: %m", path, lock_path);
    close (lock_fd);
    lock_fd = -1;
    return -1;
  }
  return 0;
}

void
blkhash_results_free_all (void)
{
  struct result *r, *next;

  for (r = results; r; r = next) {
    next = r->next;
    free (r->name);
    free (r);
  }
  results = NULL;
  nresults = 0;
  /* Removed while still locked: a server starting now either fails to
   * lock it or creates a new one.
   */
  if (lock_fd >= 0) {
    unlink (lock_path);
    close (lock_fd);
    lock_fd = -1;
  }
  free (lock_path);
  lock_path = NULL;
}
