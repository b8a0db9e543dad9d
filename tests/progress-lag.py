#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# How truthful nbdsum's progress was: its --progress=FD lines, each
# after the time it was read ("SECONDS N/100"), against the reads the
# plugin answered, from nbdkit's log filter below the blkhash filter.
#
#   progress-lag.py LOG PROGRESS TOTAL-BYTES
#
# Prints the worst lead (shown beyond what the plugin had been asked
# to read by then: never true; asked, not answered, so that a busy
# machine that logs an answer late is no lead), the worst lag
# (answered but not yet shown, looked at every 50 ms between the first
# and the last line) and the number of lines.  The image must be all
# data, so that bytes read are bytes done.
import datetime
import re
import sys

log, progress, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
asked, asked_at, answered = {}, [], []


def when(stamp):
    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp()


for line in open(log):
    m = re.match(r"(\S+ \S+) connection=(\d+) Read id=(\d+) offset=\S+ "
                 r"count=(0x[0-9a-f]+)", line)
    if m:
        asked[(m[2], m[3])] = int(m[4], 16)
        asked_at.append((when(m[1]), int(m[4], 16)))
        continue
    m = re.match(r"(\S+ \S+) connection=(\d+) \.\.\.Read id=(\d+) return=0",
                 line)
    if m:
        answered.append((when(m[1]), asked[(m[2], m[3])]))
answered.sort()


def read_by(t):
    return sum(n for (u, n) in answered if u <= t) / total


def asked_by(t):
    return sum(n for (u, n) in asked_at if u <= t) / total


shown = [(float(t), int(p.split("/")[0]) / 100)
         for t, p in (line.split() for line in open(progress))]
lead = max(p - asked_by(t) for t, p in shown)
lag, t = 0.0, shown[0][0]
while t < shown[-1][0]:
    now = max(p for u, p in shown if u <= t)
    lag = max(lag, read_by(t) - now)
    t += 0.05
print(f"lead {lead:.3f} lag {lag:.3f} lines {len(shown)} "
      f"seconds {shown[-1][0] - shown[0][0]:.1f}")
