#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Live interoperability with nbdcopy --blkhash (libnbd 1.24 and
# later): the same checksums from nbdcopy, from nbdsum through the
# filter, client-side and on local files, and from the reference.
# Skipped where nbdcopy has no --blkhash.
#
#   INTEROP_IMAGES=N   random images (default 12; 40 in the long run)
#   INTEROP_SEED=N     their seed (default: a new one, printed)

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/vectors-lib"

: "${INTEROP_IMAGES:=12}"

setup_file () {
  if nbdcopy --help 2>&1 | grep -q -- --blkhash; then
    export HAVE_NBDCOPY_BLKHASH=1
    build_all_vector_images
  fi
}

setup () {
  [ -n "${HAVE_NBDCOPY_BLKHASH:-}" ] ||
    skip "nbdcopy $(nbdcopy --version 2>/dev/null | awk '{ print $2; exit }') has no --blkhash (libnbd 1.24 and later)"
  cd "$BATS_TEST_TMPDIR"
}

# nbdcopy's blkhash of SOURCE (a file or a URI) as DIGEST/BLOCK_SIZE.
nbdcopy_blkhash () {
  nbdcopy --blkhash="$2/$3" --blkhash-file=nbdcopy.out -- "$1" null: &&
    cat nbdcopy.out
}

# agree IMAGE DIGEST BLOCK_SIZE WANT: nbdcopy on the file, nbdcopy
# through the filter's data export, nbdsum through the filter (the
# view), nbdsum --client-side on the same server and nbdsum on the
# local file all give WANT.  One line per disagreement on stdout.
agree () {
  local img=$1 d=$2 bs=$3 want=$4 got path
  export d bs
  got=$(nbdcopy_blkhash "$img" "$d" "$bs") || got="nbdcopy failed"
  [ "$got" = "$want" ] || echo "$img $d/$bs: nbdcopy file: $got"
  # One server for the three NBD paths.
  serve file "$img" -- '
    nbdcopy --blkhash="$d/$bs" --blkhash-file=through.out -- "$uri" null: &&
      echo "nbdcopy-filter $(cat through.out)"
    "$NBDSUM" -d "$d" --block-size "$bs" "$uri" | sed "s/^/filter /"
    "$NBDSUM" --client-side -d "$d" --block-size "$bs" "$uri" 2>/dev/null |
      sed "s/^/client-side /"' > paths.out 2>paths.err
  for path in nbdcopy-filter filter client-side; do
    got=$(sum_hex "$(grep "^$path " paths.out | cut -d' ' -f2-)")
    [ "$got" = "$want" ] || echo "$img $d/$bs: $path: ${got:-none} $(cat paths.err)"
  done
  got=$(sum_hex "$("$NBDSUM" -d "$d" --block-size "$bs" "$img")")
  [ "$got" = "$want" ] || echo "$img $d/$bs: local file: $got"
}
export -f nbdcopy_blkhash

@test "interop: every known-answer vector nbdcopy takes, five ways" {
  local row name recipe size sha d bs want n=0 bad=""
  while IFS=$'\t' read -r name recipe size sha d bs want; do
    case $d in md5|sha1|sha256|sha512) ;; *) continue ;; esac
    (( (bs & (bs - 1)) == 0 )) || continue
    bad+=$(agree "$BATS_FILE_TMPDIR/$name.img" "$d" "$bs" "$want")
    n=$((n + 1))
  done < <(grep -v '^#' "$VECTORS")
  echo "$n rows"
  [ "$n" -ge 100 ]
  echo "$bad"
  [ -z "$bad" ]
}

# A random image: SIZE bytes (unaligned), data runs, allocated zero
# runs and holes, from mkimage's recipes; in $recipe.  Not in $(...),
# where bash would seed $RANDOM afresh: the seed would not repeat it.
random_recipe () {
  local size=$((RANDOM % 8 * 1048576 + RANDOM % 65536 * 7 + RANDOM % 4)) i off len r
  ((size > 0)) || size=1
  r="$size"
  for ((i = 0; i < RANDOM % 6 + 1; i++)); do
    off=$(( (RANDOM * 32768 + RANDOM) % size ))
    len=$(( RANDOM % 4 == 0 ? RANDOM * 64 : RANDOM * 4 + 1 ))
    ((off + len <= size)) || len=$((size - off))
    if ((RANDOM % 3 == 0)); then r+=";z:$off+$len"; else r+=";d:$off+$len:s$RANDOM"; fi
  done
  recipe=$r
}

@test "interop: random images with holes, zero runs and unaligned sizes" {
  local i recipe img spec d bs want
  local bad="" n=0
  local specs=(sha256/64k sha256/4k sha1/1m md5/16k sha512/64k sha256/8m)
  seed_random INTEROP_SEED
  for ((i = 0; i < INTEROP_IMAGES; i++)); do
    random_recipe
    img="random-$i.img"
    "$MKIMAGE" "$recipe" "$img"
    for spec in "${specs[@]}"; do
      d=${spec%/*}
      bs=$(nbdkit_size "${spec#*/}")
      want=$(reference "$d" "$bs" "$img")
      bad+=$(agree "$img" "$d" "$bs" "$want" | sed "s|^|[$recipe] |")
      n=$((n + 1))
    done
    rm -f "$img"
  done
  echo "$n image/digest pairs"
  echo "$bad"
  [ -z "$bad" ]
}

# libnbd's known answers for nbdcopy --blkhash (its test
# copy-blkhash-known.sh), images from nbdkit's data plugin.
libnbd_answer () {
  local data=$1 spec=$2 want=$3 d bs got
  d=${spec%/*} bs=65536
  [ "$spec" = "$d" ] || bs=$(nbdkit_size "${spec#*/}")
  got=$(nbdkit -U - data "$data" --run \
        'nbdcopy --blkhash='"$spec"' --blkhash-file=known.out "$uri" null: && cat known.out')
  [ "$got" = "$want" ] || echo "data $data $spec: nbdcopy: $got"
  got=$(sum_hex "$(nbdkit -U - --filter="$BLKHASH_FILTER" data "$data" \
        --run "\"\$NBDSUM\" -d $d --block-size $bs \"\$uri\"")")
  [ "$got" = "$want" ] || echo "data $data $spec: filter: $got"
  got=$(sum_hex "$(nbdkit -U - data "$data" \
        --run "\"\$NBDSUM\" -d $d --block-size $bs \"\$uri\"" 2>/dev/null)")
  [ "$got" = "$want" ] || echo "data $data $spec: client-side: $got"
}

# 4k, 512k, 1m: bytes.
nbdkit_size () {
  case $1 in
    *[kK]) echo $(( ${1%?} * 1024 )) ;;
    *[mM]) echo $(( ${1%?} * 1048576 )) ;;
    *) echo "$1" ;;
  esac
}

@test "interop: libnbd's known answers: empty, hello and patterns" {
  local bad=""
  bad+=$(libnbd_answer '' sha256 af5570f5a1810b7af78caf4bc70a660f0df51e42baf91d4de5b2328de0e83dfc)
  bad+=$(libnbd_answer '"hello"' md5 f741ac9ce55f5325906bb14e9c05d467)
  bad+=$(libnbd_answer '"hello"' sha256 337355feb53a5309d5aba92796223c2c84ffab930e706c01fef573a2722545e6)
  bad+=$(libnbd_answer '"hello"' sha512 eca04a593cf12ec4132993da709048e25a2f1be3526e132fb521ec9d41f023ec4018b3fd07b014a33e36bb5fa145b36991f431e62f9e1a93bebea6c9565682c1)
  bad+=$(libnbd_answer '"hello" @1048576 "goodbye"' sha256 61b8f3a8cea76e16eeff7ce27f1b7711c1f1e437f5038cec17773772a4bded28)
  bad+=$(libnbd_answer '"12345678"*512*256' md5 84fc21ac2f49ac283ff399378d834d1a)
  bad+=$(libnbd_answer '"12345678"*512*256' sha256 cbb388edd25e567b85f504c7b345497f9fb4f6bbf4e39768809184b9f9e678f8)
  bad+=$(libnbd_answer '"12345678"*512*256' sha512/512k 379f7eb1628058c7abbc4c96941ac972074815ea9ef4aca95eefb2b4f9c29f64023fff8d966e9fddf08d07bdba548e75298917f10268fdf9ba636c2321a2214e)
  echo "$bad"
  [ -z "$bad" ]
}

@test "interop: block sizes nbdcopy takes and nbdsum refuses are refused clearly" {
  printf hello > hello.img
  # nbdcopy takes any power of two, 4 bytes or 32M.
  [ "$(nbdcopy_blkhash hello.img md5 4)" = 8262896de34125dec173722c920e8bd0 ]
  nbdcopy_blkhash hello.img sha256 32m
  for bs in 4 512 2K 32M; do
    run "$NBDSUM" -d md5 --block-size "$bs" hello.img
    echo "$output"
    [ "$status" -ne 0 ]
    [[ "$output" = *"--block-size $bs: block size must be a multiple of 4K from 4K to 16M"* ]]
    [[ "$output" = *"nbdcopy --blkhash"* ]]
  done
  grep -q "nbdcopy --blkhash" "$top_srcdir/man/nbdsum.pod"
}

# The filter's blkhash-file for a copy and nbdcopy's --blkhash-file
# for the same copy, in both directions.
@test "interop: blkhash-file equals nbdcopy --blkhash-file for the same copy" {
  local spec params
  "$MKIMAGE" '5000000;d:0+70000:a;z:200000+300000;d:1048576+2000000:b;d:4999000+1000:c' src.img
  for spec in sha256/64k sha1/1m sha512/4k; do
    params="blkhash-digest=${spec%/*} blkhash-block-size=${spec#*/}"
    rm -f served.sums written.sums copy.img
    # Reading: the server hashes what nbdcopy reads from it.
    nbdkit -U - --filter="$BLKHASH_FILTER" file src.img $params \
      blkhash-file="$PWD/served.sums" \
      --run "nbdcopy --blkhash=$spec --blkhash-file=read.out \"\$uri\" copy.img"
    cmp src.img copy.img
    echo "read: $(cat served.sums) / $(cat read.out)"
    [ "$(sum_hex "$(cat served.sums)")" = "$(cat read.out)" ]
    # Writing: the server hashes what nbdcopy writes to it.
    nbdkit -U - --filter="$BLKHASH_FILTER" memory 5000000 $params \
      blkhash-file="$PWD/written.sums" \
      --run "nbdcopy --blkhash=$spec --blkhash-file=write.out src.img \"\$uri\""
    echo "write: $(cat written.sums) / $(cat write.out)"
    [ "$(sum_hex "$(cat written.sums)")" = "$(cat write.out)" ]
    [ "$(cat write.out)" = "$(reference "${spec%/*}" "$(nbdkit_size "${spec#*/}")" src.img)" ]
  done
}
