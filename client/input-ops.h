/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: what every kind of input is (its ops and its state), apart
 * from how one is chosen and opened (input.h): the kinds
 * (input-kinds.h) need this, not input_open.
 */
#ifndef NBDSUM_INPUT_OPS_H
#define NBDSUM_INPUT_OPS_H

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

  /* Opened with INPUT_VERIFY, once every digest was read: the checks
   * of its word that had to wait for that (a view a server would not
   * let be checked while it was open).  Returns 0, or -1 (error
   * printed).  NULL: none.
   */
  int (*verify) (struct input *in);

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

/* How it is hashed, as --json says (see input_ops). */
static inline const char *
input_method (const struct input *in)
{
  return in->here ? "client-side" : in->ops->method;
}

static inline int
input_verify (struct input *in)
{
  return in->ops->verify ? in->ops->verify (in) : 0;
}

static inline void
input_close (struct input *in)
{
  if (in)
    in->ops->close (in);
}

#endif /* NBDSUM_INPUT_OPS_H */
