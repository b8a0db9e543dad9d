#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# What an image may name (nbdsum(1), SECURITY): backing files, qcow2
# data files and vmdk extents that leave the image's directory, name a
# protocol, a device, a FIFO, /proc, loop or go too deep are refused
# before anything they name is opened: canary files outside the
# directory are watched by inotify and loopback listeners wait for a
# connection (tests/canary.py), and neither may see anything.  The
# ordinary cases (an overlay and its base side by side, a vmdk
# descriptor and its extents) hash the guest content, equal to the
# reference of qemu-img convert's output.

bats_require_minimum_version 1.5.0

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

setup () {
  local i
  cd "$BATS_TEST_TMPDIR"
  canary="$BATS_TEST_TMPDIR/canary"
  mkdir "$canary" img
  "$NBD_PYTHON" "$top_srcdir/tests/canary.py" "$canary" 3>&- &
  servers+=("$!")
  for ((i = 0; i < 400; i++)); do
    [ -e "$canary/ready" ] && break
    sleep 0.05
  done
  [ -e "$canary/ready" ]
  secret="$canary/files/secret"
  port=$(cat "$canary/port")
  barrier=0 seen=0
  "$MKIMAGE" '4M;d:0+1M:a;d:3M+64K:b' img/base.raw
}

teardown () {
  kill_servers
}

# canary_sync: wait until the watcher has seen everything before now.
canary_sync () {
  local i
  barrier=$((barrier + 1))
  : > "$canary/files/barrier-$barrier"
  for ((i = 0; i < 400; i++)); do
    [ -e "$canary/synced-$barrier" ] && break
    sleep 0.05
  done
  [ -e "$canary/synced-$barrier" ]
}

# canary_reset: what the test itself did to the canaries is not
# counted.
canary_reset () {
  canary_sync
  seen=$(wc -l < "$canary/events")
}

# canary_quiet: nothing opened a canary or reached a listener since
# the test began or last reset.
canary_quiet () {
  canary_sync
  if [ "$(wc -l < "$canary/events")" -gt "$seen" ]; then
    echo "the canaries saw:"
    tail -n +"$((seen + 1))" "$canary/events"
    return 1
  fi
}

# refused IMAGE WORDS [NBDSUM-OPTIONS...]: nbdsum refuses the image in
# one line holding WORDS, exit 1, no checksum, within seconds, and
# opens no canary.
refused () {
  local image=$1 words=$2
  shift 2
  run --separate-stderr timeout 20 "$NBDSUM" "$@" "$image"
  echo "nbdsum $* $image: $status: $output; $stderr"
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  [ "${#stderr_lines[@]}" -eq 1 ]
  [[ "$stderr" = "nbdsum: $image: "*"$words"* ]]
  canary_quiet
}

# The checksum of IMAGE's guest content, as qemu-img reads it.
oracle () {
  qemu-img convert -O raw "$@" oracle.raw
  reference sha256 65536 oracle.raw
  rm oracle.raw
}

# overlay NAME BACKING FORMAT: a qcow2 naming BACKING (never opened
# here: -u).
overlay () {
  qemu-img create -q -f qcow2 -u -b "$2" -F "$3" "img/$1" 4M
}

@test "nbdsum-refs: an overlay with its base beside it, by a relative or an absolute name" {
  overlay rel.qcow2 base.raw raw
  overlay abs.qcow2 "$PWD/img/base.raw" raw
  qemu-io -f qcow2 -c 'write -P 9 2M 64K' img/rel.qcow2 > /dev/null
  for f in rel.qcow2 abs.qcow2; do
    run "$NBDSUM" "img/$f"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(first_sum "$output")" = "$(oracle "img/$f")" ]
  done
  canary_quiet
}

@test "nbdsum-refs: a backing file outside the directory, by an absolute name or by '..': refused, followed with --format and --allow-backing" {
  cp img/base.raw "$canary/files/secret"
  canary_reset
  overlay abs.qcow2 "$secret" raw
  overlay up.qcow2 "../canary/files/secret" raw
  for f in abs.qcow2 up.qcow2; do
    refused "img/$f" "found by probing"
    refused "img/$f" "outside the image's directory" --format=qcow2
  done
  # Without --format it has nothing to apply to: a usage error.
  run --separate-stderr "$NBDSUM" --allow-backing img/abs.qcow2
  [ "$status" -ne 0 ]
  [ -z "$output" ]
  [[ "$stderr" = *"--allow-backing applies to the local files whose format --format gives"* ]]
  # The user's word, for the format and the backing file: followed.
  run "$NBDSUM" --format=qcow2 --allow-backing img/abs.qcow2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$(oracle img/abs.qcow2)" ]
}

@test "nbdsum-refs: a symlink beside the image leading out of its directory is refused" {
  ln -s "$secret" img/link.raw
  overlay ov.qcow2 link.raw raw
  refused img/ov.qcow2 "outside the image's directory"
}

@test "nbdsum-refs: a raw disk whose guest wrote a qcow2 header naming a host file: probed, refused; --format=raw gives its bytes" {
  overlay guest.img "$secret" raw
  refused img/guest.img "found by probing"
  run "$NBDSUM" --format=raw img/guest.img
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$(reference sha256 65536 img/guest.img)" ]
  canary_quiet
}

@test "nbdsum-refs: protocols and json: names are refused, even with --allow-backing" {
  local n=0 name
  for name in \
      "json:{\"driver\":\"nbd\",\"server\":{\"type\":\"inet\",\"host\":\"127.0.0.1\",\"port\":\"$port\"},\"export\":\"x\"}" \
      "nbd://127.0.0.1:$port/x" "http://127.0.0.1:$port/x" \
      "nbd+unix:///x?socket=$canary/sock" "fat:$canary/files/tree" \
      "file:$secret"; do
    n=$((n + 1))
    overlay "p$n.qcow2" "$name" raw
    refused "img/p$n.qcow2" "which qemu reads as a protocol"
    refused "img/p$n.qcow2" "which qemu reads as a protocol" \
      --format=qcow2 --allow-backing
  done
}

@test "nbdsum-refs: devices, FIFOs, directories and /proc are refused at once, even with --allow-backing" {
  mkfifo img/fifo
  mkdir img/dir
  overlay fifo.qcow2 fifo raw
  overlay dir.qcow2 dir raw
  overlay zero.qcow2 /dev/zero raw
  overlay proc.qcow2 /proc/self/environ raw
  refused img/fifo.qcow2 "which is a FIFO"
  refused img/dir.qcow2 "which is a directory"
  refused img/zero.qcow2 "which is a character device" --format=qcow2 \
    --allow-backing
  refused img/proc.qcow2 "/proc, /sys" --format=qcow2 --allow-backing
  # The other file systems of the kernel: cgroup, tracefs...
  local f
  for f in $(find /sys/fs/cgroup -maxdepth 1 -type f 2>/dev/null | head -n 1) \
           /sys/kernel/uevent_seqnum; do
    overlay k.qcow2 "$f" raw
    refused img/k.qcow2 "/proc, /sys" --format=qcow2 --allow-backing
  done
}

@test "nbdsum-refs: a backing loop and a chain deeper than 16 are refused at once" {
  local i
  overlay a.qcow2 b.qcow2 qcow2
  overlay b.qcow2 a.qcow2 qcow2
  refused img/a.qcow2 "loops back"
  overlay self.qcow2 self.qcow2 qcow2
  refused img/self.qcow2 "loops back"
  qemu-img create -q -f qcow2 -b base.raw -F raw img/c0.qcow2
  for ((i = 1; i <= 16; i++)); do
    qemu-img create -q -f qcow2 -u -b "c$((i - 1)).qcow2" -F qcow2 \
      "img/c$i.qcow2" 4M
  done
  # c16 has 17 files below it (c15..c0, base.raw), c15 16.
  refused img/c16.qcow2 "deeper than 16"
  run "$NBDSUM" img/c15.qcow2
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$(oracle img/c15.qcow2)" ]
}

@test "nbdsum-refs: a backing file whose format is probed may name files beside it only, whatever the options" {
  # top (format given) -> mid (no backing format: probed) -> the secret.
  overlay mid.qcow2 "$secret" raw
  qemu-img create -q -f qcow2 -u -b mid.qcow2 img/top.qcow2 4M 2>/dev/null ||
    qemu-img create -q -f qcow2 -u -b mid.qcow2 -F qcow2 img/top.qcow2 4M
  # qemu-img 7.2 refuses a backing file without its format: take it
  # out of the header (the extension's magic zeroed: its end).
  "$NBD_PYTHON" - img/top.qcow2 <<'EOF'
import struct, sys
f = open(sys.argv[1], "r+b")
h = f.read(4096)
hl = struct.unpack(">I", h[100:104])[0]
off = hl
while off + 8 <= 4096:
    magic, ln = struct.unpack(">II", h[off:off + 8])
    if magic == 0:
        break
    if magic == 0xe2792aca:
        f.seek(off)
        f.write(b"\0" * 8)
        break
    off += 8 + ((ln + 7) & ~7)
EOF
  qemu-img info img/top.qcow2 | grep -q '^backing file: mid.qcow2'
  ! qemu-img info img/top.qcow2 | grep -q 'backing file format' || false
  refused img/top.qcow2 "whose format was found by probing" \
    --format=qcow2 --allow-backing
}

@test "nbdsum-refs: a qcow2 data file outside the directory is refused; beside it, read" {
  qemu-img create -q -f qcow2 -o data_file=data.raw,data_file_raw=on \
    img/df.qcow2 4M
  # The name is relative to where qemu-img ran: here, img/'s parent.
  mv data.raw img/data.raw
  qemu-io -c 'write -P 5 1M 64K' \
    --image-opts "driver=qcow2,file.filename=img/df.qcow2,data-file.filename=img/data.raw" \
    > /dev/null
  run "$NBDSUM" img/df.qcow2
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$(reference sha256 65536 img/data.raw)" ]
  qemu-img amend -o data_file="$secret" \
    --image-opts "driver=qcow2,file.filename=img/df.qcow2,data-file.filename=img/data.raw"
  cp img/df.qcow2 img/evil.qcow2
  qemu-img info img/evil.qcow2 | grep -q "data file: $secret"
  refused img/evil.qcow2 "names the data file"
  refused img/evil.qcow2 "names the data file" --format=qcow2
}

descriptor () {
  printf '# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType="%s"\n' "$1"
  shift
  printf '%s\n' "$@"
}

@test "nbdsum-refs: a vmdk descriptor whose parent is beside it (split sparse snapshot) equals qemu's reading" {
  qemu-img create -q -f vmdk img/p.vmdk 4M
  qemu-io -f vmdk -c 'write -P 0x11 0 2M' img/p.vmdk > /dev/null
  (cd img && qemu-img create -q -f vmdk -o subformat=twoGbMaxExtentSparse \
     -b p.vmdk -F vmdk c.vmdk)
  qemu-io -f vmdk -c 'write -P 0x22 1M 64K' img/c.vmdk > /dev/null
  run "$NBDSUM" img/c.vmdk
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$(oracle img/c.vmdk)" ]
  canary_quiet
}

@test "nbdsum-refs: a vmdk descriptor's extents: beside it read, outside refused, skipped kinds refused, sizes checked" {
  cp img/base.raw img/d-flat.vmdk
  descriptor monolithicFlat 'RW 8192 FLAT "d-flat.vmdk" 0' > img/d.vmdk
  run "$NBDSUM" img/d.vmdk
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$(reference sha256 65536 img/base.raw)" ]
  qemu-img convert -f raw -O vmdk -o subformat=twoGbMaxExtentSparse \
    img/base.raw img/t.vmdk
  run "$NBDSUM" img/t.vmdk
  [ "$status" -eq 0 ]
  [ "$(first_sum "$output")" = "$(reference sha256 65536 img/base.raw)" ]
  canary_quiet

  descriptor monolithicFlat "RW 8 FLAT \"$secret\" 0" > img/out.vmdk
  refused img/out.vmdk "names the extent"
  descriptor monolithicFlat 'RW 8 FLAT "../canary/files/secret" 0' > img/up.vmdk
  refused img/up.vmdk "outside the image's directory" --format=vmdk
  descriptor monolithicFlat 'RDONLY 8192 FLAT "d-flat.vmdk" 0' > img/ro.vmdk
  refused img/ro.vmdk "qemu skips"
  descriptor monolithicFlat 'RW 8192 ZERO' > img/zero.vmdk
  refused img/zero.vmdk "qemu skips"
  descriptor monolithicFlat 'NOACCESS 8192 FLAT "d-flat.vmdk" 0' \
    'RW 8192 FLAT "d-flat.vmdk" 0' > img/na.vmdk
  refused img/na.vmdk "qemu skips"
  descriptor monolithicFlat '' 'RW 8192 FLAT "d-flat.vmdk" 0' > img/twice.vmdk
  refused img/twice.vmdk "across a line break"
  descriptor monolithicFlat 'RW 16384 FLAT "d-flat.vmdk" 0' > img/long.vmdk
  refused img/long.vmdk "where its descriptor needs"
  # A sparse extent whose own header says another size than the line.
  sed 's/^RW [0-9]* SPARSE/RW 4096 SPARSE/' img/t.vmdk > img/t2.vmdk
  refused img/t2.vmdk "qemu reads 4194304 bytes, where its vmdk descriptor's extents add up to 2097152"
  descriptor monolithicFlat "RW 8 FLAT \"/dev/zero\" 0" > img/dev.vmdk
  refused img/dev.vmdk "character device" --format=vmdk --allow-backing
}

@test "nbdsum-refs: -c lines: a format tag is no user's word, --allow-backing follows nothing for them" {
  overlay abs.qcow2 "$secret" raw
  printf 'BLKHASH-SHA256/64K:qcow2 (img/abs.qcow2) = %064d\n' 0 > SUMS
  run --separate-stderr timeout 20 "$NBDSUM" -c SUMS
  echo "$status: $output; $stderr"
  [ "$status" -eq 1 ]
  [[ "$stderr" = *"img/abs.qcow2: "*"outside the image's directory"*"as its format comes from a checksum line's tag"* ]]
  [[ "$output" = *"FAILED"* ]]
  canary_quiet
  run --separate-stderr "$NBDSUM" --allow-backing -c SUMS
  [ "$status" -ne 0 ]
  [[ "$stderr" = *"--allow-backing applies to the local files whose format --format gives"* ]]
}

@test "nbdsum-refs: --since of a local qcow2: its references are checked before qemu-img or qemu-nbd run" {
  qemu-img create -q -f qcow2 -b base.raw -F raw img/top.qcow2
  qemu-img bitmap --add --enable img/top.qcow2 b1
  "$NBDSUM" -q --blocks img/top.qcow2 > m0
  qemu-img rebase -u -b "$secret" -F raw img/top.qcow2
  run --separate-stderr timeout 20 "$NBDSUM" --since=m0 --dirty-bitmap=b1 \
    img/top.qcow2
  echo "$status: $output; $stderr"
  [ "$status" -eq 1 ]
  [[ "$stderr" = *"outside the image's directory"* ]]
  canary_quiet
}

# swap_after DIR NAME NEW N: in the background, rename DIR/NEW over
# DIR/NAME right after NAME's Nth open (inotify), as an attacker who
# can write the image's directory would, between nbdsum's check and
# qemu's open.  Sets swapper.
swap_after () {
  "$NBD_PYTHON" - "$@" <<'PY' &
import ctypes, os, struct, sys
d, name, new, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
libc = ctypes.CDLL(None)
fd = libc.inotify_init()
libc.inotify_add_watch(fd, d.encode(), 0x20 | 0x10)   # OPEN, CLOSE_NOWRITE
open(os.path.join(d, ".ready"), "w").close()
n = 0
while True:
    buf = os.read(fd, 4096)
    i = 0
    while i < len(buf):
        wd, mask, _, ln = struct.unpack_from("iIII", buf, i)
        what = buf[i + 16:i + 16 + ln].rstrip(b"\0").decode()
        i += 16 + ln
        if what == name and mask & 0x20:
            n += 1
            if n == nth:
                os.rename(os.path.join(d, new), os.path.join(d, name))
                sys.exit(0)
PY
  swapper=$!
  servers+=("$swapper")
  while [ ! -e "$1/.ready" ]; do sleep 0.05; done
  rm "$1/.ready"
}

# The hostile review won this race ten times in ten: nbdsum checked
# names, and qemu opened them again.  Now each file is opened once and
# qemu reads it through nbdsum's descriptor (a vmdk descriptor as a
# copy of the text checked): what is renamed in meanwhile changes
# nothing.  Whatever the timing, the checksum is the image's as it was
# checked, or a refusal; never the secret's, and no canary opened.
@test "nbdsum-refs: files renamed into the image's directory while nbdsum reads it change nothing" {
  local n want desc
  cp img/base.raw img/ext.raw
  desc=$'# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType="monolithicFlat"\n'
  want=$(reference sha256 65536 img/base.raw)
  for n in 1 2 3 4 5; do
    printf '%sRW 8192 FLAT "ext.raw" 0\n' "$desc" > img/d.vmdk
    printf '%sRW 8 FLAT "%s" 0\n' "$desc" "$secret" > img/evil.tmp
    canary_reset
    swap_after img d.vmdk evil.tmp "$n"
    run timeout 30 "$NBDSUM" img/d.vmdk
    echo "descriptor, swap after open $n: $status: $output"
    kill "$swapper" 2>/dev/null || :
    if [ "$status" -eq 0 ]; then
      [ "$(first_sum "$output")" = "$want" ]
    else
      [ "$status" -eq 1 ]
    fi
    canary_quiet
  done
  qemu-img create -q -f qcow2 -b base.raw -F raw img/top.qcow2
  want=$(oracle img/top.qcow2)
  cp img/base.raw img/base.keep
  for n in 1 2 3; do
    cp img/base.keep img/base.raw
    ln -sf "$secret" img/evil.lnk
    canary_reset
    swap_after img base.raw evil.lnk "$n"
    run timeout 30 "$NBDSUM" img/top.qcow2
    echo "backing file, swap after open $n: $status: $output"
    kill "$swapper" 2>/dev/null || :
    if [ "$status" -eq 0 ]; then
      [ "$(first_sum "$output")" = "$want" ]
    else
      [ "$status" -eq 1 ]
    fi
    canary_quiet
  done
}

# Review (issue 37): an image's names reached the terminal as they
# were, so a backing file named with escape sequences set the window
# title or the colours of whoever ran nbdsum on it.  Messages write
# control characters (C0, DEL and UTF-8's C1) as \xHH, as coreutils
# quotes names; a checksum file's names the same.
@test "nbdsum-refs: names with escape sequences are written escaped in messages, never to the terminal" {
  local evil name
  evil=$(printf 'x\033]0;pwned\a\033[31m\302\233\177y\nnbdsum: z: OK')
  qemu-img create -q -f qcow2 -u -b "$evil" -F raw img/esc.qcow2 1M
  run --separate-stderr "$NBDSUM" img/esc.qcow2
  echo "$stderr" | od -c | head -20
  [ "$status" -eq 1 ]
  [ "$(grep -c . <<< "$stderr")" -eq 1 ]
  [[ "$stderr" = *'x\x1b]0;pwned\x07\x1b[31m\xc2\x9b\x7fy\x0anbdsum: z: OK'* ]]
  ! LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' <<< "$stderr" || false
  # A checksum file naming such a file: its message too.
  name=$(printf 'img/n\033[2Jo')
  printf '%064d  %s\n' 0 "$name" > SUMS
  run --separate-stderr "$NBDSUM" -c SUMS
  echo "$stderr" | od -c | head -20
  [ "$status" -eq 1 ]
  [[ "$stderr" = *'img/n\x1b[2Jo'* ]]
  ! LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' <<< "$stderr" || false
  canary_quiet
}
