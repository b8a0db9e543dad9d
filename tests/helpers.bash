# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Helpers shared by the bats suites.  make check sets the paths; run
# by hand from a build tree they default to it.
: "${top_srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
: "${BLKHASH_FILTER:=$top_builddir/filter/.libs/nbdkit-blkhash-filter.so}"
: "${NBDSUM:=$top_builddir/client/nbdsum}"
: "${MKIMAGE:=$top_builddir/tests/mkimage}"
: "${VECTORS:=$top_srcdir/tests/data/vectors.tsv}"
: "${PYTHON:=python3}"
export BLKHASH_FILTER NBDSUM MKIMAGE VECTORS PYTHON

# seed_random VAR: seed $RANDOM for this test with $VAR, or a new seed,
# and say which (bats shows a failed test's output): VAR=N bats -f
# TEST SUITE repeats the run.  Sets SEED.  bash seeds a subshell's
# $RANDOM afresh ($(...), a pipeline's parts): draw numbers in the
# test's own shell and pass them on.
seed_random () {
  SEED=${!1:-$((SRANDOM % 1000000))}
  echo "seed: $1=$SEED"
  RANDOM=$SEED
}

# seeded_bytes LEN SEED: LEN bytes of data, the same for the same SEED.
seeded_bytes () {
  local f
  f=$(mktemp "${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/bytes.XXXXXX")
  "$MKIMAGE" "$1;d:0+$1:$2" "$f" && cat "$f"
  rm -f "$f"
}

# wait_until SECONDS COMMAND...: until COMMAND succeeds, polled every
# 0.05 s; fails, saying what it waited for, if it still has not after
# SECONDS (a hang guard: the test waits for a condition, not a time).
wait_until () {
  local limit=$1 i
  shift
  for ((i = 0; i < limit * 20; i++)); do
    "$@" && return 0
    sleep 0.05
  done
  echo "wait_until: still not true after $limit s: $*"
  return 1
}

# blocked PID...: each process PID is asleep waiting for something, in
# poll(2) (a server, a fifo's writer: nbdsum waits in poll with its
# signal pipe) or reading a pipe: it has got as far as it can.  Where
# the kernel does not say what a process waits in (wchan 0), asleep is
# enough.
blocked () {
  local p w
  for p; do
    [ "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)" = S ] || return 1
    w=$(cat "/proc/$p/wchan" 2>/dev/null) || return 1
    [[ "$w" = 0 || "$w" = *poll* || "$w" = *pipe_read* ]] || return 1
  done
}

# The independent reference: reference DIGEST BLOCK_SIZE FILE
reference () {
  "$PYTHON" "$top_srcdir/tests/reference.py" "$@"
}

# Whether this build has digest $1 (blake3 needs libblake3), and a
# skip saying so in a test when it does not.
have_digest () {
  "$NBDSUM" --list-digests | grep -Eq "^$1(,| )"
}
need_digest () {
  have_digest "$1" ||
    skip "this build has no $1 (configure found no lib$1)"
}

# The checksum of one line of nbdsum's output or of a blkhash-file,
# tagged ('BLKHASH-DIGEST/BLOCKSIZE (NAME) = HEX') or not ('HEX  NAME').
sum_hex () {
  local line=${1#\\}
  case $line in
    [Bb][Ll][Kk][Hh][Aa][Ss][Hh]-*) echo "${line##*) = }" ;;
    *) echo "${line%% *}" ;;
  esac
}

# The first checksum nbdsum printed, from its stdout.
first_sum () {
  grep -Eo '^[0-9a-f]{32,128}|^BLKHASH-.* = [0-9a-f]{32,128}$' <<< "$1" |
    head -n 1 | sed 's/.* = //' || true
}

# Serve through the filter and run a command: $uri and $unixsocket are
# set by nbdkit.  serve [NBDKIT ARGS...] -- COMMAND
serve () {
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  nbdkit -U - --filter="$BLKHASH_FILTER" "${args[@]}" --run "$*"
}

# nbdkit_daemon PIDFILE NBDKIT-ARGS...: nbdkit as a daemon (-P),
# holding none of bats' descriptors (one left open holds the suite
# until nbdkit exits, if the test fails before it stops nbdkit), back
# once its pid file is written: nbdkit's parent returns at the fork,
# before the daemon writes it.
nbdkit_daemon () {
  local pidfile=$1 i
  shift
  nbdkit -P "$pidfile" "$@" 3>&- 4>&- || return 1
  for ((i = 0; i < 400; i++)); do
    # Written whole: it ends with a newline.
    [ -s "$pidfile" ] && [ -z "$(tail -c 1 "$pidfile")" ] && return 0
    sleep 0.05
  done
  echo "nbdkit_daemon: nbdkit wrote no pid in $pidfile" >&2
  return 1
}

# The URI of export NAME on $unixsocket (inside serve's command).

# Hex of LEN bytes at OFFSET of FILE.
hexdump_at () {
  od -An -tx1 -v -j "$2" -N "$3" "$1" | tr -d ' \n'
}

# Little-endian integer of LEN bytes at OFFSET of FILE.
le_at () {
  local hex le="" i
  hex=$(hexdump_at "$1" "$2" "$3")
  for ((i = ${#hex} - 2; i >= 0; i -= 2)); do le+=${hex:i:2}; done
  echo $((16#$le))
}

# Rows of the vectors file for image NAME: name recipe size sha digest bs hash
vector_rows () {
  awk -F'\t' -v n="$1" '$1 == n' "$VECTORS"
}

vector_images () {
  awk -F'\t' '!/^#/ && !seen[$1]++ { print $1 }' "$VECTORS"
}

# Build image NAME of the vectors into DIR/NAME.img.
build_vector_image () {
  local recipe
  recipe=$(vector_rows "$1" | head -n 1 | cut -f2)
  "$MKIMAGE" "$recipe" "$2/$1.img"
}

# The first N bytes of a 'qemu-io -c "read -v ..."' hex dump on stdin.
qemu_io_hex () {
  awk -v n="$1" '/^[0-9a-f]+:  / {
    for (i = 2; i <= 17 && n > 0; i++) { printf "%s", $i; n-- } }'
}

# nbdsum over nbdkit's eval plugin serving 1 MiB of zeros whose
# extents say so in two pieces cut mid-block (at 100000): a hole, then
# allocated zeros (nbdkit joins extents of one type, but not these; a
# client sees the same at nbdkit's 4 GiB - 1 cuts).  Checks the
# checksum against the reference and that nothing was read:
#   hash_cut_zeros [NBDKIT-ARGS...] -- [NBDSUM-ARGS...]
hash_cut_zeros () {
  local log="$BATS_TEST_TMPDIR/reads" zero="$BATS_TEST_TMPDIR/zero.img"
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  : > "$log"
  head -c 1M /dev/zero > "$zero"
  run nbdkit -U - "${args[@]}" eval get_size='echo 1048576' \
    pread="echo \$4 >> '$log'; head -c \$3 /dev/zero" \
    can_extents='exit 0' \
    extents='echo 0 100000 hole,zero; echo 100000 948576 zero' \
    --run "\"\$NBDSUM\" $* \"\$uri\""
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "${lines[0]}")" = "$(reference sha256 65536 "$zero")" ]
  echo "reads at: $(tr '\n' ' ' < "$log")"
  [ ! -s "$log" ]
}

# The 40 MiB image several nbdsum suites share: data, a hole, zeros.
# disk40_build in setup_file; disk40_vars in setup sets $disk40 and
# $want40, its checksum (sha256, 64K), and exports them.
disk40_build () {
  "$MKIMAGE" '40M;d:0+3M:a;d:10M+100000:b;z:20M+1M;d:39M+1M:c' \
    "$BATS_FILE_TMPDIR/disk40.img"
  reference sha256 65536 "$BATS_FILE_TMPDIR/disk40.img" \
    > "$BATS_FILE_TMPDIR/disk40.want"
}
disk40_vars () {
  disk40="$BATS_FILE_TMPDIR/disk40.img"
  want40=$(cat "$BATS_FILE_TMPDIR/disk40.want")
  export disk40 want40
}

# ours PID: PID is still a process of this test's: a child of this
# shell, or one whose command line names the test's or its file's
# directory (a daemon, a script's nbdkit).  Bash reaps a background job that ends at
# once, and with pid_max 32768 and suites beside it, a pid held since
# may be another's: signal only what this says is ours.
ours () {
  local stat ppid
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  read -r _ ppid _ <<< "${stat##*) }"
  [ "$ppid" = "$BASHPID" ] && return 0
  # A whole directory: test 1's is not test 10's.
  tr '\0' '\n' < "/proc/$1/cmdline" 2>/dev/null |
    awk -v a="$BATS_TEST_TMPDIR/" \
        -v b="${BATS_FILE_TMPDIR:-$BATS_TEST_TMPDIR}/" '
      index($0 "/", a) || index($0 "/", b) { found = 1 }
      END { exit !found }'
}

# A test that hangs fails alone, showing what its processes wait for,
# instead of holding the suite until CI's limit: after
# BLKHASH_TEST_TIMEOUT seconds (default 600) a watchdog adds them to the
# test's output and kills them.  Only in a test's own process (the
# file's runs setup_file and every test), holding none of bats' pipes.
test_descendants () {
  local pid
  for pid in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    [ "$pid" = "$2" ] && continue
    echo "$pid"
    test_descendants "$pid" "$2"
  done
}
test_watchdog () {
  local pid=$1 limit=$2 me=$BASHPID waited=0 pids
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    [ "$waited" -ge "$limit" ] || continue
    pids=$(test_descendants "$pid" "$me" | tr '\n' ,)
    echo "watchdog: still running after $limit s; killing its processes:"
    [ -z "$pids" ] && return
    ps -o pid,ppid,stat,wchan:24,etimes,args -p "${pids%,}"
    kill -KILL ${pids//,/ }
    return
  done
}
# A test's function is test_...; bats 1.11 also sources the file to
# gather the tests, as BATS_TEST_NAME=source.
if [[ ${BATS_TEST_NAME:-} = test_* ]] && command -v ps >/dev/null; then
  # Not bats' errexit and traps: it is a plain background loop, and
  # keeps none of bats' pipes open (bats reads some to their end).
  (set +eE; trap - ERR EXIT DEBUG
   for fd in /proc/"$BASHPID"/fd/*; do
     fd=${fd##*/}
     [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null
   done
   test_watchdog "$$" "${BLKHASH_TEST_TIMEOUT:-600}") \
    </dev/null >>"$BATS_OUT" 2>&1 &
  disown
fi
