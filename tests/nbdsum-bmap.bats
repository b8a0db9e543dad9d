#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum --bmap: bmaptool's block map from the filter's NAME@bmap view.
# The real bmaptool copies with it (a served raw image, a qcow2's guest
# content converted to raw) and the copy equals the source; one byte
# changed in a mapped block fails bmaptool's checksum; mapped bytes at
# most 1.1 times the data; sparse, full, odd-size and empty images; too
# many ranges refused naming the limit; a server without the filter
# mapped by nbdsum's private filter in front of it; a file named like
# the view not believed.

bats_require_minimum_version 1.5.0

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

setup () {
  cd "$BATS_TEST_TMPDIR"
  command -v bmaptool > /dev/null ||
    skip "bmaptool is not installed (Debian package bmap-tools)"
}

teardown () {
  kill_servers
}

# copy_ok BMAP SRC: bmaptool copies SRC with BMAP, and the copy equals it.
copy_ok () {
  rm -f out.raw
  bmaptool copy --bmap "$1" "$2" out.raw
  cmp "$2" out.raw
}

# same_bmap A B: the two bmaps say the same (header fields and ranges
# with their checksums); their comments are bmaptool's, whose wording
# changes between its versions (3.6 in Debian 12, 3.9 in 13), and so
# does the file's own checksum over them (bmaptool copy checks it).
same_bmap () {
  local f
  for f in "$1" "$2"; do
    "$PYTHON" -c '
import re, sys
t = re.sub(r"<!--.*?-->", "", open(sys.argv[1]).read(), flags=re.S)
t = re.sub(r"<BmapFileChecksum>.*?</BmapFileChecksum>", "", t)
print("\n".join(l.strip() for l in t.splitlines() if l.strip()))' "$f" \
      > "$f.data"
  done
  diff "$1.data" "$2.data"
}

# The BMAP's count of mapped blocks, and the FILE's 4K blocks that are
# not all zeros.
mapped_of () {
  sed -n 's|.*<MappedBlocksCount> *\([0-9]*\) *</Mapped.*|\1|p' "$1"
}
data_blocks () {
  "$PYTHON" -c '
import sys
d = open(sys.argv[1], "rb").read()
print(sum(1 for i in range(0, len(d), 4096) if d[i:i + 4096].strip(b"\0")))' "$1"
}

# At most 1.1 times the data, and no data left out (the copy says so).
mapped_within () {
  local m d
  m=$(mapped_of "$1")
  d=$(data_blocks "$2")
  echo "mapped $m blocks, data $d"
  [ "$((m * 10))" -le "$((d * 11))" ]
}

@test "a served raw image: bmaptool copies it, the same bmap bmaptool create writes" {
  "$MKIMAGE" '64M;d:0+20K:a;d:1M+3M:b;d:9M+4K:c;d:40M+8M:d;d:63M+1M:e' disk.img
  start_server s file disk.img
  "$NBDSUM" --bmap "$uri" > disk.bmap
  copy_ok disk.bmap disk.img
  # Data in whole blocks, apart by more than 64K: bmaptool's mapping.
  bmaptool create disk.img -o ref.bmap
  same_bmap disk.bmap ref.bmap
  mapped_within disk.bmap disk.img
}

@test "an http URL: its bytes mapped (no extents: zero blocks found), bmaptool copies it" {
  mkdir www
  "$MKIMAGE" '12M;d:1M+2M:a;d:9M+5:b' www/disk.img
  start_http www
  "$NBDSUM" --bmap "$url/disk.img" > disk.bmap
  copy_ok disk.bmap www/disk.img
  [ "$(mapped_of disk.bmap)" -eq "$(data_blocks www/disk.img)" ]
}

@test "segments scanned at once: a range across 64 MiB is cut there, the copy equal" {
  "$MKIMAGE" '300M;d:60M+10M:a;d:127M+2M:b;d:200M+4K:c;d:299M+1M:d' disk.img
  start_server s file disk.img
  "$NBDSUM" --bmap "$uri" > disk.bmap
  copy_ok disk.bmap disk.img
  grep -q '> 15360-16383 </Range>' disk.bmap
  grep -q '> 16384-17919 </Range>' disk.bmap
  [ "$(mapped_of disk.bmap)" -eq "$(data_blocks disk.img)" ]
}

@test "one byte changed in a mapped block: bmaptool copy fails its checksum" {
  "$MKIMAGE" '16M;d:1M+2M:a;d:10M+100K:b' disk.img
  "$NBDSUM" --bmap disk.img > disk.bmap
  copy_ok disk.bmap disk.img
  # A byte in the second range, changed after the bmap was made.
  printf '\x5a' | dd of=disk.img bs=1 seek=$((10 * 1048576 + 777)) \
    conv=notrunc status=none
  rm -f out.raw
  run -1 bmaptool copy --bmap disk.bmap disk.img out.raw
  [[ $output == *checksum* ]]
}

@test "a qcow2's guest content: the bmap of what it holds, at most 1.1 times its data" {
  command -v qemu-img > /dev/null || skip "qemu-img is not installed"
  seed_random BMAP_SEED
  qemu-img create -q -f qcow2 disk.qcow2 256M
  # 4K writes inside 64K clusters: the cluster is allocated, the rest
  # of it reads as zeros and is not mapped.  Each inside the image (a
  # write past its end failed the test, BMAP_SEED=543760).
  for ((i = 0; i < 40; i++)); do
    len=$(( (RANDOM % 8 + 1) * 4096 ))
    off=$(( (RANDOM * 32768 + RANDOM) % (256 * 256 - len / 4096 + 1) * 4096 ))
    qemu-io -f qcow2 -c "write -P $((RANDOM % 255 + 1)) $off $len" \
      disk.qcow2 > /dev/null
  done
  "$NBDSUM" --bmap disk.qcow2 > disk.bmap
  # bmaptool reads a raw file: the guest content converted.
  qemu-img convert -f qcow2 -O raw disk.qcow2 guest.raw
  copy_ok disk.bmap guest.raw
  mapped_within disk.bmap guest.raw
  # Not the container's bytes, nor its clusters.
  [ "$(mapped_of disk.bmap)" -lt "$(( $(qemu-img info --output=json \
     disk.qcow2 | "$PYTHON" -c 'import json, sys
print(json.load(sys.stdin)["actual-size"])') / 4096 ))" ]
}

@test "sparse, full, zeros written, odd sizes: copies equal, mapped within 1.1x" {
  local r i=0
  for r in \
    '10000001;d:9999990+11:a;d:40960+12288:b' \
    '5000000;d:0+5000000:c' \
    '8M;d:0+1M:a;z:1M+2M;d:3M+4097:b;d:3M+300K:c' \
    '3145745;z:0+3145728' \
    '4097;d:4096+1:y' \
    '1;d:0+1:z' \
    '20M;d:0+4K:a;d:12K+4K:b;d:24K+4K:c;d:10M+64K:d;d:10M+80K:e'; do
    echo "recipe $r"
    "$MKIMAGE" "$r" "img$i"
    "$NBDSUM" --bmap "img$i" > "img$i.bmap"
    copy_ok "img$i.bmap" "img$i"
    mapped_within "img$i.bmap" "img$i"
    i=$((i + 1))
  done
  # The last block cut at the image's end, as bmaptool create hashes it.
  bmaptool create img0 -o ref0.bmap
  same_bmap img0.bmap ref0.bmap
}

@test "written while mapped: the view fails with EIO, then maps the new content" {
  "$MKIMAGE" '200M;d:0+1M:a;d:100M+1M:b' disk.img
  start_server s file disk.img
  "$NBD_PYTHON" -c '
import nbd, struct, sys
v = nbd.NBD()
v.connect_uri(sys.argv[2])
v.cache(64, 8192)                       # the first segment, scanned
d = nbd.NBD()
d.connect_uri(sys.argv[1])
d.pwrite(b"\x11" * 4096, 150 * 1048576)
d.flush()
try:
    v.pread(40, 4096)
    sys.exit("a bmap of what was written over was served")
except nbd.Error as e:
    assert e.errno == "EIO", e
ranges = struct.unpack("<Q", v.pread(40, 4096)[:8])[0]
print("ranges after", ranges)
assert ranges == 3, ranges' "$uri" "$(uri_of @bmap)"
  grep -q "was written while its bmap was computed" "$err"
  "$NBDSUM" --bmap "$uri" > disk.bmap
  copy_ok disk.bmap disk.img
}

@test "an empty image: refused, as bmaptool create refuses it, nothing printed" {
  : > empty.img
  run -1 --separate-stderr "$NBDSUM" --bmap empty.img
  [ -z "$output" ]
  [[ $stderr == *"empty.img: the image is empty"* ]]
}

@test "more ranges than the limit: refused, naming it" {
  "$MKIMAGE" '4M;d:0+4K:a;d:1M+4K:b;d:2M+4K:c;d:3M+4K:d' disk.img
  start_server s -D blkhash.bmap_max_ranges=3 file disk.img
  run -1 --separate-stderr "$NBDSUM" --bmap "$uri"
  [ -z "$output" ]
  [[ $stderr == *"more than 3 mapped ranges"* ]]
  [[ $stderr == *"too fragmented"* ]]
}

@test "a server without the filter: nbdsum's private filter in front maps it" {
  "$MKIMAGE" '4M;d:0+4K:a;d:1M+64K:b;z:2M+1M;d:3M+5000:c' disk.img
  # What a server with the filter says.
  start_server f file disk.img
  "$NBDSUM" --bmap "$uri" > want.bmap
  copy_ok want.bmap disk.img
  # One that answers every name with the image.
  start_nbdkit plain file disk.img
  run -0 --separate-stderr "$NBDSUM" --bmap "$uri"
  echo "$stderr"
  [[ $stderr == *"did not echo the nonce"* ]]
  printf '%s\n' "$output" > plain.bmap
  copy_ok plain.bmap disk.img
  same_bmap want.bmap plain.bmap
  mapped_within plain.bmap disk.img
  # One that has no such export: the view's name is not a file there.
  mkdir dir
  mv disk.img dir/
  start_nbdkit plaindir file dir=dir
  run -0 --separate-stderr "$NBDSUM" --bmap "$(uri_of disk.img)"
  echo "$stderr"
  [[ $stderr == *"no bmap view"* ]]
  printf '%s\n' "$output" > dir.bmap
  copy_ok dir.bmap dir/disk.img
  same_bmap want.bmap dir.bmap
  # qemu-nbd: one client at a time, gone after the first.
  "$NBDSUM" --bmap [ qemu-nbd -r -f raw dir/disk.img ] > q.bmap
  copy_ok q.bmap dir/disk.img
  same_bmap want.bmap q.bmap
}

@test "a server without fixed newstyle (no NBD_OPT_INFO): mapped by the private filter, not taken for TLS" {
  "$MKIMAGE" '4M;d:0+4K:a;d:1M+64K:b;z:2M+1M;d:3M+5000:c' disk.img
  start_nbdkit old --mask-handshake=0 file disk.img
  run --separate-stderr "$NBDSUM" --bmap "$uri"
  echo "$stderr"
  [[ $stderr != *"requires TLS"* ]]
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" > old.bmap
  copy_ok old.bmap disk.img
  mapped_within old.bmap disk.img
}

@test "a file named like the view beside the image is not believed" {
  "$MKIMAGE" '8M;d:1M+1M:a' disk
  "$MKIMAGE" '8M;d:5M+1M:b' other
  # A real view of another image, made for some other request.
  start_server s file other
  "$NBD_PYTHON" -c '
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.cache(8, 8192)
assert h.pread(8, 0) == b"BLKBMAP1"
open(sys.argv[2], "wb").write(h.pread(h.get_size(), 0))' \
    "$(uri_of @bmap,nonce=1234)" forged
  kill_servers
  mkdir dir
  cp disk dir/disk
  cp forged dir/disk@bmap
  # Without the filter: the name with its nonce is no file, and the
  # private filter in front maps the image, not the file.
  start_nbdkit nofilter file dir=dir
  "$NBDSUM" --bmap "$(uri_of disk)" > nofilter.bmap
  copy_ok nofilter.bmap dir/disk
  # A server that answers every name with the forged view: that is
  # its image, mapped as such (the forged header is not believed).
  start_nbdkit anyname file forged
  run -0 --separate-stderr "$NBDSUM" --bmap "$(uri_of disk)"
  [[ $stderr == *"did not echo the nonce"* ]]
  printf '%s\n' "$output" > anyname.bmap
  copy_ok anyname.bmap forged
  # With the filter the name is the view of disk, never the file.
  start_server withfilter file dir=dir
  "$NBDSUM" --bmap "$(uri_of disk)" > disk.bmap
  copy_ok disk.bmap dir/disk
}

# view_of IMAGE FILE: the filter's true bmap view of IMAGE, into FILE.
view_of () {
  start_server "view-$2" file "$1"
  "$NBD_PYTHON" -c '
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.cache(64, 8192)
open(sys.argv[2], "wb").write(h.pread(h.get_size(), 0))' \
    "$(uri_of @bmap)" "$2"
}

@test "a view that lies, answering the nonce: the spot check catches it" {
  "$MKIMAGE" '8M;d:1M+1M:a;d:5M+1M:b' disk
  # The same ranges over other bytes; and one that leaves out 5M+1M.
  "$MKIMAGE" '8M;d:1M+1M:c;d:5M+1M:d' other
  "$MKIMAGE" '8M;d:1M+1M:a' less
  view_of other other.view
  view_of less less.view
  kill_servers
  mkdir lie1 lie2
  cp disk lie1/disk
  cp disk lie2/disk
  cp other.view lie1/disk@bmap
  cp less.view lie2/disk@bmap
  start_echo lie1 lie1
  run -1 --separate-stderr "$NBDSUM" --bmap "$(uri_of disk)"
  [ -z "$output" ]
  [[ $stderr == *"disagrees with its data at blocks"* ]]
  # Its word alone, without the check: what it says.
  NBDSUM_SPOT_SEED=7 "$NBDSUM" --bmap --no-spot-check "$(uri_of disk)" \
    > lie.bmap
  start_echo lie2 lie2
  NBDSUM_SPOT_SEED=7 run -1 --separate-stderr "$NBDSUM" --bmap \
    --spot-check=64 "$(uri_of disk)"
  [ -z "$output" ]
  [[ $stderr == *"leaves out data at block"* ]]
}

# Review (review37): a server without the filter whose image is smaller
# than a view's header was "not believed: too small" (an error line,
# though the private filter then mapped it, exit 0); a view that echoes
# the nonce but whose header is wrong was not believed and then mapped
# in front of it, as if the server had no filter.
@test "a view too small to echo the nonce is none; one that echoes it with a bad header fails" {
  printf 'x' > tiny
  start_nbdkit tiny file tiny
  run -0 --separate-stderr "$NBDSUM" --bmap "$uri"
  echo "$stderr"
  [[ $stderr != *"not believed"* ]]
  printf '%s\n' "$output" > tiny.bmap
  copy_ok tiny.bmap tiny
  "$MKIMAGE" '8M;d:1M+1M:a' disk
  view_of disk disk.view
  kill_servers
  mkdir bad
  cp disk bad/disk
  # The view's header echoes the nonce; its size no longer matches it.
  cat disk.view /dev/zero | head -c $(($(stat -c %s disk.view) + 4096)) \
    > bad/disk@bmap
  start_echo bad bad
  run -1 --separate-stderr "$NBDSUM" --bmap "$(uri_of disk)"
  [ -z "$output" ]
  [[ $stderr == *"is not believed: its size does not match its header"* ]]
  [[ $stderr != *"hashing client-side"* ]]
}

@test "--bmap goes alone" {
  "$MKIMAGE" '1M;d:0+4K:a' disk.img
  for o in --json --plain -c --blocks --client-side -d\ sha1; do
    # shellcheck disable=SC2086
    run -1 "$NBDSUM" --bmap $o disk.img
    [[ $output == *"--bmap needs one image"* ]]
  done
  run -1 "$NBDSUM" --bmap disk.img disk.img
  run -1 "$NBDSUM" --bmap -
}

# Review (review-br): a failed NBD_CMD_CACHE must not make nbdsum hang
# up with the others still in flight: nbdkit 1.32.5 aborts when its
# client vanishes under requests (raw_send_socket: Assertion `sock >=
# 0'), so --bmap of a server being written killed the server.
@test "a segment failing: nbdsum waits for the others in flight before it hangs up" {
  # 4 segments of 64 MiB: the first fails at once; the others' first
  # read takes a second, so they are in flight when the error comes.
  start_server s -v eval thread_model='echo parallel' \
    get_size='echo 268435456' \
    pread='if [ $4 -lt 67108864 ]; then echo "EIO injected" >&2; exit 1; fi
           [ $(($4 % 67108864)) -eq 0 ] && sleep 1
           head -c $3 /dev/zero'
  run -1 --separate-stderr "$NBDSUM" --bmap "$uri"
  [ -z "$output" ]
  [[ "$stderr" = *"failed to map image bytes from 0: Input/output error"* ]]
  wait_idle
  # Every reply was taken: none went to a client gone.
  run -1 grep -E "write reply|transport endpoint shutdown|connection close or error|client has gone" "$err"
  # SIGTERM: the eval plugin's scripts go with it (kill -9 leaves them).
  stop_server
}

# Review (review-br): a local image over the 1 TiB limit of a bmap was
# refused as "the server has no bmap view ... give the image's file"
# (it was the file): the refusal must name the limit and what lifts it.
@test "an image over the bmap size limit is refused naming the limit" {
  truncate -s $((1099511627776 + 4096)) big.img
  run -1 --separate-stderr "$NBDSUM" --bmap big.img
  [ -z "$output" ]
  [[ "$stderr" = *"over the limit of 1 TiB for a bmap: --max-size=SIZE lifts it"* ]]
  [[ "$stderr" != *"no bmap view"* ]]
}

# Review (review-br): on a signal, --bmap hung up at once with its
# CACHE requests in flight (nbdkit 1.32.5 may abort then); the other
# modes give them DRAIN_SECONDS.
@test "a signal during the scan: the requests in flight are waited for" {
  start_server s -v eval thread_model='echo parallel' \
    get_size='echo 268435456' \
    pread='[ $(($4 % 67108864)) -eq 0 ] && sleep 1
           head -c $3 /dev/zero'
  "$NBDSUM" --bmap "$uri" > out 2> errout &
  local np=$!
  # The fourth segment's first read: four requests in flight.
  wait_until 30 grep -q 'pread "" 1048576 201326592' "$err"
  kill -TERM "$np"
  wait_exit "$np" 30
  [ "$rc" -ne 0 ]
  [ ! -s out ]
  wait_idle
  run -1 grep -E "write reply|transport endpoint shutdown" "$err"
  stop_server
}
