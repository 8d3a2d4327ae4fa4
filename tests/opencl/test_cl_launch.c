/* test_cl_launch.c — the OpenCL backend's launch configurations on a real device (issue 40.2): kt_cl_enqueue_ndrange
 * records work_dim, global and local sizes (NULL local: all 0; the offset left out) in the asynchronous and the
 * blocking (KT_CL_MODE_SYNC) completion paths; a kernel tracked by hand with kt_cl_track_kernel carries none. */
#include "support/cl_test_util.h"

#include <stdint.h>

static const kt_config_timing_t *row(const kt_kernel_timing_t *e, uint64_t g0, uint64_t g1, uint64_t l0)
{
    for (uint32_t i = 0; e && i < e->config_count; i++)
        if (e->configs[i].launch.size[0] == g0 && e->configs[i].launch.size[1] == g1 &&
            e->configs[i].launch.local[0] == l0)
            return &e->configs[i];
    return NULL;
}

static void run_mode(kt_cl_mode_t mode)
{
    kt_flush();
    kt_reset();
    cl_command_queue q = clt_queue(CL_QUEUE_PROFILING_ENABLE);
    cl_mem buf = clt_buffer(256);
    cl_kernel tiny = clt_kernel("tiny", buf);
    kt_cl_ctx_t *kc = NULL;
    assert_int_equal(kt_cl_attach(q, &(kt_cl_attach_desc_t){.mode = mode}, &kc), 0);
    size_t g[2] = {64, 4}, l[2] = {16, 2}, off[2] = {0, 0}, off2[2] = {64, 0};
    for (int i = 0; i < 3; i++) /* the same configuration at two offsets: one row */
        assert_int_equal(kt_cl_enqueue_ndrange(kc, tiny, 2, i ? off2 : off, g, l, 0, NULL, NULL), CL_SUCCESS);
    for (int i = 0; i < 2; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kc, tiny, 2, NULL, g, NULL, 0, NULL, NULL), CL_SUCCESS);
    size_t g1 = 256;
    cl_event ev = NULL;
    assert_int_equal(clt.api->clEnqueueNDRangeKernel(q, tiny, 1, NULL, &g1, NULL, 0, NULL, &ev), CL_SUCCESS);
    assert_int_equal(kt_cl_track_kernel(kc, ev, tiny, NULL, 0), 0); /* sizes not known here: none */
    assert_int_equal(clt.api->clFinish(q), CL_SUCCESS);
    assert_int_equal(kt_cl_flush(kc, 0), 0);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = clt_find(s, "tiny");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 6);
    assert_int_equal(e->config_count, 2);
    const kt_config_timing_t *a = row(e, 64, 4, 16), *b = row(e, 64, 4, 0);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->launch.kind, KT_LAUNCH_ITEMS);
    assert_int_equal(a->launch.dims, 2);
    assert_int_equal(a->launch.local[1], 2);
    assert_int_equal(a->dispatch_count, 3);
    assert_int_equal(b->dispatch_count, 2);
    assert_int_equal(b->launch.local[1], 0);
    assert_true(a->min_ns <= a->max_ns && a->total_ns >= a->max_ns);
    kt_snapshot_free(s);
    clt.api->clReleaseEvent(ev);
    assert_int_equal(kt_cl_detach(kc), 0);
    clt.api->clReleaseKernel(tiny);
    clt.api->clReleaseMemObject(buf);
    clt.api->clReleaseCommandQueue(q);
}

static void test_async(void **state)
{
    (void)state;
    run_mode(KT_CL_MODE_ASYNC);
}

static void test_sync(void **state)
{
    (void)state;
    run_mode(KT_CL_MODE_SYNC);
}

int main(void)
{
    if (clt_init() != 0) {
        fprintf(stderr, "no OpenCL device: skipped\n");
        return KT_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_sync),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
