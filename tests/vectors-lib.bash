# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Known-answer vectors: images rebuilt from their recipes, served
# through the filter, checked through nbdsum, the view read directly,
# and the independent reference.

# Images are built once per run of the suite, their sha256 checked.
build_all_vector_images () {
  local name want got
  for name in $(vector_images); do
    build_vector_image "$name" "$BATS_FILE_TMPDIR"
    want=$(vector_rows "$name" | head -n 1 | cut -f4)
    got=$(sha256sum < "$BATS_FILE_TMPDIR/$name.img" | cut -d' ' -f1)
    if [ "$got" != "$want" ]; then
      echo "image $name rebuilt wrongly: sha256 $got, want $want" >&2
      return 1
    fi
  done
}

# Fields of data row N (1-based, comments skipped).
load_row () {
  IFS=$'\t' read -r name recipe size image_sha digest bs want \
    < <(grep -v '^#' "$VECTORS" | sed -n "${1}p")
  img="$BATS_FILE_TMPDIR/$name.img"
  view="$BATS_TEST_TMPDIR/view"
  [ -f "$img" ]
  export img digest bs size view
}

check_reference () {
  load_row "$1"
  run reference "$digest" "$bs" "$img"
  [ "$status" -eq 0 ]
  [ "$output" = "$want" ]
}

# nbdsum's line, and the view read straight through the suffix for
# that digest and block size: its header (block size, digest length
# and name) and the root at offset 4096.
check_nbdsum_and_view () {
  local len=$(( ${#want} / 2 ))
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sum_hex "${lines[0]}")" = "$want" ]
  [ "$(le_at "$view" 32 4)" -eq "$bs" ]
  [ "$(le_at "$view" 36 4)" -eq "$len" ]
  [ "$(dd if="$view" bs=1 skip=56 count=64 status=none | tr -d '\0')" = \
    "$digest" ]
  [ "$(hexdump_at "$view" 4096 "$len")" = "$want" ]
}

check_file_plugin () {
  load_row "$1"
  run serve file "$img" -- '
    "$NBDSUM" -d "$digest" --block-size "$bs" "$uri" &&
    nbdcopy "nbd+unix:///@blkhash:$digest/$bs?socket=$unixsocket" "$view"'
  check_nbdsum_and_view
}

check_memory_plugin () {
  load_row "$1"
  run serve memory "$size" -- '
    nbdcopy "$img" "$uri" &&
    "$NBDSUM" -d "$digest" --block-size "$bs" "$uri" &&
    nbdcopy "nbd+unix:///@blkhash:$digest/$bs?socket=$unixsocket" "$view"'
  check_nbdsum_and_view
}

# The image on standard input: nbdsum's own stream hashing.
check_stdin () {
  load_row "$1"
  run "$NBDSUM" -d "$digest" --block-size "$bs" - < "$img"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 1 ]
  [ "$(sum_hex "$output")" = "$want" ]
}

# No filter: nbdsum falls back to hashing itself, and says so.
check_client_side () {
  load_row "$1"
  run nbdkit -U - file "$img" --run \
    '"$NBDSUM" -d "$digest" --block-size "$bs" "$uri"'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" = *"hashing client-side"* ]]
  [ "$(sum_hex "$(grep -E '^([0-9a-f]+  |BLKHASH-.* \()nbd' <<< "$output")")" = \
    "$want" ]
}
