# OpenCL sync points: the program thread's CPU per kt_cl_collect + clFinish, alone, with another queue's deep
# pending work, and after a large burst (issue 38 item 4; bound 1.5 on both ratios).
kt_add_bench(opencl_sync opencl_sync.c)
