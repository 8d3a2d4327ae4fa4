/* test_spans_env.c — KTIMING_SPANS sets the span log size (0 = off); run with KTIMING_SPANS=0 and =3. */
#include "test_util.h"

static void test_env(void **state)
{
    (void)state;
    const char *e = getenv("KTIMING_SPANS");
    assert_non_null(e);
    unsigned want = (unsigned)atoi(e);
    for (int i = 0; i < 10; i++) {
        KT_CPU_BEGIN(z, "env_zone");
        KT_CPU_END(z);
    }
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "env_zone", KT_BACKEND_CPU, NULL);
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 10);
    assert_int_equal(s->span_count, want);
    assert_int_equal(t->spans_dropped, want ? 10 - want : 0); /* off is not overflow */
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
