/* test_cuda_precision.c — elapsed-time precision does not decay for events far apart: durations are exact however
 * far the device clock has run (cuEventElapsedTime's float ms would lose them against an old reference), and
 * dispatches are placed on the host timeline within their stated uncertainty while the device clock drifts.
 * Runs against the driver test double with 1 ns event resolution. */
#include "cuda_test_util.h"

#include <math.h>

static struct CUctx_st *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = kt_test_ctx_enter();
    return 0;
}

static void test_durations_far_apart(void **state)
{
    (void)state;
    assert_int_equal(kt_cuda_init(NULL), 0);
    kt_test_cuda_driver_freeze_clock(1);
    struct CUstream_st *s = kt_test_stream();
    static const uint64_t jumps[] = {1000000000ull, 60000000000ull, 3600000000000ull, 36000000000000ull,
                                     8640000000000000ull};
    const uint64_t work = 1234567;
    for (size_t i = 0; i < sizeof jumps / sizeof jumps[0]; i++) {
        assert_int_equal(kt_test_cuda_driver_work(s, jumps[i], 1), 0); /* the device clock runs far ahead */
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "far"), 0);
        assert_int_equal(kt_test_cuda_driver_work(s, work, 1), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "far");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 5);
    print_message("durations after jumps of 1 s .. 100 days: min %llu max %llu ns (true %llu)\n",
                  (unsigned long long)e->min_ns, (unsigned long long)e->max_ns, (unsigned long long)work);
    assert_true(e->min_ns >= work - 1 && e->max_ns <= work + 1);
    kt_snapshot_free(snap);

    /* What measuring both events against a reference taken before a 10-hour run would give: float ms. */
    double ref_gap_ns = 36000000000000.0;
    float a = (float)(ref_gap_ns / 1e6), b = (float)((ref_gap_ns + (double)work) / 1e6);
    double naive_err = fabs(((double)b - (double)a) * 1e6 - (double)work);
    print_message("the same duration from float offsets against a 10 h old reference: error %.0f ns\n", naive_err);
    assert_true(naive_err > 1000.0);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
    kt_test_cuda_driver_freeze_clock(0);
    kt_cuda_shutdown();
}

static void test_placement_with_drift(void **state)
{
    (void)state;
    const double drift = 200.0;
    kt_test_cuda_driver_set_clock(1000000000000000ull, drift, 1000); /* another epoch, 200 ppm fast */
    assert_int_equal(kt_cuda_init(&(kt_cuda_desc_t){.anchor_period_ms = 10}), 0);
    kt_reset();
    struct CUstream_st *s = kt_test_stream();
    enum { N = 60 };
    for (int i = 0; i < N; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, g_ctx, s, "placed"), 0);
        assert_int_equal(kt_test_cuda_driver_work(s, 100000, 0), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
        kt_test_sleep_ms(5);
    }
    assert_int_equal(cuStreamSynchronize(s), 0);
    kt_flush();
    kt_cuda_stats_t st;
    assert_int_equal(kt_cuda_stats(g_ctx, &st), 0);
    print_message("anchors %u, event-clock model samples %u\n", st.anchors, st.model_samples);
    assert_true(st.anchors >= 10);

    uint64_t log[2 * N];
    assert_int_equal(kt_test_cuda_driver_record_log(s, log, 2 * N), 2 * N);
    kt_snapshot_t *snap = kt_snapshot();
    size_t idx = kt_test_entry_index(snap, "placed");
    assert_true(idx != SIZE_MAX);
    /* The snapshot orders spans by placed start. Two dispatches the device ran close together (its worker late
     * for the first) can swap there while each stays inside its bound, so each span is matched to its truth by
     * the order of its enqueue call instead: the loop enqueues them 5 ms apart. */
    const kt_span_t *placed[N];
    size_t n = 0;
    for (size_t i = 0; i < snap->span_count && n < N; i++)
        if (snap->spans[i].entry == idx)
            placed[n++] = &snap->spans[i];
    assert_int_equal(n, N);
    size_t swapped = 0;
    for (size_t i = 1; i < N; i++) { /* insertion sort by enqueue time, counting the moves */
        const kt_span_t *v = placed[i];
        size_t j = i;
        for (; j > 0 && placed[j - 1]->enqueue_ns > v->enqueue_ns; j--)
            placed[j] = placed[j - 1];
        placed[j] = v;
        swapped += i - j;
    }
    uint64_t starts[N];
    uint64_t unc[N];
    for (size_t i = 0; i < N; i++) {
        assert_true(placed[i]->enqueue_ns > 0);
        if (i > 0)
            assert_true(placed[i]->enqueue_ns > placed[i - 1]->enqueue_ns);
        starts[i] = placed[i]->start_ns;
        unc[i] = placed[i]->uncertainty_ns;
    }
    print_message("placed order differs from enqueue order by %zu swaps\n", swapped);
    double worst = 0.0, worst_unc = 0.0, sum = 0.0;
    int outside = 0;
    for (size_t i = 0; i < N; i++) {
        uint64_t truth = kt_test_cuda_driver_device_to_host(log[2 * i]);
        double err = fabs((double)starts[i] - (double)truth);
        sum += err;
        if (err > worst)
            worst = err;
        if ((double)unc[i] > worst_unc)
            worst_unc = (double)unc[i];
        if (err > (double)unc[i]) {
            print_message("span %zu outside its bound: error %.1f us, stated %.1f us\n", i, err / 1e3,
                          (double)unc[i] / 1e3);
            outside++;
        }
    }
    print_message("placement vs truth: mean %.1f us, worst %.1f us; largest stated uncertainty %.1f us; "
                  "outside bound %d/%d\n", sum / N / 1e3, worst / 1e3, worst_unc / 1e3, outside, N);
    assert_int_equal(outside, 0);
    assert_true(worst_unc < 20e6); /* the bound stays useful: under 20 ms even on a loaded, sanitized run */
    kt_snapshot_free(snap);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations_far_apart),
        cmocka_unit_test(test_placement_with_drift),
    };
    return cmocka_run_group_tests(tests, setup, kt_test_cuda_teardown);
}
