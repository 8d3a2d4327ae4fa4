#!/usr/bin/env bash
# Installs the Debian packages ktiming needs, skipping what is already there.
#   scripts/install-deps.sh          what building and `make demo` need (toolchain, cJSON, GPU API headers and the
#                                    CPU drivers PoCL and lavapipe the demo runs on)
#   scripts/install-deps.sh --test   that plus what the test suite needs (cmocka, clang for the fuzz step,
#                                    chromium for the HTML test, the Vulkan validation layer, clinfo/vulkaninfo,
#                                    SQLite, libpq and a PostgreSQL server for `ktiming history` and its tests)
set -euo pipefail

BUILD_PKGS=(
  build-essential cmake pkg-config          # toolchain (dpkg-dev, in build-essential, for `make package`)
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
  --test) PKGS=("${BUILD_PKGS[@]}" "${TEST_PKGS[@]}") ;;
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
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
echo "install-deps: done"
