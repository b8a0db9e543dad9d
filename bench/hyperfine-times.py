# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The wall-clock times hyperfine exported, per command, from either of
# its JSON schemas (1.x: "times"; 2.x: "measurements").
#
#   python3 hyperfine-times.py JSON...    the median of the first command
#   import: times(paths) -> {command: [seconds...]}
import json
import statistics
import sys


def times(paths):
    out = {}
    for path in paths:
        for r in json.load(open(path))["results"]:
            if "times" in r:
                t = r["times"]
            else:
                t = [m["time_wall_clock"]["value"] for m in r["measurements"]]
            out.setdefault(r["command"], []).extend(t)
    return out


if __name__ == "__main__":
    first = next(iter(times(sys.argv[1:2]).values()))
    print("%.3f" % statistics.median(first))
