# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# bats helpers for tests of image pipelines with nbdkit-blkhash:
#
#   load "$(nbdsum --bats-helper)"
#
#   setup () {
#     cd "$BATS_TEST_TMPDIR"
#     qemu-img create -q -f raw disk.img 64M
#     qemu-io -f raw disk.img -c 'write -P 1 1M 4M' >/dev/null
#   }
#   teardown () { blkhash_stop; }
#
#   @test "the copy is the image" {
#     blkhash_serve disk.img
#     qemu-img convert -f raw -O qcow2 "$BLKHASH_URI" copy.qcow2
#     assert_blkhash copy.qcow2 "$(blkhash_sum "$BLKHASH_URI")"
#   }
#
# blkhash_serve [NBDKIT-OPTIONS...] FILE | PLUGIN [PLUGIN-ARGS...]
#     Serve through nbdkit --filter=blkhash on a Unix socket of its own
#     in $BATS_TEST_TMPDIR; sets BLKHASH_URI (nbd+unix:///?socket=...),
#     BLKHASH_SOCKET and BLKHASH_PID.  A lone existing FILE means the
#     file plugin.  Fails, saying why, if nbdkit does not start.  A
#     second call in a test stops the first server and replaces it.
# blkhash_stop
#     Stop the server blkhash_serve started, if any (for teardown).
# blkhash_sum FILE|URI [NBDSUM-OPTIONS...]
#     The checksum alone (nbdsum --no-names -q).
# assert_blkhash FILE|URI HEX [NBDSUM-OPTIONS...]
#     Fail, showing both, unless the checksum is HEX.  Works with run.
#
# NBDSUM and BLKHASH_FILTER choose the nbdsum and the filter (default:
# nbdsum in PATH, and the filter installed with these helpers, else
# nbdkit's blkhash filter).

: "${NBDSUM:=nbdsum}"
if [ -z "${BLKHASH_FILTER:-}" ]; then
  BLKHASH_FILTER=/usr/lib/x86_64-linux-gnu/nbdkit/filters/nbdkit-blkhash-filter.so
  [ -f "$BLKHASH_FILTER" ] || BLKHASH_FILTER=blkhash
fi

blkhash_serve () {
  local args=("$@") i
  blkhash_stop
  if [ "$#" -eq 1 ] && [ -f "$1" ]; then
    args=(file "$1")
  fi
  BLKHASH_SOCKET="$BATS_TEST_TMPDIR/blkhash.sock"
  BLKHASH_URI="nbd+unix:///?socket=$BLKHASH_SOCKET"
  rm -f "$BLKHASH_SOCKET"
  nbdkit -f -U "$BLKHASH_SOCKET" --filter="$BLKHASH_FILTER" "${args[@]}" \
    </dev/null >"$BATS_TEST_TMPDIR/blkhash-nbdkit.log" 2>&1 3>&- &
  BLKHASH_PID=$!
  for ((i = 0; i < 200; i++)); do
    [ -S "$BLKHASH_SOCKET" ] && break
    if ! kill -0 "$BLKHASH_PID" 2>/dev/null; then
      echo "blkhash_serve: nbdkit did not start:" >&2
      cat "$BATS_TEST_TMPDIR/blkhash-nbdkit.log" >&2
      BLKHASH_PID=
      return 1
    fi
    sleep 0.05
  done
  export BLKHASH_URI BLKHASH_SOCKET BLKHASH_PID
}

blkhash_stop () {
  local stat ppid
  if [ -n "${BLKHASH_PID:-}" ]; then
    # Still our nbdkit, a child of this shell?  One that ended was
    # reaped by bash at once, and its pid may be another's by now.
    stat=$(cat "/proc/$BLKHASH_PID/stat" 2>/dev/null) || stat=
    read -r _ ppid _ <<< "${stat##*) }"
    if [ "$ppid" = "$BASHPID" ]; then
      kill "$BLKHASH_PID" 2>/dev/null && wait "$BLKHASH_PID" 2>/dev/null
    fi
    BLKHASH_PID=
  fi
  return 0
}

blkhash_sum () {
  local input=$1
  shift
  "$NBDSUM" --no-names -q "$@" "$input"
}

assert_blkhash () {
  local input=$1 want=$2 got
  shift 2
  got=$(blkhash_sum "$input" "$@") || {
    echo "assert_blkhash: nbdsum failed on $input" >&2
    return 1
  }
  if [ "$got" != "$want" ]; then
    printf 'assert_blkhash: %s\n  expected %s\n  got      %s\n' \
      "$input" "$want" "$got" >&2
    return 1
  fi
}
