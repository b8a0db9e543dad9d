/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a local image and the files it names, between the policy
 * that checks and pins them (local-chain.c) and the json: spec that
 * hands exactly those to qemu (local-spec.c, which builds on
 * local-chain.c).  Only those two files include this.
 */
#ifndef NBDSUM_LOCAL_CHAIN_H
#define NBDSUM_LOCAL_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "imgrefs.h"
#include "local.h"

/* Backing files below the image, at most (qemu has no limit; a loop
 * of names would grow it without end).
 */
#define CHAIN_MAX 16

struct layer {
  char *path;                   /* as found: the image's as given, else
                                   resolved (messages, finding names) */
  char *qemu;                   /* what qemu opens: /proc/PID/fd/N */
  const char *format;           /* static */
  bool probed;                  /* its format or one above it probed */
  bool block_device;            /* the image itself on a block device */
  dev_t dev;
  ino_t ino;
  int fd;                       /* pinned, or -1 */
  struct blk_refs refs;
  char *data_file;              /* qemu's path of its data file, or NULL */
  char **extents;               /* qemu's paths, by ref index */
  size_t nextents;              /* extents come first among the refs */
  char *copy;                   /* a descriptor's copy, qemu's path */
};

struct chain {
  const char *name;             /* the input, for messages */
  char *dir;                    /* the image's directory, resolved */
  enum format_origin origin;    /* of the image's format */
  struct layer l[CHAIN_MAX + 1];
  size_t n;
  struct local_pins pins;       /* every descriptor qemu opens through */
};

/* local-chain.c: hold fd open for qemu (it is the chain's now) and
 * name it for qemu in *qemu_path.  0, or -1 after saying why (fd
 * closed).
 */
extern int chain_pin (struct chain *c, int fd, char **qemu_path);

/* local-chain.c: walk the image at path (absolute, as given) read as
 * format, c's name and origin set: each file it names checked against
 * the policy and pinned, a layer each in c.  0, or -1 after saying why
 * (chain_free then, as after 0).
 */
extern int chain_walk (struct chain *c, const char *path,
                       const char *format);
/* local-chain.c: free what c holds but its pins. */
extern void chain_free (struct chain *c);

#endif /* NBDSUM_LOCAL_CHAIN_H */
