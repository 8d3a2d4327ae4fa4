# CUDA hooks of the CLI (included by tools/ktiming/CMakeLists.txt): the demo's kernels are compiled to PTX by
# nvcc at build time and embedded; without nvcc the CUDA demo says it has no kernels.
include(${PROJECT_SOURCE_DIR}/cmake/KtimingCuda.cmake)
include(${PROJECT_SOURCE_DIR}/cmake/KtimingEmbed.cmake)
if(KTIMING_HAVE_NVCC)
  set(_kt_demo_ptx ${CMAKE_CURRENT_BINARY_DIR}/demo_cuda_kernels.ptx)
  # compute_75: the oldest architecture CUDA 13 compiles for, so the PTX loads on every GPU it supports.
  kt_nvcc(${_kt_demo_ptx} ${CMAKE_CURRENT_SOURCE_DIR}/demo_cuda_kernels.cu PTX ARCH 75)
  kt_embed(ktiming_cli ktcli_demo_cuda_ptx ${_kt_demo_ptx})
  target_compile_definitions(ktiming_cli PRIVATE KTCLI_CUDA_DEMO_PTX=1)
endif()
