/* test_cl_prepare.c — kt_cl_prepare on the test double (fake_opencl.c, whose clCreateContext is slowed by
 * FAKE_CL_CONTEXT_DELAY_US and counted per thread): a device's clock calibration starts on the collector thread,
 * not the caller's, and the first attach finds it done, as it finds the collector's shard and span log made; a
 * process forked while the collector is inside that calibration calibrates for itself instead of waiting forever
 * for a lock its parent's thread held; with a snapshot to come at exit, the collector also prepares the span array
 * that snapshot copies into.
 * The collector also writes a span log ahead for the next thread that records (the program's thread, which records
 * its commands at its synchronisation points), so that this thread's first record takes no fault for it.
 * The fake has one device, and a device is calibrated once per process, so each case runs in its own process:
 * `test_cl_prepare background`, `test_cl_prepare fork`, `test_cl_prepare spare`, `test_cl_prepare spare_grow` and
 * `test_cl_prepare log`. */
#include "fake_cl_util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void (*g_context_calls)(int *begun, int *off_main); /* the fake's fake_cl_context_calls */

static int contexts_off_main(void)
{
    int begun = 0, off = 0;
    g_context_calls(&begun, &off);
    return off;
}

static int contexts_begun(void)
{
    int begun = 0, off = 0;
    g_context_calls(&begun, &off);
    return begun;
}

/* Waits (polling, at most 30 s: a failure bound, not a timing claim) for a clCreateContext off the main thread. */
static void wait_context_off_main(void)
{
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 30000 && contexts_off_main() == 0; i++)
        nanosleep(&ms, NULL);
    if (contexts_off_main() == 0)
        fail_msg("no clCreateContext on another thread: kt_cl_prepare started no calibration in the background");
}

/* Whether a snapshot lists a thread of this name. */
static int thread_listed(const char *name)
{
    kt_snapshot_t *s = kt_snapshot();
    int found = 0;
    for (size_t i = 0; s && i < s->thread_count; i++)
        found |= strcmp(s->threads[i].name, name) == 0;
    kt_snapshot_free(s);
    return found;
}

/* kt_cl_prepare: the calibration's private context is made by another thread (the collector) while this one
 * never attaches; kt_cl_device_info then waits for that calibration instead of doing its own, and a queue on
 * the device is timed as usual. */
static void test_background(void **state)
{
    (void)state;
    assert_int_equal(kt_cl_prepare(NULL), KT_EINVAL);
    assert_int_equal(contexts_off_main(), 0);
    int before = contexts_begun(); /* this process's own context */
    assert_int_equal(kt_cl_prepare(g_dev), 0);
    wait_context_off_main();
    kt_cl_device_info_t info;
    assert_int_equal(kt_cl_device_info(g_dev, &info), 0);
    assert_string_equal(info.clock.clock_domain, "CLOCK_MONOTONIC_RAW"); /* FAKE_CL_CLOCK=raw, detected */
    assert_int_equal(contexts_begun(), before + 1); /* the collector's context, and no second calibration */
    assert_int_equal(kt_cl_prepare(g_dev), 0);      /* again: nothing more to do */
    /* the collector took its shard (with its span log) after the calibration, before any command: its thread is
     * listed already (polled for at most 30 s: a failure bound) */
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 30000 && !thread_listed("kt-opencl"); i++)
        nanosleep(&ms, NULL);
    assert_true(thread_listed("kt-opencl"));

    cl_command_queue q = fake_queue();
    cl_kernel k = fake_kernel("prepared", 50);
    kt_cl_ctx_t *kc = NULL;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    size_t g = 1;
    for (int i = 0; i < 3; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(kt_cl_detach(kc), 0);
    assert_int_equal(contexts_begun(), before + 1); /* attaching calibrated nothing either */
    fake_expect_counts("prepared", 3, 0);
    cl->clReleaseKernel(k);
    cl->clReleaseCommandQueue(q);
}

/* A fork while the collector is inside the calibration (its private context takes FAKE_CL_CONTEXT_DELAY_US):
 * the child's own kt_cl_device_info calibrates there and returns; the parent's waits for the collector's. */
static void test_fork(void **state)
{
    (void)state;
    assert_int_equal(kt_cl_prepare(g_dev), 0);
    wait_context_off_main(); /* the collector holds the device's calibration lock from here until it is done */
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        alarm(60); /* a child stuck on its parent's lock ends, and the parent sees a signal, not an exit */
        kt_cl_device_info_t info;
        int rc = kt_cl_device_info(g_dev, &info);
        int ok = rc == 0 && !strcmp(info.clock.clock_domain, "CLOCK_MONOTONIC_RAW");
        fprintf(stderr, "child: kt_cl_device_info %d, domain %s\n", rc, rc == 0 ? info.clock.clock_domain : "-");
        fflush(stderr);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(child, &st, 0), child);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("the child forked during the calibration did not calibrate for itself (status 0x%x)", st);
    kt_cl_device_info_t info;
    assert_int_equal(kt_cl_device_info(g_dev, &info), 0);
    assert_string_equal(info.clock.clock_domain, "CLOCK_MONOTONIC_RAW");
}

/* Minor page faults of the calling thread so far (a count the kernel keeps, not a time). */
static long thread_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_minflt;
}

#define SPARE_CAP 4096       /* KTIMING_SPANS of the `spare` cases (main) */
#define SPARE_COMMANDS 4000  /* spans the collector records */
#define SPARE_ZONES 1000     /* `spare_grow`: and this thread, 5,000 in all, more than the spare holds (4,096 + 512) */

static int g_spare_grow; /* `spare_grow` */

/* `spare_grow`'s zones, on a thread of their own: the commands' spans may be recorded by the collector or, at a
 * synchronisation point, by the main thread (kt_cl_collect), and a thread's span log holds SPARE_CAP; zones on the
 * main thread beside 4,000 commands recorded there would overflow it (the test then saw 4,096 of 5,000). */
static void *make_zones(void *arg)
{
    (void)arg;
    for (int i = 0; i < SPARE_ZONES; i++) {
        KT_CPU_BEGIN(z, "spare_zone");
        KT_CPU_END(z);
    }
    return NULL;
}

/* With an exit snapshot to come (KTIMING_RUN_DIR, set by main), the collector allocates the next snapshot's span
 * array after the calibration and writes its pages.
 *  - `spare`: the collector's 4,000 spans (70 pages of fresh memory otherwise) are copied with (almost) no page
 *    fault: 0-9 were seen, against 71-79 without the reservation. Only one thread records spans here: the spans
 *    of two shards that overlap in time are merged through a fresh buffer, whose faults depend on the heap
 *    (`spare_grow` took 7-40 in all for 87 pages).
 *  - `spare_grow`: 1,000 zones of another thread besides, more spans than the array holds (one log and an eighth):
 *    it is grown, and the spans are all there, in order. */
static void test_spare(void **state)
{
    (void)state;
    assert_int_equal(kt_cl_prepare(g_dev), 0);
    cl_command_queue q = fake_queue();
    cl_kernel k = fake_kernel("spared", 1);
    kt_cl_ctx_t *kc = NULL;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    size_t g = 1;
    for (int i = 0; i < SPARE_COMMANDS; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(kt_cl_detach(kc), 0); /* every command recorded, by the collector (after its reservation) */
    int zones_made = g_spare_grow ? SPARE_ZONES : 0;
    if (zones_made) {
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, make_zones, NULL), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
    }
    long before = thread_faults();
    kt_snapshot_t *s = kt_snapshot();
    long faults = thread_faults() - before;
    assert_non_null(s);
    assert_int_equal(s->span_count, (size_t)(SPARE_COMMANDS + zones_made));
    long pages = (long)(s->span_count * sizeof *s->spans / 4096);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* (a sanitizer's shadow memory takes faults of its own, and its realloc copies: counted without them) */
    if (!g_spare_grow && faults >= pages / 3)
        fail_msg("kt_snapshot took %ld page faults for %zu spans (%ld pages): the spare array was not used", faults,
                 s->span_count, pages);
#else
    (void)faults;
    (void)pages;
#endif
    size_t cmds = 0, zones = 0;
    for (size_t i = 0; i < s->span_count; i++) {
        const char *name = s->entries[s->spans[i].entry].name;
        cmds += !strcmp(name, "spared");
        zones += !strcmp(name, "spare_zone");
        if (i && s->spans[i].start_ns < s->spans[i - 1].start_ns)
            fail_msg("span %zu starts before span %zu", i, i - 1);
    }
    assert_int_equal(cmds, SPARE_COMMANDS);
    assert_int_equal(zones, (size_t)zones_made);
    kt_snapshot_free(s);
    cl->clReleaseKernel(k);
    cl->clReleaseCommandQueue(q);
}

/* A zone of a thread of its own, recorded with its span (the thread's first record: it takes its shard and span
 * log); *(long *)arg gets the minor page faults that took on that thread. */
static void *first_record(void *arg)
{
    long before = thread_faults();
    KT_CPU_BEGIN(z, "first_record");
    KT_CPU_END(z);
    *(long *)arg = thread_faults() - before;
    return NULL;
}

/* Once the collector has prepared (its thread listed: it takes its shard after writing the spare log), a thread's
 * first record takes the spare span log: (almost) no page fault, where writing its own log took one per page (the
 * default 16,384 spans: ~290, a fifth of the program's thread's page faults of clprog --tiny 20000 were these). */
static void test_log(void **state)
{
    (void)state;
    assert_int_equal(kt_cl_prepare(g_dev), 0);
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 30000 && !thread_listed("kt-opencl"); i++) /* at most 30 s: a failure bound */
        nanosleep(&ms, NULL);
    assert_true(thread_listed("kt-opencl"));
    long faults = -1;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, first_record, &faults), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    size_t spans = 0;
    for (size_t i = 0; i < s->span_count; i++)
        spans += !strcmp(s->entries[s->spans[i].entry].name, "first_record");
    assert_int_equal(spans, 1); /* the span is kept, in the spare log */
    long pages = (long)((size_t)KT_SPANS_DEFAULT * 72 / 4096); /* a span record is 72 bytes or more */
    kt_snapshot_free(s);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* (a sanitizer's shadow memory takes faults of its own: counted without them) */
    if (faults < 0 || faults >= pages / 3)
        fail_msg("the thread's first record took %ld page faults (a span log is %ld pages or more): the collector's "
                 "spare span log was not used", faults, pages);
#else
    (void)pages;
#endif
}

int main(int argc, char **argv)
{
    const char *lib = getenv("KTIMING_OPENCL_LIBRARY");
    void *h = lib ? dlopen(lib, RTLD_NOW) : NULL; /* the library libktiming loads: the same handle */
    g_context_calls = h ? (void (*)(int *, int *))dlsym(h, "fake_cl_context_calls") : NULL;
    if (!g_context_calls) {
        fprintf(stderr, "fake_cl_context_calls not found in KTIMING_OPENCL_LIBRARY=%s\n", lib ? lib : "");
        return 1;
    }
    g_spare_grow = argc > 1 && !strcmp(argv[1], "spare_grow");
    int spare = g_spare_grow || (argc > 1 && !strcmp(argv[1], "spare"));
    if (spare) { /* before ktiming starts: it reads these once */
        setenv("KTIMING_RUN_DIR", "/nonexistent/ktiming-test-run-dir", 1); /* nothing here writes there */
        char cap[16];
        snprintf(cap, sizeof cap, "%d", SPARE_CAP);
        setenv("KTIMING_SPANS", cap, 1);
    }
    if (fake_open() != 0)
        return 1;
    const struct CMUnitTest background[] = {cmocka_unit_test(test_background)};
    const struct CMUnitTest fork_case[] = {cmocka_unit_test(test_fork)};
    const struct CMUnitTest spare_case[] = {cmocka_unit_test(test_spare)};
    const struct CMUnitTest log_case[] = {cmocka_unit_test(test_log)};
    if (argc > 1 && !strcmp(argv[1], "log"))
        return cmocka_run_group_tests(log_case, NULL, NULL);
    if (argc > 1 && !strcmp(argv[1], "fork"))
        return cmocka_run_group_tests(fork_case, NULL, NULL);
    if (spare)
        return cmocka_run_group_tests(spare_case, NULL, NULL);
    return cmocka_run_group_tests(background, NULL, NULL);
}
