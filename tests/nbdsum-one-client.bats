#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum against a server that admits one client at a time and frees
# its slot late, as nbdkit --filter=limit limit=1 does (only once it
# has seen the last client go): nbdsum's next connection, right after
# its look for a view closed, was closed before the greeting, and
# nbdsum failed at random with libnbd's bare "server disconnected
# unexpectedly".  tests/echonbd.py --one-client=SECONDS refuses every
# client for SECONDS after the last one left, so that it always
# happens.

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

bats_require_minimum_version 1.5.0

setup () {
  cd "$BATS_TEST_TMPDIR"
  mkdir srv tmp
  "$MKIMAGE" '4M;d:0+1M:a;d:3M+100000:b' srv/img
  # Served as the disk for the view names, as nbdkit's file plugin
  # serves it for any export name (--no-echo): nbdsum closes that
  # connection and opens another itself, not only its private nbdkit.
  cp srv/img srv/img@blkhash
  cp srv/img srv/img@digest:sha256
}

teardown () {
  kill_servers
}

# one_client SECONDS OPTION...: nbdsum OPTION... on srv/img, served by
# echonbd.py --one-client=SECONDS $echo_opts, TMPDIR=tmp; u is its URI.
one_client () {
  kill_servers
  # shellcheck disable=SC2086
  start_echo one "$PWD/srv" --one-client="$1" $echo_opts
  u="nbd+unix:///img?socket=$sock"
  run --separate-stderr env TMPDIR="$PWD/tmp" timeout 60 "$NBDSUM" \
    "${@:2}" "$u"
  echo "nbdsum ${*:2}: status $status; stdout: $output; stderr: $stderr"
  [ -z "$(ls -A tmp)" ]
}

@test "nbdsum-one-client: a slot freed late: nbdsum waits for it, server- and client-side, views looked for or not" {
  local want plain opts
  want=$(reference sha256 65536 srv/img)
  plain=$(sha256sum < srv/img | cut -d' ' -f1)
  for echo_opts in --no-echo ""; do
    for opts in "" --client-side "-C 1"; do
      # shellcheck disable=SC2086
      one_client 0.3 $opts
      [ "$status" -eq 0 ]
      [ "$output" = "$want  $u" ]
    done
    one_client 0.3 --plain
    [ "$status" -eq 0 ]
    [ "$output" = "SHA256 ($u) = $plain" ]
  done
}

@test "nbdsum-one-client: a slot never freed: one line naming the cause, within seconds" {
  local start cause="the server closed the connection before greeting it (does it admit one client at a time?): "
  echo_opts=--no-echo
  start=$(date +%s)
  one_client 3600
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  [ "$(wc -l <<< "$stderr")" -eq 1 ]
  [[ "$stderr" = "nbdsum: $u: $cause"?* ]]
  (( $(date +%s) - start < 20 ))
}
