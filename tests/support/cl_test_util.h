/* cl_test_util.h — shared set-up for the OpenCL tests: first device, context, test kernels, all through the
 * entry points libktiming loaded (the tests never link OpenCL either). */
#ifndef KT_CL_TEST_UTIL_H
#define KT_CL_TEST_UTIL_H

#include <ktiming.h>
#include <ktiming/cl.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KT_TEST_SKIP 77

/* What every test needs. */
typedef struct clt_env_t {
    const kt_cl_api_t *api; /* loaded entry points */
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_program program;     /* built from kClTestSource */
    char device_name[128];
} clt_env_t;

static clt_env_t clt;

/* busy: a dependent floating-point chain, n iterations per work-item (duration scales with n).
 * tiny: one add per work-item. */
static const char *kClTestSource =
    "__kernel void busy(__global float *a, int n) {\n"
    "  size_t i = get_global_id(0); float x = a[i];\n"
    "  for (int k = 0; k < n; k++) x = x * 0.99999f + 0.00001f;\n"
    "  a[i] = x;\n"
    "}\n"
    "__kernel void tiny(__global float *a) { a[get_global_id(0)] += 1.0f; }\n"
    "__kernel void other(__global float *a) { a[get_global_id(0)] *= 0.5f; }\n";

/* Load, pick the first device, build the program. Returns 0, or KT_TEST_SKIP when OpenCL has no device. */
static inline int clt_init(void)
{
    if (kt_cl_load(&clt.api) != 0)
        return KT_TEST_SKIP;
    cl_uint np = 0;
    if (clt.api->clGetPlatformIDs(1, &clt.platform, &np) != CL_SUCCESS || np == 0)
        return KT_TEST_SKIP;
    cl_uint nd = 0;
    if (clt.api->clGetDeviceIDs(clt.platform, CL_DEVICE_TYPE_ALL, 1, &clt.device, &nd) != CL_SUCCESS || nd == 0)
        return KT_TEST_SKIP;
    clt.api->clGetDeviceInfo(clt.device, CL_DEVICE_NAME, sizeof clt.device_name - 1, clt.device_name, NULL);
    cl_int err = 0;
    clt.context = clt.api->clCreateContext(NULL, 1, &clt.device, NULL, NULL, &err);
    if (!clt.context)
        return KT_TEST_SKIP;
    clt.program = clt.api->clCreateProgramWithSource(clt.context, 1, &kClTestSource, NULL, &err);
    if (!clt.program || clt.api->clBuildProgram(clt.program, 1, &clt.device, "", NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "cannot build the test program\n");
        exit(1);
    }
    return 0;
}

static inline cl_command_queue clt_queue(cl_command_queue_properties props)
{
    cl_int err = 0;
    cl_queue_properties qp[] = {CL_QUEUE_PROPERTIES, props, 0};
    cl_command_queue q = clt.api->clCreateCommandQueueWithProperties(clt.context, clt.device, qp, &err);
    assert_non_null(q);
    return q;
}

static inline cl_kernel clt_kernel(const char *name, cl_mem buf)
{
    cl_int err = 0;
    cl_kernel k = clt.api->clCreateKernel(clt.program, name, &err);
    assert_non_null(k);
    assert_int_equal(clt.api->clSetKernelArg(k, 0, sizeof buf, &buf), CL_SUCCESS);
    return k;
}

static inline cl_mem clt_buffer(size_t floats)
{
    cl_int err = 0;
    float *zeros = calloc(floats, sizeof *zeros);
    cl_mem m = clt.api->clCreateBuffer(clt.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, floats * sizeof(float),
                                       zeros, &err);
    free(zeros);
    assert_non_null(m);
    return m;
}

static inline cl_uint clt_event_refs(cl_event ev)
{
    cl_uint refs = 0;
    clt.api->clGetEventInfo(ev, CL_EVENT_REFERENCE_COUNT, sizeof refs, &refs, NULL);
    return refs;
}

/* PoCL keeps a reference on a queue's latest command event until the next kernel: run one untracked kernel so
 * the reference counts of earlier events show only the test's and ktiming's references. */
static inline void clt_settle(cl_command_queue q, cl_kernel k)
{
    size_t g = 1;
    assert_int_equal(clt.api->clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    clt.api->clFinish(q);
}

static inline cl_int clt_event_status(cl_event ev)
{
    cl_int st = 0;
    clt.api->clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
    return st;
}

static inline void clt_sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
    nanosleep(&ts, NULL);
}

/* Waits in 1 ms naps, at most max_ms, until nothing tracked on kc is in flight, with no ktiming flush (only the
 * completion paths and the collector record meanwhile); returns the last statistics for the caller to check. */
static inline kt_cl_stats_t clt_wait_recorded(kt_cl_ctx_t *kc, int max_ms)
{
    kt_cl_stats_t info;
    memset(&info, 0, sizeof info);
    for (int i = 0; i < max_ms; i++) {
        assert_int_equal(kt_cl_stats(kc, &info), 0);
        if (info.in_flight == 0)
            break;
        clt_sleep_ms(1);
    }
    return info;
}

/* The snapshot entry of an OpenCL kernel on the test device (NULL if absent). */
static inline const kt_kernel_timing_t *clt_find(const kt_snapshot_t *s, const char *name)
{
    return kt_snapshot_find(s, name, KT_BACKEND_OPENCL, clt.device_name);
}

/* Iterations of `busy` (64 work-items) that take roughly target_ms on this device, measured once. */
static inline int clt_busy_iterations(cl_command_queue q, cl_kernel busy, double target_ms)
{
    int n = 20000;
    for (int round = 0; round < 6; round++) {
        clt.api->clSetKernelArg(busy, 1, sizeof n, &n);
        size_t g = 64;
        uint64_t t0 = kt_now_ns();
        clt.api->clEnqueueNDRangeKernel(q, busy, 1, NULL, &g, NULL, 0, NULL, NULL);
        clt.api->clFinish(q);
        double ms = (double)(kt_now_ns() - t0) / 1e6;
        if (round > 0 && ms > target_ms * 0.5 && ms < target_ms * 2)
            break;
        if (round > 0) {
            double scale = target_ms / (ms > 0.01 ? ms : 0.01);
            if (scale > 50)
                scale = 50;
            n = (int)(n * scale);
            if (n < 1)
                n = 1;
        }
    }
    clt.api->clSetKernelArg(busy, 1, sizeof n, &n);
    return n;
}

#endif
