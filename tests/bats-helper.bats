#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The bats helpers users load with "$(nbdsum --bats-helper)", tested
# as a user's pipeline test would use them: serve an image through the
# filter, copy it, check the copy, catch a corrupted one.

load "$top_srcdir/tests/helpers"
load "$("$NBDSUM" --bats-helper)"

setup () {
  cd "$BATS_TEST_TMPDIR"
  "$MKIMAGE" '8M;d:0+1M:a;z:2M+1M;d:5M+300000:b' disk.img
}

teardown () {
  blkhash_stop
}

# The example at the top of the helpers, as it is there: a suite of
# its own, run by bats.
@test "bats-helper: the helpers' own example runs as written" {
  sed -n '/^#   load /,/^# blkhash_serve /p' "$("$NBDSUM" --bats-helper)" |
    sed -e '$d' -e 's/^#   //' -e 's/^#$//' > example.bats
  cat example.bats
  grep -q 'blkhash_serve disk.img' example.bats
  # As a user runs it: nbdsum in PATH, no BLKHASH_FILTER (from a build
  # tree, the helpers' own filter: nbdkit found no "blkhash" before).
  PATH="$(dirname "$NBDSUM"):$PATH" run env -u BLKHASH_FILTER bats example.bats
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"ok 1 the copy is the image"* ]]
}

@test "bats-helper: from a build tree, the filter is the build tree's unless BLKHASH_FILTER says" {
  local helper
  helper=$("$NBDSUM" --bats-helper)
  run env -u BLKHASH_FILTER bash -c 'source "$1"; echo "$BLKHASH_FILTER"' _ \
    "$helper"
  echo "$helper: $output"
  [ "$output" = "$(cd "${helper%/*}/.." && pwd)/filter/.libs/nbdkit-blkhash-filter.so" ]
  [ -f "$output" ]
  # Loaded by a relative path, then used from elsewhere: still found.
  run env -u BLKHASH_FILTER bash -c 'cd "${1%/*}"; source ./blkhash.bash; cd /; [ -f "$BLKHASH_FILTER" ] && echo "$BLKHASH_FILTER"' _ "$helper"
  [ "$status" -eq 0 ]
  run env BLKHASH_FILTER=/x.so bash -c 'source "$1"; echo "$BLKHASH_FILTER"' _ \
    "$helper"
  [ "$output" = /x.so ]
}

# A second blkhash_serve in a test replaces the first server.
@test "bats-helper: a second blkhash_serve stops the first" {
  local first
  blkhash_serve disk.img
  first=$BLKHASH_PID
  blkhash_serve --readonly memory 1M
  ! kill -0 "$first" 2>/dev/null || false
  assert_blkhash "$BLKHASH_URI" "$(head -c 1M /dev/zero | reference sha256 65536 -)"
}

@test "bats-helper: blkhash_stop signals no process but its nbdkit (a pid it held may be another's by then)" {
  local stranger
  blkhash_serve disk.img
  # nbdkit ends on its own, and bash reaps it at once: its pid is free.
  kill -9 "$BLKHASH_PID"
  while kill -0 "$BLKHASH_PID" 2>/dev/null; do sleep 0.05; done
  # Another's process that got the pid (a process not a child of this
  # shell stands for it).
  stranger=$(sleep 60 </dev/null >/dev/null 2>&1 3>&- & echo $!)
  BLKHASH_PID=$stranger
  blkhash_stop
  [ -z "$BLKHASH_PID" ]
  # Not a zombie either (its new parent reaps it at leisure).
  [[ "$(ps -o stat= -p "$stranger")" = [^Z]* ]] ||
    { echo "blkhash_stop killed $stranger"; false; }
  kill "$stranger"
}

# The sample from the helpers' own comment, as a user writes it.
@test "bats-helper: a user's test: the copy is the image, a corrupted copy is not" {
  blkhash_serve disk.img
  qemu-img convert -f raw -O qcow2 "$BLKHASH_URI" copy.qcow2
  assert_blkhash copy.qcow2 "$(blkhash_sum "$BLKHASH_URI")"
  # A corrupted copy fails the assertion, and says so.
  qemu-io -f qcow2 copy.qcow2 -c 'write -P 7 100000 1' >/dev/null
  run assert_blkhash copy.qcow2 "$(blkhash_sum "$BLKHASH_URI")"
  [ "$status" -eq 1 ]
  [[ "$output" = *"assert_blkhash: copy.qcow2"*"expected"*"got"* ]]
}

@test "bats-helper: blkhash_sum is the reference checksum, with nbdsum's options" {
  [ "$(blkhash_sum disk.img)" = "$(reference sha256 65536 disk.img)" ]
  [ "$(blkhash_sum disk.img -d sha1 --block-size 1M)" = \
    "$(reference sha1 1048576 disk.img)" ]
  assert_blkhash disk.img "$(reference sha512 65536 disk.img)" -d sha512
}

@test "bats-helper: blkhash_serve serves through the filter, a plugin and options too" {
  blkhash_serve disk.img
  [ -S "$BLKHASH_SOCKET" ]
  kill -0 "$BLKHASH_PID"
  # The view is there: the server hashed it.
  run "$NBDSUM" "$BLKHASH_URI"
  [ "$status" -eq 0 ]
  [[ "$output" != *"hashing client-side"* ]]
  blkhash_stop
  [ -z "$BLKHASH_PID" ]
  blkhash_serve --readonly memory 1M
  assert_blkhash "$BLKHASH_URI" "$(head -c 1M /dev/zero | reference sha256 65536 -)"
}

@test "bats-helper: blkhash_serve fails, saying why, if nbdkit does not start" {
  run blkhash_serve nosuch-plugin
  [ "$status" -eq 1 ]
  [[ "$output" = *"blkhash_serve: nbdkit did not start"* ]]
  [[ "$output" = *"nosuch-plugin"* ]]
}

# nbdkit makes its socket file at bind(2), and refuses clients until
# listen(2); blkhash_serve returns once it accepts them.  (Seen as
# "Connection refused" in this project's own tests under valgrind.)
@test "bats-helper: blkhash_serve returns once nbdkit accepts connections, not at its socket file" {
  local real
  real=$(command -v nbdkit)
  mkdir bin
  printf '#!/bin/sh\nexec %q %q 1.5 %q "$@"\n' "$PYTHON" \
    "$top_srcdir/tests/slowlisten.py" "$real" > bin/nbdkit
  chmod +x bin/nbdkit
  PATH="$PWD/bin:$PATH" blkhash_serve disk.img
  run blkhash_sum "$BLKHASH_URI"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$(reference sha256 65536 disk.img)" ]
}

# After 10 s by the clock, not 200 sleeps of 0.05 s: each forks, and
# took 15 s on a busy machine (here each sleep takes 0.2 s: 40 s).
@test "bats-helper: blkhash_serve gives up, saying so, on an nbdkit that never listens" {
  local real start
  real=$(command -v nbdkit)
  mkdir bin
  printf '#!/bin/sh\necho $$ > started\nexec %q %q never %q "$@"\n' \
    "$PYTHON" "$top_srcdir/tests/slowlisten.py" "$real" > bin/nbdkit
  printf '#!/bin/sh\nexec %q 0.2\n' "$(command -v sleep)" > bin/sleep
  chmod +x bin/nbdkit bin/sleep
  start=$SECONDS
  PATH="$PWD/bin:$PATH" run blkhash_serve disk.img
  echo "$output; after $((SECONDS - start)) s"
  [ "$status" -eq 1 ]
  (( SECONDS - start <= 13 ))
  [[ "$output" = "blkhash_serve: nbdkit did not accept connections within 10 s"* ]]
  # It stopped what it started.
  ! kill -0 "$(cat started)" 2>/dev/null || false
}

# nbdkit takes the last -U and -P: a user's -P hid the pidfile that
# says it is ready (10 s lost, then "did not accept connections"), a
# user's -U made BLKHASH_URI name a socket nobody listens on.
@test "bats-helper: blkhash_serve refuses a -U or -P of the user's, saying so, at once" {
  local opt
  for opt in "-P my.pid" --pidfile=my.pid "-U my.sock" "--unix my.sock" \
    "-fU my.sock"; do
    # shellcheck disable=SC2086
    run blkhash_serve $opt file disk.img
    echo "$opt: $status: $output"
    [ "$status" -eq 1 ]
    [ "$output" = "blkhash_serve: ${opt%% *}: it gives nbdkit its own -U and -P (BLKHASH_SOCKET, and a pidfile to know when it is ready): leave out yours" ]
    [ ! -e my.pid ] && [ ! -e my.sock ]
  done
}

# Review: with nbdkit's --run, nbdkit wrote its pidfile, ran the
# command and exited, and blkhash_serve returned 0 with BLKHASH_URI
# naming no server.
@test "bats-helper: blkhash_serve refuses nbdkit's --run, saying so, at once" {
  local opt why
  local run="nbdkit would exit once its command does, and blkhash_serve serves until blkhash_stop: leave it out"
  local own="it gives nbdkit its own -U and -P (BLKHASH_SOCKET, and a pidfile to know when it is ready): leave out yours"
  # Review 14: nbdkit (getopt) takes an option's unique prefix too.
  for opt in "--run true" "--run=true" "--ru true" "--ru=true" \
             "--pi my.pid" "--pidf=my.pid" "--un my.sock" "--uni=my.sock"; do
    # shellcheck disable=SC2086
    run blkhash_serve $opt file disk.img
    echo "$opt: $status: $output"
    [ "$status" -eq 1 ]
    case $opt in
      --r*) why="blkhash_serve: ${opt%%[ =]*}: $run" ;;
      *) why="blkhash_serve: ${opt%% *}: $own" ;;
    esac
    [ "$output" = "$why" ]
  done
}

# Outside a test (setup_file) there is no BATS_TEST_TMPDIR: the socket,
# the pidfile and the log went to /.
@test "bats-helper: blkhash_serve in setup_file serves from BATS_FILE_TMPDIR" {
  # Not "@test" at the start of a line here: bats would take it.
  local at=@
  cat > file.bats <<EOT
load "\$("$NBDSUM" --bats-helper)"
setup_file () {
  "$MKIMAGE" '1M;d:0+100000:a' "\$BATS_FILE_TMPDIR/f.img"
  blkhash_serve "\$BATS_FILE_TMPDIR/f.img"
}
teardown_file () { blkhash_stop; }
${at}test "served once for the file" {
  [[ "\$BLKHASH_SOCKET" = "\$BATS_FILE_TMPDIR"/* ]]
  assert_blkhash "\$BLKHASH_URI" "\$(blkhash_sum "\$BATS_FILE_TMPDIR/f.img" --client-side)"
}
EOT
  # As bats runs setup_file: no BATS_TEST_TMPDIR (this test's is
  # exported).
  PATH="$(dirname "$NBDSUM"):$PATH" run env -u BATS_TEST_TMPDIR bats file.bats
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"ok 1 served once for the file"* ]]
}

# BLKHASH_URI is a URI: a socket's path with a space (or %, &, +) in
# it is percent-encoded there.
@test "bats-helper: blkhash_serve in a directory with a space and a percent sign" {
  mkdir "a b%20&c+d"
  BATS_TEST_TMPDIR="$PWD/a b%20&c+d"
  blkhash_serve disk.img
  [ "$BLKHASH_SOCKET" = "$PWD/a b%20&c+d/blkhash.sock" ]
  [[ "$BLKHASH_URI" = *"/a%20b%2520%26c%2Bd/blkhash.sock" ]]
  assert_blkhash "$BLKHASH_URI" "$(reference sha256 65536 disk.img)"
}

@test "bats-helper: nbdsum --bats-helper names an existing file; make install puts it there" {
  [ -f "$("$NBDSUM" --bats-helper)" ]
  make -C "$top_builddir" install DESTDIR="$BATS_TEST_TMPDIR/root" >/dev/null
  [ -f "$(find "$BATS_TEST_TMPDIR/root" -path '*/nbdkit-blkhash/blkhash.bash')" ]
  [ -f "$(find "$BATS_TEST_TMPDIR/root" -path '*/bash-completion/completions/nbdsum')" ]
}
