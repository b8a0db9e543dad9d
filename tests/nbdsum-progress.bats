#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdsum -p: the progress bar on a terminal (a pseudo-terminal made by
# tests/ptyrun.py): fitted to the width, naming its input, its rate
# and time left counting data bytes, not holes.

load "$top_srcdir/tests/helpers"

# 2 GiB, of which 48 MiB of data in three pieces.
DATA_BYTES=$((48 * 1024 * 1024))

setup_file () {
  "$MKIMAGE" '2G;d:0+16M:a;d:1G+16M:b;d:2032M+16M:c' \
    "$BATS_FILE_TMPDIR/sparse.img"
  reference sha256 65536 "$BATS_FILE_TMPDIR/sparse.img" \
    > "$BATS_FILE_TMPDIR/want"
  disk40_build
}

setup () {
  sparse="$BATS_FILE_TMPDIR/sparse.img"
  want=$(cat "$BATS_FILE_TMPDIR/want")
  disk40_vars
  cd "$BATS_TEST_TMPDIR"
  export sparse want
}

# ptyrun COLUMNS FILE COMMAND...: COMMAND's standard error on a
# terminal COLUMNS wide (0: of unknown size), saved in FILE.
ptyrun () {
  "$PYTHON" "$top_srcdir/tests/ptyrun.py" "$@"
}

# The lines of the terminal output in FILE as they were drawn, one per
# line, empty ones left out: the bar is redrawn after each \r.
drawn () {
  tr '\r' '\n' < "$1" | grep -v '^$' || true
}

# Fail if a line drawn in FILE is WIDTH columns or longer (the cursor
# would wrap on some terminals when the last column is written).
fits () {
  LC_ALL=C awk -v w="$2" 'length ($0) >= w {
      printf "too long for %d columns: %d: %s\n", w, length ($0), $0; bad = 1 }
    END { exit bad }' < <(drawn "$1")
}

# The rate of a drawn line, in bytes per second.
rate_of () {
  LC_ALL=C awk '{
    for (i = 2; i <= NF; i++)
      if ($i ~ /^(B|KiB|MiB|GiB|TiB)\/s$/) {
        m = 1; u = $i; sub (/\/s$/, "", u)
        if (u == "KiB") m = 1024; else if (u == "MiB") m = 1024 ^ 2
        else if (u == "GiB") m = 1024 ^ 3; else if (u == "TiB") m = 1024 ^ 4
        printf "%.0f\n", $(i - 1) * m; exit
      }
  }' <<< "$1"
}

# The percentage of a drawn line.
percent_of () {
  grep -oE '[0-9]+%' <<< "$1" | head -n 1 | tr -d %
}

# Hash URI's image, with the bar, on a terminal 100 columns wide,
# slowly (below the filter, every read takes $2), and check what the
# bar said against the data bytes and the time taken.  $1: nbdsum's
# options.
check_data_rate () {
  serve --filter=delay file "$sparse" rdelay="$2" -- '
    start=$(date +%s.%N)
    "$PYTHON" "$top_srcdir/tests/ptyrun.py" 100 bar "$NBDSUM" '"$1"' -p \
      "$uri" > out
    echo $? > status
    end=$(date +%s.%N)
    echo "$start $end" > times'
  cat out
  drawn bar
  [ "$(cat status)" -eq 0 ]
  [ "$(cut -d' ' -f1 out)" = "$want" ]
  fits bar 100

  local last first rate seconds
  last=$(drawn bar | tail -n 1)
  first=$(drawn bar | head -n 1)
  # Intermediate bars were drawn, and the last is the end.
  [ "$(drawn bar | wc -l)" -ge 3 ]
  [ "$(percent_of "$last")" -eq 100 ]
  # Its length, whatever it was (not under a minute: a loaded machine).
  [[ "$last" =~ \ in\ [0-9]+:[0-5][0-9]:[0-5][0-9] ]]
  # Holes are not progress: server-side, the first bar is drawn (after
  # 0.2 s) while the data is still being read (a request's span of
  # 1 MiB, four reads of 300 ms, two at a time: 0.6 s at least), and is
  # not far along; by position it would be nearly all done.
  if [ -z "$1" ]; then
    [ "$(percent_of "$first")" -le 50 ]
  fi
  # The last rate is the data's: not larger than the data bytes over
  # the time nbdsum ran by much (the rate leaves out its start-up), nor
  # smaller.  Counting holes would make it 42 times larger.
  rate=$(rate_of "$last")
  seconds=$(awk '{ print $2 - $1 }' times)
  echo "rate $rate B/s, $DATA_BYTES data bytes in $seconds s"
  awk -v r="$rate" -v d="$DATA_BYTES" -v s="$seconds" \
    'BEGIN { exit !(r <= 10 * d / s && r >= 0.95 * d / s) }'
}

@test "nbdsum-progress: server-side, rate and percentage count data bytes, not holes" {
  check_data_rate "" 300ms
}

@test "nbdsum-progress: client-side, rate and percentage count data bytes, not holes" {
  check_data_rate "--client-side -C 1 -R 2" 10ms
}

@test "nbdsum-progress: until data is done, no time left is made up" {
  serve --filter=delay file "$sparse" rdelay=300ms -- '
    "$PYTHON" "$top_srcdir/tests/ptyrun.py" 100 bar "$NBDSUM" -p "$uri" \
      > out'
  drawn bar
  # Server-side, nothing is known until the first piece is hashed:
  # then the time left is unknown, not 0:00:00.
  run drawn bar
  [[ "${lines[0]}" = *"   0%      0.0 B/s ETA -:--:--" ]]
  ! grep -E ' [0-9] *% .*ETA 0:00:00' < <(drawn bar) || false
}

@test "nbdsum-progress: lines fit terminals of any width, from TIOCGWINSZ" {
  local dir="long-directory-name-number-one/long-directory-name-number-two"
  local name="$dir/sparse-image.img" w
  mkdir -p "$dir"
  cp --sparse=always "$sparse" "$name"
  for w in 1 4 5 12 13 14 20 30 45 60 80 200; do
    run ptyrun "$w" bar "$NBDSUM" -p "$name"
    [ "$status" -eq 0 ]
    [ "$output" = "$want  $name" ]
    echo "== $w columns"
    drawn bar
    fits bar "$w"
    last=$(drawn bar | tail -n 1)
    # Every line ends in the terminal, once.
    [ "$(tr -cd '\n' < bar | wc -c)" -eq 1 ]
    if [ "$w" -ge 5 ]; then
      [[ "$last" = *"100%"* ]]
    fi
    if [ "$w" -ge 14 ]; then
      # At least 8 columns of the name, its end.
      [[ "$last" = *".img "*"100%"* ]]
      [ "$w" -ge 150 ] || [[ "$last" = "..."* ]]
    fi
    if [ "$w" -ge 60 ]; then
      # All parts; a name too long shortened at its start.
      [[ "$last" = *".img ["*"] 100% "*"/s  in "[0-9]*:[0-5][0-9]:[0-5][0-9] ]]
      [ "$w" -ge 150 ] || [[ "$last" = "..."*"-image.img ["* ]]
    fi
    if [ "$w" -ge 80 ]; then
      [ "$w" -ge 150 ] ||
        [[ "$last" = "..."*"-two/sparse-image.img ["* ]]
    fi
    if [ "$w" -ge 150 ]; then
      [[ "$last" = "$name ["* ]]
    fi
  done
}

@test "nbdsum-progress: COLUMNS when the terminal does not say its size, else 80" {
  local name="a-long-input-name-to-see-the-bar-use-all-the-width.img" last
  cp --sparse=always "$sparse" "$name"
  COLUMNS=200 ptyrun 0 bar "$NBDSUM" -p "$name"
  drawn bar
  last=$(drawn bar | tail -n 1)
  fits bar 200
  # The whole name and a bar of more than the 10 cells of 80 columns.
  [[ "$last" = "$name [####################"*"] 100%"* ]]
  COLUMNS=30 ptyrun 0 bar "$NBDSUM" -p "$name"
  drawn bar
  fits bar 30
  [[ "$(drawn bar | tail -n 1)" = "...width.img 100%"* ]]
  # Nonsense is ignored.
  for c in "" 0 -5 abc 12x; do
    COLUMNS=$c ptyrun 0 bar "$NBDSUM" -p "$name"
    drawn bar
    fits bar 80
    [ "$(LC_ALL=C awk '{ print length ($0) }' < <(drawn bar | tail -n 1))" -gt 60 ]
  done
  # The terminal's own width comes first.
  COLUMNS=200 ptyrun 40 bar "$NBDSUM" -p "$name"
  fits bar 40
}

@test "nbdsum-progress: several inputs, each line names its own" {
  "$MKIMAGE" '300000;d:0+300000:other' other.img
  run ptyrun 80 bar "$NBDSUM" -p "$sparse" other.img - < other.img
  [ "$status" -eq 0 ]
  drawn bar
  fits bar 80
  # One final line per input, in order, each with its name.
  run grep -a '100%' < <(drawn bar)
  [ "${#lines[@]}" -eq 3 ]
  [[ "${lines[0]}" = *"sparse.img ["* ]]
  [[ "${lines[1]}" = "other.img ["* ]]
  # Standard input, of unknown size: one line at the end, with a rate.
  [[ "${lines[2]}" = "- ["*"100%"* ]]
  [ "$(rate_of "${lines[2]}")" -ge 0 ]
}

@test "nbdsum-progress: control characters in a name cannot move the cursor" {
  local name=$'bad\033[2J\tname.img'
  cp --sparse=always "$sparse" "$name"
  run ptyrun 80 bar "$NBDSUM" -p "$name"
  [ "$status" -eq 0 ]
  drawn bar
  [[ "$(drawn bar | tail -n 1)" = "bad?[2J?name.img ["* ]]
  ! grep -q $'\033' bar || false
  ! grep -q $'\t' bar || false
}

@test "nbdsum-progress: a server without extents: the bar counts all bytes" {
  # nbdkit --no-sr offers no base:allocation.  256 MiB, 8 MiB of data.
  "$MKIMAGE" '256M;d:0+8M:a' small.img
  serve --no-sr --filter=delay file small.img rdelay=10ms -- '
    start=$(date +%s.%N)
    "$PYTHON" "$top_srcdir/tests/ptyrun.py" 100 bar "$NBDSUM" -p "$uri" \
      > out
    end=$(date +%s.%N)
    echo "$start $end" > times'
  drawn bar
  [ "$(cut -d' ' -f1 out)" = "$(reference sha256 65536 small.img)" ]
  local rate seconds
  rate=$(rate_of "$(drawn bar | tail -n 1)")
  seconds=$(awk '{ print $2 - $1 }' times)
  echo "rate $rate B/s in $seconds s"
  # All 256 MiB counted: far more than the 8 MiB of data.
  awk -v r="$rate" -v s="$seconds" \
    'BEGIN { exit !(r >= 0.95 * 2 ^ 28 / s) }'
}

@test "nbdsum-progress: -p and --progress=FD together: the FD lines as without -p" {
  serve --filter=delay file "$sparse" rdelay=300ms -- '
    "$PYTHON" "$top_srcdir/tests/ptyrun.py" 80 bar "$NBDSUM" -p \
      --progress=3 "$uri" 3>fd > out'
  cat fd
  drawn bar
  # N/100 lines only, rising to 100/100, by all bytes: the holes (95%
  # of the image) are done long before the data (0.6 s at least), so
  # some line says 9N/100.  By data bytes there would be none.
  ! grep -v -E '^[0-9]+/100$' fd || false
  [ "$(tail -n 1 fd)" = "100/100" ]
  sort -n -c -t/ -k1 fd
  grep -E '^9[0-9]/100$' fd
  [ "$(percent_of "$(drawn bar | head -n 1)")" -le 50 ]
  [[ "$(drawn bar | tail -n 1)" = *"100%"* ]]
}

@test "nbdsum-progress: extents too slow to list: the bar counts all bytes" {
  # Over 4095 MiB takes two block status requests, each delayed 3 s
  # above the filter: listing them is given up after 2 s.  Below it,
  # the data is read at 32 MiB/s at most.
  "$MKIMAGE" '4100M;d:0+32M:a' big.img
  nbdkit -U - --filter=delay --filter="$BLKHASH_FILTER" --filter=rate \
    file big.img delay-extents=3 rate=256M burstiness=0.2 --run '
    start=$(date +%s.%N)
    "$PYTHON" "$top_srcdir/tests/ptyrun.py" 100 bar "$NBDSUM" -p "$uri" \
      > out
    end=$(date +%s.%N)
    echo "$start $end" > times'
  drawn bar
  [ "$(cut -d' ' -f1 out)" = "$(reference sha256 65536 big.img)" ]
  # The rate counts all 4100 MiB over a time within the run's (the
  # hashing's, after the extents): at least 4100 MiB over the whole
  # run, whatever the machine's load.  Counting the data, it would be
  # 32 MiB over the hashing (1 s at least, at 32 MiB/s): the run
  # would have to take 120 times as long to pass.
  local last rate seconds
  last=$(drawn bar | tail -n 1)
  [[ "$last" = *" 100% "*"/s  in "[0-9]*:[0-5][0-9]:[0-5][0-9] ]]
  rate=$(rate_of "$last")
  seconds=$(awk '{ print $2 - $1 }' times)
  echo "rate $rate B/s; the run took $seconds s"
  awk -v r="$rate" -v s="$seconds" \
    'BEGIN { exit !(r >= 0.95 * 4100 * 2 ^ 20 / s) }'
}

@test "nbdsum-progress: without a terminal, -p prints a plain line at the end" {
  run bash -c '"$NBDSUM" -p "$sparse" 2>err'
  [ "$status" -eq 0 ]
  [ "$output" = "$want  $sparse" ]
  cat err
  [ "$(wc -l < err)" -eq 1 ]
  [[ "$(cat err)" = "nbdsum: $sparse: 100% "*"/s in "[0-9]*:[0-5][0-9]:[0-5][0-9] ]]
  ! grep -q $'\r' err || false
}

# Slow storage (every read 100 ms) and a queue of 8: what is shown is
# never beyond what the plugin was asked to read, nor behind what it
# answered by more than the requests in flight (8 spans of 4 MiB at
# first: 12.5%) and an update (0.5 allowed: a loaded machine stamps
# the lines late);
# without a terminal, -p prints a line every 10 s.  Before, spans of
# 32 MiB each made the progress stand at 0% until the end.  Without
# read-ahead the run takes 1024 reads / 8 in flight * 100 ms = 12.8 s
# (with it, from 6.4 s on an idle machine: no line at 10 s).
@test "nbdsum-progress: on slow storage the fraction shown follows the bytes hashed" {
  local total=$((256 * 1024 * 1024))
  "$MKIMAGE" '256M;d:0+256M:a' full.img
  run nbdkit -U - --filter="$BLKHASH_FILTER" --filter=log --filter=delay \
    file full.img rdelay=100ms logfile="$PWD/log" blkhash-readahead=false \
    --run '
    "$NBDSUM" -C 2 -R 4 -p --progress=3 "$uri" 2>err 3>&1 >out |
      while read -r l; do echo "$(date +%s.%N) $l"; done > progress'
  [ "$status" -eq 0 ]
  [ "$(sum_hex "$(cat out)")" = "$(reference sha256 65536 full.img)" ]
  cat progress err
  run "$PYTHON" "$top_srcdir/tests/progress-lag.py" log progress "$total"
  echo "$output"
  read -r _ lead _ lag _ lines _ <<< "$output"
  # (Behind by the 8 spans in flight, 0.125, and an update; a loaded
  # machine stamps the lines late.  The old code: 0.97.)
  awk -v l="$lead" 'BEGIN { exit !(l <= 0.01) }'
  awk -v l="$lag" 'BEGIN { exit !(l <= 0.5) }'
  [ "$lines" -ge 5 ]
  sort -n -c -t/ -k1 <(cut -d' ' -f2 progress)
  # A line at 10 s, and one at the end, in order.
  [ "$(wc -l < err)" -ge 2 ]
  [[ "$(head -n 1 err)" = "nbdsum: nbd+unix:"*": "[0-9]*"% "*"/s ETA "[0-9]* ]]
  [[ "$(tail -n 1 err)" = "nbdsum: nbd+unix:"*": 100% "*"/s in 0:00:"* ]]
}

@test "nbdsum-progress: C1 controls in a name (UTF-8 or stray bytes) become '?'" {
  # U+009B and a bare 0x9b byte are CSI on some terminals; e with an
  # acute accent (U+00E9) is printed as it is.
  local name=$'c1\xc2\x9b2J-\x9b2J-\xc3\xa9.img'
  cp --sparse=always "$sparse" "$name"
  run ptyrun 80 bar "$NBDSUM" -p "$name"
  [ "$status" -eq 0 ]
  [[ "$(drawn bar | tail -n 1)" = $'c1?2J-?2J-\xc3\xa9.img ['* ]]
  ! grep -q $'\x9b' bar || false
}

@test "nbdsum-progress: --progress=FD writes N/100 lines up to 100" {
  run bash -c '"$NBDSUM" --progress=3 "$disk40" 3>progress >/dev/null'
  [ "$status" -eq 0 ]
  cat progress
  [ "$(tail -n 1 progress)" = "100/100" ]
  # Percentages never go down.
  sort -n -c -t/ -k1 progress
  run bash -c '"$NBDSUM" --client-side --progress=3 "$disk40" 3>progress >/dev/null'
  [ "$(tail -n 1 progress)" = "100/100" ]
  # A descriptor not open is a usage error, before nbdsum opens its own
  # (progress went into its sockets and servers' logs).
  run bash -c '"$NBDSUM" --progress=6 "$disk40" 6>&-'
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "nbdsum: --progress=6: file descriptor 6 is not open (as in 3>FILE)" ]
}

@test "nbdsum-progress: -p without a terminal prints no bar" {
  run bash -c '"$NBDSUM" -p "$disk40" 2>err'
  [ "$status" -eq 0 ]
  cat err
  ! grep -q $'\r' err || false
  [ "$(wc -l < err)" -eq 1 ]
}

@test "nbdsum-progress: an empty image: the bar goes by all bytes, its time left the fold's" {
  local mode
  for mode in "" --client-side; do
    serve null 8T -- '"$PYTHON" "$top_srcdir/tests/ptyrun.py" 100 bar \
      "$NBDSUM" '"$mode"' -p "$uri" > out'
    echo "mode: ${mode:-server-side}"
    drawn bar
    [ "$(wc -w < out)" -eq 2 ]
    # Holes cost the outer hash, a digest per block: no time left
    # half way through is made up (it was "40% 0.0 B/s ETA 0:00:00",
    # then the root read did the fold).  The time left is rounded up,
    # so 0:00:00 is nothing left, whatever the rate; a rate of 0.0 B/s
    # is what a fold that took 10 s on a loaded machine shows (then
    # the time left is unknown: -:--:--).
    ! drawn bar | grep -E ' ([1-9]|[1-4][0-9])% .*ETA 0:00:00' || false
    [ "$(drawn bar | wc -l)" -ge 3 ]
    [ "$(percent_of "$(drawn bar | tail -n 1)")" -eq 100 ]
  done
}
