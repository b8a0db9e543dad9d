#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""Canaries for hostile images: files that must never be opened and
listeners that must never be reached.

    canary.py DIR

makes DIR/files/ (a secret file, a directory tree/ with a file in it),
listens on 127.0.0.1 (its port written to DIR/port) and on the Unix
socket DIR/sock, and watches DIR/files and DIR/files/tree with inotify
for any open or read.  Everything it sees is appended to DIR/events,
one line each; DIR/ready appears once it watches.  A test names the
canaries in images, runs nbdsum, then syncs: it creates
DIR/files/barrier-N and waits for DIR/synced-N, which the watcher
writes only after every event before it (inotify keeps their order)
and every connection already made (the kernel queued them before the
client's connect returned).  Runs until killed.
"""

import ctypes
import os
import select
import socket
import struct
import sys

IN_ACCESS = 0x001
IN_OPEN = 0x020
IN_ISDIR = 0x40000000
EVENT = struct.Struct("iIII")


def main():
    state = sys.argv[1]
    files = os.path.join(state, "files")
    tree = os.path.join(files, "tree")
    os.makedirs(tree, exist_ok=True)
    for path in (os.path.join(files, "secret"), os.path.join(tree, "leaf")):
        with open(path, "w") as f:
            f.write("a canary: nbdsum must never open this\n" * 100)
    events = open(os.path.join(state, "events"), "a", buffering=1)

    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        sys.exit("canary: inotify_init1 failed")
    watches = {}
    for path in (files, tree):
        wd = libc.inotify_add_watch(fd, path.encode(), IN_OPEN | IN_ACCESS)
        if wd < 0:
            sys.exit("canary: inotify_add_watch %s failed" % path)
        watches[wd] = path

    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(64)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock_path = os.path.join(state, "sock")
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    unix.bind(sock_path)
    unix.listen(64)
    with open(os.path.join(state, "port"), "w") as f:
        f.write("%d\n" % tcp.getsockname()[1])
    open(os.path.join(state, "ready"), "w").close()

    def drain_connections():
        for lsock, kind in ((tcp, "tcp"), (unix, "unix")):
            lsock.setblocking(False)
            while True:
                try:
                    conn, _ = lsock.accept()
                except BlockingIOError:
                    break
                events.write("connection to the %s listener\n" % kind)
                conn.close()

    while True:
        ready, _, _ = select.select([fd, tcp, unix], [], [])
        if tcp in ready or unix in ready:
            drain_connections()
        if fd not in ready:
            continue
        buf = os.read(fd, 65536)
        pos = 0
        while pos < len(buf):
            wd, mask, _, length = EVENT.unpack_from(buf, pos)
            name = buf[pos + EVENT.size:pos + EVENT.size + length]
            name = name.rstrip(b"\0").decode(errors="replace")
            pos += EVENT.size + length
            path = os.path.join(watches.get(wd, "?"), name)
            if name.startswith("barrier-"):
                if mask & IN_OPEN:
                    drain_connections()
                    n = name[len("barrier-"):]
                    open(os.path.join(state, "synced-" + n), "w").close()
                continue
            what = "read" if mask & IN_ACCESS else "opened"
            kind = "directory" if mask & IN_ISDIR else "file"
            events.write("%s %s %s\n" % (what, kind, path))


if __name__ == "__main__":
    main()
