#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""Clients that copy an export in orders qemu-img and nbdcopy do not,
for the import gate's tests (filter-import.bats):

    importclient.py URI OUT reverse PIECE     PIECE-byte reads from the end
    importclient.py URI OUT halves BLOCK      the first half of every
                                              BLOCK, then the second halves
    importclient.py URI OUT bytes             one byte at a time, 64 in
                                              flight: odd offsets, 0, then
                                              even offsets backwards
    importclient.py URI OUT reread OFF:LEN... 1 MiB reads in order, then
                                              the reads OFF:LEN again
    importclient.py URI OUT extents PIECE     block status of PIECE bytes
                                              from the first byte not yet
                                              known, every extent of the
                                              reply believed (past PIECE
                                              too, as NBD allows): zeros
                                              skipped, data read

OUT gets what the client was given.  Prints "read OFF LEN failed ERRNO"
for a failed read ("ok" for each reread), "copied" if every read of the
copy succeeded; exits 1 if any read failed.
"""
import errno
import os
import sys

import nbd


def main():
    uri, out, how = sys.argv[1:4]
    args = sys.argv[4:]
    h = nbd.NBD()
    if how == "extents":
        h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
    h.connect_uri(uri)
    size = h.get_size()
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(fd, size)
    failed = 0

    def read(off, n):
        nonlocal failed
        try:
            data = h.pread(n, off)
        except nbd.Error as e:
            print("read %d %d failed %s"
                  % (off, n, errno.errorcode.get(e.errno, e.errno)))
            failed += 1
            return False
        os.pwrite(fd, data, off)
        return True

    if how == "reverse":
        piece = int(args[0])
        for off in reversed(range(0, size, piece)):
            read(off, min(piece, size - off))
    elif how == "halves":
        block = int(args[0])
        for half in (0, 1):
            for b in range(0, size, block):
                a = min(b + half * block // 2, size)
                e = min(b + (half + 1) * block // 2, size)
                if e > a:
                    read(a, e - a)
    elif how == "bytes":
        order = (list(range(1, size, 2)) + [0] +
                 list(reversed(range(2, size, 2))))
        inflight = []
        for off in order + [None] * 64:
            if off is not None:
                buf = nbd.Buffer(1)
                inflight.append((h.aio_pread(buf, off), off, buf))
            if len(inflight) >= 64 or (off is None and inflight):
                cookie, o, buf = inflight.pop(0)
                while True:
                    try:
                        if h.aio_command_completed(cookie):
                            os.pwrite(fd, buf.to_bytearray(), o)
                            break
                    except nbd.Error as e:
                        print("read %d 1 failed %s"
                              % (o, errno.errorcode.get(e.errno, e.errno)))
                        failed += 1
                        break
                    h.poll(-1)
    elif how == "reread":
        for off in range(0, size, 1 << 20):
            read(off, min(1 << 20, size - off))
        if failed == 0:
            print("copied")
        for a in args:
            off, n = (int(x) for x in a.split(":"))
            if read(off, n):
                print("read %d %d ok" % (off, n))
        os.close(fd)
        h.shutdown()
        sys.exit(1 if failed else 0)
    elif how == "extents":
        piece, off = int(args[0]), 0
        while off < size:
            got = []

            def extent(meta, start, entries, err):
                for i in range(0, len(entries), 2):
                    got.append((entries[i], entries[i + 1]))
                return 0
            try:
                h.block_status(min(piece, size - off), off, extent)
            except nbd.Error as e:
                print("extents %d failed %s"
                      % (off, errno.errorcode.get(e.errno, e.errno)))
                failed += 1
                break
            for n, flags in got:
                n = min(n, size - off)
                for a in range(off, off + n, 1 << 20):
                    if not flags & nbd.STATE_ZERO:
                        read(a, min(1 << 20, off + n - a))
                off += n
    else:
        sys.exit("importclient.py: unknown order " + how)
    os.close(fd)
    if failed == 0:
        print("copied")
    h.shutdown()
    sys.exit(1 if failed else 0)


main()
