#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The filter's basics: data exports pass through unchanged, every
# export has a view, parameters are checked, unusual plugins work.
# Plugin errors are filter-faults.bats's.

load "$top_srcdir/tests/helpers"

setup_file () {
  # Data at the start, in the middle, near the end, holes between.
  "$MKIMAGE" '64M;d:0+1M:a;d:10M+300K:b;z:20M+1M;d:63M+1000:c' \
    "$BATS_FILE_TMPDIR/disk.img"
}

setup () {
  disk="$BATS_FILE_TMPDIR/disk.img"
  export disk
}

@test "filter-basics: bytes read through the filter equal the file's" {
  run serve file "$disk" -- 'nbdcopy "$uri" "$BATS_TEST_TMPDIR/out.img"'
  [ "$status" -eq 0 ]
  cmp "$disk" "$BATS_TEST_TMPDIR/out.img"
}

@test "filter-basics: bytes written through the filter reach the plugin" {
  run serve memory 64M -- '
    nbdcopy "$disk" "$uri" && nbdcopy "$uri" "$BATS_TEST_TMPDIR/back.img"'
  [ "$status" -eq 0 ]
  cmp "$disk" "$BATS_TEST_TMPDIR/back.img"
}

@test "filter-basics: extents are unchanged" {
  nbdkit -U - file "$disk" --run 'nbdinfo --map "$uri"' > "$BATS_TEST_TMPDIR/plain"
  serve file "$disk" -- 'nbdinfo --map "$uri"' > "$BATS_TEST_TMPDIR/filtered"
  cat "$BATS_TEST_TMPDIR/filtered"
  grep -q hole "$BATS_TEST_TMPDIR/plain"
  diff "$BATS_TEST_TMPDIR/plain" "$BATS_TEST_TMPDIR/filtered"
}

@test "filter-basics: size, flags and block size are unchanged" {
  local filter_out plain_out
  for plugin in "file $disk" "memory 64M" "pattern 3M"; do
    plain_out=$(nbdkit -U - $plugin --run 'nbdinfo "$uri"' |
                grep -Ev '^(protocol|export=|	uri)')
    filter_out=$(serve $plugin -- 'nbdinfo "$uri"' |
                 grep -Ev '^(protocol|export=|	uri)')
    echo "$plugin: $filter_out"
    [ -n "$plain_out" ]
    [ "$plain_out" = "$filter_out" ]
  done
}

@test "filter-basics: the default export lists its view" {
  run serve file "$disk" -- 'nbdinfo --list "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *'export="":'* ]]
  [[ "$output" = *'export="@blkhash":'* ]]
  [[ "$output" = *"description: blkhash view of the default export"* ]]
}

@test "filter-basics: multi-export plugin: every export has a view and a checksum" {
  local dir="$BATS_TEST_TMPDIR/dir"
  mkdir "$dir"
  "$MKIMAGE" '3M;d:0+1M:x' "$dir/one.img"
  "$MKIMAGE" '5000000;d:4000000+10000:y' "$dir/two.img"
  export dir
  run serve file dir="$dir" -- '
    nbdinfo --list "$uri" | grep "^export=" &&
    "$NBDSUM" "nbd+unix:///one.img?socket=$unixsocket" \
              "nbd+unix:///two.img?socket=$unixsocket"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *'export="one.img@blkhash"'* ]]
  [[ "$output" = *'export="two.img@blkhash"'* ]]
  [ "$(grep one.img <<< "$output" | tail -n 1 | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$dir/one.img")" ]
  [ "$(grep two.img <<< "$output" | tail -n 1 | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$dir/two.img")" ]
}

@test "filter-basics: a missing export of a multi-export plugin fails cleanly" {
  local dir="$BATS_TEST_TMPDIR/dir"
  mkdir "$dir"
  export dir
  run serve file dir="$dir" -- \
    '"$NBDSUM" "nbd+unix:///nosuch.img?socket=$unixsocket"'
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"nbdsum: "*"nosuch.img"* ]]
  [ -z "$(grep -E '^[0-9a-f]{64} ' <<< "$output")" ]
}

@test "filter-basics: image over 4 GiB with data past 4 GiB" {
  local big="$BATS_TEST_TMPDIR/big.img"
  "$MKIMAGE" '5G;d:0+100K:p;d:4294901760+200000:q;d:5368690000+9999:r' "$big"
  export big
  run serve file "$big" -- '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${output%% *}" = "$(reference sha256 65536 "$big")" ]
}

@test "filter-basics: a plugin without extents (pattern)" {
  local copy="$BATS_TEST_TMPDIR/pattern.img"
  nbdkit -U - pattern 5000000 --run "nbdcopy \"\$uri\" $copy"
  run serve pattern 5000000 -- '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${output%% *}" = "$(reference sha256 65536 "$copy")" ]
}

@test "filter-basics: holes found by zero detection when extents are hidden" {
  run nbdkit -U - --filter="$BLKHASH_FILTER" --filter=noextents \
    file "$disk" --run '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${output%% *}" = "$(reference sha256 65536 "$disk")" ]
}

@test "filter-basics: a serialized plugin (noparallel) still works" {
  run nbdkit -U - --filter="$BLKHASH_FILTER" --filter=noparallel \
    file "$disk" serialize=requests --run '"$NBDSUM" -C 4 -R 8 "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${output%% *}" = "$(reference sha256 65536 "$disk")" ]
}

# The filter hashes the bytes its plugin serves: a qcow2 file served by
# the file plugin is hashed as a file (its container bytes), and
# qemu-nbd behind the nbd plugin serves, and so hashes, its guest
# content (nbdkit 1.32 has no qcow2dec filter; filter-fresh tests it
# behind blkhash where nbdkit has it).
@test "filter-basics: a qcow2 file is hashed as a file; through qemu-nbd, as its guest content" {
  local q="$BATS_TEST_TMPDIR/disk.qcow2" guest container
  qemu-img convert -f raw -O qcow2 "$disk" "$q"
  guest=$(reference sha256 65536 "$disk")
  container=$(reference sha256 65536 "$q")
  [ "$guest" != "$container" ]
  run serve file "$q" -- '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "${lines[-1]}")" = "$container" ]
  run serve nbd command=qemu-nbd arg=-r arg=-f arg=qcow2 arg="$q" -- \
    '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "${lines[-1]}")" = "$guest" ]
}

@test "filter-basics: bad parameters fail at start with a clear message" {
  run nbdkit -U - --filter="$BLKHASH_FILTER" null 1M blkhash-digest=nosuch \
    --run true
  echo "$output"
  [ "$status" -ne 0 ]
  # The parameter, and where to find the digests there are.
  [[ "$output" = *"blkhash-digest=nosuch: unknown digest (nbdsum --list-digests lists those it takes)"* ]]
  # In a view's name: the export.
  run nbdkit -U - --filter="$BLKHASH_FILTER" null 1M \
    --run 'nbdinfo "nbd+unix:///x@blkhash:sha7?socket=$unixsocket"'
  [ "$status" -ne 0 ]
  [[ "$output" = *"export 'x@blkhash:sha7': digest 'sha7' with block size 65536: unknown digest (nbdsum --list-digests"* ]]

  run nbdkit -U - --filter="$BLKHASH_FILTER" null 1M \
    blkhash-block-size=3000 --run true
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" = *"blkhash-block-size=3000: block size must be a multiple of 4K from 4K to 16M"* ]]

  run nbdkit -U - --filter="$BLKHASH_FILTER" null 1M \
    blkhash-digest=keccak-kmac-128 --run true
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" = *"only shake128 and shake256 are supported"* ]]

  run nbdkit -U - --filter="$BLKHASH_FILTER" null 1M \
    blkhash-cache=maybe --run true
  [ "$status" -ne 0 ]
  [[ "$output" = *"maybe"* ]]

  run nbdkit -U - --filter="$BLKHASH_FILTER" null 1M \
    blkhash-file=/nonexistent/dir/sums --run true
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" = *"blkhash-file"*"/nonexistent/dir"* ]]

  run nbdkit -U - --filter="$BLKHASH_FILTER" null 1M blkhash-file-name= \
    --run true
  [ "$status" -ne 0 ]
  [[ "$output" = *"blkhash-file-name"* ]]

  for w in 0 65 x; do
    run nbdkit -U - --filter="$BLKHASH_FILTER" null 1M \
      blkhash-workers=$w --run true
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" = *"blkhash-workers"* ]]
  done
}

@test "filter-basics: blkhash-digest and blkhash-block-size change the default view" {
  run serve file "$disk" blkhash-digest=sha512 blkhash-block-size=1M -- \
    '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = "BLKHASH-SHA512/1M ("*") = $(reference sha512 1048576 "$disk")" ]]
}

@test "filter-basics: blkhash-block-size=3K, 100000, 32M or 0 is refused, saying the rule" {
  local bs
  for bs in 3K 100000 32M 0; do
    run nbdkit -U - --filter="$BLKHASH_FILTER" null 1M \
      blkhash-block-size=$bs --run true
    echo "blkhash-block-size=$bs: status $status: $output"
    [ "$status" -ne 0 ]
    [[ "$output" = *"block size must be a multiple of 4K from 4K to 16M"* ]]
  done
}

@test "filter-basics: block sizes that are not powers of two: 96K, 12K, 4K*3*5*7" {
  local bs
  for bs in 96K 12K $((4096 * 3 * 5 * 7)); do
    export bs
    # The server's default, and the same hashed by nbdsum.
    run serve file "$disk" blkhash-block-size=$bs -- \
      '"$NBDSUM" "$uri" && "$NBDSUM" --client-side --block-size $bs "$uri"'
    echo "blkhash-block-size=$bs: $output"
    [ "$status" -eq 0 ]
    want=$(reference sha256 "$(numfmt --from=iec "$bs")" "$disk")
    [ "$(sum_hex "${lines[0]}")" = "$want" ]
    [ "$(sum_hex "${lines[1]}")" = "$want" ]
  done
}

# The plugin's reads in --filter=log's file $1, one "OFFSET COUNT" a line.
plugin_read_ranges () {
  sed -nE 's/.* Read id=[0-9]+ offset=(0x[0-9a-f]+) count=(0x[0-9a-f]+) .*/\1 \2/p' \
    "$1" | while read -r o c; do echo "$((o)) $((c))"; done
}

@test "filter-basics: hashing reads whole blocks up to 256K, larger blocks in pieces within one" {
  local log="$BATS_TEST_TMPDIR/log" size bs B off count n end
  size=$(stat -c %s "$disk")
  for bs in 96K 12K 420K; do
    B=$(numfmt --from=iec "$bs")
    rm -f "$log"
    run serve --filter=log file "$disk" logfile="$log" blkhash-block-size=$bs \
      -- '"$NBDSUM" --no-spot-check "$uri"'
    [ "$status" -eq 0 ]
    [ "$(sum_hex "$output")" = "$(reference sha256 "$B" "$disk")" ]
    n=0
    while read -r off count; do
      n=$((n + 1))
      [ "$count" -le 262144 ]
      if [ "$B" -le 262144 ]; then
        # Whole blocks: 2 of 96K (192K), 21 of 12K (252K); a short
        # last block only at the end.
        end=$((off + count))
        [ $((off % B)) -eq 0 ]
        [ $((count % B)) -eq 0 ] || [ "$end" -eq "$size" ]
        [ "$count" -le $((262144 / B * B)) ]
      else
        # 420K blocks: 256K, then the 164K left of the block.
        [ $((off / B)) -eq $(((off + count - 1) / B)) ]
        case $((off % B)) in
          0) [ "$count" -eq 262144 ] ;;
          262144) [ "$count" -eq $((B - 262144)) ] ;;
          *) false ;;
        esac
      fi
    done < <(plugin_read_ranges "$log")
    echo "$bs: $n reads"
    [ "$n" -gt 0 ]
  done
}

@test "filter-basics: blkhash-digest=shake128 and shake256, the default view's digest" {
  run serve file "$disk" blkhash-digest=shake128 blkhash-block-size=96K -- \
    '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  # Tagged with the server's digest and block size.
  [[ "$output" = "BLKHASH-SHAKE128/96K ("*") = "* ]]
  [[ "$(sum_hex "$output")" =~ ^[0-9a-f]{32}$ ]]
  [ "$(sum_hex "$output")" = "$(reference shake128 98304 "$disk")" ]
  # Any spelling OpenSSL knows; nbdsum's -d names the same digest.
  run serve file "$disk" blkhash-digest=SHAKE-256 -- \
    '"$NBDSUM" "$uri" && "$NBDSUM" -d shake256 "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" = "BLKHASH-SHAKE256/64K ("* ]]
  [[ "$(sum_hex "${lines[0]}")" =~ ^[0-9a-f]{64}$ ]]
  [ "$(sum_hex "${lines[0]}")" = "$(reference shake256 65536 "$disk")" ]
  [ "${lines[1]}" = "${lines[0]}" ]
}

@test "filter-basics: --help lists the parameters" {
  run nbdkit --filter="$BLKHASH_FILTER" null --help
  [ "$status" -eq 0 ]
  for p in blkhash-digest blkhash-block-size blkhash-file blkhash-file-name \
           blkhash-cache blkhash-workers blkhash-readahead; do
    [[ "$output" = *"$p="* ]]
  done
}

@test "filter-basics: zero extents cut mid-block are one hole: nothing is read" {
  hash_cut_zeros --filter="$BLKHASH_FILTER" -- --no-spot-check
}

@test "filter-basics: blkhash-max-size: views of exports over it are refused when opened, naming it" {
  local lifts="blkhash-max-size=SIZE lifts it (0: no limit)" v
  cd "$BATS_TEST_TMPDIR"
  for v in abc -1 1Q; do
    run nbdkit -U - --filter="$BLKHASH_FILTER" null 1M blkhash-max-size=$v \
      --run true
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" = *"blkhash-max-size=$v: not a size (0: no limit)"* ]]
  done
  # Lowered: the data export is served, its views are not.
  run nbdkit -U - --filter="$BLKHASH_FILTER" memory 2M blkhash-max-size=1M \
    --run 'nbdinfo --size "$uri" &&
           ! nbdinfo --size "nbd+unix:///@blkhash?socket=$unixsocket" &&
           ! nbdinfo --size "nbd+unix:///@digest:sha256?socket=$unixsocket"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = 2097152 ]
  [[ "$output" = *"blkhash: export '': 2097152 bytes (2 MiB), over the limit of 1 MiB for a blkhash view: $lifts"* ]]
  [[ "$output" = *"blkhash: export '': 2097152 bytes (2 MiB), over the limit of 1 MiB for a plain-digest view: $lifts"* ]]
  # The defaults: 1 PiB for blkhash views, 1 TiB for plain digests.
  run nbdkit -U - --filter="$BLKHASH_FILTER" null 2P \
    --run '! nbdinfo --size "nbd+unix:///@blkhash?socket=$unixsocket"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"2251799813685248 bytes (2 PiB), over the limit of 1 PiB for a blkhash view: $lifts"* ]]
  run nbdkit -U - --filter="$BLKHASH_FILTER" null 2T \
    --run '! nbdinfo --size "nbd+unix:///@digest:sha256?socket=$unixsocket"'
  [ "$status" -eq 0 ]
  [[ "$output" = *"2199023255552 bytes (2 TiB), over the limit of 1 TiB for a plain-digest view: $lifts"* ]]
  # Lifted, the views open (their header read, nothing hashed).
  run nbdkit -U - --filter="$BLKHASH_FILTER" null 2P blkhash-max-size=0 \
    --run 'nbdinfo --size "nbd+unix:///@blkhash?socket=$unixsocket"'
  [ "$status" -eq 0 ]
  [ "$output" = $((8192 + (2 << 50) / 65536 * 32)) ]
  # blkhash-file: the session of a huge export ends with no line and
  # one error, not days of folding.
  run timeout 120 nbdkit -U - --filter="$BLKHASH_FILTER" null 2P \
    blkhash-file="$PWD/sums" --run 'nbdinfo --size "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c "over the limit" <<< "$output")" -eq 1 ]
  [[ "$output" = *"blkhash: export '': 2251799813685248 bytes (2 PiB), over the limit of 1 PiB for a checksum: $lifts; no line for it in $PWD/sums"* ]]
  [ ! -s sums ]
}
