# ktiming_vk_app: tools/ktiming/vk_app.c, the application side of Vulkan (instance, device, buffers, pipelines),
# built once as a static library that the CLI demo, the Vulkan tests and the Vulkan benches link instead of each
# compiling the source (issue 35.5). Defined by whichever of them is configured first; only with Vulkan headers.
include_guard(GLOBAL)
if(KTIMING_HAVE_VULKAN)
  add_library(ktiming_vk_app STATIC ${PROJECT_SOURCE_DIR}/tools/ktiming/vk_app.c)
  target_include_directories(ktiming_vk_app PUBLIC ${PROJECT_SOURCE_DIR}/tools/ktiming)
  target_compile_definitions(ktiming_vk_app PRIVATE _GNU_SOURCE)
  target_link_libraries(ktiming_vk_app PUBLIC ktiming)
  kt_project_warnings(ktiming_vk_app)
endif()
