/* Copyright (C) 2026 The nbdkit-blkhash developers
 * SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
 */
/* nbdsum: a URL's server answers a range as the curl plugin needs. */
#ifndef NBDSUM_HTTP_PROBE_H
#define NBDSUM_HTTP_PROBE_H

#include <stdint.h>

/* Ask url (with --http-header's headers) for its last bytes: 0 if the
 * server sent exactly those, as a 206 of a file of size bytes (the
 * length HEAD said), else -1 with the cause printed (nothing after a
 * signal).
 */
extern int http_probe (const char *url, uint64_t size);

#endif /* NBDSUM_HTTP_PROBE_H */
