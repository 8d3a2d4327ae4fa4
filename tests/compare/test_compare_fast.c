/* test_compare_fast.c — the comparison's fast paths against the straightforward code they stand for, on many random
 * inputs (white-box: includes compare.c and compare_print.c): "%.*g" without printf (kt__fmt_g, fixed.h) against
 * snprintf and its read-back against strtod; the small sorts (src/shared/sort.h) against qsort; U from two merged
 * sorted samples against U from sorting the pooled sample; the bootstrap's two-table loop against side_log_median;
 * the tails' split selection against a sort; a row's JSON numbers and table cells through fixed.h against printf;
 * reasons joined without printf against vasprintf. */
#include "../../src/analysis/compare.c"
#include "../../src/analysis/compare_print.c"

#include <setjmp.h>
#include <stddef.h>
#include <cmocka.h>

static uint64_t next_u64(uint64_t *s) { return splitmix64(s); }

/* A double from one of the shapes the comparison prints (and some it never does). */
static double some_double(uint64_t *s)
{
    uint64_t r = next_u64(s);
    double v;
    switch (r % 8) {
    case 0: memcpy(&v, &r, sizeof v); return v;                                        /* any bits */
    case 1: return ldexp((double)(next_u64(s) >> 11), -53) * pow(10.0, (int)(r >> 8) % 50 - 25); /* any decade */
    case 2: return (double)(next_u64(s) % 100000) / (double)(1 + next_u64(s) % 1000); /* ratios */
    case 3: return ldexp((double)(next_u64(s) % 100000), -(int)((r >> 8) % 40));     /* exact binary fractions */
    case 4: return 9.999999999999999 * pow(10.0, (int)((r >> 8) % 30) - 15);          /* rounds up a decade */
    case 5: return -((double)(next_u64(s) % 1000000) / 1e6);                          /* negative */
    case 6: return exp(-(double)(next_u64(s) % 30000) / 1000.0);                      /* p-values */
    default: return (double)(next_u64(s) % 100000000) / 1024.0;                       /* means of counts */
    }
}

/* kt__fmt_g writes what snprintf writes, declines nothing in its documented range, and what it says strtod reads
 * back is what strtod reads back. */
static void test_fmt_g_matches_printf(void **state)
{
    (void)state;
    uint64_t s = 1;
    long handled = 0, in_range = 0, backs = 0;
    for (int i = 0; i < 100000; i++) {
        double v = some_double(&s);
        for (int prec = 1; prec <= 17; prec++) {
            char fast[40], slow[64];
            double back;
            size_t n = kt__fmt_g(fast, sizeof fast, v, prec, &back);
            int sn = snprintf(slow, sizeof slow, "%.*g", prec, v);
            double a = fabs(v);
            if (a >= 1e-13 && a < 1e25) {
                in_range++;
                if (!n) print_message("%.17g at %d digits declined\n", v, prec);
                assert_true(n > 0);
            }
            if (!n) continue;
            handled++;
            if ((int)n != sn || strcmp(fast, slow)) print_message("%.17g: '%s' for printf's '%s'\n", v, fast, slow);
            assert_int_equal(n, sn);
            assert_string_equal(fast, slow);
            if (!isnan(back)) {
                backs++;
                double want = strtod(slow, NULL);
                assert_memory_equal(&back, &want, sizeof back);
            }
        }
    }
    print_message("%ld formatted, %ld in range, %ld read-backs worked out\n", handled, in_range, backs);
    assert_true(backs > handled / 2);
}

/* Ties (a value exactly half-way between two roundings goes to the even digit) and small buffers. */
static void test_fmt_g_ties_and_limits(void **state)
{
    (void)state;
    for (int j = 0; j <= 40; j++)
        for (long m = 1; m < 4096; m += 3) {
            double v = ldexp((double)m, -j);
            for (int prec = 1; prec <= 17; prec++) {
                char fast[40], slow[64];
                size_t n = kt__fmt_g(fast, sizeof fast, v, prec, NULL);
                snprintf(slow, sizeof slow, "%.*g", prec, v);
                if (n) assert_string_equal(fast, slow);
            }
        }
    char buf[40];
    const double declined[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 0x1p-1074, 1e-300, 1e300};
    for (size_t i = 0; i < sizeof declined / sizeof declined[0]; i++)
        assert_int_equal(kt__fmt_g(buf, sizeof buf, declined[i], 15, NULL), 0);
    assert_int_equal(kt__fmt_g(buf, sizeof buf, 1.5, 0, NULL), 0);
    assert_int_equal(kt__fmt_g(buf, sizeof buf, 1.5, 18, NULL), 0);
    assert_int_equal(kt__fmt_g(buf, 4, 0.123456, 6, NULL), 0); /* "0.123456" does not fit in 4 bytes */
    assert_int_equal(kt__fmt_g(buf, 9, 0.123456, 6, NULL), 8);
    assert_string_equal(buf, "0.123456");
}

static int cmp_u64_ref(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static int cmp_double_ref(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The sort gives qsort's order, below, at and above the insertion-sort size, with and without ties. */
static void test_small_sorts(void **state)
{
    (void)state;
    enum { NMAX = 3 * KT_SORT_SMALL };
    uint64_t s = 2, u[NMAX], uref[NMAX];
    for (int t = 0; t < 20000; t++) {
        size_t n = (size_t)(next_u64(&s) % (NMAX + 1));
        uint64_t spread = t % 3 == 0 ? 4 : t % 3 == 1 ? 1000 : UINT64_MAX;
        for (size_t i = 0; i < n; i++) {
            uref[i] = u[i] = spread == UINT64_MAX ? next_u64(&s) : next_u64(&s) % spread;
        }
        kt__sort_u64_asc(u, n);
        qsort(uref, n, sizeof *uref, cmp_u64_ref);
        if (n)
            assert_memory_equal(u, uref, n * sizeof *u);
    }
}

/* U and p as compare.c computed them before: the pooled sample tagged and sorted. */
typedef struct tagged_t {
    uint64_t v;
    int group;
} tagged_t;

static int cmp_tagged(const void *x, const void *y) { return cmp_u64_ref(&((const tagged_t *)x)->v, &((const tagged_t *)y)->v); }

static void mann_whitney_pooled(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, double *u, double *p)
{
    size_t n = na + nb;
    tagged_t *all = malloc(n * sizeof *all);
    assert_non_null(all);
    for (size_t i = 0; i < na; i++) all[i] = (tagged_t){a[i], 0};
    for (size_t i = 0; i < nb; i++) all[na + i] = (tagged_t){b[i], 1};
    qsort(all, n, sizeof *all, cmp_tagged);
    double rank_a = 0.0, ties = 0.0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && all[j].v == all[i].v) j++;
        double t = (double)(j - i), avg = 0.5 * ((double)i + 1.0 + (double)j);
        for (size_t k = i; k < j; k++)
            if (all[k].group == 0) rank_a += avg;
        ties += t * t * t - t;
        i = j;
    }
    free(all);
    double dna = (double)na, dnb = (double)nb, dn = (double)n;
    *u = rank_a - dna * (dna + 1.0) / 2.0;
    if (ties == 0.0 && na <= KT_CMP_EXACT_MAX && nb <= KT_CMP_EXACT_MAX) {
        assert_int_equal(mw_exact(na, nb, *u, p), 0);
        return;
    }
    double var = dna * dnb / 12.0 * ((dn + 1.0) - (n > 1 ? ties / (dn * (dn - 1.0)) : 0.0));
    if (!(var > 0.0)) {
        *p = 1.0;
        return;
    }
    double z = (fabs(*u - dna * dnb / 2.0) - 0.5) / sqrt(var);
    *p = erfc((z < 0.0 ? 0.0 : z) / M_SQRT2);
    if (*p > 1.0) *p = 1.0;
}

static void test_mann_whitney_merge_equals_pooled_sort(void **state)
{
    (void)state;
    uint64_t s = 3, a[80], b[80];
    for (int t = 0; t < 3000; t++) {
        size_t na = 1 + next_u64(&s) % 80, nb = 1 + next_u64(&s) % 80;
        uint64_t spread = t % 4 == 0 ? 3 : t % 4 == 1 ? 40 : t % 4 == 2 ? 100000 : UINT64_MAX;
        for (size_t i = 0; i < na; i++) a[i] = spread == UINT64_MAX ? next_u64(&s) : next_u64(&s) % spread;
        for (size_t i = 0; i < nb; i++) b[i] = spread == UINT64_MAX ? next_u64(&s) : 7 + next_u64(&s) % spread;
        double u, p, u_ref, p_ref;
        assert_int_equal(kt_mann_whitney(a, na, b, nb, &u, &p), 0);
        mann_whitney_pooled(a, na, b, nb, &u_ref, &p_ref);
        assert_memory_equal(&u, &u_ref, sizeof u);
        assert_memory_equal(&p, &p_ref, sizeof p);
    }
}

/* bootstrap_log_ratio's loop for two joint-table sides draws what side_log_median draws, replicate for replicate;
 * so do the other sizes (one side tabulated by first index, or drawn by Beta variates). */
static void test_bootstrap_loops_agree(void **state)
{
    (void)state;
    enum { COUNT = 3000 };
    static double reps[COUNT], ref[COUNT];
    static uint64_t sb[600], sa[600];
    const uint32_t sizes[][2] = {{32, 32}, {2, 128}, {128, 64}, {31, 32}, {32, 130}, {600, 32}, {9, 600}};
    uint64_t s = 4;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        uint32_t nb = sizes[si][0], na = sizes[si][1];
        for (uint32_t i = 0; i < nb; i++) sb[i] = 1000 + next_u64(&s) % (si & 1 ? 5 : 500);
        for (uint32_t i = 0; i < na; i++) sa[i] = 900 + next_u64(&s) % 700;
        kt__sort_u64_asc(sb, nb);
        kt__sort_u64_asc(sa, na);
        med_cache_t *cache = calloc(1, sizeof *cache), *cache_ref = calloc(1, sizeof *cache_ref);
        assert_true(cache && cache_ref);
        assert_int_equal(bootstrap_log_ratio(sb, nb, sa, na, COUNT, 99 + si, reps, cache), 0);
        side_t db, da;
        assert_int_equal(side_init(&db, sb, nb, cache_ref, 0), 0);
        assert_int_equal(side_init(&da, sa, na, cache_ref, 1), 0);
        rng_t r;
        rng_seed(&r, 99 + si);
        for (uint32_t it = 0; it < COUNT; it++) {
            double lb = side_log_median(&db, &r);
            ref[it] = lb - side_log_median(&da, &r);
        }
        assert_memory_equal(reps, ref, sizeof reps);
        med_cache_free(cache);
        med_cache_free(cache_ref);
    }
}

/* The q-quantile of sorted[0..n), interpolated as the interval's ends are. */
static double sorted_quantile(const double *sorted, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t k = (size_t)pos;
    if (k >= n - 1) return sorted[n - 1];
    return sorted[k] + (pos - (double)k) * (sorted[k + 1] - sorted[k]);
}

/* The interval from the tails' split (n of 1024 and more) is the one a sort gives, with ties and at every level;
 * the replicates of one row (two tables of a few hundred log medians) included. */
static void test_tail_split_equals_sorted(void **state)
{
    (void)state;
    enum { N = 20000 };
    static double v[N], sorted[N];
    uint64_t s = 5;
    const double levels[] = {0.95, 0.9, 0.99, 0.999, 0.8, 0.5, 1.0, 0.0, 0.975};
    for (int t = 0; t < 300; t++) {
        size_t n = t % 5 == 0 ? 2000 : 1024 + next_u64(&s) % (N - 1023);
        for (size_t i = 0; i < n; i++) {
            uint64_t r = next_u64(&s);
            sorted[i] = t % 3 == 0 ? (double)(r % 3)
                        : t % 3 == 1 ? log(1000.0 + (double)(r % 300)) - log(1000.0 + (double)((r >> 40) % 300))
                                     : (double)(int64_t)r;
        }
        double conf = levels[t % 9];
        memcpy(v, sorted, n * sizeof *v);
        qsort(sorted, n, sizeof *sorted, cmp_double_ref);
        double tail = 0.5 * (1.0 - conf), lo, hi;
        double want_lo = sorted_quantile(sorted, n, tail), want_hi = sorted_quantile(sorted, n, 1.0 - tail);
        percentile_interval(v, n, conf, &lo, &hi);
        assert_memory_equal(&lo, &want_lo, sizeof lo);
        assert_memory_equal(&hi, &want_hi, sizeof hi);
    }
}

/* The split itself, where it is used (2000 replicates, 95 %): the low end holds exactly the smallest values, at
 * least the k+2 that the interval reads, and the high end the largest, a few hundred of 2000. */
static void test_tail_split_gathers_the_ends(void **state)
{
    (void)state;
    enum { N = 2000 };
    static double v[N], sorted[N], low[N], high[N];
    uint64_t s = 7;
    for (int t = 0; t < 50; t++) {
        for (size_t i = 0; i < N; i++) sorted[i] = v[i] = (double)(next_u64(&s) % (t & 1 ? 50 : 1000000));
        qsort(sorted, N, sizeof *sorted, cmp_double_ref);
        size_t k[2] = {(size_t)(0.025 * (N - 1)), (size_t)(0.975 * (N - 1))}, nl, nh;
        assert_int_equal(tail_split(v, N, k, low, high, &nl, &nh), 1);
        assert_true(nl >= k[0] + 2 && nl < N / 4);
        assert_true(N - nh <= k[1] && nh < N / 4);
        qsort(low, nl, sizeof *low, cmp_double_ref);
        qsort(high, nh, sizeof *high, cmp_double_ref);
        assert_memory_equal(low, sorted, nl * sizeof *low);
        assert_memory_equal(high, sorted + N - nh, nh * sizeof *high);
    }
}

/* jb_num through fixed.h writes printf's bytes; so do the table cells. */
static void test_json_numbers_and_cells(void **state)
{
    (void)state;
    assert_true(numbers_fast());
    jbuf_t fast = {0}, slow = {0};
    fast.fast = 1;
    uint64_t s = 6;
    for (int i = 0; i < 100000; i++) {
        double v = some_double(&s);
        fast.n = slow.n = 0;
        jb_num(&fast, v);
        jb_num(&slow, v);
        assert_false(fast.bad || slow.bad);
        assert_string_equal(fast.p, slow.p);
    }
    free(fast.p);
    free(slow.p);
    for (int i = 0; i < 50000; i++) {
        kt_compare_row_t row;
        memset(&row, 0, sizeof row);
        double *fields[] = {&row.before.median_ns, &row.after.median_ns, &row.speedup_median, &row.ci_lo,
                            &row.ci_hi,            &row.speedup_mean,   &row.p_value};
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
            double v = fabs(some_double(&s));
            *fields[f] = f < 2 ? v * pow(10.0, (double)(next_u64(&s) % 12)) : v;
        }
        row.before.samples = (uint32_t)next_u64(&s);
        row.after.samples = (uint32_t)(next_u64(&s) % 100);
        cells_t cf, cs;
        make_cells(&row, &cf, 1);
        make_cells(&row, &cs, 0);
        assert_string_equal(cf.before, cs.before);
        assert_string_equal(cf.after, cs.after);
        assert_string_equal(cf.speedup, cs.speedup);
        assert_string_equal(cf.ci, cs.ci);
        assert_string_equal(cf.mean, cs.mean);
        assert_string_equal(cf.p, cs.p);
        char n[32];
        snprintf(n, sizeof n, "%u/%u", row.before.samples, row.after.samples);
        assert_string_equal(cf.n, n);
    }
}

/* Reasons whose conversions are all %s are joined without printf: what vasprintf writes. */
static void test_reasons_joined(void **state)
{
    (void)state;
    char want[256];
    const char *words[] = {"", "BEFORE", "AFTER", "either snapshot", "100 %", "x%sy"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        for (size_t j = 0; j < sizeof words / sizeof words[0]; j++) {
            char *got = fmt_reason("no raw samples in %s (aggregates only): %s, no test", words[i], words[j]);
            snprintf(want, sizeof want, "no raw samples in %s (aggregates only): %s, no test", words[i], words[j]);
            assert_non_null(got);
            assert_string_equal(got, want);
            free(got);
            got = fmt_reason("%s%s", words[i], words[j]);
            snprintf(want, sizeof want, "%s%s", words[i], words[j]);
            assert_string_equal(got, want);
            free(got);
        }
    char *got = fmt_reason("a median of 0 ns: below the clock's resolution");
    assert_string_equal(got, "a median of 0 ns: below the clock's resolution");
    free(got);
    got = fmt_reason("only %u samples in %s (need %u)%s", 3u, "AFTER", 9u, "; more");
    assert_string_equal(got, "only 3 samples in AFTER (need 9); more");
    free(got);
    got = fmt_reason("%s is 100 %% %s", "this", "so");
    assert_string_equal(got, "this is 100 % so");
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fmt_g_matches_printf),
        cmocka_unit_test(test_fmt_g_ties_and_limits),
        cmocka_unit_test(test_small_sorts),
        cmocka_unit_test(test_mann_whitney_merge_equals_pooled_sort),
        cmocka_unit_test(test_bootstrap_loops_agree),
        cmocka_unit_test(test_tail_split_equals_sorted),
        cmocka_unit_test(test_tail_split_gathers_the_ends),
        cmocka_unit_test(test_json_numbers_and_cells),
        cmocka_unit_test(test_reasons_joined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
