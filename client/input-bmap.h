/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum --bmap: an image's mapped ranges and their sha256, from its
 * server's bmap view NAME@bmap (input-bmap.c), for mode-bmap.c to
 * write as bmaptool's block map.
 */
#ifndef NBDSUM_INPUT_BMAP_H
#define NBDSUM_INPUT_BMAP_H

#include <stdint.h>

#include "bmap.h"
#include "options.h"

struct bmap {
  uint64_t image_size;
  uint64_t blocks;              /* 4 KiB blocks, the last may be short */
  uint64_t mapped_blocks;
  uint64_t nranges;
  struct blk_bmap_range *ranges;        /* in order, apart */
};

/* The bmap of the image name (a file: its guest content), checked.
 * Returns 0, or -1 (error printed).  Free it with bmap_free.
 */
extern int bmap_fetch (const char *name, const struct hash_spec *spec,
                       struct bmap *bm);
extern void bmap_free (struct bmap *bm);

#endif /* NBDSUM_INPUT_BMAP_H */
