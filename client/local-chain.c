/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what a local image names, checked and pinned before anything
 * it names is opened by qemu (see local.h and nbdsum(1), SECURITY).
 *
 * An image's headers name other files (a backing file, a qcow2 data
 * file, vmdk extents), and whoever made the image chose those names.
 * lib/imgrefs.c reads them as qemu does; here each is held to the
 * policy: a regular file in the image's own directory, not one of the
 * kernel's, no protocol, no loop, a chain at most CHAIN_MAX deep;
 * --allow-backing lets regular files anywhere be followed when the
 * user gave the format, never when it was probed or a checksum line
 * gave it (libvirt's lesson: a guest can write any header into a raw
 * disk).  Each file is opened once, checked to be what was checked by
 * name, and held open: qemu opens it through /proc/PID/fd/N, so that
 * what is renamed into the directory meanwhile changes nothing.
 * local-spec.c then hands qemu exactly those files.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "imgformat.h"
#include "imgrefs.h"
#include "local-chain.h"
#include "local.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"

static const char *
kind_name (enum blk_ref_kind kind)
{
  switch (kind) {
  case BLK_REF_BACKING: return "backing file";
  case BLK_REF_DATA_FILE: return "data file";
  case BLK_REF_EXTENT: return "extent";
  }
  return "file";
}

static const char *
mode_name (mode_t mode)
{
  if (S_ISDIR (mode)) return "a directory";
  if (S_ISCHR (mode)) return "a character device";
  if (S_ISBLK (mode)) return "a block device";
  if (S_ISFIFO (mode)) return "a FIFO";
  if (S_ISSOCK (mode)) return "a socket";
  return "not a regular file";
}

/* The reader lib/imgrefs.c asks for: the file at fd, zeros past its
 * end.
 */
static int
fd_pread (void *opaque, void *buf, size_t count, uint64_t offset)
{
  const ssize_t done = local_pread_full (*(int *) opaque, buf, count, offset);

  if (done == -1)
    return -1;
  memset ((char *) buf + done, 0, count - done);
  return 0;
}

static char *
dir_of (const char *path)
{
  const char *slash = strrchr (path, '/');

  if (slash == NULL)
    return strdup (".");
  return slash == path ? strdup ("/") : strndup (path, slash - path);
}

/* Why a name qemu reads from its current directory is refused, if it
 * is: a relative data file, which nbdsum takes beside the image.
 * Where the two differ nbdsum would hash another image than qemu run
 * here.  NULL if the name is not ambiguous.
 */
static const char *
cwd_ambiguous (const char *name, const char *real)
{
  struct stat here, beside;
  char *cwd_real = realpath (name, NULL);
  bool differ;

  if (cwd_real == NULL)
    return NULL;
  differ = stat (cwd_real, &here) == 0 && real &&
    stat (real, &beside) == 0 &&
    (here.st_dev != beside.st_dev || here.st_ino != beside.st_ino);
  free (cwd_real);
  if (real == NULL)
    return "qemu 7.2 reads a relative data file from its current "
      "directory, where there is one, but nbdsum from the image's, "
      "where there is none";
  return differ ? "qemu 7.2 reads a relative data file from its current "
    "directory, nbdsum from the image's, and both have one" : NULL;
}

/* The file that layer l's header names by name, found as qemu finds
 * it (beside l, unless absolute), resolved and held to the policy,
 * with its stat in *st.  NULL after saying why not.
 */
static char *
check_name (struct chain *c, const struct layer *l, enum blk_ref_kind kind,
            const char *name, struct stat *st)
{
  const char *what = kind_name (kind), *why;
  char *dir = dir_of (l->path), *joined = NULL, *real = NULL, *parent;
  bool inside;

  if (dir == NULL)
    goto oom;
  if (kind == BLK_REF_BACKING && blk_ref_has_protocol (name)) {
    error_at (c->name, "its %s header names the backing file '%s', which "
              "qemu reads as a protocol (a network or a pseudo-file): "
              "nbdsum follows no protocol an image names", l->format, name);
    goto err;
  }
  if (name[0] == '/')
    joined = strdup (name);
  else if (asprintf (&joined, "%s%s%s", dir, strcmp (dir, "/") ? "/" : "",
                     name) == -1)
    joined = NULL;
  if (joined == NULL)
    goto oom;
  real = realpath (joined, NULL);
  if (kind == BLK_REF_DATA_FILE && name[0] != '/' &&
      (why = cwd_ambiguous (name, real)) != NULL) {
    error_at (c->name, "its %s header names the data file '%s': %s: "
              "refused (give it an absolute name: qemu-img amend -o "
              "data_file=...)", l->format, name, why);
    goto err;
  }
  if (real == NULL) {
    if (errno == ENOENT)
      error_at (c->name, "its %s header names the %s '%s', which does not "
                "exist", l->format, what, name);
    else
      error_at (c->name, "its %s '%s': %m", what, name);
    goto err;
  }
  if (stat (real, st) == -1) {
    error_at (c->name, "its %s '%s': %m", what, name);
    goto err;
  }
  if (!S_ISREG (st->st_mode)) {
    error_at (c->name, "its %s header names the %s '%s', which is %s: "
              "nbdsum follows regular files only", l->format, what, name,
              mode_name (st->st_mode));
    goto err;
  }
  if (local_kernel_file (real)) {
    error_at (c->name, "its %s header names the %s '%s', which is a file "
              "of the kernel's (/proc, /sys): nbdsum never follows those",
              l->format, what, name);
    goto err;
  }
  /* In the image's own directory, not below it. */
  if ((parent = dir_of (real)) == NULL)
    goto oom;
  inside = strcmp (parent, c->dir) == 0;
  free (parent);
  if (!inside && c->origin == FORMAT_PROBED) {
    error_at (c->name, "its %s header names the %s '%s', outside the "
              "image's directory (%s): refused, as its format was found "
              "by probing (a probed image may name files beside it only; "
              "--format=%s --allow-backing follows it)",
              l->format, what, name, c->dir, c->l[0].format);
    goto err;
  }
  if (!inside && c->origin == FORMAT_TAG) {
    error_at (c->name, "its %s header names the %s '%s', outside the "
              "image's directory (%s): refused, as its format comes from "
              "a checksum line's tag (a line may name files beside the "
              "image only)", l->format, what, name, c->dir);
    goto err;
  }
  if (!inside && l->probed) {
    error_at (c->name, "its backing file %s, whose format was found by "
              "probing (its overlay does not name it: qemu-img rebase -u "
              "-F sets it), names the %s '%s', outside the image's "
              "directory (%s): refused (a probed image may name files "
              "beside it only)", l->path, what, name, c->dir);
    goto err;
  }
  if (!inside && !opts->allow_backing) {
    error_at (c->name, "its %s header names the %s '%s', outside the "
              "image's directory (%s): refused (--allow-backing follows "
              "it)", l->format, what, name, c->dir);
    goto err;
  }
  free (dir);
  free (joined);
  return real;

 oom:
  error_at (c->name, "out of memory");
 err:
  free (dir);
  free (joined);
  free (real);
  return NULL;
}

/* Open the file check_name found at real: the very file it checked
 * (a name renamed or linked meanwhile is refused), never a FIFO's
 * wait.  The descriptor, or -1 after saying why.
 */
static int
open_checked (struct chain *c, const char *real, const struct stat *want,
              const char *what, const char *name)
{
  const int fd = open (real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY |
                       O_NONBLOCK);
  struct stat st;

  if (fd == -1 || fstat (fd, &st) == -1) {
    error_at (c->name, "its %s '%s': %m", what, name);
    if (fd >= 0)
      close (fd);
    return -1;
  }
  if (st.st_dev != want->st_dev || st.st_ino != want->st_ino ||
      !S_ISREG (st.st_mode)) {
    error_at (c->name, "its %s '%s' changed while nbdsum checked it: "
              "refused", what, name);
    close (fd);
    return -1;
  }
  return fd;
}

int
chain_pin (struct chain *c, int fd, char **qemu_path)
{
  int *fds = realloc (c->pins.fds, (c->pins.n + 1) * sizeof *fds);

  if (fds == NULL ||
      asprintf (qemu_path, "/proc/%d/fd/%d", (int) getpid (), fd) == -1) {
    if (fds)
      c->pins.fds = fds;
    error_at (c->name, "out of memory");
    *qemu_path = NULL;
    close (fd);
    return -1;
  }
  c->pins.fds = fds;
  c->pins.fds[c->pins.n++] = fd;
  return 0;
}

/* The format of a backing file whose overlay names none, probed as
 * qemu probes it; NULL after saying why nbdsum does not read it.
 */
static const char *
probe_backing (struct chain *c, const char *path, int fd, const char *name)
{
  uint8_t head[BLK_PROBE_HEAD], footer[BLK_VHD_FOOTER];
  struct stat st;
  struct blk_probe p;
  const bool have_footer = fstat (fd, &st) == 0 &&
    st.st_size >= (off_t) sizeof footer;

  if (fd_pread (&fd, head, sizeof head, 0) == -1 ||
      (have_footer &&
       fd_pread (&fd, footer, sizeof footer, st.st_size - sizeof footer)
       == -1)) {
    error_at (c->name, "its backing file '%s': read: %m", name);
    return NULL;
  }
  blk_probe_image (head, MIN ((size_t) st.st_size, sizeof head), path,
                   have_footer ? footer : NULL, &p);
  if (p.also) {
    error_at (c->name, "its backing file '%s' looks like both a %s and a "
              "%s image, and the image does not say which", name,
              p.format, p.also);
    return NULL;
  }
  if (blk_image_format (p.format) == NULL || p.encrypted) {
    error_at (c->name, "its backing file '%s' is %s %s image, which "
              "nbdsum cannot read without its secret", name,
              p.encrypted ? "an encrypted" : "a", p.format);
    return NULL;
  }
  /* A fixed-size VHD's footer is no header: qemu reads it raw. */
  return p.format;
}

/* A vmdk extent open at fd (of stat st), named by a descriptor: whole,
 * and of the type it says.  0, or -1 after saying why not.
 */
static int
check_extent (struct chain *c, const struct blk_ref *ref, int fd,
              const struct stat *st)
{
  uint8_t head[512];
  const char *why;

  if (strcmp (ref->type, "FLAT") == 0 || strcmp (ref->type, "VMFS") == 0) {
    /* Past its end qemu reads zeros: data the image does not have. */
    if (ref->offset + ref->sectors > (uint64_t) st->st_size / 512) {
      error_at (c->name, "its extent '%s' has %" PRIu64 " bytes, where its "
                "descriptor needs %" PRIu64 " sectors of 512 from sector %"
                PRIu64 ": refused", ref->name, (uint64_t) st->st_size,
                ref->sectors, ref->offset);
      return -1;
    }
    return 0;
  }
  if (fd_pread (&fd, head, sizeof head, 0) == -1) {
    error_at (c->name, "its extent '%s': read: %m", ref->name);
    return -1;
  }
  if ((why = blk_vmdk_sparse_extent_check (ref->type, head)) != NULL) {
    error_at (c->name, "its extent '%s' (%s): %s: refused", ref->name,
              ref->type, why);
    return -1;
  }
  return 0;
}

/* Layer l is open at fd (the chain's from now on): read the names in
 * it, check and pin each, and add the layer its backing file makes.
 * 0, or -1 after saying why.
 */
static int
walk_layer (struct chain *c, struct layer *l, int fd)
{
  char why[256];
  struct stat st;
  int r;

  if (fstat (fd, &st) == -1) {
    error_at (c->name, "%s: %m", l->path);
    close (fd);
    return -1;
  }
  l->dev = st.st_dev;
  l->ino = st.st_ino;
  if (chain_pin (c, fd, &l->qemu) == -1)
    return -1;
  l->fd = fd;
  r = blk_image_refs (l->format, fd_pread, &fd, S_ISBLK (st.st_mode) ?
                      UINT64_MAX : (uint64_t) st.st_size, &l->refs,
                      why, sizeof why);
  if (r == -1) {
    if (errno)
      error_at (c->name, "%s", why);
    else
      error_at (c->name, "a %s image nbdsum does not read: %s", l->format,
                why);
    return -1;
  }
  if (l->refs.n &&
      (l->extents = calloc (l->refs.n, sizeof *l->extents)) == NULL) {
    error_at (c->name, "out of memory");
    return -1;
  }

  for (size_t i = 0; i < l->refs.n; i++) {
    const struct blk_ref *ref = &l->refs.refs[i];
    const char *what = kind_name (ref->kind);
    struct layer *next;
    char *real;
    int rfd;

    if ((real = check_name (c, l, ref->kind, ref->name, &st)) == NULL)
      return -1;
    rfd = open_checked (c, real, &st, what, ref->name);
    if (rfd == -1) {
      free (real);
      return -1;
    }
    if (ref->kind == BLK_REF_DATA_FILE) {
      free (real);
      if (chain_pin (c, rfd, &l->data_file) == -1)
        return -1;
      continue;
    }
    if (ref->kind == BLK_REF_EXTENT) {
      free (real);
      l->nextents++;
      if (check_extent (c, ref, rfd, &st) == -1) {
        close (rfd);
        return -1;
      }
      if (chain_pin (c, rfd, &l->extents[i]) == -1)
        return -1;
      continue;
    }

    /* The backing file: a layer of its own. */
    if (c->n == CHAIN_MAX + 1) {
      error_at (c->name, "its backing chain is deeper than %d files: "
                "refused", CHAIN_MAX);
      free (real);
      close (rfd);
      return -1;
    }
    for (size_t k = 0; k < c->n; k++)
      if (c->l[k].dev == st.st_dev && c->l[k].ino == st.st_ino) {
        error_at (c->name, "its backing chain loops back to '%s': refused",
                  c->l[k].path);
        free (real);
        close (rfd);
        return -1;
      }
    next = &c->l[c->n++];
    next->path = real;
    next->fd = -1;
    next->probed = l->probed;
    if (ref->format[0])
      next->format = blk_image_format (ref->format);
    else {
      next->format = probe_backing (c, real, rfd, ref->name);
      next->probed = true;
    }
    if (ref->format[0] && next->format == NULL)
      error_at (c->name, "its %s header names the backing file '%s' as "
                "a %s image, which nbdsum does not read", l->format,
                ref->name, ref->format);
    if (next->format == NULL) {
      close (rfd);
      return -1;
    }
    if (walk_layer (c, next, rfd) == -1)
      return -1;
  }
  return 0;
}

void
chain_free (struct chain *c)
{
  for (size_t i = 0; i < c->n; i++) {
    struct layer *l = &c->l[i];
    if (l->extents)
      for (size_t k = 0; k < l->refs.n; k++)
        free (l->extents[k]);
    free (l->extents);
    free (l->data_file);
    free (l->copy);
    free (l->qemu);
    free (l->path);
    blk_refs_free (&l->refs);
  }
  free (c->dir);
}

void
local_pins_close (struct local_pins *p)
{
  for (size_t i = 0; i < p->n; i++)
    close (p->fds[i]);
  free (p->fds);
  p->fds = NULL;
  p->n = 0;
}

int
chain_walk (struct chain *c, const char *path, const char *format)
{
  char *dir;
  struct stat st;
  int fd;

  if ((dir = dir_of (path)) == NULL) {
    error_at (c->name, "out of memory");
    return -1;
  }
  c->dir = realpath (dir, NULL);
  free (dir);
  if (c->dir == NULL) {
    error_at (c->name, "its directory: %m");
    return -1;
  }
  c->n = 1;
  c->l[0].path = strdup (path);
  c->l[0].fd = -1;
  c->l[0].format = format;
  c->l[0].probed = c->origin != FORMAT_GIVEN;
  if (c->l[0].path == NULL) {
    error_at (c->name, "out of memory");
    return -1;
  }
  /* The user named the image: its name is followed. */
  if ((fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1) {
    error_at (c->name, "%m");
    return -1;
  }
  if (fstat (fd, &st) == 0 && S_ISBLK (st.st_mode))
    c->l[0].block_device = true;
  if (walk_layer (c, &c->l[0], fd) == -1)
    return -1;
  return 0;
}
