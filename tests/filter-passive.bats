#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Hashing while serving: passive hashing, blkhash-file, never a stale
# digest.  Digests outlive the connection that computed them only with
# blkhash-cache=true (the memory plugin's bytes, and these files, change
# only through nbdkit), which the tests of reuse between clients give.

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

setup_file () {
  # Data on 64K boundaries, so a copy writes only full blocks.
  "$MKIMAGE" '96M;d:0+4M:a;d:20M+1M:b;z:40M+2M;d:90M+6M:c' \
    "$BATS_FILE_TMPDIR/aligned.img"
  # Data at odd offsets: copies write some partial blocks.
  "$MKIMAGE" '50000000;d:1000+70000:d;d:30000000+12345:e' \
    "$BATS_FILE_TMPDIR/odd.img"
}

setup () {
  aligned="$BATS_FILE_TMPDIR/aligned.img"
  odd="$BATS_FILE_TMPDIR/odd.img"
  sums="$BATS_TEST_TMPDIR/sums"
  log="$BATS_TEST_TMPDIR/log"
  export aligned odd sums log
}

teardown () {
  kill_servers
}

# Reads the plugin saw, through --filter=log below the blkhash filter.
plugin_reads () {
  grep -c ' Read id=' "$log" || true
}

@test "filter-passive: copying out of the filter leaves the checksum in blkhash-file" {
  run serve file "$odd" blkhash-file="$sums" -- \
    'nbdcopy "$uri" "$BATS_TEST_TMPDIR/copy.img"'
  [ "$status" -eq 0 ]
  cat "$sums"
  want=$(reference sha256 65536 "$odd")
  [ "$(cat "$sums")" = "$want  -" ]
  [ "$(reference sha256 65536 "$BATS_TEST_TMPDIR/copy.img")" = "$want" ]
}

# nbdkit --run sends nbdkit SIGTERM as soon as the command ends, while
# the filter may still be completing the checksum of the last client's
# session: a completion has 10 s to finish.
@test "filter-passive: blkhash-file is complete when nbdkit --run exits at once" {
  local img="$BATS_TEST_TMPDIR/unread.img" want
  "$MKIMAGE" '1G;d:0+256M:unread' "$img"
  want=$(reference sha256 65536 "$img")
  # The client reads nothing: the completion reads 256 MiB.
  run nbdkit -U - --filter="$BLKHASH_FILTER" file "$img" \
    blkhash-file="$sums" --run 'nbdinfo --size "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(cat "$sums")" = "$want  -" ]
  [[ "$output" != *"nbdkit is exiting"* ]]
}

@test "filter-passive: blkhash-file-name names the copy: nbdsum -c checks it as is" {
  cd "$BATS_TEST_TMPDIR"
  run serve file "$odd" blkhash-file="$sums" blkhash-file-name=copy.img -- \
    'nbdcopy "$uri" copy.img'
  [ "$status" -eq 0 ]
  cat "$sums"
  [ "$(cat "$sums")" = "$(reference sha256 65536 "$odd")  copy.img" ]
  run "$NBDSUM" -c "$sums"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "copy.img: OK" ]
  # And a copy that differs fails.
  printf x | dd of=copy.img bs=1 seek=100 conv=notrunc status=none
  run "$NBDSUM" -c "$sums"
  [ "$status" -ne 0 ]
  echo "$output"
  [ "${lines[0]}" = "copy.img: FAILED" ]
}

@test "filter-passive: a copy out reads each block once; holes come from extents" {
  run nbdkit -D blkhash.stats=1 -v -U - --filter="$BLKHASH_FILTER" \
    --filter=log file "$aligned" logfile="$log" blkhash-file="$sums" \
    --run 'nbdcopy "$uri" null:'
  [ "$status" -eq 0 ]
  # The plugin saw only nbdcopy's reads: 13 MiB of data extents,
  # nothing read a second time to hash it, no hole read.
  bytes=0
  for c in $(grep -oE ' Read id=[0-9]+ offset=0x[0-9a-f]+ count=0x[0-9a-f]+' "$log" |
             sed 's/.*count=//'); do
    bytes=$((bytes + c))
  done
  echo "plugin reads: $(plugin_reads), $bytes bytes"
  [ "$bytes" -eq $((13 * 1024 * 1024)) ]
  grep 'stats:' <<< "$output" | tail -n 1
  grep 'stats:' <<< "$output" | tail -n 1 | grep -q 'reading 0 bytes'
  [ "$(cat "$sums")" = "$(reference sha256 65536 "$aligned")  -" ]
}

@test "filter-passive: copying into a filtered memory export fills the table" {
  run nbdkit -U - --filter="$BLKHASH_FILTER" --filter=log memory 96M \
    logfile="$log" blkhash-cache=true --run '
    nbdcopy "$aligned" "$uri" && echo "copied reads=$(grep -c " Read id=" "$log")" &&
    "$NBDSUM" --no-spot-check "$uri" && echo "summed reads=$(grep -c " Read id=" "$log")"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"copied reads=0"* ]]
  [[ "$output" = *"summed reads=0"* ]]
  [ "$(grep -E '^[0-9a-f]{64}  ' <<< "$output" | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$aligned")" ]
}

@test "filter-passive: a sparse source copied in is served from the table" {
  # nbdcopy writes the source's holes as zeroes: no data to read after.
  local sparse="$BATS_TEST_TMPDIR/sparse.img"
  truncate -s 1G "$sparse"
  dd if="$aligned" of="$sparse" bs=1M count=4 seek=500 conv=notrunc status=none
  export sparse
  run nbdkit -D blkhash.stats=1 -v -U - --filter="$BLKHASH_FILTER" memory 1G \
    blkhash-cache=true --run 'nbdcopy "$sparse" "$uri" && "$NBDSUM" --no-spot-check "$uri"'
  [ "$status" -eq 0 ]
  [ "$(grep -E '^[0-9a-f]{64}  ' <<< "$output" | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$sparse")" ]
  grep 'stats:' <<< "$output" | tail -n 1
  # (Holes it may learn from the extents nbdsum lists to size its
  # requests: no reads either.)
  grep 'stats:' <<< "$output" | tail -n 1 |
    grep -q 'computed 0 blocks reading 0 bytes, holes [0-9]* blocks'
}

@test "filter-passive: copying into a filtered file export" {
  local dst="$BATS_TEST_TMPDIR/dst.img"
  truncate -s 96M "$dst"
  run nbdkit -D blkhash.stats=1 -v -U - --filter="$BLKHASH_FILTER" file "$dst" \
    blkhash-cache=true --run 'nbdcopy "$aligned" "$uri" && "$NBDSUM" --no-spot-check "$uri"'
  [ "$status" -eq 0 ]
  [ "$(grep -E '^[0-9a-f]{64}  ' <<< "$output" | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$aligned")" ]
  grep 'stats:' <<< "$output" | tail -n 1 | grep -q 'reading 0 bytes'
  cmp "$aligned" "$dst"
}

@test "filter-passive: partial blocks of an odd source are the only reads after" {
  run nbdkit -D blkhash.stats=1 -v -U - --filter="$BLKHASH_FILTER" \
    --filter=log memory 50000000 logfile="$log" \
    --run 'nbdcopy "$odd" "$uri" && "$NBDSUM" --no-spot-check "$uri"'
  [ "$status" -eq 0 ]
  [ "$(grep -E '^[0-9a-f]{64}  ' <<< "$output" | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$odd")" ]
  # Two data extents, each with at most two partial blocks, and the
  # short last block.
  echo "plugin reads after the copy: $(plugin_reads)"
  [ "$(plugin_reads)" -le 5 ]
}

@test "filter-passive: qemu-img convert as the copying client" {
  run nbdkit -D blkhash.stats=1 -v -U - --filter="$BLKHASH_FILTER" memory 96M \
    blkhash-cache=true --run 'qemu-img convert -n -f raw -O raw "$aligned" "$uri" &&
           "$NBDSUM" --no-spot-check "$uri"'
  [ "$status" -eq 0 ]
  [ "$(grep -E '^[0-9a-f]{64}  ' <<< "$output" | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$aligned")" ]
  grep 'stats:' <<< "$output" | tail -n 1
  grep 'stats:' <<< "$output" | tail -n 1 | grep -q 'reading 0 bytes'
}

@test "filter-passive: blocks read twice are hashed once" {
  run nbdkit -D blkhash.stats=1 -v -U - --filter="$BLKHASH_FILTER" \
    file "$aligned" blkhash-cache=true \
    --run 'nbdcopy "$uri" null: && nbdcopy "$uri" null:'
  [ "$status" -eq 0 ]
  first=$(grep 'stats:' <<< "$output" | head -n 1 | grep -oE 'passive [0-9]+')
  last=$(grep 'stats:' <<< "$output" | tail -n 1 | grep -oE 'passive [0-9]+')
  echo "after the first copy: $first, after the second: $last"
  # 13 MiB of data extents in 64K blocks.
  [ "$first" = "passive 208" ]
  [ "$last" = "$first" ]
}

@test "filter-passive: write zeroes marks blocks zero, trim forgets them" {
  run nbdkit -D blkhash.stats=1 -v -U - --filter="$BLKHASH_FILTER" memory 96M \
    --run '
    nbdcopy "$aligned" "$uri" &&
    qemu-io -f raw "$uri" -c "write -z 0 1M" -c "discard 20M 64K" >/dev/null &&
    nbdcopy "$uri" "$BATS_TEST_TMPDIR/after.img" &&
    "$NBDSUM" --no-spot-check "$uri"'
  [ "$status" -eq 0 ]
  [ "$(grep -E '^[0-9a-f]{64}  ' <<< "$output" | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$BATS_TEST_TMPDIR/after.img")" ]
  [ "$(reference sha256 65536 "$BATS_TEST_TMPDIR/after.img")" != \
    "$(reference sha256 65536 "$aligned")" ]
}

# The cache filter's extents are its plugin's: a block written to its
# cache only is a hole there.  A client asking for extents through the
# data export must not have the filter mark such blocks zero (failed
# as of 7adef8f: the view served the block's digest as zero, and
# nbdsum without its spot check printed a wrong checksum, exit 0).
@test "filter-passive: behind the cache filter, a client's extents mark no cached block zero" {
  local img="$BATS_TEST_TMPDIR/c.img" mode
  for mode in writeback unsafe; do
    rm -f "$img"
    truncate -s 32M "$img"
    start_server "cx-$mode" --filter=cache file "$img" cache="$mode" \
      blkhash-cache=true
    "$NBD_PYTHON" - "$sock" "$BATS_TEST_TMPDIR/content" <<'PY'
import sys, nbd
h = nbd.NBD(); h.add_meta_context("base:allocation"); h.connect_unix(sys.argv[1])
h.pwrite(b"\xab" * 65536, 10 << 20)
zero = []
h.block_status(32 << 20, 0, lambda ctx, off, e, err: zero.append(e[1] & 2) or 0)
print("extents: the written block reads as zeros" if zero[0] else "extents: data")
open(sys.argv[2], "wb").write(h.pread(32 << 20, 0))
h.shutdown()
PY
    cmp -s "$BATS_TEST_TMPDIR/content" "$img" && { echo "not cached only"; false; }
    run "$NBDSUM" --no-spot-check "$uri"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(first_sum "$output")" = \
      "$(reference sha256 65536 "$BATS_TEST_TMPDIR/content")" ]
    stop_server
  done
}

@test "filter-passive: concurrent writers and readers never leave a stale digest" {
  # Fewer under valgrind (make check-sanitizers), where a round is slow.
  export STRESS_ROUNDS=${STRESS_ROUNDS:-20}
  run serve memory 64M -- '
    "$STRESS" "nbd+unix:///?socket=$unixsocket" \
              "nbd+unix:///@blkhash?socket=$unixsocket" "$STRESS_ROUNDS" \
              "$BATS_TEST_TMPDIR/final.img"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c ': ok ' <<< "$output")" -eq "$STRESS_ROUNDS" ]
  [ "${lines[-1]}" = "$(reference sha256 65536 "$BATS_TEST_TMPDIR/final.img")" ]
}

@test "filter-passive: unaligned writes in 96K blocks: full blocks hashed, the checksum right" {
  # 1M in 96K blocks: 10 and a 64K one.  Full blocks written: 2 and 3,
  # 5 and 6, the short last one 10; block 8 written zero; 0, 1, 4 and 7
  # only in part; 9 never.
  local writes=(-c 'write -P 1 0 64K' -c 'write -P 2 64K 64K'
                -c 'write -P 3 192K 192K' -c 'write -P 4 400000 300000'
                -c 'write -z 786432 96K' -c 'write -P 5 983040 64K')
  local want="$BATS_TEST_TMPDIR/want.img"
  truncate -s 1M "$want"
  qemu-io -f raw "$want" "${writes[@]}" >/dev/null
  printf -v cmds '%q ' "${writes[@]}"
  export cmds
  run nbdkit -D blkhash.stats=1 -v -U - --filter="$BLKHASH_FILTER" memory 1M \
    blkhash-block-size=96K blkhash-digest=shake128 blkhash-cache=true --run '
    eval "qemu-io -f raw \"\$uri\" $cmds" >/dev/null &&
    "$NBDSUM" --no-spot-check "$uri" && "$NBDSUM" --no-spot-check -d sha256 --block-size 96K "$uri" &&
    nbdcopy "$uri" "$BATS_TEST_TMPDIR/back.img"'
  [ "$status" -eq 0 ]
  grep 'stats:' <<< "$output" | head -n 2
  cmp "$want" "$BATS_TEST_TMPDIR/back.img"
  [ "$(sum_hex "$(grep '^BLKHASH-SHAKE128/96K ' <<< "$output")")" = \
    "$(reference shake128 98304 "$want")" ]
  [ "$(sum_hex "$(grep '^BLKHASH-SHA256/96K ' <<< "$output")")" = \
    "$(reference sha256 98304 "$want")" ]
  # The writes hashed the 5 full blocks; the checksum then computed
  # only the 4 partly written blocks, reading them whole (96K each),
  # block 9 a hole (block 8 too, when the extents nbdsum lists to size
  # its requests say so first).  Any line: nbdkit may finalize
  # qemu-io's connection after nbdsum's first one opened, and then logs
  # no line for it.
  grep 'stats:' <<< "$output" |
    grep -Eq 'passive 5 blocks, computed 4 blocks reading 393216 bytes, holes [12] '
}

@test "filter-passive: concurrent unaligned writers with 96K blocks and shake128 never leave a stale digest" {
  local rounds=$(( (${STRESS_ROUNDS:-20} + 3) / 4 ))
  export rounds
  run serve memory 64M blkhash-block-size=96K blkhash-digest=shake128 -- '
    "$STRESS" -b 96K -d shake128 "nbd+unix:///?socket=$unixsocket" \
              "nbd+unix:///@blkhash?socket=$unixsocket" "$rounds" \
              "$BATS_TEST_TMPDIR/final.img"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c ': ok ' <<< "$output")" -eq "$rounds" ]
  [ "${lines[-1]}" = "$(reference shake128 98304 "$BATS_TEST_TMPDIR/final.img")" ]
}

# Writes through one export name while a view of another computes: a
# write forgets every table of every other export whole (they may share
# its bytes), and nothing computed while it is in flight is kept.
@test "filter-passive: concurrent writers through one name, the view of another never stale" {
  local rounds=$(( (${STRESS_ROUNDS:-20} + 6) / 7 ))
  export rounds
  run serve memory 64M blkhash-cache=true -- '
    "$STRESS" "nbd+unix:///a?socket=$unixsocket" \
              "nbd+unix:///b@blkhash?socket=$unixsocket" "$rounds" \
              "$BATS_TEST_TMPDIR/final.img"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c ': ok ' <<< "$output")" -eq "$rounds" ]
  [ "${lines[-1]}" = "$(reference sha256 65536 "$BATS_TEST_TMPDIR/final.img")" ]
}

@test "filter-passive: by default and with blkhash-cache=false, nothing hashed in passing without blkhash-file" {
  local cache
  for cache in "" blkhash-cache=false; do
    rm -f "$log"
    run nbdkit -D blkhash.stats=1 -v -U - --filter="$BLKHASH_FILTER" \
      --filter=log memory 96M logfile="$log" $cache \
      --run 'nbdcopy "$aligned" "$uri" && "$NBDSUM" --no-spot-check "$uri" &&
             nbdcopy "$uri" null: && "$NBDSUM" --no-spot-check "$uri"'
    [ "$status" -eq 0 ]
    want=$(reference sha256 65536 "$aligned")
    [ "$(grep -cE "^$want  " <<< "$output")" -eq 2 ]
    grep 'stats:' <<< "$output" | tail -n 1
    grep 'stats:' <<< "$output" | tail -n 1 | grep -q 'passive 0 blocks'
    # Both nbdsum runs read the data: nothing was kept between them.
    [ "$(grep -oE 'connection=[0-9]+ Read' "$log" | sort -u | wc -l)" -ge 2 ]
  done
}

@test "filter-passive: blkhash-file lists every served export, sorted, atomically" {
  local dir="$BATS_TEST_TMPDIR/dir"
  mkdir "$dir"
  cp "$odd" "$dir/b.img"
  "$MKIMAGE" '3M;d:0+1M:x' "$dir/a.img"
  echo "old contents" > "$sums"
  export dir
  run serve file dir="$dir" blkhash-file="$sums" -- '
    nbdcopy "nbd+unix:///b.img?socket=$unixsocket" null: &&
    nbdinfo "nbd+unix:///a.img?socket=$unixsocket" >/dev/null'
  [ "$status" -eq 0 ]
  cat "$sums"
  [ "$(cat "$sums")" = "$(reference sha256 65536 "$dir/a.img")  a.img
$(reference sha256 65536 "$dir/b.img")  b.img" ]
  # No temporary file left behind.
  [ "$(ls "$BATS_TEST_TMPDIR" | grep -c '^sums')" -eq 1 ]
}

# A flush computes what the table lacks only within what clients
# wrote: small writes and flushes (a virtual machine's) never make a
# flush read the image; a copy that wrote it all gets its line there.
@test "filter-passive: a flush reads no more than was written" {
  cat > "$BATS_TEST_TMPDIR/vm.py" <<'PY'
import nbd, os, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for i in range(8):
    h.pwrite(bytes([i + 1]) * 4096, i * 1048576 + 512)
    h.flush()
print("reads after 8 small writes and flushes:",
      open(os.environ["log"]).read().count(" Read id="))
print("line:", os.path.exists(os.environ["sums"]))
h.shutdown()
PY
  export NBD_PYTHON=${NBD_PYTHON:-/usr/bin/python3}
  rm -f "$log"
  run serve --filter=log memory 96M logfile="$log" blkhash-file="$sums" -- '
    "$NBD_PYTHON" "$BATS_TEST_TMPDIR/vm.py" "$uri" &&
    nbdcopy "$uri" "$BATS_TEST_TMPDIR/vm.img"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "reads after 8 small writes and flushes: 0" ]
  [ "${lines[1]}" = "line: False" ]
  [ "$(cat "$sums")" = "$(reference sha256 65536 "$BATS_TEST_TMPDIR/vm.img")  -" ]

  # A copy of the odd image writes some blocks in part: its flush reads
  # them, and the line is there before the flush's reply.
  rm -f "$log" "$sums"
  run serve --filter=log memory 50000000 logfile="$log" \
    blkhash-file="$sums" -- '
    nbdcopy --flush "$odd" "$uri" && cat "$sums" && grep -c " Read id=" "$log"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "$(reference sha256 65536 "$odd")  -" ]
  [ "${lines[1]}" -ge 1 ]
}

@test "filter-passive: blkhash-file is complete even if the client read nothing" {
  run serve file "$aligned" blkhash-file="$sums" -- 'nbdinfo "$uri" >/dev/null'
  [ "$status" -eq 0 ]
  [ "$(cat "$sums")" = "$(reference sha256 65536 "$aligned")  -" ]
}

@test "filter-passive: blkhash-file with the view's own digest and block size" {
  run serve file "$aligned" blkhash-file="$sums" blkhash-digest=sha1 \
    blkhash-block-size=1M -- 'nbdcopy "$uri" null:'
  [ "$status" -eq 0 ]
  [ "$(cat "$sums")" = "BLKHASH-SHA1/1M (-) = $(reference sha1 1048576 "$aligned")" ]
}

@test "filter-passive: blkhash-file with shake256 and 96K blocks" {
  run serve file "$odd" blkhash-file="$sums" blkhash-digest=SHAKE-256 \
    blkhash-block-size=96K -- 'nbdcopy "$uri" null:'
  [ "$status" -eq 0 ]
  cat "$sums"
  [ "$(cat "$sums")" = "BLKHASH-SHAKE256/96K (-) = $(reference shake256 98304 "$odd")" ]
  # The tag says how to check it.
  run "$NBDSUM" -c "$sums" < "$odd"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "-: OK" ]
}

@test "filter-passive: a 4 TiB empty image costs the filter under 64 MiB" {
  local img="$BATS_TEST_TMPDIR/empty.img" pid rss want
  [ -z "${BLKHASH_SANITIZERS:-}" ] || skip "RSS under valgrind is valgrind's"
  truncate -s 4T "$img"
  nbdkit_daemon "$BATS_TEST_TMPDIR/pid" --filter="$BLKHASH_FILTER" \
    -U "$BATS_TEST_TMPDIR/sock" file "$img"
  pid=$(cat "$BATS_TEST_TMPDIR/pid")
  run "$NBDSUM" "nbd+unix:///?socket=$BATS_TEST_TMPDIR/sock"
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
  kill "$pid"
  echo "$output"
  echo "filter RSS after the checksum: $rss KiB"
  [ "$status" -eq 0 ]
  # H(zero digest x 2^26 || le64(4 TiB)), computed here.
  want=$("$PYTHON" -c '
import hashlib, struct
zd = hashlib.sha256(bytes(65536)).digest()
h = hashlib.sha256()
run = zd * 65536
for _ in range(1024):
    h.update(run)
h.update(struct.pack("<Q", 4 << 40))
print(h.hexdigest())')
  [ "${output%% *}" = "$want" ]
  [ "$rss" -lt $((64 * 1024)) ]
}

@test "filter-passive: -D blkhash.stats=1 counts computed blocks, once per export" {
  # nbdsum opens several connections to the view: one stats line when
  # the last of them leaves, counting the 13 MiB it had to read.
  run nbdkit -D blkhash.stats=1 -v -U - --filter="$BLKHASH_FILTER" \
    file "$aligned" --run '"$NBDSUM" --no-spot-check "$uri"'
  [ "$status" -eq 0 ]
  grep 'stats' <<< "$output"
  [ "$(grep -c 'blkhash: stats' <<< "$output")" -eq 1 ]
  grep -q "stats: passive 0 blocks, computed 208 blocks reading 13631488 bytes, holes [0-9]* blocks, read ahead [0-9]* pieces (since start; the last client of '' left)" <<< "$output"
}

# The hostile review: any client picks the export names that become
# lines (the memory plugin serves one image under every name), and
# nbdsum -c of the file opened /dev/zero (and hung), ../../etc/passwd,
# or connected where the line said.  A client's name is written
# percent-encoded, a plain file name in the current directory.
@test "filter-passive: blkhash-file writes a client's export name as a plain file name: nbdsum -c opens nothing outside it, connects nowhere" {
  local name want zero port up=.. i empty="$BATS_TEST_TMPDIR/empty"
  cd "$BATS_TEST_TMPDIR"
  # A listener on 127.0.0.1 that records every connection to it.
  cat > listen.py <<'PY'
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
s.settimeout(1)
with open("port.tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
import os; os.rename("port.tmp", "port")
end = time.time() + 300
while time.time() < end:
    try:
        c, a = s.accept()
    except socket.timeout:
        continue
    with open("connections", "a") as f:
        f.write("%s:%d\n" % a)
    c.close()
PY
  "$PYTHON" listen.py </dev/null >/dev/null 2>&1 3>&- &
  servers+=("$!")
  for ((i = 0; i < 200; i++)); do [ -s port ] && break; sleep 0.05; done
  port=$(cat port)
  for ((i = 0; i < 30; i++)); do up="$up/.."; done
  # Each name, as a client sends it and as the line must name it.
  names=(/dev/zero "nbd://127.0.0.1:$port/x" "$up/etc/passwd" -rf .hidden
         'a%b' disk.img $'new\nline' 'back\slash' 'sp ace')
  encoded=(%2Fdev%2Fzero "nbd%3A%2F%2F127.0.0.1%3A$port%2Fx"
           "%2E.$(printf '%%2F..%.0s' {1..30})%2Fetc%2Fpasswd" %2Drf %2Ehidden
           a%25b disk.img new%0Aline back%5Cslash sp%20ace)
  printf '%s\0' "${names[@]}" > names
  cat > open.py <<'PY'
import nbd, os, sys
for name in open("names", "rb").read().split(b"\0")[:-1]:
    h = nbd.NBD()
    h.set_export_name(name.decode())
    h.connect_unix(sys.argv[1])
    h.pread(4096, 0)
    h.shutdown()
PY
  run nbdkit -U - --filter="$BLKHASH_FILTER" memory 1M \
    blkhash-file="$sums" --run '"$NBD_PYTHON" open.py "$unixsocket"'
  echo "$output"
  [ "$status" -eq 0 ]
  cat "$sums"
  head -c 1M /dev/zero > zero.img
  zero=$(reference sha256 65536 zero.img)
  want=$(for name in "${encoded[@]}"; do echo "$zero  $name"; done | sort)
  [ "$(sort "$sums")" = "$want" ]

  # nbdsum -c in an empty directory (but for disk.img): each line a
  # file there, missing but disk.img; no open of /dev/zero (a hang),
  # of /etc/passwd, no connection.
  mkdir "$empty"
  cp zero.img "$empty/disk.img"
  cd "$empty"
  run timeout 60 strace -f -qq -e trace=open,openat,connect -o ../trace \
    "$NBDSUM" -c "$sums" </dev/null
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"disk.img: OK"* ]]
  for name in "${encoded[@]}"; do
    [ "$name" = disk.img ] && continue
    [[ "$output" = *"nbdsum: $name: No such file or directory"* ]]
    [[ "$output" = *"$name: FAILED open or read"* ]]
  done
  [[ "$output" = *"WARNING: $(( ${#names[@]} - 1 )) listed files could not be read"* ]]
  [ ! -e ../connections ]
  grep -q "open.*\"$sums\"" ../trace
  ! grep -E '"/dev/zero"|etc/passwd|sin_port=htons\('"$port"'\)' ../trace || false
  ls -A "$empty"
  [ "$(ls -A "$empty")" = disk.img ]
}
