# Vulkan parts of the CLI: the app-side helper (vk_app.c, the ktiming_vk_app library) and the demo's compute shaders, compiled to SPIR-V
# headers at build time with glslangValidator.
include(${PROJECT_SOURCE_DIR}/cmake/KtimingSpirv.cmake)
include(${PROJECT_SOURCE_DIR}/cmake/KtimingVkApp.cmake)
if(NOT KTIMING_HAVE_VULKAN)
  target_compile_definitions(ktiming_cli PRIVATE KTCLI_NO_VULKAN=1)
else()
  target_link_libraries(ktiming_cli PRIVATE ktiming_vk_app)
  if(KTIMING_GLSLANG)
    kt_add_spirv(ktiming_cli
      ${CMAKE_CURRENT_LIST_DIR}/shaders/blur.comp
      ${CMAKE_CURRENT_LIST_DIR}/shaders/saxpy.comp
      ${CMAKE_CURRENT_LIST_DIR}/shaders/reduce.comp)
  else()
    message(STATUS "ktiming: glslangValidator not found (glslang-tools): no Vulkan demo kernels")
    target_compile_definitions(ktiming_cli PRIVATE KTCLI_NO_SHADERS=1)
  endif()
endif()
