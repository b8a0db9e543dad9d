#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Run a command with its standard error on a pseudo-terminal and save
# all it wrote there, byte for byte (the terminal adds \r before \n).
#
#   ptyrun.py COLUMNS FILE COMMAND [ARGS...]
#
# COLUMNS is the terminal's width (what TIOCGWINSZ tells), or 0 for a
# terminal that does not know its size.  Standard input and output are
# left as they are.  Exits with the command's status (128+N if killed
# by signal N).
import errno
import fcntl
import os
import pty
import struct
import sys
import termios

if len(sys.argv) < 4:
    sys.exit("usage: ptyrun.py COLUMNS FILE COMMAND [ARGS...]")
cols = int(sys.argv[1])
out = sys.argv[2]
argv = sys.argv[3:]

master, slave = pty.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ,
            struct.pack("HHHH", 24 if cols else 0, cols, 0, 0))
pid = os.fork()
if pid == 0:
    os.close(master)
    os.dup2(slave, 2)
    os.close(slave)
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
os.close(slave)

data = bytearray()
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError as e:
        # EIO: every copy of the terminal's other side is closed.
        if e.errno != errno.EIO:
            raise
        break
    if not chunk:
        break
    data += chunk
_, status = os.waitpid(pid, 0)
with open(out, "wb") as f:
    f.write(data)
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status)
         else 128 + os.WTERMSIG(status))
