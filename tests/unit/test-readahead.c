/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* Unit tests: filter/readahead.c, the filter's pool of readers and
 * its CPU gate, linked with thread creation that fails on demand and a
 * clock the test sets (ld --wrap, see Makefile.am), nbdkit's logging
 * and the filter's parameters provided here.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "filter.h"
#include "tap.h"

/* The parameters blkhash.c would set. */
enum blkhash_readahead blkhash_readahead;
bool blkhash_plugin_parallel;

static bool fail_create;        /* pthread_create fails with EAGAIN */
static unsigned create_calls;

/* The clocks the CPU gate reads, in ms. */
static uint64_t wall_ms, cpu_ms;

int __real_pthread_create (pthread_t *thread, const pthread_attr_t *attr,
                           void *(*start) (void *), void *arg);
int __wrap_pthread_create (pthread_t *thread, const pthread_attr_t *attr,
                           void *(*start) (void *), void *arg);
int __wrap_clock_gettime (clockid_t clock, struct timespec *ts);

int
__wrap_clock_gettime (clockid_t clock, struct timespec *ts)
{
  const uint64_t ms = clock == CLOCK_MONOTONIC ? wall_ms : cpu_ms;

  ts->tv_sec = ms / 1000;
  ts->tv_nsec = ms % 1000 * 1000000;
  return 0;
}

int
__wrap_pthread_create (pthread_t *thread, const pthread_attr_t *attr,
                       void *(*start) (void *), void *arg)
{
  create_calls++;
  if (fail_create)
    return EAGAIN;
  return __real_pthread_create (thread, attr, start, arg);
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
  ok (strcmp (last_error, "blkhash: read-ahead of 512 bytes at 4096 "
              "failed: Operation not permitted") == 0,
      "and an error naming the read");
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

/* This thread's last reads: n slow ones (2 ms) after a fast one. */
static void
slow_reads (unsigned n)
{
  blkhash_readahead_note (1000);
  for (unsigned i = 0; i < n; i++)
    blkhash_readahead_note (2000000);
}

/* blkhash-readahead=auto on 2 CPUs, samples every 20 ms: pair reads
 * after two slow reads in a row, while the process used under 80% of
 * the CPUs (then until 90%).
 */
static void
test_cpu_gate (void)
{
  blkhash_readahead = BLKHASH_READAHEAD_AUTO;
  blkhash_plugin_parallel = true;

  wall_ms = 1000;
  slow_reads (2);
  ok (!blkhash_readahead_wanted (), "no pairs before a first sample");
  wall_ms = 1020, cpu_ms = 4;
  slow_reads (1);
  ok (!blkhash_readahead_wanted (), "no pairs after one slow read");
  slow_reads (2);
  ok (blkhash_readahead_wanted (), "pairs: 10%% of the CPUs used");
  /* A thread that read the clock just before another took the sample
   * at 1020 ms: that sample is fresh, not 2^64 ns old.
   */
  wall_ms = 1019;
  ok (blkhash_readahead_wanted (), "a clock read before the last sample "
      "leaves the gate as it was");
  wall_ms = 1039, cpu_ms += 39;
  ok (blkhash_readahead_wanted (), "and the sample time did not go back: "
      "19 ms after it, no new sample");
  wall_ms = 1040;
  ok (!blkhash_readahead_wanted (), "97%% used: no more pairs");
  wall_ms = 1060, cpu_ms += 34;
  ok (!blkhash_readahead_wanted (), "85%% used: not pairing again yet");
  wall_ms = 1080, cpu_ms += 10;
  ok (blkhash_readahead_wanted (), "25%% used: pairs again");
  wall_ms = 1100, cpu_ms += 34;
  ok (blkhash_readahead_wanted (), "85%% used while pairing: still pairs");
  wall_ms = 1120, cpu_ms += 37;
  ok (!blkhash_readahead_wanted (), "92%% used: no more pairs");
  wall_ms = 1240, cpu_ms += 1;
  ok (!blkhash_readahead_wanted (), "after a pause, no pairs until the "
      "next sample");
  slow_reads (1);
  blkhash_readahead = BLKHASH_READAHEAD_ON;
  ok (blkhash_readahead_wanted (), "on: pairs after any read");
  blkhash_plugin_parallel = false;
  ok (!blkhash_readahead_wanted (), "never with a plugin that does not "
      "take parallel requests");
}

/* The thread's buffer: one, of BLKHASH_READ_SIZE, kept. */
static void
test_buffer (void)
{
  uint8_t *b1 = blkhash_readahead_buffer ();
  uint8_t *b2 = blkhash_readahead_buffer ();

  ok (b1 != NULL && b1 == b2, "one read-ahead buffer per thread");
  if (b1)
    memset (b1, 1, BLKHASH_READ_SIZE);
}

int
main (void)
{
  /* Each test ends with fini (the readers joined), as at unload. */
  blkhash_readahead_init (2);
  test_pool ();
  blkhash_readahead_init (2);
  test_create_fails ();
  blkhash_readahead_init (2);
  test_cpu_gate ();
  test_buffer ();
  blkhash_readahead_fini ();
  return done_testing ();
}
