/* test_host_clock.c — the host counter: conversion arithmetic, the trust decision, and counter timestamps against
 * clock_gettime brackets on every CPU (containment within the published bound, never a duration). The same file
 * runs with KTIMING_CLOCK unset, =tsc and =monotonic_raw (tests/core/CMakeLists.txt). */
#include "core/hclock.h"
#include "core/hclock_decide.h"

#include <ktiming.h>
#include <ktiming/clock_model.h>

#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

static uint64_t raw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------------------
 * Conversion arithmetic against a schoolbook 64 x 64 -> 128-bit product
 * ------------------------------------------------------------------------------------------------- */

/* floor(|d| * mult / 2^KT__HC_SHIFT) with 32-bit limbs only. */
static uint64_t ref_mag(uint64_t d, uint64_t mult)
{
    uint64_t a0 = d & 0xffffffffu, a1 = d >> 32, b0 = mult & 0xffffffffu, b1 = mult >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    uint64_t lo = (p00 & 0xffffffffu) | (mid << 32);
    uint64_t hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    return (lo >> KT__HC_SHIFT) | (hi << (64 - KT__HC_SHIFT));
}

/* The library's value at signed distance d from the anchor, and the exact one. */
static void convert_pair(uint64_t tick0, uint64_t ns0, uint64_t mult, int64_t d, uint64_t *got, uint64_t *exact)
{
    *got = kt__hc_seg_ns(tick0, ns0, mult, tick0 + (uint64_t)d);
    if (d >= 0) {
        *exact = ns0 + ref_mag((uint64_t)d, mult);
    } else {
        /* floor of a negative product: -ceil(|d| mult / 2^S) */
        uint64_t m = (uint64_t)0 - (uint64_t)d, f = ref_mag(m, mult);
        int rem = ((m * mult) & ((1ull << KT__HC_SHIFT) - 1)) != 0; /* low bits of the product survive the wrap */
        *exact = ns0 - f - (rem ? 1 : 0);
    }
}

/* Anchors near the ends of the 64-bit range (the counter wraps between anchor and read), distances up to the
 * 63-bit limit either way, slopes of a 24 MHz, a 1 GHz, a 2.1 GHz and a 4 GHz counter: the 128-bit path is exact;
 * the 64-bit path (within 2^32 ticks) is within 1 ns, and exact when the slope's low 8 bits are zero. */
static void test_conversion_exact(void **state)
{
    (void)state;
    const uint64_t mults[] = {(uint64_t)(41.666666 * 1099511627776.0), 1ull << KT__HC_SHIFT,
                              (uint64_t)(0.4770992366 * 1099511627776.0), 1ull << (KT__HC_SHIFT - 2),
                              (uint64_t)(0.4770992366 * 1099511627776.0) & ~0xffull};
    const uint64_t anchors[] = {0, 12345, UINT64_MAX - 10, (1ull << 63) - 3, 1ull << 62};
    const int64_t dists[] = {0, 1, -1, 4095, (1ll << 32) - 1, 1ll << 32, -(1ll << 32), 1ll << 40, -(1ll << 40),
                             1ll << 50, 1ll << 62, -(1ll << 62), INT64_MAX / 64};
    int checked = 0;
    for (size_t mi = 0; mi < sizeof mults / sizeof mults[0]; mi++)
        for (size_t ai = 0; ai < sizeof anchors / sizeof anchors[0]; ai++)
            for (size_t di = 0; di < sizeof dists / sizeof dists[0]; di++) {
                uint64_t mult = mults[mi];
                int64_t d = dists[di];
                /* keep the product within 63 bits of ns (wrap-free) */
                uint64_t mag = d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;
                if (mag && ref_mag(mag, mult) > (1ull << 62)) continue;
                uint64_t ns0 = 1ull << 62, got, exact;
                convert_pair(anchors[ai], ns0, mult, d, &got, &exact);
                int fast = d >= 0 && ((uint64_t)d >> 32) == 0 && (mult >> 40) == 0;
                if (!fast || (mult & 0xff) == 0)
                    assert_true(got == exact);
                else
                    assert_true(got <= exact && exact - got <= 1);
                checked++;
            }
    assert_true(checked > 200);
    /* a wrap of the counter between anchor and read is a small positive distance */
    assert_true(kt__hc_seg_ns(UINT64_MAX - 9, 1000, 1ull << KT__HC_SHIFT, 5) == 1015);
}

/* ---------------------------------------------------------------------------------------------------
 * The decision, with simulated facts (a VM without invariant TSC, the kernel on another clocksource, ...)
 * ------------------------------------------------------------------------------------------------- */

static kt__hc_facts_t good_facts(void)
{
    kt__hc_facts_t f;
    memset(&f, 0, sizeof f);
    f.have_counter = 1;
    f.is_x86 = 1;
    f.invariant = 1;
    f.constant_tsc = 1;
    f.nonstop_tsc = 1;
    snprintf(f.clocksource, sizeof f.clocksource, "tsc");
    snprintf(f.expected_clocksource, sizeof f.expected_clocksource, "tsc");
    return f;
}

static void test_decide(void **state)
{
    (void)state;
    char why[192];
    kt__hc_facts_t f = good_facts();
    assert_int_equal(kt__hc_request_parse(NULL), KT__HC_REQ_AUTO);
    assert_int_equal(kt__hc_request_parse("auto"), KT__HC_REQ_AUTO);
    assert_int_equal(kt__hc_request_parse("tsc"), KT__HC_REQ_COUNTER);
    assert_int_equal(kt__hc_request_parse("monotonic_raw"), KT__HC_REQ_GETTIME);
    assert_int_equal(kt__hc_request_parse("rdtsc"), KT__HC_REQ_INVALID);
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_AUTO, why, sizeof why), 1);
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_GETTIME, why, sizeof why), 0);
    assert_non_null(strstr(why, "KTIMING_CLOCK=monotonic_raw"));

    f = good_facts(); /* a VM that does not expose an invariant TSC */
    f.invariant = 0;
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_AUTO, why, sizeof why), 0);
    assert_non_null(strstr(why, "CPUID 0x80000007"));
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_COUNTER, why, sizeof why), 1); /* forced, and says so */
    assert_non_null(strstr(why, "forced although"));

    f = good_facts();
    f.nonstop_tsc = 0;
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_AUTO, why, sizeof why), 0);
    assert_non_null(strstr(why, "nonstop_tsc"));

    /* a cloud VM: the kernel runs kvm-clock, the CPU reports an invariant TSC: auto takes the counter, checked
     * against CLOCK_MONOTONIC_RAW (issue 43), and says so in one line */
    f = good_facts();
    snprintf(f.clocksource, sizeof f.clocksource, "kvm-clock");
    assert_int_equal(kt__hc_kernel_counter(&f), 0);
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_AUTO, why, sizeof why), 1);
    assert_non_null(strstr(why, "kvm-clock"));
    assert_non_null(strstr(why, "invariant TSC"));
    assert_null(strchr(why, '\n'));
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_INVALID, why, sizeof why), 1);
    assert_non_null(strstr(why, "not auto|tsc|monotonic_raw"));
    f.invariant = 0; /* ... but not where the CPU says the counter is not invariant */
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_AUTO, why, sizeof why), 0);
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_INVALID, why, sizeof why), 0);
    assert_non_null(strstr(why, "not auto|tsc|monotonic_raw"));
    f = good_facts();
    assert_int_equal(kt__hc_kernel_counter(&f), 1);

    f = good_facts(); /* a CPU whose counter runs behind another's */
    f.cross_cpu_checked = 1;
    snprintf(f.cross_cpu_note, sizeof f.cross_cpu_note, "the counter on cpu 1 reads behind cpu 0's");
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_AUTO, why, sizeof why), 0);
    assert_non_null(strstr(why, "cpu 1"));
    f.cross_cpu_ok = 1;
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_AUTO, why, sizeof why), 1);

    f = good_facts();
    f.have_counter = 0;
    assert_int_equal(kt__hc_decide(&f, KT__HC_REQ_COUNTER, why, sizeof why), 0);
}

/* ---------------------------------------------------------------------------------------------------
 * The library's host clock against clock_gettime, on every CPU
 * ------------------------------------------------------------------------------------------------- */

static void busy_ns(uint64_t ns)
{
    uint64_t end = raw_now() + ns;
    while (raw_now() < end)
        ;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    nanosleep(&ts, NULL);
}

/* Every reading of kt_now_ns() lies within the clock_gettime reads around it, widened by the bound published
 * just before and just after; so does every zone edge, widened further by the unordered read's reorder window. */
static int check_intervals(int cpu)
{
    static const uint64_t waits[] = {1000, 10000, 1000000, 10000000, 100000000, 1000000000};
    int checked = 0;
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        for (int busy = 0; busy < 2; busy++) {
            if (busy && waits[i] > 10000000) continue; /* long intervals sleep only */
            kt_host_clock_info_t before, after;
            assert_int_equal(kt_host_clock_info(&before), 0);
            uint64_t a0 = raw_now(), k0 = kt_now_ns(), a1 = raw_now();
            KT_CPU_BEGIN(z, "host_clock_interval");
            uint64_t z0 = raw_now();
            if (busy) busy_ns(waits[i]);
            else sleep_ns(waits[i]);
            uint64_t z1 = raw_now();
            KT_CPU_END(z);
            uint64_t b0 = raw_now(), k1 = kt_now_ns(), b1 = raw_now();
            assert_int_equal(kt_host_clock_info(&after), 0);
            double bound = before.error_bound_ns > after.error_bound_ns ? before.error_bound_ns : after.error_bound_ns;
            double slack = bound + 1.0;
            if ((double)k0 + slack < (double)a0 || (double)k0 > (double)a1 + slack ||
                (double)k1 + slack < (double)b0 || (double)k1 > (double)b1 + slack) {
                print_message("cpu %d wait %llu: k0-a0 %lld a1-k0 %lld k1-b0 %lld b1-k1 %lld bound %.0f\n", cpu,
                              (unsigned long long)waits[i], (long long)(k0 - a0), (long long)(a1 - k0),
                              (long long)(k1 - b0), (long long)(b1 - k1), bound);
                fail();
            }
            /* the zone's span: its edges lie between a1 and z0, and between z1 and b0 */
            kt_snapshot_t *snap = kt_snapshot();
            assert_non_null(snap);
            const kt_span_t *sp = NULL;
            for (size_t s = 0; s < snap->span_count; s++)
                if (!strcmp(snap->entries[snap->spans[s].entry].name, "host_clock_interval")) sp = &snap->spans[s];
            assert_non_null(sp);
            double zslack = slack + 200.0; /* reorder window of an unordered rdtsc */
            assert_true((double)sp->start_ns + zslack >= (double)a1 && (double)sp->start_ns <= (double)z0 + zslack);
            assert_true((double)sp->end_ns + zslack >= (double)z1 && (double)sp->end_ns <= (double)b0 + zslack);
            kt_snapshot_free(snap);
            kt_reset();
            checked++;
        }
    }
    return checked;
}

static void test_brackets_every_cpu(void **state)
{
    (void)state;
    cpu_set_t orig, one;
    assert_int_equal(sched_getaffinity(0, sizeof orig, &orig), 0);
    int cpus = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &orig)) continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) continue;
        assert_true(check_intervals(cpu) >= 9);
        cpus++;
    }
    sched_setaffinity(0, sizeof orig, &orig);
    assert_true(cpus >= 1);
}

/* What the library says about its counter matches the environment and the published host device record. */
static void test_info(void **state)
{
    (void)state;
    kt_host_clock_info_t hc;
    assert_int_equal(kt_host_clock_info(NULL), KT_EINVAL);
    assert_int_equal(kt_host_clock_info(&hc), 0);
    assert_true(hc.reason[0] != 0);
    const char *env = getenv("KTIMING_CLOCK");
    print_message("KTIMING_CLOCK=%s: %s (%s), %.3f MHz, drift %+.3f +- %.3f ppm, bound %.0f ns, %u samples\n",
                  env ? env : "(unset)", hc.counter, hc.reason, (double)hc.frequency_hz / 1e6, hc.drift_ppm,
                  hc.drift_bound_ppm, hc.error_bound_ns, hc.model_samples);
    int counting = strcmp(hc.counter, "CLOCK_MONOTONIC_RAW") != 0;
    if (env && !strcmp(env, "monotonic_raw")) {
        assert_false(counting);
        assert_non_null(strstr(hc.reason, "KTIMING_CLOCK=monotonic_raw"));
    }
#if defined(__x86_64__) || defined(__aarch64__)
    if (env && !strcmp(env, "tsc")) {
        assert_true(counting);
        assert_non_null(strstr(hc.reason, "KTIMING_CLOCK=tsc"));
    }
#endif
    if (counting) {
        assert_true(hc.frequency_hz > 1000000u);
        assert_true(hc.error_bound_ns >= 1.0);
        assert_true(hc.model_samples >= KT_CLOCK_MIN_SAMPLES);
        assert_true(hc.fits >= 1);
    } else {
        assert_true(hc.frequency_hz == 1000000000u);
        assert_true(hc.error_bound_ns == 0.0);
    }
    kt_snapshot_t *snap = kt_snapshot();
    assert_non_null(snap);
    int found = 0;
    for (size_t i = 0; i < snap->device_count; i++) {
        const kt_device_info_t *d = &snap->devices[i];
        if (d->backend != KT_BACKEND_CPU || strcmp(d->name, "host") != 0) continue;
        found = 1;
        assert_string_equal(d->clock_domain, "CLOCK_MONOTONIC_RAW");
        if (counting) {
            assert_true(d->error_bound_ns >= 1);
            assert_true(d->model_samples >= KT_CLOCK_MIN_SAMPLES);
        } else {
            assert_true(d->error_bound_ns == 0);
            assert_true(d->frequency_hz == 1000000000u);
        }
    }
    kt_snapshot_free(snap);
    assert_true(found);
}

/* A device span's stated bound is its clock fit's plus the host counter model's: the fit places it on
 * CLOCK_MONOTONIC_RAW, the host stamps beside it come from the counter, off RAW by up to that model's bound. A
 * span from a host clock keeps the bound it was given. */
static void test_device_span_bound(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("devspan", KT_BACKEND_OPENCL, NULL);
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = k;
    d.start_ns = kt_now_ns();
    d.end_ns = d.start_ns + 1000;
    d.duration_ns = 1000;
    d.uncertainty_ns = 500;
    d.flags = KT_SPAN_DEVICE;
    kt_record_dispatch(&d);
    d.flags = 0; /* the same dispatch, stamped by a host clock */
    kt_record_dispatch(&d);
    kt_host_clock_info_t hc;
    assert_int_equal(kt_host_clock_info(&hc), 0);
    int counting = strcmp(hc.counter, "CLOCK_MONOTONIC_RAW") != 0;
    kt_snapshot_t *s = kt_snapshot();
    assert_int_equal(s->span_count, 2);
    int device = 0, host = 0;
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        print_message("%s span: uncertainty %llu ns (fit 500 ns, host counter bound now %.0f ns)\n",
                      sp->flags & KT_SPAN_DEVICE ? "device" : "host", (unsigned long long)sp->uncertainty_ns,
                      hc.error_bound_ns);
        if (!(sp->flags & KT_SPAN_DEVICE)) {
            host++;
            assert_int_equal(sp->uncertainty_ns, 500);
        } else if (counting) {
            device++;
            assert_true(sp->uncertainty_ns > 500);              /* the model's bound is at least its 2 ns rounding */
            assert_true(sp->uncertainty_ns < 500 + 1000000u);   /* and nowhere near a millisecond */
        } else {
            device++;
            assert_int_equal(sp->uncertainty_ns, 500); /* clock_gettime is the host timeline: nothing to add */
        }
    }
    assert_int_equal(device, 1);
    assert_int_equal(host, 1);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conversion_exact),
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_device_span_bound),
        cmocka_unit_test(test_brackets_every_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
