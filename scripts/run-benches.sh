#!/usr/bin/env bash
# Runs every benchmark listed by bench/CMakeLists.txt in the given build tree; each ends with its verdict line.
set -uo pipefail
build=${1:-build-bench}
list="$build/bench/benches.txt"
[ -f "$list" ] || { echo "run-benches: no $list (configure with benches on)" >&2; exit 1; }
status=0
while read -r b; do
  [ -n "$b" ] || continue
  echo "== $b"
  if ! "$build/bench/$b"; then
    echo "run-benches: $b failed" >&2
    status=1
  fi
done < "$list"
exit $status
