#!/usr/bin/env bash
# Runs ktiming's Vulkan tests (`ctest -L vulkan`) under the newest Khronos validation layer that Debian packages
# (suite sid), with synchronization validation, on sid's loader and lavapipe, and every device test once more on
# the host's lavapipe (issue 37.3). Not part of `make test` or CI: sid changes daily, and the first run makes a
# 1.6 GB root (about 11 minutes on a loaded 2-core machine; later runs about 3).
#   scripts/vulkan-newest-layer.sh [--cache DIR] [--update] [--no-lvp22] [-- CTEST-ARGS...]
# The layer, loader and Mesa in sid need a newer glibc and libstdc++ than the host's (Debian 12), so they cannot be
# loaded into the host's processes: the script keeps a minimal sid root (debootstrap --variant=minbase) under
# DIR/root, installs the build and test dependencies in it with sid's apt, bind-mounts this source tree read-only
# at /src inside it, builds the targets of the tests labelled `vulkan` in DIR/root/build/<tree name> (kept, so a
# second run rebuilds only what changed) and runs ctest there through chroot. The tests set the environment that
# loads VK_LAYER_KHRONOS_validation with synchronization validation and fail on any validation message.
#   --cache DIR   where the sid root lives (default: $KTIMING_SID_CACHE or /var/cache/ktiming-sid)
#   --update      apt-get update + upgrade in the sid root first (otherwise it is reused as it is)
#   --no-lvp22    run the device tests on sid's lavapipe only. By default each runs a second time (the -lvp25
#                 names of tests/vulkan/CMakeLists.txt) on the host's own lavapipe (Debian 12: Mesa 22.3, what CI
#                 runs), its library and the libraries it needs that the root lacks copied in (skipped with a
#                 note when the host has no lavapipe)
#   -- ARGS       passed to ctest after `-L vulkan` (e.g. -- -R test_vk_layer)
# Prints the versions used (layer, loader, lavapipe) and ctest's summary; exits with ctest's status (2 on a usage
# error, 1 when the setup fails). Needs root (chroot, mounts), network for the first run, and debootstrap.
# The mounts live in a private mount namespace (unshare -m) and vanish when the script ends.
set -euo pipefail

MIRROR=${KT_SID_MIRROR:-http://deb.debian.org/debian}
# What configuring and building the Vulkan tests needs in the root (scripts/install-deps.sh's names).
SID_PKGS=(
  cmake gcc g++ make pkg-config libc6-dev      # toolchain
  libcmocka-dev libcjson-dev                   # tests; the analysis library (test_vk_run_inflight reads snapshots)
  opencl-headers                               # the core library builds its OpenCL backend (loaded at run time)
  libvulkan-dev libvulkan1 glslang-tools       # loader and headers, SPIR-V of the test shaders
  mesa-vulkan-drivers vulkan-validationlayers  # lavapipe and the layer under test
  vulkan-tools jq                              # vulkaninfo (the versions line), jq (the layer's json)
)

die() { echo "vulkan-newest-layer: $*" >&2; exit 1; }
log() { echo "vulkan-newest-layer: $*" >&2; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

SRC=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${KTIMING_SID_CACHE:-/var/cache/ktiming-sid}
UPDATE=0
LVP22=1
INNER=0
CTEST_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --cache) [ $# -ge 2 ] && [ -n "$2" ] || { echo "vulkan-newest-layer: --cache needs a folder" >&2; exit 2; }
             CACHE=$2; shift 2 ;;
    --update) UPDATE=1; shift ;;
    --no-lvp22) LVP22=0; shift ;;
    --inner) INNER=1; shift ;; # internal: the part that runs in the private mount namespace
    --) shift; CTEST_ARGS=("$@"); break ;;
    *) echo "vulkan-newest-layer: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot and bind mounts); run it with sudo"
mkdir -p "$CACHE" 2>/dev/null || die "cannot create the cache folder $CACHE (--cache DIR)"
CACHE=$(cd "$CACHE" && pwd)
ROOT=$CACHE/root
READY=$ROOT/.ktiming-sid-ready
# One build folder per source tree, so that several worktrees can share one root.
TREE=$(basename "$SRC")-$(printf '%s' "$SRC" | cksum | cut -d' ' -f1)
BUILD=/build/$TREE

in_root() { # a command in the sid root, with a clean environment (nothing of the host's VK_*/LD_* leaks in)
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
    chroot "$ROOT" "$@"
}

if [ "$INNER" = 0 ]; then
  for t in chroot unshare mount flock; do
    command -v "$t" >/dev/null 2>&1 || die "$t not found"
  done
  exec 9>"$CACHE/lock"
  flock -n 9 || { log "another run holds $CACHE/lock; waiting for it"; flock 9; }

  if [ ! -f "$READY" ]; then
    command -v debootstrap >/dev/null 2>&1 ||
      die "debootstrap not found (apt-get install debootstrap); it makes the sid root once"
    log "making a minimal Debian sid root in $ROOT (once; a few minutes)"
    rm -rf "$ROOT.tmp"
    debootstrap --variant=minbase sid "$ROOT.tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
      die "debootstrap failed (see $CACHE/debootstrap.log)"
    rm -rf "$ROOT"
    mv "$ROOT.tmp" "$ROOT"
    : >"$READY"
  fi
  # Shared caches of the host would not be right in the root, but DNS is.
  cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
  KT_VNL_UPDATE=$UPDATE KT_VNL_LVP22=$LVP22 exec unshare -m --propagation private "$0" --inner --cache "$CACHE" \
    -- "${CTEST_ARGS[@]}"
fi
UPDATE=${KT_VNL_UPDATE:-0}
LVP22=${KT_VNL_LVP22:-0}

# ---- inside the private mount namespace: nothing mounted here outlives the script ----
mount -t proc proc "$ROOT/proc" || die "cannot mount /proc in $ROOT"
mount --rbind /dev "$ROOT/dev" || die "cannot bind-mount /dev into $ROOT"
mount --rbind /sys "$ROOT/sys" || die "cannot bind-mount /sys into $ROOT"
mkdir -p "$ROOT/src" "$ROOT/build"
mount --bind "$SRC" "$ROOT/src" || die "cannot bind-mount $SRC at $ROOT/src"
mount -o remount,bind,ro "$ROOT/src" || die "cannot make $ROOT/src read-only"

# A mirror snapshot (or a clock ahead of the mirror) serves a sid Release file whose Valid-Until has passed; the
# packages are still signed, only the freshness check goes.
echo 'Acquire::Check-Valid-Until "false";' >"$ROOT/etc/apt/apt.conf.d/99ktiming-no-valid-until"
missing=()
for p in "${SID_PKGS[@]}"; do
  in_root dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "$UPDATE" = 1 ] || [ ${#missing[@]} -gt 0 ]; then
  log "apt-get update in the sid root"
  in_root apt-get -qq update || die "apt-get update failed in the sid root (network? mirror $MIRROR)"
  if [ "$UPDATE" = 1 ]; then
    in_root apt-get -y -qq dist-upgrade >"$CACHE/apt.log" 2>&1 || die "apt-get dist-upgrade failed (see $CACHE/apt.log)"
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing in the sid root: ${missing[*]}"
    in_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$CACHE/apt.log" 2>&1 ||
      die "apt-get install failed in the sid root (see $CACHE/apt.log)"
  fi
fi

# The host's lavapipe (Debian 12) as the second driver, with the libraries it needs that the root lacks (copied
# again only when the host's Mesa changed).
LVP_ARGS=(-DKTIMING_LVP25_DIR= -DKTIMING_LAVAPIPE25_ICD=)
if [ "$LVP22" = 1 ]; then
  TRIPLET=$(gcc -print-multiarch 2>/dev/null || echo "$(uname -m)-linux-gnu")
  host_lvp=/usr/lib/$TRIPLET/libvulkan_lvp.so
  if [ ! -f "$host_lvp" ]; then
    log "the host has no lavapipe ($host_lvp): the device tests run on sid's lavapipe only"
    LVP22=0
  fi
fi
if [ "$LVP22" = 1 ]; then
  lvp_dir=$ROOT/opt/lvp22
  host_mesa=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || echo ?)
  if [ "$(cat "$lvp_dir/.mesa-version" 2>/dev/null)" != "$host_mesa" ] || [ ! -f "$lvp_dir/lvp_icd.json" ]; then
    rm -rf "$lvp_dir" && mkdir -p "$lvp_dir/lib"
    cp -L "$host_lvp" "$lvp_dir/lib/"
    # A library goes in when no library of that soname exists in the root (never the root's libc or libstdc++).
    ldd "$host_lvp" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r soname path; do
      if ! in_root sh -c "ls /usr/lib/$TRIPLET/$soname /lib/$TRIPLET/$soname" >/dev/null 2>&1; then
        cp -L "$path" "$lvp_dir/lib/"
      fi
    done
    cat >"$lvp_dir/lvp_icd.json" <<JSON
{ "file_format_version": "1.0.0",
  "ICD": { "library_path": "/opt/lvp22/lib/libvulkan_lvp.so", "api_version": "1.3" } }
JSON
    echo "$host_mesa" >"$lvp_dir/.mesa-version"
  fi
  LVP_ARGS=(-DKTIMING_LVP25_DIR= -DKTIMING_LAVAPIPE25_ICD=/opt/lvp22/lvp_icd.json)
fi

ver() { in_root dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "?"; }
LAYER_JSON=$(in_root sh -c 'ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json' 2>/dev/null) ||
  die "no VkLayer_khronos_validation.json in the sid root"
LAYER_API=$(in_root jq -r '.layer.api_version' "$LAYER_JSON")
DRIVER=$(in_root vulkaninfo --summary 2>/dev/null | awk -F'= ' '/driverInfo/ {print $2; exit}')
VERSIONS="layer vulkan-validationlayers $(ver vulkan-validationlayers) (API $LAYER_API), loader libvulkan1 \
$(ver libvulkan1), lavapipe mesa-vulkan-drivers $(ver mesa-vulkan-drivers) (${DRIVER:-driverInfo ?}), \
gcc $(ver gcc), glibc $(ver libc6)"
[ "$LVP22" = 1 ] && VERSIONS="$VERSIONS; the -lvp25 tests on the host's lavapipe mesa-vulkan-drivers $host_mesa"
log "versions: $VERSIONS"

log "configuring and building the Vulkan tests in $ROOT$BUILD"
in_root cmake -S /src -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKTIMING_BUILD_TESTS=ON \
  -DKTIMING_BUILD_BENCH=OFF -DKTIMING_BUILD_EXAMPLES=OFF -DKTIMING_WERROR=OFF "${LVP_ARGS[@]}" \
  >"$CACHE/$TREE.configure.log" 2>&1 || die "cmake configure failed (see $CACHE/$TREE.configure.log)"
# Only the executables the tests labelled vulkan run (their add_dependencies bring the layer, CLI and helpers):
# the test names from ctest, each one's program from the CTestTestfile.cmake that adds it (ctest's JSON leaves out
# the command of a program not built yet).
mapfile -t TARGETS < <(in_root sh -c "cd '$BUILD' && ctest -N -L vulkan --show-only=json-v1" |
  in_root jq -r '.tests[].name' | while read -r name; do
    grep -rhF --include=CTestTestfile.cmake "add_test([=[$name]=] \"$BUILD/" "$ROOT$BUILD" |
      sed -n 's/^add_test(\[=\[[^]]*\]=\] "\([^"]*\)".*/\1/p' | xargs -rn1 basename
  done | sort -u)
[ ${#TARGETS[@]} -gt 0 ] || die "no test labelled vulkan was configured (see $CACHE/$TREE.configure.log)"
in_root cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}" >"$CACHE/$TREE.build.log" 2>&1 ||
  { tail -n 30 "$CACHE/$TREE.build.log" >&2; die "build failed (see $CACHE/$TREE.build.log)"; }

# the form of the sync-validation switch the configured tests use (cmake/KtimingVkValidation.cmake)
SYNC=$(grep -rhoE 'VK_LAYER_VALIDATE_SYNC=1|VK_LAYER_ENABLES=[A-Z_]+' --include=CTestTestfile.cmake "$ROOT$BUILD/tests" |
  sort -u | tr '\n' ' ')
VERSIONS="$VERSIONS; synchronization validation: ${SYNC:-not set}"
log "ctest -L vulkan ${CTEST_ARGS[*]:-}"
set +e
in_root sh -c "cd '$BUILD' && exec ctest -L vulkan --timeout 600 --output-on-failure \"\$@\"" ctest \
  "${CTEST_ARGS[@]}" | tee "$CACHE/$TREE.ctest.log"
rc=${PIPESTATUS[0]}
set -e
echo "vulkan-newest-layer: $VERSIONS"
echo "vulkan-newest-layer: $(grep -E 'tests passed|tests failed' "$CACHE/$TREE.ctest.log" | tail -n1) (ctest exit $rc)"
exit "$rc"
