/* test_cl_drivers.c — the OpenCL backend against driver behaviours PoCL does not show, reproduced by the
 * test double fake_opencl.c (loaded through KTIMING_OPENCL_LIBRARY; the FAKE_CL_* variables select the
 * behaviour and this test reads the same variables for its expectations): the time base is detected (RAW,
 * REALTIME, a device epoch with drift), clGetDeviceAndHostTimer is used only on >= 2.1 with a host timer (a
 * 1.2 stack where it never returns must not hang us), callbacks on the enqueuing thread, and callbacks for
 * failed commands counted once. */
#include "fake_cl_util.h"

#include <ktiming/clock_model.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static const char *expected_domain(void)
{
    const char *c = getenv("FAKE_CL_CLOCK");
    if (c && !strcmp(c, "realtime"))
        return "CLOCK_REALTIME";
    if (c && !strcmp(c, "device"))
        return "device";
    return "CLOCK_MONOTONIC_RAW";
}

static void test_clock_detected(void **state)
{
    (void)state;
    kt_cl_device_info_t info;
    assert_int_equal(kt_cl_device_info(g_dev, &info), 0);
    assert_string_equal(info.clock.clock_domain, expected_domain());
    int v21 = info.version_major > 2 || (info.version_major == 2 && info.version_minor >= 1);
    int want_timer = v21 && getenv("FAKE_CL_HOST_TIMER_RES") && atoi(getenv("FAKE_CL_HOST_TIMER_RES")) > 0;
    assert_int_equal(info.uses_host_timer, want_timer);
    if (!strcmp(expected_domain(), "device")) {
        assert_true(info.clock.model_samples >= 10);
        assert_true(info.clock.error_bound_ns > 0 && info.clock.error_bound_ns < 2000000);
    }
    printf("fake OpenCL %d.%d: domain %s, host timer %s, bound %llu ns, drift %.2f ppm\n", info.version_major,
           info.version_minor, info.clock.clock_domain, info.uses_host_timer ? "used" : "not used",
           (unsigned long long)info.clock.error_bound_ns, info.clock.drift_ppm);
}

/* Stamps placed on the host timeline land inside the host bracket of each command, within their bound. */
static void spans_placed(uint64_t idle_ms)
{
    kt_reset();
    cl_command_queue q = fake_queue();
    cl_kernel k = fake_kernel("spin", 2000);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    struct timespec idle = {(time_t)(idle_ms / 1000), (long)(idle_ms % 1000) * 1000000L};
    nanosleep(&idle, NULL); /* the clock model extrapolates over this gap: its bound must grow to cover it */
    enum { REPS = 6 };
    uint64_t t0[REPS], t1[REPS];
    /* the bracket is read from the host counter, whose own model against CLOCK_MONOTONIC_RAW (the device's
     * domain is mapped onto RAW) has a bound of its own: a device span's stated bound includes it (recorded with
     * the span); the largest in force while the bracket was read is printed beside it */
    double host_bound = 0;
    size_t g = 1;
    for (int i = 0; i < REPS; i++) {
        kt_host_clock_info_t hc;
        assert_int_equal(kt_host_clock_info(&hc), 0);
        if (hc.error_bound_ns > host_bound)
            host_bound = hc.error_bound_ns;
        t0[i] = kt_now_ns();
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
        cl->clFinish(q);
        t1[i] = kt_now_ns();
        assert_int_equal(kt_host_clock_info(&hc), 0);
        if (hc.error_bound_ns > host_bound)
            host_bound = hc.error_bound_ns;
    }
    assert_int_equal(kt_cl_detach(kc), 0);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = fake_find(s, "spin");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, REPS);
    int n = 0;
    uint64_t worst = 0;
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        if (&s->entries[sp->entry] != e)
            continue;
        assert_true(n < REPS);
        assert_true(sp->flags & KT_SPAN_DEVICE);
        /* Device ns: a clock that runs slow (drifting epoch, a slewed REALTIME) counts under 2 ms for a 2 ms
         * run; 200 ppm covers both. */
        assert_true(sp->duration_ns >= 2000000 - 400 && sp->duration_ns < 2000000 + (t1[n] - t0[n]));
        uint64_t slack = sp->uncertainty_ns + 2000; /* the stated bound (both models) plus clock-read noise */
        assert_true(sp->start_ns + slack >= t0[n]);
        assert_true(sp->end_ns <= t1[n] + slack);
        uint64_t off = sp->start_ns < t0[n] ? t0[n] - sp->start_ns : 0;
        if (sp->end_ns > t1[n] && sp->end_ns - t1[n] > off)
            off = sp->end_ns - t1[n];
        if (off > worst)
            worst = off;
        n++;
    }
    assert_int_equal(n, REPS);
    printf("spans %llu ms after attach: worst placement outside the host bracket %llu ns (bound %llu ns, host "
           "clock %.0f ns)\n", (unsigned long long)idle_ms, (unsigned long long)worst,
           (unsigned long long)s->spans[0].uncertainty_ns, host_bound);
    kt_snapshot_free(s);
    cl->clReleaseKernel(k);
    cl->clReleaseCommandQueue(q);
}

static void test_spans_placed(void **state)
{
    (void)state;
    spans_placed(0);
}

static void test_spans_placed_later(void **state)
{
    (void)state;
    spans_placed(700);
}

/* A failed command is counted once, whether the driver sends its callback (FAKE_CL_ERROR_CALLBACKS) or not. */
static void test_failure_counted_once(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = fake_queue();
    cl_int err = 0;
    cl_kernel k = cl->clCreateKernel(NULL, "doomed", &err);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    cl_event gate = cl->clCreateUserEvent(g_ctx, &err);
    size_t g = 1;
    cl_event ev;
    assert_int_equal(cl->clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 1, &gate, &ev), CL_SUCCESS);
    assert_int_equal(kt_cl_track_kernel(kc, ev, k, NULL, 0), 0);
    cl->clSetUserEventStatus(gate, -5);
    cl->clFinish(q);
    assert_int_equal(kt_cl_flush(kc, 0), 0);
    assert_int_equal(kt_cl_detach(kc), 0);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = fake_find(s, "doomed");
    assert_non_null(e);
    assert_int_equal(e->errors, 1);
    assert_int_equal(e->dispatch_count, 0);
    kt_snapshot_free(s);
    cl_uint refs = 0;
    cl->clGetEventInfo(ev, CL_EVENT_REFERENCE_COUNT, sizeof refs, &refs, NULL);
    assert_int_equal(refs, 1); /* ktiming released its reference exactly once */
    cl->clReleaseEvent(ev);
    cl->clReleaseEvent(gate);
    cl->clReleaseKernel(k);
    cl->clReleaseCommandQueue(q);
}

/* Many commands, no wait by the test: completion comes from callbacks (on the enqueuing thread itself when
 * the driver completes commands inline) and every one is recorded. */
static void test_burst(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = fake_queue();
    cl_kernel k = fake_kernel("short", 20);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    size_t g = 1;
    for (int i = 0; i < 500; i++)
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    kt_cl_stats_t info;
    const char *how = getenv("KTIMING_OPENCL_COMPLETION");
    if (env_on("FAKE_CL_INLINE") && how && !strcmp(how, "callback")) {
        /* with callbacks, everything completed inside the enqueues: nothing can be in flight (polled records
         * wait for the collector's next look) */
        kt_cl_stats(kc, &info);
        assert_int_equal(info.in_flight, 0);
    }
    for (int i = 0; i < 20000; i++) {
        kt_cl_stats(kc, &info);
        if (!info.in_flight)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(info.in_flight, 0);
    assert_int_equal(kt_cl_detach(kc), 0);
    fake_expect_counts("short", 500, 0);
    cl->clReleaseKernel(k);
    cl->clReleaseCommandQueue(q);
}

int main(void)
{
    if (fake_open() != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clock_detected),
        cmocka_unit_test(test_spans_placed),
        cmocka_unit_test(test_spans_placed_later),
        cmocka_unit_test(test_failure_counted_once),
        cmocka_unit_test(test_burst),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cl->clReleaseContext(g_ctx);
    return rc;
}
