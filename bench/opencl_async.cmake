# OpenCL tracking overhead: enqueue throughput untimed vs async tracking vs the blocking per-dispatch wait.
kt_add_bench(opencl_async opencl_async.c)
