#!/bin/sh
# Copyright (C) 2026 The nbdkit-blkhash developers
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Generate configure.  autoreconf -i also installs build-aux/tap-driver.sh
# (configure.ac requires it with AC_REQUIRE_AUX_FILE).
set -e
cd "$(dirname "$0")"
autoreconf -i
