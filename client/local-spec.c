/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: telling qemu exactly which files make up a local image (see
 * local-chain.h): a json: spec naming each layer, its backing file and
 * data file by the descriptors local-chain.c pinned, and a vmdk
 * descriptor by a copy of the text checked, so that qemu follows no
 * name itself.  qemu-img info, given each layer's spec, must read the
 * names nbdsum read, and for a descriptor the size its extents add up
 * to: where the two readings differ the image is refused
 * (local_chain_spec: the chain walked and pinned by local-chain.c, each
 * layer agreed with qemu-img, then the spec).  Once the private server
 * runs, the files its processes hold open must be those pinned
 * (local_pins_verify): an image rewritten in place after its check, to
 * name another file, is caught there.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "jsonread.h"
#include "local-chain.h"
#include "local.h"
#include "messages.h"

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
 * no backing file (null) without: every file qemu opens named here,
 * by its pin.
 */
static void
write_layer (FILE *fp, const struct chain *c, size_t i, bool all)
{
  const struct layer *l = &c->l[i];

  fputs ("{\"driver\":", fp);
  json_string (fp, l->format);
  fprintf (fp, ",\"file\":{\"driver\":\"%s\",\"filename\":",
           l->block_device ? "host_device" : "file");
  json_string (fp, l->copy ? l->copy : l->qemu);
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

/* The text of layer l's descriptor as checked, for qemu: each extent
 * line names the extent's pin, and the parent's name, which the spec
 * gives, is left out.  In a file of nbdsum's own (a memfd), pinned:
 * 0, or -1 after saying why.
 */
static int
copy_descriptor (struct chain *c, struct layer *l)
{
  const char *text = l->refs.text, *p, *end;
  FILE *fp;
  int fd;

  if ((fd = memfd_create ("nbdsum-vmdk", MFD_CLOEXEC)) == -1) {
    error_at (c->name, "memfd_create: %m");
    return -1;
  }
  if ((fp = fdopen (dup (fd), "w")) == NULL) {
    error_at (c->name, "fdopen: %m");
    close (fd);
    return -1;
  }
  for (p = text; *p; p = end) {
    const struct blk_ref *ext = NULL;
    end = p + strcspn (p, "\n");
    end += *end == '\n';
    for (size_t k = 0; k < l->nextents; k++)
      if (l->refs.refs[k].line == (size_t) (p - text))
        ext = &l->refs.refs[k];
    if (ext) {
      fprintf (fp, "RW %" PRIu64 " %s \"%s\"", ext->sectors, ext->type,
               l->extents[ext - l->refs.refs]);
      if (strcmp (ext->type, "FLAT") == 0)
        fprintf (fp, " %" PRIu64, ext->offset);
      putc ('\n', fp);
    }
    else if (!memmem (p, end - p, "parentFileNameHint", 18))
      fwrite (p, 1, end - p, fp);
  }
  if (fclose (fp) == EOF) {
    error_at (c->name, "writing a copy of its descriptor: %m");
    close (fd);
    return -1;
  }
  return chain_pin (c, fd, &l->copy);
}

/* The json: spec of layer i, with the layers below it (all) or no
 * backing file.  Descriptor layers are handed on as copies of the text
 * checked, naming their extents' pins.  NULL if out of memory, or
 * after saying why (0 errors printed: out of memory).
 */
static char *
chain_spec (struct chain *c, size_t i, bool all)
{
  char *spec = NULL;
  size_t len;
  FILE *fp;

  for (size_t k = i; k < c->n; k++)
    if (c->l[k].refs.descriptor && c->l[k].copy == NULL &&
        copy_descriptor (c, &c->l[k]) == -1)
      return NULL;
  if ((fp = open_memstream (&spec, &len)) == NULL) {
    error_at (c->name, "out of memory");
    return NULL;
  }
  fputs ("json:", fp);
  write_layer (fp, c, i, all);
  if (fclose (fp) == EOF) {
    error_at (c->name, "out of memory");
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

/* Does qemu-img info, given layer i alone, read the names nbdsum
 * read?  0, or -1 after saying why not.
 */
static int
chain_agree (struct chain *c, size_t i)
{
  const struct layer *l = &c->l[i];
  /* A descriptor's copy names no parent: the spec gives it. */
  const struct blk_ref *backing = l->refs.descriptor ? NULL
    : find_ref (l, BLK_REF_BACKING);
  const struct blk_ref *data = find_ref (l, BLK_REF_DATA_FILE);
  struct said s = { .l = l };
  char *spec = chain_spec (c, i, false);
  const char *what = NULL, *ours = NULL, *theirs = NULL;
  char *layer = NULL;
  int r;

  if (spec == NULL)
    return -1;
  if (i > 0 &&
      asprintf (&layer, "'%s' (as %s)", l->path, l->format) == -1)
    layer = NULL;
  r = local_qemu_img_info (c->name, layer, spec, read_said, &s);
  free (layer);
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

char *
local_chain_spec (const char *name, const char *path, const char *format,
                  enum format_origin origin, char **alone,
                  struct local_pins *pins)
{
  struct chain c = { .name = name, .origin = origin };
  char *spec = NULL;

  if (chain_walk (&c, path, format) == -1)
    goto out;
  for (size_t i = 0; i < c.n; i++)
    if (strcmp (c.l[i].format, "raw") != 0 && chain_agree (&c, i) == -1)
      goto out;
  if ((spec = chain_spec (&c, 0, true)) == NULL ||
      (alone && (*alone = chain_spec (&c, 0, false)) == NULL)) {
    free (spec);
    spec = NULL;
  }

 out:
  chain_free (&c);
  if (spec)
    *pins = c.pins;
  else
    local_pins_close (&c.pins);
  return spec;
}


/* The files a process holds open, as (dev, ino) pairs. */
struct held {
  struct stat *v;
  size_t n;
};

static void
held_add (struct held *h, const struct stat *st)
{
  struct stat *v = realloc (h->v, (h->n + 1) * sizeof *v);

  if (v) {
    h->v = v;
    h->v[h->n++] = *st;
  }
}

static bool
held_has (const struct held *h, const struct stat *st)
{
  for (size_t i = 0; i < h->n; i++)
    if (h->v[i].st_dev == st->st_dev && h->v[i].st_ino == st->st_ino)
      return true;
  return false;
}

/* Is the descriptor fd of process pid one that nbdsum holds too (its
 * pins, or what it inherited and passed on), or no file at all (a
 * socket, a pipe, /dev/null)?  Else say which file.
 */
static int
check_fd (const char *name, const struct held *ours, int pid, const char *fd)
{
  static const char *const devices[] = {
    "/dev/null", "/dev/urandom", "/dev/random",
  };
  char path[300], link[4096];
  struct stat st;
  ssize_t n;

  snprintf (path, sizeof path, "/proc/%d/fd/%s", pid, fd);
  if ((n = readlink (path, link, sizeof link - 1)) <= 0)
    return 0;
  link[n] = '\0';
  /* socket:[...], pipe:[...], anon_inode:[...] */
  if (link[0] != '/' || stat (path, &st) == -1 || S_ISSOCK (st.st_mode))
    return 0;
  for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++)
    if (S_ISCHR (st.st_mode) && strcmp (link, devices[i]) == 0)
      return 0;
  if (held_has (ours, &st))
    return 0;
  error_at (name, "its server opened %s, none of the files nbdsum checked "
            "(was the image rewritten while nbdsum read it?): refused", link);
  return -1;
}

/* The process group of a process, from /proc/PID/stat; -1 if gone. */
static pid_t
group_of (const char *pid)
{
  char path[300], buf[512], *p;
  FILE *fp;
  size_t n;
  int pgrp;

  snprintf (path, sizeof path, "/proc/%s/stat", pid);
  if ((fp = fopen (path, "r")) == NULL)
    return -1;
  n = fread (buf, 1, sizeof buf - 1, fp);
  fclose (fp);
  buf[n] = '\0';
  /* After the command's name, which may hold anything but ")". */
  if ((p = strrchr (buf, ')')) == NULL ||
      sscanf (p + 1, " %*c %*d %d", &pgrp) != 1)
    return -1;
  return pgrp;
}

int
local_pins_verify (const char *name, const struct local_pins *p, pid_t pgid)
{
  struct held ours = { NULL, 0 };
  DIR *proc, *fds;
  struct dirent *d, *f;
  struct stat st;
  int r = 0;

  if (p->n == 0 || (proc = opendir ("/proc")) == NULL)
    return 0;
  /* What nbdsum holds: its pins, and what it was given. */
  if ((fds = opendir ("/proc/self/fd")) != NULL) {
    while ((f = readdir (fds)) != NULL) {
      char path[300];
      snprintf (path, sizeof path, "/proc/self/fd/%s", f->d_name);
      if (f->d_name[0] != '.' && stat (path, &st) == 0)
        held_add (&ours, &st);
    }
    closedir (fds);
  }
  while (r == 0 && (d = readdir (proc)) != NULL) {
    char path[300];
    if (strspn (d->d_name, "0123456789") != strlen (d->d_name) ||
        group_of (d->d_name) != pgid)
      continue;
    snprintf (path, sizeof path, "/proc/%s/fd", d->d_name);
    if ((fds = opendir (path)) == NULL)
      continue;
    while (r == 0 && (f = readdir (fds)) != NULL)
      if (f->d_name[0] != '.')
        r = check_fd (name, &ours, atoi (d->d_name), f->d_name);
    closedir (fds);
  }
  closedir (proc);
  free (ours.v);
  return r;
}
