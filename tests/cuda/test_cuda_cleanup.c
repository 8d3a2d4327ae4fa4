/* test_cuda_cleanup.c — kt_cuda_shutdown and kt_cuda_context_release destroy every event, stream, module and
 * buffer ktiming made (counted by the driver test double), count dispatches still pending as dropped,
 * invalidate older spans, and the backend initialises again afterwards. */
#include "cuda_test_util.h"

static struct CUctx_st *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = kt_test_ctx_enter();
    return 0;
}

/* Everything ktiming made since `before` has been destroyed. */
static void assert_all_released(const kt_test_cuda_stats_t *before)
{
    kt_test_cuda_stats_t d;
    kt_test_cuda_driver_stats(&d);
    print_message("events %llu created / %llu destroyed, streams %llu/%llu, modules %llu/%llu, buffers %llu/%llu\n",
                  (unsigned long long)(d.event_creates - before->event_creates),
                  (unsigned long long)(d.event_destroys - before->event_destroys),
                  (unsigned long long)(d.stream_creates - before->stream_creates),
                  (unsigned long long)(d.stream_destroys - before->stream_destroys),
                  (unsigned long long)(d.module_loads - before->module_loads),
                  (unsigned long long)(d.module_unloads - before->module_unloads),
                  (unsigned long long)(d.mem_allocs - before->mem_allocs),
                  (unsigned long long)(d.mem_frees - before->mem_frees));
    assert_true(d.event_creates > before->event_creates);
    assert_int_equal(d.event_destroys - before->event_destroys, d.event_creates - before->event_creates);
    assert_int_equal(d.stream_destroys - before->stream_destroys, d.stream_creates - before->stream_creates);
    assert_int_equal(d.module_unloads - before->module_unloads, d.module_loads - before->module_loads);
    assert_int_equal(d.mem_frees - before->mem_frees, d.mem_allocs - before->mem_allocs);
    assert_int_equal(d.primary_releases - before->primary_releases, d.primary_retains - before->primary_retains);
    assert_int_equal(d.event_bad_handles, 0);
    assert_int_equal(kt_test_cuda_driver_live_events(), 0);
}

static void test_shutdown_destroys_everything(void **state)
{
    (void)state;
    struct CUstream_st *s[3] = {kt_test_stream(), kt_test_stream(), kt_test_stream()};
    kt_test_cuda_stats_t before;
    kt_test_cuda_driver_stats(&before);
    assert_int_equal(kt_cuda_init(&(kt_cuda_desc_t){.flush_timeout_ms = 50}), 0);
    for (int i = 0; i < 300; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s[i % 3], "clean"), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    kt_flush();
    /* A timer, a globaltimer read (module, stream, scratch buffer) and slots; then 7 dispatches left pending. */
    kt_cuda_timer_t t = {0};
    kt_cuda_timer_start(&t);
    kt_cuda_timer_stop(&t);
    assert_true(kt_cuda_timer_elapsed_ms(&t) >= 0.0);
    uint64_t gt = 0;
    assert_int_equal(kt_cuda_globaltimer_read(g_ctx, &gt), 0);
    kt_cuda_slots_t *slots = NULL;
    assert_int_equal(kt_cuda_slots_create(&slots, g_ctx, 8), 0);
    kt_cuda_slots_destroy(slots);
    assert_int_equal(kt_test_cuda_driver_hold(s[0], 1), 0);
    for (int i = 0; i < 7; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s[0], "never-finished"), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    kt_cuda_span_t open_span;
    assert_int_equal(kt_cuda_begin(&open_span, g_ctx, s[1], "open"), 0);

    kt_cuda_shutdown();
    assert_all_released(&before);

    assert_int_equal(kt_cuda_end(&open_span), KT_ESTATE); /* its events are gone */
    kt_cuda_timer_destroy(&t);                             /* harmless after shutdown */
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "never-finished");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 0);
    assert_int_equal(e->dropped, 7);
    e = kt_test_find(snap, "clean");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 300);
    kt_snapshot_free(snap);

    /* The backend comes back after a shutdown, and cleans up again. */
    assert_int_equal(kt_test_cuda_driver_hold(s[0], 0), 0);
    kt_test_cuda_driver_stats(&before);
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, s[2], "again"), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    kt_flush();
    kt_cuda_stats_t st;
    assert_int_equal(kt_cuda_stats(g_ctx, &st), 0);
    assert_int_equal(st.recorded, 1);
    kt_cuda_shutdown();
    assert_all_released(&before);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cuStreamDestroy_v2(s[i]), 0);
}

static void test_context_release(void **state)
{
    (void)state;
    struct CUstream_st *s = kt_test_stream();
    kt_test_cuda_stats_t before;
    kt_test_cuda_driver_stats(&before);
    for (int i = 0; i < 40; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "released"), 0);
        assert_int_equal(kt_test_cuda_driver_work(s, 20000, 0), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    /* Release collects what is outstanding, then destroys the context's events. */
    assert_int_equal(kt_cuda_context_release(g_ctx), 0);
    assert_all_released(&before);
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "released");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 40);
    kt_snapshot_free(snap);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shutdown_destroys_everything),
        cmocka_unit_test(test_context_release),
    };
    return cmocka_run_group_tests(tests, setup, kt_test_cuda_teardown);
}
