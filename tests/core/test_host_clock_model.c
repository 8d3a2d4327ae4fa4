/* test_host_clock_model.c — the host counter's model (src/core/hclock_model.c, compiled in with
 * KT_HCLOCK_DOUBLES) driven by test doubles: a synthetic invariant counter and a synthetic
 * clock_gettime(CLOCK_MONOTONIC_RAW) whose rate against the counter changes, wanders or steps, and a clocksource
 * that can switch. Simulated time advances only with the reads (no wall clock anywhere). Every stamp the hot
 * path returns must lie within the bound stated at that moment (outside the blind window between a step and
 * the first refresh after it) and never step back. Issue 43 items 2-5. */
#include "core/hclock.h"
#include "core/hclock_model.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#define TICK_GHZ 2.6
#define H0 1000000000000.0 /* CLOCK_MONOTONIC_RAW at the world's start */
#define K0 5000000000000.0 /* counter at the start */

/* The world: true time tau (ns since start) advances with each read; the counter is TICK_GHZ * tau exactly,
 * CLOCK_MONOTONIC_RAW is tau distorted. */
typedef struct world_t {
    double change_at, change_ppm; /* rate change of CLOCK_MONOTONIC_RAW against the counter from change_at on */
    double sine_ppm, sine_period; /* rate wander: sine_ppm * sin(2 pi tau / period) */
    double step_at, step_ns;      /* a step, step_at < 0: none */
    double switch_at;             /* the clocksource switches away from the counter, < 0: never */
} world_t;

static world_t g_w;
static double g_tau, g_tau_tick;
static uint64_t g_rng;
static int g_switched;
static uint64_t g_published;
static double g_event = -1; /* tau of the step or switch */
static int g_seen;          /* clock_gettime was read (by a refresh) after the event */

static double urand(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}

static double host_at(double tau)
{
    double h = H0 + tau;
    if (g_w.change_ppm != 0 && tau > g_w.change_at)
        h += (tau - g_w.change_at) * g_w.change_ppm * 1e-6;
    if (g_w.sine_ppm != 0) {
        double w = 2.0 * M_PI / g_w.sine_period;
        h += g_w.sine_ppm * 1e-6 * (1.0 - cos(w * tau)) / w;
    }
    if (g_w.step_at >= 0 && tau >= g_w.step_at)
        h += g_w.step_ns;
    return h;
}

/* A read takes 15-40 ns; one in 200 is preempted for 2-20 us. */
static void advance_read(void)
{
    g_tau += 15.0 + 25.0 * urand();
    if (urand() < 0.005)
        g_tau += 2000.0 + 18000.0 * urand();
}

uint64_t kt__hc_double_tick(void)
{
    advance_read();
    g_tau_tick = g_tau;
    return (uint64_t)(K0 + g_tau * TICK_GHZ);
}

uint64_t kt__hc_double_gettime(void)
{
    advance_read();
    if (g_event >= 0 && g_tau >= g_event)
        g_seen = 1;
    return (uint64_t)host_at(g_tau);
}

int kt__hcm_source_changed(int *kernel_counter)
{
    if (g_w.switch_at >= 0 && g_tau >= g_w.switch_at && !g_switched) {
        g_switched = 1;
        *kernel_counter = 0;
        return 1;
    }
    return 0;
}

void kt__hcm_published(const kt__hcm_stats_t *st)
{
    (void)st;
    g_published++;
}

typedef struct result_t {
    uint64_t stamps, outside, blind, backwards;
    uint64_t bound_unlike; /* kt__hc_bound_ns() (what a device span adds) differed from the stated bound */
    double worst_excess;   /* largest err - bound */
    double worst_err;
    double min_margin;     /* smallest bound - err over the checked stamps */
    kt__hcm_stats_t end;   /* the model's counters at the end */
    uint64_t refreshes_after_event; /* refreshes from the step/switch to the end */
} result_t;

/* Start the model in a fresh world, idle for `idle_ns`, then read densely (gaps of `gap_ns` on average) until
 * `run_ns`. A stamp taken after the step (or switch) but converted before the first refresh that followed it is
 * in the blind window: counted, not checked. */
static void run(const world_t *w, int kernel_counter, uint64_t seed, double idle_ns, double gap_ns, double run_ns,
                result_t *res)
{
    memset(res, 0, sizeof *res);
    g_w = *w;
    g_tau = 0;
    g_rng = seed * 0x2545f4914f6cdd1dull + 1;
    g_switched = 0;
    assert_int_equal(kt__hcm_start(kernel_counter, 0), 0);
    assert_int_equal(atomic_load(&kt__hc.mode), KT__HC_COUNTER);
    g_tau += idle_ns;
    g_event = w->step_at >= 0 ? w->step_at : w->switch_at;
    g_seen = 0;
    kt__hcm_stats_t st;
    kt__hcm_stats(&st);
    uint64_t refreshes_at_event = 0;
    uint64_t prev = 0;
    while (g_tau < run_ns) {
        g_tau += gap_ns * 2.0 * urand();
        if (g_event >= 0 && g_tau < g_event)
            refreshes_at_event = st.refreshes;
        /* both hot-path forms: a tick converted (a refresh first when due, reading brackets of its own), and a
         * begin read (after a refresh the counter is read again: the stamp belongs to that last read) */
        uint64_t ns;
        double tau;
        if (urand() < 0.5) {
            uint64_t k = kt__hc_tick();
            tau = g_tau_tick;
            ns = kt__hc_ns(k);
        } else {
            ns = kt__hc_now_begin(1);
            tau = g_tau_tick;
        }
        kt__hcm_stats(&st);
        if (kt__hc_bound_ns() != (uint64_t)ceil(st.bound_ns))
            res->bound_unlike++;
        double err = fabs((double)ns - host_at(tau));
        res->stamps++;
        if (prev && ns < prev)
            res->backwards++;
        prev = ns;
        if (g_event >= 0 && tau >= g_event && !g_seen) {
            res->blind++; /* nothing has read clock_gettime since the step: nothing can know of it */
            continue;
        }
        if (err > res->worst_err)
            res->worst_err = err;
        if (res->stamps == 1 || st.bound_ns - err < res->min_margin)
            res->min_margin = st.bound_ns - err;
        if (err > st.bound_ns) {
            res->outside++;
            if (err - st.bound_ns > res->worst_excess)
                res->worst_excess = err - st.bound_ns;
        }
    }
    res->end = st;
    res->refreshes_after_event = g_event >= 0 ? st.refreshes - refreshes_at_event : 0;
    g_event = -1;
}

static void expect_contained(const char *name, const result_t *r)
{
    print_message("%-40s %7llu stamps, %llu outside (worst %.0f ns over), worst error %.0f ns, least margin %.1f ns, "
                  "bound now %.0f ns, %llu blind, %llu fires, %llu steps\n",
                  name, (unsigned long long)r->stamps, (unsigned long long)r->outside, r->worst_excess, r->worst_err,
                  r->min_margin, r->end.bound_ns, (unsigned long long)r->blind, (unsigned long long)r->end.fires,
                  (unsigned long long)r->end.steps);
    assert_true(r->stamps > 1000);
    assert_int_equal(r->outside, 0);
    assert_int_equal(r->backwards, 0);
    assert_int_equal(r->bound_unlike, 0); /* device spans add the bound these stamps were checked against */
}

static const world_t QUIET = {-1, 0, 0, 1, -1, 0, -1};

/* Item 2: a program initialises, reads no clock for 0.5-10 s, then reads densely; both assumptions. */
static void test_idle_start(void **state)
{
    (void)state;
    static const double idles[] = {0.5e9, 2e9, 10e9};
    for (int kc = 0; kc < 2; kc++)
        for (size_t i = 0; i < sizeof idles / sizeof idles[0]; i++)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                char name[64];
                snprintf(name, sizeof name, "idle %.1f s, %s, seed %llu", idles[i] / 1e9,
                         kc ? "kernel clocksource" : "kvm-clock", (unsigned long long)seed);
                world_t w = QUIET;
                if (kc) { /* the kernel's clocksource: CLOCK_MONOTONIC_RAW is a linear function of the counter */
                    w.change_at = 0;
                    w.change_ppm = 37;
                } else { /* kvm-clock: two oscillators are never exactly proportional */
                    w.sine_ppm = 3;
                    w.sine_period = 7e9;
                }
                result_t r;
                run(&w, kc, seed, idles[i], 2000.0, idles[i] + 0.2e9, &r);
                expect_contained(name, &r);
            }
}

/* Item 3: rate changes of 5/50/500/1000 ppm either way, counter not the kernel's clocksource. */
static void test_rate_changes(void **state)
{
    (void)state;
    static const double ppm[] = {5, 50, 500, 1000, -5, -50, -500, -1000};
    for (size_t i = 0; i < sizeof ppm / sizeof ppm[0]; i++)
        for (uint64_t seed = 1; seed <= 2; seed++) {
            char name[64];
            snprintf(name, sizeof name, "rate change %+.0f ppm, seed %llu", ppm[i], (unsigned long long)seed);
            world_t w = QUIET;
            w.change_at = 0.3e9 + 0.37e6 * (double)seed;
            w.change_ppm = ppm[i];
            result_t r;
            run(&w, 0, seed + 10, 0, 5000.0, 1.0e9, &r);
            expect_contained(name, &r);
            if (fabs(ppm[i]) >= 500)
                assert_true(r.end.fires >= 1); /* detected, not just absorbed */
        }
}

/* Item 3: +-20 ppm sine wander. */
static void test_sine_wander(void **state)
{
    (void)state;
    static const double periods[] = {0.2e9, 1e9, 5e9};
    for (size_t i = 0; i < sizeof periods / sizeof periods[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "sine +-20 ppm, period %.1f s", periods[i] / 1e9);
        world_t w = QUIET;
        w.sine_ppm = 20;
        w.sine_period = periods[i];
        result_t r;
        run(&w, 0, 20 + i, 0, 5000.0, 3.0e9, &r);
        expect_contained(name, &r);
    }
}

/* Item 3: steps both ways, large and just above the bound: detected at the next refresh, contained after. */
static void test_steps(void **state)
{
    (void)state;
    static const double steps[] = {200000, -1000000, 5000, -5000};
    for (int kc = 0; kc < 2; kc++)
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
            char name[64];
            snprintf(name, sizeof name, "step %+.0f us, %s", steps[i] / 1e3, kc ? "kernel clocksource" : "kvm-clock");
            world_t w = QUIET;
            w.step_at = 0.4e9 + 123456.0;
            w.step_ns = steps[i];
            result_t r;
            run(&w, kc, 30 + i, 0, 5000.0, 2.0e9, &r);
            expect_contained(name, &r);
            assert_true(r.end.fires >= 1);
            assert_true(r.end.steps >= 1);
        }
}

/* Item 4: the kernel switches away from the counter at run time; then the rate moves by 300 ppm. The switch is
 * seen at the next refresh (a step: the wide assumption from then on), and the rate change is contained. */
static void test_clocksource_switch(void **state)
{
    (void)state;
    world_t w = QUIET;
    w.switch_at = 0.6e9;
    w.change_at = 0.9e9;
    w.change_ppm = 300;
    result_t r;
    run(&w, 1, 40, 0, 5000.0, 2.0e9, &r);
    expect_contained("clocksource switch, then +300 ppm", &r);
    assert_true(r.refreshes_after_event >= 1);
    assert_int_equal(r.end.source_changes, 1);
    assert_true(r.end.change_ppm >= 999.0);
    assert_int_equal(r.end.kernel_counter, 0);
}

/* Item 1: under auto, a guard that keeps seeing steps gives the counter up for clock_gettime. */
static void test_fall_back(void **state)
{
    (void)state;
    g_w = QUIET;
    g_tau = 0;
    g_rng = 77;
    g_switched = 0;
    assert_int_equal(kt__hcm_start(0, 1), 0);
    kt__hcm_stats_t st;
    kt__hcm_stats(&st);
    assert_true(kt__hc_bound_ns() >= 3 && kt__hc_bound_ns() == (uint64_t)ceil(st.bound_ns));
    for (int i = 0; i < 20 && atomic_load(&kt__hc.mode) == KT__HC_COUNTER; i++) {
        g_w.step_at = g_tau + 1000.0; /* a new 50 us step every 5 ms */
        g_w.step_ns = 50000.0 * (i + 1);
        for (int j = 0; j < 500; j++) {
            g_tau += 10000.0;
            (void)kt__hc_ns(kt__hc_tick());
        }
    }
    kt__hcm_stats(&st);
    assert_int_equal(atomic_load(&kt__hc.mode), KT__HC_CLOCK_GETTIME);
    assert_int_equal(st.fell_back, 1);
    assert_true(st.steps >= KT__HCM_MAX_FIRES);
    assert_int_equal(kt__hc_bound_ns(), 0); /* clock_gettime is the timeline: no model bound to add */
    uint64_t a = kt__hc_now(), truth = (uint64_t)host_at(g_tau); /* straight from the clock_gettime double */
    assert_true(a == truth);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_start),      cmocka_unit_test(test_rate_changes),
        cmocka_unit_test(test_sine_wander),     cmocka_unit_test(test_steps),
        cmocka_unit_test(test_clocksource_switch), cmocka_unit_test(test_fall_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
