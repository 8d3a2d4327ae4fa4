/* opencl_async.c — enqueue throughput of many small kernels: untimed, with ktiming's asynchronous tracking,
 * and with the blocking per-dispatch wait (seed 004's baseline). Rounds interleave the three modes on the
 * same device and the medians are compared, so the ratios hold on a noisy shared machine. */
#include <ktiming.h>
#include <ktiming/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 151
#define MAX_N 20000

static const kt_cl_api_t *cl;

static const char *kSource = "__kernel void small(__global float *a) { a[get_global_id(0)] += 1.0f; }\n";

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Dispatches per second for n enqueues, counted until everything finished (and, when tracked, was
 * recorded). */
static double run(cl_command_queue q, kt_cl_ctx_t *kc, cl_kernel k, int n)
{
    size_t g = 64;
    uint64_t t0 = kt_now_ns();
    for (int i = 0; i < n; i++) {
        cl_int rc = kc ? kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL)
                       : cl->clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
        if (rc != CL_SUCCESS) {
            fprintf(stderr, "enqueue failed: %d\n", rc);
            exit(1);
        }
    }
    cl->clFinish(q);
    if (kc && kt_cl_flush(kc, 0) != 0) {
        fprintf(stderr, "flush timed out\n");
        exit(1);
    }
    uint64_t dt = kt_now_ns() - t0;
    return (double)n / ((double)dt / 1e9);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    if (n < 100 || n > MAX_N)
        n = 2000;
    if (kt_cl_load(&cl) != 0) {
        printf("opencl_async: no OpenCL loader\n");
        return 77;
    }
    cl_platform_id platform;
    cl_device_id device;
    cl_uint np = 0, nd = 0;
    if (cl->clGetPlatformIDs(1, &platform, &np) != CL_SUCCESS || !np ||
        cl->clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, &nd) != CL_SUCCESS || !nd) {
        printf("opencl_async: no OpenCL device\n");
        return 77;
    }
    cl_int err = 0;
    cl_context ctx = cl->clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_program prog = cl->clCreateProgramWithSource(ctx, 1, &kSource, NULL, &err);
    if (!prog || cl->clBuildProgram(prog, 1, &device, "", NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "build failed\n");
        return 1;
    }
    cl_kernel k = cl->clCreateKernel(prog, "small", &err);
    cl_mem buf = cl->clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
    cl->clSetKernelArg(k, 0, sizeof buf, &buf);
    cl_queue_properties qp[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
    cl_command_queue q[3];
    for (int i = 0; i < 3; i++) /* the same kind of queue for all three: profiling costs the same */
        q[i] = cl->clCreateCommandQueueWithProperties(ctx, device, qp, &err);
    kt_cl_ctx_t *async_ctx = NULL, *sync_ctx = NULL;
    kt_cl_attach_desc_t da = {.mode = KT_CL_MODE_ASYNC}, ds = {.mode = KT_CL_MODE_SYNC};
    if (kt_cl_attach(q[1], &da, &async_ctx) != 0 || kt_cl_attach(q[2], &ds, &sync_ctx) != 0) {
        fprintf(stderr, "attach failed\n");
        return 1;
    }
    /* Warm-up: compilation of the kernel on first launch, thread pools, allocator. */
    run(q[0], NULL, k, 200);
    run(q[1], async_ctx, k, 200);
    run(q[2], sync_ctx, k, 50);

    /* Short rounds, many of them, the mode order alternating: each ratio compares neighbours in time, and
     * the median of the per-round ratios shrugs off the bursts of other processes on a shared machine. */
    static double untimed[ROUNDS], ra[ROUNDS], rs[ROUNDS];
    int nsync = n / 8 > 50 ? n / 8 : 50; /* the blocking mode is slow: fewer dispatches, same rate units */
    for (int r = 0; r < ROUNDS; r++) {
        double u, a, b;
        if (r & 1) {
            a = run(q[1], async_ctx, k, n);
            u = run(q[0], NULL, k, n);
            b = run(q[2], sync_ctx, k, nsync);
        } else {
            b = run(q[2], sync_ctx, k, nsync);
            u = run(q[0], NULL, k, n);
            a = run(q[1], async_ctx, k, n);
        }
        untimed[r] = u;
        ra[r] = a / u;
        rs[r] = b / u;
    }
    qsort(untimed, ROUNDS, sizeof(double), cmp_double);
    qsort(ra, ROUNDS, sizeof(double), cmp_double);
    qsort(rs, ROUNDS, sizeof(double), cmp_double);
    double mu = untimed[ROUNDS / 2], xa = ra[ROUNDS / 2], xs = rs[ROUNDS / 2];
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = kt_snapshot_find(s, "small", KT_BACKEND_OPENCL, NULL);
    uint64_t expect = 200 + 50 + (uint64_t)ROUNDS * (uint64_t)(n + nsync);
    printf("dispatches per round: %d (blocking mode: %d), rounds: %d\n", n, nsync, ROUNDS);
    printf("median untimed throughput %.0f dispatches/s; per-round ratios async: p25 %.3f median %.3f p75 %.3f, "
           "blocking: median %.3f\n", mu, ra[ROUNDS / 4], xa, ra[3 * ROUNDS / 4], xs);
    printf("recorded %llu of %llu tracked dispatches (errors %llu, dropped %llu)\n",
           (unsigned long long)(e ? e->dispatch_count : 0), (unsigned long long)expect,
           (unsigned long long)(e ? e->errors : 0), (unsigned long long)(e ? e->dropped : 0));
    int ok = e && e->dispatch_count == expect;
    kt_snapshot_free(s);
    kt_cl_detach(async_ctx);
    kt_cl_detach(sync_ctx);
    for (int i = 0; i < 3; i++)
        cl->clReleaseCommandQueue(q[i]);
    cl->clReleaseMemObject(buf);
    cl->clReleaseKernel(k);
    cl->clReleaseProgram(prog);
    cl->clReleaseContext(ctx);
    printf("opencl_async: async_vs_untimed=%.3f sync_vs_untimed=%.3f\n", xa, xs);
    return ok ? 0 : 1;
}
