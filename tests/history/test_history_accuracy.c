/* test_history_accuracy.c — `history check` measured on seeded synthetic histories with known truth: steps of 2, 5,
 * 10 and 30 % at known runs, run-to-run noise, noisy samples, outlier runs and drifting machines. Asserts detection
 * >= 95 % for steps >= 10 %, the detected run within +-1 of the truth, and false alarms <= 1 % of stationary
 * kernels. Deterministic: the same seeds give the same figures on any machine. */
#include "history.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

static const double kSteps[] = {0.02, 0.05, 0.10, 0.30};

/* Outcome per step size (index into kSteps; 4 = stationary). */
typedef struct tally_t {
    size_t series[5];   /* series with that truth */
    size_t detected[5]; /* a change of the right sign within +-1 run of the truth */
    size_t alarms[5];   /* any other change reported */
} tally_t;

static void run_one(uint64_t seed, size_t runs, size_t kernels, tally_t *t)
{
    kth_synth_opts_t o = {.seed = seed, .runs = runs, .kernels = kernels, .samples = 32, .run_noise = 0.02,
                          .sample_noise = 0.05, .outlier_rate = 0.02, .drift = 0.04, .step_share = 0.5,
                          .steps = kSteps, .step_kinds = 4};
    kth_synth_t sy;
    assert_int_equal(kth_synth(&o, &sy), 0);
    kth_check_result_t r;
    assert_int_equal(kth_check(&sy.h, kth_synth_samples_fn, &sy, NULL, &r), 0);
    for (size_t s = 0; s < sy.h.series_count; s++) {
        size_t kind = 4;
        for (size_t k = 0; k < 4; k++)
            if (sy.step[s] != 0.0 && (fabs(sy.step[s] - kSteps[k]) < 1e-9 || fabs(1.0 / (1.0 + sy.step[s]) - 1.0 - kSteps[k]) < 1e-9))
                kind = k;
        t->series[kind]++;
        int hit = 0, other = 0;
        for (size_t c = 0; c < r.count; c++) {
            const kth_change_t *ch = &r.changes[c];
            if (ch->series != s)
                continue;
            if (kind < 4 && !hit && (ch->change > 0) == (sy.step[s] > 0) &&
                labs((long)ch->at - (long)sy.step_at[s]) <= 1)
                hit = 1;
            else
                other = 1;
        }
        t->detected[kind] += hit;
        t->alarms[kind] += other;
    }
    kth_check_free(&r);
    kth_synth_free(&sy);
}

static void test_accuracy(void **state)
{
    (void)state;
    tally_t t = {{0}, {0}, {0}};
    /* 3 histories x 400 kernels x 60 runs (half the kernels stepped, a quarter of those per step size);
     * KT_HISTORY_SEEDS=N measures N histories (docs/history.md quotes 20). */
    const char *env = getenv("KT_HISTORY_SEEDS");
    uint64_t seeds = env && atoi(env) > 0 ? (uint64_t)atoi(env) : 3;
    for (uint64_t seed = 1; seed <= seeds; seed++)
        run_one(seed, 60, 400, &t);
    for (size_t k = 0; k < 5; k++) {
        char what[32];
        snprintf(what, sizeof what, k < 4 ? "step %.0f %%" : "stationary", k < 4 ? kSteps[k] * 100 : 0.0);
        printf("history accuracy: %-11s %5zu series, detected at +-1 run %5zu (%5.1f %%), other alarms %zu (%.2f %%)\n",
               what, t.series[k], t.detected[k], t.series[k] ? 100.0 * (double)t.detected[k] / (double)t.series[k] : 0.0,
               t.alarms[k], t.series[k] ? 100.0 * (double)t.alarms[k] / (double)t.series[k] : 0.0);
    }
    for (size_t k = 2; k < 4; k++) { /* 10 % and 30 % */
        assert_true(t.series[k] >= 50);
        assert_true((double)t.detected[k] >= 0.95 * (double)t.series[k]);
    }
    assert_true(t.series[4] >= 300);
    assert_true((double)t.alarms[4] <= 0.01 * (double)t.series[4]);
}

/* --tail N on the same histories, whose steps all lie in the middle half: every change it reports on the last runs
 * is a false alarm. Two runs (the CI recipe's) must keep them under 1 % of the kernels; one run is printed (an
 * outlier run, 2 % of runs here, looks like a step to it: docs/history.md). */
static void test_tail_alarms(void **state)
{
    (void)state;
    for (size_t tail = 1; tail <= 2; tail++) {
        size_t alarms = 0, series = 0;
        for (uint64_t seed = 1; seed <= 3; seed++) {
            kth_synth_opts_t o = {.seed = seed, .runs = 60, .kernels = 400, .samples = 32, .run_noise = 0.02,
                                  .sample_noise = 0.05, .outlier_rate = 0.02, .drift = 0.04, .step_share = 0.5,
                                  .steps = kSteps, .step_kinds = 4};
            kth_synth_t sy;
            assert_int_equal(kth_synth(&o, &sy), 0);
            kth_check_opts_t co = {.tail = tail};
            kth_check_result_t r;
            assert_int_equal(kth_check(&sy.h, kth_synth_samples_fn, &sy, &co, &r), 0);
            for (size_t c = 0; c < r.count; c++)
                alarms += r.changes[c].tail;
            series += sy.h.series_count;
            kth_check_free(&r);
            kth_synth_free(&sy);
        }
        printf("history accuracy: --tail %zu, no step in the last runs: %zu of %zu kernels flagged (%.2f %%)\n", tail,
               alarms, series, 100.0 * (double)alarms / (double)series);
        if (tail == 2)
            assert_true((double)alarms <= 0.01 * (double)series);
    }
}

/* The same seed gives the same history and the same findings. */
static void test_deterministic(void **state)
{
    (void)state;
    tally_t a = {{0}, {0}, {0}}, b = {{0}, {0}, {0}};
    run_one(42, 40, 60, &a);
    run_one(42, 40, 60, &b);
    assert_memory_equal(&a, &b, sizeof a);
}

/* Change points alone: a clean step is found exactly; a flat series gives none. */
static void test_change_points(void **state)
{
    (void)state;
    double x[40];
    size_t cps[40];
    for (size_t i = 0; i < 40; i++)
        x[i] = i < 23 ? 1.0 : 1.2;
    assert_int_equal(kth_change_points(x, 40, 0.01, cps), 1);
    assert_int_equal(cps[0], 23);
    for (size_t i = 0; i < 40; i++)
        x[i] = 1.0;
    assert_int_equal(kth_change_points(x, 40, 0.01, cps), 0);
    /* Under six points there is no room for two segments of three. */
    assert_int_equal(kth_change_points(x, 5, 0.0, cps), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_change_points),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_tail_alarms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
