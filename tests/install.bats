#!/usr/bin/env bats
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
