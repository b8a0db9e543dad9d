# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""NBD servers that stall, for nbdsum's signal and timeout tests.

stallnbd.py MODE SOCKET listens on the Unix socket SOCKET until killed,
serving every client in a thread of its own:

  silent    accepts and never says anything
  greeting  sends the fixed newstyle greeting, refuses the options a
            client sends while connecting (NBD_REP_ERR_UNSUP), and then
            never answers NBD_OPT_GO, NBD_OPT_INFO or NBD_OPT_EXPORT_NAME

It prints a line on standard output as it stalls: 'stalled MODE'.

Each client's socket stays open until the client hangs up.
"""

import os
import socket
import struct
import sys
import threading

from nbdwire import (FLAG_FIXED_NEWSTYLE, FLAG_NO_ZEROES, IHAVEOPT,
                     NBDMAGIC, OPT_ABORT, OPT_EXPORT_NAME, OPT_GO, OPT_INFO,
                     REP_ERR_UNSUP, REPLY_MAGIC, recv_exactly)


def wait_hangup(conn):
    """Read and drop whatever comes until the client hangs up."""
    while conn.recv(4096):
        pass


def stalled(mode):
    print("stalled", mode, flush=True)


def greeting(conn, mode):
    conn.sendall(NBDMAGIC + struct.pack(">QH", IHAVEOPT,
                                        FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES))
    recv_exactly(conn, 4)                       # the client's flags
    while True:
        magic, opt, length = struct.unpack(">QII", recv_exactly(conn, 16))
        if magic != IHAVEOPT:
            return
        recv_exactly(conn, length)
        if opt in (OPT_EXPORT_NAME, OPT_INFO, OPT_GO):
            stalled(mode)                       # and never answer
            return
        if opt == OPT_ABORT:
            return
        conn.sendall(struct.pack(">QIII", REPLY_MAGIC, opt, REP_ERR_UNSUP, 0))


def serve(conn, mode):
    try:
        if mode == "silent":
            stalled(mode)
        else:
            greeting(conn, mode)
        wait_hangup(conn)
    except (EOFError, OSError):
        pass
    finally:
        conn.close()


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode not in ("silent", "greeting"):
        sys.exit("stallnbd.py: unknown mode " + mode)
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Renamed once listening: the socket file exists from bind(2), and
    # a client before listen(2) would be refused.
    lsock.bind(path + ".new")
    lsock.listen(64)
    os.rename(path + ".new", path)
    while True:
        conn, _ = lsock.accept()
        threading.Thread(target=serve, args=(conn, mode), daemon=True).start()


if __name__ == "__main__":
    main()
