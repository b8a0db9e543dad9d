#!/usr/bin/env bash
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# make check-sanitizers: the tests again, looking for memory errors.
#
# 1. A second build with ASan and UBSan, in _build-asan/ (from a copy
#    of the sources, since this tree is configured in place), runs the
#    lib unit tests, the fuzz drivers and the nbdsum suites.  The
#    sanitizers log to files, so a report fails the run even where a
#    test expected nbdsum to fail.
# 2. The filter suites run with the normal build and nbdkit under
#    valgrind (ASan preloaded into nbdkit hangs at exit inside p11-kit
#    on Debian 12): an 'nbdkit' first in PATH is a wrapper.  nbdkit's
#    exit status does not carry valgrind's (--run and the server are
#    different processes), so the valgrind logs are read instead;
#    tests/valgrind.supp hides nbdkit's own leaks.
#
# SAN_SUITES names the nbdsum suites to run (default: all of them but
# nbdsum-progress, which measures timing).
#
# With BLKHASH_SANITIZERS set, the tests that measure memory skip
# themselves, and the stress test runs STRESS_ROUNDS (4) rounds.
#
# make check-sanitizers sets the environment (as for make check) and
# UNIT_TESTS and NBDKIT.  The last line is "N passed, N failed, N
# skipped".
set -uo pipefail

: "${top_srcdir:?run me by make check-sanitizers}"
: "${top_builddir:?run me by make check-sanitizers}"
: "${UNIT_TESTS:?}"
NBDKIT=${NBDKIT:-$(command -v nbdkit)}
JOBS=${JOBS:-2}
SAN_CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
# clang where there is one: gcc's UBSan, beside ASan, ignores log_path
# and reports only on stderr, which a test expecting failure hides.
SAN_CC=${SAN_CC:-$(command -v clang || echo gcc)}

build=$top_builddir/_build-asan
logs=$build/check-logs
normal_filter=$BLKHASH_FILTER
passed=0 failed=0 skipped=0 start=$SECONDS
nbdsum_suites=$(cd "$top_srcdir/tests" && ls nbdsum-*.bats | sed 's/\.bats$//' |
                grep -vx nbdsum-progress)
export BLKHASH_SANITIZERS=1

# Run one TAP producer into logs/NAME.log and count its test cases.
tap () {
  local name=$1 log=$logs/$1.log p f k rc
  shift
  "$@" > "$log" 2>&1
  rc=$?
  k=$(grep -ci '^ok .* # skip' "$log")
  p=$(($(grep -c '^ok ' "$log") - k))
  f=$(grep -c '^not ok ' "$log")
  # A crash or a missing plan is a failure even with no "not ok".
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + k))
  printf '  %-26s %4d passed, %d failed%s\n' "$name" "$p" "$f" \
    "$([ "$k" -eq 0 ] || echo ", $k skipped")"
  if [ "$f" -ne 0 ]; then
    grep '^not ok ' "$log" | sed 's/^/    /'
    echo "    (exit status $rc; see $log)"
  fi
}

# Report files (sanitizer logs, valgrind logs): each counts as a failure.
reports () {
  local what=$1 pattern=$2 n=0 f
  shift 2
  for f in "$@"; do
    [ -s "$f" ] || continue
    if grep -Eq "$pattern" "$f"; then
      n=$((n + 1))
      echo "  $what: $f"
      sed -n '1,40s/^/    /p' "$f"
    fi
  done
  failed=$((failed + n))
  echo "  $what: $n reports"
}

copy_sources () {
  mkdir -p "$build"
  if git -C "$top_srcdir" rev-parse --git-dir > /dev/null 2>&1; then
    (cd "$top_srcdir" &&
     git ls-files -z --cached --others --exclude-standard |
       tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$build"
  else
    make -C "$top_builddir" distdir distdir="$build" > /dev/null
  fi
}

echo "== check-sanitizers: building with ASan and UBSan ($SAN_CC) in $build"
copy_sources || exit 1
rm -rf "$logs"
mkdir -p "$logs/san" "$logs/valgrind" "$logs/bin"
if ! (cd "$build" &&
      { [ -f Makefile ] || { ./autogen.sh &&
                             ./configure CC="$SAN_CC" \
                                         CFLAGS="$SAN_CFLAGS"; }; } &&
      make -j"$JOBS" && make -j"$JOBS" check TESTS=) \
      > "$logs/build.log" 2>&1; then
  tail -n 30 "$logs/build.log"
  echo "check-sanitizers: the sanitizer build failed (see $logs/build.log)"
  echo "0 passed, 1 failed"
  exit 1
fi

echo "== check-sanitizers: unit tests, fuzz drivers, nbdsum suites (ASan, UBSan)"
(
  export ASAN_OPTIONS="log_path=$logs/san/asan:detect_leaks=1"
  export UBSAN_OPTIONS="log_path=$logs/san/ubsan:print_stacktrace=1"
  export top_srcdir=$build top_builddir=$build
  export NBDSUM=$build/client/nbdsum MKIMAGE=$build/tests/mkimage
  export STRESS=$build/tests/stress VECTORS=$build/tests/data/vectors.tsv
  # The sanitized filter cannot be loaded into nbdkit: use the normal one.
  export BLKHASH_FILTER=$normal_filter NBDSUM_FILTER=$normal_filter
  for t in $UNIT_TESTS; do
    tap "${t##*/}" "$build/$t"
  done
  for s in ${SAN_SUITES:-$nbdsum_suites}; do
    tap "$s.bats" bats --tap "$build/tests/$s.bats"
  done
  echo "$passed $failed $skipped" > "$logs/counts"
)
read -r passed failed skipped < "$logs/counts"
reports "ASan/UBSan" . "$logs"/san/*

echo "== check-sanitizers: filter suites, nbdkit under valgrind"
cat > "$logs/bin/nbdkit" <<WRAPPER
#!/bin/sh
exec valgrind --quiet --error-exitcode=99 --trace-children=no \\
  --leak-check=full --errors-for-leak-kinds=definite --keep-debuginfo=yes \\
  --suppressions='$top_srcdir/tests/valgrind.supp' \\
  --log-file='$logs/valgrind/vg.%p' '$NBDKIT' "\$@"
WRAPPER
chmod +x "$logs/bin/nbdkit"
(
  # Under valgrind a test may take minutes more than the watchdog's
  # default.
  export PATH="$logs/bin:$PATH" STRESS_ROUNDS=${STRESS_ROUNDS:-4} \
    BLKHASH_TEST_TIMEOUT=${BLKHASH_TEST_TIMEOUT:-1800}
  for s in filter-basics filter-view filter-plain filter-passive filter-readahead \
           filter-trust filter-fresh; do
    tap "$s.bats" bats --tap "$top_srcdir/tests/$s.bats"
  done
  echo "$passed $failed $skipped" > "$logs/counts"
)
read -r passed failed skipped < "$logs/counts"
reports "valgrind" \
  'Invalid|uninitialised|definitely lost|Mismatched|overlap|fishy|Process terminating|ERROR SUMMARY: [1-9]' \
  "$logs"/valgrind/*

echo "check-sanitizers: $((SECONDS - start)) s; logs in $logs"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
