#!/bin/sh
# code_blocks.sh SOURCE_DIR WORK_DIR CC LIBDIR ANALYSIS_LIBDIR [EXTRA_FLAGS...]: every ```c block in README.md
# and docs/*.md that contains `int main` is a complete program and must build as written: with
# -DKTIMING_ENABLE=1 against the build tree's libktiming (and libktiming_analysis when it includes
# <ktiming/analysis.h> or <ktiming/compare.h>), and, when it uses the core API only, compiled out
# (no KTIMING_ENABLE, no library) too; all with -Wall -Wextra -Werror. The enabled build is run once.
# Blocks without `int main` are fragments and are not compiled (convention in docs/architecture.md).
set -eu
src=$1 work=$2 cc=$3 libdir=$4 alibdir=$5
shift 5
rm -rf "$work" && mkdir -p "$work"

n=0
for md in "$src"/README.md "$src"/docs/*.md; do
    base=$(basename "$md" .md)
    # Writes <base>_<line>.c for each ```c block holding `int main`; prints their names.
    awk -v out="$work/$base" '
        /^```c[[:space:]]*$/ && !inblk { inblk = 1; start = NR + 1; body = ""; next }
        /^```/ && inblk {
            inblk = 0
            if (body ~ /int main[[:space:]]*\(/) { f = out "_" start ".c"; printf "%s", body > f; close(f); print f }
            next
        }
        inblk { body = body $0 "\n" }
    ' "$md" > "$work/$base.list"
    while read -r f; do
        n=$((n + 1))
        where="${md#"$src"/}:$(basename "$f" .c | sed 's/.*_//')"
        libs="-L$libdir -Wl,-rpath,$libdir -lktiming"
        if grep -qE '#include <ktiming/(analysis|compare)\.h>' "$f"; then
            libs="-L$alibdir -Wl,-rpath,$alibdir -lktiming_analysis $libs"
            core_only=0
        else
            core_only=1
        fi
        # shellcheck disable=SC2086 # word splitting of the flag lists is wanted
        if ! "$cc" -Wall -Wextra -Werror -DKTIMING_ENABLE=1 -I"$src/include" "$@" "$f" $libs -lm -o "${f%.c}" \
                2>"${f%.c}.log"; then
            echo "code_blocks: $where does not build with timing on:" >&2; cat "${f%.c}.log" >&2; exit 1
        fi
        if ! "${f%.c}" >"${f%.c}.out" 2>&1; then
            echo "code_blocks: $where built but its program failed:" >&2; cat "${f%.c}.out" >&2; exit 1
        fi
        if [ "$core_only" = 1 ] && ! "$cc" -Wall -Wextra -Werror -I"$src/include" "$@" "$f" -lm -o "${f%.c}.off" \
                2>"${f%.c}.log"; then
            echo "code_blocks: $where does not build compiled out (no KTIMING_ENABLE, no library):" >&2
            cat "${f%.c}.log" >&2; exit 1
        fi
        echo "code_blocks: $where builds"
    done < "$work/$base.list"
done
[ "$n" -gt 0 ] || { echo "code_blocks: no compilable block found (README.md has one)" >&2; exit 1; }
