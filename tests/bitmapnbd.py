# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""An NBD server with a dirty bitmap that misbehaves, for nbdsum --since.

bitmapnbd.py MODE SOCKET FILE serves FILE read-only on the Unix socket
SOCKET (one client at a time, until killed), with the metadata
contexts base:allocation (all data), qemu:allocation-depth (all the
image's own layer, depth 1) and qemu:dirty-bitmap:b1 (all dirty), the
bitmap answered as MODE says:

  short   each block status reply describes the bitmap for half of the
          range asked (at least 512 bytes): legal, the client asks again
  omit    block status replies never describe the bitmap: a client
          that took silence for clean would skip every block

Structured replies only; every other option is refused as unsupported.
It prints 'listening' once the socket is there.
"""

import os
import socket
import struct
import sys

from nbdwire import (CHUNK_MAGIC, CMD_BLOCK_STATUS, CMD_DISC, CMD_READ,
                     IHAVEOPT, OPT_ABORT, OPT_GO, OPT_INFO, OPT_SET_META_CONTEXT,
                     OPT_STRUCTURED_REPLY, REP_ACK, REP_ERR_UNSUP, REP_INFO,
                     REP_META_CONTEXT, REQUEST_MAGIC, option_reply,
                     recv_exactly)

CHUNK_NONE, CHUNK_OFFSET_DATA, CHUNK_BLOCK_STATUS, CHUNK_ERROR = 0, 1, 5, 32769
FLAG_DONE = 1
CONTEXTS = {"base:allocation": 1, "qemu:dirty-bitmap:b1": 2,
            "qemu:allocation-depth": 3}

MODE, SOCKET, FILE = sys.argv[1:4]
DATA = open(FILE, "rb").read()


def chunk(conn, flags, ctype, cookie, payload):
    conn.sendall(struct.pack(">IHHQI", CHUNK_MAGIC, flags, ctype, cookie,
                             len(payload)) + payload)


def negotiate(conn):
    """Options until NBD_OPT_GO: returns the contexts chosen."""
    chosen = {}
    conn.sendall(b"NBDMAGIC" + struct.pack(">QH", IHAVEOPT, 3))
    recv_exactly(conn, 4)
    while True:
        _, opt, length = struct.unpack(">QII", recv_exactly(conn, 16))
        data = recv_exactly(conn, length)
        if opt == OPT_ABORT:
            raise EOFError
        if opt == OPT_STRUCTURED_REPLY:
            option_reply(conn, opt, REP_ACK)
        elif opt == OPT_SET_META_CONTEXT:
            (n,) = struct.unpack(">I", data[:4])
            pos = 4 + n
            (count,) = struct.unpack(">I", data[pos:pos + 4])
            pos += 4
            chosen = {}
            for _ in range(count):
                (qlen,) = struct.unpack(">I", data[pos:pos + 4])
                name = data[pos + 4:pos + 4 + qlen].decode()
                pos += 4 + qlen
                if name in CONTEXTS:
                    chosen[name] = CONTEXTS[name]
                    option_reply(conn, opt, REP_META_CONTEXT,
                                 struct.pack(">I", CONTEXTS[name]) +
                                 name.encode())
            option_reply(conn, opt, REP_ACK)
        elif opt in (OPT_INFO, OPT_GO):
            # NBD_INFO_EXPORT: size; flags HAS_FLAGS | READ_ONLY.
            option_reply(conn, opt, REP_INFO,
                         struct.pack(">HQH", 0, len(DATA), 1 | 2))
            option_reply(conn, opt, REP_ACK)
            if opt == OPT_GO:
                return chosen
        else:
            option_reply(conn, opt, REP_ERR_UNSUP)


def block_status(conn, cookie, offset, length, chosen):
    length = min(length, len(DATA) - offset)
    for name, cid in chosen.items():
        if name == "base:allocation":
            chunk(conn, 0, CHUNK_BLOCK_STATUS, cookie,
                  struct.pack(">III", cid, length, 0))
        elif name == "qemu:allocation-depth":
            chunk(conn, 0, CHUNK_BLOCK_STATUS, cookie,
                  struct.pack(">III", cid, length, 1))
        elif MODE == "short":
            n = max(512, length // 2 // 512 * 512) if length > 512 else length
            chunk(conn, 0, CHUNK_BLOCK_STATUS, cookie,
                  struct.pack(">III", cid, min(n, length), 1))
    chunk(conn, FLAG_DONE, CHUNK_NONE, cookie, b"")


def serve(conn):
    chosen = negotiate(conn)
    while True:
        (magic, _, ctype, cookie, offset,
         length) = struct.unpack(">IHHQQI", recv_exactly(conn, 28))
        assert magic == REQUEST_MAGIC
        if ctype == CMD_DISC:
            return
        if ctype == CMD_READ:
            chunk(conn, FLAG_DONE, CHUNK_OFFSET_DATA, cookie,
                  struct.pack(">Q", offset) + DATA[offset:offset + length])
        elif ctype == CMD_BLOCK_STATUS:
            block_status(conn, cookie, offset, length, chosen)
        else:
            msg = b"unsupported"
            chunk(conn, FLAG_DONE, CHUNK_ERROR, cookie,
                  struct.pack(">IH", 95, len(msg)) + msg)


def main():
    if os.path.exists(SOCKET):
        os.unlink(SOCKET)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(SOCKET)
    sock.listen(4)
    print("listening", flush=True)
    while True:
        conn, _ = sock.accept()
        try:
            serve(conn)
        except (EOFError, ConnectionError):
            pass
        finally:
            conn.close()


main()
