#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The systemd units of systemd/, run without systemd: the commands come
# from the units as built (tests/unitexec.py reads them as systemd
# would, with the example configuration's variables) and nbdkit is
# started by socket activation from systemd-socket-activate.  Only the
# listening address and the filter's path (the build tree's for the
# installed one) are the test's own.

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

service_unit="$top_builddir/systemd/nbdkit-blkhash.service"
socket_unit="$top_srcdir/systemd/nbdkit-blkhash.socket"
example_conf="$top_srcdir/systemd/nbdkit-blkhash.conf"
images=(disk1.img disk2.img empty.img)
# make check says where the filter is installed; by hand, the Makefile.
if [ -z "${BLKHASH_FILTERDIR:-}" ]; then
  BLKHASH_FILTERDIR=$(make -s --no-print-directory -C "$top_builddir" \
                        -f - print-filterdir <<'MK'
include Makefile
print-filterdir:
	@echo $(filterdir)
MK
)
fi

setup_file () {
  local dir="$BATS_FILE_TMPDIR/images" name
  command -v systemd-socket-activate >/dev/null || {
    echo "systemd-socket-activate not found: install the Debian package systemd" >&2
    return 1
  }
  mkdir -p "$dir/subdir"
  "$MKIMAGE" '12M;d:0+1M:a;d:5M+100000:b;z:8M+1M' "$dir/disk1.img"
  "$MKIMAGE" '3000000;d:1M+1M:c' "$dir/disk2.img"
  "$MKIMAGE" '0' "$dir/empty.img"
  for name in disk1.img disk2.img empty.img; do
    reference sha256 65536 "$dir/$name" > "$BATS_FILE_TMPDIR/$name.want"
  done
}

setup () {
  image_dir="$BATS_FILE_TMPDIR/images"
  [ -f "$service_unit" ] || make -C "$top_builddir" systemd/nbdkit-blkhash.service
}

teardown () {
  # A traced nbdkit outlives its tracer killed by kill_servers.
  [ -z "${nbdkit_pid:-}" ] || ! ours "$nbdkit_pid" ||
    kill -9 "$nbdkit_pid" 2>/dev/null || true
  kill_servers
}

want () {
  cat "$BATS_FILE_TMPDIR/$1.want"
}

# conf NAME [SED-SCRIPT]: the example configuration with IMAGE_DIR set
# to the test's images, edited by SED-SCRIPT; prints its path.
conf () {
  local out="$BATS_TEST_TMPDIR/$1.conf"
  grep -q '^IMAGE_DIR=' "$example_conf"
  sed -e "s|^IMAGE_DIR=.*|IMAGE_DIR=$image_dir|" -e "${2:-}" \
    "$example_conf" > "$out"
  echo "$out"
}

# The unit's commands with configuration CONF: sets unit_env,
# unit_pre_N, unit_start (tests/unitexec.py).
read_unit () {
  local code
  code=$("$PYTHON" "$top_srcdir/tests/unitexec.py" "$service_unit" "$1" \
         "$BLKHASH_FILTERDIR/nbdkit-blkhash-filter.so=$BLKHASH_FILTER") ||
    return 1
  eval "$code"
}

# The environment systemd gives a service: its default PATH, and the
# configuration's variables.
unit_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin
unit_exec () {
  env -i PATH="$unit_path" "${unit_env[@]}" "$@"
}

# A command start_service runs the service's nbdkit under (strace).
service_wrapper=()

# start_service NAME CONF ADDRESS: the unit's ExecStartPre commands,
# then its ExecStart under systemd-socket-activate listening on
# ADDRESS (a socket path, or HOST:PORT), as systemd runs a service when
# its socket unit gets the first connection.  Sets pid (that of
# systemd-socket-activate, then of nbdkit: it execs) and err.
start_service () {
  local name=$1 i cmd
  err="$BATS_TEST_TMPDIR/$name.err"
  read_unit "$2" || return 1
  for ((i = 0; i < unit_pre_count; i++)); do
    eval "cmd=(\"\${unit_pre_$i[@]}\")"
    if ! unit_exec "${cmd[@]}" > "$err" 2>&1; then
      echo "ExecStartPre failed:"
      cat "$err"
      return 1
    fi
  done
  # Not through unit_exec: pid must be the process that becomes nbdkit.
  env -i PATH="$unit_path" "${unit_env[@]}" \
    systemd-socket-activate -l "$3" -- \
    "${service_wrapper[@]}" "${unit_start[@]}" \
    </dev/null >"$err" 2>&1 3>&- &
  pid=$!
  servers+=("$pid")
  for ((i = 0; i < 200; i++)); do
    grep -q '^Listening on' "$err" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "systemd-socket-activate did not listen:"
  cat "$err"
  return 1
}

# A TCP port nobody listens on now.
free_port () {
  "$PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# start_tcp NAME CONF: start_service on 127.0.0.1 and a free port
# (another is tried if someone took it meanwhile); sets port.
start_tcp () {
  local try
  for try in 1 2 3 4 5; do
    port=$(free_port)
    start_service "$1" "$2" "127.0.0.1:$port" && return 0
    grep -q 'Address already in use' "$err" || return 1
  done
  return 1
}

# The nbdkit that socket activation started: pid is now nbdkit's, which
# took its socket from systemd-socket-activate.
assert_socket_activated () {
  local exe
  exe=$(readlink "/proc/$pid/exe")
  echo "process $pid is $exe"
  [ "$exe" = "$(readlink -f "${unit_start[0]}")" ]
  tr '\0' '\n' < "/proc/$pid/environ" | grep -qx 'LISTEN_FDS=1'
  # systemd 252 and 257 say "Execing CMD", 262 "Executing: CMD".
  grep -Eq "^(Execing|Executing:) ${unit_start[0]} " "$err"
}

@test "service: the units are what the man page says" {
  local page="$top_srcdir/man/nbdkit-blkhash-filter.pod" a
  read_unit "$(conf plain)"
  # Socket activation: nbdkit gets systemd's socket, one process for
  # every connection, on NBD's port.
  eval "$("$PYTHON" "$top_srcdir/tests/unitexec.py" "$socket_unit")"
  [ "${unit_listen[*]}" = 10809 ]
  [ "$unit_accept" = no ]
  grep -q '^Requires=nbdkit-blkhash.socket' "$service_unit"
  echo "ExecStart: ${unit_start[*]}"
  for a in "${unit_start[@]}"; do
    case $a in -U|-p|--port*|--unix*|-s|--single|-i|--inetd|--run*)
      echo "nbdkit listens itself with $a"; false ;;
    esac
  done
  # Read-only whatever the configuration says; this build's nbdkit.
  [ "${unit_start[1]}" = --foreground ]
  [ "${unit_start[2]}" = --readonly ]
  [ "${unit_start[3]}" = "--filter=$BLKHASH_FILTER" ]
  [ -x "${unit_start[0]}" ]
  "${unit_start[0]}" --version | grep -q '^nbdkit '
  # The configuration is where the man page and the unit say.
  [ "$unit_envfile" = /etc/nbdkit-blkhash/nbdkit-blkhash.conf ]
  grep -q "$unit_envfile" "$page"
  grep -q "$unit_envfile" "$example_conf"
}

@test "service: systemd-analyze verify accepts the units, hardened" {
  local dir="$BATS_TEST_TMPDIR/units" level
  mkdir -p "$dir"
  cp "$service_unit" "$socket_unit" "$dir"
  # --man=no: the man page is not installed here.
  run systemd-analyze verify --man=no "$dir/nbdkit-blkhash.socket" \
    "$dir/nbdkit-blkhash.service"
  echo "$output"
  if [ "$status" -ne 0 ] && [[ "$output" = *"bus"* || "$output" = *"ystem has not been booted"* ]]; then
    skip "systemd-analyze verify needs what this system lacks: $output"
  fi
  [ "$status" -eq 0 ]
  # Warnings (unknown keys, bad values) exit 0: none allowed.
  [ -z "$output" ]
  # The sandbox as systemd rates it (1.5 when written; 9.6 without).
  run systemd-analyze security --offline=true "$dir/nbdkit-blkhash.service"
  level=$(sed -n 's/.*Overall exposure level for nbdkit-blkhash.service: \([0-9.]*\).*/\1/p' <<< "$output")
  echo "exposure: $level"
  [ -n "$level" ]
  awk -v l="$level" 'BEGIN { exit !(l <= 2.0) }'
}

@test "service: socket activation serves every image of IMAGE_DIR and its view" {
  local name out
  start_tcp tcp "$(conf plain)"
  # The first connection starts nbdkit: it lists each image and view,
  # and nothing else of the directory.
  run nbdinfo --list "nbd://127.0.0.1:$port"
  echo "$output"
  [ "$status" -eq 0 ]
  assert_socket_activated
  for name in "${images[@]}"; do
    [[ "$output" = *"export=\"$name\""* ]]
    [[ "$output" = *"export=\"$name@blkhash\""* ]]
  done
  [ "$(grep -c '^export=' <<< "$output")" -eq $((2 * ${#images[@]})) ]
  # Each checksum is the reference's, computed by the server.
  for name in "${images[@]}"; do
    run "$NBDSUM" --json "nbd://127.0.0.1:$port/$name"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" = *"\"checksum\": \"$(want "$name")\""* ]]
    [[ "$output" = *'"method": "server-side"'* ]]
  done
  run "$NBDSUM" "nbd://127.0.0.1:$port/${images[0]}"
  [ "$output" = "$(want "${images[0]}")  nbd://127.0.0.1:$port/${images[0]}" ]
  stop_server
}

# README.md's lines for running without systemd, as written: a shell
# sources the example configuration (here with its TLS line) and
# systemd-socket-activate starts nbdkit.  Only the paths change: the
# test's configuration, a socket for port 10809, the build's filter.
@test "service: README's recipe without systemd reads the configuration as systemd does" {
  local keys="$BATS_TEST_TMPDIR/keys.psk" sock="$BATS_TEST_TMPDIR/readme.sock"
  local c script="$BATS_TEST_TMPDIR/readme.sh" i
  echo "alice:$(openssl rand -hex 32)" > "$keys"
  chmod 600 "$keys"
  c=$(conf readme "s|^#\(NBDKIT_TLS=\"--tls=require --tls-psk=\).*|\1$keys\"|")
  sed -n '/^Without systemd/,/^Whoever/p' "$top_srcdir/README.md" |
    sed -n 's/^    //p' |
    sed -e "s|/etc/nbdkit-blkhash/nbdkit-blkhash.conf|$c|" \
        -e "s|-l 10809|-l $sock|" -e "s|--filter=blkhash|--filter=$BLKHASH_FILTER|" \
    > "$script"
  cat "$script"
  [ "$(wc -l < "$script")" -eq 4 ]
  bash "$script" </dev/null > "$BATS_TEST_TMPDIR/readme.err" 2>&1 3>&- &
  servers+=("$!")
  for ((i = 0; i < 200; i++)); do
    [ -S "$sock" ] && break
    sleep 0.05
  done
  # What became nbdkit, a child of that shell, goes too.
  servers+=($(pgrep -P "${servers[-1]}"))
  run "$NBDSUM" "nbd+unix:///disk1.img?socket=$sock"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" = *"requires TLS"* ]]
  run "$NBDSUM" "nbds+unix://alice@/disk1.img?socket=$sock&tls-psk-file=$keys"
  echo "$output"
  cat "$BATS_TEST_TMPDIR/readme.err"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$output")" = "$(want disk1.img)" ]
}

@test "service: read-only: a client cannot write an image" {
  local before
  before=$(md5sum < "$image_dir/disk1.img")
  start_service ro "$(conf ro)" "$BATS_TEST_TMPDIR/ro.sock"
  run pwrite_bytes "nbd+unix:///disk1.img?socket=$BATS_TEST_TMPDIR/ro.sock" 0 65536 7
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" = *"read-only"* || "$output" = *"Operation not permitted"* ]]
  assert_socket_activated
  run qemu-io -f raw -c 'write -P 7 0 64k' \
    "nbd+unix:///disk2.img?socket=$BATS_TEST_TMPDIR/ro.sock"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" != *"wrote 65536"* ]]
  [ "$(md5sum < "$image_dir/disk1.img")" = "$before" ]
  run "$NBDSUM" "nbd+unix:///disk2.img?socket=$BATS_TEST_TMPDIR/ro.sock"
  [ "$(sum_hex "$output")" = "$(want disk2.img)" ]
  stop_server
}

@test "service: TLS with a pre-shared key, from the configuration's example" {
  local keys="$BATS_TEST_TMPDIR/keys.psk" other="$BATS_TEST_TMPDIR/other.psk"
  local sock="$BATS_TEST_TMPDIR/tls.sock" c
  echo "alice:$(openssl rand -hex 32)" > "$keys"
  echo "alice:$(openssl rand -hex 32)" > "$other"
  chmod 600 "$keys" "$other"
  # The example's line, uncommented, with the test's key file.
  grep -q '^#NBDKIT_TLS="--tls=require --tls-psk=' "$example_conf"
  c=$(conf tls "s|^#\(NBDKIT_TLS=\"--tls=require --tls-psk=\).*|\1$keys\"|")
  grep -q "^NBDKIT_TLS=\"--tls=require --tls-psk=$keys\"\$" "$c"
  start_service tls "$c" "$sock"
  # Without TLS, or with another key: refused.
  run "$NBDSUM" "nbd+unix:///disk1.img?socket=$sock"
  echo "$output"
  [ "$status" -ne 0 ]
  assert_socket_activated
  run "$NBDSUM" "nbds+unix://alice@/disk1.img?socket=$sock&tls-psk-file=$other"
  echo "$output"
  [ "$status" -ne 0 ]
  run "$NBDSUM" "nbds+unix://alice@/disk1.img?socket=$sock&tls-psk-file=$keys"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$output")" = "$(want disk1.img)" ]
  stop_server
}

@test "service: the views-only example serves checksums and refuses the images" {
  local c sock="$BATS_TEST_TMPDIR/vo.sock"
  grep -q '^#NBDKIT_PARAMS=blkhash-views-only=true$' "$example_conf"
  c=$(conf vo 's/^#\(NBDKIT_PARAMS=blkhash-views-only=true\)$/\1/')
  grep -q '^NBDKIT_PARAMS=blkhash-views-only=true$' "$c"
  start_service vo "$c" "$sock"
  run "$NBDSUM" "nbd+unix:///disk1.img?socket=$sock"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$output")" = "$(want disk1.img)" ]
  assert_socket_activated
  run nbdcopy "nbd+unix:///disk1.img?socket=$sock" "$BATS_TEST_TMPDIR/copy"
  [ "$status" -ne 0 ]
  [ ! -s "$BATS_TEST_TMPDIR/copy" ]
  grep -q 'serves only its views' "$err"
  stop_server
}

# The allow and deny lists the example configuration shows.
ip_conf () {
  conf "$1" "s/^#\(NBDKIT_OPTIONS=--filter=ip\)\$/\1/; ${2:-s/^#\(NBDKIT_PARAMS=\"allow=\)/\1/}"
}

@test "service: the ip filter example refuses clients outside its list" {
  local c
  grep -q '^#NBDKIT_OPTIONS=--filter=ip$' "$example_conf"
  grep -q '^#NBDKIT_PARAMS="allow=.* deny=all"$' "$example_conf"
  c=$(ip_conf ip)
  grep -q '^NBDKIT_PARAMS="allow=' "$c"
  # As written, over TCP: 127.0.0.1 is not in the list.
  start_tcp ip "$c"
  run "$NBDSUM" "nbd://127.0.0.1:$port/disk1.img"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" != *"$(want disk1.img)"* ]]
  if kill -0 "$pid" 2>/dev/null; then
    assert_socket_activated
    grep -q 'not permitted to connect' "$err"
    stop_server
  else
    # Debian 12's nbdkit 1.32.5 has an ip filter that parses no
    # address: the service does not start, and serves nothing.
    cat "$err"
    grep -q 'ip.*cannot parse address\|error: cannot parse address' "$err"
    # systemd 252 and 257 say "Execing CMD", 262 "Executing: CMD".
  grep -Eq "^(Execing|Executing:) ${unit_start[0]} " "$err"
  fi
}

@test "service: the ip filter lets in the clients of its list, only them" {
  local c sock="$BATS_TEST_TMPDIR/ip.sock"
  # Rules on the client's user work on every nbdkit (on a Unix socket).
  c=$(ip_conf ip-me "s/^#NBDKIT_PARAMS=\"allow=[^ ]*/NBDKIT_PARAMS=\"allow=uid:$(id -u)/")
  grep -q "^NBDKIT_PARAMS=\"allow=uid:$(id -u) deny=all\"\$" "$c"
  start_service ip-me "$c" "$sock"
  run "$NBDSUM" "nbd+unix:///disk1.img?socket=$sock"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$output")" = "$(want disk1.img)" ]
  assert_socket_activated
  stop_server
  c=$(ip_conf ip-other "s/^#NBDKIT_PARAMS=\"allow=[^ ]*/NBDKIT_PARAMS=\"allow=uid:$(($(id -u) + 1))/")
  start_service ip-other "$c" "$sock"
  run "$NBDSUM" "nbd+unix:///disk1.img?socket=$sock"
  echo "$output"
  [ "$status" -ne 0 ]
  assert_socket_activated
  grep -q 'not permitted to connect' "$err"
  stop_server
}

@test "service: without a usable IMAGE_DIR it fails, saying so" {
  local c
  # Commented out, a directory that does not exist, a file.
  for edit in 's/^IMAGE_DIR=/#IMAGE_DIR=/' \
              "s|^IMAGE_DIR=.*|IMAGE_DIR=$BATS_TEST_TMPDIR/nowhere|" \
              "s|^IMAGE_DIR=.*|IMAGE_DIR=$image_dir/disk1.img|"; do
    c=$(conf bad "$edit")
    run start_service bad "$c" "$BATS_TEST_TMPDIR/bad.sock"
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" = *"ExecStartPre failed"* ]]
    [[ "$output" = *"IMAGE_DIR="*"is not a directory"* ]]
    [[ "$output" = *"/etc/nbdkit-blkhash/nbdkit-blkhash.conf"* ]]
    [ ! -e "$BATS_TEST_TMPDIR/bad.sock" ]
  done
  [[ "$output" = *"IMAGE_DIR=$image_dir/disk1.img "* ]]
}

@test "service: a fleet checksum file verifies with nbdsum -c, and catches a change" {
  local sums="$BATS_TEST_TMPDIR/fleet.sums" name uris=() jobs=()
  cp -r "$image_dir" "$BATS_TEST_TMPDIR/images"
  image_dir="$BATS_TEST_TMPDIR/images"
  start_tcp fleet "$(conf fleet)"
  for name in "${images[@]}"; do uris+=("nbd://127.0.0.1:$port/$name"); done
  "$NBDSUM" "${uris[@]}" > "$sums"
  cat "$sums"
  [ "$(wc -l < "$sums")" -eq "${#images[@]}" ]
  # nbdsum -j where this nbdsum has it, as the man page shows.
  if "$NBDSUM" --help | grep -qE -- '(^|[ ,])-j( |,|$)|--jobs'; then
    jobs=(-j 16)
  fi
  run "$NBDSUM" -c "${jobs[@]}" "$sums"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c ': OK$' <<< "$output")" -eq "${#images[@]}" ]
  # A block of disk2.img changes on the host, outside nbdkit.
  printf 'changed' | dd of="$image_dir/disk2.img" bs=1 seek=100 \
    conv=notrunc status=none
  run "$NBDSUM" -c "${jobs[@]}" "$sums"
  echo "$output"
  [ "$status" -eq 1 ]
  grep -qx "nbd://127.0.0.1:$port/disk2.img: FAILED" <<< "$output"
  grep -qx "nbd://127.0.0.1:$port/disk1.img: OK" <<< "$output"
  stop_server
}

# syscalls_of NAME|@GROUP...: the system calls a SystemCallFilter= list
# allows, groups expanded by systemd-analyze.
syscalls_of () {
  local item
  for item in "$@"; do
    case $item in
      ~*) echo "a deny list (~) is not understood: $item" >&2; return 1 ;;
      @*) syscalls_of $(systemd-analyze syscall-filter "$item" |
                        sed -e 1d -e 's/^ *//' -e '/^#/d' -e '/^$/d') ||
            return 1 ;;
      *) echo "$item" ;;
    esac
  done
}

@test "service: nbdkit stays within the unit's SystemCallFilter and RestrictAddressFamilies" {
  local trace="$BATS_TEST_TMPDIR/trace" sock="$BATS_TEST_TMPDIR/sc.sock"
  local keys="$BATS_TEST_TMPDIR/keys.psk" filter families allowed used bad
  local traced
  command -v strace >/dev/null ||
    skip "strace is not installed (Debian package strace)"
  strace -f -o /dev/null true 2>/dev/null ||
    skip "strace cannot trace processes here"
  filter=$(sed -n 's/^SystemCallFilter=//p' "$service_unit")
  families=$(sed -n 's/^RestrictAddressFamilies=//p' "$service_unit")
  echo "SystemCallFilter=$filter; RestrictAddressFamilies=$families"
  [ -n "$filter" ] && [ -n "$families" ]
  allowed=$(syscalls_of $filter | sort -u)
  [ "$(wc -l <<< "$allowed")" -gt 100 ]
  # The most the service does: TLS, a listing, checksums, a refused
  # write, then SIGTERM.  strace is the process socket activation
  # starts; the shell it runs gives nbdkit LISTEN_PID, then becomes it.
  echo "alice:$(openssl rand -hex 32)" > "$keys"
  service_wrapper=(strace -f -qq -o "$trace"
                   sh -c 'LISTEN_PID=$$; export LISTEN_PID; exec "$@"' sh)
  start_service sc "$(conf sc "s|^#\(NBDKIT_TLS=\"--tls=require --tls-psk=\).*|\1$keys\"|")" "$sock"
  run nbdinfo --list "nbds+unix://alice@/?socket=$sock&tls-psk-file=$keys"
  [ "$status" -eq 0 ]
  run "$NBDSUM" "nbds+unix://alice@/disk1.img?socket=$sock&tls-psk-file=$keys"
  echo "$output"
  [ "$(sum_hex "$output")" = "$(want disk1.img)" ]
  run pwrite_bytes "nbds+unix://alice@/disk2.img?socket=$sock&tls-psk-file=$keys" 0 512 1
  [ "$status" -ne 0 ]
  # Global: teardown kills it if the test fails.
  nbdkit_pid=$(awk -v n="${unit_start[0]}" 'index($0, "execve(\"" n "\"") { print $1; exit }' "$trace")
  echo "nbdkit: $nbdkit_pid"
  [ -n "$nbdkit_pid" ]
  kill "$nbdkit_pid"
  wait_exit "$pid" 30
  traced=$nbdkit_pid
  nbdkit_pid=
  cat "$err"
  [ "$rc" -eq 0 ]
  # nbdkit's calls (its threads' too), from its execve on; each named
  # once.
  awk -v p="$traced" -v n="${unit_start[0]}" '
    !go && $1 == p && index($0, "execve(\"" n "\"") { go = 1 }
    go' "$trace" > "$trace.nbdkit"
  used=$(awk '$2 ~ /^[a-z_0-9]+\(/ { s = $2; sub(/\(.*/, "", s); print s }' \
         "$trace.nbdkit" | sort -u)
  echo "used: $(tr '\n' ' ' <<< "$used")"
  [ "$(wc -l <<< "$used")" -gt 20 ]
  bad=$(comm -23 <(echo "$used") <(echo "$allowed"))
  echo "not in SystemCallFilter: $bad"
  [ -z "$bad" ]
  # Sockets of other families than the unit allows, and files opened
  # for writing outside /dev (ProtectSystem=strict): none.
  bad=$(grep -oE ' socket\(AF_[A-Z0-9]+' "$trace.nbdkit" | sed 's/ socket(//' |
        grep -vxF -f <(tr ' ' '\n' <<< "$families") || true)
  echo "socket families not allowed: $bad"
  [ -z "$bad" ]
  bad=$(grep -E 'open(at)?\(.*O_(WRONLY|RDWR|CREAT)' "$trace.nbdkit" |
        grep -vE 'open(at)?\((AT_FDCWD, )?"/dev/' || true)
  echo "opened for writing: $bad"
  [ -z "$bad" ]
}
