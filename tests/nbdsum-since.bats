#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Manifests that carry their checksum (--blocks, --check-manifest),
# and incremental checksums: nbdsum --since=MANIFEST --dirty-bitmap=NAME
# over qemu-nbd -B, hashing only what a qcow2 persistent dirty bitmap
# marks.  Every result is compared with nbdsum's full computation of
# the same image and with tests/reference.py on its raw bytes;
# since-trials.py runs random chains (SINCE_TRIALS, 8 by default).

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"
bats_require_minimum_version 1.5.0

setup () {
  cd "$BATS_TEST_TMPDIR"
  command -v qemu-nbd > /dev/null || skip "qemu-nbd is not installed"
}

teardown () {
  if [ -n "${qpid:-}" ]; then kill "$qpid" 2>/dev/null || true; fi
}

# The private qemu-nbd that nbdsum starts: serve IMAGE [BITMAP], with
# the bitmap also the allocation depth (-A) that --since asks for.
qnbd () {
  echo "[" qemu-nbd -r -f qcow2 ${2:+-A -B "$2"} "$1" "]"
}

# reference_of QCOW2 DIGEST BLOCK_SIZE: the reference checksum of the
# image's raw bytes.
reference_of () {
  qemu-img convert -f qcow2 -O raw "$1" "$1.raw"
  reference "$2" "$3" "$1.raw"
  rm -f "$1.raw"
}

# A 20 MiB image: data in the first 6 MiB, a hole, data at 12 MiB.
make_image () {
  qemu-img create -q -f qcow2 d.qcow2 20M
  qemu-io -f qcow2 -c 'write -P 1 0 6M' -c 'write -P 2 12M 1M' \
    -c 'write -P 3 19M 512k' d.qcow2 > /dev/null
}

@test "nbdsum-since: --blocks carries the checksum; --check-manifest verifies it" {
  make_image
  want=$(reference_of d.qcow2 sha256 65536)
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd d.qcow2) > m.txt
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks --json $(qnbd d.qcow2) > m.json
  [ "$(head -n 1 m.txt)" = "# sha256 65536 20971520 $want" ]
  grep -q "\"checksum\": \"$want\"" m.json
  run "$NBDSUM" --check-manifest m.txt m.json
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "m.txt: OK
m.json: OK" ]
  run "$NBDSUM" -q --check-manifest m.txt
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  # Other digests and block sizes, and a local file (server-side).
  "$MKIMAGE" '3000000;d:0+100K:a;d:2M+5000:b' raw.img
  "$NBDSUM" -q --blocks -d sha1 --block-size 96K raw.img > r.txt
  [ "$(head -n 1 r.txt)" = \
    "# sha1 98304 3000000 $(reference sha1 98304 raw.img)" ]
  run "$NBDSUM" --check-manifest r.txt
  [ "$status" -eq 0 ]
}

@test "nbdsum-since: manifests that do not verify are refused" {
  "$MKIMAGE" '3000000;d:0+100K:a;d:2M+5000:b' raw.img
  "$NBDSUM" -q --blocks raw.img > m.txt
  "$NBDSUM" -q --blocks --json raw.img > m.json
  root=$(head -n 1 m.txt | cut -d' ' -f5)
  # A block digest changed: the fold does not give the checksum.
  awk 'NR == 2 { $3 = "00" substr($3, 3) } { print }' m.txt > digest.txt
  # The checksum changed, the size changed, the end cut off.
  sed "1s/ $root\$/ 00${root:2}/" m.txt > root.txt
  sed '1s/ 3000000 / 3000001 /' m.txt > size.txt
  head -n 2 m.txt > short.txt
  sed "s/\"checksum\": \"$root\"/\"checksum\": \"11${root:2}\"/" m.json \
    > root.json
  ! cmp -s m.json root.json || false
  for f in digest.txt root.txt size.txt short.txt root.json; do
    run "$NBDSUM" --check-manifest "$f"
    echo "$f: $output"
    [ "$status" -eq 1 ]
    [[ "$output" = *"$f: FAILED"* ]]
  done
  run "$NBDSUM" --check-manifest digest.txt
  [[ "$output" = *"its block digests give the checksum "*", not the $root it"* ]]
  [[ "$output" = *"corrupt or edited"* ]]
  # A manifest without its checksum, as nbdsum wrote them before: it
  # cannot be verified, nor used by --since, but --diff still reads it.
  sed '1s/ [0-9a-f]*$//' m.txt > old.txt
  run "$NBDSUM" --check-manifest old.txt
  [ "$status" -eq 1 ]
  [[ "$output" = *"old.txt: it carries no checksum"* ]]
  run "$NBDSUM" -q --diff --manifest=old.txt raw.img
  echo "$output"
  [ "$status" -eq 0 ]
  run "$NBDSUM" -q --diff --manifest=digest.txt raw.img
  [ "$status" -eq 2 ]
  [[ "$output" = *"corrupt or edited"* ]]
}

# since_case BLOCK_SIZE DIGEST: a manifest, a bitmap (64K granularity),
# writes unaligned and across blocks, then --since equals the full
# checksum and the reference, and reads exactly the dirty data blocks
# and its sample of clean ones.
since_case () {
  local bs=$1 d=$2 want got json blocks
  make_image
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks -d "$d" --block-size "$bs" $(qnbd d.qcow2) > m0
  qemu-img bitmap --add --enable d.qcow2 b1
  # Three data writes: 1000+5000 (in block 0), 7340000+200000 (in the
  # hole, across blocks), the last 4 KiB of the image.
  qemu-io -f qcow2 -c 'write -P 9 1000 5000' -c 'write -P 8 7340000 200000' \
    -c 'write -P 7 20967424 4096' d.qcow2 > /dev/null
  want=$(reference_of d.qcow2 "$d" "$bs")
  # shellcheck disable=SC2046
  run "$NBDSUM" -q --json --since=m0 --dirty-bitmap=b1 $(qnbd d.qcow2 b1)
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"\"checksum\": \"$want\""* ]]
  # shellcheck disable=SC2046
  got=$("$NBDSUM" -q -d "$d" --block-size "$bs" $(qnbd d.qcow2))
  [ "$(first_sum "$got")" = "$want" ]
  # The blocks hashed: those with a dirty byte (each holds data),
  # rounded out to the bitmap's 64K too.  Besides, a sample of the
  # clean data blocks (data in the manifest, not dirty): all of them
  # when 64 or fewer, else 64, each read whole.
  "$PYTHON" - "$bs" "$output" > counts <<'PY'
import json, sys
bs, g, size = int(sys.argv[1]), 65536, 20 << 20
doc = json.loads(sys.argv[2])["inputs"][0]
dirty = set()
for off, n in ((1000, 5000), (7340000, 200000), (20967424, 4096)):
    lo, hi = off // g * g, -(-(off + n) // g) * g
    dirty.update(range(lo // bs, (min(hi, size) - 1) // bs + 1))
data = set()
for line in open("m0"):
    off, length, digest = line.split()[:3]
    if off != "#" and digest != "zero":
        data.add(int(off) // bs)
sampled = doc["blocks-sampled"]
ok = sampled == min(64, len(data - dirty))
read = sum(min(bs, size - b * bs) for b in dirty) + sampled * bs
print(doc["blocks-hashed"], len(dirty), doc["bytes-read"], read, ok)
PY
  cat counts
  read -r hashed want_hashed bytes want_bytes ok < counts
  [ "$hashed" -eq "$want_hashed" ]
  [ "$bytes" -eq "$want_bytes" ]
  [ "$ok" = True ]
}

@test "nbdsum-since: 4K blocks against a 64K bitmap" {
  since_case 4096 sha256
}

@test "nbdsum-since: 64K blocks, the bitmap's granularity" {
  since_case 65536 sha256
}

@test "nbdsum-since: 96K blocks, not aligned to the bitmap" {
  since_case 98304 sha1
}

@test "nbdsum-since: 1M blocks" {
  since_case 1048576 blake2b512
}

@test "nbdsum-since: --since --blocks prints the full --blocks manifest" {
  make_image
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks --block-size 96K $(qnbd d.qcow2) > m0
  qemu-img bitmap --add --enable d.qcow2 b1
  qemu-io -f qcow2 -c 'write -P 5 3M 70000' -c 'write -z 12M 64k' \
    -c 'discard 0 64k' d.qcow2 > /dev/null
  for j in "" --json; do
    # shellcheck disable=SC2046
    "$NBDSUM" -q --blocks $j --since=m0 --dirty-bitmap=b1 \
      $(qnbd d.qcow2 b1) > inc
    # shellcheck disable=SC2046
    "$NBDSUM" -q --blocks $j --block-size 96K $(qnbd d.qcow2) > full
    # The same but for the command named.
    diff -u <(grep -v '"name"' full) <(grep -v '"name"' inc)
  done
  run "$NBDSUM" --check-manifest inc
  [ "$status" -eq 0 ]
}

@test "nbdsum-since: a chain of three incrementals" {
  make_image
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd d.qcow2) > m0
  for i in 1 2 3; do
    qemu-img bitmap --add --enable d.qcow2 "b$i"
    qemu-io -f qcow2 -c "write -P $i $((i * 3))M 100000" \
      -c "write -P $((i + 10)) $((i * 12345)) 99" d.qcow2 > /dev/null
    # shellcheck disable=SC2046
    "$NBDSUM" -q --blocks --since="m$((i - 1))" --dirty-bitmap="b$i" \
      $(qnbd d.qcow2 "b$i") > "m$i"
    qemu-img bitmap --remove d.qcow2 "b$i"
    [ "$(head -n 1 "m$i" | cut -d' ' -f5)" = \
      "$(reference_of d.qcow2 sha256 65536)" ]
  done
}

@test "nbdsum-since: the image grown since the manifest" {
  make_image
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks --block-size 96K $(qnbd d.qcow2) > m0
  qemu-img bitmap --add --enable d.qcow2 b1
  # 20M is not a whole number of 96K blocks: the old last block grows.
  qemu-img resize -q d.qcow2 21000192
  qemu-io -f qcow2 -c 'write -P 4 20980000 4096' d.qcow2 > /dev/null
  # shellcheck disable=SC2046
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 $(qnbd d.qcow2 b1)
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"21000192 bytes, 20971520 in the manifest"* ]]
  [ "$(first_sum "$output")" = "$(reference_of d.qcow2 sha256 98304)" ]
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks --since=m0 --dirty-bitmap=b1 \
    $(qnbd d.qcow2 b1) > m1
  [ "$(head -n 1 m1 | cut -d' ' -f5)" = \
    "$(reference_of d.qcow2 sha256 98304)" ]
}

@test "nbdsum-since: what cannot be trusted is refused" {
  make_image
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd d.qcow2) > m0
  qemu-img bitmap --add --enable d.qcow2 b1
  # No such bitmap, or the server exports none.
  # shellcheck disable=SC2046
  run "$NBDSUM" --since=m0 --dirty-bitmap=b2 $(qnbd d.qcow2 b1)
  [ "$status" -eq 1 ]
  [[ "$output" = *"the server exports no dirty bitmap 'b2'"* ]]
  # shellcheck disable=SC2046
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 $(qnbd d.qcow2)
  [ "$status" -eq 1 ]
  [[ "$output" = *"no dirty bitmap 'b1'"*"qemu-nbd -A -B b1"* ]]
  # A local file: its private nbdkit has no bitmaps.
  "$MKIMAGE" '1000000;d:0+100K:a' raw.img
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 raw.img
  [ "$status" -eq 1 ]
  [[ "$output" = *"no dirty bitmap"* ]]
  # The manifest's digest and block size are the ones; -d and
  # --block-size may only repeat them.
  # shellcheck disable=SC2046
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 -d sha1 $(qnbd d.qcow2 b1)
  [ "$status" -eq 1 ]
  [[ "$output" = *"m0: the manifest was made with sha256, not sha1"* ]]
  # shellcheck disable=SC2046
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 --block-size 1M \
    $(qnbd d.qcow2 b1)
  [ "$status" -eq 1 ]
  [[ "$output" = *"made with 65536 byte blocks, not 1048576"* ]]
  # shellcheck disable=SC2046
  run "$NBDSUM" -q --since=m0 --dirty-bitmap=b1 -d sha256 --block-size 64K \
    $(qnbd d.qcow2 b1)
  [ "$status" -eq 0 ]
  # A manifest edited, or without its checksum.
  awk 'NR == 3 { $3 = "00" substr($3, 3) } { print }' m0 > bad
  # shellcheck disable=SC2046
  run "$NBDSUM" --since=bad --dirty-bitmap=b1 $(qnbd d.qcow2 b1)
  [ "$status" -eq 1 ]
  [[ "$output" = *"corrupt or edited"* ]]
  [[ "$output" != *[0-9a-f]"  ["* ]]
  sed '1s/ [0-9a-f]*$//' m0 > old
  # shellcheck disable=SC2046
  run "$NBDSUM" --since=old --dirty-bitmap=b1 $(qnbd d.qcow2 b1)
  [ "$status" -eq 1 ]
  [[ "$output" = *"old: it carries no checksum"* ]]
  # Usage errors.
  run "$NBDSUM" --since=m0 x
  [ "$status" -eq 1 ]
  [[ "$output" = *"--since and --dirty-bitmap go together"* ]]
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 a b
  [[ "$output" = *"--since needs one image"* ]]
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 -c m0
  [[ "$output" = *"--since does not go with --check"* ]]
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 -
  [[ "$output" = *"standard input cannot be an image with --since"* ]]
  run "$NBDSUM" --check-manifest
  [ "$status" -eq 1 ]
  [[ "$output" = *"--check-manifest needs the manifests"* ]]
  run "$NBDSUM" --check-manifest --json m0
  [ "$status" -eq 1 ]
}

@test "nbdsum-since: random chains equal full computations" {
  command -v qemu-img > /dev/null || skip "qemu-img is not installed"
  seed_random SINCE_SEED
  run "$PYTHON" "$top_srcdir/tests/since-trials.py" "$NBDSUM" \
    "$top_srcdir/tests/reference.py" "${SINCE_TRIALS:-8}" \
    "$SEED" "$BATS_TEST_TMPDIR"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[-1]}" = "$((3 * ${SINCE_TRIALS:-8})) compared, 0 mismatched" ]]
}

@test "nbdsum-since: a bitmap described in pieces, or not at all" {
  "$MKIMAGE" '1000000;d:0+300K:a;d:600K+100K:b' old.img
  "$MKIMAGE" '1000000;d:0+200K:c;d:500K+300K:d' new.img
  "$NBDSUM" -q --blocks --block-size 4K old.img > m0
  # Every block dirty, described half a range at a time: asked again.
  "$PYTHON" "$top_srcdir/tests/bitmapnbd.py" short "$PWD/s.sock" new.img \
    > s.out 3>&- &
  pid=$!
  wait_until 30 grep -q listening s.out
  run "$NBDSUM" -q --since=m0 --dirty-bitmap=b1 \
    "nbd+unix:///?socket=$PWD/s.sock"
  kill "$pid"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$(reference sha256 4096 new.img)" ]
  # Never described: silence is not "clean", the run fails.
  "$PYTHON" "$top_srcdir/tests/bitmapnbd.py" omit "$PWD/o.sock" new.img \
    > o.out 3>&- &
  pid=$!
  wait_until 30 grep -q listening o.out
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 \
    "nbd+unix:///?socket=$PWD/o.sock"
  kill "$pid"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"did not describe qemu:dirty-bitmap:b1 at offset 0"* ]]
  [ -z "$(first_sum "$output")" ]
}

# Below, whatever the bitmap cannot see: each case fails rather than
# printing a checksum, or prints the reference's.

# rewritten SIZE: an 8 MiB qcow2 image rs.qcow2 of data, its manifest
# m0 and an enabled bitmap b.
eight_megs () {
  qemu-img create -q -f qcow2 rs.qcow2 8M
  qemu-io -f qcow2 -c 'write -P 5 0 8M' rs.qcow2 > /dev/null
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd rs.qcow2) > m0
  qemu-img bitmap --add --enable rs.qcow2 b
}

@test "nbdsum-since: an image smaller than the manifest's is refused" {
  eight_megs
  qemu-img resize -q --shrink rs.qcow2 4M
  # shellcheck disable=SC2046
  run "$NBDSUM" --since=m0 --dirty-bitmap=b $(qnbd rs.qcow2 b)
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"4194304 bytes, fewer than the 8388608 of the manifest"* ]]
  [[ "$output" = *"--blocks"* ]]
  [ -z "$(first_sum "$output")" ]
}

@test "nbdsum-since: shrunk and grown again, the regrown blocks are caught" {
  local size old
  for size in 8M 10M; do
    rm -f rs.qcow2
    eight_megs
    old=$(head -n 1 m0 | cut -d' ' -f5)
    qemu-img resize -q --shrink rs.qcow2 4M
    qemu-img resize -q rs.qcow2 "$size"
    # shellcheck disable=SC2046
    run "$NBDSUM" --since=m0 --dirty-bitmap=b $(qnbd rs.qcow2 b)
    echo "$size: $output"
    [ "$status" -eq 1 ]
    [[ "$output" = *"block 64 (offset 4194304)"*"the bitmap missed a change"* ]]
    [[ "$output" != *"$old"* ]]
    [ -z "$(first_sum "$output")" ]
  done
}

# Shrunk and grown again so that no block reads as zeros where the
# manifest had data: grown with preallocated zeros, which are data, or
# cut in the middle of a block that keeps data before the cut.  The
# last clean block with data in the manifest is always hashed: every
# such shrink changes it, or nothing at all (hostile test, 2026-11-26:
# 19 of 30 and 24 of 30 runs printed the manifest's checksum).
@test "nbdsum-since: shrunk and grown again with data where the manifest had data, caught every time" {
  local i old
  # Far more clean data blocks than the sample's 64: 1024, 5 changed.
  "$MKIMAGE" '64M;d:0+64M:full' f.raw
  qemu-img convert -q -f raw -O qcow2 f.raw f.qcow2
  "$NBDSUM" -q --blocks f.qcow2 > f.blocks
  qemu-img bitmap --add --enable f.qcow2 bm
  qemu-img resize -q --shrink f.qcow2 $((64 * 1048576 - 5 * 65536))
  qemu-img resize -q --preallocation=full f.qcow2 64M
  # 200 blocks of data, the last cut after its first 4K.
  "$MKIMAGE" '20M;d:0+12800K:y' c.raw
  qemu-img convert -q -f raw -O qcow2 -o cluster_size=4096 c.raw c.qcow2
  "$NBDSUM" -q --blocks c.qcow2 > c.blocks
  qemu-img bitmap --add --enable c.qcow2 bm
  qemu-img resize -q --shrink c.qcow2 $((199 * 65536 + 4096))
  qemu-img resize -q c.qcow2 20M
  for i in 1 2 3 4 5 6 7 8; do
    for img in f c; do
      old=$(head -n 1 "$img.blocks" | cut -d' ' -f5)
      run "$NBDSUM" --since="$img.blocks" --dirty-bitmap=bm "$img.qcow2"
      echo "$img, run $i: $output"
      [ "$status" -eq 1 ]
      [[ "$output" = *"the bitmap missed a change"* ]]
      [[ "$output" != *"$old"* ]]
      [ -z "$(first_sum "$output")" ]
    done
  done
}

# A base image of data, an overlay top.qcow2 with some of its own, the
# overlay's manifest m0 and a bitmap b on it.
backing_chain () {
  qemu-img create -q -f qcow2 base.qcow2 8M
  qemu-io -f qcow2 -c 'write -P 1 0 6M' base.qcow2 > /dev/null
  qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2
  qemu-io -f qcow2 -c 'write -P 2 2M 128K' top.qcow2 > /dev/null
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd top.qcow2) > m0
  qemu-img bitmap --add --enable top.qcow2 b
}

@test "nbdsum-since: a write to a backing file is hashed (allocation depth)" {
  backing_chain
  qemu-io -f qcow2 -c 'write -P 7 1M 64K' base.qcow2 > /dev/null
  qemu-io -f qcow2 -c 'write -P 8 5M 4K' top.qcow2 > /dev/null
  # shellcheck disable=SC2046
  run "$NBDSUM" -q --since=m0 --dirty-bitmap=b $(qnbd top.qcow2 b)
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$(reference_of top.qcow2 sha256 65536)" ]
  # Without the depth, nbdsum cannot know: refused.
  run "$NBDSUM" --since=m0 --dirty-bitmap=b \
    [ qemu-nbd -r -f qcow2 -B b top.qcow2 ]
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"qemu:allocation-depth"*"qemu-nbd -A"*"--immutable-backing"* ]]
  [ -z "$(first_sum "$output")" ]
}

@test "nbdsum-since: --immutable-backing, the backing file untouched" {
  backing_chain
  qemu-io -f qcow2 -c 'write -P 8 5M 4K' -c 'write -P 9 7M 100K' \
    top.qcow2 > /dev/null
  run "$NBDSUM" -q --json --immutable-backing --since=m0 --dirty-bitmap=b \
    [ qemu-nbd -r -f qcow2 -B b top.qcow2 ]
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"\"checksum\": \"$(reference_of top.qcow2 sha256 65536)\""* ]]
  # Only the dirty blocks: 5M and 7M..7M+100K, not the backing's.
  [[ "$output" = *"\"blocks-hashed\": 3,"* ]]
}

@test "nbdsum-since: a local qcow2 file, its bitmap checked first" {
  make_image
  "$NBDSUM" -q --blocks d.qcow2 > m0
  qemu-img bitmap --add --enable d.qcow2 b1
  qemu-io -f qcow2 -c 'write -P 9 1000 5000' d.qcow2 > /dev/null
  run "$NBDSUM" -q --since=m0 --dirty-bitmap=b1 d.qcow2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$(reference_of d.qcow2 sha256 65536)" ]
  # No such bitmap; disabled (as libvirt leaves older checkpoints).
  run "$NBDSUM" --since=m0 --dirty-bitmap=b2 d.qcow2
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"d.qcow2: it has no dirty bitmap 'b2'"* ]]
  qemu-img bitmap --disable d.qcow2 b1
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 d.qcow2
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"the dirty bitmap 'b1' is disabled"* ]]
  [ -z "$(first_sum "$output")" ]
  # In use: qemu had the image open for writing and never closed it.
  qemu-img bitmap --enable d.qcow2 b1
  qemu-io -f qcow2 d.qcow2 -c 'sleep 600000' > /dev/null 3>&- &
  pid=$!
  wait_until 60 eval 'qemu-img info -U --output=json d.qcow2 | grep -q in-use'
  kill -9 "$pid"
  wait "$pid" || :
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 d.qcow2
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"the dirty bitmap 'b1' is in use or inconsistent"* ]]
  [ -z "$(first_sum "$output")" ]
  # A raw file has no bitmaps.
  "$MKIMAGE" '1000000;d:0+100K:a' raw.img
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 raw.img
  [ "$status" -eq 1 ]
  [[ "$output" = *"raw.img: a raw image has no dirty bitmaps"* ]]
}

# dirtied FILE SIZE 'OFFSET LENGTH': a qcow2 FILE of SIZE written
# whole, its manifest m0 (--blocks), then a bitmap b1 enabled and
# OFFSET LENGTH written again.
dirtied () {
  qemu-img create -q -f qcow2 "$1" "$2"
  qemu-io -f qcow2 -c "write -P 1 0 $2" "$1" > /dev/null
  "$NBDSUM" -q --blocks "$1" > m0
  qemu-img bitmap --add --enable "$1" b1
  qemu-io -f qcow2 -c "write -P 2 $3" "$1" > /dev/null
}

# Review 46: a local qcow2 whose dirty cluster's L2 entry is corrupt
# failed --since with nbdsum's line naming no cause ("block status of
# qemu:dirty-bitmap:b1: ...: Input/output error"), then the private
# qemu-nbd's lines printed raw after it (qcow2's "Image is corrupt",
# and its "Disconnect client" of the client that went).  One line now,
# with qemu's words, as a corrupt image without --since.
@test "nbdsum-since: a corrupt local qcow2 file: one line, with what qemu-nbd said" {
  local l1 l2 opts
  mkdir tmp
  dirtied c.qcow2 8M '4M 64K'
  # L2 entry 64 (4 MiB in, dirty): a standard cluster at the unaligned
  # 0x10200.
  l1=$((16#$(hexdump_at c.qcow2 40 8)))
  l2=$(( 16#$(hexdump_at c.qcow2 "$l1" 8) & 0x00fffffffffffe00 ))
  printf '\x80\x00\x00\x00\x00\x01\x02\x00' |
    dd of=c.qcow2 bs=1 seek=$((l2 + 8 * 64)) conv=notrunc status=none
  for opts in "" --blocks "-C1 -R1"; do
    run --separate-stderr env TMPDIR="$PWD/tmp" timeout 60 \
      "$NBDSUM" -q $opts --since=m0 --dirty-bitmap=b1 c.qcow2
    echo "nbdsum $opts: $status; stdout: $output; stderr: $stderr"
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [ "$(grep -c . <<< "$stderr")" -eq 1 ]
    [[ "$stderr" = "nbdsum: c.qcow2: "*"; qcow2: Image is corrupt: "*" (nbdsum's qemu-nbd)" ]]
    [ -z "$(ls -A tmp)" ]
  done
}

# Review: --since of a local qcow2, its private nbdkit killed or its
# qemu-nbd stopped by someone else mid-image: nbdsum's line, then
# qemu-nbd's "Disconnect client, due to: Failed to send reply: ...",
# one a request it had in flight, printed raw at the end.  They say
# only that our nbdkit went: one line now.  qemu-nbd is held
# (SIGSTOP) once it has read some of the image; the signal is sent
# only if it had not read it all then (mid-image, requests in flight),
# else that run is let finish and another tried.
rchar () {
  awk '$1 == "rchar:" { print $2 }' "/proc/$1/io" 2>/dev/null
}
# under_way PID BYTES: nbdsum PID has its qemu-nbd and private nbdkit,
# and qemu-nbd has read BYTES; or nbdsum has ended (a fast machine).
under_way () {
  local q
  kill -0 "$1" 2>/dev/null || return 0
  q=$(pgrep -x qemu-nbd -P "$1") && pgrep -x nbdkit -P "$1" >/dev/null &&
    [ "$(rchar "$q")" -gt "$2" ] 2>/dev/null
}
@test "nbdsum-since: the private nbdkit or qemu-nbd signalled mid-image: one line" {
  local c sig who p nk q try
  mkdir tmp
  dirtied d.qcow2 256M '0 256M'
  for c in "KILL nbdkit" "TERM qemu-nbd" "HUP qemu-nbd"; do
    read -r sig who <<< "$c"
    for ((try = 1; ; try++)); do
      [ "$try" -le 10 ] || { echo "10 tries, none held mid-image"; false; }
      TMPDIR="$PWD/tmp" "$NBDSUM" -q --since=m0 --dirty-bitmap=b1 d.qcow2 \
        >out 2>err 3>&- &
      p=$!
      # (This read qemu-nbd's bytes once, not at each try: runs 84, 85
      # and 87 waited 30 s on a count that could not change.)
      wait_until 60 under_way "$p" 16777216 || {
        echo "try $try, $who: nbdsum's standard error: $(cat err)"
        ps -o pid,ppid,stat,wchan:20,etime,args --ppid "$p" -p "$p" || true
        kill -KILL "$p" 2>/dev/null || true
        false
      }
      # Held, unless nbdsum ended first; then not mid-image if qemu-nbd
      # had read it all.
      if q=$(pgrep -x qemu-nbd -P "$p") && nk=$(pgrep -x nbdkit -P "$p") &&
         kill -STOP "$q" 2>/dev/null; then
        [ "$(rchar "$q")" -ge 234881024 ] || break
        echo "try $try: qemu-nbd had read the image before it was held"
        kill -CONT "$q"
        wait_exit "$p" 60
      else
        wait_exit "$p" 60
        echo "try $try: nbdsum ended before it was held: $rc; $(cat err)"
      fi
    done
    if [ "$who" = nbdkit ]; then kill -"$sig" "$nk"; else kill -"$sig" "$q"; fi
    kill -CONT "$q"
    wait_exit "$p" 60
    echo "nbdsum, $who given SIG$sig: $rc; stdout: $(cat out); stderr: $(cat err)"
    [ "$rc" -eq 1 ]
    [ ! -s out ]
    [ "$(grep -c . err)" -eq 1 ]
    ! grep -q "Disconnect client" err || false
    [ -z "$(ls -A tmp)" ]
  done
}

@test "nbdsum-since: a symlinked local qcow2 file: its relative backing file beside the link, as qemu reads it" {
  # A/top.qcow2 -> ../B/top.qcow2, backed by 'base.raw', which is only
  # in A: qemu finds it there, from the path as given.
  mkdir A B
  "$MKIMAGE" '4M;d:0+1M:a;d:3M+64K:b' A/base.raw
  (cd B && qemu-img create -q -u -f qcow2 -b base.raw -F raw top.qcow2 4M)
  ln -s ../B/top.qcow2 A/top.qcow2
  "$NBDSUM" -q --blocks A/top.qcow2 > m0
  qemu-img bitmap --add --enable A/top.qcow2 b1
  qemu-io -f qcow2 -c 'write -P 9 1000 5000' A/top.qcow2 > /dev/null
  run "$NBDSUM" -q --since=m0 --dirty-bitmap=b1 A/top.qcow2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$(reference_of A/top.qcow2 sha256 65536)" ]
}

@test "nbdsum-since: an encrypted local qcow2 file is refused: its guest content needs the secret" {
  local opts=driver=qcow2,file.filename=e.qcow2,encrypt.key-secret=s0
  # AES: luks's key derivation benchmark fails now and then on a busy
  # machine ("Unable to get accurate CPU usage").
  qemu-img create -q -f qcow2 --object secret,id=s0,data=pass \
    -o encrypt.format=aes,encrypt.key-secret=s0 e.qcow2 1M
  qemu-img bitmap --object secret,id=s0,data=pass --image-opts "$opts" \
    --add --enable b1
  "$NBDSUM" -q --blocks \
    [ qemu-nbd -r --object secret,id=s0,data=pass --image-opts "$opts" ] > m0
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 e.qcow2
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: e.qcow2: an encrypted qcow2 image: its guest content needs the secret, which nbdsum does not have (serve it yourself, with qemu-nbd --object secret,... as [ CMD ])" ]
}

@test "nbdsum-since: a disabled bitmap over NBD, every data block rewritten" {
  make_image
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd d.qcow2) > m0
  qemu-img bitmap --add --disable d.qcow2 b1
  qemu-io -f qcow2 -c 'write -P 11 0 6M' -c 'write -P 12 12M 1M' \
    -c 'write -P 13 19M 512k' d.qcow2 > /dev/null
  # shellcheck disable=SC2046
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 $(qnbd d.qcow2 b1)
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"a sample of the clean blocks"*"the bitmap missed a change"* ]]
  [ -z "$(first_sum "$output")" ]
}

@test "nbdsum-since: the manifest of another image of the same size" {
  make_image
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd d.qcow2) > m0
  qemu-img create -q -f qcow2 other.qcow2 20M
  qemu-io -f qcow2 -c 'write -P 21 0 6M' -c 'write -P 22 12M 1M' \
    -c 'write -P 23 19M 512k' other.qcow2 > /dev/null
  qemu-img bitmap --add --enable other.qcow2 b1
  # shellcheck disable=SC2046
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 $(qnbd other.qcow2 b1)
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"the bitmap missed a change"* ]]
  [ -z "$(first_sum "$output")" ]
}

@test "nbdsum-since: an internal snapshot served with the image's bitmap" {
  make_image
  qemu-img snapshot -c s1 d.qcow2
  qemu-io -f qcow2 -c 'write -P 31 0 6M' -c 'write -P 32 12M 1M' \
    -c 'write -P 33 19M 512k' d.qcow2 > /dev/null
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd d.qcow2) > m0
  qemu-img bitmap --add --enable d.qcow2 b1
  run "$NBDSUM" --since=m0 --dirty-bitmap=b1 \
    [ qemu-nbd -r -f qcow2 -l s1 -A -B b1 d.qcow2 ]
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"the bitmap missed a change"* ]]
  [ -z "$(first_sum "$output")" ]
}

# A 32 MiB qcow2 image f.qcow2 of 512 data blocks (64K), and its
# manifest m0.
data_32m () {
  qemu-img create -q -f qcow2 f.qcow2 32M
  qemu-io -f qcow2 -c 'write -P 1 0 32M' f.qcow2 > /dev/null
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd f.qcow2) > m0
}

@test "nbdsum-since: a bitmap started late, its few clean blocks all sampled" {
  data_32m
  # Blocks 3 and 7 written before the bitmap started (missed), all but
  # blocks 0-11 after (dirty): 2 of the 12 clean data blocks changed.
  # A sample drawn among all 512 data blocks catches that in a quarter
  # of the runs; drawn among the clean ones, it is all 12, every time.
  qemu-io -f qcow2 -c 'write -P 9 192k 4k' -c 'write -P 9 448k 4k' \
    f.qcow2 > /dev/null
  qemu-img bitmap --add --enable f.qcow2 b
  qemu-io -f qcow2 -c 'write -P 2 768k 32000k' f.qcow2 > /dev/null
  for i in 1 2 3 4; do
    # shellcheck disable=SC2046
    run "$NBDSUM" --since=m0 --dirty-bitmap=b $(qnbd f.qcow2 b)
    echo "$i: $output"
    [ "$status" -eq 1 ]
    [[ "$output" = *"block 3 (offset 196608) differs from the manifest"*"the bitmap missed a change"* ]]
    [ -z "$(first_sum "$output")" ]
  done
}

# The bitmap in the backing file, found by qemu-nbd -B down the chain,
# never records writes to the overlay.  A write there to a block the
# manifest has as zeros: the server says data now, so the block is
# among those sampled (the only clean one here), and caught.  Failed
# when only the manifest's data blocks were sampled: a wrong checksum,
# exit 0.
@test "nbdsum-since: a block zero in the manifest, data now, behind a backing file's bitmap" {
  qemu-img create -q -f qcow2 base.qcow2 1M
  qemu-io -f qcow2 -c 'write -P 1 0 256K' base.qcow2 > /dev/null
  qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 top.qcow2
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd top.qcow2) > m0
  qemu-img bitmap --add --enable base.qcow2 b
  qemu-io -f qcow2 -c 'write -P 7 512K 64K' top.qcow2 > /dev/null
  # shellcheck disable=SC2046
  run "$NBDSUM" --since=m0 --dirty-bitmap=b $(qnbd top.qcow2 b)
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"block 8 (offset 524288) differs from the manifest"* ]]
  [ -z "$(first_sum "$output")" ]
}

@test "nbdsum-since: blocks-sampled is the clean data blocks, 64 at most" {
  local clean json sampled
  data_32m
  qemu-img bitmap --add --enable f.qcow2 b
  # Blocks from CLEAN on written: 300 clean data blocks, then 12 (the
  # bitmap keeps the first writes).
  for clean in 300 12; do
    qemu-io -f qcow2 -c "write -P 3 $((clean * 64))k $(((512 - clean) * 64))k" \
      f.qcow2 > /dev/null
    # shellcheck disable=SC2046
    json=$("$NBDSUM" -q --json --since=m0 --dirty-bitmap=b $(qnbd f.qcow2 b))
    echo "$clean: $json"
    sampled=$((clean < 64 ? clean : 64))
    [[ "$json" = *"\"checksum\": \"$(reference_of f.qcow2 sha256 65536)\""* ]]
    [[ "$json" = *"\"blocks-hashed\": $((512 - clean)),"* ]]
    [[ "$json" = *"\"blocks-sampled\": $sampled,"* ]]
    [[ "$json" = *"\"bytes-read\": $(((512 - clean + sampled) * 65536)),"* ]]
  done
  # An overlay: its 94 blocks from the backing file are hashed, not
  # sampled; its own 2 are the clean data blocks; the rest, holes.
  backing_chain
  # shellcheck disable=SC2046
  json=$("$NBDSUM" -q --json --since=m0 --dirty-bitmap=b $(qnbd top.qcow2 b))
  echo "overlay: $json"
  [[ "$json" = *"\"checksum\": \"$(reference_of top.qcow2 sha256 65536)\""* ]]
  [[ "$json" = *"\"blocks-hashed\": 94,"* ]]
  [[ "$json" = *"\"blocks-sampled\": 2,"* ]]
}

@test "nbdsum-since: a sample block that cannot be read fails the run" {
  local host
  qemu-img create -q -f qcow2 f.qcow2 2M
  qemu-io -f qcow2 -c 'write -P 1 0 2M' f.qcow2 > /dev/null
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd f.qcow2) > m0
  qemu-img bitmap --add --enable f.qcow2 b
  qemu-io -f qcow2 -c 'write -P 2 1M 1M' f.qcow2 > /dev/null
  # Block 4 is clean, so read only as one of the sample: blkdebug fails
  # reads of its cluster in the file.
  host=$(qemu-img map --output=json f.qcow2 |
           sed -n 's/.*"start": 0,.*"offset": \([0-9]*\).*/\1/p')
  printf '[inject-error]\nevent = "read_aio"\nerrno = "5"\nsector = "%d"\n' \
    $(((host + 4 * 65536) / 512)) > bd.conf
  run "$NBDSUM" --since=m0 --dirty-bitmap=b [ qemu-nbd -r -A -B b \
    --image-opts driver=qcow2,file.driver=blkdebug,file.config=bd.conf,file.image.filename=f.qcow2 ]
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"Input/output error"* ]]
  [ -z "$(first_sum "$output")" ]
}

@test "nbdsum-since: SIGTERM while a 64 TiB zero run is verified" {
  local size=$((64 << 40)) t0 ms st writer
  printf '# sha256 65536 %d %064d\n0 %d zero\n' "$size" 0 "$size" > big
  "$MKIMAGE" '1000000;d:0+100K:a' raw.img
  # And a manifest from a pipe that stops after its first line.
  mkfifo pipe
  { printf '# sha256 65536 1048576 %064d\n' 0; exec sleep 600; } > pipe 3>&- &
  writer=$!
  for args in "--check-manifest big" "--since=big --dirty-bitmap=b raw.img" \
              "--diff --manifest=big raw.img" "--check-manifest pipe"; do
    # shellcheck disable=SC2086
    env --default-signal=TERM "$NBDSUM" $args > out 2> err 3>&- &
    pid=$!
    sleep 1
    t0=$(date +%s%N)
    kill -TERM "$pid"
    # A hang guard: nbdsum still running then is killed (status 137).
    for i in $(seq 300); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2> /dev/null && kill -9 "$pid"
    st=0
    wait "$pid" || st=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    echo "$args: status $st after $ms ms: $(cat err)"
    [ "$st" -eq 143 ]
    [ ! -s out ]
  done
  kill "$writer" 2> /dev/null || :
}

@test "nbdsum-since: a manifest describing an image over the size limit is refused as its header is read" {
  local size=$((1 << 62)) args
  # 127 bytes claiming a 4 EiB zero run: folding it would take years.
  printf '# sha256 65536 %d %064d\n0 %d zero\n' "$size" 0 "$size" > huge
  printf '{"digest": "sha256", "block-size": 65536, "size": %d, "checksum": "%064d", "blocks": [\n{"offset": 0, "length": %d, "zero": true}]}\n' \
    "$size" 0 "$size" > huge.json
  "$MKIMAGE" '1000000;d:0+100K:a' raw.img
  for args in "--check-manifest huge" "--check-manifest huge.json" \
              "--since=huge --dirty-bitmap=b raw.img" \
              "--diff --manifest=huge raw.img"; do
    # shellcheck disable=SC2086
    run timeout 120 "$NBDSUM" $args
    echo "$args: status $status: $output"
    [[ "$output" = *"nbdsum: huge"*": the image it describes is 4611686018427387904 bytes (4 EiB), over the limit of 1 PiB: --max-size=SIZE lifts it (0: no limit)"* ]]
    if [[ $args = --diff* ]]; then [ "$status" -eq 2 ]; else [ "$status" -eq 1 ]; fi
    ! grep -qE '[0-9a-f]{64}' <<< "$output" || false
  done
  # The limit is --max-size's: a manifest of 1000000 bytes over 999999.
  "$NBDSUM" -q --blocks raw.img > m.txt
  run "$NBDSUM" --max-size=999999 --check-manifest m.txt
  echo "$output"
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "nbdsum: m.txt: line 1: the image it describes is 1000000 bytes (976.6 KiB), over the limit of 999999 bytes (976.6 KiB): --max-size=SIZE lifts it (0: no limit)" ]
  run "$NBDSUM" --max-size=1000000 --check-manifest m.txt
  [ "$status" -eq 0 ]
  [ "$output" = "m.txt: OK" ]
}

# Review: a server that greets two clients (qemu-nbd --shared=2, which
# queues the rest): the bitmap's connection and one of the private
# nbdkit's, whose second --connect-timeout gives up on.  That nbdkit
# then answered the connection nbdsum had left ("nbdkit: nbd[2]:
# error: write: NBD_OPT_GO: Broken pipe", printed at the end): no news.
@test "nbdsum-since: a server that greets two clients, --connect-timeout: hashed over fewer, quietly" {
  local want
  make_image
  # shellcheck disable=SC2046
  "$NBDSUM" -q --blocks $(qnbd d.qcow2) > m0
  qemu-img bitmap --add --enable d.qcow2 b1
  qemu-io -f qcow2 -c 'write -P 9 1000 5000' d.qcow2 > /dev/null
  want=$(reference_of d.qcow2 sha256 65536)
  qemu-nbd -r -f qcow2 -A -B b1 --shared=2 --persistent -k "$PWD/q.sock" \
    d.qcow2 </dev/null >q.err 2>&1 3>&- &
  qpid=$!
  wait_until 10 test -S q.sock
  run --separate-stderr timeout 60 "$NBDSUM" --connect-timeout=1 \
    --since=m0 --dirty-bitmap=b1 "nbd+unix:///?socket=$PWD/q.sock"
  kill "$qpid"
  echo "status $status; stdout: $output; stderr: $stderr"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$want" ]
  [[ "$stderr" = *"the server took 1 of 4 connections (timed out negotiating export '@blkhash:sha256/64K' (--connect-timeout=1)): hashing over 1"* ]]
  ! grep -q '^nbdkit: ' <<< "$stderr" || false
}
