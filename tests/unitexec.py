#!/usr/bin/env python3
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
"""The commands a shipped systemd unit would run, as systemd would
build them, for tests that run them without systemd.

    unitexec.py UNIT [ENVFILE] [OLD=NEW]...

prints bash assignments to eval:

    unit_envfile   the EnvironmentFile= the unit names
    unit_env       NAME=VALUE words: Environment=, then ENVFILE's lines
                   (read in place of the unit's EnvironmentFile=)
    unit_pre_count, unit_pre_0, unit_pre_1, ...   ExecStartPre= argvs
    unit_start     the ExecStart= argv
    unit_listen    ListenStream= values, unit_accept: Accept= (sockets)

Each argument equal to OLD becomes NEW, and the part of an argument
after --filter= too (the test's filter for the installed one); an OLD
that matches nothing is an error.  Only the subset of systemd's syntax
the shipped units use is understood (quotes without backslashes, $VAR
as a word, ${VAR} in a word, $$); anything else is an error rather
than a guess, so that a unit this cannot read fails its test.
"""
import re
import shlex
import sys


def fail(msg):
    sys.exit("unitexec.py: %s" % msg)


def read_unit(path):
    """{section: [(key, value)]}, continuation lines joined."""
    sections, section, pending = {}, None, ""
    for raw in open(path):
        line = pending + raw.rstrip("\n")
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("[") and s.endswith("]"):
            section = s[1:-1]
            sections.setdefault(section, [])
            continue
        if "=" not in s or section is None:
            fail("%s: cannot read line %r" % (path, s))
        key, value = s.split("=", 1)
        sections[section].append((key.strip(), value.strip()))
    return sections


def read_envfile(path):
    """NAME=VALUE lines as systemd reads them (quoted or bare values)."""
    env = []
    for raw in open(path):
        s = raw.strip()
        if not s or s[0] in "#;":
            continue
        if "=" not in s:
            fail("%s: not NAME=VALUE: %r" % (path, s))
        name, value = s.split("=", 1)
        name, value = name.strip(), value.strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            fail("%s: bad name %r" % (path, name))
        if "\\" in value:
            fail("%s: backslashes are not understood: %r" % (path, s))
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif value[:1] in ("'", '"'):
            fail("%s: unterminated quote: %r" % (path, s))
        env.append((name, value))
    return env


def lookup(env, name):
    value = None
    for k, v in env:
        if k == name:
            value = v
    return value


def expand(word, env):
    """One word of an Exec line: $VAR alone splits, ${VAR} does not."""
    m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
    if m:
        return shlex.split(lookup(env, m.group(1)) or "")
    out, i = "", 0
    while i < len(word):
        if word.startswith("$$", i):
            out += "$"
            i += 2
        elif word.startswith("${", i):
            j = word.find("}", i)
            if j < 0:
                fail("unterminated ${ in %r" % word)
            out += lookup(env, word[i + 2:j]) or ""
            i = j + 1
        elif word[i] == "$":
            fail("$ inside a word is not expanded by systemd: %r" % word)
        else:
            out += word[i]
            i += 1
    return [out]


def exec_argv(line, env):
    if "\\" in line or re.search(r"%[^%]", line.replace("%%", "")):
        fail("backslashes and specifiers are not understood: %r" % line)
    words = shlex.split(line.replace("%%", "%"))
    if not words or words[0][0] in "-@:+!|" or ";" in words:
        fail("prefixes and ; are not understood: %r" % line)
    argv = []
    for w in words:
        argv += expand(w, env)
    if not argv[0].startswith("/"):
        fail("not an absolute path: %r" % argv[0])
    return argv


def main():
    if len(sys.argv) < 2:
        fail("usage: unitexec.py UNIT [ENVFILE] [OLD=NEW]...")
    unit = read_unit(sys.argv[1])
    rest = sys.argv[2:]
    envfile = rest.pop(0) if rest and "=" not in rest[0] else None
    subst = [a.split("=", 1) for a in rest]
    used = set()
    out = []
    if "Service" in unit:
        service = unit["Service"]
        env = []
        for k, v in service:
            if k == "Environment":
                env += [tuple(a.split("=", 1)) for a in shlex.split(v)]
        named = [v for k, v in service if k == "EnvironmentFile"]
        if len(named) > 1:
            fail("more than one EnvironmentFile=")
        out.append("unit_envfile=%s" % shlex.quote(named[0] if named else ""))
        if named and envfile:
            env += read_envfile(envfile)
        out.append("unit_env=(%s)" % " ".join(
            shlex.quote("%s=%s" % kv) for kv in env))

        def substitute(argv):
            res = []
            for a in argv:
                for i, (old, new) in enumerate(subst):
                    if a == old:
                        a = new
                        used.add(i)
                    elif a == "--filter=" + old:
                        a = "--filter=" + new
                        used.add(i)
                res.append(a)
            return res

        pre = [substitute(exec_argv(v, env))
               for k, v in service if k == "ExecStartPre"]
        out.append("unit_pre_count=%d" % len(pre))
        for i, argv in enumerate(pre):
            out.append("unit_pre_%d=(%s)" % (
                i, " ".join(shlex.quote(a) for a in argv)))
        start = [v for k, v in service if k == "ExecStart"]
        if len(start) != 1:
            fail("%d ExecStart= lines" % len(start))
        out.append("unit_start=(%s)" % " ".join(
            shlex.quote(a) for a in substitute(exec_argv(start[0], env))))
    if "Socket" in unit:
        sock = unit["Socket"]
        out.append("unit_listen=(%s)" % " ".join(
            shlex.quote(v) for k, v in sock if k == "ListenStream"))
        out.append("unit_accept=%s" % shlex.quote(
            lookup(sock, "Accept") or "no"))
    for i, (old, new) in enumerate(subst):
        if i not in used:
            fail("%s is in no command of %s" % (old, sys.argv[1]))
    print("\n".join(out))


main()
