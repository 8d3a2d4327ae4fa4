/* test_cl_collector.c — completions queued for the collector thread are never lost: a flush right after clFinish
 * (while the collector naps, so records sit in its queue) records every command exactly once, releases every
 * event, and an idle collector that went to sleep is woken by the next completion. Also run with
 * KTIMING_OPENCL_COLLECTOR=0 (callbacks finish records themselves): same guarantees. */
#include "cl_test_util.h"

enum { N = 3000, ROUNDS = 4 };

/* Burst, clFinish, flush at once: exact counts every time. */
static void test_flush_drains_queue(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = clt_queue(CL_QUEUE_PROFILING_ENABLE);
    cl_mem buf = clt_buffer(64);
    cl_kernel k = clt_kernel("tiny", buf);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    size_t g = 64;
    cl_event mine = NULL; /* one event the test keeps: ktiming must give back exactly its own reference */
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++)
            assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL,
                                                   r == 0 && i == 0 ? &mine : NULL),
                             CL_SUCCESS);
        clt.api->clFinish(q);
        assert_int_equal(kt_cl_flush(kc, 0), 0);
        kt_cl_stats_t info;
        assert_int_equal(kt_cl_stats(kc, &info), 0);
        assert_int_equal(info.in_flight, 0);
        assert_int_equal(info.tracked, (uint64_t)(r + 1) * N);
        kt_snapshot_t *s = kt_snapshot();
        const kt_kernel_timing_t *e = clt_find(s, "tiny");
        assert_non_null(e);
        assert_int_equal(e->dispatch_count, (uint64_t)(r + 1) * N);
        assert_int_equal(e->errors + e->dropped, 0);
        kt_snapshot_free(s);
    }
    clt_settle(q, k); /* PoCL holds the latest command's event until the next kernel */
    assert_int_equal(clt_event_refs(mine), 1);
    clt.api->clReleaseEvent(mine);
    assert_int_equal(kt_cl_detach(kc), 0);
    clt.api->clReleaseKernel(k);
    clt.api->clReleaseMemObject(buf);
    clt.api->clReleaseCommandQueue(q);
}

/* After the collector has gone to sleep (no completions for a while), new completions are recorded without any
 * flush: the callback wakes it. */
static void test_sleeping_collector_wakes(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = clt_queue(CL_QUEUE_PROFILING_ENABLE);
    cl_mem buf = clt_buffer(64);
    cl_kernel k = clt_kernel("tiny", buf);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    size_t g = 64;
    assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    clt.api->clFinish(q);
    clt_sleep_ms(400); /* idle longer than the collector's quiet spell (~100 ms) */
    for (int i = 0; i < 10; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    clt.api->clFlush(q);
    kt_cl_stats_t info = clt_wait_recorded(kc, 5000); /* no ktiming flush: only completion paths may record */
    assert_int_equal(info.in_flight, 0);
    assert_int_equal(kt_cl_detach(kc), 0);
    clt.api->clReleaseKernel(k);
    clt.api->clReleaseMemObject(buf);
    clt.api->clReleaseCommandQueue(q);
}

int main(void)
{
    if (clt_init() != 0)
        return KT_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flush_drains_queue),
        cmocka_unit_test(test_sleeping_collector_wakes),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clt.api->clReleaseProgram(clt.program);
    clt.api->clReleaseContext(clt.context);
    return rc;
}
