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
  man=$(grep -oE -- '^=item B<--[a-z-]+' "$top_srcdir/man/nbdsum.pod" |
        sed 's/=item B<//' | sort -u)
  echo "help: $help"
  echo "man: $man"
  [ "$help" = "$man" ]
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

@test "docs: dd in README and man page examples prints no records noise" {
  local bad
  bad=$(grep -nE '\| *dd |^ *dd ' "$top_srcdir/README.md" \
        "$top_srcdir"/man/*.pod | grep -v 'status=none' || true)
  echo "$bad"
  [ -z "$bad" ]
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
           find lib plugin client tests bench -type f \
             \( -name '*.[ch]' -o -name '*.bats' -o -name '*.bash' \
                -o -name '*.py' -o -name '*.sh' -o -name '*.am' \) \
             ! -path '*/_build*' ! -name 'vectors*.bats' &&
           printf '%s\n' configure.ac Makefile.am autogen.sh quickstart \
             bench/run bench/latency bench/completion tests/gen-vectors-bats)
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
