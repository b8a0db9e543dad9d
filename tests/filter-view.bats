#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The NAME@blkhash view: layout, semantics, read-only, suffixes.

load "$top_srcdir/tests/helpers"

setup_file () {
  # 3 full 64K blocks and a short one: data, hole, zeros, data.
  "$MKIMAGE" '230000;d:0+65536:a;z:131072+65536;d:196608+33392:b' \
    "$BATS_FILE_TMPDIR/small.img"
  "$MKIMAGE" '40M;d:1M+3M:c;d:30M+5M:d' "$BATS_FILE_TMPDIR/medium.img"
}

setup () {
  small="$BATS_FILE_TMPDIR/small.img"
  medium="$BATS_FILE_TMPDIR/medium.img"
  view="$BATS_TEST_TMPDIR/view"
  export small medium view
}

@test "filter-view: header fields" {
  run serve file "$small" -- \
    'nbdcopy "nbd+unix:///@blkhash?socket=$unixsocket" "$view"'
  [ "$status" -eq 0 ]
  [ "$(head -c 8 "$view")" = BLKHASH1 ]
  [ "$(le_at "$view" 8 4)" -eq 1 ]          # version
  [ "$(le_at "$view" 12 4)" -eq 4096 ]      # header size
  [ "$(le_at "$view" 16 8)" -eq 230000 ]    # image size
  [ "$(le_at "$view" 24 8)" -eq 4 ]         # block count
  [ "$(le_at "$view" 32 4)" -eq 65536 ]     # block size
  [ "$(le_at "$view" 36 4)" -eq 32 ]        # digest length
  [ "$(le_at "$view" 40 8)" -eq 4096 ]      # root offset
  [ "$(le_at "$view" 48 8)" -eq 8192 ]      # digests offset
  [ "$(dd if="$view" bs=1 skip=56 count=64 status=none | tr -d '\0')" = sha256 ]
  # Everything else in the header is zero.
  [ -z "$(hexdump_at "$view" 62 4034 | tr -d 0)" ]
}

@test "filter-view: a nonce in the view's name is echoed at 128, in both views; none, zeros" {
  local nonce=0123456789abcdef00112233445566778899aabbccddeeff0011223344556677
  run serve file "$small" -- "
    nbdcopy \"nbd+unix:///@blkhash:sha1/4K,nonce=$nonce?socket=\$unixsocket\" \"$view\" &&
    nbdcopy \"nbd+unix:///@digest:md5,nonce=ab12?socket=\$unixsocket\" \"$view.plain\""
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(dd if="$view" bs=1 skip=128 count=64 status=none)" = "$nonce" ]
  [ "$(le_at "$view" 32 4)" -eq 4096 ]
  [ "$(dd if="$view.plain" bs=1 skip=128 count=4 status=none)" = ab12 ]
  [ -z "$(hexdump_at "$view.plain" 132 60 | tr -d 0)" ]
  # The digests are the same as without one.
  run serve file "$small" -- "
    nbdcopy \"nbd+unix:///@blkhash:sha1/4K?socket=\$unixsocket\" \"$view.none\""
  [ -z "$(hexdump_at "$view.none" 128 64 | tr -d 0)" ]
  cmp <(tail -c +4097 "$view") <(tail -c +4097 "$view.none")
}

@test "filter-view: malformed nonces and unknown options after ',' are refused" {
  local n
  for n in ",nonce=" ",nonce=ABCD" ",nonce=xyz" ",nonce=$(printf 'a%.0s' {1..65})" \
           ",salt=ab" ",nonce=ab,nonce=cd"; do
    run serve memory 1M -- \
      "nbdinfo \"nbd+unix:///@blkhash$n?socket=\$unixsocket\""
    echo "$n: $output"
    [ "$status" -ne 0 ]
    [[ "$output" = *"nonce"* ]] || [[ "$output" = *"unknown view option"* ]]
  done
}

@test "filter-view: size is 8192 + n * L" {
  run serve file "$small" -- \
    'nbdinfo --size "nbd+unix:///@blkhash?socket=$unixsocket"'
  [ "$status" -eq 0 ]
  [ "$output" -eq $((8192 + 4 * 32)) ]
}

@test "filter-view: root, padding and block digests" {
  run serve file "$small" -- \
    'nbdcopy "nbd+unix:///@blkhash?socket=$unixsocket" "$view"'
  [ "$status" -eq 0 ]
  [ "$(hexdump_at "$view" 4096 32)" = "$(reference sha256 65536 "$small")" ]
  [ -z "$(hexdump_at "$view" 4128 4064 | tr -d 0)" ]
  [ "$(hexdump_at "$view" 8192 128)" = \
    "$(reference --blocks sha256 65536 "$small")" ]
}

@test "filter-view: suffix selects digest and block size" {
  run serve file "$medium" -- \
    'nbdcopy "nbd+unix:///@blkhash:sha1/1M?socket=$unixsocket" "$view"'
  [ "$status" -eq 0 ]
  [ "$(le_at "$view" 32 4)" -eq 1048576 ]
  [ "$(le_at "$view" 36 4)" -eq 20 ]
  [ "$(le_at "$view" 24 8)" -eq 40 ]
  [ "$(dd if="$view" bs=1 skip=56 count=64 status=none | tr -d '\0')" = sha1 ]
  [ "$(hexdump_at "$view" 4096 20)" = "$(reference sha1 1048576 "$medium")" ]
  [ "$(hexdump_at "$view" 8192 800)" = \
    "$(reference --blocks sha1 1048576 "$medium")" ]
}

@test "filter-view: unaligned reads of the digest area" {
  local blocks
  blocks=$(reference --blocks sha256 65536 "$medium")
  # 100 bytes from byte 5 of the digests (holes), 77 from mid-digest
  # of block 20 (data).
  for range in "8197 100" "8839 77"; do
    set -- $range
    export range
    run serve file "$medium" -- \
      'qemu-io -r -f raw "nbd+unix:///@blkhash?socket=$unixsocket" \
         -c "read -v $range"'
    echo "$output"
    [ "$status" -eq 0 ]
    got=$(qemu_io_hex "$2" <<< "$output")
    [ "$got" = "${blocks:$(( ($1 - 8192) * 2 )):$(( $2 * 2 ))}" ]
  done
}

@test "filter-view: reading only the root computes everything" {
  run serve file "$medium" -- \
    'qemu-io -r -f raw "nbd+unix:///@blkhash?socket=$unixsocket" \
       -c "read -v 4096 32"'
  [ "$status" -eq 0 ]
  [ "$(qemu_io_hex 32 <<< "$output")" = "$(reference sha256 65536 "$medium")" ]
}

@test "filter-view: a root read computed on 1, 2 or 4 workers gives the same root" {
  local w out
  for w in 1 2 4; do
    out=$(serve file "$medium" blkhash-workers=$w -- \
      'qemu-io -r -f raw "nbd+unix:///@blkhash:sha1/4K?socket=$unixsocket" \
         -c "read -v 4096 20"')
    [ "$(qemu_io_hex 20 <<< "$out")" = "$(reference sha1 4096 "$medium")" ]
  done
}

@test "filter-view: a plugin without parallel requests gets one worker" {
  run nbdkit -v -U - --filter="$BLKHASH_FILTER" --filter=noparallel \
    file "$medium" serialize=requests blkhash-workers=4 \
    --run 'qemu-io -r -f raw "nbd+unix:///@blkhash?socket=$unixsocket" \
             -c "read -v 4096 32"'
  [ "$status" -eq 0 ]
  [[ "$output" = *"does not take parallel requests: one thread"* ]]
  [ "$(qemu_io_hex 32 <<< "$output")" = "$(reference sha256 65536 "$medium")" ]
}

@test "filter-view: read-only, multi-conn and cache advertised" {
  run serve memory 1M -- \
    'nbdinfo "nbd+unix:///@blkhash?socket=$unixsocket"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"is_read_only: true"* ]]
  [[ "$output" = *"can_multi_conn: true"* ]]
  [[ "$output" = *"can_cache: true"* ]]
  [[ "$output" = *"description: blkhash view of the default export (sha256, 65536 byte blocks)"* ]]
}

@test "filter-view: writes are refused" {
  "$MKIMAGE" '8192;d:0+8192:junk' "$BATS_TEST_TMPDIR/junk"
  export junk="$BATS_TEST_TMPDIR/junk"
  run serve memory 1M -- '
    nbdcopy "$junk" "nbd+unix:///@blkhash?socket=$unixsocket"; echo "copy=$?"
    qemu-io -f raw "nbd+unix:///@blkhash?socket=$unixsocket" \
      -c "write 0 512"; echo "write=$?"
    nbdcopy "nbd+unix:///@blkhash?socket=$unixsocket" "$view"'
  echo "$output"
  [[ "$output" = *"copy=1"* ]]
  [[ "$output" = *"write=1"* ]]
  [ "$(head -c 8 "$view")" = BLKHASH1 ]
}

@test "filter-view: a bad suffix is refused with a clear message" {
  run serve memory 1M -- \
    'nbdinfo "nbd+unix:///@blkhash:nosuch?socket=$unixsocket"'
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" = *"digest 'nosuch'"*"unknown digest"* ]]
  run serve memory 1M -- \
    'nbdinfo "nbd+unix:///@blkhash:keccak-kmac-256?socket=$unixsocket"'
  [ "$status" -ne 0 ]
  [[ "$output" = *"only shake128 and shake256 are supported"* ]]
}

@test "filter-view: block sizes 3K, 100000, 32M and 0 in a view name are refused, saying the rule" {
  local bs
  for bs in 3K 100000 32M 0; do
    run serve memory 1M -- \
      "nbdinfo \"nbd+unix:///@blkhash:sha256/$bs?socket=\$unixsocket\""
    echo "/$bs: status $status: $output"
    [ "$status" -ne 0 ]
    [[ "$output" = *"block size must be a multiple of 4K from 4K to 16M"* ]]
    run serve memory 1M -- \
      "nbdinfo \"nbd+unix:///@blkhash:/$bs?socket=\$unixsocket\""
    [ "$status" -ne 0 ]
    [[ "$output" = *"block size must be a multiple of 4K from 4K to 16M"* ]]
  done
}

@test "filter-view: shake128 and shake256 with 96K blocks: header, root, block digests" {
  local d L n
  for d in shake128:16 SHAKE-256:32; do
    L=${d#*:}
    d=${d%:*}
    run serve file "$medium" -- \
      "nbdcopy \"nbd+unix:///@blkhash:$d/96K?socket=\$unixsocket\" \"\$view\""
    [ "$status" -eq 0 ]
    n=$(( (40 * 1048576 + 98303) / 98304 ))
    [ "$(le_at "$view" 16 8)" -eq $((40 * 1048576)) ]
    [ "$(le_at "$view" 24 8)" -eq "$n" ]
    [ "$(le_at "$view" 32 4)" -eq 98304 ]
    [ "$(le_at "$view" 36 4)" -eq "$L" ]
    # The canonical name, whatever the spelling asked for.
    [ "$(dd if="$view" bs=1 skip=56 count=64 status=none | tr -d '\0')" = \
      "shake$((L * 8))" ]
    [ "$(stat -c %s "$view")" -eq $((8192 + n * L)) ]
    [ "$(hexdump_at "$view" 4096 "$L")" = \
      "$(reference "shake$((L * 8))" 98304 "$medium")" ]
    [ -z "$(hexdump_at "$view" $((4096 + L)) $((4096 - L)) | tr -d 0)" ]
    [ "$(hexdump_at "$view" 8192 $((n * L)))" = \
      "$(reference --blocks "shake$((L * 8))" 98304 "$medium")" ]
  done
}

@test "filter-view: unaligned reads of 96K block digests through qemu-io" {
  local blocks
  blocks=$(reference --blocks shake128 98304 "$medium")
  # 37 bytes from byte 3 of the digest of block 10 (960K to 1056K, where
  # the data at 1M starts) to the middle of block 12's.
  run serve file "$medium" -- \
    'qemu-io -r -f raw "nbd+unix:///@blkhash:shake128/96K?socket=$unixsocket" \
       -c "read -v $((8192 + 10 * 16 + 3)) 37"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(qemu_io_hex 37 <<< "$output")" = "${blocks:$(( (10 * 16 + 3) * 2 )):74}" ]
}

@test "filter-view: empty image" {
  run serve memory 0 -- \
    'nbdcopy "nbd+unix:///@blkhash?socket=$unixsocket" "$view"'
  [ "$status" -eq 0 ]
  [ "$(stat -c %s "$view")" -eq 8192 ]
  [ "$(le_at "$view" 24 8)" -eq 0 ]
  [ "$(hexdump_at "$view" 4096 32)" = \
    af5570f5a1810b7af78caf4bc70a660f0df51e42baf91d4de5b2328de0e83dfc ]
}

@test "filter-view: reflects a completed write through the data export" {
  run serve memory 40M -- '
    nbdcopy "$medium" "$uri" &&
    "$NBDSUM" "$uri" &&
    qemu-io -f raw "$uri" -c "write -P 0x55 1000000 70000" >/dev/null &&
    nbdcopy "$uri" "$BATS_TEST_TMPDIR/after.img" &&
    "$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]%% *}" = "$(reference sha256 65536 "$medium")" ]
  [ "${lines[1]%% *}" = "$(reference sha256 65536 "$BATS_TEST_TMPDIR/after.img")" ]
  [ "${lines[0]%% *}" != "${lines[1]%% *}" ]
}
