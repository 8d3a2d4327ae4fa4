/* fake_cl_util.h — shared set-up for the tests run against the driver double fake_opencl.c (loaded through
 * KTIMING_OPENCL_LIBRARY): its one device and a context on it, profiling queues, kernels whose first argument is
 * their run time, and the snapshot entry of a kernel on the double's device. */
#ifndef KT_FAKE_CL_UTIL_H
#define KT_FAKE_CL_UTIL_H

#include <ktiming.h>
#include <ktiming/cl.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

static const kt_cl_api_t *cl; /* the double's entry points, as libktiming loaded them */
static cl_device_id g_dev;    /* its one device */
static cl_context g_ctx;      /* a context on it */

/* Loads the double and makes the context; 0, or 1 with a message when it did not load. */
static inline int fake_open(void)
{
    if (kt_cl_load(&cl) != 0) {
        fprintf(stderr, "the fake OpenCL library did not load (KTIMING_OPENCL_LIBRARY=%s)\n",
                getenv("KTIMING_OPENCL_LIBRARY") ? getenv("KTIMING_OPENCL_LIBRARY") : "");
        return 1;
    }
    cl_platform_id p;
    cl->clGetPlatformIDs(1, &p, NULL);
    cl->clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &g_dev, NULL);
    cl_int err = 0;
    g_ctx = cl->clCreateContext(NULL, 1, &g_dev, NULL, NULL, &err);
    return 0;
}

static inline cl_command_queue fake_queue(void)
{
    cl_int err = 0;
    cl_command_queue q = cl->clCreateCommandQueue(g_ctx, g_dev, CL_QUEUE_PROFILING_ENABLE, &err);
    assert_non_null(q);
    return q;
}

/* A kernel of the double that runs us microseconds per dispatch. */
static inline cl_kernel fake_kernel(const char *name, cl_uint us)
{
    cl_int err = 0;
    cl_kernel k = cl->clCreateKernel(NULL, name, &err);
    cl->clSetKernelArg(k, 0, sizeof us, &us);
    return k;
}

static inline const kt_kernel_timing_t *fake_find(const kt_snapshot_t *s, const char *name)
{
    return kt_snapshot_find(s, name, KT_BACKEND_OPENCL, "ktiming fake device");
}

/* A snapshot now holds the kernel `name` with this many dispatches timed and this many dropped. */
static inline void fake_expect_counts(const char *name, uint64_t dispatches, uint64_t dropped)
{
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *e = fake_find(s, name);
    if (!e)
        fail_msg("kernel %s not in the snapshot", name);
    assert_int_equal(e->dispatch_count, dispatches);
    assert_int_equal(e->dropped, dropped);
    kt_snapshot_free(s);
}

#endif
