#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The digest blake3 end to end where the build has it (libblake3):
# the filter's default digest, views, passive hashing and blkhash-file,
# checksum lines and -c, manifests, --diff and --json, each against the
# plain reference (python3-blake3).  Without libblake3: a clear refusal
# everywhere a digest is named.  (The known-answer vectors from blksum
# are in tests/vectors-blake3.bats.)

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

setup_file () {
  "$MKIMAGE" '5M;d:0+1M:a;d:2M+300000:b;z:4M+64K;d:5000000+4097:c' \
    "$BATS_FILE_TMPDIR/disk.img"
}

setup () {
  cd "$BATS_TEST_TMPDIR"
  cp "$BATS_FILE_TMPDIR/disk.img" disk.img
}

teardown () {
  kill_servers
}

@test "blake3: listed, with its length, exactly when built with it" {
  run "$NBDSUM" --list-digests
  [ "$status" -eq 0 ]
  if have_digest blake3; then
    [[ "$output" = *$'\n'"blake3 "*"32 bytes"* ]]
  else
    [[ "$output" != *blake3* ]]
  fi
}

@test "blake3: the filter's default digest, its line tagged, equal to the reference" {
  need_digest blake3
  want=$(reference blake3 65536 disk.img)
  run serve file disk.img blkhash-digest=blake3 -- '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" = "BLKHASH-BLAKE3/64K (nbd+unix:"*") = $want" ]]
  # -d blake3 and another block size through the view suffix.
  want=$(reference blake3 1048576 disk.img)
  run serve file disk.img -- '"$NBDSUM" -d BLAKE3 --block-size 1M "$uri" &&
    nbdcopy "nbd+unix:///@blkhash:blake3/1M?socket=$unixsocket" view'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" = "BLKHASH-BLAKE3/1M ("* ]]
  [ "$(sum_hex "${lines[0]}")" = "$want" ]
  # The view: 32-byte digests named blake3, the root at 4096.
  [ "$(le_at view 36 4)" -eq 32 ]
  [ "$(dd if=view bs=1 skip=56 count=64 status=none | tr -d '\0')" = blake3 ]
  [ "$(hexdump_at view 4096 32)" = "$want" ]
}

@test "blake3: client-side, standard input and a local file agree with the reference" {
  need_digest blake3
  want=$(reference blake3 98304 disk.img)
  run nbdkit -U - file disk.img --run \
    '"$NBDSUM" -d blake3 --block-size 96K "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"hashing client-side"* ]]
  [ "$(first_sum "$output")" = "$want" ]
  run "$NBDSUM" -d blake3 --block-size 96K - < disk.img
  [ "$status" -eq 0 ]
  [ "$output" = "BLKHASH-BLAKE3/96K (-) = $want" ]
  run "$NBDSUM" -d blake3 --block-size 96K disk.img
  [ "$status" -eq 0 ]
  [ "$output" = "BLKHASH-BLAKE3/96K (disk.img) = $want" ]
}

@test "blake3: written through the filter, blkhash-file has the new checksum" {
  need_digest blake3
  run serve memory 5M blkhash-digest=blake3 blkhash-file=sums -- \
    'nbdcopy disk.img "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(cat sums)" = "BLKHASH-BLAKE3/64K (-) = $(reference blake3 65536 disk.img)" ]
}

@test "blake3: -c checks tagged lines, and catches a changed image" {
  need_digest blake3
  "$NBDSUM" -d blake3 disk.img > sums
  cp disk.img other.img
  "$NBDSUM" -d blake3 --block-size 1M other.img >> sums
  run "$NBDSUM" -c sums
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = $'disk.img: OK\nother.img: OK' ]
  printf 'Z' | dd of=other.img bs=1 seek=70000 conv=notrunc status=none
  run "$NBDSUM" -c sums
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"other.img: FAILED"* ]]
  # The same lines checked by the server, tagged lines choosing the view.
  run serve file disk.img -- \
    'sed "s|(disk.img)|($uri)|" sums | head -n 1 | "$NBDSUM" -c -'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *": OK" ]]
}

@test "blake3: manifests, --check-manifest and --diff --manifest" {
  need_digest blake3
  run "$NBDSUM" -d blake3 --blocks disk.img
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" > disk.blocks
  [[ "${lines[0]}" = "# blake3 65536 5242880 $(reference blake3 65536 disk.img)" ]]
  # Each block's digest is the reference's for that block.
  ref=$(reference --blocks blake3 65536 disk.img)
  [ "$(awk '$3 != "zero" && !/^#/ { print $3 }' disk.blocks | head -n 1)" = \
    "${ref:0:64}" ]
  run "$NBDSUM" --check-manifest disk.blocks
  [ "$status" -eq 0 ]
  cp disk.img new.img
  printf 'Z' | dd of=new.img bs=1 seek=2200000 conv=notrunc status=none
  run "$NBDSUM" --diff --manifest disk.blocks new.img
  echo "$output"
  [ "$status" -eq 1 ]
  [ "${lines[-1]}" = "2162688 65536" ]
}

@test "blake3: --json names the digest" {
  need_digest blake3
  run "$NBDSUM" --json -d blake3 disk.img
  [ "$status" -eq 0 ]
  [[ "$output" = *'"digest": "blake3"'* ]]
  [[ "$output" = *"\"checksum\": \"$(reference blake3 65536 disk.img)\""* ]]
}

@test "blake3: without libblake3, refused everywhere, saying why" {
  if have_digest blake3; then
    skip "this build has blake3"
  fi
  run "$NBDSUM" -d blake3 disk.img
  [ "$status" -eq 1 ]
  [[ "$output" = *"--digest blake3: this build has no blake3"*libblake3* ]]
  run nbdkit -U - --filter="$BLKHASH_FILTER" memory 1M \
    blkhash-digest=blake3 --run true
  [ "$status" -ne 0 ]
  [[ "$output" = *"blkhash-digest=blake3: this build has no blake3"* ]]
  echo "BLKHASH-BLAKE3/64K (disk.img) = $(printf '%064d' 0)" > sums
  run "$NBDSUM" -c sums
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"no blake3"* ]]
  run serve file disk.img -- \
    'nbdinfo --size "nbd+unix:///@blkhash:blake3/64K?socket=$unixsocket"'
  [ "$status" -ne 0 ]
}
