# Vulkan parts of the CLI: the app-side helper (vk_app.c) and the demo's compute shaders, compiled to SPIR-V
# headers at build time with glslangValidator.
include(${PROJECT_SOURCE_DIR}/cmake/KtimingSpirv.cmake)
if(NOT KTIMING_HAVE_VULKAN)
  target_compile_definitions(ktiming_cli PRIVATE KTCLI_NO_VULKAN=1)
else()
  target_sources(ktiming_cli PRIVATE ${CMAKE_CURRENT_LIST_DIR}/vk_app.c)
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
