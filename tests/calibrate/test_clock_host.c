/* test_clock_host.c — the clock tracker (src/calibrate/tracker.c) on synthetic counters with known truth, under
 * the schedule its own poll keeps (kt_clock_tracker_poll, as the OpenCL and Vulkan backends drive it): a first
 * batch of 32 reads, then a refresh once the newest sample is as old as the model's span (at least 100 ms, at
 * most refit_interval_ns: 1 s by default), each taking 8 reads and keeping the 2 tightest, and an initial batch
 * again when a step restarted the ring. Drifts up to 2,000 ppm off the nominal rate, bracket noise with
 * preemptions, a rate change and a step of the counter. The tracker's bound at the next refresh must contain the
 * truth at every conversion until that refresh, and the tracker must find each replayed refresh due by itself
 * (its refit on adding the batch): a replay of another schedule fails. (The host clock has its own model since:
 * src/core/hclock_model.c, tests/core/test_host_clock_model.c.) */
#include "support/clock_synth.h"

#include <ktiming/clock_model.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

/* The tracker's schedule (tracker.c: EARLY_REFRESH_NS, the defaults of kt_clock_tracker_create). */
#define FIRST_SAMPLES 32
#define FIRST_SPAN_NS 1000000.0
#define REFRESH_READS 8
#define REFRESH_KEEP 2
#define REFRESH_MIN_NS 100000000.0
#define REFRESH_MAX_NS 1000000000.0
#define RUN_NS 3000000000.0

/* A synthetic counter: device ns (nominal scale) against true host time, with a rate change and a step. */
typedef struct counter_t {
    uint64_t host0;      /* host time of the start */
    uint64_t dev0;       /* device ns at host0 */
    double ppm;          /* rate against the host until change_at */
    double ppm2;         /* ... after it */
    double change_at;    /* host ns after host0 of the rate change (continuous) */
    double step_at;      /* host ns after host0 of a step, < 0 = none */
    double step_ns;      /* the step */
} counter_t;

static double dev_at(const counter_t *c, double h) /* device ns after dev0 at host ns h after host0 */
{
    double v = h <= c->change_at ? h * (1 + c->ppm * 1e-6)
                                 : c->change_at * (1 + c->ppm * 1e-6) + (h - c->change_at) * (1 + c->ppm2 * 1e-6);
    if (c->step_at >= 0 && h >= c->step_at) v += c->step_ns;
    return v;
}

/* One bracketed read at host offset h: 20-60 ns each side, 5 % stretched by a preemption (mean 3 us), 1 % by 50 us. */
static kt_clock_sample_t read_at(const counter_t *c, double h, uint64_t *rng)
{
    double db = synth_range(rng, 20, 60), da = synth_range(rng, 20, 60);
    if (synth_unif(rng) < 0.05) db += -3000.0 * log(1.0 - synth_unif(rng));
    if (synth_unif(rng) < 0.05) da += -3000.0 * log(1.0 - synth_unif(rng));
    if (synth_unif(rng) < 0.01) da += 50000.0;
    kt_clock_sample_t s;
    s.device_ns = c->dev0 + (uint64_t)floor(dev_at(c, h));
    s.host_before_ns = c->host0 + (uint64_t)(h - db);
    s.host_after_ns = c->host0 + (uint64_t)(h + da);
    return s;
}

static int cmp_width(const void *a, const void *b)
{
    const kt_clock_sample_t *x = a, *y = b;
    uint64_t wx = x->host_after_ns - x->host_before_ns, wy = y->host_after_ns - y->host_before_ns;
    return (wx > wy) - (wx < wy);
}

/* Replay the tracker's schedule on one counter; returns points checked, adds contained ones. Points between a
 * step and the first model fitted after it are skipped (nothing can know of a step before reading past it) and
 * counted in *blind. *undue counts refreshes the tracker did not find due by itself. */
static int replay(const counter_t *c, uint64_t seed, int *contained, int *blind, uint64_t *resets, int *undue)
{
    kt_clock_tracker_desc_t d = {0};
    d.capacity = 256;
    d.initial_samples = FIRST_SAMPLES;
    d.batch = REFRESH_READS;
    d.keep = REFRESH_KEEP;
    d.drift_prior_ppm = -1;
    d.max_drift_ppm = KT_CLOCK_DEFAULT_MAX_DRIFT_PPM;
    d.step_ns = 100000;
    kt_clock_tracker_t *t;
    assert_int_equal(kt_clock_tracker_create(KT_FIT_WEIGHTED, KT_DOMAIN_MONOTONIC_RAW, &d, &t), 0);
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 17;
    kt_clock_sample_t s[FIRST_SAMPLES];
    for (int i = 0; i < FIRST_SAMPLES; i++) s[i] = read_at(c, FIRST_SPAN_NS * i / (FIRST_SAMPLES - 1), &rng);
    assert_int_equal(kt_clock_tracker_add(t, s, FIRST_SAMPLES), 0);
    kt_clock_model_t m;
    assert_int_equal(kt_clock_tracker_model(t, &m), 0); /* the first batch is fitted on adding it */
    double h = FIRST_SPAN_NS;
    int pts = 0;
    int stepped_unseen = 0;
    while (h < RUN_NS) {
        /* due once the newest sample (the model's fitted_at) is as old as the model's span, clamped */
        double span = (double)(m.fitted_at_ns - m.host_first_ns), wait = span;
        if (wait < REFRESH_MIN_NS) wait = REFRESH_MIN_NS;
        if (wait > REFRESH_MAX_NS) wait = REFRESH_MAX_NS;
        double due = (double)(m.fitted_at_ns - c->host0) + wait + 10000.0; /* the first poll past it */
        double bound = kt_clock_error_at(&m, c->host0 + (uint64_t)due) + 1.0;
        /* conversions between now and the next refresh */
        for (int k = 1; k <= 5; k++) {
            double q = h + (due - h) * k / 5.0;
            if (c->step_at >= 0 && q >= c->step_at && h < c->step_at) stepped_unseen = 1;
            uint64_t dv = c->dev0 + (uint64_t)floor(dev_at(c, q)), host;
            assert_int_equal(kt_clock_to_host(&m, dv, &host, NULL), 0);
            double err = fabs((double)(int64_t)(host - c->host0) - q);
            if (stepped_unseen) {
                (*blind)++;
                continue;
            }
            pts++;
            if (err <= bound) (*contained)++;
        }
        /* the refresh: 8 reads, the 2 tightest in time order; the tracker refits on adding them when it too finds
         * the model due */
        h = due;
        kt_clock_sample_t r[REFRESH_READS];
        for (int i = 0; i < REFRESH_READS; i++) r[i] = read_at(c, h + 100.0 * i, &rng);
        qsort(r, REFRESH_READS, sizeof r[0], cmp_width);
        if (r[1].host_before_ns < r[0].host_before_ns) {
            kt_clock_sample_t x = r[0];
            r[0] = r[1];
            r[1] = x;
        }
        kt_clock_tracker_stats_t before, after;
        kt_clock_tracker_stats(t, &before);
        kt_clock_tracker_add(t, r, REFRESH_KEEP);
        kt_clock_tracker_stats(t, &after);
        if (after.resets == before.resets && after.fits + after.fit_errors == before.fits + before.fit_errors)
            (*undue)++;
        if (after.ring < KT_CLOCK_MIN_SAMPLES) { /* a step restarted the ring: poll's second round, a first batch */
            h += 100.0 * REFRESH_READS;
            for (int i = 0; i < FIRST_SAMPLES; i++) s[i] = read_at(c, h + 100.0 * i, &rng);
            kt_clock_tracker_add(t, s, FIRST_SAMPLES);
            h += 100.0 * FIRST_SAMPLES;
        }
        if (kt_clock_tracker_refit(t) == 0 && kt_clock_tracker_model(t, &m) == 0 && stepped_unseen &&
            m.host_first_ns >= c->host0 + (uint64_t)c->step_at)
            stepped_unseen = 0; /* a model of post-step samples only */
    }
    kt_clock_tracker_stats_t st;
    kt_clock_tracker_stats(t, &st);
    *resets += st.resets;
    kt_clock_tracker_destroy(t);
    return pts;
}

static void run_case(const char *name, double ppm, double ppm2, double step_at, double step_ns, int expect_reset)
{
    int pts = 0, in = 0, blind = 0, undue = 0;
    uint64_t resets = 0;
    for (uint64_t trial = 0; trial < 20; trial++) {
        counter_t c = {1000000000000ull + trial * 7777777ull, 5000000000ull + trial * 999ull, ppm, ppm2,
                       1.0e9, step_at, step_ns};
        pts += replay(&c, trial + (uint64_t)(ppm * 10), &in, &blind, &resets, &undue);
    }
    double pct = 100.0 * in / pts;
    print_message("%-28s contain %.2f%% of %d conversions (%d in the blind window of a step), %llu resets, %d "
                  "refreshes not due by the tracker\n", name, pct, pts, blind, (unsigned long long)resets, undue);
    assert_true(pct >= 99.0);
    assert_int_equal(undue, 0); /* the schedule replayed is the tracker's */
    if (expect_reset) assert_true(resets >= 20);
}

static void test_drifts(void **state)
{
    (void)state;
    run_case("nominal exact", 0, 0, -1, 0, 0);
    run_case("nominal off by -300 ppm", -300, -300, -1, 0, 0);
    run_case("nominal off by +50 ppm", 50, 50, -1, 0, 0);
    run_case("nominal off by +2000 ppm", 2000, 2000, -1, 0, 0);
}

static void test_rate_change(void **state)
{
    (void)state;
    run_case("rate changes by 5 ppm at 1 s", 20, 25, -1, 0, 0);
}

static void test_step(void **state)
{
    (void)state;
    run_case("counter steps +200 us", 10, 10, 1.3e9, 200000.0, 1);
    run_case("counter steps -1 ms", 10, 10, 0.7e9, -1000000.0, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drifts),
        cmocka_unit_test(test_rate_change),
        cmocka_unit_test(test_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
