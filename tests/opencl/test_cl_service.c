/* test_cl_service.c — kt_cl_shutdown (a loader layer's clDeinitLayer) marks the OpenCL backend stopped, as the
 * core's stop does: the core's flush and stop no longer call its hooks, kt_cl_collect does nothing, and the next
 * arm registers it again. Built with src/backends/opencl/cl_service.c and src/core/service.c compiled in (their
 * functions are internal to the library); the backend's parts below the service are doubles that count calls.
 * kt_cl_load is the library's, over the driver double. */
#include "backends/opencl/cl_collector.h"
#include "backends/opencl/cl_ctx.h"
#include "backends/opencl/cl_internal.h"
#include "backends/opencl/cl_poll.h"
#include "backends/opencl/cl_ring.h"
#include "backends/opencl/cl_service.h"
#include "core/service.h"

#include <ktiming.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

static int g_flushes, g_passes, g_collector_stops, g_collector_starts, g_retired, g_reaped;

int kt__cl_flush_all(uint64_t deadline) { (void)deadline; g_flushes++; return 0; }
void kt__cl_collect_pass(kt_cl_ctx_t *only, int abandon) { (void)only; (void)abandon; g_passes++; }
void kt__cl_collector_start(void) { g_collector_starts++; }
void kt__cl_collector_stop(void) { g_collector_stops++; }
void kt__cl_ctx_retire_all(void) { g_retired++; }
void kt__cl_ctx_reap(void) { g_reaped++; }
void kt__cl_poll_fork_lock(void) {}
void kt__cl_poll_fork_unlock(void) {}
void kt__cl_ctx_fork_lock(void) {}
void kt__cl_ctx_fork_unlock(void) {}
void kt__cl_ring_fork_lock(void) {}
void kt__cl_ring_fork_unlock(void) {}
void kt__cl_dev_fork_child(void) {}

static void test_shutdown_marks_stopped(void **state)
{
    (void)state;
    kt__cl_arm();
    assert_int_equal(g_collector_starts, 1);
    assert_int_equal(kt__cl_stopped(), 0);
    kt__backends_flush(kt_now_ns() + 1000000);
    assert_int_equal(g_flushes, 1); /* registered: the core's flush calls in */

    kt_cl_shutdown();
    assert_int_equal(g_collector_stops, 1); /* its own stop ran once ... */
    assert_int_equal(g_retired, 1);
    assert_int_equal(kt__cl_stopped(), 1);   /* ... and it is stopped, as after the core's stop */
    int flushes = g_flushes, passes = g_passes;
    kt__backends_flush(kt_now_ns() + 1000000);
    kt__backends_stop(kt_now_ns() + 1000000);
    assert_int_equal(g_flushes, flushes); /* the core no longer calls into a driver the loader unloads */
    assert_int_equal(g_passes, passes);
    assert_int_equal(g_collector_stops, 1);

    kt__cl_arm(); /* attached again: registered again, stopped by the next core stop */
    assert_int_equal(kt__cl_stopped(), 0);
    assert_int_equal(g_collector_starts, 2);
    kt__backends_stop(kt_now_ns() + 1000000);
    assert_int_equal(g_collector_stops, 2);
    assert_int_equal(kt__cl_stopped(), 1);
}

int main(void)
{
    if (kt_cl_load(NULL) < 0) {
        fprintf(stderr, "no OpenCL library (the driver double): skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shutdown_marks_stopped)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
