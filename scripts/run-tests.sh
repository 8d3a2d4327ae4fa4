#!/usr/bin/env bash
# Builds and runs the whole suite three ways: normal, ASan+UBSan, and TSan for the tests labelled threaded;
# then fuzzes the snapshot loader, compare pairs and the exporters for a bounded time. `--stress [N]`: the
# normal suite N times under load. Warnings are errors here (KTIMING_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
BUILD=${BUILD:-build}

run() { # dir, extra cmake args...
  local dir=$1; shift
  echo "== configure $dir $*"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKTIMING_BUILD_BENCH=OFF -DKTIMING_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
  (cd "$dir" && ctest --output-on-failure -j "$JOBS" --timeout 600)
}

# --stress [N]: the normal build's suite N times (default 3) in a row while two busy loops hold both cores, as a
# loaded CI machine would; stops at the first failure. Tests must assert order and containment, never ratios.
if [ "${1:-}" = "--stress" ]; then
  rounds=${2:-3}
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKTIMING_BUILD_BENCH=OFF -DKTIMING_WERROR=ON >/dev/null
  cmake --build "$BUILD" -j "$JOBS"
  pids=()
  for _ in 1 2; do (while :; do :; done) & pids+=($!); done
  trap 'kill "${pids[@]}" 2>/dev/null' EXIT
  for i in $(seq 1 "$rounds"); do
    echo "== stress round $i of $rounds (two busy loops running)"
    (cd "$BUILD" && ctest --output-on-failure -j "$JOBS" --timeout 900)
  done
  echo "run-tests: stress: $rounds rounds passed under load"
  exit 0
fi

run "$BUILD" -DKTIMING_BUILD_BENCH=ON   # benches are compiled (not run) so `make bench` cannot rot
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:suppressions=$PWD/tests/asan.supp} \
LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp:print_suppressions=0} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  run "$BUILD-asan" -DKTIMING_SANITIZE=address,undefined -DKTIMING_BUILD_EXAMPLES=OFF
# suppress_equal_addresses=0: TSan keeps every address of a suppressed race (lavapipe's, tests/tsan.supp) and
# scans that list linearly at each new report; lavapipe frees and reuses query memory on every reset, so the list
# grows with the run, and test_run_vulkan_threads took 45 s, 156 s or over 300 s in 3 runs of 15 under load
# (3-4 s otherwise). Equal stacks are still reported once.
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppress_equal_addresses=0:suppressions=$PWD/tests/tsan.supp} \
  run "$BUILD-tsan" -DKTIMING_SANITIZE=thread -DKTIMING_THREADED_ONLY=ON \
      -DKTIMING_BUILD_EXAMPLES=OFF

# Fuzz smoke under libFuzzer (clang, ASan+UBSan) for a bounded time, each target starting from the committed
# corpus and every past crasher: the snapshot loader (a third of the budget), compare pairs, the Chrome/HTML
# exporters fed from loaded snapshots, the command line of report/compare/merge and the merge written an entry at a
# time against the merge made whole (fuzz_merge, differential; a sixth each).
# KTIMING_FUZZ_SECONDS (default 60) is the whole step's budget; 0 skips it. A crash leaves its input in $BUILD-fuzz/artifacts/: add it to tests/analysis/regress/.
FUZZ_SECONDS=${KTIMING_FUZZ_SECONDS:-60}
if [ "$FUZZ_SECONDS" != 0 ]; then
  if ! command -v clang >/dev/null 2>&1; then
    echo "run-tests: clang not found (scripts/install-deps.sh installs it); cannot run the fuzz step" >&2
    exit 1
  fi
  fz="$BUILD-fuzz"
  echo "== configure $fz (clang, libFuzzer, address,undefined)"
  cmake -S . -B "$fz" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKTIMING_FUZZ=ON -DKTIMING_WERROR=ON -DKTIMING_SANITIZE=address,undefined -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link \
    -DBUILD_SHARED_LIBS=OFF -DKTIMING_BUILD_BENCH=OFF -DKTIMING_BUILD_EXAMPLES=OFF -DKTIMING_BUILD_TOOLS=OFF >/dev/null
  cmake --build "$fz" -j "$JOBS" --target fuzz_snapshot_parse fuzz_compare_pair fuzz_export fuzz_cli fuzz_merge
  third=$(( (FUZZ_SECONDS + 2) / 3 )); sixth=$(( (FUZZ_SECONDS + 5) / 6 ))
  snap_inputs="tests/fuzz/corpus tests/analysis/regress"
  for spec in "fuzz_snapshot_parse:$third:snapshot" "fuzz_compare_pair:$sixth:snapshot" \
              "fuzz_export:$sixth:snapshot" "fuzz_cli:$sixth:cli" "fuzz_merge:$sixth:merge"; do
    t=${spec%%:*}; rest=${spec#*:}; secs=${rest%%:*}; kind=${rest#*:}
    if [ "$kind" = cli ]; then dict=tests/fuzz/cli.dict; inputs="tests/fuzz/corpus-cli"
    elif [ "$kind" = merge ]; then dict=tests/fuzz/snapshot.dict; inputs="tests/fuzz/corpus-merge"
    else dict=tests/fuzz/snapshot.dict; inputs=$snap_inputs; fi
    rm -rf "$fz/corpus-$t" && mkdir -p "$fz/corpus-$t" "$fz/artifacts"
    echo "== fuzz $t for ${secs}s"
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
      "$fz/tests/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -max_len=8192 -dict="$dict" -artifact_prefix="$fz/artifacts/$t-" -print_final_stats=1 \
        "$fz/corpus-$t" $inputs 2>"$fz/$t.log" \
      || { tail -n 60 "$fz/$t.log" >&2; echo "run-tests: $t found a failing input (see $fz/artifacts/)" >&2; exit 1; }
    grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$fz/$t.log" | tail -n 2 || true
  done
fi
echo "run-tests: normal, ASan+UBSan and TSan runs passed; fuzz step: ${FUZZ_SECONDS}s"
