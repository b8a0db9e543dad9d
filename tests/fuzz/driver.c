/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdkit-blkhash: a deterministic driver for one fuzz target.
 *
 * Linked with one fuzz-TARGET.c as driver-TARGET.  Runs the target over
 * its seed corpus, then over pseudo-random mutations of the seeds from
 * a fixed seed, so that make check is quick and repeatable without
 * libFuzzer.  Prints TAP.  A crash or a failed property ends the run;
 * the input is then saved to crash-TARGET (in $FUZZ_CRASH_DIR, else the
 * current directory) and can be replayed by naming it:
 *
 *   driver-TARGET [-n MUTATIONS] [-s SEED] [CORPUS-DIR | FILE]...
 *
 * With no corpus, $top_srcdir/tests/fuzz/corpus/TARGET is used.
 */
#include <config.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

#define DEFAULT_MUTATIONS 50000
#define MAX_LEN (64 * 1024)

struct input {
  uint8_t *data;
  size_t len;
};

static struct {
  struct input *v;
  size_t n;
} corpus;

static const char *target, *program;
static char crash_path[4096];

/* The input being run, for the crash handlers. */
static const uint8_t *current;
static size_t current_len;

static void __attribute__ ((noreturn))
die (const char *what)
{
  fprintf (stderr, "driver-%s: %s: %s\n", target, what, strerror (errno));
  exit (EXIT_FAILURE);
}

/* Only async-signal-safe calls: this runs in a signal handler. */
static void
save_current (void)
{
  static const char msg[] = "# the input that failed was saved; replay: ";
  int fd;

  if (current == NULL)
    return;
  fd = open (crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd == -1)
    return;
  if (write (fd, current, current_len) == -1) { /* nothing to do */ }
  close (fd);
  if (write (2, msg, sizeof msg - 1) == -1 ||
      write (2, program, strlen (program)) == -1 ||
      write (2, " ", 1) == -1 ||
      write (2, crash_path, strlen (crash_path)) == -1 ||
      write (2, "\n", 1) == -1) { /* nothing to do */ }
  current = NULL;
}

static void
on_signal (int sig)
{
  save_current ();
  signal (sig, SIG_DFL);
  raise (sig);
}

/* The sanitizers exit without a signal, but call this first. */
extern void __sanitizer_set_death_callback (void (*) (void))
  __attribute__ ((weak));

static void
catch_crashes (void)
{
  static const int sigs[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
  const char *dir = getenv ("FUZZ_CRASH_DIR");

  snprintf (crash_path, sizeof crash_path, "%s/crash-%s",
            dir && *dir ? dir : ".", target);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    signal (sigs[i], on_signal);
  if (__sanitizer_set_death_callback)
    __sanitizer_set_death_callback (save_current);
}

/* Run the target on an exact-size copy, so overreads are caught (ASan
 * also catches a read of an empty input's malloc (0)).
 */
static void
run_one (const uint8_t *data, size_t len)
{
  uint8_t *copy = malloc (len);

  if (copy == NULL && len > 0)
    die ("malloc");
  memcpy (copy, data, len);
  current = copy;
  current_len = len;
  LLVMFuzzerTestOneInput (copy, len);
  current = NULL;
  free (copy);
}

static void
add_file (const char *path)
{
  struct input in = { NULL, 0 };
  FILE *fp = fopen (path, "rb");
  struct input *v;

  if (fp == NULL)
    die (path);
  in.data = malloc (MAX_LEN);
  if (in.data == NULL)
    die ("malloc");
  in.len = fread (in.data, 1, MAX_LEN, fp);
  if (ferror (fp))
    die (path);
  fclose (fp);
  v = realloc (corpus.v, (corpus.n + 1) * sizeof *v);
  if (v == NULL)
    die ("realloc");
  corpus.v = v;
  corpus.v[corpus.n++] = in;
}

/* A directory's files in name order, for the same run everywhere. */
static void
add_dir (const char *dir)
{
  struct dirent **names;
  int n = scandir (dir, &names, NULL, alphasort);
  char path[4096];

  if (n == -1)
    die (dir);
  for (int i = 0; i < n; i++) {
    struct stat st;

    snprintf (path, sizeof path, "%s/%s", dir, names[i]->d_name);
    if (stat (path, &st) == 0 && S_ISREG (st.st_mode))
      add_file (path);
    free (names[i]);
  }
  free (names);
}

static void
add_path (const char *path)
{
  struct stat st;

  if (stat (path, &st) == -1)
    die (path);
  if (S_ISDIR (st.st_mode))
    add_dir (path);
  else
    add_file (path);
}

/* xorshift64*: small, and the same sequence on every machine. */
static uint64_t rng_state;

static uint64_t
rng (void)
{
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * UINT64_C (0x2545F4914F6CDD1D);
}

static size_t
below (size_t n)
{
  return n ? rng () % n : 0;
}

/* Bytes and numbers that the parsers treat specially. */
static const char special_bytes[] = "\0\\\n\r @:/* 09afAFKkMGTiIbB";
static const uint64_t special_values[] = {
  0, 1, 4095, 4096, 8192, 65536, 1 << 24, UINT32_MAX, INT64_MAX,
  (uint64_t) INT64_MAX + 1, UINT64_MAX, UINT64_MAX / 32, 0x424c4b4841534831,
};

/* One random edit of buf (*len bytes of MAX_LEN). */
static void
mutate_once (uint8_t *buf, size_t *len)
{
  const struct input *other = &corpus.v[below (corpus.n)];
  size_t pos = below (*len + 1), n;

  switch (below (8)) {
  case 0:                       /* flip a bit */
    if (*len)
      buf[below (*len)] ^= 1 << below (8);
    break;
  case 1:                       /* set a byte, often a special one */
    if (*len)
      buf[below (*len)] = below (2) ? (uint8_t) rng ()
        : (uint8_t) special_bytes[below (sizeof special_bytes - 1)];
    break;
  case 2:                       /* insert a byte */
    if (*len < MAX_LEN) {
      memmove (buf + pos + 1, buf + pos, *len - pos);
      buf[pos] = special_bytes[below (sizeof special_bytes - 1)];
      (*len)++;
    }
    break;
  case 3:                       /* delete a run */
    n = below (*len - pos + 1);
    memmove (buf + pos, buf + pos + n, *len - pos - n);
    *len -= n;
    break;
  case 4:                       /* truncate */
    *len = pos;
    break;
  case 5:                       /* little-endian number over 4 or 8 bytes */
    n = below (2) ? 4 : 8;
    if (*len >= n) {
      uint64_t v = special_values[below (sizeof special_values
                                         / sizeof special_values[0])];
      pos = below (*len - n + 1);
      for (size_t i = 0; i < n; i++)
        buf[pos + i] = v >> (8 * i);
    }
    break;
  case 6:                       /* splice: our head, another's tail */
    n = below (other->len + 1);
    if (pos + other->len - n <= MAX_LEN) {
      memcpy (buf + pos, other->data + n, other->len - n);
      *len = pos + other->len - n;
    }
    break;
  case 7:                       /* duplicate a run */
    n = below (*len - pos + 1);
    if (*len + n <= MAX_LEN) {
      memmove (buf + pos + n, buf + pos, *len - pos);
      *len += n;
    }
    break;
  }
}

static void
run_mutations (unsigned long count, uint64_t seed, uint8_t *buf)
{
  rng_state = seed ? seed : 1;
  for (unsigned long i = 0; i < count; i++) {
    const struct input *in = &corpus.v[below (corpus.n)];
    size_t len = in->len, edits = 1 + below (4);

    memcpy (buf, in->data, len);
    while (edits--)
      mutate_once (buf, &len);
    run_one (buf, len);
  }
}

/* driver-TARGET names the target. */
static const char *
target_name (const char *argv0)
{
  const char *base = strrchr (argv0, '/');

  base = base ? base + 1 : argv0;
  return strncmp (base, "driver-", 7) == 0 ? base + 7 : base;
}

int
main (int argc, char *argv[])
{
  const char *env = getenv ("FUZZ_MUTATIONS");
  unsigned long mutations = env && *env ? strtoul (env, NULL, 0)
    : DEFAULT_MUTATIONS;
  uint64_t seed = 1;
  uint8_t *buf;
  int c;

  program = argv[0];
  target = target_name (argv[0]);
  while ((c = getopt (argc, argv, "n:s:")) != -1) {
    switch (c) {
    case 'n': mutations = strtoul (optarg, NULL, 0); break;
    case 's': seed = strtoull (optarg, NULL, 0); break;
    default:
      fprintf (stderr, "usage: %s [-n MUTATIONS] [-s SEED] "
               "[CORPUS-DIR | FILE]...\n", argv[0]);
      exit (2);
    }
  }
  catch_crashes ();

  if (optind < argc) {
    for (int i = optind; i < argc; i++)
      add_path (argv[i]);
  }
  else {
    const char *srcdir = getenv ("top_srcdir");
    char dir[4096];

    snprintf (dir, sizeof dir, "%s/tests/fuzz/corpus/%s",
              srcdir && *srcdir ? srcdir : ".", target);
    add_path (dir);
  }
  if (corpus.n == 0) {
    printf ("not ok 1 - %s: no seed inputs\n1..1\n", target);
    return EXIT_FAILURE;
  }

  for (size_t i = 0; i < corpus.n; i++)
    run_one (corpus.v[i].data, corpus.v[i].len);
  printf ("ok 1 - %s: %zu seed inputs\n", target, corpus.n);
  fflush (stdout);

  buf = malloc (MAX_LEN);
  if (buf == NULL)
    die ("malloc");
  run_mutations (mutations, seed, buf);
  printf ("ok 2 - %s: %lu mutations of them (seed %" PRIu64 ")\n",
          target, mutations, seed);
  printf ("1..2\n");

  free (buf);
  for (size_t i = 0; i < corpus.n; i++)
    free (corpus.v[i].data);
  free (corpus.v);
  return EXIT_SUCCESS;
}
