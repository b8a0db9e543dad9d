/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: progress on standard error (a bar on a terminal) or as
 * "N/100" lines on a file descriptor, like nbdcopy.
 */
#ifndef NBDSUM_PROGRESS_H
#define NBDSUM_PROGRESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libnbd.h>

/* Bytes [start, end) of the image read as zero in whole blocks (the
 * end is a block boundary or the image end): no one reads them.
 */
struct hole_run {
  uint64_t start, end;
};

struct progress {
  const char *name;
  uint64_t total;               /* image bytes */
  /* Added to by the connections' threads: image bytes done, holes
   * included (the percentage of --progress=FD), and of them the data
   * bytes read and hashed (the bar's rate).
   */
  atomic_uint_fast64_t done;
  atomic_uint_fast64_t data;
  /* From the image's extents (progress_scan), when known: its holes
   * and the data bytes there are.  Else the bar counts all bytes.
   */
  bool known;
  struct hole_run *holes;
  size_t nholes, holes_alloc;
  uint64_t data_total;
  double start;
  int last_percent;
  size_t last_len;              /* columns of the last bar drawn */
};

extern void progress_init (struct progress *p, const char *name,
                           uint64_t total);
/* Free what progress_scan kept. */
extern void progress_free (struct progress *p);
/* Learn the image's data bytes from the extents of h, an open
 * connection to the image (not to a view), hashed in blocks of
 * block_size bytes: then the bar's rate, time left and percentage go
 * by data bytes.  Without extents (or with too many to list quickly)
 * the bar counts all bytes.  The clock starts again afterwards.
 */
extern void progress_scan (struct progress *p, struct nbd_handle *h,
                           uint32_t block_size);
/* Image bytes done, data of them read and hashed (client-side). */
extern void progress_add (struct progress *p, uint64_t bytes, uint64_t data);
/* Image bytes [offset, offset+length) are done, their data bytes as
 * the extents tell, or all when unknown (server-side: the client sees
 * only digests).
 */
extern void progress_add_range (struct progress *p, uint64_t offset,
                                uint64_t length);
/* Report p, at the end when final is true. */
extern void progress_update (struct progress *p, bool final);

#endif /* NBDSUM_PROGRESS_H */
