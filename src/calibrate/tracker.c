/* tracker.c — periodic refit: a ring of recent samples of one device clock and its current model. */
#include "calib_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct kt_clock_tracker_t {
    pthread_mutex_t lock;           /* guards everything below except the two scratch buffers */
    kt_fit_strategy_t strategy;     /* fit strategy */
    kt_clock_domain_t domain;       /* host domain of the brackets */
    clockid_t clk;                  /* its clockid */
    kt_clock_tracker_desc_t d;      /* tunables with defaults resolved */
    double limit_ppm;               /* hard drift limit of the fits (kt__clock_fit_ex) */
    kt_clock_sample_t *ring;        /* capacity samples, time order from `first` */
    uint32_t first;                 /* index of the oldest sample */
    uint32_t count;                 /* samples in the ring */
    uint32_t fresh;                 /* samples pushed since the last fit started */
    uint64_t epoch;                 /* bumped by each ring restart (a fit of an older ring is discarded) */
    int has_pending;                /* a sample disagreed with the model: kept aside until confirmed */
    kt_clock_sample_t pending;      /* that sample */
    int has_model;                  /* model is valid */
    kt_clock_model_t model;         /* current model */
    uint64_t last_poll_ns;          /* host time of the last sampling poll */
    int polling;                    /* a poll is sampling (owns batch_buf) */
    int fitting;                    /* a fit is running (owns fit_buf) */
    kt_clock_sample_t *batch_buf;   /* max(initial_samples, batch) samples */
    kt_clock_sample_t *fit_buf;     /* capacity samples: the ring in time order for a fit */
    kt_clock_tracker_stats_t stats; /* counters */
};

/* ---------------------------------------------------------------------------------------------------
 * Lifecycle
 * ------------------------------------------------------------------------------------------------- */

int kt_clock_tracker_create(kt_fit_strategy_t strategy, kt_clock_domain_t host_domain,
                            const kt_clock_tracker_desc_t *desc, kt_clock_tracker_t **out)
{
    if (!out) return KT_EINVAL;
    *out = NULL;
    clockid_t clk;
    if ((int)strategy < KT_FIT_BASIC || (int)strategy > KT_FIT_RANSAC) return KT_EINVAL;
    if (kt__domain_clockid(host_domain, &clk) != 0) return KT_EINVAL;
    kt_clock_tracker_desc_t d = {0};
    if (desc) d = *desc;
    if (!d.capacity) d.capacity = 256;
    if (d.capacity < KT_CLOCK_MIN_SAMPLES) d.capacity = KT_CLOCK_MIN_SAMPLES;
    if (!d.initial_samples) d.initial_samples = 32;
    if (d.initial_samples < KT_CLOCK_MIN_SAMPLES) d.initial_samples = KT_CLOCK_MIN_SAMPLES;
    if (d.initial_samples > d.capacity) d.initial_samples = d.capacity;
    if (!d.batch) d.batch = 8;
    if (!d.keep) d.keep = 2;
    if (d.keep > d.batch) d.keep = d.batch;
    if (!d.refit_every) d.refit_every = 16;
    if (!d.refit_interval_ns) d.refit_interval_ns = 1000000000ull;
    if (!d.min_poll_interval_ns) d.min_poll_interval_ns = 1000000ull;
    if (!d.window_ns) d.window_ns = 120000000000ull;
    if (!(d.max_drift_ppm > 0)) d.max_drift_ppm = KT_CLOCK_DEFAULT_MAX_DRIFT_PPM;
    if (d.drift_prior_ppm == 0) d.drift_prior_ppm = KT_CLOCK_DEFAULT_DRIFT_PRIOR_PPM;
    if (!(d.drift_prior_ppm > 0)) d.drift_prior_ppm = 0; /* negative (or NaN): no prior */
    if (!(d.max_error_ns > 0)) d.max_error_ns = 0;
    if (!d.step_ns) d.step_ns = 1000000ull;

    kt_clock_tracker_t *t = calloc(1, sizeof(*t));
    if (!t) return KT_ENOMEM;
    uint32_t bmax = d.initial_samples > d.batch ? d.initial_samples : d.batch;
    t->ring = calloc(d.capacity, sizeof(*t->ring));
    t->fit_buf = calloc(d.capacity, sizeof(*t->fit_buf));
    t->batch_buf = calloc(bmax, sizeof(*t->batch_buf));
    if (!t->ring || !t->fit_buf || !t->batch_buf || pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t->ring);
        free(t->fit_buf);
        free(t->batch_buf);
        free(t);
        return KT_ENOMEM;
    }
    t->strategy = strategy;
    t->domain = host_domain;
    t->clk = clk;
    t->d = d;
    t->limit_ppm = KT_CLOCK_DRIFT_LIMIT_PPM > d.drift_prior_ppm ? KT_CLOCK_DRIFT_LIMIT_PPM : d.drift_prior_ppm;
    *out = t;
    return 0;
}

void kt__clock_tracker_set_limit(kt_clock_tracker_t *t, double limit_ppm)
{
    pthread_mutex_lock(&t->lock);
    t->limit_ppm = limit_ppm > t->d.drift_prior_ppm ? limit_ppm : t->d.drift_prior_ppm;
    pthread_mutex_unlock(&t->lock);
}

void kt_clock_tracker_destroy(kt_clock_tracker_t *t)
{
    if (!t) return;
    pthread_mutex_destroy(&t->lock);
    free(t->ring);
    free(t->fit_buf);
    free(t->batch_buf);
    free(t);
}

/* ---------------------------------------------------------------------------------------------------
 * Ring (lock held)
 * ------------------------------------------------------------------------------------------------- */

static uint64_t midpoint(const kt_clock_sample_t *s)
{
    return s->host_before_ns + (s->host_after_ns - s->host_before_ns) / 2;
}

static const kt_clock_sample_t *ring_at(const kt_clock_tracker_t *t, uint32_t i)
{
    return &t->ring[(t->first + i) % t->d.capacity];
}

static void ring_restart(kt_clock_tracker_t *t)
{
    t->count = 0;
    t->first = 0;
    t->fresh = 0;
    t->has_model = 0;
    t->epoch++;
    t->stats.resets++;
}

static void ring_push_raw(kt_clock_tracker_t *t, const kt_clock_sample_t *s)
{
    uint32_t cap = t->d.capacity;
    if (t->count == cap) {
        t->ring[t->first] = *s;
        t->first = (t->first + 1) % cap;
    } else {
        t->ring[(t->first + t->count) % cap] = *s;
        t->count++;
    }
    t->fresh++;
    /* the window: drop samples older than window_ns before the newest */
    uint64_t newest = midpoint(s);
    while (t->count > KT_CLOCK_MIN_SAMPLES && kt__diff(newest, midpoint(ring_at(t, 0))) > (int64_t)t->d.window_ns) {
        t->first = (t->first + 1) % cap;
        t->count--;
    }
}

/* Does s disagree with the current model by more than its bound, its bracket and step_ns? */
static int is_step(const kt_clock_tracker_t *t, const kt_clock_sample_t *s)
{
    if (!t->has_model) return 0;
    uint64_t pred, unc;
    if (kt_clock_to_host(&t->model, s->device_ns, &pred, &unc) != 0) return 1;
    double dev = fabs((double)kt__diff(midpoint(s), pred));
    double allowed = (double)unc + (double)(s->host_after_ns - s->host_before_ns) / 2.0 + (double)t->d.step_ns;
    return dev > allowed;
}

/* Push one sample, with step detection: a disagreeing sample waits aside; a second one in a row restarts the
 * ring with both (the clock was stepped or reset); an agreeing sample discards the one aside (an outlier). */
static void ring_push(kt_clock_tracker_t *t, const kt_clock_sample_t *s)
{
    if (is_step(t, s)) {
        if (t->has_pending) {
            kt_clock_sample_t p = t->pending;
            t->has_pending = 0;
            ring_restart(t);
            ring_push_raw(t, &p);
            ring_push_raw(t, s);
        } else {
            t->pending = *s;
            t->has_pending = 1;
        }
        return;
    }
    t->has_pending = 0;
    ring_push_raw(t, s);
}

/* ---------------------------------------------------------------------------------------------------
 * Refit: copy the ring under the lock, fit without it, install if the ring was not restarted meanwhile
 * ------------------------------------------------------------------------------------------------- */

/* Called and returns with the lock held (drops it during the fit). */
static int refit_locked(kt_clock_tracker_t *t)
{
    if (t->fitting) return 0;
    if (t->count < KT_CLOCK_MIN_SAMPLES) return KT_ESAMPLES;
    t->fitting = 1;
    uint32_t n = t->count;
    for (uint32_t i = 0; i < n; i++) t->fit_buf[i] = *ring_at(t, i);
    uint64_t epoch = t->epoch;
    uint32_t fresh = t->fresh;
    t->fresh = 0;
    pthread_mutex_unlock(&t->lock);
    kt_clock_model_t m;
    int rc = kt__clock_fit_ex(t->fit_buf, n, t->strategy, t->domain, t->d.drift_prior_ppm, t->limit_ppm, &m);
    pthread_mutex_lock(&t->lock);
    t->fitting = 0;
    if (rc != 0) {
        t->stats.fit_errors++;
        if (t->epoch == epoch) t->fresh += fresh;
        return rc;
    }
    if (t->epoch != epoch) return 0;
    m.max_drift_ppm = t->d.max_drift_ppm;
    t->model = m;
    t->has_model = 1;
    t->stats.fits++;
    return 0;
}

/* How old the newest sample may get before the next refresh. A young model (a first batch spans a few ms, too
 * little to measure the drift) is refreshed once the time since its span ends reaches the span's own length, at
 * least EARLY_REFRESH_NS: the second fit comes ~100 ms after the first and the span about doubles with each
 * refresh until refit_interval_ns takes over. Bound at the refresh: about error_ns + span * drift bound. */
#define EARLY_REFRESH_NS 100000000ll

static int64_t refresh_interval(const kt_clock_tracker_t *t)
{
    int64_t cap = (int64_t)t->d.refit_interval_ns;
    if (!t->has_model) return cap;
    int64_t span = kt__diff(t->model.fitted_at_ns, t->model.host_first_ns);
    if (span < EARLY_REFRESH_NS) span = EARLY_REFRESH_NS;
    return span < cap ? span : cap;
}

static int refit_due(const kt_clock_tracker_t *t)
{
    if (t->count < KT_CLOCK_MIN_SAMPLES || t->fresh == 0) return 0;
    if (!t->has_model || t->fresh >= t->d.refit_every) return 1;
    const kt_clock_sample_t *newest = ring_at(t, t->count - 1);
    return kt__diff(midpoint(newest), t->model.fitted_at_ns) >= refresh_interval(t);
}

/* ---------------------------------------------------------------------------------------------------
 * Public calls
 * ------------------------------------------------------------------------------------------------- */

int kt_clock_tracker_add(kt_clock_tracker_t *t, const kt_clock_sample_t *samples, size_t n)
{
    if (!t || (!samples && n)) return KT_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (samples[i].host_after_ns < samples[i].host_before_ns) return KT_EINVAL;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < n; i++) ring_push(t, &samples[i]);
    int rc = refit_due(t) ? refit_locked(t) : 0;
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int kt_clock_tracker_refit(kt_clock_tracker_t *t)
{
    if (!t) return KT_EINVAL;
    pthread_mutex_lock(&t->lock);
    int rc = refit_locked(t);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

static int cmp_width(const void *a, const void *b)
{
    const kt_clock_sample_t *x = a, *y = b;
    uint64_t wx = x->host_after_ns - x->host_before_ns, wy = y->host_after_ns - y->host_before_ns;
    return (wx > wy) - (wx < wy);
}

static int cmp_time(const void *a, const void *b)
{
    const kt_clock_sample_t *x = a, *y = b;
    return (x->host_before_ns > y->host_before_ns) - (x->host_before_ns < y->host_before_ns);
}

/* Take up to n bracketed reads into buf (failed reads retried at most once each); returns reads kept. */
static uint32_t take(kt_clock_tracker_t *t, kt_clock_sample_t *buf, uint32_t n, uint64_t *reads)
{
    uint32_t got = 0, retries = 0;
    while (got < n && retries <= n) {
        uint64_t b = kt__clock_read(t->clk);
        uint64_t dv = t->d.read_device(t->d.user);
        uint64_t a = kt__clock_read(t->clk);
        (*reads)++;
        if (dv == 0) {
            retries++;
            continue;
        }
        buf[got++] = (kt_clock_sample_t){dv, b, a};
    }
    return got;
}

int kt_clock_tracker_poll(kt_clock_tracker_t *t, uint64_t now_ns)
{
    if (!t) return KT_EINVAL;
    pthread_mutex_lock(&t->lock);
    int need_initial = !t->has_model || t->count < KT_CLOCK_MIN_SAMPLES;
    int due = need_initial;
    if (!due && t->count > 0 && kt__diff(now_ns, midpoint(ring_at(t, t->count - 1))) >= refresh_interval(t))
        due = 1;
    if (!due && t->d.max_error_ns > 0 && kt_clock_error_at(&t->model, now_ns) > t->d.max_error_ns &&
        kt__diff(now_ns, t->last_poll_ns) >= (int64_t)t->d.min_poll_interval_ns)
        due = 1;
    if (!due || t->polling) {
        pthread_mutex_unlock(&t->lock);
        return 0;
    }
    if (!t->d.read_device) {
        pthread_mutex_unlock(&t->lock);
        return KT_ESTATE;
    }
    t->polling = 1;
    t->last_poll_ns = now_ns;
    t->stats.polls++;
    int rc = 0;
    /* at most two rounds: a regular batch, then an initial batch if the ring restarted or is too short */
    for (int round = 0; round < 2; round++) {
        uint32_t want = need_initial ? t->d.initial_samples : t->d.batch;
        uint64_t reads = 0;
        pthread_mutex_unlock(&t->lock);
        uint32_t got = take(t, t->batch_buf, want, &reads);
        uint32_t push = got;
        if (!need_initial && got > t->d.keep) {
            qsort(t->batch_buf, got, sizeof(*t->batch_buf), cmp_width);
            push = t->d.keep;
            qsort(t->batch_buf, push, sizeof(*t->batch_buf), cmp_time);
        }
        pthread_mutex_lock(&t->lock);
        t->stats.reads += reads;
        if (got == 0) {
            rc = KT_EBACKEND;
            break;
        }
        for (uint32_t i = 0; i < push; i++) ring_push(t, &t->batch_buf[i]);
        if (t->count >= KT_CLOCK_MIN_SAMPLES || need_initial) break;
        need_initial = 1;
    }
    if (rc == 0 && t->count >= KT_CLOCK_MIN_SAMPLES) {
        rc = refit_locked(t);
        if (rc == 0) rc = 1;
    } else if (rc == 0) {
        rc = KT_ESAMPLES;
    }
    t->polling = 0;
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int kt_clock_tracker_model(kt_clock_tracker_t *t, kt_clock_model_t *out)
{
    if (!t || !out) return KT_EINVAL;
    pthread_mutex_lock(&t->lock);
    int rc = t->has_model ? 0 : KT_ESTATE;
    if (t->has_model) *out = t->model;
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int kt_clock_tracker_to_host(kt_clock_tracker_t *t, uint64_t device_ns, uint64_t *host_ns, uint64_t *uncertainty_ns)
{
    kt_clock_model_t m;
    int rc = kt_clock_tracker_model(t, &m);
    if (rc != 0) return rc;
    return kt_clock_to_host(&m, device_ns, host_ns, uncertainty_ns);
}

void kt_clock_tracker_stats(kt_clock_tracker_t *t, kt_clock_tracker_stats_t *out)
{
    if (!t || !out) return;
    pthread_mutex_lock(&t->lock);
    *out = t->stats;
    out->ring = t->count;
    pthread_mutex_unlock(&t->lock);
}
