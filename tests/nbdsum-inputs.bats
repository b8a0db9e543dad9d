#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum's inputs: local files (a private nbdkit, in TMPDIR, and the
# descriptors it needs under ulimit -n), standard input, qcow2, servers
# without the filter (client-side), read errors, TLS.

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
  head -c 300000 /dev/urandom > other.img
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

@test "nbdsum-inputs: qcow2 equals raw: plain, compressed, with a backing file" {
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

@test "nbdsum-inputs: --format=raw hashes a qcow2 file's own bytes" {
  run "$NBDSUM" --format=raw "$BATS_FILE_TMPDIR/disk.qcow2"
  [ "$status" -eq 0 ]
  [ "$(sums)" = "$(reference sha256 65536 "$BATS_FILE_TMPDIR/disk.qcow2")" ]
}

@test "nbdsum-inputs: qemu-nbd without the filter: client-side, equal, said so" {
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
  [[ "$output" = *"Operation not supported"* ]]
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

@test "nbdsum-inputs: [ CMD ARGS ] runs a server for the input, as nbdinfo does" {
  local qcow2="$BATS_FILE_TMPDIR/disk.qcow2"
  # qemu-nbd's options are not nbdsum's; the line names the command.
  run "$NBDSUM" -q [ qemu-nbd -r -f qcow2 "$qcow2" ]
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$want  [ qemu-nbd -r -f qcow2 $qcow2 ]" ]
  # With the filter in the command, the server hashes; options after.
  run "$NBDSUM" [ nbdkit --filter="$BLKHASH_FILTER" file "$disk" ] \
    -d sha1 "$disk"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 2 ]
  [[ "${lines[0]}" = "BLKHASH-SHA1/64K ([ nbdkit "*" ]) = $(reference sha1 65536 "$disk")" ]]
  [ "$(sum_hex "${lines[0]}")" = "$(sum_hex "${lines[1]}")" ]
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
