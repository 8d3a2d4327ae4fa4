#!/usr/bin/env bash
# Builds and runs the whole suite three ways: normal, ASan+UBSan, and TSan for the tests labelled threaded.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
BUILD=${BUILD:-build}

run() { # dir, extra cmake args...
  local dir=$1; shift
  echo "== configure $dir $*"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKTIMING_BUILD_BENCH=OFF "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
  (cd "$dir" && ctest --output-on-failure -j "$JOBS" --timeout 600)
}

run "$BUILD"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:suppressions=$PWD/tests/asan.supp} \
LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  run "$BUILD-asan" -DKTIMING_SANITIZE=address,undefined -DKTIMING_BUILD_EXAMPLES=OFF
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp} \
  run "$BUILD-tsan" -DKTIMING_SANITIZE=thread -DKTIMING_THREADED_ONLY=ON -DKTIMING_BUILD_TOOLS=OFF \
      -DKTIMING_BUILD_EXAMPLES=OFF
echo "run-tests: all three runs passed"
