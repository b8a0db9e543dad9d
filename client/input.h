/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: an input, anything that gives a checksum and, where it can,
 * the digests of its blocks.  input_open chooses the kind once, from
 * the name and the options (the kinds: input-kinds.h); the modes ask
 * inputs for checksums and digests and never ask what kind they hold,
 * as nbdcopy's copying loop never asks which rw_ops it drives.
 */
#ifndef NBDSUM_INPUT_H
#define NBDSUM_INPUT_H

#include <stdbool.h>
#include <stdint.h>

#include "blkhash.h"
#include "options.h"
#include "result.h"

#include "input-ops.h"

/* input_open's flags. */
#define INPUT_SAVED   1         /* name is a saved --blocks manifest,
                                   of whatever digest and block size */
#define INPUT_DIGESTS 2         /* its block digests will be asked for */
#define INPUT_VERIFY  4         /* with INPUT_DIGESTS: and input_verify
                                   called once they all were */

/* Open name ("-": standard input) as spec says: a file as
 * spec->format, else as --format gave it, else as probed.  NULL on
 * error (printed).
 */
extern struct input *input_open (const char *name,
                                 const struct hash_spec *spec,
                                 unsigned flags);
/* Its checksum, and res filled in (name, hex, digest, sizes, method,
 * format, time).  Returns 0, or -1 (error printed).
 */
extern int input_checksum (struct input *in, struct result *res);

/* Open, hash and close name: the checksum of one input.  Returns 0,
 * or -1 (error printed).
 */
extern int input_hash (const char *name, const struct hash_spec *spec,
                       struct result *res);

/* Blkhash views are never inputs (see source.h): is any of names one?
 * Each says so.  With json, nothing is said on standard error, but
 * json is called with what was said of each name (NULL: nothing) to
 * print its mode's document.
 */
#define INPUT_VIEW_REFUSED "not hashed: an input is a blkhash view"
typedef void input_refused_fn (char **names, int n, char **errors);
extern bool input_views_refused (char **names, int n, input_refused_fn *json);

#endif /* NBDSUM_INPUT_H */
