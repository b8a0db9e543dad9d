#!/bin/sh
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# make check-repeat: make check N times, then every test that failed in
# any run, with how many times.  A flaky test shows as failing in some
# runs only.
#
#   check-repeat.sh N TEST...
#
# Run in the build tree by make (MAKE set), with the tests make check
# would run (TESTS).  Each run's logs of failing tests are kept in
# check-repeat/runK/; the summary is check-repeat/summary too.  Exits 1
# if any test failed in any run.

n=$1
shift
case $n in
  ''|*[!0-9]*|0) echo "check-repeat: N must be a number of runs, not '$n'" >&2
                 exit 2 ;;
esac
: "${MAKE:=make}"
dir=check-repeat
rm -rf "$dir"
mkdir -p "$dir"
failed="$dir/failed"
: > "$failed"

# The log automake's harness writes for TEST (TEST_EXTENSIONS = .bats).
log_of () {
  case $1 in
    *.bats) echo "${1%.bats}.log" ;;
    *) echo "$1.log" ;;
  esac
}

i=1
while [ "$i" -le "$n" ]; do
  start=$(date +%s)
  $MAKE check TESTS="$*" > "$dir/run$i.out" 2>&1
  rc=$?
  echo "check-repeat: run $i of $n: exit $rc in $(($(date +%s) - start)) s"
  for t in "$@"; do
    log=$(log_of "$t")
    if [ ! -f "$log" ]; then
      echo "$t: no log (see $dir/run$i.out)" >> "$failed"
      continue
    fi
    # A TAP 'not ok' (bats names the test); else a driver's ERROR (a
    # bad plan, a crash), which also follows any 'not ok' of bats.
    pat='^(not ok|Bail out!)'
    grep -Eq "$pat" "$log" || pat='^ERROR:'
    if grep -Eq "$pat" "$log"; then
      mkdir -p "$dir/run$i/$(dirname "$log")"
      cp "$log" "$dir/run$i/$log"
      grep -E "$pat" "$log" |
        sed -e 's/^not ok [0-9]* */not ok: /' -e 's/ # .*//' \
            -e "s|^|$t: |" >> "$failed"
    fi
  done
  i=$((i + 1))
done

{
  echo "check-repeat: $n runs of $# tests"
  if [ -s "$failed" ]; then
    echo "failed (runs out of $n, test):"
    sort "$failed" | uniq -c | sort -rn |
      awk -v n="$n" '{ c = $1; sub(/^ *[0-9]+ /, ""); printf "  %d/%d  %s\n", c, n, $0 }'
  else
    echo "no test failed"
  fi
} | tee "$dir/summary"
[ ! -s "$failed" ]
