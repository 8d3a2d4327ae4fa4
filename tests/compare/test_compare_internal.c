/* test_compare_internal.c — white-box checks of compare.c's bootstrap median (the Beta draw and the tabulated law),
 * its percentile selection and the exact U distribution. */
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

/* KS distance between two sorted samples of equal size. */
static double ks_distance(const double *x, const double *y, size_t n)
{
    double d = 0.0;
    size_t i = 0, j = 0;
    while (i < n && j < n) {
        double v = x[i] < y[j] ? x[i] : y[j];
        while (i < n && x[i] <= v) i++;
        while (j < n && y[j] <= v) j++;
        double diff = fabs((double)i - (double)j) / (double)n;
        if (diff > d) d = diff;
    }
    return d;
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
        double d = ks_distance(fast, slow, REPS);
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

/* The probability the alias table gives cell k: its own kept share plus what other cells hand to it. */
static double alias_prob(const alias_t *a, uint32_t k)
{
    double p = ldexp((double)a->keep[k], -64);
    for (uint32_t c = 0; c < a->cells; c++)
        if (c != k && a->alias[c] == k) p += 1.0 - ldexp((double)a->keep[c], -64);
    return p / a->cells;
}

/* P(the median's sorted indices are (i, j)) under the first-index law and the gap's (the path of even n above
 * MED_PAIR_TABLE_MAX). */
static double law_split_prob(const med_law_t *l, uint32_t i, uint32_t j)
{
    if (l->n & 1) return i == j ? alias_prob(&l->first, i) : 0.0;
    if (i == j) return alias_prob(&l->first, 2 * i);
    if (j < i) return 0.0;
    double K = l->n - 1 - i, r = l->n - l->m, t = j - i - 1;
    return alias_prob(&l->first, 2 * i + 1) * (pow((K - t) / K, r) - pow((K - t - 1) / K, r));
}

/* The same under the joint pair table (even n up to MED_PAIR_TABLE_MAX). */
static double law_pair_prob(const med_law_t *l, uint32_t i, uint32_t j)
{
    uint32_t cells = l->n * (l->n + 1) / 2;
    assert_int_equal(l->pairs.cells, cells);
    for (uint32_t c = 0; c < cells; c++)
        if (l->pair_i[c] == i && l->pair_j[c] == j) return alias_prob(&l->pairs, c);
    return 0.0;
}

/* Every one of the n^n resamples of n indices, enumerated: the frequency of each (X(m), X(m+1)) pair (X(m) for
 * odd n) must equal the tabulated law's probability. */
static void test_med_law_matches_enumeration(void **state)
{
    (void)state;
    for (uint32_t n = 1; n <= 7; n++) {
        med_law_t *l = med_law_build(n);
        assert_non_null(l);
        assert_int_equal(l->m, (n + 1) / 2);
        double freq[7][7] = {{0}};
        uint32_t idx[7] = {0}, cnt[7];
        double total = 0.0;
        for (;;) {
            memset(cnt, 0, sizeof cnt);
            for (uint32_t t = 0; t < n; t++) cnt[idx[t]]++;
            uint32_t seen = 0, xm = n, xm1 = n, m = l->m; /* the m-th and (m+1)-th smallest, 1-based */
            for (uint32_t v = 0; v < n; v++) {
                if (xm == n && seen + cnt[v] >= m) xm = v;
                if (xm1 == n && seen + cnt[v] >= m + 1) xm1 = v;
                seen += cnt[v];
            }
            freq[xm][(n & 1) ? xm : xm1] += 1.0;
            total += 1.0;
            uint32_t t = 0;
            while (t < n && ++idx[t] == n) idx[t++] = 0;
            if (t == n) break;
        }
        double sum = 0.0;
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < n; j++) {
                double want = freq[i][j] / total, got = law_split_prob(l, i, j);
                double joint = (n & 1) ? got : law_pair_prob(l, i, j);
                sum += joint;
                if (fabs(want - got) > 1e-12 || fabs(want - joint) > 1e-12)
                    print_message("n=%u (%u,%u): enumerated %.15f law %.15f joint %.15f\n", n, i, j, want, got, joint);
                assert_true(fabs(want - got) <= 1e-12);
                assert_true(fabs(want - joint) <= 1e-12);
            }
        assert_true(fabs(sum - 1.0) <= 1e-12);
        assert_true((l->pair_i != NULL) == !(n & 1));
        med_law_free(l);
    }
}

/* The alias table itself: a skewed law with zero cells is reproduced exactly, and draws never land on a zero. */
static void test_alias_table(void **state)
{
    (void)state;
    const double p[6] = {0.0, 0.5, 0.125, 0.0, 0.25, 0.125};
    alias_t a;
    assert_int_equal(alias_build(&a, p, 6), 0);
    for (uint32_t k = 0; k < 6; k++) assert_true(fabs(alias_prob(&a, k) - p[k]) <= 1e-15);
    rng_t r;
    rng_seed(&r, 5);
    uint32_t hits[6] = {0};
    for (int t = 0; t < 80000; t++) hits[alias_draw(&a, &r)]++;
    assert_int_equal(hits[0], 0);
    assert_int_equal(hits[3], 0);
    for (uint32_t k = 0; k < 6; k++) /* 5 standard deviations of a binomial count */
        assert_true(fabs(hits[k] - 80000 * p[k]) <= 5.0 * sqrt(80000 * p[k] * (1.0 - p[k])) + 1e-9);
    alias_free(&a);
}

/* The tabulated draws (through side_log_median, memos and all) have the law of an explicit resample's median,
 * for sizes on each path: odd, even with the joint pair table, even above it (gap by inversion), and beyond the
 * tables (resample_median). */
static void test_side_median_distribution(void **state)
{
    (void)state;
    enum { REPS = 40000, NMAX = 600 };
    static double fast[REPS], slow[REPS];
    static uint64_t sorted[NMAX], tmp[NMAX];
    const uint32_t sizes[] = {1, 2, 3, 12, 51, 100, 128, 200, 513, 600};
    med_cache_t *cache = calloc(1, sizeof *cache);
    assert_non_null(cache);
    rng_t r;
    rng_seed(&r, 17);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        uint32_t n = sizes[si];
        for (uint32_t i = 0; i < n; i++) sorted[i] = 1000 + 7 * (uint64_t)i + rng_below(&r, 3) + (i % 5 == 0 ? 400 : 0);
        qsort(sorted, n, sizeof *sorted, cmp_u64_test);
        side_t sd;
        assert_int_equal(side_init(&sd, sorted, n, cache, (int)(si & 1)), 0);
        assert_true((sd.law != NULL) == (n <= MED_TABLE_MAX));
        assert_true((sd.pair != NULL) == (n <= MED_PAIR_TABLE_MAX && !(n & 1)));
        for (int k = 0; k < REPS; k++) {
            fast[k] = side_log_median(&sd, &r);
            for (uint32_t i = 0; i < n; i++) tmp[i] = sorted[rng_below(&r, n)];
            qsort(tmp, n, sizeof *tmp, cmp_u64_test);
            double med = (n & 1) ? (double)tmp[n / 2] : 0.5 * ((double)tmp[n / 2 - 1] + (double)tmp[n / 2]);
            slow[k] = log(med);
        }
        qsort(fast, REPS, sizeof *fast, cmp_dbl);
        qsort(slow, REPS, sizeof *slow, cmp_dbl);
        double d = ks_distance(fast, slow, REPS);
        print_message("n=%u: KS distance %.4f\n", n, d);
        assert_true(d < 0.02);
    }
    med_cache_free(cache);
}

/* Selection gives what sorting and interpolating gives, on distinct values and on heavy ties, at any level. */
static void test_percentile_interval_equals_sorted(void **state)
{
    (void)state;
    enum { N = 2001 };
    static double v[N], sorted[N];
    rng_t r;
    rng_seed(&r, 23);
    const double levels[] = {0.5, 0.9, 0.95, 0.98, 0.99, 0.999, 1.0, 0.0};
    for (int t = 0; t < 200; t++) {
        size_t n = 1 + rng_below(&r, N);
        uint32_t spread = t % 3 == 0 ? 3 : (t % 3 == 1 ? 50 : 1000000); /* ties, some ties, distinct */
        for (size_t i = 0; i < n; i++) sorted[i] = (double)rng_below(&r, spread) / 7.0;
        double conf = levels[t % 8];
        memcpy(v, sorted, n * sizeof *v);
        qsort(sorted, n, sizeof *sorted, cmp_dbl);
        double tail = 0.5 * (1.0 - conf), want[2], q[2] = {tail, 1.0 - tail};
        for (int e = 0; e < 2; e++) {
            double pos = q[e] * (double)(n - 1);
            size_t k = (size_t)pos;
            want[e] = k >= n - 1 ? sorted[n - 1] : sorted[k] + (pos - (double)k) * (sorted[k + 1] - sorted[k]);
        }
        double lo, hi;
        percentile_interval(v, n, conf, &lo, &hi);
        assert_true(lo == want[0] && hi == want[1]);
    }
}

/* The fewest samples per side for which the exact U test can reach p < alpha, against the exact distribution's
 * smallest p-value (u_exact_p's own). */
static void test_u_min_samples(void **state)
{
    (void)state;
    assert_int_equal(u_min_samples(0.05), 4); /* 3 v 3: 2/20 = 0.1; 4 v 4: 2/70 */
    assert_int_equal(u_min_samples(0.1), 4);  /* p < alpha, strictly */
    assert_int_equal(u_min_samples(0.2), 3);
    assert_int_equal(u_min_samples(0.01), 5); /* 2/252 */
    for (uint32_t n = 2; n <= 8; n++) {
        uint64_t b[16], a[16];
        for (uint32_t i = 0; i < n; i++) b[i] = 100 + i, a[i] = 200 + i;
        double u, p;
        assert_int_equal(mann_whitney_sorted(b, n, a, n, &u, &p), 0);
        assert_int_equal(u_min_samples(p * 1.0000001) <= n, 1);
        assert_int_equal(u_min_samples(p) > n, 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resample_median_distribution),
        cmocka_unit_test(test_exact_u_matches_enumeration),
        cmocka_unit_test(test_normal_approximation_close_to_exact),
        cmocka_unit_test(test_percentile_interval),
        cmocka_unit_test(test_med_law_matches_enumeration),
        cmocka_unit_test(test_alias_table),
        cmocka_unit_test(test_side_median_distribution),
        cmocka_unit_test(test_percentile_interval_equals_sorted),
        cmocka_unit_test(test_u_min_samples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
