# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Background nbdkit servers, and the small libnbd (Python) clients the
# suites drive them with.  A suite that loads this calls kill_servers
# from its teardown.

servers=()

# The python with the libnbd bindings ("import nbd").
: "${NBD_PYTHON:=/usr/bin/python3}"
export NBD_PYTHON

# nbdkit_at_least VERSION: is the installed nbdkit that release or
# newer?
nbdkit_at_least () {
  local have
  have=$(nbdkit --version | awk '{ print $2; exit }')
  [ "$(printf '%s\n%s\n' "$1" "$have" | sort -V | head -n 1)" = "$1" ]
}

# nbdkit options for a server whose clients a test kills mid-request:
# nbdkit before 1.33.10 aborts when a client vanishes with requests in
# flight on several threads, so there it serves one request at a time.
if nbdkit_at_least 1.33.10; then
  KILLED_CLIENT_OPTS=()
else
  KILLED_CLIENT_OPTS=(--threads=1)
fi

kill_servers () {
  local p
  for p in "${servers[@]}"; do
    ours "$p" || continue
    { kill -9 "$p" && wait "$p"; } 2>/dev/null || true
  done
  servers=()
}

# start_nbdkit NAME NBDKIT-ARGS...: nbdkit -f as a background job of
# the test.  Sets pid, sock, uri and err (nbdkit's stdout and stderr).
start_nbdkit () {
  local name=$1 i
  shift
  local pidfile="$BATS_TEST_TMPDIR/$name.pid"
  sock="$BATS_TEST_TMPDIR/$name.sock"
  err="$BATS_TEST_TMPDIR/$name.err"
  uri="nbd+unix:///?socket=$sock"
  rm -f "$sock" "$pidfile"
  nbdkit -f -U "$sock" -P "$pidfile" "$@" </dev/null >"$err" 2>&1 3>&- &
  pid=$!
  servers+=("$pid")
  # Not the socket file: it exists from bind(2), and a client before
  # listen(2) is refused (seen under valgrind).  nbdkit writes its
  # pidfile once it accepts connections.
  for ((i = 0; i < 200; i++)); do
    [ -s "$pidfile" ] && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "nbdkit did not start:"
  cat "$err"
  return 1
}

# start_server NAME NBDKIT-ARGS...: the same with the blkhash filter on
# top (further --filter options go below it).
start_server () {
  local name=$1
  shift
  start_nbdkit "$name" --filter="$BLKHASH_FILTER" "$@"
}

# pause_control p|r: pause or resume the requests of a server with
# nbdkit's pause filter (pause-control=$ctl), once it said it has.
pause_control () {
  "$NBD_PYTHON" - "$ctl" "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode())
assert s.recv(1) == sys.argv[2].upper().encode()
EOF
}

# wait_exit PID SECONDS: wait at most SECONDS for the background job
# PID to end; sets rc to its exit status.  Fails if it is still running.
wait_exit () {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    if ! kill -0 "$1" 2>/dev/null; then
      rc=0
      wait "$1" || rc=$?
      return 0
    fi
    sleep 0.1
  done
  echo "process $1 still running after $2 s"
  return 1
}

# wait_idle [SECONDS]: until every connection the server ($err; nbdkit
# -v) opened through the filter is closed, which nbdkit does once the
# connection's requests are done (a client killed mid-request leaves
# some in flight).  An open that failed ("open returned handle (nil)")
# opened nothing, and no close follows it: a refused export name, or a
# client killed while connecting when a filter below ends its open on
# the closed socket (nbdkit 1.42's delay filter).  SECONDS is a hang
# guard (default 60); on failure, what is still open is shown.
server_idle () {
  [ "$(( $(grep -c ': debug: blkhash: open readonly' "$err") -
         $(grep -c ': debug: blkhash: open returned handle (nil)$' "$err") ))" \
    -eq "$(grep -c ': debug: blkhash: close$' "$err")" ]
}
wait_idle () {
  local c
  wait_until "${1:-60}" server_idle && return 0
  echo "still open (the connection's last lines of $err):"
  for c in $(open_connections); do
    grep -F "$c: " "$err" | tail -n 5
  done
  return 1
}
# The tags (NAME[N]) of the connections of $err opened and not closed.
open_connections () {
  awk '$3 != "debug:" || $4 != "blkhash:" { next }
       $5 == "open" && $6 ~ /^readonly=/ { n[$2]++ }
       $5 == "open" && $6 == "returned" && $8 == "(nil)" { n[$2]-- }
       $5 == "close" && NF == 5 { n[$2]-- }
       END { for (c in n) if (n[c] > 0) print substr(c, 1, length(c) - 1) }' \
    "$err"
}

# Stop the server: SIGTERM, it must exit 0 within 30 s with no crash.
stop_server () {
  kill "$pid"
  wait_exit "$pid" 30
  if [ "$rc" -ne 0 ] || ! no_crash "$err" >/dev/null; then
    echo "nbdkit exit status $rc:"
    cat "$err"
    return 1
  fi
}

# No crash or sanitizer report in nbdkit's stderr FILE.
no_crash () {
  ! grep -E 'Assertion|assertion failed|Segmentation fault|Sanitizer|runtime error:|double free|corrupted|stack smashing|Aborted|core dumped' "$1"
}

# The URI of export NAME on $sock.
uri_of () {
  echo "nbd+unix:///$1?socket=$sock"
}

# Progress and counts, shown by bats and kept in make check's log.
report () {
  echo "# $*" >&3
}

# pwrite_bytes URI OFFSET LENGTH BYTE: write LENGTH bytes BYTE, flush.
pwrite_bytes () {
  "$NBD_PYTHON" -c '
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pwrite(bytes([int(sys.argv[4])]) * int(sys.argv[3]), int(sys.argv[2]))
h.flush()
h.shutdown()' "$@"
}

# abort_handshake SOCKET [EXPORT]: a client that asks for EXPORT with
# NBD_OPT_GO and resets the connection without reading the answer, as
# a client killed while connecting does.
abort_handshake () {
  "$NBD_PYTHON" - "$@" <<'PY'
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
name = (sys.argv[2] if len(sys.argv) > 2 else "").encode()
greeting = b""
while len(greeting) < 18:
    greeting += s.recv(18 - len(greeting))
assert greeting[:8] == b"NBDMAGIC", greeting
s.sendall(struct.pack(">I", 3))     # fixed newstyle, no zeroes
data = struct.pack(">I", len(name)) + name + struct.pack(">H", 0)
s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, len(data)) + data)
# RST, not FIN: the server's answer fails.
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
PY
}

# start_http DIR [httpserver.py OPTIONS...]: tests/httpserver.py
# serving the files of DIR from loopback (byte ranges, chosen
# failures), logging each request to $BATS_TEST_TMPDIR/http.log, as a
# background job of the test.  Sets port, http_port and url
# (http://127.0.0.1:PORT).
start_http () {
  local dir=$1 portfile="$BATS_TEST_TMPDIR/http.port"
  shift
  rm -f "$portfile"
  "$PYTHON" "$top_srcdir/tests/httpserver.py" "$dir" \
    --log "$BATS_TEST_TMPDIR/http.log" --port-file "$portfile" "$@" \
    </dev/null >/dev/null 2>"$BATS_TEST_TMPDIR/http.err" 3>&- &
  servers+=("$!")
  wait_until 10 test -s "$portfile" ||
    { echo "tests/httpserver.py did not start"; cat "$BATS_TEST_TMPDIR/http.err"; return 1; }
  port=$(cat "$portfile")
  http_port=$port
  url="http://127.0.0.1:$port"
}

# start_echo NAME DIR [OPTION...]: tests/echonbd.py serving DIR
# (crafted views that answer the nonce) as a background job of the
# test, as start_nbdkit sets pid, sock, uri and err.
start_echo () {
  sock="$BATS_TEST_TMPDIR/$1.sock"
  err="$BATS_TEST_TMPDIR/$1.err"
  uri="nbd+unix:///?socket=$sock"
  rm -f "$sock"
  "$NBD_PYTHON" "$top_srcdir/tests/echonbd.py" "$sock" "$2" "${@:3}" \
    </dev/null >"$err" 2>&1 3>&- &
  pid=$!
  servers+=("$pid")
  wait_until 10 test -S "$sock" || { cat "$err"; return 1; }
}
