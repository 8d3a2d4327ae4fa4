/* test_cuda_timer.c — kt_cuda_timer_t has kt_cpu_timer_t's interface and semantics (start/stop/elapsed_ms, reads
 * 0 before start, cumulative while running), elapsed_ms enforces the synchronisation rule by waiting for the stop
 * event itself, and destroy returns its events to the pool. Against the driver test double, frozen clock. */
#include "cuda_test_util.h"

#include <math.h>
#include <pthread.h>

static struct CUctx_st *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = kt_test_ctx_enter();
    kt_test_cuda_driver_freeze_clock(1);
    return kt_cuda_init(NULL);
}

static void test_same_interface_as_cpu_timer(void **state)
{
    (void)state;
    /* The three calls have kt_cpu_timer_t's shapes. */
    void (*start)(kt_cuda_timer_t *) = kt_cuda_timer_start;
    void (*stop)(kt_cuda_timer_t *) = kt_cuda_timer_stop;
    double (*elapsed_ms)(const kt_cuda_timer_t *) = kt_cuda_timer_elapsed_ms;
    void (*cpu_start)(kt_cpu_timer_t *) = kt_cpu_timer_start;
    double (*cpu_elapsed)(const kt_cpu_timer_t *) = kt_cpu_timer_elapsed_ms;
    (void)cpu_start;
    (void)cpu_elapsed;

    kt_cuda_timer_t t = {0}; /* zeroed: current context, legacy default stream */
    assert_true(elapsed_ms(&t) == 0.0);   /* never started reads 0 */
    start(&t);
    assert_int_equal(kt_test_cuda_driver_work(NULL, 2500000, 1), 0); /* 2.5 ms on the default stream */
    stop(&t);
    double ms = elapsed_ms(&t);
    print_message("timer: %.6f ms (true 2.5)\n", ms);
    assert_true(fabs(ms - 2.5) < 1e-4);
    assert_true(fabs(elapsed_ms(&t) - 2.5) < 1e-4); /* stable after stop */
    kt_cuda_timer_destroy(&t);
}

static void test_running_is_cumulative(void **state)
{
    (void)state;
    struct CUstream_st *s = kt_test_stream();
    kt_cuda_timer_t t;
    assert_int_equal(kt_cuda_timer_init(&t, g_ctx, s), 0);
    kt_cuda_timer_start(&t);
    assert_int_equal(kt_test_cuda_driver_work(s, 1000000, 1), 0);
    double lap1 = kt_cuda_timer_elapsed_ms(&t);
    assert_int_equal(kt_test_cuda_driver_work(s, 1000000, 1), 0);
    double lap2 = kt_cuda_timer_elapsed_ms(&t);
    kt_cuda_timer_stop(&t);
    double total = kt_cuda_timer_elapsed_ms(&t);
    print_message("laps %.6f %.6f, total %.6f ms\n", lap1, lap2, total);
    assert_true(fabs(lap1 - 1.0) < 1e-4);
    assert_true(fabs(lap2 - 2.0) < 1e-4);
    assert_true(fabs(total - 2.0) < 1e-4);
    /* Restarting begins a new interval. */
    kt_cuda_timer_start(&t);
    assert_int_equal(kt_test_cuda_driver_work(s, 300000, 1), 0);
    kt_cuda_timer_stop(&t);
    assert_true(fabs(kt_cuda_timer_elapsed_ms(&t) - 0.3) < 1e-4);
    kt_cuda_timer_destroy(&t);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
}

static void *release_later(void *arg)
{
    kt_test_sleep_ms(30);
    kt_test_cuda_driver_hold(arg, 0);
    return NULL;
}

static void test_elapsed_waits_for_stop(void **state)
{
    (void)state;
    struct CUstream_st *s = kt_test_stream();
    kt_cuda_timer_t t;
    assert_int_equal(kt_cuda_timer_init(&t, g_ctx, s), 0);
    assert_int_equal(kt_test_cuda_driver_hold(s, 1), 0);
    kt_cuda_timer_start(&t);
    assert_int_equal(kt_test_cuda_driver_work(s, 4000000, 1), 0);
    kt_cuda_timer_stop(&t); /* returns at once: the stream is held */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, release_later, s), 0);
    uint64_t t0 = kt_now_ns();
    double ms = kt_cuda_timer_elapsed_ms(&t); /* no cuStreamSynchronize by the caller: the timer waits */
    uint64_t waited = kt_now_ns() - t0;
    pthread_join(th, NULL);
    assert_true(waited >= 20000000ull);
    assert_true(fabs(ms - 4.0) < 1e-4);

    kt_cuda_stats_t a, b;
    assert_int_equal(kt_cuda_stats(g_ctx, &a), 0);
    kt_cuda_timer_destroy(&t);
    assert_int_equal(kt_cuda_stats(g_ctx, &b), 0);
    assert_int_equal(b.pairs_free, a.pairs_free + 1); /* its pair went back to the pool */
    assert_null(t.pair);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_interface_as_cpu_timer),
        cmocka_unit_test(test_running_is_cumulative),
        cmocka_unit_test(test_elapsed_waits_for_stop),
    };
    return cmocka_run_group_tests(tests, setup, kt_test_cuda_teardown);
}
