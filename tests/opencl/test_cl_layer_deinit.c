/* test_cl_layer_deinit.c — a program that keeps enqueueing on a queue it still holds after the loader called
 * clDeinitLayer (kt_cl_shutdown retires and frees every ktiming context). The thread's one-entry cache of its last
 * queue must not hand back the freed context: the enqueue after the deinit attaches the queue afresh and is timed
 * (under ASan, the stale cache was a heap use after free; without it the kernel went to a retired context and was
 * lost). */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_0_APIS
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl_icd.h>
#include <ktiming.h>

#include "cl_layer_double.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <stdio.h>

typedef cl_int(CL_API_CALL *init_fn)(cl_uint, const cl_icd_dispatch *, cl_uint *, const cl_icd_dispatch **);
typedef cl_int(CL_API_CALL *deinit_fn)(void);

static cl_icd_dispatch g_target;
static void *g_intercept;

static void test_enqueue_after_deinit(void **state)
{
    (void)state;
    init_fn init = (init_fn)dlsym(g_intercept, "clInitLayer");
    deinit_fn deinit = (deinit_fn)dlsym(g_intercept, "clDeinitLayer");
    assert_non_null(init);
    assert_non_null(deinit);
    const cl_icd_dispatch *layer = NULL;
    cl_uint got = 0;
    assert_int_equal(init((cl_uint)(sizeof g_target / sizeof(void *)), &g_target, &got, &layer), CL_SUCCESS);
    assert_non_null(layer);

    cl_platform_id p;
    cl_device_id d;
    cl_int err = 0;
    assert_int_equal(layer->clGetPlatformIDs(1, &p, NULL), CL_SUCCESS);
    assert_int_equal(layer->clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL), CL_SUCCESS);
    cl_context ctx = layer->clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    cl_command_queue q = layer->clCreateCommandQueue(ctx, d, 0, &err);
    assert_non_null(q);
    cl_kernel k = layer->clCreateKernel(NULL, "after_deinit", &err);
    cl_uint us = 0;
    layer->clSetKernelArg(k, 0, sizeof us, &us);
    size_t g = 1;
    assert_int_equal(layer->clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(layer->clFinish(q), CL_SUCCESS);
    assert_int_equal(deinit(), CL_SUCCESS); /* the queue is still the program's: its context is freed here */

    /* Same thread, same queue: the enqueue the cache would have sent to the freed context. */
    assert_int_equal(layer->clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(layer->clFinish(q), CL_SUCCESS);
    assert_int_equal(layer->clReleaseCommandQueue(q), CL_SUCCESS);
    assert_int_equal(deinit(), CL_SUCCESS); /* no-op: the layer is no longer active */
    kt_flush();

    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = kt_snapshot_find(s, "after_deinit", KT_BACKEND_OPENCL, "ktiming fake device");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count + e->dropped, 2); /* nothing lost */
    assert_int_equal(e->dispatch_count, 2);
    kt_snapshot_free(s);
    layer->clReleaseKernel(k);
    layer->clReleaseContext(ctx);
}

int main(void)
{
    void *driver = dlopen(FAKE_OPENCL, RTLD_NOW | RTLD_LOCAL);
    g_intercept = dlopen(CL_INTERCEPT, RTLD_NOW | RTLD_LOCAL);
    if (!driver || !g_intercept) {
        fprintf(stderr, "cannot load the driver double or the layer: %s\n", dlerror());
        return 1;
    }
    cl_layer_double_fill(&g_target, driver);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_enqueue_after_deinit)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
