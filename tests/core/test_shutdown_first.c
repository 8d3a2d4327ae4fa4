/* test_shutdown_first.c — kt_shutdown() called before anything initialised ktiming (report core.md item 6): records
 * are dropped until kt_init, the lazy initialisation (here kt_snapshot) leaves it shut down, and kt_init then
 * succeeds and re-enables recording. Each case runs in its own process (KT_TEST_CASE), as it needs ktiming
 * untouched: "lazy" (a snapshot first, then kt_init) and "init" (kt_init first: its sizes are the ones used). */
#include "test_util.h"

/* Dispatches of `name` (CPU) in a fresh snapshot; *samples its sample count. */
static uint64_t count_of(const char *name, uint32_t *samples)
{
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *e = kt_snapshot_find(s, name, KT_BACKEND_CPU, NULL);
    uint64_t n = e ? e->dispatch_count : 0;
    if (samples)
        *samples = e ? e->sample_count : 0;
    kt_snapshot_free(s);
    return n;
}

static void test_shutdown_first(void **state)
{
    (void)state;
    const char *mode = getenv("KT_TEST_CASE");
    assert_non_null(mode);
    kt_shutdown();
    assert_int_equal(kt_is_enabled(), 0);
    kt_record("after_shutdown", KT_BACKEND_CPU, 5);
    KT_CPU_BEGIN(z, "zone_after_shutdown");
    KT_CPU_END(z);
    kt_enable(); /* as after any kt_shutdown: only kt_init turns recording back on */
    kt_record("after_shutdown", KT_BACKEND_CPU, 5);
    if (!strcmp(mode, "lazy")) {
        assert_int_equal(count_of("after_shutdown", NULL), 0); /* initialises ktiming: still shut down */
        assert_int_equal(count_of("zone_after_shutdown", NULL), 0);
        assert_int_equal(kt_is_enabled(), 0);
        kt_record("after_shutdown", KT_BACKEND_CPU, 5);
        assert_int_equal(count_of("after_shutdown", NULL), 0);
        assert_int_equal(kt_init(NULL), 0);
    } else {
        kt_desc_t d;
        memset(&d, 0, sizeof d);
        d.sample_capacity = 4;
        assert_int_equal(kt_init(&d), 0);
    }
    assert_int_equal(kt_is_enabled(), 1);
    for (int i = 0; i < 10; i++)
        kt_record("after_init", KT_BACKEND_CPU, 5 + (uint64_t)i);
    uint32_t samples = 0;
    assert_int_equal(count_of("after_init", &samples), 10);
    assert_int_equal(count_of("after_shutdown", NULL), 0);
    if (strcmp(mode, "lazy") != 0)
        assert_int_equal(samples, 4); /* the first kt_init's sizes */
    assert_int_equal(kt_init(NULL), KT_ESTATE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shutdown_first)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
