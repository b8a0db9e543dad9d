/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* A read-only file with a fixed latency per read, for bench/latency
 * below a millisecond (nbdkit 1.32's delay filter takes whole
 * milliseconds).  bench/latency builds it once:
 *
 *   cc -shared -fPIC -o slowfile.so bench/slowfile.c
 *   nbdkit ./slowfile.so file=IMG delay-us=500
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static char *file;
static unsigned delay_us;
static int fd = -1;

static void
slowfile_unload (void)
{
  if (fd >= 0)
    close (fd);
  free (file);
}

static int
slowfile_config (const char *key, const char *value)
{
  if (strcmp (key, "file") == 0) {
    free (file);
    file = nbdkit_realpath (value);
    return file ? 0 : -1;
  }
  if (strcmp (key, "delay-us") == 0)
    return nbdkit_parse_unsigned ("delay-us", value, &delay_us);
  nbdkit_error ("slowfile: unknown parameter '%s'", key);
  return -1;
}

static int
slowfile_get_ready (void)
{
  if (file == NULL) {
    nbdkit_error ("slowfile: file= is needed");
    return -1;
  }
  fd = open (file, O_RDONLY | O_CLOEXEC);
  if (fd == -1) {
    nbdkit_error ("slowfile: %s: %m", file);
    return -1;
  }
  return 0;
}

static void *
slowfile_open (int readonly)
{
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
slowfile_get_size (void *handle)
{
  struct stat st;

  if (fstat (fd, &st) == -1) {
    nbdkit_error ("slowfile: fstat: %m");
    return -1;
  }
  return st.st_size;
}

static int
slowfile_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
                uint32_t flags)
{
  char *p = buf;

  if (nbdkit_nanosleep (delay_us / 1000000, delay_us % 1000000 * 1000) == -1)
    return -1;
  while (count > 0) {
    const ssize_t r = pread (fd, p, count, offset);
    if (r == -1) {
      nbdkit_error ("slowfile: pread: %m");
      return -1;
    }
    if (r == 0) {
      nbdkit_set_error (EIO);
      nbdkit_error ("slowfile: pread: end of file");
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name = "slowfile",
  .unload = slowfile_unload,
  .config = slowfile_config,
  .get_ready = slowfile_get_ready,
  .open = slowfile_open,
  .get_size = slowfile_get_size,
  .pread = slowfile_pread,
};

NBDKIT_REGISTER_PLUGIN (plugin)
