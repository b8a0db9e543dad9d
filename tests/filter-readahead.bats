#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# blkhash-readahead: a reader thread reads the next piece of a run
# while the request's own thread reads and hashes the current one.
# Every checksum is compared with tests/reference.py; -D
# blkhash.stats=1 tells how many pieces the readers read, so each test
# knows the path it means to test was taken.

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

setup_file () {
  # Data, a hole, allocated zeros, a short last block.
  "$MKIMAGE" '41930695;d:0+9M:a;z:9M+1M;d:11M+13M:b;d:26M+100000:c;d:30M+10000000:d;d:41900000+30695:f' \
    "$BATS_FILE_TMPDIR/disk.img"
  "$MKIMAGE" '16M;d:0+16M:e' "$BATS_FILE_TMPDIR/small.img"
}

setup () {
  disk=$BATS_FILE_TMPDIR/disk.img
  small=$BATS_FILE_TMPDIR/small.img
}

teardown () {
  kill_servers
}

# The pieces read by readers, from the last stats line in $output.
readahead_pieces () {
  grep 'stats:' <<< "$output" | tail -n 1 |
    sed -n 's/.*, read ahead \([0-9]*\) pieces .*/\1/p'
}

# nbdkit with stats and the filter, running COMMAND on the server:
# stats_run NBDKIT-ARGS... -- COMMAND
stats_run () {
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  run nbdkit -D blkhash.stats=1 -v -U - --filter="$BLKHASH_FILTER" \
    "${args[@]}" --run "$*"
}

@test "filter-readahead: on, every digest and block size equals the reference" {
  local spec d bs want pieces
  for spec in sha256:4096 sha256:65536 sha1:98304 sha512:1048576 \
              sha256:16777216 shake128:262144; do
    d=${spec%:*} bs=${spec#*:}
    want=$(reference "$d" "$bs" "$disk")
    stats_run file "$disk" blkhash-readahead=true blkhash-cache=false -- \
      '"$NBDSUM" -d '"$d"' --block-size '"$bs"' "$uri"'
    [ "$status" -eq 0 ]
    [ "$(sum_hex "$(grep -v '^nbdkit' <<< "$output" | head -n 1)")" = "$want" ]
    pieces=$(readahead_pieces)
    echo "$spec: $pieces pieces by read-ahead"
    [ "$pieces" -gt 0 ]
  done
}

@test "filter-readahead: on, a root and blkhash-file completion on worker threads" {
  local want pieces
  want=$(reference sha256 65536 "$disk")
  # A client that reads nothing: the filter completes the file alone.
  stats_run file "$disk" blkhash-readahead=true \
    blkhash-file="$BATS_TEST_TMPDIR/sums" blkhash-file-name=disk -- \
    'nbdinfo --size "$uri"'
  [ "$status" -eq 0 ]
  cat "$BATS_TEST_TMPDIR/sums"
  [ "$(sum_hex "$(cat "$BATS_TEST_TMPDIR/sums")")" = "$want" ]
  pieces=$(readahead_pieces)
  [ "$pieces" -gt 0 ]
}

@test "filter-readahead: false never reads ahead, even on slow storage" {
  stats_run --filter=delay file "$small" rdelay=2ms blkhash-readahead=false \
    -- '"$NBDSUM" -C 1 -R 1 "$uri"'
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$(grep -v '^nbdkit' <<< "$output" | head -n 1)")" = \
    "$(reference sha256 65536 "$small")" ]
  [ "$(readahead_pieces)" -eq 0 ]
}

@test "filter-readahead: auto reads ahead on slow storage with idle CPUs" {
  # One request over 64 reads of 10 ms: after two slow reads and a CPU
  # sample, the run reads pairs.
  stats_run --filter=delay file "$small" rdelay=10ms -- \
    '"$NBDSUM" -C 1 -R 1 "$uri"'
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$(grep -v '^nbdkit' <<< "$output" | head -n 1)")" = \
    "$(reference sha256 65536 "$small")" ]
  [ "$(readahead_pieces)" -gt 0 ]
}

# An eval plugin serving FILE that fails the read at OFFSET with EIO
# while FLAG exists: eval_args FILE OFFSET FLAG [parallel]
eval_args () {
  local size
  size=$(stat -c %s "$1")
  echo "eval"
  echo "get_size=echo $size"
  echo "pread=if [ -e '$3' ] && [ \"\$4\" -eq $2 ]; then echo 'EIO injected at $2' >&2; exit 1; fi; dd if='$1' iflag=skip_bytes,count_bytes skip=\$4 count=\$3 status=none"
  [ "${4:-}" != parallel ] || echo "thread_model=echo parallel"
}

@test "filter-readahead: a plugin that takes one request at a time is never read ahead" {
  local args
  mapfile -t args < <(eval_args "$small" -1 /nonexistent)
  stats_run "${args[@]}" blkhash-readahead=true -- '"$NBDSUM" "$uri"'
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$(grep -v '^nbdkit' <<< "$output" | head -n 1)")" = \
    "$(reference sha256 65536 "$small")" ]
  [ "$(readahead_pieces)" -eq 0 ]
}

# A run from offset 0 reads 0 itself and 256K by its reader.
@test "filter-readahead: a failed read, the reader's or the request's, is an error and poisons nothing" {
  local off args flag="$BATS_TEST_TMPDIR/fail" want
  want=$(reference sha256 65536 "$small")
  for off in 262144 0; do
    mapfile -t args < <(eval_args "$small" "$off" "$flag" parallel)
    start_server "eio-$off" -v "${args[@]}" blkhash-readahead=true \
      blkhash-cache=false
    touch "$flag"
    run "$NBDSUM" "$uri"
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" = *"Input/output error"* ]]
    ! grep -Eq '^[0-9a-f]{64}' <<< "$output" || false
    if [ "$off" -eq 262144 ]; then
      # An error, from the request's thread: nbdkit names the
      # connection there, not on a reader's thread.
      grep -Eq '^nbdkit: [^ ]+: error: blkhash: read-ahead of 262144 bytes at 262144 failed: Input/output error$' "$err"
    fi
    # The same server, the fault gone: the right checksum.
    rm "$flag"
    run "$NBDSUM" "$uri"
    [ "$status" -eq 0 ]
    [ "$(sum_hex "${lines[0]}")" = "$want" ]
    kill -0 "$pid"
    no_crash "$err"
  done
}

@test "filter-readahead: clients killed during read-ahead; the server lives and exits promptly" {
  local i want
  want=$(reference sha256 65536 "$small")
  start_server kills -D blkhash.stats=1 -v "${KILLED_CLIENT_OPTS[@]}" \
    --filter=delay \
    file "$small" rdelay=5ms blkhash-readahead=true blkhash-cache=false
  for ((i = 0; i < 4; i++)); do
    "$NBDSUM" -C 1 -R 1 "$uri" >/dev/null 2>&1 3>&- &
    sleep "0.$((i * 2 + 1))"
    kill -9 $! 2>/dev/null || true
    wait $! 2>/dev/null || true
    kill -0 "$pid"
  done
  run "$NBDSUM" "$uri"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "${lines[0]}")" = "$want" ]
  # The stats come when an export's last connection leaves: a killed
  # client's may still be draining its requests (slowly under
  # valgrind or load), and nbdkit does not finalize connections it
  # shuts down.  120 s: a hang guard.
  wait_until 120 grep -q 'blkhash: stats:' "$err"
  kill -TERM "$pid"
  wait_exit "$pid" 10
  [ "$rc" -eq 0 ]
  no_crash "$err"
  output=$(cat "$err")
  [ "$(readahead_pieces)" -gt 0 ]
}

@test "filter-readahead: SIGTERM while a reader sleeps in the delay filter: nbdkit exits at once" {
  local i client st=0
  start_server sleeper -v --threads=1 --filter=delay file "$small" \
    rdelay=600 blkhash-readahead=true blkhash-cache=false
  "$NBDSUM" -C 1 -R 1 "$uri" > "$BATS_TEST_TMPDIR/out" 2>&1 3>&- &
  client=$!
  # The request's read at 0 and its reader's at 256K both sleep.
  for ((i = 0; i < 100; i++)); do
    grep -q 'delay: pread count=262144 offset=262144' "$err" && break
    sleep 0.1
  done
  grep -q 'delay: pread count=262144 offset=262144' "$err"
  kill -TERM "$pid"
  # A hang guard: the reads sleep 600 s.
  wait_exit "$pid" 30
  [ "$rc" -eq 0 ]
  no_crash "$err"
  wait "$client" || st=$?
  [ "$st" -ne 0 ]
  cat "$BATS_TEST_TMPDIR/out"
  ! grep -Eq '^[0-9a-f]{64}' "$BATS_TEST_TMPDIR/out" || false
}

@test "filter-readahead: a bad value is refused" {
  run nbdkit -U - --filter="$BLKHASH_FILTER" null 1M blkhash-readahead=maybe \
    --run true
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" = *"blkhash-readahead=maybe: expected auto, true or false"* ]]
}
