/* test_stats.c — snapshot statistics against exact computation on known distributions. */
#include "test_util.h"

#include <pthread.h>

/* Records v[0..n) under `name` and checks every statistic of its entry against the exact values. */
static void check_distribution(const char *name, uint64_t *v, size_t n, int by_id)
{
    kt_kernel_id_t id = kt_kernel_intern(name, KT_BACKEND_CPU, NULL);
    assert_int_not_equal(id, 0);
    for (size_t i = 0; i < n; i++) {
        if (by_id)
            kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = v[i]});
        else
            kt_record(name, KT_BACKEND_CPU, v[i]);
    }
    uint64_t last = v[n - 1];
    unsigned __int128 total = 0;
    for (size_t i = 0; i < n; i++)
        total += v[i];
    double mean = (double)total / (double)n;
    long double m2 = 0;
    for (size_t i = 0; i < n; i++) {
        long double d = (long double)v[i] - (long double)total / (long double)n;
        m2 += d * d;
    }
    double sd = n > 1 ? (double)sqrtl(m2 / (long double)(n - 1)) : 0.0;
    qsort(v, n, sizeof *v, tu_cmp_u64);

    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *t = kt_snapshot_find(s, name, KT_BACKEND_CPU, "host");
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, n);
    assert_int_equal(t->total_ns, (uint64_t)total);
    assert_int_equal(t->min_ns, v[0]);
    assert_int_equal(t->max_ns, v[n - 1]);
    assert_int_equal(t->last_ns, last);
    tu_assert_rel(t->mean_ns, mean, 1e-12);
    if (sd > 0)
        tu_assert_rel(t->stddev_ns, sd, 1e-9);
    else
        assert_true(t->stddev_ns == 0.0);
    tu_assert_rel((double)t->p50_ns, (double)tu_rank(v, n, 0.50), 0.01);
    tu_assert_rel((double)t->p90_ns, (double)tu_rank(v, n, 0.90), 0.01);
    tu_assert_rel((double)t->p99_ns, (double)tu_rank(v, n, 0.99), 0.01);
    assert_int_equal(t->sample_count, n < 1024 ? n : 1024);
    for (uint32_t i = 0; i < t->sample_count; i++) {
        assert_true(t->samples[i] >= v[0]);
        assert_true(t->samples[i] <= v[n - 1]);
    }
    assert_int_equal(t->errors, 0);
    assert_int_equal(t->dropped, 0);
    kt_snapshot_free(s);
}

static void test_uniform_integers(void **state)
{
    (void)state;
    size_t n = 10000;
    uint64_t *v = malloc(n * sizeof *v), seed = 1;
    for (size_t i = 0; i < n; i++)
        v[i] = i + 1;
    for (size_t i = n - 1; i > 0; i--) { /* shuffle: order must not matter */
        size_t j = (size_t)(tu_rand(&seed) % (i + 1));
        uint64_t x = v[i];
        v[i] = v[j];
        v[j] = x;
    }
    check_distribution("uniform_1_10000", v, n, 0);
    /* The exact answers for 1..10000, independent of the helper above. */
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "uniform_1_10000", KT_BACKEND_CPU, NULL);
    assert_non_null(t);
    assert_true(t->mean_ns == 5000.5);
    tu_assert_rel(t->stddev_ns, sqrt(10000.0 * 10001.0 / 12.0), 1e-12);
    tu_assert_rel((double)t->p50_ns, 5000, 0.01);
    tu_assert_rel((double)t->p90_ns, 9000, 0.01);
    tu_assert_rel((double)t->p99_ns, 9900, 0.01);
    kt_snapshot_free(s);
    free(v);
}

static void test_lognormal(void **state)
{
    (void)state;
    size_t n = 50000;
    uint64_t *v = malloc(n * sizeof *v), seed = 2;
    for (size_t i = 0; i < n; i++) {
        double z = sqrt(-2 * log(tu_unif(&seed))) * cos(6.283185307179586 * tu_unif(&seed));
        v[i] = (uint64_t)(1e6 * exp(0.5 * z));
    }
    check_distribution("lognormal_1ms", v, n, 1);
    free(v);
}

static void test_bimodal(void **state)
{
    (void)state;
    size_t n = 20000;
    uint64_t *v = malloc(n * sizeof *v), seed = 3;
    for (size_t i = 0; i < n; i++)
        v[i] = (tu_rand(&seed) % 10 == 0) ? 10000000 + tu_rand(&seed) % 5000000 : 900 + tu_rand(&seed) % 200;
    check_distribution("bimodal", v, n, 0);
    free(v);
}

static void test_small_exact_values(void **state)
{
    (void)state;
    size_t n = 1000;
    uint64_t *v = malloc(n * sizeof *v), seed = 4;
    for (size_t i = 0; i < n; i++)
        v[i] = tu_rand(&seed) % 128; /* below 128 ns the histogram is exact */
    check_distribution("tiny", v, n, 1);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "tiny", KT_BACKEND_CPU, NULL);
    assert_int_equal(t->p50_ns, tu_rank(v, n, 0.5));
    assert_int_equal(t->p99_ns, tu_rank(v, n, 0.99));
    kt_snapshot_free(s);
    free(v);
}

/* The histogram lags one record per thread and kernel (recorder.c: the newest waits in `pend`); a snapshot
 * must still hold every record, the newest included, each once, across threads and resets. */
static void *record_then_odd_one(void *arg)
{
    kt_kernel_id_t id = kt_kernel_intern("hist_newest", KT_BACKEND_CPU, NULL);
    for (int i = 0; i < 100; i++)
        kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = 40});
    /* each thread's newest: a value of its own */
    kt_record_dispatch(&(kt_dispatch_t){.kernel = id,
                                        .duration_ns = (uint64_t)(uintptr_t)arg});
    return NULL;
}

static uint64_t hist_at(const kt_kernel_timing_t *t, uint64_t lower)
{
    for (uint32_t i = 0; i < t->hist_count; i++)
        if (t->hist[i].lower_ns == lower)
            return t->hist[i].count;
    return 0;
}

static void test_hist_holds_newest(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t id = kt_kernel_intern("hist_newest", KT_BACKEND_CPU, NULL);
    kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = 7}); /* a single record: only in `pend` */
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "hist_newest", KT_BACKEND_CPU, NULL);
    assert_non_null(t);
    assert_int_equal(t->hist_count, 1);
    assert_int_equal(hist_at(t, 7), 1);
    assert_int_equal(t->p50_ns, 7);
    kt_snapshot_free(s);

    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, record_then_odd_one, (void *)(uintptr_t)(11 + i)), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = 9}); /* this thread's newest */
    s = kt_snapshot();
    t = kt_snapshot_find(s, "hist_newest", KT_BACKEND_CPU, NULL);
    assert_int_equal(t->dispatch_count, 204);
    assert_int_equal(hist_at(t, 7), 1);
    assert_int_equal(hist_at(t, 9), 1);
    assert_int_equal(hist_at(t, 11), 1);
    assert_int_equal(hist_at(t, 12), 1);
    assert_int_equal(hist_at(t, 40), 200);
    kt_snapshot_free(s);

    kt_reset(); /* nothing pending survives a reset */
    kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = 3});
    s = kt_snapshot();
    t = kt_snapshot_find(s, "hist_newest", KT_BACKEND_CPU, NULL);
    assert_int_equal(t->dispatch_count, 1);
    assert_int_equal(t->hist_count, 1);
    assert_int_equal(hist_at(t, 3), 1);
    kt_snapshot_free(s);
}

/* A large mean with a small spread: naive sum-of-squares in double would lose the variance entirely. */
static void test_large_offset_small_spread(void **state)
{
    (void)state;
    size_t n = 4000;
    uint64_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = 1000000000000ull + (i % 1000);
    check_distribution("offset_1e12", v, n, 1);
    free(v);
}

static void test_constant_and_single(void **state)
{
    (void)state;
    uint64_t v[50];
    for (int i = 0; i < 50; i++)
        v[i] = 123456;
    check_distribution("constant", v, 50, 0);
    uint64_t one = 777;
    check_distribution("single", &one, 1, 0);
}

/* Totals past 2^64 ns (issue 43): 8 records of 2^61 plus deviations up to 2 ms. The stddev from the exact
 * sums must not cancel to 0, and mean_ns must divide the exact total, not the saturated one (UINT64_MAX / 8 is 25 us below the truth:
 * relative 1e-14, which the 1e-15 bound below tells apart). */
static void test_total_past_2_64(void **state)
{
    (void)state;
    static const int64_t dev[8] = {1000000, -1000000, 300000, -700000, 2000000, 0, -1500000, 100000};
    const uint64_t base = 1ull << 61;
    kt_kernel_id_t id = kt_kernel_intern("past_2_64", KT_BACKEND_CPU, NULL);
    int64_t sum = 0;
    for (int i = 0; i < 8; i++) {
        kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = base + (uint64_t)dev[i]});
        sum += dev[i];
    }
    long double mean_dev = (long double)sum / 8.0L, m2 = 0; /* deviations from base: exact in long double */
    for (int i = 0; i < 8; i++)
        m2 += ((long double)dev[i] - mean_dev) * ((long double)dev[i] - mean_dev);
    double sd = (double)sqrtl(m2 / 7.0L);
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "past_2_64", KT_BACKEND_CPU, "host");
    assert_non_null(t);
    assert_int_equal(t->total_ns, UINT64_MAX); /* saturated */
    assert_int_equal(t->total128.hi, 1);
    print_message("stddev %.1f ns (truth %.1f), mean %.1f ns\n", t->stddev_ns, sd, t->mean_ns);
    tu_assert_rel(t->stddev_ns, sd, 1e-9);
    tu_assert_rel(t->mean_ns, (double)base + (double)sum / 8.0, 1e-15);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_integers),
        cmocka_unit_test(test_lognormal),
        cmocka_unit_test(test_bimodal),
        cmocka_unit_test(test_small_exact_values),
        cmocka_unit_test(test_hist_holds_newest),
        cmocka_unit_test(test_large_offset_small_spread),
        cmocka_unit_test(test_constant_and_single),
        cmocka_unit_test(test_total_past_2_64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
