/* harness.c — run one kernel's dispatch callback until its timing is stable (nvbench-style stopping criterion). */
#include "harness/harness_internal.h"

#include <ktiming/harness.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KT_H_MAX_NOISE 0.005
#define KT_H_MIN_SAMPLES 10u
#define KT_H_MAX_SAMPLES (1u << 20)
#define KT_H_MIN_TIME_NS 500000000ull
#define KT_H_TIMEOUT_NS 15000000000ull
#define KT_H_STABLE_TOL 0.05
#define KT_H_STABLE_WINDOW 64u
#define KT_H_PROGRESS_AFTER_NS 1000000000ull
#define KT_H_PROGRESS_EVERY_NS 200000000ull
#define KT_H_MAX_TRIALS (1u << 24)

/* ---------------------------------------------------------------------------------------------------
 * Run state
 * ------------------------------------------------------------------------------------------------- */

/* The desc with defaults applied, plus everything a run accumulates. */
typedef struct harness_t {
    const kt_harness_desc_t *d;  /* caller's desc */
    kt_harness_clock_cb clock;   /* effective clock */
    void *clock_user;            /* its argument */
    int host_clock;              /* clock is kt_now_ns: start/end may be recorded as host-timeline spans */
    double max_noise;            /* effective target */
    uint32_t min_samples;        /* effective minimum */
    uint32_t max_samples;        /* effective cap */
    uint64_t min_time_ns;        /* effective measured-time minimum */
    uint64_t timeout_ns;         /* effective wall timeout */
    double stable_tol;           /* effective stability tolerance, negative = off */
    uint32_t window;             /* noise values in the stability window */
    uint64_t begin_ns;           /* harness clock at the first warm-up */
    unsigned char *flush_buf;    /* cache-flush buffer, NULL when off */
    size_t flush_bytes;          /* its size */
    unsigned flush_pass;         /* changes the written byte each flush */
    kt_kernel_id_t kernel;       /* where samples are recorded, 0 = not recorded */
    /* running moments (Welford) of per-dispatch durations, for the stddev/mean noise */
    double w_mean, w_m2;
    /* median-CI noise: sorted copy refreshed every so often */
    uint64_t *sorted;            /* scratch for sorting, capacity as samples */
    uint32_t next_ci_at;         /* sample count at which the median CI is recomputed */
    /* noise history for the stability rule (ring) */
    double *hist;                /* window entries */
    uint32_t hist_len;           /* valid entries (<= window) */
    uint32_t hist_pos;           /* next write position */
    /* progress */
    FILE *pout;                  /* progress stream */
    int ptty;                    /* pout is a terminal: redraw one line with \r */
    int pmode;                   /* effective progress mode (desc value) */
    uint64_t plast_ns;           /* harness clock at the last progress line, 0 = none printed */
} harness_t;

static uint64_t host_clock(void *user)
{
    (void)user;
    return kt_now_ns();
}

const char *kt_harness_stop_name(kt_harness_stop_t stop)
{
    switch (stop) {
    case KT_HARNESS_STOP_NONE: return "none";
    case KT_HARNESS_STOP_CONVERGED: return "converged";
    case KT_HARNESS_STOP_STABLE: return "stable";
    case KT_HARNESS_STOP_TIMEOUT: return "timeout";
    case KT_HARNESS_STOP_MAX_SAMPLES: return "max-samples";
    case KT_HARNESS_STOP_ERROR: return "error";
    }
    return "unknown";
}

void kt_harness_result_free(kt_harness_result_t *result)
{
    if (!result) return;
    free(result->samples);
    memset(result, 0, sizeof *result);
}

/* ---------------------------------------------------------------------------------------------------
 * One sample
 * ------------------------------------------------------------------------------------------------- */

/* Run one sample (flushing first when asked); *dur is the measured duration of all trials. */
static int take_sample(harness_t *h, uint32_t trials, uint64_t *dur, uint64_t *t0, uint64_t *t1)
{
    if (h->flush_buf) kt__cache_flush(h->flush_buf, h->flush_bytes, ++h->flush_pass);
    uint64_t reported = 0;
    *t0 = h->clock(h->clock_user);
    int rc = h->d->run(h->d->user, trials, &reported);
    *t1 = h->clock(h->clock_user);
    if (rc) return rc < 0 ? rc : KT_EBACKEND;
    if (h->d->timing == KT_HARNESS_TIME_REPORTED) *dur = reported;
    else *dur = *t1 > *t0 ? *t1 - *t0 : 0;
    return 0;
}

static void record_sample(const harness_t *h, uint32_t trials, uint64_t per, uint64_t t0, uint64_t t1)
{
    if (!h->kernel) return;
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = h->kernel;
    d.duration_ns = per;
    if (trials > 1) d.flags |= KT_SPAN_TRIALS;
    if (h->host_clock && h->d->timing == KT_HARNESS_TIME_HOST) {
        if (h->d->backend != KT_BACKEND_CPU) d.flags |= KT_SPAN_HOST_TIMED;
        d.enqueue_ns = t0;
        d.start_ns = t0;
        d.end_ns = t1;
    }
    kt_record_dispatch(&d);
}

/* ---------------------------------------------------------------------------------------------------
 * Noise and the stopping criterion
 * ------------------------------------------------------------------------------------------------- */

static void hist_push(harness_t *h, double noise)
{
    h->hist[h->hist_pos] = noise;
    h->hist_pos = (h->hist_pos + 1) % h->window;
    if (h->hist_len < h->window) h->hist_len++;
}

/* nvbench's rule: the noise has converged (above target) when the spread of the recent noise values around
 * the current one is a small fraction of it. */
static int hist_stable(const harness_t *h, double current)
{
    if (h->stable_tol < 0.0 || h->hist_len < h->window || !(current > 0.0) || !isfinite(current)) return 0;
    double ss = 0.0;
    for (uint32_t i = 0; i < h->hist_len; i++) {
        if (!isfinite(h->hist[i])) return 0;
        double dv = h->hist[i] - current;
        ss += dv * dv;
    }
    double spread = sqrt(ss / (double)(h->hist_len - 1));
    return spread / current < h->stable_tol;
}

/* Update the noise after adding a sample; returns 1 when a new noise value was computed. */
static int update_noise(harness_t *h, const uint64_t *samples, uint32_t n, double *noise)
{
    double x = (double)samples[n - 1];
    double delta = x - h->w_mean;
    h->w_mean += delta / (double)n;
    h->w_m2 += delta * (x - h->w_mean);
    if (h->d->noise != KT_HARNESS_NOISE_MEDIAN_CI) {
        if (n < 2 || !(h->w_mean > 0.0)) *noise = INFINITY;
        else *noise = sqrt(h->w_m2 / (double)(n - 1)) / h->w_mean;
        return 1;
    }
    if (n < h->next_ci_at) return 0;
    /* Re-sorting every n/32 samples keeps the cost at O(log n) amortised per sample. */
    uint32_t step = n / 32u;
    h->next_ci_at = n + (step ? step : 1u);
    memcpy(h->sorted, samples, (size_t)n * sizeof *samples);
    kt__sort_u64(h->sorted, n);
    uint32_t j = kt_median_ci_rank(n, 0.95);
    double med = kt__median_sorted(h->sorted, n);
    if (j == 0 || !(med > 0.0)) *noise = INFINITY;
    else *noise = 0.5 * ((double)h->sorted[n - j] - (double)h->sorted[j - 1]) / med;
    return 1;
}

/* ---------------------------------------------------------------------------------------------------
 * Progress
 * ------------------------------------------------------------------------------------------------- */

static void progress(harness_t *h, uint32_t n, double noise, uint64_t now, int final, kt_harness_stop_t stop)
{
    if (h->pmode < 0) return;
    uint64_t elapsed = now - h->begin_ns;
    if (!final) {
        if (h->pmode == 0 && (!h->ptty || elapsed < KT_H_PROGRESS_AFTER_NS)) return;
        if (h->plast_ns && now - h->plast_ns < KT_H_PROGRESS_EVERY_NS) return;
    } else if (!h->plast_ns) {
        return; /* nothing was shown: a short run stays silent */
    }
    h->plast_ns = now ? now : 1;
    fprintf(h->pout, "%s[ktiming harness] %s: %u samples, noise %.2f %% (target %.2f %%), %.1f / %.1f s",
            h->ptty ? "\r" : "", h->d->name, n, isfinite(noise) ? noise * 100.0 : 0.0, h->max_noise * 100.0,
            (double)elapsed / 1e9, (double)h->timeout_ns / 1e9);
    if (final) fprintf(h->pout, " - %s", kt_harness_stop_name(stop));
    fputs(h->ptty && !final ? "\033[K" : "\n", h->pout);
    fflush(h->pout);
}

/* ---------------------------------------------------------------------------------------------------
 * The run
 * ------------------------------------------------------------------------------------------------- */

static int setup(harness_t *h, const kt_harness_desc_t *d)
{
    memset(h, 0, sizeof *h);
    h->d = d;
    h->clock = d->clock ? d->clock : host_clock;
    h->clock_user = d->clock_user;
    h->host_clock = d->clock == NULL;
    h->max_noise = d->max_noise > 0.0 ? d->max_noise : KT_H_MAX_NOISE;
    h->min_samples = d->min_samples ? d->min_samples : KT_H_MIN_SAMPLES;
    if (h->min_samples < 2) h->min_samples = 2;
    h->max_samples = d->max_samples ? d->max_samples : KT_H_MAX_SAMPLES;
    if (h->max_samples < h->min_samples) h->max_samples = h->min_samples;
    h->min_time_ns = d->min_time_ns ? d->min_time_ns : KT_H_MIN_TIME_NS;
    h->timeout_ns = d->timeout_ns ? d->timeout_ns : KT_H_TIMEOUT_NS;
    h->stable_tol = d->stable_tolerance != 0.0 ? d->stable_tolerance : KT_H_STABLE_TOL;
    h->window = d->stable_window ? d->stable_window : KT_H_STABLE_WINDOW;
    if (h->window < 2) h->window = 2;
    h->hist = calloc(h->window, sizeof *h->hist);
    if (!h->hist) return KT_ENOMEM;
    if (d->flush_cache) {
        h->flush_bytes = d->flush_bytes ? d->flush_bytes : 2 * kt_harness_cache_size();
        h->flush_buf = malloc(h->flush_bytes);
        if (!h->flush_buf) return KT_ENOMEM;
    }
    if (!d->no_record) h->kernel = kt_kernel_intern(d->name, d->backend, d->device);
    h->pmode = d->progress;
    h->pout = d->progress_out ? d->progress_out : stderr;
    h->ptty = isatty(fileno(h->pout));
    return 0;
}

/* Grow samples (and the median-CI scratch) to hold at least n+1 entries. */
static int reserve(harness_t *h, kt_harness_result_t *r, uint32_t *cap)
{
    if (r->sample_count < *cap) return 0;
    uint32_t ncap = *cap ? *cap * 2 : 256;
    if (ncap > h->max_samples) ncap = h->max_samples;
    uint64_t *s = realloc(r->samples, (size_t)ncap * sizeof *s);
    if (!s) return KT_ENOMEM;
    r->samples = s;
    if (h->d->noise == KT_HARNESS_NOISE_MEDIAN_CI) {
        uint64_t *t = realloc(h->sorted, (size_t)ncap * sizeof *t);
        if (!t) return KT_ENOMEM;
        h->sorted = t;
    }
    *cap = ncap;
    return 0;
}

/* Warm-up, including choosing trials automatically. Returns 0, a callback error, or 1 on timeout. */
static int warm_up(harness_t *h, kt_harness_result_t *r, uint32_t *trials)
{
    const kt_harness_desc_t *d = h->d;
    int auto_trials = d->trials == 0 && d->min_sample_ns > 0;
    int32_t want = d->warmup_samples == 0 ? 1 : d->warmup_samples;
    int calibrated = !auto_trials;
    for (;;) {
        uint64_t now = h->clock(h->clock_user);
        int count_done = (int64_t)r->warmup_samples >= (int64_t)want;
        int time_done = now - h->begin_ns >= d->warmup_ns;
        if (count_done && time_done && calibrated) return 0;
        if (now - h->begin_ns >= h->timeout_ns) return 1;
        uint64_t dur, t0, t1;
        int rc = take_sample(h, *trials, &dur, &t0, &t1);
        if (rc) return rc;
        r->warmup_samples++;
        if (!auto_trials || calibrated) continue;
        if (dur >= d->min_sample_ns || *trials >= KT_H_MAX_TRIALS) {
            calibrated = 1;
            continue;
        }
        /* Scale towards the target in one step when the estimate is usable, never more than 16x at once. */
        uint64_t factor = dur ? (d->min_sample_ns + dur - 1) / dur : 16;
        if (factor < 2) factor = 2;
        if (factor > 16) factor = 16;
        uint64_t t = (uint64_t)*trials * factor;
        *trials = t > KT_H_MAX_TRIALS ? KT_H_MAX_TRIALS : (uint32_t)t;
    }
}

int kt_harness_run(const kt_harness_desc_t *desc, kt_harness_result_t *result)
{
    if (!result) return KT_EINVAL;
    memset(result, 0, sizeof *result);
    if (!desc || !desc->name || !desc->run) return KT_EINVAL;

    harness_t h;
    int rc = setup(&h, desc);
    kt_harness_result_t *r = result;
    r->max_noise = h.max_noise;
    r->flush_bytes = h.flush_bytes;
    r->noise = INFINITY;
    uint32_t trials = desc->trials ? desc->trials : 1;
    uint32_t cap = 0;
    uint64_t now = 0;
    if (rc) goto out;

    h.begin_ns = h.clock(h.clock_user);
    now = h.begin_ns;
    rc = warm_up(&h, r, &trials);
    r->trials = trials;
    if (rc == 1) {
        rc = 0;
        r->stop = KT_HARNESS_STOP_TIMEOUT;
        goto out;
    }
    if (rc) {
        r->stop = KT_HARNESS_STOP_ERROR;
        r->error = rc;
        goto out;
    }

    for (;;) {
        if ((rc = reserve(&h, r, &cap))) goto out;
        uint64_t dur, t0, t1;
        rc = take_sample(&h, trials, &dur, &t0, &t1);
        now = t1;
        if (rc) {
            r->stop = KT_HARNESS_STOP_ERROR;
            r->error = rc;
            break;
        }
        uint64_t per = (dur + trials / 2) / trials;
        r->samples[r->sample_count++] = per;
        r->measured_ns += dur;
        record_sample(&h, trials, per, t0, t1);

        double noise = r->noise;
        int fresh = update_noise(&h, r->samples, r->sample_count, &noise);
        r->noise = noise;
        if (fresh) hist_push(&h, noise);

        int enough = r->sample_count >= h.min_samples && r->measured_ns >= h.min_time_ns;
        if (enough && noise <= h.max_noise) {
            r->stop = KT_HARNESS_STOP_CONVERGED;
            break;
        }
        if (enough && fresh && hist_stable(&h, noise)) {
            r->stop = KT_HARNESS_STOP_STABLE;
            break;
        }
        if (now - h.begin_ns >= h.timeout_ns) {
            r->stop = KT_HARNESS_STOP_TIMEOUT;
            break;
        }
        if (r->sample_count >= h.max_samples) {
            r->stop = KT_HARNESS_STOP_MAX_SAMPLES;
            break;
        }
        progress(&h, r->sample_count, noise, now, 0, r->stop);
    }

out:
    if (h.hist) {
        r->wall_ns = now - h.begin_ns;
        if (r->stop != KT_HARNESS_STOP_NONE) progress(&h, r->sample_count, r->noise, now, 1, r->stop);
    }
    r->noise = 0.0;
    if (r->sample_count) {
        int src = kt_sample_stats(r->samples, r->sample_count, &r->stats);
        if (src && !rc) rc = src;
        /* The final noise comes from all samples (the median-CI one is otherwise refreshed only now and then). */
        if (desc->noise == KT_HARNESS_NOISE_MEDIAN_CI)
            r->noise = r->stats.median_ns > 0.0
                           ? 0.5 * (r->stats.median_ci_hi_ns - r->stats.median_ci_lo_ns) / r->stats.median_ns
                           : 0.0;
        else
            r->noise = r->stats.stdrel;
    }
    free(h.hist);
    free(h.flush_buf);
    free(h.sorted);
    return rc;
}
