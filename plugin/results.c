/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: the checksums written to blkhash-file.
 *
 * One line per export whose checksum is known to be current, in
 * nbdsum's forms (lib/sumline.c): 'HEX  NAME' for sha256 and 64K
 * blocks, else tagged with the digest and block size, so that a plain
 * nbdsum -c verifies every line.  A line that can no longer be vouched
 * for is removed, never left stale, and the file is only rewritten when
 * its lines changed: a server that served nobody leaves an existing
 * file alone.  The file is never read: it holds this server's lines.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "filter.h"
#include "sumline.h"
#include "util.h"

struct result {
  char *name;
  const struct blk_params *p;   /* how hex was computed */
  char hex[2 * EVP_MAX_MD_SIZE + 1];
  struct result *next;
};

/* results_lock: the list and dirty.  file_lock: writing the file, so
 * that renames happen in the order of the snapshots they hold.
 */
static pthread_mutex_t results_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static struct result *results;
static bool dirty;

static struct result **
find (const char *name)
{
  struct result **rp;

  for (rp = &results; *rp; rp = &(*rp)->next)
    if (strcmp ((*rp)->name, name) == 0)
      break;
  return rp;
}

int
blkhash_result_set (const char *name, const uint8_t *root)
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
      else
        *rp = r;
    }
    if (r) {
      /* Results are always of the default view's table. */
      r->p = blkhash_default_params;
      blk_hex (root, r->p->digest.len, r->hex);
      dirty = true;
    }
  }
  if (ret == -1)
    nbdkit_error ("blkhash: cannot record the checksum of '%s': %m", name);
  return ret;
}

void
blkhash_result_drop (const char *name)
{
  struct result **rp, *r;

  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
  rp = find (name);
  if ((r = *rp) != NULL) {
    *rp = r->next;
    free (r->name);
    free (r);
  }
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

/* A sorted copy of the results, taken under the lock. */
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

/* Write the lines beside the target, then rename: readers never see
 * half a file.
 */
static int
write_file (struct result **lines, size_t n)
{
  char *tmp = NULL;
  FILE *fp = NULL;
  int fd = -1, ret = -1;
  mode_t mask;

  if (asprintf (&tmp, "%s.XXXXXX", blkhash_file) == -1) {
    tmp = NULL;
    goto out;
  }
  if ((fd = mkstemp (tmp)) == -1) {
    free (tmp);
    tmp = NULL;
    goto out;
  }
  if ((fp = fdopen (fd, "w")) == NULL)
    goto out;
  fd = -1;
  for (size_t i = 0; i < n; i++) {
    const struct blk_params *p = lines[i]->p;
    blk_fput_sum_line (fp, blk_sum_needs_tag (p->digest.name, p->block_size)
                       ? BLK_SUM_TAGGED : 0, p->digest.name, p->block_size,
                       lines[i]->hex, lines[i]->name[0]
                       ? lines[i]->name : blkhash_file_name);
  }
  if (fflush (fp) == EOF || fsync (fileno (fp)) == -1)
    goto out;
  if (fclose (fp) == EOF) {
    fp = NULL;
    goto out;
  }
  fp = NULL;
  /* mkstemp creates 0600; a checksum file is as public as sha256sum's. */
  mask = umask (0);
  umask (mask);
  if (chmod (tmp, 0666 & ~mask) == -1 || rename (tmp, blkhash_file) == -1)
    goto out;
  ret = 0;

 out:
  if (ret == -1)
    nbdkit_error ("blkhash: cannot write blkhash-file %s: %m", blkhash_file);
  if (fp)
    fclose (fp);
  if (fd != -1)
    close (fd);
  if (ret == -1 && tmp)
    unlink (tmp);
  free (tmp);
  return ret;
}

static bool
is_dirty (void)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
  return dirty;
}

static void
set_dirty (void)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
  dirty = true;
}

int
blkhash_results_write (void)
{
  struct result **lines;
  size_t n;
  int ret;

  if (blkhash_file == NULL)
    return 0;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&file_lock);
    if (!is_dirty ())
      return 0;
    lines = snapshot (&n);
    if (lines == NULL) {
      nbdkit_error ("blkhash: cannot write blkhash-file %s: %m",
                    blkhash_file);
      ret = -1;
    }
    else
      ret = write_file (lines, n);
    if (ret == -1)
      set_dirty ();             /* try again next time */
  }
  free_snapshot (lines, n);
  return ret;
}

int
blkhash_results_check_path (const char *path)
{
  struct stat st;
  char *dir;
  int r;

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
  dir = strdup (path);
  if (dir == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  *strrchr (dir, '/') = '\0';   /* path is absolute */
  r = access (dir[0] ? dir : "/", W_OK);
  if (r == -1)
    nbdkit_error ("blkhash-file=%s: cannot write in directory %s: %m", path,
                  dir[0] ? dir : "/");
  free (dir);
  return r;
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
}
