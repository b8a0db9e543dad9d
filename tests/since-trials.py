#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""Random trials of nbdsum --since against full computations.

    since-trials.py NBDSUM REFERENCE TRIALS SEED DIR

Each trial makes a qcow2 image of a random size with random data, takes
its manifest (nbdsum --blocks through qemu-nbd, a random digest and
block size, text or JSON), then runs a chain of three incrementals: a
persistent dirty bitmap (random granularity) started, random writes,
zero writes and discards (unaligned, spanning blocks, at the tail),
sometimes a resize, then nbdsum --since with qemu-nbd -A -B (or, the
images having no backing file, -B and --immutable-backing), once for
the checksum and once with --blocks for the next manifest, whose
bitmap is cleared at that moment.  Every result must equal nbdsum's
full computation of the same image and reference.py's checksum of its
raw bytes.  A step that shrank the image must be refused instead (a
bitmap does not record a shrink), and the chain goes on from a full
--blocks.  Prints one line per mismatch and a last line 'N compared,
N mismatched'; exits 1 on any mismatch or failure.
"""
import json
import os
import random
import subprocess
import sys

NBDSUM, REFERENCE, TRIALS, SEED, DIR = sys.argv[1:6]
TRIALS, SEED = int(TRIALS), int(SEED)
rng = random.Random(SEED)

BLOCK_SIZES = [4096, 65536, 98304, 1048576]
DIGESTS = ["sha256", "sha1", "blake2b512"]
GRANULARITIES = [4096, 65536, 1048576]


def run(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, **kw).stdout


def qemu_io(img, cmds):
    args = ["qemu-io", "-f", "qcow2"]
    for c in cmds:
        args += ["-c", c]
    run(*args, img)


def serve(img, bitmap=None, depth=True):
    cmd = ["[", "qemu-nbd", "-r", "-f", "qcow2"]
    if bitmap:
        cmd += ["-A", "-B", bitmap] if depth else ["-B", bitmap]
    return cmd + [img, "]"]


def checksum_of(line):
    """The hex checksum of an nbdsum line, tagged or not."""
    line = line.strip()
    return line.split(" = ")[-1] if line.startswith("BLKHASH-") \
        else line.split()[0]


def manifest_root(text):
    if text.startswith("{"):
        return json.loads(text)["checksum"]
    return text.split("\n", 1)[0].split()[4]


def random_ops(size):
    """Writes, zero writes and discards, some at the tail."""
    ops = []
    for _ in range(rng.randint(0, 8)):
        if size == 0:
            break
        kind = rng.choice(["write", "write", "zero", "discard"])
        if rng.random() < 0.25:
            off = max(0, size - rng.randint(1, 200000))
        else:
            off = rng.randrange(size)
        length = min(size - off, rng.choice([1, 511, 4096, 65537, 300000]))
        if length == 0:
            continue
        if kind == "write":
            ops.append("write -P %d %d %d" % (rng.randint(1, 255), off, length))
        elif kind == "zero":
            ops.append("write -z %d %d" % (off, length))
        else:
            # qcow2 discards whole clusters only; what it leaves is
            # still marked dirty.
            ops.append("discard %d %d" % (off, length))
    return ops


def main():
    compared = mismatched = 0
    img = os.path.join(DIR, "t.qcow2")
    raw = os.path.join(DIR, "t.raw")
    man = os.path.join(DIR, "m")
    for trial in range(TRIALS):
        bs = rng.choice(BLOCK_SIZES)
        digest = rng.choice(DIGESTS)
        # Not 0: qemu 7.2 loses persistent bitmaps of an empty image.
        size = rng.choice([rng.randint(1, 3 << 20), rng.randint(1, 64) * bs])
        use_json = rng.random() < 0.3
        if os.path.exists(img):
            os.unlink(img)
        run("qemu-img", "create", "-q", "-f", "qcow2", img, str(size))
        qemu_io(img, [op for op in random_ops(size) if op.startswith("write")])
        hs = ["-d", digest, "--block-size", str(bs)]
        text = run(NBDSUM, "-q", "--blocks", *hs,
                   *(["--json"] if use_json else []),
                   *serve(img)).decode()
        with open(man, "w") as f:
            f.write(text)
        for step in range(3):
            bitmap = "b%d" % step
            gran = rng.choice(GRANULARITIES)
            run("qemu-img", "bitmap", "--add", "--enable", "-g", str(gran),
                img, bitmap)
            shrunk = False
            if rng.random() < 0.2:
                # qcow2 sizes are whole 512 byte sectors.
                new = max(512, (size + rng.choice([-1, 1]) *
                                rng.randint(1, 300000)) // 512 * 512)
                run("qemu-img", "resize", "-q", "--shrink", "-f", "qcow2",
                    img, str(new))
                shrunk = new < size
                size = new
            ops = random_ops(size)
            if ops:
                qemu_io(img, ops)
            since = ["--since", man, "--dirty-bitmap", bitmap]
            depth = rng.random() < 0.7
            if not depth:
                since.append("--immutable-backing")
            compared += 1
            if shrunk:
                # Refused, printing no checksum; a new chain starts.
                r = subprocess.run([NBDSUM, "-q", *since,
                                    *serve(img, bitmap, depth)],
                                   capture_output=True)
                if r.returncode != 1 or r.stdout or \
                   b"fewer than the" not in r.stderr:
                    mismatched += 1
                    print("trial %d step %d (seed %d): a shrink to %d not "
                          "refused: status %d, %s %s"
                          % (trial, step, SEED, size, r.returncode,
                             r.stdout, r.stderr))
                text = run(NBDSUM, "-q", "--blocks", *hs,
                           *(["--json"] if use_json else []),
                           *serve(img)).decode()
                with open(man, "w") as f:
                    f.write(text)
                run("qemu-img", "bitmap", "--remove", img, bitmap)
                continue
            got = checksum_of(run(NBDSUM, "-q", *since,
                                  *serve(img, bitmap, depth)).decode())
            text = run(NBDSUM, "-q", "--blocks", *since,
                       *(["--json"] if use_json else []),
                       *serve(img, bitmap, depth)).decode()
            got_blocks = manifest_root(text)
            full = checksum_of(run(NBDSUM, "-q", *hs, *serve(img)).decode())
            run("qemu-img", "convert", "-f", "qcow2", "-O", "raw", img, raw)
            ref = run(sys.executable, REFERENCE, digest, str(bs),
                      raw).decode().strip()
            if not got == got_blocks == full == ref:
                mismatched += 1
                print("trial %d step %d (seed %d, %s, %d byte blocks, "
                      "granularity %d, size %d): --since %s, --since "
                      "--blocks %s, full %s, reference %s; ops %s"
                      % (trial, step, SEED, digest, bs, gran, size, got,
                         got_blocks, full, ref, ops))
            # The next manifest is of this moment; its bitmap starts now.
            with open(man, "w") as f:
                f.write(text)
            run("qemu-img", "bitmap", "--remove", img, bitmap)
    print("%d compared, %d mismatched" % (compared, mismatched))
    return 1 if mismatched else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as e:
        print("failed: %s: %s" % (" ".join(e.cmd), e.stderr.decode()))
        sys.exit(1)
