#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum never takes a blkhash view for an image: a view's URI is
# refused, in every mode, before anything is hashed or connected, with
# the image's URI to give instead; names that only look like views are
# images.

load "$top_srcdir/tests/helpers"

setup_file () {
  "$MKIMAGE" '4M;d:0+1M:a;d:3M+100000:b' "$BATS_FILE_TMPDIR/small.img"
}

setup () {
  small="$BATS_FILE_TMPDIR/small.img"
  cd "$BATS_TEST_TMPDIR"
}

teardown () {
  local p
  if [ -f "$BATS_TEST_TMPDIR/nbdkit.pid" ]; then
    p=$(cat "$BATS_TEST_TMPDIR/nbdkit.pid")
    ! ours "$p" || kill "$p" 2>/dev/null || :
  fi
}

# A filtered nbdkit serving small.img on $sock (any export name),
# stopped by teardown; $base is the image's URI.
start_server () {
  sock="$BATS_TEST_TMPDIR/sock"
  nbdkit_daemon "$BATS_TEST_TMPDIR/nbdkit.pid" --filter="$BLKHASH_FILTER" \
    -U "$sock" file "$small"
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

@test "nbdsum-views: a view URI is refused in every mode, never hashed" {
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

@test "nbdsum-views: the refusal names the image's export and the view's options" {
  start_server
  run "$NBDSUM" "nbd+unix:///disk%201@blkhash:sha1/1M?socket=$sock"
  refused "nbd+unix:///disk%201?socket=$sock"
  [[ "$output" = *"export 'disk 1@blkhash:sha1/1M' is a blkhash view"* ]]
  [[ "$output" = *"with -d sha1 --block-size 1M"* ]]
}

@test "nbdsum-views: views are refused before anything is hashed or connected" {
  start_server
  # The image comes first but is not hashed either.
  run "$NBDSUM" "$base" "nbd+unix:///@blkhash?socket=$sock"
  refused "$base"
  # No server at all: the name alone is refused.
  run "$NBDSUM" "nbd+unix:///@blkhash?socket=$BATS_TEST_TMPDIR/nosuch"
  refused "nbd+unix:///?socket=$BATS_TEST_TMPDIR/nosuch"
  [[ "$output" != *"No such file"* ]]
}

@test "nbdsum-views: names that only look like views are images" {
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
