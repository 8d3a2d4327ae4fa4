#!/bin/sh
# install_tree.sh BUILD_DIR WORK_DIR LIBDIR: installs the build to a temporary prefix, moves the prefix elsewhere
# (the tree must be relocatable) and checks it from the outside (check_prefix.sh).
set -eu
BUILD=$1 WORK=$2 LIBDIR=$3
. "$(dirname "$0")/check_prefix.sh"
rm -rf "$WORK" && mkdir -p "$WORK"
"$CMAKE" --install "$BUILD" --prefix "$WORK/first" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log" >&2; kt_fail "cmake --install failed"; }
mkdir -p "$WORK/moved" && mv "$WORK/first" "$WORK/moved/prefix"
kt_check_prefix "$WORK/moved/prefix" "$LIBDIR" "$WORK/check"
rm -rf "$WORK"
