/* test_cuda_sync.c — synchronous mode: kt_cuda_end waits for its own dispatch (a blocking call on the enqueuing
 * thread) and has recorded it when it returns; nothing is left for the collector. */
#include "cuda_test_util.h"

#include <pthread.h>

static struct CUctx_st *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = kt_test_ctx_enter();
    kt_test_cuda_driver_freeze_clock(1); /* event times differ by exactly the virtual work */
    return kt_cuda_init(&(kt_cuda_desc_t){.sync = 1});
}

/* Releases a held stream after a delay. */
static void *release_later(void *arg)
{
    kt_test_sleep_ms(30);
    kt_test_cuda_driver_hold(arg, 0);
    return NULL;
}

static void test_end_waits_and_records(void **state)
{
    (void)state;
    struct CUstream_st *s = kt_test_stream();
    kt_test_cuda_driver_watch_thread(1);
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    for (int i = 0; i < 20; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "sync"), 0);
        assert_int_equal(kt_test_cuda_driver_work(s, 5000 + 1000 * (uint64_t)i, 1), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
        kt_cuda_stats_t st;
        assert_int_equal(kt_cuda_stats(g_ctx, &st), 0);
        assert_int_equal(st.recorded, (uint64_t)i + 1); /* recorded before kt_cuda_end returned */
        assert_int_equal(st.pending, 0);
    }
    kt_test_cuda_driver_stats(&after);
    assert_true(after.watched_blocking - before.watched_blocking >= 20);

    /* A held stream: kt_cuda_end returns only after the stream ran the dispatch. */
    assert_int_equal(kt_test_cuda_driver_hold(s, 1), 0);
    pthread_t th;
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "sync-held"), 0);
    assert_int_equal(pthread_create(&th, NULL, release_later, s), 0);
    uint64_t t0 = kt_now_ns();
    assert_int_equal(kt_cuda_end(&span), 0);
    uint64_t waited = kt_now_ns() - t0;
    pthread_join(th, NULL);
    kt_test_cuda_driver_watch_thread(0);
    assert_true(waited >= 20000000ull);

    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "sync");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 20);
    assert_true(e->min_ns >= 5000 - 64 && e->min_ns <= 5000 + 64);
    assert_true(e->max_ns >= 24000 - 64 && e->max_ns <= 24000 + 64);
    assert_non_null(kt_test_find(snap, "sync-held"));
    kt_snapshot_free(snap);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_end_waits_and_records),
    };
    return cmocka_run_group_tests(tests, setup, kt_test_cuda_teardown);
}
