#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum: command line, errors, connections and requests, hostile views.

load "$top_srcdir/tests/helpers"

setup_file () {
  "$MKIMAGE" '50M;d:0+2M:a;d:20M+7M:b;d:49M+1M:c' "$BATS_FILE_TMPDIR/disk.img"
}

setup () {
  disk="$BATS_FILE_TMPDIR/disk.img"
  export disk
}

# A file laid out like a view; nbdkit's file plugin serves it under
# any export name, so nbdsum reads it as NAME@blkhash (and the image as
# the same file: nbdsum refuses such a view, whose image has not the
# size it says, unless the header is refused first).
# craft_view FILE SIZE COUNT BLOCK_SIZE LEN NAME [EXTRA_BYTES]
craft_view () {
  "$PYTHON" - "$@" <<'PY'
import struct, sys
path, size, count, bs, dlen, name = sys.argv[1:7]
extra = int(sys.argv[7]) if len(sys.argv) > 7 else 0
h = b"BLKHASH1" + struct.pack("<IIQQIIQQ", 1, 4096, int(size), int(count),
                              int(bs), int(dlen), 4096, 8192)
h += name.encode().ljust(64, b"\0")
h = h.ljust(4096, b"\0") + bytes(4096)
body = bytes(int(count) * int(dlen) + extra)
open(path, "wb").write(h + body)
PY
}

# nbdsum on view FILE served as x@blkhash next to x, SIZE bytes of
# zeros, by the file plugin: the view's image has the size it says.
# view_next_to_image FILE SIZE
view_next_to_image () {
  local dir="$BATS_TEST_TMPDIR/views"
  rm -rf "$dir"
  mkdir "$dir"
  truncate -s "$2" "$dir/x"
  cp "$1" "$dir/x@blkhash"
  run nbdkit -U - file dir="$dir" \
    --run '"$NBDSUM" "nbd+unix:///x?socket=$unixsocket"'
}

@test "nbdsum: --help and --version" {
  run "$NBDSUM" --help
  [ "$status" -eq 0 ]
  for opt in --connections --requests --digest --block-size --help --version; do
    [[ "$output" = *"$opt"* ]]
  done
  run "$NBDSUM" --version
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^nbdsum\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
}

@test "nbdsum: usage errors exit 1 with a message" {
  # No input: standard input, as sha256sum does (here empty: the
  # checksum of an empty image).
  run "$NBDSUM" < /dev/null
  [ "$status" -eq 0 ]
  [ "$output" = "$(reference sha256 65536 /dev/null)  -" ]
  run "$NBDSUM" -C 0 nbd://localhost
  [ "$status" -eq 1 ]
  [[ "$output" = *"--connections must be a number from 1 to 64"* ]]
  run "$NBDSUM" -R many nbd://localhost
  [ "$status" -eq 1 ]
  [[ "$output" = *"--requests"* ]]
  run "$NBDSUM" --block-size 1000 nbd://localhost
  [ "$status" -eq 1 ]
  [[ "$output" = *"block size must be a multiple of 4K from 4K to 16M"* ]]
  run "$NBDSUM" --bogus nbd://localhost
  [ "$status" -eq 1 ]
  # nbdsum's own name, not the path it was run by.
  [ "${lines[0]}" = "nbdsum: unrecognized option '--bogus'" ]
}

@test "nbdsum: with --diff, usage errors exit 2 (1 means the images differ)" {
  run "$NBDSUM" --diff a.img
  [ "$status" -eq 2 ]
  [[ "$output" = *"--diff needs two images"* ]]
  run "$NBDSUM" -C 0 --diff a.img b.img
  [ "$status" -eq 2 ]
  run "$NBDSUM" --bogus --diff a.img b.img
  [ "$status" -eq 2 ]
  run "$NBDSUM" --diff --blocks a.img b.img
  [ "$status" -eq 2 ]
}

@test "nbdsum: an unknown digest fails before connecting" {
  run "$NBDSUM" -d nosuch "nbd+unix:///?socket=$BATS_TEST_TMPDIR/none"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--digest nosuch: unknown digest"* ]]
  [[ "$output" != *"socket"* ]]
}

@test "nbdsum: connection refused, no checksum" {
  run "$NBDSUM" "nbd+unix:///?socket=$BATS_TEST_TMPDIR/none"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"nbdsum: nbd+unix:///?socket="*": "* ]]
  [ -z "$(grep -E '^[0-9a-f]{64} ' <<< "$output")" ]
}

@test "nbdsum: a server without the filter: client-side, and it says so" {
  run nbdkit -U - file "$disk" --run '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"has no blkhash view"*"nbdkit --filter=blkhash"*"hashing client-side"* ]]
  [ "$(grep -E '^[0-9a-f]{64}  ' <<< "$output" | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$disk")" ]
}

@test "nbdsum: -C 1..8 and -R 1..64 give the same checksum" {
  local want
  want=$(reference sha256 65536 "$disk")
  for c in 1 2 3 4 8; do
    for r in 1 2 7 16 64; do
      export c r
      run serve file "$disk" -- '"$NBDSUM" -C "$c" -R "$r" "$uri"'
      [ "$status" -eq 0 ]
      [ "${output%% *}" = "$want" ] || { echo "C=$c R=$r: $output"; false; }
    done
  done
}

@test "nbdsum: output format is 'HEX  URI' like sha256sum" {
  run serve file "$disk" -- '"$NBDSUM" "$uri"'
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^[0-9a-f]{64}\ \ nbd\+unix://\?socket=.*$ ]]
}

@test "nbdsum: -d and --block-size select the view" {
  run serve file "$disk" -- '"$NBDSUM" -d sha1 --block-size 1M "$uri"'
  [ "$status" -eq 0 ]
  [[ "$output" = "BLKHASH-SHA1/1M (nbd+unix:"*") = $(reference sha1 1048576 "$disk")" ]]
  run serve file "$disk" -- '"$NBDSUM" -d SHA512 "$uri"'
  [ "$status" -eq 0 ]
  [[ "$output" = "BLKHASH-SHA512/64K ("*") = $(reference sha512 65536 "$disk")" ]]
}

@test "nbdsum: --block-size 3K, 100000, 32M or 0 is refused, saying the rule" {
  local bs
  for bs in 3K 100000 32M 0; do
    run "$NBDSUM" --block-size $bs "$disk"
    echo "--block-size $bs: status $status: $output"
    [ "$status" -eq 1 ]
    [ "$output" = "nbdsum: --block-size $bs: block size must be a multiple of 4K from 4K to 16M (nbdcopy --blkhash takes other powers of two too; nbdsum keeps blksum's range, see nbdsum(1))" ]
    run "$NBDSUM" --diff --block-size $bs "$disk" "$disk"
    [ "$status" -eq 2 ]
    [[ "$output" = *"block size must be a multiple of 4K from 4K to 16M"* ]]
  done
}

@test "nbdsum: block sizes that are not powers of two, server-side and client-side" {
  local bs want
  for bs in 96K 12K 1536K 420K; do
    export bs
    want=$(reference sha1 "$(numfmt --from=iec "$bs")" "$disk")
    run serve file "$disk" -- '
      "$NBDSUM" -d sha1 --block-size $bs "$uri" &&
      "$NBDSUM" --client-side -d sha1 --block-size $bs "$uri"'
    echo "$bs: $output"
    [ "$status" -eq 0 ]
    [ "$(sum_hex "${lines[0]}")" = "$want" ]
    [ "$(sum_hex "${lines[1]}")" = "$want" ]
    # Tagged with the size as the view name spells it.
    [[ "${lines[0]}" = "BLKHASH-SHA1/$bs ("* ]]
  done
}

@test "nbdsum: shake128 and shake256 in any spelling, 16 and 32 bytes, both ways" {
  local alias want tag
  for alias in shake128 SHAKE-128 shake-128 shake256 SHAKE256 shake-256; do
    case $alias in
      *128) want=$(reference shake128 65536 "$disk") tag=SHAKE128 ;;
      *) want=$(reference shake256 65536 "$disk") tag=SHAKE256 ;;
    esac
    export alias
    run serve file "$disk" -- '"$NBDSUM" -d $alias "$uri" &&
      "$NBDSUM" --client-side -d $alias "$uri" &&
      "$NBDSUM" -d $alias - < "$disk"'
    echo "$alias: $output"
    [ "$status" -eq 0 ]
    [ "$(sum_hex "${lines[0]}")" = "$want" ]
    [ "$(sum_hex "${lines[1]}")" = "$want" ]
    # The tag names the digest by its canonical name.
    [ "${lines[2]}" = "BLKHASH-$tag/64K (-) = $want" ]
  done
  [ "${#want}" -eq 64 ]
  [ "$(reference shake128 65536 "$disk" | wc -c)" -eq 33 ]
  run "$NBDSUM" -d keccak-kmac-128 "$disk"
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: --digest keccak-kmac-128: of the extendable-output digests only shake128 and shake256 are supported" ]
}

@test "nbdsum: digest aliases (SHA-256, sha2-256) are sha256, both ways" {
  local want alias
  want=$(reference sha256 65536 "$disk")
  for alias in SHA-256 sha2-256 sha256; do
    run serve file "$disk" -- "\"\$NBDSUM\" -d $alias \"\$uri\" &&
      \"\$NBDSUM\" --client-side -d $alias \"\$uri\""
    echo "$alias: $output"
    [ "$status" -eq 0 ]
    [ "${lines[0]%% *}" = "$want" ]
    [ "${lines[1]%% *}" = "$want" ]
  done
}

@test "nbdsum: several URIs, one failing: the others print, exit 1" {
  run serve file "$disk" -- '
    "$NBDSUM" "$uri" "nbd+unix:///?socket=/nonexistent/sock" "$uri"'
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(grep -Ec '^[0-9a-f]{64}  nbd' <<< "$output")" -eq 2 ]
  [[ "$output" = *"nbdsum: nbd+unix:///?socket=/nonexistent/sock: "* ]]
}

@test "nbdsum: hostile view headers are rejected" {
  local f="$BATS_TEST_TMPDIR/view"
  check_rejected () {
    run nbdkit -U - file "$f" --run '"$NBDSUM" "$uri"'
    echo "$output"
    [ "$status" -eq 1 ]
    [[ "$output" = *"$1"* ]]
    [ -z "$(grep -E '^[0-9a-f]+  ' <<< "$output")" ]
  }
  craft_view "$f" 1048576 16 65536 65 sha256
  check_rejected "invalid digest length"
  craft_view "$f" 1048576 15 65536 32 sha256
  check_rejected "block count does not match image size"
  craft_view "$f" 1048576 16 65536 32 nosuch
  check_rejected "digest 'nosuch': unknown digest"
  craft_view "$f" 1048576 16 65536 32 sha1
  check_rejected "sha1 digests are 20 bytes, not 32"
  craft_view "$f" 1048576 16 65536 32 sha256 4096
  check_rejected "does not match the header"
  craft_view "$f" 1048576 16 65535 32 sha256
  check_rejected "invalid block size"
  craft_view "$f" 1048576 11 100000 32 sha256
  check_rejected "invalid block size"
  # shake128 is 16 bytes, shake256 32, whatever the server says.
  craft_view "$f" 1048576 11 98304 32 shake128
  check_rejected "shake128 digests are 16 bytes, not 32"
  craft_view "$f" 1048576 11 98304 64 shake256
  check_rejected "shake256 digests are 32 bytes, not 64"
  craft_view "$f" 1048576 16 98304 16 shake128
  check_rejected "block count does not match image size"
  # The control: a well-formed shake128 view of 96K blocks is read as it
  # is (its root is zeros).
  craft_view "$f" 1048576 11 98304 16 shake128
  view_next_to_image "$f" 1048576
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$output")" = "$(printf '%032d' 0)" ]
}

@test "nbdsum: an export too small for a view is hashed client-side" {
  local f="$BATS_TEST_TMPDIR/small"
  head -c 5000 /dev/urandom > "$f"
  run nbdkit -U - file "$f" --run '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"no blkhash view"* ]]
  [ "$(grep -E '^[0-9a-f]{64}  ' <<< "$output" | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$f")" ]
}

@test "nbdsum: a well-formed crafted view is accepted (the test above can pass)" {
  local f="$BATS_TEST_TMPDIR/view"
  craft_view "$f" 1048576 16 65536 32 sha256
  view_next_to_image "$f" 1048576
  echo "$output"
  [ "$status" -eq 0 ]
  # The crafted root area is zero, and nbdsum prints what the server says.
  [ "${output%% *}" = "$(printf '%064d' 0)" ]
  # Served as its own image, it is not about an image of that size.
  run nbdkit -U - file "$f" --run '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"describes a 1048576 byte image, but the default export has 8704 bytes"* ]]
}

@test "nbdsum: memory stays flat as images grow" {
  local small big
  [ -z "${BLKHASH_SANITIZERS:-}" ] || skip "RSS under ASan holds its quarantine"
  truncate -s 1G "$BATS_TEST_TMPDIR/1g.img"
  truncate -s 1T "$BATS_TEST_TMPDIR/1t.img"
  export BATS_TEST_TMPDIR
  small=$(serve file "$BATS_TEST_TMPDIR/1g.img" -- \
    '/usr/bin/time -f %M "$NBDSUM" "$uri" 2>&1 >/dev/null')
  big=$(serve file "$BATS_TEST_TMPDIR/1t.img" -- \
    '/usr/bin/time -f %M "$NBDSUM" "$uri" 2>&1 >/dev/null')
  echo "max RSS: 1 GiB image ${small} KiB, 1 TiB image ${big} KiB"
  [ "$big" -lt $((small + 4096)) ]
}
