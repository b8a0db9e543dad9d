/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: where an image's data is, from its extents, so that
 * progress can count data bytes and not holes, which cost nothing to
 * hash.  A view input scans its image's export once before it starts
 * (input-view.c; not through nbdsum's own filter in front of a
 * server).
 */
#ifndef NBDSUM_DATAMAP_H
#define NBDSUM_DATAMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libnbd.h>

struct data_map {
  bool known;                   /* else nothing is known: all is data */
  uint64_t size;                /* the image's */
  uint64_t data;                /* its data bytes, if known */
  /* The runs of holes the inputs skip, in order. */
  struct data_hole {
    uint64_t start, end;
  } *holes;
  size_t nholes, alloc;
};

/* Scan the image of size bytes served on h (block_size: the runs of
 * zero extents that are skipped are those of whole blocks), quietly:
 * given up when the server has no extents, after DATAMAP_SECONDS or
 * beyond DATAMAP_MAX_RUNS runs of holes.
 */
#define DATAMAP_SECONDS 2
#define DATAMAP_MAX_RUNS (1 << 20)
extern void data_map_scan (struct data_map *m, struct nbd_handle *h,
                           uint64_t size, uint32_t block_size);
/* The data bytes in [offset, offset+length) (all, if not known). */
extern uint64_t data_map_data_in (const struct data_map *m, uint64_t offset,
                                  uint64_t length);
/* How far from offset (at most most bytes, not past the image) holds
 * data bytes of data, runs of holes skipped over; all of it when
 * nothing is known.
 */
extern uint64_t data_map_reach (const struct data_map *m, uint64_t offset,
                                uint64_t data, uint64_t most);
extern void data_map_free (struct data_map *m);

#endif /* NBDSUM_DATAMAP_H */
