#!/bin/sh
# core_only.sh SOURCE_DIR WORK_DIR LIBKTIMING SANITIZE: -DKTIMING_BUILD_ANALYSIS=OFF configures with no
# pkg-config at all (so no cJSON), says what it leaves out, and the built libktiming needs libc and libm only
# (plus the sanitizer runtimes in a sanitizer build; libpthread and libdl are part of libc since glibc 2.34).
set -eu
SRCDIR=$1 WORK=$2 LIB=$3 SAN=${4:-}
rm -rf "$WORK" && mkdir -p "$WORK"
"$CMAKE" -S "$SRCDIR" -B "$WORK" -DKTIMING_BUILD_ANALYSIS=OFF -DKTIMING_BUILD_TESTS=OFF -DKTIMING_BUILD_BENCH=OFF \
    -DKTIMING_BUILD_EXAMPLES=OFF -DPKG_CONFIG_EXECUTABLE="$WORK/no-pkg-config" >"$WORK/configure.log" 2>&1 \
    || { cat "$WORK/configure.log" >&2; echo "FAIL: the core does not configure without pkg-config/cJSON" >&2; exit 1; }
grep -q "KTIMING_BUILD_ANALYSIS=OFF: core library only" "$WORK/configure.log" || \
    { echo "FAIL: no message saying what KTIMING_BUILD_ANALYSIS=OFF leaves out" >&2; exit 1; }
allowed='^(libc|libm|libpthread|libdl|ld-linux-x86-64|ld-linux-aarch64)\.so'
[ -n "$SAN" ] && allowed='^(libc|libm|libpthread|libdl|ld-linux-x86-64|ld-linux-aarch64|libasan|libubsan|libtsan|libstdc\+\+|libgcc_s)\.so'
needed=$(readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for n in $needed; do
    echo "$n" | grep -Eq "$allowed" || { echo "FAIL: libktiming needs $n (only libc, pthreads, libdl, libm allowed)" >&2; exit 1; }
done
echo "ok: core configures without cJSON; libktiming needs: $(echo $needed)"
rm -rf "$WORK"
