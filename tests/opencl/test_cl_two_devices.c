/* test_cl_two_devices.c — two identical devices (PoCL with POCL_DEVICES="pthread pthread") are two devices:
 * each has its own entries (3 and 5 dispatches, not one entry of 8) and its own published clock facts. */
#include <ktiming.h>
#include <ktiming/cl.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#define KT_TEST_SKIP 77

static const kt_cl_api_t *cl;
static cl_device_id g_devs[2];
static cl_context g_ctx;
static cl_program g_prog;

static void test_two_entries(void **state)
{
    (void)state;
    cl_int err = 0;
    cl_kernel k = cl->clCreateKernel(g_prog, "twin", &err);
    assert_int_equal(err, CL_SUCCESS);
    const int counts[2] = {3, 5};
    size_t g = 1;
    for (int d = 0; d < 2; d++) {
        cl_command_queue q = cl->clCreateCommandQueue(g_ctx, g_devs[d], CL_QUEUE_PROFILING_ENABLE, &err);
        assert_non_null(q);
        kt_cl_ctx_t *kc;
        assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
        for (int i = 0; i < counts[d]; i++)
            assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
        assert_int_equal(kt_cl_detach(kc), 0);
        cl->clReleaseCommandQueue(q);
    }
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *found[2] = {NULL, NULL};
    size_t n = 0;
    for (size_t i = 0; i < s->count; i++)
        if (s->entries[i].backend == KT_BACKEND_OPENCL && !strcmp(s->entries[i].name, "twin") && n < 2)
            found[n++] = &s->entries[i];
    assert_int_equal(n, 2);
    assert_string_not_equal(found[0]->device, found[1]->device);
    uint64_t a = found[0]->dispatch_count, b = found[1]->dispatch_count;
    assert_true((a == 3 && b == 5) || (a == 5 && b == 3));
    size_t published = 0;
    for (size_t i = 0; i < s->device_count; i++)
        published += s->devices[i].backend == KT_BACKEND_OPENCL &&
                     (!strcmp(s->devices[i].name, found[0]->device) || !strcmp(s->devices[i].name, found[1]->device));
    assert_int_equal(published, 2);
    printf("devices: \"%s\" (%llu), \"%s\" (%llu)\n", found[0]->device, (unsigned long long)a, found[1]->device,
           (unsigned long long)b);
    kt_snapshot_free(s);
    cl->clReleaseKernel(k);
}

int main(void)
{
    if (kt_cl_load(&cl) != 0)
        return KT_TEST_SKIP;
    cl_platform_id p;
    cl_uint n = 0;
    if (cl->clGetPlatformIDs(1, &p, NULL) != CL_SUCCESS ||
        cl->clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 2, g_devs, &n) != CL_SUCCESS || n < 2) {
        fprintf(stderr, "fewer than two OpenCL devices: skipped\n");
        return KT_TEST_SKIP;
    }
    cl_int err = 0;
    g_ctx = cl->clCreateContext(NULL, 2, g_devs, NULL, NULL, &err);
    const char *src = "__kernel void twin(void) {}";
    g_prog = cl->clCreateProgramWithSource(g_ctx, 1, &src, NULL, &err);
    if (!g_prog || cl->clBuildProgram(g_prog, 2, g_devs, "", NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "cannot build the kernel: skipped\n");
        return KT_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_entries)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cl->clReleaseProgram(g_prog);
    cl->clReleaseContext(g_ctx);
    return rc;
}
