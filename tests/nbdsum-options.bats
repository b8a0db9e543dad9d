#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum's command line: options, usage errors, digests and block
# sizes, connections and requests, the output format, memory.

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"
bats_require_minimum_version 1.5.0

setup_file () {
  "$MKIMAGE" '50M;d:0+2M:a;d:20M+7M:b;d:49M+1M:c' "$BATS_FILE_TMPDIR/disk.img"
}

setup () {
  disk="$BATS_FILE_TMPDIR/disk.img"
  export disk
}

teardown () {
  kill_servers
}

@test "nbdsum-options: --help and --version" {
  run "$NBDSUM" --help
  [ "$status" -eq 0 ]
  for opt in --connections --requests --digest --block-size --help --version; do
    [[ "$output" = *"$opt"* ]]
  done
  # Ours, then libnbd's, as nbdinfo and nbdcopy say theirs.
  run "$NBDSUM" --version
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 2 ]
  [[ "${lines[0]}" =~ ^nbdsum\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
  [[ "${lines[1]}" =~ ^libnbd\ [0-9]+\.[0-9]+\.[0-9]+ ]]
}

@test "nbdsum-options: usage errors exit 1 with a message" {
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
  for v in x -1 65537 ''; do
    run "$NBDSUM" --spot-check="$v" nbd://localhost
    [ "$status" -eq 1 ]
    [ "$output" = "nbdsum: --spot-check must be a number of blocks from 0 (none) to 65536: '$v'" ]
  done
  run "$NBDSUM" --bogus nbd://localhost
  [ "$status" -eq 1 ]
  # nbdsum's own name, not the path it was run by.
  [ "${lines[0]}" = "nbdsum: unrecognized option '--bogus'" ]
}

@test "nbdsum-options: with --diff, usage errors exit 2 (1 means the images differ)" {
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

@test "nbdsum-options: --diff abbreviated as getopt takes it (--dif, --man=) still exits 2 on a usage error" {
  # getopt_long runs --dif as --diff and --man=M as --manifest=M: a
  # usage error exiting 1 would say "the images differ".
  run "$NBDSUM" --dif a.img
  echo "$output"
  [[ "$output" = *"--diff needs two images"* ]]
  [ "$status" -eq 2 ]
  run "$NBDSUM" --dif --range=0+1 a.img b.img
  echo "$output"
  [[ "$output" = *"--range does not go with --diff"* ]]
  [ "$status" -eq 2 ]
  run "$NBDSUM" --dif --man=m a.img b.img
  echo "$output"
  [[ "$output" = *"--diff --manifest=FILE needs one image"* ]]
  [ "$status" -eq 2 ]
}

@test "nbdsum-options: an unknown digest fails before connecting" {
  run "$NBDSUM" -d nosuch "nbd+unix:///?socket=$BATS_TEST_TMPDIR/none"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--digest nosuch: unknown digest"* ]]
  [[ "$output" != *"socket"* ]]
}

@test "nbdsum-options: connection refused, no checksum" {
  run "$NBDSUM" "nbd+unix:///?socket=$BATS_TEST_TMPDIR/none"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"nbdsum: nbd+unix:///?socket="*": "* ]]
  [ -z "$(grep -E '^[0-9a-f]{64} ' <<< "$output")" ]
}

@test "nbdsum-options: a server without the filter: client-side, and it says so" {
  run nbdkit -U - file "$disk" --run '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"has no blkhash view"*"nbdkit --filter=blkhash"*"hashing client-side"* ]]
  [ "$(grep -E '^[0-9a-f]{64}  ' <<< "$output" | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$disk")" ]
}

@test "nbdsum-options: a server without fixed newstyle (no NBD_OPT_INFO) is hashed client-side, not taken for one requiring TLS" {
  # nbdkit --mask-handshake=0: oldish newstyle, only NBD_OPT_EXPORT_NAME.
  run nbdkit -U - --mask-handshake=0 file "$disk" --run '"$NBDSUM" "$uri"'
  echo "$output"
  [[ "$output" != *"requires TLS"* ]]
  [ "$status" -eq 0 ]
  [ "$(grep -E '^[0-9a-f]{64}  ' <<< "$output" | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$disk")" ]
  run nbdkit -U - --mask-handshake=0 file "$disk" \
    --run '"$NBDSUM" --plain=sha256 "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -oE '^SHA256 \(.*\) = [0-9a-f]{64}$' <<< "$output" | \
       grep -oE '[0-9a-f]{64}$')" = \
    "$(sha256sum < "$disk" | cut -d' ' -f1)" ]
}

@test "nbdsum-options: -C 1..8 and -R 1..64 give the same checksum" {
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

@test "nbdsum-options: output format is 'HEX  URI' like sha256sum" {
  run serve file "$disk" -- '"$NBDSUM" "$uri"'
  [ "$status" -eq 0 ]
  [[ "$output" =~ ^[0-9a-f]{64}\ \ nbd\+unix://\?socket=.*$ ]]
}

@test "nbdsum-options: -d and --block-size select the view" {
  run serve file "$disk" -- '"$NBDSUM" -d sha1 --block-size 1M "$uri"'
  [ "$status" -eq 0 ]
  [[ "$output" = "BLKHASH-SHA1/1M (nbd+unix:"*") = $(reference sha1 1048576 "$disk")" ]]
  run serve file "$disk" -- '"$NBDSUM" -d SHA512 "$uri"'
  [ "$status" -eq 0 ]
  [[ "$output" = "BLKHASH-SHA512/64K ("*") = $(reference sha512 65536 "$disk")" ]]
}

@test "nbdsum-options: --block-size 3K, 100000, 32M or 0 is refused, saying the rule" {
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

@test "nbdsum-options: block sizes that are not powers of two, server-side and client-side" {
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

@test "nbdsum-options: shake128 and shake256 in any spelling, 16 and 32 bytes, both ways" {
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

@test "nbdsum-options: digest aliases (SHA-256, sha2-256) are sha256, both ways" {
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

@test "nbdsum-options: several URIs, one failing: the others print, exit 1" {
  run serve file "$disk" -- '
    "$NBDSUM" "$uri" "nbd+unix:///?socket=/nonexistent/sock" "$uri"'
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(grep -Ec '^[0-9a-f]{64}  nbd' <<< "$output")" -eq 2 ]
  [[ "$output" = *"nbdsum: nbd+unix:///?socket=/nonexistent/sock: "* ]]
}

@test "nbdsum-options: memory stays flat as images grow" {
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

@test "nbdsum-options: --list-digests and option conflicts" {
  run "$NBDSUM" --list-digests
  [ "$status" -eq 0 ]
  grep -qE '^sha256, .* 32 bytes$' <<< "$output"
  grep -qE '^blake2b512, .* 64 bytes$' <<< "$output"
  grep -qE '^shake128, shake-128 +16 bytes$' <<< "$output"
  grep -qE '^shake256, shake-256 +32 bytes$' <<< "$output"
  # Only what -d accepts.
  ! grep -q kmac <<< "$output" || false
  run "$NBDSUM" --diff --blocks a b
  [ "$status" -eq 2 ]
  run "$NBDSUM" --check --blocks a
  [ "$status" -eq 1 ]
  run "$NBDSUM" --status "$disk"
  [ "$status" -eq 1 ]
  [[ "$output" = *"--status, --ignore-missing, --strict and --warn only go with --check"* ]]
}

@test "nbdsum-options: --help covers every option" {
  run "$NBDSUM" --help
  [ "$status" -eq 0 ]
  for opt in --connections --requests --digest --block-size --format \
             --client-side --check --quiet --status --json --progress \
             --diff --blocks --list-digests --help --version; do
    [[ "$output" = *"$opt"* ]] || { echo "missing $opt"; false; }
  done
}

@test "nbdsum-options: -q keeps notices off stderr, errors on it" {
  local want
  want=$(reference sha256 65536 "$disk")
  run --separate-stderr nbdkit -U - file "$disk" --run '"$NBDSUM" -q "$uri"'
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$output")" = "$want" ]
  [ -z "$stderr" ]
  run --separate-stderr "$NBDSUM" -q "$BATS_TEST_TMPDIR/nosuch.img"
  [ "$status" -eq 1 ]
  [[ "$stderr" = *"nosuch.img: No such file or directory"* ]]
}

@test "nbdsum-options: --no-names prints the checksums alone, for scripts" {
  local want
  want=$(reference sha256 65536 "$disk")
  run "$NBDSUM" --no-names "$disk" "$disk"
  [ "$status" -eq 0 ]
  [ "$output" = "$want
$want" ]
  # Even of another digest: no tag, no name.
  run "$NBDSUM" --no-names -d sha1 --block-size 1M "$disk"
  [ "$output" = "$(reference sha1 1048576 "$disk")" ]
  for other in -c --json --blocks --tag; do
    run "$NBDSUM" --no-names $other "$disk"
    [ "$status" -eq 1 ]
    [[ "$output" = *"--no-names only goes with plain checksums"* ]]
  done
}

@test "nbdsum-options: -v shows libnbd's debug messages, the checksum unchanged" {
  local want
  want=$(reference sha256 65536 "$disk")
  run --separate-stderr "$NBDSUM" -v "$disk"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$output")" = "$want" ]
  [[ "$stderr" = *"libnbd: debug:"* ]]
  run --separate-stderr "$NBDSUM" "$disk"
  [[ "$stderr" != *"libnbd: debug:"* ]]
  # Nor silenced when libnbd's own switch asks for them: also after
  # the connection (nbdsum follows the greeting with its debug).
  run --separate-stderr env LIBNBD_DEBUG=1 "$NBDSUM" "$disk"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$output")" = "$want" ]
  [[ "$stderr" = *"libnbd: debug: "*"nbd_aio_pread: enter"* ]]
}

# Review (issue 37): with -v, libnbd's debug messages (its own handler)
# wrote a server's error text as it came: a hostile server's escape
# sequences reached the terminal, and its newline forged a line of
# nbdsum's.  They go through nbdsum's messages, \xHH.
@test "nbdsum-options: -v writes a server's words in libnbd's debug messages escaped" {
  cd "$BATS_TEST_TMPDIR"
  mkdir dir
  start_echo evil "$PWD/dir" --error-text=$'x\033]0;pwned\a\302\233\nnbdsum: forged'
  run --separate-stderr "$NBDSUM" -v "nbd+unix:///none?socket=$sock"
  [ "$status" -eq 1 ]
  # libnbd 1.14 quotes the server's message in its debug messages;
  # 1.22 and 1.24 do not, and then only what follows holds.
  if grep -q pwned <<< "$stderr"; then
    grep -F 'server error message: x\x1b]0;pwned\x07\xc2\x9b\x0anbdsum: forged' <<< "$stderr"
  fi
  ! grep -q '^nbdsum: forged' <<< "$stderr" || false
  ! LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' <<< "$stderr" || false
}

# complete WORDS...: what nbdsum's bash completion offers for the last
# word, one per line.
complete_words () {
  bash -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    _nbdsum
    printf "%s\n" "${COMPREPLY[@]}"' _ "$top_srcdir/completion/nbdsum" "$@"
}

@test "nbdsum-options: bash completion: options, digests, formats, files" {
  run complete_words "$NBDSUM" --blo
  [ "$output" = "--block-size
--blocks" ]
  run complete_words "$NBDSUM" --no
  [ "$output" = --no-names ]
  run complete_words "$NBDSUM" -d sha3-2
  [[ "$output" = *sha3-256* && "$output" = *sha3-224* ]]
  run complete_words "$NBDSUM" -d shake
  [ "$output" = "shake128
shake256" ]
  run complete_words "$NBDSUM" --format qc
  [ "$output" = "qcow2
qcow" ]
  run complete_words "$NBDSUM" --format=vh
  [ "$output" = --format=vhdx ]
  # As bash splits it.
  run complete_words "$NBDSUM" --format = par
  [ "$output" = parallels ]
  touch "$BATS_TEST_TMPDIR/image-one.img"
  run complete_words "$NBDSUM" "$BATS_TEST_TMPDIR/image-o"
  [ "$output" = "$BATS_TEST_TMPDIR/image-one.img" ]
}

@test "nbdsum-options: --help, --version, --list-digests and --bats-helper fail on a full standard output" {
  local opt
  for opt in --help --version --list-digests --bats-helper; do
    run --separate-stderr "$NBDSUM" "$opt"
    [ "$status" -eq 0 ]
    run --separate-stderr bash -c "\"\$NBDSUM\" $opt > /dev/full"
    echo "$opt: $status: $stderr"
    [ "$status" -eq 1 ]
    [[ "$stderr" = *"write error: No space left on device"* ]]
    run --separate-stderr bash -c "\"\$NBDSUM\" $opt >&-"
    echo "$opt closed: $status: $stderr"
    [ "$status" -eq 1 ]
    [[ "$stderr" = *"write error: Bad file descriptor"* ]]
  done
}

# The limit is on the outer hash's work: 1 PiB in 64K blocks of sha256
# is 2^34 digests of 32 bytes, and so is 64 TiB in 4K blocks (the
# hostile review: a 1 PiB manifest in 4K blocks took five hours).
@test "nbdsum-options: the size limit counts blocks and digests: 4K blocks or sha512 cost more" {
  local lifts=": --max-size=SIZE lifts it (0: no limit)"
  printf '# sha256 4096 %d %064d\n0 %d zero\n' $((1 << 50)) 0 $((1 << 50)) > "$BATS_TEST_TMPDIR/z4k"
  run timeout 60 "$NBDSUM" --check-manifest "$BATS_TEST_TMPDIR/z4k"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"the image it describes is 1125899906842624 bytes (1 PiB), in its blocks and digests as much hashing as 16 PiB in 64K blocks of sha256, over the limit of 1 PiB$lifts"* ]]
  run timeout 60 nbdkit -U - --filter="$BLKHASH_FILTER" null 100T --run '
    "$NBDSUM" --block-size=4K "$uri"'
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"blkhash: export '': 109951162777600 bytes (100 TiB), in its blocks and digests as much hashing as 1.6 PiB in 64K blocks of sha256, over the limit of 1 PiB for a blkhash view"* ]]
  [[ "$output" = *"the image is 109951162777600 bytes (100 TiB): in 4K blocks of 32-byte digests, as much hashing as 1.6 PiB in 64K blocks of sha256, over the limit of 1 PiB for a blkhash checksum$lifts"* ]]
  run timeout 60 "$NBDSUM" -d sha512 --client-side [ nbdkit null 600T ]
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"the image is 659706976665600 bytes (600 TiB): in 64K blocks of 64-byte digests, as much hashing as 1.2 PiB in 64K blocks of sha256"* ]]
  # At the boundary, small enough to compute at once on a loaded
  # machine: 64 MiB in 4K blocks is 1 GiB's work in 64K blocks, 65 MiB
  # is past it.
  run timeout 60 "$NBDSUM" --max-size=1G --block-size=4K \
    [ nbdkit --filter=blkhash null 64M ]
  [ "$status" -eq 0 ]
  run timeout 60 "$NBDSUM" --max-size=1G --block-size=4K \
    [ nbdkit --filter=blkhash null 65M ]
  [ "$status" -eq 1 ]
  [[ "$output" = *"is 68157440 bytes (65 MiB): in 4K blocks of 32-byte digests"*"over the limit of 1 GiB"* ]]
}

@test "nbdsum-options: --max-size lowers and lifts the limit on sizes" {
  local want m over=": --max-size=SIZE lifts it (0: no limit)"
  cd "$BATS_TEST_TMPDIR"
  "$MKIMAGE" '2M;d:0+100K:a' two.img
  want=$(reference sha256 65536 two.img)
  run "$NBDSUM" --max-size=1M two.img
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: two.img: the image is 2097152 bytes (2 MiB), over the limit of 1 MiB for a blkhash checksum$over" ]
  run "$NBDSUM" --plain --max-size=2097151 two.img
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: two.img: the image is 2097152 bytes (2 MiB), over the limit of 2097151 bytes (2.0 MiB) for a plain digest$over" ]
  for m in 2M 2MiB 2097152 1P 0; do
    run "$NBDSUM" --max-size=$m two.img
    [ "$status" -eq 0 ]
    [ "$output" = "$want  two.img" ]
  done
  # A server's view, client-side, -c of a line.
  run nbdkit -U - --filter="$BLKHASH_FILTER" file two.img \
    --run '"$NBDSUM" --max-size=1M "$uri"; "$NBDSUM" --max-size=1M --client-side "$uri"'
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "${lines[0]}" = "nbdsum: nbd+unix:"*": the view '@blkhash' says the image is 2097152 bytes (2 MiB), over the limit of 1 MiB for a blkhash checksum$over" ]]
  [[ "${lines[1]}" = "nbdsum: nbd+unix:"*": the image is 2097152 bytes (2 MiB), over the limit of 1 MiB for a blkhash checksum$over" ]]
  echo "$want  two.img" > sums
  run "$NBDSUM" --max-size=1M -c sums
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"nbdsum: two.img: the image is 2097152 bytes (2 MiB), over the limit of 1 MiB"* ]]
  # A stream is refused as it passes the limit.
  run bash -c 'head -c 3M /dev/zero | "$NBDSUM" --max-size=2M'
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: -: standard input passed the limit of 2 MiB for a blkhash checksum$over" ]
  head -c 3M /dev/zero > zeros.img
  run bash -c '"$NBDSUM" --max-size=3M < zeros.img'
  [ "$status" -eq 0 ]
  [ "$output" = "$(reference sha256 65536 zeros.img)  -" ]
  # A server's lower limit (its error on its standard error): nbdsum
  # hashes within its own, saying so.
  run "$NBDSUM" --max-size=2M \
    [ nbdkit --filter="$BLKHASH_FILTER" file two.img blkhash-max-size=1M ]
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" = *"over the limit of 1 MiB for a blkhash view: blkhash-max-size=SIZE lifts it (0: no limit)" ]]
  [[ "${lines[1]}" = *"hashing client-side" ]]
  [ "$(first_sum "$output")" = "$want" ]
  # Bad values are usage errors.
  for m in "" abc -1 1Q 8E; do
    run "$NBDSUM" --max-size="$m" two.img
    echo "$m: $output"
    [ "$status" -eq 1 ]
    [[ "$output" = "nbdsum: --max-size=$m: size "* ]]
  done
}
