/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: blkhash-file, every rule of it.
 *
 * One line per export whose checksum is known to be current, in
 * nbdsum's forms (lib/sumline.c): 'HEX  NAME' for sha256 and 64K
 * blocks, else tagged with the digest and block size, so that a plain
 * nbdsum -c verifies every line.  NAME is blkhash-file-name= for the
 * default export; any other name a client chose, and is written
 * percent-encoded (blk_name_encode), so that no client can aim
 * nbdsum -c at a path, a device or a host.
 *
 * A line is recorded as soon as its checksum is known, before the
 * reply to the request that made it known, since NBD's disconnect has
 * no reply to wait for: at a flush (the table knows every block, or
 * reading what it does not know costs no more than the client has
 * written, see blkhash_results_flushed), at a read or extents request
 * after which the table knows every block, when the last client of its
 * export leaves (the checksum completed then, reading what was not yet
 * hashed), and at exit for an export still in use if its table knows
 * every block.
 *
 * A line is never stale.  The filter cannot tell which exports share
 * bytes (a disk and its partitions, one image under every name), so a
 * write through any export takes every line out of the file before the
 * plugin sees it.  A checksum is recorded only if no write began since
 * before it was computed, nor was in flight then: writers count
 * themselves in (exports.c's write clock) before they look for lines
 * to take out, and a line is put in before the count is checked again,
 * so of a writer and a line racing, one sees the other.  If the file
 * cannot be rewritten (no space, an I/O error), it is removed rather
 * than left with a stale line, and failing that emptied.
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

/* Digest bytes a fold without plugin I/O may still take, at exit,
 * when a failed connection ends a session, or before the reply to the
 * request that completed a table (2 TiB of 64K blocks; the fold
 * usually keeps up with the requests): beyond that, exiting, closing
 * or replying promptly matters more.
 */
#define KNOWN_FOLD_BYTES (UINT64_C (1) << 30)

/* One line of blkhash-file: an export whose checksum is current. */
struct file_line {
  char *name;
  uint64_t size;                /* of the export, for aliases */
  const struct blk_params *p;   /* how hex was computed */
  char hex[2 * BLK_DIGEST_MAX + 1];
  struct file_line *next;
};

/* results_lock: the list, dirty and stale_on_disk.  file_lock:
 * writing the file, so that renames happen in the order of the
 * snapshots they hold.
 */
static pthread_mutex_t results_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static struct file_line *results;
static _Atomic size_t nresults;         /* a cheap look for writes */
static bool dirty;                      /* the file is not the list */
static bool stale_on_disk;              /* ... and holds a line that is
                                           no longer current */
static char *lock_path;
static int lock_fd = -1;
/* The file held lines at start that no write has taken out yet. */
static atomic_bool old_lines;

static struct file_line **
find (const char *name)
{
  struct file_line **rp;

  for (rp = &results; *rp; rp = &(*rp)->next)
    if (strcmp ((*rp)->name, name) == 0)
      break;
  return rp;
}

/* Take out *rp; results_lock held. */
static void
drop_locked (struct file_line **rp)
{
  struct file_line *r = *rp;

  *rp = r->next;
  free (r->name);
  free (r);
  nresults--;
  dirty = stale_on_disk = true;
}

/* Record the checksum of name computed after stamp
 * (blkhash_writes_stamp was true).  Returns 0, 1 when a write began
 * since (nothing recorded), or -1 (error printed).
 */
static int
result_record (const char *name, uint64_t size, const struct blk_params *p,
               const char *hex, uint64_t stamp)
{
  struct file_line **rp, *r;
  int ret = 0;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
    /* Before touching a line: it may be newer than this checksum. */
    if (blkhash_writes_since (stamp))
      return 1;
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
    else if (strcmp (r->hex, hex) != 0 || r->p != p)
      stale_on_disk = true;     /* the file has its old value */
    else
      r = NULL;                 /* the line is there already */
    if (r) {
      /* The default view's table, or blkhash-expect's value. */
      r->size = size;
      r->p = p;
      snprintf (r->hex, sizeof r->hex, "%s", hex);
      dirty = true;
    }
    /* Again, now that the line is counted: a writer that began
     * meanwhile either saw it, and will take it out, or is seen here.
     */
    if (ret == 0 && blkhash_writes_since (stamp)) {
      drop_locked (find (name));
      ret = 1;
    }
  }
  if (ret == -1)
    blkhash_error ("blkhash: cannot record the checksum of '%s': %m", name);
  return ret;
}

/* Is there a line for name? */
static bool
have_line (const char *name)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
  return *find (name) != NULL;
}

static void
result_drop (const char *name)
{
  struct file_line **rp;

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
  return strcmp ((*(const struct file_line *const *) a)->name,
                 (*(const struct file_line *const *) b)->name);
}

static void
free_snapshot (struct file_line **lines, size_t n)
{
  for (size_t i = 0; lines && i < n; i++) {
    if (lines[i])
      free (lines[i]->name);
    free (lines[i]);
  }
  free (lines);
}

/* A sorted copy of the results, taken under the lock; clears dirty. */
static struct file_line **
snapshot (size_t *n)
{
  struct file_line **lines, *r;
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
    /* O_EXCL: never an existing file, nor through a link. */
    fd = open (*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
               0666);
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
write_file (struct file_line **lines, size_t n)
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
    /* The default export's name is the operator's; any other is the
     * client's: a plain file name for nbdsum -c, never a path, URI or
     * option (lib/sumline.h).
     */
    CLEANUP_FREE char *encoded = NULL;
    if (lines[i]->name[0] && (encoded = blk_name_encode (lines[i]->name))
        == NULL)
      goto out;
    blk_fput_sum_line (fp, blk_sum_needs_tag (p->digest.name, p->block_size)
                       ? BLK_SUM_TAGGED : 0, p->digest.name, p->block_size,
                       NULL, lines[i]->hex,
                       encoded ? encoded : blkhash_file_name);
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
  else if ((fd = open (blkhash_file,
                       O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
    close (fd);
    done = "emptied it";
  }
  else {
    blkhash_error ("blkhash: cannot write blkhash-file %s (%s) nor remove "
                   "it (%m): it may hold stale checksums", blkhash_file,
                   strerror (write_errno));
    return;
  }
  blkhash_error ("blkhash: cannot write blkhash-file %s (%s): %s rather "
                 "than leave a stale checksum in it", blkhash_file,
                 strerror (write_errno), done);
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
  stale_on_disk = false;
}

/* Rewrite the file if its lines changed.  0 or -1 (error printed). */
static int
results_write (void)
{
  struct file_line **lines;
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
    atomic_store (&old_lines, false);   /* the file is ours now */
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
    blkhash_error ("blkhash: cannot write blkhash-file %s: %m (no line in "
                   "it is stale, but it lacks the newest)", blkhash_file);
  return -1;
}

void
blkhash_results_write_begin (void)
{
  bool dropped = false;

  /* Counted in first: see result_record.  Counted without blkhash-file
   * too, for the plain-digest view (blkhash_writes_stamp).
   */
  blkhash_writes_count_begin ();
  if (blkhash_file == NULL)
    return;
  if (atomic_load (&nresults) == 0 && !atomic_load (&old_lines))
    return;
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&results_lock);
    while (results) {
      blkhash_debug ("blkhash: a write begins: '%s' leaves blkhash-file",
                     results->name);
      drop_locked (&results);
      dropped = true;
    }
    if (atomic_exchange (&old_lines, false))
      dirty = stale_on_disk = dropped = true;
  }
  if (dropped)
    results_write ();
}

void
blkhash_results_write_end (void)
{
  blkhash_writes_count_end ();
}

/* Record a checksum computed after stamp, saying why not if a write
 * began since.
 */
static void
record (struct blkhash_export *e, const uint8_t *root, uint64_t stamp,
        const char *when)
{
  const char *name = blkhash_export_name (e);
  const struct blk_params *p = blkhash_default_params;
  char hex[2 * BLK_DIGEST_MAX + 1];

  /* An upload not known to match blkhash-expect: zeros, which
   * nbdsum -c reports FAILED (see expect.c).
   */
  blk_hex (root, p->digest.len, hex);
  if (!blkhash_expect_vouches (name, root)) {
    blkhash_debug ("blkhash: export '%s': not known to match "
                   "blkhash-expect: its line holds zeros", name);
    memset (hex, '0', 2 * p->digest.len);
  }
  switch (result_record (name, blkhash_export_size (e), p, hex, stamp)) {
  case 0:
    blkhash_debug ("blkhash: export '%s': checksum recorded %s", name, when);
    break;
  case 1:
    blkhash_debug ("blkhash: export '%s': a write was in flight while its "
                   "checksum was computed %s: not recorded", name, when);
    break;
  }
}

void
blkhash_results_session_end (nbdkit_next *next, struct blkhash_export *e)
{
  const char *name = blkhash_export_name (e);
  uint8_t root[BLK_DIGEST_MAX];
  struct blkhash_table *bt;
  uint64_t stamp;
  int err = 0, r = -1;
  char msg[256];

  /* A huge export's fold alone would take days (blkhash-max-size). */
  if (blkhash_size_over (blkhash_export_size (e), blkhash_default_params,
                         msg, sizeof msg)) {
    blkhash_error ("blkhash: export '%s': %s for a checksum: "
                   BLKHASH_MAX_SIZE_LIFTS "; no line for it in %s", name, msg,
                   blkhash_file);
    result_drop (name);
    results_write ();
    return;
  }
  /* Computed even with a write in flight: the digests serve later. */
  blkhash_writes_stamp (&stamp);
  blkhash_export_clear_changed (e);
  bt = blkhash_table_get (e, blkhash_default_params,
                          blkhash_export_since (e), &err);
  if (bt) {
    r = blkhash_compute_root_detached (next, blkhash_table_blocks (bt),
                                       root, &err);
    blkhash_table_put (e, bt);
  }
  if (r == 0)
    record (e, root, stamp, "at its session's end");
  else {
    blkhash_error ("blkhash: export '%s': cannot compute its checksum (%s): "
                   "no line for it in %s", name,
                   err == ESHUTDOWN ? "nbdkit is exiting" : strerror (err),
                   blkhash_file);
    result_drop (name);
  }
  results_write ();
}

/* The root from the digests t holds, without plugin I/O: false unless
 * it knows every block and folding what is left costs little.
 */
static bool
known_root (struct blk_table *t, uint8_t *root)
{
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
  uint64_t stamp;
  int err = 0;

  blkhash_writes_stamp (&stamp);
  blkhash_export_clear_changed (e);
  bt = blkhash_table_get (e, blkhash_default_params,
                          blkhash_export_since (e), &err);
  if (bt) {
    have_root = known_root (blkhash_table_blocks (bt), root);
    blkhash_table_put (e, bt);
  }
  if (have_root)
    record (e, root, stamp, "at its session's end");
  else {
    blkhash_error ("blkhash: export '%s': its last connection failed while "
                   "connecting, and the session did not read every block: "
                   "no line for it in %s (connect again to record one)",
                   name, blkhash_file);
    result_drop (name);
  }
  results_write ();
}

/* The checksum of e now, if a write has taken its line out (else the
 * line is there or its session said why not): from t alone.  false
 * when the table does not know every block.
 */
static bool
complete_from_table (struct blkhash_export *e, struct blk_table *t,
                     const char *when)
{
  uint8_t root[BLK_DIGEST_MAX];
  uint64_t stamp;

  if (!blkhash_writes_stamp (&stamp) || have_line (blkhash_export_name (e)))
    return true;
  if (!known_root (t, root))
    return false;
  record (e, root, stamp, when);
  return true;
}

void
blkhash_results_complete (struct blkhash_export *e, struct blk_table *t)
{
  if (blkhash_file) {
    complete_from_table (e, t, "when its table became complete");
    results_write ();
  }
}

/* A flush is what a writing client waits for before it disconnects
 * (qemu-img convert, nbdcopy --flush): the line must be there when it
 * returns.  Blocks a client wrote in part, or not at all, are not
 * known: those the extents call holes are marked so (at the session's
 * first flush), the rest are read now, but only as many bytes as the
 * client has written through the export since the last time, so that
 * a client that writes a little and flushes often (a virtual machine)
 * never makes a flush read the image; its line comes at the
 * disconnect.
 */
void
blkhash_results_flushed (nbdkit_next *next, struct blkhash_export *e,
                         struct blk_table *t)
{
  const char *name = blkhash_export_name (e);
  const uint32_t bs = blkhash_default_params->block_size;
  uint8_t root[BLK_DIGEST_MAX];
  uint64_t stamp, unknown;
  int err = 0;

  if (blkhash_file == NULL || t == NULL ||
      !blkhash_writes_stamp (&stamp) || have_line (name) ||
      blkhash_size_over (blkhash_export_size (e), blkhash_default_params,
                         NULL, 0))
    return;
  /* Holes cost no read: only the data left counts (qemu-img convert
   * --target-is-zero writes none of the zeros).  Once a session: the
   * extents of a large image take a while, and a virtual machine
   * flushes often.
   */
  if (blk_table_unknown (t) && blkhash_export_first_look (e) &&
      blkhash_mark_holes (next, t, &err) == -1) {
    blkhash_debug ("blkhash: export '%s': no checksum at the flush (%s)",
                   name, strerror (err));
    return;
  }
  unknown = blk_table_unknown (t);
  /* An upload the gate has just passed was read whole for it: its line
   * is worth the read (qemu-img's recipe checks it next).
   */
  if (unknown && !blkhash_expect_passed (name) &&
      !blkhash_export_spend (e, MIN (unknown * bs,
                                     blkhash_export_size (e)))) {
    blkhash_debug ("blkhash: export '%s': %" PRIu64 " blocks unknown at a "
                   "flush, more than the client wrote: its line waits",
                   name, unknown);
    return;
  }
  if (blkhash_compute_root (next, t, root, &err) == -1) {
    blkhash_debug ("blkhash: export '%s': no checksum at the flush (%s)",
                   name, strerror (err));
    return;
  }
  record (e, root, stamp, "at a flush");
  results_write ();
}

/* At exit, an export whose line a write took out (its last client
 * still connected, or its completion stopped): the line comes back
 * only if the table knows every block.  No plugin I/O here: nbdkit is
 * exiting.
 */
static void
exit_result (struct blkhash_export *e)
{
  struct blkhash_table *bt;
  bool done = false;

  if (!blkhash_export_changed (e))
    return;
  bt = blkhash_table_find (e, blkhash_default_params);
  if (bt) {
    done = complete_from_table (e, blkhash_table_blocks (bt), "at exit");
    blkhash_table_put (e, bt);
  }
  if (!done) {
    blkhash_error ("blkhash: export '%s' changed and its checksum is not "
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
    blkhash_error ("blkhash-file=%s: names a directory, not a file", path);
    return -1;
  }
  /* A link would be replaced by the file, not followed: refused, so
   * that nobody expects the file at its target.
   */
  if (lstat (path, &st) == 0 && !S_ISREG (st.st_mode)) {
    blkhash_error ("blkhash-file=%s: %s", path,
                   S_ISLNK (st.st_mode) ? "is a symbolic link: give the "
                   "path of the file itself"
                   : S_ISDIR (st.st_mode) ? "is a directory, not a file"
                   : "is not a regular file");
    return -1;
  }
  /* Its lines are stale after the first write. */
  atomic_store (&old_lines, lstat (path, &st) == 0 && st.st_size > 0);
  if ((dir = strdup (path)) == NULL) {
    blkhash_error ("strdup: %m");
    return -1;
  }
  *strrchr (dir, '/') = '\0';   /* path is absolute */
  if (access (dir[0] ? dir : "/", W_OK) == -1) {
    blkhash_error ("blkhash-file=%s: cannot write in directory %s: %m", path,
                   dir[0] ? dir : "/");
    return -1;
  }

  /* One server per file: each would replace the other's lines. */
  if (asprintf (&lock_path, "%s.lock", path) == -1) {
    lock_path = NULL;
    blkhash_error ("asprintf: %m");
    return -1;
  }
  /* Read-only: an open file for writing would keep its file system
   * from being remounted read-only.  Never through a link (in a shared
   * directory another user's link would have nbdkit create a file
   * where it points), nor waiting on a FIFO.
   */
  lock_fd = open (lock_path,
                  O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                  0666);
  if (lock_fd == -1) {
    if (errno == ELOOP)
      blkhash_error ("blkhash-file=%s: %s is a symbolic link: remove it",
                     path, lock_path);
    else
      blkhash_error ("blkhash-file=%s: cannot create %s: %m", path,
                     lock_path);
    return -1;
  }
  if (fstat (lock_fd, &st) == -1 || !S_ISREG (st.st_mode)) {
    blkhash_error ("blkhash-file=%s: %s is not a regular file: remove it",
                   path, lock_path);
    close (lock_fd);
    lock_fd = -1;
    return -1;
  }
  if (flock (lock_fd, LOCK_EX | LOCK_NB) == -1) {
    if (errno == EWOULDBLOCK)
      blkhash_error ("blkhash-file=%s: another nbdkit is using it (it holds "
                     "%s): give each server a file of its own", path,
                     lock_path);
    else
      blkhash_error ("blkhash-file=%s: cannot lock %s: %m", path, lock_path);
    close (lock_fd);
    lock_fd = -1;
    return -1;
  }
  return 0;
}

void
blkhash_results_free_all (void)
{
  struct file_line *r, *next;

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
