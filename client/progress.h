/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: progress on standard error (a bar on a terminal) or as
 * "N/100" lines on a file descriptor, like nbdcopy.
 */
#ifndef NBDSUM_PROGRESS_H
#define NBDSUM_PROGRESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


/* Bytes [start, end) of the image read as zero in whole blocks (the
 * end is a block boundary or the image end): no one reads them.
 */
struct progress {
  const char *name;
  uint64_t total;               /* image bytes */
  /* Added to by the connections' threads: image bytes done, holes
   * included (the percentage of --progress=FD), and of them the data
   * bytes read and hashed (the bar's rate).
   */
  atomic_uint_fast64_t done;
  atomic_uint_fast64_t data;
  /* The data bytes there are, when known (progress_set_data).  Else
   * the bar counts all bytes.
   */
  bool known;
  uint64_t data_total;
  double start;
  int last_percent;
  size_t last_len;              /* columns of the last bar drawn */
  double last_line;             /* when the last line was, without one */
  /* The bar's recent samples (when, data bytes, all bytes), for
   * rates that follow the storage: a ring of the last
   * PROGRESS_SAMPLES.
   */
#define PROGRESS_SAMPLES 50
  double sample_t[PROGRESS_SAMPLES];
  uint64_t sample_d[PROGRESS_SAMPLES];
  uint64_t sample_b[PROGRESS_SAMPLES];
  unsigned samples, sample_next;
};

extern void progress_init (struct progress *p, const char *name,
                           uint64_t total);
/* The image has data_total data bytes: the bar's rate, time left and
 * percentage go by them.
 */
extern void progress_set_data (struct progress *p, uint64_t data_total);
/* Image bytes done, data of them read and hashed. */
extern void progress_add (struct progress *p, uint64_t bytes, uint64_t data);
/* Is progress shown (-p, in this process or by the run of a -j job)?
 * Then knowing the data bytes is worth a scan of the extents.
 */
extern bool progress_drawn (void);
/* Hashing stopped short: end the bar's line, if one was drawn. */
extern void progress_abandon (struct progress *p);
/* Report p, at the end when final is true. */
extern void progress_update (struct progress *p, bool final);

/* -j: in a job, progress_update hands the bytes done and in all to fn
 * instead of drawing anything (fn NULL: draw again): data bytes when
 * they are known, as the bar counts, else image bytes.
 */
typedef void progress_reporter (uint64_t done, uint64_t total, bool final);
extern void progress_report_to (progress_reporter *fn);
/* A reporter that drops what it is told. */
extern progress_reporter progress_silent;

/* -j: the run, several inputs hashed at once. */
struct progress_run {
  unsigned done;                /* inputs done */
  unsigned total;               /* inputs in all, if total_known */
  bool total_known;             /* -c: once the files are read */
  unsigned running;             /* inputs being hashed */
  uint64_t bytes;               /* bytes done, as the jobs report them */
  double start;
};
/* An input being hashed, as its job last reported it. */
struct progress_input {
  const char *name;
  uint64_t done, total;         /* as its job reports them */
  double start;
};
/* Draw the run, as -p and --progress=FD say: with -p on a terminal, a
 * line for the run and, where the terminal moves its cursor and has
 * the rows, one per input of inputs[n] below it, redrawn in place; on
 * --progress=FD, "N/100" lines of the inputs done, once their number
 * is known.  final: the run is over; its line stays.
 */
extern void progress_run_draw (const struct progress_run *run,
                               const struct progress_input *inputs,
                               size_t n, bool final);
/* Take the drawing off the terminal before other output is written
 * there; the next progress_run_draw puts it back.
 */
extern void progress_run_erase (void);
/* Interrupted: leave the drawing as it is and go to the next line. */
extern void progress_run_abandon (void);

#endif /* NBDSUM_PROGRESS_H */
