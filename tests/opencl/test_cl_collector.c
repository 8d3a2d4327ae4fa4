/* test_cl_collector.c — completions queued for the collector thread are never lost: a flush right after clFinish
 * (while the collector naps, so records sit in its queue) records every command exactly once, releases every
 * event, and an idle collector that went to sleep is woken by the next completion. Also run with
 * KTIMING_OPENCL_COLLECTOR=0 (callbacks finish records themselves): same guarantees.
 * kt_cl_collect, for a program's synchronisation points: right after clFinish, every finished command is recorded
 * by the time it returns (on the calling thread, with no flush); commands that have not run stay tracked (it never
 * waits for them); and once the program stops calling it, the collector, which looked less often meanwhile,
 * records the next commands on its own. */
#include "support/cl_test_util.h"

enum { N = 3000, ROUNDS = 4 };

/* A profiling queue with the `tiny` kernel on a 64-float buffer, attached, after a reset. */
typedef struct tiny_case_t {
    cl_command_queue q;
    cl_mem buf;
    cl_kernel k;
    kt_cl_ctx_t *kc;
} tiny_case_t;

static tiny_case_t tiny_open(void)
{
    tiny_case_t t;
    kt_reset();
    t.q = clt_queue(CL_QUEUE_PROFILING_ENABLE);
    t.buf = clt_buffer(64);
    t.k = clt_kernel("tiny", t.buf);
    assert_int_equal(kt_cl_attach(t.q, NULL, &t.kc), 0);
    return t;
}

static void tiny_close(tiny_case_t *t)
{
    assert_int_equal(kt_cl_detach(t->kc), 0);
    clt.api->clReleaseKernel(t->k);
    clt.api->clReleaseMemObject(t->buf);
    clt.api->clReleaseCommandQueue(t->q);
}

/* Burst, clFinish, flush at once: exact counts every time. */
static void test_flush_drains_queue(void **state)
{
    (void)state;
    tiny_case_t t = tiny_open();
    cl_command_queue q = t.q;
    cl_kernel k = t.k;
    kt_cl_ctx_t *kc = t.kc;
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
    tiny_close(&t);
}

/* After the collector has gone to sleep (no completions for a while), new completions are recorded without any
 * flush: the callback wakes it. */
static void test_sleeping_collector_wakes(void **state)
{
    (void)state;
    tiny_case_t t = tiny_open();
    cl_command_queue q = t.q;
    cl_kernel k = t.k;
    kt_cl_ctx_t *kc = t.kc;
    size_t g = 64;
    assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    clt.api->clFinish(q);
    clt_sleep_ms(400); /* idle longer than the collector's quiet spell (~100 ms) */
    for (int i = 0; i < 10; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    clt.api->clFlush(q);
    kt_cl_stats_t info = clt_wait_recorded(kc, 5000); /* no ktiming flush: only completion paths may record */
    assert_int_equal(info.in_flight, 0);
    tiny_close(&t);
}

enum { COLLECT_N = 500, COLLECT_ROUNDS = 5 };

static uint64_t in_flight(kt_cl_ctx_t *kc)
{
    kt_cl_stats_t info;
    assert_int_equal(kt_cl_stats(kc, &info), 0);
    return info.in_flight;
}

/* Commands held back by a user event: collect leaves them; after they ran and clFinish returned, one collect
 * records them all. */
static void test_collect_after_finish(void **state)
{
    (void)state;
    /* (profiling queues are polled only with the collector running and without KTIMING_OPENCL_COMPLETION=callback;
     * otherwise a callback records each command, on the driver's thread, and kt_cl_collect has nothing to poll) */
    const char *coll = getenv("KTIMING_OPENCL_COLLECTOR"), *how = getenv("KTIMING_OPENCL_COMPLETION");
    if ((coll && !strcmp(coll, "0")) || (how && !strcmp(how, "callback")) || !clt.api->clCreateUserEvent ||
        !clt.api->clSetUserEventStatus)
        skip();
    tiny_case_t t = tiny_open();
    cl_command_queue q = t.q;
    cl_kernel k = t.k;
    kt_cl_ctx_t *kc = t.kc;
    assert_int_equal(kt_cl_collect(kc, 0), 0); /* nothing in flight */
    cl_int err;
    cl_event gate = clt.api->clCreateUserEvent(clt.context, &err);
    assert_int_equal(err, CL_SUCCESS);
    size_t g = 64;
    assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 1, &gate, NULL), CL_SUCCESS);
    for (int i = 1; i < COLLECT_N; i++) /* an in-order queue: none of these runs before the first */
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    clt.api->clFlush(q);
    assert_int_equal(kt_cl_collect(kc, 0), 0);
    assert_int_equal(kt_cl_collect(NULL, 0), 0);
    assert_int_equal(in_flight(kc), COLLECT_N); /* none could finish: none recorded, and collect did not wait */

    assert_int_equal(clt.api->clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
    assert_int_equal(clt.api->clFinish(q), CL_SUCCESS);
    assert_int_equal(kt_cl_collect(kc, 0), 0);
    assert_int_equal(in_flight(kc), 0);
    for (int r = 1; r < COLLECT_ROUNDS; r++) { /* the program's loop: enqueue, finish, collect */
        for (int i = 0; i < COLLECT_N; i++)
            assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
        assert_int_equal(clt.api->clFinish(q), CL_SUCCESS);
        assert_int_equal(kt_cl_collect(kc, 0), 0);
        assert_int_equal(in_flight(kc), 0);
    }
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = clt_find(s, "tiny");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, (uint64_t)COLLECT_ROUNDS * COLLECT_N);
    assert_int_equal(e->errors + e->dropped, 0);
    kt_snapshot_free(s);

    /* As `ktiming run` does, at the start of a clFinish: the commands enqueued before the previous clFinish began
     * are recorded, the newer ones (done by now too) are left for later. */
    for (int i = 0; i < COLLECT_N; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    uint64_t began = kt_now_ns();
    assert_int_equal(clt.api->clFinish(q), CL_SUCCESS);
    for (int i = 0; i < COLLECT_N; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(clt.api->clFinish(q), CL_SUCCESS);
    assert_int_equal(kt_cl_collect(kc, began), 0);
    uint64_t left = in_flight(kc);
    assert_true(left <= COLLECT_N); /* (the collector may take the newer ones meanwhile) */
    assert_int_equal(kt_cl_collect(kc, 0), 0);
    assert_int_equal(in_flight(kc), 0);

    /* The program stops collecting: the collector records what comes next without any flush. */
    for (int i = 0; i < 10; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    clt.api->clFlush(q);
    kt_cl_stats_t info = clt_wait_recorded(kc, 5000);
    assert_int_equal(info.in_flight, 0);
    assert_int_equal(info.tracked, (uint64_t)(COLLECT_ROUNDS + 2) * COLLECT_N + 10);

    clt.api->clReleaseEvent(gate);
    tiny_close(&t);
}

int main(void)
{
    if (clt_init() != 0)
        return KT_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flush_drains_queue),
        cmocka_unit_test(test_sleeping_collector_wakes),
        cmocka_unit_test(test_collect_after_finish),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clt.api->clReleaseProgram(clt.program);
    clt.api->clReleaseContext(clt.context);
    return rc;
}
