/* concurrent.c — snapshots and resets while other threads record: consistent entries, exact totals after. */
#include "test_util.h"

#include <pthread.h>
#include <sched.h>

#define WRITERS 3

static _Atomic int g_stop;
static _Atomic int g_warm; /* writers that have recorded a first batch */
static _Atomic uint64_t g_done[WRITERS];

static void *writer(void *arg)
{
    int i = (int)(intptr_t)arg;
    kt_kernel_id_t id = kt_kernel_intern("conc_id", KT_BACKEND_CPU, NULL);
    uint64_t n = 0;
    while (!atomic_load(&g_stop)) {
        kt_record_id(id, 100 + (n % 50));
        kt_record("conc_name", KT_BACKEND_CPU, 1000 + (uint64_t)i);
        KT_CPU_BEGIN(z, "conc_zone");
        KT_CPU_END(z);
        if (++n == 1000)
            atomic_fetch_add(&g_warm, 1);
    }
    atomic_store(&g_done[i], n);
    return NULL;
}

static void check_entry(const kt_kernel_timing_t *t)
{
    if (!t->dispatch_count)
        return;
    assert_true(t->min_ns <= t->max_ns);
    assert_true(t->mean_ns >= (double)t->min_ns && t->mean_ns <= (double)t->max_ns);
    assert_true(t->p50_ns >= t->min_ns && t->p50_ns <= t->max_ns);
    assert_true(t->p99_ns >= t->p50_ns);
    assert_true(t->sample_count <= t->dispatch_count && t->sample_count <= 1024);
    for (uint32_t i = 0; i < t->sample_count; i++)
        assert_true(t->samples[i] >= t->min_ns && t->samples[i] <= t->max_ns);
}

/* Starts the writers and waits until each is recording (so snapshots really overlap with them). */
static void start(pthread_t *t)
{
    atomic_store(&g_stop, 0);
    atomic_store(&g_warm, 0);
    for (int i = 0; i < WRITERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i), 0);
    while (atomic_load(&g_warm) < WRITERS)
        sched_yield();
}

static uint64_t stop(pthread_t *t)
{
    atomic_store(&g_stop, 1);
    uint64_t n = 0;
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(t[i], NULL);
        n += atomic_load(&g_done[i]);
    }
    return n;
}

static void test_snapshot_while_recording(void **state)
{
    (void)state;
    kt_reset();
    pthread_t t[WRITERS];
    start(t);
    uint64_t prev = 0;
    for (int r = 0; r < 60; r++) {
        kt_snapshot_t *s = kt_snapshot();
        assert_non_null(s);
        const kt_kernel_timing_t *e = kt_snapshot_find(s, "conc_id", KT_BACKEND_CPU, NULL);
        if (e) {
            check_entry(e);
            assert_true(e->dispatch_count >= prev); /* counts never go backwards without a reset */
            prev = e->dispatch_count;
            for (uint32_t i = 0; i < e->sample_count; i++)
                assert_true(e->samples[i] >= 100 && e->samples[i] < 150);
        }
        for (size_t i = 0; i < s->count; i++)
            check_entry(&s->entries[i]);
        kt_snapshot_free(s);
    }
    uint64_t n = stop(t);
    kt_snapshot_t *s = kt_snapshot();
    assert_int_equal(kt_snapshot_find(s, "conc_id", KT_BACKEND_CPU, NULL)->dispatch_count, n);
    assert_int_equal(kt_snapshot_find(s, "conc_name", KT_BACKEND_CPU, NULL)->dispatch_count, n);
    assert_int_equal(kt_snapshot_find(s, "conc_zone", KT_BACKEND_CPU, NULL)->dispatch_count, n);
    kt_snapshot_free(s);
}

static void *resetter(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100 && !atomic_load(&g_stop); i++) {
        kt_reset();
        sched_yield();
    }
    return NULL;
}

static void test_reset_while_recording(void **state)
{
    (void)state;
    pthread_t t[WRITERS], rt;
    start(t);
    assert_int_equal(pthread_create(&rt, NULL, resetter, NULL), 0);
    for (int r = 0; r < 40; r++) {
        kt_snapshot_t *s = kt_snapshot();
        assert_non_null(s);
        for (size_t i = 0; i < s->count; i++)
            check_entry(&s->entries[i]);
        kt_snapshot_free(s);
    }
    pthread_join(rt, NULL);
    stop(t);
    /* Quiet again: a reset then known records give exact numbers. */
    kt_reset();
    kt_kernel_id_t id = kt_kernel_intern("conc_id", KT_BACKEND_CPU, NULL);
    for (int i = 0; i < 10; i++)
        kt_record_id(id, 5);
    kt_snapshot_t *s = kt_snapshot();
    assert_int_equal(s->count, 1);
    assert_int_equal(s->entries[0].dispatch_count, 10);
    assert_int_equal(s->entries[0].total_ns, 50);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_while_recording),
        cmocka_unit_test(test_reset_while_recording),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
