/* calibration_accuracy.c — accuracy table of the clock-fit strategies on synthetic clocks with known truth.
 *
 * For each strategy x scenario: seeded trials of N samples (1 ms apart, drift +-100 ppm), fitted and checked at
 * five device times (first, centre, last sample; 10 % of the span before, 20 % after). Prints drift error
 * (median and max, ppm), offset error at the span centre (median and max, ns), the mean reported bound, the
 * share of points whose true error lies within the reported bound; then the fit time of each strategy relative
 * to BASIC (the baseline, measured in the same run). A second table checks short first batches (32 reads over
 * 2-5 ms) 0.7-10 s after their span, where the drift prior carries the bound.
 *
 *     calibration_accuracy [--trials N] [--samples N]      (defaults 500 and 200)
 *
 * Last line: calibration_accuracy: min_containment=..% robust_outliers=..ppm/..ns ransac_outliers=..ppm/..ns
 *            basic_outliers=..ppm/..ns basic_over_robust_offset=..x ransac_fit_cost=..x robust_fit_cost=..x
 */
#include "support/clock_synth.h"

#include <ktiming/clock_model.h>

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

/* Short first batches (synth_generate_short: 32 reads over 2-5 ms, 0.3-3 us each side, 8 % preempted by
 * 50-500 us; with warmup the first reads sit up to 10 us late): fitted with the default drift prior, checked
 * 0.7, 1, 2, 5 and 10 s after the last read. Prints drift error max, bound p50 at 1 s and containment; returns
 * the containment. */
static double run_short(int k, int warmup, int trials)
{
    static const double later[5] = {0.7e9, 1e9, 2e9, 5e9, 10e9};
    double *b1 = malloc((size_t)trials * sizeof(*b1));
    if (!b1) return 0;
    int pts = 0, in = 0, nb = 0;
    double dmax = 0;
    for (int t = 0; t < trials; t++) {
        kt_clock_sample_t s[32];
        synth_truth_t tr;
        synth_generate_short((uint64_t)t, warmup, s, 32, &tr);
        kt_clock_model_t m;
        if (kt_clock_fit(s, 32, kStrategies[k], KT_DOMAIN_MONOTONIC_RAW, &m) != 0) continue;
        double de = fabs(m.drift_ppm - tr.drift_ppm);
        if (de > dmax) dmax = de;
        uint64_t last = s[31].host_before_ns + (s[31].host_after_ns - s[31].host_before_ns) / 2;
        for (int j = 0; j < 5; j++) {
            uint64_t dv = synth_device_at(&tr, last + (uint64_t)later[j]), h, u;
            if (kt_clock_to_host(&m, dv, &h, &u) != 0) continue;
            pts++;
            if (fabs(synth_error(&tr, dv, h)) <= (double)u) in++;
            if (j == 1) b1[nb++] = (double)u;
        }
    }
    qsort(b1, (size_t)nb, sizeof(*b1), cmp_d);
    double pct = pts ? 100.0 * in / pts : 0;
    printf("%-9s %-10s %9.1f ppm %18.1f us %8.2f%%\n", kNames[k], warmup ? "short+warm" : "short", dmax,
           nb ? b1[nb / 2] / 1e3 : 0, pct);
    free(b1);
    return pct;
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
    printf("# short first batch, %d trials x 32 reads over 2-5 ms, default %.0f ppm drift prior; checked 0.7-10 s later\n",
           trials, KT_CLOCK_DEFAULT_DRIFT_PRIOR_PPM);
    printf("%-9s %-10s %13s %21s %9s\n", "strategy", "scenario", "drift err max", "bound at 1 s p50", "contain%");
    double min_short = 100.0;
    for (int warm = 0; warm < 2; warm++)
        for (int k = 0; k < 4; k++) {
            double pct = run_short(k, warm, trials);
            if (pct < min_short) min_short = pct;
        }
    printf("# short first batch: min containment %.2f%%\n", min_short);
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
