#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# One QMP command to a monitor socket, as a user sends it: the
# capabilities, then the command (JSON); prints the reply, exits 1 on
# an error reply.  block-job-cancel returns once the job is cancelled
# (the BLOCK_JOB_CANCELLED event).
#
#   qmp.py SOCKET COMMAND-JSON
import json
import socket
import sys

sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
f = sock.makefile("rw")
json.loads(f.readline())                # the greeting
events = []


def call(obj):
    f.write(json.dumps(obj) + "\n")
    f.flush()
    while True:
        r = json.loads(f.readline())
        if "event" in r:
            events.append(r["event"])
        else:
            return r


call({"execute": "qmp_capabilities"})
cmd = json.loads(sys.argv[2])
r = call(cmd)
print(json.dumps(r))
if "error" in r:
    sys.exit(1)
if cmd["execute"] == "block-job-cancel":
    while "BLOCK_JOB_CANCELLED" not in events:
        r = json.loads(f.readline())
        if "event" in r:
            events.append(r["event"])
