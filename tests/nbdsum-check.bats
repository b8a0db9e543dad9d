#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum -c and checksum lines: tagged BLKHASH-DIGEST/BLOCKSIZE (NAME)
# = HEX when the digest or block size is not sha256/64K, untagged
# otherwise; nbdsum -c with no option verifies whatever made them (see
# "CHECKSUM LINES" in nbdsum(1)), with sha256sum's options; checksum
# files that fail to read (EIO injected by strace, a directory), and
# a line naming the checksum file being read (-, /dev/stdin, its own
# name).

bats_require_minimum_version 1.5.0

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

setup_file () {
  "$MKIMAGE" '9M;d:0+1M:a;d:5M+300000:b;d:8M+4097:c' \
    "$BATS_FILE_TMPDIR/disk.img"
  disk40_build
  # Images of other formats, each with its guest content's checksum.
  local f
  mkdir "$BATS_FILE_TMPDIR/fmt"
  for f in vmdk vhdx qcow2; do
    qemu-img convert -f raw -O "$f" "$BATS_FILE_TMPDIR/disk.img" \
      "$BATS_FILE_TMPDIR/fmt/g.$f"
  done
  qemu-img convert -f raw -O vpc -o subformat=fixed \
    "$BATS_FILE_TMPDIR/disk.img" "$BATS_FILE_TMPDIR/fmt/fixed.vhd"
  qemu-img convert -f vpc -O raw "$BATS_FILE_TMPDIR/fmt/fixed.vhd" \
    "$BATS_FILE_TMPDIR/fixed.raw"
  reference sha256 65536 "$BATS_FILE_TMPDIR/fixed.raw" \
    > "$BATS_FILE_TMPDIR/fmt/fixed.vhd.want"
  rm "$BATS_FILE_TMPDIR/fixed.raw"
}

setup () {
  cd "$BATS_TEST_TMPDIR"
  cp "$BATS_FILE_TMPDIR/disk.img" disk.img
  disk40_vars
}

teardown () {
  kill_servers
}

# What -c says of a checksum file FILE in which N untagged lines failed.
untagged_hint () {
  echo "nbdsum: $1: $2 untagged line$([ "$2" -eq 1 ] || echo s) FAILED: untagged lines are blkhash sha256/64K checksums; if these are sha256sum's (plain digests of the bytes), check them with --plain"
}

# One byte changed inside the first data extent of disk.img (or $1).
corrupt () {
  printf 'Z' | dd of="${1:-disk.img}" bs=1 seek=70000 conv=notrunc status=none
}

# Change one hex digit of the checksum of every line of file $1: the
# last character of a tagged line, the first of an untagged one.
flip_hex () {
  "$PYTHON" - "$1" <<'PY'
import sys
path = sys.argv[1]
out = []
for line in open(path, newline="").read().split("\n"):
    if line:
        i = 1 if line.startswith("\\") else 0
        if line[i:].upper().startswith("BLKHASH-"):
            i = len(line) - 1
        line = line[:i] + ("1" if line[i] == "0" else "0") + line[i + 1:]
    out.append(line)
open(path, "w", newline="").write("\n".join(out))
PY
}

# verify_then_fail SUMS IMAGE NAME: nbdsum -c SUMS, with no option,
# says NAME: OK; with IMAGE corrupted, or the hex edited, NAME: FAILED
# and exit 1.
verify_then_fail () {
  local sums=$1 img=$2 name=$3
  cp "$img" "$img.orig"
  run "$NBDSUM" -c "$sums"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$name: OK" ]
  corrupt "$img"
  run "$NBDSUM" -c "$sums"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "$name: FAILED" ]
  mv "$img.orig" "$img"
  cp "$sums" "$sums.edited"
  flip_hex "$sums.edited"
  run "$NBDSUM" -c "$sums.edited"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "$name: FAILED" ]
}

@test "nbdsum-check: -d and --block-size give a tagged line -c verifies alone" {
  local spec digest bs bytes line want
  for spec in sha1:1M:1048576 md5:4K:4096 sha512-256:16M:16777216 \
              sha256:1M:1048576 sha512:64K:65536 SHA-1:64K:65536 \
              sha384:8K:8192; do
    IFS=: read -r digest bs bytes <<< "$spec"
    want=$(reference "$digest" "$bytes" disk.img)
    line=$("$NBDSUM" -d "$digest" --block-size "$bs" disk.img)
    echo "$spec: $line"
    # Canonical digest names, upper-cased: SHA-1 is SHA1.
    [ "$line" = "BLKHASH-$(tr a-z A-Z <<< "${digest/SHA-1/sha1}")/$bs (disk.img) = $want" ]
    echo "$line" > SUMS
    verify_then_fail SUMS disk.img disk.img
  done
}

@test "nbdsum-check: --block-size in bytes or KiB is tagged as view names spell it" {
  [ "$("$NBDSUM" --block-size 1048576 disk.img)" = \
    "BLKHASH-SHA256/1M (disk.img) = $(reference sha256 1048576 disk.img)" ]
  [ "$("$NBDSUM" --block-size 8KiB disk.img)" = \
    "BLKHASH-SHA256/8K (disk.img) = $(reference sha256 8192 disk.img)" ]
  # The default, spelt otherwise, is still the default: untagged.
  [ "$("$NBDSUM" -d SHA2-256 --block-size 65536 disk.img)" = \
    "$(reference sha256 65536 disk.img)  disk.img" ]
}

@test "nbdsum-check: a server's blkhash-digest= and blkhash-block-size= are tagged" {
  local want
  want=$(reference sha512 1048576 disk.img)
  start_server defaults file disk.img blkhash-digest=sha512 \
    blkhash-block-size=1M
  run "$NBDSUM" "$uri"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "BLKHASH-SHA512/1M ($uri) = $want" ]
  echo "$output" > SUMS
  run "$NBDSUM" -c SUMS
  [ "$status" -eq 0 ]
  [ "$output" = "$uri: OK" ]
  flip_hex SUMS
  run "$NBDSUM" -c SUMS
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "$uri: FAILED" ]
  kill_servers

  # Only the digest: the block size is the default, still in the tag.
  start_server digest file disk.img blkhash-digest=sha1
  run "$NBDSUM" "$uri"
  [ "$output" = "BLKHASH-SHA1/64K ($uri) = $(reference sha1 65536 disk.img)" ]
  # Only the block size.
  start_server bs file disk.img blkhash-block-size=4K
  run "$NBDSUM" "$uri"
  [ "$output" = "BLKHASH-SHA256/4K ($uri) = $(reference sha256 4096 disk.img)" ]
}

@test "nbdsum-check: a tagged line is checked with its tag, not the server's default" {
  # A plain server (sha256/64K) asked for the tag's view.
  start_server plain file disk.img
  echo "BLKHASH-SHA512/1M ($uri) = $(reference sha512 1048576 disk.img)" > SUMS
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$uri: OK" ]
  kill_servers
  # A corrupted image, served afresh: FAILED.
  corrupt disk.img
  start_server plain2 file disk.img
  sed -i "s|(.*)|($uri)|" SUMS
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "$uri: FAILED
nbdsum: WARNING: 1 computed checksum did NOT match" ]
}

@test "nbdsum-check: an untagged line is sha256/64K, whatever the server's default" {
  local want
  want=$(reference sha256 65536 disk.img)
  start_server sha512 file disk.img blkhash-digest=sha512 blkhash-block-size=1M
  echo "$want  $uri" > SUMS
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$uri: OK" ]
  flip_hex SUMS
  run "$NBDSUM" -c SUMS
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "$uri: FAILED" ]
}

@test "nbdsum-check: client-side, without the filter and with --client-side" {
  local want
  want=$(reference sha1 1048576 disk.img)
  start_nbdkit nofilter file disk.img
  run "$NBDSUM" -d sha1 --block-size 1M "$uri"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"hashing client-side"* ]]
  [ "${lines[-1]}" = "BLKHASH-SHA1/1M ($uri) = $want" ]
  echo "${lines[-1]}" > SUMS
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "$uri: OK" ]
  flip_hex SUMS
  run "$NBDSUM" -c SUMS
  [ "$status" -eq 1 ]
  [[ "$output" = *"$uri: FAILED"* ]]

  # --client-side on a local file: the same line, and it verifies.
  [ "$("$NBDSUM" --client-side -d md5 --block-size 4K disk.img)" = \
    "BLKHASH-MD5/4K (disk.img) = $(reference md5 4096 disk.img)" ]
  "$NBDSUM" --client-side -d md5 --block-size 4K disk.img > SUMS2
  verify_then_fail SUMS2 disk.img disk.img
}

@test "nbdsum-check: blkhash-file written by the filter verifies with a plain -c" {
  local img="$BATS_TEST_TMPDIR/src.img"
  cp disk.img "$img"
  export img
  run serve file "$img" blkhash-file="$BATS_TEST_TMPDIR/file.sums" \
    blkhash-digest=sha1 blkhash-block-size=1M blkhash-file-name=copy.img -- \
    'nbdcopy "$uri" copy.img'
  [ "$status" -eq 0 ]
  cat file.sums
  [ "$(cat file.sums)" = \
    "BLKHASH-SHA1/1M (copy.img) = $(reference sha1 1048576 "$img")" ]
  verify_then_fail file.sums copy.img copy.img

  # Block size only, and a name that needs escapes.
  run serve file "$img" blkhash-file="$BATS_TEST_TMPDIR/file2.sums" \
    blkhash-block-size=4K blkhash-file-name=$'odd\nname' -- \
    'nbdcopy "$uri" "odd
name"'
  [ "$status" -eq 0 ]
  cat file2.sums
  [ "$(cat file2.sums)" = \
    "\\BLKHASH-SHA256/4K (odd\\nname) = $(reference sha256 4096 "$img")" ]
  run "$NBDSUM" -c file2.sums
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = '\odd\nname: OK' ]

  # The defaults: untagged, as sha256sum.
  run serve file "$img" blkhash-file="$BATS_TEST_TMPDIR/file3.sums" \
    blkhash-file-name=copy.img -- 'nbdcopy "$uri" copy.img'
  [ "$(cat file3.sums)" = "$(reference sha256 65536 "$img")  copy.img" ]
  verify_then_fail file3.sums copy.img copy.img
}

@test "nbdsum-check: --tag tags the defaults, and -c verifies it" {
  local want
  want=$(reference sha256 65536 disk.img)
  run "$NBDSUM" --tag disk.img
  [ "$status" -eq 0 ]
  [ "$output" = "BLKHASH-SHA256/64K (disk.img) = $want" ]
  echo "$output" > SUMS
  verify_then_fail SUMS disk.img disk.img
  # The last of --tag and --untagged wins.
  [ "$("$NBDSUM" --untagged --tag disk.img)" = \
    "BLKHASH-SHA256/64K (disk.img) = $want" ]
  [ "$("$NBDSUM" --tag --untagged disk.img)" = "$want  disk.img" ]
}

@test "nbdsum-check: --untagged is sha256sum's form: -c needs the same -d and --block-size" {
  local want
  want=$(reference sha1 1048576 disk.img)
  run "$NBDSUM" --untagged -d sha1 --block-size 1M disk.img
  [ "$status" -eq 0 ]
  [ "$output" = "$want  disk.img" ]
  echo "$output" > SUMS
  # Alone: 40 hex digits are not sha256's 64.
  run "$NBDSUM" -c -w SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"SUMS: 1: improperly formatted checksum line"* ]]
  [[ "$output" = *"no properly formatted checksum lines found"* ]]
  # With -d only: hashed with 64K blocks, another checksum.
  run "$NBDSUM" -c -d sha1 SUMS
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "disk.img: FAILED" ]
  run "$NBDSUM" -c -d sha1 --block-size 1M SUMS
  [ "$status" -eq 0 ]
  [ "$output" = "disk.img: OK" ]
}

@test "nbdsum-check: -c reads tagged and untagged lines mixed; a tag wins over -d" {
  local odd=$'odd\nname\\img'
  cp disk.img b.img
  cp disk.img "$odd"
  corrupt b.img
  {
    "$NBDSUM" disk.img
    "$NBDSUM" -d sha1 --block-size 1M b.img
    "$NBDSUM" -d md5 --block-size 4K "$odd"
    "$NBDSUM" --tag disk.img
    "$NBDSUM" b.img
  } > SUMS
  cat SUMS
  [ "$(sed -n 3p SUMS)" = \
    "\\BLKHASH-MD5/4K (odd\\nname\\\\img) = $(reference md5 4096 "$odd")" ]
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = 'disk.img: OK
b.img: OK
\odd\nname\\img: OK
disk.img: OK
b.img: OK' ]
  # -d md5 for untagged lines: theirs are now the wrong length, the
  # tagged ones are still checked as tagged.
  run "$NBDSUM" -c -d md5 SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = 'b.img: OK
\odd\nname\\img: OK
disk.img: OK
nbdsum: WARNING: 2 lines are improperly formatted' ]
  # A tagged line whose image changed fails, the others do not.
  cp disk.img b.img
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = 'disk.img: OK
b.img: FAILED
\odd\nname\\img: OK
disk.img: OK
b.img: FAILED
'"$(untagged_hint SUMS 1)"'
nbdsum: WARNING: 2 computed checksums did NOT match' ]
}

@test "nbdsum-check: tags are read in any case, with any spelling of the size" {
  local sha1
  sha1=$(reference sha1 1048576 disk.img)
  printf '%s\n' "blkhash-sha1/1m (disk.img) = $sha1" \
    "BLKHASH-SHA-1/1048576 (disk.img) = $sha1" \
    "BlkHash-Sha1/1024KiB (disk.img) = ${sha1^^}" \
    "BLKHASH-SHA1/1M (disk.img) = $sha1"$'\r' > SUMS
  run "$NBDSUM" -c --strict SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "disk.img: OK
disk.img: OK
disk.img: OK
disk.img: OK" ]
}

@test "nbdsum-check: malformed tags are improperly formatted lines, --warn and --strict" {
  local sha1 sha256
  sha1=$(reference sha1 1048576 disk.img)
  sha256=$(reference sha256 65536 disk.img)
  printf '%s\n' "BLKHASH-SHA1/1M (disk.img) = $sha1" \
    "BLKHASH-NOSUCH/1M (disk.img) = $sha1" \
    "BLKHASH-SHA1/1000 (disk.img) = $sha1" \
    "BLKHASH-SHA1/32M (disk.img) = $sha1" \
    "BLKHASH-SHA1/1M (disk.img) $sha1" \
    "BLKHASH-SHA1/1M (disk.img) = $sha256" \
    "BLKHASH-SHA1 (disk.img) = $sha1" \
    "BLKHASH-SHA1/1M  (disk.img) = $sha1" \
    "BLKHASH-SHA1/1M () = $sha1" > SUMS
  # Plain: the good line is checked, the bad ones only counted.
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "disk.img: OK
nbdsum: WARNING: 8 lines are improperly formatted" ]
  # -w: each, with its line number and why.
  run "$NBDSUM" -c -w SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"SUMS: 2: improperly formatted checksum line (unknown digest"* ]]
  [[ "$output" = *"SUMS: 3: improperly formatted checksum line (block size must be"* ]]
  [[ "$output" = *"SUMS: 4: improperly formatted checksum line (block size must be a multiple of 4K from 4K to 16M)"* ]]
  [[ "$output" = *"SUMS: 5: improperly formatted checksum line (no ') = ' before the checksum)"* ]]
  [[ "$output" = *"SUMS: 6: improperly formatted checksum line (the checksum's length is not the tag's digest's)"* ]]
  for n in 7 8 9; do
    [[ "$output" = *"SUMS: $n: improperly formatted checksum line ("* ]]
  done
  [ "$(grep -c 'improperly formatted checksum line' <<< "$output")" -eq 8 ]
  # --strict: they fail the run.
  run "$NBDSUM" -c --strict SUMS
  [ "$status" -eq 1 ]
  [ "${lines[0]}" = "disk.img: OK" ]
  # Only bad lines: nothing to check.
  sed 1d SUMS > BAD
  run "$NBDSUM" -c BAD
  [ "$status" -eq 1 ]
  [[ "$output" = *"BAD: no properly formatted checksum lines found"* ]]
}

@test "nbdsum-check: -z ends lines with NUL and does not escape names" {
  local odd=$'odd\nname\\img'
  cp disk.img "$odd"
  "$NBDSUM" -z disk.img "$odd" > Z
  printf '%s  disk.img\0%s  %s\0' "$(reference sha256 65536 disk.img)" \
    "$(reference sha256 65536 disk.img)" "$odd" > WANT
  cmp Z WANT
  "$NBDSUM" --zero -d sha1 "$odd" > Z
  printf 'BLKHASH-SHA1/64K (%s) = %s\0' "$odd" \
    "$(reference sha1 65536 disk.img)" > WANT
  cmp Z WANT
  # As sha256sum (coreutils 9.1): not when verifying.
  run "$NBDSUM" -c -z Z
  [ "$status" -eq 1 ]
  [[ "$output" = *"--zero are not supported when verifying checksums"* ]]
}

@test "nbdsum-check: --tag, --untagged and -z with other modes are usage errors" {
  local opt mode
  for opt in --tag --untagged -z; do
    run "$NBDSUM" -c "$opt" SUMS
    [ "$status" -eq 1 ]
    [[ "$output" = *"not supported when verifying checksums"* ]]
    for mode in --json --blocks; do
      run "$NBDSUM" "$mode" "$opt" disk.img
      [ "$status" -eq 1 ]
      [[ "$output" = *"only change checksum lines"* ]]
    done
    run "$NBDSUM" --diff "$opt" disk.img disk.img
    [ "$status" -eq 2 ]
    [[ "$output" = *"only change checksum lines"* ]]
  done
}

@test "nbdsum-check: --help says what the default digest is when a server chooses" {
  run "$NBDSUM" --help
  [ "$status" -eq 0 ]
  [[ "$output" = *"--tag"*"--untagged"*"-z, --zero"* ]]
  [[ "$output" = *"blkhash-digest="* ]]
  [[ "$output" = *"blkhash-block-size="* ]]
  [[ "$output" != *"OpenSSL digest (default sha256)"* ]]
  grep -q '^=head1 CHECKSUM LINES' "$top_srcdir/man/nbdsum.pod"
}

@test "nbdsum-check: --check OK, FAILED, --quiet, --status" {
  cp "$disk40" good.img
  cp "$disk40" bad.img
  "$NBDSUM" good.img bad.img > SUMS
  run "$NBDSUM" -c SUMS
  [ "$status" -eq 0 ]
  [ "$output" = "good.img: OK
bad.img: OK" ]
  # Corrupt one byte in the middle of a hole.
  printf 'X' | dd of=bad.img bs=1 seek=30000000 conv=notrunc status=none
  run "$NBDSUM" --check SUMS
  [ "$status" -eq 1 ]
  [[ "$output" = *"good.img: OK"* ]]
  [[ "$output" = *"bad.img: FAILED"* ]]
  [[ "$output" = *"WARNING: 1 computed checksum did NOT match"* ]]
  run "$NBDSUM" -c --quiet SUMS
  [ "$status" -eq 1 ]
  [[ "$output" != *"good.img: OK"* ]]
  [[ "$output" = *"bad.img: FAILED"* ]]
  run "$NBDSUM" -c --status SUMS
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  rm bad.img
  run "$NBDSUM" -c SUMS
  [ "$status" -eq 1 ]
  [[ "$output" = *"bad.img: FAILED open or read"* ]]
  [[ "$output" = *"WARNING: 1 listed file could not be read"* ]]
}

@test "nbdsum-check: --check --ignore-missing, --strict and --warn, like sha256sum" {
  cp "$disk40" a.img
  "$NBDSUM" a.img > SUMS
  sed 's/  a.img$/  gone.img/' SUMS >> SUMS
  echo "not a checksum line" >> SUMS
  # Plain: the missing file fails, the bad line only warns at the end.
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"gone.img: FAILED open or read"* ]]
  # --ignore-missing: skipped, neither reported nor failed.
  run "$NBDSUM" -c --ignore-missing SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "a.img: OK" ]
  [[ "$output" != *gone.img* ]]
  # ... but --strict fails on the bad line, and -w says which.
  run "$NBDSUM" -c --ignore-missing --strict -w SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"SUMS: 3: improperly formatted checksum line"* ]]
  # Nothing verified at all is an error.
  grep gone.img SUMS > ONLY_GONE
  run "$NBDSUM" -c --ignore-missing ONLY_GONE
  [ "$status" -eq 1 ]
  [[ "$output" = *"no file was verified"* ]]
  # No file argument: the lines come from standard input.
  run "$NBDSUM" -c < <(head -n 1 SUMS)
  [ "$status" -eq 0 ]
  [ "$output" = "a.img: OK" ]
  run "$NBDSUM" --strict a.img
  [ "$status" -eq 1 ]
  [[ "$output" = *"only go with --check"* ]]
}

@test "nbdsum-check: --check reads blkhash-file's format and warns on bad lines" {
  local dir="$BATS_TEST_TMPDIR/d"
  mkdir "$dir"
  cp "$disk40" "$dir/x.img"
  export dir
  serve file dir="$dir" blkhash-file="$BATS_TEST_TMPDIR/server.sums" -- \
    'nbdcopy "nbd+unix:///x.img?socket=$unixsocket" null:'
  cat server.sums
  printf 'not a checksum line\n' >> server.sums
  cd "$dir"
  run "$NBDSUM" -c "$BATS_TEST_TMPDIR/server.sums"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"x.img: OK"* ]]
  [[ "$output" = *"WARNING: 1 line is improperly formatted"* ]]
  printf 'nothing\n' > empty.sums
  run "$NBDSUM" -c empty.sums
  [ "$status" -eq 1 ]
  [[ "$output" = *"no properly formatted checksum lines found"* ]]
}

@test "nbdsum-check: names with a newline or backslash are escaped and checked" {
  cp "$disk40" 'odd
name\img'
  run "$NBDSUM" 'odd
name\img'
  [ "$status" -eq 0 ]
  [ "$output" = "\\$want40  odd\\nname\\\\img" ]
  "$NBDSUM" 'odd
name\img' > SUMS
  run "$NBDSUM" -c SUMS
  [ "$status" -eq 0 ]
  [ "$output" = '\odd\nname\\img: OK' ]
}

@test "nbdsum-check: a name ending in a carriage return is escaped and checked" {
  local cr=$'disk\r'
  cp "$disk40" "$cr"
  run "$NBDSUM" "$cr"
  [ "$status" -eq 0 ]
  [ "$output" = "\\$want40  disk\\r" ]
  "$NBDSUM" "$cr" > SUMS
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = '\disk\r: OK' ]
}

# A checksum file may come from anyone: a line naming a device, a FIFO,
# a socket or a directory fails, saying what it is, and is never
# opened (a FIFO nobody writes to blocked the check in open, /dev/zero
# never ended).  A block device too, when the system has one to name.
@test "nbdsum-check: a line naming a device, a FIFO, a socket, a directory or a file of /proc or /sys fails, never opened" {
  local empty j blk name what
  empty=$(reference sha256 65536 /dev/null)
  mkfifo fifo
  mkdir adir
  "$PYTHON" -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'
  ln -s /dev/zero zlink
  blk=$(find /dev -maxdepth 1 -type b 2>/dev/null | head -n 1)
  {
    for name in /dev/null fifo /dev/zero adir sock zlink $blk; do
      echo "$empty  $name"
    done
    echo "$(reference sha256 65536 disk.img)  disk.img"
  } > SUMS
  cat SUMS
  for j in 1 3; do
    # Standard input a file: /dev/null is no name for it here.
    run timeout 60 "$NBDSUM" -j "$j" -c SUMS < disk.img
    echo "-j $j: $status: $output"
    [ "$status" -eq 1 ]
    for name in /dev/null fifo /dev/zero adir sock zlink $blk; do
      [[ "$output" = *"$name: FAILED open or read"* ]]
    done
    [[ "$output" = *"disk.img: OK"* ]]
    for what in "/dev/null: a character device" "fifo: a FIFO" \
                "/dev/zero: a character device" "zlink: a character device"; do
      [[ "$output" = *"nbdsum: $what: nbdsum -c checks regular files only (hash it directly: nbdsum ${what%%:*})"* ]]
    done
    [[ "$output" = *"nbdsum: adir: a directory: nbdsum -c checks regular files only"* ]]
    [[ "$output" = *"nbdsum: sock: a socket: nbdsum -c checks regular files only"* ]]
    [ -z "$blk" ] ||
      [[ "$output" = *"nbdsum: $blk: a block device: nbdsum -c checks regular files only (hash it directly: nbdsum $blk)"* ]]
    [[ "$output" = *"WARNING: $(( $(wc -l < SUMS) - 1 )) listed files could not be read"* ]]
  done
  # --json says why in each line's error.
  run --separate-stderr timeout 60 "$NBDSUM" --json -c SUMS < disk.img
  [ "$status" -eq 1 ]
  "$PYTHON" -c '
import json, sys
doc = json.loads(sys.argv[1])
errors = [r.get("error", "") for r in doc["files"][0]["results"]]
assert all("checks regular files only" in e for e in errors[:-1]), errors
assert doc["unreadable"] == len(errors) - 1, doc' "$output"
  # Files of the kernel's: /proc/kmsg blocked -c for ever (and took
  # the kernel's log as root), /sys files failed as I/O errors.
  printf '%s  %s\n' "$empty" /proc/kmsg "$empty" /sys/kernel/uevent_seqnum \
    > kernel.sums
  run timeout 20 "$NBDSUM" -c kernel.sums < /dev/null
  echo "$status: $output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"nbdsum: /proc/kmsg: a file of the kernel's (/proc, /sys): nbdsum -c checks regular files only"* ]]
  [[ "$output" = *"nbdsum: /sys/kernel/uevent_seqnum: a file of the kernel's (/proc, /sys)"* ]]
  # '-' keeps its meaning, on any standard input.
  echo "$empty  -" > dash.sums
  run timeout 60 "$NBDSUM" -c dash.sums < /dev/null
  [ "$status" -eq 0 ]
  [ "$output" = "-: OK" ]
}

# The hint once needed a file named as published ones or several
# failing lines: one sha256sum line naming a URI, in stdin.SUMS, said
# FAILED and nothing more.  Now any untagged line that fails gives it,
# once a file; tagged and --plain lines never.
@test "nbdsum-check: a failed untagged line says sha256sum's need --plain, whatever the file's name and its number of lines" {
  sha256sum disk.img > SHA256SUMS
  run "$NBDSUM" -c SHA256SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"disk.img: FAILED"* ]]
  [[ "$output" = *"$(untagged_hint SHA256SUMS 1)"* ]]
  # The issue's case: one line naming a URI, in a file named otherwise.
  start_server hint file disk.img
  echo "$(sha256sum < disk.img | cut -d' ' -f1)  $uri" > stdin.SUMS
  run "$NBDSUM" -c stdin.SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"$uri: FAILED"* ]]
  [[ "$output" = *"$(untagged_hint stdin.SUMS 1)"* ]]
  run "$NBDSUM" --plain -c stdin.SUMS
  [ "$status" -eq 0 ]
  [ "$output" = "$uri: OK" ]
  # Beside a line that matches, and for nbdsum's own lines of an
  # image that changed: said all the same, counted.
  "$NBDSUM" disk.img >> SHA256SUMS
  cp disk.img changed.img
  qemu-io -f raw changed.img -c 'write -P 9 0 512' >/dev/null
  "$NBDSUM" --no-names disk.img | sed 's/$/  changed.img/' >> SHA256SUMS
  run "$NBDSUM" -c SHA256SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"disk.img: OK"* ]]
  [[ "$output" = *"$(untagged_hint SHA256SUMS 2)"* ]]
  # -q silences it, as it does the OK lines.
  run "$NBDSUM" -q -c SHA256SUMS
  [[ "$output" != *"untagged"* ]]
  # Tagged lines and --plain's are not what it is about.
  "$NBDSUM" --tag disk.img | sed 's/(disk\.img)/(changed.img)/' > tagged.sums
  sha256sum disk.img | sed 's/disk\.img/changed.img/' > plain.sums
  for args in "-c tagged.sums" "--plain -c plain.sums"; do
    run "$NBDSUM" $args
    echo "$args: $output"
    [ "$status" -eq 1 ]
    [[ "$output" = *"changed.img: FAILED"* ]]
    [[ "$output" != *"untagged"* ]]
  done
  # A '-' line is sha256sum's form for standard input too.
  echo "$(sha256sum < disk.img | cut -d' ' -f1)  -" > dash.sums
  run bash -c '"$NBDSUM" -c dash.sums < disk.img'
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"$(untagged_hint dash.sums 1)"* ]]
  # --help says which lines -c reads alone, and which need --plain (it
  # said "nbdsum -c verifies any of them").
  run "$NBDSUM" --help
  [ "$status" -eq 0 ]
  [[ "$output" = *"-c alone reads 'CHECKSUM  NAME' (blkhash sha256/64K), 'BLKHASH-DIGEST/SIZE
(NAME) = CHECKSUM', sha256sum --tag's; untagged sha256sum lines need --plain."* ]]
  [[ "$output" != *"verifies any of them"* ]]
}

# The hostile review: a '-' line read the rest of a checksum file that
# was standard input under another name (/dev/stdin, /proc/self/fd/0),
# or the checksum file '-' given after it: the lines after it were
# never checked, and a '-' line made to match their bytes said OK with
# exit 0.  Now refused, and every other line is checked.
@test "nbdsum-check: a line reading standard input is refused while a checksum file is read from it" {
  local empty rest pid
  empty=$("$NBDSUM" --no-names /dev/null)
  printf '%064d  disk.img\n' 0 > rest
  echo "$(reference sha256 65536 rest)  -" > first
  for name in /dev/stdin /proc/self/fd/0; do
    # The rest of the file comes once nbdsum has read the first line
    # and waits for more (its '-' line is then all it has).
    rm -f pipe
    mkfifo pipe
    "$NBDSUM" -c "$name" < pipe > out 2>&1 3>&- &
    pid=$!
    exec 5> pipe
    cat first >&5
    wait_until 30 blocked "$pid"
    cat rest >&5
    exec 5>&-
    wait_exit "$pid" 30
    status=$rc output=$(cat out)
    echo "$name: $output"
    [ "$status" -eq 1 ]
    [[ "$output" = *"-: FAILED open or read"* ]]
    [[ "$output" = *"standard input is a checksum file being read"* ]]
    [[ "$output" = *"disk.img: FAILED"* ]]
    [[ "$output" != *"-: OK"* ]]
  done
  # '-' given as a later checksum file: its lines are all checked.
  : > empty.img
  { for i in 1 2 3; do echo "$empty  empty.img"; done; } > later
  echo "$empty  -" > first
  for j in 1 2; do
    run bash -c '"$NBDSUM" -j '"$j"' -c first - < later'
    echo "-j $j: $output"
    [ "$status" -eq 1 ]
    [ "$(grep -c '^empty.img: OK$' <<< "$output")" -eq 3 ]
    [[ "$output" = *"-: FAILED open or read"* ]]
  done
  # A name for standard input on a terminal is not waited on either.
  echo "$empty  /dev/stdin" > tty.sums
  run timeout 20 "$PYTHON" - "$NBDSUM" -c tty.sums <<'PY'
import pty, subprocess, sys
master, slave = pty.openpty()
sys.exit(subprocess.run(sys.argv[1:], stdin=slave).returncode)
PY
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"standard input is a terminal here"* ]]
}

# blkhash-file names the default export '-' unless blkhash-file-name=
# says: the line is for standard input, and -c says so, in its own
# words (a '-' line need not come from a blkhash-file: sha256sum's).
@test "nbdsum-check: a '-' line: the image on standard input, a terminal refused, a failure explained" {
  run nbdkit -U - --filter="$BLKHASH_FILTER" file disk.img \
    blkhash-file="$PWD/SUMS" --run 'nbdcopy "$uri" copy.img'
  [ "$status" -eq 0 ]
  [ "$(cat SUMS)" = "$(reference sha256 65536 disk.img)  -" ]
  run "$NBDSUM" -c SUMS < copy.img
  [ "$status" -eq 0 ]
  [ "$output" = "-: OK" ]
  # Nothing on standard input: FAILED, and why.
  run "$NBDSUM" -c SUMS < /dev/null
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"-: FAILED"* ]]
  [[ "$output" = *"nbdsum: -: a line for standard input, which was empty: give the image on it (nbdsum -c FILE < IMAGE)"* ]]
  [[ "$output" != *"blkhash-file"* ]]
  # Another image there: said how much was read.
  run bash -c 'head -c 1000 disk.img | "$NBDSUM" -c SUMS'
  [ "$status" -eq 1 ]
  [[ "$output" = *"nbdsum: -: a line for standard input: checked against the 1000 bytes given on it"* ]]
  [[ "$output" != *"blkhash-file"* ]]
  # The issue's case: sha256sum's '-' line, --plain, the wrong bytes.
  echo "$(sha256sum < disk.img | cut -d' ' -f1)  -" > stdin.SUMS
  run bash -c 'head -c 1000 disk.img | "$NBDSUM" --plain -c stdin.SUMS'
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"-: FAILED"* ]]
  [[ "$output" != *"blkhash-file"* ]]
  run bash -c '"$NBDSUM" --plain -c stdin.SUMS < disk.img'
  [ "$status" -eq 0 ]
  [ "$output" = "-: OK" ]
  # A terminal is not waited on.
  run timeout 20 "$PYTHON" - "$NBDSUM" -c SUMS <<'PY'
import pty, subprocess, sys
master, slave = pty.openpty()
r = subprocess.run(sys.argv[1:], stdin=slave)
sys.exit(r.returncode)
PY
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"standard input is a terminal here: give the image on it (nbdsum -c FILE < IMAGE), or its name in the line"* ]]
}

@test "nbdsum-check: a line records a format given, and -c reads the file with it" {
  local want vpc
  cp "$BATS_FILE_TMPDIR"/fmt/* .
  want=$(reference sha256 65536 disk.img)
  vpc=$(cat fixed.vhd.want)
  # The report's case: a format given, then -c with no option.
  "$NBDSUM" --format=vmdk g.vmdk > SUMS
  cat SUMS
  [ "$(cat SUMS)" = "BLKHASH-SHA256/64K:vmdk (g.vmdk) = $want" ]
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "g.vmdk: OK" ]
  # Several formats, given and probed, and their own digests.
  {
    "$NBDSUM" g.vmdk g.vhdx
    "$NBDSUM" --format=vpc fixed.vhd --format=raw g.qcow2 disk.img
    "$NBDSUM" -d sha1 --format=vpc fixed.vhd
  } > SUMS
  cat SUMS
  [ "$(sed -n 3p SUMS)" = "BLKHASH-SHA256/64K:vpc (fixed.vhd) = $vpc" ]
  [ "$(sed -n 4p SUMS)" = "BLKHASH-SHA256/64K:raw (g.qcow2) = $(reference sha256 65536 g.qcow2)" ]
  [[ "$(sed -n 6p SUMS)" = "BLKHASH-SHA1/64K:vpc (fixed.vhd) = "* ]]
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "g.vmdk: OK
g.vhdx: OK
fixed.vhd: OK
g.qcow2: OK
disk.img: OK
fixed.vhd: OK" ]
  run "$NBDSUM" -c -j 3 SUMS
  [ "$status" -eq 0 ]
  [ "$(grep -c ': OK$' <<< "$output")" -eq 6 ]
  # Edited checksums fail; the sha256sum hint counts untagged lines.
  flip_hex SUMS
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(grep -c ': FAILED$' <<< "$output")" -eq 6 ]
  [ "$(grep -c '^[0-9a-f]\{64\}  ' SUMS)" -eq 2 ]
  [[ "$output" = *"$(untagged_hint SUMS 2)"* ]]
}

@test "nbdsum-check: --untagged with a --format is a usage error: the line could not record it" {
  local fmt
  cp "$BATS_FILE_TMPDIR"/fmt/g.qcow2 .
  for fmt in raw qcow2 QCOW2; do
    run --separate-stderr "$NBDSUM" --untagged --format="$fmt" g.qcow2
    echo "$fmt: $status: $output; $stderr"
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [[ "$stderr" = "nbdsum: --untagged does not go with --format=$fmt: "* ]]
    run "$NBDSUM" --format="$fmt" g.qcow2 --untagged disk.img
    [ "$status" -eq 1 ]
    [[ "$output" = *"--untagged does not go with --format=$fmt"* ]]
  done
  # --format=auto records nothing; --tag after --untagged wins.
  run "$NBDSUM" --untagged --format=auto g.qcow2
  [ "$status" -eq 0 ]
  [ "$output" = "$(reference sha256 65536 disk.img)  g.qcow2" ]
  run "$NBDSUM" --untagged --tag --format=raw g.qcow2
  [ "$status" -eq 0 ]
  [[ "$output" = "BLKHASH-SHA256/64K:raw (g.qcow2) = "* ]]
}

@test "nbdsum-check: a line's format: raw is the bytes, a URI's is an error, unknown is malformed" {
  local bytes
  cp "$BATS_FILE_TMPDIR"/fmt/g.qcow2 .
  bytes=$(reference sha256 65536 g.qcow2)
  # The bytes' checksum verifies as :raw, not as the probed qcow2.
  printf '%s\n' "BLKHASH-SHA256/64K:raw (g.qcow2) = $bytes" \
    "blkhash-sha256/64k:RAW (g.qcow2) = $bytes" "$bytes  g.qcow2" > SUMS
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "g.qcow2: OK
g.qcow2: OK
g.qcow2: FAILED
$(untagged_hint SUMS 1)
nbdsum: WARNING: 1 computed checksum did NOT match" ]
  # A URI is hashed as its server serves it: a format is an error.
  run nbdkit -U - file g.qcow2 --run '
    echo "BLKHASH-SHA256/64K:qcow2 ($uri) = '"$bytes"'" > URISUMS
    "$NBDSUM" -c URISUMS'
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"a format (qcow2) applies to local files only"* ]]
  [[ "$output" = *": FAILED open or read"* ]]
  # Formats nbdsum does not read are improperly formatted.
  printf '%s\n' "BLKHASH-SHA256/64K:vhd (g.qcow2) = $bytes" \
    "BLKHASH-SHA256/64K:luks (g.qcow2) = $bytes" \
    "BLKHASH-SHA256/64K:auto (g.qcow2) = $bytes" \
    "BLKHASH-SHA256/64K: (g.qcow2) = $bytes" \
    "BLKHASH-SHA256/64K:raw(g.qcow2) = $bytes" > BAD
  run "$NBDSUM" -c -w BAD
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(grep -c 'improperly formatted checksum line' <<< "$output")" -eq 5 ]
  [[ "$output" = *"BAD: 1: improperly formatted checksum line (the image format after ':' is not one nbdsum reads"* ]]
  # --json gives each line's format.
  run "$NBDSUM" -c --json SUMS
  echo "$output"
  [[ "$output" = *'"result": "OK"'*'"format": "raw"'* ]]
  [[ "$output" = *'"result": "FAILED"'*'"format": "qcow2"'* ]]
}

# read_fails LOG COMMAND...: COMMAND under strace, every read(2) of
# $sums after the first failing with EIO (the first read's size goes
# to LOG, as strace says it).  Only the process reading $sums is
# traced: with -j its jobs are not.  LeakSanitizer cannot run under
# ptrace (make check-sanitizers' ASan build would report a fatal
# error): off, the other ASAN_OPTIONS kept.
read_fails () {
  local log=$1
  shift
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -qq -o "$log" -P "$sums" -e trace=read \
    -e inject=read:error=EIO:when=2+ "$@"
}

need_strace () {
  command -v strace >/dev/null ||
    skip "strace is not installed (Debian package strace)"
  strace -o /dev/null true 2>/dev/null ||
    skip "strace cannot trace processes here"
}

@test "nbdsum-check: a read error in a checksum file fails it, after the lines read (-j 1, -j 3)" {
  local i j n first
  need_strace
  start_server disk file disk.img
  sums="$BATS_TEST_TMPDIR/SUMS"
  # More lines than the first read takes.
  for ((i = 0; i < 200; i++)); do
    echo "$(reference sha256 65536 disk.img)  $uri"
  done > "$sums"
  for j in 1 3; do
    for how in file stdin; do
      if [ "$how" = file ]; then
        read_fails trace "$NBDSUM" -j "$j" -c "$sums" > "out$j$how" \
          2> "err$j$how" || echo "$?" > "rc$j$how"
        name=$sums
      else
        read_fails trace "$NBDSUM" -j "$j" -c < "$sums" > "out$j$how" \
          2> "err$j$how" || echo "$?" > "rc$j$how"
        name=-
      fi
      cat trace "out$j$how" "err$j$how"
      # The lines whole in the first read were checked, and only they.
      first=$(sed -n '1s/.* = \([0-9]*\)$/\1/p' trace)
      n=$(head -c "$first" "$sums" | wc -l)
      [ "$n" -gt 0 ] && [ "$n" -lt 200 ]
      [ "$(grep -c ': OK$' "out$j$how")" -eq "$n" ]
      [ "$(wc -l < "out$j$how")" -eq "$n" ]
      [ "$(cat "err$j$how")" = "nbdsum: $name: read error: Input/output error" ]
      [ "$(cat "rc$j$how")" -eq 1 ]
    done
  done
  diff out1file out3file && diff err1file err3file
  diff out1stdin out3stdin && diff err1stdin err3stdin
  # --json says it as the file's error.
  read_fails trace "$NBDSUM" -c --json "$sums" > out.json || :
  "$PYTHON" - <<'PY'
import json
(f,) = json.load(open("out.json"))["files"]
assert f["error"] == "read error: Input/output error", f
assert all(r["result"] == "OK" for r in f["results"]), f
PY
}

@test "nbdsum-check: a directory as a checksum file: Is a directory (-j 1, -j 3)" {
  local j
  mkdir dir
  "$NBDSUM" disk.img > SUMS
  for j in 1 3; do
    run --separate-stderr "$NBDSUM" -j "$j" -c dir
    echo "$status: $output; $stderr"
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [ "$stderr" = "nbdsum: dir: Is a directory" ]
    # The other files are checked all the same.
    run --separate-stderr "$NBDSUM" -j "$j" -c SUMS dir SUMS
    echo "$status: $output; $stderr"
    [ "$status" -eq 1 ]
    [ "$output" = "disk.img: OK
disk.img: OK" ]
    [ "$stderr" = "nbdsum: dir: Is a directory" ]
  done
}

@test "nbdsum-check: a line naming - while the checksum file is standard input fails (-j 1, -j 3)" {
  local j sum
  sum=$(reference sha256 65536 disk.img)
  printf '%s  %s\n' "$sum" disk.img "$sum" - "$sum" disk.img > SUMS
  for j in 1 3; do
    for file in '' -; do
      run --separate-stderr "$NBDSUM" -j "$j" -c $file < SUMS
      echo "-j $j -c $file: $status: $output; $stderr"
      [ "$status" -eq 1 ]
      [ "$output" = "disk.img: OK
-: FAILED open or read
disk.img: OK" ]
      [ "$stderr" = "nbdsum: -: standard input is a checksum file being read: it cannot be hashed too
nbdsum: WARNING: 1 listed file could not be read" ]
    done
    # From a pipe too; and a checksum file given by name leaves
    # standard input to the line.
    run --separate-stderr bash -c "cat SUMS | \"\$NBDSUM\" -j $j -c"
    [ "$status" -eq 1 ]
    [ "${lines[1]}" = "-: FAILED open or read" ]
    run --separate-stderr "$NBDSUM" -j "$j" -c SUMS < disk.img
    echo "-j $j -c SUMS: $status: $output; $stderr"
    [ "$status" -eq 0 ]
    [ "$output" = "disk.img: OK
-: OK
disk.img: OK" ]
  done
}

# crafted_sums NAME: a checksum file whose first line names NAME (the
# checksum file itself, when read from a pipe), its checksum that of
# what a reader of the same pipe gets after stdio's first 4096 bytes:
# a long malformed line's end (not '#': a comment), a good line and a
# bad one.  Hashing NAME would swallow them and say OK.
crafted_sums () {
  local sum
  sum=$(reference sha256 65536 disk.img)
  {
    printf '%064d  %s\n' 0 "$1"
    printf 'x%.0s' {1..5000}
    printf '\n%s  %s\n%s  %s\n' "$sum" disk.img "${sum//?/0}" disk.img
  } > SUMS
  tail -c +4097 SUMS > rest
  { printf '%s  %s\n' "$(reference sha256 65536 rest)" "$1"
    tail -n +2 SUMS; } > SUMS.new
  mv SUMS.new SUMS
}

@test "nbdsum-check: a line naming the checksum file being read fails, however it is named (-j 1, -j 3)" {
  local j name
  for name in /dev/stdin /proc/self/fd/0; do
    crafted_sums "$name"
    for j in 1 3; do
      run --separate-stderr bash -c "cat SUMS | \"\$NBDSUM\" -j $j -c"
      echo "cat SUMS | nbdsum -j $j -c: $status: $output; $stderr"
      [ "$status" -eq 1 ]
      [ "$output" = "$name: FAILED open or read
disk.img: OK
disk.img: FAILED" ]
      [ "$stderr" = "nbdsum: $name: the checksum file being read: it cannot be hashed too
$(untagged_hint - 1)
nbdsum: WARNING: 1 line is improperly formatted
nbdsum: WARNING: 1 listed file could not be read
nbdsum: WARNING: 1 computed checksum did NOT match" ]
      # Standard input redirected from the checksum file: the same.
      run --separate-stderr "$NBDSUM" -j "$j" -c < SUMS
      [ "$status" -eq 1 ]
      [ "${lines[0]}" = "$name: FAILED open or read" ]
      [ "${#lines[@]}" -eq 3 ]
      # A checksum file given by name leaves standard input to the line.
      run --separate-stderr "$NBDSUM" -j "$j" -c SUMS < rest
      echo "nbdsum -j $j -c SUMS < rest: $status: $output; $stderr"
      [ "$status" -eq 1 ]
      [ "$output" = "$name: OK
disk.img: OK
disk.img: FAILED" ]
    done
  done
  # A checksum file naming itself, as it is given or otherwise.
  "$NBDSUM" disk.img > SUMS
  printf '%064d  %s\n' 0 SUMS 0 ./SUMS >> SUMS
  ln -s SUMS link
  for j in 1 3; do
    run --separate-stderr "$NBDSUM" -j "$j" -c link
    echo "-j $j -c link: $status: $output; $stderr"
    [ "$status" -eq 1 ]
    [ "$output" = "disk.img: OK
SUMS: FAILED open or read
./SUMS: FAILED open or read" ]
    [[ "$stderr" = "nbdsum: SUMS: the checksum file being read: it cannot be hashed too
nbdsum: ./SUMS: the checksum file being read: it cannot be hashed too
"* ]]
  done
}

# Review (issue 37): the warnings of -w and of a clear-signed file
# named the checksum file as it was, which a glob (nbdsum -c *.sum)
# takes from whoever names files there: escape sequences reached the
# terminal, and a newline forged a line of nbdsum's.  Written \xHH as
# every other message.
@test "nbdsum-check: -w's and the PGP warning's file name is written escaped" {
  local f esc='S\x1b]0;pwned\x07\x0anbdsum: forged'
  f=$(printf 'S\033]0;pwned\a\nnbdsum: forged')
  for pgp in false true; do
    if $pgp; then
      printf '%s\n' '-----BEGIN PGP SIGNED MESSAGE-----' 'Hash: SHA256' '' \
        'garbage line' '-----BEGIN PGP SIGNATURE-----' '' 'AAAA' \
        '-----END PGP SIGNATURE-----' > "$f"
    else
      printf 'garbage line\n' > "$f"
    fi
    run --separate-stderr "$NBDSUM" -c -w "$f"
    echo "$status: $stderr"
    [ "$status" -eq 1 ]
    [[ "$stderr" = *"$esc: "[0-9]": improperly formatted checksum line"* ]]
    ! $pgp || [[ "$stderr" = *"$esc: PGP signature not checked"* ]]
    ! grep -q '^nbdsum: forged' <<< "$stderr" || false
    ! LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' <<< "$stderr" || false
  done
}
