/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a server's word checked (spot-check.c), for input-view.c
 * alone: a few blocks read from the image's export and hashed here
 * must have the digests the view gives them, and the digests must
 * fold to the root it gives.
 */
#ifndef NBDSUM_SPOT_CHECK_H
#define NBDSUM_SPOT_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "datamap.h"
#include "endpoint.h"
#include "util.h"

/* Check about count blocks of ep's view (read on its first connection)
 * against export image_export of the same server (its bytes of range,
 * when range's length is not 0), on a connection of its own: the last
 * block, and others drawn from the data map where it is known (half of
 * them from anywhere: the extents are the server's word), uniformly
 * otherwise.  With later (the view's name: a server that admitted no
 * other client while the view was open), ep's connections are closed
 * first, and a server that admits none then either is trusted, saying
 * so (0, *checked 0).  Returns 0 with *checked the blocks found equal,
 * or -1 (error printed, ep->src's name's): a block that differs, a read
 * that fails, a signal.
 */
extern int spot_check (struct endpoint *ep, const char *image_export,
                       const char *later, const struct blk_range *range,
                       const struct data_map *map, unsigned count,
                       uint64_t *checked);

/* The view's root against its block digests, folded here when they
 * are at most ROOT_CHECK_BYTES (64 MiB: a 128 GiB image in 64K blocks
 * of sha256): a root a server made up, beside true digests, is caught.
 * Returns 0 with *checked whether it was folded, or -1 (error
 * printed): a root that differs, a read that fails, a signal.
 */
#define ROOT_CHECK_BYTES (UINT64_C (64) << 20)
#define ROOT_READ_BYTES (UINT64_C (1) << 20)
extern int root_check (struct endpoint *ep, const uint8_t *root,
                       bool *checked);

#endif /* NBDSUM_SPOT_CHECK_H */
