# vulkan_latency: submit-and-wait latency of an empty shader, untimed / timed through the layer / two bare timestamps.
include(${PROJECT_SOURCE_DIR}/cmake/KtimingSpirv.cmake)
if(KTIMING_HAVE_VULKAN AND KTIMING_GLSLANG AND TARGET ktiming_vk_layer)
  kt_add_bench(vulkan_latency ${CMAKE_CURRENT_LIST_DIR}/vulkan_latency.c ${PROJECT_SOURCE_DIR}/tools/ktiming/vk_app.c)
  target_include_directories(vulkan_latency PRIVATE ${PROJECT_SOURCE_DIR}/tools/ktiming)
  target_compile_definitions(vulkan_latency PRIVATE KT_LAYER_DIR="${KT_BUILD_LIBDIR}/ktiming")
  kt_add_spirv(vulkan_latency ${CMAKE_CURRENT_LIST_DIR}/shaders/empty.comp)
  add_dependencies(vulkan_latency ktiming_vk_layer)
endif()
