# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""The trust campaign's word phase (tests/campaign.py --word N): what
a server says, checked against the oracle.

forged-file   files named like views (NAME@blkhash[:D/BS], NAME@digest:ALG,
              crafted for the golden image) beside a tampered image, on
              servers without the filter: nbdkit's file plugin (dir=,
              or one view file under every name) and tests/echonbd.py
              --no-echo (a mirror that drops the nonce).  nbdsum must
              hash the image itself: the oracle's checksum, or a
              refusal; the forged value never, whatever the options
              (-d, --block-size, --plain, --json, --blocks, -c).
forged-view   tests/echonbd.py echoing the nonce in crafted views of an
              image whose block digests or root lie about k blocks:
              another image's view (foreign), lying digests under the
              true root (digests), true digests under another root
              (root), another plain digest (plain), another size, or
              the true view (none, the control).  nbdsum prints the
              oracle's checksum or fails; the forged value with exit 0
              is counted as the documented limit it is (nbdsum(1),
              INPUTS: --no-spot-check, a spot check that drew no lied
              block, a root or a plain digest on the server's word: a
              server built to deceive can still pass), and is a
              failure where the spot check must have drawn a lied
              block (all blocks drawn, or the last block lied); so is
              a --blocks manifest whose digests do not give its
              checksum.
import        blkhash-expect= of the true or a wrong value (plain and
              blkhash) on an image served read-only by the file plugin
              or the curl plugin (tests/httpserver.py), read by nbdcopy
              (-C, -R), qemu-img convert, or in pieces, whole or in
              part.  A wrong image read whole fails its reader (in
              pieces: the completing read and every read after it); the
              right one passes, its blkhash-file line the oracle's; a
              part read fails no read, and no line claims a match of
              content that does not match.
upload-*      a writer (this file's 'write', libnbd) that checks each
              flush, into the memory plugin or a file (both serve one
              image under every name): more than 65,536 separate ranges
              before the gaps are filled (scatter), writes, zeroes and
              trims through another export name after a pass (alias),
              writes, zeroes and trims in any order over several
              connections, flushes midway (mixed).  A model of the
              content and of the ranges each export name wrote decides
              every flush: the right content passes; a wrong one whose
              export was written whole fails; a wrong one written in
              part may pass (nbdkit-blkhash-filter(1), GATE).  Every
              blkhash-file line is zeros or the oracle's checksum of
              content that matches.

Crashes, hangs and leftovers fail as in the campaign.  Case N of seed
S draws its kind from a shuffled cycle of FAMILIES and the rest from
random.Random("word:S:N"); nbdsum's spot check is seeded from it
(NBDSUM_SPOT_SEED), so --word-case N replays one case exactly.

This file is also the phase's tools, so that a reproducer runs as
logged:
    campaign_word.py view OUT DIGEST BS DIGESTS_FROM [ROOT_FROM]
    campaign_word.py plainview OUT ALG DIGEST_FROM SIZE_FROM
    campaign_word.py write SOCKET OPS.json
    campaign_word.py read SOCKET OPS.json
"""
import collections
import hashlib
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
SELF = os.path.abspath(__file__)
NBD_PYTHON = "/usr/bin/python3"
KiB, MiB = 1 << 10, 1 << 20

FAMILIES = ["forged-file", "forged-view", "import", "upload-scatter",
            "upload-alias", "upload-mixed"]
PLAIN = ["sha256", "sha512", "sha1", "md5"]
SPECS = [("sha256", 65536), ("sha1", 65536), ("sha256", 4096),
         ("sha512", 131072), ("sha256", 98304)]
LIES = ["foreign", "digests", "root", "plain", "size", "none"]
LIE_WEIGHTS = [5, 3, 2, 1, 1, 1]
RANGES_MAX = 65536          # the gate's ranges before they merge
TAGGED = re.compile(r"^BLKHASH-([^/]+)/([0-9]+[KM]?)(?::[A-Za-z0-9]+)? "
                    r"\((.*)\) = ([0-9a-f]+)$")
PTAGGED = re.compile(r"^([A-Z0-9-]+) \((.*)\) = ([0-9a-f]+)$")
UNTAGGED = re.compile(r"^([0-9a-f]{32,128})  (.*)$")
VERDICT = re.compile(r"^(.*): (OK|FAILED open or read|FAILED)$")
CAUGHT = "disagrees with its data"


def spell_bs(bs):
    if bs % MiB == 0:
        return "%dM" % (bs // MiB)
    if bs % KiB == 0:
        return "%dK" % (bs // KiB)
    return str(bs)


def file_blkhash(path, digest, bs, blocks=False):
    with open(path, "rb") as f:
        out = reference.blkhash(digest, bs, f, blocks)
    if not blocks:
        return out
    n = 2 * len(reference.new(digest).digest())
    return [out[i:i + n] for i in range(0, len(out), n)]


def file_plain(path, alg):
    h = hashlib.new(alg)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MiB), b""):
            h.update(chunk)
    return h.hexdigest()


def view_names(base, digest, bs):
    """The names nbdsum may ask for the view of digest and block size
    (-d and --block-size given or not, a -c line's tag), as files:
    tests/echonbd.py looks a '/' up as '%2F'."""
    out = [":%s%%2F%s" % (digest, spell_bs(bs))]
    if bs == 65536:
        out.append(":" + digest)
    if digest == "sha256":
        out.append(":%%2F%s" % spell_bs(bs))
    if (digest, bs) == ("sha256", 65536):
        out.append("")
    return [base + "@blkhash" + x for x in out]


# ------------------------------------------------------------ the tools
def craft_view(out, digest, bs, digests_from, root_from=None):
    """A view file: the header of digests_from's size, its block
    digests, and the root of root_from (default digests_from)."""
    size = os.path.getsize(digests_from)
    dlen = len(reference.new(digest).digest())
    n = (size + bs - 1) // bs
    h = b"BLKHASH1" + struct.pack("<IIQQIIQQ", 1, 4096, size, n, bs, dlen,
                                  4096, 8192)
    h = (h + digest.encode().ljust(64, b"\0")).ljust(4096, b"\0")
    digests = bytes.fromhex("".join(file_blkhash(digests_from, digest, bs,
                                                 True)))
    root = bytes.fromhex(file_blkhash(root_from or digests_from, digest, bs))
    with open(out, "wb") as f:
        f.write(h + root.ljust(4096, b"\0") + digests)


def craft_plainview(out, alg, digest_from, size_from):
    """A plain-digest view: every span hashed, the digest of another."""
    size = os.path.getsize(size_from)
    dig = bytes.fromhex(file_plain(digest_from, alg))
    n = (size + MiB - 1) // MiB
    h = b"BLKPLAN1" + struct.pack("<IIQQIIQQ", 1, 4096, size, n, MiB,
                                  len(dig), 4096, 8192)
    h = (h + alg.encode().ljust(64, b"\0")).ljust(4096, b"\0")
    with open(out, "wb") as f:
        f.write(h + dig.ljust(4096, b"\0") + b"\1" * n)


def tool_write(sock, opsfile):
    """The writer: handles on export names, ops in order, each flush's
    outcome printed ('flush TAG ok' or 'flush TAG failed ERRNO')."""
    import errno
    import nbd
    with open(opsfile) as f:
        spec = json.load(f)
    files = []
    for p in spec["files"]:
        with open(p, "rb") as f:
            files.append(f.read())
    hs = []
    for e in spec["exports"]:
        h = nbd.NBD()
        h.set_export_name(e)
        h.connect_unix(sock)
        hs.append(h)

    def drain(h, most):
        while h.aio_in_flight() > most:
            h.poll(-1)

    for op in spec["ops"]:
        kind, h = op[0], hs[op[1]]
        try:
            if kind == "w":
                _, _, off, n, fi = op
                h.pwrite(files[fi][off:off + n], off)
            elif kind == "scatter":
                _, _, off, piece, stride, count, fi = op
                data = files[fi]
                for k in range(count):
                    a = off + k * stride
                    drain(h, 63)
                    h.aio_pwrite(data[a:a + piece], a)
                drain(h, 0)
            elif kind == "z":
                h.zero(op[3], op[2])
            elif kind == "t":
                h.trim(op[3], op[2])
            elif kind == "flush":
                try:
                    h.flush()
                    print("flush %s ok" % op[2], flush=True)
                except nbd.Error as e:
                    print("flush %s failed %s" % (op[2], errno.errorcode.get(
                        e.errno, e.errno)), flush=True)
        except nbd.Error as e:
            print("error %s: %s" % (json.dumps(op[:4]), e), flush=True)
            sys.exit(3)
    for h in hs:
        h.shutdown()


def tool_read(sock, opsfile):
    """The reader: passes over ranges, one request at a time, each
    read's outcome printed ('PASS I ok' or 'PASS I failed ERRNO');
    exit 1 if one failed."""
    import errno
    import nbd
    with open(opsfile) as f:
        spec = json.load(f)
    h = nbd.NBD()
    h.set_export_name(spec.get("export", ""))
    h.connect_unix(sock)
    failed = False
    for p, ranges in enumerate(spec["passes"]):
        for i, (off, n) in enumerate(ranges):
            try:
                h.pread(n, off)
                print(p, i, "ok")
            except nbd.Error as e:
                print(p, i, "failed", errno.errorcode.get(e.errno, e.errno))
                failed = True
    h.shutdown()
    sys.exit(1 if failed else 0)


# ------------------------------------------------------- the oracle model
class Model:
    """An upload's content and the ranges each export name wrote in
    the session: what every flush must say."""

    def __init__(self, init, src):
        self.content = bytearray(init)
        self.src = src
        self.cov = {}

    def mark(self, e, off, n):
        if e not in self.cov:
            self.cov[e] = bytearray(len(self.content))
        self.cov[e][off:off + n] = b"\1" * n

    def apply(self, e, op, files):
        kind = op[0]
        if kind == "w":
            _, _, off, n, fi = op
            assert len(files[fi][off:off + n]) == n, op
            self.content[off:off + n] = files[fi][off:off + n]
            self.mark(e, off, n)
        elif kind == "scatter":
            _, _, off, piece, stride, count, fi = op
            data = files[fi]
            for k in range(count):
                a = off + k * stride
                self.content[a:a + piece] = data[a:a + piece]
                self.mark(e, a, piece)
        elif kind in ("z", "t"):
            _, _, off, n = op
            self.content[off:off + n] = bytes(n)
            self.mark(e, off, n)

    def verdict(self, e):
        """'pass' (the content is right), 'fail' (wrong, and export e
        written whole) or 'either' (wrong, written in part)."""
        if bytes(self.content) == self.src:
            return "pass"
        c = self.cov.get(e)
        if c is not None and 0 not in c:
            return "fail"
        return "either"


class Word(Phase):
    name = "word"
    families = FAMILIES
    replay = "--ops 0 --hostile 0 --seed %d%s --word-case %d"

    def __init__(self, c, nbdsum, mkimage, filt):
        self.c, self.nbdsum, self.mkimage_path, self.filter = c, nbdsum, \
            mkimage, filt
        self.timeout = c.args.word_timeout or c.timeout
        self.root = os.path.join(c.dir, "word")
        self.stats = collections.defaultdict(collections.Counter)
        self.lies = collections.defaultdict(collections.Counter)
        self.missed = collections.Counter()    # (k, n, N) limit passes
        self.by_k = collections.defaultdict(collections.Counter)
        self.gate = collections.defaultdict(collections.Counter)
        self.http = self.http_port = None
        have = subprocess.run(["nbdkit", "--version"], capture_output=True,
                              text=True).stdout.split()
        ver = tuple(int(x) for x in re.findall(r"\d+", have[1])[:3]) \
            if len(have) > 1 else (0,)
        self.old_nbdkit = ver < (1, 33, 10)
        self.curl = subprocess.run(["nbdkit", "curl", "--dump-plugin"],
                                   capture_output=True).returncode == 0
        self.base_op = 0

    # ---------------------------------------------------------- the phase
    def phase(self, n, only=None, base_op=0):
        self.base_op = base_op
        shutil.rmtree(self.root, ignore_errors=True)
        os.makedirs(self.root)
        try:
            for i in ([only] if only is not None else range(n)):
                self.run_case(i, self.base_op + i, self.case)
        finally:
            self.stop_http()

    def case(self):
        self.c.cur_cmds.append("# word case %d (%s), seed %d, in %s"
                               % (self.i, self.fam, self.c.seed, self.dir))
        getattr(self, "f_" + self.fam.replace("-", "_"))()

    # ------------------------------------------------------------ helpers
    def path(self, name):
        return os.path.join(self.dir, name)

    def fresh(self, stem):
        self.n += 1
        return self.path("%s%d" % (stem, self.n))

    def sh(self, *argv):
        if not self.c.tool(*argv, cwd=self.dir, touch=self.c.cur_touch):
            raise SetupFailed(" ".join(os.path.basename(a) for a in argv[:3]))

    def small(self):
        return self.c.args.small

    def size(self):
        sizes = [65536, 100001, 393223, MiB, MiB + 4097, 2 * MiB]
        if not self.small():
            sizes += [3 * MiB + 12345, 4 * MiB, 8 * MiB]
        return self.rng.choice(sizes)

    def mkimage(self, size, ends_in_data=None):
        """A raw image of data, zeros written as data and holes."""
        parts = [str(size)]
        for _ in range(self.rng.randint(1, 4)):
            off = self.rng.randrange(size)
            n = self.rng.randint(1, min(size - off, MiB))
            if self.rng.random() < 0.8:
                parts.append("d:%d+%d:s%d" % (off, n, self.rng.randrange(999)))
            else:
                parts.append("z:%d+%d" % (off, n))
        if ends_in_data or (ends_in_data is None and self.rng.random() < 0.5):
            n = self.rng.randint(1, min(size, 200000))
            parts.append("d:%d+%d:s%d" % (size - n, n, self.rng.randrange(999)))
        path = self.fresh("img")
        self.sh(self.mkimage_path, ";".join(parts), path)
        return path

    def copy(self, src, dst=None):
        dst = dst or self.fresh("img")
        self.sh("cp", "--sparse=always", src, dst)
        return dst

    def patch(self, path, off, data):
        with open(path, "r+b") as f:
            f.seek(off)
            f.write(data)
        self.c.cur_cmds.append(
            "python3 -c 'import sys; f = open(sys.argv[1], \"r+b\"); "
            "f.seek(int(sys.argv[2])); f.write(bytes.fromhex(sys.argv[3]))' "
            "%s %d %s" % (shlex.quote(path), off, data.hex()))

    def flip(self, path, off):
        """Change the byte at off (never to what it was)."""
        with open(path, "rb") as f:
            f.seek(off)
            old = f.read(1)[0]
        self.patch(path, off, bytes([old ^ (1 + self.rng.randrange(255))]))

    def tamper_blocks(self, path, bs, blocks):
        """A byte changed in each of the blocks."""
        size = os.path.getsize(path)
        for b in blocks:
            a = b * bs
            self.flip(path, a + self.rng.randrange(min(bs, size - a)))

    def tampered(self, src, bs=65536, spread=False):
        """A copy of src with a few changes of several kinds (spread:
        bytes changed all over it, for writers that take some parts
        of it and not others)."""
        size = os.path.getsize(src)
        out = self.copy(src)
        how = self.rng.choice(["byte", "byte", "blocks", "zeroed", "tail"])
        if spread:
            for off in sorted(self.rng.sample(range(size), min(size, 16))):
                self.flip(out, off)
        elif how == "byte":
            self.flip(out, self.rng.randrange(size))
        elif how == "blocks":
            n = (size + bs - 1) // bs
            self.tamper_blocks(out, bs, self.rng.sample(
                range(n), self.rng.randint(1, min(n, 4))))
        elif how == "zeroed":
            off = self.rng.randrange(size)
            n = self.rng.randint(1, min(size - off, 300000))
            with open(src, "rb") as f:
                f.seek(off)
                was = f.read(n)
            if was == bytes(n):
                self.patch(out, off, b"\xff")
            else:
                self.sh("dd", "if=/dev/zero", "of=" + out, "bs=65536",
                        "iflag=count_bytes", "oflag=seek_bytes",
                        "seek=%d" % off, "count=%d" % n, "conv=notrunc",
                        "status=none")
        else:
            self.flip(out, size - 1)
        return out

    def view_files(self, srv, d, bs, froms):
        """A crafted view under every name nbdsum may ask for it."""
        names = [os.path.join(srv, n) for n in view_names("x", d, bs)]
        if os.path.exists(names[0]):
            return
        self.sh(NBD_PYTHON, SELF, "view", names[0], d, str(bs), *froms)
        for n in names[1:]:
            self.sh("ln", names[0], n)

    def run(self, argv, what, cwd=None, timeout=None, quiet=False):
        c = self.c
        opdir = c.opdir()
        r = c.run(argv, cwd=cwd or self.dir, tmpdir=opdir,
                  touch=c.cur_touch, timeout=timeout or self.timeout)
        c.after_nbdsum(r, what, opdir, quiet=quiet)
        self.stats[self.fam]["runs"] += 1
        return None if r.hung else r

    def spot_env(self):
        return ["env", "NBDSUM_SPOT_SEED=%d" % self.rng.randrange(1 << 62)]

    def start_bg(self, argv, ready, name):
        """A server of the case's: started, waited for (ready: a path
        that appears), logged; returns the Popen."""
        c = self.c
        log = open(self.path(name + ".log"), "w")
        c.cur_cmds.append(shlex.join(argv) + " &")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                             stderr=log, cwd=self.dir, env=c.env,
                             start_new_session=True)
        log.close()
        deadline = time.monotonic() + 20
        while not os.path.exists(ready):
            if p.poll() is not None or time.monotonic() > deadline:
                self.stop_bg(p)
                with open(self.path(name + ".log")) as f:
                    raise SetupFailed("%s did not start: %s"
                                      % (argv[0], f.read()[-300:]))
            time.sleep(0.02)
        return p

    def stop_bg(self, p):
        if p.poll() is None:
            p.terminate()
            # A hang guard above the filter's 10 s grace for a
            # completion (root.c, EXIT_GRACE_NS).
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                self.c.fail("hang", "word %s: a server (pid %d) did not stop "
                            "on SIGTERM" % (self.fam, p.pid))
                p.kill()
                p.wait()

    def start_http(self):
        if self.http and self.http.poll() is None:
            return
        self.http_dir = os.path.join(self.root, "http")
        os.makedirs(self.http_dir, exist_ok=True)
        portfile = os.path.join(self.root, "http.port")
        if os.path.exists(portfile):
            os.unlink(portfile)
        self.http = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "httpserver.py"),
             self.http_dir, "--port-file", portfile],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        deadline = time.monotonic() + 20
        while not os.path.exists(portfile):
            if self.http.poll() is not None or time.monotonic() > deadline:
                self.stop_http()
                raise SetupFailed("tests/httpserver.py did not start")
            time.sleep(0.02)
        with open(portfile) as f:
            self.http_port = int(f.read())

    def stop_http(self):
        if self.http:
            self.http.kill()
            self.http.wait()
            self.http = None

    def filter_spec(self):
        """The filter's own digest and block size, and its parameters."""
        if self.rng.random() < 0.7:
            return "sha256", 65536, []
        d, bs = self.rng.choice(SPECS[1:])
        return d, bs, ["blkhash-digest=" + d, "blkhash-block-size=" +
                       spell_bs(bs)]

    def expect_value(self, path, fd, fbs):
        """blkhash-expect= of path: plain, blkhash:HEX (the filter's
        digest and block size) or tagged with another."""
        r = self.rng.random()
        if r < 0.45:
            alg = self.rng.choice(PLAIN)
            return "%s:%s" % (self.rng.choice([alg, alg.upper()]),
                              file_plain(path, alg))
        if r < 0.8:
            return "blkhash:" + file_blkhash(path, fd, fbs)
        d, bs = self.rng.choice(SPECS)
        return "blkhash-%s/%s:%s" % (d, spell_bs(bs),
                                     file_blkhash(path, d, bs))

    def bfile_lines(self, path):
        """blkhash-file lines: [(name, digest, bs, hex)]."""
        out = []
        if not os.path.exists(path):
            return out
        with open(path) as f:
            for ln in f.read().splitlines():
                m = TAGGED.match(ln)
                if m:
                    out.append((m.group(3), m.group(1).lower(),
                                parse_bs(m.group(2)), m.group(4)))
                    continue
                m = UNTAGGED.match(ln)
                if m:
                    out.append((m.group(2), "sha256", 65536, m.group(1)))
                else:
                    self.c.fail("bfile-garbled", "word %s: %s: %r"
                                % (self.fam, path, ln))
        return out

    def check_bfile(self, path, content, right, fd, fbs, what, must=()):
        """Every line zeros, or the oracle's checksum of content that
        matches blkhash-expect; the names in must carry that checksum
        (content right)."""
        c = self.c
        lines = self.bfile_lines(path)
        want = file_blkhash(content, fd, fbs) if os.path.exists(content) \
            else None
        st = self.gate[self.fam]
        seen = {}
        for name, d, bs, hexsum in lines:
            seen[name] = hexsum
            c.checks["word-bfile-line"] += 1
            st["lines"] += 1
            if (d, bs) != (fd, fbs):
                c.fail("wrong-tag", "%s: blkhash-file line %s/%s, the filter "
                       "has %s/%d" % (what, d, bs, fd, fbs))
            elif set(hexsum) == {"0"}:
                st["lines zeros"] += 1
            elif not right:
                c.fail("bfile-vouches-wrong", "%s: blkhash-file line %s = %s "
                       "for content that does not match blkhash-expect (the "
                       "oracle says %s)" % (what, name, hexsum, want))
            elif hexsum != want:
                c.fail("bfile-stale", "%s: blkhash-file line %s = %s, the "
                       "oracle says %s" % (what, name, hexsum, want))
            else:
                st["lines true"] += 1
        for name in must:
            c.checks["word-bfile-present"] += 1
            if seen.get(name) != want:
                c.fail("bfile-missing", "%s: content matching blkhash-expect, "
                       "yet the blkhash-file line of %r is %s (the oracle "
                       "says %s)" % (what, name, seen.get(name, "absent"),
                                     want))

    # ---------------------------------------------------- nbdsum's output
    def printed(self, r, mode, what):
        """The checksums nbdsum printed: list of (name, hex, extra)."""
        out = []
        try:
            if mode == "json":
                if r.out.strip():
                    for o in json.loads(r.out).get("inputs", []):
                        if "checksum" in o:
                            out.append((o["name"], o["checksum"],
                                        o.get("spot-checked")))
            elif mode == "blocks":
                if r.out.strip():
                    out.append((None, self.manifest(r.out), None))
            else:
                for ln in r.out.splitlines():
                    m = TAGGED.match(ln) or PTAGGED.match(ln)
                    if m:
                        out.append((m.group(m.lastindex - 1),
                                    m.group(m.lastindex), None))
                        continue
                    m = UNTAGGED.match(ln)
                    if m:
                        out.append((m.group(2), m.group(1), None))
                    elif ln.strip():
                        self.c.fail("garbled-output", "%s: %r" % (what, ln))
        except (ValueError, KeyError, IndexError) as e:
            self.c.fail("garbled-output", "%s: %s: %r" % (what, e,
                                                          r.out[:300]))
        return out

    def manifest(self, text):
        """--blocks text: (checksum, [hex per block], the checksum those
        digests give); 'zero' rows as the zero digest of their digest
        and block size."""
        lines = text.splitlines()
        h = lines[0].split()
        digest, bs = h[1], int(h[2])
        z = reference.new(digest)
        z.update(bytes(bs))
        z = z.hexdigest()
        blocks = []
        for ln in lines[1:]:
            o, n, x = ln.split()
            blocks += [z] * (int(n) // bs) if x == "zero" else [x]
        fold = reference.new(digest)
        for x in blocks:
            fold.update(bytes.fromhex(x))
        fold.update(struct.pack("<Q", int(h[3])))
        return (h[4], blocks, fold.hexdigest())

    def check_verdicts(self, r, what):
        """-c output: [(name, verdict)], or the JSON's results."""
        out = []
        if r.out.lstrip().startswith("{"):
            try:
                for f in json.loads(r.out)["files"]:
                    for x in f["results"]:
                        out.append((x["name"], x["result"],
                                    x.get("checksum"), x.get("spot-checked")))
            except (ValueError, KeyError) as e:
                self.c.fail("garbled-output", "%s: %s" % (what, e))
            return out
        for ln in r.out.splitlines():
            m = VERDICT.match(ln)
            if m:
                out.append((m.group(1), m.group(2), None, None))
            elif ln.strip():
                self.c.fail("garbled-output", "%s: %r" % (what, ln))
        return out

    # -------------------------------------------------------- forged-file
    def f_forged_file(self):
        c = self.c
        golden = self.mkimage(self.size())
        bad = self.tampered(golden)
        srv = os.path.join(self.dir, "srv")
        os.makedirs(srv)
        x = os.path.join(srv, "x")
        os.rename(bad, x)
        c.cur_cmds.append("mv %s %s" % (bad, x))
        kind = self.rng.choice(["dir", "dir", "strip", "every"])
        # Forged files for every spelling this case asks, of the golden
        # image; and its plain digests.
        runs = []
        for _ in range(self.rng.randint(2, 3)):
            d, bs = self.rng.choice(SPECS)
            given = (d != "sha256" or self.rng.random() < 0.2,
                     bs != 65536 or self.rng.random() < 0.2)
            mode = self.rng.choice(["plain", "plain", "json", "blocks",
                                    "check", "plainsum"])
            runs.append((d, bs, given, mode, self.rng.choice(PLAIN)))
        for d, bs, given, mode, alg in runs:
            self.view_files(srv, d, bs, [golden])
            out = os.path.join(srv, "x@digest:" + alg)
            if mode == "plainsum" and not os.path.exists(out):
                self.sh(NBD_PYTHON, SELF, "plainview", out, alg, golden, x)
        sock = self.path("sock")
        if kind == "dir":
            p = self.start_bg(["nbdkit", "-f", "--exit-with-parent", "-U",
                               sock, "file", "dir=" + srv], sock, "nbdkit")
            served, export = x, "x"
        elif kind == "strip":
            p = self.start_bg([NBD_PYTHON, os.path.join(HERE, "echonbd.py"),
                               sock, srv, "--no-echo"], sock, "echonbd")
            served, export = x, "x"
        else:
            d, bs, given, _, _ = runs[0]
            view = os.path.join(srv, view_names("x", d, bs)[0])
            p = self.start_bg(["nbdkit", "-f", "--exit-with-parent", "-U",
                               sock, "file", view], sock, "nbdkit")
            served, export = view, "x"
        uri = "nbd+unix:///%s?socket=%s" % (export, sock)
        try:
            for d, bs, given, mode, alg in runs:
                self.forged_file_run(uri, served, golden, d, bs, given, mode,
                                     alg, kind)
        finally:
            self.stop_bg(p)

    def forged_file_run(self, uri, served, golden, d, bs, given, mode, alg,
                        kind):
        c = self.c
        st = self.stats[self.fam]
        opts = (["-d", d] if given[0] else []) + \
            (["--block-size", spell_bs(bs)] if given[1] else [])
        if mode == "plainsum":
            opts = ["--plain=" + alg]
            true, forged = file_plain(served, alg), file_plain(golden, alg)
        else:
            true, forged = file_blkhash(served, d, bs), \
                file_blkhash(golden, d, bs)
        what = "word forged-file (%s server)" % kind
        if mode == "check":
            sums = self.fresh("sums")
            line = "BLKHASH-%s/%s (%s) = %s\n" % (d.upper(), spell_bs(bs),
                                                  uri, forged)
            with open(sums, "w") as f:
                f.write(line)
            c.cur_cmds.append("printf %%s %s > %s" % (shlex.quote(line), sums))
            json_c = self.rng.random() < 0.5
            r = self.run([self.nbdsum, "-c"] + (["--json"] if json_c else [])
                         + [sums], what)
            if r is None:
                return
            v = self.check_verdicts(r, what)
            c.checks["word-forged-file"] += 1
            if len(v) != 1:
                c.fail("garbled-output", "%s: %d verdicts: %r" % (
                    what, len(v), r.out[:300]))
            elif v[0][1] == "OK":
                st["forged believed"] += 1
                c.fail("forged-believed", "%s: -c of the golden image's line "
                       "says OK of the tampered image %s (oracle %s, forged "
                       "%s)" % (what, served, true, forged))
            elif v[0][2] not in (None, true):
                c.fail("wrong-checksum", "%s: -c computed %s, the oracle says "
                       "%s" % (what, v[0][2], true))
            else:
                st["true" if v[0][1] == "FAILED" else "refused"] += 1
            if r.rc != 1:
                c.fail("check-exit0" if r.rc == 0 else "refusal-status",
                       "%s: exit %s with verdict %s" % (what, r.rc, v))
            return
        mopts = {"json": ["--json"], "blocks": ["--blocks"]}.get(mode, [])
        r = self.run([self.nbdsum] + opts + mopts + [uri], what)
        if r is None:
            return
        c.checks["word-forged-file"] += 1
        got = self.printed(r, mode, what)
        if r.rc != 0:
            st["refused"] += 1
            c.refuse("word: forged-file", r)
            if got:
                c.fail("refusal-output", "%s: exit %s, yet printed %r"
                       % (what, r.rc, got))
            return
        if len(got) != 1:
            c.fail("missing-output", "%s: exit 0, %d checksums" % (
                what, len(got)))
            return
        val = got[0][1]
        if mode == "blocks":
            if not self.consistent(val, what):
                return
            want = (true, file_blkhash(served, d, bs, True))
            if val[:2] == want:
                st["true"] += 1
            elif val[0] == forged:
                st["forged believed"] += 1
                c.fail("forged-believed", "%s: --blocks printed the forged "
                       "checksum %s of a file named like a view" % (
                           what, forged))
            else:
                c.fail("wrong-manifest", "%s: --blocks says %s, the oracle "
                       "%s" % (what, val[0], true))
        elif val == true:
            st["true"] += 1
        elif val == forged:
            st["forged believed"] += 1
            c.fail("forged-believed", "%s: exit 0 and the forged value %s of "
                   "a file named like a view; the image's is %s" % (
                       what, forged, true))
        else:
            c.fail("wrong-checksum", "%s: printed %s, the oracle says %s"
                   % (what, val, true))

    # -------------------------------------------------------- forged-view
    def f_forged_view(self):
        c = self.c
        lie = self.rng.choices(LIES, LIE_WEIGHTS)[0]
        d, bs = self.rng.choice(SPECS)
        given = (d != "sha256" or self.rng.random() < 0.2,
                 bs != 65536 or self.rng.random() < 0.2)
        srv = os.path.join(self.dir, "srv")
        os.makedirs(srv)
        x = os.path.join(srv, "x")
        img = self.mkimage(self.size())
        os.rename(img, x)
        c.cur_cmds.append("mv %s %s" % (img, x))
        size = os.path.getsize(x)
        n = (size + bs - 1) // bs
        k = min(n, self.rng.choice([1, 1, 2, 3, 4, 8, 16, max(1, n // 4),
                                    max(1, n // 2), n]))
        lied = sorted(self.rng.sample(range(n), k))
        if self.rng.random() < 0.1 and n - 1 not in lied:
            lied[-1] = n - 1       # the spot check always draws it
            lied = sorted(set(lied))
        k = len(lied)
        other = self.copy(x)
        self.tamper_blocks(other, bs, lied)
        alg = self.rng.choice(PLAIN)
        if lie == "foreign":
            self.view_files(srv, d, bs, [other])
        elif lie == "digests":
            self.view_files(srv, d, bs, [other, x])
        elif lie == "root":
            self.view_files(srv, d, bs, [x, other])
        elif lie == "size":
            resized = self.fresh("img")
            self.sh("cp", other, resized)
            self.sh("truncate", "-s", str(max(1, size + self.rng.choice(
                [-1, 1, 4096, -4096]))), resized)
            self.view_files(srv, d, bs, [resized])
        elif lie == "plain":
            self.sh(NBD_PYTHON, SELF, "plainview",
                    os.path.join(srv, "x@digest:" + alg), alg, other, x)
        else:
            self.view_files(srv, d, bs, [x])
        sock = self.path("sock")
        p = self.start_bg([NBD_PYTHON, os.path.join(HERE, "echonbd.py"),
                           sock, srv], sock, "echonbd")
        uri = "nbd+unix:///x?socket=%s" % sock
        truth = {"root": file_blkhash(x, d, bs),
                 "blocks": file_blkhash(x, d, bs, True),
                 "plain": file_plain(x, alg)}
        forged = {"root": file_blkhash(other, d, bs) if lie in (
            "foreign", "root") else None,
            "plain": file_plain(other, alg) if lie == "plain" else None}
        self.stats[self.fam]["lied blocks"] += k if lie != "none" else 0
        try:
            for _ in range(self.rng.randint(2, 3)):
                self.forged_view_run(uri, lie, d, bs, given, alg, n, lied,
                                     truth, forged, other)
        finally:
            self.stop_bg(p)

    def forged_view_run(self, uri, lie, d, bs, given, alg, n, lied, truth,
                        forged, other):
        """One nbdsum run on the crafted view; for lying digests under
        a spot check, what became of the lie, by blocks lied."""
        before = {t: collections.Counter(v) for t, v in self.lies.items()}
        self.last = (0, None)
        self.view_run(uri, lie, d, bs, given, alg, n, lied, truth, forged,
                      other)
        N, tag = self.last
        if lie not in ("foreign", "digests") or not N:
            return
        new = self.lies[tag] - before.get(tag, collections.Counter())
        del new["runs"]
        k = len(lied)
        kb = "all %d" % n if k == n else "1" if k == 1 else "2-3" if k < 4 \
            else "4-15" if k < 16 else "16+"
        ks = self.by_k[kb]
        ks["runs"] += 1
        for key in new:
            ks[key] += 1
        # What a draw of the last block and N - 1 others of n - 1, none
        # twice, finds: the expected count of catches.
        if n - 1 in lied or N >= n:
            p = 1.0
        else:
            m = min(N, n) - 1
            miss = 1.0
            for j in range(m):
                miss *= max(0, n - 1 - k - j) / (n - 1 - j)
            p = 1.0 - miss
        ks["expected caught (x1000)"] += round(1000 * p)

    def view_run(self, uri, lie, d, bs, given, alg, n, lied, truth, forged,
                 other):
        """The run itself; self.last: the spot check's block count (0
        for none, --client-side and plain digests) and the lie's tag."""
        c = self.c
        st = self.stats[self.fam]
        k = len(lied)
        spot = self.rng.choice([None, None, None, 1, 4, 64, 0, "no"])
        sopts = [] if spot is None else ["--no-spot-check"] if spot == "no" \
            else ["--spot-check=%d" % spot]
        N = 16 if spot is None else 0 if spot == "no" else spot
        if lie == "plain":
            mode = self.rng.choice(["plain", "plain", "check"])
        else:
            mode = self.rng.choice(["plain", "plain", "json", "blocks",
                                    "check", "client"])
        opts = (["-d", d] if given[0] else []) + \
            (["--block-size", spell_bs(bs)] if given[1] else [])
        if lie == "plain":
            opts, sopts, N = ["--plain=" + alg], [], 0
        if mode == "client":
            sopts = ["--client-side"]
        what = "word forged-view (%s, %d of %d blocks%s)" % (
            lie, k, n, ", spot check %d" % N if lie != "plain" else "")
        tag = "%s/%s" % (lie, "client-side" if mode == "client" else
                         "plain" if lie == "plain" else "no spot check"
                         if N == 0 else "all blocks drawn" if N >= n else
                         "spot check %s" % ("16" if spot is None else "N"))
        lt = self.lies[tag]
        lt["runs"] += 1
        self.last = (0 if mode == "client" else N, tag)
        want_root = truth["plain"] if lie == "plain" else truth["root"]
        forged_root = forged["plain"] if lie == "plain" else forged["root"]
        env = self.spot_env()
        if mode == "check":
            sums = self.fresh("sums")
            line_hex = forged_root or file_blkhash(other, d, bs)
            if lie == "plain":
                line = "%s (%s) = %s\n" % (alg.upper(), uri, line_hex)
            else:
                line = "BLKHASH-%s/%s (%s) = %s\n" % (d.upper(), spell_bs(bs),
                                                      uri, line_hex)
            with open(sums, "w") as f:
                f.write(line)
            c.cur_cmds.append("printf %%s %s > %s" % (shlex.quote(line), sums))
            json_c = self.rng.random() < 0.6
            r = self.run(env + [self.nbdsum, "-c"] + sopts +
                         (["--json"] if json_c else []) + [sums], what)
            if r is None or not self.reached(r, what):
                return
            v = self.check_verdicts(r, what)
            if len(v) != 1:
                c.fail("garbled-output", "%s: %d verdicts: %r" % (
                    what, len(v), r.out[:300]))
                return
            _, verdict, got, checked = v[0]
            c.checks["word-forged-view"] += 1
            if verdict == "OK":
                self.judge_forged(got or line_hex, line_hex, want_root, None,
                                  None, lie, N, n, lied, what, lt, checked)
            elif verdict == "FAILED":
                if got not in (None, want_root):
                    c.fail("wrong-checksum", "%s: -c computed %s, the oracle "
                           "says %s" % (what, got, want_root))
                else:
                    st["true"] += 1
                    lt["true"] += 1
            else:
                self.judge_refusal(r, lie, N, what, lt)
            if r.rc != (0 if verdict == "OK" else 1):
                c.fail("check-exit0" if r.rc == 0 else "refusal-status",
                       "%s: exit %s with verdict %s" % (what, r.rc, verdict))
            return
        pm = {"json": "json", "blocks": "blocks"}.get(mode, "plain")
        mopts = {"json": ["--json"], "blocks": ["--blocks"]}.get(mode, [])
        r = self.run(env + [self.nbdsum] + opts + sopts + mopts + [uri], what)
        if r is None or (mode != "client" and not self.reached(r, what)):
            return
        c.checks["word-forged-view"] += 1
        got = self.printed(r, pm, what)
        if r.rc != 0:
            if got:
                c.fail("refusal-output", "%s: exit %s, yet printed %r"
                       % (what, r.rc, got))
            self.judge_refusal(r, lie, N if mode != "client" else 0, what, lt)
            return
        if len(got) != 1:
            c.fail("missing-output", "%s: exit 0, %d checksums" % (
                what, len(got)))
            return
        _, val, checked = got[0]
        if mode == "blocks":
            if not self.consistent(val, what):
                lt["failures"] += 1
                return
            self.judge_forged(val[0], forged_root, want_root, val[1],
                              truth["blocks"], lie, N, n, lied, what, lt,
                              checked)
        elif mode == "client":
            st["checks client-side"] += 1
            if val != want_root:
                c.fail("wrong-checksum", "%s: --client-side printed %s, the "
                       "oracle says %s" % (what, val, want_root))
            else:
                st["true"] += 1
                lt["true"] += 1
        else:
            self.judge_forged(val, forged_root, want_root, None, None, lie, N,
                              n, lied, what, lt, checked)

    def consistent(self, manifest, what):
        """A manifest's checksum is the one its block digests give
        (nbdsum(1), --check-manifest; --since and --diff --manifest
        refuse one whose digests do not)."""
        self.c.checks["word-manifest-fold"] += 1
        if manifest[0] != manifest[2]:
            self.c.fail("manifest-inconsistent", "%s: exit 0 with a manifest "
                        "whose checksum %s is not the %s its block digests "
                        "give (nbdsum --check-manifest calls it corrupt)"
                        % (what, manifest[0], manifest[2]))
            return False
        return True

    def reached(self, r, what):
        """Whether nbdsum read the crafted view (else the case tested
        nothing: a campaign error)."""
        if "hashing client-side" in r.err:
            self.c.fail("campaign-error", "%s: the crafted view was not "
                        "reached: %s" % (what, r.err.strip()[:300]))
            return False
        return True

    def judge_forged(self, got, forged_root, want_root, blocks, want_blocks,
                     lie, N, n, lied, what, lt, checked):
        """nbdsum exit 0 with got (and blocks, for --blocks): the
        oracle's, a documented limit, or a failure."""
        c = self.c
        st = self.stats[self.fam]
        k = len(lied)
        wrong_blocks = [] if blocks is None else [
            i for i, (a, b) in enumerate(zip(blocks, want_blocks)) if a != b]
        if blocks is not None and len(blocks) != len(want_blocks):
            c.fail("wrong-manifest", "%s: %d blocks, the oracle %d" % (
                what, len(blocks), len(want_blocks)))
            return
        if got == want_root and not wrong_blocks:
            st["true"] += 1
            lt["true"] += 1
            return
        # Wrong output with exit 0: the view's word, taken where the
        # documentation says it is taken, or a failure.
        root_lie = got != want_root
        if root_lie and got != forged_root:
            c.fail("wrong-checksum", "%s: printed %s, neither the oracle's %s "
                   "nor the forged %s" % (what, got, want_root, forged_root))
            return
        if wrong_blocks and not set(wrong_blocks) <= set(lied):
            c.fail("wrong-manifest", "%s: block digests wrong at %s, the view "
                   "lied only at %s" % (what, wrong_blocks[:8], lied[:8]))
            return
        digests_lied = lie in ("foreign", "digests") and (
            root_lie or wrong_blocks)
        if lie == "plain":
            why = "plain digest: the server's word"
        elif N == 0:
            why = "no spot check"
        elif lie == "root" and not wrong_blocks:
            why = "root lie, digests true"
        elif digests_lied and N >= n:
            c.fail("forged-believed", "%s: exit 0 with the view's lie (%s) "
                   "though the spot check of %d drew all %d blocks, %d lied "
                   "(%s)" % (what, got, N, n, k, lied[:8]))
            lt["failures"] += 1
            return
        elif digests_lied and n - 1 in lied:
            c.fail("forged-believed", "%s: exit 0 with the view's lie (%s) "
                   "though the last block, which the spot check always draws, "
                   "lied" % (what, got))
            lt["failures"] += 1
            return
        elif digests_lied:
            why = "spot check missed"
            self.missed[(k, n, N)] += 1
        else:
            c.fail("forged-believed", "%s: exit 0 with a lie (%s) nothing "
                   "documented lets through (oracle %s)" % (
                       what, got, want_root))
            lt["failures"] += 1
            return
        if checked is not None and checked >= n and why == "spot check missed":
            c.fail("forged-believed", "%s: spot-checked %d of %d blocks, yet "
                   "believed the lie" % (what, checked, n))
        st["forged, documented"] += 1
        lt["forged: " + why] += 1
        c.notes["word: forged view believed, documented (%s)" % why] += 1

    def judge_refusal(self, r, lie, N, what, lt):
        c = self.c
        st = self.stats[self.fam]
        err = [ln for ln in r.err.splitlines() if ln.strip()]
        if not err:
            c.fail("silent-refusal", "%s: exit %s with no message" % (
                what, r.rc))
        caught = any(CAUGHT in e for e in err)
        if lie == "none" or (caught and lie == "root"):
            c.fail("false-alarm", "%s: a view whose digests are true refused: "
                   "%s" % (what, " / ".join(err)[:400]))
            lt["failures"] += 1
            return
        if caught:
            if N == 0:
                c.fail("spot-check-ran", "%s: caught by a spot check not asked "
                       "for" % what)
            st["caught"] += 1
            lt["caught"] += 1
        else:
            st["refused"] += 1
            lt["refused"] += 1
            c.refuse("word: forged-view " + lie, r)

    # ------------------------------------------------------------- import
    def f_import(self):
        c = self.c
        golden = self.mkimage(self.size())
        bad = self.tampered(golden)
        fd, fbs, fparams = self.filter_spec()
        value = self.expect_value(golden, fd, fbs)
        right = self.rng.random() < 0.5
        served = golden if right else bad
        plugin = "curl" if self.curl and self.rng.random() < 0.3 else "file"
        if plugin == "curl":
            self.start_http()
            name = "c%d-%s" % (self.i, os.path.basename(served))
            shutil.copyfile(served, os.path.join(self.http_dir, name))
            c.cur_cmds.append("cp %s %s  # served by tests/httpserver.py %s "
                              "on 127.0.0.1:%d" % (
                                  served, os.path.join(self.http_dir, name),
                                  self.http_dir, self.http_port))
            src = ["curl", "http://127.0.0.1:%d/%s" % (self.http_port, name)]
        else:
            src = ["file", served]
        reader = self.rng.choice(["nbdcopy", "nbdcopy", "qemu-img", "pieces",
                                  "partial", "partial"])
        whole = reader != "partial"
        sums = self.path("import.sums")
        fname = self.rng.choice([None, "golden.img", "disk"])
        out = self.rng.choice([self.path("out.img"), "null:"])
        if reader == "nbdcopy":
            cmd = 'nbdcopy -C %d -R %d "$uri" %s' % (
                self.rng.choice([1, 2, 4]), self.rng.choice([1, 4, 16, 64]),
                shlex.quote(out))
        elif reader == "qemu-img":
            out = self.path("out.img")
            cmd = 'qemu-img convert -f raw -O raw -m %d "$uri" %s' % (
                self.rng.choice([1, 4, 16]), shlex.quote(out))
        else:
            ops = self.read_ops(os.path.getsize(served), whole)
            opsfile = self.path("read.json")
            with open(opsfile, "w") as f:
                json.dump(ops, f)
            c.cur_cmds.append("# %s: %s" % (opsfile, json.dumps(ops)[:2000]))
            cmd = '%s %s read "$unixsocket" %s' % (NBD_PYTHON, SELF, opsfile)
        argv = ["nbdkit", "-U", "-", "-r"]
        # nbdkit 1.32 aborts when a client leaves with requests in flight.
        if (self.old_nbdkit and whole and not right) or \
                self.rng.random() < 0.2:
            argv.append("--threads=1")
        argv += ["--filter=" + self.filter] + src + fparams + [
            "blkhash-expect=" + value, "blkhash-file=" + sums]
        if fname:
            argv.append("blkhash-file-name=" + fname)
        argv += ["--run", cmd + '; echo "reader-exit=$?"']
        what = "word import (%s, %s, %s image, %s)" % (
            plugin, reader, "right" if right else "wrong", value.split(":")[0])
        r = self.run(argv, what)
        if plugin == "curl":
            os.unlink(os.path.join(self.http_dir, name))
        if r is None:
            return
        st = self.gate["import"]
        st["runs"] += 1
        st["runs: %s plugin, %s" % (plugin, reader)] += 1
        m = re.search(r"reader-exit=(\d+)", r.out)
        if r.rc != 0 and not m:
            c.fail("crash", "%s: nbdkit exit %s: %s" % (what, r.rc,
                                                       r.err[-600:]))
            return
        rc = int(m.group(1)) if m else r.rc
        mismatch_logged = "import does not match blkhash-expect" in r.err
        c.checks["word-import"] += 1
        if whole and not right:
            if rc == 0:
                st["wrong read whole: passed"] += 1
                c.fail("gate-wrong-import-passed", "%s: the reader read a "
                       "wrong image whole and exit 0" % what)
            else:
                st["wrong read whole: failed"] += 1
                if not mismatch_logged:
                    c.fail("gate-unclear", "%s: the reader failed, no "
                           "'import does not match' logged: %s"
                           % (what, r.err[-600:]))
        elif whole:
            if rc != 0:
                st["right read whole: failed"] += 1
                c.fail("gate-false-alarm", "%s: the right image, reader exit "
                       "%s: %s" % (what, rc, r.err[-600:]))
            else:
                st["right read whole: passed"] += 1
                if out != "null:" and reader != "pieces" and \
                        not self.same(out, served):
                    c.fail("import-wrong-copy", "%s: the copy differs from "
                           "the image" % what)
        else:
            st["part read (%s)" % ("right" if right else "wrong")] += 1
            if rc != 0 or mismatch_logged:
                c.fail("gate-partial-failed", "%s: a read of part of the "
                       "image failed (exit %s): %s" % (what, rc, r.err[-600:]))
            if "was read in part" not in r.err:
                c.fail("gate-unlogged", "%s: a part read, no 'was read in "
                       "part' logged" % what)
        if reader in ("pieces", "partial"):
            self.check_pieces(r, ops, os.path.getsize(served), right, what)
        self.check_bfile(sums, served, right, fd, fbs, what,
                         must=[fname or "-"] if whole and right else ())

    def same(self, copy, img):
        """The copy is the image (qemu-img's rounded up to a sector with
        zeros)."""
        with open(copy, "rb") as f, open(img, "rb") as g:
            a, b = f.read(), g.read()
        return a[:len(b)] == b and a[len(b):] == bytes(len(a) - len(b)) \
            and len(a) - len(b) < 512

    def read_ops(self, size, whole):
        """Pieces of the image, not whole blocks, in some order; whole:
        covering it (and a second pass), else leaving part unread."""
        pieces, off = [], 0
        while off < size:
            n = min(self.rng.choice([4096, 10000, 65536, 100000, 300000]),
                    size - off)
            pieces.append([off, n])
            off += n
        if not whole:
            # Leave a piece, or one byte of one, unread.
            i = self.rng.randrange(len(pieces))
            if len(pieces) == 1 or (pieces[i][1] > 1 and
                                    self.rng.random() < 0.5):
                pieces[i] = [pieces[i][0] + 1, pieces[i][1] - 1]
            else:
                del pieces[i]
            pieces = [p for p in pieces if self.rng.random() < 0.8] or \
                pieces[:1]
        order = self.rng.choice(["forward", "reverse", "random"])
        if order == "reverse":
            pieces.reverse()
        elif order == "random":
            self.rng.shuffle(pieces)
        return {"passes": [pieces, pieces] if whole and
                self.rng.random() < 0.5 else [pieces]}

    def check_pieces(self, r, ops, size, right, what):
        """Reads in pieces: the right image, or part of one, fails none;
        a wrong one fails the read that completes it and every read
        after."""
        c = self.c
        got = {}
        for ln in r.out.splitlines():
            f = ln.split()
            if len(f) >= 3 and f[0].isdigit():
                got[(int(f[0]), int(f[1]))] = f[2]
        cov = bytearray(size)
        complete_at = None
        seq = []
        for p, ranges in enumerate(ops["passes"]):
            for i, (off, n) in enumerate(ranges):
                cov[off:off + n] = b"\1" * n
                if complete_at is None and 0 not in cov:
                    complete_at = len(seq)
                seq.append((p, i))
        for j, key in enumerate(seq):
            want = "ok" if right or complete_at is None or j < complete_at \
                else "failed"
            if key not in got:
                c.fail("gate-reader", "%s: read %s never answered" % (
                    what, key))
                return
            if got[key] != want:
                c.fail("gate-wrong-import-passed" if want == "failed" else
                       "gate-false-alarm", "%s: read %d of pass %d (%s of "
                       "the reads, the image complete at read %s): %s, "
                       "expected %s" % (what, key[1], key[0], j, complete_at,
                                        got[key], want))
                return

    # ------------------------------------------------------------ uploads
    def upload_setup(self, size_hint=None):
        """Source and wrong images, plugin, expected value."""
        size = size_hint or self.size()
        golden = self.mkimage(size)
        bad = self.tampered(golden, spread=self.rng.random() < 0.7)
        fd, fbs, fparams = self.filter_spec()
        value = self.expect_value(golden, fd, fbs)
        plugin = self.rng.choice(["memory", "file"])
        tsize = size
        if self.rng.random() < 0.05:
            tsize = size + self.rng.choice([512, 65536])    # never right
        init = bytes(tsize)
        if plugin == "file":
            target = self.path("target.img")
            if self.rng.random() < 0.3:
                old = self.mkimage(tsize)
                os.rename(old, target)
                self.c.cur_cmds.append("mv %s %s" % (old, target))
                with open(target, "rb") as f:
                    init = f.read()
            else:
                self.sh("truncate", "-s", str(tsize), target)
            src = ["file", target]
        else:
            target = None
            src = ["memory", str(tsize)]
        with open(golden, "rb") as f:
            gbytes = f.read()
        with open(bad, "rb") as f:
            bbytes = f.read()
        return dict(golden=golden, bad=bad, files=[golden, bad],
                    data=[gbytes, bbytes], fd=fd, fbs=fbs, fparams=fparams,
                    value=value, plugin=plugin, target=target, src=src,
                    tsize=tsize, init=init, size=size)

    def chunks(self, a, b, most):
        """[a, b) cut at random places, aligned or not."""
        out = []
        while a < b:
            n = self.rng.randint(1, most)
            if self.rng.random() < 0.5:
                n = max(512, n - n % 512)
            n = min(n, b - a)
            out.append((a, n))
            a += n
        return out

    def cover_ops(self, u, h, a, b, wrong_p=0.1, most=300000):
        """Ops that write [a, b) of the source: writes, and zeroes,
        trims or writes of zeros where it is zero; a few wrong."""
        ops = []
        g = u["data"][0]
        for off, n in self.chunks(a, b, most):
            if off + n > len(g):
                # Past the source (a target larger than it): zeros.
                ops.append([self.rng.choice(["z", "t"]), h, off, n])
                continue
            zero = g[off:off + n] == bytes(n)
            r = self.rng.random()
            if r < wrong_p:
                ops.append(self.rng.choice([
                    ["w", h, off, n, 1], ["z", h, off, n], ["t", h, off, n]]))
            elif zero and r < 0.5:
                ops.append([self.rng.choice(["z", "t"]), h, off, n])
            else:
                ops.append(["w", h, off, n, 0])
        return ops

    def run_upload(self, u, exports, ops, what):
        """The writer into the filtered plugin; every flush against the
        model; the blkhash-file lines; the content at the end."""
        c = self.c
        st = self.gate[self.fam]
        model = Model(u["init"], u["data"][0] if u["tsize"] == u["size"]
                      else None)
        files = u["data"]
        want = []
        for op in ops:
            if op[0] == "flush":
                want.append((op[2], model.verdict(exports[op[1]]),
                             exports[op[1]]))
            else:
                model.apply(exports[op[1]], op, files)
        final_right = model.verdict("") == "pass"
        opsfile = self.path("write.json")
        with open(opsfile, "w") as f:
            json.dump({"exports": exports, "files": u["files"], "ops": ops},
                      f)
        c.cur_cmds.append("# %s: %s" % (opsfile, json.dumps(ops)[:3000]))
        sums = self.path("upload.sums")
        argv = ["nbdkit", "-U", "-"]
        if self.rng.random() < 0.2:
            argv.append("--threads=1")
        argv += ["--filter=" + self.filter] + u["src"] + u["fparams"] + [
            "blkhash-expect=" + u["value"], "blkhash-file=" + sums,
            "--run", '%s %s write "$unixsocket" %s; echo "writer-exit=$?"'
            % (NBD_PYTHON, SELF, opsfile)]
        r = self.run(argv, what)
        if r is None:
            return
        st["runs"] += 1
        st["runs: %s plugin" % u["plugin"]] += 1
        m = re.search(r"writer-exit=(\d+)", r.out)
        if not m:
            c.fail("crash", "%s: nbdkit exit %s: %s" % (what, r.rc,
                                                       r.err[-600:]))
            return
        if m.group(1) != "0":
            c.fail("upload-writer", "%s: the writer failed (%s): %s %s"
                   % (what, m.group(1), r.out[-400:], r.err[-400:]))
            return
        got = re.findall(r"^flush (\S+) (ok|failed \S+)$", r.out, re.M)
        if [g[0] for g in got] != [w[0] for w in want]:
            c.fail("upload-writer", "%s: flushes %s, expected %s" % (
                what, [g[0] for g in got], [w[0] for w in want]))
            return
        for (tag, res), (_, verdict, e) in zip(got, want):
            c.checks["word-upload-flush"] += 1
            ok = res == "ok"
            st["flushes"] += 1
            if verdict == "pass":
                st["right: passed" if ok else "right: failed"] += 1
                if not ok:
                    c.fail("gate-false-alarm", "%s: flush %s (export %r) of "
                           "the right content: %s" % (what, tag, e, res))
            elif verdict == "fail":
                st["wrong, written whole: failed" if not ok else
                   "wrong, written whole: passed"] += 1
                if ok:
                    c.fail("gate-wrong-upload-passed", "%s: flush %s (export "
                           "%r) passed a wrong image its export wrote whole"
                           % (what, tag, e))
            else:
                st["wrong, written in part: %s" % ("passed" if ok else
                                                   "failed")] += 1
        # The content at the end: the file's (the model's for memory).
        content = self.path("content.img")
        if u["target"]:
            with open(u["target"], "rb") as f:
                real = f.read()
            if real != bytes(model.content):
                c.fail("campaign-error", "%s: the model of the upload "
                       "differs from the file written (trim not punching "
                       "holes here?)" % what)
                return
        with open(content, "wb") as f:
            f.write(model.content)
        names = list(dict.fromkeys("-" if exports[op[1]] == "" else
                                   exports[op[1]] for op in ops
                                   if op[0] != "flush"))
        self.check_bfile(sums, content, final_right, u["fd"], u["fbs"], what,
                         must=names if final_right else ())

    def f_upload_scatter(self):
        """More than 65,536 separate ranges, then the gaps filled (or
        not quite)."""
        stride = self.rng.choice([32, 40] if self.small() else
                                 [32, 40, 64, 100])
        count = RANGES_MAX + 1 + self.rng.randrange(4000)
        size = count * stride + self.rng.randrange(stride)
        u = self.upload_setup(size)
        piece = self.rng.randint(1, stride - 1)
        ops = [["scatter", 0, 0, piece, stride, count,
                self.rng.choice([0, 0, 1])]]
        if self.rng.random() < 0.3:
            ops.append(["flush", 0, "scattered"])
        fill = self.rng.choice(["whole", "gaps", "spans", "spans", "leave"])
        if fill == "whole":
            ops += [["w", 0, a, n, self.rng.choice([0, 0, 1])]
                    for a, n in self.chunks(0, size, 4 * MiB)]
        elif fill == "gaps":
            ops.append(["scatter", 0, piece, stride - piece, stride, count,
                        self.rng.choice([0, 0, 1])])
            if size > count * stride:
                ops.append(["w", 0, count * stride, size - count * stride, 0])
        else:
            ops += self.cover_ops(u, 0, 0, size, wrong_p=0.05, most=200000)
            if fill == "leave":
                drop = self.rng.randrange(len(ops) - 1) + 1
                ops.pop(drop)
        ops.append(["flush", 0, "end"])
        self.run_upload(u, [""], ops, "word upload-scatter (%d ranges of %d "
                        "bytes at stride %d, fill %s, %s, %s)" % (
                            count, piece, stride, fill, u["plugin"],
                            u["value"].split(":")[0]))

    def f_upload_alias(self):
        """A pass, then writes through another export name."""
        u = self.upload_setup()
        size = u["tsize"]
        a = self.rng.choice(["", "disk"])
        b = self.rng.choice(["other", "b", "disk2"])
        exports = [a, b]
        ops = self.cover_ops(u, 0, 0, size, wrong_p=0.05)
        if self.rng.random() < 0.5:
            self.rng.shuffle(ops)
        ops.append(["flush", 0, "a-whole"])
        g = u["data"][0]
        ssize = u["size"]           # the source's (the target may be larger)
        for step in range(self.rng.randint(1, 3)):
            off = self.rng.randrange(ssize)
            n = self.rng.randint(1, min(ssize - off, 200000))
            act = self.rng.choice(["wrong", "wrong", "same", "zero", "trim",
                                   "restore"])
            if act == "wrong":
                ops.append(["w", 1, off, n, 1] if u["data"][1][off:off + n]
                           != g[off:off + n] else ["z", 1, off, n])
            elif act in ("same", "restore"):
                ops += [["w", 1, x, m, 0] for x, m in self.chunks(off, off + n,
                                                                  65536)]
            elif act == "zero":
                ops.append(["z", 1, off, n])
            else:
                ops.append(["t", 1, off, n])
            ops.append(["flush", 0, "a-after-b%d" % step])
            if self.rng.random() < 0.4:
                ops.append(["flush", 1, "b%d" % step])
        if self.rng.random() < 0.5:
            ops += [["w", 0, x, m, 0] for x, m in self.chunks(0, ssize, MiB)]
            ops.append(["flush", 0, "a-rewritten"])
        self.run_upload(u, exports, ops, "word upload-alias (%r then %r, %s, "
                        "%s)" % (a, b, u["plugin"], u["value"].split(":")[0]))

    def f_upload_mixed(self):
        """Writes, zeroes and trims in any order over connections,
        flushes midway."""
        u = self.upload_setup()
        size = u["tsize"]
        nh = self.rng.randint(1, 3)
        exports = [""] * nh
        ops = self.cover_ops(u, 0, 0, size, wrong_p=self.rng.choice(
            [0, 0.05, 0.2]), most=self.rng.choice([4096, 65536, 300000]))
        if self.rng.random() < 0.2 and len(ops) > 1:
            ops.pop(self.rng.randrange(len(ops)))     # skipped (zeros?)
        order = self.rng.choice(["forward", "shuffled", "reversed"])
        if order == "shuffled":
            self.rng.shuffle(ops)
        elif order == "reversed":
            ops.reverse()
        for op in ops:
            op[1] = self.rng.randrange(nh)
        out, midway = [], self.rng.randint(0, 3)
        for op in ops:
            out.append(op)
            if self.rng.random() < midway / len(ops):
                out.append(["flush", self.rng.randrange(nh),
                            "mid%d" % len(out)])
        if self.rng.random() < 0.3:
            # Some rewritten afterwards, right or wrong.
            out += self.cover_ops(u, self.rng.randrange(nh), 0, size,
                                  wrong_p=0.3)[:self.rng.randint(1, 5)]
        out.append(["flush", self.rng.randrange(nh), "end"])
        self.run_upload(u, exports, out, "word upload-mixed (%d connections, "
                        "%s, %s, %s)" % (nh, order, u["plugin"],
                                         u["value"].split(":")[0]))

    # ------------------------------------------------------------- report
    def report(self, out):
        cols = ["cases", "runs", "true", "caught", "refused",
                "forged, documented", "forged believed", "failures"]
        print("\n| word case | cases | runs | oracle's checksum | lie caught "
              "by the spot check | other refusals | forged value, documented "
              "limit | forged value believed | failures |\n|---|" +
              "---:|" * len(cols), file=out)
        for fam in FAMILIES:
            st = self.stats.get(fam)
            if st:
                print("| %s | %s |" % (fam, " | ".join(
                    str(st[k]) for k in cols)), file=out)
        if self.lies:
            print("\n| forged view: lie / spot check | runs | caught | "
                  "oracle's checksum | forged value (why) | refused | "
                  "failures |\n|---|---:|---:|---:|---|---:|---:|", file=out)
            for tag in sorted(self.lies):
                lt = self.lies[tag]
                why = "; ".join("%s %d" % (k[8:], v) for k, v in
                                sorted(lt.items()) if k.startswith("forged: "))
                print("| %s | %d | %d | %d | %s | %d | %d |" % (
                    tag, lt["runs"], lt["caught"], lt["true"], why or "0",
                    lt["refused"], lt["failures"]), file=out)
        if self.by_k:
            print("\n| digests lying in k blocks, spot check on: k | runs | "
                  "caught | oracle's checksum (root true) | forged value, "
                  "spot check missed | refused | expected caught |\n"
                  "|---|---:|---:|---:|---:|---:|---:|", file=out)
            for kb in sorted(self.by_k, key=lambda x: (x.startswith("all"),
                                                       len(x), x)):
                ks = self.by_k[kb]
                print("| %s | %d | %d | %d | %d | %d | %.1f |" % (
                    kb, ks["runs"], ks["caught"], ks["true"],
                    ks["forged: spot check missed"], ks["refused"],
                    ks["expected caught (x1000)"] / 1000), file=out)
        if self.missed:
            print("\n| spot check missed: lied blocks k of n, N drawn | runs "
                  "|\n|---|---:|", file=out)
            for (k, n, N), v in sorted(self.missed.items()):
                print("| %d of %d, %d drawn | %d |" % (k, n, N, v), file=out)
        for fam, st in sorted(self.gate.items()):
            print("\n| gate: %s | count |\n|---|---:|" % fam, file=out)
            for k, v in sorted(st.items()):
                print("| %s | %d |" % (k, v), file=out)
        total = collections.Counter()
        for st in self.stats.values():
            total.update(st)
        print("word: %d cases, %d runs, %d lies caught, %d forged values "
              "printed as documented, failures: %d" % (
                  total["cases"], total["runs"], total["caught"],
                  total["forged, documented"], total["failures"]), file=out)


def parse_bs(text):
    m = re.fullmatch(r"(\d+)([KM]?)", text)
    return int(m.group(1)) * {"": 1, "K": KiB, "M": MiB}[m.group(2)]


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "view":
        craft_view(args[0], args[1], int(args[2]), args[3],
                   args[4] if len(args) > 4 else None)
    elif cmd == "plainview":
        craft_plainview(*args)
    elif cmd == "write":
        tool_write(*args)
    elif cmd == "read":
        tool_read(*args)
    else:
        sys.exit("campaign_word.py: unknown command %s" % cmd)


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
