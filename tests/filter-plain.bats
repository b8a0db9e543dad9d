#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The plain-digest view NAME@digest[:DIGEST], read by a small libnbd
# client (tests/plainview.py): its value is sha256sum's (md5sum's...)
# of the bytes the export serves, however the work is driven; a write
# voids it, a read error fails it; blkhash-views-only serves views and
# refuses data.

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

setup_file () {
  # Holes, zero runs written, data, an odd size; and one all zeros.
  "$MKIMAGE" '7340033;d:0+100000:a;z:1M+2M;d:3M+5:b;d:5000000+2340033:c' \
    "$BATS_FILE_TMPDIR/mixed.img"
  "$MKIMAGE" '3145745;z:0+3145728' "$BATS_FILE_TMPDIR/zeros.img"
}

setup () {
  mixed="$BATS_FILE_TMPDIR/mixed.img"
  zeros="$BATS_FILE_TMPDIR/zeros.img"
}

teardown () {
  kill_servers
}

plainview () {
  "$NBD_PYTHON" "$top_srcdir/tests/plainview.py" "$@"
}

# sumof TOOL FILE: the hex a coreutils tool prints.
sumof () {
  "$1" "$2" | cut -d' ' -f1
}

@test "filter-plain: every vector image's sha256 is sha256sum's and the vector's" {
  local n=0 name want
  mkdir -p "$BATS_TEST_TMPDIR/v"
  for name in $(vector_images); do
    build_vector_image "$name" "$BATS_TEST_TMPDIR/v"
    want=$(vector_rows "$name" | head -n 1 | cut -f4)
    [ "$(sumof sha256sum "$BATS_TEST_TMPDIR/v/$name.img")" = "$want" ]
    start_server "v-$name" file "$BATS_TEST_TMPDIR/v/$name.img"
    run plainview "$sock" @digest:sha256 --step 5
    [ "$status" -eq 0 ] || { echo "$name: $output"; false; }
    [ "$output" = "sha256 $want" ] || { echo "$name: $output"; false; }
    stop_server
    n=$((n + 1))
  done
  report "$n vector images"
  [ "$n" -ge 20 ]
}

@test "filter-plain: md5, sha1, sha256, sha512 equal md5sum, sha1sum, sha256sum, sha512sum" {
  local d img
  for img in "$mixed" "$zeros"; do
    start_server p file "$img"
    for d in md5 sha1 sha256 sha512; do
      run plainview "$sock" "@digest:$d" --size "$(stat -c %s "$img")"
      [ "$status" -eq 0 ]
      [ "$output" = "$d $(sumof "${d}sum" "$img")" ]
    done
    stop_server
  done
}

@test "filter-plain: the same value without extents and from a named export" {
  local want
  want="sha256 $(sumof sha256sum "$mixed")"
  start_server noext --filter=noextents file "$mixed"
  run plainview "$sock" @digest
  [ "$output" = "$want" ]
  stop_server
  mkdir "$BATS_TEST_TMPDIR/d"
  cp "$mixed" "$BATS_TEST_TMPDIR/d/disk.img"
  start_server dir file dir="$BATS_TEST_TMPDIR/d"
  run plainview "$sock" disk.img@digest:sha256
  [ "$status" -eq 0 ]
  [ "$output" = "$want" ]
  stop_server
}

# blake3 of FILE by b3sum, else by python3-blake3 (what the reference
# uses).
b3_of () {
  if command -v b3sum >/dev/null; then
    b3sum "$1" | cut -d' ' -f1
  else
    "$PYTHON" -c 'import blake3, sys
print(blake3.blake3(open(sys.argv[1], "rb").read()).hexdigest())' "$1"
  fi
}

@test "filter-plain: blake3 equals b3sum's" {
  need_digest blake3
  command -v b3sum >/dev/null || "$PYTHON" -c 'import blake3' ||
    skip "neither b3sum nor python3-blake3"
  start_server b3 file "$mixed"
  run plainview "$sock" @digest:blake3
  [ "$status" -eq 0 ]
  [ "$output" = "blake3 $(b3_of "$mixed")" ]
  stop_server
}

@test "filter-plain: driven in steps of 1, 3 and 64 spans, backwards, or not at all: one value" {
  local want step
  want="sha256 $(sumof sha256sum "$mixed")"
  start_server steps file "$mixed"
  for step in 1 3 64; do
    run plainview "$sock" @digest --step "$step"
    [ "$status" -eq 0 ]
    [ "$output" = "$want" ]
  done
  run plainview "$sock" @digest --step 2 --order rev
  [ "$output" = "$want" ]
  run plainview "$sock" @digest --order none
  [ "$output" = "$want" ]
  stop_server
}

@test "filter-plain: a write through the filter while hashing fails the digest; asked again, the new content's" {
  cp "$mixed" "$BATS_TEST_TMPDIR/w.img"
  start_server w file "$BATS_TEST_TMPDIR/w.img"
  run "$NBD_PYTHON" - "$sock" <<'PY'
import sys, nbd
view = nbd.NBD(); view.set_export_name("@digest:sha256")
view.connect_unix(sys.argv[1])
data = nbd.NBD(); data.connect_unix(sys.argv[1])
view.cache(2, 8192)                     # two spans hashed
data.pwrite(b"\xff" * 512, 0)           # behind the run's position
data.flush()
try:
    view.pread(32, 4096)
    print("no error")
except nbd.Error as e:
    print("error", e.errno)
print(view.pread(32, 4096).hex())
PY
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "error EIO" ]
  [ "${lines[1]}" = "$(sumof sha256sum "$BATS_TEST_TMPDIR/w.img")" ]
  [ "${lines[1]}" != "$(sumof sha256sum "$mixed")" ]
  grep -q "was written while its sha256 was computed" "$err"
  stop_server
}

@test "filter-plain: a failing read fails the digest, never a wrong value" {
  start_server e --filter=error file "$mixed" error-pread=EIO \
    error-pread-rate=100%
  run plainview "$sock" @digest:sha256
  [ "$status" -eq 1 ]
  [[ "$output" = *EIO* || "$output" = *"Input/output"* ]]
  [[ "$output" != *"$(sumof sha256sum "$mixed")"* ]]
  kill_servers
}

@test "filter-plain: an unknown digest or a block size is refused at the handshake, naming it" {
  start_server bad file "$mixed"
  run plainview "$sock" @digest:nosuch
  [ "$status" -eq 1 ]
  grep -q "nosuch" "$err"
  run plainview "$sock" @digest:sha256/64K
  [ "$status" -eq 1 ]
  grep -q "a plain digest has no block size" "$err"
  stop_server
}

@test "filter-plain: the view is read-only and not multi-conn" {
  start_server ro file "$mixed"
  run "$NBD_PYTHON" - "$sock" <<'PY'
import sys, nbd
h = nbd.NBD(); h.set_export_name("@digest"); h.connect_unix(sys.argv[1])
print(h.is_read_only(), h.can_multi_conn(), h.can_cache())
PY
  [ "$output" = "True False True" ]
  stop_server
}

@test "filter-plain: blkhash-views-only serves every view and refuses data, writes and block status" {
  local want
  want=$(reference sha256 65536 "$mixed")
  start_server vo file "$mixed" blkhash-views-only=true
  run plainview "$sock" @digest:sha512
  [ "$output" = "sha512 $(sumof sha512sum "$mixed")" ]
  run "$NBDSUM" "$(uri_of "")"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$want" ]
  run "$NBDSUM" "$(uri_of "@blkhash")"
  [ "$status" -ne 0 ]
  # The data export: no read, no write, no block status.
  run nbdinfo --map "$(uri_of "")"
  [ "$status" -ne 0 ]
  run nbdcopy "$(uri_of "")" "$BATS_TEST_TMPDIR/copy"
  [ "$status" -ne 0 ]
  [ ! -s "$BATS_TEST_TMPDIR/copy" ]
  run "$NBD_PYTHON" - "$sock" <<'PY'
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
PY
  [ "$status" -ne 0 ]
  grep -q "serves only its views (blkhash-views-only=true)" "$err"
  # Listed: the views alone.
  run nbdinfo --list --json "$(uri_of "")"
  [ "$status" -eq 0 ]
  [[ "$output" = *'"@blkhash"'* ]]
  [[ "$output" != *'"export-name": ""'* ]]
  stop_server
}

@test "filter-plain: blkhash-views-only with a bad value refuses to start" {
  run nbdkit -U - --filter="$BLKHASH_FILTER" file "$mixed" \
    blkhash-views-only=maybe --run true
  [ "$status" -ne 0 ]
  [[ "$output" = *"blkhash-views-only=maybe: expected true or false"* ]]
}

@test "filter-plain: SIGTERM ends a digest of zeros at once, the client gets an error" {
  # 4 PiB of zeros: md5 would take months.  An nbdkit gone within the
  # hang guard below was ended by the signal, not by the digest.
  start_server term -v null 4P blkhash-max-size=0
  "$NBD_PYTHON" - "$sock" > "$BATS_TEST_TMPDIR/out" 2>&1 <<'PY' &
import sys, nbd
h = nbd.NBD(); h.set_export_name("@digest:md5"); h.connect_unix(sys.argv[1])
try:
    print("digest", h.pread(16, 4096).hex())
except nbd.Error as e:
    print("error", e)
PY
  local client=$!
  # The request is in the filter (nbdkit -v logs it as it passes).
  wait_until 60 grep -q 'debug: blkhash: pread count=16 offset=4096' "$err"
  kill "$pid"
  wait_exit "$pid" 60
  wait "$client" || true
  cat "$BATS_TEST_TMPDIR/out"
  [[ "$(cat "$BATS_TEST_TMPDIR/out")" != digest* ]]
}

@test "filter-plain: behind the cache filter, blocks only its cache holds are read, not taken for holes" {
  local img="$BATS_TEST_TMPDIR/c.img"
  truncate -s 32M "$img"
  start_server cache --filter=cache file "$img"
  # 64K written through the data export, not flushed: in the cache
  # only, where the file's extents still say hole.
  "$NBD_PYTHON" - "$sock" "$BATS_TEST_TMPDIR/content" <<'PY'
import sys, nbd
h = nbd.NBD(); h.connect_unix(sys.argv[1])
h.pwrite(b"\xab" * 65536, 10 << 20)
open(sys.argv[2], "wb").write(h.pread(32 << 20, 0))
PY
  cmp -s "$BATS_TEST_TMPDIR/content" "$img" && { echo "not cached only"; false; }
  run plainview "$sock" @digest:sha256
  [ "$output" = "sha256 $(sumof sha256sum "$BATS_TEST_TMPDIR/content")" ]
  run "$NBDSUM" "$uri"
  [ "$(first_sum "$output")" = \
    "$(reference sha256 65536 "$BATS_TEST_TMPDIR/content")" ]
  stop_server
}

@test "filter-plain: exports whose names are view names are not listed, and the list works" {
  mkdir "$BATS_TEST_TMPDIR/d"
  cp "$mixed" "$BATS_TEST_TMPDIR/d/ok"
  cp "$mixed" "$BATS_TEST_TMPDIR/d/release@digest"
  cp "$mixed" "$BATS_TEST_TMPDIR/d/old@blkhash"
  local vo
  for vo in false true; do
    start_server "list-$vo" file dir="$BATS_TEST_TMPDIR/d" \
      blkhash-views-only=$vo
    run nbdinfo --list --json "$uri"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" = *'"ok@blkhash"'* ]]
    [[ "$output" != *release* && "$output" != *old* ]]
    if [ $vo = false ]; then
      [[ "$output" = *'"export-name": "ok"'* ]]
    fi
    stop_server
  done
}

@test "filter-plain: reads within the largest request the plugin takes" {
  start_server max --filter=blocksize-policy file "$mixed" \
    blocksize-minimum=1 blocksize-maximum=64K \
    blocksize-error-policy=error
  run plainview "$sock" @digest:sha256
  echo "$output"
  [ "$output" = "sha256 $(sumof sha256sum "$mixed")" ]
  run "$NBDSUM" "$uri"
  echo "$output"
  [ "$(first_sum "$output")" = "$(reference sha256 65536 "$mixed")" ]
  run "$NBDSUM" -d sha1 --block-size 1M "$uri"
  [ "$(first_sum "$output")" = "$(reference sha1 1048576 "$mixed")" ]
  stop_server
}
