# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""The NBD protocol's constants and framing, for the small servers the
tests run instead of nbdkit (stallnbd.py, bitmapnbd.py, echonbd.py):
each imports this from its own directory."""

NBDMAGIC = b"NBDMAGIC"
IHAVEOPT = 0x49484156454F5054
REPLY_MAGIC = 0x3E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
CHUNK_MAGIC = 0x668E33EF
FLAG_FIXED_NEWSTYLE, FLAG_NO_ZEROES = 1, 2
OPT_EXPORT_NAME, OPT_ABORT, OPT_INFO, OPT_GO = 1, 2, 6, 7
OPT_STRUCTURED_REPLY, OPT_SET_META_CONTEXT = 8, 10
REP_ACK, REP_INFO, REP_META_CONTEXT = 1, 3, 4
REP_ERR_UNSUP, REP_ERR_UNKNOWN = (1 << 31) + 1, (1 << 31) + 6
CMD_READ, CMD_DISC, CMD_CACHE, CMD_BLOCK_STATUS = 0, 2, 5, 7

import struct


def recv_exactly(conn, n):
    """n bytes from conn; EOFError if it hangs up first."""
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def option_reply(conn, opt, rep, data=b""):
    conn.sendall(struct.pack(">QIII", REPLY_MAGIC, opt, rep, len(data)) + data)
