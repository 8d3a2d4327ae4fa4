#!/usr/bin/env bash
# Installs the Debian packages ktiming needs, skipping what is already there.
#   scripts/install-deps.sh          what building and `make demo` need (toolchain, cJSON, GPU API headers and the
#                                    CPU drivers PoCL and lavapipe the demo runs on)
#   scripts/install-deps.sh --test   that plus what the test suite needs (cmocka, clang for the fuzz step,
#                                    chromium for the HTML test, the Vulkan validation layer, clinfo/vulkaninfo,
#                                    SQLite, libpq and a PostgreSQL server for `ktiming history` and its tests),
#                                    and for the WebGPU tests Node (Debian's, if none), the npm package `webgpu`
#                                    in bindings/webgpu/node_modules and the newer lavapipe in build/lvp25
set -euo pipefail

BUILD_PKGS=(
  build-essential cmake pkg-config file     # toolchain; dpkg-dev (in build-essential) and file for `make package`
  libcjson-dev                               # snapshot loading (analysis library)
  ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers pocl-opencl-icd          # OpenCL on the CPU
  libvulkan1 libvulkan-dev mesa-vulkan-drivers glslang-tools                     # Vulkan on the CPU (lavapipe)
  libopenmpi-dev openmpi-bin                 # libktiming_mpi and its 4-rank tests (optional: built when found)
)
TEST_PKGS=(
  libcmocka-dev                              # test assertions
  clang                                      # libFuzzer target for the snapshot loader
  chromium                                   # renders the HTML report in a test
  vulkan-validationlayers vulkan-tools clinfo                                    # Vulkan tests run validated
  libsqlite3-dev libpq-dev postgresql        # `ktiming history` (optional to the build) and its PostgreSQL test
)

case "${1:-}" in
  "") PKGS=("${BUILD_PKGS[@]}") ;;
  --test) PKGS=("${BUILD_PKGS[@]}" "${TEST_PKGS[@]}")
          command -v node >/dev/null 2>&1 || PKGS+=(nodejs npm) ;; # any Node >= 18 will do (bindings/webgpu)
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac

# --test, after the Debian packages: what the WebGPU tests need beside Node. Without network these fail with a
# message and the WebGPU tests then report SKIPPED; nothing here touches the system's Vulkan driver.
webgpu_deps() {
  [ "${1:-}" = --test ] || return 0
  local root
  root=$(cd "$(dirname "$0")/.." && pwd)
  if [ ! -f "$root/bindings/webgpu/node_modules/webgpu/package.json" ] && command -v npm >/dev/null 2>&1; then
    (cd "$root/bindings/webgpu" && npm install --no-save --no-package-lock --no-audit --no-fund --loglevel=error) ||
      echo "install-deps: npm install in bindings/webgpu failed: the WebGPU tests will be skipped" >&2
  fi
  "$root/scripts/fetch-lavapipe25.sh" "$root/build/lvp25" >/dev/null ||
    echo "install-deps: no newer lavapipe in build/lvp25: the WebGPU tests will be skipped" >&2
}

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  webgpu_deps "${1:-}"
  exit 0
fi

echo "install-deps: missing Debian packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "install-deps: not root and no password-less sudo; install them with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
webgpu_deps "${1:-}"
echo "install-deps: done"
