# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""Read a plain-digest view NAME@digest[:DIGEST] as a client would,
with no help from nbdsum: check its header, drive the work with CACHE
of span bytes (in steps, or out of order), check the span bytes, and
print the digest in hex.

usage: plainview.py SOCKET EXPORT [--step N] [--order fwd|rev|none]
                    [--size BYTES]
Exit 1 with the server's error on stderr if a request fails."""
import argparse
import struct
import sys

import nbd

SPAN = 1 << 20

p = argparse.ArgumentParser()
p.add_argument("socket")
p.add_argument("export")
p.add_argument("--step", type=int, default=64)
p.add_argument("--order", default="fwd", choices=["fwd", "rev", "none"])
p.add_argument("--size", type=int, help="the image size to expect")
a = p.parse_args()

h = nbd.NBD()
h.set_export_name(a.export)
try:
    h.connect_unix(a.socket)
    hdr = h.pread(4096, 0)
    (magic, version, hsize, size, n, span, dlen, root, spans) = \
        struct.unpack_from("<8sIIQQIIQQ", hdr)
    name = hdr[56:120].rstrip(b"\0").decode()
    assert magic == b"BLKPLAN1", magic
    assert (version, hsize, root, spans, span) == (1, 4096, 4096, 8192, SPAN)
    assert n == (size + SPAN - 1) // SPAN, (n, size)
    assert h.get_size() == 8192 + n, h.get_size()
    assert not h.can_multi_conn()
    if a.size is not None:
        assert size == a.size, (size, a.size)
    if n and h.pread(n, 8192) != bytes(n):
        raise AssertionError("spans hashed before any request")
    if a.order != "none":
        starts = list(range(0, n, a.step))
        if a.order == "rev":
            starts.reverse()
        for s in starts:
            c = min(a.step, n - s)
            h.cache(c, 8192 + s)
            done = h.pread(n, 8192)
            # Every span through the end of this request is hashed.
            if done[:s + c] != b"\x01" * (s + c):
                raise AssertionError("span bytes after CACHE of %d+%d: %r"
                                     % (s, c, done))
    digest = h.pread(dlen, 4096)
    if n and h.pread(n, 8192) != b"\x01" * n:
        raise AssertionError("spans not all hashed after the digest")
    # Asked again, the same answer.
    assert h.pread(dlen, 4096) == digest
    print(name, digest.hex())
except nbd.Error as e:
    print("plainview.py: %s" % e, file=sys.stderr)
    sys.exit(1)
