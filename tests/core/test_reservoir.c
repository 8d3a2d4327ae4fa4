/* test_reservoir.c — samples[] is a uniform sample over all dispatches and threads (statistical, seeded). */
#include "test_util.h"

#include <pthread.h>

#define CAP 1024u

static const kt_kernel_timing_t *get(kt_snapshot_t *s, const char *name)
{
    const kt_kernel_timing_t *t = kt_snapshot_find(s, name, KT_BACKEND_CPU, NULL);
    assert_non_null(t);
    return t;
}

static void test_fewer_than_capacity_keeps_all(void **state)
{
    (void)state;
    kt_kernel_id_t id = kt_kernel_intern("few", KT_BACKEND_CPU, NULL);
    for (uint64_t i = 0; i < 300; i++)
        kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = 1000 + i});
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = get(s, "few");
    assert_int_equal(t->sample_count, 300);
    uint64_t *v = malloc(300 * sizeof *v);
    memcpy(v, t->samples, 300 * sizeof *v);
    qsort(v, 300, sizeof *v, tu_cmp_u64);
    for (uint64_t i = 0; i < 300; i++)
        assert_int_equal(v[i], 1000 + i); /* every value exactly once */
    free(v);
    kt_snapshot_free(s);
}

/* 100 000 records 0..99999 in order: a uniform sample spreads evenly over 16 bins (chi-square, 15 dof). */
static void test_single_thread_uniform(void **state)
{
    (void)state;
    kt_kernel_id_t id = kt_kernel_intern("seq", KT_BACKEND_CPU, NULL);
    const uint64_t n = 100000;
    for (uint64_t i = 0; i < n; i++)
        kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = i});
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = get(s, "seq");
    assert_int_equal(t->sample_count, CAP);
    double bins[16] = {0};
    uint64_t *v = malloc(CAP * sizeof *v);
    memcpy(v, t->samples, CAP * sizeof *v);
    qsort(v, CAP, sizeof *v, tu_cmp_u64);
    for (uint32_t i = 0; i < CAP; i++) {
        assert_true(v[i] < n);
        if (i)
            assert_true(v[i] != v[i - 1]); /* each record at most once */
        bins[v[i] * 16 / n] += 1;
    }
    double chi2 = 0, e = CAP / 16.0;
    for (int b = 0; b < 16; b++)
        chi2 += (bins[b] - e) * (bins[b] - e) / e;
    assert_true(chi2 < 37.7); /* p = 0.001 critical value for 15 dof */
    /* The late half must be as present as the early half (a "first N" reservoir would fail this). */
    double late = 0;
    for (int b = 8; b < 16; b++)
        late += bins[b];
    assert_true(fabs(late - CAP / 2.0) < 5 * sqrt(CAP * 0.25));
    free(v);
    kt_snapshot_free(s);
}

/* Thread work: `count` records of values base..base+count-1. */
typedef struct range_t {
    uint64_t base;  /* first value */
    uint64_t count; /* records */
} range_t;

static void *record_range(void *arg)
{
    range_t *r = arg;
    for (uint64_t i = 0; i < r->count; i++)
        kt_record("merged", KT_BACKEND_CPU, r->base + i);
    return NULL;
}

/* Uneven threads: 90 000 records from one, 10 000 from another; the merged sample must weight by counts. */
static void test_merge_weights_by_count(void **state)
{
    (void)state;
    range_t a = {0, 90000}, b = {1000000, 10000};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, record_range, &a);
    pthread_create(&tb, NULL, record_range, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = get(s, "merged");
    assert_int_equal(t->dispatch_count, 100000);
    assert_int_equal(t->sample_count, CAP);
    double from_b = 0;
    for (uint32_t i = 0; i < CAP; i++) {
        uint64_t v = t->samples[i];
        assert_true(v < 90000 || (v >= 1000000 && v < 1010000));
        from_b += v >= 1000000;
    }
    double expect = CAP * 0.1, sd = sqrt(CAP * 0.1 * 0.9);
    assert_true(fabs(from_b - expect) < 5 * sd); /* 102 +- 48 */
    kt_snapshot_free(s);
}

/* Same through a second snapshot after more records from the main thread: still uniform over everything. */
static void test_snapshots_repeatable(void **state)
{
    (void)state;
    kt_snapshot_t *s1 = kt_snapshot(), *s2 = kt_snapshot();
    const kt_kernel_timing_t *t1 = get(s1, "seq"), *t2 = get(s2, "seq");
    assert_int_equal(t1->sample_count, t2->sample_count);
    assert_memory_equal(t1->samples, t2->samples, t1->sample_count * sizeof(uint64_t)); /* seeded: reproducible */
    kt_snapshot_free(s1);
    kt_snapshot_free(s2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fewer_than_capacity_keeps_all),
        cmocka_unit_test(test_single_thread_uniform),
        cmocka_unit_test(test_merge_weights_by_count),
        cmocka_unit_test(test_snapshots_repeatable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
