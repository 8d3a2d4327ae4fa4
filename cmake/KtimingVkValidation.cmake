# KT_VK_SYNC_ENV: the environment entry that turns on the Khronos validation layer's synchronization validation,
# for the Vulkan tests (tests/vulkan, tests/run). Layers whose manifest lists the `validate_sync` setting (SDK
# 1.3.2xx on; Debian sid's 1.4.363) take VK_LAYER_VALIDATE_SYNC=1 and warn (VALIDATION-SETTINGS, a test failure)
# on the deprecated VK_LAYER_ENABLES; older ones (Debian 12's 1.3.239) know only VK_LAYER_ENABLES. The manifest is
# looked for where the loader looks (scripts/vulkan-newest-layer.sh runs the tests under the newer layer).
set(KT_VK_SYNC_ENV "VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT")
find_file(_kt_vvl_json VkLayer_khronos_validation.json NO_CACHE
  PATHS $ENV{VK_ADD_LAYER_PATH} $ENV{VK_LAYER_PATH} /usr/local/share/vulkan/explicit_layer.d
        /usr/share/vulkan/explicit_layer.d /etc/vulkan/explicit_layer.d NO_DEFAULT_PATH)
if(_kt_vvl_json)
  file(READ "${_kt_vvl_json}" _kt_vvl_manifest)
  if(_kt_vvl_manifest MATCHES "\"validate_sync\"")
    set(KT_VK_SYNC_ENV "VK_LAYER_VALIDATE_SYNC=1")
  endif()
endif()
