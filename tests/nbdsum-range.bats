#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum --range=OFFSET+LENGTH: the checksum of part of an image, as if
# those bytes were an image of their own, hashed by the filter (its
# views' ",range="): equal to tests/reference.py and sha256sum over the
# bytes extracted with dd, for aligned and unaligned ranges, ranges
# ending at the image's end or inside a block, in a hole, over data
# and holes, in 4K, 64K and 1M blocks; tagged lines that -c verifies;
# the export's digests reused for aligned ranges; and every refusal.

bats_require_minimum_version 1.5.0

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

# Data, zeros written, holes, at odd places; an odd size.
RECIPE='9437191;d:0+70000:a;z:1M+1M;d:2M+100:b;d:3000001+1200000:c;d:9M+7:d'
SIZE=9437191

setup_file () {
  "$MKIMAGE" "$RECIPE" "$BATS_FILE_TMPDIR/disk.img"
}

setup () {
  cd "$BATS_TEST_TMPDIR"
  IMG="$BATS_FILE_TMPDIR/disk.img"
}

teardown () {
  kill_servers
}

# extract FILE OFFSET LENGTH OUT: the bytes of the range, as a file.
extract () {
  dd if="$1" of="$4" bs=1M iflag=skip_bytes,count_bytes skip="$2" \
     count="$3" status=none
  [ "$(stat -c %s "$4")" -eq "$3" ]
}

# check_range FILE|URI FILE DIGEST BLOCK_SIZE OFFSET LENGTH: nbdsum's
# range checksum of the first equals the reference's over the bytes of
# the second, in a tagged line naming the range.
check_range () {
  local in=$1 file=$2 d=$3 bs=$4 off=$5 len=$6 want got
  extract "$file" "$off" "$len" part
  want=$(reference "$d" "$bs" part)
  run -0 --separate-stderr "$NBDSUM" -d "$d" --block-size="$bs" --range="$off+$len" "$in"
  case $output in
    BLKHASH-*@*' = '*) ;;
    *) echo "not a tagged range line: $output"; return 1 ;;
  esac
  got=$(sum_hex "$output")
  if [ "$got" != "$want" ]; then
    echo "$d/$bs range $off+$len: nbdsum $got, reference $want"
    return 1
  fi
}

# The ranges each block size is tried with: aligned, not, ending at
# the end and inside a block, in a hole, over data and hole, one byte,
# the whole image; then $1 random ones (seeded).
ranges () {
  local bs=$1 n=$2 i off len
  echo "0 $SIZE"
  echo "$bs $((3 * bs + 5))"
  echo "$((2 * bs)) $((SIZE - 2 * bs))"
  echo "4097 $((SIZE - 4097))"
  echo "100 $((5 * bs))"
  echo "$((5 * 1048576)) $((2 * 1048576 + 3))"
  echo "$((2 * 1048576 + 50)) $((1048576 + 12345))"
  echo "$((SIZE - 1)) 1"
  for ((i = 0; i < n; i++)); do
    off=$(( (RANDOM * 32768 + RANDOM) % SIZE ))
    len=$(( (RANDOM * 32768 + RANDOM) % (SIZE - off) + 1 ))
    echo "$off $len"
  done
}

# Run 45: an nbdsum of this suite died of SIGKILL.  kill_servers sent
# SIGKILL to every pid a test had started, although bash reaps a
# server that ended at once: with pid_max 32768 and suites beside it,
# its pid could be another's by then.
@test "kill_servers signals no process but a server of the test's" {
  local stranger
  start_nbdkit srv memory 1M
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  # Another's process that got the pid (not a child of this shell, and
  # its command line names nothing of this test's).
  stranger=$(sleep 60 </dev/null >/dev/null 2>&1 3>&- & echo $!)
  servers=("$stranger")
  kill_servers
  # Not a zombie either (its new parent reaps it at leisure).
  [[ "$(ps -o stat= -p "$stranger")" = [^Z]* ]] ||
    { echo "kill_servers killed $stranger"; false; }
  kill "$stranger"
}

@test "range checksums of a local file equal the reference's over the bytes (4K, 64K, 1M; sha256, sha1)" {
  seed_random RANGE_SEED
  local bs off len n=0
  for bs in 4096 65536 1048576; do
    while read -r off len; do
      check_range "$IMG" "$IMG" sha256 "$bs" "$off" "$len"
      n=$((n + 1))
    done < <(ranges "$bs" 3)
  done
  while read -r off len; do
    check_range "$IMG" "$IMG" sha1 65536 "$off" "$len"
    n=$((n + 1))
  done < <(ranges 65536 2)
  report "$n ranges checked"
}

@test "range checksums of a server with the filter; aligned ranges read nothing the export's table knows" {
  seed_random RANGE_SEED
  local off len before after
  start_server srv -v -D blkhash.stats=1 file "$IMG" blkhash-cache=true
  while read -r off len; do
    check_range "$uri" "$IMG" sha256 65536 "$off" "$len"
  done < <(ranges 65536 2)
  check_range "$uri" "$IMG" md5 4096 4096 3000000

  # Every block known: an aligned range ending at a block's end, or
  # inside a hole (its short last block is not the export's, but a
  # hole), is copied and folded (nothing read); an unaligned one over
  # data is read.
  run -0 "$NBDSUM" "$uri"
  wait_idle
  before=$(grep -o 'reading [0-9]* bytes' "$err" | tail -n 1)
  check_range "$uri" "$IMG" sha256 65536 $((3 * 65536)) $((60 * 65536))
  check_range "$uri" "$IMG" sha256 65536 0 $((5 * 1048576 + 1000))
  wait_idle
  after=$(grep -o 'reading [0-9]* bytes' "$err" | tail -n 1)
  [ "$before" = "$after" ] || { echo "$before, then $after"; false; }
  check_range "$uri" "$IMG" sha256 65536 $((3 * 65536 + 512)) 3000000
  wait_idle
  after=$(grep -o 'reading [0-9]* bytes' "$err" | tail -n 1)
  [ "$before" != "$after" ] || { echo "unaligned: still $after"; false; }
  stop_server
}

@test "plain range digests equal sha256sum and md5sum of the bytes" {
  seed_random RANGE_SEED
  local off len want
  while read -r off len; do
    extract "$IMG" "$off" "$len" part
    want=$(sha256sum part | cut -d' ' -f1)
    run -0 "$NBDSUM" --plain --range="$off+$len" "$IMG"
    [[ "$output" = "SHA256@"*" ($IMG) = $want" ]] ||
      { echo "range $off+$len: sha256sum $want"; false; }
  done < <(ranges 65536 3)
  extract "$IMG" 100 3000000 part
  run -0 "$NBDSUM" --plain=md5 --range=100+3000000 "$IMG"
  [[ "$output" = "MD5@100+3000000 ($IMG) = $(md5sum part | cut -d' ' -f1)" ]]
}

@test "-c: a range line is OK, FAILED once a byte inside changes, still OK after one outside does" {
  cp --sparse=always "$IMG" d.img
  run -0 "$NBDSUM" --range=64K+3M d.img
  echo "$output" > sums
  run -0 "$NBDSUM" --plain --range=100+2M d.img
  echo "$output" >> sums
  run -0 "$NBDSUM" -d sha1 --block-size=1M --range=1M+4097 d.img
  echo "$output" >> sums
  grep -q '^BLKHASH-SHA256/64K@64K+3M (d.img) = ' sums
  grep -q '^SHA256@100+2M (d.img) = ' sums
  grep -q '^BLKHASH-SHA1/1M@1M+4097 (d.img) = ' sums
  run -0 "$NBDSUM" -c sums
  [ "$(grep -c ': OK$' <<< "$output")" -eq 3 ]

  # Outside every range: the last byte of the image.
  printf 'x' | dd of=d.img bs=1 seek=$((SIZE - 1)) conv=notrunc status=none
  run -0 "$NBDSUM" -c sums
  [ "$(grep -c ': OK$' <<< "$output")" -eq 3 ]
  # Inside all three.
  printf 'y' | dd of=d.img bs=1 seek=$((1048576 + 10)) conv=notrunc \
    status=none
  run -1 "$NBDSUM" -c sums
  [ "$(grep -c ': FAILED$' <<< "$output")" -eq 3 ]
  # Inside the first only.
  cp --sparse=always "$IMG" d.img
  printf 'z' | dd of=d.img bs=1 seek=$((3 * 1048576)) conv=notrunc \
    status=none
  run -1 "$NBDSUM" -c sums
  [ "$(grep -c ': FAILED$' <<< "$output")" -eq 1 ]
  grep -q '^d.img: FAILED' <<< "$output"
}

@test "a server without the filter: the private filter in front hashes the range, equal to the reference; past its end, refused" {
  local want
  start_nbdkit plain file "$IMG"
  check_range "$uri" "$IMG" sha256 65536 4097 $((SIZE - 4097))
  check_range "$uri" "$IMG" sha256 65536 65536 1048576
  extract "$IMG" 100 1048576 part
  want=$(sha256sum part | cut -d' ' -f1)
  run -0 --separate-stderr "$NBDSUM" --plain --range=100+1M "$uri"
  [[ "$output" = "SHA256@"*" ($uri) = $want" ]] ||
    { echo "sha256sum $want, nbdsum $output"; false; }
  # A line of a range, checked against that server.
  echo "BLKHASH-SHA256/64K@0+1M (x) = $(printf '0%.0s' {1..64})" > sums
  sed -i "s|(x)|($uri)|" sums
  run -1 --separate-stderr "$NBDSUM" -c sums
  [ "$output" = "$uri: FAILED" ]
  run -1 --separate-stderr "$NBDSUM" --range=$((SIZE - 1))+2 "$uri"
  [ -z "$output" ]
  [[ "$stderr" = *"$((SIZE - 1))+2"* ]]
}

# Issue 38's list: qemu-nbd serves a qed image in 512-byte units, and
# a range not on them was refused with libnbd's EINVAL ("request is
# unaligned"); the private filter's requests below it are aligned now.
@test "a qed image (512-byte units in qemu-nbd): unaligned ranges, local and served, equal the reference" {
  command -v qemu-img > /dev/null || skip "qemu-img is not installed"
  local want
  qemu-img convert -f raw -O qed "$IMG" disk.qed
  check_range disk.qed "$IMG" sha256 65536 100 1000
  check_range disk.qed "$IMG" sha256 4096 4097 $((SIZE - 4097 - 3))
  extract "$IMG" 777 $((3 * 65536 + 5)) part
  want=$(reference sha256 65536 part)
  run -0 --separate-stderr "$NBDSUM" --range=777+$((3 * 65536 + 5)) \
    [ qemu-nbd -r -f qed disk.qed ]
  [ "$(sum_hex "$output")" = "$want" ]
  extract "$IMG" 100 1048576 part
  want=$(sha256sum part | cut -d' ' -f1)
  run -0 --separate-stderr "$NBDSUM" --plain --range=100+1M disk.qed
  [[ "$output" = "SHA256:qed@100+1M (disk.qed) = $want" ]] ||
    { echo "sha256sum $want, nbdsum $output"; false; }
}

@test "a range past the end, empty or overflowing is refused, naming it, no checksum" {
  run -1 --separate-stderr "$NBDSUM" --range=9M+1M "$IMG"
  [ -z "$output" ]
  [[ "$stderr" = *"--range=9M+1M ends past the end of the image ($SIZE bytes)"* ]]
  [[ "$stderr" != *"nbdkit"* ]]
  run -1 --separate-stderr "$NBDSUM" --plain --range="$SIZE+1" "$IMG"
  [ -z "$output" ]
  [[ "$stderr" = *"ends past the end of the image"* ]]
  start_server srv file "$IMG"
  run -1 --separate-stderr "$NBDSUM" --range=$((SIZE - 1))+2 "$uri"
  [ -z "$output" ]
  [[ "$stderr" = *"ends past the end of the image ($SIZE bytes)"* ]]
  grep -q "range=$((SIZE - 1))+2 ends past its end ($SIZE bytes)" "$err"
  # The same in a line.
  echo "SHA256@9M+1M (disk.img) = $(printf '0%.0s' {1..64})" > sums
  cp --sparse=always "$IMG" disk.img
  run -1 --separate-stderr "$NBDSUM" -c sums
  [[ "$stderr" = *"--range=9M+1M ends past the end"* ]]
  [[ "$output" != *": OK"* ]]

  run -1 --separate-stderr "$NBDSUM" --range=1M+0 "$IMG"
  [[ "$stderr" = *"--range=1M+0: a range of LENGTH 0 is empty"* ]]
  run -1 --separate-stderr "$NBDSUM" --range=8E+1 "$IMG"
  [[ "$stderr" = *"--range=8E+1: size is too large"* ]]
  run -1 --separate-stderr "$NBDSUM" --range=9223372036854775807+1 "$IMG"
  [[ "$stderr" = *"past 2^63-1"* ]]
  run -1 --separate-stderr "$NBDSUM" --range=1M "$IMG"
  [[ "$stderr" = *"--range=1M: a range is OFFSET+LENGTH"* ]]
  [ -z "$output" ]
}

@test "--range with a stream, --untagged, --client-side, --blocks or -c is refused" {
  run -1 --separate-stderr "$NBDSUM" --range=0+1 - < "$IMG"
  [[ "$stderr" = *"--range=0+1: a stream is hashed as it is read, whole"* ]]
  [ -z "$output" ]
  run -1 --separate-stderr "$NBDSUM" --untagged --range=0+1 "$IMG"
  [[ "$stderr" = *"--range does not go with --untagged"* ]]
  run -1 --separate-stderr "$NBDSUM" --plain --untagged --range=0+1 "$IMG"
  [[ "$stderr" = *"--range does not go with --untagged"* ]]
  run -1 --separate-stderr "$NBDSUM" --client-side --range=0+1 "$IMG"
  [[ "$stderr" = *"--range does not go with --client-side"* ]]
  run -1 --separate-stderr "$NBDSUM" --blocks --range=0+1 "$IMG"
  [[ "$stderr" = *"--range does not go with --blocks"* ]]
  run -1 --separate-stderr "$NBDSUM" -c --range=0+1 "$IMG"
  [[ "$stderr" = *"--range does not go with --check"* ]]
}

@test "the filter refuses malformed range views, naming them" {
  start_server srv file "$IMG"
  local name
  for name in '@blkhash,range=0+0' '@blkhash,range=1M' \
              '@digest,range=9223372036854775807+1' \
              '@blkhash,nonce=ab,range=0+1' "@blkhash,range=$SIZE+1"; do
    run ! "$NBD_PYTHON" -c '
import nbd, sys
h = nbd.NBD()
h.set_export_name(sys.argv[2])
h.connect_unix(sys.argv[1])' "$sock" "$name"
    grep -qF "export '$name': " "$err" || grep -qF "range=$SIZE+1 ends past" "$err"
  done
  grep -q "range=: a range of LENGTH 0 is empty" "$err"
  grep -q "range= is not OFFSET+LENGTH" "$err"
  grep -q "range=: its end (OFFSET+LENGTH) is past 2^63-1 bytes" "$err"
  grep -q ",range= comes before ,nonce=" "$err"
}

# Review (review-br): a range over nbdsum's --max-size limit was
# refused as if the server had no filter (nbdsum's own filter, for a
# local file); the refusal must name the limit and what lifts it.
@test "a range over the size limit is refused naming the limit, not the filter" {
  truncate -s $((1099511627776 + 8192)) big.img
  run -1 --separate-stderr "$NBDSUM" --plain \
    --range=4096+$((1099511627776 + 4096)) big.img
  [ -z "$output" ]
  [[ "$stderr" = *"over the limit of 1 TiB for a plain digest: --max-size=SIZE lifts it"* ]]
  [[ "$stderr" != *"needs the server's nbdkit --filter=blkhash"* ]]
}

# One byte's digest is one of 256: a server that serves only views
# would serve the image byte by byte through them.
@test "a blkhash-views-only=true server refuses range views, plain and blkhash; its whole views stay" {
  local want
  start_server srv file "$IMG" blkhash-views-only=true
  run -1 --separate-stderr "$NBDSUM" --plain --range=0+1 "$uri"
  [ -z "$output" ]
  run -1 --separate-stderr "$NBDSUM" --range=4096+4096 "$uri"
  [ -z "$output" ]
  grep -q 'refused with blkhash-views-only=true' "$err"
  want=$(reference sha256 65536 "$IMG")
  run -0 --separate-stderr "$NBDSUM" "$uri"
  [ "$(sum_hex "$output")" = "$want" ]
}
