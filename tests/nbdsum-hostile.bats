#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum against views it must not trust: crafted headers, a view that
# does not describe its image or has none, a view whose reads fail, an
# export too small to be a view, a view that does not echo the nonce
# in its name (a file named like one).  Never a checksum of something
# else.  Crafted views are served by tests/echonbd.py, which answers
# the nonce as the filter would, so that the rest of the header is what
# is tested.

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

bats_require_minimum_version 1.5.0

setup_file () {
  "$MKIMAGE" '4M;d:0+1M:a;d:3M+100000:b' "$BATS_FILE_TMPDIR/small.img"
}

setup () {
  small="$BATS_FILE_TMPDIR/small.img"
  cd "$BATS_TEST_TMPDIR"
}

teardown () {
  kill_servers
}

# A file laid out like a view.
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

# nbdsum [OPTION]... on view FILE served as x@blkhash next to x, SIZE
# bytes of zeros, echoing the nonce: the view's image has the size it
# says.
# view_next_to_image FILE SIZE [OPTION]...
view_next_to_image () {
  local dir="$BATS_TEST_TMPDIR/views"
  rm -rf "$dir"
  mkdir "$dir"
  truncate -s "$2" "$dir/x"
  cp "$1" "$dir/x@blkhash"
  start_echo views "$dir"
  run "$NBDSUM" "${@:3}" "$(uri_of x)"
  kill_servers
}

@test "nbdsum-hostile: an export too small for a view is hashed client-side" {
  local f="$BATS_TEST_TMPDIR/small"
  "$MKIMAGE" '5000;d:0+5000:small' "$f"
  run nbdkit -U - file "$f" --run '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"no blkhash view"* ]]
  [ "$(grep -E '^[0-9a-f]{64}  ' <<< "$output" | cut -d' ' -f1)" = \
    "$(reference sha256 65536 "$f")" ]
}

@test "nbdsum-hostile: a well-formed crafted view is accepted: the rejections are of bad ones" {
  local f="$BATS_TEST_TMPDIR/view"
  craft_view "$f" 1048576 16 65536 32 sha256
  # Its digests, zeros, are not the image's (nor is any block's).
  view_next_to_image "$f" 1048576
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"the server's view disagrees with its data at block "* ]]
  # Without the spot check its header is all there is to judge.
  view_next_to_image "$f" 1048576 --no-spot-check
  echo "$output"
  [ "$status" -eq 0 ]
  # The crafted root area is zero, and nbdsum prints what the server says.
  [ "${output%% *}" = "$(printf '%064d' 0)" ]
  # Served under every name by the file plugin, it cannot echo the
  # nonce: not a view, and the file's own bytes are hashed.
  run nbdkit -U - file "$f" --run '"$NBDSUM" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"did not echo the nonce in its name"* ]]
  [ "$(first_sum "$output")" = "$(reference sha256 65536 "$f")" ]
}

# A file named like a view, beside a tampered image on a server
# without the filter, carries the golden image's checksum: nbdsum asks
# a name with a fresh nonce, which no file has, and hashes the image
# itself; -c of the golden image's published lines fails.
@test "nbdsum-hostile: forged @blkhash and @digest files beside a tampered image: the true checksum, and -c fails" {
  local golden bad
  mkdir dir
  "$MKIMAGE" '4M;d:0+1M:a' golden.img
  "$MKIMAGE" '4M;d:0+1M:b' dir/disk.img
  nbdkit -U - --filter="$BLKHASH_FILTER" file golden.img --run '
    nbdcopy "nbd+unix:///@blkhash?socket=$unixsocket" dir/disk.img@blkhash &&
    nbdcopy "nbd+unix:///@digest:sha256?socket=$unixsocket" \
      dir/disk.img@digest:sha256'
  golden=$(reference sha256 65536 golden.img)
  bad=$(reference sha256 65536 dir/disk.img)
  start_nbdkit plain file dir="$PWD/dir"
  run "$NBDSUM" --json "$(uri_of disk.img)"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"\"checksum\": \"$bad\""*"\"method\": \"client-side\""* ]]
  [[ "$output" != *"$golden"* ]]
  printf '%s  %s\n' "$golden" "$(uri_of disk.img)" > SUMS
  printf 'SHA256 (%s) = %s\n' "$(uri_of disk.img)" \
    "$(sha256sum < golden.img | cut -d' ' -f1)" >> SUMS
  run "$NBDSUM" -c SUMS
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$(grep -c ': FAILED$' <<< "$output")" -eq 2 ]
  # Through the filter the same files are never served as data.
  kill_servers
  start_server filtered file dir="$PWD/dir"
  run "$NBDSUM" "$(uri_of disk.img)"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$bad" ]
  # Asked by its name, the filter answers with its own view: the root
  # is the tampered image's, not the forged file's.
  [ "$(nbdcopy "$(uri_of 'disk.img@blkhash')" - |
       od -An -tx1 -j 4096 -N 32 | tr -d ' \n')" = "$bad" ]
}

# craft FILE [FIELD=VALUE]...: a view of a 1 MiB image, sha256, 64K
# blocks, with fields replaced.  Fields: magic version hsize size count
# bs dlen root digests name name_hex extra (bytes added to, or removed
# from, the digest area) truncate (the file's total length).
craft () {
  "$PYTHON" - "$@" <<'PY'
import struct, sys
f = dict(magic="BLKHASH1", version=1, hsize=4096, size=1 << 20, count=16,
         bs=65536, dlen=32, root=4096, digests=8192, name="sha256",
         extra=0, truncate=-1)
for a in sys.argv[2:]:
    k, v = a.split("=", 1)
    f[k] = v if k in ("magic", "name", "name_hex") else int(v)
name = bytes.fromhex(f["name_hex"]) if "name_hex" in f else f["name"].encode()
h = f["magic"].encode() + struct.pack("<IIQQIIQQ", f["version"], f["hsize"],
                                      f["size"], f["count"], f["bs"],
                                      f["dlen"], f["root"], f["digests"])
h += name[:64].ljust(64, b"\0")
h = h.ljust(4096, b"\0") + bytes(4096)
body = bytes(max(0, min(f["count"], 1 << 16) * min(f["dlen"], 4096) + f["extra"]))
data = h + body
if f["truncate"] >= 0:
    data = data[:f["truncate"]]
with open(sys.argv[1] + ".tmp", "wb") as fp:
    fp.write(data)
PY
  mv "$1.tmp" "$1"
}

@test "nbdsum-hostile: hostile view headers: nbdsum rejects them, no checksum, no crash" {
  local dir="$BATS_TEST_TMPDIR/dir" st out case_ msg errf n=0 want
  local -a fields
  mkdir "$dir"
  "$MKIMAGE" '1M;d:0+300000:x' "$dir/x"
  want=$(reference sha256 65536 "$dir/x")
  errf="$BATS_TEST_TMPDIR/nbdsum.err"
  start_echo hostile "$dir"

  # The controls: well-formed crafted views are accepted as they are
  # (their digests, zeros, are not x's: only the spot check sees it).
  craft "$dir/x@blkhash"
  out=$(timeout 30 "$NBDSUM" --no-spot-check "$(uri_of x)")
  [ "$(first_sum "$out")" = "$(printf '%064d' 0)" ]
  craft "$dir/x@blkhash" bs=98304 count=11 dlen=16 name=shake128
  out=$(timeout 30 "$NBDSUM" --no-spot-check "$(uri_of x)")
  [ "$(first_sum "$out")" = "$(printf '%032d' 0)" ]

  # FIELDS|expected message
  while IFS='|' read -r case_ msg; do
    [ -n "$case_" ] || continue
    read -ra fields <<< "$case_"
    craft "$dir/x@blkhash" "${fields[@]}"
    st=0
    out=$(timeout 30 "$NBDSUM" "$(uri_of x)" 2>"$errf") || st=$?
    echo "$case_: status $st: $out $(cat "$errf")"
    n=$((n + 1))
    [ "$st" -eq 1 ]
    [ -z "$out" ]
    grep -q "invalid blkhash view" "$errf"
    grep -qF "$msg" "$errf"
  done <<'EOF'
dlen=0|invalid digest length
dlen=65|invalid digest length
dlen=4096|invalid digest length
dlen=4294967295|invalid digest length
dlen=64|sha256 digests are 32 bytes, not 64
dlen=16 name=sha256|sha256 digests are 32 bytes, not 16
count=17|block count does not match image size
count=0|block count does not match image size
count=18446744073709551615|block count does not match image size
size=0|block count does not match image size
size=9223372036854775808 count=140737488355328|impossible image size
size=18446744073709551615 count=281474976710656|impossible image size
name=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa|digest name is not terminated
name_hex=736861323536006a756e6b|digest name padding is not zero
name=|digest name is empty
name=nosuch|digest 'nosuch': unknown digest
name=sha1|sha1 digests are 20 bytes, not 32
name=SHA256x|unknown digest
hsize=0|unexpected header size
hsize=4095|unexpected header size
hsize=8192|unexpected header size
version=0|unsupported view format version
version=2|unsupported view format version
root=0|unexpected root or digests offset
root=4097|unexpected root or digests offset
digests=4096|unexpected root or digests offset
digests=0|unexpected root or digests offset
bs=0|invalid block size
bs=12289|invalid block size
bs=100000 count=11|invalid block size
bs=98304|block count does not match image size
bs=98304 count=11 dlen=32 name=shake128|shake128 digests are 16 bytes, not 32
bs=98304 count=11 dlen=16 name=shake256|shake256 digests are 32 bytes, not 16
bs=2147483648|invalid block size
bs=33554432 count=1|invalid block size
extra=-1|does not match the header
extra=-512|does not match the header
extra=-512 truncate=8192|does not match the header
extra=1|does not match the header
size=4611686018427387904 count=274877906944 bs=16777216|does not match the header
size=4611686018427387904 count=1125899906842624 bs=4096 dlen=64 name=sha512|does not match the header
EOF
  report "$n hostile headers rejected"

  # Not a view at all (short, or no magic): hashed client-side, which
  # gives x's own checksum; a failure is acceptable, a wrong sum is not.
  for case_ in truncate=100 truncate=4095 truncate=8191 magic=BLKHASH2 \
               magic=XXXXXXXX; do
    craft "$dir/x@blkhash" "$case_"
    st=0
    out=$(timeout 30 "$NBDSUM" "$(uri_of x)" 2>"$errf") || st=$?
    echo "$case_: status $st: $out $(cat "$errf")"
    if [ "$st" -eq 0 ]; then
      [ "$(first_sum "$out")" = "$want" ]
    else
      [ "$st" -eq 1 ]
      [ -z "$out" ]
      [ -s "$errf" ]
    fi
  done
  kill_servers
}

@test "nbdsum-hostile: a view whose reads fail: nbdsum fails, no checksum" {
  local dir="$BATS_TEST_TMPDIR/dir" st out errf="$BATS_TEST_TMPDIR/err"
  mkdir "$dir"
  "$MKIMAGE" '1M;d:0+300000:x' "$dir/x"
  craft "$dir/x@blkhash"
  start_nbdkit failing --filter=error file dir="$dir" error-pread=EIO \
    error-pread-rate=100% error-cache=EIO error-cache-rate=100%
  for opt in "" --client-side; do
    st=0
    out=$(timeout 30 "$NBDSUM" $opt "$(uri_of x)" 2>"$errf") || st=$?
    echo "nbdsum $opt: status $st: $out $(cat "$errf")"
    [ "$st" -eq 1 ]
    [ -z "$out" ]
    grep -q 'Input/output error' "$errf"
  done
  stop_server
}

@test "nbdsum-hostile: a blkhash view that does not describe its image is refused" {
  local want
  want=$(reference sha256 65536 "$small")
  mkdir dir
  # The filter's view of small.img, served next to x by the file plugin.
  nbdkit -U - --filter="$BLKHASH_FILTER" file "$small" \
    --run 'nbdcopy "nbd+unix:///@blkhash?socket=$unixsocket" dir/x@blkhash'
  cp "$small" dir/x
  start_echo views "$PWD/dir"
  # The control: next to its own image, it is trusted.
  run "$NBDSUM" "$(uri_of x)"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$want  $(uri_of x)" ]
  # The image is not the one the view describes.
  truncate -s 8M dir/x
  run "$NBDSUM" "$(uri_of x)"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: $(uri_of x): the view 'x@blkhash' describes a 4194304 byte image, but export 'x' has 8388608 bytes: not trusting it" ]
  run "$NBDSUM" --blocks "$(uri_of x)"
  [ "$status" -eq 1 ]
  [[ "$output" = *"describes a 4194304 byte image"* ]]
  run "$NBDSUM" --diff "$(uri_of x)" "$small"
  [ "$status" -eq 2 ]
  [[ "$output" = *"describes a 4194304 byte image"* ]]
  # Hashing the image itself is another matter.
  run "$NBDSUM" --client-side "$(uri_of x)"
  [ "$status" -eq 0 ]
  truncate -s 2M dir/x
  run "$NBDSUM" "$(uri_of x)"
  [ "$status" -eq 1 ]
  [[ "$output" = *"describes a 4194304 byte image, but export 'x' has 2097152 bytes"* ]]
  # A view without its image.
  rm dir/x
  run "$NBDSUM" "$(uri_of x)"
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" = *"the view 'x@blkhash' has no image: "*"No such file or directory"* ]]
  ! grep -qE '[0-9a-f]{64}' <<< "$output" || false
}

@test "nbdsum-hostile: a server that admits one client: the view is checked once closed, over one connection" {
  local want
  want=$(reference sha256 65536 "$small")
  # nbdsum cannot ask the image's size on a connection of its own
  # while the view's is open: it does once that is closed.
  start_server one --filter=limit file "$small" limit=1
  run "$NBDSUM" -C 1 "$uri"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$want  $uri" ]
  # With the default -C 4 too, over the one connection it admits (it
  # failed: "server disconnected unexpectedly"), server- and
  # client-side.
  run "$NBDSUM" "$uri"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"the server took 1 of 4 connections ("*"): hashing over 1"* ]]
  [ "$(first_sum "$output")" = "$want" ]
  run "$NBDSUM" --client-side "$uri"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$want" ]
}

# Review: hashed client-side, the server's refusal of an extra
# connection reaches nbdsum as its private nbdkit's refusal ("No such
# file or directory"), and the reason, in that nbdkit's log, was
# printed raw at the end ("nbdkit: nbd[2]: error: ...").  The notice
# names the reason; nothing of the private nbdkit is left to print.
# echonbd.py admits nbdsum's look for a view and the private nbdkit's
# first connection, then refuses as nbdkit --filter=limit limit=1
# does (whose slot, though, is free again only once the server has
# seen a client go: nbdsum's next connection can come first).
@test "nbdsum-hostile: client-side, a server that admits one client: the notice names its refusal" {
  local want
  mkdir srv
  "$MKIMAGE" '4M;d:0+1M:a' srv/img
  want=$(reference sha256 65536 srv/img)
  start_echo two "$PWD/srv" --refuse-after=2
  run --separate-stderr "$NBDSUM" "nbd+unix:///img?socket=$sock"
  echo "status $status; stdout: $output; stderr: $stderr"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$want" ]
  # libnbd's words for the closed socket vary with when it is seen
  # ("recv: server disconnected unexpectedly", "external event 0 is
  # invalid in state CONNECT.START: ..."): said plainly.
  [[ "$stderr" = *"the server took 1 of 4 connections (nbdsum's private nbdkit: the server closed its connection before greeting it): hashing over 1"* ]]
  ! grep -q '^nbdkit: ' <<< "$stderr" || false
  ! grep -q 'connections (.*No such file' <<< "$stderr" || false
}

# Review: a server that closed nbdsum's connection before greeting it
# and then died was said to have closed it before greeting it (does
# it admit one client at a time?), the first try's words: the next
# try's refused connect, failing in nbd_aio_connect_uri, left them.
@test "nbdsum-hostile: a server that closes the connection before greeting it, then dies: the refused connect is said, not the close" {
  mkdir srv
  "$MKIMAGE" '1M;d:0+64K:a' srv/img
  start_echo dies "$PWD/srv" --refuse-after=0 --exit-on-refusal
  run --separate-stderr timeout 60 "$NBDSUM" "nbd+unix:///img?socket=$sock"
  echo "status $status; stdout: $output; stderr: $stderr"
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  [[ "$stderr" = *"Connection refused"* ]]
  [[ "$stderr" != *"before greeting"* ]]
}

@test "nbdsum-hostile: a disk forging a views-only view header is not believed: it does not echo the nonce, and is hashed as a disk" {
  # The file plugin serves the disk under every name: its first 4 KiB
  # a view header saying the server refuses the image (views-only),
  # its root the digest of another image.
  "$PYTHON" - guest.img "$small" <<'PY'
import hashlib, struct, sys
path, other = sys.argv[1:3]
n = 4 << 20
# The view size (8192 + a byte per span, or 32 per block) is the
# disk's, so that only the image's own size could give it away.
for magic, count, bs, fill in ((b"BLKPLAN1", n - 8192, 1 << 20, b"\x01"),
                               (b"BLKHASH1", (n - 8192) // 32, 65536, b"\0")):
    h = bytearray(4096)
    h[:8] = magic
    size = count * bs
    struct.pack_into("<IIQQIIQQ", h, 8, 1, 4096, size, count, bs, 32,
                     4096, 8192)
    h[56:62] = b"sha256"
    struct.pack_into("<I", h, 120, 1)          # views-only
    root = bytearray(4096)
    root[:32] = hashlib.sha256(open(other, "rb").read()).digest()
    body = fill * (count if magic == b"BLKPLAN1" else count * 32)
    open(path + "." + magic.decode(), "wb").write(
        (bytes(h) + bytes(root) + body).ljust(n, b"\0"))
PY
  local f
  for f in guest.img.BLKPLAN1 guest.img.BLKHASH1; do
    start_nbdkit "forge-${f##*.}" file "$PWD/$f"
    if [ "${f##*.}" = BLKPLAN1 ]; then
      run "$NBDSUM" --plain "$uri"
    else
      run "$NBDSUM" "$uri"
    fi
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" = *"did not echo the nonce in its name"* ]]
    [[ "$output" != *"$(sha256sum < "$small" | cut -d' ' -f1)"* ]]
    if [ "${f##*.}" = BLKPLAN1 ]; then
      [[ "$output" = *"= $(sha256sum < "$f" | cut -d' ' -f1)" ]]
    else
      [ "$(first_sum "$output")" = "$(reference sha256 65536 "$f")" ]
    fi
    kill_servers
  done
}

@test "nbdsum-hostile: a view header claiming an image over the size limit is refused at once" {
  local size=$((2 << 50))
  mkdir dir
  # A plain-digest view of 2 TiB (a byte per 1 MiB span) beside a
  # sparse image of that size, which nbdsum would otherwise take at its
  # word; and 2 PiB of 64K blocks (a 1 TiB view, sparse).  The limit
  # is on the outer hash: 2 PiB of 16M blocks would pass.
  truncate -s 2T dir/x
  craft dir/x@digest:sha256 magic=BLKPLAN1 size=$((2 << 40)) \
    count=$((2 << 20)) bs=$((1 << 20))
  craft dir/x@blkhash size=$size count=$((size >> 16)) bs=65536
  truncate -s $((8192 + (size >> 16) * 32)) dir/x@blkhash
  start_echo views "$PWD/dir"
  run timeout 120 "$NBDSUM" --plain "$(uri_of x)"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: $(uri_of x): the view 'x@digest:sha256' says the image is 2199023255552 bytes (2 TiB), over the limit of 1 TiB for a plain digest: --max-size=SIZE lifts it (0: no limit)" ]
  run timeout 120 "$NBDSUM" "$(uri_of x)"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: $(uri_of x): the view 'x@blkhash' says the image is 2251799813685248 bytes (2 PiB), over the limit of 1 PiB for a blkhash checksum: --max-size=SIZE lifts it (0: no limit)" ]
}

# The view's block digests are spot-checked against the image's blocks
# read client-side.  A lie in every block fails whatever blocks are
# drawn.
@test "nbdsum-hostile: a view whose digests are another image's, beside this one: the spot check refuses it; --no-spot-check believes it" {
  local golden
  mkdir dir
  "$MKIMAGE" '4M;d:0+4M:golden' golden.img
  "$MKIMAGE" '4M;d:0+4M:tampered' dir/x
  nbdkit -U - --filter="$BLKHASH_FILTER" file golden.img \
    --run 'nbdcopy "nbd+unix:///@blkhash?socket=$unixsocket" dir/x@blkhash'
  golden=$(reference sha256 65536 golden.img)
  start_echo views "$PWD/dir"
  run --separate-stderr "$NBDSUM" "$(uri_of x)"
  echo "$output $stderr"
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  [[ "$stderr" = "nbdsum: $(uri_of x): the server's view disagrees with its data at block "[0-9]*" (offset "[0-9]*"): not trusting it; or the image changed during the run" ]]
  run "$NBDSUM" --spot-check=1 --blocks "$(uri_of x)"
  [ "$status" -eq 1 ]
  [[ "$output" = *"disagrees with its data"* ]]
  [[ "$output" != *"$golden"* ]]
  run --separate-stderr "$NBDSUM" --json "$(uri_of x)"
  [ "$status" -eq 1 ]
  [[ "$output" = *'"error": "the server'\''s view disagrees with its data at block '* ]]
  [[ "$output" != *'"checksum"'* ]]
  # It is the only check of the digests: without it, the lie passes.
  for opt in --no-spot-check --spot-check=0; do
    run "$NBDSUM" --json "$opt" "$(uri_of x)"
    echo "$opt: $output"
    [ "$status" -eq 0 ]
    [[ "$output" = *"\"checksum\": \"$golden\""*'"spot-checked": 0'* ]]
  done
  run "$NBDSUM" --client-side "$(uri_of x)"
  [ "$(first_sum "$output")" = "$(reference sha256 65536 dir/x)" ]
}

# The filter's own view gone stale: blkhash-cache=true keeps digests
# across sessions on the operator's word that nothing else writes the
# image, and another program rewrites every block of it.
@test "nbdsum-hostile: a stale view (blkhash-cache=true, the image rewritten outside nbdkit) fails the spot check" {
  local old
  "$MKIMAGE" '4M;d:0+4M:before' disk.img
  start_server stale file "$PWD/disk.img" blkhash-cache=true
  run "$NBDSUM" "$uri"
  [ "$status" -eq 0 ]
  old=$(first_sum "$output")
  [ "$old" = "$(reference sha256 65536 disk.img)" ]
  "$MKIMAGE" '4M;d:0+4M:after' after.img
  dd if=after.img of=disk.img conv=notrunc status=none
  run --separate-stderr "$NBDSUM" "$uri"
  echo "$output $stderr"
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  [[ "$stderr" = *"the server's view disagrees with its data at block "* ]]
  # The stale checksum, without the check.
  run "$NBDSUM" --no-spot-check "$uri"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$old" ]
  run "$NBDSUM" --client-side "$uri"
  [ "$(first_sum "$output")" = "$(reference sha256 65536 disk.img)" ]
}

# The draw favours the blocks the image's extents call data: 8 stale
# data blocks among 1024 (the others holes, the last one too) are found
# by every seed (NBDSUM_SPOT_SEED, for tests), where 15 blocks drawn
# uniformly would miss them 9 times in 10.
@test "nbdsum-hostile: the spot check draws data blocks: stale data in a sparse image is found" {
  local b seed
  truncate -s 64M disk.img
  for b in 3 200 201 517 640 800 901 1000; do
    seeded_bytes 65536 "a$b" |
      dd of=disk.img bs=65536 seek="$b" conv=notrunc status=none
  done
  start_server stale file "$PWD/disk.img" blkhash-cache=true
  run "$NBDSUM" "$uri"
  [ "$status" -eq 0 ]
  for b in 3 200 201 517 640 800 901 1000; do
    seeded_bytes 65536 "b$b" |
      dd of=disk.img bs=65536 seek="$b" conv=notrunc status=none
  done
  for seed in 1 2 3 4 5 6 7 8; do
    run env NBDSUM_SPOT_SEED="$seed" "$NBDSUM" "$uri"
    echo "seed $seed: $output"
    [ "$status" -eq 1 ]
    [[ "$output" = *"disagrees with its data at block "* ]]
  done
}

# The hostile review and the campaign: true block digests under a root
# made up.  The spot check passes (the digests are true); the root,
# folded here from them, is refused, and --blocks, which reads them
# all, fails too.  Without the check the made-up root is believed, as
# nbdsum(1) says.
@test "nbdsum-hostile: a made-up root over true block digests is refused: folded here from them" {
  local fake
  mkdir dir
  "$MKIMAGE" '4M;d:0+1M:a;d:3M+100K:b' dir/x
  nbdkit -U - --filter="$BLKHASH_FILTER" file dir/x \
    --run 'nbdcopy "nbd+unix:///@blkhash?socket=$unixsocket" dir/x@blkhash'
  fake=$(printf 'ab%.0s' {1..32})
  printf "$(sed 's/../\\x&/g' <<< "$fake")" |
    dd of=dir/x@blkhash bs=1 seek=4096 conv=notrunc status=none
  start_echo views "$PWD/dir"
  run --separate-stderr "$NBDSUM" --json "$(uri_of x)"
  echo "$output $stderr"
  [ "$status" -eq 1 ]
  [[ "$output" = *"is not the one its block digests give ($(reference sha256 65536 dir/x))"* ]]
  [[ "$output" != *"\"checksum\": \"$fake\""* ]]
  run --separate-stderr "$NBDSUM" --no-spot-check --blocks "$(uri_of x)"
  echo "$status: $stderr"
  [ "$status" -eq 1 ]
  [[ "$stderr" = *"the server's checksum $fake is not the one its block digests give"* ]]
  # A refusal prints nothing: not the manifest headed by the made-up
  # root (the campaign, seed 20261130: it came before the error).
  [ -z "$output" ]
  run "$NBDSUM" --no-spot-check "$(uri_of x)"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$fake" ]
}

# Review: a server without the filter that admits nbdsum's own
# connections, then refuses its private nbdkit's (a one-client server
# whose slot another job of -j took: nbdkit --filter=limit closes an
# extra client's connection unanswered, as echonbd.py --refuse-after).
# nbdsum said its private nbdkit "has no view of it", after nbdkit's
# raw "nbdkit: nbd[1]: error: ".
# refused_front OPTION...: nbdsum on srv/img, served by echonbd.py to
# its first client only (nbdsum's look for a view, its check of the
# export), TMPDIR=tmp.
refused_front () {
  kill_servers
  start_echo one "$PWD/srv" --refuse-after=1
  run --separate-stderr env TMPDIR="$PWD/tmp" timeout 60 "$NBDSUM" "$@"
  echo "nbdsum $*: status $status; stdout: $output; stderr: $stderr"
  [ "$status" -eq 1 ]
  [ -z "$(ls -A tmp)" ]
}

@test "nbdsum-hostile: a server that refuses the private nbdkit's connection is named for it" {
  local u cause="the server refused or dropped the connection of nbdsum's private nbdkit --filter=blkhash to it, after admitting nbdsum's own (does it take fewer clients?): the server closed its connection before greeting it"
  mkdir srv tmp
  "$MKIMAGE" '4M;d:0+1M:a' srv/img
  u="nbd+unix:///img?socket=$BATS_TEST_TMPDIR/one.sock"
  refused_front -q "$u"
  [ -z "$output" ]
  [ "$(wc -l <<< "$stderr")" -eq 1 ]
  [ "$stderr" = "nbdsum: $u: $cause" ]
  [[ "$stderr" != *"nbdkit: nbd["* ]]
  [[ "$stderr" != *"has no view"* ]]
  printf '%064d  %s\n' 0 "$u" > SUMS
  refused_front -q -c SUMS
  [ "$output" = "$u: FAILED open or read" ]
  [ "$stderr" = "nbdsum: $u: $cause
nbdsum: WARNING: 1 listed file could not be read" ]
  refused_front --json "$u"
  [[ "$output" = *"\"error\": \"$cause\""* ]]
  [[ "$output" != *"nbdkit: nbd["* ]]
}

# A server that does not negotiate (NBD's oldstyle handshake, nbdkit
# -o) has no export names, so no views: nbdsum failed with libnbd's
# "nbd_set_export_name: invalid state: READY", or "nbd_aio_opt_info:
# invalid state" with --plain, nothing saying why.
@test "nbdsum-hostile: an oldstyle server is refused, naming its handshake" {
  local opts cause="the server speaks NBD's oldstyle protocol, without options (no export names, so no views): nbdsum needs a newstyle server"
  mkdir tmp
  start_nbdkit old -o pattern 1M
  for opts in "" --client-side --plain "-C 1" --bmap --blocks --json; do
    # shellcheck disable=SC2086
    run --separate-stderr env TMPDIR="$PWD/tmp" timeout 60 "$NBDSUM" \
      $opts "$uri"
    echo "nbdsum $opts: status $status; stdout: $output; stderr: $stderr"
    [ "$status" -eq 1 ]
    if [ "$opts" = --json ]; then
      [[ "$output" = *"\"error\": \"$cause\""* ]]
    else
      [ -z "$output" ]
      [ "$stderr" = "nbdsum: $uri: $cause" ]
    fi
    [ -z "$(ls -A tmp)" ]
  done
}

# A newstyle server without the fixed flag negotiates (libnbd sends it
# NBD_OPT_EXPORT_NAME) but cannot refuse a name: it closes the
# connection.  nbdsum asked it for a view so, and failed with libnbd's
# bare "recv: server disconnected unexpectedly"; it has no views.
@test "nbdsum-hostile: a newstyle server without the fixed flag has no views: hashed client-side, saying so" {
  local want plain opts notice="the server speaks NBD's newstyle protocol without the fixed flag (it cannot refuse a name but by hanging up), so has no views; hashing client-side"
  mkdir srv tmp
  "$MKIMAGE" '4M;d:0+1M:a;d:3M+100000:b' srv/img
  want=$(reference sha256 65536 srv/img)
  plain=$(sha256sum < srv/img | cut -d' ' -f1)
  start_echo nf "$PWD/srv" --not-fixed
  u="nbd+unix:///img?socket=$sock"
  for opts in "" "-C 1" --client-side --plain --bmap; do
    # shellcheck disable=SC2086
    run --separate-stderr env TMPDIR="$PWD/tmp" timeout 60 "$NBDSUM" \
      $opts "$u"
    echo "nbdsum $opts: status $status; stdout: $output; stderr: $stderr"
    [ "$status" -eq 0 ]
    case $opts in
      --plain) [ "$output" = "SHA256 ($u) = $plain" ] ;;
      --bmap) [[ "$output" = "<?xml"* ]] ;;
      *) [ "$output" = "$want  $u" ] ;;
    esac
    if [ "$opts" = --client-side ]; then
      [ -z "$stderr" ]
    else
      [ "$stderr" = "nbdsum: $u: $notice" ]
    fi
    [ -z "$(ls -A tmp)" ]
  done
}

# Such a server has no NBD_OPT_INFO either: nbdsum took the image as
# there, and its private nbdkit's connection, hung up on at the name,
# was tried again for 3 s and said refused "after admitting nbdsum's
# own (does it take fewer clients?)".  Going to the export checks it.
@test "nbdsum-hostile: a newstyle server without the fixed flag, a name it does not serve: said at once, as the export's" {
  local opts
  mkdir srv tmp
  "$MKIMAGE" '1M;d:0+1M:a' srv/img
  start_echo nf "$PWD/srv" --not-fixed
  u="nbd+unix:///nosuch?socket=$sock"
  for opts in "" --client-side --plain --bmap; do
    # shellcheck disable=SC2086
    run --separate-stderr env TMPDIR="$PWD/tmp" timeout 60 "$NBDSUM" \
      $opts "$u"
    echo "nbdsum $opts: status $status; stdout: $output; stderr: $stderr"
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [ "$stderr" = "nbdsum: $u: export 'nosuch': the server hung up when asked for it (a newstyle server without the fixed flag cannot refuse a name otherwise)" ]
    [ -z "$(ls -A tmp)" ]
  done
}
