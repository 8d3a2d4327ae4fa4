/* test_kernels_full.c — past the 65,535-kernel limit every kind of record is dropped and counted in kernels_dropped,
 * one each (report core.md item 5: zones and kt_cpu_dispatch_2d were dropped uncounted). Its own process: the
 * table stays full. */
#include "test_util.h"

#include <stdio.h>

static void rows(uint32_t y0, uint32_t y1, uint32_t width, void *user)
{
    (void)y0, (void)y1, (void)width;
    ++*(int *)user;
}

static uint64_t dropped_now(void)
{
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    uint64_t n = s->kernels_dropped;
    kt_snapshot_free(s);
    return n;
}

static void test_every_record_counted(void **state)
{
    (void)state;
    char name[32];
    uint32_t made = 0;
    for (uint32_t i = 0; i < 70000; i++) {
        snprintf(name, sizeof name, "k%u", i);
        if (kt_kernel_intern(name, KT_BACKEND_CPU, NULL))
            made++;
    }
    assert_int_equal(made, 65535); /* the documented limit */
    assert_int_equal(kt_kernel_intern("one_more", KT_BACKEND_CPU, NULL), 0);
    uint64_t before = dropped_now();

    kt_record("rec_past_full", KT_BACKEND_CPU, 5);
    assert_int_equal(dropped_now() - before, 1);
    for (int i = 0; i < 3; i++) {
        KT_RECORD("site_rec_past_full", KT_BACKEND_CPU, 5);
    }
    assert_int_equal(dropped_now() - before, 4);
    for (int i = 0; i < 3; i++) {
        KT_CPU_BEGIN(z, "zone_past_full");
        KT_CPU_END(z);
    }
    assert_int_equal(dropped_now() - before, 7);
    for (int i = 0; i < 3; i++) {
        kt_zone_t z = kt_zone_begin(NULL, "unsited_zone_past_full");
        kt_zone_end(&z);
    }
    assert_int_equal(dropped_now() - before, 10);
    int calls = 0;
    for (int i = 0; i < 3; i++)
        assert_int_equal(kt_cpu_dispatch_2d("rows_past_full", 4, 4, rows, &calls), 0);
    assert_true(calls >= 3); /* the rows still run */
    assert_int_equal(dropped_now() - before, 13);
    kt_record_dispatch(&(kt_dispatch_t){.kernel = 0, .duration_ns = 5});
    assert_int_equal(dropped_now() - before, 14);

    /* recording off: nothing is recorded, so nothing is dropped */
    kt_disable();
    KT_CPU_BEGIN(z, "zone_past_full_off");
    KT_CPU_END(z);
    assert_int_equal(kt_cpu_dispatch_2d("rows_past_full_off", 4, 4, rows, &calls), 0);
    kt_enable();
    assert_int_equal(dropped_now() - before, 14);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_record_counted)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
