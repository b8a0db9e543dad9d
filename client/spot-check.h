/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a server's block digests spot-checked against its data
 * (spot-check.c), for input-view.c alone: a few blocks read from the
 * image's export and hashed here must have the digests the view
 * gives them.
 */
#ifndef NBDSUM_SPOT_CHECK_H
#define NBDSUM_SPOT_CHECK_H

#include <stdint.h>

#include "datamap.h"
#include "endpoint.h"

/* Check about count blocks of ep's view (read on its first connection)
 * against export image_export of the same server, on a connection of
 * its own: the last block, and others drawn from the data map where it
 * is known (a quarter of them from anywhere), uniformly otherwise.
 * Returns 0 with *checked the blocks found equal, or -1 (error
 * printed, ep->src's name's): a block that differs, a read that fails,
 * a signal.
 */
extern int spot_check (struct endpoint *ep, const char *image_export,
                       const struct data_map *map, unsigned count,
                       uint64_t *checked);

#endif /* NBDSUM_SPOT_CHECK_H */
