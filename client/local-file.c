/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what a local file is (see local.h): an image of a format
 * qemu reads, probed as qemu probes it (lib/imgformat.c), refused
 * where nbdsum cannot read its guest content; or a stream, read to
 * its end.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "imgformat.h"
#include "local.h"
#include "messages.h"
#include "options.h"
#include "signals.h"

/* Read all of count bytes at offset, or as many as there are.  -1 on
 * an error.
 */
ssize_t
local_pread_full (int fd, void *buf, size_t count, off_t offset)
{
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
  return done;
}

const char *
local_file_format (const char *name, int fd, const char *given)
{
  uint8_t head[BLK_PROBE_HEAD], footer[BLK_VHD_FOOTER];
  struct blk_probe p;
  const off_t size = lseek (fd, 0, SEEK_END);
  ssize_t len = local_pread_full (fd, head, sizeof head, 0);
  bool have_footer = false;

  if (len >= 0 && size >= (off_t) sizeof footer) {
    const ssize_t r = local_pread_full (fd, footer, sizeof footer,
                                  size - sizeof footer);
    have_footer = r == (ssize_t) sizeof footer;
    if (r == -1)
      len = -1;
  }
  if (len == -1) {
    error_at (name, "read: %m");
    return NULL;
  }
  blk_probe_image (head, len, name, have_footer ? footer : NULL, &p);
  if (p.encrypted && (given == NULL || strcmp (given, p.format) == 0)) {
    error_at (name, "an encrypted %s image: its guest content needs the "
              "secret, which nbdsum does not have (serve it yourself, with "
              "qemu-nbd --object secret,... as [ CMD ]%s)", p.format,
              opts->since ? "" : ", or give --format=raw for its bytes");
    return NULL;
  }
  if (given)
    return given;
  if (p.also) {
    error_at (name, "looks like both a %s and a %s image: give --format "
              "to say which (or --format=raw for its bytes)", p.format,
              p.also);
    return NULL;
  }
  if (p.fixed_vhd) {
    error_at (name, "looks like a fixed-size VHD: give --format=vpc for "
              "its guest content or --format=raw for its bytes");
    return NULL;
  }
  if (strcmp (p.format, "luks") == 0) {
    error_at (name, "a luks image (encrypted): nbdsum cannot read its "
              "guest content without the secret (serve it yourself, with "
              "qemu-nbd --object secret,... as [ CMD ], or give "
              "--format=raw for its bytes)");
    return NULL;
  }
  return p.format;
}

bool
local_kernel_file (const char *path)
{
  static const unsigned long magics[] = {
    0x9fa0,                     /* proc */
    0x62656572,                 /* sysfs */
    0x64626720,                 /* debugfs */
    0x73636673,                 /* securityfs */
    0x27e0eb,                   /* cgroup */
    0x63677270,                 /* cgroup2 */
    0x74726163,                 /* tracefs */
    0x62656570,                 /* configfs */
    0xcafe4a11,                 /* bpf */
    0xde5e81e4,                 /* efivarfs */
    0x6165676c,                 /* pstore */
    0x65735543,                 /* fusectl */
    0x19800202,                 /* mqueue */
    0x42494e4d,                 /* binfmt_misc */
    0xf97cff8c,                 /* selinuxfs */
    0x43415d53,                 /* smackfs */
    0x6e736673,                 /* nsfs */
  };
  struct statfs sfs;

  if (statfs (path, &sfs) == -1)
    return false;
  for (size_t i = 0; i < sizeof magics / sizeof magics[0]; i++)
    if ((unsigned long) sfs.f_type == magics[i])
      return true;
  return false;
}

bool
local_file_has_bytes (int fd)
{
  char c;

  return pread (fd, &c, 1, 0) == 1;
}

int
local_stream_open (const char *path)
{
  struct stat st;
  int fd = stop_signals_open (path, O_RDONLY | O_CLOEXEC);

  /* A fifo nobody writes to: the signal ended the wait, and opening it
   * again would wait for another.
   */
  if (fd == -1)
    return errno == EINTR && stop_signal () ? -2 : -1;
  if (fstat (fd, &st) == 0 &&
      (S_ISFIFO (st.st_mode) || S_ISCHR (st.st_mode) ||
       (S_ISREG (st.st_mode) && st.st_size == 0 && local_file_has_bytes (fd))))
    return fd;
  close (fd);
  return -1;
}
