# vulkan_clock: span uncertainty in the first second (calibrated / bracketed) and the cost of a timed submission
# behind long work on the bracketed path.
include(${PROJECT_SOURCE_DIR}/cmake/KtimingSpirv.cmake)
if(KTIMING_HAVE_VULKAN AND KTIMING_GLSLANG)
  kt_add_bench(vulkan_clock ${CMAKE_CURRENT_LIST_DIR}/vulkan_clock.c ${PROJECT_SOURCE_DIR}/tools/ktiming/vk_app.c)
  target_include_directories(vulkan_clock PRIVATE ${PROJECT_SOURCE_DIR}/tools/ktiming)
  kt_add_spirv(vulkan_clock ${PROJECT_SOURCE_DIR}/tests/vulkan/shaders/busy.comp)
endif()
