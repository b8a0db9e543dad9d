#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""The shell recipes of README.md (its Usage section) and of the man
pages' EXAMPLES (nbdsum-workflows(1)'s MORE EXAMPLES; the filter's
DESCRIPTION, up to its first subsection, and GATE), as scripts
to run on this machine: hosts become local stand-in servers (an HTTP
server's port in STANDIN/http.port), nbdsum and the filter those of
the build tree, servers a recipe starts in the background are stopped
at its end.  Lines of output shown in a recipe are left out.

    recipes.py TOP STANDIN OUTDIR

writes OUTDIR/NN.sh per recipe and OUTDIR/list ("NN WHERE: first
line"); the scripts expect the stand-in servers' sockets in STANDIN.
"""
import os
import re
import sys

# A line of a recipe is a command if it starts with one of these (or
# continues the line before); anything else is output it shows.
COMMANDS = ("nbdsum", "nbdkit", "nbdcopy", "nbdinfo", "qemu-nbd", "qemu-io",
            "qemu-img", "cat", "timeout", "od", "dd", "sum=", "rm",
            "sha256sum")


def readme_blocks(top):
    """Indented blocks of README.md's Usage section."""
    text = open(os.path.join(top, "README.md")).read()
    start = text.index("\n## Usage")
    end = text.index("\n## ", start + 1)
    blocks, cur = [], []
    for line in text[start:end].split("\n"):
        if line.startswith("    "):
            cur.append(line[4:])
        elif cur and line.strip() == "":
            cur.append("")
        elif cur:
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    return [("README.md", [l for l in b if l != ""]) for b in blocks]


def pod_blocks(top, page, sections, lead_only=()):
    """Verbatim paragraphs of the given sections of man/PAGE.pod; of
    those in lead_only, only before their first subsection."""
    text = open(os.path.join(top, "man", page + ".pod")).read()
    out = []
    for sect in sections:
        m = re.search(r"^=head1 %s\n(.*?)(?=^=head1 )" % re.escape(sect),
                      text, re.M | re.S)
        if not m:
            continue
        body = m.group(1)
        if sect in lead_only:
            body = re.split(r"^=head2 ", body, flags=re.M)[0]
        cur = []
        for line in body.split("\n"):
            if line.startswith(" "):
                cur.append(line[1:])
            elif cur:
                out.append(("%s(1) %s" % (page, sect), cur))
                cur = []
    return out


def commands_only(lines):
    """Drop the output lines a recipe shows; '$ ' prompts go."""
    out, cont = [], False
    for line in lines:
        if line.startswith("$ "):
            line = line[2:]
        elif not cont and not line.startswith(COMMANDS):
            continue
        out.append(line)
        cont = line.rstrip().endswith(("\\", "|", "&&"))
    return out


def stand_in(line, si, n):
    """Hosts to local sockets, tools to the build tree's."""
    port = os.path.join(si, "http.port")
    if os.path.exists(port):
        line = line.replace("http://server/", "http://127.0.0.1:%s/"
                            % open(port).read().strip())
    subs = [
        (r"nbds://alice@server/disk\?tls-psk-file=keys.psk",
         "nbds+unix://alice@/disk?socket=%s/tls.sock&tls-psk-file=%s/keys.psk"
         % (si, si)),
        (r"nbd://server/(\S+?)'", r"nbd+unix:///\1?socket=%s/server.sock'" % si),
        (r"nbd://localhost/(\S+?)'", r"nbd+unix:///\1?socket=%s/localhost.sock'" % si),
        (r"nbd://localhost\b", "'nbd+unix:///?socket=%s/localhost.sock'" % si),
        (r"nbd://([ab])/disk", r"'nbd+unix:///disk?socket=%s/\1.sock'" % si),
        (r"/tmp/sock", "%s/qemu.sock" % si),
        (r"--filter=blkhash\b", '--filter="$BLKHASH_FILTER"'),
        (r"(^|[\s'(|&;])nbdsum\b", r'\1"$NBDSUM"'),
    ]
    for a, b in subs:
        line = re.sub(a, b, line)
    # A server the recipe leaves running: on a socket of ours, and
    # stopped when the recipe ends.
    if (line.startswith("nbdkit ") and " -U " not in line
            and "--run" not in line):
        line = line.replace("nbdkit ", "nbdkit -U %s/daemon%s.sock "
                            "-P %s/daemon%s.pid " % (si, n, si, n), 1)
    return line


def main():
    top, si, outdir = sys.argv[1:4]
    recipes = readme_blocks(top)
    recipes += pod_blocks(top, "nbdsum", ["EXAMPLES"])
    recipes += pod_blocks(top, "nbdsum-workflows", ["MORE EXAMPLES"])
    recipes += pod_blocks(top, "nbdkit-blkhash-filter",
                          ["DESCRIPTION", "EXAMPLES", "GATE"],
                          lead_only=["DESCRIPTION"])
    listing = []
    for i, (where, lines) in enumerate(recipes):
        cmds = commands_only(lines)
        if not cmds:
            continue
        body = [stand_in(l, si, "%d-%d" % (i, j)) for j, l in enumerate(cmds)]
        # --diff ends a recipe with 1 when the images differ, as its
        # man page says; any other status still fails the recipe.
        if "--diff" in body[-1] and not body[-1].endswith("\\"):
            body[-1] += " || [ $? -eq 1 ]"
        body = "\n".join(body)
        name = "%02d" % i
        with open(os.path.join(outdir, name + ".sh"), "w") as f:
            f.write("set -euo pipefail\n"
                    "trap 'stop_standins %s' EXIT\n%s\n" % (si, body))
        listing.append("%s %s: %s" % (name, where, cmds[0]))
    with open(os.path.join(outdir, "list"), "w") as f:
        f.write("\n".join(listing) + "\n")


main()
