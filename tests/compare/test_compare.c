/* test_compare.c — kt_compare verdicts on synthetic samples with known shifts, matching by key, output formats. */
#include "support/compare_synth.h"

#include <ktiming.h>
#include <ktiming/compare.h>

#include <cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static const kt_compare_row_t *find_row(const kt_compare_result_t *r, const char *name, kt_backend_t b,
                                        const char *dev)
{
    for (size_t i = 0; i < r->count; i++)
        if (!strcmp(r->rows[i].name, name) && r->rows[i].backend == b && !strcmp(r->rows[i].device, dev))
            return &r->rows[i];
    return NULL;
}

/* ---------------------------------------------------------------------------------------------------
 * Verdicts on known shifts
 * ------------------------------------------------------------------------------------------------- */

static void test_known_speedup_is_faster(void **state)
{
    (void)state;
    kt_snapshot_t *b = synth_snapshot(1), *a = synth_snapshot(1);
    synth_add(b, "blur", KT_BACKEND_CPU, "host", 60, 1000000.0, 0.03, 1);
    synth_add(a, "blur", KT_BACKEND_CPU, "host", 60, 800000.0, 0.03, 2); /* true speedup 1.25 */
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);
    assert_int_equal(r.count, 1);
    const kt_compare_row_t *row = &r.rows[0];
    assert_int_equal(row->verdict, KT_VERDICT_FASTER);
    assert_true(row->p_value < 0.001);
    assert_true(fabs(row->speedup_median - 1.25) < 0.03);
    assert_true(fabs(row->speedup_mean - 1.25) < 0.03);
    assert_true(row->ci_lo <= 1.25 && 1.25 <= row->ci_hi); /* the true ratio is inside the interval */
    assert_true(row->ci_lo <= row->speedup_median && row->speedup_median <= row->ci_hi);
    assert_true(row->ci_lo > 1.0);
    assert_int_equal(r.faster, 1);
    assert_int_equal(r.slower, 0);
    assert_int_equal(r.geomean_verdict, KT_VERDICT_FASTER);
    assert_true(fabs(r.geomean_speedup - row->speedup_median) < 1e-12);
    kt_compare_free(&r);

    /* the other way round it is a regression with the inverse ratio */
    assert_int_equal(kt_compare(a, b, NULL, &r), 0);
    assert_int_equal(r.rows[0].verdict, KT_VERDICT_SLOWER);
    assert_true(fabs(r.rows[0].speedup_median - 0.8) < 0.02);
    assert_true(r.rows[0].ci_lo <= 0.8 && 0.8 <= r.rows[0].ci_hi);
    assert_int_equal(r.slower, 1);
    kt_compare_free(&r);
    synth_free(a);
    synth_free(b);
}

/* An entry of n dispatches that took v, v + step, v + 2 step, ... ns (v = 0: below the clock's resolution). */
static void add_samples(kt_snapshot_t *s, const char *name, uint32_t n, uint64_t v, uint64_t step)
{
    kt_kernel_timing_t *e = synth_add(s, name, KT_BACKEND_CPU, "host", n, 1000.0, 0.0, 1);
    e->total_ns = 0;
    for (uint32_t i = 0; i < n; i++) {
        e->samples[i] = v + i * step;
        e->total_ns += e->samples[i];
    }
    e->min_ns = v;
    e->max_ns = e->samples[n - 1];
    e->p50_ns = e->samples[n / 2];
    e->mean_ns = (double)e->total_ns / n;
}

static void test_zero_median_regression(void **state)
{
    (void)state;
    /* 0 ns -> 1 ms, 20 dispatches a side: p < 0.001 and an interval far from 1, so SLOWER (the 0 read as the
     * bootstrap reads it, 0.5 ns); 1 ms -> 0 ns is FASTER; 0 -> 0 is UNSURE with no speedup and no interval. */
    kt_snapshot_t *z = synth_snapshot(1), *ms = synth_snapshot(1);
    add_samples(z, "k", 20, 0, 0);
    add_samples(ms, "k", 20, 1000000, 0);
    kt_compare_result_t r;
    assert_int_equal(kt_compare(z, ms, NULL, &r), 0);
    const kt_compare_row_t *row = &r.rows[0];
    assert_int_equal(row->verdict, KT_VERDICT_SLOWER);
    assert_true(fabs(row->speedup_median - 0.5e-6) < 1e-12);
    assert_true(row->ci_hi < 1.0);
    assert_int_equal(r.slower, 1);
    kt_compare_free(&r);
    assert_int_equal(kt_compare(ms, z, NULL, &r), 0);
    assert_int_equal(r.rows[0].verdict, KT_VERDICT_FASTER);
    assert_true(fabs(r.rows[0].speedup_median - 2e6) < 1e-3);
    kt_compare_free(&r);
    assert_int_equal(kt_compare(z, z, NULL, &r), 0);
    assert_int_equal(r.rows[0].verdict, KT_VERDICT_UNSURE);
    assert_true(isnan(r.rows[0].speedup_median));
    assert_true(isnan(r.rows[0].ci_lo) && isnan(r.rows[0].ci_hi)); /* no interval beside a "-" speedup */
    assert_non_null(strstr(r.rows[0].reason, "resolution"));
    kt_compare_free(&r);
    synth_free(z);
    synth_free(ms);
}

static void test_estimate_reaches_the_u_test(void **state)
{
    (void)state;
    /* 3 samples a side, --min-samples 3, a clean 2x regression: p = 0.1 is the smallest 3 v 3 can give, so the
     * estimate may not say 3 (what it has); at alpha 0.05 the U test needs 4 a side. */
    kt_snapshot_t *b = synth_snapshot(1), *a = synth_snapshot(1);
    add_samples(b, "k", 3, 100, 1);
    add_samples(a, "k", 3, 200, 1);
    kt_compare_opts_t o = {.min_samples = 3};
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, &o, &r), 0);
    const kt_compare_row_t *row = &r.rows[0];
    assert_int_equal(row->verdict, KT_VERDICT_UNSURE);
    assert_true(fabs(row->p_value - 0.1) < 1e-12);
    assert_true(row->decide_samples >= 4);
    assert_non_null(strstr(row->reason, "dispatches per side would decide it"));
    assert_null(strstr(row->reason, "about 3 dispatches"));
    kt_compare_free(&r);
    synth_free(a);
    synth_free(b);
}

static void test_identical_distributions_same(void **state)
{
    (void)state;
    /* 200 seeded trials of two samples from one distribution (5 % noise, 100 samples a side: enough for the
     * interval to fit in the +/-5 % band): SAME in at least 95 % of them, FASTER/SLOWER at most as often as
     * alpha allows. */
    int same = 0, changed = 0;
    const int trials = 200;
    for (int t = 0; t < trials; t++) {
        kt_snapshot_t *b = synth_snapshot(1), *a = synth_snapshot(1);
        synth_add(b, "k", KT_BACKEND_CPU, "host", 100, 50000.0, 0.05, 1000 + 2 * (uint64_t)t);
        synth_add(a, "k", KT_BACKEND_CPU, "host", 100, 50000.0, 0.05, 1001 + 2 * (uint64_t)t);
        kt_compare_opts_t o = {.bootstrap = 500, .seed = (uint64_t)t + 1};
        kt_compare_result_t r;
        assert_int_equal(kt_compare(b, a, &o, &r), 0);
        same += r.rows[0].verdict == KT_VERDICT_SAME;
        changed += r.rows[0].verdict == KT_VERDICT_FASTER || r.rows[0].verdict == KT_VERDICT_SLOWER;
        kt_compare_free(&r);
        synth_free(a);
        synth_free(b);
    }
    print_message("identical distributions: SAME in %d / %d trials, FASTER/SLOWER in %d\n", same, trials, changed);
    assert_true(same >= trials * 95 / 100);
    assert_true(changed <= trials * 5 / 100);

    /* Noisier and smaller (15 % noise, 15 samples): the interval cannot rule out a 5 % change, so the verdict
     * is mostly UNSURE, but a false FASTER/SLOWER stays at most as frequent as alpha. */
    int unsure = 0;
    changed = 0;
    for (int t = 0; t < trials; t++) {
        kt_snapshot_t *b = synth_snapshot(1), *a = synth_snapshot(1);
        synth_add(b, "k", KT_BACKEND_CPU, "host", 15, 50000.0, 0.15, 5000 + 2 * (uint64_t)t);
        synth_add(a, "k", KT_BACKEND_CPU, "host", 15, 50000.0, 0.15, 5001 + 2 * (uint64_t)t);
        kt_compare_opts_t o = {.bootstrap = 500, .seed = (uint64_t)t + 1};
        kt_compare_result_t r;
        assert_int_equal(kt_compare(b, a, &o, &r), 0);
        unsure += r.rows[0].verdict == KT_VERDICT_UNSURE;
        changed += r.rows[0].verdict == KT_VERDICT_FASTER || r.rows[0].verdict == KT_VERDICT_SLOWER;
        kt_compare_free(&r);
        synth_free(a);
        synth_free(b);
    }
    print_message("noisy identical distributions: UNSURE in %d / %d, FASTER/SLOWER in %d\n", unsure, trials, changed);
    assert_true(unsure >= trials / 2);
    assert_true(changed <= trials * 5 / 100);
}

static void test_small_samples_unsure(void **state)
{
    (void)state;
    kt_snapshot_t *b = synth_snapshot(2), *a = synth_snapshot(2);
    synth_add(b, "few", KT_BACKEND_CPU, "host", 8, 1000000.0, 0.01, 3);
    synth_add(a, "few", KT_BACKEND_CPU, "host", 20, 500000.0, 0.01, 4); /* a clear 2x, but 8 samples before */
    synth_add(b, "nine", KT_BACKEND_CPU, "host", 9, 1000000.0, 0.01, 5);
    synth_add(a, "nine", KT_BACKEND_CPU, "host", 9, 500000.0, 0.01, 6);
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);
    const kt_compare_row_t *few = find_row(&r, "few", KT_BACKEND_CPU, "host");
    assert_non_null(few);
    assert_int_equal(few->verdict, KT_VERDICT_UNSURE);
    assert_non_null(strstr(few->reason, "8 samples in BEFORE"));
    assert_true(fabs(few->speedup_median - 2.0) < 0.05); /* the numbers are still reported */
    const kt_compare_row_t *nine = find_row(&r, "nine", KT_BACKEND_CPU, "host");
    assert_int_equal(nine->verdict, KT_VERDICT_FASTER); /* 9 on each side is enough */
    assert_int_equal(r.geomean_kernels, 1);             /* the unsure one stays out of the summary */
    kt_compare_free(&r);
    synth_free(a);
    synth_free(b);
}

static void test_noise_exceeds_change_unsure(void **state)
{
    (void)state;
    /* 30 % noise, 12 % change, many samples: significant, beyond the threshold, but inside the noise. */
    kt_snapshot_t *b = synth_snapshot(1), *a = synth_snapshot(1);
    synth_add(b, "noisy", KT_BACKEND_CPU, "host", 2000, 1000000.0, 0.30, 7);
    synth_add(a, "noisy", KT_BACKEND_CPU, "host", 2000, 1000000.0 / 1.12, 0.30, 8);
    kt_compare_opts_t o = {.bootstrap = 300};
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, &o, &r), 0);
    assert_true(r.rows[0].p_value < 0.05);
    assert_true(r.rows[0].speedup_median > 1.05);
    assert_int_equal(r.rows[0].verdict, KT_VERDICT_UNSURE);
    assert_non_null(strstr(r.rows[0].reason, "noise"));
    /* more samples do not shrink the noise: no estimate, and the reason says so */
    assert_int_equal(r.rows[0].decide_samples, 0);
    assert_non_null(strstr(r.rows[0].reason, "more dispatches would not decide it"));
    kt_compare_free(&r);
    synth_free(a);
    synth_free(b);
}

static void test_no_samples_fallback(void **state)
{
    (void)state;
    kt_snapshot_t *b = synth_snapshot(1), *a = synth_snapshot(1);
    kt_kernel_timing_t *eb = synth_add(b, "agg", KT_BACKEND_OPENCL, "pocl", 0, 0.0, 0.0, 9);
    kt_kernel_timing_t *ea = synth_add(a, "agg", KT_BACKEND_OPENCL, "pocl", 50, 400.0, 0.01, 10);
    eb->dispatch_count = 100;
    eb->p50_ns = 800;
    eb->mean_ns = 820.0;
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);
    const kt_compare_row_t *row = &r.rows[0];
    assert_int_equal(row->verdict, KT_VERDICT_UNSURE);
    assert_non_null(strstr(row->reason, "no raw samples in BEFORE"));
    assert_true(fabs(row->speedup_median - 800.0 / ea->p50_ns) < 0.05);
    assert_true(isnan(row->p_value));
    assert_true(isnan(row->ci_lo));
    assert_int_equal(r.geomean_kernels, 0);
    assert_true(isnan(r.geomean_speedup));
    kt_compare_free(&r);
    synth_free(a);
    synth_free(b);
}

/* ---------------------------------------------------------------------------------------------------
 * Matching
 * ------------------------------------------------------------------------------------------------- */

static void test_disjoint_kernel_sets(void **state)
{
    (void)state;
    kt_snapshot_t *b = synth_snapshot(3), *a = synth_snapshot(3);
    synth_add(b, "alpha", KT_BACKEND_CPU, "host", 20, 1000.0, 0.02, 11);
    synth_add(b, "beta", KT_BACKEND_CPU, "host", 20, 1000.0, 0.02, 12);
    synth_add(b, "gamma", KT_BACKEND_CPU, "host", 20, 1000.0, 0.02, 13);
    synth_add(a, "beta", KT_BACKEND_CPU, "host", 20, 1000.0, 0.02, 14);
    synth_add(a, "gamma", KT_BACKEND_CPU, "host", 20, 1000.0, 0.02, 15);
    synth_add(a, "delta", KT_BACKEND_CPU, "host", 20, 1000.0, 0.02, 16);
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);
    assert_int_equal(r.count, 4);
    assert_int_equal(r.matched, 2);
    assert_int_equal(r.before_only, 1);
    assert_int_equal(r.after_only, 1);
    assert_string_equal(r.rows[0].name, "alpha"); /* sorted by key */
    assert_int_equal(r.rows[0].presence, KT_PRESENT_BEFORE);
    assert_string_equal(r.rows[2].name, "delta");
    assert_int_equal(r.rows[2].presence, KT_PRESENT_AFTER);
    assert_int_equal(find_row(&r, "beta", KT_BACKEND_CPU, "host")->presence, KT_PRESENT_BOTH);
    kt_compare_free(&r);

    /* completely disjoint and empty snapshots */
    kt_snapshot_t *empty = synth_snapshot(0);
    assert_int_equal(kt_compare(empty, a, NULL, &r), 0);
    assert_int_equal(r.after_only, 3);
    assert_int_equal(r.matched, 0);
    assert_int_equal(r.geomean_kernels, 0);
    kt_compare_free(&r);
    assert_int_equal(kt_compare(empty, empty, NULL, &r), 0);
    assert_int_equal(r.count, 0);
    kt_compare_free(&r);
    synth_free(empty);
    synth_free(a);
    synth_free(b);
}

static void test_matching_by_key_not_order(void **state)
{
    (void)state;
    /* Same name on two backends and two devices, each with its own speedup; AFTER is in a shuffled order. */
    const char *names[] = {"blur", "blur", "blur", "scan"};
    const kt_backend_t backends[] = {KT_BACKEND_CPU, KT_BACKEND_OPENCL, KT_BACKEND_OPENCL, KT_BACKEND_CPU};
    const char *devices[] = {"host", "gpu0", "gpu1", "host"};
    const double speedups[] = {2.0, 0.5, 1.0, 1.5};
    const int order[] = {3, 1, 0, 2};
    kt_snapshot_t *b = synth_snapshot(4), *a = synth_snapshot(4), *a_sorted = synth_snapshot(4);
    for (int i = 0; i < 4; i++) {
        synth_add(b, names[i], backends[i], devices[i], 30, 10000.0, 0.02, 20 + (uint64_t)i);
        synth_add(a_sorted, names[i], backends[i], devices[i], 30, 10000.0 / speedups[i], 0.02, 30 + (uint64_t)i);
    }
    for (int k = 0; k < 4; k++) {
        int i = order[k];
        synth_add(a, names[i], backends[i], devices[i], 30, 10000.0 / speedups[i], 0.02, 30 + (uint64_t)i);
    }
    kt_compare_result_t r, rs;
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);
    assert_int_equal(kt_compare(b, a_sorted, NULL, &rs), 0);
    assert_int_equal(r.matched, 4);
    for (int i = 0; i < 4; i++) {
        const kt_compare_row_t *row = find_row(&r, names[i], backends[i], devices[i]);
        const kt_compare_row_t *srow = find_row(&rs, names[i], backends[i], devices[i]);
        assert_non_null(row);
        assert_true(fabs(row->speedup_median - speedups[i]) < 0.05 * speedups[i]);
        assert_true(row->speedup_median == srow->speedup_median); /* order changes nothing, bit for bit */
        assert_true(row->ci_lo == srow->ci_lo && row->ci_hi == srow->ci_hi);
        assert_int_equal(row->verdict, srow->verdict);
    }
    assert_int_equal(find_row(&r, "blur", KT_BACKEND_CPU, "host")->verdict, KT_VERDICT_FASTER);
    assert_int_equal(find_row(&r, "blur", KT_BACKEND_OPENCL, "gpu0")->verdict, KT_VERDICT_SLOWER);
    assert_int_equal(find_row(&r, "blur", KT_BACKEND_OPENCL, "gpu1")->verdict, KT_VERDICT_SAME);
    kt_compare_free(&r);
    kt_compare_free(&rs);
    synth_free(a);
    synth_free(a_sorted);
    synth_free(b);
}

static void test_geomean(void **state)
{
    (void)state;
    kt_snapshot_t *b = synth_snapshot(2), *a = synth_snapshot(2);
    synth_add(b, "up", KT_BACKEND_CPU, "host", 50, 1000.0, 0.01, 40);
    synth_add(a, "up", KT_BACKEND_CPU, "host", 50, 500.0, 0.01, 41);
    synth_add(b, "down", KT_BACKEND_CPU, "host", 50, 1000.0, 0.01, 42);
    synth_add(a, "down", KT_BACKEND_CPU, "host", 50, 2000.0, 0.01, 43);
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);
    assert_int_equal(r.geomean_kernels, 2);
    assert_true(fabs(r.geomean_speedup - 1.0) < 0.02); /* sqrt(2 * 0.5) */
    assert_true(r.geomean_ci_lo <= r.geomean_speedup && r.geomean_speedup <= r.geomean_ci_hi);
    assert_int_equal(r.geomean_verdict, KT_VERDICT_SAME);
    assert_int_equal(r.faster, 1);
    assert_int_equal(r.slower, 1);
    kt_compare_free(&r);
    synth_free(a);
    synth_free(b);
}

/* ---------------------------------------------------------------------------------------------------
 * Options, determinism, Mann-Whitney U
 * ------------------------------------------------------------------------------------------------- */

static void test_options(void **state)
{
    (void)state;
    kt_snapshot_t *b = synth_snapshot(1), *a = synth_snapshot(1);
    synth_add(b, "k", KT_BACKEND_CPU, "host", 100, 1000000.0, 0.01, 50);
    synth_add(a, "k", KT_BACKEND_CPU, "host", 100, 1000000.0 / 1.03, 0.01, 51); /* 3 % faster */
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);
    assert_int_equal(r.rows[0].verdict, KT_VERDICT_SAME); /* real, but the whole CI is inside the default 5 % */
    assert_true(r.opts.threshold_pct == 5.0 && r.opts.alpha == 0.05 && r.opts.min_samples == 9);
    kt_compare_free(&r);
    kt_compare_opts_t o = {.threshold_pct = 2.0};
    assert_int_equal(kt_compare(b, a, &o, &r), 0);
    assert_int_equal(r.rows[0].verdict, KT_VERDICT_FASTER);
    double lo = r.rows[0].ci_lo;
    kt_compare_free(&r);
    assert_int_equal(kt_compare(b, a, &o, &r), 0);
    assert_true(r.rows[0].ci_lo == lo); /* seeded: reproducible */
    kt_compare_free(&r);
    o.min_samples = 200;
    assert_int_equal(kt_compare(b, a, &o, &r), 0);
    assert_int_equal(r.rows[0].verdict, KT_VERDICT_UNSURE);
    kt_compare_free(&r);
    o = (kt_compare_opts_t){.alpha = 1.5};
    assert_int_equal(kt_compare(b, a, &o, &r), KT_EINVAL);
    assert_int_equal(r.count, 0);
    assert_int_equal(kt_compare(NULL, a, NULL, &r), KT_EINVAL);
    assert_int_equal(kt_compare(b, a, NULL, NULL), KT_EINVAL);
    synth_free(a);
    synth_free(b);
}

static void test_mann_whitney_values(void **state)
{
    (void)state;
    const uint64_t lo[] = {1, 2, 3, 4, 5}, hi[] = {6, 7, 8, 9, 10};
    double u, p;
    assert_int_equal(kt_mann_whitney(lo, 5, hi, 5, &u, &p), 0);
    assert_true(u == 0.0);
    assert_true(fabs(p - 2.0 / 252.0) < 1e-12); /* exact: 2 of C(10,5) arrangements are this extreme */
    assert_int_equal(kt_mann_whitney(hi, 5, lo, 5, &u, &p), 0);
    assert_true(u == 25.0);
    assert_true(fabs(p - 2.0 / 252.0) < 1e-12);
    /* ties: normal approximation; every value equal gives no evidence */
    const uint64_t same[] = {7, 7, 7, 7};
    assert_int_equal(kt_mann_whitney(same, 4, same, 4, &u, &p), 0);
    assert_true(u == 8.0 && p == 1.0);
    /* with ties: U counts ties half; p symmetric in the sides and U_a + U_b = na * nb */
    const uint64_t a[] = {1, 2, 2, 3, 5, 5, 8}, b[] = {2, 4, 5, 6, 6, 9};
    double u2, p2;
    assert_int_equal(kt_mann_whitney(a, 7, b, 6, &u, &p), 0);
    assert_int_equal(kt_mann_whitney(b, 6, a, 7, &u2, &p2), 0);
    assert_true(fabs(u + u2 - 42.0) < 1e-12);
    assert_true(fabs(p - p2) < 1e-12);
    /* brute force U: pairs a > b plus half the ties */
    double want = 0.0;
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 6; j++) want += a[i] > b[j] ? 1.0 : a[i] == b[j] ? 0.5 : 0.0;
    assert_true(fabs(u - want) < 1e-12);
    assert_true(p > 0.05 && p < 1.0);
    assert_int_equal(kt_mann_whitney(a, 0, b, 6, &u, &p), KT_EINVAL);
}

/* ---------------------------------------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------------------------------------- */

static char *print_to_string(const kt_compare_result_t *r, kt_compare_format_t f)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    assert_int_equal(kt_compare_print(m, r, f), 0);
    fclose(m);
    return buf;
}

static void test_output_formats(void **state)
{
    (void)state;
    kt_snapshot_t *b = synth_snapshot(3), *a = synth_snapshot(3);
    synth_add(b, "blur", KT_BACKEND_CPU, "host", 30, 2000000.0, 0.02, 60);
    synth_add(a, "blur", KT_BACKEND_CPU, "host", 30, 1000000.0, 0.02, 61);
    synth_add(b, "old|pipe", KT_BACKEND_CPU, "host", 30, 1000.0, 0.02, 62);
    synth_add(a, "new", KT_BACKEND_VULKAN, "llvmpipe", 3, 1000.0, 0.02, 63);
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);

    char *text = print_to_string(&r, KT_COMPARE_TEXT);
    assert_non_null(strstr(text, "blur"));
    assert_non_null(strstr(text, "FASTER"));
    assert_non_null(strstr(text, " ms "));
    assert_non_null(strstr(text, "geomean (1)"));
    assert_non_null(strstr(text, "only in BEFORE: old|pipe (CPU, host)"));
    assert_non_null(strstr(text, "only in AFTER: new (Vulkan, llvmpipe)"));
    free(text);

    char *md = print_to_string(&r, KT_COMPARE_MARKDOWN);
    assert_non_null(strstr(md, "| kernel | backend |"));
    assert_non_null(strstr(md, "**FASTER**"));
    assert_non_null(strstr(md, "old\\|pipe")); /* a pipe in a name does not break the table */
    free(md);

    char *js = print_to_string(&r, KT_COMPARE_JSON);
    cJSON *root = cJSON_Parse(js);
    assert_non_null(root);
    cJSON *kernels = cJSON_GetObjectItem(root, "kernels");
    assert_int_equal(cJSON_GetArraySize(kernels), 3);
    cJSON *k0 = cJSON_GetArrayItem(kernels, 0);
    assert_string_equal(cJSON_GetObjectItem(k0, "name")->valuestring, "blur");
    assert_string_equal(cJSON_GetObjectItem(k0, "verdict")->valuestring, "FASTER");
    assert_true(fabs(cJSON_GetObjectItem(k0, "speedup_median")->valuedouble - 2.0) < 0.05);
    cJSON *k1 = cJSON_GetArrayItem(kernels, 1); /* "new": one-sided, NaN fields are null */
    assert_string_equal(cJSON_GetObjectItem(k1, "presence")->valuestring, "after_only");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(k1, "p_value")));
    cJSON *sum = cJSON_GetObjectItem(root, "summary");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(sum, "regression")));
    assert_int_equal(cJSON_GetObjectItem(sum, "faster")->valueint, 1);
    cJSON_Delete(root);
    free(js);

    assert_int_equal(kt_compare_print(NULL, &r, KT_COMPARE_TEXT), KT_EINVAL);
    assert_int_equal(kt_compare_print(stdout, &r, (kt_compare_format_t)42), KT_EINVAL);
    assert_string_equal(kt_verdict_name(KT_VERDICT_SLOWER), "SLOWER");
    kt_compare_free(&r);
    synth_free(a);
    synth_free(b);
}

/* An UNSURE row gets an estimate of the samples per side that would decide it; drawing that many from the same
 * distributions decides most trials (the estimate aims at 80 %), while the original size decides few. Both an
 * effect beyond the threshold (decided as FASTER) and one inside it (decided as SAME) are checked. */
static void test_unsure_estimate_decides(void **state)
{
    (void)state;
    static const struct {
        uint32_t n;         /* samples per side at first */
        double shift;       /* true speedup */
        double sigma;       /* lognormal spread */
        kt_verdict_t want;  /* the verdict enough samples reach */
    } kCases[] = {{5, 1.08, 0.05, KT_VERDICT_FASTER}, {12, 1.0, 0.10, KT_VERDICT_SAME}};
    for (size_t k = 0; k < sizeof kCases / sizeof kCases[0]; k++) {
        kt_snapshot_t *b = synth_snapshot(1), *a = synth_snapshot(1);
        synth_add(b, "k", KT_BACKEND_CPU, "host", kCases[k].n, 1000000.0, kCases[k].sigma, 100 + k);
        synth_add(a, "k", KT_BACKEND_CPU, "host", kCases[k].n, 1000000.0 / kCases[k].shift, kCases[k].sigma, 200 + k);
        kt_compare_opts_t o = {.bootstrap = 500};
        kt_compare_result_t r;
        assert_int_equal(kt_compare(b, a, &o, &r), 0);
        assert_int_equal(r.rows[0].verdict, KT_VERDICT_UNSURE);
        uint64_t n = r.rows[0].decide_samples;
        print_message("shift %.2f: %u samples UNSURE (%s); estimate %llu per side\n", kCases[k].shift, kCases[k].n,
                      r.rows[0].reason, (unsigned long long)n);
        assert_true(n > kCases[k].n && n < 100000);
        assert_non_null(strstr(r.rows[0].reason, "dispatches per side would decide it"));
        kt_compare_free(&r);
        synth_free(a);
        synth_free(b);
        int decided = 0, trials = 20;
        for (int t = 0; t < trials; t++) {
            b = synth_snapshot(1);
            a = synth_snapshot(1);
            synth_add(b, "k", KT_BACKEND_CPU, "host", (uint32_t)n, 1000000.0, kCases[k].sigma, 1000 + 2 * t);
            synth_add(a, "k", KT_BACKEND_CPU, "host", (uint32_t)n, 1000000.0 / kCases[k].shift, kCases[k].sigma,
                      1001 + 2 * t);
            assert_int_equal(kt_compare(b, a, &o, &r), 0);
            decided += r.rows[0].verdict == kCases[k].want;
            kt_compare_free(&r);
            synth_free(a);
            synth_free(b);
        }
        print_message("  with %llu per side: %s in %d / %d trials\n", (unsigned long long)n,
                      kt_verdict_name(kCases[k].want), decided, trials);
        assert_true(decided >= trials / 2);
    }
}

/* Hostile names in the comparison's text and markdown: escaped, no fake rows, no raw HTML or pipes. */
static void test_hostile_names(void **state)
{
    (void)state;
    static const char *const kNames[] = {"t\x1b]0;owned\x07", "c\x1b[2J", "r\rfake\nrow", "bidi\xe2\x80\xae" "exe",
                                         "csi\xc2\x9b" "31m", "<img src=x>|"};
    size_t count = sizeof kNames / sizeof kNames[0];
    kt_snapshot_t *b = synth_snapshot(count), *a = synth_snapshot(count);
    for (size_t i = 0; i < count; i++) {
        synth_add(b, kNames[i], KT_BACKEND_CPU, "host", 20, 1000000.0, 0.02, 10 + i);
        synth_add(a, kNames[i], KT_BACKEND_CPU, i == 0 ? "dev\x1b[1m" : "host", 20, 1000000.0, 0.02, 30 + i);
    }
    kt_compare_result_t r;
    assert_int_equal(kt_compare(b, a, NULL, &r), 0);
    for (int f = 0; f < 2; f++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        assert_int_equal(kt_compare_print(m, &r, f ? KT_COMPARE_MARKDOWN : KT_COMPARE_TEXT), 0);
        fclose(m);
        for (const unsigned char *p = (const unsigned char *)buf; *p; p++) {
            assert_false((*p < 0x20 && *p != '\n') || *p == 0x7f);
            assert_false(*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f);
            assert_false(*p == 0xe2 && p[1] == 0x80 && p[2] == 0xae);
        }
        if (f)
            assert_null(strstr(buf, "<img"));
        assert_non_null(strstr(buf, f ? "r\\\\x0dfake\\\\x0arow" : "r\\x0dfake\\x0arow"));
        if (f)
            assert_non_null(strstr(buf, "&lt;img src=x&gt;\\|"));
        free(buf);
    }
    kt_compare_free(&r);
    synth_free(a);
    synth_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_speedup_is_faster),
        cmocka_unit_test(test_identical_distributions_same),
        cmocka_unit_test(test_small_samples_unsure),
        cmocka_unit_test(test_noise_exceeds_change_unsure),
        cmocka_unit_test(test_no_samples_fallback),
        cmocka_unit_test(test_disjoint_kernel_sets),
        cmocka_unit_test(test_matching_by_key_not_order),
        cmocka_unit_test(test_geomean),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_mann_whitney_values),
        cmocka_unit_test(test_output_formats),
        cmocka_unit_test(test_unsure_estimate_decides),
        cmocka_unit_test(test_hostile_names),
        cmocka_unit_test(test_zero_median_regression),
        cmocka_unit_test(test_estimate_reaches_the_u_test),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
