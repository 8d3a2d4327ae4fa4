# launch_config: what a launch configuration adds to kt_record_dispatch (none, one, eight cycling).
kt_add_bench(launch_config launch_config.c)
