/* test_cl_exit.c — nothing finished is lost at shutdown: kt_shutdown() collects every tracked command still in
 * flight, and so does process exit when the program never flushes, finishes or detaches. The exit check is an
 * atexit handler registered before ktiming's own, so it runs after ktiming's exit flush. */
#include "support/cl_test_util.h"

#include <unistd.h>

enum { N = 60 };

static kt_cl_ctx_t *g_kc;

static void verify_at_exit(void)
{
    kt_cl_stats_t info;
    int ok = kt_cl_stats(g_kc, &info) == 0 && info.in_flight == 0 && info.tracked == N;
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = s ? clt_find(s, "busy") : NULL;
    ok = ok && e && e->dispatch_count == N && e->dropped == 0;
    fprintf(stderr, "at exit: %llu of %d dispatches recorded, %llu in flight\n",
            (unsigned long long)(e ? e->dispatch_count : 0), N, (unsigned long long)info.in_flight);
    kt_snapshot_free(s);
    fflush(stderr);
    if (!ok)
        _exit(1);
}

/* kt_shutdown with commands in flight: they are collected before recording stops. */
static void test_shutdown_collects(void **state)
{
    (void)state;
    cl_command_queue q = clt_queue(CL_QUEUE_PROFILING_ENABLE);
    cl_mem buf = clt_buffer(64);
    cl_kernel busy = clt_kernel("other", buf);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    size_t g = 64;
    for (int i = 0; i < N; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kc, busy, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    kt_shutdown();
    kt_cl_stats_t info;
    kt_cl_stats(kc, &info);
    assert_int_equal(info.in_flight, 0);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = clt_find(s, "other");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, N);
    kt_snapshot_free(s);
    assert_int_equal(kt_init(NULL), 0); /* recording again for the exit part */
    assert_int_equal(kt_cl_detach(kc), 0);
    clt.api->clReleaseKernel(busy);
    clt.api->clReleaseMemObject(buf);
    clt.api->clReleaseCommandQueue(q);
}

int main(void)
{
    atexit(verify_at_exit); /* before any ktiming call: runs after ktiming's exit handler */
    if (clt_init() != 0) {
        fprintf(stderr, "no OpenCL device: skipped\n");
        _exit(KT_TEST_SKIP);
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shutdown_collects)};
    if (cmocka_run_group_tests(tests, NULL, NULL) != 0)
        _exit(1);
    /* Exit with commands in flight: no clFinish, no flush, no detach. */
    cl_command_queue q = clt_queue(CL_QUEUE_PROFILING_ENABLE);
    cl_mem buf = clt_buffer(64);
    cl_kernel busy = clt_kernel("busy", buf);
    clt_busy_iterations(q, busy, 2.0);
    assert_int_equal(kt_cl_attach(q, NULL, &g_kc), 0);
    size_t g = 64;
    for (int i = 0; i < N; i++)
        if (kt_cl_enqueue_ndrange(g_kc, busy, 1, NULL, &g, NULL, 0, NULL, NULL) != CL_SUCCESS)
            _exit(1);
    kt_cl_stats_t info;
    kt_cl_stats(g_kc, &info);
    fprintf(stderr, "leaving main with %llu of %d commands in flight\n", (unsigned long long)info.in_flight, N);
    return 0;
}
