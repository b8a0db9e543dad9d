#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum --json: one valid document per run, in every mode, with
# failed inputs and their messages, names that need escaping, and
# interrupted runs.

load "$top_srcdir/tests/helpers"

setup_file () {
  "$MKIMAGE" '8M;d:0+1M:a;z:2M+1M;d:5M+100000:b' "$BATS_FILE_TMPDIR/disk.img"
  "$MKIMAGE" '300000;d:0+300000:c' "$BATS_FILE_TMPDIR/small.img"
  disk40_build
}

setup () {
  disk="$BATS_FILE_TMPDIR/disk.img"
  small="$BATS_FILE_TMPDIR/small.img"
  disk40_vars
  cd "$BATS_TEST_TMPDIR"
  export disk small
}

teardown () {
  local p
  if [ -f "$BATS_TEST_TMPDIR/nbdkit.pid" ]; then
    p=$(cat "$BATS_TEST_TMPDIR/nbdkit.pid")
    ! ours "$p" || kill "$p" 2>/dev/null || :
  fi
}

# FILE holds exactly one JSON document, strict (no raw control
# characters in strings) and in valid UTF-8.
valid_json () {
  /usr/bin/python3 -m json.tool "$1" >/dev/null
}

@test "nbdsum-json: one document for several inputs, a failed one in the middle" {
  run bash -c '"$NBDSUM" --json -d sha1 "$disk" nosuch.img - "$small" \
    < "$small" > out.json 2> err'
  cat out.json err
  [ "$status" -eq 1 ]
  valid_json out.json
  # stderr keeps its message.
  [ "$(cat err)" = "nbdsum: nosuch.img: No such file or directory" ]
  "$PYTHON" - "$disk" "$small" "$(reference sha1 65536 "$disk")" \
    "$(reference sha1 65536 "$small")" <<'PY'
import json, sys
disk, small, want_disk, want_small = sys.argv[1:]
doc = json.load(open("out.json"))
assert set(doc) == {"inputs", "failed"}, doc
rows = doc["inputs"]
assert [r["name"] for r in rows] == [disk, "nosuch.img", "-", small], rows
assert doc["failed"] == 1
r = rows[0]
assert r == {"name": disk, "checksum": want_disk, "digest": "sha1",
             "block-size": 65536, "size": 8 << 20, "method": "server-side",
             "spot-checked": 16, "root-checked": True, "format": "raw", "seconds": r["seconds"]}, r
assert isinstance(r["seconds"], float) and r["seconds"] >= 0
assert rows[1] == {"name": "nosuch.img",
                   "error": "No such file or directory"}, rows[1]
assert rows[2]["checksum"] == want_small and rows[2]["method"] == "stream"
assert rows[2]["size"] == 300000 and rows[2]["format"] == "raw", rows[2]
assert rows[3]["checksum"] == want_small
assert rows[3]["method"] == "server-side"
PY
  # Exit status as without --json.
  run "$NBDSUM" --json "$disk"
  [ "$status" -eq 0 ]
}

# spot-checked OPTION... -- WANT...: nbdsum --json OPTION... on disk and
# small gives their checksums, and spot-checked WANT each ("-": none).
spot_checked () {
  local -a opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  "$NBDSUM" --json "${opts[@]}" "$disk" "$small" > out.json
  "$PYTHON" - "$(reference sha256 65536 "$disk")" \
    "$(reference sha256 65536 "$small")" "$@" <<'PY'
import json, sys
want_sums, want = sys.argv[1:3], sys.argv[3:]
rows = json.load(open("out.json"))["inputs"]
got = [str(r.get("spot-checked", "-")) for r in rows]
assert got == want, (got, want)
if "plain" not in rows[0]:
    assert [r["checksum"] for r in rows] == want_sums, rows
PY
}

@test "nbdsum-json: spot-checked: 16 blocks, --spot-check=N, all of a small image, 0 without" {
  # small.img has 5 blocks.
  spot_checked -- 16 5
  spot_checked -j 2 -- 16 5
  spot_checked --spot-check=3 -- 3 3
  spot_checked --spot-check=65536 -- 128 5
  spot_checked --no-spot-check -- 0 0
  spot_checked --spot-check=0 -- 0 0
  spot_checked --plain -- 0 0
  spot_checked --client-side -- - -
  # A server that serves only views: the image cannot be read.
  run nbdkit -U - --filter="$BLKHASH_FILTER" file "$disk" \
    blkhash-views-only=true --run '"$NBDSUM" --json "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"\"checksum\": \"$(reference sha256 65536 "$disk")\""*'"method": "server-side", "spot-checked": 0,'* ]]
}

@test "nbdsum-json: a failed input's error is every message printed for it" {
  # A blkhash view is refused with two messages; nothing is hashed.
  run bash -c '"$NBDSUM" --json "$disk" "nbd://localhost/x@blkhash" \
    > out.json 2> err'
  cat out.json err
  [ "$status" -eq 1 ]
  valid_json out.json
  "$PYTHON" - "$disk" <<'PY'
import json, sys
doc = json.load(open("out.json"))
err = [l.split(": ", 2)[2] for l in open("err").read().splitlines()]
rows = doc["inputs"]
assert rows[0] == {"name": sys.argv[1],
                   "error": "not hashed: an input is a blkhash view"}, rows
assert rows[1]["error"] == "\n".join(err), (rows[1], err)
assert "is a blkhash view" in rows[1]["error"]
assert "use the image's URI instead" in rows[1]["error"]
assert doc["failed"] == 2
PY
  # A server read error, as nbdsum prints it.
  run bash -c 'nbdkit -U - --filter=error file "$disk" error-pread=EIO \
    error-pread-rate=1 --run "\"\$NBDSUM\" --json \"\$uri\"" \
    > out.json 2> err'
  cat out.json err
  [ "$status" -eq 1 ]
  valid_json out.json
  "$PYTHON" - <<'PY'
import json
doc = json.load(open("out.json"))
(row,) = doc["inputs"]
assert "checksum" not in row and "Input/output error" in row["error"], row
assert row["error"] in open("err").read()
PY
}

@test "nbdsum-json: names with quotes, backslashes, control characters, UTF-8 and not" {
  # Each name is a copy of small.img; printf's octal escapes make the
  # bytes, invalid UTF-8 included.
  local names=(
    'quote"d' 'back\slash' $'new\nline' $'tab\there' $'esc\033[0m'
    $'del\177' $'caf\303\251' '日本語' 'ok-𝄞'
    $'latin1-\351' $'overlong-\300\257' $'surrogate-\355\240\200'
    $'truncated-\346\227' $'beyond-\364\220\200\200' $'stray-\200x'
    $'csi-\302\233'
  )
  local n
  mkdir names
  for n in "${names[@]}"; do
    cp "$small" "names/$n"
  done
  want=$(reference sha256 65536 "$small")
  export want
  run bash -c 'cd names && "$NBDSUM" --json -- * > ../out.json'
  cat out.json
  [ "$status" -eq 0 ]
  valid_json out.json
  "$PYTHON" - <<'PY'
import json, os
raw = open("out.json", "rb").read()
raw.decode("utf-8")                      # valid UTF-8 throughout
doc = json.loads(raw)
files = sorted(os.listdir(b"names"))
rows = doc["inputs"]
assert len(rows) == len(files) == 16, (rows, files)
by_bytes = {}
for r in rows:
    assert r["checksum"] == os.environ["want"], r
    if "name-hex" in r:
        b = bytes.fromhex(r["name-hex"])
        try:
            b.decode("utf-8")
            raise AssertionError("name-hex for valid UTF-8: %r" % r)
        except UnicodeDecodeError:
            pass
        # Valid characters are kept; each other byte is U+FFFD.
        assert "\ufffd" in r["name"], r
        assert r["name"].replace("\ufffd", "") == \
            b.decode("utf-8", "ignore"), r
    else:
        b = r["name"].encode("utf-8")
    by_bytes[b] = r
assert sorted(by_bytes) == files, (sorted(by_bytes), files)
# Escapes, not raw control characters.
assert b'"new\\nline"' in raw and b'"tab\\there"' in raw
assert b'"esc\\u001b[0m"' in raw and b'"del\\u007f"' in raw
# C1 controls too (U+009B is a CSI), as nbdsum's messages write them.
assert b'"csi-\\u009b"' in raw
assert b'"quote\\"d"' in raw and b'"back\\\\slash"' in raw
assert "caf\u00e9".encode() in raw and "日本語".encode() in raw
# One U+FFFD per byte that is not part of a character.
r = by_bytes[b"overlong-\xc0\xaf"]
assert r["name"] == "overlong-\ufffd\ufffd", r
assert r["name-hex"] == b"overlong-\xc0\xaf".hex()
assert by_bytes[b"truncated-\xe6\x97"]["name"] == "truncated-\ufffd\ufffd"
assert by_bytes[b"surrogate-\xed\xa0\x80"]["name"] == \
    "surrogate-\ufffd\ufffd\ufffd"
assert by_bytes[b"stray-\x80x"]["name"] == "stray-\ufffdx"
PY
}

@test "nbdsum-json: --check gives each line's verdict and the counts" {
  cp "$small" a.img
  cp "$small" b.img
  cp "$small" c.img
  want=$(reference sha256 65536 "$small")
  {
    echo "$want  a.img"
    echo "$want  b.img"
    echo "not a checksum line"
    echo "$want  gone.img"
    echo "$want  c.img"
  } > SUMS
  echo "$want  a.img" > SUMS2
  printf x | dd of=b.img conv=notrunc status=none
  export want
  run bash -c '"$NBDSUM" -c --json SUMS nosuch.sums SUMS2 > out.json 2> err'
  cat out.json err
  [ "$status" -eq 1 ]
  valid_json out.json
  "$PYTHON" - "$(reference sha256 65536 b.img)" <<'PY'
import json, os, sys
want, got_b = os.environ["want"], sys.argv[1]
doc = json.load(open("out.json"))
assert set(doc) == {"files", "mismatched", "unreadable", "malformed"}, doc
assert (doc["mismatched"], doc["unreadable"], doc["malformed"]) == (1, 1, 1)
f1, f2, f3 = doc["files"]
assert f1["file"] == "SUMS"
assert (f1["lines"], f1["verified"], f1["malformed"]) == (4, 4, 1), f1
assert "error" not in f1
res = f1["results"]
assert [(r["line"], r["name"], r["result"]) for r in res] == [
    (1, "a.img", "OK"), (2, "b.img", "FAILED"),
    (4, "gone.img", "FAILED open or read"), (5, "c.img", "OK")], res
assert all(r["expected"] == want for r in res)
assert res[0]["checksum"] == want and res[0]["block-size"] == 65536
assert res[1]["checksum"] == got_b and res[1]["size"] == 300000
assert "checksum" not in res[2]
assert res[2]["error"] == "No such file or directory", res[2]
# The message on stderr too.
assert "nbdsum: gone.img: No such file or directory" in open("err").read()
assert f2 == {"file": "nosuch.sums", "error": "No such file or directory"}
assert f3["results"][0]["result"] == "OK" and f3["lines"] == 1
PY
  # --quiet leaves out OK lines, --status prints nothing at all.
  run bash -c '"$NBDSUM" -c --json --quiet SUMS > out.json 2>/dev/null'
  [ "$status" -eq 1 ]
  valid_json out.json
  "$PYTHON" -c '
import json
res = json.load(open("out.json"))["files"][0]["results"]
assert [r["result"] for r in res] == ["FAILED", "FAILED open or read"], res'
  run bash -c '"$NBDSUM" -c --json --status SUMS 2>/dev/null'
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  # A file with no checksum line at all fails as a whole.
  echo junk > JUNK
  run bash -c '"$NBDSUM" -c --json JUNK SUMS2 > out.json'
  [ "$status" -eq 1 ]
  valid_json out.json
  "$PYTHON" -c '
import json
f = json.load(open("out.json"))["files"][0]
assert f["results"] == [] and f["lines"] == 0 and f["malformed"] == 1, f
assert f["error"] == "no properly formatted checksum lines found", f'
}

@test "nbdsum-json: --diff gives ranges, counts, digest, block size and both sizes" {
  cp "$disk" a.img
  cp "$disk" b.img
  qemu-io -f raw b.img -c 'write -P 1 100 1' -c 'write -P 2 5M 100K' \
    >/dev/null
  truncate -s 9M b.img
  run "$NBDSUM" --diff a.img b.img
  text=$(grep -E '^[0-9]+ [0-9]+$' <<< "$output")
  export text
  run bash -c '"$NBDSUM" --json --diff --block-size 4K a.img b.img > out.json'
  cat out.json
  [ "$status" -eq 1 ]
  valid_json out.json
  run bash -c '"$NBDSUM" --json --diff a.img b.img > out.json'
  cat out.json
  [ "$status" -eq 1 ]
  valid_json out.json
  "$PYTHON" - <<'PY'
import json, os
doc = json.load(open("out.json"))
assert doc["a"] == {"name": "a.img", "method": "server-side",
                    "size": 8 << 20}, doc["a"]
assert doc["b"] == {"name": "b.img", "method": "server-side",
                    "size": 9 << 20}, doc["b"]
assert doc["digest"] == "sha256" and doc["block-size"] == 65536
ranges = [(r["offset"], r["length"]) for r in doc["ranges"]]
text = [tuple(map(int, l.split())) for l in os.environ["text"].splitlines()]
assert ranges == text == [(0, 65536), (5 << 20, 131072), (8 << 20, 1 << 20)], \
    (ranges, text)
assert doc["differing-bytes"] == sum(l for _, l in ranges)
assert doc["differing-ranges"] == 3
PY
  # Identical: no ranges, exit 0.
  run bash -c '"$NBDSUM" --json --diff a.img a.img > out.json'
  [ "$status" -eq 0 ]
  valid_json out.json
  "$PYTHON" -c '
import json
doc = json.load(open("out.json"))
assert doc["ranges"] == [] and doc["differing-bytes"] == 0, doc
assert doc["differing-ranges"] == 0, doc'
}

@test "nbdsum-json: --diff errors: a side that failed, a view, exit 2" {
  cp "$small" a.img
  run bash -c '"$NBDSUM" --json --diff a.img nosuch.img > out.json'
  cat out.json
  [ "$status" -eq 2 ]
  valid_json out.json
  "$PYTHON" -c '
import json
doc = json.load(open("out.json"))
assert doc["a"]["size"] == 300000, doc
assert doc["b"] == {"name": "nosuch.img",
                    "error": "No such file or directory"}, doc
assert "ranges" not in doc, doc'
  run bash -c '"$NBDSUM" --json --diff nosuch.img a.img > out.json'
  [ "$status" -eq 2 ]
  valid_json out.json
  "$PYTHON" -c '
import json
doc = json.load(open("out.json"))
assert list(doc) == ["a"] and "error" in doc["a"], doc'
  run bash -c '"$NBDSUM" --json --diff a.img "nbd://h/x@blkhash" > out.json'
  [ "$status" -eq 2 ]
  valid_json out.json
  "$PYTHON" -c '
import json
doc = json.load(open("out.json"))
assert doc["a"]["error"].startswith("not hashed"), doc
assert "is a blkhash view" in doc["b"]["error"], doc'
  # A server error while B is hashed: its object says so.
  run bash -c 'nbdkit -U - --filter=error file a.img error-pread=EIO \
    error-pread-rate=1 --run "\"\$NBDSUM\" --json --diff --client-side \
    a.img \"\$uri\"" > out.json'
  cat out.json
  [ "$status" -eq 2 ]
  valid_json out.json
  "$PYTHON" -c '
import json
doc = json.load(open("out.json"))
assert "Input/output error" in doc["b"]["error"], doc'
}

@test "nbdsum-json: --blocks gives a header and the block list" {
  run "$NBDSUM" --blocks "$disk"
  [ "$status" -eq 0 ]
  text=$output
  export text
  run bash -c '"$NBDSUM" --json --blocks "$disk" > out.json'
  [ "$status" -eq 0 ]
  valid_json out.json
  "$PYTHON" - "$disk" "$(reference --blocks sha256 65536 "$disk")" <<'PY'
import hashlib, json, os, sys
disk, ref = sys.argv[1:]
doc = json.load(open("out.json"))
assert list(doc) == ["name", "digest", "block-size", "size", "method",
                     "checksum", "zero-hash", "blocks"], list(doc)
assert doc["name"] == disk and doc["digest"] == "sha256"
assert doc["block-size"] == 65536 and doc["size"] == 8 << 20
assert doc["method"] == "server-side"
zero = hashlib.sha256(bytes(65536)).hexdigest()
assert doc["zero-hash"] == zero
# Every block's digest is the reference's, in order, without gaps.
pos = 0
for b in doc["blocks"]:
    assert b["offset"] == pos, b
    for i in range(b["offset"] // 65536,
                   (b["offset"] + b["length"] + 65535) // 65536):
        d = ref[i * 64:(i + 1) * 64]
        assert d == (zero if b.get("zero") else b["hash"]), (i, b)
    pos += b["length"]
assert pos == 8 << 20
# The same lines as the text manifest.
lines = os.environ["text"].splitlines()
assert lines[0] == "# sha256 65536 %d %s" % (8 << 20, doc["checksum"])
# The checksum is the one the block digests give.
assert doc["checksum"] == hashlib.sha256(bytes.fromhex(ref) +
                                         (8 << 20).to_bytes(8, "little")).hexdigest()
assert lines[1:] == ["%d %d %s" % (b["offset"], b["length"],
                                   "zero" if b.get("zero") else b["hash"])
                     for b in doc["blocks"]]
PY
  # A failed image: its name and why.
  run bash -c '"$NBDSUM" --json --blocks nosuch.img > out.json'
  [ "$status" -eq 1 ]
  valid_json out.json
  "$PYTHON" -c '
import json
doc = json.load(open("out.json"))
assert doc == {"name": "nosuch.img",
               "error": "No such file or directory"}, doc'
}

@test "nbdsum-json: -c, --diff and --blocks are not ignored with --json" {
  # Before, --json -c printed text and --blocks --json lost its header.
  cp "$small" a.img
  "$NBDSUM" a.img > SUMS
  for args in "-c SUMS" "--diff a.img a.img" "--blocks a.img"; do
    run bash -c "\"\$NBDSUM\" --json $args > out.json"
    echo "$args: $status"
    cat out.json
    [ "$status" -eq 0 ]
    valid_json out.json
    [ "$(head -c 1 out.json)" = "{" ]
  done
}

# interrupt_json SIG CONDITION NBDSUM-ARGS...: run nbdsum with the
# default signal actions (a script's background jobs ignore SIGINT) and
# standard input from $stdin, and send it SIG once the shell command
# CONDITION holds (nbdsum has got that far: conditions, not times).
interrupt_json () {
  local sig=$1 cond=$2 pid st=0
  shift 2
  env --default-signal=HUP,INT,PIPE,TERM "$NBDSUM" "$@" \
    <"${stdin:-/dev/null}" >out.json 2>err 3>&- &
  pid=$!
  wait_until 60 eval "$cond"
  kill -s "$sig" "$pid"
  wait "$pid" || st=$?
  echo "status $st"
  cat out.json err
  [ "$st" -eq $((128 + $(kill -l "$sig"))) ]
  valid_json out.json
}

# Clients the slow server below has had (its log filter's lines).
connects () {
  grep -c 'Connect' "$BATS_TEST_TMPDIR/log" 2>/dev/null || :
}

@test "nbdsum-json: an interrupted run still prints one valid document" {
  # Standard input that never ends: nbdsum waits there until the
  # signal, after the first input.
  mkfifo fifo
  exec 4<>fifo
  stdin=fifo
  interrupt_json INT 'grep -q "\"checksum\"" out.json' --json "$small" -
  "$PYTHON" - "$small" <<'PY'
import json, sys
doc = json.load(open("out.json"))
assert doc["interrupted"] == "SIGINT", doc
assert [r["name"] for r in doc["inputs"]] == [sys.argv[1]], doc
assert "failed" not in doc
PY
  # -c: the lines checked before it.
  cp "$small" a.img
  { "$NBDSUM" a.img; echo "$("$NBDSUM" a.img | cut -d' ' -f1)  -"; } > SUMS
  interrupt_json TERM 'grep -q "\"OK\"" out.json' -c --json SUMS
  "$PYTHON" - <<'PY'
import json
doc = json.load(open("out.json"))
assert doc["interrupted"] == "SIGTERM", doc
(f,) = doc["files"]
assert [r["name"] for r in f["results"]] == ["a.img"], f
PY
  exec 4>&-
}

@test "nbdsum-json: --blocks and --diff interrupted while hashing" {
  local n
  # A slow server: each read takes 2 s.  Its log says when a client
  # has come.
  nbdkit_daemon "$BATS_TEST_TMPDIR/nbdkit.pid" --threads=1 \
    -U "$BATS_TEST_TMPDIR/sock" --filter=log --filter=delay file "$small" \
    delay-read=2 logfile="$BATS_TEST_TMPDIR/log"
  uri="nbd+unix:///?socket=$BATS_TEST_TMPDIR/sock"
  # While the server is read.
  interrupt_json INT '[ "$(connects)" -gt 0 ]' --json --blocks "$uri"
  "$PYTHON" - "$uri" <<'PY'
import json, sys
doc = json.load(open("out.json"))
assert doc == {"name": sys.argv[1], "interrupted": "SIGINT"}, doc
PY
  # Once A is hashed: B is opened after it.
  n=$(connects)
  interrupt_json HUP '[ "$(connects)" -gt '"$n"' ]' --json --diff "$small" "$uri"
  "$PYTHON" - <<'PY'
import json
doc = json.load(open("out.json"))
assert list(doc) == ["a", "interrupted"], doc
assert doc["interrupted"] == "SIGHUP" and doc["a"]["size"] == 300000, doc
PY
}

@test "nbdsum-json: --json gives name, checksum, digest, block size, size, seconds" {
  run bash -c '"$NBDSUM" --json -d sha1 "$disk40" - < /dev/null > out.json'
  cat out.json
  [ "$status" -eq 0 ]
  "$PYTHON" - "$disk40" "$(reference sha1 65536 "$disk40")" <<'PY'
import json, sys
rows = json.load(open("out.json"))["inputs"]
assert len(rows) == 2, rows
r = rows[0]
assert r["name"] == sys.argv[1], r
assert r["checksum"] == sys.argv[2], r
assert r["digest"] == "sha1" and r["block-size"] == 65536, r
assert r["size"] == 40 * 1024 * 1024 and r["seconds"] >= 0, r
assert r["method"] == "server-side", r
assert rows[1]["name"] == "-" and rows[1]["size"] == 0, rows[1]
PY
}
