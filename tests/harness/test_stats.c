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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_odd_array),
        cmocka_unit_test(test_even_and_input_untouched),
        cmocka_unit_test(test_empty_and_errors),
        cmocka_unit_test(test_ci_rank_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
