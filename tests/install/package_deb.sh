#!/bin/sh
# package_deb.sh BUILD_DIR WORK_DIR LIBDIR: builds the Debian package with the build's CPackConfig.cmake (what
# `make package` uses), checks its metadata, unpacks it with dpkg-deb -x into a temporary directory and checks
# the tree from there. cpack is fed the build's install tree staged by `cmake --install` rather than running
# its "preinstall" step, which only re-checks that the whole build is up to date (ctest runs after the build)
# and takes tens of seconds on a loaded machine.
set -eu
BUILD=$1 WORK=$2 LIBDIR=$3
. "$(dirname "$0")/check_prefix.sh"
command -v dpkg-deb >/dev/null || { echo "dpkg-deb not found: skipped"; exit 77; }
rm -rf "$WORK" && mkdir -p "$WORK"
"$CMAKE" --install "$BUILD" --prefix "$WORK/stage" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log" >&2; kt_fail "cmake --install failed"; }
(cd "$BUILD" && "$CPACK" --config CPackConfig.cmake -G DEB -B "$WORK/pkg" -D CPACK_INSTALL_CMAKE_PROJECTS= \
    -D "CPACK_INSTALLED_DIRECTORIES=$WORK/stage;usr") >"$WORK/cpack.log" 2>&1 || { cat "$WORK/cpack.log" >&2; kt_fail "cpack -G DEB failed"; }
deb=$(ls "$WORK"/pkg/ktiming_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || kt_fail "cpack wrote no ktiming_*.deb: $(ls "$WORK/pkg")"
info=$(dpkg-deb -f "$deb" Package Version Depends)
echo "$info" | grep -q "^Package: ktiming$" || kt_fail "package name: $info"
echo "$info" | grep -q "^Version: $KT_VERSION$" || kt_fail "package version: $info"
echo "$info" | grep -q "libc6" || kt_fail "package depends on no libc6 (dpkg-shlibdeps): $info"
dpkg-deb -c "$deb" >"$WORK/contents.txt"
grep -q " ./usr/bin/ktiming$" "$WORK/contents.txt" || kt_fail "the package has no /usr/bin/ktiming"
grep -q "usr/share/doc/ktiming/LICENSE" "$WORK/contents.txt" || kt_fail "the package has no LICENSE"
dpkg-deb -x "$deb" "$WORK/root"
kt_check_prefix "$WORK/root/usr" "$LIBDIR" "$WORK/check"
rm -rf "$WORK"
