/* test_stats.c — kt_sample_stats and the median confidence-interval rank on arrays with known answers. */
#include <ktiming/stats.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

static void test_odd_array(void **state)
{
    (void)state;
    const uint64_t v[] = {9, 1, 8, 2, 7, 3, 6, 4, 5};
    kt_sample_stats_t st;
    assert_int_equal(kt_sample_stats(v, 9, &st), 0);
    assert_int_equal(st.count, 9);
    assert_int_equal(st.min_ns, 1);
    assert_int_equal(st.max_ns, 9);
    assert_true(fabs(st.median_ns - 5.0) < 1e-12);
    assert_true(fabs(st.mean_ns - 5.0) < 1e-12);
    assert_true(fabs(st.stddev_ns - sqrt(60.0 / 8.0)) < 1e-12);
    assert_true(fabs(st.mad_ns - 2.0) < 1e-12);           /* |x-5| = 0,1,1,2,2,3,3,4,4 */
    assert_true(fabs(st.p10_ns - 1.8) < 1e-12);           /* 0.1 * 8 = 0.8 between 1 and 2 */
    assert_true(fabs(st.p90_ns - 8.2) < 1e-12);
    assert_true(fabs(st.madrel - 1.4826 * 2.0 / 5.0) < 1e-12);
    /* n = 9: exact rank 2 ([x2, x8] covers the median with 96.1 %) */
    assert_true(fabs(st.median_ci_lo_ns - 2.0) < 1e-12);
    assert_true(fabs(st.median_ci_hi_ns - 8.0) < 1e-12);
}

static void test_even_and_input_untouched(void **state)
{
    (void)state;
    uint64_t v[] = {40, 10, 30, 20};
    kt_sample_stats_t st;
    assert_int_equal(kt_sample_stats(v, 4, &st), 0);
    assert_true(fabs(st.median_ns - 25.0) < 1e-12);
    assert_int_equal(v[0], 40); /* sorts a copy */
    assert_int_equal(v[1], 10);
    /* fewer than 6 samples: no 95 % interval exists, min and max are reported */
    assert_true(fabs(st.median_ci_lo_ns - 10.0) < 1e-12);
    assert_true(fabs(st.median_ci_hi_ns - 40.0) < 1e-12);
}

static void test_empty_and_errors(void **state)
{
    (void)state;
    kt_sample_stats_t st;
    st.count = 77;
    assert_int_equal(kt_sample_stats(NULL, 0, &st), 0);
    assert_int_equal(st.count, 0);
    assert_int_equal(kt_sample_stats(NULL, 3, &st), KT_EINVAL);
    const uint64_t one = 5;
    assert_int_equal(kt_sample_stats(&one, 1, NULL), KT_EINVAL);
    assert_int_equal(kt_sample_stats(&one, 1, &st), 0);
    assert_true(st.stddev_ns == 0.0 && st.median_ns == 5.0);
}

static void test_ci_rank_table(void **state)
{
    (void)state;
    /* Published distribution-free 95 % intervals for the median: n=6 -> (1,6), n=10 -> (2,9), n=20 -> (6,15),
     * n=100 -> (40,61). Below 6 there is none. */
    assert_int_equal(kt_median_ci_rank(5, 0.95), 0);
    assert_int_equal(kt_median_ci_rank(6, 0.95), 1);
    assert_int_equal(kt_median_ci_rank(10, 0.95), 2);
    assert_int_equal(kt_median_ci_rank(20, 0.95), 6);
    assert_int_equal(kt_median_ci_rank(100, 0.95), 40);
    /* normal approximation above 1000 stays close to the exact rank */
    uint32_t j = kt_median_ci_rank(10000, 0.95);
    assert_true(j >= 4900 && j <= 4903);
    assert_int_equal(kt_median_ci_rank(100, 1.5), 0);
}

/* The MAD against its definition, the median of every distance from the median sorted (what stats.c computed
 * before it merged the two runs of distances): equal, on samples with and without ties, odd and even counts,
 * values beyond 2^53 (whose distances round) and a median between two values. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_mad_against_definition(void **state)
{
    (void)state;
    enum { NMAX = 300 };
    uint64_t v[NMAX], sorted[NMAX], seed = 7;
    double d[NMAX];
    for (int t = 0; t < 20000; t++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = 1 + (size_t)(seed >> 33) % NMAX;
        uint64_t base = t % 4 == 3 ? (UINT64_C(1) << 60) : 10000, spread = t % 4 == 0 ? 3 : t % 4 == 1 ? 50 : 100000;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            v[i] = base + (seed >> 20) % spread * (t % 4 == 3 ? 4099 : 1);
        }
        kt_sample_stats_t st;
        assert_int_equal(kt_sample_stats(v, n, &st), 0);
        for (size_t i = 0; i < n; i++)
            sorted[i] = v[i];
        for (size_t i = 1; i < n; i++) /* insertion sort: the reference owes nothing to stats.c */
            for (size_t j = i; j > 0 && sorted[j] < sorted[j - 1]; j--) {
                uint64_t x = sorted[j];
                sorted[j] = sorted[j - 1];
                sorted[j - 1] = x;
            }
        double median = (n & 1) ? (double)sorted[n / 2] : 0.5 * ((double)sorted[n / 2 - 1] + (double)sorted[n / 2]);
        assert_true(st.median_ns == median);
        for (size_t i = 0; i < n; i++)
            d[i] = fabs((double)sorted[i] - median);
        qsort(d, n, sizeof *d, cmp_double);
        double mad = (n & 1) ? d[n / 2] : 0.5 * (d[n / 2 - 1] + d[n / 2]);
        if (st.mad_ns != mad)
            print_message("n %zu: mad %.17g, by definition %.17g\n", n, st.mad_ns, mad);
        assert_true(st.mad_ns == mad);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd_array),
        cmocka_unit_test(test_even_and_input_untouched),
        cmocka_unit_test(test_empty_and_errors),
        cmocka_unit_test(test_ci_rank_table),
        cmocka_unit_test(test_mad_against_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
