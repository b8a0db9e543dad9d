#!/usr/bin/python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""slowlisten.py DELAY NBDKIT ARGS...: nbdkit, with a wide gap between
bind(2) and listen(2) on its -U socket.

It binds the socket, waits DELAY seconds (never listens if DELAY is
'never'), listens, writes the -P pidfile as nbdkit does once it accepts
connections, then becomes NBDKIT ARGS (without -U and -P) on that
socket by socket activation.  A helper that takes the socket file for
a ready server is caught: clients are refused until the listen.
"""
import os
import socket
import sys
import time

delay, nbdkit, args = sys.argv[1], sys.argv[2], sys.argv[3:]
path = args[args.index("-U") + 1]
pidfile = args[args.index("-P") + 1] if "-P" in args else None
rest = []
skip = False
for a in args:
    if skip:
        skip = False
    elif a in ("-U", "-P"):
        skip = True
    else:
        rest.append(a)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.bind(path)
if delay == "never":
    time.sleep(3600)
time.sleep(float(delay))
sock.listen(64)
if pidfile:
    with open(pidfile, "w") as f:
        f.write("%d\n" % os.getpid())
os.dup2(sock.fileno(), 3)
os.set_inheritable(3, True)
os.environ["LISTEN_PID"] = str(os.getpid())
os.environ["LISTEN_FDS"] = "1"
os.execvp(nbdkit, [nbdkit] + rest)
