/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what the command line refuses (option-checks.c), for
 * options.c.  Each refusal says why on standard error and exits with
 * the usage status.
 */
#ifndef NBDSUM_OPTION_CHECKS_H
#define NBDSUM_OPTION_CHECKS_H

#include <stdbool.h>
#include <stddef.h>

#include "options.h"

/* Before any refusal: exit 2 if argv has --diff or --manifest. */
extern void set_usage_status (int argc, char **argv);
/* "nbdsum: message" on standard error. */
extern void usage_error (const char *fmt, ...)
  __attribute__ ((noreturn, format (printf, 1, 2)));
/* After getopt's own message. */
extern void usage_try_help (void) __attribute__ ((noreturn));

/* opt's value: 1 to max. */
extern unsigned parse_count (const char *opt, const char *arg, unsigned max);
/* --spot-check's blocks: 0 (none) to MAX_SPOT_CHECK. */
extern unsigned parse_spot_check (const char *arg);
/* Seconds, decimals allowed: 0 (no limit) to max. */
extern double parse_seconds (const char *opt, const char *arg, unsigned max);
extern const char *parse_plain_digest (const char *arg);
/* --http-header=NAME: VALUE */
extern void check_http_header (const char *arg);

/* A --format on the command line: where it was among the inputs. */
struct format_option {
  const char *arg;              /* as given */
  int first;                    /* the first input after it */
};
/* An input a --format other than auto applies to, and that format. */
struct given_format {
  const char *name;             /* the input, by its address */
  const char *format;           /* static, lib/imgformat.h's */
};
/* Check each --format against the inputs it applies to (those after it
 * until the next), and --allow-backing against them: the format of
 * each local file given one, *ngiven of them.
 */
extern struct given_format *apply_formats (const struct options *o,
                                           const struct format_option *fo,
                                           int nfo, char **inputs,
                                           int ninputs, bool implicit_stdin,
                                           size_t *ngiven);
/* Refuse the options that do not go together, or with the inputs. */
extern void check_combinations (const struct options *o,
                                char *const *inputs, int nargs);

#endif /* NBDSUM_OPTION_CHECKS_H */
