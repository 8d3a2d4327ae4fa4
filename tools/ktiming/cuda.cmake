# CUDA hooks of the CLI (included by tools/ktiming/CMakeLists.txt): the demo's kernels are checked in as PTX
# (demo_cuda_kernels.ptx, ISA 6.0 for sm_50: every driver since CUDA 9 loads it; nvcc 13 itself only emits
# PTX 9.0, which needs an R580+ driver) and embedded at build time, so the CUDA demo needs no nvcc.
include(${PROJECT_SOURCE_DIR}/cmake/KtimingCuda.cmake)
include(${PROJECT_SOURCE_DIR}/cmake/KtimingEmbed.cmake)
kt_embed(ktiming_cli ktcli_demo_cuda_ptx ${CMAKE_CURRENT_SOURCE_DIR}/demo_cuda_kernels.ptx)
target_compile_definitions(ktiming_cli PRIVATE KTCLI_CUDA_DEMO_PTX=1)
