#!/usr/bin/env bats
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

@test "docs: dd in README and man page examples prints no records noise" {
  local bad
  bad=$(grep -nE '\| *dd |^ *dd ' "$top_srcdir/README.md" \
        "$top_srcdir"/man/*.pod | grep -v 'status=none' || true)
  echo "$bad"
  [ -z "$bad" ]
}
