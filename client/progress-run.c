/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the progress of a -j run, drawn as jobs.c tells it (see
 * progress.h).  On a terminal that moves its cursor (TERM set, not
 * "dumb") and says how many rows it has, the drawing is a block: the
 * run's line, then a line per input being hashed while rows are left,
 * redrawn in place by moving the cursor up over it.  Elsewhere it is
 * the run's line alone, redrawn after '\r' as a bar is.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "bar.h"
#include "helpers.h"
#include "messages.h"
#include "minmax.h"
#include "options.h"
#include "progress.h"
#include "signals.h"

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
  bar_bytes (run->bytes, bytes, sizeof bytes);
  /* Time left by inputs: they are alike in a fleet, and bytes of
   * inputs not begun are unknown.
   */
  bar_rate_and_eta (rate, 0, elapsed, final, rate_s, eta);
  if (!final && run->total_known && run->done > 0 && run->done < run->total)
    bar_eta (elapsed / run->done * (run->total - run->done), eta,
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

  bar_rate_and_eta (rate, left, elapsed, false, rate_s, eta);
  /* Its size not known yet (the job is connecting): no time left. */
  if (in->total == 0)
    snprintf (eta, sizeof eta, "%11s", "ETA -:--:--");
  return bar_text (in->name, out, width, MIN (percent, 99), rate_s, eta);
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
  const size_t width = MIN (bar_columns () - 1, (size_t) LINE_MAX_COLS);
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
    if (bar_line_due (&run_screen.last_line, run->start, final)) {
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
