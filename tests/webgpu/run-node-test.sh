#!/usr/bin/env bash
# Runs one test file of bindings/webgpu with node's built-in test runner, for CTest.
#   run-node-test.sh plain|dawn FILE
# plain: needs only Node (>= 18). dawn: also the `webgpu` npm package in bindings/webgpu/node_modules and the
# newer lavapipe (scripts/fetch-lavapipe25.sh) in $KT_LVP25_DIR, and an adapter with timestamp-query on it.
# What is missing makes the test SKIPPED (exit 77, CTest's SKIP_RETURN_CODE), never passed.
# Environment from CTest: KT_WEBGPU_DIR (the package), KT_LVP25_DIR, KT_CLI (the built ktiming).
set -uo pipefail
mode=${1:?mode}
file=${2:?file}
skip() { echo "SKIPPED: $*"; exit 77; }

command -v node >/dev/null 2>&1 || skip "node is not installed (scripts/install-deps.sh --test installs it)"
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
[ "$major" -ge 18 ] 2>/dev/null || skip "node $major is older than 18 (node --test)"

if [ "$mode" = dawn ]; then
  [ -f "$KT_WEBGPU_DIR/node_modules/webgpu/package.json" ] ||
    skip "the npm package webgpu is not in $KT_WEBGPU_DIR/node_modules (scripts/install-deps.sh --test)"
  [ -f "$KT_LVP25_DIR/env.sh" ] ||
    skip "no newer lavapipe in $KT_LVP25_DIR (scripts/fetch-lavapipe25.sh $KT_LVP25_DIR)"
  # shellcheck disable=SC1091
  . "$KT_LVP25_DIR/env.sh"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  export XDG_RUNTIME_DIR="$tmp"
  probe='import("webgpu").then(async ({ create }) => {
    const a = await create(["disable-dawn-features=timestamp_quantization"]).requestAdapter();
    process.exit(a && a.features.has("timestamp-query") ? 0 : 3);
  }, () => process.exit(4));'
  (cd "$KT_WEBGPU_DIR" && node --input-type=module -e "$probe" >/dev/null 2>&1) ||
    skip "Dawn finds no adapter with timestamp-query on the lavapipe in $KT_LVP25_DIR"
fi
exec node --test "$file"
