# run_overhead: wall time of an OpenCL program alone and under `ktiming run` (needs the CLI and the OpenCL
# interception; the program is tests/run/clprog.c, built here too since benches build without tests).
if(TARGET ktiming_cli AND TARGET ktiming_cl_intercept AND TARGET ktiming_analysis)
  find_library(KT_BENCH_OPENCL_LOADER NAMES OpenCL libOpenCL.so.1)
  if(KT_BENCH_OPENCL_LOADER)
    add_executable(run_overhead_clprog ${PROJECT_SOURCE_DIR}/tests/run/clprog.c)
    target_link_libraries(run_overhead_clprog PRIVATE ${KT_BENCH_OPENCL_LOADER})
    target_compile_definitions(run_overhead_clprog PRIVATE _GNU_SOURCE)
    kt_add_bench(run_overhead run_overhead.c)
    target_link_libraries(run_overhead PRIVATE ktiming_analysis)
    target_compile_definitions(run_overhead PRIVATE KT_CLI="$<TARGET_FILE:ktiming_cli>"
      CLPROG="$<TARGET_FILE:run_overhead_clprog>")
    add_dependencies(run_overhead ktiming_cli ktiming_cl_intercept ktiming_cl_direct run_overhead_clprog)
  endif()
endif()
