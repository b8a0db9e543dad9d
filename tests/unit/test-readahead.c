/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: plugin/readahead.c, the filter's pool of readers, built
 * into this program with thread creation that fails on demand and
 * nbdkit's logging replaced.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tap.h"

static bool fail_create;        /* pthread_create fails with EAGAIN */
static unsigned create_calls;

static int test_pthread_create (pthread_t *thread,
                                const pthread_attr_t *attr,
                                void *(*start) (void *), void *arg);

#define pthread_create test_pthread_create
#include "../../plugin/readahead.c"
#undef pthread_create

static int
test_pthread_create (pthread_t *thread, const pthread_attr_t *attr,
                     void *(*start) (void *), void *arg)
{
  create_calls++;
  if (fail_create)
    return EAGAIN;
  return pthread_create (thread, attr, start, arg);
}

static char last_error[256];
static unsigned debug_calls;

void
nbdkit_debug (const char *fmt, ...)
{
  va_list ap;

  debug_calls++;
  va_start (ap, fmt);
  fputs ("# debug: ", stdout);
  vprintf (fmt, ap);
  putchar ('\n');
  va_end (ap);
}

void
nbdkit_error (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (last_error, sizeof last_error, fmt, ap);
  va_end (ap);
  printf ("# error: %s\n", last_error);
}

/* A plugin whose byte at offset o is o % 251, failing reads at
 * BAD_OFFSET with EPERM.
 */
#define BAD_OFFSET 4096
#define LEN 512

static int
fake_pread (nbdkit_next *next, void *buf, uint32_t count, uint64_t offset,
            uint32_t flags, int *err)
{
  if (offset == BAD_OFFSET) {
    *err = EPERM;
    return -1;
  }
  for (uint32_t i = 0; i < count; i++)
    ((uint8_t *) buf)[i] = (offset + i) % 251;
  return 0;
}

static nbdkit_next fake_next = { .pread = fake_pread };

static bool
pattern_at (const uint8_t *buf, uint64_t offset)
{
  for (uint32_t i = 0; i < LEN; i++)
    if (buf[i] != (offset + i) % 251)
      return false;
  return true;
}

static void
test_pool (void)
{
  static uint8_t bufs[BLKHASH_MAX_READERS][LEN];
  struct blkhash_reader *rd[BLKHASH_MAX_READERS], *again;
  unsigned n, right = 0, calls;
  int r, err = 0;

  for (n = 0; n < BLKHASH_MAX_READERS; n++)
    if ((rd[n] = blkhash_reader_get ()) == NULL)
      break;
  ok (n == BLKHASH_MAX_READERS, "%u readers start (want %d)", n,
      BLKHASH_MAX_READERS);
  ok (blkhash_reader_get () == NULL, "none more: the request reads alone");
  for (unsigned i = 0; i < n; i++)
    blkhash_reader_start (rd[i], &fake_next, bufs[i], LEN,
                          (uint64_t) i * 10000);
  for (unsigned i = 0; i < n; i++)
    right += blkhash_reader_finish (rd[i], &err) == 0 &&
      pattern_at (bufs[i], (uint64_t) i * 10000);
  ok (right == n, "%u of %u reads in flight at once are right", right, n);

  calls = create_calls;
  again = blkhash_reader_get ();
  ok (again != NULL && create_calls == calls,
      "a finished reader is taken again, no thread started");
  blkhash_reader_start (again, &fake_next, bufs[0], LEN, BAD_OFFSET);
  err = 0;
  r = blkhash_reader_finish (again, &err);
  ok (r == -1 && err == EPERM, "a failed read: -1 and the plugin's errno "
      "(%d, %s)", r, strerror (err));
  blkhash_readahead_fini ();
}

/* A failed pthread_create (a thread limit) leaves the request to read
 * alone; once threads can start again, so do readers.
 */
static void
test_create_fails (void)
{
  struct blkhash_reader *rd;
  uint8_t buf[LEN];
  unsigned got = 0, calls;
  int err = 0;

  fail_create = true;
  debug_calls = 0;
  for (unsigned i = 0; i < 2 * BLKHASH_MAX_READERS; i++)
    got += blkhash_reader_get () != NULL;
  ok (got == 0, "while threads cannot start, no reader");
  ok (debug_calls == 1, "failures in a row logged once (%u)", debug_calls);
  fail_create = false;
  calls = create_calls;
  rd = blkhash_reader_get ();
  ok (rd != NULL && create_calls == calls + 1,
      "after %d failed starts, a reader starts", 2 * BLKHASH_MAX_READERS);
  if (rd) {
    blkhash_reader_start (rd, &fake_next, buf, LEN, 0);
    ok (blkhash_reader_finish (rd, &err) == 0 && pattern_at (buf, 0),
        "and reads");
  }
  blkhash_readahead_fini ();
}

int
main (void)
{
  blkhash_readahead_init ();
  test_pool ();
  test_create_fails ();
  return done_testing ();
}
