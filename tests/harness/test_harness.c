/* test_harness.c — the harness's stopping criterion, warm-up, trials and recording, on synthetic noisy clocks. */
#include <ktiming.h>
#include <ktiming/harness.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* ---------------------------------------------------------------------------------------------------
 * A synthetic kernel on a synthetic clock: each dispatch advances the clock by base * (1 + noise * N(0,1)),
 * plus optional rare spikes; the harness's clock reads the same counter.
 * ------------------------------------------------------------------------------------------------- */

typedef struct synth_t {
    uint64_t now;          /* the synthetic clock, ns */
    double base_ns;        /* mean dispatch duration */
    double noise;          /* relative gaussian noise */
    double spike_prob;     /* probability that a dispatch is a spike */
    double spike_factor;   /* spike duration multiplier */
    uint64_t overhead_ns;  /* clock advance per call not part of the reported duration */
    int report;            /* store the duration in *duration_ns */
    uint64_t rng;          /* xorshift state */
    uint32_t calls;        /* callback invocations */
    uint32_t fail_at;      /* return KT_EBACKEND on this call (1-based), 0 = never */
    uint64_t last_reported;/* last duration reported (all trials) */
} synth_t;

static double urand(synth_t *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return ((double)(s->rng >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(synth_t *s)
{
    return sqrt(-2.0 * log(urand(s))) * cos(6.283185307179586 * urand(s));
}

static uint64_t synth_clock(void *user) { return ((synth_t *)user)->now; }

static int synth_run(void *user, uint32_t trials, uint64_t *duration_ns)
{
    synth_t *s = user;
    s->calls++;
    if (s->fail_at && s->calls == s->fail_at) return KT_EBACKEND;
    uint64_t total = 0;
    for (uint32_t i = 0; i < trials; i++) {
        double d = s->base_ns * (1.0 + s->noise * gauss(s));
        if (s->spike_prob > 0.0 && urand(s) < s->spike_prob) d *= s->spike_factor;
        total += d < 1.0 ? 1 : (uint64_t)d;
    }
    s->now += total + s->overhead_ns;
    s->last_reported = total;
    if (s->report) *duration_ns = total;
    return 0;
}

static kt_harness_desc_t synth_desc(synth_t *s, const char *name)
{
    kt_harness_desc_t d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.run = synth_run;
    d.user = s;
    d.clock = synth_clock;
    d.clock_user = s;
    d.progress = -1;
    return d;
}

static synth_t synth(double base_ns, double noise, uint64_t seed)
{
    synth_t s;
    memset(&s, 0, sizeof s);
    s.now = 1000;
    s.base_ns = base_ns;
    s.noise = noise;
    s.rng = seed ? seed : 88172645463325252ull;
    return s;
}

/* ---------------------------------------------------------------------------------------------------
 * Stopping criterion
 * ------------------------------------------------------------------------------------------------- */

static void test_quiet_stops_at_min_time(void **state)
{
    (void)state;
    synth_t s = synth(1e6, 0.001, 1); /* 1 ms, 0.1 % noise: below the 0.5 % target at once */
    kt_harness_desc_t d = synth_desc(&s, "h_quiet");
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.stop, KT_HARNESS_STOP_CONVERGED);
    assert_true(r.noise <= 0.005);
    assert_true(r.measured_ns >= 500000000ull);            /* default min time 0.5 s */
    assert_true(r.measured_ns < 500000000ull + 2000000ull); /* ... and not a sample longer */
    assert_true(r.wall_ns < 1000000000ull);                 /* far before the 15 s timeout */
    assert_true(fabs(r.stats.median_ns - 1e6) < 1e4);
    assert_int_equal(r.warmup_samples, 1);
    assert_int_equal(s.calls, r.sample_count + 1);
    kt_harness_result_free(&r);
    assert_null(r.samples);
}

static void test_quiet_stops_at_min_samples(void **state)
{
    (void)state;
    synth_t s = synth(1e6, 0.001, 2);
    kt_harness_desc_t d = synth_desc(&s, "h_quiet_n");
    d.min_time_ns = 1;
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.stop, KT_HARNESS_STOP_CONVERGED);
    assert_int_equal(r.sample_count, 10); /* default min samples */
    kt_harness_result_free(&r);
}

static void test_noisy_stops_at_timeout(void **state)
{
    (void)state;
    synth_t s = synth(1e6, 0.20, 3); /* 20 % noise never reaches 0.5 % */
    kt_harness_desc_t d = synth_desc(&s, "h_noisy");
    d.stable_tolerance = -1.0;       /* only the timeout can end it */
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.stop, KT_HARNESS_STOP_TIMEOUT);
    assert_true(r.wall_ns >= 15000000000ull);            /* default timeout 15 s */
    assert_true(r.wall_ns < 15000000000ull + 3000000ull); /* stopped right after it */
    assert_true(r.noise > 0.15 && r.noise < 0.25);
    kt_harness_result_free(&r);
}

static void test_noisy_stabilised_stops_early(void **state)
{
    (void)state;
    synth_t s = synth(1e6, 0.20, 4);
    kt_harness_desc_t d = synth_desc(&s, "h_stable");
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.stop, KT_HARNESS_STOP_STABLE);
    assert_true(r.noise > 0.005);                /* above target ... */
    assert_true(r.noise > 0.15 && r.noise < 0.25);
    assert_true(r.wall_ns < 15000000000ull);     /* ... yet well before the timeout */
    assert_true(r.measured_ns >= 500000000ull);  /* min time still honoured */
    kt_harness_result_free(&r);
}

static void test_slow_noisy_default_hits_timeout(void **state)
{
    (void)state;
    /* 1 s samples with 20 % noise under the defaults: too few samples for the noise to converge or for the
     * stability window (64 noise values) to fill before 15 s, so the timeout ends the run. */
    synth_t s = synth(1e9, 0.20, 5);
    kt_harness_desc_t d = synth_desc(&s, "h_slow_noisy");
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.stop, KT_HARNESS_STOP_TIMEOUT);
    assert_true(r.wall_ns >= 15000000000ull && r.wall_ns < 18000000000ull);
    assert_true(r.sample_count >= 10 && r.sample_count <= 20);
    assert_true(r.noise > 0.005);
    kt_harness_result_free(&r);
}

static void test_median_ci_noise(void **state)
{
    (void)state;
    /* 10 % gaussian noise: stddev/mean stays near 10 %, but the median's CI half-width shrinks as 1/sqrt(n) and
     * reaches 0.5 % after a few thousand samples. */
    synth_t s = synth(1e5, 0.10, 6);
    kt_harness_desc_t d = synth_desc(&s, "h_mci");
    d.noise = KT_HARNESS_NOISE_MEDIAN_CI;
    d.min_time_ns = 1;
    d.stable_tolerance = -1.0;
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.stop, KT_HARNESS_STOP_CONVERGED);
    assert_true(r.noise <= 0.0055); /* final noise from all samples; the stop check ran on a recent refresh */
    assert_true(r.sample_count > 500 && r.sample_count < 20000);
    assert_true(r.stats.stdrel > 0.08);
    double half = 0.5 * (r.stats.median_ci_hi_ns - r.stats.median_ci_lo_ns) / r.stats.median_ns;
    assert_true(fabs(half - r.noise) < 1e-12);
    kt_harness_result_free(&r);
}

static void test_max_samples(void **state)
{
    (void)state;
    synth_t s = synth(1e3, 0.3, 7);
    kt_harness_desc_t d = synth_desc(&s, "h_max");
    d.max_samples = 100;
    d.stable_tolerance = -1.0;
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.stop, KT_HARNESS_STOP_MAX_SAMPLES);
    assert_int_equal(r.sample_count, 100);
    kt_harness_result_free(&r);
}

/* ---------------------------------------------------------------------------------------------------
 * Timing modes, trials, warm-up, errors
 * ------------------------------------------------------------------------------------------------- */

static void test_reported_durations_and_trials(void **state)
{
    (void)state;
    synth_t s = synth(1000.0, 0.0, 8);
    s.report = 1;
    s.overhead_ns = 50000; /* the host sees 50 us of overhead the device time excludes */
    kt_harness_desc_t d = synth_desc(&s, "h_reported");
    d.timing = KT_HARNESS_TIME_REPORTED;
    d.trials = 4;
    d.min_time_ns = 1;
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.trials, 4);
    for (uint32_t i = 0; i < r.sample_count; i++) assert_int_equal(r.samples[i], 1000); /* 4000 / 4 trials */
    assert_int_equal(r.measured_ns, (uint64_t)r.sample_count * 4000u);
    assert_true(r.wall_ns >= (uint64_t)r.sample_count * 54000u);
    kt_harness_result_free(&r);

    /* the same kernel host-timed includes the overhead */
    s = synth(1000.0, 0.0, 8);
    s.overhead_ns = 50000;
    d = synth_desc(&s, "h_hosttimed");
    d.trials = 4;
    d.min_time_ns = 1;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.samples[0], (4000 + 50000) / 4);
    kt_harness_result_free(&r);
}

static void test_auto_trials(void **state)
{
    (void)state;
    synth_t s = synth(1000.0, 0.0, 9);
    kt_harness_desc_t d = synth_desc(&s, "h_auto");
    d.min_sample_ns = 100000; /* 100 us per sample from a 1 us kernel */
    d.min_time_ns = 1;
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_true(r.trials >= 100 && r.trials < 400);
    assert_true(r.warmup_samples >= 2);        /* calibration samples count as warm-up */
    assert_int_equal(r.samples[0], 1000);      /* still per dispatch */
    assert_true(r.measured_ns / r.sample_count >= 100000);
    kt_harness_result_free(&r);
}

static void test_warmup(void **state)
{
    (void)state;
    synth_t s = synth(1e6, 0.0, 10);
    kt_harness_desc_t d = synth_desc(&s, "h_warm");
    d.warmup_samples = 5;
    d.min_time_ns = 1;
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.warmup_samples, 5);
    assert_int_equal(s.calls, 5 + r.sample_count);
    kt_harness_result_free(&r);

    s = synth(1e6, 0.0, 10);
    d = synth_desc(&s, "h_warm");
    d.warmup_samples = -1;
    d.min_time_ns = 1;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.warmup_samples, 0);
    assert_int_equal(s.calls, r.sample_count);
    kt_harness_result_free(&r);

    s = synth(1e6, 0.0, 10);
    d = synth_desc(&s, "h_warm");
    d.warmup_ns = 20000000; /* 20 ms of 1 ms samples */
    d.min_time_ns = 1;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.warmup_samples, 20);
    kt_harness_result_free(&r);
}

static void test_callback_error(void **state)
{
    (void)state;
    synth_t s = synth(1e6, 0.2, 11);
    s.fail_at = 6; /* 1 warm-up + 4 samples, then failure */
    kt_harness_desc_t d = synth_desc(&s, "h_err");
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), KT_EBACKEND);
    assert_int_equal(r.stop, KT_HARNESS_STOP_ERROR);
    assert_int_equal(r.error, KT_EBACKEND);
    assert_int_equal(r.sample_count, 4);
    assert_int_equal(r.stats.count, 4);
    kt_harness_result_free(&r);
}

static void test_invalid_desc(void **state)
{
    (void)state;
    kt_harness_result_t r;
    kt_harness_desc_t d;
    memset(&d, 0, sizeof d);
    assert_int_equal(kt_harness_run(&d, &r), KT_EINVAL);
    assert_int_equal(r.sample_count, 0);
    d.name = "x";
    assert_int_equal(kt_harness_run(&d, &r), KT_EINVAL);
    assert_int_equal(kt_harness_run(NULL, &r), KT_EINVAL);
    assert_int_equal(kt_harness_run(&d, NULL), KT_EINVAL);
    assert_string_equal(kt_harness_stop_name(KT_HARNESS_STOP_STABLE), "stable");
}

/* ---------------------------------------------------------------------------------------------------
 * Recording, progress, cache flush, the real clock
 * ------------------------------------------------------------------------------------------------- */

static void test_samples_recorded_into_ktiming(void **state)
{
    (void)state;
    synth_t s = synth(2e5, 0.05, 12);
    kt_harness_desc_t d = synth_desc(&s, "h_recorded");
    d.min_time_ns = 1;
    d.max_noise = 0.5;
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    kt_snapshot_t *snap = kt_snapshot();
    assert_non_null(snap);
    const kt_kernel_timing_t *t = kt_snapshot_find(snap, "h_recorded", KT_BACKEND_CPU, NULL);
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, r.sample_count); /* one recorded dispatch per sample, warm-up excluded */
    assert_int_equal(t->min_ns, r.stats.min_ns);
    assert_int_equal(t->sample_count, r.sample_count);  /* below the reservoir size: every sample kept */
    kt_snapshot_free(snap);
    kt_harness_result_free(&r);

    s = synth(2e5, 0.05, 12);
    d = synth_desc(&s, "h_not_recorded");
    d.min_time_ns = 1;
    d.no_record = 1;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    snap = kt_snapshot();
    assert_null(kt_snapshot_find(snap, "h_not_recorded", KT_BACKEND_CPU, NULL));
    kt_snapshot_free(snap);
    kt_harness_result_free(&r);
}

static void test_progress_forced(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    synth_t s = synth(1e6, 0.001, 13);
    kt_harness_desc_t d = synth_desc(&s, "h_progress");
    d.progress = 1;
    d.progress_out = f;
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    rewind(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    assert_non_null(strstr(buf, "h_progress"));
    assert_non_null(strstr(buf, "converged"));
    assert_null(strchr(buf, '\r')); /* not a terminal: whole lines, no redraw */
    kt_harness_result_free(&r);

    /* progress 0 on a non-terminal stays silent */
    f = tmpfile();
    s = synth(1e6, 0.001, 13);
    d = synth_desc(&s, "h_progress");
    d.progress = 0;
    d.progress_out = f;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(ftell(f), 0);
    fclose(f);
    kt_harness_result_free(&r);
}

static void test_cache_flush(void **state)
{
    (void)state;
    size_t llc = kt_harness_cache_size();
    assert_true(llc >= 64 * 1024);
    synth_t s = synth(1e6, 0.0, 14);
    kt_harness_desc_t d = synth_desc(&s, "h_flush");
    d.flush_cache = 1;
    d.flush_bytes = 1 << 20;
    d.min_time_ns = 1;
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.flush_bytes, 1 << 20);
    kt_harness_result_free(&r);
    d.flush_bytes = 0;
    s = synth(1e6, 0.0, 14);
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_int_equal(r.flush_bytes, 2 * llc);
    kt_harness_result_free(&r);
}

/* A small real CPU kernel on the real clock. */
static int spin_run(void *user, uint32_t trials, uint64_t *duration_ns)
{
    (void)duration_ns;
    volatile double *acc = user;
    for (uint32_t t = 0; t < trials; t++)
        for (int i = 0; i < 20000; i++) *acc += 1.0 / (i + 1.0);
    return 0;
}

static void test_real_clock(void **state)
{
    (void)state;
    volatile double acc = 0.0;
    kt_harness_desc_t d;
    memset(&d, 0, sizeof d);
    d.name = "h_real";
    d.run = spin_run;
    d.user = (void *)&acc;
    d.min_time_ns = 20000000;
    d.timeout_ns = 1000000000;
    d.progress = -1;
    kt_harness_result_t r;
    assert_int_equal(kt_harness_run(&d, &r), 0);
    assert_true(r.stop == KT_HARNESS_STOP_CONVERGED || r.stop == KT_HARNESS_STOP_STABLE ||
                r.stop == KT_HARNESS_STOP_TIMEOUT);
    assert_true(r.sample_count >= 10);
    assert_true(r.stats.median_ns > 0.0);
    assert_true(r.wall_ns < 3000000000ull);
    kt_harness_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quiet_stops_at_min_time),
        cmocka_unit_test(test_quiet_stops_at_min_samples),
        cmocka_unit_test(test_noisy_stops_at_timeout),
        cmocka_unit_test(test_noisy_stabilised_stops_early),
        cmocka_unit_test(test_slow_noisy_default_hits_timeout),
        cmocka_unit_test(test_median_ci_noise),
        cmocka_unit_test(test_max_samples),
        cmocka_unit_test(test_reported_durations_and_trials),
        cmocka_unit_test(test_auto_trials),
        cmocka_unit_test(test_warmup),
        cmocka_unit_test(test_callback_error),
        cmocka_unit_test(test_invalid_desc),
        cmocka_unit_test(test_samples_recorded_into_ktiming),
        cmocka_unit_test(test_progress_forced),
        cmocka_unit_test(test_cache_flush),
        cmocka_unit_test(test_real_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
