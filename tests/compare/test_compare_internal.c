/* test_compare_internal.c — white-box checks of compare.c's O(1) bootstrap median and exact U distribution. */
#include "../../src/analysis/compare.c"

#include <setjmp.h>
#include <stddef.h>
#include <cmocka.h>

static int cmp_u64_test(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Uniform in [0, n). */
static uint32_t rng_below(rng_t *r, uint32_t n) { return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32); }

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The O(1) resample median has the distribution of the median of an explicit resample: compare the two
 * empirical distributions (Kolmogorov-Smirnov distance) over many replicates, for odd and even n. */
static void test_resample_median_distribution(void **state)
{
    (void)state;
    enum { REPS = 40000 };
    static double fast[REPS], slow[REPS];
    const uint32_t sizes[] = {1, 2, 3, 7, 12, 51, 100};
    rng_t r;
    rng_seed(&r, 11);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        uint32_t n = sizes[si];
        uint64_t sorted[100], tmp[100];
        for (uint32_t i = 0; i < n; i++) sorted[i] = 1000 + 10 * (uint64_t)i + rng_below(&r, 5);
        for (int k = 0; k < REPS; k++) {
            fast[k] = resample_median(sorted, n, &r);
            for (uint32_t i = 0; i < n; i++) tmp[i] = sorted[rng_below(&r, n)];
            qsort(tmp, n, sizeof *tmp, cmp_u64_test);
            slow[k] = (n & 1) ? (double)tmp[n / 2] : 0.5 * ((double)tmp[n / 2 - 1] + (double)tmp[n / 2]);
        }
        qsort(fast, REPS, sizeof *fast, cmp_dbl);
        qsort(slow, REPS, sizeof *slow, cmp_dbl);
        double d = 0.0;
        size_t i = 0, j = 0;
        while (i < REPS && j < REPS) {
            double x = fast[i] < slow[j] ? fast[i] : slow[j];
            while (i < REPS && fast[i] <= x) i++;
            while (j < REPS && slow[j] <= x) j++;
            double diff = fabs((double)i - (double)j) / REPS;
            if (diff > d) d = diff;
        }
        print_message("n=%u: KS distance %.4f\n", n, d);
        assert_true(d < 0.02); /* critical value at alpha 0.001 for 2 x 40000 draws is 0.0138 */
    }
}

/* P-value by enumerating every split of the pooled ranks (na + nb <= 14). */
static double brute_p(size_t na, size_t nb, double u_obs)
{
    size_t n = na + nb;
    double le = 0, ge = 0, total = 0;
    for (uint32_t mask = 0; mask < (1u << n); mask++) {
        if ((size_t)__builtin_popcount(mask) != na) continue;
        double u = 0; /* rank k belongs to a when bit k is set; count b's below each a */
        size_t bs = 0;
        for (size_t k = 0; k < n; k++) {
            if (mask & (1u << k)) u += (double)bs;
            else bs++;
        }
        total++;
        le += u <= u_obs;
        ge += u >= u_obs;
    }
    double p = 2.0 * (le < ge ? le : ge) / total;
    return p > 1.0 ? 1.0 : p;
}

static void test_exact_u_matches_enumeration(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 2);
    for (int t = 0; t < 40; t++) {
        size_t na = 2 + rng_below(&r, 6), nb = 2 + rng_below(&r, 6);
        uint64_t a[8], b[8];
        /* distinct values: a from even numbers, b from odd ones */
        for (size_t i = 0; i < na; i++) a[i] = 2 * (uint64_t)rng_below(&r, 1000000);
        for (size_t i = 0; i < nb; i++) b[i] = 2 * (uint64_t)rng_below(&r, 1000000) + 1;
        double u, p;
        assert_int_equal(kt_mann_whitney(a, na, b, nb, &u, &p), 0);
        assert_true(fabs(p - brute_p(na, nb, u)) < 1e-12);
    }
}

static void test_normal_approximation_close_to_exact(void **state)
{
    (void)state;
    rng_t r;
    rng_seed(&r, 3);
    uint64_t a[40], b[40];
    for (int t = 0; t < 10; t++) {
        for (int i = 0; i < 40; i++) {
            a[i] = 2 * (uint64_t)rng_below(&r, 1000000);
            b[i] = 2 * (uint64_t)rng_below(&r, 1000000) + 1 + (uint64_t)t * 20000;
        }
        double u = 0.0, p_norm = 0.0, p_exact = 0.0; /* set by the calls; initialised for -O2 flow analysis */
        assert_int_equal(kt_mann_whitney(a, 40, b, 40, &u, &p_norm), 0); /* above 25: normal */
        assert_int_equal(mw_exact(40, 40, u, &p_exact), 0);
        assert_true(fabs(p_norm - p_exact) < 0.01 + 0.05 * p_exact);
    }
}

static void test_percentile_interval(void **state)
{
    (void)state;
    double v[101];
    for (int i = 0; i <= 100; i++) v[i] = 100 - i;
    double lo, hi;
    percentile_interval(v, 101, 0.95, &lo, &hi);
    assert_true(fabs(lo - 2.5) < 1e-12 && fabs(hi - 97.5) < 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resample_median_distribution),
        cmocka_unit_test(test_exact_u_matches_enumeration),
        cmocka_unit_test(test_normal_approximation_close_to_exact),
        cmocka_unit_test(test_percentile_interval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
