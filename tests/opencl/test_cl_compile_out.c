/* test_cl_compile_out.c — ktiming/cl.h compiled out keeps user code compiling and the enqueue working. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

int kt_test_cl_compiled_out(cl_command_queue queue, cl_kernel kernel);

static int g_calls; /* enqueues that reached the stand-in */

/* Stand-in for the program's OpenCL: checks it gets the queue back and returns the kernel as "event". */
CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim,
                                                       const size_t *off, const size_t *gws, const size_t *lws,
                                                       cl_uint n, const cl_event *wait, cl_event *ev)
{
    (void)off, (void)lws, (void)n, (void)wait;
    g_calls++;
    if (q != (cl_command_queue)0x1000 || dim != 1 || !gws || *gws != 1)
        return CL_INVALID_VALUE;
    if (ev)
        *ev = (cl_event)k;
    return CL_SUCCESS;
}

static void test_compiled_out(void **state)
{
    (void)state;
    assert_int_equal(kt_test_cl_compiled_out((cl_command_queue)0x1000, (cl_kernel)0x2000), 0);
    assert_int_equal(g_calls, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_compiled_out)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
