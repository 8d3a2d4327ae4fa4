/* test_cuda_reset.c — a device reset (cuDevicePrimaryCtxReset, what cudaDeviceReset does) or cuCtxDestroy under
 * ktiming: the double frees the context's events and streams (a later use aborts the test); ktiming notices
 * by the context's id, counts what was in flight as dropped ("context reset"), never records it as an error,
 * never destroys the freed handles again, and times new work in the reset context. Unwatched, a reset landing
 * between the id check and the next call makes one use of a freed event (tolerated here, made on demand and
 * closed by the reset watch in test_cuda_reset_watch). */
#include "cuda_test_util.h"

int cuDevicePrimaryCtxReset(int dev);
int cuCtxCreate_v2(struct CUctx_st **ctx, unsigned int flags, int dev);
int cuCtxDestroy_v2(struct CUctx_st *ctx);

static struct CUctx_st *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = kt_test_ctx_enter();
    return kt_cuda_init(NULL);
}

static void test_primary_reset(void **state)
{
    (void)state;
    struct CUstream_st *s = kt_test_stream();
    assert_int_equal(kt_test_cuda_driver_hold(s, 1), 0);
    for (int i = 0; i < 5; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "before-reset"), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    kt_cuda_span_t open_span;
    assert_int_equal(kt_cuda_begin(&open_span, g_ctx, s, "open-across-reset"), 0);
    assert_int_equal(cuDevicePrimaryCtxReset(0), 0); /* s and every ktiming event die here */

    struct CUstream_st *s2 = kt_test_stream();
    for (int i = 0; i < 3; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s2, "after-reset"), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    assert_int_equal(kt_cuda_end(&open_span), KT_ESTATE);
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "before-reset");
    assert_non_null(e);
    assert_int_equal(e->errors, 0);
    assert_int_equal(e->dispatch_count, 0);
    assert_int_equal(e->dropped_by[KT_DROP_CONTEXT_RESET], 5);
    e = kt_test_find(snap, "open-across-reset");
    assert_non_null(e);
    assert_int_equal(e->dropped_by[KT_DROP_CONTEXT_RESET], 1);
    e = kt_test_find(snap, "after-reset");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 3);
    assert_int_equal(e->errors, 0);
    kt_snapshot_free(snap);

    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    print_message("dead-handle uses before shutdown: %llu\n", (unsigned long long)before.event_bad_handles);
    /* Issue 36.6: no use of a freed handle (the double aborts on one), except the one a reset landing between
     * ktiming's context-id check and the call itself makes (no driver tells a tool of a reset): at most one per
     * reset, and then no event of the context is touched again. */
    assert_int_equal(before.event_bad_handles, before.raced_handle_uses);
    assert_true(before.raced_handle_uses <= 1);
    kt_cuda_shutdown();
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.event_bad_handles, before.event_bad_handles); /* freed handles not destroyed again */
    assert_int_equal(kt_test_cuda_driver_live_events(), 0);
    assert_int_equal(cuStreamDestroy_v2(s2), 0);
}

static void test_context_destroyed(void **state)
{
    (void)state;
    struct CUctx_st *user = NULL;
    assert_int_equal(cuCtxCreate_v2(&user, 0, 0), 0); /* current on this thread */
    struct CUstream_st *s = kt_test_stream();
    assert_int_equal(kt_test_cuda_driver_hold(s, 1), 0);
    for (int i = 0; i < 4; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, user, s, "destroyed-ctx"), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    assert_int_equal(cuCtxDestroy_v2(user), 0); /* no kt_cuda_context_release: the program forgot it */
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "destroyed-ctx");
    assert_non_null(e);
    assert_int_equal(e->errors, 0);
    assert_int_equal(e->dropped_by[KT_DROP_CONTEXT_RESET], 4);
    kt_snapshot_free(snap);
    kt_cuda_shutdown();
    kt_test_cuda_driver_stats(&after);
    /* none but the one use a destroy landing between the collector's id check and its call makes */
    assert_int_equal(after.event_bad_handles - before.event_bad_handles,
                     after.raced_handle_uses - before.raced_handle_uses);
    assert_true(after.raced_handle_uses - before.raced_handle_uses <= 1);
}

/* The zero-use path (docs/cuda.md): a program that releases ktiming's state of the context before resetting it
 * leaves ktiming no handle to race the reset with: the dispatches are collected first, the reset finds no
 * ktiming handle in use, and work after it is timed in fresh state. */
static void test_release_before_reset(void **state)
{
    (void)state;
    struct CUstream_st *s = kt_test_stream();
    for (int i = 0; i < 6; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "released-then-reset"), 0);
        assert_int_equal(kt_test_cuda_driver_work(s, 5000, 0), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    assert_int_equal(cuStreamSynchronize(s), 0); /* done on the device: the release collects them at once */
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    assert_int_equal(kt_cuda_context_release(g_ctx), 0);
    assert_int_equal(cuDevicePrimaryCtxReset(0), 0);
    struct CUstream_st *s2 = kt_test_stream();
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, s2, "after-release-reset"), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    kt_flush();
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.event_bad_handles - before.event_bad_handles, 0);
    assert_int_equal(after.raced_handle_uses - before.raced_handle_uses, 0);
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "released-then-reset");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 6);
    assert_int_equal(e->dropped_by[KT_DROP_CONTEXT_RESET], 0);
    e = kt_test_find(snap, "after-release-reset");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 1);
    kt_snapshot_free(snap);
    kt_cuda_shutdown();
    assert_int_equal(cuStreamDestroy_v2(s2), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_primary_reset),
        cmocka_unit_test(test_context_destroyed),
        cmocka_unit_test(test_release_before_reset),
    };
    return cmocka_run_group_tests(tests, setup, kt_test_cuda_teardown);
}
