/* clock_synth.h — synthetic device clocks with known truth, shared by the calibration tests and the accuracy bench. */
#ifndef KT_TEST_CLOCK_SYNTH_H
#define KT_TEST_CLOCK_SYNTH_H

#include <ktiming/clock_model.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Scenarios: how the brackets and device reads misbehave. */
typedef enum synth_scenario_t {
    SYN_CLEAN = 0,     /* brackets 20-60 ns each side, device read inside */
    SYN_ASYM = 1,      /* asymmetric delays: 10-30 ns before, 150-400 ns after the device read */
    SYN_JITTER = 2,    /* clean, plus 5 % of brackets stretched by preemption (exp., mean 3 us; 1 % by 50 us) */
    SYN_OUTLIERS = 3,  /* clean, plus 10 % gross outliers: device value off by 20-200 us (3 in 4 late) */
    SYN_QUANTISED = 4, /* clean, device clock updates every 1 us (globaltimer-like) */
    SYN_HUGE = 5,      /* asymmetric brackets, host and device epochs near 1e18 ns */
    SYN_COUNT = 6
} synth_scenario_t;

static const char *const synth_names[SYN_COUNT] = {"clean", "asym", "jitter", "outliers", "quantised", "huge1e18"};

/* The truth of one synthetic clock. */
typedef struct synth_truth_t {
    uint64_t host0;   /* true host time of the first read */
    uint64_t dev0;    /* continuous device value at host0 */
    double drift_ppm; /* device runs fast by this much (the model's convention) */
    double res_ns;    /* device update quantum, 0 = continuous */
} synth_truth_t;

/* xoshiro-free small generator: splitmix64 (deterministic per seed). */
static inline uint64_t synth_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double synth_unif(uint64_t *s) { return (double)(synth_next(s) >> 11) * (1.0 / 9007199254740992.0); }

static inline double synth_range(uint64_t *s, double lo, double hi) { return lo + (hi - lo) * synth_unif(s); }

/* Generate n samples (1 ms apart, +-20 %) of a clock with drift uniform in +-100 ppm. */
static inline void synth_generate(synth_scenario_t sc, uint64_t seed, kt_clock_sample_t *out, size_t n,
                                  synth_truth_t *truth)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dull + (uint64_t)sc + 1;
    memset(truth, 0, sizeof(*truth));
    truth->drift_ppm = synth_range(&s, -100.0, 100.0);
    if (sc == SYN_HUGE) {
        truth->host0 = 1000000000000000000ull + (synth_next(&s) % 1000000000000000ull);
        truth->dev0 = 1700000000000000000ull + (synth_next(&s) % 1000000000000000ull);
    } else {
        truth->host0 = 1000000000000ull + (synth_next(&s) % 1000000000000ull);
        truth->dev0 = 5000000000ull + (synth_next(&s) % 10000000000000ull);
    }
    if (sc == SYN_QUANTISED) {
        truth->res_ns = 1000.0;
        truth->dev0 -= truth->dev0 % 1000;
    }
    double rate = 1.0 + truth->drift_ppm * 1e-6;
    uint64_t t = truth->host0;
    for (size_t i = 0; i < n; i++) {
        if (i) t += (uint64_t)synth_range(&s, 800000.0, 1200000.0);
        double db, da;
        if (sc == SYN_ASYM || sc == SYN_HUGE) {
            db = synth_range(&s, 10.0, 30.0);
            da = synth_range(&s, 150.0, 400.0);
        } else {
            db = synth_range(&s, 20.0, 60.0);
            da = synth_range(&s, 20.0, 60.0);
        }
        if (sc == SYN_JITTER) {
            if (synth_unif(&s) < 0.05) db += -3000.0 * log(1.0 - synth_unif(&s));
            if (synth_unif(&s) < 0.05) da += -3000.0 * log(1.0 - synth_unif(&s));
            if (synth_unif(&s) < 0.01) da += 50000.0;
        }
        double dc = (double)(t - truth->host0) * rate; /* continuous device time since dev0 */
        uint64_t d = truth->dev0 + (uint64_t)floor(dc);
        if (truth->res_ns > 0) d -= d % (uint64_t)truth->res_ns;
        if (sc == SYN_OUTLIERS && synth_unif(&s) < 0.10) {
            double off = synth_range(&s, 20000.0, 200000.0);
            if (synth_unif(&s) < 0.25)
                d -= (uint64_t)off;
            else
                d += (uint64_t)off;
        }
        out[i].device_ns = d;
        out[i].host_before_ns = t - (uint64_t)db;
        out[i].host_after_ns = t + (uint64_t)da;
    }
}

/* A short first batch, as right after attach on a loaded 2-core machine: n samples spread evenly over 2-5 ms,
 * device read anywhere inside a bracket of 0.3-3 us each side, 8 % of brackets stretched on one side by a
 * preemption of 50-500 us (the device read stays inside). With warmup set, reads are slow at first: the read
 * sits up to 10 us late in the first quarter of the batch, a position trend the residuals cannot reveal. */
static inline void synth_short_impl(uint64_t seed, int warmup, const double *drift_ppm, kt_clock_sample_t *out,
                                    size_t n, synth_truth_t *truth)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x5157u + (uint64_t)warmup;
    memset(truth, 0, sizeof(*truth));
    truth->drift_ppm = synth_range(&s, -100.0, 100.0);
    if (drift_ppm) truth->drift_ppm = *drift_ppm;
    truth->host0 = 1000000000000ull + (synth_next(&s) % 1000000000000ull);
    truth->dev0 = 5000000000ull + (synth_next(&s) % 10000000000000ull);
    double span = synth_range(&s, 2e6, 5e6), step = span / (double)(n - 1);
    double rate = 1.0 + truth->drift_ppm * 1e-6;
    for (size_t i = 0; i < n; i++) {
        uint64_t t = truth->host0 + (uint64_t)((double)i * step + synth_range(&s, 0.0, 0.2 * step));
        double db = synth_range(&s, 300.0, 3000.0), da = synth_range(&s, 300.0, 3000.0);
        if (warmup && i < n / 4) db += 10000.0 * (1.0 - (double)i / (double)(n / 4));
        if (synth_unif(&s) < 0.08) {
            if (synth_unif(&s) < 0.5)
                db += synth_range(&s, 50000.0, 500000.0);
            else
                da += synth_range(&s, 50000.0, 500000.0);
        }
        out[i].device_ns = truth->dev0 + (uint64_t)floor((double)(t - truth->host0) * rate);
        out[i].host_before_ns = t - (uint64_t)db;
        out[i].host_after_ns = t + (uint64_t)da;
    }
}

static inline void synth_generate_short(uint64_t seed, int warmup, kt_clock_sample_t *out, size_t n,
                                        synth_truth_t *truth)
{
    synth_short_impl(seed, warmup, NULL, out, n, truth);
}

/* The same short batch of a clock with the given drift (e.g. far outside the default prior). */
static inline void synth_generate_short_drift(uint64_t seed, int warmup, double drift_ppm, kt_clock_sample_t *out,
                                              size_t n, synth_truth_t *truth)
{
    synth_short_impl(seed, warmup, &drift_ppm, out, n, truth);
}

/* Device reading of the synthetic clock at true host time host_ns (host_ns >= host0). */
static inline uint64_t synth_device_at(const synth_truth_t *tr, uint64_t host_ns)
{
    return tr->dev0 + (uint64_t)floor((double)(host_ns - tr->host0) * (1.0 + tr->drift_ppm * 1e-6));
}

/* Error of a mapped host time for device reading device_ns: mapped minus the true host time at which the
 * device clock read device_ns (the middle of its quantum for quantised clocks). */
static inline double synth_error(const synth_truth_t *tr, uint64_t device_ns, uint64_t host_ns)
{
    double dd = (double)(int64_t)(device_ns - tr->dev0) + tr->res_ns / 2.0;
    double dh = dd / (1.0 + tr->drift_ppm * 1e-6);
    return (double)(int64_t)(host_ns - tr->host0) - dh;
}

/* Accuracy of one fitted model against the truth. */
typedef struct synth_eval_t {
    double drift_err_ppm;  /* |fitted - true drift| */
    double offset_err_ns;  /* |error| at the model's device_ref (centre of the span) */
    int points;            /* query points checked */
    int contained;         /* points whose |error| <= reported uncertainty */
    double max_ratio;      /* largest |error| / uncertainty seen */
} synth_eval_t;

/* Check the model at: first sample, centre, last sample, 10 % of the span before it, 20 % after it. */
static inline void synth_evaluate(const kt_clock_model_t *m, const synth_truth_t *tr, const kt_clock_sample_t *s,
                                  size_t n, synth_eval_t *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->drift_err_ppm = fabs(m->drift_ppm - tr->drift_ppm);
    uint64_t first = s[0].device_ns, last = s[n - 1].device_ns;
    /* outliers may sit at the ends: use the truth's device times of the first and last reads */
    uint64_t span = last - first;
    uint64_t q[5] = {first, m->device_ref_ns, last, first - span / 10, last + span / 5};
    for (int i = 0; i < 5; i++) {
        uint64_t h, u;
        if (kt_clock_to_host(m, q[i], &h, &u) != 0) continue;
        double e = fabs(synth_error(tr, q[i], h));
        if (i == 1) ev->offset_err_ns = e;
        ev->points++;
        if (e <= (double)u) ev->contained++;
        double ratio = e / (u ? (double)u : 1.0);
        if (ratio > ev->max_ratio) ev->max_ratio = ratio;
    }
}

#endif
