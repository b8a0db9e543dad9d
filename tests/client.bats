#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum as a checksum tool: local files, qcow2, other servers,
# --check, --json, progress, --diff, --blocks, TLS.

load "$top_srcdir/tests/helpers"

setup_file () {
  "$MKIMAGE" '40M;d:0+3M:a;d:10M+100000:b;z:20M+1M;d:39M+1M:c' \
    "$BATS_FILE_TMPDIR/disk.img"
  qemu-img convert -f raw -O qcow2 "$BATS_FILE_TMPDIR/disk.img" \
    "$BATS_FILE_TMPDIR/disk.qcow2"
  qemu-img convert -c -f raw -O qcow2 "$BATS_FILE_TMPDIR/disk.img" \
    "$BATS_FILE_TMPDIR/compressed.qcow2"
  qemu-img create -q -f qcow2 -b "$BATS_FILE_TMPDIR/disk.qcow2" -F qcow2 \
    "$BATS_FILE_TMPDIR/overlay.qcow2"
}

setup () {
  disk="$BATS_FILE_TMPDIR/disk.img"
  want=$(reference sha256 65536 "$disk")
  cd "$BATS_TEST_TMPDIR"
  export disk want
}

# The checksum column of nbdsum's output.
sums () {
  grep -E '^[0-9a-f]+  ' <<< "$output" | cut -d' ' -f1
}

@test "client: a local raw file" {
  run "$NBDSUM" "$disk"
  [ "$status" -eq 0 ]
  [ "$output" = "$want  $disk" ]
}

@test "client: several files, one line each in order, like sha256sum" {
  head -c 300000 /dev/urandom > other.img
  run "$NBDSUM" "$disk" other.img "$disk"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "$want  $disk" ]
  [ "${lines[1]}" = "$(reference sha256 65536 other.img)  other.img" ]
  [ "${lines[2]}" = "$want  $disk" ]
}

@test "client: standard input" {
  run bash -c '"$NBDSUM" - < "$disk"'
  [ "$status" -eq 0 ]
  [ "$output" = "$want  -" ]
  run bash -c 'cat "$disk" | "$NBDSUM" -d sha1 --block-size 1M -'
  [ "$output" = "BLKHASH-SHA1/1M (-) = $(reference sha1 1048576 "$disk")" ]
}

@test "client: missing and unreadable files fail with a message" {
  run "$NBDSUM" nosuch.img
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: nosuch.img: No such file or directory" ]
  mkdir adir
  run "$NBDSUM" adir
  [ "$status" -eq 1 ]
  [[ "$output" = *"adir: not a regular file or block device"* ]]
  run "$NBDSUM" nosuch.img "$disk"
  [ "$status" -eq 1 ]
  [ "${lines[-1]}" = "$want  $disk" ]
}

@test "client: qcow2 equals raw: plain, compressed, with a backing file" {
  for f in disk.qcow2 compressed.qcow2 overlay.qcow2; do
    run "$NBDSUM" "$BATS_FILE_TMPDIR/$f"
    echo "$f: $output"
    [ "$status" -eq 0 ]
    [ "$(sums)" = "$want" ]
  done
  # An overlay with its own writes differs until they are undone.
  cp "$BATS_FILE_TMPDIR/overlay.qcow2" changed.qcow2
  qemu-io -f qcow2 changed.qcow2 -c 'write -P 0x11 5M 64K' >/dev/null
  run "$NBDSUM" changed.qcow2
  [ "$status" -eq 0 ]
  [ "$(sums)" != "$want" ]
  qemu-img convert -O raw changed.qcow2 changed.raw
  [ "$(sums)" = "$(reference sha256 65536 changed.raw)" ]
}

@test "client: --format=raw hashes a qcow2 file's own bytes" {
  run "$NBDSUM" --format=raw "$BATS_FILE_TMPDIR/disk.qcow2"
  [ "$status" -eq 0 ]
  [ "$(sums)" = "$(reference sha256 65536 "$BATS_FILE_TMPDIR/disk.qcow2")" ]
}

@test "client: qemu-nbd without the filter: client-side, equal, said so" {
  for f in disk.img compressed.qcow2; do
    fmt=raw; [[ $f = *.qcow2 ]] && fmt=qcow2
    qemu-nbd -r -f "$fmt" -k "$BATS_TEST_TMPDIR/q.sock" \
      "$BATS_FILE_TMPDIR/$f" &
    for i in $(seq 50); do [ -S q.sock ] && break; sleep 0.1; done
    run "$NBDSUM" "nbd+unix:///?socket=$BATS_TEST_TMPDIR/q.sock"
    wait
    echo "$f: $output"
    [ "$status" -eq 0 ]
    [[ "$output" = *"hashing client-side"* ]]
    [ "$(sums)" = "$want" ]
  done
}

@test "client: --client-side with the filter present gives the same" {
  run serve file "$disk" -- '"$NBDSUM" --client-side -C 3 -R 5 "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sums)" = "$want" ]
  run "$NBDSUM" --client-side --json "$disk"
  [[ "$output" = *'"method": "client-side"'* ]]
  [[ "$output" = *"\"checksum\": \"$want\""* ]]
}

@test "client: client-side read errors fail and print no checksum" {
  run nbdkit -U - --filter=error file "$disk" error-pread=EIO \
    error-pread-rate=1 --run '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"Input/output error"* ]]
  [ -z "$(sums)" ]
}

@test "client: --check OK, FAILED, --quiet, --status" {
  cp "$disk" good.img
  cp "$disk" bad.img
  "$NBDSUM" good.img bad.img > SUMS
  run "$NBDSUM" -c SUMS
  [ "$status" -eq 0 ]
  [ "$output" = "good.img: OK
bad.img: OK" ]
  # Corrupt one byte in the middle of a hole.
  printf 'X' | dd of=bad.img bs=1 seek=30000000 conv=notrunc status=none
  run "$NBDSUM" --check SUMS
  [ "$status" -eq 1 ]
  [[ "$output" = *"good.img: OK"* ]]
  [[ "$output" = *"bad.img: FAILED"* ]]
  [[ "$output" = *"WARNING: 1 computed checksum did NOT match"* ]]
  run "$NBDSUM" -c --quiet SUMS
  [ "$status" -eq 1 ]
  [[ "$output" != *"good.img: OK"* ]]
  [[ "$output" = *"bad.img: FAILED"* ]]
  run "$NBDSUM" -c --status SUMS
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  rm bad.img
  run "$NBDSUM" -c SUMS
  [ "$status" -eq 1 ]
  [[ "$output" = *"bad.img: FAILED open or read"* ]]
  [[ "$output" = *"WARNING: 1 listed file could not be read"* ]]
}

@test "client: --check --ignore-missing, --strict and --warn, like sha256sum" {
  cp "$disk" a.img
  "$NBDSUM" a.img > SUMS
  sed 's/  a.img$/  gone.img/' SUMS >> SUMS
  echo "not a checksum line" >> SUMS
  # Plain: the missing file fails, the bad line only warns at the end.
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"gone.img: FAILED open or read"* ]]
  # --ignore-missing: skipped, neither reported nor failed.
  run "$NBDSUM" -c --ignore-missing SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "a.img: OK" ]
  [[ "$output" != *gone.img* ]]
  # ... but --strict fails on the bad line, and -w says which.
  run "$NBDSUM" -c --ignore-missing --strict -w SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"SUMS: 3: improperly formatted checksum line"* ]]
  # Nothing verified at all is an error.
  grep gone.img SUMS > ONLY_GONE
  run "$NBDSUM" -c --ignore-missing ONLY_GONE
  [ "$status" -eq 1 ]
  [[ "$output" = *"no file was verified"* ]]
  # No file argument: the lines come from standard input.
  run "$NBDSUM" -c < <(head -n 1 SUMS)
  [ "$status" -eq 0 ]
  [ "$output" = "a.img: OK" ]
  run "$NBDSUM" --strict a.img
  [ "$status" -eq 1 ]
  [[ "$output" = *"only go with --check"* ]]
}

@test "client: --check reads blkhash-file's format and warns on bad lines" {
  local dir="$BATS_TEST_TMPDIR/d"
  mkdir "$dir"
  cp "$disk" "$dir/x.img"
  export dir
  serve file dir="$dir" blkhash-file="$BATS_TEST_TMPDIR/server.sums" -- \
    'nbdcopy "nbd+unix:///x.img?socket=$unixsocket" null:'
  cat server.sums
  printf 'not a checksum line\n' >> server.sums
  cd "$dir"
  run "$NBDSUM" -c "$BATS_TEST_TMPDIR/server.sums"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"x.img: OK"* ]]
  [[ "$output" = *"WARNING: 1 line is improperly formatted"* ]]
  printf 'nothing\n' > empty.sums
  run "$NBDSUM" -c empty.sums
  [ "$status" -eq 1 ]
  [[ "$output" = *"no properly formatted checksum lines found"* ]]
}

@test "client: names with a newline or backslash are escaped and checked" {
  cp "$disk" 'odd
name\img'
  run "$NBDSUM" 'odd
name\img'
  [ "$status" -eq 0 ]
  [ "$output" = "\\$want  odd\\nname\\\\img" ]
  "$NBDSUM" 'odd
name\img' > SUMS
  run "$NBDSUM" -c SUMS
  [ "$status" -eq 0 ]
  [ "$output" = '\odd\nname\\img: OK' ]
}

@test "client: a name ending in a carriage return is escaped and checked" {
  local cr=$'disk\r'
  cp "$disk" "$cr"
  run "$NBDSUM" "$cr"
  [ "$status" -eq 0 ]
  [ "$output" = "\\$want  disk\\r" ]
  "$NBDSUM" "$cr" > SUMS
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = '\disk\r: OK' ]
}

@test "client: --json gives name, checksum, digest, block size, size, seconds" {
  run bash -c '"$NBDSUM" --json -d sha1 "$disk" - < /dev/null > out.json'
  cat out.json
  [ "$status" -eq 0 ]
  "$PYTHON" - "$disk" "$(reference sha1 65536 "$disk")" <<'PY'
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

@test "client: --progress=FD writes N/100 lines up to 100" {
  run bash -c '"$NBDSUM" --progress=3 "$disk" 3>progress >/dev/null'
  [ "$status" -eq 0 ]
  cat progress
  [ "$(tail -n 1 progress)" = "100/100" ]
  # Percentages never go down.
  sort -n -c -t/ -k1 progress
  run bash -c '"$NBDSUM" --client-side --progress=3 "$disk" 3>progress >/dev/null'
  [ "$(tail -n 1 progress)" = "100/100" ]
}

@test "client: -p without a terminal prints no bar" {
  run bash -c '"$NBDSUM" -p "$disk" 2>err'
  [ "$status" -eq 0 ]
  [ ! -s err ]
}

@test "client: --diff finds exactly the ranges written" {
  cp "$disk" a.img
  cp "$disk" b.img
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
}

@test "client: --diff with shake256 and 96K blocks gives 96K ranges" {
  cp "$disk" a.img
  cp "$disk" b.img
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
  qemu-nbd -r -f raw -k "$BATS_TEST_TMPDIR/q.sock" b.img &
  for i in $(seq 50); do [ -S q.sock ] && break; sleep 0.1; done
  run "$NBDSUM" --diff -d shake256 --block-size 96K a.img \
    "nbd+unix:///?socket=$BATS_TEST_TMPDIR/q.sock"
  wait
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"differ in 360448 bytes (3 ranges"* ]]
}

@test "client: --diff across servers and sizes, and its errors" {
  cp "$disk" a.img
  truncate -s 41M b.img
  dd if="$disk" of=b.img conv=notrunc status=none
  # A is local (server-side), B comes from qemu-nbd (client-side).
  qemu-nbd -r -f raw -k "$BATS_TEST_TMPDIR/q.sock" b.img &
  for i in $(seq 50); do [ -S q.sock ] && break; sleep 0.1; done
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
# $disk has a line per data block with its digest, in order, and runs
# of zero blocks, every block covered once; the block count is left in
# $nblocks.
check_blocks () {
  local digest=$1 bs=$2 blocks zero L n=0 next=0 off len d b
  blocks=$(reference --blocks "$digest" "$bs" "$disk")
  zero=$(head -c "$bs" /dev/zero | reference --blocks "$digest" "$bs" -)
  L=${#zero}
  [ "${lines[0]}" = "# $digest $bs $(stat -c %s "$disk")" ]
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
  [ "$next" -eq "$(stat -c %s "$disk")" ]
  [ "$n" -eq $(( ${#blocks} / L )) ]
  nblocks=$n
}

@test "client: --blocks prints every block, zero runs merged" {
  run "$NBDSUM" --blocks "$disk"
  [ "$status" -eq 0 ]
  echo "$output" | head -n 5
  # Data blocks carry their digest, in order; zero blocks are runs.
  check_blocks sha256 65536
  [ "$nblocks" -eq 640 ]
  [[ "$output" = *$'\n3145728 7340032 zero\n'* ]]
}

@test "client: --blocks with shake128 and 96K blocks, server-side and client-side" {
  local opt
  for opt in "" --client-side; do
    run "$NBDSUM" --blocks $opt -d SHAKE-128 --block-size 96K "$disk"
    [ "$status" -eq 0 ]
    echo "$output" | head -n 5
    # 40M in 96K blocks: 426 and a 64K one.
    check_blocks shake128 98304
    [ "$nblocks" -eq 427 ]
    [ "${lines[-1]%% *}" = 41877504 ]
    [[ "${lines[-1]}" =~ ^41877504\ 65536\ [0-9a-f]{32}$ ]]
  done
}

@test "client: TLS with a pre-shared key" {
  echo "alice:$(openssl rand -hex 32)" > keys.psk
  chmod 600 keys.psk
  export psk="$BATS_TEST_TMPDIR/keys.psk"
  run nbdkit -U - --tls=require --tls-psk="$psk" \
    --filter="$BLKHASH_FILTER" file "$disk" --run '
    "$NBDSUM" "nbds+unix://alice@/?socket=$unixsocket&tls-psk-file=$psk" &&
    "$NBDSUM" --client-side \
      "nbds+unix://alice@/?socket=$unixsocket&tls-psk-file=$psk"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sums | sort -u)" = "$want" ]
  [ "$(sums | wc -l)" -eq 2 ]
  # Without TLS the server refuses, and nbdsum says why.
  run nbdkit -U - --tls=require --tls-psk="$psk" \
    --filter="$BLKHASH_FILTER" file "$disk" \
    --run '"$NBDSUM" "nbd+unix:///?socket=$unixsocket"'
  [ "$status" -eq 1 ]
  [[ "$output" = *"Operation not supported"* ]]
  [[ "$output" != *"hashing client-side"* ]]
}

@test "client: --list-digests and option conflicts" {
  run "$NBDSUM" --list-digests
  [ "$status" -eq 0 ]
  grep -qE '^sha256, .* 32 bytes$' <<< "$output"
  grep -qE '^blake2b512, .* 64 bytes$' <<< "$output"
  grep -qE '^shake128, shake-128 +16 bytes$' <<< "$output"
  grep -qE '^shake256, shake-256 +32 bytes$' <<< "$output"
  # Only what -d accepts.
  ! grep -q kmac <<< "$output"
  run "$NBDSUM" --diff --blocks a b
  [ "$status" -eq 2 ]
  run "$NBDSUM" --check --blocks a
  [ "$status" -eq 1 ]
  run "$NBDSUM" --quiet "$disk"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--quiet, --status, --ignore-missing, --strict and --warn only go with --check"* ]]
}

@test "client: --help covers every option" {
  run "$NBDSUM" --help
  [ "$status" -eq 0 ]
  for opt in --connections --requests --digest --block-size --format \
             --client-side --check --quiet --status --json --progress \
             --diff --blocks --list-digests --help --version; do
    [[ "$output" = *"$opt"* ]] || { echo "missing $opt"; false; }
  done
}

@test "client: --diff exits 2, not 1 (\"differ\"), when standard output fails" {
  local b="$BATS_TEST_TMPDIR/b.img"
  cp "$disk" "$b"
  printf x | dd of="$b" bs=1 seek=100000 conv=notrunc status=none
  export b
  # Images that differ (text ranges), and identical ones (JSON).
  for args in '"$disk" "$b"' '--json "$disk" "$disk"'; do
    run --separate-stderr bash -c "\"\$NBDSUM\" --diff $args > /dev/full"
    echo "$args: status $status: $stderr"
    [ "$status" -eq 2 ]
    [[ "$stderr" = *"stdout: No space left on device"* ]]
  done
}

@test "client: standard input as the image of --diff or --blocks is a usage error" {
  run --separate-stderr "$NBDSUM" --blocks - < "$disk"
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  [ "$stderr" = "nbdsum: -: standard input cannot be an image with --blocks (save it to a file first)" ]
  for args in "- $disk" "$disk -"; do
    run --separate-stderr "$NBDSUM" --diff $args < "$disk"
    [ "$status" -eq 2 ]
    [ "$stderr" = "nbdsum: -: standard input cannot be an image with --diff (save it to a file first)" ]
  done
}

@test "client: --client-side takes zero extents cut mid-block as one hole" {
  hash_cut_zeros -- --client-side
}
