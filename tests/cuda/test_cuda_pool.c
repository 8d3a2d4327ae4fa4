/* test_cuda_pool.c — the per-context pool of event pairs grows to the number of dispatches in flight and is then
 * reused: no cuEventCreate per dispatch (counted by the driver test double), and every dispatch is recorded. */
#include "cuda_test_util.h"

static struct CUctx_st *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = kt_test_ctx_enter();
    return kt_cuda_init(&(kt_cuda_desc_t){.pool_chunk = 8});
}

/* n dispatches while the stream is held, so all are in flight at once; then release and flush. */
static void burst(struct CUstream_st *s, const char *name, int n)
{
    assert_int_equal(kt_test_cuda_driver_hold(s, 1), 0);
    for (int i = 0; i < n; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, name), 0);
        assert_non_null(span.pair);
        assert_int_equal(kt_test_cuda_driver_work(s, 1000, 1), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    kt_cuda_stats_t st;
    assert_int_equal(kt_cuda_stats(g_ctx, &st), 0);
    assert_true(st.pending >= (uint32_t)n); /* nothing completes while held */
    assert_int_equal(kt_test_cuda_driver_hold(s, 0), 0);
    kt_flush();
}

static void test_pool_grows_then_reuses(void **state)
{
    (void)state;
    struct CUstream_st *s = kt_test_stream();
    kt_test_cuda_stats_t d0, d1, d2;
    kt_test_cuda_driver_stats(&d0);

    burst(s, "pool", 100);
    kt_cuda_stats_t st;
    assert_int_equal(kt_cuda_stats(g_ctx, &st), 0);
    print_message("after 100 in flight: capacity %u, events created %llu\n", st.pairs_capacity,
                  (unsigned long long)st.events_created);
    assert_true(st.pairs_capacity >= 100);
    assert_true(st.pairs_capacity <= 200); /* doubling from 8: 8,16,32,64,128 */
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.pairs_free, st.pairs_capacity);
    kt_test_cuda_driver_stats(&d1);
    uint64_t creates = d1.event_creates - d0.event_creates;
    assert_true(creates <= 2ull * st.pairs_capacity + 2); /* pairs + the two anchor events */
    assert_int_equal(creates, st.events_created);

    /* Ten more bursts of the same size, and 500 free-running dispatches flushed every 50 (so at most ~50 are
     * in flight; the pool grows to what is in flight, whatever the collector's pace): no new event. */
    for (int round = 0; round < 10; round++)
        burst(s, "pool", 100);
    for (int i = 0; i < 500; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "pool"), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
        if (i % 50 == 49)
            kt_flush();
    }
    kt_flush();
    kt_test_cuda_driver_stats(&d2);
    assert_int_equal(d2.event_creates, d1.event_creates);
    kt_cuda_stats_t st2;
    assert_int_equal(kt_cuda_stats(g_ctx, &st2), 0);
    assert_int_equal(st2.pairs_capacity, st.pairs_capacity);
    assert_int_equal(st2.recorded, 1600);
    assert_int_equal(st2.errors, 0);
    print_message("1600 dispatches: %llu event records, %llu events created in total\n",
                  (unsigned long long)(d2.event_records - d0.event_records),
                  (unsigned long long)(d2.event_creates - d0.event_creates));

    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "pool");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 1600);
    assert_string_equal(e->device, "ktiming test double (not a GPU)");
    kt_snapshot_free(snap);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
}

static void test_pool_limit_drops(void **state)
{
    (void)state;
    /* A second backend life with a small limit: the dispatch past it is dropped and counted. */
    kt_cuda_shutdown();
    assert_int_equal(kt_cuda_init(&(kt_cuda_desc_t){.pool_chunk = 4, .max_pairs = 4}), 0);
    struct CUstream_st *s = kt_test_stream();
    assert_int_equal(kt_test_cuda_driver_hold(s, 1), 0);
    kt_cuda_span_t spans[5];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(kt_cuda_begin(&spans[i], g_ctx, s, "limited"), 0);
        assert_int_equal(kt_cuda_end(&spans[i]), 0);
    }
    assert_int_equal(kt_cuda_begin(&spans[4], g_ctx, s, "limited"), KT_EFULL);
    assert_null(spans[4].pair);
    assert_non_null(strstr(kt_cuda_last_error(), "pool full"));
    assert_int_equal(kt_test_cuda_driver_hold(s, 0), 0);
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "limited");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 4);
    assert_int_equal(e->dropped, 1);
    kt_snapshot_free(snap);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_grows_then_reuses),
        cmocka_unit_test(test_pool_limit_drops),
    };
    return cmocka_run_group_tests(tests, setup, kt_test_cuda_teardown);
}
