/* test_harness_threads.c — harness runs on several threads at once: each result is its own, each kernel's samples
 * land in the recorder under its name, and the shared cache-size lookup is race-free. */
#include <ktiming.h>
#include <ktiming/harness.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#define NTHREADS 4

/* One thread's synthetic kernel: fixed duration on its own synthetic clock. */
typedef struct job_t {
    char name[32];            /* kernel name */
    uint64_t now;             /* synthetic clock */
    uint64_t step;            /* duration of one dispatch */
    kt_harness_result_t res;  /* filled by the thread */
    int rc;                   /* kt_harness_run's return */
} job_t;

static uint64_t job_clock(void *user) { return ((job_t *)user)->now; }

static int job_run(void *user, uint32_t trials, uint64_t *duration_ns)
{
    (void)duration_ns;
    job_t *j = user;
    j->now += j->step * trials;
    return 0;
}

static void *job_main(void *arg)
{
    job_t *j = arg;
    kt_harness_desc_t d;
    memset(&d, 0, sizeof d);
    d.name = j->name;
    d.run = job_run;
    d.user = j;
    d.clock = job_clock;
    d.clock_user = j;
    d.min_time_ns = 1;
    d.min_samples = 50;
    d.flush_cache = 1;
    d.flush_bytes = 4096;
    d.progress = -1;
    j->rc = kt_harness_run(&d, &j->res);
    return NULL;
}

static void test_concurrent_runs(void **state)
{
    (void)state;
    static job_t jobs[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        snprintf(jobs[i].name, sizeof jobs[i].name, "ht_kernel_%d", i);
        jobs[i].now = 1;
        jobs[i].step = 1000u * (uint64_t)(i + 1);
        assert_int_equal(pthread_create(&th[i], NULL, job_main, &jobs[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
    kt_snapshot_t *snap = kt_snapshot();
    assert_non_null(snap);
    for (int i = 0; i < NTHREADS; i++) {
        assert_int_equal(jobs[i].rc, 0);
        assert_int_equal(jobs[i].res.stop, KT_HARNESS_STOP_CONVERGED);
        assert_int_equal(jobs[i].res.sample_count, 50);
        assert_int_equal(jobs[i].res.samples[0], jobs[i].step);
        const kt_kernel_timing_t *t = kt_snapshot_find(snap, jobs[i].name, KT_BACKEND_CPU, NULL);
        assert_non_null(t);
        assert_int_equal(t->dispatch_count, 50);
        assert_int_equal(t->min_ns, jobs[i].step);
        kt_harness_result_free(&jobs[i].res);
    }
    kt_snapshot_free(snap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_concurrent_runs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
