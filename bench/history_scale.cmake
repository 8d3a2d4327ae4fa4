# history_scale: `ktiming history` on SQLite, 1,000 runs x 1,000 kernels: ms per run added, s per check.
if(TARGET ktiming_history)
  kt_add_bench(history_scale history_scale.c)
  target_link_libraries(history_scale PRIVATE ktiming_history)
endif()
