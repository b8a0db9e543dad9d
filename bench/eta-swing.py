#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Run COMMAND (nbdsum -p ...) with its standard error on a pseudo-
# terminal and read its bar as it is drawn: prints the run's seconds,
# the bars drawn, and the finish the bar predicted (the time it was
# drawn plus its ETA) at its earliest and latest once 10% was done,
# and their ratio: 1 is a steady ETA.
#
#   bench/eta-swing.py COMMAND [ARGS...]
import os
import pty
import re
import subprocess
import sys
import time

master, slave = pty.openpty()
t0 = time.time()
p = subprocess.Popen(sys.argv[1:], stderr=slave, stdout=subprocess.DEVNULL)
os.close(slave)
rows = []
while True:
    try:
        data = os.read(master, 4096)
    except OSError:
        break
    if not data:
        break
    t = time.time() - t0
    for part in data.split(b"\r"):
        m = re.search(rb"(\d+)%.*ETA (\d+):(\d\d):(\d\d)", part)
        if m:
            eta = int(m[2]) * 3600 + int(m[3]) * 60 + int(m[4])
            rows.append((t, int(m[1]), eta))
p.wait()
end = time.time() - t0
pred = [t + e for t, pct, e in rows if pct >= 10]
if pred:
    print(f"{end:.1f} s, {len(rows)} bars, predicted finish after 10%: "
          f"{min(pred):.1f} to {max(pred):.1f} s, ratio "
          f"{max(pred) / max(min(pred), 0.1):.2f}")
else:
    print(f"{end:.1f} s, {len(rows)} bars, none past 10% with an ETA")
sys.exit(p.returncode)
