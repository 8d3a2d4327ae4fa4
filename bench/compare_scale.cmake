# compare_scale: `ktiming compare` of two 100,000-kernel snapshots, seconds and peak RSS (needs the CLI).
if(TARGET ktiming_cli)
  kt_add_bench(compare_scale compare_scale.c)
  target_compile_definitions(compare_scale PRIVATE KT_CLI="$<TARGET_FILE:ktiming_cli>")
  add_dependencies(compare_scale ktiming_cli)
endif()
