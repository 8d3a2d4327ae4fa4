/* test_host_clock_model_threads.c — src/core/hclock_model.c with the real counter under the wide assumption (a
 * refresh every 1 ms, as where the counter is not the kernel's clocksource): four threads read at once, so
 * refreshes contend (a reader past `due` waits for the refresh in progress). Every stamp lies inside a
 * clock_gettime bracket around it widened by the bound stated around it, and never behind its thread's previous
 * stamp. Containment and order only; the test doubles of test_host_clock_model.c cover the bound's cases. */
#include "core/hclock.h"
#include "core/hclock_model.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#define THREADS 4
#define READS 50000

int kt__hcm_source_changed(int *kernel_counter)
{
    (void)kernel_counter;
    return 0;
}

void kt__hcm_published(const kt__hcm_stats_t *st) { (void)st; }

typedef struct res_t {
    uint64_t outside, backwards, reads;
    double worst;
} res_t;

static void *reader(void *p)
{
    res_t *r = p;
    uint64_t prev = 0;
    for (int i = 0; i < READS; i++) {
        kt__hcm_stats_t s0, s1;
        kt__hcm_stats(&s0);
        uint64_t b = kt__hc_gettime();
        uint64_t ns = (i & 1) ? kt__hc_now() : kt__hc_now_begin(1);
        uint64_t a = kt__hc_gettime();
        kt__hcm_stats(&s1);
        double bound = (s0.bound_ns > s1.bound_ns ? s0.bound_ns : s1.bound_ns) + 1.0;
        double off = ns < b ? (double)(b - ns) : ns > a ? (double)(ns - a) : 0.0;
        if (off > r->worst)
            r->worst = off;
        if (off > bound)
            r->outside++;
        if (ns < prev)
            r->backwards++;
        prev = ns;
        r->reads++;
    }
    return NULL;
}

static void test_threads_contend(void **state)
{
    (void)state;
    assert_int_equal(kt__hcm_start(0, 0), 0);
    pthread_t t[THREADS];
    res_t r[THREADS] = {{0}};
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, reader, &r[i]), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    kt__hcm_stats_t st;
    kt__hcm_stats(&st);
    for (int i = 0; i < THREADS; i++) {
        print_message("thread %d: %llu reads, %llu outside, %llu backwards, worst %.0f ns off its bracket\n", i,
                      (unsigned long long)r[i].reads, (unsigned long long)r[i].outside,
                      (unsigned long long)r[i].backwards, r[i].worst);
        assert_int_equal(r[i].reads, READS);
        assert_int_equal(r[i].outside, 0);
        assert_int_equal(r[i].backwards, 0);
    }
    print_message("%llu refreshes, %llu fires, bound now %.0f ns\n", (unsigned long long)st.refreshes,
                  (unsigned long long)st.fires, st.bound_ns);
    assert_true(st.refreshes >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads_contend)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
