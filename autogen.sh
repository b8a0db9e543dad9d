#!/bin/sh
# Generate configure.  The TAP test driver comes from the installed
# automake (autoreconf does not copy it).
set -e
cd "$(dirname "$0")"
autoreconf -i
cp "$(automake --print-libdir)/tap-driver.sh" build-aux/
