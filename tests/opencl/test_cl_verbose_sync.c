/* test_cl_verbose_sync.c — KTIMING_VERBOSE_SYNC=1: the blocking baseline. The enqueue returns only after the
 * command completed and was recorded, with its verbose line already written, on the enqueuing thread; but a
 * command gated by a user event (in its wait list, or through a marker before it on its queue) is never waited
 * for inside the enqueue (that waited forever: the program sets the event only after the enqueue returns): it is
 * recorded once it runs. */
#include "support/cl_test_util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static char g_log[] = "/tmp/kt_cl_vsync_XXXXXX"; /* KTIMING_LOG file */

static void test_sync_mode(void **state)
{
    (void)state;
    cl_command_queue q = clt_queue(CL_QUEUE_PROFILING_ENABLE);
    cl_mem buf = clt_buffer(64);
    cl_kernel busy = clt_kernel("busy", buf);
    clt_busy_iterations(q, busy, 5.0);
    kt_cl_ctx_t *kc = NULL;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    kt_cl_stats_t info;
    kt_cl_stats(kc, &info);
    assert_int_equal(info.mode, KT_CL_MODE_SYNC);

    fflush(stdout);
    long before = ftell(stdout);
    size_t g = 64;
    cl_event ev = NULL;
    uint64_t t0 = kt_now_ns();
    assert_int_equal(kt_cl_enqueue_ndrange(kc, busy, 1, NULL, &g, NULL, 0, NULL, &ev), CL_SUCCESS);
    uint64_t t1 = kt_now_ns();
    cl_int status = clt_event_status(ev); /* before any flush or wait of ours */
    kt_cl_stats(kc, &info);
    assert_true(ftell(stdout) == before); /* nothing went to the program's stdout */

    assert_int_equal(status, CL_COMPLETE);
    assert_int_equal(info.in_flight, 0);
    assert_int_equal(info.tracked, 1);
    char text[4096] = {0};
    int fd = open(g_log, O_RDONLY);
    assert_true(fd >= 0);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(g_log);
    assert_true(n > 0);
    printf("%s", text);
    assert_non_null(strstr(text, "ktiming,exec,opencl,"));
    assert_non_null(strstr(text, ",busy,"));
    assert_non_null(strstr(text, ",device\n"));
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = clt_find(s, "busy");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 1);
    assert_true(e->last_ns <= t1 - t0); /* the wait covered the whole command */
    kt_snapshot_free(s);
    assert_int_equal(kt_cl_detach(kc), 0);
    clt.api->clReleaseEvent(ev);
    clt.api->clReleaseKernel(busy);
    clt.api->clReleaseMemObject(buf);
    clt.api->clReleaseCommandQueue(q);
}

/* The number of dispatches of `busy` a snapshot now holds (0 when it has none). */
static uint64_t busy_count(void)
{
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = clt_find(s, "busy");
    uint64_t n = e ? e->dispatch_count : 0;
    kt_snapshot_free(s);
    return n;
}

static void test_sync_mode_gated(void **state)
{
    (void)state;
    cl_command_queue q = clt_queue(CL_QUEUE_PROFILING_ENABLE);
    cl_mem buf = clt_buffer(64);
    cl_kernel busy = clt_kernel("busy", buf);
    int iters = 1000;
    clt.api->clSetKernelArg(busy, 1, sizeof iters, &iters);
    kt_cl_ctx_t *kc = NULL;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    uint64_t before = busy_count();
    size_t g = 64;
    cl_int err = 0;

    /* gated through its wait list */
    cl_event gate = clt.api->clCreateUserEvent(clt.context, &err);
    assert_non_null(gate);
    cl_event ev = NULL;
    assert_int_equal(kt_cl_enqueue_ndrange(kc, busy, 1, NULL, &g, NULL, 1, &gate, &ev), CL_SUCCESS);
    assert_true(clt_event_status(ev) > CL_COMPLETE); /* returned while the command could not have run */
    assert_int_equal(clt.api->clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
    assert_int_equal(clt.api->clFinish(q), CL_SUCCESS);
    clt.api->clReleaseEvent(ev);
    clt.api->clReleaseEvent(gate);

    /* gated through a marker before it on the (in-order) queue: its own wait list is empty */
    gate = clt.api->clCreateUserEvent(clt.context, &err);
    assert_non_null(gate);
    assert_int_equal(clt.api->clEnqueueMarkerWithWaitList(q, 1, &gate, NULL), CL_SUCCESS);
    assert_int_equal(kt_cl_enqueue_ndrange(kc, busy, 1, NULL, &g, NULL, 0, NULL, &ev), CL_SUCCESS);
    assert_true(clt_event_status(ev) > CL_COMPLETE);
    assert_int_equal(clt.api->clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
    assert_int_equal(clt.api->clFinish(q), CL_SUCCESS);
    clt.api->clReleaseEvent(ev);
    clt.api->clReleaseEvent(gate);

    assert_int_equal(kt_cl_flush(kc, 0), 0);
    assert_int_equal(busy_count(), before + 2); /* both recorded once they ran */
    assert_int_equal(kt_cl_detach(kc), 0);
    clt.api->clReleaseKernel(busy);
    clt.api->clReleaseMemObject(buf);
    clt.api->clReleaseCommandQueue(q);
}

int main(void)
{
    /* Verbose lines go to KTIMING_LOG (set before ktiming reads its environment), never to stdout. */
    int fd = mkstemp(g_log);
    if (fd < 0)
        return 1;
    close(fd);
    setenv("KTIMING_LOG", g_log, 1);
    if (clt_init() != 0) {
        fprintf(stderr, "no OpenCL device: skipped\n");
        return KT_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sync_mode),
                                       cmocka_unit_test(test_sync_mode_gated)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clt.api->clReleaseProgram(clt.program);
    clt.api->clReleaseContext(clt.context);
    return rc;
}
