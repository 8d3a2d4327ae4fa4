/* test_host_clock_threads.c — the counter path under concurrent readers while the model is refreshed: conversions
 * stay consistent (seqlock), time seen by one thread never goes back by more than the bound allows, and zones
 * recorded meanwhile all count. Run with KTIMING_CLOCK=tsc (and under TSan with the threaded label). */
#include <ktiming.h>
#include <ktiming/clock_model.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

enum { THREADS = 3, ZONES = 20000 };

/* One reader. */
typedef struct reader_t {
    uint64_t worst_back; /* largest step back seen between consecutive kt_now_ns() readings */
    uint64_t reads;      /* readings taken */
} reader_t;

static void *reader(void *p)
{
    reader_t *r = p;
    uint64_t prev = kt_now_ns();
    for (int i = 0; i < ZONES; i++) {
        KT_CPU_BEGIN(z, "host_clock_threads");
        uint64_t t = kt_now_ns();
        KT_CPU_END(z);
        if (t < prev && prev - t > r->worst_back) r->worst_back = prev - t;
        prev = t;
        r->reads++;
    }
    return NULL;
}

static void test_concurrent_refresh(void **state)
{
    (void)state;
    kt_host_clock_info_t before, after;
    assert_int_equal(kt_host_clock_info(&before), 0);
    pthread_t t[THREADS];
    reader_t r[THREADS];
    memset(r, 0, sizeof r);
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, reader, &r[i]), 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    assert_int_equal(kt_host_clock_info(&after), 0);
    double bound = before.error_bound_ns > after.error_bound_ns ? before.error_bound_ns : after.error_bound_ns;
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(r[i].reads, ZONES);
        /* each reading is within the bound of the truth, which never goes back */
        assert_true((double)r[i].worst_back <= 2.0 * bound + 1.0);
    }
    kt_snapshot_t *snap = kt_snapshot();
    assert_non_null(snap);
    const kt_kernel_timing_t *e = kt_snapshot_find(snap, "host_clock_threads", KT_BACKEND_CPU, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, (uint64_t)THREADS * ZONES);
    kt_snapshot_free(snap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_concurrent_refresh)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
