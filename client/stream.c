/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: the checksum of a raw image read from a file descriptor
 * (standard input): read sequentially and hashed as it comes.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "helpers.h"
#include "messages.h"
#include "progress.h"
#include "signals.h"
#include "stream.h"

/* Bytes read from the stream at a time. */
#define STREAM_READ_BYTES (1024 * 1024)

int
stream_checksum (const char *name, int fd, const struct hash_spec *spec,
                 uint8_t *root, uint64_t *size, struct blk_params *p)
{
  const struct hash_spec hs = hash_spec_or_defaults (spec);
  struct blk_stream s;
  struct progress prog;
  uint8_t *buf = malloc (STREAM_READ_BYTES);
  const char *msg;
  int ret = -1;

  if ((msg = blk_params_init (p, hs.digest, hs.block_size)) != NULL) {
    error_at (name, "%s", msg);
    free (buf);
    return -1;
  }
  if (buf == NULL || blk_stream_init (&s, p) == -1) {
    error_at (name, "out of memory");
    free (buf);
    blk_params_free (p);
    return -1;
  }
  /* The size is unknown: progress lines only say we started and ended. */
  progress_init (&prog, name, 0);
  for (;;) {
    /* A signal ends a wait for input: nothing to clean up but this. */
    struct pollfd fds[2] = {
      { .fd = fd, .events = POLLIN }, { .fd = stop_fd (), .events = POLLIN }
    };
    if (poll (fds, 2, -1) == -1 && errno != EINTR) {
      error_at (name, "poll: %m");
      goto out;
    }
    if (stop_signal ())
      goto out;
    ssize_t n = read (fd, buf, STREAM_READ_BYTES);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1) {
      error_at (name, "read: %m");
      goto out;
    }
    if (n == 0)
      break;
    if (blk_stream_update (&s, buf, n) == -1) {
      error_at (name, "%s failed", p->digest.name);
      goto out;
    }
    progress_add (&prog, n, n);
  }
  if (blk_stream_final (&s, root) == -1) {
    error_at (name, "%s failed", p->digest.name);
    goto out;
  }
  *size = s.size;
  progress_update (&prog, true);
  ret = 0;
 out:
  blk_stream_free (&s);
  free (buf);
  progress_free (&prog);
  if (ret == -1)
    blk_params_free (p);
  return ret;
}
