/* test_cuda_contention.c — issue 36.7: kt_cuda_begin/end never wait behind the collector's driver calls. The
 * double makes the collector's cuEventQuery wait inside the driver (as a busy driver does); a span begun and ended
 * on the program's thread meanwhile must complete before that query is let go (a watchdog lets it go after 5 s
 * at the latest, so the old behaviour, holding the context lock across the queries, fails instead of hanging). */
#include "cuda_test_util.h"

#include <pthread.h>
#include <stdatomic.h>

static atomic_int g_done;             /* the program thread's span was begun and ended */
static atomic_int g_done_at_release;  /* g_done when the watchdog let the queries go */

static void *watchdog(void *arg)
{
    (void)arg;
    for (int i = 0; i < 5000 && !atomic_load(&g_done); i++)
        kt_test_sleep_ms(1);
    atomic_store(&g_done_at_release, atomic_load(&g_done));
    kt_test_cuda_driver_block_queries(0);
    return NULL;
}

/* The collector is inside a blocked query: a span `name` begun and ended on stream s from this thread must complete
 * before the watchdog lets the query go (else it waited for the collector); then it is recorded. */
static void span_while_the_collector_waits(struct CUctx_st *ctx, struct CUstream_st *s, const char *name)
{
    atomic_store(&g_done, 0);
    atomic_store(&g_done_at_release, 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, watchdog, NULL), 0);
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, ctx, s, name), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    atomic_store(&g_done, 1);
    pthread_join(th, NULL);
    assert_int_equal(atomic_load(&g_done_at_release), 1);
    kt_test_expect_count(name, 1);
}

static void test_begin_does_not_wait_for_the_collector(void **state)
{
    (void)state;
    struct CUctx_st *ctx = kt_test_ctx_enter();
    /* one anchor, made by the first pass; none due later, so the blocked query is the pair's own */
    assert_int_equal(kt_cuda_init(&(kt_cuda_desc_t){.anchor_period_ms = 600000}), 0);
    struct CUstream_st *s = kt_test_stream();
    struct CUstream_st *s2 = kt_test_stream();
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, ctx, s, "first"), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    kt_flush();
    assert_int_equal(kt_cuda_begin(&span, ctx, s, "collected"), 0);
    kt_test_end_into_blocked_query(&span);
    span_while_the_collector_waits(ctx, s2, "beside");
    assert_int_equal(cuStreamDestroy_v2(s), 0);
    assert_int_equal(cuStreamDestroy_v2(s2), 0);
    kt_cuda_shutdown();
    kt_test_ctx_leave();
}

int cuDevicePrimaryCtxReset(int dev);

/* The same after a device reset: the program's next kt_cuda_begin finds the context's id changed and gives the
 * handle fresh state without waiting for the pass that is inside the driver (which holds the consumer lock a
 * retirement needs; the pass retires the old state itself once it is let go). */
static void test_begin_after_a_reset_does_not_wait_for_the_collector(void **state)
{
    (void)state;
    struct CUctx_st *ctx = kt_test_ctx_enter();
    assert_int_equal(kt_cuda_init(&(kt_cuda_desc_t){.anchor_period_ms = 600000}), 0);
    struct CUstream_st *s = kt_test_stream();
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, ctx, s, "first"), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    kt_flush();
    assert_int_equal(kt_cuda_begin(&span, ctx, s, "in-flight-at-reset"), 0);
    kt_test_end_into_blocked_query(&span);
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    assert_int_equal(cuDevicePrimaryCtxReset(0), 0); /* s and ktiming's events of the context die */
    struct CUstream_st *s2 = kt_test_stream();
    span_while_the_collector_waits(ctx, s2, "after-reset-beside");
    kt_test_cuda_driver_stats(&after);
    /* the stuck query's return meets its freed event: the one raced use an unwatched reset allows, no other */
    assert_true(after.raced_handle_uses - before.raced_handle_uses <= 1);
    assert_int_equal(after.event_bad_handles - before.event_bad_handles,
                     after.raced_handle_uses - before.raced_handle_uses);
    assert_int_equal(cuStreamDestroy_v2(s2), 0);
    kt_cuda_shutdown();
    kt_test_ctx_leave();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_begin_does_not_wait_for_the_collector),
        cmocka_unit_test(test_begin_after_a_reset_does_not_wait_for_the_collector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
