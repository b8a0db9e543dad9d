/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the text of a progress line, for one input's bar
 * (progress.c) and for a -j run's block (progress-run.c): sizes,
 * times, names made safe for a terminal, the bar itself, and when a
 * line is due without one.
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "bar.h"
#include "helpers.h"
#include "minmax.h"
#include "util.h"

/* A name is shortened to no fewer than NAME_MIN columns. */
#define NAME_MIN 8
/* -p without a terminal: a line this often, and at the end. */
#define LINE_SECONDS 10.0

/* -p without a terminal: is a line due (at the end, or LINE_SECONDS
 * after the last)?  *last is when the last was printed, 0 at first.
 */
bool
bar_line_due (double *last, double start, bool final)
{
  const double t = now ();

  if (!final && t - (*last ? *last : start) < LINE_SECONDS)
    return false;
  *last = t;
  return true;
}

const char *
bar_bytes (double bytes, char *buf, size_t len)
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
void
bar_eta (double seconds, char *buf, size_t len)
{
  if (seconds < 99 * 3600 + 59 * 60 + 59) {
    const unsigned t = seconds;
    if (t < seconds)
      seconds = t + 1;
  }
  hms (seconds, "ETA ", buf, len);
}

/* The terminal's width: as it says, else $COLUMNS, else 80. */
size_t
bar_columns (void)
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
size_t
bar_name (char *out, const char *name, size_t room)
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
size_t
bar_text (const char *name, char *out, size_t width, int percent,
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
    n = bar_name (out, name, MIN (name_len, width - others - 1));
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
void
bar_rate_and_eta (double rate, double eta_s, double elapsed, bool final,
                  char rate_s[RATE_COLS], char eta[ETA_COLS])
{
  char rbuf[32];

  bar_bytes (rate, rbuf, sizeof rbuf);
  snprintf (rate_s, RATE_COLS, "%10s/s", rbuf);
  if (final)
    hms (elapsed, "in ", rbuf, sizeof rbuf);
  else if (eta_s >= 0)
    bar_eta (eta_s, rbuf, sizeof rbuf);
  else
    snprintf (rbuf, sizeof rbuf, "ETA -:--:--");
  snprintf (eta, ETA_COLS, "%11s", rbuf);
}

