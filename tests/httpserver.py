#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""A loopback HTTP server for nbdsum's http:// inputs (through nbdkit's
curl plugin): the files of a directory with HEAD and byte ranges, and
chosen paths that misbehave.

    httpserver.py DIR [--log FILE] [--port-file FILE] [--status PATH=CODE]...
                      [--no-range PATH]... [--redirect PATH=LOCATION]...
                      [--length PATH=BYTES]... [--need-header PATH=HEADER]...
                      [--ignore-range PATH]... [--redirect-ranges PATH]...
                      [--stall PATH=OFFSET]...

listens on 127.0.0.1 at a free port, prints the port on standard
output (and to --port-file's FILE, whole at once) once it listens, and
serves until killed or its parent dies.  The one HTTP server of the
tests: nbdsum's URLs, the filter's curl imports, the campaign, the
man pages' recipes.

  --status PATH=CODE     PATH answers CODE (404, 403, 500...) to all
  --no-range PATH        PATH is served whole, without Accept-Ranges
                         and ignoring Range (a server without ranges)
  --redirect PATH=LOC    PATH answers 302 with Location: LOC ({port} in
                         LOC: this server's port)
  --length PATH=BYTES    HEAD of PATH claims Content-Length BYTES
  --need-header PATH=H   PATH answers 401 unless the request has header
                         H ("Name: value") exactly
  --ignore-range PATH    PATH says Accept-Ranges, but answers a Range
                         not from 0 with 200 and the whole file (a
                         server that honours some ranges only)
  --redirect-ranges PATH its --redirect answer says Accept-Ranges: bytes
                         and has a body (a page saying where)
  --stall PATH=OFFSET    a GET of PATH whose bytes reach OFFSET sends
                         those before it, then nothing, holding the
                         connection open (a stalled server)
  --log FILE             each connection and request appended to FILE,
                         one line each ("connection", "HEAD /x", ...)

A range reaching past the end is cut at it, as servers do (nbdkit
1.32's curl plugin asks one byte past the end of a read at the end of
the file).  Paths are matched without their query string.
"""
import ctypes
import http.server
import os
import re
import signal
import sys
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        self.server.record("connection")

    def route(self):
        """Answer a misbehaving path; return (path, ranges) otherwise."""
        srv = self.server
        key = self.path.split("?", 1)[0]
        srv.record("%s %s %s" % (self.command, key,
                                 self.headers.get("Range", "-")))
        status = srv.status.get(key)
        if key in srv.need:
            name, _, value = srv.need[key].partition(":")
            if self.headers.get(name.strip()) != value.strip():
                status = 401
        if status is not None:
            self.send_response(status)
            body = b"no\n"
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(body)
            return None, False
        if key in srv.redirect:
            body = b"moved\n" if key in srv.redirect_ranges else b""
            self.send_response(302)
            self.send_header("Location", srv.redirect[key].replace(
                "{port}", str(srv.server_address[1])))
            self.send_header("Content-Length", str(len(body)))
            if body:
                self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(body)
            return None, False
        name = os.path.basename(key)
        path = os.path.join(srv.root, name)
        if not name or not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None, False
        return path, key not in srv.no_range

    def head_of(self, code, length, ranges, extra=()):
        self.send_response(code)
        self.send_header("Content-Length", str(length))
        if ranges:
            self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()

    def do_HEAD(self):
        path, ranges = self.route()
        if path:
            key = self.path.split("?", 1)[0]
            size = self.server.length.get(key, os.path.getsize(path))
            self.head_of(200, size, ranges)

    def do_GET(self):
        path, ranges = self.route()
        if path is None:
            return
        size = os.path.getsize(path)
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        key = self.path.split("?", 1)[0]
        if m is None or not ranges or (key in self.server.ignore_range
                                       and int(m.group(1)) > 0):
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
        self.head_of(code, b - a + 1, ranges, extra)
        stall = self.server.stall.get(key)
        with open(path, "rb") as f:
            f.seek(a)
            left = b - a + 1
            if stall is not None and a <= stall <= b:
                self.wfile.write(f.read(stall - a))
                self.wfile.flush()
                threading.Event().wait()
            while left:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)


def pairs(values, convert):
    out = {}
    for v in values:
        k, _, x = v.partition("=")
        out[k] = convert(x)
    return out


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    root = args.pop(0)
    opts = {"--log": [], "--port-file": [], "--status": [], "--no-range": [], "--redirect": [],
            "--length": [], "--need-header": [], "--ignore-range": [],
            "--redirect-ranges": [], "--stall": []}
    while args:
        o = args.pop(0)
        if o not in opts or not args:
            sys.exit("httpserver.py: bad option %s" % o)
        opts[o].append(args.pop(0))

    # Not to outlive the test that started it.
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() == 1:
        sys.exit(1)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.root = root
    server.status = pairs(opts["--status"], int)
    server.redirect = pairs(opts["--redirect"], str)
    server.length = pairs(opts["--length"], int)
    server.no_range = set(opts["--no-range"])
    server.ignore_range = set(opts["--ignore-range"])
    server.redirect_ranges = set(opts["--redirect-ranges"])
    server.stall = pairs(opts["--stall"], int)
    server.need = pairs(opts["--need-header"], str)
    log = open(opts["--log"][-1], "a", buffering=1) if opts["--log"] else None
    server.record = (lambda line: log.write(line + "\n")) if log \
        else (lambda line: None)
    port = str(server.server_address[1])
    for f in opts["--port-file"]:
        with open(f + ".tmp", "w") as out:
            out.write(port + "\n")
        os.rename(f + ".tmp", f)
    print(port, flush=True)
    server.serve_forever()


main()
