#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The gate on imports, blkhash-expect= on an export a client reads
# whole (filter/expectimport.c, filter/readfollow.c): a copy of the right
# image out of the export passes, of a wrong one fails at the read that
# completes it, before its data goes out, so that qemu-img convert and
# nbdcopy exit non-zero; for the file and curl plugins (the curl one
# through tests/httpserver.py), plain sha256 and blkhash values, images
# ending in data and in a hole.  Clients that read out of order, in
# pieces that are not whole blocks, twice, over several connections and
# 128 MiB slices; extents that call data zeros; a read-only session
# that reads part of the image is logged.  Expected values come from coreutils and tests/reference.py
# on the images.

load "$top_srcdir/tests/helpers"
load "$top_srcdir/tests/servers"

setup_file () {
  local d="$BATS_FILE_TMPDIR" f
  # Data, zeros written as data, a hole, data (ends in data).
  "$MKIMAGE" '4M;d:0+1M:a;z:1M+64K;d:2M+100000:b;d:3M+1M:c' "$d/src.img"
  # Ends in a hole: the last the client learns comes from extents.
  "$MKIMAGE" '6M;d:0+1M:a;d:2M+100000:b' "$d/tail.img"
  for f in src tail; do
    cp "$d/$f.img" "$d/$f-bad.img"
    printf 'X' | dd of="$d/$f-bad.img" bs=1 seek=2097652 conv=notrunc \
      status=none
  done
  # The hostile source (tests/hostile.c) and its images: all data.
  cc -shared -fPIC -o "$d/hostile.so" $(pkg-config --cflags nbdkit) \
    "$top_srcdir/tests/hostile.c"
  "$MKIMAGE" '8M;d:0+8M:h' "$d/h8.img"
  "$MKIMAGE" '80M;d:0+80M:r' "$d/h80.img"
  # 128 KiB and 4 bytes: 65,538 odd offsets.
  "$MKIMAGE" '131076;d:0+131076:s' "$d/hsmall.img"
}

setup () {
  local f
  for f in src tail; do
    cmp -s "$BATS_FILE_TMPDIR/$f.img" "$BATS_FILE_TMPDIR/$f-bad.img" &&
      { echo "$f-bad.img is not bad"; return 1; }
  done
  out="$BATS_TEST_TMPDIR/out.img"
  export out
  # tests/importclient.py, copying to $out: client ORDER ARGS...
  client="\"\$NBD_PYTHON\" \"$top_srcdir/tests/importclient.py\" \"\$uri\" \"\$out\""
  return 0
}

teardown () {
  kill_servers
}

# The plain digest ALG of FILE, as ALGsum prints it.
plain () {
  "${1}sum" "$2" | cut -d' ' -f1
}

# import PLUGIN CLIENT VALUE FILE [NBDKIT-OPTS...]: FILE served
# read-only through the filter expecting VALUE by PLUGIN (file, or curl
# from $http_port), copied to $out by CLIENT (qemu-img or nbdcopy).
# Sets status, output.
import () {
  local src cmd
  rm -f "$out"
  case $1 in
    file) src=(file "$4") ;;
    curl) src=(curl "http://127.0.0.1:$http_port/$(basename "$4")") ;;
  esac
  case $2 in
    qemu-img) cmd='qemu-img convert -f raw -O raw "$uri" "$out"' ;;
    nbdcopy) cmd='nbdcopy "$uri" "$out"' ;;
  esac
  run serve "${@:5}" -r "${src[@]}" blkhash-expect="$3" -- "$cmd"
  echo "== $1 $2 $3 $(basename "$4"): status $status"
  echo "$output"
}

# import_all PLUGIN: both clients, a plain and a blkhash value, both
# images: the right image is copied whole, a wrong one fails with the
# filter's error naming both values.
import_all () {
  local img client kind good bad value want got
  for img in src tail; do
    good="$BATS_FILE_TMPDIR/$img.img"
    bad="$BATS_FILE_TMPDIR/$img-bad.img"
    for kind in sha256 blkhash; do
      if [ "$kind" = sha256 ]; then
        value="sha256:$(plain sha256 "$good")"
        want=$value
        got="sha256:$(plain sha256 "$bad")"
      else
        value="blkhash:$(reference sha256 65536 "$good")"
        want="blkhash-sha256/64K:${value#blkhash:}"
        got="blkhash-sha256/64K:$(reference sha256 65536 "$bad")"
      fi
      for client in qemu-img nbdcopy; do
        import "$1" "$client" "$value" "$good"
        [ "$status" -eq 0 ]
        ! grep -q "does not match" <<< "$output" || false
        cmp "$good" "$out"

        # The client leaves at the failed read with others in flight.
        import "$1" "$client" "$value" "$bad" "${KILLED_CLIENT_OPTS[@]}"
        [ "$status" -ne 0 ]
        grep -F "import does not match blkhash-expect: expected $want, got $got" <<< "$output"
      done
    done
  done
}

@test "import: file plugin, qemu-img convert and nbdcopy, sha256 and blkhash: a wrong image fails, the right one passes" {
  import_all file
}

@test "import: curl plugin (HTTP with ranges), qemu-img convert and nbdcopy, sha256 and blkhash" {
  start_http "$BATS_FILE_TMPDIR"
  import_all curl
}

@test "import: the failing read is the one that completes the image; reads after it fail too" {
  local good="$BATS_FILE_TMPDIR/src.img" bad="$BATS_FILE_TMPDIR/src-bad.img"
  local seed=${IMPORT_SEED:-1} value order n
  echo "IMPORT_SEED=$seed"
  # pieces.py URI ORDER SEED: read the export in pieces that are not
  # whole blocks, in ORDER (forward, reverse, random), twice, one
  # request at a time; prints 'PASS INDEX ok|failed ERRNO' per read.
  cat > "$BATS_TEST_TMPDIR/pieces.py" <<'PY'
import errno, nbd, random, sys
uri, order, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
h = nbd.NBD()
h.connect_uri(uri)
size = h.get_size()
rng = random.Random(seed)
pieces, off = [], 0
while off < size:
    n = min(rng.choice([4096, 10000, 65536, 100000, 300000]), size - off)
    pieces.append((off, n))
    off += n
if order == "reverse":
    pieces.reverse()
elif order == "random":
    rng.shuffle(pieces)
print("pieces", len(pieces))
for p in (0, 1):
    for i, (off, n) in enumerate(pieces):
        try:
            h.pread(n, off)
            print(p, i, "ok")
        except nbd.Error as e:
            print(p, i, "failed", errno.errorcode.get(e.errno, e.errno))
h.shutdown()
PY
  for value in "sha256:$(plain sha256 "$good")" \
               "blkhash:$(reference sha256 65536 "$good")" \
               "blkhash-sha1/1M:$(reference sha1 1048576 "$good")"; do
    for order in forward reverse random; do
      run serve -r file "$good" blkhash-expect="$value" -- \
        '"$NBD_PYTHON" "$BATS_TEST_TMPDIR/pieces.py" "$uri" '"$order $seed"
      echo "$value $order (good): $status"
      echo "$output" | grep -v " ok$"
      [ "$status" -eq 0 ]
      ! grep -q "failed\|does not match" <<< "$output" || false

      run serve -r file "$bad" blkhash-expect="$value" -- \
        '"$NBD_PYTHON" "$BATS_TEST_TMPDIR/pieces.py" "$uri" '"$order $seed"
      echo "$value $order (bad): $status"
      echo "$output" | grep -v " ok$"
      n=$(awk '/^pieces/ { print $2 }' <<< "$output")
      # The first pass: every read but the last passes; the last one,
      # which completes the image, and every one after it fail.
      [ "$(grep -c "^0 .* ok$" <<< "$output")" -eq $((n - 1)) ]
      grep -q "^0 $((n - 1)) failed EIO$" <<< "$output"
      [ "$(grep -c "^1 .* failed EIO$" <<< "$output")" -eq "$n" ]
      [ "$(grep -c "import does not match blkhash-expect" <<< "$output")" -eq 1 ]
    done
  done
}

@test "import: nbdcopy over 4 connections and several 128 MiB slices" {
  local img="$BATS_TEST_TMPDIR/big.img" bad="$BATS_TEST_TMPDIR/big-bad.img"
  local value
  # Data in every slice nbdcopy's connections take, holes between.
  "$MKIMAGE" '400M;d:0+3M:a;d:127M+2M:b;d:200M+1M:c;d:300M+5M:d;d:399M+1M:e' "$img"
  cp "$img" "$bad"
  printf 'X' | dd of="$bad" bs=1 seek=$((300 * 1048576 + 4321)) \
    conv=notrunc status=none
  for value in "sha256:$(plain sha256 "$img")" \
               "blkhash:$(reference sha256 65536 "$img")"; do
    run serve -r -v file "$img" blkhash-expect="$value" -- \
      'nbdinfo "$uri" | grep multi_conn; nbdcopy -C 4 -T 4 "$uri" null:'
    echo "$output" | grep -E "multi_conn|matches|followed|does not"
    [ "$status" -eq 0 ]
    grep -q "can_multi_conn: true" <<< "$output"
    grep -q "import matches blkhash-expect" <<< "$output"
    run serve "${KILLED_CLIENT_OPTS[@]}" -r file "$bad" \
      blkhash-expect="$value" -- 'nbdcopy -C 4 -T 4 "$uri" null:'
    echo "$output"
    [ "$status" -ne 0 ]
    grep -q "import does not match blkhash-expect" <<< "$output"
  done
}

@test "import: the right image read whole records its blkhash-file line, a wrong one zeros" {
  local good="$BATS_FILE_TMPDIR/src.img" bad="$BATS_FILE_TMPDIR/src-bad.img"
  local sums="$BATS_TEST_TMPDIR/import.sums" value
  value="sha256:$(plain sha256 "$good")"
  run serve -r file "$good" blkhash-expect="$value" blkhash-file="$sums" \
    blkhash-file-name="$good" -- 'nbdcopy "$uri" "$out"'
  echo "$output"
  [ "$status" -eq 0 ]
  cat "$sums"
  [ "$(sum_hex "$(cat "$sums")")" = "$(reference sha256 65536 "$good")" ]
  "$NBDSUM" -c "$sums"

  rm -f "$sums"
  run serve "${KILLED_CLIENT_OPTS[@]}" -r file "$bad" \
    blkhash-expect="$value" blkhash-file="$sums" \
    blkhash-file-name="$good" -- 'nbdcopy "$uri" "$out"'
  echo "$output"
  [ "$status" -ne 0 ]
  cat "$sums"
  [[ $(sum_hex "$(cat "$sums")") =~ ^0{64}$ ]]
  run "$NBDSUM" -c "$sums"
  [ "$status" -ne 0 ]
}

@test "import: a read-only session that reads part of the image is logged as not judged" {
  local bad="$BATS_FILE_TMPDIR/src-bad.img"
  run serve -r file "$bad" \
    blkhash-expect="sha256:$(plain sha256 "$BATS_FILE_TMPDIR/src.img")" -- \
    '"$NBD_PYTHON" -c "import nbd, sys; h = nbd.NBD(); h.connect_uri(sys.argv[1]); h.pread(1 << 20, 0)" "$uri"'
  echo "$output"
  grep -q "export '' was read in part (.* of 4194304 bytes read or known zero) and not written: not judged against blkhash-expect" <<< "$output"
  ! grep -q "does not match" <<< "$output" || false
}

@test "import: an empty export is judged when a client connects: a source serving nothing fails" {
  local empty="$BATS_TEST_TMPDIR/empty.img" img value client
  : > "$empty"
  # The published image is src.img; the source serves no byte, so no
  # read ever completes it: the handshake is the only place to judge.
  for img in "$BATS_FILE_TMPDIR/src.img" "$empty"; do
    for value in "sha256:$(plain sha256 "$img")" \
                 "blkhash:$(reference sha256 65536 "$img")"; do
      for client in qemu-img nbdcopy; do
        import file "$client" "$value" "$empty"
        if [ "$img" = "$empty" ]; then
          [ "$status" -eq 0 ]
          ! grep -q "does not match" <<< "$output" || false
        else
          [ "$status" -ne 0 ]
          grep -q "import does not match blkhash-expect: expected .*, got .* (the export is empty: the connection is refused)" <<< "$output"
        fi
      done
    done
  done
}

@test "import: blkhash-expect with blkhash-views-only is warned about at start" {
  run nbdkit -U - --filter="$BLKHASH_FILTER" memory 1M \
    blkhash-views-only=true blkhash-expect="sha256:$(printf '%064d' 0)" \
    --run true
  echo "$output"
  [ "$status" -eq 0 ]
  grep -q "blkhash-views-only=true: no client can read or write a data export, so nothing is ever judged" <<< "$output"
}

# hostile IMG OFF MODE VALUE COMMAND [NBDKIT-OPTS...]: IMG served by
# the hostile source (tests/hostile.c: the byte at OFF inverted as MODE
# says) through the filter expecting VALUE; COMMAND copies it to $out;
# options (-...) go to nbdkit, the rest to the filter.
# Sets status, output.  Whatever the source does, a client that exits 0
# has the right image.
hostile () {
  local img=$1 off=$2 mode=$3 value=$4 cmd=$5 orig opts=() params=() a
  shift 5
  for a; do
    case $a in -*) opts+=("$a") ;; *) params+=("$a") ;; esac
  done
  orig=$(hexdump_at "$img" "$off" 1)
  rm -f "$out"
  run serve -r "${opts[@]}" "$BATS_FILE_TMPDIR/hostile.so" file="$img" \
    badoff="$off" badbyte=$((0x$orig ^ 0xff)) mode="$mode" \
    blkhash-expect="$value" "${params[@]}" -- "$cmd"
  echo "== $(basename "$img") $mode $value $*: status $status"
  echo "$output" | grep -v " ok$" | tail -n 20
  [ "$status" -ne 0 ] || cmp "$img" "$out"
}

@test "import from a hostile source: blocks read in part are judged from the bytes the client got" {
  local img="$BATS_FILE_TMPDIR/h8.img" off=$((5 * 1048576 + 4321)) c
  local value cmd opt
  # qemu-img's 2 MiB reads of 4M blocks, nbdcopy's 256K of 1M blocks,
  # and 32K requests of 64K blocks: every block read in parts.
  for c in "blkhash-sha256/4M:$(reference sha256 4194304 "$img")|qemu-img convert -f raw -O raw \"\$uri\" \"\$out\"|" \
           "blkhash:$(reference sha256 1048576 "$img")|nbdcopy \"\$uri\" \"\$out\"|blkhash-block-size=1M" \
           "blkhash:$(reference sha256 65536 "$img")|nbdcopy --request-size=32768 \"\$uri\" \"\$out\"|"; do
    IFS='|' read -r value cmd opt <<< "$c"
    hostile "$img" "$off" none "$value" "$cmd" $opt
    [ "$status" -eq 0 ]
    ! grep -q "does not match\|cannot verify" <<< "$output" || false
    # The byte is wrong on its first fetch only: the client's.
    hostile "$img" "$off" first "$value" "$cmd" $opt "${KILLED_CLIENT_OPTS[@]}"
    [ "$status" -ne 0 ]
    grep -q "import does not match blkhash-expect" <<< "$output"
  done
}

@test "import from a hostile source: data read ahead of a plain digest is what is judged, kept in memory and then in a file up to blkhash-expect-spill" {
  local img="$BATS_FILE_TMPDIR/h80.img" off=$((70 * 1048576 + 777)) c
  local value how
  # 1 MiB reads from the end backwards (sha256: everything arrives
  # ahead of the digest), and the first half of every 1M block before
  # the second halves (every block pending): 79 MiB held, past the
  # 64 MiB in memory.
  for c in "sha256:$(plain sha256 "$img")|reverse" \
           "blkhash-sha256/1M:$(reference sha256 1048576 "$img")|halves"; do
    IFS='|' read -r value how <<< "$c"
    hostile "$img" "$off" none "$value" "$client $how 1048576"
    [ "$status" -eq 0 ]
    grep -q "^copied$" <<< "$output"
    hostile "$img" "$off" first "$value" "$client $how 1048576" \
      "${KILLED_CLIENT_OPTS[@]}"
    [ "$status" -ne 0 ]
    grep -q "import does not match blkhash-expect" <<< "$output"
    # 64 MiB in memory and 8M in the file: not enough, the gate fails
    # the read it cannot keep, and says what lifts the bound.
    hostile "$img" "$off" none "$value" "$client $how 1048576" \
      blkhash-expect-spill=8M
    [ "$status" -ne 0 ]
    grep -q "failed EIO" <<< "$output"
    grep -q "cannot verify what was sent: .*blkhash-expect-spill" <<< "$output"
    ! grep -q "import matches\|^copied$" <<< "$output" || false
  done
}

@test "import from a hostile source: more than 65,536 separate reads never count bytes not yet read" {
  local img="$BATS_FILE_TMPDIR/hsmall.img" value
  # One byte at a time: odd offsets (65,538 ranges), 0, even offsets
  # backwards; the byte at 2, read last, is wrong on every fetch but
  # the first: the client's must be the one judged.
  for value in "sha256:$(plain sha256 "$img")" \
               "blkhash:$(reference sha256 65536 "$img")"; do
    hostile "$img" 2 later "$value" "$client bytes"
    [ "$status" -eq 0 ]
    grep -q "^copied$" <<< "$output"
  done
}

@test "import from a hostile source: digests a view computed earlier in the session do not judge the import" {
  local img="$BATS_FILE_TMPDIR/h8.img" held="$BATS_TEST_TMPDIR/held"
  # A client holds the session while nbdsum reads the view (the
  # filter's reads, of 256K: good), then qemu-img copies (2 MiB reads:
  # bad).
  hostile "$img" 327780 big "blkhash:$(reference sha256 65536 "$img")" \
    "\"\$NBD_PYTHON\" -c 'import nbd, sys, time
h = nbd.NBD(); h.connect_uri(sys.argv[1]); open(sys.argv[2], \"w\").close()
time.sleep(600)' \"\$uri\" \"$held\" & H=\$!
     while [ ! -e \"$held\" ]; do sleep 0.05; done
     \"$NBDSUM\" --no-spot-check \"\$uri\" &&
       qemu-img convert -f raw -O raw \"\$uri\" \"\$out\"; r=\$?
     kill \$H; wait \$H; exit \$r" "${KILLED_CLIENT_OPTS[@]}"
  [ "$status" -ne 0 ]
  grep -q "import does not match blkhash-expect" <<< "$output"
}

@test "import from a hostile source: once judged, later reads of the session are checked against what was judged" {
  local img="$BATS_FILE_TMPDIR/h8.img" off=$((5 * 1048576 + 4321)) value
  local rereads
  # Read again: the 64K block holding the byte, 100 bytes around it,
  # the 1 MiB piece holding it.
  rereads="$((off / 65536 * 65536)):65536 $((off - 50)):100 $((off / 1048576 * 1048576)):1048576"
  for value in "sha256:$(plain sha256 "$img")" \
               "blkhash:$(reference sha256 65536 "$img")" \
               "blkhash-sha1/1M:$(reference sha1 1048576 "$img")"; do
    hostile "$img" "$off" none "$value" "$client reread $rereads"
    [ "$status" -eq 0 ]
    [ "$(grep -c "^read .* ok$" <<< "$output")" -eq 3 ]
    # Good on the first fetch (the import passes), wrong after.
    run serve -r "$BATS_FILE_TMPDIR/hostile.so" file="$img" badoff="$off" \
      badbyte=$((0x$(hexdump_at "$img" "$off" 1) ^ 0xff)) mode=later \
      blkhash-expect="$value" -- "$client reread $rereads"
    echo "$output"
    grep -q "^copied$" <<< "$output"
    [ "$(grep -c "^read .* failed EIO$" <<< "$output")" -eq 3 ]
    ! grep -q "^read .* ok$" <<< "$output" || false
    grep -q "cannot verify what was sent" <<< "$output"
  done
}

@test "import from a hostile source: zeros its extents call zeros are judged as zeros, past a request's end and behind the cache filter too" {
  local img="$BATS_FILE_TMPDIR/h8.img" holed="$BATS_TEST_TMPDIR/holed.img"
  local value c cmd opt
  # [1M, 2M) is data the source's extents call zeros; in holed.img it
  # is zeros.  Clients believe them: qemu-img (one extent a request),
  # nbdcopy, a client believing every extent of a reply (the one past
  # its 1 MiB request), qemu-img with the cache filter behind blkhash.
  "$MKIMAGE" '8M;d:0+1M:h;d:2M+6M:h' "$holed"
  for value in "sha256:$(plain sha256 "$img")" \
               "blkhash:$(reference sha256 65536 "$img")"; do
    for c in "qemu-img convert -f raw -O raw \"\$uri\" \"\$out\"|" \
             "nbdcopy \"\$uri\" \"\$out\"|" \
             "$client extents 1048576|" \
             "qemu-img convert -f raw -O raw \"\$uri\" \"\$out\"|--filter=cache"; do
      IFS='|' read -r cmd opt <<< "$c"
      hostile "$img" 0 none "$value" "$cmd" zero=1048576+1048576 $opt \
        "${KILLED_CLIENT_OPTS[@]}"
      [ "$status" -ne 0 ]
      grep -q "import does not match blkhash-expect" <<< "$output"
    done
  done
  # Where they are zeros, every client passes.
  for value in "sha256:$(plain sha256 "$holed")" \
               "blkhash:$(reference sha256 65536 "$holed")"; do
    for c in "qemu-img convert -f raw -O raw \"\$uri\" \"\$out\"|" \
             "nbdcopy \"\$uri\" \"\$out\"|" \
             "$client extents 1048576|" \
             "qemu-img convert -f raw -O raw \"\$uri\" \"\$out\"|--filter=cache"; do
      IFS='|' read -r cmd opt <<< "$c"
      hostile "$holed" 0 none "$value" "$cmd" zero=1048576+1048576 $opt -v
      [ "$status" -eq 0 ]
      grep -q "import matches blkhash-expect" <<< "$output"
    done
  done
}

@test "import from a hostile source: a connection told another size than the others is refused" {
  local img="$BATS_FILE_TMPDIR/h8.img" value two
  # Two connections, each read whole: the second is told 16 MiB (zeros
  # past the image; nbdkit crashed reading past the record of 8 MiB).
  two="\"\$NBD_PYTHON\" -c 'import nbd, sys
hs = []
for i in range(2):
    h = nbd.NBD(); h.connect_uri(sys.argv[1]); hs.append(h)
for h in hs:
    for o in range(0, h.get_size(), 1 << 20):
        h.pread(1 << 20, o)' \"\$uri\""
  for value in "sha256:$(plain sha256 "$img")" \
               "blkhash:$(reference sha256 65536 "$img")"; do
    for cmd in "$two" "nbdcopy -C 2 \"\$uri\" \"\$out\""; do
      hostile "$img" 0 none "$value" "$cmd" othersize=16777216 \
        "${KILLED_CLIENT_OPTS[@]}"
      [ "$status" -ne 0 ]
      grep -q "the source has [0-9]* bytes for this connection, [0-9]* for the [0-9]* others: the connection is refused" <<< "$output"
      ! grep -qi "signal\|segmentation\|abort" <<< "$output" || false
    done
  done
}

@test "import: a read whose data the gate cannot keep fails itself, not only the read completing the image" {
  local img="$BATS_FILE_TMPDIR/h80.img"
  # 1 MiB reads from the end: 64 MiB ahead of the sha256 digest fit in
  # memory, the next needs the file, which TMPDIR cannot hold.
  TMPDIR="$BATS_TEST_TMPDIR/none" run serve -r file "$img" \
    blkhash-expect="sha256:$(plain sha256 "$img")" -- "$client reverse 1048576"
  echo "$output" | head -n 20
  [ "$status" -ne 0 ]
  grep -q "cannot verify what was sent: cannot make a file in $BATS_TEST_TMPDIR/none" <<< "$output"
  grep -q "^read $((15 * 1048576)) 1048576 failed EIO$" <<< "$output"
  ! grep -q "^copied$" <<< "$output" || false
}
