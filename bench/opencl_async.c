/* opencl_async.c — enqueue throughput of many small kernels: untimed, with ktiming's asynchronous tracking,
 * and with the blocking per-dispatch wait (seed 004's baseline). Rounds interleave the three modes on the
 * same device, alternating their order, and the per-round ratios' medians are reported, so the result holds
 * on a noisy shared machine. Two kernel sizes: "small" (saxpy over 16 Ki floats, the verdict line) and
 * "minimal" (64 work-items adding 1, where the driver's own per-command cost dominates), both reported with
 * the absolute cost per dispatch. Throughput counts until every command finished and was recorded. */
#include <ktiming.h>
#include <ktiming/cl.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 201
#define SMALL_N 16384 /* floats per saxpy dispatch */

static const kt_cl_api_t *cl;

static const char *kSource =
    "__kernel void saxpy_small(__global const float *x, __global float *y, float a) {\n"
    "  size_t i = get_global_id(0); y[i] = a * x[i] + y[i];\n"
    "}\n"
    "__kernel void add_minimal(__global float *a) { a[get_global_id(0)] += 1.0f; }\n";

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t g_raw_done; /* raw callbacks that ran */
static uint64_t g_raw_want; /* raw callbacks expected before the current run */

/* The least any callback-based tracker does, without ktiming: read the four stamps, release the event. */
static void CL_CALLBACK raw_done(cl_event ev, cl_int status, void *user)
{
    (void)status;
    cl_ulong t[4];
    for (int i = 0; i < 4; i++)
        cl->clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_QUEUED + (cl_profiling_info)i, sizeof t[i], &t[i], NULL);
    __atomic_add_fetch((uint64_t *)user, t[3] - t[2], __ATOMIC_RELAXED);
    cl->clReleaseEvent(ev);
    __atomic_add_fetch(&g_raw_done, 1, __ATOMIC_RELEASE);
}

static uint64_t g_raw_sum; /* device time the raw callbacks saw (keeps their reads alive) */

/* Dispatches per second for n enqueues of k (global size g), counted until all finished and were recorded.
 * kc NULL and raw 0: untimed; raw 1: the driver's event + callback alone. */
static uint64_t g_cpu_ns; /* process CPU time of the latest run_mode (every thread: driver, collector) */
static uint64_t g_enq_ns; /* wall time of the latest run_mode's enqueue loop alone */

static uint64_t cpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double run_mode(cl_command_queue q, kt_cl_ctx_t *kc, int raw, cl_kernel k, size_t g, int n)
{
    uint64_t c0 = cpu_now_ns();
    uint64_t t0 = kt_now_ns();
    for (int i = 0; i < n; i++) {
        cl_event ev = NULL;
        cl_int rc = kc ? kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL)
                       : cl->clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, raw ? &ev : NULL);
        if (rc == CL_SUCCESS && raw)
            rc = cl->clSetEventCallback(ev, CL_COMPLETE, raw_done, &g_raw_sum);
        if (rc != CL_SUCCESS) {
            fprintf(stderr, "enqueue failed: %d\n", rc);
            exit(1);
        }
    }
    g_enq_ns = kt_now_ns() - t0;
    cl->clFinish(q);
    if (kc && kt_cl_flush(kc, 0) != 0) {
        fprintf(stderr, "flush timed out\n");
        exit(1);
    }
    while (raw && __atomic_load_n(&g_raw_done, __ATOMIC_ACQUIRE) < g_raw_want + (uint64_t)n)
        sched_yield(); /* like ktiming's flush: the last callbacks may still be running */
    if (raw)
        g_raw_want += (uint64_t)n;
    uint64_t t1 = kt_now_ns();
    g_cpu_ns = cpu_now_ns() - c0;
    return (double)n / ((double)(t1 - t0) / 1e9);
}

static double run(cl_command_queue q, kt_cl_ctx_t *kc, cl_kernel k, size_t g, int n)
{
    return run_mode(q, kc, 0, k, g, n);
}

/* Result of one kernel size: per-variant time per dispatch, and async / untimed throughput ratios. */
typedef struct result_t {
    double cpu[4];    /* per variant: median process CPU us per dispatch (all threads) */
    double enq[4];    /* per variant: median us per dispatch of the enqueue loop alone */
    double us[4][3];  /* per variant (untimed, async, blocking, raw): p25, median, p75 of us/dispatch */
    double async_x;   /* median of per-round ratios async / untimed (the verdict) */
    double async_p25; /* spread of those ratios */
    double async_p75;
    double async_med; /* ratio of the variants' median us/dispatch */
    double sync_x;    /* median of per-round ratios blocking / untimed */
    double raw_x;     /* median of per-round ratios driver event + callback alone / untimed */
} result_t;

enum { V_UNTIMED, V_ASYNC, V_SYNC, V_RAW, V_COUNT };
static const char *const kVariant[V_COUNT] = {"untimed", "async", "blocking", "raw event+callback"};

static double q_of(double *v, int n, int num, int den)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[(n - 1) * num / den];
}

/* One dispatch run of a variant; dispatches per second. */
static double run_variant(int v, cl_command_queue q[3], kt_cl_ctx_t *a, kt_cl_ctx_t *s, cl_kernel k, size_t g,
                          int n, int nsync)
{
    switch (v) {
    case V_UNTIMED: return run(q[0], NULL, k, g, n);
    case V_ASYNC: return run(q[1], a, k, g, n);
    case V_SYNC: return run(q[2], s, k, g, nsync);
    default: return run_mode(q[0], NULL, 1, k, g, n);
    }
}

static result_t measure(cl_command_queue q[3], kt_cl_ctx_t *a, kt_cl_ctx_t *s, cl_kernel k, size_t g, int n)
{
    static double t[V_COUNT][ROUNDS], cpu[V_COUNT][ROUNDS], enq[V_COUNT][ROUNDS], ra[ROUNDS], rs[ROUNDS], rr[ROUNDS];
    int nsync = n / 8 > 20 ? n / 8 : 20; /* the blocking mode is slow: fewer dispatches, same rate units */
    for (int v = 0; v < V_COUNT; v++)     /* warm-up: compilation at first launch, pools, allocator */
        run_variant(v, q, a, s, k, g, n / 4, nsync / 4 + 1);
    for (int r = 0; r < ROUNDS; r++) {
        double rate[V_COUNT] = {0};
        for (int i = 0; i < V_COUNT; i++) { /* the order rotates, so no variant always follows another */
            int v = (r + i) % V_COUNT;
            rate[v] = run_variant(v, q, a, s, k, g, n, nsync);
            cpu[v][r] = (double)g_cpu_ns / 1e3 / (v == V_SYNC ? nsync : n);
            enq[v][r] = (double)g_enq_ns / 1e3 / (v == V_SYNC ? nsync : n);
        }
        for (int v = 0; v < V_COUNT; v++)
            t[v][r] = 1e6 / rate[v];
        ra[r] = rate[V_ASYNC] / rate[V_UNTIMED];
        rs[r] = rate[V_SYNC] / rate[V_UNTIMED];
        rr[r] = rate[V_RAW] / rate[V_UNTIMED];
    }
    result_t res;
    for (int v = 0; v < V_COUNT; v++) {
        res.us[v][0] = q_of(t[v], ROUNDS, 1, 4);
        res.us[v][1] = q_of(t[v], ROUNDS, 1, 2);
        res.us[v][2] = q_of(t[v], ROUNDS, 3, 4);
        res.cpu[v] = q_of(cpu[v], ROUNDS, 1, 2);
        res.enq[v] = q_of(enq[v], ROUNDS, 1, 2);
    }
    res.async_x = q_of(ra, ROUNDS, 1, 2);
    res.async_p25 = q_of(ra, ROUNDS, 1, 4);
    res.async_p75 = q_of(ra, ROUNDS, 3, 4);
    res.async_med = res.us[V_UNTIMED][1] / res.us[V_ASYNC][1];
    res.sync_x = q_of(rs, ROUNDS, 1, 2);
    res.raw_x = q_of(rr, ROUNDS, 1, 2);
    return res;
}

static void report(const char *what, const result_t *r)
{
    printf("%s:\n", what);
    for (int v = 0; v < V_COUNT; v++)
        printf("  %-18s %7.2f us/dispatch (p25 %.2f, p75 %.2f); enqueue loop %.2f us, process CPU %.2f us\n",
               kVariant[v], r->us[v][1], r->us[v][0], r->us[v][2], r->enq[v], r->cpu[v]);
    printf("  async/untimed: median of per-round ratios x%.3f (p25 %.3f, p75 %.3f), ratio of medians x%.3f "
           "(+%.0f ns/dispatch); blocking x%.3f; raw event+callback x%.3f\n",
           r->async_x, r->async_p25, r->async_p75, r->async_med, (r->us[V_ASYNC][1] - r->us[V_UNTIMED][1]) * 1e3,
           r->sync_x, r->raw_x);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    if (n < 100 || n > 100000)
        n = 1000;
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
    char dev_name[128] = {0};
    cl->clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof dev_name - 1, dev_name, NULL);
    cl_int err = 0;
    cl_context ctx = cl->clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_program prog = cl->clCreateProgramWithSource(ctx, 1, &kSource, NULL, &err);
    if (!prog || cl->clBuildProgram(prog, 1, &device, "", NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "build failed\n");
        return 1;
    }
    cl_kernel small = cl->clCreateKernel(prog, "saxpy_small", &err);
    cl_kernel minimal = cl->clCreateKernel(prog, "add_minimal", &err);
    cl_mem x = cl->clCreateBuffer(ctx, CL_MEM_READ_WRITE, SMALL_N * sizeof(float), NULL, &err);
    cl_mem y = cl->clCreateBuffer(ctx, CL_MEM_READ_WRITE, SMALL_N * sizeof(float), NULL, &err);
    float a = 0.5f;
    cl->clSetKernelArg(small, 0, sizeof x, &x);
    cl->clSetKernelArg(small, 1, sizeof y, &y);
    cl->clSetKernelArg(small, 2, sizeof a, &a);
    cl->clSetKernelArg(minimal, 0, sizeof y, &y);
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
    printf("device %s, %d rounds of %d dispatches per variant (blocking: %d), variants interleaved in rotating order\n",
           dev_name, ROUNDS, n, n / 8 > 20 ? n / 8 : 20);
    result_t rm = measure(q, async_ctx, sync_ctx, minimal, 64, n);
    result_t rs = measure(q, async_ctx, sync_ctx, small, SMALL_N, n);
    report("minimal kernel (64 work-items)", &rm);
    report("small kernel (saxpy, 16 Ki floats)", &rs);

    kt_cl_stats_t ia, is;
    kt_cl_stats(async_ctx, &ia);
    kt_cl_stats(sync_ctx, &is);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e1 = kt_snapshot_find(s, "saxpy_small", KT_BACKEND_OPENCL, NULL);
    const kt_kernel_timing_t *e2 = kt_snapshot_find(s, "add_minimal", KT_BACKEND_OPENCL, NULL);
    uint64_t recorded = (e1 ? e1->dispatch_count : 0) + (e2 ? e2->dispatch_count : 0);
    uint64_t lost = (e1 ? e1->errors + e1->dropped : 0) + (e2 ? e2->errors + e2->dropped : 0);
    printf("recorded %llu of %llu tracked dispatches (errors + dropped: %llu); device time per small dispatch "
           "%.2f us\n",
           (unsigned long long)recorded, (unsigned long long)(ia.tracked + is.tracked), (unsigned long long)lost,
           e1 ? e1->mean_ns / 1e3 : 0.0);
    int ok = recorded == ia.tracked + is.tracked && lost == 0;
    kt_snapshot_free(s);
    kt_cl_detach(async_ctx);
    kt_cl_detach(sync_ctx);
    for (int i = 0; i < 3; i++)
        cl->clReleaseCommandQueue(q[i]);
    cl->clReleaseMemObject(x);
    cl->clReleaseMemObject(y);
    cl->clReleaseKernel(small);
    cl->clReleaseKernel(minimal);
    cl->clReleaseProgram(prog);
    cl->clReleaseContext(ctx);
    printf("opencl_async: async_vs_untimed=%.3f sync_vs_untimed=%.3f\n", rs.async_x, rs.sync_x);
    return ok ? 0 : 1;
}
