#!/bin/sh
# build_deps.sh SOURCE_DIR WORK_DIR: what `make`/`make build` configure (tests off, as without cmocka) needs no
# test-only package: with libcjson as the only pkg-config module visible, the library, analysis, CLI, shims,
# examples and benches configure. (chromium and clang are looked up by the test suite and run-tests.sh only.)
set -eu
SRCDIR=$1 WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK/pc"
pcdir=$(pkg-config --variable=pcfiledir libcjson 2>/dev/null) || { echo "libcjson.pc not found: skipped"; exit 77; }
cp "$pcdir/libcjson.pc" "$WORK/pc/"
PKG_CONFIG_LIBDIR="$WORK/pc" PKG_CONFIG_PATH= "$CMAKE" -S "$SRCDIR" -B "$WORK/b" -DKTIMING_BUILD_TESTS=OFF \
    >"$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log" >&2; echo "FAIL: the build needs more than build dependencies" >&2; exit 1; }
grep -q "ktiming_cli" "$WORK/b/tools/ktiming/Makefile" || { echo "FAIL: the CLI is not part of that build" >&2; exit 1; }
echo "ok: builds with build dependencies only (cmocka, clang, chromium not needed)"
rm -rf "$WORK"
