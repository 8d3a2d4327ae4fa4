# `ktiming demo`'s WebGPU rows (demo_webgpu.c) run the package's Node demo from this source tree, on the newer
# lavapipe in KTIMING_LVP25_DIR; an installed ktiming without the source tree skips them.
if(EXISTS ${PROJECT_SOURCE_DIR}/bindings/webgpu/demo/demo.mjs)
  target_compile_definitions(ktiming_cli PRIVATE KTCLI_WEBGPU_DIR="${PROJECT_SOURCE_DIR}/bindings/webgpu"
    KTCLI_LVP25_DIR="${KTIMING_LVP25_DIR}")
endif()
