#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum --diff and --blocks: the ranges two images differ in, every
# block's digest, and an image compared with the --blocks manifest
# saved from an earlier image, as --diff of the two images would, and
# manifests that are not right refused.

load "$top_srcdir/tests/helpers"
bats_require_minimum_version 1.5.0

# 2 MiB + 12345 bytes: data, zero runs (holes), a short last block.
BASE='2109497;d:0+300K:a;d:1M+200K:b;d:2M+12345:c'

setup_file () {
  local f=$BATS_FILE_TMPDIR
  "$MKIMAGE" "$BASE" "$f/base.img"
  "$NBDSUM" --blocks "$f/base.img" > "$f/base.blocks"
  "$NBDSUM" --blocks --json "$f/base.img" > "$f/base.json"
  disk40_build
}

setup () {
  base="$BATS_FILE_TMPDIR/base.img"
  blocks="$BATS_FILE_TMPDIR/base.blocks"
  json="$BATS_FILE_TMPDIR/base.json"
  cd "$BATS_TEST_TMPDIR"
  export base blocks json
  disk40_vars
}

# The ranges where images $1 and $2 differ in blocks of $4 bytes
# hashed with $3, from the reference's block digests: the oracle.
reference_ranges () {
  "$PYTHON" - "$(reference --blocks "$3" "$4" "$1")" \
    "$(reference --blocks "$3" "$4" "$2")" "$(stat -c %s "$1")" \
    "$(stat -c %s "$2")" "$4" <<'PY'
import sys
da, db = sys.argv[1], sys.argv[2]
sa, sb, bs = map(int, sys.argv[3:6])
na, nb = -(-sa // bs), -(-sb // bs)
n = len(da) // na if na else (len(db) // nb if nb else 0)
ranges = []
def add(start, end):
    if ranges and ranges[-1][1] == start:
        ranges[-1][1] = end
    else:
        ranges.append([start, end])
for i in range(min(na, nb)):
    if da[i * n:(i + 1) * n] != db[i * n:(i + 1) * n]:
        add(i * bs, min((i + 1) * bs, max(sa, sb)))
if sa != sb:
    start = min(sa, sb)
    if ranges and ranges[-1][1] > start:
        start = ranges[-1][1]
    add(start, max(sa, sb))
for s, e in ranges:
    print(s, e - s)
PY
}

# Copy base.img to b.img and change it with the qemu-io commands given
# (or truncate -s SIZE, for "size=SIZE").
variant () {
  local args=() c
  cp "$base" b.img
  for c in "$@"; do
    case $c in
      size=*) truncate -s "${c#size=}" b.img ;;
      *) args+=(-c "$c") ;;
    esac
  done
  if [ ${#args[@]} -gt 0 ]; then
    qemu-io -f raw b.img "${args[@]}" >/dev/null
  fi
}

# --diff against the manifests (text, JSON, and the text one through a
# pipe) prints what --diff of the images prints, and the reference's
# ranges; $1 is the exit status expected.
same_as_images () {
  local want_status=$1 images ref
  run "$NBDSUM" --diff "$base" b.img
  [ "$status" -eq "$want_status" ]
  images=$(grep -vE '^nbdsum: ' <<< "$output" || :)
  ref=$(reference_ranges "$base" b.img sha256 65536)
  echo "images: $images"
  echo "reference: $ref"
  [ "$images" = "$ref" ]
  for m in "$blocks" "$json"; do
    run "$NBDSUM" --diff --manifest="$m" b.img
    echo "$m: $output"
    [ "$status" -eq "$want_status" ]
    [ "$(grep -vE '^nbdsum: ' <<< "$output" || :)" = "$images" ]
    if [ "$want_status" -eq 1 ]; then
      [[ "$output" = *"nbdsum: $m and b.img differ in "* ]]
    fi
  done
  run bash -c 'cat "$blocks" | "$NBDSUM" --diff --manifest=- b.img 2>/dev/null'
  [ "$status" -eq "$want_status" ]
  [ "$output" = "$images" ]
}

@test "nbdsum-diff: unchanged, one block, the first and the last (short) block" {
  variant
  same_as_images 0
  variant 'write -P 7 100000 1'
  same_as_images 1
  [ "$output" = "65536 65536" ]
  variant 'write -P 7 0 1'
  same_as_images 1
  [ "$output" = "0 65536" ]
  variant 'write -P 7 2109496 1'
  same_as_images 1
  [ "$output" = "2097152 12345" ]
  # Several runs, one across two blocks.
  variant 'write -P 1 65536 1' 'write -P 2 1200000 100000' \
    'write -P 3 2100000 10'
  same_as_images 1
  [ "$output" = "65536 65536
1179648 131072
2097152 12345" ]
}

@test "nbdsum-diff: the size grown or shrunk" {
  # Grown with zeros: the short block is now a full one.
  variant size=3M
  same_as_images 1
  [ "$output" = "2097152 1048576" ]
  variant size=3145733 'write -P 9 3145728 5'
  same_as_images 1
  # Shrunk, to inside a block and to a block boundary.
  variant size=1500000
  same_as_images 1
  variant size=1M
  same_as_images 1
  [ "$output" = "1048576 1060921" ]
  variant size=0
  same_as_images 1
  [ "$output" = "0 2109497" ]
}

@test "nbdsum-diff: zero runs: data written in one, a data block zeroed" {
  variant 'write -P 5 500000 1'
  same_as_images 1
  [ "$output" = "458752 65536" ]
  variant 'write -z 0 64K' 'write -P 0 1048576 65536'
  same_as_images 1
  [ "$output" = "0 65536
1048576 65536" ]
  # A run zeroed, its neighbours not.
  variant 'write -z 65536 128K'
  same_as_images 1
  [ "$output" = "65536 131072" ]
}

@test "nbdsum-diff: another digest and block size, taken from the manifest" {
  "$NBDSUM" --blocks -d sha1 --block-size 4K "$base" > sha1.blocks
  "$NBDSUM" --blocks --json -d sha1 --block-size 4K "$base" > sha1.json
  variant 'write -P 1 5000 1' 'write -P 2 1200000 10000' size=2109500
  run "$NBDSUM" --diff -d sha1 --block-size 4K "$base" b.img
  [ "$status" -eq 1 ]
  images=$(grep -vE '^nbdsum: ' <<< "$output")
  [ "$images" = "$(reference_ranges "$base" b.img sha1 4096)" ]
  for m in sha1.blocks sha1.json; do
    run "$NBDSUM" --diff --manifest="$m" b.img
    [ "$status" -eq 1 ]
    [ "$(grep -vE '^nbdsum: ' <<< "$output")" = "$images" ]
    [[ "$output" = *"compared in 4096 byte blocks)"* ]]
    # -d and --block-size may repeat the manifest's, not contradict it.
    run "$NBDSUM" --diff -d SHA1 --block-size 4K --manifest="$m" b.img
    [ "$status" -eq 1 ]
    run "$NBDSUM" --diff -d sha256 --manifest="$m" b.img
    echo "$output"
    [ "$status" -eq 2 ]
    [ "$output" = "nbdsum: $m: the manifest was made with sha1, not sha256" ]
    run "$NBDSUM" --diff --block-size 64K --manifest="$m" b.img
    [ "$status" -eq 2 ]
    [[ "$output" = *"made with 4096 byte blocks, not 65536"* ]]
    # In JSON: side A opened, the document's error says why not B.
    run --separate-stderr "$NBDSUM" --json --diff -d sha256 --manifest="$m" b.img
    echo "$output"
    [ "$status" -eq 2 ]
    "$PYTHON" - "$m" "$output" <<'PY'
import json, sys
doc = json.loads(sys.argv[2])
assert sorted(doc["a"]) == ["method", "name", "size"], doc
assert doc["a"]["name"] == sys.argv[1], doc
assert doc["a"]["method"] == "manifest", doc
assert doc["error"] == sys.argv[1] + ": the manifest was made with sha1, not sha256", doc
assert "b" not in doc, doc
PY
  done
  # The client-side hash of B, too.
  run "$NBDSUM" --diff --client-side --manifest=sha1.blocks b.img
  [ "$status" -eq 1 ]
  [ "$(grep -vE '^nbdsum: ' <<< "$output")" = "$images" ]
}

@test "nbdsum-diff: shake128 with 96K blocks, text and JSON" {
  "$NBDSUM" --blocks -d shake128 --block-size 96K "$base" > shake.blocks
  "$NBDSUM" --blocks --json -d SHAKE-128 --block-size 96K "$base" > shake.json
  [ "$(head -n 1 shake.blocks)" = \
    "# shake128 98304 2109497 $(reference shake128 98304 "$base")" ]
  variant 'write -P 1 5000 1' 'write -P 2 1200000 10000' size=2109500
  images=$(reference_ranges "$base" b.img shake128 98304)
  [ -n "$images" ]
  for m in shake.blocks shake.json; do
    run "$NBDSUM" --diff --manifest="$m" b.img
    echo "$output"
    [ "$status" -eq 1 ]
    [ "$(grep -vE '^nbdsum: ' <<< "$output")" = "$images" ]
    [[ "$output" = *"compared in 98304 byte blocks)"* ]]
  done
}

@test "nbdsum-diff: --json of --diff --manifest, and an empty image's manifest" {
  variant 'write -P 7 100000 1'
  run bash -c '"$NBDSUM" --json --diff --manifest="$json" b.img > out.json'
  [ "$status" -eq 1 ]
  cat out.json
  /usr/bin/python3 -m json.tool out.json >/dev/null
  "$PYTHON" - "$json" <<'PY'
import json, sys
doc = json.load(open("out.json"))
assert doc["a"] == {"name": sys.argv[1], "method": "manifest",
                    "size": 2109497}, doc
assert doc["b"]["name"] == "b.img" and doc["b"]["size"] == 2109497, doc
assert doc["ranges"] == [{"offset": 65536, "length": 65536}], doc
PY
  # A failed manifest is side A's error.
  echo junk > junk.blocks
  run bash -c '"$NBDSUM" --json --diff --manifest=junk.blocks b.img > out.json'
  [ "$status" -eq 2 ]
  "$PYTHON" -c '
import json
doc = json.load(open("out.json"))
assert list(doc) == ["a"] and "not a manifest" in doc["a"]["error"], doc'
  truncate -s 0 empty.img
  "$NBDSUM" --blocks empty.img > empty.blocks
  [ "$(cat empty.blocks)" = "# sha256 65536 0 $(reference sha256 65536 empty.img)" ]
  run "$NBDSUM" --diff --manifest=empty.blocks empty.img
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  run --separate-stderr "$NBDSUM" --diff --manifest=empty.blocks b.img
  [ "$status" -eq 1 ]
  [ "$output" = "0 2109497" ]
  # Upper-case hex and the manifest through a pipe that is not stdin.
  variant 'write -P 7 100000 1'
  awk 'NR > 1 && $3 != "zero" { $3 = toupper($3) } 1' "$blocks" \
    > upper.blocks
  grep -q '^0 65536 [0-9A-F]*[A-F][0-9A-F]*$' upper.blocks
  run --separate-stderr "$NBDSUM" --diff --manifest=<(cat upper.blocks) b.img
  [ "$status" -eq 1 ]
  [ "$output" = "65536 65536" ]
}

@test "nbdsum-diff: usage: --manifest needs --diff and one image" {
  run "$NBDSUM" --manifest="$blocks" "$base"
  [ "$status" -eq 2 ]
  [[ "$output" = *"--manifest only goes with --diff"* ]]
  run "$NBDSUM" --diff --manifest="$blocks" "$base" "$base"
  [ "$status" -eq 2 ]
  [[ "$output" = *"--diff --manifest=FILE needs one image"* ]]
  run "$NBDSUM" --diff --manifest=nosuch.blocks "$base"
  [ "$status" -eq 2 ]
  [ "$output" = "nbdsum: nosuch.blocks: No such file or directory" ]
  # A manifest is never sniffed: given as an image, it is one.
  run --separate-stderr "$NBDSUM" --diff "$blocks" "$base"
  [ "$status" -eq 1 ]
  [[ "$output" = "0 "* ]]
}

@test "nbdsum-diff: malformed, truncated or inconsistent manifests exit 2, print nothing" {
  mkdir bad
  "$PYTHON" - "$blocks" "$json" "$base" <<'PY'
import json, sys
full = open(sys.argv[1]).read()
root = full.split("\n", 1)[0].split()[4]
# The text cases are of a manifest as nbdsum wrote them before they
# carried a checksum (still read): each tests a check of its own.
text = full.replace(" %s\n" % root, "\n", 1)
doc = json.load(open(sys.argv[2]))
lines = text.splitlines(keepends=True)
head, body = lines[0], lines[1:]
bad = {}

def t(name, content, want):
    bad[name] = (content.encode() if isinstance(content, str) else content,
                 want)

def j(name, d, want, **kw):
    t(name, json.dumps(d, **kw), want)

def jcopy():
    return json.loads(json.dumps(doc))

def rep(old, new, count=1):
    assert old in text, old
    return text.replace(old, new, count)

# Text.
t("empty", "", "empty: not a manifest")
t("header-only", head, "end at offset 0, before the image's end at 2109497")
t("no-header", "".join(body), "not a manifest of nbdsum --blocks")
t("unknown-digest", rep("# sha256", "# nosuch"), "unknown digest")
t("block-size-65537", rep(" 65536 2109497", " 65537 2109497"),
  "block size 65537: ")
t("block-size-0", rep(" 65536 2109497", " 0 2109497"), "block size 0: ")
t("size-larger", rep("2109497\n", "2109498\n"),
  "the block at offset 2097152 is 12346 bytes long, not 12345")
t("size-smaller", rep("2109497\n", "2109496\n"),
  "the block at offset 2097152 is 12344 bytes long, not 12345")
t("header-extra-field", rep("2109497\n", "2109497 %s x\n" % root),
  "not a manifest header")
t("header-bad-checksum", rep("2109497\n", "2109497 x\n"),
  "a sha256 digest has 64 hex digits, not 1")
# With the checksum: any digest changed, or the checksum, is refused.
t("checksum-block-changed", full.replace(body[0].split()[2], "00" * 32, 1),
  "its block digests give the checksum ")
t("checksum-changed", full.replace(root, "ff" + root[2:], 1),
  "not the ff%s it carries: corrupt or edited" % root[2:])
t("header-missing-field", rep(" 65536 2109497", " 65536"),
  "not a manifest header")
t("header-no-space", rep("# sha256", "#sha256"), "not a manifest header")
t("swapped", head + body[1] + body[0] + "".join(body[2:]),
  "line 2: offset 65536, expected 0")
t("duplicated", head + body[0] + "".join(body), "line 3: offset 0, expected 65536")
t("gap", head + "".join(body[:2] + body[3:]), "line 4: offset 196608, expected 131072")
t("last-missing", head + "".join(body[:-1]), "before the image's end at 2109497")
t("cut-mid-line", text[:-10], "truncated: no newline at its end")
t("cut-no-newline", text[:-1], "truncated: no newline at its end")
t("short-block", rep("65536 65536 ", "65536 65535 "),
  "the block at offset 65536 is 65536 bytes long, not 65535")
t("long-last-block", rep("2097152 12345 ", "2097152 65536 "),
  "is 12345 bytes long, not 65536")
t("zero-run-partial", rep(" 720896 zero", " 720895 zero"), "is not whole")
t("zero-run-empty", rep("327680 720896 zero", "327680 0 zero"),
  "is not whole")
t("zero-run-beyond", head + "".join(body[:-2]) + "1310720 851968 zero\n",
  "is not whole 65536 byte blocks within the image's 2109497 bytes")
t("line-after-end", text + "2109497 0 zero\n", "beyond the image's size")
t("hex-short", rep(body[0], body[0][:-3] + "\n"), "64 hex digits, not 62")
t("hex-not-hex", rep(body[0], body[0][:-2] + "g\n"), "invalid hex digest")
t("hex-sha1-length", rep(body[0], body[0][:len("0 65536 ") + 40] + "\n"),
  "64 hex digits, not 40")
t("zero-capital", rep(" zero", " ZERO"), "hex digits, not 4")
t("leading-zero", rep("\n65536 65536", "\n065536 65536"), "not a manifest line")
t("plus-sign", rep("\n65536 65536", "\n+65536 65536"), "not a manifest line")
t("negative", rep("\n65536 65536", "\n-65536 65536"), "not a manifest line")
t("overflow", rep("\n65536 65536", "\n99999999999999999999 65536"),
  "not a manifest line")
t("two-spaces", rep("\n65536 65536", "\n65536  65536"), "not a manifest line")
t("tab", rep("\n65536 65536", "\n65536\t65536"), "not a manifest line")
t("trailing-space", rep(" zero\n", " zero \n"), "not a manifest line")
t("crlf", text.replace("\n", "\r\n"), "not a manifest header")
t("blank-line-at-end", text + "\n", "not a manifest line")
t("nul-byte", rep("\n65536 65536", "\n65536\0 65536"), "binary data")
t("long-line", rep(body[0], body[0][:-1] + "0" * 1000 + "\n"), "too long")
t("binary-after-header", b"# sha256 65536 1000\n" + bytes(range(256)) * 4,
  "binary data")
t("raw-image", open(sys.argv[3], "rb").read(4096 * 4),
  "not a manifest of nbdsum --blocks")

# JSON.
d = json.dumps(doc)
t("json-cut", d[:len(d) // 2], "")
t("json-cut-end", d[:-1], "")
t("json-garbage-after", d + "x", "more after the end of the document")
t("json-two-documents", d + d, "more after the end of the document")
t("json-top-array", "[" + d + "]", "not a manifest of nbdsum --blocks")
# A string that overflows inside a 4-byte character: one message.
x = jcopy(); x["name"] = "a" * 65533 + "\U0001F600"
j("json-long-name-utf8", x, "a string or number is too long")
x = jcopy(); x["error"] = "Input/output error"
j("json-error", x, "the --blocks run that wrote it failed: Input/output error")
x = jcopy(); x["interrupted"] = "SIGINT"
j("json-interrupted", x, "was interrupted: SIGINT")
j("json-failed-run", {"name": "x.img", "error": "No such file or directory"},
  "failed: No such file or directory")
x = jcopy(); del x["blocks"]
j("json-no-blocks", x, "no \"blocks\"")
x = {"blocks": doc["blocks"]}; x.update({k: v for k, v in doc.items() if k != "blocks"})
j("json-blocks-first", x, "must come before \"blocks\"")
t("json-repeated-key", d.replace('"size": 2109497', '"size": 2109497, "size": 2109497'),
  "\"size\" is repeated")
x = jcopy(); x["colour"] = "red"
j("json-unknown-key", x, "unknown key \"colour\"")
x = jcopy(); x["blocks"][0]["colour"] = 1
j("json-unknown-block-key", x, "unknown key \"colour\" in a block")
x = jcopy(); x["blocks"][0]["zero"] = True
j("json-hash-and-zero", x, "either \"hash\" or \"zero\"")
x = jcopy(); del x["blocks"][0]["offset"]
j("json-no-offset", x, "a block needs")
x = jcopy(); z = [b for b in x["blocks"] if "zero" in b][0]; z["zero"] = False
j("json-zero-false", x, "\"zero\" must be true")
x = jcopy(); x["blocks"][0]["offset"] = "0"
j("json-offset-string", x, "\"offset\" must be a whole number")
x = jcopy(); x["blocks"][1]["length"] = 65536.0
j("json-length-float", x, "\"length\" must be a whole number")
x = jcopy(); x["size"] = -1
j("json-size-negative", x, "\"size\" must be a whole number")
t("json-size-exponent", d.replace('"size": 2109497', '"size": 2.109497e6'),
  "\"size\" must be a whole number")
x = jcopy(); x["checksum"] = "ee" + root[2:]
j("json-checksum-changed", x, "not the ee%s it carries" % root[2:])
x = jcopy(); x["blocks"][0]["hash"] = "00" * 32
j("json-checksum-block-changed", x, "corrupt or edited")
x = {k: v for k, v in doc.items() if k != "checksum"}; x["checksum"] = root
j("json-checksum-after-blocks", x, "\"checksum\" must come before \"blocks\"")
x = jcopy(); x["zero-hash"] = "00" * 32
j("json-zero-hash", x, "\"zero-hash\" is not the digest of a zero block")
x = jcopy(); x["blocks"][0], x["blocks"][1] = x["blocks"][1], x["blocks"][0]
j("json-swapped", x, "offset 65536, expected 0")
x = jcopy(); del x["blocks"][3]
j("json-gap", x, "expected 196608")
x = jcopy(); del x["blocks"][-1]
j("json-last-missing", x, "truncated?")
x = jcopy(); x["size"] = 2109498
j("json-size-larger", x, "the block at offset 2097152 is 12346 bytes long, not 12345")
x = jcopy(); x["digest"] = "sha1"; del x["zero-hash"]
j("json-digest-sha1", x, "a sha1 digest has 40 hex digits, not 64")
x = jcopy(); x["block-size"] = 65537; del x["zero-hash"]
j("json-block-size", x, "block size 65537: ")
x = jcopy(); x["blocks"] = {}
j("json-blocks-object", x, "expected '['")
x = jcopy(); x["blocks"].append({"offset": 2109497, "length": 1, "hash": "00" * 32})
j("json-block-after-end", x, "beyond the image's size")
t("json-lone-surrogate", d.replace('"name": "', '"name": "\\ud800', 1),
  "lone surrogate")
t("json-raw-control", d.replace('"name": "', '"name": "\x01', 1),
  "control character in a string")
t("json-bad-escape", d.replace('"name": "', '"name": "\\x', 1),
  "invalid escape")
t("json-trailing-comma", d.replace("]", ",]"), "expected a block object")
t("json-nul-escape", d.replace('"name": "', '"name": "\\u0000', 1),
  "invalid \\u escape")

with open("bad/WANT", "w") as f:
    for name, (content, want) in sorted(bad.items()):
        open("bad/" + name, "wb").write(content)
        f.write("%s\t%s\n" % (name, want))
PY
  local name want n=0
  while IFS=$'\t' read -r name want; do
    run --separate-stderr "$NBDSUM" --diff --manifest="bad/$name" "$base"
    echo "$name: status $status; stdout: $output; stderr: $stderr"
    [ "$status" -eq 2 ]
    [ -z "$output" ]
    [[ "$stderr" = "nbdsum: bad/$name: "*"$want"* ]]
    # One message, and never about B: nothing was hashed.
    [ "${#stderr_lines[@]}" -eq 1 ]
    n=$((n + 1))
  done < bad/WANT
  [ "$n" -ge 70 ]
}

@test "nbdsum-diff: the JSON manifest may be formatted otherwise and escape its strings" {
  variant 'write -P 7 100000 1'
  "$PYTHON" - "$json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["name"] = "a \"quoted\" \\ name\n\u00e9\U0001d11e"
# Compact, \u escapes for everything not ASCII; keys reordered, with
# "blocks" still after the header.
blocks = doc.pop("blocks")
d = dict(reversed(list(doc.items())))
d["blocks"] = blocks
open("compact.json", "w").write(json.dumps(d, separators=(",", ":")))
open("indented.json", "w").write(json.dumps(d, indent=8, ensure_ascii=False))
PY
  for m in compact.json indented.json; do
    run --separate-stderr "$NBDSUM" --diff --manifest="$m" b.img
    echo "$output"
    [ "$status" -eq 1 ]
    [ "$output" = "65536 65536" ]
  done
}

@test "nbdsum-diff: SIGINT while reading a manifest from a pipe" {
  local pid st=0
  mkfifo fifo
  env --default-signal=INT "$NBDSUM" --json --diff --manifest=fifo \
    "$base" >out.json 2>err 3>&- &
  pid=$!
  # A writer that never writes: nbdsum waits in the manifest.
  exec 4>fifo
  wait_until 30 blocked "$pid"
  kill -s INT "$pid"
  wait "$pid" || st=$?
  exec 4>&-
  echo "status $st; stdout: $(cat out.json); stderr: $(cat err)"
  [ "$st" -eq 130 ]
  [ ! -s err ]
  "$PYTHON" -c '
import json
assert json.load(open("out.json")) == {"interrupted": "SIGINT"}'
}

@test "nbdsum-diff: standard input read from where the caller left it" {
  variant 'write -P 7 100000 1'
  # A file on standard input, positioned after a first line.
  { echo "first line"; cat "$blocks"; } > with-preamble
  run --separate-stderr bash -c '
    { read -r first; echo "read: $first" >&2
      "$NBDSUM" --diff --manifest=- b.img; } < with-preamble'
  echo "$output / $stderr"
  [ "$status" -eq 1 ]
  [ "$output" = "65536 65536" ]
}

@test "nbdsum-diff: --diff finds exactly the ranges written" {
  cp "$disk40" a.img
  cp "$disk40" b.img
  run "$NBDSUM" --diff a.img b.img
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  # One byte, a run across two blocks, and a block at the end.
  qemu-io -f raw b.img -c 'write -P 1 100 1' -c 'write -P 2 5M 100K' \
    -c 'write -P 3 41811968 1' >/dev/null
  run "$NBDSUM" --diff a.img b.img
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(grep -E '^[0-9]+ [0-9]+$' <<< "$output")" = "0 65536
5242880 131072
41811968 65536" ]
  [[ "$output" = *"differ in 262144 bytes (3 ranges"* ]]
  # The summary is a notice: not with -q, not beside --json's document.
  run --separate-stderr "$NBDSUM" --diff -q a.img b.img
  [ "$status" -eq 1 ]
  [ -z "$stderr" ]
  run --separate-stderr "$NBDSUM" --diff --json a.img b.img
  [ "$status" -eq 1 ]
  [ -z "$stderr" ]
  [[ "$output" = *'"differing-bytes": 262144'* ]]
}

@test "nbdsum-diff: --diff with shake256 and 96K blocks gives 96K ranges" {
  cp "$disk40" a.img
  cp "$disk40" b.img
  # A byte in block 0, 100K across blocks 53 and 54, the last byte (in
  # the short last block, 64K).
  qemu-io -f raw b.img -c 'write -P 1 100 1' -c 'write -P 2 5M 100K' \
    -c 'write -P 3 41943039 1' >/dev/null
  run "$NBDSUM" --diff -d shake256 --block-size 96K a.img b.img
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(grep -E '^[0-9]+ [0-9]+$' <<< "$output")" = "0 98304
5210112 196608
41877504 65536" ]
  [[ "$output" = *"differ in 360448 bytes (3 ranges, compared in 98304 byte blocks)"* ]]
  # B hashed client-side, the same way A was.
  qemu-nbd -r -f raw -k "$BATS_TEST_TMPDIR/q.sock" b.img 3>&- &
  wait_until 30 test -S q.sock
  run "$NBDSUM" --diff -d shake256 --block-size 96K a.img \
    "nbd+unix:///?socket=$BATS_TEST_TMPDIR/q.sock"
  wait
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"differ in 360448 bytes (3 ranges"* ]]
}

@test "nbdsum-diff: --diff across servers and sizes, and its errors" {
  cp "$disk40" a.img
  truncate -s 41M b.img
  dd if="$disk40" of=b.img conv=notrunc status=none
  # A is local (server-side), B comes from qemu-nbd (client-side).
  qemu-nbd -r -f raw -k "$BATS_TEST_TMPDIR/q.sock" b.img 3>&- &
  wait_until 30 test -S q.sock
  run "$NBDSUM" --diff a.img "nbd+unix:///?socket=$BATS_TEST_TMPDIR/q.sock"
  wait
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(grep -E '^[0-9]+ [0-9]+$' <<< "$output")" = "41943040 1048576" ]
  run "$NBDSUM" --diff a.img nosuch.img
  [ "$status" -eq 2 ]
  # A usage error is an error (2), not "differ" (1).
  run "$NBDSUM" --diff a.img
  [ "$status" -eq 2 ]
  [[ "$output" = *"--diff needs two images"* ]]
}

# check_blocks DIGEST BLOCK_SIZE: the output of nbdsum --blocks on
# $disk40 has a line per data block with its digest, in order, and runs
# of zero blocks, every block covered once; the block count is left in
# $nblocks.
check_blocks () {
  local digest=$1 bs=$2 blocks zero L n=0 next=0 off len d b
  blocks=$(reference --blocks "$digest" "$bs" "$disk40")
  zero=$(head -c "$bs" /dev/zero | reference --blocks "$digest" "$bs" -)
  L=${#zero}
  [ "${lines[0]}" = "# $digest $bs $(stat -c %s "$disk40") $(reference "$digest" "$bs" "$disk40")" ]
  while read -r off len d; do
    [ "$off" = "#" ] && continue
    [ "$off" -eq "$next" ]
    [ $((off % bs)) -eq 0 ]
    next=$((off + len))
    for ((b = off / bs; b < (off + len + bs - 1) / bs; b++)); do
      if [ "$d" = zero ]; then
        [ "${blocks:$((b * L)):L}" = "$zero" ]
      else
        [ "${blocks:$((b * L)):L}" = "$d" ]
      fi
      n=$((n + 1))
    done
  done <<< "$output"
  [ "$next" -eq "$(stat -c %s "$disk40")" ]
  [ "$n" -eq $(( ${#blocks} / L )) ]
  nblocks=$n
}

@test "nbdsum-diff: --blocks prints every block, zero runs merged" {
  run "$NBDSUM" --blocks "$disk40"
  [ "$status" -eq 0 ]
  echo "$output" | head -n 5
  # Data blocks carry their digest, in order; zero blocks are runs.
  check_blocks sha256 65536
  [ "$nblocks" -eq 640 ]
  [[ "$output" = *$'\n3145728 7340032 zero\n'* ]]
}

@test "nbdsum-diff: --blocks with shake128 and 96K blocks, server-side and client-side" {
  local opt
  for opt in "" --client-side; do
    run "$NBDSUM" --blocks $opt -d SHAKE-128 --block-size 96K "$disk40"
    [ "$status" -eq 0 ]
    echo "$output" | head -n 5
    # 40M in 96K blocks: 426 and a 64K one.
    check_blocks shake128 98304
    [ "$nblocks" -eq 427 ]
    [ "${lines[-1]%% *}" = 41877504 ]
    [[ "${lines[-1]}" =~ ^41877504\ 65536\ [0-9a-f]{32}$ ]]
  done
}

@test "nbdsum-diff: --diff exits 2, not 1 (\"differ\"), when standard output fails" {
  local b="$BATS_TEST_TMPDIR/b.img"
  cp "$disk40" "$b"
  printf x | dd of="$b" bs=1 seek=100000 conv=notrunc status=none
  export b
  # Images that differ (text ranges), and identical ones (JSON).
  for args in '"$disk40" "$b"' '--json "$disk40" "$disk40"'; do
    run --separate-stderr bash -c "\"\$NBDSUM\" --diff $args > /dev/full"
    echo "$args: status $status: $stderr"
    [ "$status" -eq 2 ]
    [[ "$stderr" = *"nbdsum: write error: No space left on device"* ]]
  done
}

@test "nbdsum-diff: standard input as the image of --diff or --blocks is a usage error" {
  run --separate-stderr "$NBDSUM" --blocks - < "$disk40"
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  [ "$stderr" = "nbdsum: -: standard input cannot be an image with --blocks (save it to a file first)" ]
  for args in "- $disk40" "$disk40 -"; do
    run --separate-stderr "$NBDSUM" --diff $args < "$disk40"
    [ "$status" -eq 2 ]
    [ "$stderr" = "nbdsum: -: standard input cannot be an image with --diff (save it to a file first)" ]
  done
}
