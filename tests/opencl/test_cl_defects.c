/* test_cl_defects.c — the OpenCL backend's guarantees against a misbehaving or slow driver, on the test double
 * fake_opencl.c: no use-after-free when a flush races with clSetEventCallback (FAKE_CL_SETCB_DELAY_US makes
 * the window wide; run under ASan/TSan), a detach that never waits yet still times a gated command, a refused
 * enqueue that leaves the program's event variable alone and is counted with the error's name, and one bounded
 * wait at exit whose leftovers are counted as in flight at exit (checked by an atexit handler that runs after
 * ktiming's). */
#include "fake_cl_util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static _Atomic int g_enqueuing;
static void *g_fake; /* the driver double's handle (the library libktiming loaded: the same handle) */

static void *flusher(void *unused)
{
    (void)unused;
    while (atomic_load(&g_enqueuing))
        kt_cl_flush(NULL, 1000000);
    return NULL;
}

/* Commands without a program event (ktiming holds the only reference) while another thread flushes all the
 * time, with clSetEventCallback slow to read the event: every command is recorded once, nothing is freed
 * under the driver. */
static void test_flush_races_set_callback(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = fake_queue();
    cl_kernel k = fake_kernel("raced", 0);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    enum { N = 400 };
    atomic_store(&g_enqueuing, 1);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, flusher, NULL), 0);
    size_t g = 1;
    for (int i = 0; i < N; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    atomic_store(&g_enqueuing, 0);
    pthread_join(th, NULL);
    assert_int_equal(kt_cl_detach(kc), 0);
    fake_expect_counts("raced", N, 0);
    cl->clReleaseKernel(k);
    cl->clReleaseCommandQueue(q);
}

/* kt_cl_detach_async with a command held back by a user event: it returns while the command cannot have run
 * (the event is set only afterwards, by this thread), the queue is no longer found, and the command is still
 * timed once it runs. */
static void test_detach_async_keeps_gated_command(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = fake_queue();
    cl_kernel k = fake_kernel("gated", 100);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    cl_int err = 0;
    cl_event gate = cl->clCreateUserEvent(g_ctx, &err);
    size_t g = 1;
    assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 1, &gate, NULL), CL_SUCCESS);
    assert_int_equal(kt_cl_detach_async(kc), 0);
    assert_null(kt_cl_find(q));
    cl->clReleaseCommandQueue(q); /* the program's last reference: ktiming's keeps the queue alive */
    cl->clSetUserEventStatus(gate, CL_COMPLETE);
    kt_flush();
    fake_expect_counts("gated", 1, 0);
    cl->clReleaseEvent(gate);
    cl->clReleaseKernel(k);
}

/* A refused enqueue: the driver's code comes back unchanged, the program's event variable is untouched, and
 * the kernel's entry counts the error under the error's name (also kt_cl_last_error). */
static void test_refused_enqueue(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = fake_queue();
    cl_kernel k = fake_kernel("refused", 0);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    cl_event sentinel = (cl_event)(uintptr_t)0x5eed;
    cl_event ev = sentinel;
    size_t g = 1;
    assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 0, NULL, &g, NULL, 0, NULL, &ev), CL_INVALID_WORK_DIMENSION);
    assert_ptr_equal(ev, sentinel);
    assert_int_equal(kt_cl_last_error(), CL_INVALID_WORK_DIMENSION);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = fake_find(s, "refused");
    assert_non_null(e);
    assert_int_equal(e->errors, 1);
    assert_int_equal(e->dispatch_count, 0);
    assert_string_equal(e->last_error, "CL_INVALID_WORK_DIMENSION");
    kt_snapshot_free(s);
    assert_int_equal(kt_cl_detach(kc), 0);
    cl->clReleaseKernel(k);
    cl->clReleaseCommandQueue(q);
}

/* Transfers tracked as their own entries, with the bytes they moved. */
/* A command that ends with a negative execution status is an error of its kernel, worded as an execution status:
 * -1 is no CL_DEVICE_NOT_FOUND (an enqueue error code) but "terminated abnormally"; a failed wait list keeps its
 * own name. */
static void test_execution_status_wording(void **state)
{
    (void)state;
    const struct {
        int status; /* the double's fake_cl_set_failed_status; 0: its default */
        const char *kernel;
        const char *want;
    } cases[] = {{-1, "ended_minus_one", "execution status -1 (terminated abnormally)"},
                 {-5, "ended_minus_five", "execution status -5 (CL_OUT_OF_RESOURCES)"},
                 {0, "ended_wait_list", "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"}};
    void (*set_failed)(int) = (void (*)(int))dlsym(g_fake, "fake_cl_set_failed_status");
    assert_non_null(set_failed);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kt_reset();
        set_failed(cases[i].status);
        cl_command_queue q = fake_queue();
        cl_kernel k = fake_kernel(cases[i].kernel, 0);
        kt_cl_ctx_t *kc;
        assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
        cl_int err = 0;
        cl_event gate = cl->clCreateUserEvent(g_ctx, &err);
        size_t g = 1;
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 1, &gate, NULL), CL_SUCCESS);
        cl->clSetUserEventStatus(gate, -5);
        cl->clFinish(q);
        assert_int_equal(kt_cl_detach(kc), 0);
        set_failed(0);
        kt_snapshot_t *s = kt_snapshot();
        const kt_kernel_timing_t *e = fake_find(s, cases[i].kernel);
        assert_non_null(e);
        assert_int_equal(e->errors, 1);
        assert_string_equal(e->last_error, cases[i].want);
        kt_snapshot_free(s);
        cl->clReleaseEvent(gate);
        cl->clReleaseKernel(k);
        cl->clReleaseCommandQueue(q);
    }
}

/* A synchronisation point's recording (kt_cl_collect on the program's queue) asks the driver about that queue's
 * finished commands only: DEEP commands pending on another queue behind a user event cost it nothing (it polled
 * every one of them, two driver calls each, at every clFinish of `ktiming run`). Counted in driver calls made by
 * this thread, not timed. */
static void test_collect_ignores_other_queues(void **state)
{
    (void)state;
    enum { DEEP = 2000, MINE = 10 };
    kt_reset();
    unsigned long (*queries)(void) = (unsigned long (*)(void))dlsym(g_fake, "fake_cl_event_queries");
    assert_non_null(queries);
    cl_command_queue qa = fake_queue(), qb = fake_queue();
    cl_kernel k = fake_kernel("synced", 0), held = fake_kernel("held", 0);
    kt_cl_ctx_t *ka, *kb;
    assert_int_equal(kt_cl_attach(qa, NULL, &ka), 0);
    assert_int_equal(kt_cl_attach(qb, NULL, &kb), 0);
    cl_int err = 0;
    cl_event gate = cl->clCreateUserEvent(g_ctx, &err);
    size_t g = 1;
    for (int i = 0; i < DEEP; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kb, held, 1, NULL, &g, NULL, i == 0, i == 0 ? &gate : NULL, NULL),
                         CL_SUCCESS);
    for (int i = 0; i < MINE; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(ka, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    cl->clFinish(qa);
    unsigned long before = queries();
    assert_int_equal(kt_cl_collect(ka, 0), 0);
    unsigned long asked = queries() - before;
    /* its own finished commands: the end stamp, then start (and queued/submit for a span) each; none of B's */
    if (asked > 4u * MINE + 2u)
        fail_msg("kt_cl_collect made %lu event queries for %d finished commands of its queue", asked, MINE);
    cl->clSetUserEventStatus(gate, CL_COMPLETE);
    cl->clFinish(qb);
    assert_int_equal(kt_cl_detach(ka), 0);
    assert_int_equal(kt_cl_detach(kb), 0);
    fake_expect_counts("synced", MINE, 0);
    fake_expect_counts("held", DEEP, 0);
    cl->clReleaseEvent(gate);
    cl->clReleaseKernel(k);
    cl->clReleaseKernel(held);
    cl->clReleaseCommandQueue(qa);
    cl->clReleaseCommandQueue(qb);
}

static void test_command_bytes(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = fake_queue();
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    cl_int err = 0;
    cl_mem m = cl->clCreateBuffer(g_ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    char host[4096] = {0};
    for (int i = 0; i < 3; i++) {
        cl_event ev = NULL;
        assert_int_equal(cl->clEnqueueWriteBuffer(q, m, CL_FALSE, 0, 1000, host, 0, NULL, &ev), CL_SUCCESS);
        assert_int_equal(kt_cl_track_command(kc, ev, "clEnqueueWriteBuffer", 1000, 0), 0);
        cl->clReleaseEvent(ev);
    }
    assert_int_equal(kt_cl_detach(kc), 0);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = fake_find(s, "clEnqueueWriteBuffer");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 3);
    assert_int_equal(e->bytes, 3000);
    kt_snapshot_free(s);
    cl->clReleaseMemObject(m);
    cl->clReleaseCommandQueue(q);
}

static kt_cl_ctx_t *g_stuck_ctx;
static int g_in_child; /* the forked child's exit */

/* Runs after ktiming's exit handler: the stuck command was waited for once (KTIMING_EXIT_WAIT_MS) and counted.
 * In the forked child the command is the parent's: neither waited for nor counted. */
static void verify_at_exit(void)
{
    if (!g_stuck_ctx)
        return;
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = s ? fake_find(s, "stuck") : NULL;
    if (g_in_child) {
        int clean = s && (!e || (e->dispatch_count == 0 && e->dropped == 0));
        fprintf(stderr, "child at exit: stuck command %s\n", clean ? "left to the parent" : "counted in the child");
        kt_snapshot_free(s);
        fflush(stderr);
        _exit(clean ? 0 : 1);
    }
    int ok = e && e->dispatch_count == 0 && e->dropped == 1 && e->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT] == 1;
    fprintf(stderr, "at exit: stuck command %s\n", ok ? "counted as in flight at exit" : "NOT counted");
    kt_snapshot_free(s);
    fflush(stderr);
    _exit(ok ? 0 : 1);
}

int main(void)
{
    atexit(verify_at_exit); /* before any ktiming call: runs after ktiming's exit handler */
    if (fake_open() != 0)
        return 1;
    g_fake = dlopen(getenv("KTIMING_OPENCL_LIBRARY"), RTLD_NOW);
    cl_int err = 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flush_races_set_callback),
        cmocka_unit_test(test_detach_async_keeps_gated_command),
        cmocka_unit_test(test_refused_enqueue),
        cmocka_unit_test(test_command_bytes),
        cmocka_unit_test(test_execution_status_wording),
        cmocka_unit_test(test_collect_ignores_other_queues),
    };
    if (cmocka_run_group_tests(tests, NULL, NULL) != 0)
        _exit(1);
    /* Leave with a command that can never run (its user event is never set). */
    kt_reset();
    cl_command_queue q = fake_queue();
    cl_kernel k = fake_kernel("stuck", 0);
    cl_event never = cl->clCreateUserEvent(g_ctx, &err);
    size_t g = 1;
    if (kt_cl_attach(q, NULL, &g_stuck_ctx) != 0 ||
        kt_cl_enqueue_ndrange(g_stuck_ctx, k, 1, NULL, &g, NULL, 1, &never, NULL) != CL_SUCCESS)
        _exit(1);
    /* A child forked now neither waits for the parent's stuck command nor counts it: its exit wait would be ten
     * minutes, so only not waiting ends it within the test's timeout. */
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        g_in_child = 1;
        setenv("KTIMING_EXIT_WAIT_MS", "600000", 1);
        kt_flush(); /* no driver call in the child */
        exit(0);    /* ktiming's exit handler, then verify_at_exit */
    }
    int st = 0;
    if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "the forked child did not exit cleanly (status %d)\n", st);
        _exit(1);
    }
    return 0;
}
