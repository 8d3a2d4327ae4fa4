// test_cxx_on.cpp — include/ktiming.h compiled as C++ with KTIMING_ENABLE (from the ktiming target): it records.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
extern "C" {
#include <cmocka.h>
}

#include <ktiming.h>

#include <cstring>

int cxx_off_run(void); // cxx_off.cpp: the same calls compiled without KTIMING_ENABLE

static void test_cxx_enabled(void **)
{
    kt_reset();
    for (int i = 0; i < 3; i++) {
        KT_CPU_BEGIN(z, "cxx_zone");
        KT_CPU_END(z);
        KT_RECORD("cxx_record", KT_BACKEND_CUDA, 100u);
    }
    kt_record("cxx_named", KT_BACKEND_CPU, 7u);
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "cxx_zone", KT_BACKEND_CPU, nullptr);
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 3);
    t = kt_snapshot_find(s, "cxx_record", KT_BACKEND_CUDA, "default");
    assert_non_null(t);
    assert_true(t->mean_ns == 100.0);
    assert_non_null(kt_snapshot_find(s, "cxx_named", KT_BACKEND_CPU, "host"));
    kt_snapshot_free(s);
    assert_int_equal(kt_is_enabled(), 1);
}

static void test_cxx_disabled(void **) { assert_int_equal(cxx_off_run(), 0); }

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cxx_enabled),
        cmocka_unit_test(test_cxx_disabled),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
