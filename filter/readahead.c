/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash filter: read-ahead on storage with latency.
 *
 * nbdkit runs a request on one thread, so a CACHE request reads its
 * span one piece at a time: on storage with latency L, one request
 * hashes at most a piece per L however idle the CPUs are.  A reader
 * from this pool reads the next piece while the requester reads and
 * hashes the current one, so the request keeps two reads in flight.
 *
 * A hand-off costs two wake-ups per pair of pieces, pure loss when the
 * reads are fast or the CPUs are busy hashing anyway.  So with
 * blkhash-readahead=auto a thread pairs reads only after two slow reads
 * in a row (one could be the requester waiting for a CPU) and while
 * this process used less than most of the online CPUs lately.
 *
 * Readers start on demand, at most BLKHASH_MAX_READERS, and are joined
 * at unload; a requester that finds none free reads alone.  The buffer
 * a reader fills belongs to the requester's thread (this file keeps it
 * with the thread's count of slow reads), so memory stays one extra
 * read buffer per hashing thread that paired reads.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleanup.h"
#include "filter.h"

/* A read slower than this is storage, not the page cache. */
#define SLOW_READ_NS 1000000
/* How often the CPU use of the process is sampled. */
#define SAMPLE_NS 20000000
/* Pair reads while the process used less than this share of the
 * online CPUs, in percent; once pairing, until it uses more than
 * CPU_BUSY_LEAVE (the hand-offs themselves cost some CPU).
 */
#define CPU_BUSY_ENTER 80
#define CPU_BUSY_LEAVE 90

/* What read-ahead keeps per hashing thread. */
struct ahead {
  uint8_t *buf;                 /* BLKHASH_READ_SIZE, once paired */
  unsigned slow_reads;          /* in a row, carried from run to run */
};
static pthread_key_t ahead_key;

struct blkhash_reader {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool pending, done, quit;
  nbdkit_next *next;
  void *buf;
  uint32_t len;
  uint64_t off;
  int r, err;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct blkhash_reader *readers[BLKHASH_MAX_READERS];
static unsigned nreaders;               /* started, in readers[] */
static unsigned nstarting;              /* being started, outside the lock */
static bool start_failed;               /* the last start failed */
static struct blkhash_reader *idle[BLKHASH_MAX_READERS];
static unsigned nidle;

/* CPU use, sampled by whichever thread notices the sample is old. */
static pthread_mutex_t sample_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t sample_wall_ns;
static uint64_t sample_cpu_ns;
static _Atomic bool cpus_have_room;
static unsigned online_cpus = 1;

static uint64_t
clock_ns (clockid_t clock)
{
  struct timespec ts;

  clock_gettime (clock, &ts);
  return ts.tv_sec * UINT64_C (1000000000) + ts.tv_nsec;
}

uint64_t
blkhash_now_ns (void)
{
  return clock_ns (CLOCK_MONOTONIC);
}

static void
ahead_free (void *opaque)
{
  struct ahead *a = opaque;

  if (a) {
    free (a->buf);
    free (a);
  }
}

int
blkhash_readahead_init (unsigned cpus)
{
  int r = pthread_key_create (&ahead_key, ahead_free);

  if (r != 0) {
    errno = r;
    blkhash_error ("pthread_key_create: %m");
    return -1;
  }
  online_cpus = cpus;
  return 0;
}

/* This thread's state, NULL when out of memory. */
static struct ahead *
this_thread (void)
{
  struct ahead *a = pthread_getspecific (ahead_key);

  if (a == NULL && (a = calloc (1, sizeof *a)) != NULL)
    pthread_setspecific (ahead_key, a);
  return a;
}

void *
blkhash_readahead_buffer (void)
{
  struct ahead *a = this_thread ();
  void *p;

  if (a && a->buf == NULL &&
      posix_memalign (&p, 4096, BLKHASH_READ_SIZE) == 0)
    a->buf = p;
  return a ? a->buf : NULL;
}

/* Did this process leave CPU time unused lately?  Sampled at most
 * every SAMPLE_NS; between samples the last answer stands.
 */
static bool
readahead_cpus_have_room (void)
{
  const uint64_t now = blkhash_now_ns ();

  if (now - atomic_load (&sample_wall_ns) < SAMPLE_NS ||
      pthread_mutex_trylock (&sample_lock) != 0)
    return atomic_load (&cpus_have_room);

  const uint64_t last = atomic_load (&sample_wall_ns);
  /* now < last: another thread sampled after this one read the clock,
   * so the sample is fresh (now - last would wrap).
   */
  if (now >= last && now - last >= SAMPLE_NS) {
    const uint64_t cpu = clock_ns (CLOCK_PROCESS_CPUTIME_ID);
    /* No room before a first sample, or after a pause between slow
     * reads: starting readers costs more than a fast read.
     */
    if (now - last > 4 * SAMPLE_NS)
      atomic_store (&cpus_have_room, false);
    else {
      const uint64_t used = 100 * (cpu - sample_cpu_ns);
      const uint64_t limit = atomic_load (&cpus_have_room) ?
        CPU_BUSY_LEAVE : CPU_BUSY_ENTER;
      atomic_store (&cpus_have_room,
                    used < limit * (now - last) * online_cpus);
    }
    sample_cpu_ns = cpu;
    atomic_store (&sample_wall_ns, now);
  }
  pthread_mutex_unlock (&sample_lock);  /* a trylock: not a scope */
  return atomic_load (&cpus_have_room);
}

bool
blkhash_readahead_wanted (void)
{
  const struct ahead *a;

  if (!blkhash_plugin_parallel)
    return false;
  switch (blkhash_readahead) {
  case BLKHASH_READAHEAD_ON:
    return true;
  case BLKHASH_READAHEAD_OFF:
    return false;
  case BLKHASH_READAHEAD_AUTO:
    break;
  }
  a = pthread_getspecific (ahead_key);
  return a && a->slow_reads >= 2 && readahead_cpus_have_room ();
}

void
blkhash_readahead_note (uint64_t read_ns)
{
  struct ahead *a = this_thread ();

  if (a)
    a->slow_reads = read_ns > SLOW_READ_NS ? a->slow_reads + 1 : 0;
}

/* The reader's side of a hand-off: wait for a read to do (true) or
 * for the word to quit (false).
 */
static bool
reader_wait (struct blkhash_reader *rd)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&rd->lock);
  while (!rd->pending && !rd->quit)
    pthread_cond_wait (&rd->cond, &rd->lock);
  return !rd->quit;
}

static void
reader_done (struct blkhash_reader *rd, int r, int err)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&rd->lock);
  rd->r = r;
  rd->err = err;
  rd->pending = false;
  rd->done = true;
  pthread_cond_signal (&rd->cond);
}

/* The plugin read, outside the lock: the requester set its fields
 * before pending and leaves them alone until done.
 */
static void *
reader_main (void *opaque)
{
  struct blkhash_reader *rd = opaque;

  while (reader_wait (rd)) {
    int err = 0;
    const int r = rd->next->pread (rd->next, rd->buf, rd->len, rd->off, 0,
                                   &err);
    reader_done (rd, r, err);
  }
  return NULL;
}

/* A new reader, or NULL with *r the error. */
static struct blkhash_reader *
reader_new (int *r)
{
  struct blkhash_reader *rd = calloc (1, sizeof *rd);

  if (rd == NULL) {
    *r = ENOMEM;
    return NULL;
  }
  pthread_mutex_init (&rd->lock, NULL);
  pthread_cond_init (&rd->cond, NULL);
  *r = pthread_create (&rd->thread, NULL, reader_main, rd);
  if (*r != 0) {
    pthread_mutex_destroy (&rd->lock);
    pthread_cond_destroy (&rd->cond);
    free (rd);
    return NULL;
  }
  return rd;
}

struct blkhash_reader *
blkhash_reader_get (void)
{
  struct blkhash_reader *rd = NULL;
  bool first_failure = false;
  int r;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&pool_lock);
    if (nidle > 0)
      return idle[--nidle];
    if (nreaders + nstarting == BLKHASH_MAX_READERS)
      return NULL;
    nstarting++;
  }

  /* Started outside the lock: a burst of requests starts many.  A
   * failure (a thread limit) is not an error: the requester reads
   * alone, and a later request tries again.
   */
  rd = reader_new (&r);
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&pool_lock);
    nstarting--;
    if (rd != NULL)
      readers[nreaders++] = rd;
    first_failure = rd == NULL && !start_failed;
    start_failed = rd == NULL;
  }
  if (first_failure)
    nbdkit_debug ("blkhash: read-ahead thread: %s (reading alone until "
                  "one starts)", strerror (r));
  return rd;
}

void
blkhash_reader_start (struct blkhash_reader *rd, nbdkit_next *next,
                      void *buf, uint32_t len, uint64_t off)
{
  ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&rd->lock);
  rd->next = next;
  rd->buf = buf;
  rd->len = len;
  rd->off = off;
  rd->done = false;
  rd->pending = true;
  pthread_cond_signal (&rd->cond);
}

int
blkhash_reader_finish (struct blkhash_reader *rd, int *err)
{
  uint32_t len;
  uint64_t off;
  int r;

  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&rd->lock);
    while (!rd->done)
      pthread_cond_wait (&rd->cond, &rd->lock);
    r = rd->r;
    if (r == -1)
      *err = rd->err ? rd->err : EIO;
    len = rd->len;
    off = rd->off;
  }
  {
    ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&pool_lock);
    idle[nidle++] = rd;
  }

  /* The plugin's own message came from the reader's thread, which
   * nbdkit does not name: this one says which connection failed.
   */
  if (r == -1) {
    errno = *err;
    blkhash_error ("blkhash: read-ahead of %" PRIu32 " bytes at %" PRIu64
                   " failed: %m", len, off);
  }
  return r;
}

/* At unload no request runs, so every reader waits for work. */
void
blkhash_readahead_fini (void)
{
  for (unsigned i = 0; i < nreaders; i++) {
    struct blkhash_reader *rd = readers[i];
    {
      ACQUIRE_LOCK_FOR_CURRENT_SCOPE (&rd->lock);
      rd->quit = true;
      pthread_cond_signal (&rd->cond);
    }
    pthread_join (rd->thread, NULL);
    pthread_mutex_destroy (&rd->lock);
    pthread_cond_destroy (&rd->cond);
    free (rd);
    readers[i] = NULL;
  }
  nreaders = nidle = 0;
  start_failed = false;
  /* Other threads' state went when they exited; this one's now. */
  ahead_free (pthread_getspecific (ahead_key));
  pthread_setspecific (ahead_key, NULL);
  pthread_key_delete (ahead_key);
}
