#!/usr/bin/env bash
# Installs the Debian packages ktiming needs to build, test and demo, skipping what is already there.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config          # toolchain
  libcmocka-dev libcjson-dev                 # tests; snapshot loading (analysis library)
  clang                                      # libFuzzer target for the snapshot loader
  ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo    # OpenCL on the CPU
  libvulkan1 libvulkan-dev mesa-vulkan-drivers glslang-tools vulkan-validationlayers vulkan-tools  # lavapipe
  chromium                                   # renders the HTML report in a test
  libopenmpi-dev openmpi-bin                 # libktiming_mpi and its multi-rank tests (optional at build time)
)

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
