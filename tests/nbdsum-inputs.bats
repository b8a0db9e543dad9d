#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum's inputs: local files (a private nbdkit, in TMPDIR, and the
# descriptors it needs under ulimit -n), standard input, qcow2, servers
# without the filter (client-side), read errors, TLS.

bats_require_minimum_version 1.5.0

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

setup_file () {
  "$MKIMAGE" '40M;d:0+3M:a;d:10M+100000:b;z:20M+1M;d:39M+1M:c' \
    "$BATS_FILE_TMPDIR/disk.img"
  qemu-img convert -f raw -O qcow2 "$BATS_FILE_TMPDIR/disk.img" \
    "$BATS_FILE_TMPDIR/disk.qcow2"
  qemu-img convert -c -f raw -O qcow2 "$BATS_FILE_TMPDIR/disk.img" \
    "$BATS_FILE_TMPDIR/compressed.qcow2"
  qemu-img create -q -f qcow2 -b "$BATS_FILE_TMPDIR/disk.qcow2" -F qcow2 \
    "$BATS_FILE_TMPDIR/overlay.qcow2"
  formats_build
}

# Every format qemu-img can write, converted from one raw image with
# data, a hole, zeros and an odd size, in $BATS_FILE_TMPDIR/fmt/: IMAGE
# and, in IMAGE.want, the checksum of its guest content as qemu reads
# it (qemu-img convert -O raw, then the reference).  Guest sizes are
# not the raw's: qemu rounds 5000000 up to 5000192 (whole sectors),
# and vpc to its geometry (5013504).
formats_build () {
  local d="$BATS_FILE_TMPDIR/fmt" f
  mkdir "$d"
  "$MKIMAGE" '5000000;d:0+1M:a;d:2M+100000:b;z:3M+300000;d:4700000+300000:c' \
    "$d/g.raw"
  for f in qcow2 qcow qed vmdk vhdx vpc vdi parallels; do
    qemu-img convert -f raw -O "$f" "$d/g.raw" "$d/g.$f"
  done
  for f in streamOptimized monolithicFlat twoGbMaxExtentSparse; do
    qemu-img convert -f raw -O vmdk -o subformat="$f" "$d/g.raw" "$d/$f.vmdk"
  done
  qemu-img convert -f raw -O vpc -o subformat=fixed "$d/g.raw" "$d/fixed.vhd"
  for f in "$d"/g.* "$d"/*.vmdk "$d/fixed.vhd"; do
    case $f in *-flat.vmdk|*-s00?.vmdk) continue ;; esac
    case $f in *.vhd) qemu-img convert -f vpc -O raw "$f" "$d/oracle.raw" ;;
               *) qemu-img convert -O raw "$f" "$d/oracle.raw" ;;
    esac
    reference sha256 65536 "$d/oracle.raw" > "$f.want"
  done
  rm "$d/oracle.raw"
}

# The images of formats_build qemu reads as guest content, one a line.
format_images () {
  local d="$BATS_FILE_TMPDIR/fmt"
  printf '%s\n' "$d"/g.{qcow2,qcow,qed,vmdk,vhdx,vpc,vdi,parallels} \
    "$d"/{streamOptimized,monolithicFlat,twoGbMaxExtentSparse}.vmdk
}

setup () {
  disk="$BATS_FILE_TMPDIR/disk.img"
  want=$(reference sha256 65536 "$disk")
  cd "$BATS_TEST_TMPDIR"
  export disk want
}

teardown () {
  kill_servers
}

# The checksum column of nbdsum's output.
sums () {
  grep -E '^[0-9a-f]+  ' <<< "$output" | cut -d' ' -f1
}

@test "nbdsum-inputs: a local raw file" {
  run "$NBDSUM" "$disk"
  [ "$status" -eq 0 ]
  [ "$output" = "$want  $disk" ]
}

@test "nbdsum-inputs: several files, one line each in order, like sha256sum" {
  "$MKIMAGE" '300000;d:0+300000:other' other.img
  run "$NBDSUM" "$disk" other.img "$disk"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "$want  $disk" ]
  [ "${lines[1]}" = "$(reference sha256 65536 other.img)  other.img" ]
  [ "${lines[2]}" = "$want  $disk" ]
}

@test "nbdsum-inputs: standard input" {
  run bash -c '"$NBDSUM" - < "$disk"'
  [ "$status" -eq 0 ]
  [ "$output" = "$want  -" ]
  run bash -c 'cat "$disk" | "$NBDSUM" -d sha1 --block-size 1M -'
  [ "$output" = "BLKHASH-SHA1/1M (-) = $(reference sha1 1048576 "$disk")" ]
}

@test "nbdsum-inputs: missing and unreadable files fail with a message" {
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

# One line naming the cause, not the connections a server's exit
# broke: nbdsum's for a missing backing file (found before qemu runs),
# qemu-nbd's for a locked image.
@test "nbdsum-inputs: a missing backing file and a locked image: one line naming the cause" {
  qemu-img create -q -f qcow2 base.qcow2 1M
  qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 orphan.qcow2
  rm base.qcow2
  # Ten times: the connection breaks a moment before the server exits
  # (the hostile review saw the old chain of messages one time in ten).
  for args in orphan.qcow2 orphan.qcow2 orphan.qcow2 orphan.qcow2 \
              orphan.qcow2 orphan.qcow2 orphan.qcow2 orphan.qcow2 \
              "-j 2 orphan.qcow2" "--client-side orphan.qcow2"; do
    # shellcheck disable=SC2086
    run --separate-stderr "$NBDSUM" $args
    echo "nbdsum $args: $status: $output; $stderr"
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [ "${#stderr_lines[@]}" -eq 1 ]
    [ "$stderr" = "nbdsum: orphan.qcow2: its qcow2 header names the backing file 'base.qcow2', which does not exist" ]
  done
  qemu-img create -q -f qcow2 locked.qcow2 1M
  qemu-io -f qcow2 locked.qcow2 -c 'sleep 60000' >/dev/null 2>&1 3>&- &
  local holder=$!
  # Until qemu-io holds the lock.
  wait_until 60 eval 'qemu-img info -U locked.qcow2 >/dev/null 2>&1 &&
    ! qemu-img info locked.qcow2 >/dev/null 2>&1'
  run --separate-stderr "$NBDSUM" locked.qcow2
  kill "$holder"
  echo "$status: $output; $stderr"
  [ "$status" -eq 1 ]
  [ "${#stderr_lines[@]}" -eq 1 ]
  [[ "$stderr" = "nbdsum: locked.qcow2: qemu-nbd: "*'lock. Is another process using the image'* ]]
  [[ "$stderr" != *"Connection reset"* ]]
}

@test "nbdsum-inputs: qcow2 equals raw: plain, compressed, with a backing file" {
  for f in disk.qcow2 compressed.qcow2 overlay.qcow2; do
    run "$NBDSUM" "$BATS_FILE_TMPDIR/$f"
    echo "$f: $output"
    [ "$status" -eq 0 ]
    [ "$(sums)" = "$want" ]
  done
  # An overlay with its own writes differs until they are undone.  It
  # names its base by an absolute name: beside it.
  local changed="$BATS_FILE_TMPDIR/changed.qcow2"
  cp "$BATS_FILE_TMPDIR/overlay.qcow2" "$changed"
  qemu-io -f qcow2 "$changed" -c 'write -P 0x11 5M 64K' >/dev/null
  run "$NBDSUM" "$changed"
  [ "$status" -eq 0 ]
  [ "$(sums)" != "$want" ]
  qemu-img convert -O raw "$changed" changed.raw
  [ "$(sums)" = "$(reference sha256 65536 changed.raw)" ]
}

@test "nbdsum-inputs: --format=raw hashes a qcow2 file's own bytes, and the line says so" {
  local q="$BATS_FILE_TMPDIR/disk.qcow2" bytes
  bytes=$(reference sha256 65536 "$q")
  run "$NBDSUM" --format=raw "$q"
  echo "$output"
  [ "$status" -eq 0 ]
  # Tagged even for sha256/64K: the line records the format given.
  [ "$output" = "BLKHASH-SHA256/64K:raw ($q) = $bytes" ]
  [ "$bytes" != "$want" ]
}

@test "nbdsum-inputs: every format qemu probes is hashed as its guest content" {
  local img
  for img in $(format_images); do
    run "$NBDSUM" "$img"
    echo "$img: $output"
    [ "$status" -eq 0 ]
    # Probed: the line is as it always was, untagged.
    [ "$output" = "$(cat "$img.want")  $img" ]
  done
}

@test "nbdsum-inputs: --client-side reads them the same, and --json names the format qemu probes" {
  local img fmt
  for img in $(format_images); do
    fmt=$(qemu-img info --output=json "$img" |
          "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["format"])')
    run "$NBDSUM" --client-side --json "$img"
    echo "$img ($fmt): $output"
    [ "$status" -eq 0 ]
    [[ "$output" = *"\"checksum\": \"$(cat "$img.want")\""* ]]
    [[ "$output" = *"\"format\": \"$fmt\""* ]]
    [[ "$output" = *'"method": "client-side"'* ]]
  done
  # A raw file is raw.
  run "$NBDSUM" --json "$disk"
  [[ "$output" = *'"format": "raw"'* ]]
}

@test "nbdsum-inputs: a fixed-size VHD is refused unless --format says vpc or raw" {
  local vhd="$BATS_FILE_TMPDIR/fmt/fixed.vhd"
  # qemu probes it as raw; its last 512 bytes are a VHD footer.
  [ "$(qemu-img info --output=json "$vhd" |
         "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["format"])')" = raw ]
  run "$NBDSUM" "$vhd"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"looks like a fixed-size VHD: give --format=vpc for its guest content or --format=raw for its bytes"* ]]
  ! grep -qE '[0-9a-f]{64}' <<< "$output" || false
  run "$NBDSUM" --format=vpc "$vhd"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "BLKHASH-SHA256/64K:vpc ($vhd) = $(cat "$vhd.want")" ]
  run "$NBDSUM" --format=raw "$vhd"
  [ "$status" -eq 0 ]
  [ "$output" = "BLKHASH-SHA256/64K:raw ($vhd) = $(reference sha256 65536 "$vhd")" ]
}

# qemu-img create ARGS... of a luks-encrypted image: the benchmark of
# its key derivation fails now and then on a busy machine ("Unable to
# get accurate CPU usage", when it measures no CPU time): tried again,
# a moment later (5 quick tries all failed once, on 2 loaded cores).
luks_create () {
  local i
  for i in $(seq 20); do
    qemu-img create -q "$@" 2> luks.err && return 0
    sleep 0.2
  done
  cat luks.err
  false
}

@test "nbdsum-inputs: luks is refused: its guest content needs a secret" {
  luks_create -f luks --object secret,id=s0,data=pass \
    -o key-secret=s0,iter-time=10 disk.luks 1M
  run "$NBDSUM" disk.luks
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"disk.luks: a luks image (encrypted)"* ]]
  ! grep -qE '[0-9a-f]{64}' <<< "$output" || false
  run "$NBDSUM" --format=luks disk.luks
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--format=luks"*"secret"* ]]
  # Its bytes, if asked for.
  run "$NBDSUM" --format=raw disk.luks
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$output")" = "$(reference sha256 65536 disk.luks)" ]
}

@test "nbdsum-inputs: an encrypted qcow2 or qcow is refused: its guest content needs a secret" {
  local f
  luks_create -f qcow2 --object secret,id=s0,data=pass \
    -o encrypt.format=luks,encrypt.key-secret=s0,encrypt.iter-time=10 \
    luks.qcow2 1M
  qemu-img create -q -f qcow2 --object secret,id=s0,data=pass \
    -o encrypt.format=aes,encrypt.key-secret=s0 aes.qcow2 1M
  qemu-img create -q -f qcow --object secret,id=s0,data=pass \
    -o encrypt.format=aes,encrypt.key-secret=s0 aes.qcow 1M
  for f in luks.qcow2 aes.qcow2 aes.qcow; do
    # Probed, or given: the same.
    for args in "$f" "--format=${f#*.} $f" "-j 2 $f $f"; do
      # shellcheck disable=SC2086
      run --separate-stderr "$NBDSUM" $args
      echo "nbdsum $args: $status: $output; $stderr"
      [ "$status" -eq 1 ]
      [ -z "$output" ]
      [[ "$stderr" = "nbdsum: $f: an encrypted ${f#*.} image: its guest content needs the secret"* ]]
      [[ "$stderr" != *"Connection reset"* ]]
    done
    # Its bytes, if asked for.
    run "$NBDSUM" --format=raw "$f"
    [ "$status" -eq 0 ]
    [ "$(sum_hex "$output")" = "$(reference sha256 65536 "$f")" ]
  done
}

@test "nbdsum-inputs: without qemu-nbd, images are refused, naming the format and the package" {
  local img="$BATS_FILE_TMPDIR/fmt/g.vmdk"
  mkdir empty
  # nbdkit is run by its path: raw files need nothing on PATH.
  run env PATH="$PWD/empty" "$NBDSUM" "$disk"
  [ "$status" -eq 0 ]
  [ "$(sums)" = "$want" ]
  for args in "$img" "--format=vmdk $img" "$BATS_FILE_TMPDIR/disk.qcow2"; do
    run env PATH="$PWD/empty" "$NBDSUM" $args
    echo "$args: $output"
    [ "$status" -eq 1 ]
    [[ "$output" = *"image needs qemu-nbd (Debian package qemu-utils)"* ]]
    [[ "$output" = *" a vmdk image"* || "$output" = *" a qcow2 image"* ]]
    ! grep -qE '[0-9a-f]{64}' <<< "$output" || false
  done
}

@test "nbdsum-inputs: --format applies to the files after it, until the next" {
  local d="$BATS_FILE_TMPDIR/fmt"
  run "$NBDSUM" --format=vmdk "$d/g.vmdk" --format=auto "$disk" \
    "$d/g.vhdx" --format=raw "$d/g.qcow2" "$disk"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "BLKHASH-SHA256/64K:vmdk ($d/g.vmdk) = $(cat "$d/g.vmdk.want")" ]
  [ "${lines[1]}" = "$want  $disk" ]
  [ "${lines[2]}" = "$(cat "$d/g.vhdx.want")  $d/g.vhdx" ]
  [ "${lines[3]}" = "BLKHASH-SHA256/64K:raw ($d/g.qcow2) = $(reference sha256 65536 "$d/g.qcow2")" ]
  [ "${lines[4]}" = "BLKHASH-SHA256/64K:raw ($disk) = $want" ]
  # Options around inputs keep applying to all of them.
  run "$NBDSUM" "$d/g.vmdk" -d sha1 --format=vpc "$d/g.vpc"
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" = "BLKHASH-SHA1/64K ($d/g.vmdk) = "* ]]
  [[ "${lines[1]}" = "BLKHASH-SHA1/64K:vpc ($d/g.vpc) = "* ]]
  # Until the next: vmdk for a raw file is an error, not its bytes.
  run "$NBDSUM" --format=vmdk "$d/g.vmdk" "$disk"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "BLKHASH-SHA256/64K:vmdk ($d/g.vmdk) = $(cat "$d/g.vmdk.want")" ]
  [[ "$output" = *"invalid VMDK image descriptor"* ]]
  ! grep -q "$want" <<< "$output" || false
}

@test "nbdsum-inputs: --format usage errors: nothing after it, a URI, a command, unknown" {
  local d="$BATS_FILE_TMPDIR/fmt"
  run "$NBDSUM" --format=vmdk < /dev/null
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--format=vmdk applies to no local file (it applies to the files after it"* ]]
  run "$NBDSUM" --format=vmdk nbd://localhost/x
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--format=vmdk does not apply to nbd://localhost/x"* ]]
  run "$NBDSUM" --format=auto nbd://localhost/x
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--format=auto applies to no local file (it applies to the files after it)"* ]]
  run "$NBDSUM" "$d/g.vmdk" --format=vmdk
  [ "$status" -eq 1 ]
  [[ "$output" = *"--format=vmdk applies to no local file"* ]]
  run "$NBDSUM" --format=qcow2 nbd://localhost/x
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--format=qcow2 does not apply to nbd://localhost/x"* ]]
  run "$NBDSUM" --format=raw [ qemu-nbd -r -f raw "$disk" ]
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--format=raw does not apply to [ qemu-nbd"* ]]
  # auto is what a URI is anyway.
  run "$NBDSUM" --format=auto [ nbdkit file "$disk" ] "$disk"
  [ "$status" -eq 0 ]
  run "$NBDSUM" --format=vhd "$disk"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--format=vhd: unknown format"*"vpc"* ]]
  run "$NBDSUM" -c --format=raw SUMS
  [ "$status" -eq 1 ]
  [[ "$output" = *"--format does not go with --check"* ]]
}

@test "nbdsum-inputs: a stream that looks like an image is refused; --format=raw hashes its bytes" {
  local q="$BATS_FILE_TMPDIR/disk.qcow2" d="$BATS_FILE_TMPDIR/fmt"
  run bash -c '"$NBDSUM" < "$1"' _ "$q"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: -: standard input looks like a qcow2 image: nbdsum hashes a stream's bytes; give the file's name to hash its guest content, or --format=raw to hash the bytes" ]
  run "$NBDSUM" <(cat "$d/g.vmdk")
  [ "$status" -eq 1 ]
  [[ "$output" = *"looks like a vmdk image"* ]]
  # A fixed VHD's footer comes last.
  run bash -c '"$NBDSUM" - < "$1"' _ "$d/fixed.vhd"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"looks like a fixed-size VHD"* ]]
  ! grep -qE '[0-9a-f]{64}' <<< "$output" || false
  run bash -c 'cat "$1" | "$NBDSUM" --format=raw -' _ "$q"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "BLKHASH-SHA256/64K:raw (-) = $(reference sha256 65536 "$q")" ]
  # No input is standard input, for --format too.
  run bash -c '"$NBDSUM" --format=raw < "$1"' _ "$q"
  [ "$status" -eq 0 ]
  [ "$output" = "BLKHASH-SHA256/64K:raw (-) = $(reference sha256 65536 "$q")" ]
  run bash -c '"$NBDSUM" --format=qcow2 - < "$1"' _ "$q"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--format=qcow2 does not apply to standard input: nbdsum hashes a stream's bytes"* ]]
  run "$NBDSUM" --format=qcow2 <(cat "$q")
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--format=qcow2 does not apply to a stream"* ]]
  # Raw streams as always, short ones too.
  run bash -c 'printf QFI | "$NBDSUM"'
  [ "$status" -eq 0 ]
}

@test "nbdsum-inputs: -j 2 with mixed formats prints what -j 1 prints" {
  local d="$BATS_FILE_TMPDIR/fmt" one
  local args=("$d/g.vmdk" --format=raw "$d/g.qcow2" --format=vpc
              "$d/fixed.vhd" --format=auto "$d/g.vdi" "$disk")
  run "$NBDSUM" -j 1 "${args[@]}"
  [ "$status" -eq 0 ]
  one=$output
  [ "${lines[0]}" = "$(cat "$d/g.vmdk.want")  $d/g.vmdk" ]
  [ "${lines[2]}" = "BLKHASH-SHA256/64K:vpc ($d/fixed.vhd) = $(cat "$d/fixed.vhd.want")" ]
  run "$NBDSUM" -j 2 "${args[@]}"
  [ "$status" -eq 0 ]
  [ "$output" = "$one" ]
  run "$NBDSUM" -j 2 --json "${args[@]}"
  [[ "$output" = *'"format": "vpc"'* ]]
}

@test "nbdsum-inputs: qemu-nbd without the filter: client-side, equal, said so" {
  for f in disk.img compressed.qcow2; do
    fmt=raw; [[ $f = *.qcow2 ]] && fmt=qcow2
    qemu-nbd -r -f "$fmt" -k "$BATS_TEST_TMPDIR/q.sock" \
      "$BATS_FILE_TMPDIR/$f" 3>&- &
    wait_until 30 test -S q.sock
    run "$NBDSUM" "nbd+unix:///?socket=$BATS_TEST_TMPDIR/q.sock"
    wait
    echo "$f: $output"
    [ "$status" -eq 0 ]
    [[ "$output" = *"hashing client-side"* ]]
    [ "$(sums)" = "$want" ]
  done
}

# The most connections nbdkit's log filter saw open at once in log $1,
# after the first two (nbdsum's own, asking for a view and the export:
# the server may log their Disconnect after the private filter's first
# Connect, as it finishes closing them while nbdsum goes on).
most_open () {
  awk 'match($0, / connection=[0-9]+ /) { id = substr($0, RSTART, RLENGTH) }
       / Connect export=/ && ++seen > 2 { live[id] = 1; if (++n > most) most = n }
       / Disconnect / && (id in live) { delete live[id]; n-- }
       END { print most + 0 }' "$1"
}

@test "nbdsum-inputs: without the filter, -C N is N connections to the server (the private filter's nbd plugin)" {
  local n
  head -c 48M /dev/urandom > full.img
  want=$(reference sha256 65536 full.img)
  start_nbdkit plain --filter=log file full.img logfile="$PWD/log"
  for n in 1 3 4; do
    : > log
    run "$NBDSUM" -C "$n" -R 2 "$uri"
    echo "-C $n: $output"
    [ "$status" -eq 0 ]
    [ "$(sums)" = "$want" ]
    [[ "$output" = *"hashing client-side"* ]]
    # The two asking for a view and the export came and went first.
    [ "$(most_open log)" -eq "$n" ]
    [ "$(grep -ac ' Connect export=' log)" -eq $((n + 2)) ]
    run "$NBDSUM" --client-side -C "$n" "$uri"
    [ "$(sums)" = "$want" ]
  done
}

@test "nbdsum-inputs: a hostile export name reaches the server unchanged through the private filter, and opens nothing else" {
  local name enc
  start_nbdkit plain --filter=log file "$disk" logfile="$PWD/log"
  for name in 'a,b=c d?socket=/tmp/x&tls-psk-file=/tmp/y;z' \
      'x, y=1 @blkhash?socket=/tmp/x' 'file=/etc/passwd export=e'; do
    : > log
    enc=$("$PYTHON" -c 'import sys, urllib.parse as u
print(u.quote(sys.argv[1], safe=""))' "$name")
    run "$NBDSUM" --client-side "nbd+unix:///$enc?socket=$sock"
    echo "$name: $output"
    [ "$status" -eq 0 ]
    [ "$(sums)" = "$want" ]
    # Every connection the server saw was to that name, and no other
    # server or file was reached (nbdkit's stderr: no error).
    grep -a ' Connect export=' log | sed 's/.* export="//; s/" tls=.*//' \
      | sort -u > names
    cat names
    [ "$(cat names)" = "$name" ]
    [ ! -s "$err" ]
  done
  # A name whose end reads as a view is refused before any connection.
  : > log
  run "$NBDSUM" --client-side "nbd+unix:///a%2Cb%40blkhash?socket=$sock"
  [ "$status" -eq 1 ]
  [[ "$output" = *"is a blkhash view, not a disk image"* ]]
  [ "$(grep -ac ' Connect export=' log)" -eq 0 ]
}

@test "nbdsum-inputs: --client-side with the filter present gives the same" {
  run serve file "$disk" -- '"$NBDSUM" --client-side -C 3 -R 5 "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sums)" = "$want" ]
  run "$NBDSUM" --client-side --json "$disk"
  [[ "$output" = *'"method": "client-side"'* ]]
  [[ "$output" = *"\"checksum\": \"$want\""* ]]
}

@test "nbdsum-inputs: client-side read errors fail and print no checksum" {
  run nbdkit -U - --filter=error file "$disk" error-pread=EIO \
    error-pread-rate=1 --run '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"Input/output error"* ]]
  [ -z "$(sums)" ]
}

# Review (issue 37): a server that died mid-image failed the run as
# "Invalid argument" (nbdkit's word for its nbd plugin's ENOTCONN),
# then nbdsum printed its private nbdkit's every message, one per
# request in flight.  One line now, with what that nbdkit saw (which
# of its errors depends on the order its threads logged them: the
# connection reset, or a request on the connection found dead).
@test "nbdsum-inputs: a server dying mid-image: one line, naming what the private nbdkit saw" {
  local lines_err
  for mode in "" --client-side --plain --bmap; do
    start_nbdkit dying eval thread_model='echo parallel' \
      get_size='echo 67108864' \
      pread='if [ $4 -ge 33554432 ]; then kill -9 $PPID; exit 1; fi
             head -c $3 /dev/zero'
    run --separate-stderr timeout 60 "$NBDSUM" -q $mode "$uri"
    echo "nbdsum $mode: $status; stdout: $output; stderr: $stderr"
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    lines_err=$(grep -c . <<< "$stderr")
    [ "$lines_err" -eq 1 ]
    [[ "$stderr" =~ ^"nbdsum: $uri: "(the )?"server failed to "(hash|map)" image bytes from "[0-9]+": "[^\ ].*" (nbdsum's private nbdkit"(", and "[0-9]+" more error"s?)?")"$ ]]
  done
}

# A failure through the private nbdkit waited 5 s for it to stop:
# nbdsum asked it why with its own connections still open, and nbdkit
# waits for its clients to leave, so it was killed after STOP_SECONDS
# (a second per failed -c line with -j, in every mode).  It stops on
# SIGTERM now, nobody killed.
@test "nbdsum-inputs: a read error through the private nbdkit: it stops on SIGTERM, not killed after 5 s" {
  local kills
  command -v strace >/dev/null ||
    skip "strace is not installed (Debian package strace)"
  strace -o /dev/null true 2>/dev/null ||
    skip "strace cannot trace processes here"
  "$MKIMAGE" '4M;d:0+4M:a' eio.img
  # Only the default export: nbdsum finds no view, and hashes through
  # its private nbdkit.
  start_nbdkit eio --filter=exportname --filter=error file eio.img \
    exportname-strict=true exportname= error-pread=EIO error-pread-rate=100%
  for mode in "" --client-side --plain --bmap; do
    # LeakSanitizer cannot run under ptrace (make check-sanitizers).
    run --separate-stderr env \
      ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
      timeout 60 strace -f -qq -e trace=kill -e signal=none -o trace \
      "$NBDSUM" -q $mode "$uri"
    kills=$(grep 'kill(' trace || :)
    echo "nbdsum $mode: $status; stderr: $stderr; kill(2): $kills"
    [ "$status" -eq 1 ]
    [[ "$stderr" = *"Input/output error (nbdsum's private nbdkit"* ]]
    [[ "$kills" = *SIGTERM* ]]
    [[ "$kills" != *SIGKILL* ]]
  done
}

# Review 46: the private nbdkit killed mid-image (the OOM killer, a
# user's kill -9) failed the run with "Transport endpoint is not
# connected" alone, nothing saying that nbdkit had died.
@test "nbdsum-inputs: the private nbdkit killed mid-image: one line naming it" {
  local mode nbdkit_pid
  "$MKIMAGE" '4M;d:0+4M:a' slow.img
  for mode in "" --plain --bmap; do
    # Every read takes a minute: nbdsum is mid-image until it fails.
    start_nbdkit slow -v "${KILLED_CLIENT_OPTS[@]}" --filter=exportname \
      --filter=delay file slow.img exportname-strict=true exportname= \
      delay-read=60
    mkdir -p tmp
    TMPDIR="$PWD/tmp" "$NBDSUM" -q $mode "$uri" >out 2>err 3>&- &
    pid=$!
    wait_until 30 grep -q 'debug: delay: pread' "$err"
    nbdkit_pid=$(pgrep -x nbdkit -P "$pid")
    kill -9 "$nbdkit_pid"
    wait_exit "$pid" 30
    echo "nbdsum $mode: $rc; stdout: $(cat out); stderr: $(cat err)"
    [ "$rc" -eq 1 ]
    [ ! -s out ]
    [ "$(grep -c . err)" -eq 1 ]
    grep -q "the private nbdkit serving it was killed by SIGKILL" err
    [ -z "$(ls -A tmp)" ]
    kill_servers
  done
}

# paused_mid_image SIZE OPTION...: nbdsum -q OPTION... (pid) reading
# a random image of SIZE from a server without the filter (uri, err;
# ctl, its pause filter's control), through its private nbdkit
# (nbdkit_pid), whose read below is held until pause_control r.
paused_mid_image () {
  rm -f "$ctl"
  start_nbdkit paused -v --filter=exportname --filter=delay \
    --filter=pause random "$1" exportname-strict=true exportname= \
    delay-read=1ms pause-control="$ctl"
  shift
  pause_control p
  mkdir -p tmp
  TMPDIR="$PWD/tmp" "$NBDSUM" -q "$@" "$uri" >out 2>err 3>&- &
  pid=$!
  wait_until 30 grep -q 'debug: delay: pread' "$err"
  nbdkit_pid=$(pgrep -x nbdkit -P "$pid")
}

# The private nbdkit stopped by someone else's SIGTERM (a user's kill,
# a shutdown) failed the run with nbdkit's ESHUTDOWN alone, "Cannot
# send after transport endpoint shutdown", nothing saying who.  nbdkit
# finishes the requests in flight first: the server below it is held
# (the pause filter) until the signal, so that it comes mid-image.
# A small image is asked whole at once: nbdkit finishes hashing it
# before it quits, and the read after fails, of the checksum, or of the
# digests (--blocks), which said nbdkit's ESHUTDOWN alone too.
#
# nbdkit itself can crash as it exits here (seen once in about 15 runs
# on nbdkit 1.48 under load): told to quit, it does not close its
# plugin's connections, so the nbd plugin's reader threads outlive the
# plugin's unloading, and one still returning from a reply's callback
# runs unmapped code.  nbdsum then says what it saw, "killed by
# SIGSEGV"; that run is checked like the others and tried again, at
# most 10 times, saying so.
@test "nbdsum-inputs: the private nbdkit stopped by another's SIGTERM: one line naming it" {
  local mode size try nbdkit_pid ctl="$BATS_TEST_TMPDIR/pause.ctl"
  for mode in "4G " "4G --plain" "4G --bmap" "4M " "4M --blocks"; do
    size=${mode%% *} mode=${mode#* }
    for ((try = 1; ; try++)); do
      paused_mid_image "$size" $mode
      kill -TERM "$nbdkit_pid"
      pause_control r
      wait_exit "$pid" 30
      echo "nbdsum $size $mode (try $try): $rc; stdout: $(cat out); stderr: $(cat err)"
      [ "$rc" -eq 1 ]
      [ ! -s out ]
      [ "$(grep -c . err)" -eq 1 ]
      [ -z "$(ls -A tmp)" ]
      kill_servers
      if ((try < 10)) && grep -Eq "the private nbdkit serving it was killed by SIG(SEGV|BUS|ILL)$" err; then
        echo "try $try: nbdkit crashed as it exited; trying again"
        continue
      fi
      break
    done
    grep -q "the private nbdkit serving it was stopped by a signal nbdsum did not send" err
  done
}

# Review: nbdsum and its private nbdkit stopped together (a service
# stopped, its process group signalled): nbdsum printed nbdkit's lines
# of quitting ("error: aborting sleep because of server shut down",
# "blkhash: stopped computing digests: ..."), no news.
@test "nbdsum-inputs: nbdsum and its private nbdkit given SIGTERM together: nothing printed" {
  local mode ctl="$BATS_TEST_TMPDIR/pause.ctl"
  for mode in "" --plain --bmap; do
    paused_mid_image 4G $mode
    kill -TERM "$pid" "$nbdkit_pid"
    pause_control r
    wait_exit "$pid" 30
    echo "nbdsum $mode: $rc; stdout: $(cat out); stderr: $(cat err)"
    [ "$rc" -eq 143 ]
    [ ! -s out ]
    [ ! -s err ]
    [ -z "$(ls -A tmp)" ]
    kill_servers
  done
}

# Review (issue 37): a server that hung up cleanly mid-image (no
# reset) left no line in the private nbdkit's log: its nbd plugin says
# nothing of EOF, the filter nothing of its hashing read's ENOTCONN,
# and nbdsum printed nbdkit's "Invalid argument"; and the plugin's
# line for a reset could reach the log after the failed reply.  The
# filter names its failed read, and nbdsum reads the log once that
# nbdkit has exited.
@test "nbdsum-inputs: a server hanging up mid-image: the cause, not Invalid argument" {
  local lines_err
  mkdir hang tmp
  "$MKIMAGE" '8M;d:0+8M:a' hang/img
  start_echo hang "$PWD/hang" --hangup-at=4194304
  for opts in "-C1 -R1" "-C1 -R1 --client-side" "" --plain --bmap; do
    run --separate-stderr env TMPDIR="$PWD/tmp" timeout 60 \
      "$NBDSUM" -q $opts "nbd+unix:///img?socket=$sock"
    echo "nbdsum $opts: $status; stdout: $output; stderr: $stderr"
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    lines_err=$(grep -c . <<< "$stderr")
    [ "$lines_err" -eq 1 ]
    [[ "$stderr" = *"failed: Transport endpoint is not connected (nbdsum's private nbdkit"* ]]
    [[ "$stderr" != *"Invalid argument"* ]]
    [ -z "$(ls -A tmp)" ]
  done
}

# Review (issue 37): once a failure is named, the private nbdkit has
# exited, and saying goodbye on nbdsum's connections to it made libnbd
# 1.14's nbd_aio_disconnect read the command it had freed (valgrind:
# Invalid read).  A connection whose server hung up is just closed.
@test "nbdsum-inputs: a failure through the private nbdkit closes its connections cleanly (valgrind)" {
  local checker=(valgrind -q --error-exitcode=99)
  # make check-sanitizers' nbdsum is built with ASan, which checks it
  # (and which valgrind cannot run).
  [ -z "${BLKHASH_SANITIZERS:-}" ] || checker=()
  [ ${#checker[@]} -eq 0 ] || command -v valgrind > /dev/null ||
    skip "valgrind is not installed"
  mkdir hang
  "$MKIMAGE" '8M;d:0+8M:a' hang/img
  start_echo hang "$PWD/hang" --hangup-at=4194304
  for opts in "-C1 -R1" ""; do
    run --separate-stderr "${checker[@]}" \
      "$NBDSUM" -q $opts "nbd+unix:///img?socket=$sock"
    echo "nbdsum $opts: $status; stdout: $output; stderr: $stderr"
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [[ "$stderr" != *"Invalid read"* ]]
    [ "$(grep -c . <<< "$stderr")" -eq 1 ]
  done
}

# Review (issue 37): a qcow2 whose L2 table points at an unaligned
# cluster fails in qemu-nbd behind the private nbdkit, which says why
# ("qcow2: Image is corrupt: ..."): that line has no "error: ", and the
# filter said nothing of its failed block status, so nbdsum printed a
# bare "Input/output error" and dropped qemu's line unread.
@test "nbdsum-inputs: a corrupt qcow2: one line, with what qemu-nbd said" {
  local l1 l2 lines_err
  command -v qemu-nbd > /dev/null || skip "qemu-nbd is not installed"
  mkdir tmp
  "$MKIMAGE" '8M;d:0+8M:a' c.raw
  qemu-img convert -f raw -O qcow2 c.raw c.qcow2
  # L2 entry 64 (4 MiB in): a standard cluster at the unaligned 0x10200.
  l1=$((16#$(hexdump_at c.qcow2 40 8)))
  l2=$(( 16#$(hexdump_at c.qcow2 "$l1" 8) & 0x00fffffffffffe00 ))
  printf '\x80\x00\x00\x00\x00\x01\x02\x00' |
    dd of=c.qcow2 bs=1 seek=$((l2 + 8 * 64)) conv=notrunc status=none
  for opts in "" --plain --bmap --blocks "-C1 -R1"; do
    run --separate-stderr env TMPDIR="$PWD/tmp" timeout 60 \
      "$NBDSUM" -q $opts c.qcow2
    echo "nbdsum $opts: $status; stdout: $output; stderr: $stderr"
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    lines_err=$(grep -c . <<< "$stderr")
    [ "$lines_err" -eq 1 ]
    [[ "$stderr" = "nbdsum: c.qcow2: "*": qcow2: Image is corrupt: "*"(nbdsum's private nbdkit"* ]]
    [ -z "$(ls -A tmp)" ]
  done
}

@test "nbdsum-inputs: TLS with a pre-shared key" {
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
  [[ "$output" = *"the server requires TLS: use an nbds:// URI with tls-psk-file= or tls-certificates="* ]]
  [[ "$output" != *"hashing client-side"* ]]
}

@test "nbdsum-inputs: --client-side takes zero extents cut mid-block as one hole" {
  hash_cut_zeros -- --client-side
}

@test "nbdsum-inputs: the private nbdkit's directory is made in TMPDIR and removed" {
  mkdir tmp
  run env TMPDIR="$PWD/tmp" "$NBDSUM" "$disk"
  [ "$status" -eq 0 ]
  [ -z "$(ls -A tmp)" ]
  # Also when the private server fails.
  run env TMPDIR="$PWD/tmp" "$NBDSUM" --format=vmdk "$disk"
  [ "$status" -eq 1 ]
  [ -z "$(ls -A tmp)" ]
  run env TMPDIR="$PWD/nosuch" "$NBDSUM" "$disk"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"$PWD/nosuch"* ]]
  ! grep -qE '[0-9a-f]{64}' <<< "$output" || false
}

@test "nbdsum-inputs: a TMPDIR too long for a socket address is a clear error" {
  local long
  long="$PWD/$(printf 'd%.0s' {1..120})"
  mkdir "$long"
  run env TMPDIR="$long" "$NBDSUM" "$disk"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"too long"*"TMPDIR"* ]]
  [ -z "$(ls -A "$long")" ]
}

@test "nbdsum-inputs: a TMPDIR with URI characters in its name: the file's own checksum, never a decoy's" {
  local c tmp evil="$BATS_FILE_TMPDIR/fmt/g.raw" qcow2="$BATS_FILE_TMPDIR/disk.qcow2"
  local -a chars=('#' '&' ';' '%' ' ' '+' '?' "'" 'é' '%41' '=')
  # A decoy server where a URI cut at '#', '&' or ';' would lead.
  start_nbdkit decoy file "$evil"
  ln -s "$sock" "$PWD/t"
  [ "$(reference sha256 65536 "$evil")" != "$want" ]
  for c in "${chars[@]}"; do
    tmp="$PWD/t${c}x"
    mkdir "$tmp"
    run env TMPDIR="$tmp" "$NBDSUM" "$disk"
    echo "TMPDIR=$tmp: $output"
    [ "$status" -eq 0 ]
    [ "$(sums)" = "$want" ]
    [ -z "$(ls -A "$tmp")" ]
  done
  # All of them at once, through every way to the private server:
  # -j jobs, client-side, qemu-nbd behind it.
  tmp="$PWD/t$(printf '%s' "${chars[@]}")x"
  mkdir "$tmp"
  for args in "-j 2 $disk $disk" "--client-side $disk" "$qcow2"; do
    # shellcheck disable=SC2086
    run env TMPDIR="$tmp" "$NBDSUM" $args
    echo "TMPDIR=$tmp nbdsum $args: $output"
    [ "$status" -eq 0 ]
    [ "$(sums | sort -u)" = "$want" ]
  done
  # Without a decoy, too.
  rm "$PWD/t"
  run env TMPDIR="$tmp" "$NBDSUM" "$disk"
  [ "$status" -eq 0 ]
  [ "$(sums)" = "$want" ]
  [ -z "$(ls -A "$tmp")" ]
}

# oracle IMAGE: the reference checksum of IMAGE's guest content as
# qemu-img reads it by that path.
oracle () {
  qemu-img convert -O raw "$1" oracle.raw
  reference sha256 65536 oracle.raw
  rm oracle.raw
}

@test "nbdsum-inputs: a symlinked image's relative backing file and extents are found beside the link, as qemu does" {
  # A/ov.qcow2 -> ../B/ov.qcow2, whose backing file is 'base.raw':
  # qemu reads A/base.raw, not B/base.raw.  The same for a vmdk
  # descriptor naming its -flat extent.
  mkdir A B
  "$MKIMAGE" '1M;d:0+1M:a' A/base.raw
  "$MKIMAGE" '1M;d:0+1M:b' B/base.raw
  "$MKIMAGE" '1M;d:0+1M:c' c.raw
  "$MKIMAGE" '1M;d:0+1M:d' d.raw
  (cd B && qemu-img create -q -f qcow2 -b base.raw -F raw ov.qcow2)
  qemu-img convert -f raw -O vmdk -o subformat=monolithicFlat c.raw B/m.vmdk
  qemu-img convert -f raw -O vmdk -o subformat=monolithicFlat d.raw A/m.vmdk
  rm A/m.vmdk
  ln -s ../B/ov.qcow2 A/ov.qcow2
  ln -s ../B/m.vmdk A/m.vmdk
  for f in ov.qcow2 m.vmdk; do
    want=$(oracle "A/$f")
    [ "$want" != "$(oracle "B/$f")" ]
    run "$NBDSUM" "A/$f" "$PWD/A/$f"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(sums | sort -u)" = "$want" ]
    run "$NBDSUM" --client-side "A/$f"
    [ "$status" -eq 0 ]
    [ "$(sums)" = "$want" ]
    (cd A && "$NBDSUM" "$f") > out
    [ "$(cut -d' ' -f1 out)" = "$want" ]
  done
}

@test "nbdsum-inputs: [ CMD ARGS ] runs a server for the input, as nbdinfo does" {
  local qcow2="$BATS_FILE_TMPDIR/disk.qcow2"
  # qemu-nbd's options are not nbdsum's; the line names the command.
  run "$NBDSUM" -q [ qemu-nbd -r -f qcow2 "$qcow2" ]
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$want  [ qemu-nbd -r -f qcow2 $qcow2 ]" ]
  # A plain server was the user's choice: no notice of hashing
  # client-side, in any mode.
  for mode in "" --blocks --client-side "-j 2"; do
    # shellcheck disable=SC2086
    run --separate-stderr "$NBDSUM" $mode [ qemu-nbd -r -f qcow2 "$qcow2" ]
    echo "$mode: $status; $stderr"
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
  done
  # With the filter in the command, the server hashes; options after.
  run "$NBDSUM" [ nbdkit --filter="$BLKHASH_FILTER" file "$disk" ] \
    -d sha1 "$disk"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 2 ]
  [[ "${lines[0]}" = "BLKHASH-SHA1/64K ([ nbdkit "*" ]) = $(reference sha1 65536 "$disk")" ]]
  [ "$(sum_hex "${lines[0]}")" = "$(sum_hex "${lines[1]}")" ]
  # The command reads no standard input (an input of nbdsum's), and
  # what it prints goes to standard error, not among the checksums.
  "$MKIMAGE" '3000000;d:0+3000000:stream' stream.img
  run --separate-stderr bash -c '"$NBDSUM" --json \
    [ sh -c "echo hello; head -c 1000000 >/dev/null; exec nbdkit file $disk" ] \
    - < stream.img'
  echo "$status: $output; $stderr"
  [ "$status" -eq 0 ]
  "$PYTHON" -c 'import json, sys; json.loads(sys.argv[1])' "$output"
  [[ "$stderr" = *hello* ]]
  [[ "$output" = *"\"checksum\": \"$(reference sha256 65536 stream.img)\""* ]]
  # Errors: a command that does not run, a '[' without ']'.
  # (A PATH with a directory one may not search makes execvp say
  # "Permission denied", as env(1) does: not the point here.)
  PATH=/usr/bin:/bin run "$NBDSUM" [ nosuch-server-command ]
  [ "$status" -eq 1 ]
  [[ "$output" = *"nosuch-server-command: No such file or directory"* ]]
  ! grep -qE '[0-9a-f]{64}' <<< "$output" || false
  run "$NBDSUM" [ qemu-nbd -r "$disk"
  [ "$status" -eq 1 ]
  [[ "$output" = *"'[' must be followed by a command and ']'"* ]]
  # More [ CMD ] inputs than nbdsum keeps: the limit is named, nothing
  # runs.
  local many=() i
  for ((i = 0; i < 257; i++)); do many+=("[" false "]"); done
  run "$NBDSUM" "${many[@]}"
  [ "$status" -eq 1 ]
  [[ "$output" = *"at most 256 [ CMD ] inputs"* ]]
  [[ "$output" != *"out of memory"* ]]
}

@test "nbdsum-inputs: an export that fails is an error, not a missing view" {
  mkdir dir
  run nbdkit -U - --filter="$BLKHASH_FILTER" file dir="$PWD/dir" \
    --run '"$NBDSUM" "nbd+unix:///missing?socket=$unixsocket"'
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"export 'missing': "*"No such file or directory"* ]]
  [[ "$output" != *"hashing client-side"* ]]
}

@test "nbdsum-inputs: pipes and /proc files are hashed as what they read, as sha256sum does" {
  run "$NBDSUM" <(cat "$disk")
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$output")" = "$want" ]
  # /proc/version says 0 bytes and has some: its bytes, not an empty
  # image's checksum.
  cat /proc/version > version
  run "$NBDSUM" /proc/version
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$output")" = "$(reference sha256 65536 version)" ]
  [ "$(sum_hex "$output")" != "$(: | reference sha256 65536 -)" ]
  # --blocks needs an image it can read twice.
  run "$NBDSUM" --blocks /proc/version
  [ "$status" -eq 1 ]
  [[ "$output" = *"says it has 0 bytes but has some"* ]]
  run "$NBDSUM" --blocks <(cat "$disk")
  [ "$status" -eq 1 ]
  [[ "$output" = *"not a regular file or block device (nbdsum hashes it as a stream"* ]]
}

# limited SOFT HARD NBDSUM-ARGS...: nbdsum under ulimit -Sn SOFT and
# -Hn HARD (-: as it is), killed if still running after 10 s (status
# 124); out, err, rc.
limited () {
  local soft=$1 hard=$2
  shift 2
  rc=0
  (ulimit -Sn "$soft" && { [ "$hard" = - ] || ulimit -Hn "$hard"; } &&
     exec timeout -k 1 10 "$NBDSUM" "$@") > out 2> err || rc=$?
  echo "ulimit -Sn $soft -Hn $hard, ${*:1:3}...: status $rc," \
    "$(wc -l < err) lines on stderr:"
  head -n 3 err
}

@test "nbdsum-inputs: few file descriptors (ulimit -n): the checksum, or a clear error, never a hang" {
  local n eight=() uri
  eight=("$disk" "$disk" "$disk" "$disk" "$disk" "$disk" "$disk" "$disk")
  start_server disk file "$disk"
  for n in 16 10; do
    # The hard limit that low: each local file fails, saying why, once.
    limited "$n" "$n" "$disk"
    [ "$rc" -eq 1 ]
    [ ! -s out ]
    [ "$(cat err)" = "nbdsum: $disk: too few file descriptors for a private nbdkit with 4 connections: it needs 32, ulimit -n allows $n (raise it, or lower -C)" ]
    # With -j 8: jobs too (at 16, one at a time; at 10, none).
    limited "$n" "$n" -j 8 "${eight[@]}"
    [ "$rc" -eq 1 ]
    [ ! -s out ]
    [ "$(wc -l < err)" -eq 8 ]
    [ "$(grep -c "ulimit -n allows $n" err)" -eq 8 ]
    # Only the soft limit: nbdsum raises it as far as it needs.
    limited "$n" - "$disk"
    [ "$rc" -eq 0 ]
    [ "$(cat out)" = "$want  $disk" ]
    [ ! -s err ]
    limited "$n" - -j 8 "${eight[@]}"
    [ "$rc" -eq 0 ]
    [ "$(sort -u out)" = "$want  $disk" ]
    [ "$(wc -l < out)" -eq 8 ]
    [ ! -s err ]
  done
  # Fewer connections need fewer.
  limited 20 20 -C 1 "$disk"
  [ "$rc" -eq 0 ]
  [ "$(cat out)" = "$want  $disk" ]
  # A URI needs no private server; nbdsum opens the connections it can.
  limited 16 16 -C 64 "$uri" "$uri"
  [ "$rc" -eq 0 ]
  [ "$(cat out)" = "$want  $uri
$want  $uri" ]
  [ ! -s err ]
}

@test "nbdsum-inputs: an image over the size limit is refused at once, whoever would hash it" {
  local over="over the limit of 1 PiB for a blkhash checksum: --max-size=SIZE lifts it (0: no limit)"
  local eib="the image is 1152921504606846976 bytes (1 EiB)"
  # 23 MB declaring 1 EiB: its private nbdkit's filter refuses the view,
  # and nbdsum refuses to hash it client-side.
  qemu-img create -q -f qcow2 -o cluster_size=2M huge.qcow2 1E
  run timeout 120 "$NBDSUM" huge.qcow2
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: huge.qcow2: $eib, $over" ]
  # A server without the filter, with it, and client-side by choice.
  run timeout 120 "$NBDSUM" [ nbdkit null 1E ]
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: [ nbdkit null 1E ]: $eib, $over" ]
  # (The server's own error, on its standard error, comes first.)
  run timeout 120 "$NBDSUM" [ nbdkit --filter="$BLKHASH_FILTER" null 1E ]
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" = *"blkhash: export '': 1152921504606846976 bytes (1 EiB), over the limit of 1 PiB for a blkhash view: blkhash-max-size=SIZE lifts it (0: no limit)" ]]
  [[ "${lines[1]}" = "nbdsum: [ nbdkit "*" null 1E ]: $eib, $over" ]]
  [ "${#lines[@]}" -eq 2 ]
  run timeout 120 "$NBDSUM" --client-side --blocks [ nbdkit null 1E ]
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: [ nbdkit null 1E ]: $eib, $over" ]
  # A plain digest hashes every byte: its limit is 1 TiB.
  run timeout 120 "$NBDSUM" --plain [ nbdkit --filter="$BLKHASH_FILTER" null 2T ]
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "${lines[1]}" = "nbdsum: [ nbdkit "*" null 2T ]: the image is 2199023255552 bytes (2 TiB), over the limit of 1 TiB for a plain digest: --max-size=SIZE lifts it (0: no limit)" ]]
  ! grep -qE '[0-9a-f]{64}' <<< "$output" || false
}
