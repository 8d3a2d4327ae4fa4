# OpenCL sync points: the program thread's CPU per kt_cl_collect + clFinish, alone, with another queue's deep
# pending work, and after a large burst (issue 38 item 4; bound 1.5 on both ratios): medians over 9 processes with
# ktiming, beside 9 without it (the control), alternating, each held to one CPU (the bench re-runs itself with
# --child; --two-cpus leaves them unpinned).
kt_add_bench(opencl_sync opencl_sync.c)
