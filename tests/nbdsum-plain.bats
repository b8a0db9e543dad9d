#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum --plain[=ALG]: plain digests of the bytes, equal to
# sha256sum's (md5sum's, sha1sum's, sha512sum's, b3sum's) on every
# path: server-side through the plain-digest view, client-side
# (--client-side, a server without the filter, one that answers the
# view's name with the raw disk), local files, standard input; and
# nbdsum -c of sha256sum's files, Fedora's clear-signed CHECKSUM files,
# CRLF, and lines of a wrong length.

bats_require_minimum_version 1.5.0

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

# Random images: holes, zero runs written, data at odd places, odd
# sizes.
RANDOM_RECIPES=(
  '7340033;d:0+100000:a;z:1M+2M;d:3M+5:b;d:5000000+2340033:c'
  '5000001;d:100+3M:x;z:3500000+100000'
  '3145745;z:0+3145728'
  '9M;d:0+1M:a;d:5M+300000:b;d:8M+4097:c'
  '1048577;d:1048576+1:y'
)

setup_file () {
  local name i=0 r
  mkdir -p "$BATS_FILE_TMPDIR/v" "$BATS_FILE_TMPDIR/r"
  for name in $(vector_images); do
    build_vector_image "$name" "$BATS_FILE_TMPDIR/v"
  done
  for r in "${RANDOM_RECIPES[@]}"; do
    "$MKIMAGE" "$r" "$BATS_FILE_TMPDIR/r/r$i.img"
    i=$((i + 1))
  done
}

setup () {
  cd "$BATS_TEST_TMPDIR"
  V="$BATS_FILE_TMPDIR/v"
  R="$BATS_FILE_TMPDIR/r"
}

teardown () {
  kill_servers
}

# sumof DIGEST FILE: the hex coreutils' tool prints (blake3: b3sum's,
# else python3-blake3's, which the reference uses).
sumof () {
  case $1 in
    blake3)
      if command -v b3sum >/dev/null; then
        b3sum --no-names "$2"
      else
        "$PYTHON" -c 'import blake3, sys
print(blake3.blake3(open(sys.argv[1], "rb").read()).hexdigest())' "$2"
      fi ;;
    *) "$1sum" "$2" | cut -d' ' -f1 ;;
  esac
}

# The hex of a plain line, tagged or not.
plain_hex () {
  case $1 in
    *') = '*) echo "${1##*) = }" ;;
    *) echo "${1%% *}" ;;
  esac
}

# check_dir DIGEST DIR served|local|stdin [NBDSUM OPTIONS...]: every
# image of DIR, hashed from the server on $sock, as a local file or
# from standard input, has the reference digest; prints how many.
check_dir () {
  local d=$1 dir=$2 how=$3 f name want got n=0
  shift 3
  for f in "$dir"/*.img; do
    name=${f##*/}
    want=$(sumof "$d" "$f")
    case $how in
      served) run -0 "$NBDSUM" --plain="$d" "$@" "$(uri_of "$name")" ;;
      local) run -0 "$NBDSUM" --plain="$d" "$@" "$f" ;;
      stdin) run -0 "$NBDSUM" --plain="$d" "$@" - < "$f" ;;
    esac
    got=$(plain_hex "${lines[-1]}")
    [ "$got" = "$want" ] || {
      echo "$d $how $name: $got, not $want: $output"; return 1; }
    n=$((n + 1))
  done
  [ "$n" -gt 0 ]
  echo "$n"
}

@test "nbdsum-plain: the vectors' sha256 on every path, with the vectors' own value" {
  local f name want n=0
  start_server v --threads=4 file dir="$V"
  for f in "$V"/*.img; do
    name=${f##*/}
    want=$(vector_rows "${name%.img}" | head -n 1 | cut -f4)
    [ -n "$want" ]
    run -0 --separate-stderr "$NBDSUM" --plain "$(uri_of "$name")"
    [ "$output" = "SHA256 ($(uri_of "$name")) = $want" ] ||
      { echo "server-side $name: $output $stderr"; false; }
    # Server-side: no notice of hashing client-side.
    [ -z "$stderr" ] || { echo "$name: $stderr"; false; }
    run -0 "$NBDSUM" --plain --client-side "$(uri_of "$name")"
    [ "$(plain_hex "$output")" = "$want" ]
    run -0 "$NBDSUM" --plain "$f"
    [ "$output" = "SHA256 ($f) = $want" ]
    run -0 "$NBDSUM" --plain - < "$f"
    [ "$output" = "SHA256 (-) = $want" ]
    n=$((n + 1))
  done
  report "$n vector images"
  [ "$n" -ge 20 ]
}

@test "nbdsum-plain: the vectors' sha256 from a server without the filter, said once" {
  local f name want
  start_nbdkit nofilter file dir="$V"
  for f in "$V"/*.img; do
    name=${f##*/}
    want=$(vector_rows "${name%.img}" | head -n 1 | cut -f4)
    run -0 --separate-stderr "$NBDSUM" --plain "$(uri_of "$name")"
    [ "$(plain_hex "$output")" = "$want" ]
    [[ $stderr = *"hashing client-side"* ]]
  done
}

@test "nbdsum-plain: md5, sha1, sha256, sha512 of random images, server-side through file" {
  local d
  start_server f file dir="$R"
  for d in md5 sha1 sha256 sha512; do
    check_dir "$d" "$R" served
  done
}

@test "nbdsum-plain: md5, sha1, sha256, sha512 of random and vector images, client-side, with and without the filter" {
  local d
  start_server f file dir="$R"
  for d in md5 sha1 sha256 sha512; do
    check_dir "$d" "$R" served --client-side
  done
  # A server without the filter.
  start_nbdkit g file dir="$R"
  for d in md5 sha1 sha256 sha512; do
    check_dir "$d" "$R" served -q
  done
  start_nbdkit h file dir="$V"
  for d in md5 sha512; do
    check_dir "$d" "$V" served -q
  done
}

@test "nbdsum-plain: md5, sha1, sha256, sha512 of local files and standard input" {
  local d
  for d in md5 sha1 sha256 sha512; do
    check_dir "$d" "$R" local
    check_dir "$d" "$R" stdin
  done
  for d in sha1 sha256; do
    check_dir "$d" "$V" local
  done
}

@test "nbdsum-plain: server-side through memory, written by nbdcopy (holes from zeros)" {
  local f d size
  for f in "$R"/*.img; do
    size=$(stat -c %s "$f")
    for d in md5 sha256; do
      run -0 --separate-stderr serve memory "$size" -- \
        "nbdcopy '$f' \"\$uri\" && '$NBDSUM' --plain=$d \"\$uri\""
      [ "$(plain_hex "$output")" = "$(sumof "$d" "$f")" ] ||
        { echo "$f $d: $output $stderr"; false; }
      [ -z "$stderr" ] || { echo "$stderr"; false; }
    done
  done
}

@test "nbdsum-plain: blake3 equals b3sum's on every path" {
  need_digest blake3
  command -v b3sum >/dev/null || "$PYTHON" -c 'import blake3' ||
    skip "neither b3sum nor python3-blake3 to check blake3 against"
  start_server f file dir="$R"
  check_dir blake3 "$R" served
  check_dir blake3 "$R" served --client-side
  check_dir blake3 "$R" local
  check_dir blake3 "$R" stdin
}

@test "nbdsum-plain: the server answering the view's name with the raw disk: client-side, sha256sum's value" {
  local f="$R/r0.img"
  # The file plugin serves the same bytes under every export name.
  start_nbdkit liar file "$f"
  run -0 --separate-stderr "$NBDSUM" --plain "$uri"
  [ "$(plain_hex "$output")" = "$(sumof sha256 "$f")" ]
  [[ $stderr = *"no plain-digest view"*"hashing client-side"* ]]
  # Its first bytes a plain-digest view's magic, and no more: refused
  # as a header, hashed client-side all the same.
  cp "$f" liar.img
  printf 'BLKPLAN1' | dd of=liar.img conv=notrunc status=none
  kill_servers
  start_nbdkit liar2 file liar.img
  run -0 --separate-stderr "$NBDSUM" --plain=sha1 "$uri"
  [ "$(plain_hex "$output")" = "$(sumof sha1 liar.img)" ]
  [[ $stderr = *"hashing client-side"* ]]
}

@test "nbdsum-plain: sha256sum -c and md5sum -c accept its lines of local files" {
  cp "$R/r1.img" "$R/r4.img" .
  "$NBDSUM" --plain r1.img r4.img > TAGGED
  grep -q '^SHA256 (r1.img) = ' TAGGED
  run -0 sha256sum -c TAGGED
  [ "${lines[0]}" = "r1.img: OK" ]
  # -j: the same lines, in order.
  run -0 "$NBDSUM" -j 2 --plain r1.img r4.img
  [ "$output" = "$(cat TAGGED)" ]
  "$NBDSUM" --plain --untagged r1.img r4.img > UNTAGGED
  [ "$(cat UNTAGGED)" = "$(sha256sum r1.img r4.img)" ]
  run -0 sha256sum -c UNTAGGED
  "$NBDSUM" --plain=md5 r1.img > MD5
  [ "$(cat MD5)" = "$(md5sum --tag r1.img)" ]
  run -0 md5sum -c MD5
  # And they fail once a byte changes.
  printf 'Z' | dd of=r1.img bs=1 seek=200 conv=notrunc status=none
  run -1 sha256sum -c TAGGED
}

@test "nbdsum-plain: -c of sha256sum --tag and sha256sum files, OK then FAILED" {
  cp "$R/r0.img" "$R/r2.img" .
  sha256sum --tag r0.img r2.img > SHA256SUMS
  sha1sum --tag r0.img >> SHA256SUMS
  sha512sum --tag r2.img >> SHA256SUMS
  md5sum --tag r0.img >> SHA256SUMS
  run -0 "$NBDSUM" -c SHA256SUMS
  [ "$output" = "$(printf '%s: OK\n' r0.img r2.img r0.img r2.img r0.img)" ]
  run -0 "$NBDSUM" -j 3 -c SHA256SUMS
  [ "${#lines[@]}" -eq 5 ]
  sha256sum r0.img r2.img > UNTAGGED
  run -0 "$NBDSUM" --plain -c UNTAGGED
  [ "$output" = "$(printf '%s: OK\n' r0.img r2.img)" ]
  # Without --plain, untagged lines are blkhash checksums: no match,
  # and nbdsum says what to do.
  run -1 --separate-stderr "$NBDSUM" -c UNTAGGED
  [[ $stderr = *"check them with --plain"* ]]
  md5sum r0.img > MD5SUMS
  run -0 "$NBDSUM" --plain=md5 -c MD5SUMS
  # One byte changed: FAILED, exit 1.
  printf 'Z' | dd of=r0.img bs=1 seek=70000 conv=notrunc status=none
  run -1 --separate-stderr "$NBDSUM" -c SHA256SUMS
  [ "${lines[0]}" = "r0.img: FAILED" ]
  [ "${lines[1]}" = "r2.img: OK" ]
  [ "${lines[2]}" = "r0.img: FAILED" ]
  [[ $stderr = *"3 computed checksums did NOT match"* ]]
  run -1 "$NBDSUM" --plain -c UNTAGGED
  [ "${lines[0]}" = "r0.img: FAILED" ]
}

@test "nbdsum-plain: -c of a clear-signed Fedora CHECKSUM file with CRLF, comments and dash-escapes" {
  local f
  cp "$R/r1.img" disk-a.qcow2
  cp -- "$R/r3.img" '- dash.img'
  {
    echo '-----BEGIN PGP SIGNED MESSAGE-----'
    echo 'Hash: SHA256'
    echo
    echo "# disk-a.qcow2: $(stat -c %s disk-a.qcow2) bytes"
    sha256sum --tag disk-a.qcow2
    # A line starting with '-' is dash-escaped in a clear signature.
    sha256sum --tag -- '- dash.img' | sed 's/^/- /'
    echo '-----BEGIN PGP SIGNATURE-----'
    echo
    echo 'iQIzBAEBCAAdFiEEdGVzdCBzaWduYXR1cmUgbm90IHJlYWwAAAAAAAAAAAAA'
    echo '=AbCd'
    echo '-----END PGP SIGNATURE-----'
    # After the signature: not signed, not checked.
    echo "SHA256 (missing.img) = $(printf '%064d' 0)"
  } | sed 's/$/\r/' > Fedora-Cloud-41-x86_64-CHECKSUM
  # The published file's qcow2 line is of the file's bytes.
  run -0 --separate-stderr "$NBDSUM" -c Fedora-Cloud-41-x86_64-CHECKSUM
  [ "$output" = "$(printf '%s: OK\n' disk-a.qcow2 '- dash.img')" ]
  [ "$stderr" = "nbdsum: Fedora-Cloud-41-x86_64-CHECKSUM: PGP signature not checked (verify it with gpgv)" ]
  # -q keeps the notice, --status silences everything.
  run -0 --separate-stderr "$NBDSUM" -q -c Fedora-Cloud-41-x86_64-CHECKSUM
  [ -z "$output" ]
  [[ $stderr = *"PGP signature not checked"* ]]
  run -0 --separate-stderr "$NBDSUM" --status -c Fedora-Cloud-41-x86_64-CHECKSUM
  [ -z "$output" ] && [ -z "$stderr" ]
  printf 'Z' | dd of=disk-a.qcow2 bs=1 seek=5 conv=notrunc status=none
  run -1 --separate-stderr "$NBDSUM" -c Fedora-Cloud-41-x86_64-CHECKSUM
  [ "${lines[0]}" = "disk-a.qcow2: FAILED" ]
  [ "${lines[1]}" = "- dash.img: OK" ]
}

@test "nbdsum-plain: a line of the wrong length for its digest is improperly formatted" {
  cp "$R/r4.img" .
  echo "SHA256 (r4.img) = $(sumof md5 r4.img)" > BAD
  run -1 --separate-stderr "$NBDSUM" -w -c BAD
  [[ $stderr = *"BAD: 1: improperly formatted"*"length"* ]]
  [[ $stderr = *"no properly formatted checksum lines"* ]]
  echo "$(sumof sha256 r4.img)  r4.img" > UNTAGGED
  run -1 --separate-stderr "$NBDSUM" --plain=sha1 -c UNTAGGED
  [[ $stderr = *"no properly formatted checksum lines"* ]]
  run -0 "$NBDSUM" --plain=sha256 -c UNTAGGED
}

@test "nbdsum-plain: -c of a file with blkhash and plain lines, server-side" {
  cp "$R/r0.img" .
  start_server m file r0.img
  {
    "$NBDSUM" "$uri"
    "$NBDSUM" --plain=sha512 "$uri"
    "$NBDSUM" -d sha1 r0.img
    "$NBDSUM" --plain r0.img
  } > MIXED
  grep -q '^SHA512 (' MIXED
  grep -q '^BLKHASH-SHA1/64K (' MIXED
  run -0 "$NBDSUM" -c MIXED
  [ "${#lines[@]}" -eq 4 ]
  run -0 "$NBDSUM" -j 4 -c MIXED
  [ "${#lines[@]}" -eq 4 ]
}

@test "nbdsum-plain: a qcow2 file is its guest content, tagged with the format; --format=raw its bytes" {
  local guest bytes
  cp "$R/r1.img" disk.raw
  # A multiple of 512: qemu's guest content is then the raw file.
  truncate -s 5M disk.raw
  qemu-img convert -f raw -O qcow2 disk.raw disk.qcow2
  guest=$(sumof sha256 disk.raw)
  bytes=$(sumof sha256 disk.qcow2)
  [ "$guest" != "$bytes" ]
  run -0 "$NBDSUM" --plain disk.qcow2
  [ "$output" = "SHA256:qcow2 (disk.qcow2) = $guest" ]
  echo "$output" > GUEST
  run -0 "$NBDSUM" --plain --format=raw disk.qcow2
  [ "$output" = "SHA256 (disk.qcow2) = $bytes" ]
  echo "$output" > BYTES
  run -0 "$NBDSUM" --plain --untagged --format=raw disk.qcow2
  [ "$output" = "$bytes  disk.qcow2" ]
  # Both lines check; sha256sum refuses the one it cannot check.
  run -0 "$NBDSUM" -c GUEST BYTES
  [ "$output" = "$(printf '%s: OK\n' disk.qcow2 disk.qcow2)" ]
  run -0 sha256sum -c BYTES
  run ! sha256sum -c GUEST
  # An untagged line cannot say the file was read as qcow2.
  run -1 --separate-stderr "$NBDSUM" --plain --untagged disk.qcow2
  [ -z "$output" ]
  [[ $stderr = *"read as qcow2: an untagged line cannot say so"* ]]
  # Standard input is its bytes.
  run -0 "$NBDSUM" --plain - < disk.qcow2
  [ "$output" = "SHA256 (-) = $bytes" ]
}

@test "nbdsum-plain: --json says the digest and that it is plain; -p draws progress" {
  cp "$R/r0.img" .
  run -0 --separate-stderr "$NBDSUM" --plain=sha1 --json -p r0.img
  "$PYTHON" - "$output" "$(sumof sha1 r0.img)" <<'PY'
import json, sys
doc = json.loads(sys.argv[1])
i = doc["inputs"][0]
assert i["checksum"] == sys.argv[2], i
assert i["digest"] == "sha1" and i["plain"] is True, i
assert "block-size" not in i, i
assert doc["failed"] == 0
PY
  [[ $stderr = *"r0.img"*"100%"* ]] || { echo "$stderr"; false; }
  start_server p file r0.img
  run -0 --separate-stderr "$NBDSUM" --plain -p "$uri"
  [[ $stderr = *"100%"* ]] || { echo "$stderr"; false; }
}

@test "nbdsum-plain: --plain with a blkhash option is a usage error naming it" {
  local opt
  for opt in --blocks --diff --since=x --check-manifest --block-size=1M \
             "-d sha1"; do
    # shellcheck disable=SC2086
    run --separate-stderr "$NBDSUM" --plain $opt a b
    # --diff's usage errors are 2, as diff's.
    [ "$status" -eq "$([ "$opt" = --diff ] && echo 2 || echo 1)" ]
    [[ $stderr = *"--plain does not go with ${opt%%[= ]*}"* ]] ||
      { echo "$opt: $stderr"; false; }
  done
  run -1 --separate-stderr "$NBDSUM" --plain=sha3-256 a
  [[ $stderr = *"--plain=sha3-256: not a digest"* ]]
  run -1 --separate-stderr "$NBDSUM" --plain=nosuch a
  [[ $stderr = *"--plain=nosuch: unknown digest"* ]]
}

@test "nbdsum-plain: a signal stops a plain digest on either path, printing nothing" {
  local o p i
  # 1 TiB of holes: hours of digest input.
  start_server big "${KILLED_CLIENT_OPTS[@]}" memory 1T
  for o in --plain "--plain --client-side"; do
    # shellcheck disable=SC2086
    "$NBDSUM" $o -p "$uri" > out 2> err &
    p=$!
    # Once it is hashing: its first progress line.
    for ((i = 0; i < 600; i++)); do
      [ -s err ] && break
      sleep 0.1
    done
    kill -TERM "$p"
    # Once seen still running 60 s after SIGTERM (Debian 13, under
    # load, not repeated since): say where it waits if it does again.
    wait_exit "$p" 60 || {
      echo "$o: its standard error:"; cat err
      for t in /proc/"$p"/task/*; do
        echo "$t: $(cat "$t/comm") $(cat "$t/wchan"; echo) $(grep -E '^(State|SigBlk|SigCgt|SigPnd|ShdPnd)' "$t/status" | tr '\n' ' ')"
        echo "  syscall: $(cat "$t/syscall" 2>&1)"
        sed 's/^/  /' "$t/stack" 2>/dev/null || true
      done
      pstree -p "$p" 2>/dev/null || true
      # A probe: nbdsum's handler takes SIGPIPE as a first signal only
      # (a later one is ignored).  Ending with 141 now says the SIGTERM
      # never reached the handler; still running, that it did and
      # something else holds nbdsum.
      kill -PIPE "$p"
      if wait_exit "$p" 10; then
        echo "after SIGPIPE: exit status $rc"
      else
        echo "after SIGPIPE: still running"; kill -KILL "$p"
      fi
      false
    }
    [ "$rc" -eq 143 ] || { echo "$o: $rc"; cat err; false; }
    [ ! -s out ]
  done
  stop_server
}

@test "nbdsum-plain: a read error fails the input on either path, printing no digest" {
  local o
  cp "$R/r0.img" .
  sha256sum --tag r0.img > SUMS
  start_server e --filter=error file r0.img error-pread=EIO \
    error-pread-rate=100%
  for o in --plain "--plain --client-side"; do
    # shellcheck disable=SC2086
    run -1 --separate-stderr "$NBDSUM" $o "$uri"
    [ -z "$output" ]
    [[ $stderr = *"Input/output error"* ]] || { echo "$o: $stderr"; false; }
  done
  sed -i "s|(r0.img)|($uri)|" SUMS
  run -1 --separate-stderr "$NBDSUM" -c SUMS
  [ "$output" = "$uri: FAILED open or read" ]
}

@test "nbdsum-plain: published SHA256SUMS and a clear-signed CHECKSUM of URIs check server-side, OK then FAILED" {
  local u1 u2 f
  mkdir d
  cp "$R/r0.img" d/cloud.qcow2          # the bytes, as published
  cp "$R/r3.img" d/server.iso
  start_server pub file dir="$PWD/d"
  u1="nbd+unix:///cloud.qcow2?socket=$sock"
  u2="nbd+unix:///server.iso?socket=$sock"
  # SHA256SUMS as sha256sum writes it, the names made URIs.
  (cd d && sha256sum cloud.qcow2 server.iso) |
    sed "s|  cloud.qcow2|  $u1|; s|  server.iso|  $u2|" > SHA256SUMS
  # Fedora's CHECKSUM: sha256sum --tag lines and comments, clear-signed.
  {
    echo '-----BEGIN PGP SIGNED MESSAGE-----'
    echo 'Hash: SHA256'
    echo
    echo "# cloud.qcow2: $(stat -c %s d/cloud.qcow2) bytes"
    (cd d && sha256sum --tag cloud.qcow2 server.iso) |
      sed "s|(cloud.qcow2)|($u1)|; s|(server.iso)|($u2)|"
    echo '-----BEGIN PGP SIGNATURE-----'
    echo
    echo 'iQIzBAEBCAAdFiEE'
    echo '-----END PGP SIGNATURE-----'
  } > CHECKSUM
  run -0 --separate-stderr "$NBDSUM" --plain -c SHA256SUMS
  [ "$output" = "$(printf '%s: OK\n' "$u1" "$u2")" ]
  # Server-side: no notice of client-side hashing.
  [[ "$stderr" != *client-side* ]]
  run -0 --separate-stderr "$NBDSUM" -c CHECKSUM
  [ "$output" = "$(printf '%s: OK\n' "$u1" "$u2")" ]
  [[ "$stderr" != *client-side* ]]
  # One byte of one image changes on the storage.
  printf 'Z' | dd of=d/cloud.qcow2 bs=1 seek=777 conv=notrunc status=none
  for f in "--plain -c SHA256SUMS" "-c CHECKSUM"; do
    run -1 --separate-stderr "$NBDSUM" $f
    [ "${lines[0]}" = "$u1: FAILED" ]
    [ "${lines[1]}" = "$u2: OK" ]
    [[ "$stderr" = *"WARNING: 1 computed checksum did NOT match"* ]]
  done
}
