/* test_thread_exit.c — records of threads that have exited stay in snapshots; their slots are reused, not lost. */
#include "test_util.h"

#include <pthread.h>

#define THREADS 48
#define PER 1000

static void *short_lived(void *arg)
{
    int i = (int)(intptr_t)arg;
    for (int j = 0; j < PER; j++)
        kt_record("exited", KT_BACKEND_CPU, (uint64_t)i + 1);
    KT_CPU_BEGIN(z, "exited_zone");
    KT_CPU_END(z);
    return NULL;
}

static void test_exited_threads_keep_records(void **state)
{
    (void)state;
    /* Batches of 4: later threads adopt the stores of earlier ones. */
    for (int b = 0; b < THREADS; b += 4) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            assert_int_equal(pthread_create(&t[i], NULL, short_lived, (void *)(intptr_t)(b + i)), 0);
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
    }
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "exited", KT_BACKEND_CPU, NULL);
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, THREADS * PER);
    uint64_t total = 0;
    for (int i = 0; i < THREADS; i++)
        total += (uint64_t)PER * (uint64_t)(i + 1);
    assert_int_equal(t->total_ns, total);
    assert_int_equal(t->min_ns, 1);
    assert_int_equal(t->max_ns, THREADS);
    const kt_kernel_timing_t *z = kt_snapshot_find(s, "exited_zone", KT_BACKEND_CPU, NULL);
    assert_non_null(z);
    assert_int_equal(z->dispatch_count, THREADS);
    size_t zone_spans = 0;
    for (size_t i = 0; i < s->span_count; i++)
        zone_spans += s->spans[i].entry == (uint32_t)(z - s->entries);
    assert_int_equal(zone_spans, THREADS);
    /* Every span's thread is a registered thread. */
    for (size_t i = 0; i < s->span_count; i++)
        assert_true(s->spans[i].thread < s->thread_count);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exited_threads_keep_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
