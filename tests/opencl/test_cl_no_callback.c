/* test_cl_no_callback.c — a driver whose clSetEventCallback refuses every callback (FAKE_CL_SETCB_FAIL=1 on the
 * test double fake_opencl.c). The fallback is the collector's polling, never a wait inside the enqueue: a kernel
 * gated by a user event the program sets only after the enqueue returns used to wait forever there. It is timed
 * once it runs, on a queue with and without profiling. */
#include "fake_cl_util.h"

static cl_int status_of(cl_event ev)
{
    cl_int st = CL_QUEUED;
    cl->clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
    return st;
}

static void gated_kernel_is_timed(cl_command_queue_properties props, const char *name)
{
    cl_int err = 0;
    cl_command_queue q = cl->clCreateCommandQueue(g_ctx, g_dev, props, &err);
    assert_non_null(q);
    cl_kernel k = fake_kernel(name, 100);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    cl_event gate = cl->clCreateUserEvent(g_ctx, &err);
    assert_non_null(gate);
    cl_event ev = NULL;
    size_t g = 1;
    assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 1, &gate, &ev), CL_SUCCESS);
    assert_true(status_of(ev) > CL_COMPLETE); /* the enqueue returned before the program set the gate */
    assert_int_equal(cl->clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
    assert_int_equal(cl->clWaitForEvents(1, &ev), CL_SUCCESS);
    assert_int_equal(kt_cl_flush(kc, 0), 0);
    fake_expect_counts(name, 1, 0);
    assert_int_equal(kt_cl_detach(kc), 0);
    cl->clReleaseEvent(ev);
    cl->clReleaseEvent(gate);
    cl->clReleaseKernel(k);
    cl->clReleaseCommandQueue(q);
}

static void test_gated_profiled(void **state)
{
    (void)state;
    gated_kernel_is_timed(CL_QUEUE_PROFILING_ENABLE, "gated_profiled");
}

static void test_gated_host_timed(void **state)
{
    (void)state;
    gated_kernel_is_timed(0, "gated_host_timed");
}

int main(void)
{
    if (fake_open() != 0)
        return 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_gated_profiled), cmocka_unit_test(test_gated_host_timed)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
