/* test_cl_missing.c — with the OpenCL loader absent (KTIMING_OPENCL_LIBRARY=/nonexistent) every entry point
 * reports KT_EUNAVAILABLE and nothing crashes. Runs everywhere: it needs no device. */
#include <ktiming.h>
#include <ktiming/cl.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>

static void test_unavailable(void **state)
{
    (void)state;
    assert_string_equal(getenv("KTIMING_OPENCL_LIBRARY"), "/nonexistent/libOpenCL.so.1");
    const kt_cl_api_t *api = (const kt_cl_api_t *)0x1;
    assert_int_equal(kt_cl_load(&api), KT_EUNAVAILABLE);
    assert_null(api);
    kt_cl_ctx_t *kc = (kt_cl_ctx_t *)0x1;
    assert_int_equal(kt_cl_attach((cl_command_queue)0x1234, NULL, &kc), KT_EUNAVAILABLE);
    assert_null(kc);
    assert_null(kt_cl_find((cl_command_queue)0x1234));
    kt_cl_device_info_t info;
    assert_int_equal(kt_cl_device_info((cl_device_id)0x1234, &info), KT_EUNAVAILABLE);
    assert_int_equal(kt_cl_flush(NULL, 0), 0); /* nothing attached: nothing to do */
    assert_int_equal(kt_cl_enqueue_ndrange(NULL, NULL, 1, NULL, NULL, NULL, 0, NULL, NULL), CL_INVALID_COMMAND_QUEUE);
    kt_flush(); /* the core's flush path with the backend unavailable */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_unavailable)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
