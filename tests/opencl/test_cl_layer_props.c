/* test_cl_layer_props.c — a loader double that behaves like current Khronos ICD loaders: it asks the layer only
 * for clInitLayerWithProperties (never clInitLayer), hands it a target dispatch (here the test double of the
 * driver, fake_opencl.c), calls through the returned dispatch, and calls clDeinitLayer before "unloading the
 * driver". Kernels enqueued through the layer are timed; an unknown layer property is refused; after
 * clDeinitLayer the snapshot still holds them and nothing is in flight; a queue the program still holds after
 * clDeinitLayer is timed again (it was a use after free). */
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
#include <string.h>

/* clInitLayerWithProperties as current Khronos loaders declare it (cl_layer_properties: cl_properties). */
typedef cl_int(CL_API_CALL *init_props_fn)(cl_uint, const cl_icd_dispatch *, cl_uint *, const cl_icd_dispatch **,
                                           const cl_properties *);
typedef cl_int(CL_API_CALL *deinit_fn)(void);


static cl_icd_dispatch g_target;
static const cl_icd_dispatch *g_layer;
static void *g_intercept;

/* Through the layer: the double's device, a context, a queue on it (returned) and kernel `name` (*k). */
static cl_command_queue open_queue(const char *name, cl_context *ctx, cl_kernel *k)
{
    cl_platform_id p;
    cl_device_id d;
    cl_int err = 0;
    assert_int_equal(g_layer->clGetPlatformIDs(1, &p, NULL), CL_SUCCESS);
    assert_int_equal(g_layer->clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL), CL_SUCCESS);
    *ctx = g_layer->clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    cl_command_queue q = g_layer->clCreateCommandQueue(*ctx, d, 0, &err);
    assert_non_null(q);
    *k = g_layer->clCreateKernel(NULL, name, &err);
    cl_uint us = 0;
    g_layer->clSetKernelArg(*k, 0, sizeof us, &us);
    return q;
}

/* Kernel `name` on the double's device was timed n times and nothing of it dropped. */
static void assert_timed(const char *name, uint64_t n)
{
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = kt_snapshot_find(s, name, KT_BACKEND_OPENCL, "ktiming fake device");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, n);
    assert_int_equal(e->dropped, 0);
    kt_snapshot_free(s);
}

static void test_layer_with_properties(void **state)
{
    (void)state;
    init_props_fn init = (init_props_fn)dlsym(g_intercept, "clInitLayerWithProperties");
    deinit_fn deinit = (deinit_fn)dlsym(g_intercept, "clDeinitLayer");
    assert_non_null(init);
    assert_non_null(deinit);
    const cl_uint entries = (cl_uint)(sizeof g_target / sizeof(void *));
    cl_uint got = 0;
    const cl_properties unknown[] = {0x7777, 1, 0};
    assert_int_equal(init(entries, &g_target, &got, &g_layer, unknown), CL_INVALID_PROPERTY);
    const cl_properties none[] = {0};
    assert_int_equal(init(entries, &g_target, &got, &g_layer, none), CL_SUCCESS);
    assert_non_null(g_layer);
    assert_true(got > 0 && got <= entries);

    cl_context ctx;
    cl_kernel k;
    cl_command_queue q = open_queue("layered", &ctx, &k);
    size_t g = 1;
    for (int i = 0; i < 3; i++)
        assert_int_equal(g_layer->clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(g_layer->clFinish(q), CL_SUCCESS);
    assert_int_equal(g_layer->clReleaseCommandQueue(q), CL_SUCCESS);
    assert_int_equal(deinit(), CL_SUCCESS); /* the loader unloads drivers after this */
    g_layer->clReleaseKernel(k);
    g_layer->clReleaseContext(ctx);

    assert_timed("layered", 3);
}

/* A program that keeps enqueueing on a queue it still holds after clDeinitLayer (kt_cl_shutdown retires and frees
 * every ktiming context): the thread's one-entry cache of its last queue must not hand back the freed context; the
 * queue is attached afresh and the kernel timed (before: a use after free, a crash of the driver double's run). */
static void test_enqueue_after_deinit(void **state)
{
    (void)state;
    init_props_fn init = (init_props_fn)dlsym(g_intercept, "clInitLayerWithProperties");
    deinit_fn deinit = (deinit_fn)dlsym(g_intercept, "clDeinitLayer");
    const cl_uint entries = (cl_uint)(sizeof g_target / sizeof(void *));
    cl_uint got = 0;
    const cl_properties none[] = {0};
    assert_int_equal(init(entries, &g_target, &got, &g_layer, none), CL_SUCCESS);
    cl_context ctx;
    cl_kernel k;
    cl_command_queue q = open_queue("after_deinit", &ctx, &k);
    size_t g = 1;
    assert_int_equal(g_layer->clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(g_layer->clFinish(q), CL_SUCCESS);
    assert_int_equal(deinit(), CL_SUCCESS); /* the queue is still the program's: its context is freed here */
    /* same thread, same queue: the enqueue the stale cache sent to the freed context */
    assert_int_equal(g_layer->clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(g_layer->clFinish(q), CL_SUCCESS);
    assert_int_equal(g_layer->clReleaseCommandQueue(q), CL_SUCCESS);
    kt_flush();

    assert_timed("after_deinit", 2);
    g_layer->clReleaseKernel(k);
    g_layer->clReleaseContext(ctx);
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
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_layer_with_properties),
                                       cmocka_unit_test(test_enqueue_after_deinit)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
