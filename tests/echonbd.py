# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""An NBD server of crafted views that answer nbdsum's nonce, for the
tests of what nbdsum does with a view that lies.

echonbd.py SOCKET DIR [--no-echo] serves the files of DIR read-only on
the Unix socket SOCKET, like nbdkit's file plugin with dir=, each
client in a thread of its own, until killed.  An export name ending in
",nonce=HEX" is the file named without it, its bytes 128 to 191 (the
view header's nonce) replaced by HEX, NUL padded: a crafted view file
x@blkhash answers as the filter would for x@blkhash,nonce=HEX, so that
only the rest of its header is tested.  A '/' of a name (a block
size: x@blkhash:sha1/1M) is looked up as '%2F'.  With --no-echo the file is
served as it is: a server that drops what follows a comma (a mirror
of files named like views) but cannot answer the nonce.  Simple replies; multi-conn;
NBD_CMD_CACHE acknowledged.  It prints 'listening' once the socket is
there.  With --hangup-at=OFFSET a read or cache reaching OFFSET is not
answered: the server shuts its side of that connection and drops what
follows, so the client sees the connection end cleanly (no reset).
With --error-text=TEXT its refusals of unknown names carry TEXT, the
message a server may send with an option's error (a hostile one's).
With --stall-after=N it greets only its first N clients: the others'
handshakes wait for ever (a server that advertises multi-conn but
admits fewer).  With --refuse-after=N the clients after its first N
are refused as nbdkit's limit filter refuses them: their connection is
closed before the greeting.  With --one-client=SECONDS a client that
comes while another is connected, or within SECONDS of the last one
leaving, is refused so: nbdkit --filter=limit limit=1, which frees its
slot only once it has seen the last client go.  With
--refuse-delay=SECONDS a refused client is closed only SECONDS after it
came (a server slow to refuse), and 'refused a client' printed then.
With --info-delay=SECONDS NBD_OPT_INFO is answered only after SECONDS
(a server slow to answer).  With --not-fixed it speaks newstyle without
the fixed flag: NBD_OPT_EXPORT_NAME only, and an unknown name closes
the connection, as such a server must.  With --exit-on-refusal the
first client it refuses is closed after the listening socket, and the
server exits: one that dies (the next connect is refused).  With
--default=NAME the default export ('') is the file NAME.  With SOCKET
'-' it serves the socket it was handed as fd 3 (socket activation, as
nbdsum's [ CMD ] runs it).
"""

import os
import socket
import struct
import sys
import threading
import time

from nbdwire import (CMD_CACHE, CMD_DISC, CMD_READ, IHAVEOPT, OPT_ABORT,
                     OPT_EXPORT_NAME, OPT_GO, OPT_INFO, REP_ACK,
                     REP_ERR_UNKNOWN, REP_ERR_UNSUP, REP_INFO, REQUEST_MAGIC,
                     SIMPLE_REPLY_MAGIC, option_reply, recv_exactly)

# HAS_FLAGS, READ_ONLY, CAN_MULTI_CONN, SEND_CACHE
EXPORT_FLAGS = 1 | 2 | (1 << 8) | (1 << 10)
NONCE = ",nonce="

SOCKET, DIR = sys.argv[1:3]
ECHO = "--no-echo" not in sys.argv[3:]
ERROR_TEXT = next((a.split("=", 1)[1].encode() for a in sys.argv[3:]
                   if a.startswith("--error-text=")), b"")
HANGUP = next((int(a.split("=", 1)[1]) for a in sys.argv[3:]
               if a.startswith("--hangup-at=")), None)
STALL_AFTER = next((int(a.split("=", 1)[1]) for a in sys.argv[3:]
                    if a.startswith("--stall-after=")), None)
REFUSE_AFTER = next((int(a.split("=", 1)[1]) for a in sys.argv[3:]
                     if a.startswith("--refuse-after=")), None)
ONE_CLIENT = next((float(a.split("=", 1)[1]) for a in sys.argv[3:]
                   if a.startswith("--one-client=")), None)
NOT_FIXED = "--not-fixed" in sys.argv[3:]
EXIT_ON_REFUSAL = "--exit-on-refusal" in sys.argv[3:]
DEFAULT = next((a.split("=", 1)[1] for a in sys.argv[3:]
                if a.startswith("--default=")), None)
REFUSE_DELAY = next((float(a.split("=", 1)[1]) for a in sys.argv[3:]
                     if a.startswith("--refuse-delay=")), 0)
INFO_DELAY = next((float(a.split("=", 1)[1]) for a in sys.argv[3:]
                   if a.startswith("--info-delay=")), 0)
# --one-client: clients connected, and when the last one left.
slot = {"held": 0, "freed": 0.0}
slot_lock = threading.Lock()


class Served:
    """A file read as it is asked for, its nonce bytes replaced."""

    def __init__(self, path, nonce):
        self.fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size
        self.nonce = nonce.ljust(64, b"\0") if nonce else None

    def read(self, offset, length):
        data = bytearray(os.pread(self.fd, length, offset))
        data += bytes(length - len(data))
        if self.nonce and offset < 192 and offset + length > 128:
            for i in range(max(offset, 128), min(offset + length, 192)):
                data[i - offset] = self.nonce[i - 128]
        return bytes(data)


def lookup(name):
    """What export name serves, or None."""
    nonce = b""
    if NONCE in name:
        name, hexdigits = name.rsplit(NONCE, 1)
        nonce = hexdigits.encode()[:64] if ECHO else b""
    name = name.replace("/", "%2F")
    if not name and DEFAULT:
        name = DEFAULT
    path = os.path.join(DIR, name)
    if "/" in name or not name or not os.path.isfile(path):
        return None
    return Served(path, nonce)


def negotiate_not_fixed(conn):
    conn.sendall(b"NBDMAGIC" + struct.pack(">QH", IHAVEOPT, 0))
    recv_exactly(conn, 4)
    _, opt, length = struct.unpack(">QII", recv_exactly(conn, 16))
    data = recv_exactly(conn, length)
    served = lookup(data.decode(errors="replace"))
    if opt != OPT_EXPORT_NAME or served is None:
        raise EOFError
    conn.sendall(struct.pack(">QH", served.size, EXPORT_FLAGS) + bytes(124))
    return served


def negotiate(conn):
    if NOT_FIXED:
        return negotiate_not_fixed(conn)
    conn.sendall(b"NBDMAGIC" + struct.pack(">QH", IHAVEOPT, 3))
    recv_exactly(conn, 4)
    while True:
        _, opt, length = struct.unpack(">QII", recv_exactly(conn, 16))
        data = recv_exactly(conn, length)
        if opt == OPT_ABORT:
            raise EOFError
        if opt not in (OPT_INFO, OPT_GO):
            option_reply(conn, opt, REP_ERR_UNSUP)
            continue
        (nlen,) = struct.unpack(">I", data[:4])
        served = lookup(data[4:4 + nlen].decode(errors="replace"))
        if served is None:
            option_reply(conn, opt, REP_ERR_UNKNOWN, ERROR_TEXT)
            continue
        if opt == OPT_INFO:
            time.sleep(INFO_DELAY)
        option_reply(conn, opt, REP_INFO,
                     struct.pack(">HQH", 0, served.size, EXPORT_FLAGS))
        option_reply(conn, opt, REP_ACK)
        if opt == OPT_GO:
            return served


def serve(conn):
    data = negotiate(conn)
    while True:
        (magic, _, ctype, cookie, offset,
         length) = struct.unpack(">IHHQQI", recv_exactly(conn, 28))
        assert magic == REQUEST_MAGIC
        if ctype == CMD_DISC:
            return
        if (HANGUP is not None and ctype in (CMD_READ, CMD_CACHE) and
                offset + length > HANGUP):
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(65536):
                pass
            return
        if ctype == CMD_READ:
            conn.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, 0, cookie) +
                         data.read(offset, length))
        elif ctype == CMD_CACHE:
            conn.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, 0, cookie))
        else:
            conn.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, 95, cookie))


def client(conn):
    try:
        serve(conn)
    except (EOFError, ConnectionError):
        pass
    finally:
        conn.close()
        if ONE_CLIENT is not None:
            with slot_lock:
                slot["held"] -= 1
                slot["freed"] = time.monotonic()


def slot_taken():
    """--one-client: is the slot taken (else take it)?"""
    with slot_lock:
        if (slot["held"] or
                time.monotonic() < slot["freed"] + ONE_CLIENT):
            return True
        slot["held"] += 1
        return False


def refuse(conn):
    conn.close()
    print("refused a client", flush=True)


def main():
    if SOCKET == "-":
        # Socket activation (LISTEN_FDS): nbdsum's [ CMD ].
        sock = socket.socket(fileno=3)
    else:
        for path in (SOCKET, SOCKET + ".new"):
            if os.path.exists(path):
                os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Bound and listening under another name, then renamed: a client
        # that sees the socket file is not refused (bind(2) makes it
        # before listen(2)).
        sock.bind(SOCKET + ".new")
        sock.listen(64)
        os.rename(SOCKET + ".new", SOCKET)
        print("listening", flush=True)
    stalled, greet, admit = [], STALL_AFTER, REFUSE_AFTER
    while True:
        conn, _ = sock.accept()
        if ((admit is not None and admit <= 0) or
                (ONE_CLIENT is not None and slot_taken())):
            if EXIT_ON_REFUSAL:
                sock.close()
                refuse(conn)
                os._exit(0)
            if REFUSE_DELAY:
                threading.Timer(REFUSE_DELAY, refuse, (conn,)).start()
            else:
                refuse(conn)
            continue
        if admit is not None:
            admit -= 1
        if greet is not None and greet <= 0:
            stalled.append(conn)
            print("stalled a client", flush=True)
            continue
        if greet is not None:
            greet -= 1
        threading.Thread(target=client, args=(conn,), daemon=True).start()


main()
