#!/bin/sh
# check_headers.sh — the compile-out rule of every public header, as include/ktiming.h states it: with
# KTIMING_ENABLE=0 each header compiles warning-free on its own (core_compile_out checks the calls) -- except
# clock_model.h (functions always real) and the analysis headers, which must refuse to compile.
# Usage: check_headers.sh CC INCLUDE_DIR
set -u
cc=$1 inc=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
for h in ktiming.h ktiming/cl.h ktiming/vk.h ktiming/cuda.h ktiming/harness.h ktiming/primitive.h ktiming/stats.h \
         ktiming/clock_model.h; do
  printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$tmp/t.c"
  if ! "$cc" -std=c11 -Wall -Wextra -Werror -DKTIMING_ENABLE=0 -I"$inc" -c "$tmp/t.c" -o "$tmp/t.o" 2>"$tmp/err"; then
    echo "FAIL: <$h> does not compile with KTIMING_ENABLE=0:"; cat "$tmp/err"; fail=1; continue
  fi
  und=$(nm -u "$tmp/t.o" | grep -E ' kt_' || true)
  if [ -n "$und" ]; then echo "FAIL: <$h> compiled out still references the library: $und"; fail=1; fi
done
for h in ktiming/analysis.h ktiming/compare.h; do
  printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$tmp/t.c"
  if "$cc" -std=c11 -DKTIMING_ENABLE=0 -I"$inc" -c "$tmp/t.c" -o "$tmp/t.o" 2>/dev/null; then
    echo "FAIL: <$h> compiled with KTIMING_ENABLE=0 (it must refuse: it needs the analysis library)"; fail=1
  fi
done
[ $fail = 0 ] && echo "headers: compile-out rule holds for every public header"
exit $fail
