#!/usr/bin/env bash
# tests/gpu/run.sh — the CUDA checks that need a real NVIDIA GPU (issue 36). On a machine without an NVIDIA GPU
# and driver it says so and exits 0 (CTest runs it that way as test_gpu_script_no_gpu, so it cannot rot). With
# one it builds the project (build-gpu/ beside the sources, or KT_GPU_BUILD), runs the CUDA tests (the example
# must run, not skip), `ktiming devices`, `ktiming demo`, and tests/gpu/kt_gpu_checks.cu's checks, printing one
# line per check:  PASS|FAIL|INFO|SKIP <check>: <what was seen>. Exit status: the number of FAILs (0: all passed).
#
# Dependencies the machine may lack (cJSON, cmocka, pkg-config): when a folder of Debian packages exists
# (KT_GPU_DEBS, else ../debs beside the source tree), they are unpacked with `dpkg -x` into a private prefix and
# CMake is pointed at it (PKG_CONFIG_PATH, LD_LIBRARY_PATH, PATH). Nothing is installed system-wide.
# Budget: under 10 minutes on an H100 (the build is most of it; -j from nproc).
# `run.sh --detect` only says whether a GPU is there (what the CTest test test_gpu_script_detect runs, so the suite
# never builds or runs the GPU checks itself).
# Where things are: the build tree is KT_GPU_BUILD (default build-gpu/ beside the sources); inside it the binaries
# and libraries are where the project's CMakeLists builds them, <build>/<CMAKE_INSTALL_BINDIR> and
# <build>/<CMAKE_INSTALL_LIBDIR> as the build's CMakeCache.txt says (lib/x86_64-linux-gnu with a /usr prefix on
# Debian; bin/ and lib/ when either is absolute), unless KT_GPU_BINDIR / KT_GPU_LIBDIR name them. `run.sh --dirs`
# prints them and exits (no GPU needed). KT_GPU_CMAKE_ARGS: more arguments for the configure step (split on blanks).
set -u
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${KT_GPU_BUILD:-$src/build-gpu}
build_dirs() { # sets bin and lib from the build's cache (call after configuring)
    local cache=$build/CMakeCache.txt bindir libdir
    bindir=$(sed -n 's/^CMAKE_INSTALL_BINDIR:[A-Z]*=//p' "$cache" 2>/dev/null | head -n 1)
    libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$cache" 2>/dev/null | head -n 1)
    if [ -z "$bindir" ] || [ -z "$libdir" ] || [ "${bindir#/}" != "$bindir" ] || [ "${libdir#/}" != "$libdir" ]; then
        bindir=bin libdir=lib # the CMakeLists' layout when the install dirs cannot be mirrored
    fi
    bin=${KT_GPU_BINDIR:-$build/$bindir}
    lib=${KT_GPU_LIBDIR:-$build/$libdir}
}
if [ "${1:-}" = --dirs ]; then
    build_dirs
    echo "gpu-check: build $build, binaries $bin, libraries $lib"
    exit 0
fi
fails=0
line() { # status check message...
    local st=$1 name=$2
    shift 2
    printf '%-4s %s: %s\n' "$st" "$name" "$*"
    [ "$st" = FAIL ] && fails=$((fails + 1))
    return 0
}

# --- is there a GPU? ------------------------------------------------------------------------------------------
why=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
    why="no nvidia-smi on PATH"
elif ! nvidia-smi -L >/dev/null 2>&1; then
    why="nvidia-smi finds no GPU ($(nvidia-smi -L 2>&1 | head -n 1))"
elif ! { ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; } && ! [ -e /usr/local/nvidia/lib64/libcuda.so.1 ]; then
    why="no libcuda.so.1 (NVIDIA driver library) found"
fi
if [ -n "$why" ] && [ -z "${KT_GPU_FORCE:-}" ]; then # KT_GPU_FORCE=1: go on anyway (to try the script here)
    echo "gpu-check: no NVIDIA GPU and driver on this machine ($why): nothing to check, exiting 0"
    exit 0
fi
if [ "${1:-}" = --detect ]; then
    echo "gpu-check: an NVIDIA GPU and driver are here: $(nvidia-smi -L 2>&1 | head -n 1) (run tests/gpu/run.sh for the checks)"
    exit 0
fi
[ -e /usr/local/nvidia/lib64/libcuda.so.1 ] && export LD_LIBRARY_PATH="/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

t_start=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name,driver_version,pci.bus_id,uuid --format=csv,noheader 2>/dev/null | head -n 4)
line INFO machine "$(uname -srm); $(date -u +%Y-%m-%dT%H:%MZ); GPU: ${gpu//$'\n'/; }"

# --- private prefix for missing build dependencies -------------------------------------------------------------
debs=${KT_GPU_DEBS:-$src/../debs}
if [ -d "$debs" ] && ls "$debs"/*.deb >/dev/null 2>&1; then
    prefix=$(mktemp -d /tmp/kt-gpu-prefix.XXXXXX)
    for d in "$debs"/*.deb; do dpkg -x "$d" "$prefix"; done
    multi=$prefix/usr/lib/x86_64-linux-gnu
    for pc in "$multi"/pkgconfig/*.pc; do
        [ -e "$pc" ] && sed -i "s|/usr|$prefix/usr|g" "$pc"
    done
    export PKG_CONFIG_PATH="$multi/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export LD_LIBRARY_PATH="$multi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    if ! command -v pkg-config >/dev/null 2>&1 && [ -x "$prefix/usr/bin/pkgconf" ]; then
        export PATH="$prefix/usr/bin:$PATH"
    fi
    line INFO deps "unpacked $(find "$debs" -maxdepth 1 -name '*.deb' | wc -l) packages from $debs into $prefix"
fi

# --- build (the CLI, the CUPTI library and tests/cuda only: the rest of the suite needs no GPU) --------------------------------------------------------------------------------------------------------
jobs=$(nproc 2>/dev/null || echo 4)
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
arch=${arch:-90}
log=$build.log
# shellcheck disable=SC2086 # KT_GPU_CMAKE_ARGS is a list of arguments
if cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKTIMING_BUILD_TESTS=ON \
    -DKTIMING_BUILD_BENCH=OFF -DKTIMING_BUILD_EXAMPLES=OFF -DKTIMING_CUDA_ARCH="$arch" ${KT_GPU_CMAKE_ARGS:-} \
    >"$log" 2>&1 &&
    cmake --build "$build" -j "$jobs" --target ktiming_cli >>"$log" 2>&1 &&
    { ! grep -qw 'kt_cupti_inject' <(cmake --build "$build" --target help 2>/dev/null) ||
        cmake --build "$build" -j "$jobs" --target kt_cupti_inject >>"$log" 2>&1; } &&
    cmake --build "$build/tests/cuda" -j "$jobs" >>"$log" 2>&1; then
    line PASS build "sm_$arch, $(($(date +%s) - t_start)) s ($(nvcc --version 2>/dev/null | tail -n 1))"
else
    line FAIL build "see $log:"
    tail -n 30 "$log"
    exit 1
fi
build_dirs
inject=$lib/ktiming/libktiming_cupti.so

# --- the CUDA tests (double and device) -------------------------------------------------------------------------
out=$(cd "$build" && ctest -R '^test_(cuda|gpu)_' --timeout 300 -j "$jobs" 2>&1)
summary=$(printf '%s\n' "$out" | grep -E 'tests passed|tests failed' | tail -n 1)
if printf '%s\n' "$out" | grep -q 'tests passed, 0 tests failed\|100% tests passed'; then
    line PASS ctest-cuda "$summary"
else
    line FAIL ctest-cuda "$summary"
    printf '%s\n' "$out" | grep -E '\*\*\*|Failed|Not Run' | head -n 20
fi
ex=$(cd "$build" && ctest -R '^test_cuda_example_runs$' -V 2>&1)
if printf '%s\n' "$ex" | grep -q 'Passed'; then
    line PASS example "$(printf '%s\n' "$ex" | grep -E 'saxpy' | sed 's/^[0-9]*: //' | tr '\n' ';' | head -c 300)"
else
    line FAIL example "did not pass (skipped or failed): $(printf '%s\n' "$ex" | grep -E 'unavailable|Skipped|Failed' | head -n 2 | tr '\n' ' ')"
fi

# --- CLI ---------------------------------------------------------------------------------------------------------
if o=$("$bin/ktiming" devices 2>&1) && printf '%s\n' "$o" | grep -q '^CUDA device 0: '; then
    line PASS devices "$(printf '%s\n' "$o" | grep -A2 '^CUDA device' | tr -s ' ' | tr '\n' ';' | head -c 500)"
else
    line FAIL devices "$(printf '%s\n' "$o" | tail -n 3 | tr '\n' ';')"
fi
if o=$("$bin/ktiming" demo 2>&1) && ! printf '%s\n' "$o" | grep -qi 'CUDA.*unavailable'; then
    line PASS demo "$(printf '%s\n' "$o" | grep -i cuda | tr -s ' ' | tr '\n' ';' | head -c 400)"
else
    line FAIL demo "$(printf '%s\n' "$o" | tail -n 5 | tr '\n' ';')"
fi

# --- the issue's checks ------------------------------------------------------------------------------------------
checks=$build/kt_gpu_checks
# shellcheck disable=SC2054 # -rpath,DIR is one argument
nvcc_flags=(-O2 -arch="sm_$arch" -DKTIMING_ENABLE=1 -I"$src/include" -L"$lib" -lktiming
    -Xlinker -rpath,"$lib")
if nvcc "${nvcc_flags[@]}" "$src/tests/gpu/kt_gpu_checks.cu" -o "$checks" >"$build/checks.log" 2>&1 &&
    nvcc "${nvcc_flags[@]}" --default-stream per-thread "$src/tests/gpu/kt_gpu_checks.cu" -o "$checks-ptds" \
        >>"$build/checks.log" 2>&1; then
    :
else
    line FAIL checks-build "$(tail -n 5 "$build/checks.log" | tr '\n' ';')"
    echo "gpu-check: $fails failed"
    exit "$fails"
fi

run_check() { # name command...: the program prints its own PASS/FAIL/INFO lines
    local name=$1 o rc
    shift
    o=$(timeout 120 "$@" 2>&1)
    rc=$?
    printf '%s\n' "$o" | grep -E '^(PASS|FAIL|INFO) ' || true
    if [ $rc -ne 0 ]; then
        printf '%s\n' "$o" | grep -qE '^FAIL ' || line FAIL "$name" "exit $rc: $(printf '%s\n' "$o" | tail -n 3 | tr '\n' ';')"
        fails=$((fails + $(printf '%s\n' "$o" | grep -cE '^FAIL ')))
    fi
}

run_check capture "$checks" capture
run_check held "$checks" held 1000
run_check held-many "$checks" held-many 48
run_check queue-depth "$checks" queue-depth
run_check device-label "$checks" devices
run_check ptds "$checks-ptds" ptds
run_check globaltimer "$checks" globaltimer
run_check globaltimer-cupti env CUDA_INJECTION64_PATH="$inject" "$checks" globaltimer
run_check calib "$checks" calib 3
run_check stamps "$checks" stamps 4
run_check cupti-live env CUDA_INJECTION64_PATH="$inject" "$checks" cupti-live 1000
run_check cupti-bracket env CUDA_INJECTION64_PATH="$inject" "$checks" cupti-bracket
run_check cupti-configs env CUDA_INJECTION64_PATH="$inject" "$checks" cupti-configs 2000
run_check cupti-holder-free "$checks" cupti-holder 0
run_check cupti-holder env CUDA_INJECTION64_PATH="$inject" "$checks" cupti-holder 1

# reset: under compute-sanitizer where it accepts the device; it reports every driver call that fails (a use of a
# freed event or stream answers CUDA_ERROR_INVALID_HANDLE/INVALID_CONTEXT). reset-watch: the same with
# kt_cuda_watch_resets (compute-sanitizer may hold CUPTI's subscription itself: then it runs without it).
san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
sanitized_reset() { # NAME MODE
    local name=$1 mode=$2 o rc bad
    if [ -z "$san" ]; then
        line SKIP "$name-sanitizer" "no compute-sanitizer"
        run_check "$name" "$checks" reset "$mode"
        return
    fi
    o=$(timeout 180 "$san" --tool memcheck --report-api-errors all "$checks" reset "$mode" 2>&1)
    rc=$?
    printf '%s\n' "$o" | grep -E '^(PASS|FAIL|INFO) ' || true
    bad=$(printf '%s\n' "$o" | grep -cE 'Program hit .* on (CUDA|cu)[A-Za-z_]* API call to cu(Event|Stream|Module|Mem)' || true)
    if printf '%s\n' "$o" | grep -qE 'Device not supported|error 999|Target application terminated before|watch refused'; then
        line SKIP "$name-sanitizer" "compute-sanitizer refused the device or holds CUPTI: $(printf '%s\n' "$o" | grep -m1 -E 'not supported|999|watch refused' )"
        run_check "$name" "$checks" reset "$mode"
    elif [ "$bad" -eq 0 ] && [ $rc -eq 0 ]; then
        line PASS "$name-sanitizer" "no failing cuEvent/cuStream/cuModule/cuMem call from ktiming ($(printf '%s\n' "$o" | grep -m1 'ERROR SUMMARY'))"
    else
        line FAIL "$name-sanitizer" "$bad failing driver calls on handles, exit $rc: $(printf '%s\n' "$o" | grep -m3 -E 'Program hit|ERROR SUMMARY' | tr '\n' ';')"
    fi
}
sanitized_reset reset 0
sanitized_reset reset-watch 1
run_check reset-inject env CUDA_INJECTION64_PATH="$inject" "$checks" reset 2

# ktiming run of a CUDA program with graphs: complete, then SIGKILLed mid-run
tmp=$(mktemp -d /tmp/kt-gpu-run.XXXXXX)
o=$(timeout 120 "$bin/ktiming" run -o "$tmp/full.json" -f none -- "$checks" graphs 200 2 2>&1)
rc=$?
counts() { # snapshot.json: "name xN" per entry
    python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
es=d.get("entries") or d.get("kernels") or []
print("; ".join("%s x%s (dropped %s)" % (e.get("name"), e.get("dispatch_count", e.get("count")), e.get("dropped", 0)) for e in es))' "$1" 2>&1 | head -c 600
}
if [ $rc -eq 0 ] && [ -s "$tmp/full.json" ]; then
    n=$(counts "$tmp/full.json")
    if printf '%s' "$n" | grep -q 'graph [0-9]* x200 ' && printf '%s' "$n" | grep -q 'kt_gpu_add[^;]* x200 '; then
        line PASS run-graphs "200 graph launches + 200 kernels: $n"
    else
        line FAIL run-graphs "expected graph x200 and kt_gpu_add x200: $n"
    fi
    # issue 40.2: the 200 kernels outside the graph were launched <<<1, 32>>>: one configuration row in the JSON
    cfg=$(python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
for e in d.get("entries") or d.get("kernels") or []:
    if e.get("name", "").startswith("kt_gpu_add"):
        print("; ".join("%s size=%s local=%s x%s" % (c.get("kind"), c.get("size"), c.get("local"), c.get("dispatch_count")) for c in e.get("configs", [])))' "$tmp/full.json" 2>&1 | head -c 300)
    if [ "$cfg" = "groups size=[1, 1, 1] local=[32, 1, 1] x200" ]; then
        line PASS run-configs "kt_gpu_add's configurations in the run's JSON: $cfg"
    else
        line FAIL run-configs "expected one row, groups size=[1, 1, 1] local=[32, 1, 1] x200: '$cfg'"
    fi
    # issue 40.1: the program's two cudaStreamSynchronize calls are host API time (host-api entries)
    if printf '%s' "$n" | grep -q 'cudaStreamSynchronize x2 '; then
        line PASS run-host-api "the program's waits recorded: $(printf '%s' "$n" | grep -o 'cudaStreamSynchronize x2 ')"
    else
        line FAIL run-host-api "expected cudaStreamSynchronize x2 (host-api): $n"
    fi
else
    line FAIL run-graphs "exit $rc: $(printf '%s\n' "$o" | tail -n 3 | tr '\n' ';')"
fi
timeout 60 "$bin/ktiming" run -o "$tmp/kill.json" -f none -- "$checks" graphs 100000 5 >"$tmp/kill.log" 2>&1 &
runner=$!
for _ in $(seq 1 100); do grep -q '10 launched' "$tmp/kill.log" 2>/dev/null && break; sleep 0.1; done
sleep 2
kt=$(pgrep -P "$runner" | head -n 1) # timeout -> ktiming run -> the program
child=$([ -n "$kt" ] && pgrep -P "$kt" | head -n 1)
[ -n "$child" ] && kill -KILL "$child"
wait "$runner"
rc=$?
if [ -s "$tmp/kill.json" ]; then
    line INFO run-sigkill "program SIGKILLed after ~2 s: ktiming run exit $rc, snapshot written: $(counts "$tmp/kill.json")"
else
    line INFO run-sigkill "program SIGKILLed after ~2 s: ktiming run exit $rc, no snapshot: $(tail -n 2 "$tmp/kill.log" | tr '\n' ';')"
fi
# a profiler of the program's own beside the CUPTI library (Kineto through torch.profiler), where PyTorch is there:
# what each side still gets, and what the library said; once with the library holding CUPTI's subscription (the
# default), once with KTIMING_CUPTI_SUBSCRIBE=0 leaving it to the profiler (issue 36.5)
torch_check() { # NAME MESSAGE ENV...
    local name=$1 what=$2 o said snap
    shift 2
    o=$(cd "$tmp" && timeout 180 env CUDA_INJECTION64_PATH="$inject" KTIMING_OUTPUT="$tmp/$name.json" "$@" python3 -c '
import torch
x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
    for _ in range(50):
        x = x * 1.0001
    torch.cuda.synchronize()
ev = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
print("torch.profiler CUDA events:", len(ev))
' 2>&1)
    said=$(printf '%s\n' "$o" | grep -E 'ktiming-cupti|CUPTI|torch.profiler CUDA events' | sort | uniq -c | tr -s ' ' | tr '\n' ';' | head -c 500)
    snap="no snapshot"
    [ -s "$tmp/$name.json" ] && snap=$(counts "$tmp/$name.json" | head -c 400)
    line INFO "$name" "50 kernels under torch.profiler $what: $said ktiming: $snap"
}
if python3 -c 'import torch' >/dev/null 2>&1; then
    torch_check torch-profiler "with the CUPTI library injected"
    torch_check torch-profiler-free "with the CUPTI library injected, KTIMING_CUPTI_SUBSCRIBE=0" KTIMING_CUPTI_SUBSCRIBE=0
else
    line SKIP torch-profiler "no PyTorch"
fi
rm -rf "$tmp"

line INFO total "$(($(date +%s) - t_start)) s, $fails failed"
exit "$fails"
