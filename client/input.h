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

struct input;

struct input_ops {
  /* How it is hashed, as --json says: server-side, client-side,
   * stream, manifest.
   */
  const char *method;

  /* Its checksum, in root: hashed (a saved manifest: the one it
   * carries, verified).  Called once.  Returns 0, or -1 (error
   * printed).
   */
  int (*checksum) (struct input *in, uint8_t *root);

  /* After checksum: the digests of blocks [first, first+count), one
   * after another in out.  Calls go forward from block 0.  Returns 0,
   * or -1 (error printed).  NULL: it has none (a stream).
   */
  int (*digests) (struct input *in, uint64_t first, uint64_t count,
                  uint8_t *out);

  /* Free it, and whatever serves it. */
  void (*close) (struct input *in);
};

struct input {
  const struct input_ops *ops;
  const char *name;             /* as given; not owned */
  /* Its digest and block size, size and block count: known once it is
   * open (a stream's, once hashed).
   */
  const struct blk_params *params;
  uint64_t size, nblocks;
  /* Its checksum is a plain digest of the bytes (--plain): params only
   * name the digest, and there are no blocks.
   */
  bool plain;
  /* Hashed on this machine, by nbdsum's private filter (--client-side,
   * or a server without the filter): its method is client-side.
   */
  bool here;
  /* What its result says besides the checksum: the format a local
   * file was read as, and for --since what was hashed.
   */
  struct result about;
  double opened;                /* when input_open began */
};

/* input_open's flags. */
#define INPUT_SAVED   1         /* name is a saved --blocks manifest,
                                   of whatever digest and block size */
#define INPUT_DIGESTS 2         /* its block digests will be asked for */

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

/* How it is hashed, as --json says (see input_ops). */
static inline const char *
input_method (const struct input *in)
{
  return in->here ? "client-side" : in->ops->method;
}

static inline void
input_close (struct input *in)
{
  if (in)
    in->ops->close (in);
}

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
