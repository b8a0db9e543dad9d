#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The man pages are valid POD and agree with --help.

load "$top_srcdir/tests/helpers"

@test "docs: man pages are valid POD with the usual sections" {
  for pod in "$top_srcdir"/man/*.pod; do
    podchecker "$pod"
    for section in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
      grep -q "^=head1 $section" "$pod"
    done
  done
  for section in PARAMETERS FILES VERSION; do
    grep -q "^=head1 $section" "$top_srcdir/man/nbdkit-blkhash-filter.pod"
  done
}

@test "docs: every nbdsum --help option is in nbdsum(1), and back" {
  # Option lines only, not the examples.
  help=$("$NBDSUM" --help | grep -E '^ +-' | grep -oE -- '--[a-z-]+' | sort -u)
  # An entry may name several (=item B<-C> N, B<--connections=>N).
  man=$(grep '^=item ' "$top_srcdir/man/nbdsum.pod" |
        grep -oE -- 'B<--[a-z-]+' | sed 's/B<//' | sort -u)
  echo "help: $help"
  echo "man: $man"
  [ "$help" = "$man" ]
}

@test "docs: nbdsum --help fits a screen: under 60 lines, every input form, view and root said" {
  run "$NBDSUM" --help
  [ "$status" -eq 0 ]
  # (bats's $lines leaves out empty lines.)
  echo "$(wc -l <<< "$output") lines"
  [ "$(wc -l <<< "$output")" -lt 60 ]
  [[ "$output" = *"[ CMD ARGS ]"* ]]
  [[ "$output" = *"NBD URI"* ]]
  [[ "$output" = *"FILE"* ]]
  [[ "$output" = *"standard input"* ]]
  [[ "$output" = *"A view is "* ]]
  [[ "$output" = *"the root is "* ]]
  [ "$(awk 'length > 79' <<< "$output")" = "" ]
}

@test "docs: every filter parameter in --help is in the man page" {
  params=$(nbdkit --filter="$BLKHASH_FILTER" null --help |
           grep -oE '^blkhash-[a-z-]+' | sort -u)
  [ -n "$params" ]
  for p in $params; do
    grep -q "^=item B<$p=" "$top_srcdir/man/nbdkit-blkhash-filter.pod"
  done
}

@test "docs: the filter's --help writes values as nbdkit's filters do" {
  local help
  help=$(nbdkit --filter="$BLKHASH_FILTER" null --help |
         sed -n '/^blkhash-/p')
  echo "$help"
  # KEY=<VALUE>, booleans as <BOOL>, as in nbdkit's own --help.
  [ -z "$(grep -E '^blkhash-[a-z-]+=[A-Z]' <<< "$help")" ]
  grep -q '^blkhash-cache=<BOOL>' <<< "$help"
  grep -q '^blkhash-readahead=auto|<BOOL>' <<< "$help"
  [ "$(grep -cE '=([a-z]+\|)?<[A-Z]+>' <<< "$help")" -eq \
    "$(grep -c '^blkhash-' <<< "$help")" ]
}

@test "docs: nbdsum(1) shows the five everyday tasks before its reference" {
  local pod="$top_srcdir/man/nbdsum.pod" sections examples
  sections=$(grep '^=head1 ' "$pod" | head -n 5 | tr '\n' ' ')
  echo "$sections"
  [ "$sections" = "=head1 NAME =head1 SYNOPSIS =head1 DESCRIPTION =head1 EXAMPLES =head1 INPUTS " ]
  # Within the first screens, before any option is described.
  [ "$(grep -n '^=head1 EXAMPLES' "$pod" | cut -d: -f1)" -lt 60 ]
  examples=$(sed -n '/^=head1 EXAMPLES/,/^=head1 INPUTS/p' "$pod")
  grep -q '^ nbdsum disk.img' <<< "$examples"
  grep -q '^ nbdsum nbd://' <<< "$examples"
  grep -q '^ nbdsum -c ' <<< "$examples"
  grep -q 'blkhash-file=' <<< "$examples"
  grep -q '^ nbdsum --diff ' <<< "$examples"
}

# Pages a newcomer reads: short enough to read, the everyday commands
# on the first screen, the reference after them.
@test "docs: each man page is under 900 lines of POD" {
  local pod n
  for pod in "$top_srcdir"/man/*.pod; do
    n=$(wc -l < "$pod")
    echo "$pod: $n lines"
    [ "$n" -lt 900 ]
  done
}

@test "docs: nbdsum(1)'s first screen shows the everyday commands" {
  local pod="$top_srcdir/man/nbdsum.pod" screen
  # 40 lines from DESCRIPTION on: a file, a remote export, a published
  # SUMS file, a copy.
  screen=$(sed -n '/^=head1 DESCRIPTION/,$p' "$pod" | head -n 40)
  echo "$screen"
  grep -q '^ nbdsum disk.img' <<< "$screen"
  grep -q '^ nbdsum nbd://' <<< "$screen"
  grep -q '^ nbdsum .*-c SHA256SUMS' <<< "$screen"
  grep -q 'blkhash-file=' <<< "$screen"
  grep -q "^ .*--run 'nbdcopy" <<< "$screen"
  grep -q '^ nbdsum -c disk.sums' <<< "$screen"
  # A --prefix install is told what to write instead of --filter=blkhash.
  grep -q -- '--prefix' <<< "$screen"
}

@test "docs: the filter's first screen is what it does and three commands, not view-name grammar" {
  local pod="$top_srcdir/man/nbdkit-blkhash-filter.pod" screen page
  screen=$(sed -n '/^=head1 DESCRIPTION/,$p' "$pod" | head -n 40)
  echo "$screen"
  grep -q '^ nbdsum nbd://' <<< "$screen"
  grep -q 'blkhash-file=' <<< "$screen"
  grep -q 'blkhash-expect=' <<< "$screen"
  ! grep -q '@blkhash@blkhash\|nonce\|@blkhash:' <<< "$screen" || false
  grep -q '^=head1 VIEWS' "$pod"
  # The SYNOPSIS says what to write after a --prefix install.
  sed -n '/^=head1 SYNOPSIS/,/^=head1 DESCRIPTION/p' "$pod" |
    grep -q '@filterdir@/nbdkit-blkhash-filter.so'
  # The page as built names the directory make install uses.
  local filterdir=${BLKHASH_FILTERDIR:-$(pkg-config --variable=filterdir nbdkit)}
  page=$(sed 's/\\-/-/g' "$top_builddir/man/nbdkit-blkhash-filter.1")
  [[ "$page" = *"$filterdir/nbdkit-blkhash-filter.so"* ]]
  [[ "$page" != *"@filterdir@"* ]]
}

# bats_example FILE PREFIX: the bats example of FILE, from its load line
# to the end of its @test, each line without PREFIX.
bats_example () {
  awk -v p="$2" '
    index($0, p "load \"$(nbdsum --bats-helper)\"") == 1 { on = 1 }
    !on { next }
    { line = substr($0, length(p) + 1); if ($0 == p || $0 == substr(p, 1, 1)) line = "" }
    { print line }
    index($0, p "@test ") == 1 { t = 1 }
    t && $0 == p "}" { exit }' "$1"
}

@test "docs: README's and nbdsum-workflows(1)'s bats example is one, the helpers' own, and runs" {
  local man readme helper
  man=$(bats_example "$top_srcdir/man/nbdsum-workflows.pod" " ")
  readme=$(bats_example "$top_srcdir/README.md" "    ")
  helper=$(bats_example "$top_srcdir/bats/blkhash.bash.in" "#   ")
  echo "$man"
  [ -n "$man" ]
  [[ "$man" = *'cd "$BATS_TEST_TMPDIR"'* ]]
  [[ "$man" = *'teardown () { blkhash_stop; }'* ]]
  [ "$readme" = "$man" ]
  [ "$helper" = "$man" ]
  # As a user runs it: nbdsum in PATH, a directory of their own.
  mkdir "$BATS_TEST_TMPDIR/user"
  cd "$BATS_TEST_TMPDIR/user"
  printf '%s\n' "$man" > example.bats
  PATH="$(dirname "$NBDSUM"):$PATH" run bats example.bats
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"ok 1 the copy is the image"* ]]
  # It left nothing in the directory it ran from.
  [ "$(ls)" = example.bats ]
}

@test "docs: dd in README and man page examples prints no records noise" {
  local bad
  bad=$(grep -nE '\| *dd |^ *dd ' "$top_srcdir/README.md" \
        "$top_srcdir"/man/*.pod | grep -v 'status=none' || true)
  echo "$bad"
  [ -z "$bad" ]
}

# A '! cmd' line asserts only as a test's last: bash's errexit ignores
# a negated command (20 lines of the suites asserted nothing so).
@test "docs: no test negates a command where its failure would be ignored" {
  run grep -nE "^[[:space:]]*! " "$top_srcdir"/tests/*.bats
  # In a list ('|| false', '&& ...', '|| ...') the last command
  # asserts; a backslash or a quote at its end continues a list or a
  # quoted script, which asserts as a whole.
  run grep -vE "\|\||&&|(\\\\|')[[:space:]]*\$" <<< "$output"
  echo "$output"
  [ -z "$output" ]
}

@test "docs: every source file and man page carries the licence" {
  local missing=() f
  [ -f "$top_srcdir/LICENSE" ]
  grep -q 'Redistribution and use in source and binary forms' \
    "$top_srcdir/LICENSE"
  # Sources as the tarball lists them (no git in a release tree).
  while read -r f; do
    grep -q 'SPDX-License-Identifier: BSD-3-Clause' "$top_srcdir/$f" ||
      missing+=("$f")
  done < <(cd "$top_srcdir" &&
           find lib filter client tests bench bats -type f \
             \( -name '*.[ch]' -o -name '*.bats' -o -name '*.bash' \
                -o -name '*.py' -o -name '*.sh' -o -name '*.am' \) \
             ! -path '*/_build*' ! -name 'vectors*.bats' &&
           printf '%s\n' configure.ac Makefile.am autogen.sh quickstart \
             bench/run bench/latency bench/completion bench/cold bench/nbdcopy \
             tests/gen-vectors-bats \
             completion/nbdsum \
             systemd/nbdkit-blkhash.socket systemd/nbdkit-blkhash.service.in \
             systemd/nbdkit-blkhash.conf)
  echo "no licence line: ${missing[*]}"
  [ ${#missing[@]} -eq 0 ]
  for pod in "$top_srcdir"/man/*.pod; do
    grep -q '^=head1 COPYRIGHT' "$pod"
    grep -q '^=head1 LICENSE' "$pod"
  done
}

@test "docs: quickstart --help prints its usage comment and nothing else" {
  run "$top_srcdir/quickstart" --help
  [ "$status" -eq 0 ]
  echo "$output"
  [ "${lines[0]}" = "nbdkit-blkhash quick start, on a fresh Debian machine (as root):" ]
  [[ "$output" = *'./quickstart check   the same set-up, then the whole test suite,'* ]]
  [[ "$output" != *"set -euo"* ]]
  [[ "$output" != *"SPDX"* ]]
}

# Stand-ins for the hosts of the recipes: servers on sockets in $si
# (localhost, a, b and server with the filter, tls with a pre-shared
# key), and the images they name in the current directory.
start_standins () {
  si=$1
  mkdir -p "$si/dir"
  # Big enough (sparse) that a view outgrows a pipe's buffer: a
  # recipe whose reader stops early must survive SIGPIPE.
  "$MKIMAGE" '1G;d:0+1M:a;z:2M+1M;d:5M+300000:b;d:700M+64K:c' disk.img
  qemu-img convert -f raw -O qcow2 disk.img disk.qcow2
  qemu-img convert -f raw -O vmdk disk.img disk.vmdk
  qemu-img convert -f raw -O vpc -o subformat=fixed disk.img disk.vhd
  cp disk.img a.img
  cp disk.img b.img
  cp disk.img "$si/dir/disk"
  echo "alice:$(openssl rand -hex 32)" > "$si/keys.psk"
  chmod 600 "$si/keys.psk"
  local name
  for name in localhost a b server; do
    nbdkit_daemon "$si/$name.standin" -U "$si/$name.sock" \
      --filter="$BLKHASH_FILTER" file dir="$si/dir" \
      default-export=disk 2>/dev/null ||
    nbdkit_daemon "$si/$name.standin" -U "$si/$name.sock" \
      --filter="$BLKHASH_FILTER" --filter=exportname file dir="$si/dir" \
      default-export=disk
  done
  nbdkit_daemon "$si/tls.standin" -U "$si/tls.sock" --tls=require \
    --tls-psk="$si/keys.psk" --filter="$BLKHASH_FILTER" file dir="$si/dir"
  # http://server/: this directory's files, with ranges (a session of
  # its own, as the nbdkit daemons: nbdsum -j ends its process group).
  setsid "$PYTHON" "$top_srcdir/tests/httpserver.py" "$PWD" \
    --port-file "$si/http.port" \
    </dev/null >/dev/null 2>&1 3>&- 4>&- &
  echo $! > "$si/http.standin"
  for name in $(seq 100); do
    [ -s "$si/http.port" ] && return 0
    sleep 0.1
  done
  echo "tests/httpserver.py did not start"
  return 1
}

# What a recipe leaves running: servers it started, background jobs.
stop_standins () {
  local p
  kill $(jobs -p) 2>/dev/null || true
  for p in "$1"/daemon*.pid; do
    [ -e "$p" ] && kill "$(cat "$p")" 2>/dev/null
    rm -f "$p" "${p%.pid}.sock"
  done
  pkill -f "qemu-nbd.*$1/qemu.sock" 2>/dev/null || true
}
export -f stop_standins

@test "docs: every recipe of README.md and the man pages' examples runs, set -euo pipefail" {
  local si="$BATS_TEST_TMPDIR/si" recipes="$BATS_TEST_TMPDIR/recipes"
  local n=0 bad=() name where st
  mkdir -p "$recipes" "$BATS_TEST_TMPDIR/work"
  cd "$BATS_TEST_TMPDIR/work"
  start_standins "$si"
  "$PYTHON" "$top_srcdir/tests/recipes.py" "$top_srcdir" "$si" "$recipes"
  while read -r name where; do
    st=0
    bash "$recipes/$name.sh" < /dev/null > "$recipes/$name.out" 2>&1 ||
      st=$?
    n=$((n + 1))
    if [ "$st" -ne 0 ]; then
      bad+=("$name $where (status $st): $(tail -n 3 "$recipes/$name.out")")
    fi
  done < "$recipes/list"
  for p in "$si"/*.standin; do kill "$(cat "$p")"; done
  echo "$n recipes"
  printf '%s\n' "${bad[@]}"
  [ "$n" -ge 25 ]
  [ "${#bad[@]}" -eq 0 ]
}

# nbdsum-workflows(1), "With a running VM (QMP)", as written: its shell lines run
# in a directory with a vm.qcow2, each line starting with { goes to the
# monitor as one QMP command (tests/qmp.py), and where the page says
# the VM writes, the test writes through an export of the disk.  Both
# manifests' checksums are the reference's of the disk at that moment.
@test "docs: the QMP incremental workflow of nbdsum-workflows(1) runs as written against qemu-storage-daemon" {
  command -v qemu-storage-daemon >/dev/null ||
    skip "qemu-storage-daemon is not installed (Debian package qemu-system-common)"
  local script="$BATS_TEST_TMPDIR/qmp.sh" monday tuesday
  cd "$BATS_TEST_TMPDIR"
  qemu-img create -q -f qcow2 vm.qcow2 16M
  qemu-io -f qcow2 vm.qcow2 -c 'write -P 1 0 4M' -c 'write -P 2 9M 1M' >/dev/null
  qemu-img convert -O raw vm.qcow2 monday.raw
  {
    echo 'set -euo pipefail'
    printf 'PATH=%q:$PATH\n' "$(dirname "$NBDSUM")"
    printf 'qmp () { "$PYTHON" %q qmp.sock "$1"; }\n' "$top_srcdir/tests/qmp.py"
    sed -n '/^=head2 With a running VM (QMP)/,/^Wait for the/p' \
      "$top_srcdir/man/nbdsum-workflows.pod" | sed -n 's/^ //p' |
      sed -e ':a' -e '/\\$/N; s/\\\n//; ta' |
      while IFS= read -r line; do
        case $line in
          '{'*) printf 'qmp %q\n' "$line" ;;
          'qemu-storage-daemon '*)
            echo "$line"
            echo 'daemon=$!'
            echo 'for i in $(seq 100); do [ -S qmp.sock ] && [ -S nbd.sock ] && break; sleep 0.1; done' ;;
          '# ... the VM runs and writes ...')
            echo 'qmp '\''{"execute": "block-export-add", "arguments": {"type": "nbd", "id": "live", "node-name": "disk0", "name": "live", "writable": true}}'\'
            echo 'qemu-io -f raw "nbd+unix:///live?socket=$PWD/nbd.sock" -c "write -P 7 1M 64K" -c "write -P 8 12M 1M" >/dev/null'
            echo 'qmp '\''{"execute": "block-export-del", "arguments": {"id": "live"}}'\' ;;
          *) echo "$line" ;;
        esac
      done
    echo 'kill $daemon; wait $daemon || true'
  } > "$script"
  cat "$script"
  grep -q '^qmp .*block-dirty-bitmap-disable' "$script"
  grep -q 'since-monday' "$script"
  run bash "$script"
  echo "$output"
  [ "$status" -eq 0 ]
  qemu-img convert -O raw vm.qcow2 tuesday.raw
  monday=$(reference sha256 65536 monday.raw)
  tuesday=$(reference sha256 65536 tuesday.raw)
  [ "$monday" != "$tuesday" ]
  [ "$(head -n 1 monday.blocks | awk '{ print $NF }')" = "$monday" ]
  [ "$(head -n 1 tuesday.blocks | awk '{ print $NF }')" = "$tuesday" ]
  "$NBDSUM" --check-manifest monday.blocks tuesday.blocks
  # The next run's bitmap is there, Monday's gone.
  qemu-img info vm.qcow2 | grep -q 'name: since-tuesday'
  ! qemu-img info vm.qcow2 | grep -q 'name: since-monday' || false
}

# nbdsum-workflows(1), "VERIFYING AN IMPORT", as written: its shell
# lines run against a loopback HTTP server, the published image's
# line passes, and another image under that name is refused.
@test "docs: nbdsum-workflows(1)'s import takes the published image and refuses another" {
  local script
  load "$top_srcdir/tests/servers"
  cd "$BATS_TEST_TMPDIR"
  mkdir www
  qemu-img create -q -f raw www/disk.img 8M
  qemu-io -f raw -c 'write -P 7 1M 2M' -c 'write -P 9 7M 4K' \
    www/disk.img >/dev/null
  (cd www && sha256sum disk.img > SHA256SUMS)
  start_http www
  script=$(sed -n '/^=head1 VERIFYING AN IMPORT/,/^=head1 INCREMENTAL/p' \
             "$top_srcdir/man/nbdsum-workflows.pod" | sed -n 's/^ //p' |
           sed -e ':a' -e '/\\$/N; s/\\\n//; ta' |
           sed -e "s|https://example.com/images|$url|g" \
               -e 's|^curl -sO .*|cp www/SHA256SUMS .|' \
               -e 's|--filter=blkhash|--filter="$BLKHASH_FILTER"|')
  echo "$script"
  [[ $script = *blkhash-expect=sha256* ]]
  printf 'set -euo pipefail\nPATH=%q:$PATH\n%s\n' "$(dirname "$NBDSUM")" \
    "$script" > import.sh
  run bash import.sh
  echo "$output"
  [ "$status" -eq 0 ]
  cmp www/disk.img disk.img
  # The server now serves another image under the published name: the
  # remote check says FAILED and the import fails.
  qemu-io -f raw -c 'write -P 8 2M 4K' www/disk.img >/dev/null
  rm disk.img
  run bash import.sh
  echo "$output"
  [ "$status" -ne 0 ]
  [[ $output = *"disk.img: FAILED"* ]]
  sed -i '/^nbdsum --plain -c --ignore-missing remote.sums$/d' import.sh
  run bash import.sh
  echo "$output"
  [ "$status" -ne 0 ]
  [[ $output = *blkhash-expect* ]]
  kill_servers
}
