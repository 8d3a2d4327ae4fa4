#!/bin/sh
# package_deb.sh BUILD_DIR WORK_DIR LIBDIR: builds the Debian packages with the build's CPackConfig.cmake (what
# `make package` runs) and checks the split from the outside, never installing anything on this machine: which
# file lands in which package (and that every installed file lands in one), the Depends fields (MPI only in
# ktiming-mpi), the per-package copyright and changelog, the gzipped man page, stripped binaries whose debug
# files are in the -dbgsym packages, the ldconfig trigger, the .pc files for /usr (`pkg-config --cflags ktiming`
# prints nothing), and that `make package`'s configuration gives the multiarch libdir. Then it unpacks every
# package into one directory (dpkg-deb -x) and checks that tree as an installed prefix (check_prefix.sh).
# The packages stay in WORK_DIR/pkg for install_package_lintian.
# cpack is run with CPACK_CMAKE_GENERATOR=Ninja, a generator without a "preinstall" target: with the build's
# own generator cpack first re-checks that the whole build is up to date (ctest runs after the build), which
# takes tens of seconds on a loaded machine. The install step is the same cmake_install.cmake either way.
set -eu
BUILD=$1 WORK=$2 LIBDIR=$3
. "$(dirname "$0")/check_prefix.sh"
command -v dpkg-deb >/dev/null || { echo "dpkg-deb not found: skipped"; exit 77; }
rm -rf "$WORK" && mkdir -p "$WORK"
(cd "$BUILD" && "$CPACK" --config CPackConfig.cmake -G DEB -B "$WORK/pkg" -D CPACK_CMAKE_GENERATOR=Ninja) \
    >"$WORK/cpack.log" 2>&1 || { cat "$WORK/cpack.log" >&2; kt_fail "cpack -G DEB failed"; }
V=$(dpkg-deb -f "$(ls "$WORK"/pkg/libktiming0_*.deb 2>/dev/null | head -n 1)" Version 2>/dev/null) || \
    kt_fail "cpack wrote no libktiming0 package: $(ls "$WORK/pkg")"
case "$V" in "$KT_VERSION"-[0-9]*) ;; *) kt_fail "package version '$V' is not $KT_VERSION-<revision>" ;; esac
L=$LIBDIR

# The packages: the four always built, ktiming-mpi where the build has libktiming_mpi; each with a -dbgsym.
pkgs="libktiming0 libktiming-analysis0 libktiming-dev ktiming"
[ -e "$BUILD/$L/ktiming/libktiming_mpi.so.0" ] && pkgs="$pkgs ktiming-mpi"
for p in $pkgs; do
    [ -n "$(ls "$WORK/pkg/${p}_${V}_"*.deb 2>/dev/null)" ] || kt_fail "no package $p: $(ls "$WORK/pkg")"
done
for f in "$WORK"/pkg/*.deb; do
    p=$(dpkg-deb -f "$f" Package)
    echo " $pkgs " | grep -q " $p " || kt_fail "unexpected package $p"
done
deb() { ls "$WORK/pkg/$1_${V}_"*.deb; }
ddeb() { ls "$WORK/pkg/$1-dbgsym_${V}_"*.ddeb 2>/dev/null; }

# Which package each installed path belongs in.
kt_owner() {
    case "$1" in
        usr/"$L"/libktiming.so.0*) echo libktiming0 ;;
        usr/"$L"/libktiming_analysis.so.0*) echo libktiming-analysis0 ;;
        usr/include/*|usr/"$L"/libktiming.so|usr/"$L"/libktiming_analysis.so|usr/"$L"/pkgconfig/*.pc|usr/"$L"/cmake/ktiming/*) echo libktiming-dev ;;
        usr/"$L"/ktiming/libktiming_mpi.so*) echo ktiming-mpi ;;
        usr/bin/ktiming|usr/"$L"/ktiming/*|usr/share/man/man1/ktiming.1.gz) echo ktiming ;;
        usr/share/bash-completion/completions/ktiming|usr/share/lintian/overrides/ktiming) echo ktiming ;;
        usr/share/doc/*/copyright|usr/share/doc/*/changelog.Debian.gz) echo "$1" | cut -d/ -f4 ;;
        *) echo "(none)" ;;
    esac
}
: >"$WORK/all.txt"
for p in $pkgs; do
    f=$(deb "$p")
    info=$(dpkg-deb -f "$f" Version Maintainer Section Depends)
    echo "$info" | grep -q "^Version: $V$" || kt_fail "$p: version: $info"
    # Files (and links) of the package, without the leading ./
    dpkg-deb -c "$f" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./||' >"$WORK/$p.files"
    while read -r path; do
        [ "$(kt_owner "$path")" = "$p" ] || kt_fail "$path is in $p, belongs in $(kt_owner "$path")"
        echo "$path" >>"$WORK/all.txt"
    done <"$WORK/$p.files"
    grep -qx "usr/share/doc/$p/copyright" "$WORK/$p.files" || kt_fail "$p has no usr/share/doc/$p/copyright"
    grep -qx "usr/share/doc/$p/changelog.Debian.gz" "$WORK/$p.files" || kt_fail "$p has no changelog.Debian.gz"
    # Maintainer: a name and an address, the changelog's signer; not the old ktiming@localhost.
    m=$(dpkg-deb -f "$f" Maintainer)
    case "$m" in *" <"*@*.*">") ;; *) kt_fail "$p: Maintainer '$m' is not 'Name <address>'" ;; esac
    case "$m" in *localhost*) kt_fail "$p: Maintainer '$m' is on localhost" ;; esac
    grep -q "^ -- $m  " "$SRC/debian/changelog" || kt_fail "$p: Maintainer '$m' did not sign debian/changelog"
    # MPI only in ktiming-mpi.
    d=$(dpkg-deb -f "$f" Depends)
    case "$p:$d" in ktiming-mpi:*libopenmpi*|ktiming-mpi:*mpich*) ;; ktiming-mpi:*) kt_fail "ktiming-mpi does not depend on MPI: $d" ;; esac
    case "$p:$d" in ktiming-mpi:*) ;; *mpi*) kt_fail "$p depends on MPI: $d" ;; esac
    [ "$p" = libktiming-dev ] || echo "$d" | grep -q "libc6" || kt_fail "$p depends on no libc6 (dpkg-shlibdeps): $d"
done
# Dependencies between the packages, at this exact version.
dep_on() { dpkg-deb -f "$(deb "$1")" Depends | tr ',' '\n' | sed 's/^ *//' | grep -qx "$2 (= $V)" || \
    kt_fail "$1 does not depend on $2 (= $V): $(dpkg-deb -f "$(deb "$1")" Depends)"; }
dep_on libktiming-analysis0 libktiming0
dep_on libktiming-dev libktiming0
dep_on libktiming-dev libktiming-analysis0
dep_on ktiming libktiming0
dep_on ktiming libktiming-analysis0
dpkg-deb -f "$(deb libktiming-analysis0)" Depends | grep -q libcjson || kt_fail "libktiming-analysis0 does not depend on cJSON"
dpkg-deb -f "$(deb libktiming0)" Depends | grep -Eq "cjson|sqlite|libpq|ktiming" && \
    kt_fail "libktiming0 depends on more than libc: $(dpkg-deb -f "$(deb libktiming0)" Depends)"
echo " $pkgs " | grep -q " ktiming-mpi " && dep_on ktiming-mpi ktiming

# Every file `cmake --install` installs is in a package: no install rule without a packaged component
# (LICENSE, the `license` component, is replaced by each package's copyright).
comps=$(find "$BUILD" -path "$BUILD/tests/install/*" -prune -o -name cmake_install.cmake -exec grep -ho 'CMAKE_INSTALL_COMPONENT STREQUAL "[^"]*"' {} + | \
    sed 's/.*"\(.*\)"/\1/' | sort -u)
for c in $comps; do
    case "$c" in lib|analysis|dev|cli|mpi|license) ;; *) kt_fail "install component '$c' is in no package" ;; esac
done
for need in usr/bin/ktiming usr/$L/libktiming.so.0 usr/$L/libktiming_analysis.so.0 usr/include/ktiming.h \
    usr/$L/pkgconfig/ktiming.pc usr/$L/pkgconfig/ktiming-analysis.pc usr/$L/cmake/ktiming/ktimingConfig.cmake \
    usr/share/man/man1/ktiming.1.gz usr/share/bash-completion/completions/ktiming usr/$L/ktiming/libktiming_cl_intercept.so; do
    grep -qx "$need" "$WORK/all.txt" || kt_fail "no package has $need"
done
grep -q "share/man/man1/ktiming.1$" "$WORK/all.txt" && kt_fail "an uncompressed man page is packaged"
# The headers shipped are exactly include/ of the source: the tool-only ones (src/shared/*.h, docs/abi.md "Not
# installed") never are.
grep '^usr/include/' "$WORK/all.txt" | sed 's|^usr/include/||' | sort >"$WORK/headers.txt"
(cd "$SRC/include" && find . -type f | sed 's|^\./||' | sort) | cmp -s - "$WORK/headers.txt" || \
    kt_fail "installed headers are not include/: $(tr '\n' ' ' <"$WORK/headers.txt")"
for h in "$SRC"/src/shared/*.h; do
    grep -qE "(^|/)$(basename "$h")$" "$WORK/headers.txt" && kt_fail "tool-only header $(basename "$h") is installed"
done

# Unpacked together: the installed tree of every package.
R=$WORK/root
for p in $pkgs; do dpkg-deb -x "$(deb "$p")" "$R"; done

# The man page is gzipped at maximum compression without a name or time stamp, and is the source's.
gzip -dc "$R/usr/share/man/man1/ktiming.1.gz" | cmp -s - "$SRC/tools/ktiming/ktiming.1" || kt_fail "ktiming.1.gz is not tools/ktiming/ktiming.1"
gzip -9nc "$SRC/tools/ktiming/ktiming.1" | cmp -s - "$R/usr/share/man/man1/ktiming.1.gz" || kt_fail "ktiming.1.gz is not gzip -9n"
# The changelog's latest entry is this version.
[ "$(gzip -dc "$R/usr/share/doc/ktiming/changelog.Debian.gz" | head -n 1 | sed 's/^ktiming (\([^)]*\)).*/\1/')" = "$V" ] || \
    kt_fail "changelog.Debian.gz does not start with ktiming ($V)"
grep -q "^License: Expat" "$R/usr/share/doc/libktiming0/copyright" || kt_fail "copyright is not machine-readable (no License: Expat)"

# Stripped binaries; each one's debug file (by build id) in its -dbgsym package, which lists it by relative path.
elves=0
for p in $pkgs; do
    [ "$p" = libktiming-dev ] && continue # headers and links only
    dd=$(ddeb "$p") || kt_fail "no $p-dbgsym package"
    dpkg-deb -f "$dd" Depends | grep -q "^$p (= $V)$" || kt_fail "$p-dbgsym does not depend on $p (= $V)"
    dpkg-deb -I "$dd" md5sums | grep -q "  usr/lib/debug/" || kt_fail "$p-dbgsym md5sums paths are not relative: $(dpkg-deb -I "$dd" md5sums | head -n 1)"
    dpkg-deb -c "$dd" >"$WORK/$p.dbgsym"
    while read -r path; do
        f=$R/$path
        if [ ! -f "$f" ] || [ -L "$f" ] || [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" != '177ELF' ]; then
            continue
        fi
        elves=$((elves + 1))
        readelf -S "$f" | grep -Eq '\.(debug_info|symtab) ' && kt_fail "$path is not stripped"
        readelf -S "$f" | grep -q '\.gnu_debuglink' || kt_fail "$path has no .gnu_debuglink"
        id=$(readelf -n "$f" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
        [ -n "$id" ] || kt_fail "$path has no build id"
        rest=${id#??}
        grep -q "usr/lib/debug/.build-id/${id%"$rest"}/$rest.debug$" "$WORK/$p.dbgsym" || kt_fail "$p-dbgsym has no debug file for $path"
    done <"$WORK/$p.files"
done
[ "$elves" -ge 4 ] || kt_fail "only $elves ELF files checked"

# Libraries in the public libdir: the ldconfig trigger, no ldconfig maintainer scripts, a shlibs file, and in
# the multiarch libdir Multi-Arch: same.
for p in libktiming0 libktiming-analysis0; do
    dpkg-deb -I "$(deb "$p")" triggers | grep -qx "activate-noawait ldconfig" || kt_fail "$p has no ldconfig trigger"
    dpkg-deb -I "$(deb "$p")" postinst >/dev/null 2>&1 && kt_fail "$p still has a postinst"
    dpkg-deb -I "$(deb "$p")" shlibs | grep -q "^libktiming" || kt_fail "$p has no shlibs"
    case "$L" in lib/*-*) [ "$(dpkg-deb -f "$(deb "$p")" Multi-Arch)" = same ] || kt_fail "$p is not Multi-Arch: same" ;; esac
done

# pkg-config for the /usr layout: the .pc files name /usr, and with the tree really in /usr pkg-config drops
# the system paths, so --cflags prints nothing (the old ${pcfiledir} form printed -I/usr/lib/pkgconfig/../../include).
for pc in ktiming ktiming-analysis; do
    grep -qx "prefix=/usr" "$R/usr/$L/pkgconfig/$pc.pc" || kt_fail "$pc.pc in the package: $(grep '^prefix' "$R/usr/$L/pkgconfig/$pc.pc")"
done
cflags=$(PKG_CONFIG_PATH="$R/usr/$L/pkgconfig" pkg-config --cflags ktiming)
[ -z "$(echo "$cflags" | tr -d ' ')" ] || kt_fail "pkg-config --cflags ktiming prints '$cflags' for /usr"
libs=$(PKG_CONFIG_PATH="$R/usr/$L/pkgconfig" pkg-config --libs ktiming-analysis)
case "$libs" in *-L/usr/lib/*-linux-gnu*|*pkgconfig*|*..*) kt_fail "pkg-config --libs ktiming-analysis prints '$libs' for /usr" ;; esac

# `make package` configures for /usr, which gives the multiarch libdir (this build may be configured otherwise).
grep -q "CMAKE_INSTALL_PREFIX=/usr " "$SRC/Makefile" || kt_fail "make package does not configure for /usr"
if command -v dpkg-architecture >/dev/null; then
    ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
    if [ "$L" != "lib/$ma" ]; then
        "$CMAKE" -S "$SRC" -B "$WORK/usr-config" -DCMAKE_INSTALL_PREFIX=/usr -DKTIMING_BUILD_TESTS=OFF \
            -DKTIMING_BUILD_BENCH=OFF -DKTIMING_BUILD_EXAMPLES=OFF >"$WORK/usr-config.log" 2>&1 || \
            { cat "$WORK/usr-config.log" >&2; kt_fail "configuring for /usr failed"; }
        grep -qx "CMAKE_INSTALL_LIBDIR:PATH=lib/$ma" "$WORK/usr-config/CMakeCache.txt" || \
            kt_fail "configured for /usr, the libdir is not lib/$ma: $(grep CMAKE_INSTALL_LIBDIR: "$WORK/usr-config/CMakeCache.txt")"
    fi
fi

# The unpacked tree works as an installed prefix, from where it is.
KT_PC_SYSTEM=1 kt_check_prefix "$R/usr" "$L" "$WORK/check"
rm -rf "$R" "$WORK/check" "$WORK/usr-config"
echo "ok: packages $pkgs ($V): contents, depends, docs, stripped ($elves ELF files), pkg-config for /usr"
