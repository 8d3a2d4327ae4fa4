#!/bin/sh
# check_getenv.sh — every environment read in src/ and tools/ goes through src/core/env.h (kt__env for KTIMING_*
# names, kt__env_any for others), and every KTIMING_* name given to kt__env is a KT_ENV_NAME row, not a literal.
# Usage: check_getenv.sh <source root>. Fails (exit 1) listing each offending line.
#
# ALLOWLIST: folders exempt from the rule (none: every backend and interception library reads through env.h).
ALLOWLIST=""
root=${1:?usage: check_getenv.sh <source root>}
cd "$root" || exit 2
[ -f src/core/env.h ] || { echo "check_getenv: $root/src/core/env.h not found" >&2; exit 2; }
found=$(grep -rnE --include='*.c' --include='*.h' --include='*.cpp' --include='*.cc' \
    '(\b(secure_)?getenv[[:space:]]*\()|(\bkt__env[[:space:]]*\([[:space:]]*"KTIMING_)' src tools |
    grep -v '^src/core/env\.h:')
bad=""
old_ifs=$IFS
IFS='
'
for line in $found; do
    skip=0
    for prefix in $ALLOWLIST; do
        case "$line" in "$prefix"*) skip=1 ;; esac
    done
    [ $skip -eq 1 ] || bad="$bad$line
"
done
IFS=$old_ifs
# Every row of the list is used: through KT_ENV_NAME(ID), or (in an allowlisted folder) as its literal.
for id in $(grep -oE '^[[:space:]]*X\([A-Z0-9_]+,' src/core/env.h | sed -E 's/^[[:space:]]*X\(([A-Z0-9_]+),/\1/'); do
    if ! grep -rqE --include='*.c' --include='*.h' "KT_ENV_NAME\($id\)|\"KTIMING_$id\"" src tools; then
        bad="${bad}src/core/env.h: KTIMING_$id is listed but nothing reads it
"
    fi
done
if [ -n "$bad" ]; then
    echo "environment read outside src/core/env.h (use kt__env(KT_ENV_NAME(ID)) or kt__env_any):" >&2
    printf '%s' "$bad" >&2
    exit 1
fi
echo "check_getenv: every environment read in src/ and tools/ goes through src/core/env.h"
