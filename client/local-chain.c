/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what a local image names, checked before anything it names
 * is opened (see local.h and nbdsum(1), SECURITY).
 *
 * An image's headers name other files (a backing file, a qcow2 data
 * file, vmdk extents), and whoever made the image chose those names.
 * lib/imgrefs.c reads them as qemu does; here each is held to the
 * policy: a regular file in the image's own directory, not on /proc
 * or /sys, no protocol, no loop, a chain at most CHAIN_MAX deep;
 * --allow-backing lets regular files anywhere be followed when the
 * user gave the format, never when it was probed (libvirt's lesson:
 * a guest can write any header into a raw disk).  Only then is qemu
 * run, and it is told, by a json: spec, exactly which files make up
 * the image, so that it follows no name itself.  qemu-img info, given
 * each layer's spec, must find the names nbdsum found, and for a vmdk
 * descriptor the size its extents add up to: where the two readings
 * differ, the image is refused rather than hashed.
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
#include "jsonread.h"
#include "local.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"

/* Backing files below the image, at most (qemu has no limit; a loop
 * of names would grow it without end).
 */
#define CHAIN_MAX 16

struct layer {
  char *path;                   /* as qemu is given it */
  const char *format;           /* static */
  bool probed;                  /* its format or one above it probed */
  bool block_device;            /* the image itself on a block device */
  dev_t dev;
  ino_t ino;
  struct blk_refs refs;
  char *data_file;              /* resolved, or NULL */
  char **extents;               /* as qemu combines them, by ref index */
  size_t nextents;              /* extents come first among the refs */
};

struct chain {
  const char *name;             /* the input, for messages */
  char *dir;                    /* the image's directory, resolved */
  enum format_origin origin;    /* of the image's format */
  struct layer l[CHAIN_MAX + 1];
  size_t n;
};

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
  const int fd = *(int *) opaque;
  size_t done = 0;

  while (done < count) {
    const ssize_t r = pread (fd, (char *) buf + done, count - done,
                             offset + done);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1)
      return -1;
    if (r == 0)
      break;
    done += r;
  }
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

/* The file that layer l's header names by name, found as qemu finds
 * it (beside l, unless absolute), resolved and held to the policy.
 * NULL after saying why not.
 */
static char *
check_name (struct chain *c, const struct layer *l, enum blk_ref_kind kind,
            const char *name)
{
  const char *what = kind_name (kind);
  char *dir = dir_of (l->path), *joined = NULL, *real = NULL, *parent;
  struct stat st;
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
  if ((real = realpath (joined, NULL)) == NULL) {
    if (errno == ENOENT)
      error_at (c->name, "its %s header names the %s '%s', which does not "
                "exist", l->format, what, name);
    else
      error_at (c->name, "its %s '%s': %m", what, name);
    goto err;
  }
  if (stat (real, &st) == -1) {
    error_at (c->name, "its %s '%s': %m", what, name);
    goto err;
  }
  if (!S_ISREG (st.st_mode)) {
    error_at (c->name, "its %s header names the %s '%s', which is %s: "
              "nbdsum follows regular files only", l->format, what, name,
              mode_name (st.st_mode));
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

/* A vmdk extent at real, named by layer l's descriptor: whole, and of
 * the type it says.  *qemu_path is the name qemu opens it by (the
 * descriptor's directory and its name), for the comparison with qemu's
 * reading.
 */
static int
check_extent (struct chain *c, const struct layer *l,
              const struct blk_ref *ref, const char *real, char **qemu_path)
{
  uint8_t head[512];
  const char *why;
  struct stat st;
  char *dir;
  int fd;

  if (ref->name[0] == '/')
    *qemu_path = strdup (ref->name);
  else if ((dir = dir_of (l->path)) != NULL) {
    if (asprintf (qemu_path, "%s%s%s", dir, strcmp (dir, "/") ? "/" : "",
                  ref->name) == -1)
      *qemu_path = NULL;
    free (dir);
  }
  if (*qemu_path == NULL) {
    error_at (c->name, "out of memory");
    return -1;
  }
  if ((fd = open (real, O_RDONLY | O_CLOEXEC)) == -1 ||
      fstat (fd, &st) == -1) {
    error_at (c->name, "its extent '%s': %m", ref->name);
    if (fd >= 0)
      close (fd);
    return -1;
  }
  if (strcmp (ref->type, "FLAT") == 0 || strcmp (ref->type, "VMFS") == 0) {
    close (fd);
    /* Past its end qemu reads zeros: data the image does not have. */
    if (ref->offset + ref->sectors > (uint64_t) st.st_size / 512) {
      error_at (c->name, "its extent '%s' has %" PRIu64 " bytes, where its "
                "descriptor needs %" PRIu64 " sectors of 512 from sector %"
                PRIu64 ": refused", ref->name, (uint64_t) st.st_size,
                ref->sectors, ref->offset);
      return -1;
    }
    return 0;
  }
  if (fd_pread (&fd, head, sizeof head, 0) == -1) {
    error_at (c->name, "its extent '%s': read: %m", ref->name);
    close (fd);
    return -1;
  }
  close (fd);
  if ((why = blk_vmdk_sparse_extent_check (ref->type, head)) != NULL) {
    error_at (c->name, "its extent '%s' (%s): %s: refused", ref->name,
              ref->type, why);
    return -1;
  }
  return 0;
}

/* Read the names in layer l, check each, and add the layer its backing
 * file makes.  0, or -1 after saying why.
 */
static int
walk_layer (struct chain *c, struct layer *l)
{
  char why[256];
  struct stat st;
  int fd, r;

  if ((fd = open (l->path, O_RDONLY | O_CLOEXEC)) == -1) {
    error_at (c->name, "%s: %m", l->path);
    return -1;
  }
  if (fstat (fd, &st) == -1) {
    error_at (c->name, "%s: %m", l->path);
    close (fd);
    return -1;
  }
  l->dev = st.st_dev;
  l->ino = st.st_ino;
  r = blk_image_refs (l->format, fd_pread, &fd, S_ISBLK (st.st_mode) ?
                      UINT64_MAX : (uint64_t) st.st_size, &l->refs,
                      why, sizeof why);
  close (fd);
  if (r == -1) {
    if (errno)
      error_at (c->name, "%s", why);
    else
      error_at (c->name, "a %s image nbdsum does not read: %s", l->format,
                why);
    return -1;
  }
  if (l->refs.descriptor &&
      (l->extents = calloc (l->refs.n, sizeof *l->extents)) == NULL) {
    error_at (c->name, "out of memory");
    return -1;
  }

  for (size_t i = 0; i < l->refs.n; i++) {
    const struct blk_ref *ref = &l->refs.refs[i];
    struct layer *next;
    char *real;

    if ((real = check_name (c, l, ref->kind, ref->name)) == NULL)
      return -1;
    if (ref->kind == BLK_REF_DATA_FILE) {
      l->data_file = real;
      continue;
    }
    if (ref->kind == BLK_REF_EXTENT) {
      l->nextents++;
      r = check_extent (c, l, ref, real, &l->extents[i]);
      free (real);
      if (r == -1)
        return -1;
      continue;
    }

    /* The backing file: a layer of its own. */
    if (c->n == CHAIN_MAX + 1) {
      error_at (c->name, "its backing chain is deeper than %d files: "
                "refused", CHAIN_MAX);
      free (real);
      return -1;
    }
    if (stat (real, &st) == -1) {
      error_at (c->name, "its backing file '%s': %m", ref->name);
      free (real);
      return -1;
    }
    for (size_t k = 0; k < c->n; k++)
      if (c->l[k].dev == st.st_dev && c->l[k].ino == st.st_ino) {
        error_at (c->name, "its backing chain loops back to '%s': refused",
                  c->l[k].path);
        free (real);
        return -1;
      }
    next = &c->l[c->n++];
    next->path = real;
    next->probed = l->probed;
    if (ref->format[0]) {
      if ((next->format = blk_image_format (ref->format)) == NULL) {
        error_at (c->name, "its %s header names the backing file '%s' as "
                  "a %s image, which nbdsum does not read", l->format,
                  ref->name, ref->format);
        return -1;
      }
    }
    else {
      if ((fd = open (real, O_RDONLY | O_CLOEXEC)) == -1) {
        error_at (c->name, "its backing file '%s': %m", ref->name);
        return -1;
      }
      next->format = probe_backing (c, real, fd, ref->name);
      close (fd);
      if (next->format == NULL)
        return -1;
      next->probed = true;
    }
    if (walk_layer (c, next) == -1)
      return -1;
  }
  return 0;
}

/* The formats whose qemu driver takes a backing file. */
static bool
takes_backing (const char *format)
{
  return strcmp (format, "qcow2") == 0 || strcmp (format, "qcow") == 0 ||
    strcmp (format, "qed") == 0 || strcmp (format, "vmdk") == 0;
}

static const struct blk_ref *
find_ref (const struct layer *l, enum blk_ref_kind kind)
{
  for (size_t i = 0; i < l->refs.n; i++)
    if (l->refs.refs[i].kind == kind)
      return &l->refs.refs[i];
  return NULL;
}

static void
json_string (FILE *fp, const char *s)
{
  putc ('"', fp);
  for (; *s; s++) {
    const unsigned char ch = *s;
    if (ch == '"' || ch == '\\')
      fprintf (fp, "\\%c", ch);
    else if (ch < 0x20)
      fprintf (fp, "\\u%04x", ch);
    else
      putc (ch, fp);
  }
  putc ('"', fp);
}

/* Layer i as a qemu block node, and the layers below it with all, or
 * no backing file (null) without: every file qemu opens named here.
 */
static void
write_layer (FILE *fp, const struct chain *c, size_t i, bool all)
{
  const struct layer *l = &c->l[i];

  fputs ("{\"driver\":", fp);
  json_string (fp, l->format);
  fprintf (fp, ",\"file\":{\"driver\":\"%s\",\"filename\":",
           l->block_device ? "host_device" : "file");
  json_string (fp, l->path);
  putc ('}', fp);
  if (takes_backing (l->format)) {
    fputs (",\"backing\":", fp);
    if (all && find_ref (l, BLK_REF_BACKING))
      write_layer (fp, c, i + 1, true);
    else
      fputs ("null", fp);
  }
  if (l->data_file) {
    fputs (",\"data-file\":{\"driver\":\"file\",\"filename\":", fp);
    json_string (fp, l->data_file);
    putc ('}', fp);
  }
  putc ('}', fp);
}

static char *
spec_of (const struct chain *c, size_t i, bool all)
{
  char *spec = NULL;
  size_t len;
  FILE *fp = open_memstream (&spec, &len);

  if (fp == NULL)
    return NULL;
  fputs ("json:", fp);
  write_layer (fp, c, i, all);
  if (fclose (fp) == EOF) {
    free (spec);
    return NULL;
  }
  return spec;
}

/* What qemu-img info says of one layer, beside what nbdsum read. */
struct said {
  const struct layer *l;
  char *backing, *backing_format, *data_file;
  uint64_t size;
  size_t extents;               /* how many it listed */
  bool extents_differ;
};

static int
read_said_object (struct json_reader *r, struct said *s, int level);

static int
read_extents (struct json_reader *r, struct said *s)
{
  bool first = true, f;
  char key[32];
  int e, k;

  if (!json_is (r, '['))
    return json_skip_value (r);
  while ((e = json_next_element (r, &first)) == 1) {
    if (!json_is (r, '{')) {
      if (json_skip_value (r) == -1)
        return -1;
      continue;
    }
    f = true;
    while ((k = json_next_key (r, &f, key, sizeof key)) == 1) {
      if (json_next (r) == -1)
        return -1;
      if (strcmp (key, "filename") == 0 && r->type == JSON_STRING) {
        const size_t i = s->extents++;
        if (!s->l->extents || i >= s->l->nextents ||
            strcmp (s->l->extents[i], r->text) != 0)
          s->extents_differ = true;
      }
      else if (json_skip_value (r) == -1)
        return -1;
    }
    if (k == -1)
      return -1;
  }
  return e;
}

static int
keep_string (struct json_reader *r, char **out)
{
  if (r->type != JSON_STRING)
    return json_skip_value (r);
  free (*out);
  return (*out = strdup (r->text)) ? 0 : -1;
}

/* level 0: the image; 1: "format-specific"; 2: its "data". */
static int
read_said_object (struct json_reader *r, struct said *s, int level)
{
  static const char *const path[] = { "format-specific", "data" };
  bool first = true;
  char key[64];
  int k;

  if (!json_is (r, '{'))
    return json_skip_value (r);
  while ((k = json_next_key (r, &first, key, sizeof key)) == 1) {
    int ret = 0;
    if (json_next (r) == -1)
      return -1;
    if (level == 0 && strcmp (key, "backing-filename") == 0)
      ret = keep_string (r, &s->backing);
    else if (level == 0 && strcmp (key, "backing-filename-format") == 0)
      ret = keep_string (r, &s->backing_format);
    else if (level == 0 && strcmp (key, "virtual-size") == 0 &&
             r->type == JSON_NUMBER)
      s->size = strtoull (r->text, NULL, 10);
    else if (level < 2 && strcmp (key, path[level]) == 0)
      ret = read_said_object (r, s, level + 1);
    else if (level == 2 && strcmp (key, "data-file") == 0)
      ret = keep_string (r, &s->data_file);
    else if (level == 2 && strcmp (key, "extents") == 0)
      ret = read_extents (r, s);
    else
      ret = json_skip_value (r);
    if (ret == -1)
      return -1;
  }
  return k;
}

static int
read_said (struct json_reader *r, void *opaque)
{
  return read_said_object (r, opaque, 0);
}

static bool
same (const char *a, const char *b)
{
  return strcmp (a ? a : "", b ? b : "") == 0;
}

/* Does qemu-img info, given layer i alone, read the names nbdsum read?
 * 0, or -1 after saying why not.
 */
static int
agree (struct chain *c, size_t i)
{
  const struct layer *l = &c->l[i];
  const struct blk_ref *backing = find_ref (l, BLK_REF_BACKING);
  const struct blk_ref *data = find_ref (l, BLK_REF_DATA_FILE);
  struct said s = { .l = l };
  char *spec = spec_of (c, i, false);
  const char *what = NULL, *ours = NULL, *theirs = NULL;
  int r;

  if (spec == NULL) {
    error_at (c->name, "out of memory");
    return -1;
  }
  r = local_qemu_img_info (c->name, spec, read_said, &s);
  free (spec);
  if (r == 0) {
    if (!same (backing ? backing->name : NULL, s.backing))
      what = "backing file", ours = backing ? backing->name : NULL,
        theirs = s.backing;
    else if (backing && backing->format[0] &&
             !same (backing->format, s.backing_format))
      what = "backing file's format", ours = backing->format,
        theirs = s.backing_format;
    else if (!same (data ? data->name : NULL, s.data_file))
      what = "data file", ours = data ? data->name : NULL,
        theirs = s.data_file;
    else if (l->refs.descriptor &&
             (s.extents_differ || s.extents != l->nextents))
      what = "extents";
    if (what) {
      error_at (c->name, "nbdsum and qemu read its %s differently (%s%s%s "
                "and %s%s%s): refused", what,
                ours ? "'" : "", ours ? ours : "none", ours ? "'" : "",
                theirs ? "'" : "", theirs ? theirs : "none",
                theirs ? "'" : "");
      r = -1;
    }
    else if (l->refs.descriptor && s.size != l->refs.descriptor_size) {
      error_at (c->name, "qemu reads %" PRIu64 " bytes, where its vmdk "
                "descriptor's extents add up to %" PRIu64 ": refused",
                s.size, l->refs.descriptor_size);
      r = -1;
    }
  }
  free (s.backing);
  free (s.backing_format);
  free (s.data_file);
  return r;
}

static void
chain_free (struct chain *c)
{
  for (size_t i = 0; i < c->n; i++) {
    struct layer *l = &c->l[i];
    if (l->extents)
      for (size_t k = 0; k < l->refs.n; k++)
        free (l->extents[k]);
    free (l->extents);
    free (l->data_file);
    free (l->path);
    blk_refs_free (&l->refs);
  }
  free (c->dir);
}

char *
local_chain_spec (const char *name, const char *path, const char *format,
                  enum format_origin origin, char **alone)
{
  struct chain c = { .name = name, .origin = origin };
  char *dir, *spec = NULL;
  struct stat st;

  if ((dir = dir_of (path)) == NULL) {
    error_at (name, "out of memory");
    return NULL;
  }
  c.dir = realpath (dir, NULL);
  free (dir);
  if (c.dir == NULL) {
    error_at (name, "its directory: %m");
    return NULL;
  }
  c.n = 1;
  c.l[0].path = strdup (path);
  c.l[0].format = format;
  c.l[0].probed = origin != FORMAT_GIVEN;
  if (c.l[0].path == NULL) {
    error_at (name, "out of memory");
    goto out;
  }
  if (stat (path, &st) == 0 && S_ISBLK (st.st_mode))
    c.l[0].block_device = true;
  if (walk_layer (&c, &c.l[0]) == -1)
    goto out;
  for (size_t i = 0; i < c.n; i++)
    if (strcmp (c.l[i].format, "raw") != 0 && agree (&c, i) == -1)
      goto out;
  if ((spec = spec_of (&c, 0, true)) == NULL ||
      (alone && (*alone = spec_of (&c, 0, false)) == NULL)) {
    error_at (name, "out of memory");
    free (spec);
    spec = NULL;
  }

 out:
  chain_free (&c);
  return spec;
}
