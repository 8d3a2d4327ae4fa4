/* test_cuda_async.c — asynchronous collection: kt_cuda_end returns while the GPU (the driver test double's stream
 * thread) has not run the dispatch, the enqueuing thread never waits on or queries an event, and the collector
 * thread records every dispatch with its measured duration; several enqueuing threads at once, while another
 * thread reads clock facts of the same context. */
#include <time.h>
#include "cuda_test_util.h"

#include <pthread.h>

static struct CUctx_st *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = kt_test_ctx_enter();
    return kt_cuda_init(NULL);
}

static uint64_t raw_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void test_enqueue_never_waits(void **state)
{
    (void)state;
    enum { N = 50 };
    const uint64_t work_ns = 300000; /* 300 us of real (slept) work per dispatch */
    struct CUstream_st *s = kt_test_stream();
    kt_test_cuda_driver_watch_thread(1);
    kt_test_cuda_stats_t before;
    kt_test_cuda_driver_stats(&before);

    assert_int_equal(kt_test_cuda_driver_hold(s, 1), 0);
    uint64_t t0 = kt_now_ns();
    for (int i = 0; i < N; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "async"), 0);
        assert_int_equal(kt_test_cuda_driver_work(s, work_ns, 0), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    uint64_t enqueue_ns = kt_now_ns() - t0;
    /* The stream is held: had any call waited for completion, we would never have got here. */
    kt_cuda_stats_t st;
    assert_int_equal(kt_cuda_stats(g_ctx, &st), 0);
    assert_int_equal(st.pending, N);
    assert_int_equal(st.recorded, 0);
    print_message("%d begin/end pairs enqueued in %.1f us while the stream was held\n", N, enqueue_ns / 1e3);

    /* The window in which the held work can run, on the double's event clock (MONOTONIC_RAW). */
    uint64_t w0 = raw_now_ns();
    assert_int_equal(kt_test_cuda_driver_hold(s, 0), 0);
    assert_true(kt_test_wait_recorded(g_ctx, N, 10000)); /* the collector thread did it */
    uint64_t w1 = raw_now_ns();

    kt_test_cuda_stats_t after;
    kt_test_cuda_driver_stats(&after);
    kt_test_cuda_driver_watch_thread(0);
    assert_int_equal(after.watched_blocking - before.watched_blocking, 0);
    assert_int_equal(after.watched_queries - before.watched_queries, 0);
    assert_true(after.event_queries > before.event_queries); /* someone else polled */

    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "async");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, N);
    assert_true(e->min_ns >= work_ns - 64);           /* event resolution of the double: 32 ns */
    /* Containment, not a wall-clock bound: the N spans run one after another on one stream inside
     * [w0, w1], so their sum cannot exceed the window (plus the double's 32 ns event rounding). */
    assert_true(e->total_ns <= (w1 - w0) + 64ull * N);
    assert_true(e->max_ns <= e->total_ns - (uint64_t)(N - 1) * (work_ns - 64));
    kt_snapshot_free(snap);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
}

/* Several threads, each with its own stream, enqueue concurrently. */
static void *enqueuer(void *arg)
{
    const char *name = arg;
    struct CUctx_st *ctx = NULL;
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuCtxPushCurrent_v2(ctx);
    struct CUstream_st *s = NULL;
    cuStreamCreate(&s, 0);
    int failures = 0;
    for (int i = 0; i < 200; i++) {
        kt_cuda_span_t span;
        failures += kt_cuda_begin(&span, NULL, s, name) != 0; /* NULL: the current context */
        kt_test_cuda_driver_work(s, 2000, 1);
        failures += kt_cuda_end(&span) != 0;
    }
    cuStreamSynchronize(s);
    cuStreamDestroy_v2(s);
    cuCtxPopCurrent_v2(&ctx);
    cuDevicePrimaryCtxRelease_v2(0);
    return (void *)(intptr_t)failures;
}

/* Meanwhile another thread reads clock facts and counters of the same context (publishing device facts). */
static void *observer(void *arg)
{
    int failures = 0;
    for (int i = 0; i < 5; i++) {
        uint64_t res = 0;
        kt_cuda_stats_t st;
        failures += kt_cuda_globaltimer_resolution(arg, &res) != 0;
        failures += kt_cuda_stats(arg, &st) != 0;
        failures += kt_cuda_calibrate(arg, 10, KT_FIT_BASIC, NULL, NULL) != 0;
    }
    return (void *)(intptr_t)failures;
}

static void test_threads(void **state)
{
    (void)state;
    static const char *names[4] = {"t0", "t1", "t2", "t3"};
    pthread_t th[5];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, enqueuer, (void *)names[i]), 0);
    assert_int_equal(pthread_create(&th[4], NULL, observer, g_ctx), 0);
    for (int i = 0; i < 5; i++) {
        void *ret = NULL;
        pthread_join(th[i], &ret);
        assert_int_equal((intptr_t)ret, 0);
    }
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    for (int i = 0; i < 4; i++) {
        const kt_kernel_timing_t *e = kt_test_find(snap, names[i]);
        assert_non_null(e);
        assert_int_equal(e->dispatch_count, 200);
        /* At least its own virtual work (the double's device clock is shared, so other streams' virtual work
         * running meanwhile may add to it). */
        assert_true(e->min_ns >= 2000 - 64);
    }
    kt_snapshot_free(snap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enqueue_never_waits),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, setup, kt_test_cuda_teardown);
}
