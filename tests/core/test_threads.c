/* test_threads.c — 2, 4 and 8 threads x 100 000 records each: exact counts, totals, extremes under contention. */
#include "test_util.h"

#include <pthread.h>

#define PER_THREAD 100000u

/* What one recording thread does. */
typedef struct worker_t {
    int index;           /* 0..threads-1 */
    pthread_barrier_t *go; /* all threads start together */
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    char own[32];
    snprintf(own, sizeof own, "own_%d", w->index);
    kt_kernel_id_t shared = kt_kernel_intern("shared_id", KT_BACKEND_CPU, NULL);
    pthread_barrier_wait(w->go);
    for (uint32_t i = 0; i < PER_THREAD; i++) {
        uint64_t v = (uint64_t)w->index * 1000u + i % 1000u + 1u;
        kt_record("shared_name", KT_BACKEND_CPU, v);
        kt_record_dispatch(&(kt_dispatch_t){.kernel = shared, .duration_ns = v});
        KT_RECORD("shared_site", KT_BACKEND_OPENCL, v);
        kt_record(own, KT_BACKEND_CPU, v);
    }
    return NULL;
}

static void run(int threads)
{
    kt_reset();
    pthread_t t[8];
    worker_t w[8];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        w[i].index = i;
        w[i].go = &go;
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);

    /* Exact expectations. Per thread: sum over i of (index*1000 + i%1000 + 1). */
    uint64_t total = 0;
    for (int i = 0; i < threads; i++)
        total += (uint64_t)PER_THREAD * ((uint64_t)i * 1000u + 1u) + (PER_THREAD / 1000u) * (999u * 1000u / 2u);
    uint64_t n = (uint64_t)threads * PER_THREAD;

    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const char *names[3] = {"shared_name", "shared_id", "shared_site"};
    kt_backend_t backends[3] = {KT_BACKEND_CPU, KT_BACKEND_CPU, KT_BACKEND_OPENCL};
    for (int k = 0; k < 3; k++) {
        const kt_kernel_timing_t *e = kt_snapshot_find(s, names[k], backends[k], NULL);
        assert_non_null(e);
        assert_int_equal(e->dispatch_count, n);
        assert_int_equal(e->total_ns, total);
        assert_int_equal(e->min_ns, 1);
        assert_int_equal(e->max_ns, (uint64_t)(threads - 1) * 1000u + 1000u);
        tu_assert_rel(e->mean_ns, (double)total / (double)n, 1e-12);
        assert_int_equal(e->sample_count, 1024);
    }
    for (int i = 0; i < threads; i++) {
        char own[32];
        snprintf(own, sizeof own, "own_%d", i);
        const kt_kernel_timing_t *e = kt_snapshot_find(s, own, KT_BACKEND_CPU, "host");
        assert_non_null(e);
        assert_int_equal(e->dispatch_count, PER_THREAD);
        assert_int_equal(e->min_ns, (uint64_t)i * 1000u + 1u);
    }
    kt_snapshot_free(s);
}

static void test_2_threads(void **state) { (void)state; run(2); }
static void test_4_threads(void **state) { (void)state; run(4); }
static void test_8_threads(void **state) { (void)state; run(8); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_2_threads),
        cmocka_unit_test(test_4_threads),
        cmocka_unit_test(test_8_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
