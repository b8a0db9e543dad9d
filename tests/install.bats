#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# make install puts the filter where nbdkit looks for filters.

load "$top_srcdir/tests/helpers"

@test "install: filter in nbdkit's filterdir, nbdsum, man pages" {
  local root="$BATS_TEST_TMPDIR/root" filterdir
  filterdir=$(pkg-config --variable=filterdir nbdkit)
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

@test "install: the filter says its own version where nbdkit lets it" {
  local version
  version=$("$NBDSUM" --version | awk '{ print $2 }')
  [ -n "$version" ]
  run nbdkit --filter="$BLKHASH_FILTER" null --help
  [ "$status" -eq 0 ]
  [[ "$output" = *"filter: blkhash (nbdkit blkhash filter $version)"* ]]
  grep -q "nbdkit-blkhash $version" "$top_srcdir/man/nbdkit-blkhash-filter.pod"
  grep -q "nbdkit blkhash filter $version" "$top_srcdir/man/nbdkit-blkhash-filter.pod"
}
