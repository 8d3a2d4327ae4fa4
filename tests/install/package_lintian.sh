#!/bin/sh
# package_lintian.sh PKG_DIR: lintian's verdict on the packages install_package_deb built (left in PKG_DIR):
# no error-level tag (warnings are printed, see docs/packaging.md). Skipped where lintian is not installed:
# on Debian 12 installing it upgrades perl-base, an essential package, so scripts/install-deps.sh does not.
# LINTIAN names another lintian to run (e.g. one unpacked with dpkg -x, docs/packaging.md).
set -eu
DIR=$1
LINTIAN=${LINTIAN:-lintian}
command -v "$LINTIAN" >/dev/null 2>&1 || { echo "lintian not installed: skipped (docs/packaging.md)"; exit 77; }
set -- "$DIR"/*.deb "$DIR"/*.ddeb
[ -e "$1" ] || { echo "FAIL: no packages in $DIR (install_package_deb builds them)" >&2; exit 1; }
rc=0
out=$("$LINTIAN" --no-cfg --fail-on error "$@" 2>&1) || rc=$?
echo "$out" | grep -v "running with root privileges" || true
if [ "$rc" -ne 0 ] || echo "$out" | grep -q "^E: "; then
    echo "FAIL: lintian reports errors (exit $rc)" >&2
    exit 1
fi
echo "ok: lintian: no errors on $# packages ($(echo "$out" | grep -c '^W: ' || true) warnings)"
