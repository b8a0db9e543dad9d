#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# make install puts the filter where nbdkit looks for filters.

load "$top_srcdir/tests/helpers"

# Where configure put it: nbdkit's filterdir, or under --prefix (as in
# make distcheck).
@test "install: filter in the configured filterdir, nbdsum, man pages" {
  local root="$BATS_TEST_TMPDIR/root"
  local filterdir=${BLKHASH_FILTERDIR:-$(pkg-config --variable=filterdir nbdkit)}
  make -C "$top_builddir" install DESTDIR="$root" >/dev/null
  find "$root" -type f | sort
  [ -f "$root$filterdir/nbdkit-blkhash-filter.so" ]
  [ ! -e "$root$filterdir/nbdkit-blkhash-filter.la" ]
  [ -x "$(find "$root" -path '*/bin/nbdsum')" ]
  [ -f "$(find "$root" -path '*/man1/nbdsum.1')" ]
  [ -f "$(find "$root" -path '*/man1/nbdkit-blkhash-filter.1')" ]
  # The installed filter loads into the installed nbdkit.
  run nbdkit -U - --filter="$root$filterdir/nbdkit-blkhash-filter.so" \
    memory 1M --run 'nbdinfo --list "$uri"'
  [ "$status" -eq 0 ]
  [[ "$output" = *'export="@blkhash"'* ]]
}

@test "install: make uninstall removes every installed file" {
  local root="$BATS_TEST_TMPDIR/root"
  make -C "$top_builddir" install DESTDIR="$root" >/dev/null
  [ -n "$(find "$root" -type f)" ]
  make -C "$top_builddir" uninstall DESTDIR="$root" >/dev/null
  echo "left: $(find "$root" -type f)"
  [ -z "$(find "$root" -type f)" ]
}

# The systemd examples (nbdkit-blkhash-filter(1), DEPLOYING TO MANY
# HOSTS): the service installed is the one tests/service.bats runs, and
# names the filter where make install put it.
@test "install: systemd units in DOCDIR/examples/systemd, naming the installed filter" {
  local root="$BATS_TEST_TMPDIR/root" dir f filter page
  local filterdir=${BLKHASH_FILTERDIR:-$(pkg-config --variable=filterdir nbdkit)}
  make -C "$top_builddir" install DESTDIR="$root" >/dev/null
  dir=$(find "$root" -type d -path '*/doc/nbdkit-blkhash/examples/systemd')
  echo "examples: $dir"
  [ -n "$dir" ]
  for f in nbdkit-blkhash.socket nbdkit-blkhash.service nbdkit-blkhash.conf; do
    [ -f "$dir/$f" ]
  done
  cmp "$dir/nbdkit-blkhash.service" "$top_builddir/systemd/nbdkit-blkhash.service"
  ! grep -n '@[A-Za-z_]*@' "$dir/nbdkit-blkhash.service" || false
  filter=$(sed -n 's/^ExecStart=.* --filter=\([^ ]*\) .*/\1/p' "$dir/nbdkit-blkhash.service")
  echo "filter: $filter"
  [ "$filter" = "$filterdir/nbdkit-blkhash-filter.so" ]
  [ -f "$root$filter" ]
  # The man page says where they are (roff source, hyphens unescaped).
  page=$(sed 's/\\-/-/g' "$top_builddir/man/nbdkit-blkhash-filter.1")
  [[ "$page" = *"${dir#"$root"}"* ]]
}

@test "install: the filter says its own version where nbdkit lets it" {
  local version
  version=$("$NBDSUM" --version | awk 'NR == 1 { print $2 }')
  [ -n "$version" ]
  run nbdkit --filter="$BLKHASH_FILTER" null --help
  [ "$status" -eq 0 ]
  [[ "$output" = *"filter: blkhash (nbdkit blkhash filter $version)"* ]]
}

@test "install: the man page names the versions it was built with" {
  local version nbdkit_version page
  version=$("$NBDSUM" --version | awk 'NR == 1 { print $2 }')
  nbdkit_version=$(pkg-config --modversion nbdkit)
  # The page's text without man (minimal systems have none): roff
  # source, lines joined.
  page=$(grep -v '^[.]' "$top_builddir/man/nbdkit-blkhash-filter.1" |
         sed 's/\\-/-/g' | tr -s ' \n' '  ')
  [[ "$page" = *"nbdkit-blkhash $version"* ]]
  [[ "$page" = *"nbdkit $nbdkit_version"* ]]
  [[ "$page" = *"nbdkit blkhash filter $version"* ]]
  [[ "$page" != *"@VERSION@"* && "$page" != *"@NBDKIT_VERSION@"* ]]
}

@test "install: --dump-plugin shows the filter's fields where nbdkit asks" {
  run nbdkit null --filter="$BLKHASH_FILTER" --dump-plugin
  [ "$status" -eq 0 ]
  if grep -q dump_plugin "$(pkg-config --variable=includedir nbdkit)/nbdkit-filter.h"; then
    [[ "$output" = *"blkhash_version=$("$NBDSUM" --version | awk 'NR == 1 { print $2 }')"* ]]
    [[ "$output" = *"blkhash_default_digest=sha256"* ]]
  else
    [[ "$output" != *"blkhash_version="* ]]
  fi
}

# configure's choice of directory, without building again: configure
# runs in a copy of what it reads (the tree itself is configured).
configured_filterdir () {
  local dir="$BATS_TEST_TMPDIR/build"
  rm -rf "$dir"
  mkdir -p "$dir/lib" "$dir/tests/fuzz"
  # With their times, so that make sees nothing to regenerate.
  cp -rp "$top_srcdir"/{configure,configure.ac,aclocal.m4,Makefile.am} \
    "$top_srcdir"/{Makefile.in,config.h.in,build-aux,m4} "$dir"
  cp -p "$top_srcdir/lib/blkhash.h" "$dir/lib"
  cp -p "$top_srcdir/tests/fuzz/fuzz.am" "$dir/tests/fuzz"
  # make distcheck's source tree is read-only, and so would the copy be.
  chmod -R u+w "$dir"
  (cd "$dir" && ./configure "$@" >/dev/null)
  make -s --no-print-directory -C "$dir" -f - print-filterdir <<'MK'
include Makefile
print-filterdir:
	@echo $(filterdir)
MK
}

@test "install: --prefix puts the filter under LIBDIR/nbdkit/filters" {
  run configured_filterdir --prefix="$BATS_TEST_TMPDIR/p"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "$BATS_TEST_TMPDIR/p/lib/nbdkit/filters" ]
  run configured_filterdir --prefix="$BATS_TEST_TMPDIR/p" --libdir=/opt/l
  [ "${lines[-1]}" = /opt/l/nbdkit/filters ]
  run configured_filterdir --prefix="$BATS_TEST_TMPDIR/p" --with-filterdir=/opt/f
  [ "${lines[-1]}" = /opt/f ]
  # Without --prefix: where the installed nbdkit looks.
  run configured_filterdir
  [ "${lines[-1]}" = "$(pkg-config --variable=filterdir nbdkit)" ]
}

# A --prefix install used as a user would, with nothing of this build
# tree in the environment: the bats helpers and [ nbdkit
# --filter=blkhash ... ] find the filter installed beside nbdsum,
# which nbdkit does not look for.
@test "install: a --prefix install: the bats helpers and [ nbdkit --filter=blkhash ] use its filter" {
  local t=$BATS_TEST_TMPDIR p=$BATS_TEST_TMPDIR/p sum
  make -s -C "$top_builddir" distdir distdir="$t/src" >/dev/null
  (cd "$t/src" && ./configure --prefix="$p" > "$t/configure.out" &&
     make -s -j"$(nproc)" >/dev/null && make -s install >/dev/null)
  # configure says where, expanded.
  grep 'where to install the filter' "$t/configure.out"
  grep -qx "checking where to install the filter... $p/lib/nbdkit/filters" \
    "$t/configure.out"
  [ -f "$p/lib/nbdkit/filters/nbdkit-blkhash-filter.so" ]
  # The filter's man page says what to give --filter= (roff source,
  # hyphens unescaped).
  grep -qF "$p/lib/nbdkit/filters/nbdkit-blkhash-filter.so" \
    <(sed 's/\\-/-/g' "$p/share/man/man1/nbdkit-blkhash-filter.1")
  "$MKIMAGE" '8M;d:0+1M:a;d:5M+300000:b' "$t/disk.img"
  cat > "$t/user.bats" <<'USER'
load "$(nbdsum --bats-helper)"
setup ()    { cd "$BATS_TEST_TMPDIR"; cp "$IMG" disk.img; }
teardown () { blkhash_stop; }
AT "the copy is the image" {
  blkhash_serve disk.img
  qemu-img convert -f raw -O qcow2 "$BLKHASH_URI" copy.qcow2
  assert_blkhash copy.qcow2 "$(blkhash_sum "$BLKHASH_URI")"
  [ "$(nbdsum --no-names "$BLKHASH_URI" 2>&1)" = "$WANT" ]
}
USER
  # (Written so, bats would count it as one of this file's tests.)
  sed -i 's/^AT /@test /' "$t/user.bats"
  sum=$(reference sha256 65536 "$t/disk.img")
  run env -u BLKHASH_FILTER -u NBDSUM -u NBDSUM_FILTER PATH="$p/bin:$PATH" \
    IMG="$t/disk.img" WANT="$sum" bats "$t/user.bats"
  echo "$output"
  [ "$status" -eq 0 ]
  # The view served, not a fallback: nothing on stderr.
  cd "$t"
  run env -u NBDSUM_FILTER "$p/bin/nbdsum" --no-names \
    [ nbdkit --filter=blkhash file disk.img ]
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$sum" ]
  run env -u NBDSUM_FILTER "$p/bin/nbdsum" --no-names \
    [ nbdkit --fil blkhash file disk.img ]
  [ "$output" = "$sum" ]
}

# A tree built with the default prefix, then configured with --prefix
# and installed, as ./configure --prefix=P && make && make install in
# a tree already built does: what nbdsum has compiled in (the filter's
# directory, the bats helpers' path) follows the new prefix, and libtool
# names no directory the install did not use.  Once, nbdsum kept the
# old paths ("config.h is unchanged": not rebuilt), its --bats-helper
# named a file that did not exist, it looked for the filter in
# nbdkit's directory, and libtool said to run libtool --finish there.
# nbdkit's own filter directory is left as it was.
@test "install: --prefix after a build with the default prefix: the installed nbdsum uses what was installed" {
  local t=$BATS_TEST_TMPDIR p=$BATS_TEST_TMPDIR/p helper sum sysdir before
  sysdir=$(pkg-config --variable=filterdir nbdkit)
  before=$(ls -la --time-style=full-iso "$sysdir" 2>&1)
  make -s -C "$top_builddir" distdir distdir="$t/src" >/dev/null
  cd "$t/src"
  ./configure > configure1.out
  make -s -j"$(nproc)" >/dev/null
  ./configure --prefix="$p" > configure2.out
  make -j"$(nproc)" > make2.out 2>&1
  make install > install.out 2>&1
  # libtool names no other directory to finish.
  echo "libtool: $(grep -i 'libtool --finish' install.out || :)"
  ! grep -i -e 'libtool --finish' install.out | grep -v -- "$p" || false
  ! grep -F -- "$sysdir" install.out || false
  # The bats helpers nbdsum names are those installed.
  helper=$("$p/bin/nbdsum" --bats-helper)
  echo "--bats-helper: $helper"
  [ "$helper" = "$p/share/nbdkit-blkhash/blkhash.bash" ]
  [ -f "$helper" ]
  grep -qF "$p/lib/nbdkit/filters/nbdkit-blkhash-filter.so" "$helper"
  # A local file, through the filter installed beside it.
  cd "$t"
  "$MKIMAGE" '8M;d:0+1M:a;d:5M+300000:b' disk.img
  sum=$(reference sha256 65536 disk.img)
  run env -u NBDSUM_FILTER -u BLKHASH_FILTER "$p/bin/nbdsum" --no-names disk.img
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "$sum" ]
  # nbdkit's filter directory untouched.
  [ "$(ls -la --time-style=full-iso "$sysdir" 2>&1)" = "$before" ]
}
