#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum -j: several inputs hashed at once, each in a job of its own,
# and output exactly as without -j: the same standard output, standard
# error and exit status, in input order, whichever job ends first
# (plain, --tag, --json, -c and its options, failures in the middle,
# standard output closed); an interrupted run stops every job and
# leaves nothing behind, even after two signals in a row or SIGKILL;
# memory and descriptors do not grow with the number of inputs.

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

setup_file () {
  local i
  for i in 1 2 3 4 5; do
    "$MKIMAGE" "$((i + 1))M;d:0+300000:$i;d:$((i * 100000))+70000:x;z:1M+100000" \
      "$BATS_FILE_TMPDIR/img$i.img"
    reference sha256 65536 "$BATS_FILE_TMPDIR/img$i.img" \
      > "$BATS_FILE_TMPDIR/img$i.want"
  done
  "$MKIMAGE" '8M;d:0+8M:s' "$BATS_FILE_TMPDIR/slow.img"
}

setup () {
  cd "$BATS_TEST_TMPDIR"
}

teardown () {
  kill_servers
}

# The image of input i and its checksum (sha256, 64K).
img () {
  echo "$BATS_FILE_TMPDIR/img$1.img"
}
want () {
  cat "$BATS_FILE_TMPDIR/img$1.want"
}

# A small fleet, its inputs in $inputs and the image behind each in
# $images ("" for the ones that fail): a slow host first (its job ends
# last), hosts with the filter, one without it (nbdsum hashes
# client-side and says so on standard error), local files (each with a
# private nbdkit), a socket that does not exist and a file that does
# not either, in the middle, repeated to 20 inputs: more than -j 16.
start_fleet () {
  local i hosts=() himg=()
  start_server slow --filter=delay file "$(img 1)" rdelay=150ms
  hosts+=("$uri") himg+=("$(img 1)")
  for i in 2 3 4; do
    start_server "host$i" file "$(img "$i")"
    hosts+=("$uri") himg+=("$(img "$i")")
  done
  start_nbdkit plain file "$(img 5)"
  hosts+=("$uri") himg+=("$(img 5)")
  hosts+=("nbd+unix:///?socket=$BATS_TEST_TMPDIR/nosuch.sock") himg+=("")
  hosts+=("$(img 3)") himg+=("$(img 3)")
  hosts+=("$BATS_TEST_TMPDIR/nosuch.img") himg+=("")
  inputs=() images=()
  for ((i = 0; i < 20; i++)); do
    inputs+=("${hosts[i % ${#hosts[@]}]}")
    images+=("${himg[i % ${#himg[@]}]}")
  done
}

# How many inputs of the fleet have a checksum ($1 = 0), or none (1).
failed_count () {
  local i n=0
  for i in "${images[@]}"; do
    if [ -z "$i" ]; then ((n += $1)) || :; else ((n += !$1)) || :; fi
  done
  echo "$n"
}

# run_to NAME NBDSUM-ARGS...: stdout, stderr and exit status of nbdsum
# in NAME.out, NAME.err, NAME.rc.
run_to () {
  local name=$1 rc=0
  shift
  "$NBDSUM" "$@" > "$name.out" 2> "$name.err" || rc=$?
  echo "$rc" > "$name.rc"
}

# The JSON "seconds" members are times: whatever they are.
timeless () {
  sed -E 's/"seconds": [0-9]+\.[0-9]+/"seconds": T/g' "$1"
}

# same_as_sequential NBDSUM-ARGS...: -j 1 (nbdsum as without -j), then
# -j 4 and -j 16: the same stdout, stderr and exit status.  The
# sequential run's are left in seq.out, seq.err and seq.rc.
same_as_sequential () {
  local j
  run_to seq -j 1 "$@"
  echo "sequential: status $(cat seq.rc)"
  cat seq.out seq.err
  for j in 4 16; do
    run_to "j$j" -j "$j" "$@"
    diff -u <(timeless seq.out) <(timeless "j$j.out")
    diff -u seq.err "j$j.err"
    diff -u seq.rc "j$j.rc"
  done
}

@test "nbdsum-jobs: -j takes 1 to 1024; 0, 1025 and junk are usage errors" {
  local bad
  for bad in 0 1025 -1 x 4x ''; do
    run "$NBDSUM" -j "$bad" "$(img 1)"
    echo "-j '$bad': $status: $output"
    [ "$status" -eq 1 ]
    [ "$output" = "nbdsum: --jobs must be a number from 1 to 1024: '$bad'" ]
  done
  # With --diff, usage errors exit 2.
  run "$NBDSUM" --jobs=0 --diff "$(img 1)" "$(img 2)"
  [ "$status" -eq 2 ]
  [ "$output" = "nbdsum: --jobs must be a number from 1 to 1024: '0'" ]
  run "$NBDSUM" --jobs=1024 "$(img 1)"
  [ "$status" -eq 0 ]
  [ "$output" = "$(want 1)  $(img 1)" ]
  "$NBDSUM" --help | grep -q -- '-j, --jobs=N'
}

@test "nbdsum-jobs: plain checksums: -j 4 and -j 16 print what -j 1 prints" {
  local i line
  start_fleet
  same_as_sequential "${inputs[@]}"
  [ "$(cat seq.rc)" -eq 1 ]
  # Against the reference: every line in order, the failed inputs on
  # standard error only.
  i=0
  while read -r line; do
    while [ -z "${images[i]}" ]; do i=$((i + 1)); done
    [ "$line" = "$(reference sha256 65536 "${images[i]}")  ${inputs[i]}" ]
    i=$((i + 1))
  done < j16.out
  [ "$(wc -l < j16.out)" -eq "$(failed_count 0)" ]
  [ "$(grep -c 'nosuch.sock: .*No such file' j16.err)" -eq 2 ]
  [ "$(grep -c 'nosuch.img: No such file' j16.err)" -eq 2 ]
  [ "$(grep -c 'hashing client-side' j16.err)" -eq 2 ]
}

@test "nbdsum-jobs: --tag, -d and --block-size, --json: the same with -j" {
  start_fleet
  same_as_sequential --tag "${inputs[@]}"
  grep -q '^BLKHASH-SHA256/64K (' seq.out
  same_as_sequential -d sha1 --block-size 1M "${inputs[@]}"
  grep -q '^BLKHASH-SHA1/1M (' seq.out
  same_as_sequential --json "${inputs[@]}"
  "$PYTHON" - "${inputs[@]}" <<'PY'
import json, sys
doc = json.load(open("j16.out"))
assert [r["name"] for r in doc["inputs"]] == sys.argv[1:], doc
assert doc["failed"] == 4, doc
assert sum("error" in r for r in doc["inputs"]) == 4, doc
PY
  [ "$(failed_count 1)" -eq 4 ]
}

# A checksum file of the fleet: $1 lines of inputs in order, with a
# mismatch, an unreachable URI and a malformed line in the middle.
fleet_sums () {
  local i
  for ((i = 0; i < $1; i++)); do
    if [ -n "${images[i]}" ]; then
      echo "$(reference sha256 65536 "${images[i]}")  ${inputs[i]}"
    fi
    case $i in
      3) echo "$(want 2 | tr 0-9a-f a-f0-9)  $(img 2)" ;;
      5) echo "this line is not a checksum line" ;;
      8) printf '%064d  %s\n' 0 "nbd+unix:///?socket=$BATS_TEST_TMPDIR/gone.sock" ;;
    esac
  done
}

@test "nbdsum-jobs: -c: all OK, and failures in the middle, as without -j" {
  start_fleet
  fleet_sums 20 | grep -v -e nosuch -e gone -e 'not a' -e '^[a-f0-9]*  .*img2' \
    > ok.sums
  same_as_sequential -c ok.sums
  [ "$(cat seq.rc)" -eq 0 ]
  [ "$(wc -l < seq.out)" -eq "$(wc -l < ok.sums)" ]
  ! grep -v ': OK$' seq.out || false

  fleet_sums 20 > SUMS
  same_as_sequential -c SUMS
  [ "$(cat seq.rc)" -eq 1 ]
  grep -qx "$(img 2): FAILED" seq.out
  grep -qx "nbd+unix:///?socket=$BATS_TEST_TMPDIR/gone.sock: FAILED open or read" seq.out
  grep -q '^nbdsum: WARNING: 1 line is improperly formatted$' seq.err
  grep -q '^nbdsum: WARNING: 1 listed file could not be read$' seq.err
  grep -q '^nbdsum: WARNING: 1 computed checksum did NOT match$' seq.err
  # The lines' order, OK or not, is the file's.
  diff <(grep -v 'not a checksum' SUMS | sed -E 's/^[0-9a-f]+  //') \
    <(sed -E 's/: (OK|FAILED|FAILED open or read)$//' j16.out)

  # Each option that changes what is printed; two files, one missing.
  same_as_sequential -c -q SUMS
  same_as_sequential -c --status SUMS
  [ ! -s seq.out ]
  same_as_sequential -c -w --strict SUMS nosuch.sums SUMS
  grep -q 'SUMS: 7: improperly formatted checksum line' seq.err
  grep -q '^nbdsum: nosuch.sums: No such file or directory$' seq.err
  same_as_sequential -c --ignore-missing SUMS
}

@test "nbdsum-jobs: -c --json: the same document with -j" {
  start_fleet
  fleet_sums 20 > SUMS
  same_as_sequential -c --json SUMS nosuch.sums SUMS
  [ "$(cat seq.rc)" -eq 1 ]
  "$PYTHON" - <<'PY'
import json
doc = json.load(open("j16.out"))
a, missing, b = doc["files"]
verdicts = lambda f: [(r["line"], r["name"], r["result"]) for r in f["results"]]
assert verdicts(a) == verdicts(b), doc
assert [r["result"] for r in a["results"]].count("OK") == 16, a
assert "error" in missing and "results" not in missing, missing
assert (doc["mismatched"], doc["unreadable"], doc["malformed"]) == (2, 2, 2), doc
PY
  same_as_sequential -c --json -q SUMS
}

@test "nbdsum-jobs: standard input is read once, by one job at a time" {
  start_fleet
  run_to seq "$(img 1)" - "${inputs[2]}" - < "$(img 4)"
  run_to j4 -j 4 "$(img 1)" - "${inputs[2]}" - < "$(img 4)"
  cat j4.out j4.err
  diff seq.out j4.out
  diff seq.err j4.err
  [ "$(sed -n 2p j4.out)" = "$(want 4)  -" ]
  # The second reads what the first left: nothing.
  [ "$(sed -n 4p j4.out)" = "$(reference sha256 65536 /dev/null)  -" ]
}

@test "nbdsum-jobs: standard input by another name (/dev/stdin, /proc/self/fd/0) is read as with -j 1" {
  local empty
  empty=$(reference sha256 65536 /dev/null)
  # Redirected from a file: each name opens it again.
  run_to seq -j 1 /dev/stdin "$(img 1)" /proc/self/fd/0 < "$(img 4)"
  run_to j3 -j 3 /dev/stdin "$(img 1)" /proc/self/fd/0 < "$(img 4)"
  cat j3.out j3.err
  diff seq.out j3.out
  diff seq.err j3.err
  diff seq.rc j3.rc
  [ "$(cut -d' ' -f1 j3.out)" = "$(want 4)
$(want 1)
$(want 4)" ]
  # From a pipe: the first reads it all, the second what is left.
  cat "$(img 4)" | run_to seq -j 1 /dev/stdin "$(img 1)" /proc/self/fd/0
  cat "$(img 4)" | run_to j3 -j 3 /dev/stdin "$(img 1)" /proc/self/fd/0
  cat j3.out j3.err
  diff seq.out j3.out
  diff seq.err j3.err
  diff seq.rc j3.rc
  [ "$(cut -d' ' -f1 j3.out)" = "$(want 4)
$(want 1)
$empty" ]
}

@test "nbdsum-jobs: -j changes nothing for --diff, --blocks, --check-manifest" {
  run_to seq --diff "$(img 1)" "$(img 2)"
  run_to j8 -j 8 --diff "$(img 1)" "$(img 2)"
  diff seq.out j8.out && diff seq.err j8.err && diff seq.rc j8.rc
  [ "$(cat j8.rc)" -eq 1 ]
  "$NBDSUM" --blocks "$(img 3)" > blocks
  "$NBDSUM" -j 8 --blocks "$(img 3)" | diff blocks -
  "$NBDSUM" -j 8 --check-manifest blocks
}

# "PID ARGS" of the processes under nbdsum $1: its jobs and their
# children.
descendants () {
  local p c
  for p in $(pgrep -P "$1" || true); do
    ps -o pid=,args= -p "$p" || :
    for c in $(pgrep -P "$p" || true); do ps -o pid=,args= -p "$c" || :; done
  done
}

# interrupt SIG NBDSUM-ARGS...: run nbdsum (default signal actions, its
# own TMPDIR) on slow_inputs, send SIG once the first input (the fast
# host, ${names[0]}) is done, by $interrupt_ready (default: its result
# printed) and, with -j and [ nbdkit ] inputs, jobs and the private
# servers they start were seen running, and check it died
# of SIG within 15 s (requests in flight get 5 s, a private nbdkit 5 s
# more), left no process behind, and no file in its TMPDIR.  Sets rc;
# the processes that ran under it are in procs ("PID ARGS" lines).
first_printed () {
  grep -qF -- "${names[0]}" out
}
# -c --json prints a file's results at its end.  -j 4 takes 4 lines at
# first (fast, slow, slow; fast); the fifth, a slow server of its own
# ($fifth_err, nbdkit -v), gets a job only once the oldest, the fast
# one, is handed back (the second fast one, done, waits for the slow
# ones ahead of it).
fifth_job () {
  grep -q ': debug: blkhash: open readonly' "$fifth_err"
}
interrupt () {
  local sig=$1 pid i p t0
  shift
  tmp=$(mktemp -d "$BATS_TEST_TMPDIR/tmp.XXXXXX")
  TMPDIR=$tmp env --default-signal=HUP,INT,PIPE,TERM \
    "$NBDSUM" "$@" > out 2> err 3>&- &
  pid=$!
  : > procs
  # Conditions, not times (a slow input takes 6 s at least: the
  # signal comes long before one is done).  60 s: a hang guard.
  for ((i = 0; i < 1200; i++)); do
    descendants "$pid" >> procs
    if "${interrupt_ready:-first_printed}"; then
      [[ " $* " != *" -j "* || " $* " != *" [ "* ]] && break
      grep -q " $NBDSUM " procs && grep -q ' nbdkit ' procs && break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "signal after $i rounds; out: $(cat out)"
  t0=$(date +%s%N)
  kill -s "$sig" "$pid"
  if ! wait_exit "$pid" 15; then
    kill -9 "$pid"
    false
  fi
  echo "SIG$sig: status $rc after $((($(date +%s%N) - t0) / 1000000)) ms"
  cat out err
  sort -u -o procs procs
  [ "$rc" -eq $((128 + $(kill -l "$sig"))) ]
  for p in $(cut -d' ' -f1 < <(sed 's/^ *//' procs)); do
    if kill -0 "$p" 2>/dev/null; then
      echo "left behind: $(ps -o pid=,args= -p "$p")"
      false
    fi
  done
  [ -z "$(ls -A "$tmp")" ]
}

# Inputs that take a while: a fast host first, then hosts whose reads
# of slow.img (8 MiB of data) take 1.5 s each (6 s an input, far more
# than the 2 s before the signal on a loaded machine), one request at a time
# (nbdkit 1.32 aborts when a client vanishes under requests on several
# threads), and the same image served by private nbdkits; twice.
# $names: each input's name as nbdsum prints it.
slow_inputs () {
  local i cmd
  inputs=() names=()
  start_server fast file "$(img 2)"
  inputs+=("$uri") names+=("$uri")
  for i in 1 2; do
    start_server "slow$i" "${KILLED_CLIENT_OPTS[@]}" --filter=delay \
      file "$BATS_FILE_TMPDIR/slow.img" rdelay=1500ms
    inputs+=("$uri") names+=("$uri")
  done
  cmd=(nbdkit "${KILLED_CLIENT_OPTS[@]}" --filter="$BLKHASH_FILTER"
       --filter=delay file "$BATS_FILE_TMPDIR/slow.img" rdelay=1500ms)
  for i in 1 2; do
    inputs+=("[" "${cmd[@]}" "]") names+=("[ ${cmd[*]} ]")
  done
  inputs+=("${inputs[@]}")
  names+=("${names[@]}")
}

@test "nbdsum-jobs: SIGINT and SIGTERM stop every job, as they stop nbdsum" {
  local seq_rc
  slow_inputs
  interrupt INT "${inputs[@]}"
  seq_rc=$rc
  cat procs
  # Without -j, no job: only the private servers.
  ! grep -v ' nbdkit ' procs || false
  interrupt INT -j 4 "${inputs[@]}"
  [ "$rc" -eq "$seq_rc" ]
  cat procs
  # Jobs ran (nbdsum's children are nbdsum), and private servers.
  grep -q " $NBDSUM " procs
  grep -q ' nbdkit ' procs
  # What was printed is the start of the run, in order: the fast
  # host's line, and no slow one's.
  [ "$(cat out)" = "$(want 2)  ${names[0]}" ]
  interrupt TERM -j 16 "${inputs[@]}"
  [ "$rc" -eq 143 ]
}

# later_jobs_done PID: the server last started ($err, nbdkit -v) had a
# client and has none now, and nbdsum PID has one job left.
later_jobs_done () {
  grep -q ': debug: blkhash: open readonly' "$err" && server_idle &&
    [ "$(pgrep -c -P "$1")" -eq 1 ]
}

@test "nbdsum-jobs: interrupted, inputs after the one being hashed say nothing, as without -j" {
  local slow pid
  start_server slow "${KILLED_CLIENT_OPTS[@]}" --filter=delay \
    file "$BATS_FILE_TMPDIR/slow.img" rdelay=1500ms
  slow=$uri
  start_server plain -v --no-sr memory 1M
  # Each later input says something when it has its turn: a server
  # without a view, a missing file.  Their jobs said it early; stopped
  # first, they never have their turn (found by a differential test,
  # 2026-11-26: printed after the signal).
  env --default-signal=INT "$NBDSUM" -j 4 "$slow" "$uri" nosuch \
    > out 2> err 3>&- &
  pid=$!
  # SIGINT once their jobs are done (the plain server's clients gone,
  # one job left: the slow one's, which takes 6 s at least).
  wait_until 60 later_jobs_done "$pid"
  kill -INT "$pid"
  wait_exit "$pid" 30
  echo "status $rc; stderr: $(cat err)"
  [ "$rc" -eq 130 ]
  [ ! -s out ]
  # The slow input may say that it stopped; the others nothing.
  ! grep -q -e "$uri" -e nosuch err || false
}

@test "nbdsum-jobs: an interrupted --json run is one valid document" {
  local slow
  slow_inputs
  interrupt INT -j 4 --json "${inputs[@]}"
  "$PYTHON" - "${names[0]}" <<'PY'
import json, sys
doc = json.load(open("out"))
assert doc["interrupted"] == "SIGINT", doc
assert "failed" not in doc, doc
assert [r["name"] for r in doc["inputs"]] == [sys.argv[1]], doc
PY
  slow=$(reference sha256 65536 "$BATS_FILE_TMPDIR/slow.img")
  printf '%s  %s\n' "$(want 2)" "${inputs[0]}" "$slow" "${inputs[1]}" \
    "$slow" "${inputs[2]}" > SUMS
  start_server slow3 -v "${KILLED_CLIENT_OPTS[@]}" --filter=delay \
    file "$BATS_FILE_TMPDIR/slow.img" rdelay=1500ms
  fifth_err=$err
  printf '%s  %s\n' "$(want 2)" "${inputs[0]}" "$slow" "$uri" > SUMS2
  interrupt_ready=fifth_job interrupt TERM -j 4 -c --json SUMS SUMS2
  "$PYTHON" - "${inputs[0]}" <<'PY'
import json, sys
doc = json.load(open("out"))
assert doc["interrupted"] == "SIGTERM", doc
(f,) = doc["files"]
assert [(r["name"], r["result"]) for r in f["results"]] == [(sys.argv[1], "OK")], f
PY
}

@test "nbdsum-jobs: a job killed from outside fails its input, the run goes on" {
  local pid child
  # The first input never ends by itself (its reads sleep 600 s): the
  # second ends first, and once it is reaped (--progress=FD: 50/100)
  # the first is the only child.
  start_server slow "${KILLED_CLIENT_OPTS[@]}" --filter=delay \
    file "$(img 1)" rdelay=600
  env --default-signal=HUP,INT,PIPE,TERM "$NBDSUM" -j 2 --json \
    --progress=5 "$uri" "$(img 2)" > out 2> err 5> progress 3>&- &
  pid=$!
  wait_until 120 grep -qx 50/100 progress
  child=$(pgrep -P "$pid")
  [ "$(wc -w <<< "$child")" -eq 1 ]
  kill -9 "$child"
  wait_exit "$pid" 20
  cat out err
  [ "$rc" -eq 1 ]
  [ "$(cat err)" = "nbdsum: $uri: its job was killed by SIGKILL" ]
  "$PYTHON" - "$uri" "$(want 2)" <<'PY'
import json, sys
doc = json.load(open("out"))
a, b = doc["inputs"]
assert a == {"name": sys.argv[1], "error": "its job was killed by SIGKILL"}, a
assert b["checksum"] == sys.argv[2] and doc["failed"] == 1, doc
PY
}

@test "nbdsum-jobs: 10000 lines with -j 8 in bounded memory and 64 descriptors" {
  local i rss n=10000
  # A sanitized nbdsum forks slowly: a tenth.
  [ -z "${BLKHASH_SANITIZERS:-}" ] || n=1000
  start_server one file "$(img 1)"
  for ((i = 1; i <= n; i++)); do
    if ((i % (n / 5) == 0)); then
      echo "$(want 1)  $uri"
    else
      printf '%064d  nbd+unix:///?socket=/nonexistent/%d.sock\n' 0 "$i"
    fi
  done > BIG
  (ulimit -n 64 && exec /usr/bin/time -o rss -f %M "$NBDSUM" -j 8 -c BIG \
     > out 2> err) || rc=$?
  tail -n 4 err
  [ "${rc:-0}" -eq 1 ]
  [ "$(wc -l < out)" -eq "$n" ]
  [ "$(grep -c ': OK$' out)" -eq 5 ]
  diff <(sed -E 's/^[0-9a-f]+  //' BIG) <(sed -E 's/: (OK|FAILED open or read)$//' out)
  [ "$(tail -n 1 err)" = "nbdsum: WARNING: $((n - 5)) listed files could not be read" ]
  [ "$(grep -c 'No such file or directory' err)" -eq $((n - 5)) ]
  rss=$(tail -n 1 rss)
  report "peak RSS with -j 8 over $n lines: $rss KiB"
  [ -n "${BLKHASH_SANITIZERS:-}" ] || [ "$rss" -lt $((40 * 1024)) ]
}

@test "nbdsum-jobs: out of descriptors, jobs wait for others to end: the same output" {
  start_fleet
  # URIs of servers with the filter only: a private nbdkit (for a file,
  # or in front of a server without the filter) needs more than 24
  # descriptors itself.
  fleet_sums 20 | grep -e '  nbd' -e 'not a' | grep -v 'plain\.sock' > SUMS
  grep -q 'socket=' SUMS
  run_to seq -c SUMS SUMS
  # 64 jobs need 128 descriptors: 24 leave room for about 8 at a time.
  (ulimit -n 24 && exec "$NBDSUM" -j 64 -c SUMS SUMS > j64.out 2> j64.err) ||
    rc=$?
  cat j64.err
  diff seq.out j64.out
  diff seq.err j64.err
  [ "${rc:-0}" -eq "$(cat seq.rc)" ]
}

@test "nbdsum-jobs: -p on a terminal shows the run, and each input below it" {
  local last
  start_fleet
  run_to plain -j 4 "${inputs[@]}"
  TERM=xterm "$PYTHON" "$top_srcdir/tests/ptyrun.py" 100 bar \
    "$NBDSUM" -p -j 4 "${inputs[@]}" > out || :
  diff plain.out out
  tr '\r' '\n' < bar | sed 's/\x1b\[[0-9]*[AJK]//g' | grep -v '^$' > drawn
  cat drawn
  last=$(tail -n 1 drawn)
  [[ "$last" =~ 20/20\ done,\ .*\ in\ [0-9]+:[0-5][0-9]:[0-5][0-9] ]]
  grep -q '^\[[#.]*\] [0-9]*/20 done, [1-4] running, ' drawn
  # An input's line names it (its end, when too long), as a bar does.
  grep -q 'slow\.sock \[[#.]*\] *[0-9]*%' drawn
  # Where the terminal cannot move its cursor: the run's line alone.
  TERM=dumb "$PYTHON" "$top_srcdir/tests/ptyrun.py" 100 bar \
    "$NBDSUM" -p -j 4 "${inputs[@]}" > out || :
  diff plain.out out
  ! grep -q $'\x1b' bar || false
  tr '\r' '\n' < bar | grep -q '20/20 done'
}

@test "nbdsum-jobs: --progress=FD counts the inputs done, up to 100/100" {
  start_fleet
  "$NBDSUM" -j 4 --progress=5 "${inputs[@]}" > out 2> err 5> fd || :
  cat fd
  [ "$(tail -n 1 fd)" = "100/100" ]
  sort -n -c < <(cut -d/ -f1 fd)
  # Without a bar nothing is drawn on standard error.
  "$NBDSUM" -j 1 "${inputs[@]}" 2> seq.err > /dev/null || :
  diff seq.err err
}

@test "nbdsum-jobs: closed or full standard output: a write error, exit 1, with -j 1 as with -j 3" {
  local j mode
  "$NBDSUM" "$(img 1)" "$(img 2)" > SUMS
  for mode in plain check json; do
    case $mode in
      plain) set -- "$(img 1)" "$(img 2)" ;;
      check) set -- -c SUMS ;;
      json) set -- --json -c SUMS ;;
    esac
    for j in 1 3; do
      rc=0
      "$NBDSUM" -j "$j" "$@" >&- 2> "err$j" || rc=$?
      echo "$mode -j $j, closed: $rc: $(cat "err$j")"
      [ "$rc" -eq 1 ]
      [ "$(cat "err$j")" = "nbdsum: write error: Bad file descriptor" ]
      rc=0
      "$NBDSUM" -j "$j" "$@" > /dev/full 2> "full$j" || rc=$?
      echo "$mode -j $j, full: $rc: $(cat "full$j")"
      [ "$rc" -eq 1 ]
      [ "$(cat "full$j")" = "nbdsum: write error: No space left on device" ]
    done
  done
}

# The live processes of run TAG: those whose environment holds
# NBDSUM_TEST_RUN=TAG (nbdsum, its jobs, their servers and the
# servers' qemu-nbd all inherit it; zombies have no environment).
run_procs () {
  grep -lzxF "NBDSUM_TEST_RUN=$1" /proc/[0-9]*/environ 2>/dev/null |
    cut -d/ -f3 || :
}

# Slow inputs whose servers nbdsum starts: a qcow2 file, whose private
# nbdkit runs a qemu-nbd (bin/qemu-nbd, put first in PATH) that reads
# it at 4 MB/s; a [ nbdkit ] command reading slowly; a slow host; twice.
slow_private_inputs () {
  local qemu_nbd
  qemu_nbd=$(command -v qemu-nbd)
  qemu-img convert -f raw -O qcow2 "$BATS_FILE_TMPDIR/slow.img" slow.qcow2
  mkdir -p bin
  cat > bin/qemu-nbd <<SH
#!/bin/sh
# As the private nbdkit runs it, the image last (a json: spec naming
# its files); throttled.
for image; do :; done
exec "$qemu_nbd" --read-only \\
  --object throttle-group,id=tg,x-bps-read=4000000 \\
  "json:{\\"driver\\":\\"throttle\\",\\"throttle-group\\":\\"tg\\",\\"file\\":\${image#json:}}"
SH
  chmod +x bin/qemu-nbd
  start_server slow "${KILLED_CLIENT_OPTS[@]}" --filter=delay \
    file "$BATS_FILE_TMPDIR/slow.img" rdelay=1500ms
  inputs=("$PWD/slow.qcow2"
          "[" nbdkit "${KILLED_CLIENT_OPTS[@]}" --filter="$BLKHASH_FILTER"
          --filter=delay file "$BATS_FILE_TMPDIR/slow.img" rdelay=1500ms "]"
          "$uri")
  inputs+=("${inputs[@]}")
}

# run_tagged TAG NBDSUM-ARGS...: nbdsum in the background (default
# signal actions, PATH with bin/ first, TMPDIR $tmp of its own), its
# processes tagged; sets pid and tmp.  Returns once its jobs and the
# servers they started run (7 processes with -j 3); fails if they do
# not within 60 s (a hang guard).
run_tagged () {
  local tag=$1 i
  shift
  tmp="$PWD/tmp.$tag"
  mkdir "$tmp"
  PATH="$PWD/bin:$PATH" NBDSUM_TEST_RUN=$tag TMPDIR="$tmp" \
    env --default-signal=HUP,INT,PIPE,TERM "$NBDSUM" "$@" \
    > out 2> err 3>&- &
  pid=$!
  for ((i = 0; i < 1200; i++)); do
    [ "$(run_procs "$tag" | wc -l)" -ge 7 ] && return 0
    sleep 0.05
  done
  echo "run $tag: not 7 processes after 60 s: $(run_procs "$tag" | wc -l)"
  return 1
}

# no_procs_left TAG SECONDS: within SECONDS no process of run TAG is
# left (those left are shown, and killed).
no_procs_left () {
  local i left
  for ((i = 0; i < $2 * 10; i++)); do
    left=$(run_procs "$1")
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  echo "left behind by run $1:"
  ps -o pid=,ppid=,pgid=,args= -p "$(echo $left | tr ' ' ,)" || :
  kill -9 $left 2>/dev/null || :
  false
}

@test "nbdsum-jobs: two signals in a row end every job and server of the run at once" {
  local i sig t0 tag
  slow_private_inputs
  # As timeout(1) and a double ^C send them: 50 ms apart.
  for ((i = 0; i < 6; i++)); do
    sig=TERM
    ((i % 2 == 0)) || sig=INT
    tag="twice.$$.$i"
    run_tagged "$tag" -j 3 "${inputs[@]}"
    echo "run $i: $(run_procs "$tag" | wc -l) processes, then SIG$sig twice"
    t0=$(date +%s%N)
    kill -s "$sig" "$pid"
    sleep 0.05
    kill -s "$sig" "$pid" 2>/dev/null || :
    # Hang guards, above nbdsum(1)'s bound (nothing outlives a run by
    # 10 s) by what a loaded machine may add to it.
    wait_exit "$pid" 60
    echo "status $rc after $((($(date +%s%N) - t0) / 1000000)) ms"
    [ "$rc" -eq $((128 + $(kill -l "$sig"))) ]
    no_procs_left "$tag" 60
    # The private sockets and directories removed, even so.
    echo "left in TMPDIR: $(ls -A "$tmp")"
    [ -z "$(ls -A "$tmp")" ]
  done
}

@test "nbdsum-jobs: jobs do not outlive nbdsum killed with SIGKILL" {
  local tag="killed.$$"
  slow_private_inputs
  run_tagged "$tag" -j 3 "${inputs[@]}"
  echo "$(run_procs "$tag" | wc -l) processes"
  kill -9 "$pid"
  wait_exit "$pid" 5
  # Each job stops as after a signal: requests answered (at most 5 s),
  # its servers stopped (5 s more at most: nbdsum(1)'s bound is 10 s),
  # their directories removed.  60 s: a hang guard above that bound.
  no_procs_left "$tag" 60
  echo "left in TMPDIR: $(ls -A "$tmp")"
  [ -z "$(ls -A "$tmp")" ]
}

@test "nbdsum-jobs: inputs named by descriptors the user gave (/dev/fd/N, /dev/stdin) are the files they are open on" {
  local want_raw want_q jobs
  "$MKIMAGE" '300000;d:0+300000:a' base.raw
  qemu-img convert -q -f raw -O qcow2 base.raw img.qcow2
  qemu-img convert -q -f qcow2 -O raw img.qcow2 img.raw
  want_raw=$(reference sha256 65536 base.raw)
  want_q=$(reference sha256 65536 img.raw)
  # A job's own pipes used to take the numbers 3 to 6: it hashed its
  # pipe and waited for ever (hostile test, 2026-11-26).
  for jobs in 1 2 4; do
    run timeout 60 "$NBDSUM" -j "$jobs" /dev/fd/4 base.raw /dev/fd/5 \
      /dev/stdin 4<img.qcow2 5<base.raw <img.qcow2
    echo "-j $jobs: $status: $output"
    [ "$status" -eq 0 ]
    [ "$output" = "$want_q  /dev/fd/4
$want_raw  base.raw
$want_raw  /dev/fd/5
$want_q  /dev/stdin" ]
  done
  # The private server's descriptor 3 is its socket: not the user's.
  run "$NBDSUM" /dev/fd/3 /proc/self/fd/4 3<base.raw 4<img.qcow2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$want_raw  /dev/fd/3
$want_q  /proc/self/fd/4" ]
}
