/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: progress on standard error (a bar on a terminal, a line
 * every LINE_SECONDS elsewhere: a log) or as "N/100" lines on a file
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
 * With -j, a job reports its bytes to the run (progress_report_to) and
 * the run is drawn here: a line for it and one per input being hashed
 * (progress_run_draw).
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"
#include "progress.h"
#include "signals.h"
#include "util.h"

/* The bar: at least BAR_MIN cells or none, at most BAR_MAX.  A name
 * is shortened to no fewer than NAME_MIN columns.  Lines are never
 * longer than LINE_MAX_COLS, nor than the terminal's width less one
 * (a line filling the last column wraps on some terminals).
 */
#define BAR_MIN 10
#define BAR_MAX 50
#define NAME_MIN 8
#define LINE_MAX_COLS 512
/* -p without a terminal: a line this often, and at the end. */
#define LINE_SECONDS 10.0

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

/* -p without a terminal: is a line due (at the end, or LINE_SECONDS
 * after the last)?  *last is when the last was printed, 0 at first.
 */
static bool
line_due (double *last, double start, bool final)
{
  const double t = now ();

  if (!final && t - (*last ? *last : start) < LINE_SECONDS)
    return false;
  *last = t;
  return true;
}

void
progress_abandon (struct progress *p)
{
  /* The bar's line ends where it was cut short. */
  if (p->last_len && opts->progress_bar && reporter == NULL)
    fputc ('\n', stderr);
  p->last_len = 0;
}

static const char *
human (double bytes, char *buf, size_t len)
{
  static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
  int u = 0;

  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    u++;
  }
  snprintf (buf, len, "%.1f %s", bytes, units[u]);
  return buf;
}

/* H:MM:SS, at most 99:59:59 (then prefixed by '>'). */
static void
hms (double seconds, const char *prefix, char *buf, size_t len)
{
  const unsigned most = 99 * 3600 + 59 * 60 + 59;
  const unsigned t = seconds > most ? most : (unsigned) seconds;

  snprintf (buf, len, "%s%s%u:%02u:%02u", prefix, seconds > most ? ">" : "",
            t / 3600, t / 60 % 60, t % 60);
}

/* A time left, rounded up: "ETA 0:00:00" says that nothing is left,
 * never that a fraction of a second is.
 */
static void
eta_hms (double seconds, char *buf, size_t len)
{
  if (seconds < 99 * 3600 + 59 * 60 + 59) {
    const unsigned t = seconds;
    if (t < seconds)
      seconds = t + 1;
  }
  hms (seconds, "ETA ", buf, len);
}

/* The terminal's width: as it says, else $COLUMNS, else 80. */
static size_t
terminal_columns (void)
{
  struct winsize ws;
  const char *env = getenv ("COLUMNS");
  char *end;
  long n;

  if (ioctl (STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  if (env && *env) {
    errno = 0;
    n = strtol (env, &end, 10);
    if (errno == 0 && *end == '\0' && n > 0)
      return n;
  }
  return 80;
}

/* Write name in at most room columns (room >= 4 if it must be
 * shortened): its end, after "...", when too long.  Control bytes
 * become '?', so that a name cannot move the cursor.  Other bytes
 * count a column each, which is never less than they take (UTF-8).
 * Returns the columns written.
 */
static size_t
put_name (char *out, const char *name, size_t room)
{
  size_t len = strlen (name), n = 0;

  if (len > room) {
    memcpy (out, "...", 3);
    n = 3;
    name += len - (room - 3);
    /* Not from the middle of a UTF-8 character. */
    while ((*name & 0xc0) == 0x80)
      name++;
  }
  /* Control characters, C1 ones (U+0080 to U+009F, and stray bytes
   * an 8-bit terminal would take for them) too, become '?'.
   */
  while (*name) {
    const unsigned char *u = (const unsigned char *) name;
    const size_t clen = u[0] < 0x80 ? 1 : blk_utf8_char (u, strlen (name));
    if (clen <= 1 || (clen == 2 && u[0] == 0xc2 && u[1] < 0xa0)) {
      out[n++] = u[0] < 0x20 || u[0] >= 0x7f ? '?' : u[0];
      name += clen ? clen : 1;
    }
    else {
      memcpy (out + n, name, clen);
      n += clen;
      name += clen;
    }
  }
  return n;
}

/* The bar's line, at most width columns, into out (width + 1 bytes):
 * NAME [####......] PCT% RATE ETA.  The narrower the terminal, the
 * shorter the name (down to NAME_MIN), then the bar, the rate, the
 * time and the name go, in that order.
 */
static size_t
bar_line (const char *name, char *out, size_t width, int percent,
          const char *rate, const char *eta)
{
  char pct[16];
  const size_t name_len = strlen (name);
  const size_t name_min = MIN (name_len, (size_t) NAME_MIN);
  size_t np, nr = strlen (rate), ne = strlen (eta), fixed, cells = 0, n;
  bool with_name = true;

  snprintf (pct, sizeof pct, "%3d%%", percent);
  np = strlen (pct);
  fixed = np + 1 + nr + 1 + ne;
  if (width >= name_min + 1 + BAR_MIN + 3 + fixed) {
    const size_t room = width - fixed - 3 - 1;     /* name and cells */
    cells = MIN (room - MIN (name_len, room - BAR_MIN), (size_t) BAR_MAX);
  }
  else if (width >= name_min + 1 + fixed)
    ;
  else if (width >= name_min + 1 + np + 1 + ne)
    nr = 0;
  else if (width >= name_min + 1 + np)
    nr = ne = 0;
  else if (width >= np) {
    nr = ne = 0;
    with_name = false;
  }
  else
    return 0;

  n = 0;
  if (with_name) {
    /* All the room the other parts leave. */
    size_t others = np + (nr ? nr + 1 : 0) + (ne ? ne + 1 : 0)
      + (cells ? cells + 3 : 0);
    n = put_name (out, name, MIN (name_len, width - others - 1));
    out[n++] = ' ';
  }
  if (cells) {
    const size_t filled = percent * cells / 100;
    out[n++] = '[';
    for (size_t i = 0; i < cells; i++)
      out[n++] = i < filled ? '#' : '.';
    out[n++] = ']';
    out[n++] = ' ';
  }
  memcpy (out + n, pct, np);
  n += np;
  if (nr) {
    out[n++] = ' ';
    memcpy (out + n, rate, nr);
    n += nr;
  }
  if (ne) {
    out[n++] = ' ';
    memcpy (out + n, eta, ne);
    n += ne;
  }
  out[n] = '\0';
  return n;
}

/* The rate and time left (or, when final, time taken) of a bar:
 * "  12.3 MiB/s" and "ETA 0:00:17", or " in 0:00:34".  eta < 0: not
 * known yet.
 */
#define RATE_COLS 40
#define ETA_COLS 40
static void
rate_and_eta (double rate, double eta_s, double elapsed, bool final,
              char rate_s[RATE_COLS], char eta[ETA_COLS])
{
  char rbuf[32];

  human (rate, rbuf, sizeof rbuf);
  snprintf (rate_s, RATE_COLS, "%10s/s", rbuf);
  if (final)
    hms (elapsed, "in ", rbuf, sizeof rbuf);
  else if (eta_s >= 0)
    eta_hms (eta_s, rbuf, sizeof rbuf);
  else
    snprintf (rbuf, sizeof rbuf, "ETA -:--:--");
  snprintf (eta, ETA_COLS, "%11s", rbuf);
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
  const size_t cols = terminal_columns ();
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
  rate_and_eta (rate, eta_s, elapsed, final, rate_s, eta);

  if (opts->progress_lines) {
    if (line_due (&p->last_line, p->start, final)) {
      char name[LINE_MAX_COLS + 1];
      name[put_name (name, p->name, LINE_MAX_COLS)] = '\0';
      fprintf (stderr, "%s: %s: %d%% %s %s\n", progname, name, percent,
               rate_s + strspn (rate_s, " "), eta + strspn (eta, " "));
    }
    return;
  }
  line[0] = '\r';
  n = 1 + bar_line (p->name, line + 1, width, percent, rate_s, eta);
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

/* -j: the run's progress (see progress.h).  On a terminal that moves
 * its cursor (TERM set, not "dumb") and says how many rows it has,
 * the drawing is a block: the run's line, then a line per input being
 * hashed while rows are left, redrawn in place by moving the cursor up
 * over it.  Elsewhere it is the run's line alone, redrawn after '\r'
 * as a bar is.
 */
static struct {
  size_t lines;                 /* lines of the block on screen, or 0 */
  size_t last_len;              /* columns of the last line drawn */
  int last_percent;             /* last --progress=FD line, or -1 */
  double last_line;             /* without a terminal: the last line */
} run_screen = { 0, 0, -1, 0 };

static bool
cursor_moves (void)
{
  const char *term = getenv ("TERM");

  return term && *term && strcmp (term, "dumb") != 0;
}

/* Rows of the terminal, 0 if it does not say. */
static size_t
terminal_rows (void)
{
  struct winsize ws;

  if (ioctl (STDERR_FILENO, TIOCGWINSZ, &ws) == 0)
    return ws.ws_row;
  return 0;
}

/* The run's line, at most width columns, into out (width + 1 bytes):
 * [####......] 12/100 done, 16 running, 3.2 GiB  1.1 GiB/s ETA 0:00:07
 * (no bar and "12/?" while the total is unknown).
 */
static size_t
run_line (const struct progress_run *run, bool final, char *out,
          size_t width, bool with_bar)
{
  const double elapsed = now () - run->start;
  const double rate = elapsed > 0 ? run->bytes / elapsed : 0;
  char total[24], bytes[32], rate_s[RATE_COLS], eta[ETA_COLS];
  char text[LINE_MAX_COLS + 1];
  size_t len, n = 0;

  if (run->total_known)
    snprintf (total, sizeof total, "%u", run->total);
  else
    snprintf (total, sizeof total, "?");
  human (run->bytes, bytes, sizeof bytes);
  /* Time left by inputs: they are alike in a fleet, and bytes of
   * inputs not begun are unknown.
   */
  rate_and_eta (rate, 0, elapsed, final, rate_s, eta);
  if (!final && run->total_known && run->done > 0 && run->done < run->total)
    eta_hms (elapsed / run->done * (run->total - run->done), eta,
             sizeof eta);
  else if (!final)
    snprintf (eta, sizeof eta, "ETA -:--:--");
  if (final)
    snprintf (text, sizeof text, "%u/%s done, %s %s %s", run->done, total,
              bytes, rate_s, eta);
  else
    snprintf (text, sizeof text, "%u/%s done, %u running, %s %s %s",
              run->done, total, run->running, bytes, rate_s, eta);
  len = strlen (text);

  /* A bar of the inputs done, when there is room and a total. */
  if (with_bar && run->total_known && width >= len + 3 + BAR_MIN) {
    const size_t cells = MIN (width - len - 3, (size_t) BAR_MAX);
    const size_t filled = run->total
      ? (size_t) ((double) run->done * cells / run->total) : cells;
    out[n++] = '[';
    for (size_t i = 0; i < cells; i++)
      out[n++] = i < filled ? '#' : '.';
    out[n++] = ']';
    out[n++] = ' ';
  }
  len = MIN (len, width - n);
  memcpy (out + n, text, len);
  n += len;
  out[n] = '\0';
  return n;
}

/* An input's line in the block: its bar, by what its job reports. */
static size_t
input_line (const struct progress_input *in, char *out, size_t width)
{
  const double elapsed = now () - in->start;
  const double rate = elapsed > 0 ? in->done / elapsed : 0;
  const uint64_t left = in->total - MIN (in->done, in->total);
  char rate_s[RATE_COLS], eta[ETA_COLS];
  int percent = in->total ? 100.0 * MIN (in->done, in->total) / in->total : 0;

  rate_and_eta (rate, left, elapsed, false, rate_s, eta);
  /* Its size not known yet (the job is connecting): no time left. */
  if (in->total == 0)
    snprintf (eta, sizeof eta, "%11s", "ETA -:--:--");
  return bar_line (in->name, out, width, MIN (percent, 99), rate_s, eta);
}

void
progress_run_erase (void)
{
  if (run_screen.lines == 0)
    return;
  if (cursor_moves ()) {
    if (run_screen.lines > 1)
      fprintf (stderr, "\r\x1b[%zuA\x1b[J", run_screen.lines - 1);
    else
      fputs ("\r\x1b[K", stderr);
  }
  else
    fprintf (stderr, "\r%*s\r", (int) run_screen.last_len, "");
  fflush (stderr);
  run_screen.lines = 0;
  run_screen.last_len = 0;
}

void
progress_run_draw (const struct progress_run *run,
                   const struct progress_input *inputs, size_t n,
                   bool final)
{
  const size_t width = MIN (terminal_columns () - 1, (size_t) LINE_MAX_COLS);
  const bool block = cursor_moves ();
  const size_t rows = block ? terminal_rows () : 0;
  const size_t shown = final || rows < 3 ? 0 : MIN (n, rows - 2);
  const size_t before = run_screen.lines;
  char line[LINE_MAX_COLS + 1];
  size_t len;

  if (stop_signal ())
    return;
  if (opts->progress_fd >= 0) {
    int percent = -1;
    if (final)
      percent = 100;
    else if (run->total_known)
      percent = run->total ? 100.0 * MIN (run->done, run->total) / run->total
        : 100;
    if (percent >= 0 && percent != run_screen.last_percent) {
      dprintf (opts->progress_fd, "%d/100\n", percent);
      run_screen.last_percent = percent;
    }
  }
  if (opts->progress_lines) {
    if (line_due (&run_screen.last_line, run->start, final)) {
      len = run_line (run, final, line, LINE_MAX_COLS, false);
      fprintf (stderr, "%s: %.*s\n", progname, (int) len, line);
    }
    return;
  }
  if (!opts->progress_bar)
    return;

  if (block) {
    /* Back to the block's first line; the rest is cleared below. */
    if (before > 1)
      fprintf (stderr, "\r\x1b[%zuA", before - 1);
    else
      fputc ('\r', stderr);
  }
  else
    fputc ('\r', stderr);
  len = run_line (run, final, line, width, true);
  fwrite (line, 1, len, stderr);
  if (block)
    fputs ("\x1b[K", stderr);
  else {
    /* Cover what is left of a longer line before it. */
    for (size_t i = len; i < MIN (run_screen.last_len, width); i++)
      fputc (' ', stderr);
  }
  run_screen.last_len = len;
  for (size_t i = 0; i < shown; i++) {
    len = input_line (&inputs[i], line, width);
    fputc ('\n', stderr);
    fwrite (line, 1, len, stderr);
    fputs ("\x1b[K", stderr);
  }
  if (block && shown + 1 < before)
    fputs ("\x1b[J", stderr);
  run_screen.lines = 1 + shown;
  if (final) {
    fputc ('\n', stderr);
    run_screen.lines = 0;
    run_screen.last_len = 0;
  }
  fflush (stderr);
}

void
progress_run_abandon (void)
{
  if (run_screen.lines && opts->progress_bar)
    fputc ('\n', stderr);
  run_screen.lines = 0;
  run_screen.last_len = 0;
}
