/* test_cuda_exit.c — the core's stop (kt_shutdown, process exit) honours its deadline: dispatches still in flight
 * when it passes are counted as dropped ("in flight at exit"), a torn-down driver (CUDA_ERROR_DEINITIALIZED) is
 * given up at once rather than polled until the deadline, and the backend records again after kt_init. */
#include "cuda_test_util.h"

#include <stdlib.h>

static struct CUctx_st *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = kt_test_ctx_enter();
    return kt_cuda_init(NULL);
}

static void test_stop_counts_in_flight(void **state)
{
    (void)state;
    setenv("KTIMING_EXIT_WAIT_MS", "30", 1);
    struct CUstream_st *s = kt_test_stream();
    assert_int_equal(kt_test_cuda_driver_hold(s, 1), 0);
    for (int i = 0; i < 5; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "exit-held"), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    kt_shutdown(); /* stop(deadline): 30 ms for a stream that never runs */
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "exit-held");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 0);
    assert_int_equal(e->dropped, 5);
    assert_int_equal(e->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], 5);
    kt_snapshot_free(snap);
    kt_cuda_stats_t st;
    assert_int_equal(kt_cuda_stats(g_ctx, &st), 0);
    assert_int_equal(st.pending, 0);

    /* Used again after kt_init: registered and collected again. */
    assert_int_equal(kt_test_cuda_driver_hold(s, 0), 0);
    assert_int_equal(kt_init(NULL), 0);
    struct CUstream_st *s2 = kt_test_stream();
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, s2, "after-restart"), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    kt_flush();
    snap = kt_snapshot();
    e = kt_test_find(snap, "after-restart");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 1);
    kt_snapshot_free(snap);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
    assert_int_equal(cuStreamDestroy_v2(s2), 0);
}

static void test_stop_gives_up_when_driver_is_gone(void **state)
{
    (void)state;
    setenv("KTIMING_EXIT_WAIT_MS", "600000", 1); /* ten minutes: only giving up at once ends this test */
    struct CUstream_st *s = kt_test_stream();
    assert_int_equal(kt_test_cuda_driver_hold(s, 1), 0);
    for (int i = 0; i < 3; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "exit-deinit"), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    kt_test_cuda_driver_deinit(1);
    kt_shutdown();
    kt_test_cuda_driver_stats(&after);
    kt_test_cuda_driver_deinit(0);
    print_message("driver calls after teardown: %llu\n", (unsigned long long)after.calls_after_deinit);
    assert_true(after.calls_after_deinit - before.calls_after_deinit <= 12); /* a few, not a polling loop */
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "exit-deinit");
    assert_non_null(e);
    assert_int_equal(e->errors, 0);
    assert_int_equal(e->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], 3);
    kt_snapshot_free(snap);
    assert_int_equal(kt_test_cuda_driver_hold(s, 0), 0);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
    unsetenv("KTIMING_EXIT_WAIT_MS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_counts_in_flight),
        cmocka_unit_test(test_stop_gives_up_when_driver_is_gone),
    };
    return cmocka_run_group_tests(tests, setup, kt_test_cuda_teardown);
}
