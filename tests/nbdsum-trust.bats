#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum can be trusted: it never takes a blkhash view for an image,
# and when it is interrupted it disconnects cleanly (nbdkit 1.32
# aborts when a client vanishes with requests in flight), stops its
# private nbdkit quietly and leaves nothing in TMPDIR.

load "$top_srcdir/tests/helpers"

setup_file () {
  "$MKIMAGE" '4M;d:0+1M:a;d:3M+100000:b' "$BATS_FILE_TMPDIR/small.img"
  # 256 MiB of data in 1 GiB: with sha3-512, nbdsum is still hashing
  # a good second after it starts.  mkimage makes data slowly, so one
  # 64 MiB piece is copied four times.
  "$MKIMAGE" '64M;d:0+64M:a' "$BATS_FILE_TMPDIR/piece.img"
  truncate -s 1G "$BATS_FILE_TMPDIR/big.img"
  for i in 0 1 2 3; do
    dd if="$BATS_FILE_TMPDIR/piece.img" of="$BATS_FILE_TMPDIR/big.img" \
      bs=64M seek=$i conv=notrunc status=none
  done
  rm "$BATS_FILE_TMPDIR/piece.img"
}

setup () {
  small="$BATS_FILE_TMPDIR/small.img"
  big="$BATS_FILE_TMPDIR/big.img"
  cd "$BATS_TEST_TMPDIR"
}

teardown () {
  if [ -f "$BATS_TEST_TMPDIR/nbdkit.pid" ]; then
    kill "$(cat "$BATS_TEST_TMPDIR/nbdkit.pid")" 2>/dev/null || :
  fi
}

# A filtered nbdkit serving small.img on $sock (any export name),
# stopped by teardown; $base is the image's URI.
start_server () {
  sock="$BATS_TEST_TMPDIR/sock"
  nbdkit --filter="$BLKHASH_FILTER" -U "$sock" \
    -P "$BATS_TEST_TMPDIR/nbdkit.pid" file "$small"
  base="nbd+unix:///?socket=$sock"
}

# The last run refused a view: it failed, printed no checksum, said
# why and named the URI to use instead ($1).
refused () {
  echo "$output"
  [ "$status" -ne 0 ]
  ! grep -qE '[0-9a-f]{40}' <<< "$output" || false
  [[ "$output" = *"is a blkhash view, not a disk image"* ]]
  [[ "$output" = *"use the image's URI instead: '$1'"* ]]
}

# Wait until no nbdkit serves big.img: a private one that outlived
# nbdsum could still write to its stderr after we looked.
wait_servers_gone () {
  local i
  for ((i = 0; i < 50; i++)); do
    pgrep -f -- "nbdkit.*$big" >/dev/null || return 0
    sleep 0.1
  done
  echo "a private nbdkit outlived nbdsum"
  false
}

@test "trust: a view URI is refused in every mode, never hashed" {
  start_server
  local e view
  # Plain, with options, doubled, malformed, and percent-encoded.
  for e in '@blkhash' '@blkhash:sha1' '@blkhash:sha256/1M' \
           '@blkhash@blkhash' '@blkhash:' '%40blkhash'; do
    view="nbd+unix:///$e?socket=$sock"
    run "$NBDSUM" "$view"
    refused "$base"
    [ "$status" -eq 1 ]
    run "$NBDSUM" --client-side "$view"
    refused "$base"
    [ "$status" -eq 1 ]
    run "$NBDSUM" --blocks "$view"
    refused "$base"
    [ "$status" -eq 1 ]
    run "$NBDSUM" --diff "$base" "$view"
    refused "$base"
    [ "$status" -eq 2 ]
    run "$NBDSUM" --diff "$view" "$base"
    refused "$base"
    [ "$status" -eq 2 ]
    run bash -c 'printf "%064x  %s\n" 0 "$1" | "$NBDSUM" -c -' _ "$view"
    refused "$base"
    [ "$status" -eq 1 ]
    [[ "$output" = *"$view: FAILED open or read"* ]]
  done
}

@test "trust: the refusal names the image's export and the view's options" {
  start_server
  run "$NBDSUM" "nbd+unix:///disk%201@blkhash:sha1/1M?socket=$sock"
  refused "nbd+unix:///disk%201?socket=$sock"
  [[ "$output" = *"export 'disk 1@blkhash:sha1/1M' is a blkhash view"* ]]
  [[ "$output" = *"with -d sha1 --block-size 1M"* ]]
}

@test "trust: views are refused before anything is hashed or connected" {
  start_server
  # The image comes first but is not hashed either.
  run "$NBDSUM" "$base" "nbd+unix:///@blkhash?socket=$sock"
  refused "$base"
  # No server at all: the name alone is refused.
  run "$NBDSUM" "nbd+unix:///@blkhash?socket=$BATS_TEST_TMPDIR/nosuch"
  refused "nbd+unix:///?socket=$BATS_TEST_TMPDIR/nosuch"
  [[ "$output" != *"No such file"* ]]
}

@test "trust: names that only look like views are images" {
  start_server
  local want
  want=$(reference sha256 65536 "$small")
  # An export name with the marker inside it, not at a marker's place.
  run "$NBDSUM" "nbd+unix:///a@blkhashy?socket=$sock"
  [ "$status" -eq 0 ]
  [ "${lines[-1]%% *}" = "$want" ]
  # A local file is a file, whatever its name.
  cp "$small" 'disk@blkhash'
  run "$NBDSUM" 'disk@blkhash'
  [ "$status" -eq 0 ]
  [ "$output" = "$want  disk@blkhash" ]
}

@test "trust: the private nbdkit's directory is made in TMPDIR and removed" {
  mkdir tmp
  run env TMPDIR="$PWD/tmp" "$NBDSUM" "$small"
  [ "$status" -eq 0 ]
  [ -z "$(ls -A tmp)" ]
  # Also when the private server fails.
  run env TMPDIR="$PWD/tmp" "$NBDSUM" --format=vmdk "$small"
  [ "$status" -eq 1 ]
  [ -z "$(ls -A tmp)" ]
  run env TMPDIR="$PWD/nosuch" "$NBDSUM" "$small"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"$PWD/nosuch"* ]]
  ! grep -qE '[0-9a-f]{64}' <<< "$output" || false
}

@test "trust: a TMPDIR too long for a socket address is a clear error" {
  local long
  long="$PWD/$(printf 'd%.0s' {1..120})"
  mkdir "$long"
  run env TMPDIR="$long" "$NBDSUM" "$small"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"too long"*"TMPDIR"* ]]
  [ -z "$(ls -A "$long")" ]
}

# interrupt SIG DELAY NBDSUM-ARGS...: start nbdsum with its own TMPDIR,
# send SIG DELAY seconds after it made its private directory, and check
# that it died of SIG with no checksum, no mess from nbdkit and no files.
interrupt () {
  local sig=$1 delay=$2 tmp pid i st=0 start
  shift 2
  tmp=$(mktemp -d "$BATS_TEST_TMPDIR/tmp.XXXXXX")
  # A script's background jobs ignore SIGINT: give nbdsum the defaults.
  TMPDIR="$tmp" env --default-signal=HUP,INT,PIPE,TERM \
    "$NBDSUM" "$@" >out 2>err 3>&- &
  pid=$!
  for ((i = 0; i < 200; i++)); do
    compgen -G "$tmp/nbdsum*" >/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if ! compgen -G "$tmp/nbdsum*" >/dev/null; then
    echo "nbdsum made no directory in TMPDIR before it ended"
    wait "$pid" || :
    false
  fi
  sleep "$delay"
  start=$SECONDS
  kill -s "$sig" "$pid"
  wait "$pid" || st=$?
  wait_servers_gone
  echo "SIG$sig after $delay s: status $st in $((SECONDS - start)) s"
  echo "stdout: $(cat out)"
  echo "stderr: $(cat err)"
  echo "left in TMPDIR: $(ls -A "$tmp")"
  [ "$st" -eq $((128 + $(kill -l "$sig"))) ]
  [ ! -s out ]
  ! grep -E 'Assertion|Broken pipe|raw_send_socket' err || false
  # Nothing else either, unless the server (or a loaded machine) was
  # too slow to answer in time: then nbdsum says so and kills it.
  ! grep -vE '^nbdsum: .*: [0-9]+ connections? still had requests in flight after [0-9]+ seconds: closing (it|them) anyway$' err || false
  [ -z "$(ls -A "$tmp")" ]
}

# The server has all of the image in flight from the start (64 chunks
# of 64 MiB): it answers them all before nbdsum ends.
@test "trust: SIGINT, SIGTERM, SIGHUP mid-run, server-side" {
  local delay
  for delay in 0 0.15 0.3; do
    interrupt INT "$delay" -d sha3-512 "$big"
    interrupt TERM "$delay" -d sha3-512 "$big"
  done
  interrupt HUP 0.15 -d sha3-512 "$big"
}

@test "trust: SIGINT, SIGTERM, SIGHUP mid-run, client-side" {
  local delay
  for delay in 0 0.1 0.2 0.3 0.4; do
    interrupt INT "$delay" --client-side -d sha3-512 "$big"
    interrupt TERM "$delay" --client-side -d sha3-512 "$big"
  done
  interrupt HUP 0.2 --client-side -d sha3-512 "$big"
}

@test "trust: nbdsum --blocks IMAGE | head -1 ends quietly" {
  local mode i tmp st
  for mode in --client-side ""; do
    for i in 1 2 3 4 5; do
      tmp=$(mktemp -d "$BATS_TEST_TMPDIR/tmp.XXXXXX")
      TMPDIR="$tmp" env --default-signal=PIPE \
        "$NBDSUM" $mode --blocks "$big" 2>err | head -n 1 >out
      st=${PIPESTATUS[0]}
      wait_servers_gone
      echo "${mode:-server-side} #$i: status $st, stdout $(cat out)"
      echo "stderr: $(cat err)"
      [ "$st" -eq 141 ]
      [ "$(cat out)" = "# sha256 65536 1073741824" ]
      [ ! -s err ]
      [ -z "$(ls -A "$tmp")" ]
    done
  done
}

@test "trust: a closed progress pipe mid-run ends nbdsum quietly" {
  local i tmp st
  for i in 1 2 3 4 5; do
    tmp=$(mktemp -d "$BATS_TEST_TMPDIR/tmp.XXXXXX")
    TMPDIR="$tmp" env --default-signal=PIPE "$NBDSUM" --client-side \
      -d sha3-512 --progress=3 "$big" 3>&1 >out 2>err | head -n 1 >/dev/null
    st=${PIPESTATUS[0]}
    wait_servers_gone
    echo "#$i: status $st; stdout: $(cat out); stderr: $(cat err)"
    [ "$st" -eq 141 ]
    [ ! -s out ]
    [ ! -s err ]
    [ -z "$(ls -A "$tmp")" ]
  done
}

@test "trust: SIGINT stops nbdsum waiting on standard input" {
  local pid st=0 start
  # Held open here, the fifo never ends and never has data.
  mkfifo fifo
  exec 4<>fifo
  start=$SECONDS
  env --default-signal=INT "$NBDSUM" - <fifo >out 2>err 3>&- 4>&- &
  pid=$!
  sleep 0.3
  kill -s INT "$pid"
  wait "$pid" || st=$?
  exec 4>&-
  echo "status $st after $((SECONDS - start)) s; stderr: $(cat err)"
  [ "$st" -eq 130 ]
  [ ! -s out ]
  [ $((SECONDS - start)) -lt 4 ]
}
