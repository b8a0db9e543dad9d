#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The upload gate, blkhash-expect= (filter/expect.c): a copy of the
# right image into a filtered export passes its flush, a copy of an
# image one byte off fails it, naming both values, for each plain
# digest and for blkhash values; a writer that flushes midway is not
# failed; writers that skip zeros are judged; qemu-img, which ignores
# its flush's error, is caught by the recipe; bad values refuse the
# start; a session that only reads is judged as an import (see
# filter-import.bats), never at its flush; a killed writer is never
# recorded as good; writes through another name, in more than 65,536
# ranges, or racing the flush are judged.  Expected values come from coreutils (plain
# digests) and tests/reference.py (blkhash values) on the images.

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

setup_file () {
  # Data, zeros written as data, a hole; the bad one differs in a byte.
  "$MKIMAGE" '4M;d:0+1M:a;z:1M+64K;d:2M+100000:b;d:3M+1M:c' \
    "$BATS_FILE_TMPDIR/src.img"
  # Mostly holes, ending in data.
  "$MKIMAGE" '8M;d:0+1M:a;d:4M+100000:b;d:7M+1M:c' \
    "$BATS_FILE_TMPDIR/sparse.img"
  for f in src sparse; do
    cp "$BATS_FILE_TMPDIR/$f.img" "$BATS_FILE_TMPDIR/$f-bad.img"
    printf 'X' | dd of="$BATS_FILE_TMPDIR/$f-bad.img" bs=1 seek=2097652 \
      conv=notrunc 2>/dev/null
  done
  write_midway
  write_readflush
  write_scatter
}

setup () {
  src="$BATS_FILE_TMPDIR/src.img"
  bad="$BATS_FILE_TMPDIR/src-bad.img"
  sparse="$BATS_FILE_TMPDIR/sparse.img"
  sparsebad="$BATS_FILE_TMPDIR/sparse-bad.img"
  sums="$BATS_TEST_TMPDIR/upload.sums"
  export src bad sparse sparsebad sums BATS_FILE_TMPDIR
  cmp -s "$src" "$bad" && { echo "the bad image is not bad"; return 1; }
  cmp -s "$sparse" "$sparsebad" && { echo "sparsebad is not bad"; return 1; }
  return 0
}

teardown () {
  kill_servers
}

# The plain digest ALG of FILE, as ALGsum prints it.
plain () {
  "${1}sum" "$2" | cut -d' ' -f1
}

# gate_pair VALUE WANT GOT: nbdcopy --flush of the source into a fresh
# 4M memory disk expecting VALUE passes, of the bad image fails, with
# nbdkit's error naming WANT (expected) and GOT (what arrived).
gate_pair () {
  run serve memory 4M blkhash-expect="$1" -- \
    'nbdcopy --flush "$src" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  ! grep -q "does not match" <<< "$output" || false

  run serve memory 4M blkhash-expect="$1" -- \
    'nbdcopy --flush "$bad" "$uri"'
  echo "$output"
  [ "$status" -ne 0 ]
  grep -F "blkhash: export '': upload does not match blkhash-expect: expected $2, got $3" <<< "$output"
  grep -q "flush.*Input/output error" <<< "$output"
}

@test "expect: sha256 of the right image passes, of a wrong one fails the flush" {
  gate_pair "sha256:$(plain sha256 "$src")" \
    "sha256:$(plain sha256 "$src")" "sha256:$(plain sha256 "$bad")"
}

@test "expect: sha512" {
  gate_pair "sha512:$(plain sha512 "$src")" \
    "sha512:$(plain sha512 "$src")" "sha512:$(plain sha512 "$bad")"
}

@test "expect: md5" {
  gate_pair "md5:$(plain md5 "$src")" \
    "md5:$(plain md5 "$src")" "md5:$(plain md5 "$bad")"
}

@test "expect: sha1, its name and hex in upper case" {
  local want
  want=$(plain sha1 "$src")
  gate_pair "SHA1:${want^^}" "sha1:$want" "sha1:$(plain sha1 "$bad")"
}

@test "expect: blkhash:HEX, the filter's digest and block size" {
  gate_pair "blkhash:$(reference sha256 65536 "$src")" \
    "blkhash-sha256/64K:$(reference sha256 65536 "$src")" \
    "blkhash-sha256/64K:$(reference sha256 65536 "$bad")"
}

@test "expect: blkhash-sha1/1M:HEX, another digest and block size" {
  gate_pair "BLKHASH-sha1/1m:$(reference sha1 1048576 "$src")" \
    "blkhash-sha1/1M:$(reference sha1 1048576 "$src")" \
    "blkhash-sha1/1M:$(reference sha1 1048576 "$bad")"
}

# midway.py URI FILE: write the first half of FILE, flush, write the
# rest, flush; prints each flush's outcome, exits 1 if one failed.
write_midway () {
  cat > "$BATS_FILE_TMPDIR/midway.py" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()
half = len(data) // 2
failed = False
for a, b in ((0, half), (half, len(data))):
    h.pwrite(data[a:b], a)
    try:
        h.flush()
        print("flush after %d: ok" % b)
    except nbd.Error as e:
        print("flush after %d: failed: %s" % (b, e))
        failed = True
h.shutdown()
sys.exit(1 if failed else 0)
PY
}

@test "expect: a writer that flushes midway is not failed; a wrong end is" {
  local want
  want=$(plain sha256 "$src")
  run serve memory 4M blkhash-expect="sha256:$want" -- '"$NBD_PYTHON" "$BATS_FILE_TMPDIR/midway.py" "$uri" "$src"'
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q "flush after 2097152: ok" <<< "$output"
  grep -q "flush after 4194304: ok" <<< "$output"
  ! grep -q "does not match" <<< "$output" || false

  # The bad byte is in the second half.
  run serve memory 4M blkhash-expect="sha256:$want" -- '"$NBD_PYTHON" "$BATS_FILE_TMPDIR/midway.py" "$uri" "$bad"'
  echo "$output"
  [ "$status" -eq 1 ]
  grep -q "flush after 2097152: ok" <<< "$output"
  grep -q "flush after 4194304: failed" <<< "$output"
  grep -F "expected sha256:$want, got sha256:$(plain sha256 "$bad")" <<< "$output"
}

@test "expect: blkhash-expect-at=flush judges the midway flush too" {
  run serve memory 4M blkhash-expect="sha256:$(plain sha256 "$src")" \
    blkhash-expect-at=flush -- '"$NBD_PYTHON" "$BATS_FILE_TMPDIR/midway.py" "$uri" "$src"'
  echo "$output"
  [ "$status" -eq 1 ]
  grep -q "flush after 2097152: failed" <<< "$output"
  grep -q "flush after 4194304: ok" <<< "$output"
}

@test "expect: a sparse image into a fresh disk is judged (nbdcopy, qemu-img --target-is-zero)" {
  local want line
  want=$(plain sha256 "$sparse")
  run serve memory 8M blkhash-expect="sha256:$want" -- \
    'nbdcopy --flush "$sparse" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  run serve memory 8M blkhash-expect="sha256:$want" -- \
    'nbdcopy --flush "$sparsebad" "$uri"'
  echo "$output"
  [ "$status" -ne 0 ]
  grep -F "expected sha256:$want, got sha256:$(plain sha256 "$sparsebad")" <<< "$output"

  # qemu-img writes no zeros: its flush judges the image written in
  # part.  A match records the checksum (only a match does,
  # for a plain digest).
  run serve -v memory 8M blkhash-expect="sha256:$want" \
    blkhash-file="$sums" blkhash-file-name="$sparse" -- \
    'qemu-img convert -n --target-is-zero -f raw -O raw "$sparse" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  ! grep -q "does not match" <<< "$output" || false
  grep -q "upload matches blkhash-expect$" <<< "$output"
  cat "$sums"
  [ "$(sum_hex "$(cat "$sums")")" = "$(reference sha256 65536 "$sparse")" ]

  # A mismatch there is logged (a writer that has not finished looks
  # the same at a flush: it does not fail it), and its line is zeros.
  rm -f "$sums"
  run serve -v memory 8M blkhash-expect="sha256:$want" \
    blkhash-file="$sums" blkhash-file-name="$sparse" -- \
    'qemu-img convert -n --target-is-zero -f raw -O raw "$sparsebad" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q "does not match blkhash-expect yet, but parts of it were not written" <<< "$output"
  grep -F "upload does not match blkhash-expect (at the session's end): expected sha256:$want, got sha256:$(plain sha256 "$sparsebad")" <<< "$output"
  cat "$sums"
  line=$(cat "$sums")
  [[ $(sum_hex "$line") =~ ^0{64}$ ]]
  run "$NBDSUM" -c "$sums"
  echo "$output"
  [ "$status" -ne 0 ]
  grep -q ": FAILED" <<< "$output"
}

@test "expect: qemu-img convert of a wrong image (7.2, 10.0: exits 0); the log and nbdsum -c say so" {
  local want
  want=$(plain sha256 "$src")
  run serve memory 4M blkhash-expect="sha256:$want" blkhash-file="$sums" \
    blkhash-file-name="$src" -- \
    'qemu-img convert -n -f raw -O raw "$bad" "$uri" && "$NBDSUM" -c "$sums"'
  echo "$output"
  # qemu-img 7.2 and 10.0 ignore their flush's error: the recipe's
  # nbdsum -c fails; 11.1 fails itself.
  [ "$status" -ne 0 ]
  grep -F "expected sha256:$want, got sha256:$(plain sha256 "$bad")" <<< "$output"
  grep -q "$src: FAILED\|qemu-img: Failed to flush" <<< "$output"

  run serve memory 4M blkhash-expect="sha256:$want" -- \
    'qemu-img convert -n -f raw -O raw "$bad" "$uri"'
  echo "$output"
  grep -q "upload does not match" <<< "$output"
  if ! grep -q "qemu-img: Failed to flush" <<< "$output"; then
    [ "$status" -eq 0 ]
  else
    [ "$status" -ne 0 ]
  fi

  # The right image passes the recipe.
  rm -f "$sums"
  run serve memory 4M blkhash-expect="sha256:$want" blkhash-file="$sums" \
    blkhash-file-name="$src" -- \
    'qemu-img convert -n -f raw -O raw "$src" "$uri" && "$NBDSUM" -c "$sums"'
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q "$src: OK" <<< "$output"
}

# refused PARAMS... -- MESSAGE: nbdkit with the filter and PARAMS
# refuses to start, and says MESSAGE.
refused () {
  local params=()
  while [ "$1" != "--" ]; do params+=("$1"); shift; done
  run nbdkit -U - --filter="$BLKHASH_FILTER" memory 1M "${params[@]}" \
    --run true
  echo "$output"
  [ "$status" -ne 0 ]
  grep -F "$2" <<< "$output"
}

@test "expect: bad values refuse to start, saying why" {
  local hex64
  hex64=$(printf '%064d' 0)
  refused blkhash-expect="sha3:$hex64" -- \
    "blkhash-expect=sha3:$hex64: unknown algorithm 'sha3'"
  refused blkhash-expect="sha512:$hex64" -- \
    "sha512 takes 128 hex digits, not 64"
  refused blkhash-expect="blkhash-sha1/1M:$hex64" -- \
    "blkhash-sha1/1M takes 40 hex digits, not 64"
  refused blkhash-expect="md5:${hex64:0:31}g" -- "is not hex"
  refused blkhash-expect="$hex64" -- "expected ALG:HEX"
  refused blkhash-expect="blkhash-sha256/3K:$hex64" -- "block size '3K'"
  refused blkhash-expect="sha256:$hex64" blkhash-expect-at=sometimes -- \
    "blkhash-expect-at=sometimes: expected complete or flush"
  # Given twice (a bad value hidden behind a good one), or -at alone.
  refused blkhash-expect=garbage blkhash-expect="sha256:$hex64" -- \
    "blkhash-expect is already given (garbage): give it once"
  refused blkhash-expect-at=flush -- "blkhash-expect-at= needs blkhash-expect="
  refused blkhash-expect="sha256:$hex64" blkhash-expect-spill=lots -- \
    "blkhash-expect-spill=lots: "
  refused blkhash-expect-spill=1G -- \
    "blkhash-expect-spill= needs blkhash-expect="
}

# readflush.py URI BYTES: read the first BYTES of the export and
# flush, writing nothing; prints how the reads and the flush went.
write_readflush () {
  cat > "$BATS_FILE_TMPDIR/readflush.py" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
size = min(h.get_size(), int(sys.argv[2]))
failed = 0
for off in range(0, size, 1 << 20):
    try:
        h.pread(min(1 << 20, size - off), off)
    except nbd.Error:
        failed += 1
print("reads failed:", failed)
if h.can_flush():
    try:
        h.flush()
        print("flush: ok")
    except nbd.Error as e:
        print("flush: failed", e)
h.shutdown()
PY
}

@test "expect: a session that only reads is never judged at its flush; read whole, it is an import" {
  local img="$BATS_TEST_TMPDIR/disk.img" want
  cp "$bad" "$img"
  want=$(plain sha256 "$src")
  # A writable server, a client that reads half of it and flushes: not
  # judged, and said so at its end.
  run serve file "$img" blkhash-expect="sha256:$want" \
    blkhash-file="$sums" -- '"$NBD_PYTHON" "$BATS_FILE_TMPDIR/readflush.py" "$uri" 2097152'
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q "^reads failed: 0$" <<< "$output"
  grep -q "^flush: ok$" <<< "$output"
  ! grep -q "does not match" <<< "$output" || false
  grep -q "export '' was read in part (2097152 of 4194304 bytes read or known zero) and not written: not judged" <<< "$output"
  # Its line holds zeros: the content is not known to match.
  cat "$sums"
  [[ $(sum_hex "$(cat "$sums")") =~ ^0{64}$ ]]

  # Read whole, read-only or not: the read that completes it fails.
  for ro in "" -r; do
    run serve $ro file "$img" blkhash-expect="sha256:$want" -- \
      '"$NBD_PYTHON" "$BATS_FILE_TMPDIR/readflush.py" "$uri" 4194304'
    echo "$output"
    [ "$status" -eq 0 ]
    grep -q "^reads failed: 1$" <<< "$output"
    [ -n "$ro" ] || grep -q "^flush: ok$" <<< "$output"
    grep -q "import does not match blkhash-expect" <<< "$output"
    ! grep -q "upload" <<< "$output" || false
  done
}

# write_then_die URI FILE BYTES: write the first BYTES of FILE, no
# flush, and die by SIGKILL.
write_then_die () {
  "$NBD_PYTHON" - "$@" <<'PY'
import nbd, os, signal, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()[:int(sys.argv[3])]
for off in range(0, len(data), 1 << 20):
    h.pwrite(data[off:off + (1 << 20)], off)
os.kill(os.getpid(), signal.SIGKILL)
PY
}

# Wait up to 60 s for the server's log to match the extended regex RE.
wait_log () {
  local i
  for ((i = 0; i < 600; i++)); do
    grep -Eq "$1" "$err" && return 0
    sleep 0.1
  done
  echo "not in the log: $1"
  cat "$err"
  return 1
}

@test "expect: a killed writer is never recorded as good" {
  local want
  want=$(plain sha256 "$src")
  start_server killed "${KILLED_CLIENT_OPTS[@]}" memory 4M \
    blkhash-expect="sha256:$want" blkhash-file="$sums" \
    blkhash-file-name="$src"
  run write_then_die "$uri" "$src" 2097152
  [ "$status" -ne 0 ]
  wait_log "at the session's end"
  stop_server
  cat "$err"
  grep -F "upload does not match blkhash-expect (at the session's end): expected sha256:$want" "$err"
  cat "$sums"
  [[ $(sum_hex "$(cat "$sums")") =~ ^0{64}$ ]]
  run "$NBDSUM" -c "$sums"
  echo "$output"
  [ "$status" -ne 0 ]

  # The same writer, killed once it wrote everything, left the right
  # image: that is judged at the session's end, and recorded.
  rm -f "$sums"
  start_server whole "${KILLED_CLIENT_OPTS[@]}" memory 4M \
    blkhash-expect="sha256:$want" blkhash-file="$sums" \
    blkhash-file-name="$src" -v
  run write_then_die "$uri" "$src" 4194304
  [ "$status" -ne 0 ]
  wait_log "upload matches blkhash-expect \(at the session's end\)"
  wait_log "checksum recorded at its session's end"
  stop_server
  ! grep -q "does not match" "$err" || false
  cat "$sums"
  run "$NBDSUM" -c "$sums"
  echo "$output"
  [ "$status" -eq 0 ]
}

# void.py URI GOOD: write GOOD whole, flush; write one wrong byte at
# 2M+500, flush; write the right byte back, flush.  Prints each flush's
# outcome.
write_void () {
  cat > "$BATS_FILE_TMPDIR/void.py" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()
def flush(what):
    try:
        h.flush()
        print("%s: ok" % what)
    except nbd.Error as e:
        print("%s: failed: %s" % (what, e))
h.pwrite(data, 0)
flush("whole")
h.pwrite(b"X" if data[2097652:2097653] != b"X" else b"Y", 2097652)
flush("changed")
h.pwrite(data[2097652:2097653], 2097652)
flush("restored")
h.shutdown()
PY
}

@test "expect: a write after a verdict voids it: the next flush judges again" {
  local want
  write_void
  want=$(plain sha256 "$src")
  run serve memory 4M blkhash-expect="sha256:$want" -- \
    '"$NBD_PYTHON" "$BATS_FILE_TMPDIR/void.py" "$uri" "$src"'
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q "^whole: ok" <<< "$output"
  grep -q "^changed: failed" <<< "$output"
  grep -q "^restored: ok" <<< "$output"
  [ "$(grep -c "upload does not match" <<< "$output")" -eq 1 ]
}

@test "expect: nbdcopy without --flush is judged when it disconnects" {
  local want
  want=$(plain sha256 "$src")
  run serve memory 4M blkhash-expect="sha256:$want" -- \
    'nbdcopy "$bad" "$uri"'
  echo "$output"
  # nbdcopy 1.14 sends no flush: it cannot see the verdict.
  [ "$status" -eq 0 ]
  grep -F "upload does not match blkhash-expect (at the session's end): expected sha256:$want, got sha256:$(plain sha256 "$bad")" <<< "$output"
}

@test "expect: with several exports, each one written is judged, by name; one read whole as an import" {
  local dir="$BATS_TEST_TMPDIR/exports" want
  mkdir "$dir"
  truncate -s 4M "$dir/good.img" "$dir/wrong.img" "$dir/read.img"
  want=$(plain sha256 "$src")
  run serve "${KILLED_CLIENT_OPTS[@]}" file dir="$dir" blkhash-expect="sha256:$want" -- \
    'nbdcopy --flush "$src" "nbd+unix:///good.img?socket=$unixsocket" &&
     ! nbdcopy --flush "$bad" "nbd+unix:///wrong.img?socket=$unixsocket" &&
     ! nbdcopy "nbd+unix:///read.img?socket=$unixsocket" - >/dev/null'
  echo "$output"
  [ "$status" -eq 0 ]
  grep -F "export 'wrong.img': upload does not match" <<< "$output"
  grep -F "export 'read.img': import does not match" <<< "$output"
  [ "$(grep -c "does not match" <<< "$output")" -eq 2 ]
  cmp "$src" "$dir/good.img"
}

@test "expect: blkhash:HEX is judged from the digests hashed as written, not read back" {
  local read
  run serve memory 4M blkhash-expect="blkhash:$(reference sha256 65536 "$src")" \
    -D blkhash.stats=1 -v -- 'nbdcopy --flush "$src" "$uri"'
  echo "$output" | grep -E "stats|blkhash-expect"
  [ "$status" -eq 0 ]
  grep -q "upload matches blkhash-expect$" <<< "$output"
  # At most the block the data ends in (written in part) is read.
  read=$(grep -oE "computed [0-9]+ blocks reading [0-9]+ bytes" <<< "$output" |
         awk '{ print $5 }')
  [ -n "$read" ] && [ "$read" -le 65536 ]

  # Another block size reads the image back (its data, 3.1 MiB).
  run serve memory 4M \
    blkhash-expect="blkhash-sha256/1M:$(reference sha256 1048576 "$src")" \
    -D blkhash.stats=1 -v -- 'nbdcopy --flush "$src" "$uri"'
  echo "$output" | grep -E "stats|blkhash-expect"
  [ "$status" -eq 0 ]
  grep -q "upload matches blkhash-expect$" <<< "$output"
  read=$(grep -oE "computed [0-9]+ blocks reading [0-9]+ bytes" <<< "$output" |
         awk '{ print $5 }')
  [ -n "$read" ] && [ "$read" -ge 3000000 ]
}

# rewrite.py SOCKET IMG1 IMG2: write IMG1 whole in order (a plain
# digest follows it), then the first 1 MiB of IMG2 over it, then flush;
# prints "flush ok" or "flush failed".
rewrite_py () {
  "$NBD_PYTHON" - "$@" <<'PY'
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
a = open(sys.argv[2], "rb").read(); b = open(sys.argv[3], "rb").read()
for off in range(0, len(a), 256 * 1024):
    h.pwrite(a[off:off + 256 * 1024], off)
h.pwrite(b[:1 << 20], 0)
try:
    h.flush(); print("flush ok")
except nbd.Error as e:
    print("flush failed", e.errno)
PY
}

@test "expect: a plain digest that followed the upload starts over after a write behind it" {
  local mixed="$BATS_TEST_TMPDIR/mixed.img"
  # mixed: the first MiB of the bad image, the rest of the source; the
  # two differ after it, so a digest that kept the source's first MiB
  # is the value of neither.
  "$MKIMAGE" '4M;d:0+4M:z' "$BATS_TEST_TMPDIR/other.img"
  { head -c 1M "$BATS_TEST_TMPDIR/other.img"; tail -c +1048577 "$src"; } \
    > "$mixed"
  [ "$(stat -c %s "$mixed")" -eq 4194304 ]
  start_server rw memory 4M blkhash-expect="sha256:$(plain sha256 "$mixed")"
  run rewrite_py "$sock" "$src" "$BATS_TEST_TMPDIR/other.img"
  echo "$output"
  [ "$output" = "flush ok" ]
  stop_server
  # And expecting the source's value, the same writes fail.
  start_server rw2 memory 4M blkhash-expect="sha256:$(plain sha256 "$src")"
  run rewrite_py "$sock" "$src" "$BATS_TEST_TMPDIR/other.img"
  echo "$output"
  [ "$output" = "flush failed EIO" ]
  grep -q "got sha256:$(plain sha256 "$mixed")" "$err"
  stop_server
}

@test "expect: a new writer while the last session's end is judged is judged itself" {
  local other="$BATS_TEST_TMPDIR/other.img" disk="$BATS_TEST_TMPDIR/disk.img"
  "$MKIMAGE" '4M;d:0+4M:y' "$other"
  truncate -s 4M "$disk"
  # The plugin's reads wait while the file gate exists: the end of the
  # first session is judged until the second has written (its write
  # in the filter: nbdkit -v logs it), by conditions, not by times.
  export disk gate="$BATS_TEST_TMPDIR/gate" reading="$BATS_TEST_TMPDIR/reading"
  start_server race -v eval thread_model='echo parallel' get_size='echo 4194304' \
    pread='touch "$reading"; while [ -e "$gate" ]; do sleep 0.05; done
           dd if="$disk" skip=$4 count=$3 iflag=skip_bytes,count_bytes status=none' \
    pwrite='dd of="$disk" seek=$4 oflag=seek_bytes conv=notrunc status=none' \
    can_write='exit 0' can_flush='exit 0' flush='exit 0' \
    blkhash-expect="sha256:$(plain sha256 "$src")"
  run "$NBD_PYTHON" - "$sock" "$other" "$err" <<'PY'
import os, sys, threading, time, nbd
sock, other, log = sys.argv[1], open(sys.argv[2], "rb").read(), sys.argv[3]
gate, reading = os.environ["gate"], os.environ["reading"]
def wait_for(cond, what, h=None):
    for _ in range(1200):               # a hang guard: 60 s
        if cond():
            return
        if h and h.aio_in_flight() > 0:
            h.poll(50)                  # sends the write on its way
        else:
            time.sleep(0.05)
    raise SystemExit("never: " + what)
def logged(text):
    return lambda: text in open(log).read()
c1 = nbd.NBD(); c1.connect_unix(sock)
c1.pwrite(other[65536:], 65536)         # a wrong image, but for 64K
open(gate, "w").close()
t = threading.Thread(target=c1.shutdown); t.start()
wait_for(lambda: os.path.exists(reading), "its session's end judged")
c2 = nbd.NBD(); c2.connect_unix(sock)
c2.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(other)), 0)
wait_for(logged("blkhash: pwrite count=4194304 offset=0"), "the write in", c2)
os.unlink(gate)
while c2.aio_in_flight() > 0:
    c2.poll(-1)
t.join()
try:
    c2.flush(); print("flush ok")
except nbd.Error as e:
    print("flush failed", e.errno)
c2.shutdown()
PY
  echo "$output"
  [ "$output" = "flush failed EIO" ]
  stop_server
  grep -q "used by a new session while the last one's end was judged" "$err"
  grep -q "does not match blkhash-expect" "$err"
}

@test "expect: qemu-img's recipe onto a target of allocated zeros passes, and fails for a wrong image" {
  local tgt="$BATS_TEST_TMPDIR/tgt.img" f
  for f in "$sparse" "$sparsebad"; do
    rm -f "$tgt" "$sums"
    qemu-img create -q -f raw -o preallocation=full "$tgt" 8M
    run nbdkit -U - --filter="$BLKHASH_FILTER" file "$tgt" \
      blkhash-expect="sha256:$(plain sha256 "$sparse")" \
      blkhash-file="$sums" blkhash-file-name="$sparse" \
      --run 'qemu-img convert -n --target-is-zero -f raw -O raw '"$f"' "$uri" &&
             "$NBDSUM" -c '"$sums"
    echo "$output"
    if [ "$f" = "$sparse" ]; then
      [ "$status" -eq 0 ]
      [[ "$output" = *": OK"* ]]
      [[ "$output" != *"not judged"* ]]
    else
      [ "$status" -ne 0 ]
      [[ "$output" != *": OK"* ]]
    fi
    cmp "$tgt" "$f"
  done
}

# scatter.py URI FILE: write FILE in 512-byte pieces, first every other
# one (each a range of its own: more than 65,536 of them), then the
# rest, many in flight; flush.  Prints the flush's outcome.
write_scatter () {
  cat > "$BATS_FILE_TMPDIR/scatter.py" <<'PY'
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
data = open(sys.argv[2], "rb").read()
n = len(data) // 512
for first in (0, 1):
    for i in range(first, n, 2):
        while h.aio_in_flight() >= 64:
            h.poll(-1)
        h.aio_pwrite(data[i * 512:(i + 1) * 512], i * 512)
    while h.aio_in_flight() > 0:
        h.poll(-1)
try:
    h.flush()
    print("flush ok")
except nbd.Error as e:
    print("flush failed", e.errno)
h.shutdown()
PY
}

@test "expect: a wrong upload written in more than 65,536 separate ranges fails its flush" {
  local img="$BATS_TEST_TMPDIR/scatter.img" wrong="$BATS_TEST_TMPDIR/wrong.img"
  # 80 MiB of 512-byte pieces: 81,920 ranges before the gaps are filled.
  "$MKIMAGE" '80M;d:0+80M:s' "$img"
  cp "$img" "$wrong"
  printf 'X' | dd of="$wrong" bs=1 seek=41943553 conv=notrunc status=none
  ! cmp -s "$img" "$wrong" || false
  run serve memory 80M blkhash-expect="sha256:$(plain sha256 "$img")" -- \
    '"$NBD_PYTHON" "$BATS_FILE_TMPDIR/scatter.py" "$uri" '"$img"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "flush ok" ]
  run serve memory 80M blkhash-expect="sha256:$(plain sha256 "$img")" -- \
    '"$NBD_PYTHON" "$BATS_FILE_TMPDIR/scatter.py" "$uri" '"$wrong"
  echo "$output"
  grep -q "^flush failed EIO$" <<< "$output"
  grep -F "upload does not match blkhash-expect: expected sha256:$(plain sha256 "$img"), got sha256:$(plain sha256 "$wrong")" <<< "$output"
}

@test "expect: a write through another export name after a pass makes the next flush judge again" {
  # The memory plugin serves one disk under every name.
  start_server alias memory 4M blkhash-expect="sha256:$(plain sha256 "$src")"
  run "$NBD_PYTHON" - "$sock" "$src" <<'PY'
import nbd, sys
data = open(sys.argv[2], "rb").read()
a = nbd.NBD(); a.connect_unix(sys.argv[1])
b = nbd.NBD(); b.set_export_name("other"); b.connect_unix(sys.argv[1])
def flush(h, what):
    try:
        h.flush(); print(what, "ok")
    except nbd.Error as e:
        print(what, "failed", e.errno)
a.pwrite(data, 0)
flush(a, "a whole")
b.pwrite(b"X" if data[2097652:2097653] != b"X" else b"Y", 2097652)
flush(a, "a after b")
b.pwrite(data[2097652:2097653], 2097652)
flush(a, "a restored")
PY
  echo "$output"
  grep -q "^a whole ok$" <<< "$output"
  grep -q "^a after b failed EIO$" <<< "$output"
  grep -q "^a restored ok$" <<< "$output"
  stop_server
  grep -q "upload does not match blkhash-expect" "$err"
}

@test "expect: a flush racing a write is judged once the write is done" {
  local log="$BATS_TEST_TMPDIR/requests.log"
  # Writes take 2 s below the filter; the client sends the flush once
  # the log filter (below blkhash) shows the write began: it is in
  # flight, or done, when the flush is judged.
  start_server race --filter=log --filter=delay memory 4M \
    logfile="$log" delay-write=2 \
    blkhash-expect="sha256:$(plain sha256 "$src")"
  run "$NBD_PYTHON" - "$sock" "$src" "$log" <<'PY'
import nbd, re, sys, time
data = open(sys.argv[2], "rb").read()
h = nbd.NBD(); h.connect_unix(sys.argv[1])
def flush(what):
    try:
        h.flush(); print(what, "ok")
    except nbd.Error as e:
        print(what, "failed", e.errno)
h.pwrite(data, 0)
flush("whole")
cookie = h.aio_pwrite(b"X" if data[2097652:2097653] != b"X" else b"Y", 2097652)
for _ in range(6000):
    if re.search(r"Write id=\d+ offset=0x2001f4 ", open(sys.argv[3]).read()):
        break
    time.sleep(0.01)
else:
    sys.exit("the write never reached the log filter")
flush("racing")
while not h.aio_command_completed(cookie):
    h.poll(-1)
PY
  echo "$output"
  grep -q "^whole ok$" <<< "$output"
  grep -q "^racing failed EIO$" <<< "$output"
  stop_server
}
