# merge_scale: `ktiming merge` of 1,000 synthetic rank snapshots of 100 kernels each (needs the analysis library).
if(TARGET ktiming_analysis)
  kt_add_bench(merge_scale merge_scale.c)
  target_link_libraries(merge_scale PRIVATE ktiming_analysis)
endif()
