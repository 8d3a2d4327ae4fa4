# vulkan_overhead: submit throughput of small compute dispatches with and without ktiming timestamps.
include(${PROJECT_SOURCE_DIR}/cmake/KtimingSpirv.cmake)
include(${PROJECT_SOURCE_DIR}/cmake/KtimingVkApp.cmake)
if(KTIMING_HAVE_VULKAN AND KTIMING_GLSLANG)
  kt_add_bench(vulkan_overhead ${CMAKE_CURRENT_LIST_DIR}/vulkan_overhead.c)
  target_link_libraries(vulkan_overhead PRIVATE ktiming_vk_app)
  kt_add_spirv(vulkan_overhead ${PROJECT_SOURCE_DIR}/tools/ktiming/shaders/saxpy.comp)
  if(TARGET ktiming_vk_layer) # the layer variant: the same recording under VK_LAYER_KTIMING_timing
    target_compile_definitions(vulkan_overhead PRIVATE KT_BENCH_LAYER_DIR="$<TARGET_FILE_DIR:ktiming_vk_layer>")
    add_dependencies(vulkan_overhead ktiming_vk_layer)
  endif()
endif()
