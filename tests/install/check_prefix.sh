# check_prefix.sh — sourced by install_tree.sh and package_deb.sh: kt_check_prefix PREFIX LIBDIR WORK checks an
# installed ktiming tree from the outside, with no LD_LIBRARY_PATH: RUNPATHs, the CLI, pkg-config, plain cc and
# find_package consumers with timing on and compiled out, and the analysis library reading a snapshot back.
# Needs: SRC (source dir), CC, CMAKE, KT_CFLAGS (extra flags for consumers, e.g. sanitizers). KT_PC_SYSTEM=1: the
# tree was installed for /usr (the packages' .pc files name their prefix), so pkg-config is told where it is now.
unset LD_LIBRARY_PATH

kt_fail() { echo "FAIL: $*" >&2; exit 1; }

# kt_runpath FILE: the RUNPATH (or RPATH) of an ELF file, empty when it has none.
kt_runpath() { readelf -d "$1" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p'; }

# kt_resolves FILE LIB DIR: the dynamic loader finds LIB for FILE in DIR (paths compared canonically).
kt_resolves() {
    got=$(ldd "$1" | sed -n "s|^[[:space:]]*$2 => \(.*\) (0x.*|\1|p")
    [ -n "$got" ] && [ "$(readlink -f "$got")" = "$(readlink -f "$3/$2")" ]
}

kt_check_prefix() {
    P=$1 L=$2 W=$3
    mkdir -p "$W"
    [ -x "$P/bin/ktiming" ] || kt_fail "$P/bin/ktiming is not installed"

    # RUNPATHs are $ORIGIN-relative and resolve inside the tree.
    case "$(kt_runpath "$P/bin/ktiming")" in
        *'$ORIGIN/../'"$L"*) ;; *) kt_fail "bin/ktiming RUNPATH '$(kt_runpath "$P/bin/ktiming")' lacks \$ORIGIN/../$L" ;;
    esac
    case "$(kt_runpath "$P/$L/libktiming_analysis.so.0")" in
        *'$ORIGIN'*) ;; *) kt_fail "libktiming_analysis RUNPATH lacks \$ORIGIN" ;;
    esac
    shims=0
    for so in "$P/$L"/ktiming/*.so; do
        [ -e "$so" ] || continue
        shims=$((shims + 1))
        case "$(kt_runpath "$so")" in *'$ORIGIN/..'*) ;; *) kt_fail "$so RUNPATH lacks \$ORIGIN/.." ;; esac
        kt_resolves "$so" libktiming.so.0 "$P/$L" || \
            case "$so" in *cl_direct*) ;; *) kt_fail "$so does not resolve libktiming inside $P: $(ldd "$so")" ;; esac
    done
    kt_resolves "$P/bin/ktiming" libktiming_analysis.so.0 "$P/$L" || \
        kt_fail "bin/ktiming does not resolve libktiming_analysis inside $P: $(ldd "$P/bin/ktiming")"

    # The CLI starts from anywhere.
    v=$(cd / && "$P/bin/ktiming" --version) || kt_fail "ktiming --version failed"
    [ "$v" = "ktiming $KT_VERSION" ] || kt_fail "ktiming --version printed '$v', want 'ktiming $KT_VERSION'"
    (cd / && "$P/bin/ktiming" devices >"$W/devices.txt" 2>&1) || { cat "$W/devices.txt" >&2; kt_fail "ktiming devices failed"; }
    grep -q "^backends" "$W/devices.txt" || kt_fail "ktiming devices printed no backend list"
    # `ktiming run` finds the shims of this tree, beside it, not the build tree's.
    (cd / && "$P/bin/ktiming" run -v -- /bin/true >"$W/run.txt" 2>&1) || { cat "$W/run.txt" >&2; kt_fail "ktiming run failed"; }
    grep -q "libraries in $(readlink -f "$P/$L/ktiming")\$" "$W/run.txt" || kt_fail "ktiming run does not use $P/$L/ktiming: $(cat "$W/run.txt")"

    # pkg-config: relocatable, final newline, KTIMING_ENABLE left to the consumer.
    export PKG_CONFIG_PATH="$P/$L/pkgconfig"
    pcdef=
    [ -n "${KT_PC_SYSTEM:-}" ] && pcdef="--define-variable=prefix=$P"
    for pc in ktiming ktiming-analysis; do
        [ "$(tail -c 1 "$P/$L/pkgconfig/$pc.pc" | od -An -c | tr -d ' ')" = '\n' ] || kt_fail "$pc.pc has no final newline"
        pkg-config ${pcdef:+"$pcdef"} --exists "$pc" || kt_fail "pkg-config does not find $pc"
    done
    cflags=$(pkg-config ${pcdef:+"$pcdef"} --cflags ktiming)
    case "$cflags" in *KTIMING_ENABLE*) kt_fail "ktiming.pc Cflags force KTIMING_ENABLE: $cflags" ;; esac
    [ "$(cd "$(pkg-config ${pcdef:+"$pcdef"} --variable=includedir ktiming)" && pwd -P)" = "$(cd "$P/include" && pwd -P)" ] || \
        kt_fail "ktiming.pc includedir is not $P/include"
    libdir=$(pkg-config ${pcdef:+"$pcdef"} --variable=libdir ktiming)
    # shellcheck disable=SC2046,SC2086
    $CC $KT_CFLAGS -Wall -Wextra -Werror -DKTIMING_ENABLE=1 "$SRC/tests/install/app.c" \
        $(pkg-config ${pcdef:+"$pcdef"} --cflags --libs ktiming) -Wl,-rpath,"$libdir" -o "$W/app_pc" || kt_fail "pkg-config consumer does not build"
    KTIMING_OUTPUT="$W/snap.json" "$W/app_pc" >"$W/app_pc.out" || kt_fail "pkg-config consumer failed"
    grep -q "consumer_kernel" "$W/app_pc.out" || kt_fail "pkg-config consumer printed no table: $(cat "$W/app_pc.out")"
    [ -s "$W/snap.json" ] || kt_fail "KTIMING_OUTPUT wrote no snapshot"
    # shellcheck disable=SC2046,SC2086
    $CC $KT_CFLAGS -Wall -Wextra -Werror -DKTIMING_ENABLE=1 "$SRC/tests/install/load.c" \
        $(pkg-config ${pcdef:+"$pcdef"} --cflags --libs ktiming-analysis) -Wl,-rpath,"$libdir" -o "$W/load_pc" || kt_fail "ktiming-analysis consumer does not build"
    "$W/load_pc" "$W/snap.json" >"$W/load_pc.out" || kt_fail "ktiming-analysis consumer failed"
    grep -q "^entries=1$" "$W/load_pc.out" && grep -q consumer_kernel "$W/load_pc.out" || \
        kt_fail "ktiming-analysis consumer read back: $(cat "$W/load_pc.out")"
    "$P/bin/ktiming" report "$W/snap.json" | grep -q consumer_kernel || kt_fail "installed ktiming report cannot read the snapshot"

    # Plain cc, timing on.
    # shellcheck disable=SC2086
    $CC $KT_CFLAGS -Wall -Wextra -Werror -DKTIMING_ENABLE=1 -I"$P/include" "$SRC/tests/install/app.c" \
        -L"$P/$L" -Wl,-rpath,"$P/$L" -lktiming -o "$W/app_cc" || kt_fail "plain cc consumer does not build"
    "$W/app_cc" | grep -q consumer_kernel || kt_fail "plain cc consumer printed no table"
    # A file the exit writer cannot create is reported with the system's reason.
    KTIMING_OUTPUT=/nonexistent/dir/x.json "$W/app_cc" >/dev/null 2>"$W/exit_err.txt" || kt_fail "app failed on a bad KTIMING_OUTPUT"
    grep -q "KTIMING_OUTPUT=/nonexistent/dir/x.json: No such file or directory" "$W/exit_err.txt" || \
        kt_fail "a bad KTIMING_OUTPUT is not reported with strerror: $(cat "$W/exit_err.txt")"

    # Compiled out: no KTIMING_ENABLE or KTIMING_ENABLE=0 (also next to the .pc Cflags), no library, no output.
    for def in "" "-DKTIMING_ENABLE=0"; do
        # shellcheck disable=SC2086
        $CC $KT_CFLAGS -Wall -Wextra -Werror $def $cflags "$SRC/tests/install/app.c" -o "$W/app_off" \
            || kt_fail "compiled-out consumer ($def) does not build warning-free without the library"
        readelf -d "$W/app_off" | grep -q "libktiming" && kt_fail "compiled-out consumer ($def) needs libktiming"
        [ -z "$("$W/app_off")" ] || kt_fail "compiled-out consumer ($def) printed something"
    done

    # find_package: on, off (the consumer's KTIMING_ENABLE=0 next to the imported target) and the analysis target.
    "$CMAKE" -S "$SRC/tests/install/consumer" -B "$W/cmake" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC" \
        -DCMAKE_C_FLAGS="$KT_CFLAGS" >"$W/cmake.log" 2>&1 || { cat "$W/cmake.log" >&2; kt_fail "find_package(ktiming) consumer does not configure"; }
    "$CMAKE" --build "$W/cmake" >>"$W/cmake.log" 2>&1 || { cat "$W/cmake.log" >&2; kt_fail "find_package(ktiming) consumer does not build"; }
    "$W/cmake/app_on" | grep -q consumer_kernel || kt_fail "find_package consumer printed no table"
    [ -z "$("$W/cmake/app_off")" ] || kt_fail "find_package consumer with KTIMING_ENABLE=0 printed something"
    "$W/cmake/load" "$W/snap.json" | grep -q "^entries=1$" || kt_fail "ktiming::analysis consumer cannot read the snapshot"
    echo "ok: $P: RUNPATHs ($shims shims), CLI, pkg-config, cc, find_package, compiled out"
}
