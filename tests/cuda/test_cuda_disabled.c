/* test_cuda_disabled.c — with ktiming compiled out (KTIMING_ENABLE 0) <ktiming/cuda.h> still compiles, its types
 * stay, and every call is a no-op that touches no driver. */
#undef KTIMING_ENABLE
#define KTIMING_ENABLE 0

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ktiming/cuda.h>

static void test_noops(void **state)
{
    (void)state;
    assert_int_equal(KT_ENABLED, 0);
    kt_cuda_span_t span = {(void *)&span, (void *)&span, 7};
    assert_int_equal(kt_cuda_begin(&span, NULL, NULL, "k"), 0);
    assert_null(span.pair);
    assert_int_equal(kt_cuda_end(&span), 0);
    KT_CUDA_BEGIN(s2, NULL, NULL, "k");
    KT_CUDA_END(s2);
    kt_cuda_timer_t t = {0};
    kt_cuda_timer_start(&t);
    kt_cuda_timer_stop(&t);
    assert_true(kt_cuda_timer_elapsed_ms(&t) == 0.0);
    uint64_t ns = 0;
    assert_int_equal(kt_cuda_globaltimer_read(NULL, &ns), KT_EDISABLED);
    assert_string_equal(kt_cuda_last_error(), "");
    kt_cuda_stamp_t st = {UINT64_MAX, 0};
    assert_true(st.enter_ns > st.exit_ns);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_noops)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
