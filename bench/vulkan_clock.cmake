# vulkan_clock: span uncertainty in the first second (calibrated / bracketed) and the cost of a timed submission
# behind long work on the bracketed path.
include(${PROJECT_SOURCE_DIR}/cmake/KtimingSpirv.cmake)
include(${PROJECT_SOURCE_DIR}/cmake/KtimingVkApp.cmake)
if(KTIMING_HAVE_VULKAN AND KTIMING_GLSLANG)
  kt_add_bench(vulkan_clock ${CMAKE_CURRENT_LIST_DIR}/vulkan_clock.c)
  target_link_libraries(vulkan_clock PRIVATE ktiming_vk_app)
  kt_add_spirv(vulkan_clock ${PROJECT_SOURCE_DIR}/tests/vulkan/shaders/busy.comp)
endif()
