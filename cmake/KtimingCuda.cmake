# Finding the CUDA toolkit for ktiming's device-side code (nvcc, ptxas, cudart_static, CUPTI). libktiming never
# needs it: the CUDA backend is plain C and dlopens the driver. Device code is compiled with nvcc through custom
# commands (not enable_language(CUDA), which would have to be enabled at the top level), for one architecture
# (KTIMING_CUDA_ARCH, default 90) to keep CI fast. Skipped cleanly when nvcc is absent, when
# KTIMING_WITH_CUDA is OFF, and in sanitizer builds (nvcc objects are not instrumented). Included by each
# directory that builds device code (its variables are directory-scoped, so no include guard).

set(KTIMING_CUDA_ARCH "90" CACHE STRING "SM architecture nvcc compiles ktiming's device code for")
find_program(KTIMING_NVCC nvcc HINTS ENV CUDA_PATH ENV CUDA_HOME /usr/local/cuda PATH_SUFFIXES bin
  DOC "nvcc used for ktiming's device-side code")

set(KTIMING_HAVE_NVCC OFF)
if(KTIMING_WITH_CUDA AND KTIMING_NVCC)
  get_filename_component(_kt_cuda_bin ${KTIMING_NVCC} DIRECTORY)
  get_filename_component(KTIMING_CUDA_ROOT ${_kt_cuda_bin} DIRECTORY)
  # CUPTI's header and soname: host C code only (the injection library, the CUPTI test double), so found in
  # sanitizer builds too, where the test double serves the CUDA backend's reset watch under ASan and TSan
  find_path(KTIMING_CUPTI_INCLUDE_DIR cupti.h
    HINTS ${KTIMING_CUDA_ROOT}/include ${KTIMING_CUDA_ROOT}/extras/CUPTI/include NO_DEFAULT_PATH)
  find_library(KTIMING_CUPTI_LIBRARY cupti
    HINTS ${KTIMING_CUDA_ROOT}/lib64 ${KTIMING_CUDA_ROOT}/lib ${KTIMING_CUDA_ROOT}/extras/CUPTI/lib64
    NO_DEFAULT_PATH)
  # libcupti's soname (libcupti.so.13 for CUDA 13): what the CUPTI injection library dlopens, and what the CUPTI
  # test double is given so that it stands in for it
  set(KTIMING_CUPTI_SONAME "")
  if(KTIMING_CUPTI_LIBRARY AND CMAKE_READELF)
    execute_process(COMMAND ${CMAKE_READELF} -d ${KTIMING_CUPTI_LIBRARY} OUTPUT_VARIABLE _kt_cupti_dyn ERROR_QUIET)
    string(REGEX MATCH "soname: \\[([^]]+)\\]" _kt_m "${_kt_cupti_dyn}")
    set(KTIMING_CUPTI_SONAME "${CMAKE_MATCH_1}")
  endif()
endif()
if(KTIMING_WITH_CUDA AND KTIMING_NVCC AND NOT KTIMING_SANITIZE)
  find_program(KTIMING_PTXAS ptxas HINTS ${_kt_cuda_bin} NO_DEFAULT_PATH)
  find_library(KTIMING_CUDART_STATIC cudart_static
    HINTS ${KTIMING_CUDA_ROOT}/lib64 ${KTIMING_CUDA_ROOT}/lib NO_DEFAULT_PATH)
  find_file(KTIMING_CUDA_STUB_DRIVER libcuda.so
    HINTS ${KTIMING_CUDA_ROOT}/lib64/stubs ${KTIMING_CUDA_ROOT}/lib/stubs NO_DEFAULT_PATH)
  set(KTIMING_HAVE_NVCC ON)
  if(NOT _kt_cuda_reported)
    set(_kt_cuda_reported ON CACHE INTERNAL "")
    message(STATUS "ktiming: CUDA device code with ${KTIMING_NVCC} for sm_${KTIMING_CUDA_ARCH}")
  endif()
endif()

# kt_nvcc(<output> <source.cu> PTX|OBJ [ARCH <nn>] [DEPENDS files...])
#   PTX: nvcc --ptx for compute_<arch> (what the driver JIT-compiles); OBJ: a relocatable host+device object
#   (-c, sm_<arch> SASS + compute_<arch> PTX, -fPIC) to link into a host target with KTIMING_CUDART_STATIC.
#   ARCH defaults to KTIMING_CUDA_ARCH.
function(kt_nvcc out src mode)
  cmake_parse_arguments(N "" "ARCH" "DEPENDS" ${ARGN})
  if(NOT N_ARCH)
    set(N_ARCH ${KTIMING_CUDA_ARCH})
  endif()
  set(_inc -I${PROJECT_SOURCE_DIR}/include)
  if(mode STREQUAL "PTX")
    set(_flags --ptx -arch=compute_${N_ARCH})
  else()
    set(_flags -c -gencode arch=compute_${N_ARCH},code=[sm_${N_ARCH},compute_${N_ARCH}]
      -Xcompiler -fPIC -DKTIMING_ENABLE=1)
  endif()
  add_custom_command(OUTPUT ${out}
    COMMAND ${KTIMING_NVCC} ${_flags} ${_inc} -o ${out} ${src}
    DEPENDS ${src} ${PROJECT_SOURCE_DIR}/include/ktiming/cuda_device.cuh ${PROJECT_SOURCE_DIR}/include/ktiming/cuda.h
      ${N_DEPENDS}
    COMMENT "nvcc ${mode} ${src}" VERBATIM)
endfunction()
