#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""The trust campaign: random user operations, every checksum checked.

    campaign.py [--ops N] [--seed S] [--dir DIR] [--log FILE]
                [--kinds K,K...] [--until N] [--timeout SECONDS] [--table]
                [--hostile N] [--hostile-case N] [--hostile-timeout S]
                [--word N] [--word-case N] [--word-timeout S]

A seeded generator composes what a user does with disk images, nbdsum
and nbdkit --filter=blkhash: makes images of every format qemu-img
writes, writes into them from outside (qemu-io, dd), resizes them,
stacks overlays, takes snapshots and dirty bitmaps, runs long-lived
servers with the filter and writes through them, and asks nbdsum for
checksums in every form (local files, --format, --client-side,
standard input, [ qemu-nbd ... ], [ nbdkit ... ], URIs, -j, --json,
--blocks, --since, -c, --range with blkhash or --plain, --bmap).  The
oracle is tests/reference.py over the guest content at that moment
(qemu-img convert -O raw, or the bytes a server serves), computed only
when a checksum is printed and cached by the image's generation.

Failures: a checksum or manifest printed that differs from the oracle
(a range's: over its bytes; a bmap whose range sha256, BlocksCount or
BmapFileChecksum is wrong, that leaves data unmapped or maps more than
1.1 times it); -c or --check-manifest saying OK of what changed (or
FAILED of what did not: a false alarm, counted apart), a range line
after writes in its range or only outside it; an exit status that contradicts
the verdicts; a blkhash-file line that is stale, or missing right after
a writer returned; a hang past --timeout (a signal that does not stop
nbdsum included); a crash (a signal nobody sent, a sanitizer's report,
an abort); processes or temporary files left by an nbdsum run; a filter
order nbdkit-blkhash-filter(1) refuses being accepted, or one it allows
being refused; a view's URI hashed; notices printed under -q.  A
refusal (exit status not 0, a message on stderr) is never a failure:
it is counted.  --since after the user broke its documented
precondition (nbdsum(1), INCREMENTAL CHECKSUMS) is counted apart.  An
operation whose tool is missing is skipped, with the reason counted,
never counted as a check.

Then the hostile phase (tests/campaign_hostile.py; --hostile N cases,
one of each kind by default): images and checksum files made by
someone hostile, whose headers name files outside their directory,
protocols aimed at loopback listeners, devices, FIFOs, kernel files,
loops and deep chains, watched by tests/canary.py.  A canary opened,
a listener reached, a hang, a refusal that is not one clear message
with exit status 1, or a checksum other than the oracle's where
nbdsum(1), SECURITY reads the image, is a failure.

Last the word phase (tests/campaign_word.py; --word N cases, one of
each kind by default): what a server says, against the oracle.  Files
named like views beside tampered images on servers without the filter,
and crafted views echoing the nonce (tests/echonbd.py) whose digests or
root lie about k blocks: nbdsum prints the oracle's checksum or fails;
the forged value with exit 0 only where nbdsum(1) says it is taken on
the server's word (counted by lie, spot check and blocks lied).  The
gate, blkhash-expect=: imports of the right or a wrong image (file and
curl plugins; nbdcopy, qemu-img convert, reads in pieces, whole or in
part), and uploads by a writer that checks its flushes (more than
65,536 ranges, writes through another export name after a pass,
zeroes and trims mixed): a wrong image read whole fails its reader, a
wrong upload written whole fails its flush, the right one passes, and
every blkhash-file line is zeros or the oracle's checksum of content
that matches.

Every operation is logged (--log, JSON lines: the commands run and
their results), and each failure carries the commands of every earlier
operation that touched the same images, servers and files: a
reproducer.  The same seed replays the same operations (timing
decides only what signals interrupt); --until N stops after operation
N.  Exits 1 if anything failed.
"""
import argparse
import collections
import hashlib
import io
import json
import os
import random
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True      # no __pycache__ in the source tree
import reference  # noqa: E402  (tests/reference.py, the oracle)
import campaign_hostile  # noqa: E402  (the hostile phase)
import campaign_word  # noqa: E402  (the word phase)

TOP_BUILD = os.environ.get("top_builddir", os.path.dirname(HERE))
NBDSUM = os.environ.get("NBDSUM", os.path.join(TOP_BUILD, "client/nbdsum"))
FILTER = os.environ.get(
    "BLKHASH_FILTER",
    os.path.join(TOP_BUILD, "filter/.libs/nbdkit-blkhash-filter.so"))
MKIMAGE = os.environ.get("MKIMAGE", os.path.join(TOP_BUILD, "tests/mkimage"))
NBD_PYTHON = "/usr/bin/python3"    # the one with the libnbd bindings

FORMATS = ["raw", "qcow2", "vmdk", "vhdx", "vpc", "vdi", "qed", "parallels"]
FORMAT_WEIGHTS = [6, 6, 1, 1, 1, 1, 1, 1]
DIGESTS = ["sha256", "sha1", "sha512"]
BLOCK_SIZES = [65536, 131072, 4096, 98304]
SIZES = [0, 1, 512, 4095, 65535, 65536, 65537, 100001, 393223, 1048576,
         1049089, 2097152, 3141592, 4194304, 8388608]

# Filters nbdkit-blkhash-filter(1) allows in front of blkhash, with
# parameters that keep them harmless, and filters it refuses there.
ALLOWED_FRONT = {"delay": ["rdelay=1ms"], "log": ["logfile=/dev/null"],
                 "stats": ["statsfile=/dev/null"], "rate": ["rate=1G"],
                 "noparallel": [], "limit": ["limit=0"], "ip": [],
                 "error": ["error-rate=0"]}
REFUSED_FRONT = {"cache": [], "cow": [], "readahead": [], "blocksize": [],
                 "nozero": [], "noextents": [], "fua": [],
                 "offset": ["offset=512"], "truncate": ["truncate=1M"],
                 "protect": ["protect=0-511"], "multi-conn": []}
BEHIND = ["cow", "cache", "noextents", "readahead", "blocksize", "nozero",
          "offset", "truncate"]

CRASH_RE = re.compile(
    r"AddressSanitizer|LeakSanitizer|runtime error:|Assertion .* failed|"
    r"Segmentation fault|core dumped|double free|free\(\): invalid|"
    r"malloc\(\): |stack smashing|\babort\b|\bAborted\b", re.I)
# A tagged line may carry the format its file was given (:vpc).
TAGGED_RE = re.compile(r"^\\?BLKHASH-([^/]+)/([0-9]+[KMkm]?)"
                       r"(?::(?P<fmt>[A-Za-z0-9]+))? "
                       r"\((?P<name>.*)\) = (?P<hex>[0-9a-fA-F]+)$")
# A --range line: blkhash's tag or a plain digest's, then @OFF+LEN.
RANGE_LINE_RE = re.compile(
    r"^(?:BLKHASH-(?P<d>[^/]+)/(?P<bs>[0-9]+[KMkm]?)|(?P<plain>[A-Za-z0-9-]+))"
    r"(?::[A-Za-z0-9]+)?@(?P<off>[0-9]+[KMkm]?)\+(?P<len>[0-9]+[KMkm]?) "
    r"\((?P<name>.*)\) = (?P<hex>[0-9a-fA-F]+)$")
UNTAGGED_RE = re.compile(r"^\\?([0-9a-fA-F]{32,128}) [ *](.*)$")
# What nbdkit-blkhash-filter says when it refuses a filter order.
ORDER_REFUSAL_RE = re.compile(r"in front of blkhash|blkhash: cannot (find|tell)"
                              r"|given more than once|--filter options for")
VERDICT_RE = re.compile(r"^(.*): (OK|FAILED open or read|FAILED)$")
# What qemu says of an image it reads all the same.
QEMU_WARNING_RE = re.compile(r"^qcow2: Image is corrupt: .*non-fatal")

# Op kinds and their weights (an op whose precondition does not hold
# in the current state is drawn again).
WEIGHTS = collections.OrderedDict([
    ("create", 8), ("write", 14), ("resize", 4), ("overlay", 3),
    ("snapshot", 3), ("bitmap", 4), ("manifest", 5), ("since", 9),
    ("sum", 20), ("stdin", 4), ("check", 8), ("check-manifest", 2),
    ("server-start", 2),
    ("server-write", 9), ("server-sum", 8), ("server-stop", 1),
    ("order", 4), ("signal", 4), ("fdlimit", 1), ("remove", 1),
    ("corrupt", 1), ("range", 6), ("bmap", 3),
])


class Unreadable(Exception):
    """The oracle cannot read the target (qemu-img fails, file gone)."""


def parse_bs(text):
    m = re.fullmatch(r"(\d+)([KM]?)", text)
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1 << 20}[m.group(2)]


def spell_bs(bs):
    if bs % (1 << 20) == 0:
        return "%dM" % (bs >> 20)
    if bs % 1024 == 0:
        return "%dK" % (bs >> 10)
    return str(bs)


def digest_len(name):
    return reference.new(name).digest().__len__()


class Cell:
    """A file's bytes: images that are hard links share one."""
    ids = 0

    def __init__(self):
        Cell.ids += 1
        self.id = Cell.ids
        self.gen = 0


class Image:
    def __init__(self, name, path, fmt, base=None, cell=None):
        self.name, self.path, self.fmt, self.base = name, path, fmt, base
        self.cell = cell or Cell()
        self.bitmaps = {}          # name -> enabled
        self.snapshots = []
        self.events = []           # (seq, kind, arg)
        self.server = None         # the long-running server serving it
        self.deleted = False
        self.corrupt = False

    def key(self):
        k = (self.cell.id, self.cell.gen)
        return k + (("b",) + self.base.key() if self.base else ())

    def chain(self):
        img, out = self, []
        while img:
            out.append(img)
            img = img.base
        return out


class Server:
    def __init__(self, name, kind, sock, dirpath):
        self.name, self.kind, self.sock, self.dir = name, kind, sock, dirpath
        self.proc = None
        self.cache = False
        self.bfile = None
        self.digest, self.bs = "sha256", 65536
        self.exports = {}          # export name -> target
        self.accept = {}           # export name -> set of acceptable hex
        self.threads1 = False
        self.errlog = None
        self.written = set()       # exports written through the filter

    def uri(self, export):
        return "nbd+unix:///%s?socket=%s" % (export, self.sock)


class Manifest:
    def __init__(self, path, img, bitmap, digest, bs, seq):
        self.path, self.img, self.bitmap = path, img, bitmap
        self.digest, self.bs, self.seq = digest, bs, seq
        self.name = os.path.basename(path)


class Result:
    def __init__(self, cmd, rc, out, err, secs, hung):
        self.cmd, self.rc, self.out, self.err = cmd, rc, out, err
        self.secs, self.hung = secs, hung


class Campaign:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.rng = random.Random(self.seed)
        self.dir = args.dir
        self.tmp = os.path.join(self.dir, "tmp")
        os.makedirs(self.tmp, exist_ok=True)
        self.timeout = args.timeout
        self.images = collections.OrderedDict()
        self.manifests = []
        self.checkfiles = []
        self.servers = []
        self.nimg = self.nsrv = self.nfile = 0
        self.seq = 0
        self.op = 0
        self.ops = collections.Counter()
        self.checks = collections.Counter()
        self.refusals = collections.Counter()
        self.refusal_samples = {}
        self.skips = collections.Counter()
        self.failures = []
        self.notes = collections.Counter()
        self.limits = collections.Counter()
        self.logged = 0
        self.history = []          # (op, touched, cmds)
        self.cur_cmds = []
        self.cur_touch = set()
        self.cache_sum = {}
        self.cache_blocks = {}
        self.bytes_cache = (None, None)
        self.range_lines = []      # --range lines kept for -c
        self.log = open(args.log, "w") if args.log else None
        self.env = dict(os.environ)
        self.env["TMPDIR"] = self.tmp
        self.env["LC_ALL"] = "C"
        self.tools = {t: shutil.which(t) is not None for t in
                      ["qemu-img", "qemu-io", "qemu-nbd", "nbdkit",
                       "nbdcopy", "nbdsh", "dd", "truncate"]}
        self.tools["libnbd-python"] = subprocess.run(
            [NBD_PYTHON, "-c", "import nbd"],
            capture_output=True).returncode == 0
        self.tools["sh-plugin"] = self.tools["nbdkit"] and subprocess.run(
            ["nbdkit", "sh", "--dump-plugin"],
            capture_output=True).returncode == 0
        self.filterdir = "/usr/lib/x86_64-linux-gnu/nbdkit/filters"
        if self.tools["nbdkit"]:
            conf = subprocess.run(["nbdkit", "--dump-config"],
                                  capture_output=True, text=True).stdout
            m = re.search(r"^filterdir=(.*)$", conf, re.M)
            if m:
                self.filterdir = m.group(1)
        self.hostile = None
        self.word = None
        self.writer = os.path.join(self.dir, "writer.py")
        with open(self.writer, "w") as f:
            f.write(WRITER)

    # ------------------------------------------------------------ running
    def run(self, argv, stdin_path=None, cwd=None, tmpdir=None, sig=None,
            limit_fds=None, shell=False, timeout=None, touch=()):
        env = dict(self.env)
        if tmpdir:
            env["TMPDIR"] = tmpdir
        if not shell and argv[0] == "nbdsh":
            env["PATH"] = "/usr/bin:" + env.get("PATH", "")
        cmd = argv if shell else shlex.join(argv)
        if stdin_path:
            cmd += " < " + shlex.quote(stdin_path)
        if tmpdir:
            cmd = "TMPDIR=%s %s" % (shlex.quote(tmpdir), cmd)
        if limit_fds:
            cmd = "(ulimit -n %d; %s)" % (limit_fds, cmd)
        self.cur_cmds.append(cmd)
        self.cur_touch.update(touch)

        def preexec():
            # The signals a user's shell leaves to their default: ignored
            # here when the suite runs as a background job (make check
            # &, CI), they would be ignored by nbdsum too (as nohup
            # expects), and a signal operation would hang.
            for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
                signal.signal(s, signal.SIG_DFL)
            if limit_fds:
                resource.setrlimit(resource.RLIMIT_NOFILE,
                                   (limit_fds, limit_fds))
        stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=cwd or self.dir,
                             env=env, start_new_session=True, shell=shell,
                             preexec_fn=preexec)
        if stdin_path:
            stdin.close()
        timer = None
        if sig:
            signum, delay, group = sig

            def send():
                try:
                    if group:
                        os.killpg(p.pid, signum)
                    else:
                        os.kill(p.pid, signum)
                except ProcessLookupError:
                    pass
            timer = threading.Timer(delay, send)
            timer.start()
        hung = False
        try:
            out, err = p.communicate(timeout=timeout or self.timeout)
        except subprocess.TimeoutExpired:
            hung = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = p.communicate()
        if timer:
            timer.cancel()
        r = Result(cmd, p.returncode, out.decode("utf-8", "replace"),
                   err.decode("utf-8", "replace"),
                   time.monotonic() - t0, hung)
        if self.args.verbose:
            print("  $ %s -> %s" % (cmd, r.rc), file=sys.stderr)
        return r

    def tool(self, *argv, **kw):
        """A setup command (qemu-img, qemu-io, ...): True if it worked."""
        r = self.run(list(argv), **kw)
        if r.hung:
            self.fail("hang", "setup command hung: %s" % r.cmd)
        if r.rc != 0:
            self.skip("setup refused: %s" % argv[0] +
                      (" " + argv[1] if len(argv) > 1 else ""))
        return r.rc == 0

    # ----------------------------------------------------------- counting
    def fail(self, kind, msg, **extra):
        names = set(self.cur_touch) | set(extra.pop("touch", ()))
        repro = [c for (_, t, cmds) in self.history if t & names
                 for c in self.repro_cmds(cmds, names)] + list(self.cur_cmds)
        f = {"kind": kind, "seed": self.seed, "op": self.op,
             "msg": msg, "repro": repro}
        f.update(extra)
        self.failures.append(f)
        if not self.args.quiet:
            print("FAILURE %s at op %d (seed %d): %s" % (
                kind, self.op, self.seed, msg), file=sys.stderr)

    @staticmethod
    def repro_cmds(cmds, names):
        """An earlier op's commands that matter to a reproducer: those
        that change images or talk to a long-running server, or all of
        an op that saved a file the failure uses."""
        if any(c.startswith("# saved as ") and c[11:] in names
               for c in cmds):
            return cmds
        return [c for c in cmds
                if not (c.startswith("TMPDIR=") or c.startswith("(ulimit")
                        or c.startswith("# saved") or c.startswith("# kill"))
                or "socket=" in c]

    def refuse(self, what, r):
        self.refusals[what] += 1
        msg = (r.err.strip().splitlines() or ["(no message)"])[-1][:160]
        self.refusal_samples.setdefault(what, msg)
        if not r.err.strip() and "--status" not in r.cmd and not r.hung:
            self.fail("silent-refusal", "%s: exit %s with no message: %s"
                      % (what, r.rc, r.cmd))

    def skip(self, reason):
        self.skips[reason] += 1

    def event(self, img, kind, arg=None):
        self.seq += 1
        for i in self.images.values():
            if i is img or i.cell is img.cell:
                i.events.append((self.seq, kind, arg))
            elif any(b.cell is img.cell for b in i.chain()[1:]) and \
                    kind in ("write", "shrink", "grow", "snap-apply"):
                i.events.append((self.seq, "base-write", img.name))

    def bump(self, img):
        img.cell.gen += 1

    def before_outside_write(self, img):
        """A served file is about to change behind its server: its
        blkhash-file line may stay that of the end of the last session
        (nbdkit-blkhash-filter(1), blkhash-file)."""
        for s in self.servers:
            for e, t in s.exports.items():
                if t[1].cell is img.cell and s.bfile:
                    try:
                        s.accept[e].add(self.sum(t, s.digest, s.bs))
                    except Unreadable:
                        pass

    # ------------------------------------------------------------- oracle
    def tkey(self, t):
        kind, img = t[0], t[1]
        if kind == "file":
            return ("f", img.cell.id, img.cell.gen)
        if kind == "qemu":
            return ("q", t[2], t[3]) + img.key()
        if kind == "window":
            return ("w", img.cell.id, img.cell.gen, t[2], t[3])
        raise ValueError(kind)

    def content(self, t):
        """Path of a file holding the target's bytes now, and whether
        it is a temporary copy."""
        kind, img = t[0], t[1]
        if img.deleted or not os.path.exists(img.path):
            raise Unreadable("%s was removed" % img.name)
        if kind == "file":
            return img.path, False
        out = os.path.join(self.dir, "oracle.raw")
        if kind == "qemu":
            argv = ["qemu-img", "convert", "-f", t[2]]
            if t[3]:
                argv += ["-l", "snapshot.name=" + t[3]]
            argv += ["-O", "raw", img.path, out]
            r = subprocess.run(argv, capture_output=True, env=self.env)
            if r.returncode != 0:
                raise Unreadable(r.stderr.decode(errors="replace").strip())
            return out, True
        if kind == "window":
            off, length = t[2], t[3]
            with open(img.path, "rb") as f:
                f.seek(off)
                data = f.read(length) if off < os.path.getsize(img.path) \
                    else b""
            with open(out, "wb") as f:
                f.write(data)
            return out, True
        raise ValueError(kind)

    def sum(self, t, digest, bs):
        key = (self.tkey(t), digest, bs)
        if key not in self.cache_sum:
            path, tmp = self.content(t)
            with open(path, "rb") as f:
                hexsum = reference.blkhash(digest, bs, f)
            self.cache_sum[key] = (hexsum, os.path.getsize(path))
            if tmp:
                os.unlink(path)
        return self.cache_sum[key][0]

    def size(self, t):
        self.sum(t, "sha256", 65536)
        return self.cache_sum[(self.tkey(t), "sha256", 65536)][1]

    def blocks(self, t, digest, bs):
        key = (self.tkey(t), digest, bs)
        if key not in self.cache_blocks:
            path, tmp = self.content(t)
            with open(path, "rb") as f:
                hexes = reference.blkhash(digest, bs, f, blocks=True)
            if tmp:
                os.unlink(path)
            n = 2 * digest_len(digest)
            self.cache_blocks[key] = [hexes[i:i + n]
                                      for i in range(0, len(hexes), n)]
        return self.cache_blocks[key]

    def vsize(self, img):
        if img.fmt == "raw":
            return os.path.getsize(img.path)
        r = subprocess.run(["qemu-img", "info", "-U", "-f", img.fmt,
                            "--output=json", img.path],
                           capture_output=True, env=self.env)
        if r.returncode != 0:
            return None
        return json.loads(r.stdout)["virtual-size"]

    # ----------------------------------------------- checking nbdsum output
    def check_lines(self, r, inputs, digest, bs, what, json_out=False,
                    quiet=False, killed=False):
        """Check every checksum nbdsum printed.  inputs: list of (name
        as given, target, (digest, bs) expected when not asked)."""
        killed = killed or r.hung
        by_name = {}
        for name, t, dflt in inputs:
            by_name.setdefault(name, (t, dflt))
        printed = []
        if json_out:
            if not r.out.strip():
                return 0
            try:
                doc = json.loads(r.out)
            except ValueError:
                if killed:
                    return 0
                self.fail("bad-json", "%s: not JSON: %r" % (what, r.out[:200]))
                return 0
            for o in doc.get("inputs", []):
                if "checksum" in o:
                    printed.append((o["name"], o["checksum"], o.get("digest"),
                                    o.get("block-size"), o.get("size")))
        else:
            for line in r.out.splitlines():
                m = TAGGED_RE.match(line)
                if m:
                    d = m.group(1).lower()
                    printed.append((m.group("name"), m.group("hex").lower(), d,
                                    parse_bs(m.group(2)), None))
                    continue
                m = UNTAGGED_RE.match(line)
                if m:
                    printed.append((m.group(2), m.group(1).lower(), None,
                                    None, None))
                    continue
                if line.strip() and not killed:
                    self.fail("garbled-output", "%s: unexpected line %r"
                              % (what, line))
        n = 0
        for name, hexsum, d, b, size in printed:
            if name not in by_name:
                self.fail("garbled-output", "%s: a checksum for %r, not an "
                          "input" % (what, name))
                continue
            t, dflt = by_name[name]
            if t[0] == "refused":
                self.fail("refused-input-accepted",
                          "%s: %s cannot be hashed (a view's URI, or a FIFO "
                          "nobody writes), yet nbdsum printed %s"
                          % (what, name, hexsum))
                continue
            want_d = digest or dflt[0]
            want_b = bs or dflt[1]
            if d is not None and (d, b) != (want_d, want_b):
                self.fail("wrong-tag", "%s: %s printed as %s/%s, asked %s/%s"
                          % (what, name, d, b, want_d, want_b))
                want_d, want_b = d, b
            try:
                want = self.sum(t, want_d, want_b)
            except Unreadable as e:
                self.fail("sum-of-unreadable", "%s: %s: nbdsum printed %s "
                          "but the oracle cannot read it (%s)"
                          % (what, name, hexsum, e))
                continue
            n += 1
            self.checks["checksum"] += 1
            if hexsum != want:
                kind = "wrong-checksum" if r.rc == 0 else \
                    "wrong-checksum-exit%s" % r.rc
                self.fail(kind, "%s: %s: nbdsum printed %s, the oracle "
                          "(%s %s) says %s" % (what, name, hexsum, want_d,
                                               want_b, want),
                          got=hexsum, want=want, target=self.tdesc(t),
                          tags=self.input_tags(name, t))
            elif size is not None and size != self.size(t):
                self.fail("wrong-size", "%s: %s: JSON size %d, the image "
                          "has %d" % (what, name, size, self.size(t)))
        if r.rc == 0 and any(t[0] == "refused" for _, t, _ in inputs):
            self.fail("refused-input-accepted", "%s: exit 0 with a view's "
                      "URI or a FIFO nobody writes among the inputs" % what)
        elif r.rc == 0 and not killed and len(printed) < len(inputs):
            self.fail("missing-output", "%s: exit 0 but %d checksums for %d "
                      "inputs" % (what, len(printed), len(inputs)))
        return n

    def input_tags(self, name, t):
        """How an input was given, for grouping failures."""
        if name.startswith("nbd+unix://"):
            for s in self.servers:
                if "?socket=" + s.sock in name:
                    return ["uri", "server:" + s.kind +
                            (":cache" if s.cache else "")]
            return ["uri"]
        if name.startswith("["):
            return ["bracket:" + name.split()[1]]
        if name == "-":
            return ["stdin"]
        return ["file", "format:" + t[1].fmt]

    def tdesc(self, t):
        return "%s %s %s" % (t[0], t[1].name, " ".join(map(str, t[2:])))

    def after_nbdsum(self, r, what, opdir, quiet=False, signalled=False):
        """Crashes, hangs, notices under -q, processes and files left."""
        if r.hung:
            self.fail("hang", "%s: no answer in %.0fs" % (what, r.secs))
        elif r.rc is not None and r.rc < 0 and not signalled:
            self.fail("crash", "%s: died of signal %d" % (what, -r.rc))
        if CRASH_RE.search(r.err):
            self.fail("crash", "%s: %s" % (what, CRASH_RE.search(r.err)
                                           .group(0)), stderr=r.err[-2000:])
        # qemu's own warnings of a corrupt image it still reads (an
        # image the campaign wrote into with dd) are not nbdsum's
        # notices: -q does not silence them.
        err = "\n".join(line for line in r.err.splitlines()
                        if not QEMU_WARNING_RE.search(line))
        if quiet and r.rc == 0 and err.strip():
            self.fail("noise", "%s: -q, exit 0, yet stderr says: %s"
                      % (what, err.strip()[:300]))
        self.orphans(what, opdir, r.hung)

    def orphans(self, what, opdir, hung):
        """Processes of this run still alive (their TMPDIR is the op's
        own) 10 s after it, nbdsum(1)'s bound for its servers to stop
        (a hang guard: they are waited for, not given a time), and
        files left in it."""
        needle = ("TMPDIR=" + opdir).encode() + b"\0"
        deadline = time.monotonic() + 10
        while True:
            left = []
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open("/proc/%s/environ" % pid, "rb") as f:
                        if needle in f.read():
                            with open("/proc/%s/cmdline" % pid, "rb") as c:
                                left.append((int(pid), c.read().replace(
                                    b"\0", b" ").decode(errors="replace")))
                except OSError:
                    pass
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if left:
            # After a hang the run was killed with SIGKILL, which
            # nbdsum cannot pass on: told apart.
            self.fail("orphan", "%s: left running: %s" % (
                what, "; ".join("%d %s" % p for p in left)),
                tags=["after-SIGKILL-of-a-hung-run"] if hung else [])
            for pid, _ in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if not hung and os.path.isdir(opdir) and os.listdir(opdir):
            self.fail("tmp-left", "%s: left in TMPDIR: %s"
                      % (what, " ".join(os.listdir(opdir))))
        shutil.rmtree(opdir, ignore_errors=True)

    def opdir(self):
        d = os.path.join(self.tmp, "op%d" % self.op)
        os.makedirs(d, exist_ok=True)
        return d

    # ------------------------------------------------------------ helpers
    def live(self, pred=lambda i: True, writable=False):
        out = []
        for i in self.images.values():
            if i.deleted:
                continue
            if writable and (i.corrupt or (i.server and i.server.cache)):
                continue
            if pred(i):
                out.append(i)
        return out

    def new_name(self, ext):
        self.nimg += 1
        return "i%d.%s" % (self.nimg, ext)

    def recipe(self, size):
        parts = [str(size)]
        for _ in range(self.rng.randint(0, 4)):
            if size == 0:
                break
            off = self.rng.randrange(size)
            length = self.rng.randint(1, max(1, min(size - off, 1 << 20)))
            if self.rng.random() < 0.75:
                parts.append("d:%d+%d:s%d" % (off, length,
                                              self.rng.randrange(1000)))
            else:
                parts.append("z:%d+%d" % (off, length))
        return ";".join(parts)

    def pick_size(self):
        s = self.rng.choice(SIZES)
        if self.args.small and s > 2097152:
            s = self.rng.choice(SIZES[:11])
        return s

    def digest_opts(self):
        """-d and --block-size, or none: (argv, digest, bs)."""
        argv, d, b = [], None, None
        if self.rng.random() < 0.4:
            d = self.rng.choice(DIGESTS)
            argv += ["-d", d]
        if self.rng.random() < 0.4:
            b = self.rng.choice(BLOCK_SIZES)
            argv += ["--block-size", self.rng.choice([spell_bs(b), str(b)])]
        return argv, d, b

    def probe_target(self, img):
        return ("file", img) if img.fmt == "raw" else \
            ("qemu", img, img.fmt, None)

    def save_lines(self, r, inputs, copts=(), cwd=None):
        """Keep printed lines as a checksum file for a later -c."""
        if r.rc != 0 or not r.out.strip() or r.out.lstrip().startswith("{"):
            return
        lines = [ln for ln in r.out.splitlines()
                 if (TAGGED_RE.match(ln) or UNTAGGED_RE.match(ln))]
        if not lines:
            return
        self.nfile += 1
        path = os.path.join(self.dir, "sums%d" % self.nfile)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.checkfiles.append({"path": path, "copts": list(copts),
                                "cwd": cwd or self.dir})
        self.cur_touch.add(path)
        self.cur_cmds.append("# saved as %s" % path)

    # ======================================================== operations
    def removable(self):
        return self.live(lambda i: not any(i in j.chain()[1:]
                                           for j in self.live())
                         and not i.server)

    def op_create(self):
        if len(self.live()) >= (8 if self.args.small else 14):
            # Make room: a long run keeps making new images.
            cands = self.removable()
            if not cands:
                return False
            self.remove(self.rng.choice(cands))
        fmt = self.rng.choices(FORMATS, FORMAT_WEIGHTS)[0]
        size = self.pick_size()
        name = self.new_name(fmt)
        path = os.path.join(self.dir, name)
        raw = path if fmt == "raw" else path + ".src"
        how = self.rng.random()
        if how < 0.8 or fmt == "raw":
            if not self.tool(MKIMAGE, self.recipe(size), raw, touch=[name]):
                return True
        if fmt != "raw":
            if how < 0.8:
                argv = ["qemu-img", "convert", "-f", "raw", "-O", fmt]
                if fmt == "qcow2" and self.rng.random() < 0.3:
                    argv.append("-c")
                if fmt == "qcow2" and self.rng.random() < 0.3:
                    argv += ["-o", "cluster_size=4096"]
                ok = self.tool(*(argv + [raw, path]), touch=[name])
                os.unlink(raw)
            else:
                ok = self.tool("qemu-img", "create", "-q", "-f", fmt, path,
                               str(size), touch=[name])
            if not ok:
                return True
        img = Image(name, path, fmt)
        self.images[name] = img
        self.cur_touch.add(name)
        if how >= 0.8 and size > 0:
            self.qemu_writes(img, size)
        return True

    def qemu_writes(self, img, size):
        cmds = []
        for _ in range(self.rng.randint(1, 4)):
            if self.rng.random() < 0.25:
                off = max(0, size - self.rng.randint(1, 200000))
            else:
                off = self.rng.randrange(size)
            length = min(size - off, self.rng.choice(
                [1, 511, 512, 4096, 65536, 65537, 300000, 1 << 20]))
            if length <= 0:
                continue
            kind = self.rng.choice(["write", "write", "zero", "discard"])
            if kind == "write":
                cmds.append("write -P %d %d %d" % (self.rng.randint(1, 255),
                                                   off, length))
            elif kind == "zero":
                cmds.append("write -z %d %d" % (off, length))
            else:
                cmds.append("discard %d %d" % (off, length))
        if not cmds:
            return
        self.before_outside_write(img)
        argv = ["qemu-io", "-f", img.fmt]
        for c in cmds:
            argv += ["-c", c]
        self.tool(*(argv + [img.path]), touch=[img.name])
        self.bump(img)
        self.event(img, "write", dict(img.bitmaps))

    def op_write(self):
        cands = self.live(writable=True)
        bases = [i for i in cands if any(i in j.chain()[1:]
                                         for j in self.live())]
        if bases and self.rng.random() < 0.3:
            cands = bases
        if not cands:
            return False
        img = self.rng.choice(cands)
        size = self.vsize(img)
        if not size:
            self.skip("write: no size (empty or unreadable image)")
            return True
        if img.fmt == "raw" and self.rng.random() < 0.4:
            off = self.rng.randrange(size)
            length = min(size - off, self.rng.choice([1, 4097, 65536, 99999]))
            src = os.path.join(self.dir, "bytes")
            with open(src, "wb") as f:
                f.write(random.Random(self.rng.random()).randbytes(length))
            self.before_outside_write(img)
            self.tool("dd", "if=" + src, "of=" + img.path, "bs=%d" % length,
                      "seek=%d" % off, "oflag=seek_bytes", "conv=notrunc",
                      "status=none", touch=[img.name])
            self.bump(img)
            self.event(img, "write", dict(img.bitmaps))
        else:
            self.qemu_writes(img, size)
        return True

    def op_resize(self):
        cands = self.live(lambda i: i.fmt in ("raw", "qcow2", "qed", "vpc",
                                              "vdi", "vhdx", "parallels")
                          and not i.server, writable=True)
        if not cands:
            return False
        img = self.rng.choice(cands)
        old = self.vsize(img)
        if old is None:
            return True
        new = self.pick_size()
        if self.rng.random() < 0.3:
            new = max(0, old + self.rng.choice([-65536, -4097, -512, 1, 512,
                                                4097, 65536]))
        self.before_outside_write(img)
        if img.fmt == "raw" and self.rng.random() < 0.5:
            ok = self.tool("truncate", "-s", str(new), img.path,
                           touch=[img.name])
        else:
            argv = ["qemu-img", "resize", "-q", "-f", img.fmt]
            if new < old:
                argv.append("--shrink")
            ok = self.tool(*(argv + [img.path, str(new)]), touch=[img.name])
        self.bump(img)
        if ok and new != old:
            self.event(img, "shrink" if new < old else "grow", new)
        return True

    def op_overlay(self):
        cands = self.live(lambda i: not i.corrupt)
        if not cands or len(self.live()) >= 16:
            return False
        base = self.rng.choice(cands)
        # Beside its base (a server's image is in the server's
        # directory): nbdsum follows no backing file elsewhere without
        # --format and --allow-backing (nbdsum(1), SECURITY).
        name = os.path.join(os.path.dirname(base.name),
                            self.new_name("qcow2"))
        path = os.path.join(self.dir, name)
        argv = ["qemu-img", "create", "-q", "-f", "qcow2", "-b", base.path,
                "-F", base.fmt, path]
        if self.rng.random() < 0.3:
            argv.append(str(self.pick_size()))
        if not self.tool(*argv, touch=[name, base.name]):
            return True
        img = Image(name, path, "qcow2", base=base)
        self.images[name] = img
        return True

    def op_snapshot(self):
        cands = self.live(lambda i: i.fmt == "qcow2", writable=True)
        if not cands:
            return False
        img = self.rng.choice(cands)
        act = self.rng.choice(["create", "create", "apply", "delete"])
        if act != "create" and not img.snapshots:
            act = "create"
        self.bump(img)
        if act == "create":
            s = "s%d" % self.seq
            if self.tool("qemu-img", "snapshot", "-c", s, img.path,
                         touch=[img.name]):
                img.snapshots.append(s)
            self.seq += 1
        elif act == "apply":
            s = self.rng.choice(img.snapshots)
            ok = self.tool("qemu-img", "snapshot", "-a", s, img.path,
                           touch=[img.name])
            self.bump(img)
            if ok:
                # qemu applies a snapshot only while no bitmap records:
                # to a bitmap, the same as a write while it is disabled.
                self.event(img, "write", dict(img.bitmaps))
                self.event(img, "snap-apply", s)
        else:
            s = self.rng.choice(img.snapshots)
            if self.tool("qemu-img", "snapshot", "-d", s, img.path,
                         touch=[img.name]):
                img.snapshots.remove(s)
        return True

    def op_bitmap(self):
        cands = self.live(lambda i: i.fmt == "qcow2", writable=True)
        if not cands:
            return False
        img = self.rng.choice(cands)
        b = self.rng.choice(["b0", "b1", "b2"])
        if b not in img.bitmaps:
            en = self.rng.random() < 0.8
            ok = self.tool("qemu-img", "bitmap", "--add",
                           "--enable" if en else "--disable", img.path, b,
                           touch=[img.name])
            self.bump(img)      # the container's bytes, not the guest's
            if ok:
                img.bitmaps[b] = en
                self.event(img, "bitmap-add", b)
            return True
        act = self.rng.choice(["enable", "disable", "disable", "clear",
                               "remove"])
        ok = self.tool("qemu-img", "bitmap", "--" + act, img.path, b,
                       touch=[img.name])
        self.bump(img)
        if ok:
            if act == "remove":
                del img.bitmaps[b]
            elif act in ("enable", "disable"):
                img.bitmaps[b] = act == "enable"
            self.event(img, "bitmap-" + act, b)
        return True

    def check_manifest(self, r, t, digest, bs, what, json_out):
        """A --blocks output against the oracle's block digests."""
        try:
            want_sum = self.sum(t, digest, bs)
            want = self.blocks(t, digest, bs)
            want_size = self.size(t)
        except Unreadable as e:
            self.fail("sum-of-unreadable", "%s: a manifest of what the "
                      "oracle cannot read (%s)" % (what, e))
            return False
        zero = reference.new(digest)
        zero.update(bytes(bs))
        zero = zero.hexdigest()
        try:
            if json_out:
                doc = json.loads(r.out)
                head = (doc["digest"], doc["block-size"], doc["size"],
                        doc["checksum"])
                rows = [(b["offset"], b["length"],
                         None if b.get("zero") else b["hash"])
                        for b in doc["blocks"]]
            else:
                lines = r.out.splitlines()
                h = lines[0].split()
                head = (h[1], int(h[2]), int(h[3]), h[4])
                rows = []
                for ln in lines[1:]:
                    o, n, x = ln.split()
                    rows.append((int(o), int(n), None if x == "zero" else x))
        except (ValueError, KeyError, IndexError) as e:
            self.fail("bad-manifest", "%s: unreadable manifest (%s): %r"
                      % (what, e, r.out[:200]))
            return False
        self.checks["manifest"] += 1
        if head[3] != want_sum or head[2] != want_size:
            self.fail("wrong-manifest", "%s: manifest says size %s checksum "
                      "%s, the oracle %s %s" % (what, head[2], head[3],
                                                want_size, want_sum))
            return False
        got, pos = [], 0
        for o, n, x in rows:
            if o != pos:
                self.fail("wrong-manifest", "%s: gap at %d" % (what, pos))
                return False
            if x is None:
                got += [zero] * (n // bs)
            else:
                got.append(x)
            pos = o + n
        if got != want:
            bad = next((i for i, (a, b) in enumerate(zip(got, want))
                        if a != b), min(len(got), len(want)))
            self.fail("wrong-manifest", "%s: block %d digest differs from "
                      "the oracle (%d blocks, want %d)"
                      % (what, bad, len(got), len(want)))
            return False
        return True

    def op_manifest(self):
        cands = self.live(lambda i: i.fmt == "qcow2", writable=True)
        if not cands or not self.tools["qemu-nbd"]:
            if not self.tools["qemu-nbd"]:
                self.skip("manifest: no qemu-nbd")
            return False
        img = self.rng.choice(cands)
        digest = self.rng.choice(DIGESTS)
        bs = self.rng.choice(BLOCK_SIZES)
        json_out = self.rng.random() < 0.3
        form = self.rng.choice(["qemu-nbd", "qemu-nbd", "file", "client"])
        argv = [NBDSUM, "-q", "--blocks", "-d", digest, "--block-size",
                spell_bs(bs)] + (["--json"] if json_out else [])
        if form == "qemu-nbd":
            argv += ["[", "qemu-nbd", "-r", "-f", "qcow2", img.path, "]"]
        else:
            argv += (["--client-side"] if form == "client" else []) + \
                [img.path]
        opdir = self.opdir()
        r = self.run(argv, tmpdir=opdir, touch=[img.name])
        self.after_nbdsum(r, "manifest", opdir)
        if r.rc != 0:
            self.refuse("manifest", r)
            return True
        t = ("qemu", img, "qcow2", None)
        if not self.check_manifest(r, t, digest, bs, "manifest", json_out):
            return True
        self.nfile += 1
        path = os.path.join(self.dir, "m%d.%s" % (
            self.nfile, "json" if json_out else "txt"))
        with open(path, "w") as f:
            f.write(r.out)
        self.cur_cmds.append("# saved as %s" % path)
        self.start_bitmap(img, path, digest, bs)
        return True

    def start_bitmap(self, img, path, digest, bs):
        """Start (or clear) a bitmap right after a manifest, as the
        documented workflow does; the pair starts a --since chain."""
        b = self.rng.choice(["b0", "b1", "b2"])
        if b in img.bitmaps:
            argv = ["qemu-img", "bitmap", "--clear", "--enable", img.path, b]
        else:
            argv = ["qemu-img", "bitmap", "--add", "--enable", img.path, b]
        ok = self.tool(*argv, touch=[img.name, path])
        self.bump(img)
        if not ok:
            return
        img.bitmaps[b] = True
        self.event(img, "bitmap-start", b)
        m = Manifest(path, img, b, digest, bs, self.seq)
        self.manifests.append(m)
        self.cur_touch.add(path)

    def since_tags(self, m, img, bitmap, immutable):
        """What happened since the manifest, as failure tags; and
        whether the documented precondition was broken in a way nbdsum
        cannot know."""
        tags, precond = [], []
        if m.img is not img:
            tags.append("foreign-manifest")
        shrunk = False
        for seq, kind, arg in img.events:
            if seq <= m.seq:
                continue
            if kind == "write" and arg.get(bitmap) is False:
                tags.append("write-while-disabled")
            elif kind == "write" and bitmap not in arg:
                precond.append("write-without-bitmap")
            elif kind == "shrink":
                shrunk = True
                tags.append("shrink")
            elif kind == "grow":
                tags.append("shrink-regrow" if shrunk else "grow")
            elif kind == "base-write":
                (precond if immutable else tags).append("backing-write")
            elif kind == "snap-apply":
                precond.append("snapshot-apply")
            elif kind in ("bitmap-clear", "bitmap-remove", "bitmap-start",
                          "bitmap-add") and arg == bitmap:
                precond.append(kind + "-after-manifest")
        if img.bitmaps.get(bitmap) is False:
            tags.append("bitmap-disabled-now")
        elif "write-while-disabled" in tags:
            tags.remove("write-while-disabled")
            precond.append("write-while-disabled-then-reenabled")
        return sorted(set(tags)), sorted(set(precond))

    def op_since(self):
        if not self.tools["qemu-nbd"]:
            self.skip("since: no qemu-nbd")
            return False
        ms = [m for m in self.manifests if not m.img.deleted]
        if not ms:
            return False
        m = self.rng.choice(ms)
        img = m.img
        if self.rng.random() < 0.15:
            others = self.live(lambda i: i.fmt == "qcow2" and i.bitmaps
                               and i is not m.img)
            if others:
                img = self.rng.choice(others)
        if img.corrupt or (img.server and img.server.cache):
            return False
        bitmap = m.bitmap if m.bitmap in img.bitmaps or not img.bitmaps \
            else self.rng.choice(sorted(img.bitmaps))
        digest, bs = m.digest, m.bs
        if self.rng.random() < 0.1:
            digest = self.rng.choice(DIGESTS)
        if self.rng.random() < 0.1:
            bs = self.rng.choice(BLOCK_SIZES)
        blocks = self.rng.random() < 0.4
        json_out = not blocks and self.rng.random() < 0.2
        form = self.rng.choices(["B", "BA", "snap", "file", "immutable"],
                                [5, 2, 1, 1, 1])[0]
        snap = None
        if form == "snap" and not img.snapshots:
            form = "B"
        immutable = form == "immutable" and img.base is not None
        argv = [NBDSUM, "-q", "--since=" + m.path, "--dirty-bitmap=" + bitmap,
                "-d", digest, "--block-size", spell_bs(bs)]
        argv += (["--blocks"] if blocks else []) + \
            (["--json"] if json_out else []) + \
            (["--immutable-backing"] if immutable else [])
        if form == "file":
            argv.append(img.path)
        else:
            q = ["[", "qemu-nbd", "-r", "-f", "qcow2", "-B", bitmap]
            if form == "BA":
                q.append("-A")
            if form == "snap":
                snap = self.rng.choice(img.snapshots)
                q += ["-l", snap]
            argv += q + [img.path, "]"]
        tags, precond = self.since_tags(m, img, bitmap, immutable)
        if form != "file" and "write-while-disabled" in tags:
            # A server cannot say that a bitmap is disabled: nbdsum(1)
            # makes "enabled throughout" part of the precondition for
            # servers, and the sample catches it only with the stated
            # probability.  A local file's is checked: still a tag.
            tags.remove("write-while-disabled")
            precond.append("write-while-disabled-on-a-server")
        if snap:
            tags.append("qemu-nbd-l-snapshot")
        if (digest, bs) != (m.digest, m.bs):
            tags.append("other-digest-or-block-size")
        opdir = self.opdir()
        r = self.run(argv, tmpdir=opdir, touch=[img.name, m.path])
        self.after_nbdsum(r, "since", opdir)
        self.checks["since-run"] += 1
        if r.rc != 0:
            self.refuse("since" + (":" + ",".join(tags) if tags else ""), r)
            return True
        t = ("qemu", img, "qcow2", snap)
        what = "since[%s]" % ",".join(tags + ["precondition:" + p
                                              for p in precond])
        nfail = len(self.failures)
        if blocks:
            ok = self.check_manifest(r, t, digest, bs, what, False)
        else:
            self.check_lines(r, [(self.input_name(argv, form, img), t,
                                  (digest, bs))], digest, bs, what,
                             json_out=json_out)
            ok = False
        for f in self.failures[nfail:]:
            f["tags"] = tags
            if precond and not self.args.strict_since:
                # The user broke "the one precondition" of nbdsum(1),
                # INCREMENTAL CHECKSUMS, which nbdsum cannot check:
                # counted apart, not as nbdsum's failure.
                self.failures.remove(f)
                self.limits[",".join(precond)] += 1
        if ok and not tags and not precond and img is m.img and not snap:
            ok = self.tool("qemu-img", "bitmap", "--clear", img.path, bitmap,
                           touch=[img.name])
            self.bump(img)
            if ok:
                self.event(img, "bitmap-start", bitmap)
                self.nfile += 1
                path = os.path.join(self.dir, "m%d.txt" % self.nfile)
                with open(path, "w") as f:
                    f.write(r.out)
                self.manifests.append(Manifest(path, img, bitmap, digest,
                                               bs, self.seq))
        return True

    def input_name(self, argv, form, img):
        if form == "file":
            return img.path
        i = argv.index("[")
        return " ".join(argv[i:])

    def pick_input(self, forms=None):
        """One input of nbdsum: (argv words, name, target, default
        digest and block size, global options needed)."""
        cands = self.live()
        if not cands:
            return None
        img = self.rng.choice(cands)
        form = self.rng.choice(forms or ["file", "file", "file", "relative",
                                         "qemu-nbd", "nbdkit", "uri"])
        if form == "uri":
            srv = [s for s in self.servers if s.exports]
            if not srv:
                form = "file"
            else:
                s = self.rng.choice(srv)
                e = self.rng.choice(sorted(s.exports))
                if self.rng.random() < 0.05:
                    # A view's URI: refused (nbdsum(1), INPUTS).
                    e += self.rng.choice(["@blkhash", "@blkhash:sha1/64K"])
                    u = s.uri(e)
                    t = ("refused", s.exports[e.split("@")[0]][1])
                    return [u], u, t, (s.digest, s.bs), [], s.name
                u = s.uri(e)
                return [u], u, s.exports[e], (s.digest, s.bs), [], s.name
        if form in ("file", "relative"):
            p = img.path if form == "file" else os.path.relpath(img.path,
                                                                self.dir)
            return [p], p, self.probe_target(img), ("sha256", 65536), [], \
                img.name
        if form == "qemu-nbd":
            fmt = img.fmt if self.rng.random() < 0.9 else \
                self.rng.choice(FORMATS)
            w = ["[", "qemu-nbd", "-r", "-f", fmt, img.path, "]"]
            t = ("qemu", img, fmt, None)
            return w, " ".join(w), t, ("sha256", 65536), [], img.name
        w = ["[", "nbdkit", "--filter=" + FILTER, "file", img.path, "]"]
        return w, " ".join(w), ("file", img), ("sha256", 65536), [], img.name

    def op_sum(self, n=None, forms=None, extra_opts=(), what="sum"):
        k = n or self.rng.choice([1, 1, 1, 2, 3, 4])
        picks = [self.pick_input(forms) for _ in range(k)]
        if not picks or picks[0] is None:
            return False
        argv = [NBDSUM]
        quiet = self.rng.random() < 0.5
        if quiet:
            argv.append("-q")
        dopts, digest, bs = self.digest_opts()
        argv += dopts
        if k > 1 and self.rng.random() < 0.6:
            argv += ["-j", str(self.rng.randint(2, 4))]
        json_out = self.rng.random() < 0.25
        if json_out:
            argv.append("--json")
        elif self.rng.random() < 0.1:
            argv.append("--tag")
        if self.rng.random() < 0.15:
            argv.append("--client-side")
        if self.rng.random() < 0.15:
            argv += ["-C", str(self.rng.randint(1, 8)),
                     "-R", str(self.rng.randint(1, 32))]
        fmt_opt = None
        if self.rng.random() < 0.15:
            fmt_opt = self.rng.choice(FORMATS)
        argv += list(extra_opts)
        inputs, touch = [], []
        # --format applies to the local files after it (a URI or a
        # command after it is a usage error): placed before input i.
        fmt_from = self.rng.randint(0, len(picks) - 1) if fmt_opt else None
        for i, (words, name, t, dflt, _, tname) in enumerate(picks):
            if "--client-side" in argv:
                dflt = ("sha256", 65536)    # not the server's default
            if fmt_opt and i == fmt_from:
                argv.append("--format=" + fmt_opt)
            if fmt_opt and i >= fmt_from and t[0] != "window" and \
                    words == [name] and not name.startswith("nbd"):
                t = ("file", t[1]) if fmt_opt == "raw" else \
                    ("qemu", t[1], fmt_opt, None)
            argv += words
            inputs.append((name, t, dflt))
            touch.append(tname)
            if t[0] != "window":
                touch.append(t[1].name)
        opdir = self.opdir()
        r = self.run(argv, tmpdir=opdir, touch=touch)
        self.after_nbdsum(r, what, opdir, quiet=quiet)
        self.check_lines(r, inputs, digest, bs, what, json_out=json_out)
        if r.rc != 0:
            self.refuse(what, r)
        # A --format followed by a URI or a command is a usage error:
        # nothing connects.
        usage = fmt_opt is not None and any(
            t[0] == "window" or words != [name] or name.startswith("nbd")
            for words, name, t, _, _, _ in picks[fmt_from:])
        if usage and r.rc == 0:
            self.fail("usage-accepted", "%s: --format=%s before a URI or a "
                      "command was accepted" % (what, fmt_opt))
        if not usage and not any(t[0] == "refused" for _, t, _ in inputs):
            # (A view among the inputs refuses the whole command line
            # before anything connects.)
            self.session_ended(inputs)
        if self.rng.random() < 0.5 and "--untagged" not in argv:
            self.save_lines(r, inputs)
        return True

    def op_stdin(self):
        cands = self.live()
        if not cands:
            return False
        img = self.rng.choice(cands)
        dopts, digest, bs = self.digest_opts()
        how = self.rng.choice(["redirect", "dash", "pipe"])
        opdir = self.opdir()
        if how == "pipe":
            cmd = "cat %s | %s -q %s" % (shlex.quote(img.path),
                                         shlex.quote(NBDSUM),
                                         shlex.join(dopts))
            r = self.run(cmd, shell=True, tmpdir=opdir, touch=[img.name])
        else:
            argv = [NBDSUM, "-q"] + dopts + (["-"] if how == "dash" else [])
            r = self.run(argv, stdin_path=img.path, tmpdir=opdir,
                         touch=[img.name])
        self.after_nbdsum(r, "stdin", opdir, quiet=True)
        # Standard input is a raw image: its bytes, whatever the format.
        self.check_lines(r, [("-", ("file", img), ("sha256", 65536))],
                         digest, bs, "stdin")
        if r.rc != 0:
            self.refuse("stdin", r)
        return True

    # ---------------------------------------------------------------- -c
    def check_expect(self, name, hexsum, d, bs, cwd, fmt=None):
        """What -c should say of one line: 'OK', 'FAILED' or
        'unreadable' (either FAILED form).  fmt: the format its tag
        gives a local file, read as that format (raw: its bytes)."""
        if name.startswith("nbd+unix://"):
            for s in self.servers:
                for e, t in s.exports.items():
                    if s.uri(e) == name:
                        try:
                            return "OK" if self.sum(t, d, bs) == hexsum \
                                else "FAILED", t
                        except Unreadable:
                            return "unreadable", t
            return "unreadable", None
        path = os.path.normpath(os.path.join(cwd, name))
        for img in self.images.values():
            if img.path == path and not img.deleted:
                t = self.probe_target(img) if fmt is None else \
                    ("file", img) if fmt.lower() == "raw" else \
                    ("qemu", img, fmt.lower(), None)
                try:
                    return ("OK" if self.sum(t, d, bs) == hexsum
                            else "FAILED"), t
                except Unreadable:
                    return "unreadable", t
        return "unreadable", None

    def op_check(self):
        if not self.checkfiles:
            return False
        k = self.rng.choice([1, 1, 2])
        files = [self.rng.choice(self.checkfiles) for _ in range(k)]
        cwd = files[0]["cwd"]
        files = [f for f in files if f["cwd"] == cwd]
        argv = [NBDSUM, "-c"]
        mode = self.rng.choice(["plain", "plain", "quiet", "status", "json"])
        argv += {"plain": [], "quiet": ["-q"], "status": ["--status"],
                 "json": ["--json"]}[mode]
        if self.rng.random() < 0.4:
            argv += ["-j", str(self.rng.randint(2, 5))]
        expected = []
        if self.rng.random() < 0.15:
            # A line naming what cannot be read as an image: a
            # directory, an image since removed.  (Not a FIFO: -c
            # waits for its writer, as sha256sum -c does; op_signal
            # checks that a signal ends that wait.)
            self.nfile += 1
            bad = os.path.join(self.dir, "bad%d.sums" % self.nfile)
            what = self.rng.choice(["dir", "gone"])
            name = os.path.join(self.dir, "bad%d.%s" % (self.nfile, what))
            if what == "dir":
                os.mkdir(name)
            with open(bad, "w") as fh:
                fh.write("%s  %s\n" % ("0" * 64, os.path.relpath(name, cwd)))
            self.cur_cmds.append("# %s names %s (%s)" % (bad, name, what))
            files.insert(self.rng.randint(0, len(files)),
                         {"path": bad, "cwd": cwd})
        for f in files:
            with open(f["path"]) as fh:
                for n, line in enumerate(fh.read().splitlines(), 1):
                    m = TAGGED_RE.match(line)
                    fmt = None
                    if m:
                        name, hexsum = m.group("name"), m.group("hex").lower()
                        d, bs = m.group(1).lower(), parse_bs(m.group(2))
                        fmt = m.group("fmt")
                    else:
                        m = UNTAGGED_RE.match(line)
                        if not m:
                            continue
                        name, hexsum, d, bs = m.group(2), m.group(1).lower(), \
                            "sha256", 65536
                    exp, t = self.check_expect(name, hexsum, d, bs, cwd, fmt)
                    expected.append((f["path"], n, name, exp, t))
            argv.append(f["path"])
        opdir = self.opdir()
        touch = [f["path"] for f in files] + \
            [e[4][1].name for e in expected if e[4]]
        r = self.run(argv, cwd=cwd, tmpdir=opdir, touch=touch)
        self.after_nbdsum(r, "check", opdir,
                          quiet=mode in ("quiet", "status"))
        if r.hung:
            return True
        verdicts = []
        if mode == "json":
            try:
                doc = json.loads(r.out)
                for fo in doc["files"]:
                    for res in fo.get("results", []):
                        verdicts.append((res["name"], res["result"]))
            except (ValueError, KeyError):
                self.fail("bad-json", "check: %r" % r.out[:200])
                return True
        else:
            for line in r.out.splitlines():
                m = VERDICT_RE.match(line)
                if m:
                    verdicts.append((m.group(1), m.group(2)))
                elif line.strip():
                    self.fail("garbled-output", "check: %r" % line)
        all_ok = all(e[3] == "OK" for e in expected)
        if mode in ("plain", "json"):
            if len(verdicts) != len(expected):
                self.fail("garbled-output", "check: %d verdicts for %d lines"
                          % (len(verdicts), len(expected)))
            for (path, n, name, exp, t), (vname, v) in zip(expected,
                                                           verdicts):
                self.checks["check-verdict"] += 1
                desc = "check %s line %d (%s): says %s, oracle %s" % (
                    os.path.basename(path), n, name, v, exp)
                if vname != name:
                    self.fail("garbled-output", "check: verdict for %r in "
                              "place of %r" % (vname, name))
                elif v == "OK" and exp != "OK":
                    self.fail("check-false-ok", desc,
                              target=self.tdesc(t) if t else None)
                elif v != "OK" and exp == "OK":
                    self.fail("check-false-alarm", desc)
        elif mode == "quiet":
            for vname, v in verdicts:
                self.checks["check-verdict"] += 1
                if v == "OK":
                    self.fail("noise", "check -q printed an OK line")
                ok_names = {e[2] for e in expected if e[3] == "OK"}
                bad_names = {e[2] for e in expected if e[3] != "OK"}
                if v != "OK" and vname in ok_names and vname not in bad_names:
                    self.fail("check-false-alarm", "check -q: %s FAILED, the "
                              "oracle says it matches" % vname)
            failed = {v[0] for v in verdicts}
            for path, n, name, exp, t in expected:
                if exp != "OK" and name not in failed:
                    self.fail("check-false-ok", "check -q: %s not reported "
                              "as failed, the oracle says %s" % (name, exp))
        if r.rc == 0 and not all_ok:
            self.fail("check-exit0", "check: exit 0 but the oracle expects "
                      "%s" % ", ".join("%s:%s" % (e[2], e[3])
                                       for e in expected if e[3] != "OK"))
        elif r.rc != 0 and all_ok and expected and not r.hung:
            self.fail("check-false-alarm", "check: exit %s but every line "
                      "matches the oracle: %s" % (r.rc, r.err.strip()[:300]))
        if r.rc != 0:
            self.refuse("check", r)
        self.session_ended([(e[2], e[4], None) for e in expected if e[4]])
        return True

    def op_check_manifest(self):
        """--check-manifest of manifests kept earlier (each checked
        against the oracle when made), some with one digit changed."""
        if not self.manifests:
            return False
        argv, want = [NBDSUM, "--check-manifest"], []
        for m in self.rng.sample(self.manifests,
                                 min(len(self.manifests),
                                     self.rng.randint(1, 3))):
            path = m.path
            if self.rng.random() < 0.4:
                with open(m.path) as f:
                    text = f.read()
                hexes = [h for h in re.finditer(r"[0-9a-f]{32,}", text)]
                h = self.rng.choice(hexes)
                i = self.rng.randrange(h.start(), h.end())
                text = text[:i] + ("0" if text[i] != "0" else "1") + \
                    text[i + 1:]
                self.nfile += 1
                path = "%s.edit%d" % (m.path, self.nfile)
                with open(path, "w") as f:
                    f.write(text)
                self.cur_cmds.append("# %s: %s with the digit at %d changed"
                                     % (path, m.path, i))
                want.append((path, "FAILED"))
            else:
                want.append((path, "OK"))
            argv.append(path)
        opdir = self.opdir()
        r = self.run(argv, tmpdir=opdir, touch=[w[0] for w in want])
        self.after_nbdsum(r, "check-manifest", opdir)
        got = [ln.rsplit(": ", 1) for ln in r.out.splitlines()]
        if [g[0] for g in got] != [w[0] for w in want]:
            self.fail("garbled-output", "check-manifest: %r" % r.out[:300])
            return True
        for (path, w), (_, v) in zip(want, got):
            self.checks["manifest-verdict"] += 1
            if v == "OK" and w != "OK":
                self.fail("manifest-false-ok", "--check-manifest says OK of "
                          "%s, a manifest with one digit changed" % path)
            elif v != "OK" and w == "OK":
                self.fail("manifest-false-alarm", "--check-manifest says %s "
                          "of %s, checked against the oracle when made"
                          % (v, path))
        if (r.rc == 0) != all(w == "OK" for _, w in want):
            self.fail("check-exit0" if r.rc == 0 else "manifest-false-alarm",
                      "--check-manifest exit %s for %s" % (r.rc, want))
        if r.rc != 0:
            self.refuse("check-manifest", r)
        return True

    # ----------------------------------------------------------- servers
    def op_server_start(self):
        if len(self.servers) >= 2 or not self.tools["nbdkit"]:
            return False
        kinds = [s.kind for s in self.servers]
        kind = self.rng.choice(["dir", "window"])
        if kind in kinds:
            kind = "window" if kind == "dir" else "dir"
        if kind == "window" and not self.tools["sh-plugin"]:
            self.skip("server-start: no nbdkit sh plugin")
            return True
        self.nsrv += 1
        name = "srv%d" % self.nsrv
        sdir = os.path.join(self.dir, name)
        os.makedirs(sdir)
        s = Server(name, kind, os.path.join(sdir, "sock"), sdir)
        s.cache = self.rng.random() < 0.3
        if self.rng.random() < 0.75:
            s.bfile = os.path.join(self.dir, name + ".sums")
        if self.rng.random() < 0.3:
            s.digest = self.rng.choice(DIGESTS)
            s.bs = self.rng.choice(BLOCK_SIZES)
        s.threads1 = self.rng.random() < 0.3
        # The images it serves: new raw files in its directory.
        imgs = []
        n = 1 if kind == "window" else self.rng.randint(1, 3)
        for _ in range(n):
            size = max(self.pick_size(), 70000 if kind == "window" else 0)
            iname = name + "/" + self.new_name("raw")
            path = os.path.join(self.dir, iname)
            if not self.tool(MKIMAGE, self.recipe(size), path,
                             touch=[name, iname]):
                return True
            img = Image(iname, path, "raw")
            self.images[iname] = img
            imgs.append(img)
        if kind == "dir" and self.rng.random() < 0.3:
            # A hard link: the same file under another export name.
            src = imgs[0]
            aname = name + "/" + self.new_name("raw")
            os.link(src.path, os.path.join(self.dir, aname))
            self.cur_cmds.append("ln %s %s" % (src.path,
                                               os.path.join(self.dir, aname)))
            alias = Image(aname, os.path.join(self.dir, aname), "raw",
                          cell=src.cell)
            self.images[aname] = alias
            imgs.append(alias)
        argv = ["nbdkit", "-f", "--exit-with-parent", "-U", s.sock]
        if s.threads1:
            argv += ["--threads=1"]
        if self.rng.random() < 0.25:
            f = self.rng.choice(sorted(ALLOWED_FRONT))
            argv += ["--filter=" + f]
            pre_params = ALLOWED_FRONT[f]
        else:
            pre_params = []
        argv.append(self.rng.choice(["--filter=" + FILTER, "--fi=" + FILTER]))
        params = []
        if s.cache:
            params.append("blkhash-cache=true")
        if s.bfile:
            params.append("blkhash-file=" + s.bfile)
        if (s.digest, s.bs) != ("sha256", 65536):
            params += ["blkhash-digest=" + s.digest,
                       "blkhash-block-size=" + spell_bs(s.bs)]
        if kind == "dir":
            argv += ["file", "dir=" + sdir] + params + pre_params
            for img in imgs:
                s.exports[os.path.basename(img.path)] = ("file", img)
        else:
            img = imgs[0]
            size = os.path.getsize(img.path)
            off = self.rng.choice([512, 65536, 65999, size // 3])
            length = self.rng.choice([65536, 100000, max(1, size // 2)])
            script = os.path.join(sdir, "window.sh")
            with open(script, "w") as f:
                f.write(WINDOW_SCRIPT % {"file": img.path, "off": off,
                                         "len": length})
            os.chmod(script, 0o755)
            self.cur_cmds.append("# %s: %s" % (script, WINDOW_SCRIPT % {
                "file": img.path, "off": off, "len": length}))
            argv += ["sh", script] + params + pre_params
            s.exports["whole"] = ("file", img)
            s.exports["win"] = ("window", img, off, length)
        s.errlog = open(os.path.join(self.dir, name + ".log"), "w+")
        self.cur_cmds.append(shlex.join(argv) + " &")
        self.cur_touch.add(name)
        env = dict(self.env)
        env["TMPDIR"] = self.tmp
        s.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                  stdout=s.errlog, stderr=s.errlog,
                                  cwd=self.dir, env=env,
                                  start_new_session=True)
        deadline = time.monotonic() + 10
        while not os.path.exists(s.sock) and s.proc.poll() is None and \
                time.monotonic() < deadline:
            time.sleep(0.02)
        if not os.path.exists(s.sock):
            s.errlog.seek(0)
            self.fail("server", "nbdkit did not start: %s" % s.errlog.read())
            self.kill_server(s)
            return True
        for img in imgs:
            img.server = s
        for e in s.exports:
            s.accept[e] = set()
        self.servers.append(s)
        return True

    def kill_server(self, s):
        if s.proc and s.proc.poll() is None:
            s.proc.terminate()
            # A hang guard above the filter's bound: a completion for
            # blkhash-file or blkhash-expect goes on for 10 s after
            # nbdkit is told to exit (root.c, EXIT_GRACE_NS).
            try:
                s.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.fail("hang", "%s did not stop in 60s on SIGTERM" % s.name)
                s.proc.kill()
                s.proc.wait()

    def server_alive(self, s):
        if s.proc.poll() is not None:
            s.errlog.seek(0)
            self.fail("crash", "%s died (status %s): %s" % (
                s.name, s.proc.returncode, s.errlog.read()[-2000:]),
                touch=[s.name])
            self.drop_server(s)
            return False
        return True

    def drop_server(self, s):
        if s in self.servers:
            self.servers.remove(s)
        for img in self.images.values():
            if img.server is s:
                img.server = None

    def session_ended(self, inputs):
        """After a client of a long-running server went: its exports'
        blkhash-file lines must be current (or absent)."""
        for s in self.servers:
            touched = False
            for name, t, _ in inputs:
                if t is not None and name.startswith("nbd+unix:///") and \
                        ("?socket=" + s.sock) in name:
                    e = name[12:].split("?")[0].split("@")[0]
                    if e in s.accept:
                        # Only this export's session ended: another
                        # export's line may still be that of the end of
                        # its own last session, before outside writes.
                        s.accept[e] = set()
                    touched = True
            if touched:
                self.check_bfile(s, "after a client of %s" % s.name)

    def check_bfile(self, s, what, must=(), written=None):
        if not s.bfile:
            return
        lines = []
        if os.path.exists(s.bfile):
            with open(s.bfile) as f:
                lines = f.read().splitlines()
        seen = set()
        for line in lines:
            m = TAGGED_RE.match(line)
            if m:
                name, hexsum = m.group("name"), m.group("hex").lower()
                d, bs = m.group(1).lower(), parse_bs(m.group(2))
            else:
                m = UNTAGGED_RE.match(line)
                if not m:
                    self.fail("bfile-garbled", "%s: %s: %r" % (what, s.bfile,
                                                              line))
                    continue
                name, hexsum, d, bs = m.group(2), m.group(1).lower(), \
                    "sha256", 65536
            seen.add(name)
            if name not in s.exports:
                self.fail("bfile-garbled", "%s: a line for %r, no such export"
                          % (what, name))
                continue
            if (d, bs) != (s.digest, s.bs):
                self.fail("wrong-tag", "%s: blkhash-file line %s/%s, server "
                          "has %s/%s" % (what, d, bs, s.digest, s.bs))
                continue
            t = s.exports[name]
            try:
                want = self.sum(t, d, bs)
            except Unreadable:
                continue
            self.checks["blkhash-file-line"] += 1
            if hexsum != want and hexsum not in s.accept[name]:
                tags = ["server:" + s.kind + (":cache" if s.cache else "")]
                if written:
                    tags.append("written-through:" + (
                        "this-export" if written == name else
                        "other-export-%s-size" % (
                            "same" if self.size(s.exports[written]) ==
                            self.size(t) else "different")))
                self.fail("bfile-stale", "%s: blkhash-file line of %s is %s, "
                          "the export serves %s" % (what, name, hexsum, want),
                          touch=[s.name], tags=tags)
        for e in must:
            self.checks["blkhash-file-present"] += 1
            if e not in seen:
                self.fail("bfile-missing", "%s: no blkhash-file line for %s "
                          "right after its writer returned" % (what, e),
                          touch=[s.name], tags=["server:" + s.kind + (
                              ":cache" if s.cache else ""),
                              "writer:" + what.split()[2]])

    def op_server_write(self, s=None, e=None):
        srv = [s for s in self.servers if s.exports]
        if not srv:
            return False
        s = s or self.rng.choice(srv)
        if not self.server_alive(s):
            return True
        e = e or self.rng.choice(sorted(s.exports))
        t = s.exports[e]
        img = t[1]
        if img.deleted:
            return False
        size = self.size(t) if t[0] == "window" else \
            os.path.getsize(img.path)
        tools = []
        if self.tools["libnbd-python"]:
            tools += ["py", "py"]
        if self.tools["nbdsh"]:
            tools.append("nbdsh")
        if self.tools["nbdcopy"]:
            tools.append("nbdcopy")
        if self.tools["qemu-img"]:
            tools.append("qemu-img")
        if not tools or size == 0:
            self.skip("server-write: no writer tool or empty export")
            return True
        tool = self.rng.choice(tools)
        uri = s.uri(e)
        if tool in ("py", "nbdsh"):
            ops = []
            for _ in range(self.rng.randint(1, 4)):
                off = self.rng.randrange(size)
                length = min(size - off, self.rng.choice(
                    [1, 4096, 65536, 65537, 200000, 1 << 20]))
                kind = self.rng.choice(["w", "w", "w", "z", "t"])
                ops.append([kind, off, length, self.rng.randint(1, 255)])
            if tool == "py":
                argv = [NBD_PYTHON, self.writer, uri, json.dumps(ops),
                        self.rng.choice(["flush", "noflush"])]
            else:
                code = "; ".join(
                    "h.pwrite(bytes([%d])*%d, %d)" % (p, n, o) if k == "w"
                    else "h.zero(%d, %d)" % (n, o) for k, o, n, p in ops)
                argv = ["nbdsh", "-u", uri, "-c", code + "; h.flush()"]
        else:
            srcs = self.live(lambda i: i.fmt in ("raw", "qcow2") and
                             not i.corrupt and 0 < (self.vsize(i) or 0) <=
                             size and i.cell is not img.cell)
            if not srcs:
                self.skip("server-write: no source small enough")
                return True
            src = self.rng.choice(srcs)
            self.cur_touch.add(src.name)
            if tool == "nbdcopy":
                if src.fmt != "raw":
                    return True
                argv = ["nbdcopy", "--flush", src.path, uri]
            else:
                argv = ["qemu-img", "convert", "-n", "-f", src.fmt, src.path,
                        "-O", "raw", uri]
        r = self.run(argv, touch=[s.name, img.name])
        self.bump(img)
        self.event(img, "write", {})
        for ex, tx in s.exports.items():
            if tx[1].cell is img.cell:
                # Written through nbdkit: every export of these bytes
                # must have its line current or gone.
                s.accept[ex] = set()
                s.written.add(ex)
        if r.hung:
            self.fail("hang", "server-write: %s" % r.cmd)
            return True
        if CRASH_RE.search(r.err):
            self.fail("crash", "server-write: %s" % r.err[-500:])
        if r.rc != 0:
            self.refuse("server-write:" + tool, r)
            self.check_bfile(s, "after a failed write")
            return True
        self.checks["server-write"] += 1
        # The line must be there when the writer returns where
        # nbdkit-blkhash-filter(1) says so: a copy of the whole export
        # (its closing flush completes it), or a libnbd client that
        # waits for the server to close (the py writer's shutdown).
        # Otherwise (nbdsh -c closes without waiting, a copy of a
        # smaller source) it may come only at the disconnect: current
        # or absent.
        whole = tool in ("nbdcopy", "qemu-img") and \
            self.vsize(src) == size
        self.check_bfile(s, "right after %s returned" % tool,
                         must=[e] if s.bfile and (whole or tool == "py")
                         else [], written=e)
        self.server_alive(s)
        return True

    def op_server_sum(self):
        srv = [s for s in self.servers if s.exports]
        if not srv:
            return False
        s = self.rng.choice(srv)
        if not self.server_alive(s):
            return True
        n = self.rng.randint(1, 3)
        return self.op_sum(n=n, forms=["uri", "uri", "uri", "file"],
                           what="server-sum")

    def op_server_stop(self):
        if not self.servers:
            return False
        s = self.rng.choice(self.servers)
        self.stop_server(s)
        return True

    def stop_server(self, s):
        self.cur_cmds.append("kill %s  # nbdkit of %s" % ("$PID", s.name))
        self.cur_touch.add(s.name)
        if not self.server_alive(s):
            return
        self.kill_server(s)
        s.errlog.seek(0)
        log = s.errlog.read()
        if CRASH_RE.search(log):
            self.fail("crash", "%s: %s" % (s.name, log[-2000:]))
        if s.proc.returncode not in (0, -signal.SIGTERM):
            self.fail("crash", "%s exited %s on SIGTERM: %s" % (
                s.name, s.proc.returncode, log[-500:]))
        for ln in log.splitlines():
            if "error" in ln.lower():
                self.notes["server stderr: " + re.sub(r"\d+", "N", ln)[:120]] \
                    += 1
        self.check_bfile(s, "after %s stopped" % s.name)
        if s.bfile and os.path.exists(s.bfile) and \
                self.rng.random() < 0.7 and s.kind == "dir":
            self.nfile += 1
            path = os.path.join(self.dir, "sums%d" % self.nfile)
            shutil.copy(s.bfile, path)
            self.checkfiles.append({"path": path, "copts": [],
                                    "cwd": s.dir})
            self.cur_cmds.append("cp %s %s" % (s.bfile, path))
        self.drop_server(s)

    # ------------------------------------------------ range and bmap views
    def content_bytes(self, t):
        """The target's bytes now (the last asked, kept by generation)."""
        key = self.tkey(t)
        if self.bytes_cache[0] != key:
            path, tmp = self.content(t)
            with open(path, "rb") as f:
                data = f.read()
            if tmp:
                os.unlink(path)
            self.bytes_cache = (key, data)
        return self.bytes_cache[1]

    def view_input(self):
        """An input the filter's views serve: a local file, nbdkit with
        the filter, or a served export, one with blkhash-cache=true
        written through first at times (its tables must follow).
        (words, name, target, default digest and block size, server,
        coverage tag), or None."""
        form = self.rng.choice(["file", "file", "nbdkit", "uri", "uri"])
        srv = [s for s in self.servers if s.exports]
        if form == "uri" and srv:
            s = self.rng.choice(srv)
            e = self.rng.choice(sorted(s.exports))
            if s.cache and self.rng.random() < 0.5 and \
                    not s.exports[e][1].deleted:
                self.op_server_write(s, e)
            if s in self.servers and not s.exports[e][1].deleted:
                u = s.uri(e)
                t = s.exports[e]
                tag = "uri:" + s.kind + (":cache" if s.cache else "") + \
                    (":written-through" if e in s.written else "")
                return [u], u, t, (s.digest, s.bs), s, tag
        cands = self.live()
        if not cands:
            return None
        img = self.rng.choice(cands)
        if form == "nbdkit":
            w = ["[", "nbdkit", "--filter=" + FILTER, "file", img.path, "]"]
            return w, " ".join(w), ("file", img), ("sha256", 65536), None, \
                "nbdkit"
        return [img.path], img.path, self.probe_target(img), \
            ("sha256", 65536), None, "file:" + img.fmt

    def pick_range(self, data, bs):
        """A range of data: aligned to bs or not, to the end or not, in
        a hole, over data, or past the end (refused).  (off, len, kind)"""
        r, size = self.rng, len(data)
        kind = r.choice(["aligned", "unaligned", "to-end", "hole", "data",
                         "byte", "whole", "past-end"])
        if size == 0:
            kind = "past-end"
        nb = (size + 4095) // 4096

        def zero(i):
            return not data[i * 4096:(i + 1) * 4096].strip(b"\0")
        if kind in ("hole", "data"):
            blocks = [i for i in range(nb) if zero(i) == (kind == "hole")]
            if not blocks:
                kind = "unaligned"
            elif kind == "hole":
                i = j = r.choice(blocks)
                while j + 1 < nb and zero(j + 1):
                    j += 1
                end = min(size, (j + 1) * 4096)
                off = min(end - 1, i * 4096 + r.choice([0, 0, 1, 511, 4095]))
                return off, r.randint(1, end - off), kind
            else:
                off = max(0, r.choice(blocks) * 4096 -
                          r.choice([0, 0, 1, 100, 4096, bs]))
                return off, min(size - off, r.choice(
                    [1, 4096, bs, 3 * bs + 7, r.randint(1, 300000)])), kind
        if kind == "past-end":
            off = r.randint(0, size)
            return off, size - off + r.choice([1, 2, 4096, 65536]), kind
        if kind == "whole":
            return 0, size, kind
        if kind == "aligned":
            off = bs * r.randrange((size - 1) // bs + 1)
        else:
            off = r.randrange(size)
            if kind == "unaligned" and off % bs == 0 and off + 1 < size:
                off += 1
        if kind == "byte":
            return off, 1, kind
        if kind == "to-end":
            return off, size - off, kind
        return off, min(size - off, r.choice([bs * r.randint(1, 4),
                                              r.randint(1, size - off)])), \
            kind

    def range_sum(self, part, digest, bs):
        """The oracle of a range: its bytes as an image of their own."""
        if bs is None:
            h = reference.new(digest)
            h.update(part)
            return h.hexdigest()
        return reference.blkhash(digest, bs, io.BytesIO(part))

    def spell_off(self, n):
        return spell_bs(n) if n and n % 1024 == 0 and \
            self.rng.random() < 0.3 else str(n)

    def op_range(self):
        """nbdsum --range (a blkhash or --plain) of part of the image
        now, against the oracle over those bytes; or -c of range lines
        made earlier: OK only while the range's bytes are the same."""
        if self.range_lines and self.rng.random() < 0.3:
            return self.range_check()
        pick = self.view_input()
        if pick is None:
            return False
        words, name, t, dflt, s, tag = pick
        self.cur_touch.add(t[1].name)
        data = self.content_bytes(t)
        plain = self.rng.random() < 0.3
        if plain:
            digest, bs = self.rng.choice(DIGESTS), None
            opts = ["--plain"] if digest == "sha256" and \
                self.rng.random() < 0.5 else ["--plain=" + digest]
        else:
            opts, digest, bs = self.digest_opts()
            digest, bs = digest or dflt[0], bs or dflt[1]
        off, length, kind = self.pick_range(data, bs or 65536)
        quiet = self.rng.random() < 0.5
        json_out = self.rng.random() < 0.2
        argv = [NBDSUM] + (["-q"] if quiet else []) + opts + \
            (["--json"] if json_out else []) + \
            ["--range=%s+%s" % (self.spell_off(off), self.spell_off(length))] \
            + words
        desc = "range %s %d+%d of %s (%s%s, %s)" % (
            kind, off, length, tag, "plain " if plain else "", digest,
            "aligned" if off % (bs or 65536) == 0 else "unaligned")
        opdir = self.opdir()
        r = self.run(argv, tmpdir=opdir, touch=[t[1].name] +
                     ([s.name] if s else []))
        self.after_nbdsum(r, "range", opdir, quiet=quiet)
        if s:
            # A range's session completes no export's checksum: the
            # export's line stays current or what it was.
            self.check_bfile(s, "after a range of %s" % s.name)
        got = None
        try:
            if json_out and r.out.strip():
                o = json.loads(r.out)["inputs"][0]
                if "checksum" in o:
                    got = (o["checksum"].lower(), o.get("digest"),
                           None if o.get("plain") else o.get("block-size"),
                           o.get("range-offset"), o.get("range-length"),
                           o.get("size"))
            elif r.out.strip():
                lines = r.out.splitlines()
                m = RANGE_LINE_RE.match(lines[0])
                if len(lines) != 1 or not m:
                    raise ValueError(r.out[:200])
                got = (m.group("hex").lower(),
                       (m.group("d") or m.group("plain")).lower(),
                       parse_bs(m.group("bs")) if m.group("d") else None,
                       parse_bs(m.group("off")), parse_bs(m.group("len")),
                       None)
                if m.group("name") != name:
                    self.fail("garbled-output", "%s: a line for %r"
                              % (desc, m.group("name")))
        except (ValueError, KeyError, IndexError, TypeError) as e:
            if not r.hung:
                self.fail("garbled-output", "%s: %s" % (desc, e))
        if r.rc != 0:
            self.refuse("range:" + ("past-end" if kind == "past-end"
                                    else tag), r)
        if kind == "past-end":
            self.checks["range-past-end"] += 1
            if r.rc == 0 or got:
                self.fail("range-past-end-accepted", "%s: the image has %d "
                          "bytes, yet exit %s, printed %s"
                          % (desc, len(data), r.rc, got and got[0]))
            return True
        if got is None:
            if r.rc == 0 and not r.hung:
                self.fail("missing-output", "%s: exit 0, no checksum" % desc)
            return True
        hexsum, d, b, o, n, size = got
        if (d.replace("-", ""), b, o, n) != (digest, bs, off, length) or \
                size not in (None, length):
            self.fail("wrong-tag", "%s: printed as %s/%s@%s+%s (size %s)"
                      % (desc, d, b, o, n, size))
            return True
        part = data[off:off + length]
        want = self.range_sum(part, digest, bs)
        self.checks["range-checksum"] += 1
        self.notes["range checked: %s, %s" % (tag.split(":written")[0] + (
            ", written through" if ":written" in tag else ""), kind)] += 1
        if hexsum != want:
            self.fail("wrong-range-checksum" +
                      ("" if r.rc == 0 else "-exit%s" % r.rc),
                      "%s: nbdsum printed %s, the oracle says %s"
                      % (desc, hexsum, want), tags=[tag, kind])
        elif not json_out and r.rc == 0 and self.rng.random() < 0.6:
            self.range_lines.append({
                "line": r.out.strip(), "t": t, "server": s, "off": off,
                "len": length, "digest": digest, "bs": bs, "hex": hexsum,
                "bytes": hashlib.sha256(part).hexdigest(), "tag": tag,
                "key": self.tkey(t)})
            self.cur_cmds.append("# kept for -c: %s" % r.out.strip())
        return True

    def range_check(self):
        """-c of range lines made earlier (each the oracle's then)."""
        picks = self.rng.sample(self.range_lines, min(
            len(self.range_lines), self.rng.choice([1, 1, 2, 3])))
        self.nfile += 1
        path = os.path.join(self.dir, "ranges%d.sums" % self.nfile)
        with open(path, "w") as f:
            f.write("".join(p["line"] + "\n" for p in picks))
        self.cur_cmds.append("printf '%%s\\n' %s > %s" % (
            " ".join(shlex.quote(p["line"]) for p in picks), path))
        want = []
        for p in picks:
            t, s = p["t"], p["server"]
            self.cur_touch.update([t[1].name] + ([s.name] if s else []))
            exp, why = "unreadable", "gone"
            if p["tag"] == "nbdkit":
                why = "a command"   # -c runs none (nbdsum(1), SECURITY)
            elif not (s and s not in self.servers):
                try:
                    data = self.content_bytes(t)
                    part = data[p["off"]:p["off"] + p["len"]]
                    if len(part) < p["len"]:
                        why = "shrunk past the range"
                    else:
                        same = hashlib.sha256(part).hexdigest() == p["bytes"]
                        why = "changed" if not same else "unchanged" + (
                            ", image written" if self.tkey(t) != p["key"]
                            else "")
                        exp = "OK" if self.range_sum(
                            part, p["digest"], p["bs"]) == p["hex"] \
                            else "FAILED"
                except Unreadable:
                    pass
            want.append((p, exp, why))
        argv = [NBDSUM, "-c"] + (["-j", "2"] if len(picks) > 1 and
                                 self.rng.random() < 0.5 else []) + [path]
        opdir = self.opdir()
        r = self.run(argv, tmpdir=opdir, touch=[path])
        self.after_nbdsum(r, "range -c", opdir)
        if r.hung:
            return True
        verdicts = [VERDICT_RE.match(ln) for ln in r.out.splitlines()]
        if None in verdicts or len(verdicts) != len(want):
            self.fail("garbled-output", "range -c: %r" % r.out[:300])
            return True
        for (p, exp, why), m in zip(want, verdicts):
            v = m.group(2)
            self.checks["range-check-verdict"] += 1
            self.notes["range -c: %s, %s" % (why, p["tag"].split(
                ":written")[0])] += 1
            desc = "range -c of %r (%s since): says %s, the oracle %s" % (
                p["line"], why, v, exp)
            if v == "OK" and exp != "OK":
                self.fail("range-check-false-ok", desc, tags=[why, p["tag"]])
            elif v != "OK" and exp == "OK":
                self.fail("range-check-false-alarm", desc,
                          tags=[why, p["tag"]])
        all_ok = all(e == "OK" for _, e, _ in want)
        if (r.rc == 0) != all_ok:
            self.fail("check-exit0" if r.rc == 0 else
                      "range-check-false-alarm",
                      "range -c: exit %s, the oracle: %s" % (
                          r.rc, [(e, w) for _, e, w in want]))
        if r.rc != 0:
            self.refuse("range -c", r)
        for s in {p["server"] for p, _, _ in want if p["server"]}:
            if s in self.servers:
                self.check_bfile(s, "after a range -c of %s" % s.name)
        return True

    def op_bmap(self):
        """nbdsum --bmap of the image now: bmaptool's XML, each range's
        sha256 the oracle's, every unmapped block zeros, mapped at most
        1.1 times the data, the file's own checksum as bmaptool checks
        it."""
        pick = self.view_input()
        if pick is None:
            return False
        words, name, t, dflt, s, tag = pick
        self.cur_touch.add(t[1].name)
        data = self.content_bytes(t)
        argv = [NBDSUM] + self.rng.choice(
            [[], [], ["--no-spot-check"],
             ["--spot-check=%d" % self.rng.randint(1, 64)]]) + \
            ["--bmap"] + words
        opdir = self.opdir()
        r = self.run(argv, tmpdir=opdir, touch=[t[1].name] +
                     ([s.name] if s else []))
        self.after_nbdsum(r, "bmap", opdir)
        if s:
            self.check_bfile(s, "after a bmap of %s" % s.name)
        if r.rc != 0:
            self.refuse("bmap:" + ("empty" if not data else tag), r)
            if r.out.strip() and not r.hung:
                self.fail("bmap-exit%s-printed" % r.rc, "bmap of %s: exit "
                          "%s, yet printed %r" % (tag, r.rc, r.out[:200]))
            return True
        self.check_bmap(r.out, data, "bmap of %s (%d bytes)"
                        % (tag, len(data)), tag)
        return True

    def check_bmap(self, text, data, what, tag):
        size, bsz = len(data), 4096
        try:
            root = ET.fromstring(text)

            def get(k):
                return root.find(k).text.strip()
            head = (root.tag, root.get("version"), int(get("ImageSize")),
                    int(get("BlockSize")), int(get("BlocksCount")),
                    get("ChecksumType"))
            mapped_count = int(get("MappedBlocksCount"))
            filesum = get("BmapFileChecksum")
            ranges = []
            for rg in root.find("BlockMap").findall("Range"):
                a, _, b = rg.text.strip().partition("-")
                ranges.append((int(a), int(b or a), rg.get("chksum")))
        except (ET.ParseError, AttributeError, ValueError) as e:
            self.fail("bad-bmap", "%s: not bmaptool's XML (%s): %r"
                      % (what, e, text[:200]), tags=[tag])
            return
        self.checks["bmap"] += 1
        nb = (size + bsz - 1) // bsz
        bad = []
        if head != ("bmap", "2.0", size, bsz, nb, "sha256"):
            bad.append("head %s, the image %d bytes, %d blocks"
                       % (head, size, nb))
        # bmaptool copy: the sha256 of the file with the value all "0".
        zeroed = text.replace(filesum, "0" * len(filesum))
        if not re.fullmatch(r"[0-9a-f]{64}", filesum) or \
                hashlib.sha256(zeroed.encode()).hexdigest() != filesum:
            bad.append("BmapFileChecksum %s is not the file's" % filesum)
        nxt, mapped = 0, 0
        for a, b, ck in ranges:
            if a < nxt or b < a or b >= nb:
                bad.append("range %d-%d out of order or past block %d"
                           % (a, b, nb))
                break
            hole = data[nxt * bsz:a * bsz]
            if hole.strip(b"\0"):
                i = next(i for i in range(len(hole)) if hole[i])
                bad.append("block %d unmapped, but holds data (byte %d)"
                           % (nxt + i // bsz, nxt * bsz + i))
            if hashlib.sha256(data[a * bsz:(b + 1) * bsz]).hexdigest() != ck:
                bad.append("range %d-%d: chksum %s, the oracle's bytes %s"
                           % (a, b, ck, hashlib.sha256(
                               data[a * bsz:(b + 1) * bsz]).hexdigest()))
            mapped += b - a + 1
            nxt = b + 1
        if data[nxt * bsz:].strip(b"\0") and not bad:
            bad.append("blocks from %d unmapped, but hold data" % nxt)
        dblocks = sum(1 for i in range(nb)
                      if data[i * bsz:(i + 1) * bsz].strip(b"\0"))
        if mapped != mapped_count:
            bad.append("MappedBlocksCount %d, its ranges %d"
                       % (mapped_count, mapped))
        if mapped * 10 > dblocks * 11:
            bad.append("%d blocks mapped, more than 1.1 times the %d of data"
                       % (mapped, dblocks))
        self.notes["bmap checked: %s, %s" % (
            tag.split(":written")[0] + (", written through" if ":written"
                                        in tag else ""),
            "%d ranges" % len(ranges) if len(ranges) < 2 else
            "2+ ranges")] += 1
        for b in bad[:3]:
            self.fail("wrong-bmap", "%s: %s" % (what, b), tags=[tag])

    # ------------------------------------------------ orders and signals
    def op_order(self):
        cands = self.live(lambda i: True)
        if not cands:
            return False
        img = self.rng.choice(cands)
        refused = self.rng.random() < 0.5
        spelled = self.rng.choice(["--filter=%s", "--fi=%s", "--filt=%s",
                                   "--filter %s", "--fil %s", "path"])
        words, params = [], []
        post, t = [], ("file", img)
        if refused:
            f = self.rng.choice(sorted(REFUSED_FRONT))
            arg = os.path.join(self.filterdir, "nbdkit-%s-filter.so" % f) \
                if spelled == "path" else f
            sp = "--filter=%s" if spelled == "path" else spelled
            words += (sp % arg).split(" ")
            params = REFUSED_FRONT[f]
            label = "refused-front:%s:%s" % (f, spelled)
        else:
            f = self.rng.choice(sorted(ALLOWED_FRONT))
            if self.rng.random() < 0.5:
                words += ["--filter=" + f]
                params = list(ALLOWED_FRONT[f])
            label = "allowed:%s" % f
            b = self.rng.choice(sorted(BEHIND))
            if self.rng.random() < 0.5:
                size = os.path.getsize(img.path) if os.path.exists(img.path) \
                    else 0
                if b == "offset":
                    off = self.rng.choice([512, 4096, 65536])
                    post = ["--filter=offset"]
                    params.append("offset=%d" % off)
                    t = ("window", img, off, max(0, size - off))
                elif b == "truncate":
                    post = ["--filter=truncate"]
                    params.append("round-down=512")
                    t = ("window", img, 0, size // 512 * 512)
                else:
                    post = ["--filter=" + b]
                label += "+behind:" + b
        bk = self.rng.choice(["--filter=%s", "--fi=%s", "--filter %s"])
        cmd = ["nbdkit"] + words + (bk % FILTER).split(" ") + post + \
            ["file", img.path] + params
        opdir = self.opdir()
        argv = [NBDSUM, "-q", "["] + cmd + ["]"]
        r = self.run(argv, tmpdir=opdir, touch=[img.name])
        # (Not quiet: the server's own warnings are the user's command's.)
        self.after_nbdsum(r, "order " + label, opdir)
        name = " ".join(["["] + cmd + ["]"])
        if r.rc == 0 and refused:
            self.fail("order-accepted", "%s: nbdkit started with %s in "
                      "front of blkhash (nbdkit-blkhash-filter(1): refused)"
                      % (label, f))
        if r.rc != 0:
            self.refuse("order:" + ("refused" if refused else "allowed"), r)
            # Refused for its order, not for another reason (an
            # offset past the end of a small image).
            if not refused and ORDER_REFUSAL_RE.search(r.err):
                self.fail("allowed-order-refused", "%s: %s" % (
                    label, r.err.strip()[-300:]))
        if not (refused and f in ("offset", "truncate")):
            self.check_lines(r, [(name, t, ("sha256", 65536))], None, None,
                             "order " + label)
        return True

    def op_signal(self):
        cands = self.live(lambda i: not i.corrupt and not i.server)
        if not cands:
            return False
        k = self.rng.choice([1, 2, 3])
        argv = [NBDSUM]
        inputs, touch, cuts = [], [], []
        for _ in range(k):
            img = self.rng.choice(cands)
            form = self.rng.choice(["file", "client", "slow", "qemu-nbd"])
            if form == "slow":
                w = ["[", "nbdkit", "--filter=" + FILTER, "--filter=delay",
                     "file", img.path, "rdelay=20ms", "]"]
                t = ("file", img)
                name = " ".join(w)
            elif form == "qemu-nbd":
                w = ["[", "qemu-nbd", "-r", "-f", img.fmt, img.path, "]"]
                t = ("qemu", img, img.fmt, None)
                name = " ".join(w)
            else:
                w = [img.path]
                t = self.probe_target(img)
                name = img.path
            cuts.append(len(argv))
            argv += w
            inputs.append((name, t, ("sha256", 65536)))
            touch.append(img.name)
        if self.rng.random() < 0.15:
            # A FIFO nobody writes: nbdsum waits in open(2), and the
            # signal must still stop it (nbdsum(1), SIGNALS).
            self.nfile += 1
            fifo = os.path.join(self.dir, "fifo%d" % self.nfile)
            os.mkfifo(fifo)
            self.cur_cmds.append("mkfifo %s" % fifo)
            argv.insert(self.rng.choice(cuts + [len(argv)]), fifo)
            inputs.append((fifo, ("refused", inputs[0][1][1]), None))
        if "--client-side" not in argv and self.rng.random() < 0.3:
            argv.insert(1, "--client-side")
        if k > 1 and self.rng.random() < 0.6:
            argv[1:1] = ["-j", str(self.rng.randint(2, 3))]
        json_out = self.rng.random() < 0.2
        if json_out:
            argv.insert(1, "--json")
        signum = self.rng.choice([signal.SIGTERM, signal.SIGINT,
                                  signal.SIGHUP])
        delay = self.rng.uniform(0.0, 0.4)
        group = self.rng.random() < 0.3
        opdir = self.opdir()
        self.cur_cmds.append("# kill -%d %s after %.3fs" % (
            signum, "-PGID" if group else "PID", delay))
        # A hang guard, not nbdsum's bound: stopping -j jobs may take
        # JOBS_LINGER_SECONDS and more on a loaded machine.
        r = self.run(argv, tmpdir=opdir, sig=(signum, delay, group),
                     touch=touch)
        killed = r.rc == -signum
        self.checks["signal-run"] += 1
        self.after_nbdsum(r, "signal", opdir, signalled=True)
        if r.rc is not None and r.rc < 0 and r.rc != -signum and \
                r.rc != -signal.SIGPIPE and not r.hung:
            self.fail("crash", "signal: died of %d, sent %d" % (-r.rc,
                                                                signum))
        if r.rc not in (0, -signum) and not group and not r.hung:
            self.fail("signal-status", "signal %d: exit %s, not death by "
                      "the signal: %s" % (signum, r.rc, r.err.strip()[-300:]))
        self.check_lines(r, inputs, None, None, "signal", json_out=json_out,
                         killed=killed or r.rc != 0)
        if killed:
            self.refusals["signal: interrupted"] += 1
        return True

    def op_fdlimit(self):
        cands = self.live()
        if not cands:
            return False
        n = self.rng.randint(6, 24)
        lim = self.rng.choice([24, 32, 48, 64])
        argv = [NBDSUM, "-q", "-j", str(self.rng.randint(4, 16))]
        inputs, touch = [], []
        for i in range(n):
            img = self.rng.choice(cands)
            argv.append(img.path)
            inputs.append((img.path, self.probe_target(img),
                           ("sha256", 65536)))
            touch.append(img.name)
        check = self.rng.random() < 0.3
        opdir = self.opdir()
        if check:
            self.nfile += 1
            path = os.path.join(self.dir, "fd%d.sums" % self.nfile)
            r0 = self.run(argv, tmpdir=opdir, touch=touch)
            self.after_nbdsum(r0, "fdlimit-sums", opdir, quiet=True)
            self.check_lines(r0, inputs, None, None, "fdlimit-sums")
            if r0.rc != 0:
                self.refuse("fdlimit", r0)
                return True
            with open(path, "w") as f:
                f.write(r0.out)
            argv = [NBDSUM, "-c", "-j", argv[3], path]
            opdir = self.opdir()
        r = self.run(argv, tmpdir=opdir, limit_fds=lim, touch=touch)
        self.after_nbdsum(r, "fdlimit", opdir, quiet=not check)
        if check:
            oks = [ln for ln in r.out.splitlines() if ln.endswith(": OK")]
            self.checks["check-verdict"] += len(oks)
            if r.rc == 0 and len(oks) != n:
                self.fail("check-exit0", "fdlimit -c: exit 0 with %d OK of "
                          "%d" % (len(oks), n))
        else:
            self.check_lines(r, inputs, None, None, "fdlimit")
        if r.rc != 0:
            self.refuse("fdlimit", r)
        return True

    def op_remove(self):
        cands = self.removable()
        if len(cands) < 4:
            return False
        self.remove(self.rng.choice(cands))
        return True

    def remove(self, img):
        os.unlink(img.path)
        self.cur_cmds.append("rm %s" % img.path)
        self.cur_touch.add(img.name)
        img.deleted = True
        return True

    def op_corrupt(self):
        cands = self.live(lambda i: i.fmt == "qcow2" and not i.corrupt)
        if not cands:
            return False
        img = self.rng.choice(cands)
        size = os.path.getsize(img.path)
        how = self.rng.choice(["truncate", "garbage"])
        if how == "truncate" and size > 196608:
            self.tool("truncate", "-s", str(self.rng.randrange(196608, size)),
                      img.path, touch=[img.name])
        else:
            off = self.rng.randrange(512, max(513, size))
            src = os.path.join(self.dir, "bytes")
            with open(src, "wb") as f:
                f.write(random.Random(self.rng.random()).randbytes(512))
            self.tool("dd", "if=" + src, "of=" + img.path, "bs=512",
                      "seek=%d" % off, "oflag=seek_bytes", "conv=notrunc",
                      "status=none", touch=[img.name])
        img.corrupt = True
        self.bump(img)
        self.event(img, "write", {})
        return True

    # -------------------------------------------------------------- main
    def step(self):
        if len(self.cache_sum) > 20000:
            self.cache_sum.clear()
        if len(self.cache_blocks) > 200:
            self.cache_blocks.clear()
        kinds = list(WEIGHTS)
        if self.args.kinds:
            kinds = [k for k in kinds if k in self.args.kinds]
        weights = [WEIGHTS[k] for k in kinds]
        if not self.live():
            kinds, weights = ["create"], [1]
        for _ in range(50):
            kind = self.rng.choices(kinds, weights)[0]
            self.cur_cmds, self.cur_touch = [], set()
            t0 = time.monotonic()
            try:
                done = getattr(self, "op_" + kind.replace("-", "_"))()
            except Unreadable as e:
                self.skip("%s: oracle could not read (%s)" % (kind,
                                                             str(e)[:60]))
                done = True
            except Exception:
                # A bug of the campaign's own: a failure, not the end
                # of a long run.
                self.fail("campaign-error", "%s: %s" % (
                    kind, traceback.format_exc()[-800:]))
                done = True
            if done:
                break
        else:
            kind, done = "create", self.op_create()
        self.end_op(kind, t0, touch=sorted(self.cur_touch))

    def end_op(self, kind, t0, **extra):
        """Count an operation (or a phase's case) of kind, begun at t0,
        and log it with its commands and its failures, as finally
        classified."""
        self.ops[kind] += 1
        self.history.append((self.op, set(self.cur_touch), self.cur_cmds))
        if self.log:
            entry = {"op": self.op, "kind": kind}
            entry.update(extra)
            entry["secs"] = round(time.monotonic() - t0, 3)
            entry["cmds"] = self.cur_cmds
            self.log.write(json.dumps(entry) + "\n")
            for f in self.failures[self.logged:]:
                self.log.write(json.dumps({"failure": f}) + "\n")
            self.logged = len(self.failures)
            self.log.flush()

    def main(self):
        t0 = time.monotonic()
        try:
            if self.args.hostile_case is None and \
                    self.args.word_case is None:
                for self.op in range(self.args.ops):
                    self.step()
                    if self.args.until is not None and \
                            self.op >= self.args.until:
                        break
        finally:
            self.op += 1
            self.cur_cmds, self.cur_touch = [], set()
            for s in list(self.servers):
                self.stop_server(s)
        try:
            replay = self.args.hostile_case is not None or \
                self.args.word_case is not None
            if self.args.until is None and (
                    self.args.hostile_case is not None or
                    (self.args.hostile and not replay)):
                self.hostile = campaign_hostile.Hostile(self, NBDSUM,
                                                        MKIMAGE)
                self.hostile.phase(self.args.hostile,
                                   self.args.hostile_case)
            if self.args.until is None and (
                    self.args.word_case is not None or
                    (self.args.word and not replay)):
                self.word = campaign_word.Word(self, NBDSUM, MKIMAGE, FILTER)
                self.word.phase(self.args.word, self.args.word_case,
                                base_op=self.args.ops + self.args.hostile)
        finally:
            if self.log:
                for f in self.failures[self.logged:]:
                    self.log.write(json.dumps({"failure": f}) + "\n")
                self.log.close()
        self.secs = time.monotonic() - t0
        self.report()
        return 1 if self.failures else 0

    def report(self):
        out = sys.stdout
        nhostile = sum(v for k, v in self.ops.items()
                       if k.startswith("hostile:"))
        nword = sum(v for k, v in self.ops.items() if k.startswith("word:"))
        nops = sum(self.ops.values()) - nhostile - nword
        print("campaign: seed %d, %d operations%s%s in %.1fs (%.1f ops/s)" % (
            self.seed, nops, ", %d hostile cases" % nhostile
            if nhostile else "", ", %d word cases" % nword if nword else "",
            self.secs, (nops + nhostile + nword) / max(self.secs, 1e-9)),
            file=out)
        if self.args.table:
            print("\n| operation | count |\n|---|---:|", file=out)
            for k in WEIGHTS:
                if self.ops[k]:
                    print("| %s | %d |" % (k, self.ops[k]), file=out)
            print("\n| checked | count |\n|---|---:|", file=out)
            for k, v in sorted(self.checks.items()):
                print("| %s | %d |" % (k, v), file=out)
            print("\n| refusal | count | last message |\n|---|---:|---|",
                  file=out)
            for k, v in sorted(self.refusals.items()):
                print("| %s | %d | %s |" % (k, v, self.refusal_samples.get(
                    k, "").replace("|", "\\|")), file=out)
            if self.skips:
                print("\n| skipped | count |\n|---|---:|", file=out)
                for k, v in sorted(self.skips.items()):
                    print("| %s | %d |" % (k, v), file=out)
            for k, v in sorted(self.notes.items()):
                print("note (%d): %s" % (v, k), file=out)
        if self.hostile:
            self.hostile.report(out)
        if self.word:
            self.word.report(out)
        kinds = collections.Counter(
            (f["kind"], ",".join(f.get("tags", ()))) for f in self.failures)
        print("\n| failure | tags | count | first at op |\n"
              "|---|---|---:|---:|", file=out)
        for (k, tg), v in sorted(kinds.items()):
            first = next(f["op"] for f in self.failures if f["kind"] == k
                         and ",".join(f.get("tags", ())) == tg)
            print("| %s | %s | %d | %d |" % (k, tg, v, first), file=out)
        print("checks: %d; refusals: %d; skips: %d; failures: %d" % (
            sum(self.checks.values()), sum(self.refusals.values()),
            sum(self.skips.values()), len(self.failures)), file=out)
        if self.limits:
            print("\n| --since wrong after the precondition was broken "
                  "(documented, not a failure) | count |\n|---|---:|",
                  file=out)
            for k, v in sorted(self.limits.items()):
                print("| %s | %d |" % (k, v), file=out)
        shown = set()
        for f in self.failures:
            key = (f["kind"], tuple(f.get("tags", ())))
            if key in shown and not self.args.all_failures:
                continue
            shown.add(key)
            print("\nFAILURE %s (seed %d, op %d)%s\n  %s" % (
                f["kind"], f["seed"], f["op"],
                " tags " + ",".join(f["tags"]) if f.get("tags") else "",
                f["msg"]), file=out)
            if self.args.repro:
                print("  reproducer (the commands that touched the same "
                      "images):", file=out)
                for c in f["repro"][-self.args.repro:]:
                    print("    " + c, file=out)


WRITER = r'''
import json, sys
import nbd
uri, ops, flush = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
h = nbd.NBD()
h.connect_uri(uri)
for kind, off, length, pat in ops:
    if kind == "w":
        h.pwrite(bytes([pat]) * length, off)
    elif kind == "z":
        h.zero(length, off)
    else:
        if h.can_trim():
            h.trim(length, off)
if flush == "flush" and h.can_flush():
    h.flush()
h.shutdown()
'''

# nbdkit sh plugin: one file under two export names of different sizes
# that overlap, "whole" and the window "win".
WINDOW_SCRIPT = r'''#!/bin/bash
F=%(file)s; OFF=%(off)d; LEN=%(len)d
size () {
  local s n; s=$(stat -c %%s "$F")
  case $1 in
    whole) echo "$s" ;;
    win) n=$((s - OFF)); [ $n -lt 0 ] && n=0; [ $n -gt $LEN ] && n=$LEN
         echo "$n" ;;
  esac
}
base () { case $1 in whole) echo 0 ;; win) echo "$OFF" ;; esac; }
case "$1" in
  list_exports) echo NAMES; echo whole; echo win ;;
  default_export) echo whole ;;
  open) case $3 in whole|win) echo "$3" ;; "") echo whole ;;
          *) echo "unknown export $3" >&2; exit 1 ;; esac ;;
  get_size) size "$2" ;;
  can_write|can_flush) exit 0 ;;
  flush) exit 0 ;;
  pread) dd if="$F" iflag=skip_bytes,count_bytes \
           skip=$(( $(base "$2") + $4 )) count="$3" bs=65536 status=none ;;
  pwrite) dd of="$F" oflag=seek_bytes conv=notrunc \
            seek=$(( $(base "$2") + $4 )) bs=65536 iflag=fullblock \
            status=none ;;
  *) exit 2 ;;
esac
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=150)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--dir", default=None,
                    help="work directory (default: a new temporary one, "
                    "removed unless something failed)")
    ap.add_argument("--log", default=None, help="replay log (JSON lines)")
    ap.add_argument("--kinds", default=None,
                    help="only these operation kinds, comma-separated")
    ap.add_argument("--until", type=int, default=None,
                    help="stop after operation N (replay up to a failure)")
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--small", action="store_true",
                    help="images of at most 2 MiB (short mode)")
    ap.add_argument("--table", action="store_true",
                    help="tables of operations, checks, refusals, skips")
    ap.add_argument("--repro", type=int, default=40,
                    help="print at most N reproducer commands per failure")
    ap.add_argument("--all-failures", action="store_true")
    ap.add_argument("--strict-since", action="store_true",
                    help="count --since results wrong after the documented "
                    "precondition was broken as failures too")
    ap.add_argument("--hostile", type=int,
                    default=len(campaign_hostile.FAMILIES),
                    help="hostile cases after the operations (default: one "
                    "of each kind; 0: none)")
    ap.add_argument("--hostile-case", type=int, default=None,
                    help="run hostile case N alone (a replay), no operation")
    ap.add_argument("--hostile-timeout", type=int, default=None,
                    help="the hostile phase's --timeout (default: --timeout)")
    ap.add_argument("--word", type=int,
                    default=len(campaign_word.FAMILIES),
                    help="word cases (forged views, the gate) after the "
                    "hostile phase (default: one of each kind; 0: none)")
    ap.add_argument("--word-case", type=int, default=None,
                    help="run word case N alone (a replay), no operation")
    ap.add_argument("--word-timeout", type=int, default=None,
                    help="the word phase's --timeout (default: --timeout)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    if args.kinds:
        args.kinds = set(args.kinds.split(","))
        unknown = args.kinds - set(WEIGHTS)
        if unknown:
            ap.error("unknown kinds: %s" % ",".join(sorted(unknown)))
    for tool in (NBDSUM, MKIMAGE, FILTER):
        if not os.path.exists(tool):
            ap.error("%s is missing: build first" % tool)
    keep = args.dir is not None
    if not keep:
        args.dir = tempfile.mkdtemp(prefix="campaign.")
    os.makedirs(args.dir, exist_ok=True)
    args.dir = os.path.abspath(args.dir)
    c = Campaign(args)
    missing = [t for t, ok in c.tools.items() if not ok]
    if missing:
        print("campaign: missing (their operations are skipped): %s"
              % " ".join(missing), file=sys.stderr)
    rc = c.main()
    if not keep and rc == 0:
        shutil.rmtree(args.dir, ignore_errors=True)
    elif not keep:
        print("campaign: work directory kept: %s" % args.dir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
