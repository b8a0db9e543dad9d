/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* A hostile source for the import gate's tests (filter-import.bats):
 * an nbdkit plugin serving FILE read-only, except the byte at BADOFF,
 * which it serves as BADBYTE
 *
 *   mode=first   on that byte's first fetch only (a source that
 *                changes after the first look, a mirror replaced)
 *   mode=later   on every fetch but the first
 *   mode=big     in reads of BIG bytes or more (default 1M): what a
 *                client's large reads get, not the filter's own
 *   mode=none    never (the honest source)
 *
 * and counts the fetches of that byte in nbdkit's debug log.  With
 * zero=OFF+LEN its extents call that range zeros (whatever it holds)
 * and the rest data, the whole image's list for every request: nbdkit
 * keeps what it sends.  With othersize=SIZE every second connection is
 * told the export has SIZE bytes (zeros past the file): a hostile HTTP
 * server's answers to each connection's HEAD.  Built by
 * the suite: cc -shared -fPIC $(pkg-config --cflags nbdkit) hostile.c
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

enum mode { MODE_NONE, MODE_FIRST, MODE_LATER, MODE_BIG };

static int fd = -1;
static int64_t size;
static int64_t badoff = -1;
static int badbyte = 0xff;
static enum mode mode = MODE_NONE;
static int64_t big = 1024 * 1024;
static int64_t zero_off = -1, zero_len;
static int64_t othersize = -1;
static unsigned opens;
static unsigned fetches;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int
hostile_config (const char *key, const char *value)
{
  if (strcmp (key, "file") == 0) {
    struct stat st;
    if ((fd = open (value, O_RDONLY | O_CLOEXEC)) == -1 ||
        fstat (fd, &st) == -1) {
      nbdkit_error ("%s: %m", value);
      return -1;
    }
    size = st.st_size;
  }
  else if (strcmp (key, "badoff") == 0)
    badoff = strtoll (value, NULL, 0);
  else if (strcmp (key, "badbyte") == 0)
    badbyte = strtol (value, NULL, 0);
  else if (strcmp (key, "zero") == 0) {
    char *end;
    zero_off = strtoll (value, &end, 0);
    if (*end != '+') {
      nbdkit_error ("zero=%s: OFF+LEN", value);
      return -1;
    }
    zero_len = strtoll (end + 1, NULL, 0);
  }
  else if (strcmp (key, "othersize") == 0)
    othersize = strtoll (value, NULL, 0);
  else if (strcmp (key, "big") == 0)
    big = strtoll (value, NULL, 0);
  else if (strcmp (key, "mode") == 0) {
    if (strcmp (value, "first") == 0) mode = MODE_FIRST;
    else if (strcmp (value, "later") == 0) mode = MODE_LATER;
    else if (strcmp (value, "big") == 0) mode = MODE_BIG;
    else if (strcmp (value, "none") == 0) mode = MODE_NONE;
    else {
      nbdkit_error ("mode=%s: first, later, big or none", value);
      return -1;
    }
  }
  else {
    nbdkit_error ("unknown parameter %s", key);
    return -1;
  }
  return 0;
}

static int
hostile_config_complete (void)
{
  if (fd == -1) {
    nbdkit_error ("file= is needed");
    return -1;
  }
  return 0;
}

static int64_t sizes[2];

static int
hostile_get_ready (void)
{
  sizes[0] = size;
  sizes[1] = othersize >= 0 ? othersize : size;
  return 0;
}

static void *
hostile_open (int readonly)
{
  unsigned k;

  pthread_mutex_lock (&lock);
  k = opens++;
  pthread_mutex_unlock (&lock);
  return &sizes[k % 2];
}

static int64_t
hostile_get_size (void *handle)
{
  return *(int64_t *) handle;
}

static int
hostile_can_write (void *handle)
{
  return 0;
}

static int
hostile_can_multi_conn (void *handle)
{
  return 1;
}

static int
hostile_can_extents (void *handle)
{
  return zero_off >= 0;
}

static int
hostile_extents (void *handle, uint32_t count, uint64_t offset,
                 uint32_t flags, struct nbdkit_extents *extents)
{
  const int64_t zero_end = zero_off + zero_len;

  if ((zero_off > 0 && nbdkit_add_extent (extents, 0, zero_off, 0) == -1) ||
      nbdkit_add_extent (extents, zero_off, zero_len,
                         NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO) == -1 ||
      (zero_end < size &&
       nbdkit_add_extent (extents, zero_end, size - zero_end, 0) == -1))
    return -1;
  return 0;
}

static int
hostile_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
               uint32_t flags)
{
  uint32_t done = 0;

  while (done < count) {
    ssize_t r = pread (fd, (char *) buf + done, count - done, offset + done);
    if (r == 0 && offset + done >= (uint64_t) size) {
      memset ((char *) buf + done, 0, count - done);
      break;
    }
    if (r <= 0) {
      nbdkit_error ("pread: %s", r == 0 ? "end of file" : strerror (errno));
      nbdkit_set_error (EIO);
      return -1;
    }
    done += r;
  }
  if (badoff >= 0 && (uint64_t) badoff >= offset &&
      (uint64_t) badoff < offset + count) {
    unsigned k;
    int bad;

    pthread_mutex_lock (&lock);
    k = fetches++;
    pthread_mutex_unlock (&lock);
    switch (mode) {
    case MODE_FIRST: bad = k == 0; break;
    case MODE_LATER: bad = k > 0; break;
    case MODE_BIG: bad = count >= big; break;
    default: bad = 0;
    }
    if (bad)
      ((unsigned char *) buf)[badoff - offset] = badbyte;
    nbdkit_debug ("hostile: fetch %u of byte %" PRIi64 " (a read of %" PRIu32
                  " bytes): %s", k, badoff, count, bad ? "BAD" : "good");
  }
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name = "hostile",
  .config = hostile_config,
  .config_complete = hostile_config_complete,
  .get_ready = hostile_get_ready,
  .open = hostile_open,
  .get_size = hostile_get_size,
  .can_write = hostile_can_write,
  .can_multi_conn = hostile_can_multi_conn,
  .can_extents = hostile_can_extents,
  .extents = hostile_extents,
  .pread = hostile_pread,
};

NBDKIT_REGISTER_PLUGIN (plugin)
