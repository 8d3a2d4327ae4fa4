/* test_cpu_timer.c — host clock facts, the cumulative-elapsed timer semantics, CPU zones and KT_RECORD. */
#include "test_util.h"

#include <time.h>

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void test_clock(void **state)
{
    (void)state;
    uint64_t a = kt_now_ns(), b = kt_now_ns();
    assert_true(a > 0);
    assert_true(b >= a);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    uint64_t raw = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    assert_true(raw >= b && raw - b < 1000000000u); /* same time base as CLOCK_MONOTONIC_RAW */
    assert_true(kt_clock_resolution_ns() >= 1);
    double cost = kt_clock_read_cost_ns();
    assert_true(cost > 0.0 && cost < 100000.0);
    assert_true(kt_clock_read_cost_ns() == cost); /* measured once */
}

static void test_timer_semantics(void **state)
{
    (void)state;
    kt_cpu_timer_t t;
    memset(&t, 0, sizeof t);
    assert_true(kt_cpu_timer_elapsed_ms(&t) == 0.0); /* never started */
    kt_cpu_timer_stop(&t);                           /* stop before start: still 0 */
    assert_true(kt_cpu_timer_elapsed_ms(&t) == 0.0);

    kt_cpu_timer_start(&t);
    sleep_ms(20);
    double a = kt_cpu_timer_elapsed_ms(&t);
    assert_true(a >= 20.0);
    sleep_ms(10);
    double b = kt_cpu_timer_elapsed_ms(&t); /* running: cumulative since start */
    assert_true(b >= a + 10.0);

    kt_cpu_timer_stop(&t);
    double c = kt_cpu_timer_elapsed_ms(&t);
    assert_true(c >= b);
    sleep_ms(10);
    assert_true(kt_cpu_timer_elapsed_ms(&t) == c); /* stopped: frozen */
    kt_cpu_timer_stop(&t);                         /* a second stop changes nothing */
    assert_true(kt_cpu_timer_elapsed_ms(&t) == c);

    kt_cpu_timer_start(&t); /* restart: a new interval */
    double d = kt_cpu_timer_elapsed_ms(&t);
    assert_true(d < c);
}

static void zone_once(int ms)
{
    KT_CPU_BEGIN(z, "zone_sleep");
    sleep_ms(ms);
    KT_CPU_END(z);
}

static void test_zones(void **state)
{
    (void)state;
    kt_reset();
    zone_once(5);
    zone_once(5);
    kt_disable();
    zone_once(1); /* runtime-disabled: not recorded */
    kt_enable();
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "zone_sleep", KT_BACKEND_CPU, "host");
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 2);
    assert_true(t->min_ns >= 5000000u);
    assert_true(t->max_ns < 5000000000u);
    assert_int_equal(s->span_count, 2);
    assert_true(s->spans[0].end_ns - s->spans[0].start_ns == s->spans[0].duration_ns);
    assert_int_equal(s->spans[0].queue, UINT32_MAX);
    kt_snapshot_free(s);

    /* A zone begun while enabled and ended after a disable is not recorded either. */
    kt_reset();
    kt_kernel_id_t site = 0;
    kt_zone_t z = kt_zone_begin(&site, "manual_zone");
    assert_int_not_equal(z.kernel, 0);
    assert_int_equal(site, z.kernel);
    kt_zone_end(&z);
    kt_disable();
    kt_zone_t z2 = kt_zone_begin(&site, "manual_zone");
    assert_int_equal(z2.kernel, 0);
    kt_zone_end(&z2);
    kt_enable();
    s = kt_snapshot();
    t = kt_snapshot_find(s, "manual_zone", KT_BACKEND_CPU, NULL);
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 1);
    kt_snapshot_free(s);
}

static void test_record_macro(void **state)
{
    (void)state;
    kt_reset();
    for (int i = 1; i <= 10; i++)
        KT_RECORD("macro_site", KT_BACKEND_VULKAN, (uint64_t)i * 100);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "macro_site", KT_BACKEND_VULKAN, "default");
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 10);
    assert_int_equal(t->total_ns, 5500);
    assert_int_equal(t->last_ns, 1000);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clock),
        cmocka_unit_test(test_timer_semantics),
        cmocka_unit_test(test_zones),
        cmocka_unit_test(test_record_macro),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
