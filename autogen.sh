#!/bin/sh
# Generate configure.  autoreconf -i also installs build-aux/tap-driver.sh
# (configure.ac requires it with AC_REQUIRE_AUX_FILE).
set -e
cd "$(dirname "$0")"
autoreconf -i
