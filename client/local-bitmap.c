/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a local qcow2 file's dirty bitmap, as qemu-img info says it
 * is, for --since (see local.h): enabled, consistent, or refused; and
 * the qemu-nbd that serves it (local.c runs it).  A disabled bitmap
 * records no writes, and qemu-nbd exports it all the same: only the
 * image's own record tells.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "helpers.h"
#include "jsonread.h"
#include "local-server.h"
#include "messages.h"
#include "options.h"
#include "signals.h"

struct bitmap_info {
  const char *bitmap;
  char format[32];
  bool found, enabled, in_use;
};

/* One of "bitmaps": {"flags": [...], "name": ..., "granularity": ...}. */
static int
read_bitmap (struct json_reader *r, struct bitmap_info *bi)
{
  bool first = true, match = false, enabled = false, in_use = false;
  char key[64];
  int k, e;

  if (!json_is (r, '{'))
    return json_skip_value (r);
  while ((k = json_next_key (r, &first, key, sizeof key)) == 1) {
    if (json_next (r) == -1)
      return -1;
    if (strcmp (key, "name") == 0 && r->type == JSON_STRING)
      match = strcmp (r->text, bi->bitmap) == 0;
    else if (strcmp (key, "flags") == 0 && json_is (r, '[')) {
      bool f = true;
      while ((e = json_next_element (r, &f)) == 1) {
        if (r->type != JSON_STRING)
          {
          snprintf (r->error, sizeof r->error, "line %lu: a flag that is "
                    "not a string", r->line);
          return -1;
        }
        enabled |= strcmp (r->text, "auto") == 0;
        in_use |= strcmp (r->text, "in-use") == 0;
      }
      if (e == -1)
        return -1;
    }
    else if (json_skip_value (r) == -1)
      return -1;
  }
  if (k == -1)
    return -1;
  if (match) {
    bi->found = true;
    bi->enabled = enabled;
    bi->in_use = in_use;
  }
  return 0;
}

/* The object whose '{' was just read, at level 0 (the image),
 * 1 ("format-specific") or 2 (its "data", which has "bitmaps").
 */
static int
read_info (struct json_reader *r, struct bitmap_info *bi, int level)
{
  static const char *const path[] = { "format-specific", "data" };
  bool first = true;
  char key[128];
  int k, e;

  if (!json_is (r, '{'))
    return json_skip_value (r);
  while ((k = json_next_key (r, &first, key, sizeof key)) == 1) {
    if (json_next (r) == -1)
      return -1;
    if (level == 0 && strcmp (key, "format") == 0 &&
        r->type == JSON_STRING)
      snprintf (bi->format, sizeof bi->format, "%s", r->text);
    else if (level < 2 && strcmp (key, path[level]) == 0) {
      if (read_info (r, bi, level + 1) == -1)
        return -1;
    }
    else if (level == 2 && strcmp (key, "bitmaps") == 0 &&
             json_is (r, '[')) {
      bool f = true;
      while ((e = json_next_element (r, &f)) == 1)
        if (read_bitmap (r, bi) == -1)
          return -1;
      if (e == -1)
        return -1;
    }
    else if (json_skip_value (r) == -1)
      return -1;
  }
  return k;
}

static int
read_bitmap_info (struct json_reader *r, void *opaque)
{
  return read_info (r, opaque, 0);
}

/* Is the dirty bitmap of the local image name, whose spec
 * local_chain_spec made, a qcow2's, enabled and consistent (qemu-img
 * info says)?  0, or -1 (error printed: why not).
 */
static int
local_bitmap_check (const char *name, const char *spec, const char *bitmap)
{
  struct bitmap_info bi = { .bitmap = bitmap };

  if (local_qemu_img_info (name, NULL, spec, read_bitmap_info, &bi) == -1)
    return -1;
  if (strcmp (bi.format, "qcow2") != 0) {
    error_at (name, "a %s image has no dirty bitmaps: --since of a local "
              "file needs a qcow2 image with a persistent bitmap "
              "(qemu-img bitmap --add --enable)",
              bi.format[0] ? bi.format : "non-qcow2");
    return -1;
  }
  if (!bi.found) {
    error_at (name, "it has no dirty bitmap '%s' (qemu-img bitmap --add "
              "--enable starts one, when the manifest is made)",
              bitmap);
    return -1;
  }
  if (bi.in_use) {
    error_at (name, "the dirty bitmap '%s' is in use or inconsistent: "
              "qemu has the image open for writing, or stopped without "
              "saving the bitmap (a crash); after a crash, start a new "
              "chain: a full run with --blocks, and a new bitmap",
              bitmap);
    return -1;
  }
  if (!bi.enabled) {
    error_at (name, "the dirty bitmap '%s' is disabled: it records no "
              "writes, so the blocks it calls clean may have changed; run "
              "without --since (with --blocks for a new manifest)",
              bitmap);
    return -1;
  }
  return 0;
}

struct local_server *
local_server_start_bitmap (const char *name, const char *path,
                           const char *bitmap)
{
  char *abs = NULL, *spec = NULL, *alone = NULL, shared[16];
  struct local_pins pins = { NULL, 0 };
  const char *format, *argv[11];
  struct local_server *s = NULL;
  struct stat st;
  int fd, i = 0;

  if ((fd = open (path, O_RDONLY | O_CLOEXEC)) == -1 || fstat (fd, &st) == -1) {
    error_at (name, "%m");
    if (fd >= 0)
      close (fd);
    return NULL;
  }
  if (!S_ISREG (st.st_mode) && !S_ISBLK (st.st_mode)) {
    error_at (name, "not a regular file or block device: --since needs a "
              "qcow2 image with a dirty bitmap");
    close (fd);
    return NULL;
  }
  /* An encrypted qcow2 said so, not as qemu-nbd's failure. */
  format = local_file_format (name, fd, options_format (name));
  close (fd);
  if (format == NULL)
    return NULL;
  if (strcmp (format, "qcow2") != 0) {
    error_at (name, "a %s image has no dirty bitmaps: --since of a local "
              "file needs a qcow2 image with a persistent bitmap "
              "(qemu-img bitmap --add --enable)", format);
    return NULL;
  }
  /* An absolute path, as for any image (see absolute_path); every file
   * it names checked before qemu-img or qemu-nbd opens any.
   */
  if ((abs = absolute_path (path)) == NULL) {
    error_at (name, "%m");
    return NULL;
  }
  if ((spec = local_chain_spec (name, abs, format,
                                options_format (name) ? FORMAT_GIVEN
                                : FORMAT_PROBED, &alone, &pins)) == NULL ||
      local_bitmap_check (name, alone, bitmap) == -1)
    goto out;
  /* Not --persistent: qemu-nbd has no --exit-with-parent, but exits
   * when its last client hangs up, and nbdsum keeps its first
   * connection open until the end.
   */
  snprintf (shared, sizeof shared, "%d", MAX_CONNECTIONS);
  argv[i++] = "qemu-nbd";
  argv[i++] = "--read-only";
  argv[i++] = "--shared";
  argv[i++] = shared;
  argv[i++] = "--allocation-depth";
  argv[i++] = "--bitmap";
  argv[i++] = bitmap;
  argv[i++] = spec;
  argv[i] = NULL;
  s = local_serve (name, "qemu-nbd", local_exec_command, argv, true);
  if (s) {
    s->pins = pins;
    pins = (struct local_pins) { NULL, 0 };
  }
 out:
  local_pins_close (&pins);
  free (alone);
  free (spec);
  free (abs);
  return s;
}
