# `ktiming run`: where the interception libraries are (build tree and install tree), and for a sanitizer build
# the ASan runtime to preload ahead of them into programs built without it.
file(RELATIVE_PATH _kt_run_rel ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR}/ktiming)
target_compile_definitions(ktiming_cli PRIVATE
  KTCLI_INTERCEPT_BUILD_DIR="${KT_BUILD_LIBDIR}/ktiming"
  KTCLI_INTERCEPT_INSTALL_RELDIR="${_kt_run_rel}")
# Whether this build made libktiming_mpi (src/mpi is configured before tools/): `run --mpi` then says a missing
# one is not installed (the ktiming-mpi package) rather than not built.
if(TARGET ktiming_mpi)
  target_compile_definitions(ktiming_cli PRIVATE KTCLI_MPI_BUILT=1)
endif()
if(KTIMING_SANITIZE MATCHES "address")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE _kt_asan_rt OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_kt_asan_rt AND EXISTS "${_kt_asan_rt}")
    get_filename_component(_kt_asan_rt "${_kt_asan_rt}" REALPATH)
    target_compile_definitions(ktiming_cli PRIVATE KTCLI_ASAN_RUNTIME="${_kt_asan_rt}")
  endif()
endif()
