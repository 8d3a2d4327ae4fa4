/* calibration_accuracy.c — accuracy table of the clock-fit strategies on synthetic clocks with known truth.
 *
 * For each strategy x scenario: seeded trials of N samples (1 ms apart, drift +-100 ppm), fitted and checked at
 * five device times (first, centre, last sample; 10 % of the span before, 20 % after). Prints drift error
 * (median and max, ppm), offset error at the span centre (median and max, ns), the mean reported bound, the
 * share of points whose true error lies within the reported bound; then the fit time of each strategy relative
 * to BASIC (the baseline, measured in the same run).
 *
 *     calibration_accuracy [--trials N] [--samples N]      (defaults 500 and 200)
 *
 * Last line: calibration_accuracy: min_containment=..% robust_outliers=..ppm/..ns ransac_outliers=..ppm/..ns
 *            basic_outliers=..ppm/..ns basic_over_robust_offset=..x ransac_fit_cost=..x robust_fit_cost=..x
 */
#include "calibrate/synth.h"

#include <ktiming/clock.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

static const kt_fit_strategy_t kStrategies[4] = {KT_FIT_BASIC, KT_FIT_WEIGHTED, KT_FIT_ROBUST, KT_FIT_RANSAC};
static const char *const kNames[4] = {"BASIC", "WEIGHTED", "ROBUST", "RANSAC"};

/* Results of one strategy x scenario cell. */
typedef struct cell_t {
    double drift_p50, drift_max;   /* ppm */
    double offset_p50, offset_max; /* ns */
    double bound_mean;             /* ns, fit-time bound */
    double contain_pct;            /* % of points within the bound */
} cell_t;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int run_cell(int sc, int k, int trials, int n, cell_t *c)
{
    kt_clock_sample_t *s = malloc((size_t)n * sizeof(*s));
    double *drift = malloc((size_t)trials * sizeof(double));
    double *off = malloc((size_t)trials * sizeof(double));
    if (!s || !drift || !off) {
        free(s);
        free(drift);
        free(off);
        return -1;
    }
    int points = 0, contained = 0;
    double bound = 0;
    for (int t = 0; t < trials; t++) {
        synth_truth_t tr;
        synth_generate((synth_scenario_t)sc, 5000 + (uint64_t)t, s, (size_t)n, &tr);
        kt_clock_model_t m;
        int rc = kt_clock_fit(s, (size_t)n, kStrategies[k], KT_DOMAIN_MONOTONIC_RAW, &m);
        if (rc != 0) {
            fprintf(stderr, "fit failed: %s/%s trial %d: %d\n", kNames[k], synth_names[sc], t, rc);
            free(s);
            free(drift);
            free(off);
            return -1;
        }
        synth_eval_t ev;
        synth_evaluate(&m, &tr, s, (size_t)n, &ev);
        drift[t] = ev.drift_err_ppm;
        off[t] = ev.offset_err_ns;
        points += ev.points;
        contained += ev.contained;
        bound += m.error_ns;
    }
    qsort(drift, (size_t)trials, sizeof(double), cmp_d);
    qsort(off, (size_t)trials, sizeof(double), cmp_d);
    c->drift_p50 = drift[trials / 2];
    c->drift_max = drift[trials - 1];
    c->offset_p50 = off[trials / 2];
    c->offset_max = off[trials - 1];
    c->bound_mean = bound / trials;
    c->contain_pct = 100.0 * contained / (points ? points : 1);
    free(s);
    free(drift);
    free(off);
    return 0;
}

/* Fit time of one strategy on the outlier scenario: the fastest of 7 rounds of 50 fits (noisy machines). */
static double fit_cost_ns(kt_fit_strategy_t strategy, int n)
{
    kt_clock_sample_t *s = malloc((size_t)n * sizeof(*s));
    if (!s) return 0;
    synth_truth_t tr;
    synth_generate(SYN_OUTLIERS, 1, s, (size_t)n, &tr);
    double best = INFINITY;
    for (int round = 0; round < 7; round++) {
        double t0 = now_ns();
        for (int i = 0; i < 50; i++) {
            kt_clock_model_t m;
            kt_clock_fit(s, (size_t)n, strategy, KT_DOMAIN_MONOTONIC_RAW, &m);
        }
        double per = (now_ns() - t0) / 50;
        if (per < best) best = per;
    }
    free(s);
    return best;
}

int main(int argc, char **argv)
{
    int trials = 500, n = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trials") && i + 1 < argc)
            trials = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--samples") && i + 1 < argc)
            n = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: calibration_accuracy [--trials N] [--samples N]\n");
            return 2;
        }
    }
    if (trials < 1 || n < KT_CLOCK_MIN_SAMPLES) {
        fprintf(stderr, "calibration_accuracy: need --trials >= 1 and --samples >= %d\n", KT_CLOCK_MIN_SAMPLES);
        return 2;
    }
    printf("# %d trials x %d samples (1 ms apart, drift +-100 ppm); error = |mapped - true|\n", trials, n);
    printf("%-9s %-10s %20s %22s %10s %9s\n", "strategy", "scenario", "drift ppm p50/max", "offset ns p50/max",
           "bound ns", "contain%");
    cell_t cells[SYN_COUNT][4];
    double min_contain = 100.0;
    for (int sc = 0; sc < SYN_COUNT; sc++) {
        for (int k = 0; k < 4; k++) {
            cell_t *c = &cells[sc][k];
            if (run_cell(sc, k, trials, n, c) != 0) return 1;
            if (c->contain_pct < min_contain) min_contain = c->contain_pct;
            printf("%-9s %-10s %9.3f / %8.3f %10.1f / %9.1f %10.1f %8.2f%%\n", kNames[k], synth_names[sc],
                   c->drift_p50, c->drift_max, c->offset_p50, c->offset_max, c->bound_mean, c->contain_pct);
        }
    }
    double cost[4];
    for (int k = 0; k < 4; k++) cost[k] = fit_cost_ns(kStrategies[k], n);
    printf("# fit time relative to BASIC at %d samples: WEIGHTED %.1fx ROBUST %.1fx RANSAC %.1fx\n", n,
           cost[1] / cost[0], cost[2] / cost[0], cost[3] / cost[0]);
    const cell_t *b = &cells[SYN_OUTLIERS][0], *r = &cells[SYN_OUTLIERS][2], *a = &cells[SYN_OUTLIERS][3];
    printf("calibration_accuracy: min_containment=%.2f%% robust_outliers=%.3fppm/%.1fns "
           "ransac_outliers=%.3fppm/%.1fns basic_outliers=%.3fppm/%.1fns basic_over_robust_offset=%.0fx "
           "robust_fit_cost=%.1fx ransac_fit_cost=%.1fx\n",
           min_contain, r->drift_max, r->offset_max, a->drift_max, a->offset_max, b->drift_max, b->offset_max,
           b->offset_p50 / (r->offset_p50 > 0 ? r->offset_p50 : 1), cost[2] / cost[0], cost[3] / cost[0]);
    return 0;
}
