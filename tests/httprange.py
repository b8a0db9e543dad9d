#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""A small HTTP server for nbdkit's curl plugin: the files of a
directory, with HEAD and byte ranges (python's http.server has none).

    httprange.py DIR PORTFILE

listens on 127.0.0.1 at a free port, writes the port to PORTFILE once
it listens, and serves until killed.  A range reaching past the end is
cut at it, as servers do (nbdkit 1.32's curl plugin asks one byte past
the end of a read at the end of the file).
"""
import http.server
import os
import re
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def target(self):
        name = os.path.basename(self.path.split("?", 1)[0])
        path = os.path.join(self.server.root, name)
        if not name or not os.path.isfile(path):
            self.send_error(404)
            return None
        return path

    def head_of(self, path, code, length, extra=()):
        self.send_response(code)
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()

    def do_HEAD(self):
        path = self.target()
        if path:
            self.head_of(path, 200, os.path.getsize(path))

    def do_GET(self):
        path = self.target()
        if path is None:
            return
        size = os.path.getsize(path)
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if m is None:
            a, b, code, extra = 0, size - 1, 200, ()
        else:
            a = int(m.group(1))
            b = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            if a > b:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            code = 206
            extra = (("Content-Range", "bytes %d-%d/%d" % (a, b, size)),)
        self.head_of(path, code, b - a + 1, extra)
        with open(path, "rb") as f:
            f.seek(a)
            left = b - a + 1
            while left:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)


def main():
    root, portfile = sys.argv[1:3]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.root = root
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(tmp, portfile)
    server.serve_forever()


main()
