/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the text of progress lines (bar.c). */
#ifndef NBDSUM_BAR_H
#define NBDSUM_BAR_H

#include <stdbool.h>
#include <stddef.h>

/* A bar has at least BAR_MIN cells or none, at most BAR_MAX.  Lines
 * are never longer than LINE_MAX_COLS, nor than the terminal's width
 * less one (a line filling the last column wraps on some terminals).
 */
#define BAR_MIN 10
#define BAR_MAX 50
#define LINE_MAX_COLS 512
#define RATE_COLS 40
#define ETA_COLS 40

extern bool bar_line_due (double *last, double start, bool final);
extern const char *bar_bytes (double bytes, char *buf, size_t len);
extern void bar_eta (double seconds, char *buf, size_t len);
extern size_t bar_columns (void);
extern size_t bar_name (char *out, const char *name, size_t room);
extern size_t bar_text (const char *name, char *out, size_t width,
                        int percent, const char *rate, const char *eta);
extern void bar_rate_and_eta (double rate, double eta_s, double elapsed,
                              bool final, char rate_s[RATE_COLS],
                              char eta[ETA_COLS]);

#endif /* NBDSUM_BAR_H */
