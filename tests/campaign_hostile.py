# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""The trust campaign's hostile phase (tests/campaign.py --hostile N):
images and checksum files made by someone hostile, against the policy
of nbdsum(1), SECURITY.

Each case makes a directory of its own, hostile/cN, and in it images
whose headers name other files: qcow2, qcow and qed backing files,
qcow2 data files, vmdk extents and parents.  The names lead outside
the directory (absolute, '../', symlinks leading out, a subdirectory),
to protocols and json: specs aimed at loopback listeners, to devices,
FIFOs, sockets, directories and kernel files, round a loop or more
than 16 files deep; vmdk descriptors carry extents qemu skips, blank
lines before extent lines, sizes that disagree, sparse extents with
descriptors of their own, and (fuzzed) extent lines leading out hidden
where a reader may or may not take them for one; headers lie about a
backing file's format or a data file; raw disks carry another
format's header (probed); checksum files (-c) name such images with
format tags, devices and FIFOs; a command line names several, with
-j; --since reads one rebased out after its manifest.  The ordinary
cases run beside them: an overlay beside its base, a descriptor beside
its extents, and --format=FMT --allow-backing following files
elsewhere.

tests/canary.py watches hostile/canary: inotify on the canary files
every hostile name leads to, a TCP listener on 127.0.0.1 and a Unix
socket listener whose addresses the protocol names carry.  Around
each nbdsum run the phase syncs with the watcher, and fails the case
if a canary was opened or read or a listener reached.  A refusal must
exit 1 with one message naming the image and its cause and print no
checksum, within --timeout; an image that must be accepted must give
the checksum of tests/reference.py over qemu-img convert -O raw.

Case N of seed S draws its family from a shuffled cycle of FAMILIES
and everything else from random.Random("hostile:S:N"): the same seed
makes the same cases, and --hostile-case N replays one alone.
"""
import collections
import json
import os
import random
import re
import shlex
import shutil
import struct
import subprocess
import sys
import time

import reference
from campaign_phase import Phase, SetupFailed

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20

# What a refusal must say (nbdsum(1), SECURITY; client/local-chain.c).
OUT = r"outside the image's directory"
# A probed format, or a -c line's tag: neither lets a name leave the
# directory.
PROBED = r"found by probing|comes from a checksum line's tag"
PROTO = r"reads as a protocol"
LOOP = r"loops back"
DEEP = r"deeper than 16"
SKIPS = r"qemu skips"
KERNEL = r"/proc, /sys"
# A file under /sys of another file system (cgroupfs): refused as
# outside the directory, or as the kernel's; never followed.
KERNEL_OR_OUT = r"/proc, /sys|outside the image's directory"
KIND = {"fifo": r"is a FIFO", "dir": r"is a directory",
        "chr": r"is a character device", "sock": r"is a socket"}

TAGGED = re.compile(r"^BLKHASH-([^/]+)/([0-9]+[KM]?)(?::[A-Za-z0-9]+)? "
                    r"\((.*)\) = ([0-9a-f]+)$")
UNTAGGED = re.compile(r"^([0-9a-f]{32,128})  (.*)$")
VERDICT = re.compile(r"^(.*): (OK|FAILED open or read|FAILED)$")

FAMILIES = ["backing-outside", "datafile-outside", "extent-outside",
            "protocol", "special", "probed-header", "loop", "deep",
            "vmdk-odd", "vmdk-fuzz", "header-lies", "check-lines",
            "mixed-inputs", "since", "ordinary", "allow-elsewhere"]

# The images whose headers name a backing file (Hostile.referrer):
# qcow2 naming its format or not, qcow (never does), qed with the flag
# that says raw or without (probed), vmdk parents in a sparse file's
# embedded descriptor or in a descriptor file.
BACKING_REFERRERS = ["qcow2", "qcow2-nofmt", "qcow", "qed-raw", "qed-probe",
                     "vmdk-sparse", "vmdk-desc"]


def usable(opts):
    """opts as nbdsum takes them: --allow-backing applies to files
    whose --format is given, and is a usage error without one (tested
    once, in tests/nbdsum-refs.bats); a case that draws it alone is the
    case without it."""
    opts = list(opts)
    if "--allow-backing" in opts and \
            not any(o.startswith("--format=") for o in opts):
        opts.remove("--allow-backing")
    return opts


class Try:
    """One nbdsum run of a case and what it must give.

    expect: "refuse" (exit 1, one message matching every regex of
    words, no checksum), "accept" (exit 0, the oracle's checksum) or
    "either" (a refusal or the oracle's checksum; a refusal must still
    be clear).  oracle: None (qemu-img convert probes), a format, or
    "bytes" (the file's own bytes).  qemu: whether the refusal may come
    from qemu (a header qemu refuses); else it must come from nbdsum's
    policy, before qemu runs on a name it refuses.
    """

    def __init__(self, name, opts, expect, words=(), oracle=None,
                 note="", qemu=False, plain=False):
        self.name, self.opts, self.expect = name, usable(opts), expect
        self.words, self.oracle, self.note = list(words), oracle, note
        self.qemu, self.plain = qemu, plain


class CheckTry:
    """One nbdsum -c run: lines (name, expected verdicts, words its
    refusal message must match or None)."""

    def __init__(self, sums, opts, lines, note=""):
        self.sums, self.opts, self.lines, self.note = \
            sums, usable(opts), lines, note


class MultiTry:
    """One nbdsum run of several images: items (name, "accept" or
    "refuse", words)."""

    def __init__(self, items, opts, note=""):
        self.items, self.opts, self.note = items, usable(opts), note


class Hostile(Phase):
    name = "hostile"
    families = FAMILIES
    replay = "--ops 0 --seed %d%s --hostile-case %d"

    def __init__(self, c, nbdsum, mkimage):
        self.c, self.nbdsum, self.mkimage = c, nbdsum, mkimage
        self.timeout = c.args.hostile_timeout or c.timeout
        self.root = os.path.join(c.dir, "hostile")
        self.state = os.path.join(self.root, "canary")
        self.files = os.path.join(self.state, "files")
        self.secret = os.path.join(self.files, "secret")
        self.leaf = os.path.join(self.files, "tree", "leaf")
        self.sock = os.path.join(self.state, "sock")
        self.watcher = None
        self.barrier = 0
        self.seen = 0
        self.port = None
        self.stats = collections.defaultdict(collections.Counter)
        self.kernel_files = [p for p in (
            "/proc/self/environ", "/proc/version", "/proc/self/status",
            "/proc/self/mounts", "/sys/kernel/mm/transparent_hugepage/enabled",
            "/sys/kernel/uevent_seqnum", "/sys/fs/cgroup/cgroup.procs",
            "/sys/fs/cgroup/pids/cgroup.procs",
            "/sys/fs/cgroup/unified/cgroup.controllers",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes")
            if os.path.isfile(p)]

    # ------------------------------------------------------ the watcher
    def start(self):
        shutil.rmtree(self.root, ignore_errors=True)
        os.makedirs(self.state)
        self.watcher = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "canary.py"), self.state],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        ready = os.path.join(self.state, "ready")
        deadline = time.monotonic() + 30
        while not os.path.exists(ready):
            if self.watcher.poll() is not None or \
                    time.monotonic() > deadline:
                raise RuntimeError("tests/canary.py did not start")
            time.sleep(0.02)
        with open(os.path.join(self.state, "port")) as f:
            self.port = int(f.read())
        self.seen = self.events_count()

    def stop(self):
        if self.watcher:
            self.watcher.kill()
            self.watcher.wait()
            self.watcher = None

    def events(self):
        with open(os.path.join(self.state, "events")) as f:
            return f.read().splitlines()

    def events_count(self):
        path = os.path.join(self.state, "events")
        return len(self.events()) if os.path.exists(path) else 0

    def sync(self):
        """Wait until the watcher has seen every open and connection
        made before now; return what it saw since the last sync."""
        self.barrier += 1
        open(os.path.join(self.files, "barrier-%d" % self.barrier),
             "w").close()
        done = os.path.join(self.state, "synced-%d" % self.barrier)
        deadline = time.monotonic() + 60
        while not os.path.exists(done):
            if self.watcher.poll() is not None or \
                    time.monotonic() > deadline:
                raise RuntimeError("tests/canary.py stopped answering")
            time.sleep(0.005)
        ev = self.events()
        new, self.seen = ev[self.seen:], len(ev)
        return new

    # ---------------------------------------------------------- the phase
    def phase(self, n, only=None):
        self.start()
        try:
            for i in ([only] if only is not None else range(n)):
                self.elsewhere = os.path.join(self.root, "elsewhere",
                                              "c%d" % i)
                self.run_case(i, self.c.args.ops + i, self.case,
                              dirs=(self.elsewhere,))
        finally:
            self.stop()

    def case(self):
        self.images = set()
        self.c.cur_cmds.append(
            "# hostile case %d (%s), seed %d: canaries in %s "
            "(tests/canary.py), tcp 127.0.0.1:%d, unix %s"
            % (self.i, self.fam, self.c.seed, self.files, self.port,
               self.sock))
        try:
            for t in getattr(self, "f_" + self.fam.replace("-", "_"))():
                if isinstance(t, CheckTry):
                    self.run_check(t)
                elif isinstance(t, MultiTry):
                    self.run_multi(t)
                else:
                    self.run_sum(t)
        finally:
            self.stats[self.fam]["images"] += len(self.images)

    # ------------------------------------------------------------- runs
    def input_name(self, name):
        """The image as the user names it: beside the current directory
        (the case's), by its absolute name, from the campaign's
        directory, or through a symlink to the case's directory."""
        how = self.rng.choice(["cwd", "cwd", "abs", "top", "dirlink"])
        if how == "abs":
            return os.path.join(self.dir, name), self.dir
        if how == "dirlink":
            ln = os.path.join(self.elsewhere, "case")
            if not os.path.islink(ln):
                os.symlink(self.dir, ln)
                self.c.cur_cmds.append("ln -s %s %s" % (self.dir, ln))
            return os.path.join(ln, name), self.dir
        if how == "top":
            return os.path.relpath(os.path.join(self.dir, name),
                                   self.c.dir), self.c.dir
        return name, self.dir

    def watched_run(self, argv, cwd, note):
        """Run nbdsum between two syncs with the watcher; the result and
        a description, the result None if it hung."""
        c = self.c
        opdir = c.opdir()
        before = self.sync()
        if before:
            c.fail("hostile-watcher", "events before the run, from the "
                   "campaign's own setup: %s" % "; ".join(before))
        r = c.run(argv, cwd=cwd, tmpdir=opdir, touch=c.cur_touch,
                  timeout=self.timeout)
        seen = self.sync()
        what = "hostile %s %s%s" % (self.fam, note and note + ": ", r.cmd)
        c.after_nbdsum(r, what, opdir)
        self.stats[self.fam]["runs"] += 1
        self.watched(seen, what)
        return (None if r.hung else r), what

    def digest_opts(self):
        dopts, digest, bs = [], "sha256", 65536
        if self.rng.random() < 0.2:
            digest = self.rng.choice(["sha1", "sha512"])
            dopts += ["-d", digest]
        if self.rng.random() < 0.2:
            bs = self.rng.choice([4096, 131072])
            dopts += ["--block-size", str(bs)]
        return dopts, digest, bs

    def printed(self, r, mode, what):
        """The checksums nbdsum printed in mode, by input name."""
        sums = []
        try:
            if mode == "json" and r.out.strip():
                for o in json.loads(r.out).get("inputs", []):
                    if "checksum" in o:
                        sums.append((o["name"], o["checksum"]))
            elif mode == "blocks" and r.out.strip():
                h = r.out.splitlines()[0].split()
                sums.append((None, h[4]))
            elif mode == "plain":
                for ln in r.out.splitlines():
                    m = TAGGED.match(ln)
                    if m:
                        sums.append((m.group(3), m.group(4)))
                        continue
                    m = UNTAGGED.match(ln)
                    if m:
                        sums.append((m.group(2), m.group(1)))
                    elif ln.strip():
                        self.c.fail("garbled-output", "%s: %r" % (what, ln))
        except (ValueError, KeyError, IndexError) as e:
            self.c.fail("garbled-output", "%s: %s: %r" % (what, e,
                                                          r.out[:300]))
        return sums

    def run_sum(self, t):
        c = self.c
        name, cwd = self.input_name(t.name)
        self.images.add(t.name)
        dopts, digest, bs = self.digest_opts()
        mode = self.rng.choice(["plain"] * 6 + ["json", "blocks"])
        if t.plain:
            dopts, digest, bs, mode = [], "sha256", 65536, "plain"
        mopts = {"plain": [], "json": ["--json"], "blocks": ["--blocks"]}
        argv = [self.nbdsum] + dopts + mopts[mode] + t.opts + [name]
        r, what = self.watched_run(argv, cwd, t.note)
        if r is None:
            return
        st = self.stats[self.fam]
        sums = [h for _, h in self.printed(r, mode, what)]
        err = [ln for ln in r.err.splitlines() if ln.strip()]
        if r.rc != 0:
            st["refused"] += 1
            c.refusals["hostile: " + self.fam] += 1
            c.refusal_samples.setdefault("hostile: " + self.fam,
                                         (err or ["(no message)"])[-1][:160])
            if t.expect == "accept":
                c.fail("hostile-false-refusal", "%s: an image nbdsum(1) "
                       "reads was refused: %s" % (what, " / ".join(err)))
            out = [] if mode == "json" and not sums else \
                [ln for ln in r.out.splitlines() if ln.strip()]
            self.clear_refusal(r, name, t, out, err, what)
            return
        st["accepted"] += 1
        want = self.oracle(t, cwd, name, digest, bs)
        if t.expect == "refuse":
            c.fail("hostile-accepted", "%s: exit 0, printed %s, where "
                   "nbdsum(1) SECURITY refuses it (%s); the oracle says %s"
                   % (what, " ".join(sums) or "nothing",
                      " / ".join(t.words), want))
            return
        self.compare(sums, want, what, digest, bs, r)

    def compare(self, sums, want, what, digest, bs, r):
        c = self.c
        c.checks["hostile-checksum"] += 1
        if len(sums) != 1:
            c.fail("missing-output", "%s: exit 0, %d checksums printed: %r"
                   % (what, len(sums), r.out[:300]))
        elif want is None:
            c.fail("sum-of-unreadable", "%s: printed %s, the oracle cannot "
                   "read it" % (what, sums[0]))
        elif sums[0] != want:
            c.fail("wrong-checksum", "%s: printed %s, the oracle (%s/%d) "
                   "says %s" % (what, sums[0], digest, bs, want))

    def run_multi(self, t):
        """nbdsum of several inputs at once (-j: jobs of their own):
        each hashed or refused as alone, exit 1 if any was refused."""
        c = self.c
        for n, _, _ in t.items:
            self.images.add(n)
        dopts, digest, bs = self.digest_opts()
        argv = [self.nbdsum] + dopts + t.opts + [n for n, _, _ in t.items]
        r, what = self.watched_run(argv, self.dir, t.note)
        if r is None:
            return
        st = self.stats[self.fam]
        sums = dict(self.printed(r, "plain", what))
        err = [ln for ln in r.err.splitlines() if ln.strip()]
        for n, expect, words in t.items:
            mine = [e for e in err if e.startswith("nbdsum: %s: " % n)]
            if n not in sums:
                st["refused"] += 1
                if expect == "accept":
                    c.fail("hostile-false-refusal", "%s: %s refused: %s"
                           % (what, n, " / ".join(mine) or "(no message)"))
                elif len(mine) != 1:
                    c.fail("hostile-refusal-unclear", "%s: %s: %d messages "
                           "name it: %s" % (what, n, len(mine),
                                            " / ".join(err)[:600]))
                else:
                    missing = [w for w in words if not re.search(w, mine[0])]
                    if missing:
                        c.fail("hostile-refusal-unclear", "%s: the message "
                               "does not say /%s/: %s" % (
                                   what, "/, /".join(missing), mine[0]))
                continue
            st["accepted"] += 1
            if expect == "refuse":
                c.fail("hostile-accepted", "%s: %s printed %s, where "
                       "nbdsum(1) SECURITY refuses it (%s)" % (
                           what, n, sums[n], " / ".join(words)))
                continue
            want = self.oracle(Try(n, [], "accept"), self.dir, n, digest, bs)
            self.compare([sums[n]], want, what + " (%s)" % n, digest, bs, r)
        bad = any(e == "refuse" for _, e, _ in t.items)
        if r.rc != (1 if bad else 0):
            c.fail("hostile-refusal-status" if bad else
                   "hostile-false-refusal", "%s: exit %s" % (what, r.rc))

    def clear_refusal(self, r, name, t, out, err, what):
        c = self.c
        if r.rc != 1:
            c.fail("hostile-refusal-status", "%s: exit %s, not 1: %s"
                   % (what, r.rc, " / ".join(err)))
        if out:
            c.fail("hostile-refusal-output", "%s: refused, yet printed %r"
                   % (what, "\n".join(out)[:300]))
        if len(err) != 1:
            c.fail("hostile-refusal-unclear", "%s: %d lines on stderr, not "
                   "one: %s" % (what, len(err), " / ".join(err)[:600]))
            return
        if not t.qemu and t.expect == "refuse" and \
                re.search(r"\bqemu-(img|nbd|io): ", err[0]):
            c.fail("hostile-followed", "%s: qemu ran on what the policy "
                   "refuses (%s), and refused it itself: %s"
                   % (what, " / ".join(t.words), err[0]))
            return
        if not err[0].startswith("nbdsum: %s: " % name):
            c.fail("hostile-refusal-unclear", "%s: the message does not "
                   "name the image: %s" % (what, err[0]))
            return
        missing = [w for w in t.words if not re.search(w, err[0])]
        if missing and KERNEL_OR_OUT in missing:
            c.fail("hostile-followed", "%s: a file of the kernel's was "
                   "followed, and refused for another cause: %s"
                   % (what, err[0]))
        elif missing:
            c.fail("hostile-refusal-unclear", "%s: the message does not "
                   "say /%s/: %s" % (what, "/, /".join(missing), err[0]))

    def watched(self, seen, what):
        c = self.c
        st = self.stats[self.fam]
        opened = [e for e in seen if not e.startswith("connection")]
        conns = [e for e in seen if e.startswith("connection")]
        st["canaries"] += len(opened)
        st["connections"] += len(conns)
        c.checks["hostile-watched"] += 1
        if opened:
            # A directory walked and no file opened: vvfat (fat:) would,
            # and so would a process outside the campaign walking it.
            dirs = all(" directory " in e for e in opened)
            c.fail("hostile-canary-listed" if dirs else
                   "hostile-canary-opened", "%s: the canaries saw: %s%s"
                   % (what, "; ".join(opened), " (only directories: "
                      "replay the case to tell nbdsum from another "
                      "process walking them)" if dirs else ""))
        if conns:
            c.fail("hostile-connection", "%s: the listeners saw: %s"
                   % (what, "; ".join(conns)))

    def oracle(self, t, cwd, name, digest, bs):
        """tests/reference.py over the guest content, or None."""
        path = os.path.join(cwd, name)
        if t.oracle == "bytes":
            with open(path, "rb") as f:
                return reference.blkhash(digest, bs, f)
        if t.oracle is None:
            # A raw image is its bytes (qemu would round its size up
            # to a sector): as nbdsum(1) and the campaign have it.
            p = subprocess.run(["qemu-img", "info", "--output=json", path],
                               cwd=self.dir, capture_output=True,
                               env=self.c.env)
            if p.returncode == 0 and \
                    json.loads(p.stdout).get("format") == "raw":
                with open(path, "rb") as f:
                    return reference.blkhash(digest, bs, f)
        out = os.path.join(self.c.dir, "oracle.raw")
        argv = ["qemu-img", "convert"]
        if t.oracle:
            argv += ["-f", t.oracle]
        argv += ["-O", "raw", path, out]
        # A qcow2 data file's name is found from qemu's own directory.
        p = subprocess.run(argv, cwd=self.dir, capture_output=True,
                           env=self.c.env)
        if p.returncode != 0:
            return None
        with open(out, "rb") as f:
            hexsum = reference.blkhash(digest, bs, f)
        os.unlink(out)
        return hexsum

    def run_check(self, t):
        """nbdsum -c: each line's verdict, the refusals' messages, no
        hang, exit 1 when any line is not OK."""
        c = self.c
        argv = [self.nbdsum, "-c"] + t.opts + [t.sums]
        r, what = self.watched_run(argv, self.dir, t.note)
        st = self.stats[self.fam]
        st["lines"] += len(t.lines)
        if r is None:
            return
        verdicts = []
        for ln in r.out.splitlines():
            m = VERDICT.match(ln)
            if m:
                verdicts.append((m.group(1), m.group(2)))
            elif ln.strip():
                c.fail("garbled-output", "%s: %r" % (what, ln))
        if [v[0] for v in verdicts] != [ln[0] for ln in t.lines]:
            c.fail("garbled-output", "%s: verdicts for %s, lines %s" % (
                what, [v[0] for v in verdicts], [ln[0] for ln in t.lines]))
            return
        err = r.err.splitlines()
        for (name, want, words), (_, v) in zip(t.lines, verdicts):
            c.checks["hostile-check-verdict"] += 1
            if v not in want:
                kind = "check-false-ok" if v == "OK" else \
                    "check-false-alarm" if "OK" in want else \
                    "hostile-check-verdict"
                c.fail(kind, "%s: line %s: %s, expected %s" % (
                    what, name, v, " or ".join(want)))
            if v != "OK":
                st["refused"] += 1
            if v == "FAILED open or read" and words:
                mine = [e for e in err if e.startswith("nbdsum: %s: " % name)]
                if not mine:
                    c.fail("hostile-refusal-unclear", "%s: no message names "
                           "%s" % (what, name))
                for w in words:
                    if mine and not any(re.search(w, e) for e in mine):
                        c.fail("hostile-refusal-unclear", "%s: %s: the "
                               "message does not say /%s/: %s"
                               % (what, name, w, " / ".join(mine)))
        bad = any(v[1] != "OK" for v in verdicts)
        if r.rc != (1 if bad else 0):
            c.fail("check-exit0" if r.rc == 0 else "hostile-refusal-status",
                   "%s: exit %s with verdicts %s" % (
                       what, r.rc, [v[1] for v in verdicts]))

    # ----------------------------------------------------------- making
    def path(self, name):
        return os.path.join(self.dir, name)

    def fresh(self, stem, ext):
        self.n += 1
        return "%s%d.%s" % (stem, self.n, ext)

    def sh(self, *argv, cwd=None):
        if not self.c.tool(*argv, cwd=cwd or self.dir,
                           touch=self.c.cur_touch):
            raise SetupFailed(" ".join(argv[:3]))

    def size(self):
        return self.rng.choice([MiB, 2 * MiB, 2 * MiB + 65536, 3 * MiB])

    def mkraw(self, path, size=None):
        size = size or self.size()
        parts = [str(size)]
        for _ in range(self.rng.randint(1, 3)):
            off = self.rng.randrange(size)
            n = self.rng.randint(1, min(size - off, MiB))
            parts.append("d:%d+%d:s%d" % (off, n, self.rng.randrange(1000)))
        self.sh(self.mkimage, ";".join(parts), path)
        return size

    def write_file(self, path, data):
        if isinstance(data, str):
            data = data.encode()
        with open(path, "wb") as f:
            f.write(data)
        if all(32 <= b < 127 or b in (9, 10) for b in data):
            self.c.cur_cmds.append("printf %%s %s > %s" % (
                shlex.quote(data.decode()), shlex.quote(path)))
        else:
            self.c.cur_cmds.append(
                "python3 -c 'import sys; open(sys.argv[1], \"wb\").write("
                "bytes.fromhex(sys.argv[2]))' %s %s"
                % (shlex.quote(path), data.hex()))

    def patch(self, path, off, data):
        with open(path, "r+b") as f:
            f.seek(off)
            f.write(data)
        self.c.cur_cmds.append(
            "python3 -c 'import sys; f = open(sys.argv[1], \"r+b\"); "
            "f.seek(int(sys.argv[2])); f.write(bytes.fromhex(sys.argv[3]))' "
            "%s %d %s" % (shlex.quote(path), off, data.hex()))

    def symlink(self, target, name):
        os.symlink(target, self.path(name))
        self.c.cur_cmds.append("ln -s %s %s" % (shlex.quote(target),
                                                shlex.quote(self.path(name))))

    def placeholder(self, n):
        self.n += 1
        tag = "PH%d" % self.n
        return (tag + "Q" * n)[:n] if n > len(tag) else "@" * n

    def rename_ref(self, path, old, new):
        """Give the name the header holds (written as the placeholder
        old, the same length) its real bytes, which may hold what an
        argument cannot (a NUL)."""
        with open(path, "rb") as f:
            head = f.read(65536)
        old = old.encode()
        assert head.count(old) == 1, (path, old)
        self.patch(path, head.index(old), new)

    def create(self, name, fmt, backing=None, bfmt=None, size=None,
               opts=None):
        """qemu-img create -u: the names are never opened here."""
        size = size or self.size()
        argv = ["qemu-img", "create", "-q", "-f", fmt]
        if opts:
            argv += ["-o", opts]
        raw_name = backing.encode() if isinstance(backing, str) else backing
        odd = raw_name is not None and (b"\0" in raw_name or
                                        b"," in raw_name or not raw_name)
        if backing is not None:
            spelled = self.placeholder(len(raw_name)) if odd else backing
            argv += ["-u", "-b", spelled]
            if bfmt:
                argv += ["-F", bfmt]
        self.sh(*(argv + [self.path(name), str(size)]))
        if odd:
            self.rename_ref(self.path(name), spelled, raw_name)
        return size

    def strip_bfmt(self, name):
        """A qcow2 that names no format for its backing file (qemu-img
        7.2 makes none: the extension is cut out, its magic zeroed)."""
        path = self.path(name)
        with open(path, "rb") as f:
            h = f.read(4096)
        off = struct.unpack(">I", h[100:104])[0]
        while off + 8 <= 4096:
            magic, ln = struct.unpack(">II", h[off:off + 8])
            if magic == 0:
                return
            if magic == 0xe2792aca:
                self.patch(path, off, bytes(8))
                return
            off += 8 + ((ln + 7) & ~7)

    def data_file(self, name, dname, raw=True, size=None, backing=None):
        """A qcow2 whose data file is named dname (its bytes written by
        patching: qemu-img would create it), and backing file (raw)."""
        ph = self.placeholder(len(dname.encode()) if isinstance(dname, str)
                              else len(dname))
        size = self.create(name, "qcow2", backing, backing and "raw",
                           size=size, opts="data_file=%s,data_file_raw=%s"
                           % (ph, "on" if raw else "off"))
        self.rename_ref(self.path(name), ph,
                        dname.encode() if isinstance(dname, str) else dname)
        return ph, size

    def descriptor(self, name, extents, create_type="monolithicFlat",
                   parent=None, eol="\n", parent_in_comment=False,
                   extra=()):
        lines = ["# Disk DescriptorFile", "version=1",
                 "CID=fffffffe", "parentCID=ffffffff",
                 'createType="%s"' % create_type]
        if parent is not None:
            lines.append(('# an old parent: parentFileNameHint="%s"'
                          if parent_in_comment else
                          'parentFileNameHint="%s"') % parent)
        lines.append("# Extent description")
        lines += extents
        lines += list(extra) + ["# The Disk Data Base", "#DDB",
                                'ddb.virtualHWVersion = "4"']
        self.write_file(self.path(name), eol.join(lines) + eol)

    def flat(self, name, size=None):
        """A raw file beside, for a FLAT extent: its sectors."""
        size = self.mkraw(self.path(name), size)
        return size // 512

    def vmdk_sparse(self, name, parent=None):
        """A monolithicSparse vmdk whose embedded descriptor names
        parent (qemu reads the hint there only)."""
        size = self.size()
        self.sh("qemu-img", "create", "-q", "-f", "vmdk", self.path(name),
                str(size))
        if parent is not None:
            path = self.path(name)
            with open(path, "rb") as f:
                h = f.read(64)
            off = struct.unpack_from("<Q", h, 28)[0] * 512
            n = struct.unpack_from("<Q", h, 36)[0] * 512
            with open(path, "rb") as f:
                f.seek(off)
                text = f.read(n).split(b"\0")[0]
            p = parent.encode() if isinstance(parent, str) else parent
            text = text.replace(b'createType="monolithicSparse"\n',
                                b'createType="monolithicSparse"\n'
                                b'parentFileNameHint="' + p + b'"\n')
            self.patch(path, off, text.ljust(n, b"\0")[:n])
        return size

    def referrer(self, kind, target, bfmt=None):
        """An image of kind naming target as its backing file (of
        format bfmt, or any); its name and its format."""
        if kind in ("qcow2", "qcow2-nofmt"):
            name = self.fresh("ov", "qcow2")
            self.create(name, "qcow2", target,
                        bfmt or self.rng.choice(["raw", "qcow2"]))
            if kind == "qcow2-nofmt":
                self.strip_bfmt(name)
            return name, "qcow2"
        if kind == "qcow":
            name = self.fresh("ov", "qcow")
            self.create(name, "qcow", target, "raw")
            return name, "qcow"
        if kind.startswith("qed"):
            name = self.fresh("ov", "qed")
            self.create(name, "qed", target,
                        "raw" if kind == "qed-raw" else "qcow2")
            return name, "qed"
        if kind == "vmdk-sparse":
            name = self.fresh("ov", "vmdk")
            self.vmdk_sparse(name, target)
            return name, "vmdk"
        if kind == "vmdk-desc":
            name = self.fresh("ov", "vmdk")
            ext = self.fresh("ov", "flat")
            sectors = self.flat(ext)
            self.descriptor(name, ['RW %d FLAT "%s" 0' % (sectors, ext)],
                            parent=target,
                            parent_in_comment=self.rng.random() < 0.3)
            return name, "vmdk"
        raise ValueError(kind)

    def spell_out(self, target):
        """A name, as the image holds it, that leads to target outside
        the case's directory (creating the symlinks it goes through)."""
        how = self.rng.choice(["abs", "dotdot", "dotslash", "link",
                               "link-rel", "link2", "dirlink",
                               "dirlink-dotdot", "proc-root", "slashes"])
        rel = os.path.relpath(target, self.dir)
        if how == "abs":
            return target, how
        if how == "dotdot":
            return rel, how
        if how == "dotslash":
            return "./" + rel, how
        if how == "slashes":
            return target.replace("/", "//"), how
        if how == "proc-root":
            return "/proc/self/root" + target, how
        if how in ("link", "link-rel"):
            name = self.fresh("lnk", "raw")
            self.symlink(target if how == "link" else rel, name)
            return name, how
        if how == "link2":
            a, b = self.fresh("lnk", "raw"), self.fresh("lnk", "raw")
            self.symlink(target, b)
            self.symlink(b, a)
            return a, how
        d = os.path.dirname(target)
        if how == "dirlink" or not os.path.isdir(os.path.join(d, "tree")):
            ln = self.fresh("dir", "lnk")
            self.symlink(os.path.relpath(d, self.dir), ln)
            return ln + "/" + os.path.basename(target), "dirlink"
        # tree/ is a directory below the target's: "link/../target".
        ln = self.fresh("dir", "lnk")
        self.symlink(os.path.join(d, "tree"), ln)
        return ln + "/../" + os.path.basename(target), how

    def canary(self):
        return self.rng.choice([self.secret, self.secret, self.leaf])

    def some_opts(self, choices):
        """One to three of the option sets, in the case's order."""
        k = self.rng.randint(1, min(3, len(choices)))
        return self.rng.sample(choices, k)

    # ========================================================= families
    def f_backing_outside(self):
        """A backing file outside the directory: refused, whatever the
        options but --format with --allow-backing (which follows it:
        not tried on a canary), and even those when the name comes
        from a layer whose format was probed."""
        kind = self.rng.choice(BACKING_REFERRERS + ["via-mid",
                                                    "via-probed-mid"])
        name, how = self.spell_out(self.canary())
        note = "%s names %s (%s)" % (kind, name, how)
        if kind in ("via-mid", "via-probed-mid"):
            mid, mfmt = self.referrer(self.rng.choice(BACKING_REFERRERS[:5]),
                                      name)
            top = self.fresh("top", "qcow2")
            if kind == "via-mid":
                self.create(top, "qcow2", mid, mfmt)
            elif self.rng.random() < 0.5:
                self.create(top, "qcow2", mid, mfmt)
                self.strip_bfmt(top)
            else:
                top = self.fresh("top", "qcow")
                self.create(top, "qcow", mid, mfmt)
            fmt = os.path.splitext(top)[1][1:]
            img = top
        else:
            img, fmt = self.referrer(kind, name)
        sets = [[], ["--allow-backing"], ["--format=" + fmt]]
        if kind == "via-probed-mid":
            sets.append(["--format=" + fmt, "--allow-backing"])
        tries = []
        for opts in self.some_opts(sets):
            words = [OUT]
            if not any(o.startswith("--format") for o in opts) or \
                    kind == "via-probed-mid":
                words.append(PROBED)
            tries.append(Try(img, opts, "refuse", words, note=note))
        return tries

    def f_datafile_outside(self):
        name, how = self.spell_out(self.canary())
        img = self.fresh("df", "qcow2")
        base = None
        if self.rng.random() < 0.3:
            # and a backing file beside, as a data file's image may have
            base = self.fresh("base", "raw")
            self.mkraw(self.path(base))
        ph, _ = self.data_file(img, name, raw=base is None and
                               self.rng.random() < 0.7, backing=base)
        os.unlink(self.path(ph))
        tries = []
        for opts in self.some_opts([[], ["--allow-backing"],
                                    ["--format=qcow2"]]):
            words = [OUT, r"data file"]
            if not opts or opts == ["--allow-backing"]:
                words.append(PROBED)
            tries.append(Try(img, opts, "refuse", words,
                             note="data file %s (%s)" % (name, how)))
        return tries

    def extent_lines(self, k, bad_at, bad_name, typ="FLAT", bad_type=None):
        """k extent lines of typ, the one at bad_at (of bad_type) naming
        bad_name, the others files beside."""
        lines = []
        for j in range(k):
            if j == bad_at:
                t = bad_type or typ
                n = self.rng.choice([8, 2048, 4096])
                lines.append('RW %d %s "%s"%s' % (
                    n, t, bad_name, " 0" if t == "FLAT" else ""))
                continue
            ext = self.fresh("ext", "flat")
            sectors = self.flat(ext, self.rng.choice([MiB, 2 * MiB]))
            if typ == "FLAT":
                lines.append('RW %d FLAT "%s" 0' % (sectors, ext))
            else:
                lines.append('RW %d VMFS "%s"' % (sectors, ext))
        return lines

    def f_extent_outside(self):
        name, how = self.spell_out(self.canary())
        img = self.fresh("d", "vmdk")
        k = self.rng.randint(1, 3)
        ctype = self.rng.choice(["monolithicFlat", "twoGbMaxExtentFlat",
                                 "vmfs", "twoGbMaxExtentSparse"])
        typ = "VMFS" if ctype == "vmfs" else "FLAT"
        bad_type = self.rng.choice(["SPARSE", "VMFSSPARSE", "SESPARSE",
                                    typ]) if "Sparse" in ctype else typ
        self.descriptor(img, self.extent_lines(
            k, self.rng.randrange(k), name, typ, bad_type), ctype)
        tries = []
        for opts in self.some_opts([[], ["--allow-backing"],
                                    ["--format=vmdk"]]):
            words = [OUT, r"extent"]
            if "--format=vmdk" not in opts:
                words.append(PROBED)
            tries.append(Try(img, opts, "refuse", words,
                             note="%s extent %s (%s)" % (ctype, name, how)))
        return tries

    def protocols(self):
        p, s = self.port, self.sock
        nbd_inet = {"driver": "nbd", "server": {"type": "inet",
                                                "host": "127.0.0.1",
                                                "port": str(p)},
                    "export": "x"}
        nbd_unix = {"driver": "nbd", "server": {"type": "unix", "path": s}}
        return [
            "nbd://127.0.0.1:%d/x" % p, "nbd://127.0.0.1:%d" % p,
            "nbd:127.0.0.1:%d" % p, "nbd:127.0.0.1:%d:exportname=x" % p,
            "nbd+tcp://127.0.0.1:%d/x" % p, "nbd+unix:///x?socket=%s" % s,
            "nbd:unix:%s" % s, "nbd:unix:%s:exportname=x" % s,
            "http://127.0.0.1:%d/x.img" % p, "https://127.0.0.1:%d/x" % p,
            "ftp://127.0.0.1:%d/x" % p, "ssh://127.0.0.1:%d/x" % p,
            "iscsi://127.0.0.1:%d/iqn.2026-01.x:t/0" % p,
            "gluster://127.0.0.1:%d/vol/x" % p,
            "json:" + json.dumps(nbd_inet), "json:" + json.dumps(nbd_unix),
            "json:" + json.dumps({"driver": "raw", "file": nbd_inet}),
            "json:" + json.dumps({"driver": "http",
                                  "url": "http://127.0.0.1:%d/x" % p}),
            "json:" + json.dumps({"driver": "file",
                                  "filename": self.secret}),
            "json:" + json.dumps({"file": {"driver": "file",
                                           "filename": self.secret}}),
            "file:" + self.secret, "file:" + os.path.relpath(self.secret,
                                                             self.dir),
            "fat:" + os.path.dirname(self.leaf),
            "fat:rw:" + os.path.dirname(self.leaf),
            "host_device:/dev/zero", "blkdebug::" + self.secret,
            "null-co://", " json:" + json.dumps(nbd_inet),
        ]

    def f_protocol(self):
        """Protocols and json: specs aimed at the listeners and the
        canaries: refused as protocols even with --allow-backing; named
        as a data file or an extent, qemu would take them for files
        beside: refused as missing."""
        proto = self.rng.choice(self.protocols())
        kind = self.rng.choice(BACKING_REFERRERS + ["data-file", "extent",
                                                    "beside-colon"])
        note = "%s names %r" % (kind, proto)
        if kind == "data-file":
            img = self.fresh("df", "qcow2")
            ph, _ = self.data_file(img, proto)
            os.unlink(self.path(ph))
            fmt, words = "qcow2", [r"data file '%s', which does not exist"
                                   % re.escape(proto)]
        elif kind == "extent":
            img, fmt = self.fresh("d", "vmdk"), "vmdk"
            self.descriptor(img, ['RW 8 FLAT "%s" 0' % proto])
            words = [r"extent '%s', which does not exist" % re.escape(proto)]
            if '"' in proto:
                # The name ends at its first quote: an invalid line,
                # which qemu refuses.
                return [Try(img, opts, "refuse", note=note, qemu=True)
                        for opts in self.some_opts([
                            [], ["--format=vmdk", "--allow-backing"]])]
        elif kind == "beside-colon":
            # A file beside whose name qemu reads as a protocol: qemu
            # would not open it either.
            b = self.fresh("x:y", "raw")
            self.mkraw(self.path(b))
            img, fmt = self.referrer(self.rng.choice(["qcow2", "qed-raw"]), b)
            words = [PROTO]
            note = "%s names the file %r beside it" % (kind, b)
        else:
            img, fmt = self.referrer(kind, proto)
            words = [PROTO]
        return [Try(img, opts, "refuse", words, note=note)
                for opts in self.some_opts([
                    [], ["--allow-backing"],
                    ["--format=" + fmt, "--allow-backing"]])]

    def special_target(self):
        """A name that is no regular file (or a kernel's file), and the
        words its refusal says."""
        what = self.rng.choice(["fifo", "dir", "dot", "dev", "dev-link",
                                "stdin", "sock", "sock-link", "kernel",
                                "kernel-link"])
        if what == "fifo":
            name = self.fresh("fifo", "raw")
            os.mkfifo(self.path(name))
            self.c.cur_cmds.append("mkfifo %s" % self.path(name))
            return name, KIND["fifo"]
        if what == "dir":
            name = self.fresh("dir", "raw")
            os.mkdir(self.path(name))
            self.c.cur_cmds.append("mkdir %s" % self.path(name))
            return name, KIND["dir"]
        if what == "dot":
            return self.rng.choice([".", "..", "./", self.dir]), KIND["dir"]
        if what in ("dev", "dev-link"):
            dev = self.rng.choice(["/dev/zero", "/dev/null", "/dev/urandom",
                                   "/dev/full"])
            if what == "dev":
                return dev, KIND["chr"]
            name = self.fresh("dev", "raw")
            self.symlink(dev, name)
            return name, KIND["chr"]
        if what == "stdin":
            # nbdsum's own standard input is /dev/null here.
            return self.rng.choice(["/dev/stdin", "/proc/self/fd/0",
                                    "/dev/fd/0"]), KIND["chr"]
        if what in ("sock", "sock-link"):
            if what == "sock":
                return self.rng.choice([self.sock, os.path.relpath(
                    self.sock, self.dir)]), KIND["sock"]
            name = self.fresh("sock", "raw")
            self.symlink(self.sock, name)
            return name, KIND["sock"]
        k = self.rng.choice(self.kernel_files)
        words = KERNEL if k.startswith("/proc/") or \
            k.startswith("/sys/kernel/") else KERNEL_OR_OUT
        if what == "kernel":
            return k, words
        name = self.fresh("kern", "raw")
        self.symlink(k, name)
        return name, words

    def f_special(self):
        """Devices, FIFOs, sockets, directories and the kernel's files:
        refused at once (nothing opened, nothing waited for), even with
        --format and --allow-backing."""
        target, words = self.special_target()
        kind = self.rng.choice(BACKING_REFERRERS + ["data-file", "extent"])
        note = "%s names %s" % (kind, target)
        if kind == "data-file":
            img, fmt = self.fresh("df", "qcow2"), "qcow2"
            ph, _ = self.data_file(img, target)
            os.unlink(self.path(ph))
        elif kind == "extent":
            img, fmt = self.fresh("d", "vmdk"), "vmdk"
            k = self.rng.randint(1, 2)
            self.descriptor(img, self.extent_lines(
                k, self.rng.randrange(k), target))
        else:
            img, fmt = self.referrer(kind, target)
        sets = [[], ["--allow-backing"],
                ["--format=" + fmt, "--allow-backing"]]
        opts = self.some_opts(sets)
        if sets[2] not in opts:
            opts.append(sets[2])
        return [Try(img, o, "refuse", [words], note=note) for o in opts]

    def f_probed_header(self):
        """A raw disk whose guest wrote another format's header naming
        a file: probed, it may name files beside it only; --format=raw
        hashes its bytes."""
        what = self.rng.choice(["outside", "outside", "protocol", "device",
                                "beside"])
        hdr = self.rng.choice(["qcow2", "qcow", "qed", "vmdk-desc",
                               "vmdk-sparse"])
        if what == "outside":
            target, how = self.spell_out(self.canary())
            words = [OUT, PROBED]
        elif what == "protocol":
            target, how = self.rng.choice(self.protocols()), "protocol"
            words = [PROTO]
        elif what == "device":
            target, how = self.rng.choice(["/dev/zero", "/dev/urandom"]), \
                "device"
            words = [KIND["chr"]]
        else:
            target, how = self.fresh("base", "raw"), "beside"
            self.mkraw(self.path(target))
            words = []
        disk = self.fresh("disk", self.rng.choice(["img", "raw", "bin"]))
        if hdr == "vmdk-desc":
            if what == "beside":
                sectors = os.path.getsize(self.path(target)) // 512
                self.descriptor(disk, ['RW %d FLAT "%s" 0' % (sectors,
                                                               target)])
            else:
                ext = self.fresh("ext", "flat")
                sectors = self.flat(ext)
                self.descriptor(disk, ['RW %d FLAT "%s" 0' % (sectors, ext)],
                                parent=target)
            pad = self.rng.choice([0, 4096, MiB])
            if pad:
                self.sh("truncate", "-s", "+%d" % pad, self.path(disk))
        else:
            kind = {"qcow2": "qcow2", "qcow": "qcow", "qed": "qed-raw",
                    "vmdk-sparse": "vmdk-sparse"}[hdr]
            if hdr == "vmdk-sparse" and what == "beside":
                base = self.fresh("base", "vmdk")
                self.sh("qemu-img", "convert", "-q", "-f", "raw", "-O",
                        "vmdk", self.path(target), self.path(base))
                target = base
                made = self.fresh("ov", "vmdk")
                self.sh("qemu-img", "create", "-q", "-f", "vmdk", "-b",
                        target, "-F", "vmdk", self.path(made))
            else:
                made, _ = self.referrer(kind, target, "raw")
            os.rename(self.path(made), self.path(disk))
            self.c.cur_cmds.append("mv %s %s" % (self.path(made),
                                                 self.path(disk)))
        note = "a raw disk holding a %s header naming %s (%s)" % (
            hdr, target, how)
        tries = []
        sets = [[], ["--allow-backing"], ["--format=raw"]]
        for opts in self.some_opts(sets):
            if opts == ["--format=raw"]:
                tries.append(Try(disk, opts, "accept", oracle="bytes",
                                 note=note))
            elif what == "beside":
                tries.append(Try(disk, opts, "accept", note=note))
            else:
                tries.append(Try(disk, opts, "refuse", words, note=note))
        return tries

    def f_loop(self):
        """A backing chain that loops: refused at once."""
        how = self.rng.choice(["self", "pair", "triple", "alias", "hardlink",
                               "mixed", "below", "vmdk-self"])
        if how == "vmdk-self":
            img = self.fresh("loop", "vmdk")
            self.vmdk_sparse(img, img)
            fmt = "vmdk"
        elif how == "hardlink":
            img = self.fresh("loop", "qcow2")
            hl = self.fresh("hl", "qcow2")
            self.create(img, "qcow2", hl, "qcow2")
            os.link(self.path(img), self.path(hl))
            self.c.cur_cmds.append("ln %s %s" % (self.path(img),
                                                 self.path(hl)))
            fmt = "qcow2"
        elif how == "alias":
            img = self.fresh("loop", "qcow2")
            ln = self.fresh("alias", "qcow2")
            self.symlink(img, ln)
            self.create(img, "qcow2", ln, "qcow2")
            fmt = "qcow2"
        else:
            k = {"self": 1, "pair": 2, "triple": 3, "mixed": 3,
                 "below": 3}[how]
            fmts = ["qcow2"] * k if how != "mixed" else \
                [self.rng.choice(["qcow2", "qed", "qcow"]) for _ in range(k)]
            names = [self.fresh("loop", f) for f in fmts]
            for j, (n, f) in enumerate(zip(names, fmts)):
                nxt = (j + 1) % k if how != "below" else \
                    (j + 1 if j + 1 < k else 1)
                self.create(n, f, names[nxt], fmts[nxt])
            img, fmt = names[0], fmts[0]
        return [Try(img, opts, "refuse", [LOOP], note=how)
                for opts in self.some_opts([
                    [], ["--format=" + fmt],
                    ["--format=" + fmt, "--allow-backing"]])]

    def f_deep(self):
        """A chain of depth files below its top: read up to 16, refused
        past."""
        depth = self.rng.choice([15, 16, 17] if self.c.args.small else
                                [14, 15, 16, 16, 17, 17, 18, 20, 31])
        base = self.fresh("c", "raw")
        size = self.mkraw(self.path(base))
        prev, pfmt = base, "raw"
        layers = []
        for j in range(depth):
            fmt = "qcow2" if j < depth - 1 or self.rng.random() < 0.7 else \
                self.rng.choice(["qed", "qcow"])
            n = self.fresh("c", fmt)
            self.create(n, fmt, prev, pfmt, size=size)
            layers.append((n, fmt))
            prev, pfmt = n, fmt
        # Some layers written, so that a wrong layer shows.
        for n, fmt in self.rng.sample(layers, min(3, len(layers))):
            if fmt == "qcow2":
                off = self.rng.randrange(0, size - 65536, 512)
                self.sh("qemu-io", "-f", fmt, "-c", "write -P %d %d 65536"
                        % (self.rng.randint(1, 255), off), self.path(n))
        top, fmt = layers[-1]
        opts = self.rng.choice([[], ["--format=" + fmt]])
        if depth <= 16:
            return [Try(top, opts, "accept", oracle=opts and fmt or None,
                        note="%d files below" % depth)]
        return [Try(top, opts, "refuse", [DEEP],
                    note="%d files below" % depth)]

    def f_vmdk_odd(self):
        """Descriptors qemu reads other than their author meant: extents
        it skips, a blank line before an extent line (read across a line break), sizes
        that disagree: refused.  Odd but sound ones: read."""
        how = self.rng.choice(["rdonly", "noaccess", "zero", "unknown-type",
                               "zero-sectors", "blank", "short",
                               "sparse-size", "sparse-not", "nested",
                               "nested-top", "crlf", "tabs", "offsets",
                               "longer", "converted"])
        img = self.fresh("odd", "vmdk")
        ext = self.fresh("ext", "flat")
        sectors = self.flat(ext)
        good = 'RW %d FLAT "%s" 0' % (sectors, ext)
        eol, extra = "\n", ()
        if how in ("rdonly", "noaccess"):
            acc = "RDONLY" if how == "rdonly" else "NOACCESS"
            lines = [good.replace("RW", acc, 1)]
            if self.rng.random() < 0.5:
                lines.insert(self.rng.randint(0, 1), good)
            expect, words = "refuse", [SKIPS]
        elif how == "zero":
            lines = ['RW %d ZERO' % sectors] + \
                ([good] if self.rng.random() < 0.5 else [])
            expect, words = "refuse", [SKIPS]
        elif how == "unknown-type":
            t = self.rng.choice(["VMFSRAW", "VMFSRDM", "flat", "Flat"])
            lines = [good, 'RW %d %s "%s" 0' % (sectors, t, ext)]
            self.rng.shuffle(lines)
            expect, words = "refuse", [SKIPS]
        elif how == "zero-sectors":
            lines = [good, 'RW 0 FLAT "%s" 0' % ext]
            self.rng.shuffle(lines)
            expect, words = "refuse", [SKIPS]
        elif how == "blank":
            blank = self.rng.choice(["", " ", "\t", "  \t "])
            lines = [blank, good]
            expect, words = "refuse", [r"across a line break"]
        elif how == "short":
            if self.rng.random() < 0.5:
                more = self.rng.choice([1, 8, sectors])
                lines = ['RW %d FLAT "%s" 0' % (sectors + more, ext)]
            else:
                lines = ['RW %d FLAT "%s" %d' % (sectors, ext,
                                                 self.rng.choice([1, 128]))]
            expect, words = "refuse", [r"where its descriptor needs"]
        elif how in ("sparse-size", "converted"):
            src = self.fresh("src", "raw")
            size = self.mkraw(self.path(src))
            sub = self.rng.choice(["twoGbMaxExtentSparse",
                                   "twoGbMaxExtentFlat", "monolithicFlat"]) \
                if how == "converted" else "twoGbMaxExtentSparse"
            self.sh("qemu-img", "convert", "-q", "-f", "raw", "-O", "vmdk",
                    "-o", "subformat=" + sub, self.path(src), self.path(img))
            if how == "converted":
                return [Try(img, o, "accept", oracle=o and "vmdk" or None,
                            note=sub)
                        for o in self.some_opts([[], ["--format=vmdk"]])]
            with open(self.path(img)) as f:
                text = f.read()
            m = re.search(r"^RW (\d+) SPARSE", text, re.M)
            wrong = int(m.group(1)) // 2
            self.write_file(self.path(img), text.replace(
                m.group(0), "RW %d SPARSE" % wrong))
            return [Try(img, o, "refuse", [r"qemu reads %d bytes, where "
                                           r"its vmdk descriptor's extents "
                                           r"add up to %d" % (size,
                                                              wrong * 512)],
                        note=how)
                    for o in self.some_opts([[], ["--format=vmdk"]])]
        elif how in ("nested", "nested-top"):
            # A sparse header with no size and a descriptor of its own,
            # whose extent leads out: qemu would read that descriptor.
            name, _ = self.spell_out(self.canary())
            inner = self.fresh("nest", "vmdk") if how == "nested" else img
            self.vmdk_sparse(inner)
            self.vmdk_nest(inner, 'RW 8 FLAT "%s" 0' % name)
            if how == "nested-top":
                return [Try(img, o, "refuse", [r"descriptor of other "
                                               r"extents"], note=how)
                        for o in self.some_opts([[], ["--format=vmdk"]])]
            lines = [good, 'RW 8 SPARSE "%s"' % inner]
            self.descriptor(img, lines, "twoGbMaxExtentSparse")
            return [Try(img, o, "refuse", [r"descriptor of other extents"],
                        note=how)
                    for o in self.some_opts([[], ["--format=vmdk"]])]
        elif how == "sparse-not":
            lines = ['RW %d SPARSE "%s"' % (sectors, ext)]
            self.descriptor(img, lines, "twoGbMaxExtentSparse")
            return [Try(img, o, "refuse", [r"not a sparse vmdk extent"],
                        note=how)
                    for o in self.some_opts([[], ["--format=vmdk"]])]
        elif how == "crlf":
            lines, eol, expect, words = [good], "\r\n", "accept", []
        elif how == "tabs":
            lines = [good.replace(" ", "\t")]
            expect, words = "accept", []
        elif how == "offsets":
            half = sectors // 2
            lines = ['RW %d FLAT "%s" %d' % (half, ext, half),
                     'RW %d FLAT "%s" 0' % (half, ext)]
            extra = ["# RW 8 FLAT \"%s\" 0" % os.path.relpath(self.secret,
                                                               self.dir)]
            expect, words = "accept", []
        else:   # longer: the file has more than the descriptor reads
            lines = ['RW %d FLAT "%s" 0' % (sectors // 2, ext)]
            expect, words = "accept", []
        self.descriptor(img, lines, eol=eol, extra=extra)
        return [Try(img, o, expect, words,
                    oracle=o and "vmdk" or None, note=how)
                for o in self.some_opts([[], ["--format=vmdk"]])]

    def f_header_lies(self):
        """Headers that say what is not so: a backing format its base
        does not have, a backing name longer than qemu reads or past
        the header's cluster, a data file's feature bit without its
        name or its name without the bit.  qemu refuses or ignores
        them; no canary may be opened, and a refusal about a backing
        file must name it."""
        how = self.rng.choice(["format-lie", "format-lie", "long-name",
                               "far-name", "data-bit-only",
                               "data-name-only"])
        sets = [[], ["--format=qcow2"], ["--format=qcow2",
                                         "--allow-backing"]]
        img = self.fresh("lie", "qcow2")
        if how == "format-lie":
            base = self.fresh("base", "raw")
            self.mkraw(self.path(base))
            lie = self.rng.choice(["qcow2", "vmdk", "qed", "qcow", "vdi",
                                   "vpc", "vhdx", "parallels"])
            if lie == "vmdk" and self.rng.random() < 0.5:
                img, _ = self.referrer("vmdk-sparse", base)
                sets = [[], ["--format=vmdk"]]
            else:
                self.create(img, "qcow2", base, lie)
            return [Try(img, o, "refuse", [re.escape(base)],
                        note="%s names %s, a raw file, as %s" % (
                            img, base, lie), qemu=True)
                    for o in self.some_opts(sets)]
        if how in ("long-name", "far-name"):
            self.create(img, "qcow2", "PH", "raw")
            path = self.path(img)
            with open(path, "rb") as f:
                h = f.read(104)
            off = struct.unpack(">Q", h[8:16])[0]
            rel = os.path.relpath(self.secret, self.dir)
            if how == "long-name":
                n = self.rng.choice([1023, 1024, 1100, 4000])
                k, odd = divmod(n - len(rel), 2)
                name = (".//" + "./" * (k - 1) if odd else "./" * k) + rel
            else:
                n, name = len(rel), rel
                off = self.rng.choice([65536 + 512, 1 << 20])
                self.patch(path, 8, struct.pack(">Q", off))
            self.patch(path, 16, struct.pack(">I", n))
            self.patch(path, off, name.encode())
            if how == "long-name" and n <= 1023:
                # the longest name qemu takes: refused as outside
                return [Try(img, o, "refuse", [OUT], note="a name of %d "
                            "bytes" % n) for o in self.some_opts(sets[:2])]
            return [Try(img, o, "refuse", note="%s: %d bytes at %d"
                        % (how, n, off), qemu=True)
                    for o in self.some_opts(sets)]
        if how == "data-bit-only":
            self.create(img, "qcow2")
            path = self.path(img)
            with open(path, "rb") as f:
                h = f.read(104)
            inc = struct.unpack(">Q", h[72:80])[0] | 4
            self.patch(path, 72, struct.pack(">Q", inc))
            return [Try(img, o, "refuse", note=how, qemu=True)
                    for o in self.some_opts(sets)]
        # The data file's name, without the feature bits that use it:
        # qemu reads the guest's data from the image itself.
        name, _ = self.spell_out(self.canary())
        ph, _ = self.data_file(img, name)
        os.unlink(self.path(ph))
        path = self.path(img)
        with open(path, "rb") as f:
            h = f.read(104)
        inc = struct.unpack(">Q", h[72:80])[0] & ~4
        auto = struct.unpack(">Q", h[88:96])[0] & ~2
        self.patch(path, 72, struct.pack(">Q", inc))
        self.patch(path, 88, struct.pack(">Q", auto))
        return [Try(img, o, "either", oracle=o and "qcow2" or None,
                    note="data file %s named, its bit clear" % name, qemu=True)
                for o in self.some_opts(sets)]

    def vmdk_nest(self, name, line):
        """Make a monolithicSparse's header say: no capacity, and a
        descriptor (its embedded one, rewritten) of the extent line."""
        path = self.path(name)
        with open(path, "rb") as f:
            h = f.read(64)
        off = struct.unpack_from("<Q", h, 28)[0] * 512
        n = struct.unpack_from("<Q", h, 36)[0] * 512
        text = "\n".join(["# Disk DescriptorFile", "version=1",
                          "CID=fffffffe", "parentCID=ffffffff",
                          'createType="monolithicFlat"', line, ""])
        self.patch(path, 12, bytes(8))
        self.patch(path, off, text.encode().ljust(n, b"\0")[:n])

    def f_vmdk_fuzz(self):
        """A descriptor whose extents lie beside it, and an extent line
        leading out hidden where a reader might or might not take it
        for one: after a CR, in a comment, after a NUL, on the line of
        another extent, as an offset's continuation, in a DDB value,
        mutated bytes.  Read or refused, no canary may be opened: qemu
        opens a descriptor's extents by their names itself."""
        img = self.fresh("fz", "vmdk")
        ext = self.fresh("ext", "flat")
        sectors = self.flat(ext)
        good = 'RW %d FLAT "%s" 0' % (sectors, ext)
        name, how = self.spell_out(self.canary())
        typ = self.rng.choice(["FLAT", "FLAT", "VMFS", "SPARSE"])
        hidden = 'RW 8 %s "%s"%s' % (typ, name, " 0" if typ == "FLAT" else "")
        where = self.rng.choice([
            "cr", "comment", "indent", "lower", "same-line", "nul",
            "continuation", "ddb", "create-type", "before-header",
            "past-1MiB", "spaces", "mutate"])
        head = ["# Disk DescriptorFile", "version=1", "CID=fffffffe",
                "parentCID=ffffffff", 'createType="%s"' % (
                    "vmfs" if typ == "VMFS" else "twoGbMaxExtentSparse"
                    if typ == "SPARSE" else "monolithicFlat")]
        tail = ["# The Disk Data Base", "#DDB", 'ddb.virtualHWVersion = "4"']
        body = [good]
        if where == "cr":
            body = [good + "\r" + hidden]
        elif where == "comment":
            body = [good, self.rng.choice(["#", "# ", "#RW"]) + hidden]
        elif where == "indent":
            body = [self.rng.choice([" ", "\t", "  "]) + hidden, good]
        elif where == "lower":
            body = [good, "rw" + hidden[2:]]
        elif where == "same-line":
            body = [good + " " + hidden]
        elif where == "nul":
            body = [good, "\0" + hidden]
        elif where == "continuation":
            body = ['RW %d FLAT "%s"' % (sectors, ext), "0 " + hidden]
        elif where == "ddb":
            tail.append('ddb.comment = "%s"' % hidden.replace('"', "'"))
            tail.append("ddb.x = %s" % hidden)
        elif where == "create-type":
            head[-1] += " " + hidden
        elif where == "before-header":
            head.insert(0, hidden)
        elif where == "past-1MiB":
            tail.append("#" * (1 << 20))
            tail.append(hidden)
        elif where == "spaces":
            body = [good, hidden.replace(" ", self.rng.choice(
                ["  ", " \t", "\v", "\f"]))]
        text = "\n".join(head + body + tail) + "\n"
        if where == "mutate":
            text = "\n".join(head + [good, hidden] + tail) + "\n"
            b = bytearray(text.encode())
            at = text.index(hidden)
            for _ in range(self.rng.randint(1, 4)):
                i = self.rng.randrange(max(0, at - 8), len(b))
                b[i:i + 1] = bytes([self.rng.choice(
                    b' \t\r\n\0"#0123456789RWFLATSP\x7f\xff')])
            text = bytes(b)
        self.write_file(self.path(img), text)
        # (Not with --allow-backing, which follows a line qemu reads.)
        return [Try(img, o, "either", oracle=o and "vmdk" or None,
                    note="%s line %r hidden: %s" % (typ, name, where),
                    qemu=True)
                for o in self.some_opts([[], ["--format=vmdk"]])]

    def f_mixed_inputs(self):
        """Hostile images among ordinary ones in one command line (with
        -j, each in a job of its own): each refused or read as alone."""
        items = []
        for _ in range(self.rng.randint(2, 4)):
            if self.rng.random() < 0.5:
                img, _, words = self.hostile_image()
                items.append((img, "refuse", words))
            else:
                base = self.fresh("base", "raw")
                self.mkraw(self.path(base))
                ov = self.fresh("ov", "qcow2")
                self.create(ov, "qcow2", base, "raw")
                items.append((ov, "accept", None))
        opts = self.rng.choice([[], ["-j", "2"], ["-j", "4"]])
        return [MultiTry(items, opts, note="%d inputs" % len(items))]

    def f_since(self):
        """--since of a local qcow2 whose backing file was rebased out
        after the manifest: its names are checked before qemu-img or
        qemu-nbd run."""
        base = self.fresh("base", "raw")
        size = self.mkraw(self.path(base))
        img = self.fresh("top", "qcow2")
        self.create(img, "qcow2", base, "raw", size=size)
        self.sh("qemu-img", "bitmap", "--add", "--enable", self.path(img),
                "b1")
        man = self.path(self.fresh("m", "txt"))
        r = self.c.run([self.nbdsum, "-q", "--blocks", self.path(img)],
                       touch=self.c.cur_touch)
        if r.rc != 0:
            raise SetupFailed("the manifest: " + r.err.strip()[:100])
        with open(man, "w") as f:
            f.write(r.out)
        self.c.cur_cmds.append("# saved as %s" % man)
        self.sh("qemu-io", "-f", "qcow2", "-c", "write -P 3 %d 65536"
                % self.rng.randrange(0, size - 65536, 512), self.path(img))
        what = self.rng.choice(["outside", "protocol", "device"])
        if what == "outside":
            target, _ = self.spell_out(self.canary())
            words = [OUT]
        elif what == "protocol":
            target, words = self.rng.choice(self.protocols()), [PROTO]
        else:
            target, words = self.rng.choice(["/dev/zero", "/dev/urandom"]), \
                [KIND["chr"]]
        self.sh("qemu-img", "rebase", "-u", "-b", target, "-F", "raw",
                self.path(img))
        # (--format does not go with --since; the manifest's digest and
        # block size are its.)
        return [Try(img, ["--since=" + man, "--dirty-bitmap=b1"], "refuse",
                    words, note="rebased onto %s" % target, plain=True)]

    def hostile_image(self):
        """One image nbdsum must refuse whatever the line's tag, and
        the words of its refusal."""
        kind = self.rng.choice(["backing", "data", "extent", "proto",
                                "loop"])
        if kind == "backing":
            name, _ = self.spell_out(self.canary())
            img, fmt = self.referrer(self.rng.choice(BACKING_REFERRERS), name)
            return img, fmt, [OUT, PROBED]
        if kind == "data":
            name, _ = self.spell_out(self.canary())
            img = self.fresh("df", "qcow2")
            ph, _ = self.data_file(img, name)
            os.unlink(self.path(ph))
            return img, "qcow2", [OUT, PROBED]
        if kind == "extent":
            name, _ = self.spell_out(self.canary())
            img = self.fresh("d", "vmdk")
            self.descriptor(img, self.extent_lines(1, 0, name))
            return img, "vmdk", [OUT, PROBED]
        if kind == "proto":
            img, fmt = self.referrer(self.rng.choice(BACKING_REFERRERS[:5]),
                                     self.rng.choice(self.protocols()))
            return img, fmt, [PROTO]
        a, b = self.fresh("loop", "qcow2"), self.fresh("loop", "qcow2")
        self.create(a, "qcow2", b, "qcow2")
        self.create(b, "qcow2", a, "qcow2")
        return a, "qcow2", [LOOP]

    def f_check_lines(self):
        """Checksum files naming hostile images (with format tags,
        which grant nothing), devices, FIFOs and sockets: every such
        line fails at once, the others are checked, exit 1."""
        c = self.c
        lines, entries = [], []
        fake = "%064x" % self.rng.getrandbits(256)
        for _ in range(self.rng.randint(1, 3)):
            img, fmt, words = self.hostile_image()
            self.images.add(img)
            tag = self.rng.choice([None, fmt, "qcow2", "vmdk", "qed"])
            if tag and tag != fmt and self.rng.random() < 0.5:
                tag = fmt
            if tag:
                lines.append("BLKHASH-SHA256/64K:%s (%s) = %s" % (
                    tag, img, fake))
            else:
                lines.append("%s  %s" % (fake, img))
            # A tag other than the image's format may fail otherwise
            # (no longer a refusal of what it names).
            entries.append((img, ["FAILED open or read"] if tag in (None, fmt)
                            else ["FAILED open or read", "FAILED"],
                            words if tag in (None, fmt) else None))
        if self.rng.random() < 0.6:
            # A good line: an overlay beside its base, its right sum.
            base = self.fresh("base", "raw")
            self.mkraw(self.path(base))
            ov = self.fresh("ov", "qcow2")
            self.create(ov, "qcow2", base, "raw")
            want = self.oracle(Try(ov, [], "accept"), self.dir, ov,
                               "sha256", 65536)
            if want is None:
                raise SetupFailed("oracle of " + ov)
            self.images.add(ov)
            line = self.rng.choice(["%s  %s" % (want, ov),
                                    "BLKHASH-SHA256/64K:qcow2 (%s) = %s"
                                    % (ov, want)])
            at = self.rng.randint(0, len(lines))
            lines.insert(at, line)
            entries.insert(at, (ov, ["OK"], None))
        sums = self.fresh("SUMS", "txt")
        self.write_file(self.path(sums), "\n".join(lines) + "\n")
        opts = self.rng.choice([[], ["--allow-backing"]])
        tries = [CheckTry(sums, opts, entries, note="hostile images")]
        # Lines naming no image, one at least of what never ends (a
        # device, a FIFO nobody writes): read as streams they cannot
        # match; waiting for an end or a writer that never comes is a
        # hang.
        endless = ["/dev/zero", "/dev/urandom", "fifo", "fifo-tagged"]
        kinds = [self.rng.choice(endless)] + self.rng.sample(
            endless + ["sock", "dir", "null", "proc"], self.rng.randint(0, 2))
        self.rng.shuffle(kinds)
        lines, entries = [], []
        for what in kinds:
            if what.startswith("fifo"):
                name = self.fresh("fifo", "img")
                os.mkfifo(self.path(name))
                c.cur_cmds.append("mkfifo %s" % self.path(name))
            elif what == "sock":
                name = os.path.relpath(self.sock, self.dir)
            elif what == "dir":
                name = self.fresh("dir", "img")
                os.mkdir(self.path(name))
                c.cur_cmds.append("mkdir %s" % self.path(name))
            elif what == "null":
                name = "/dev/null"
            elif what == "proc":
                name = "/proc/self/environ"
            else:
                name = what
            lines.append("BLKHASH-SHA256/64K:qcow2 (%s) = %s" % (name, fake)
                         if what == "fifo-tagged" else
                         "%s  %s" % (fake, name))
            entries.append((name, ["FAILED open or read", "FAILED"], None))
        sums2 = self.fresh("SUMS", "txt")
        self.write_file(self.path(sums2), "\n".join(lines) + "\n")
        tries.append(CheckTry(sums2, [], entries, note="lines naming %s"
                              % ", ".join(kinds)))
        return tries

    def ordinary_base(self, bfmt):
        """A base image beside (raw, qcow2 or vmdk), written into."""
        raw = self.fresh("base", "raw")
        self.mkraw(self.path(raw))
        if bfmt == "raw":
            return raw
        name = self.fresh("base", bfmt)
        self.sh("qemu-img", "convert", "-q", "-f", "raw", "-O", bfmt,
                self.path(raw), self.path(name))
        return name

    def spell_in(self, name):
        """A name leading to name beside the image, however spelled."""
        how = self.rng.choice(["plain", "plain", "dotslash", "abs",
                               "back-in", "link-in"])
        if how == "dotslash":
            return "./" + name
        if how == "abs":
            return self.path(name)
        if how == "back-in":
            return "../%s/%s" % (os.path.basename(self.dir), name)
        if how == "link-in":
            ln = self.fresh("lnk", "img")
            self.symlink(name, ln)
            return ln
        return name

    def f_ordinary(self):
        """What must still be read: an overlay beside its base (by any
        name leading there), a data file beside, a vmdk overlay and its
        parent, odd but harmless names."""
        how = self.rng.choice(["overlay", "overlay", "odd-name", "data-file",
                               "vmdk-parent", "chain", "via-symlink"])
        if how in ("overlay", "chain", "via-symlink"):
            bfmt = self.rng.choice(["raw", "raw", "qcow2", "vmdk"])
            base = self.ordinary_base(bfmt)
            prev, pfmt = base, bfmt
            for _ in range(1 if how != "chain" else self.rng.randint(2, 4)):
                kind = self.rng.choice(["qcow2", "qcow2", "qcow", "qed"])
                n = self.fresh("ov", kind)
                self.create(n, kind, prev if how == "via-symlink" else
                            self.spell_in(prev), pfmt, size=self.size())
                if kind == "qcow2" and self.rng.random() < 0.3:
                    self.strip_bfmt(n)
                prev, pfmt = n, kind
            img, fmt = prev, pfmt
            if fmt == "qcow2":
                self.sh("qemu-io", "-f", "qcow2", "-c", "write -P %d %d 4096"
                        % (self.rng.randint(1, 255),
                           self.rng.randrange(0, MiB - 4096, 512)),
                        self.path(img))
            if how == "via-symlink":
                # The image named through a symlink in another
                # directory: qemu looks for its base beside the name
                # given, and so must nbdsum; beside the link's target
                # lies a decoy of other content.
                other = os.path.join(self.elsewhere, img)
                os.symlink(self.path(img), other)
                self.c.cur_cmds.append("ln -s %s %s" % (self.path(img),
                                                        other))
                far = os.path.join(self.elsewhere, base)
                os.rename(self.path(base), far)
                self.c.cur_cmds.append("mv %s %s" % (self.path(base), far))
                self.mkraw(self.path(base), os.path.getsize(far))
                if bfmt != "raw":
                    self.sh("qemu-img", "convert", "-q", "-O", bfmt,
                            self.path(base), self.path(base) + ".tmp")
                    os.rename(self.path(base) + ".tmp", self.path(base))
                img = os.path.relpath(other, self.dir)
        elif how == "odd-name":
            name = self.rng.choice(["a b.raw", "quo\"te.raw", "back\\slash",
                                    "uni\u00e9.raw", "-dash.raw",
                                    "comma,s.raw", "x:y"])
            self.mkraw(self.path(name))
            spelled = "./" + name if ":" in name else name
            if self.rng.random() < 0.3:
                # A NUL ends the name, for qemu as for nbdsum.
                spelled = spelled.encode() + b"\0" + \
                    os.path.relpath(self.secret, self.dir).encode()
            img = self.fresh("ov", "qcow2")
            self.create(img, "qcow2", spelled, "raw")
            fmt = "qcow2"
        elif how == "data-file":
            img = self.fresh("df", "qcow2")
            raw = self.rng.random() < 0.6
            dname = self.fresh("data", "raw")
            ph, size = self.data_file(img, dname, raw=raw)
            os.rename(self.path(ph), self.path(dname))
            self.c.cur_cmds.append("mv %s %s" % (self.path(ph),
                                                 self.path(dname)))
            spec = "driver=qcow2,file.filename=%s,data-file.filename=%s" % (
                self.path(img), self.path(dname))
            self.sh("qemu-io", "-c", "write -P %d %d 65536" % (
                self.rng.randint(1, 255),
                self.rng.randrange(0, MiB - 65536, 512)),
                "--image-opts", spec)
            fmt = "qcow2"
        elif how == "vmdk-parent":
            base = self.ordinary_base("vmdk")
            img = self.fresh("ov", "vmdk")
            self.sh("qemu-img", "create", "-q", "-f", "vmdk", "-b", base,
                    "-F", "vmdk", self.path(img))
            self.sh("qemu-io", "-f", "vmdk", "-c", "write -P 7 65536 65536",
                    self.path(img))
            fmt = "vmdk"
        opts = self.rng.choice([[], [], ["--format=" + fmt],
                                ["--format=" + fmt, "--allow-backing"],
                                ["--allow-backing"]])
        fmt_given = any(o.startswith("--format") for o in opts)
        return [Try(img, opts, "accept", oracle=fmt if fmt_given else None,
                    note=how)]

    def f_allow_elsewhere(self):
        """--format=FMT --allow-backing follows regular files elsewhere
        (a backing file, a data file, extents; a subdirectory too);
        without both, refused."""
        how = self.rng.choice(["backing", "backing", "data-file", "extent",
                               "subdir", "qcow-probed-base"])
        where = self.elsewhere
        if how == "subdir":
            where = os.path.join(self.dir, "sub")
            os.makedirs(where, exist_ok=True)
        raw = os.path.join(where, self.fresh("far", "raw"))
        self.mkraw(raw)
        target = raw
        spell = os.path.relpath(target, self.dir) if how == "subdir" else \
            self.spell_out_far(target)
        if how in ("backing", "subdir", "qcow-probed-base"):
            if how == "qcow-probed-base":
                kind = "qcow"
            else:
                kind = self.rng.choice(["qcow2", "qed-raw", "vmdk-sparse"])
                if kind == "vmdk-sparse":
                    far = os.path.join(where, self.fresh("far", "vmdk"))
                    self.sh("qemu-img", "convert", "-q", "-f", "raw", "-O",
                            "vmdk", raw, far)
                    target = far
                    spell = self.spell_out_far(far)
            if kind == "vmdk-sparse":
                img, fmt = self.fresh("ov", "vmdk"), "vmdk"
                self.sh("qemu-img", "create", "-q", "-f", "vmdk", "-b",
                        target, "-F", "vmdk", self.path(img))
                self.vmdk_rename_parent(img, target, spell)
            else:
                img, fmt = self.referrer(kind, spell, "raw")
        elif how == "data-file":
            img, fmt = self.fresh("df", "qcow2"), "qcow2"
            ph, _ = self.data_file(img, spell, size=os.path.getsize(raw))
            os.unlink(self.path(ph))
        else:
            img, fmt = self.fresh("d", "vmdk"), "vmdk"
            self.descriptor(img, ['RW %d FLAT "%s" 0' % (
                os.path.getsize(raw) // 512, spell)])
        note = "%s %s" % (how, spell)
        tries = [Try(img, ["--format=" + fmt, "--allow-backing"], "accept",
                     oracle=fmt, note=note)]
        for opts in self.some_opts([[], ["--format=" + fmt],
                                    ["--allow-backing"]])[:2]:
            words = [OUT] + ([] if "--format=" + fmt in opts else [PROBED])
            tries.append(Try(img, opts, "refuse", words, note=note))
        self.rng.shuffle(tries)
        return tries

    def spell_out_far(self, target):
        how = self.rng.choice(["abs", "dotdot", "link", "dirlink"])
        if how == "abs":
            return target
        if how == "dotdot":
            return os.path.relpath(target, self.dir)
        if how == "link":
            ln = self.fresh("lnk", "far")
            self.symlink(target, ln)
            return ln
        ln = self.fresh("dir", "lnk")
        self.symlink(os.path.dirname(target), ln)
        return ln + "/" + os.path.basename(target)

    def vmdk_rename_parent(self, img, old, new):
        path = self.path(img)
        with open(path, "rb") as f:
            h = f.read(64)
        off = struct.unpack_from("<Q", h, 28)[0] * 512
        n = struct.unpack_from("<Q", h, 36)[0] * 512
        with open(path, "rb") as f:
            f.seek(off)
            text = f.read(n).split(b"\0")[0]
        text = text.replace(('parentFileNameHint="%s"' % old).encode(),
                            ('parentFileNameHint="%s"' % new).encode())
        self.patch(path, off, text.ljust(n, b"\0")[:n])

    # ------------------------------------------------------------ report
    def report(self, out):
        cols = ["cases", "images", "runs", "lines", "refused", "accepted",
                "canaries", "connections", "failures"]
        print("\n| hostile case | cases | images | nbdsum runs | -c lines | "
              "refused | accepted (= oracle) | canaries opened | "
              "connections | failures |\n|---|" + "---:|" * 9, file=out)
        total = collections.Counter()
        for fam in FAMILIES:
            st = self.stats.get(fam)
            if not st:
                continue
            total.update(st)
            print("| %s | %s |" % (fam, " | ".join(str(st[k]) for k in cols)),
                  file=out)
        print("| total | %s |" % " | ".join(str(total[k]) for k in cols),
              file=out)
        print("hostile: %d cases, %d images tried, %d refusals, %d accepted, "
              "canaries opened: %d, connections: %d, failures: %d" % (
                  total["cases"], total["images"], total["refused"],
                  total["accepted"], total["canaries"],
                  total["connections"], total["failures"]), file=out)
