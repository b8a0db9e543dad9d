#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The robustness campaign: injected plugin errors, concurrent writers,
# clients killed mid-request.  (Hostile views are nbdsum-hostile.bats's.)  Every checksum is
# compared with tests/reference.py on the image bytes.
#
# ROBUST_TRIALS (default 10) scales the error injection campaign (trials
# per mode, per configuration, per cache setting), ROBUST_ROUNDS
# (default 3) the concurrent writer rounds and ROBUST_KILLS (default 18)
# the client kills per cache setting; ROBUST_SEED repeats the kills'
# draws (printed).  For a long run, e.g.
#   ROBUST_TRIALS=200 ROBUST_ROUNDS=30 ROBUST_KILLS=200 \
#     make check TESTS=tests/filter-faults.bats

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

: "${ROBUST_TRIALS:=10}"
: "${ROBUST_ROUNDS:=3}"
: "${ROBUST_KILLS:=18}"

setup_file () {
  # Data, holes, allocated zeros, a partial last block.
  "$MKIMAGE" '8M;d:0+1M:a;d:1M+100000:b;z:2M+512K;d:3M+5000:c;d:5M+1500K:d;d:8318608+70000:e' \
    "$BATS_FILE_TMPDIR/errors.img"
  "$MKIMAGE" '64M;d:0+8M:a;d:20M+3M:b;z:40M+1M;d:60M+4M:c' \
    "$BATS_FILE_TMPDIR/big.img"
  write_python_helpers "$BATS_FILE_TMPDIR"
}

# Python libnbd clients, as files so that they run under timeout and
# can be killed by their process id.
write_python_helpers () {
  # view_root.py SOCKET NAME: the root of a view, or "ERR message".
  cat > "$1/view_root.py" <<'PY'
import nbd, struct, sys
h = nbd.NBD()
try:
    h.set_export_name(sys.argv[2])
    h.connect_unix(sys.argv[1])
    dlen = struct.unpack_from("<I", h.pread(4096, 0), 36)[0]
    print(h.pread(dlen, 4096).hex())
except nbd.Error as e:
    print("ERR", e)
PY
  # view_trials.py SOCKET TRIALS: read the view @blkhash TRIALS times on
  # fresh connections: even trials read the root alone, odd ones the
  # block digests in 1 KiB pieces first.  "OK ROOT BLOCKS|-" or "ERR
  # message" per trial.
  cat > "$1/view_trials.py" <<'PY'
import nbd, struct, sys
sock, trials = sys.argv[1], int(sys.argv[2])
for i in range(trials):
    h = nbd.NBD()
    try:
        h.set_export_name("@blkhash")
        h.connect_unix(sock)
        size = h.get_size()
        hdr = h.pread(4096, 0)
        dlen = struct.unpack_from("<I", hdr, 36)[0]
        blocks = b""
        if i % 2:
            for off in range(8192, size, 1024):
                blocks += h.pread(min(1024, size - off), off)
        root = h.pread(dlen, 4096)
        print("OK", root.hex(), blocks.hex() or "-")
        h.shutdown()
    except nbd.Error as e:
        print("ERR", str(e).replace("\n", " "))
    sys.stdout.flush()
    del h
PY
  # write_errors.py SOCKET COUNT SEED FLAG: COUNT writes, zeroes and
  # trims, aligned or not, 30% of them failing: FLAG exists while one
  # that is to fail is sent (the error filter's error-*-file); flush.
  # Prints "OK FAILED".
  cat > "$1/write_errors.py" <<'PY'
import nbd, os, random, sys
sock, count, seed, flag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    sys.argv[4]
rnd = random.Random(seed)
h = nbd.NBD()
h.connect_unix(sock)
size = h.get_size()
ok = failed = 0
for i in range(count):
    if rnd.randrange(2):
        off = rnd.randrange(size // 65536) * 65536
        n = 65536 * rnd.randrange(1, 4)
    else:
        off = rnd.randrange(size)
        n = rnd.randrange(1, 200000)
    n = min(n, size - off)
    op = rnd.randrange(4)
    fail = rnd.random() < 0.3
    if fail:
        open(flag, "w").close()
    try:
        if op == 0:
            h.zero(n, off)
        elif op == 1:
            h.trim(n, off)
        else:
            h.pwrite(bytes([rnd.randrange(256)]) * n, off)
        ok += 1
    except nbd.Error:
        failed += 1
    if fail:
        os.unlink(flag)
h.flush()
h.shutdown()
print(ok, failed)
PY
  # busy.py SOCKET KIND NAME SEED: keep 16 requests in flight until
  # killed.  KIND write: unaligned writes, trims, zeroes; read: preads;
  # view: CACHE of the digest area and reads of the header and root.
  cat > "$1/busy.py" <<'PY'
import nbd, random, sys
sock, kind, name, seed = sys.argv[1:5]
h = nbd.NBD()
h.set_export_name(name)
h.connect_unix(sock)
size = h.get_size()
rnd = random.Random(int(seed))
while True:
    while h.aio_in_flight() < 16:
        off = rnd.randrange(size)
        n = min(rnd.randrange(1, 300000), size - off)
        if kind == "write":
            op = rnd.randrange(4)
            if op == 0:
                h.aio_trim(n, off)
            elif op == 1:
                h.aio_zero(n, off)
            else:
                h.aio_pwrite(bytes([rnd.randrange(256)]) * n, off)
        elif kind == "read":
            h.aio_pread(nbd.Buffer(n), off)
        else:
            off = max(off, 8192)
            n = min(n, size - off)
            if rnd.randrange(2) and n > 0:
                h.aio_cache(n, off)
            else:
                h.aio_pread(nbd.Buffer(4096), 0)
                h.aio_pread(nbd.Buffer(64), 4096)
    h.poll(-1)
    while h.aio_peek_command_completed() > 0:
        h.aio_command_completed(h.aio_peek_command_completed())
PY
}

setup () {
  errors_img="$BATS_FILE_TMPDIR/errors.img"
  big="$BATS_FILE_TMPDIR/big.img"
  export errors_img big
}

teardown () {
  kill_servers
}

# The root of view NAME on $sock, or "ERR message".
view_root () {
  timeout 120 "$NBD_PYTHON" "$BATS_FILE_TMPDIR/view_root.py" "$sock" "$1"
}

# nbdsum on $uri, server-side and client-side, prints the reference
# checksum of IMG (left in $want).
both_methods_match () {
  want=$(reference sha256 65536 "$1")
  run timeout 120 "$NBDSUM" "$uri"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$want" ]
  run timeout 120 "$NBDSUM" --client-side "$uri"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$want" ]
}

#----------------------------------------------------------------------
# Error injection.

# Counters of a campaign.
reset_counts () {
  n_trials=0 n_ok=0 n_failed=0 n_wrong=0 n_printed_on_failure=0
  n_silent=0 n_crashed=0
}

# count_nbdsum STATUS STDOUT STDERR-FILE: account for one nbdsum trial.
count_nbdsum () {
  local st=$1 out=$2 errf=$3 sum
  sum=$(first_sum "$out")
  n_trials=$((n_trials + 1))
  if [ -n "$sum" ] && [ "$sum" != "$want" ]; then
    n_wrong=$((n_wrong + 1))
    echo "WRONG checksum (status $st): $out"
  fi
  if [ "$st" -eq 0 ]; then
    n_ok=$((n_ok + 1))
    [ -n "$sum" ] || { n_wrong=$((n_wrong + 1)); echo "exit 0, no checksum"; }
  else
    n_failed=$((n_failed + 1))
    if [ -n "$out" ]; then
      n_printed_on_failure=$((n_printed_on_failure + 1))
      echo "PRINTED ON FAILURE (status $st): $out"
    fi
    if [ ! -s "$errf" ]; then
      n_silent=$((n_silent + 1))
      echo "SILENT FAILURE (status $st)"
    fi
    if [ "$st" -ne 1 ]; then
      n_crashed=$((n_crashed + 1))
      echo "nbdsum exit status $st:"
      cat "$errf"
    fi
  fi
}

# campaign NAME ERROR-FILTER-ARGS...: ROBUST_TRIALS trials each of
# nbdsum (server-side), nbdsum --client-side and view reads, on a
# server with blkhash-cache=false and one with the cache on.  nbdsum
# gets $NBDSUM_OPTS.
campaign () {
  local name=$1 cache mode i st out errf line blocks_want start
  shift
  want=$(reference sha256 65536 "$errors_img")
  blocks_want=$(reference --blocks sha256 65536 "$errors_img")
  errf="$BATS_TEST_TMPDIR/nbdsum.err"
  reset_counts
  start=$SECONDS
  for cache in false true; do
    start_server "$name-$cache" --filter=error file "$errors_img" \
      blkhash-cache=$cache "$@"
    for ((i = 0; i < ROBUST_TRIALS; i++)); do
      for mode in --server-side --client-side; do
        st=0
        if [ $mode = --server-side ]; then
          out=$(timeout 60 "$NBDSUM" $NBDSUM_OPTS "$uri" 2>"$errf") || st=$?
        else
          out=$(timeout 60 "$NBDSUM" $NBDSUM_OPTS --client-side "$uri" \
                2>"$errf") || st=$?
        fi
        count_nbdsum "$st" "$out" "$errf"
      done
    done
    while read -r line; do
      n_trials=$((n_trials + 1))
      case $line in
        "OK $want -"|"OK $want $blocks_want")
          n_ok=$((n_ok + 1)) ;;
        ERR\ ?*)
          n_failed=$((n_failed + 1)) ;;
        *)
          n_wrong=$((n_wrong + 1))
          echo "WRONG view read: ${line:0:200}" ;;
      esac
    done < <(timeout 120 "$NBD_PYTHON" "$BATS_FILE_TMPDIR/view_trials.py" \
               "$sock" "$ROBUST_TRIALS")
    kill -0 "$pid"
    stop_server
  done
  report "$name: $n_trials trials in $((SECONDS - start)) s: $n_ok ok," \
    "$n_failed failed; $n_wrong wrong, $n_printed_on_failure printed on" \
    "failure, $n_silent failed silently, $n_crashed crashed or hung"
  # Every trial ran: 2 nbdsum modes and view reads, 2 cache settings.
  [ "$n_trials" -eq $((6 * ROBUST_TRIALS)) ]
  [ "$n_wrong" -eq 0 ]
  [ "$n_printed_on_failure" -eq 0 ]
  [ "$n_silent" -eq 0 ]
  [ "$n_crashed" -eq 0 ]
}

@test "filter-faults: 1% plugin read errors: a right checksum or an error" {
  campaign pread1 error-pread=EIO error-pread-rate=1%
}

@test "filter-faults: 10% plugin read errors: a right checksum or an error" {
  campaign pread10 error-pread=EIO error-pread-rate=10%
}

@test "filter-faults: 10% plugin read errors with read-ahead on every run" {
  campaign readahead10 error-pread=EIO error-pread-rate=10% \
    blkhash-readahead=true
}

@test "filter-faults: 100% plugin read errors: always an error, never a checksum" {
  campaign pread100 error-pread=EIO error-pread-rate=100%
  # The injection works: nothing can succeed.
  [ "$n_ok" -eq 0 ]
}

@test "filter-faults: 10% extents errors, with and without read errors" {
  campaign extents10 error-extents=EIO error-extents-rate=10%
  campaign both10 error-extents=EIO error-extents-rate=10% \
    error-pread=EIO error-pread-rate=10%
}

@test "filter-faults: 100% extents errors: a right checksum or an error" {
  campaign extents100 error-extents=EIO error-extents-rate=100%
}

@test "filter-faults: 5% read errors with 8 connections and 32 requests in flight" {
  NBDSUM_OPTS="-C 8 -R 32" campaign concurrent5 error-pread=EIO \
    error-pread-rate=5%
}

@test "filter-faults: 30% failed writes, zeroes and trims never leave a stale digest" {
  local img="$BATS_TEST_TMPDIR/rw.img" r st out w_ok=0 w_failed=0 start=$SECONDS
  local flag="$BATS_TEST_TMPDIR/fail-now"
  cp --sparse=always "$errors_img" "$img"
  # Which fail is write_errors.py's seeded choice: while $flag exists.
  start_server wfail --filter=error file "$img" error=EIO \
    error-pwrite-rate=100% error-zero-rate=100% error-trim-rate=100% \
    error-pwrite-file="$flag" error-zero-file="$flag" error-trim-file="$flag"
  for ((r = 0; r < 2 * ROBUST_ROUNDS; r++)); do
    # Fill the tables, then change the image with some writes failing.
    run timeout 60 "$NBDSUM" "$uri"
    [ "$(first_sum "$output")" = "$(reference sha256 65536 "$img")" ]
    view_root @blkhash:sha1/4K >/dev/null
    out=$(timeout 60 "$NBD_PYTHON" "$BATS_FILE_TMPDIR/write_errors.py" \
          "$sock" 100 "$r" "$flag")
    echo "round $r: writes ok, failed: $out"
    w_ok=$((w_ok + ${out% *}))
    w_failed=$((w_failed + ${out#* }))
    [ "${out#* }" -gt 0 ]
    run timeout 60 "$NBDSUM" "$uri"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(first_sum "$output")" = "$(reference sha256 65536 "$img")" ]
    [ "$(view_root @blkhash:sha1/4K)" = "$(reference sha1 4096 "$img")" ]
  done
  stop_server
  report "$((2 * ROBUST_ROUNDS)) rounds in $((SECONDS - start)) s:" \
    "$w_ok writes ok, $w_failed failed; checksums right after each"
}

#----------------------------------------------------------------------
# Concurrent writers.

@test "filter-faults: concurrent unaligned writes, trims and zeroes while views are hashed" {
  local img="$BATS_TEST_TMPDIR/rw.img" flag="$BATS_TEST_TMPDIR/busy"
  local r bg cache want start=$SECONDS
  cp --sparse=always "$big" "$img"
  export img flag
  for cache in true false; do
    start_server "writers-$cache" file "$img" blkhash-cache=$cache
    export sock
    for ((r = 0; r < ROBUST_ROUNDS; r++)); do
      # A second table (sha1, 4K blocks) hashed all along.
      touch "$flag"
      (
        while [ -e "$flag" ]; do
          timeout 60 "$NBDSUM" -d sha1 --block-size 4K "$uri" >/dev/null 2>&1 || true
        done
      ) 3>&- &
      bg=$!
      run timeout 300 "$STRESS" -s "$r" "$uri" "$(uri_of @blkhash)" 1
      rm -f "$flag"
      wait "$bg" || true
      echo "cache=$cache round $r: $output"
      [ "$status" -eq 0 ]
      [[ "${lines[0]}" = "round 0: ok "* ]]

      # The writers have stopped: everything equals the file on disk.
      both_methods_match "$img"
      [ "$(view_root @blkhash)" = "$want" ]
      run timeout 120 "$NBDSUM" -d sha1 --block-size 4K "$uri"
      [ "$status" -eq 0 ]
      [ "$(first_sum "$output")" = "$(reference sha1 4096 "$img")" ]
      # A table created after the writes.
      [ "$(view_root "@blkhash:md5/$((8 << (r % 8)))K")" = \
        "$(reference md5 $((8192 << (r % 8))) "$img")" ]
      report "cache=$cache round $r: ok $want"
    done
    stop_server
  done
  report "$((2 * ROBUST_ROUNDS)) rounds in $((SECONDS - start)) s"
}

#----------------------------------------------------------------------
# Clients killed mid-request.

@test "filter-faults: clients killed mid-request leave the server working and right" {
  local img="$BATS_TEST_TMPDIR/rw.img" cache k c cpid delay start=$SECONDS
  local -a cmd cpids
  local cst killed s2
  local kinds=(server-side client-side nbdcopy nbdcopy-view root-sha1-4K
               write read view write+view)
  seed_random ROBUST_SEED
  cp --sparse=always "$big" "$img"
  for cache in false true; do
    # The delay filter keeps each client at work for a few 100 ms.
    start_server "kills-$cache" -v "${KILLED_CLIENT_OPTS[@]}" \
      --filter=delay file "$img" \
      blkhash-cache=$cache delay-read=5ms wdelay=2ms
    killed=0
    for ((k = 0; k < ROBUST_KILLS; k++)); do
      c=${kinds[k % ${#kinds[@]}]}
      case $c in
        server-side) cmd=("$NBDSUM" "$uri") ;;
        client-side) cmd=("$NBDSUM" --client-side "$uri") ;;
        nbdcopy) cmd=(nbdcopy "$uri" null:) ;;
        nbdcopy-view) cmd=(nbdcopy "$(uri_of @blkhash:sha512/4K)" null:) ;;
        root-sha1-4K)
          cmd=("$NBD_PYTHON" "$BATS_FILE_TMPDIR/view_root.py" "$sock"
               @blkhash:sha1/4K) ;;
        view|write+view)
          cmd=("$NBD_PYTHON" "$BATS_FILE_TMPDIR/busy.py" "$sock" view
               @blkhash:md5/8K "$RANDOM") ;;
        *) cmd=("$NBD_PYTHON" "$BATS_FILE_TMPDIR/busy.py" "$sock" "$c" ""
                "$RANDOM") ;;
      esac
      s2=$RANDOM
      # exec: $! is the client itself.
      ( exec "${cmd[@]}" ) </dev/null >/dev/null 2>&1 3>&- &
      cpids=($!)
      if [ "$c" = write+view ]; then
        # A writer at the same time as the view client.
        ( exec "$NBD_PYTHON" "$BATS_FILE_TMPDIR/busy.py" "$sock" write "" \
            "$s2" ) \
          </dev/null >/dev/null 2>&1 3>&- &
        cpids+=($!)
      fi
      # 20 to 300 ms into the work (whatever it has reached then:
      # the checks below hold for a kill at any point).
      delay=$(( RANDOM % 281 + 20 ))
      sleep "$((delay / 1000)).$(printf %03d $((delay % 1000)))"
      kill -9 "${cpids[@]}" 2>/dev/null || true
      cst=0
      for cpid in "${cpids[@]}"; do
        wait "$cpid" 2>/dev/null || cst=$?
      done
      [ "$cst" -ne 137 ] || killed=$((killed + 1))
      if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid" || rc=$?
        echo "cache=$cache: the server died after killing $c (kill $k), status $rc"
        cat "$err"
        false
      fi
    done
    # A client killed while connecting may leave an open that failed,
    # which no close follows (nbdkit 1.42's delay filter ends its open
    # on the closed socket): a refused view is one, every time.
    [[ "$(view_root @blkhash:nosuch)" = "ERR "* ]]
    # The server has finished what the killed clients had sent.
    wait_idle
    both_methods_match "$img"
    [ "$(view_root @blkhash:sha1/4K)" = "$(reference sha1 4096 "$img")" ]
    [ "$(view_root @blkhash:md5/8K)" = "$(reference md5 8192 "$img")" ]
    stop_server
    report "cache=$cache: $ROBUST_KILLS clients, $killed killed mid-run:" \
      "server alive, checksums right"
    # Many kills hit a client at work (the python clients never end).
    [ "$killed" -ge $((ROBUST_KILLS / 3)) ]
  done
  report "in $((SECONDS - start)) s"
}


# A view's requests were checked when it opened: what fails under one
# is the storage, and its client is told EIO.  The nbd plugin's server
# gone (ENOTCONN, which NBD has no code for, and libnbd's EINVAL on a
# closed handle) reached the client as nbdkit's "Invalid argument", as
# if the client had asked something wrong.  The real cause stays in
# the server's log.
@test "filter-faults: storage gone under a view: the client is told EIO, never EINVAL" {
  local opts dir=$BATS_TEST_TMPDIR/gone
  mkdir "$dir"
  "$MKIMAGE" '8M;d:0+8M:a' "$dir/img"
  start_echo backend "$dir" --hangup-at=4194304
  start_server front nbd socket="$sock" export=img
  for opts in "" "-C1 -R1" --plain --bmap "--range=0+6M"; do
    run --separate-stderr timeout 60 "$NBDSUM" -q $opts "$uri"
    echo "nbdsum $opts: $status; stdout: $output; stderr: $stderr"
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [[ "$stderr" = *": Input/output error" ]]
    [[ "$stderr" != *"Invalid argument"* ]]
  done
  # The server says why.
  grep -q "failed: Transport endpoint is not connected" "$err"
  no_crash "$err"
  # A plugin's EOVERFLOW too: nbdkit sends it as EINVAL outside a
  # structured read's DF flag (review).
  start_server overflow eval get_size='echo 1048576' \
    pread='echo EOVERFLOW too big >&2; exit 1'
  run --separate-stderr timeout 60 "$NBDSUM" -q "$uri"
  echo "EOVERFLOW: $status; stderr: $stderr"
  [ "$status" -eq 1 ]
  [[ "$stderr" = *": Input/output error" ]]
}
