/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: progress on standard error (a bar on a terminal, a line
 * every 10 s elsewhere: a log) or as "N/100" lines on a file
 * descriptor, like nbdcopy.  It draws what it
 * is told: the image bytes done, and of them the data bytes, by
 * whoever hashes.
 *
 * Holes cost nothing to hash, so the bar's rate, time left and
 * percentage go by data bytes when the input knows how many its image
 * has (progress_set_data, from its extents: datamap.h): a sparse
 * image's bar then says how fast data is read, not how fast holes are
 * skipped.  --progress=FD goes by position in the image.
 *
 * With -j, a job reports its bytes to the run (progress_report_to),
 * and the run is drawn by progress-run.c; the text of the lines is
 * bar.c's.
 */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "bar.h"
#include "helpers.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"
#include "progress.h"
#include "signals.h"

/* -j: where a job's progress goes instead (progress_report_to). */
static progress_reporter *reporter;

void
progress_report_to (progress_reporter *fn)
{
  reporter = fn;
}

void
progress_silent (uint64_t done, uint64_t total, bool final)
{
  (void) done;
  (void) total;
  (void) final;
}

void
progress_init (struct progress *p, const char *name, uint64_t total)
{
  memset (p, 0, sizeof *p);
  p->name = name;
  p->total = total;
  atomic_store (&p->done, 0);
  atomic_store (&p->data, 0);
  p->start = now ();
  p->last_percent = -1;
}

void
progress_set_data (struct progress *p, uint64_t data_total)
{
  p->known = true;
  p->data_total = data_total;
}

void
progress_add (struct progress *p, uint64_t bytes, uint64_t data)
{
  atomic_fetch_add (&p->done, bytes);
  atomic_fetch_add (&p->data, data);
}

bool
progress_drawn (void)
{
  /* In a -j job, the run draws what it reports. */
  if (reporter)
    return reporter != progress_silent;
  return opts->progress_bar || opts->progress_lines;
}

void
progress_abandon (struct progress *p)
{
  /* The bar's line ends where it was cut short. */
  if (p->last_len && opts->progress_bar && reporter == NULL)
    fputc ('\n', stderr);
  p->last_len = 0;
}

/* The rates of data bytes and of all bytes over the last samples (10
 * s of bars drawn every 0.2 s): the average since the start lags
 * behind storage that speeds up or slows down, and the time left
 * would swing.  The averages until a second of samples is there.
 */
static void
recent_rates (struct progress *p, double t, uint64_t data, uint64_t done,
              double *data_rate, double *done_rate)
{
  const unsigned oldest = p->samples < PROGRESS_SAMPLES ? 0 : p->sample_next;
  const double since = t - p->start;

  *data_rate = since > 0 ? data / since : 0;
  *done_rate = since > 0 ? done / since : 0;
  if (p->samples > 0 && t - p->sample_t[oldest] >= 1.0) {
    *data_rate = (data - p->sample_d[oldest]) / (t - p->sample_t[oldest]);
    *done_rate = (done - p->sample_b[oldest]) / (t - p->sample_t[oldest]);
  }
  p->sample_t[p->sample_next] = t;
  p->sample_d[p->sample_next] = data;
  p->sample_b[p->sample_next] = done;
  p->sample_next = (p->sample_next + 1) % PROGRESS_SAMPLES;
  p->samples += p->samples < PROGRESS_SAMPLES;
}

/* Seconds for left bytes at rate (-1: not known). */
static double
time_left (uint64_t left, double rate)
{
  return left == 0 ? 0 : rate > 0 ? left / rate : -1;
}

static void
draw_bar (struct progress *p, bool final, uint64_t done)
{
  /* Holes cost nothing to read: rate and percentage go by data bytes
   * when the extents said how many there are (and there are some),
   * else by all bytes.
   */
  const bool by_data = p->known && p->data_total > 0;
  const uint64_t data = by_data ? atomic_load (&p->data) : done;
  const uint64_t data_total = by_data ? p->data_total : p->total;
  const uint64_t left = data_total - MIN (data, data_total);
  const double t = now (), elapsed = t - p->start;
  const size_t cols = bar_columns ();
  const size_t width = MIN (cols - 1, (size_t) LINE_MAX_COLS);
  char rate_s[RATE_COLS], eta[ETA_COLS], line[1 + LINE_MAX_COLS + 2];
  double rate, done_rate, eta_s;
  int percent;
  size_t n;

  recent_rates (p, t, data, done, &rate, &done_rate);
  /* The last line's rate is the whole run's. */
  if (final)
    rate = elapsed > 0 ? data / elapsed : 0;
  /* But holes are not free either: the outer hash costs a digest per
   * block (an empty PiB is a quarter of an hour of it), so the time
   * left is the longer of the data's and that of all bytes.
   */
  eta_s = time_left (left, rate);
  if (by_data && eta_s >= 0)
    eta_s = MAX (eta_s, time_left (p->total - MIN (done, p->total),
                                   done_rate));

  if (final)
    percent = 100;
  else {
    /* In floating point: bytes * 100 may not fit in 64 bits. */
    if (data_total > 0)
      percent = 100.0 * MIN (data, data_total) / data_total;
    else                        /* an empty image */
      percent = 0;
    /* 100% is for the end: the last holes may still be going. */
    percent = MIN (percent, 99);
  }
  bar_rate_and_eta (rate, eta_s, elapsed, final, rate_s, eta);

  if (opts->progress_lines) {
    if (bar_line_due (&p->last_line, p->start, final)) {
      char name[LINE_MAX_COLS + 1];
      name[bar_name (name, p->name, LINE_MAX_COLS)] = '\0';
      fprintf (stderr, "%s: %s: %d%% %s %s\n", progname, name, percent,
               rate_s + strspn (rate_s, " "), eta + strspn (eta, " "));
    }
    return;
  }
  line[0] = '\r';
  n = 1 + bar_text (p->name, line + 1, width, percent, rate_s, eta);
  /* Cover what is left of a longer line before it. */
  while (n - 1 < MIN (p->last_len, width))
    line[n++] = ' ';
  p->last_len = n - 1;
  if (final)
    line[n++] = '\n';
  fwrite (line, 1, n, stderr);
  fflush (stderr);
}

void
progress_update (struct progress *p, bool final)
{
  const uint64_t done = atomic_load (&p->done);
  int percent;

  /* In a -j job: to the run, which shows it, by data bytes as the
   * bar does when they are known.
   */
  if (reporter) {
    if (!stop_signal ())
      reporter (p->known ? atomic_load (&p->data) : done,
                p->known ? p->data_total : p->total, final);
    return;
  }
  /* After a signal, not a word more: that pipe may be what broke. */
  if ((!opts->progress_bar && !opts->progress_lines &&
       opts->progress_fd < 0) || stop_signal ())
    return;
  percent = final || p->total == 0 ? 100
    : (int) (done >= p->total ? 100 : (double) done * 100 / p->total);

  if (opts->progress_fd >= 0 && percent != p->last_percent)
    dprintf (opts->progress_fd, "%d/100\n", percent);
  if (opts->progress_bar || opts->progress_lines)
    draw_bar (p, final, done);
  p->last_percent = percent;
}
