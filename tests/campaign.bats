#!/usr/bin/env bats
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The trust campaign, short mode: tests/campaign.py composes random
# operations a user takes (images of every qemu format, outside
# writes, resizes, overlays, snapshots, bitmaps, --since chains,
# long-running servers with blkhash-file and blkhash-cache written
# through, filter orders, signals, -c of lines made earlier, --range
# and --bmap views) and checks every checksum nbdsum or the filter
# prints against tests/reference.py of the guest content at that moment.  Fixed seeds, so that make check
# is the same on every run; bench/campaign (long mode) draws new ones.
# A failure lists the seed, the operation and the commands that
# reproduce it.  CAMPAIGN_OPS (default 100) sets the operations per
# case, CAMPAIGN_SEED another seed for the third case.
#
# Its hostile phase (tests/campaign_hostile.py, nbdsum(1) SECURITY):
# one case of each kind of hostile image or checksum file, watched by
# tests/canary.py; no canary opened, no connection, every refusal one
# clear message with exit status 1, every image read equal to the
# oracle.  CAMPAIGN_HOSTILE_SEED repeats its random seed.
#
# Its word phase (tests/campaign_word.py): one case of each kind of
# server word checked: files named like views beside tampered images,
# crafted views that echo the nonce and lie about some blocks
# (tests/echonbd.py), imports and uploads through blkhash-expect=
# (more than 65,536 ranges, writes through another name after a pass,
# zeroes and trims).  A fixed seed, CAMPAIGN_WORD_SEED another.

load "$top_srcdir/tests/helpers"

campaign () {
  run "$PYTHON" "$top_srcdir/tests/campaign.py" --small \
    --dir "$BATS_TEST_TMPDIR/work" --log "$BATS_TEST_TMPDIR/ops.log" \
    --repro 30 --timeout 120 "$@"
  echo "$output"
  [ "$status" -eq 0 ]
}

@test "campaign: seed 1" {
  campaign --ops "${CAMPAIGN_OPS:-100}" --seed 1 --hostile 0 --word 0
}

@test "campaign: seed 2" {
  campaign --ops "${CAMPAIGN_OPS:-100}" --seed 2 --hostile 0 --word 0
}

# make check is the same on every run: a third fixed seed, and the
# hostile and word phases'.  CAMPAIGN_SEED, CAMPAIGN_HOSTILE_SEED and
# CAMPAIGN_WORD_SEED choose others; bench/campaign draws new ones.
@test "campaign: seed 3, or CAMPAIGN_SEED" {
  : "${CAMPAIGN_SEED:=3}"
  seed_random CAMPAIGN_SEED
  campaign --ops "${CAMPAIGN_OPS:-100}" --seed "$SEED" --hostile 0 --word 0
}

@test "campaign: the hostile phase, seed 20261128, or CAMPAIGN_HOSTILE_SEED" {
  : "${CAMPAIGN_HOSTILE_SEED:=20261128}"
  seed_random CAMPAIGN_HOSTILE_SEED
  campaign --ops 0 --seed "$SEED" --word 0
}

@test "campaign: the word phase, seed 107, or CAMPAIGN_WORD_SEED" {
  : "${CAMPAIGN_WORD_SEED:=107}"
  seed_random CAMPAIGN_WORD_SEED
  campaign --ops 0 --hostile 0 --seed "$SEED"
}
