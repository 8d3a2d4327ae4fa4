#!/bin/sh
# env_vars.sh SOURCE_DIR: every "KTIMING_*" name quoted in src/, tools/ or include/ or listed in src/core/env.h
# has a row in docs/environment.md, and every row names a variable the code still mentions. Prints each miss with the
# file:line that reads the variable.
set -eu
src=$1
doc=$src/docs/environment.md
[ -f "$doc" ] || { echo "env_vars: $doc is missing" >&2; exit 1; }

cd "$src"
uses=$(grep -rnoE --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' '"KTIMING_[A-Z0-9_]+"' \
       src tools include | sed 's/"//g')
# The names in src/core/env.h's list (KT_ENV_LIST rows "X(ID, ...)", read as KT_ENV_NAME(ID)).
uses="$uses
$(grep -nE '^[[:space:]]*X\([A-Z0-9_]+,' src/core/env.h | sed -E 's/^([0-9]+):[[:space:]]*X\(([A-Z0-9_]+),.*/src\/core\/env.h:\1:KTIMING_\2/')"
rows=$(grep -oE '^\| `KTIMING_[A-Z0-9_]+`' "$doc" | sed 's/^| `//; s/`$//' | sort -u)

fail=0
for var in $(printf '%s\n' "$uses" | awk -F: '{print $3}' | sort -u); do
    if ! printf '%s\n' "$rows" | grep -qx "$var"; then
        where=$(printf '%s\n' "$uses" | awk -F: -v v="$var" '$3 == v {printf "%s%s:%s", sep, $1, $2; sep = ", "}')
        echo "docs/environment.md has no row for $var (read at $where)" >&2
        fail=1
    fi
done
for var in $rows; do
    if ! printf '%s\n' "$uses" | awk -F: '{print $3}' | grep -qx "$var"; then
        echo "docs/environment.md lists $var, which nothing in src/, tools/ or include/ reads any more" >&2
        fail=1
    fi
done
[ "$fail" = 0 ] && echo "env_vars: $(printf '%s\n' "$rows" | wc -l) variables, all documented"
exit "$fail"
