# CUDA hooks of the CLI (included by tools/ktiming/CMakeLists.txt): the demo's kernels are checked in as PTX
# (demo_cuda_kernels.ptx, ISA 6.0 for sm_50: every driver since CUDA 9 loads it; nvcc 13 itself only emits
# PTX 9.0, which needs an R580+ driver) and embedded at build time, so the CUDA demo needs no nvcc.
include(${PROJECT_SOURCE_DIR}/cmake/KtimingCuda.cmake)
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/demo_cuda.c)
  set(_kt_demo_ptx_c ${CMAKE_CURRENT_BINARY_DIR}/demo_cuda_kernels_ptx.c)
  kt_embed_text(${_kt_demo_ptx_c} ${CMAKE_CURRENT_SOURCE_DIR}/demo_cuda_kernels.ptx ktcli_demo_cuda_ptx)
  target_sources(ktiming_cli PRIVATE ${_kt_demo_ptx_c})
  target_compile_definitions(ktiming_cli PRIVATE KTCLI_CUDA_DEMO_PTX=1)
endif()
target_link_libraries(ktiming_cli PRIVATE ${CMAKE_DL_LIBS})
