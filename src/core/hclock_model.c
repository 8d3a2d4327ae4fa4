/* hclock_model.c — the host counter's model against CLOCK_MONOTONIC_RAW: a first window, then a guarded refresh
 * that checks every new bracket against the model in force, refits the rate, and states a bound that holds
 * until the next refresh (docs/host-clock.md, "Ticks to ns").
 *
 * Points. A refresh takes REFRESH_READS brackets {clock_gettime, counter, clock_gettime} and keeps the tightest:
 * the true CLOCK_MONOTONIC_RAW time of its tick k lies within h of the bracket's midpoint m (h = half its width),
 * because the counter read is ordered between the two clock reads. No statistics: every term below is a worst
 * case given that fact and the assumed rate change C.
 *
 * Model. A line through the newest point p = (k, m, h) with the rate r of the chord from the epoch's first
 * point b: r = (m - m_b) / (k - k_b), its error at most e = (h_b + h) / (m - m_b) (relative) while the rate was
 * constant. The bound on any tick t converted until the next refresh (due):
 *
 *     bound = h + (due - k) * r * (e + C + X) + slew + 2 ns
 *
 * C: the assumed worst change of the rate since the fit (KT__HCM_CHANGE_PPM = 1000 ppm with a refresh every
 * 1 ms when the counter is not the kernel's clocksource; 0.01 ppm, up to 1 s, when it is). X: C again for one
 * interval after the guard fired on a rate change, while the chord still reaches back across it. slew: what
 * the slew piece (below) had left to go. 2 ns: rounding of the hot path's conversion.
 *
 * Guard. At every refresh the new point is checked against the model in force, without C: a disagreement
 * beyond h + h_new + (k_new - k) * r * (e + X) + 2 ns means the rate changed or the clock stepped (the
 * model would otherwise explain the point). A disagreement a rate change up to C explains starts a new epoch at
 * the new point, with the chord from the previous point and X = C until the epoch has two points of its own;
 * a larger one is a step: the new epoch keeps the old rate (X = C too). Either way the bound that follows holds
 * the remaining error. A switch of the kernel's clocksource (re-read at refresh) is a step, and C becomes the
 * wide assumption. After KT__HCM_MAX_FIRES steps (disagreements no rate change up to C explains: timestamps
 * before them may have left the bound), under `auto`, the counter is given up for clock_gettime. Fires that a
 * rate change explains do not count: the bound held through them.
 *
 * Never backwards. A tick converted before this refresh had the old piece's value at `due` at most (every read
 * at or past `due` refreshes, or waits for the refresh, before converting). When the new model lies below that
 * floor at the caller's tick, a slew piece runs from the floor at SLEW_PPM below the model's rate until it meets
 * the model; refreshes continue meanwhile, each restarting the slew from its own floor. So a refresh after an
 * idle start (the old piece extrapolated for seconds) is no slew at all: the floor is the old piece at its
 * `due`, long past, and the new model starts at once. */
#include "core/hclock.h"
#include "core/hclock_model.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

kt__hclock_t kt__hc; /* mode 0: clock_gettime until kt__hcm_start trusts the counter */

#define FIRST_SAMPLES 32u       /* first window: brackets spread over FIRST_SPAN_NS */
#define FIRST_SPAN_NS 1000000ull
#define REFRESH_READS 4u        /* brackets per refresh, the tightest kept */
#define WAIT_MIN_NS 2000000ull  /* kernel clocksource: refresh when the fit is as old as its span, within these */
#define SLEW_PPM 1000.0         /* a slew runs this much slower than the model until it meets it */
#define SOURCE_CHECK_NS 100000000ull /* the clocksource is re-read at most this often (unless it is the counter) */
#define PUBLISH_NS 100000000ull /* the published bound: the largest since the last publication, at least this often */

typedef struct point_t {
    uint64_t k; /* counter */
    uint64_t m; /* bracket midpoint, CLOCK_MONOTONIC_RAW ns */
    double h;   /* half the bracket's width */
} point_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static point_t g_first;      /* the epoch's first point */
static point_t g_last;       /* the newest point: the model's anchor */
static uint32_t g_epoch_n;   /* points in the epoch */
static double g_r;           /* ns per tick */
static double g_nominal;     /* ns per tick of the first window */
static double g_e;           /* relative rate error of the chord */
static double g_c;           /* assumed change, relative */
static double g_x;           /* widening after a fire, relative */
static uint64_t g_wait_max;  /* ns */
static uint32_t g_samples;
static int g_kernel_counter, g_may_fall_back;
static uint64_t g_source_checked; /* host ns of the last clocksource read */
static uint64_t g_pub_at;         /* host ns of the last publication */
static double g_pub_bound, g_window_max;
static kt__hcm_stats_t g_st;

void kt__hcm_fork_prepare(void) { pthread_mutex_lock(&g_lock); }
void kt__hcm_fork_release(void) { pthread_mutex_unlock(&g_lock); }

static point_t bracket(void)
{
    uint64_t b = kt__hc_gettime(), k = kt__hc_tick(), a = kt__hc_gettime();
    if (a < b)
        a = b; /* a clock_gettime double that steps back between the two reads: treat as a zero-width bracket */
    point_t p = {k, b + (a - b) / 2, (double)(a - b) / 2.0 + 0.5};
    return p;
}

/* The tightest of n brackets; g_samples counts them. */
static point_t tightest(unsigned n)
{
    point_t best = bracket();
    for (unsigned i = 1; i < n; i++) {
        point_t p = bracket();
        if (p.h < best.h)
            best = p;
    }
    g_samples += n;
    return best;
}

/* Chord from b to p: rate and its relative error. 0 when it is not usable (no time or no ticks between). */
static int chord(const point_t *b, const point_t *p, double *r, double *e)
{
    if ((int64_t)(p->k - b->k) <= 0 || (int64_t)(p->m - b->m) <= 0)
        return 0;
    double dm = (double)(p->m - b->m);
    *r = dm / (double)(p->k - b->k);
    *e = (b->h + p->h) / dm;
    return *r > 1e-3 && *r < 1e3;
}

/* The model's value at tick t (the anchor g_last, rate g_r), as a double offset from the anchor's ns. */
static double model_off(uint64_t t) { return (double)(int64_t)(t - g_last.k) * g_r; }

static uint64_t mult_of(double ns_per_tick)
{
    return (uint64_t)llround(ns_per_tick * (double)(1ull << KT__HC_SHIFT));
}

static void piece_store(uint64_t tick0, uint64_t ns0, uint64_t mult, uint64_t due)
{
    uint32_t s = atomic_load_explicit(&kt__hc.seq, memory_order_relaxed);
    atomic_store_explicit(&kt__hc.seq, s + 1, memory_order_relaxed);
    atomic_store_explicit(&kt__hc.tick0, tick0, memory_order_release);
    atomic_store_explicit(&kt__hc.ns0, ns0, memory_order_release);
    atomic_store_explicit(&kt__hc.mult, mult, memory_order_release);
    atomic_store_explicit(&kt__hc.seq, s + 2, memory_order_release);
    atomic_store_explicit(&kt__hc.due, due, memory_order_relaxed);
}

/* The refresh interval after a fit: fixed under the wide assumption; with the kernel's clocksource the fit's
 * own span (its rate error shrinks as it grows), 2 ms to 1 s. */
static uint64_t wait_ns(void)
{
    if (!g_kernel_counter)
        return g_wait_max;
    uint64_t span = g_last.m - g_first.m;
    if (g_epoch_n < 2)
        span = 0;
    return span < WAIT_MIN_NS ? WAIT_MIN_NS : span > g_wait_max ? g_wait_max : span;
}

/* The model's value at tick t: the integer anchor plus a small double offset (the anchor itself may be past
 * 2^53 ns, months of uptime). */
static uint64_t model_at(uint64_t t)
{
    int64_t off = (int64_t)floor(model_off(t));
    return off < 0 && (uint64_t)-off > g_last.m ? 0 : g_last.m + (uint64_t)off;
}

/* Install the model for the caller's tick `from` on, and state its bound. `edge` <= from is the first tick the
 * new piece may convert (the old `due`, or `from` itself), and `top` the old piece's value there: the most any
 * earlier conversion returned (0: none). Lock held. */
static void install(uint64_t from, uint64_t edge, uint64_t top)
{
    uint64_t wait = wait_ns();
    uint64_t wait_ticks = (uint64_t)((double)wait / g_r);
    uint64_t mult = mult_of(g_r), due = from + wait_ticks, at_edge = model_at(edge);
    double over = 0, s = SLEW_PPM * 1e-6;
    uint64_t meet = edge;
    if (top > at_edge) {
        /* the model lies below what was returned: slew from there, below its rate, until it meets it (at the
         * next refresh when SLEW_PPM or less does it, else at SLEW_PPM); the bound carries the whole of it (no
         * less than what is left at any tick the piece converts) */
        over = (double)(top - at_edge);
        double need = over / (g_r * (double)(due - edge));
        if (need <= s) {
            s = need;
            meet = due;
        } else {
            meet = edge + (uint64_t)(over / (g_r * s)) + 1;
        }
    }
    if ((int64_t)(meet - from) <= 0) {
        over = 0; /* met already (or no slew): every tick from `edge` on converts at or above `top` */
        piece_store(from, model_at(from), mult, due);
    } else {
        /* anchored at `edge`: a reader that waited for this refresh with a tick past the old `due` converts
         * at or above `top`, never behind a stamp returned before */
        if ((int64_t)(meet - due) < 0)
            due = meet; /* refresh where it meets: the model's own piece from there */
        piece_store(edge, top, mult_of(g_r * (1.0 - s)), due);
    }
    double dt = (double)(int64_t)(due - g_last.k) * g_r;
    if (dt < 0)
        dt = -dt;
    double bound = 2.0 + g_last.h + over + dt * (g_e + g_c + g_x);
    g_st.bound_ns = bound;
    atomic_store_explicit(&kt__hc.bound_ns, (uint64_t)ceil(bound), memory_order_relaxed);
    g_st.slew_ns = over;
    g_st.ns_per_tick = g_r;
    g_st.nominal_ns_per_tick = g_nominal;
    g_st.rate_bound_ppm = (g_e + g_c + g_x) * 1e6;
    g_st.change_ppm = g_c * 1e6;
    g_st.span_ms = g_epoch_n >= 2 ? (double)(g_last.m - g_first.m) / 1e6 : 0.0;
    g_st.wait_max_ns = g_wait_max;
    g_st.samples = g_samples;
    g_st.kernel_counter = g_kernel_counter;
    g_st.refreshes++;
}

static void set_assumption(int kernel_counter)
{
    g_kernel_counter = kernel_counter;
    g_c = (kernel_counter ? KT__HCM_KERNEL_CHANGE_PPM : KT__HCM_CHANGE_PPM) * 1e-6;
    g_wait_max = kernel_counter ? KT__HCM_KERNEL_WAIT_NS : KT__HCM_WAIT_NS;
}

int kt__hcm_start(int kernel_counter, int may_fall_back)
{
    point_t r[FIRST_SAMPLES];
    uint64_t t0 = kt__hc_gettime();
    for (unsigned i = 0; i < FIRST_SAMPLES; i++) {
        uint64_t at = t0 + FIRST_SPAN_NS * i / (FIRST_SAMPLES - 1);
        while (kt__hc_gettime() < at)
            sched_yield();
        r[i] = bracket();
    }
    /* the tightest of the first 4 and of the last 4 */
    unsigned b = 0, p = FIRST_SAMPLES - 4;
    for (unsigned i = 1; i < 4; i++) {
        if (r[i].h < r[b].h)
            b = i;
        if (r[FIRST_SAMPLES - 4 + i].h < r[p].h)
            p = FIRST_SAMPLES - 4 + i;
    }
    double rate, e;
    pthread_mutex_lock(&g_lock);
    if (!chord(&r[b], &r[p], &rate, &e)) {
        pthread_mutex_unlock(&g_lock);
        return -1;
    }
    memset(&g_st, 0, sizeof g_st);
    set_assumption(kernel_counter);
    g_may_fall_back = may_fall_back;
    g_first = r[b];
    g_last = r[p];
    g_epoch_n = 2;
    g_r = g_nominal = rate;
    g_e = e;
    g_x = 0;
    g_samples = FIRST_SAMPLES;
    uint64_t now = kt__hc_tick();
    install(now, now, 0);
    g_source_checked = g_pub_at = g_last.m;
    g_pub_bound = g_window_max = g_st.bound_ns;
    atomic_store_explicit(&kt__hc.mode, KT__HC_COUNTER, memory_order_release);
    kt__hcm_stats_t st = g_st;
    pthread_mutex_unlock(&g_lock);
    kt__hcm_published(&st);
    return 0;
}

void kt__hcm_stats(kt__hcm_stats_t *out)
{
    pthread_mutex_lock(&g_lock);
    *out = g_st;
    pthread_mutex_unlock(&g_lock);
}

/* The guard and the refit, for a new point q. Returns 1 when the guard fired. Lock held. */
static int refit(const point_t *q)
{
    double dt = model_off(q->k); /* ns from the anchor by the model */
    double dev = (double)(int64_t)(q->m - g_last.m) - dt;
    double adt = fabs(dt);
    double allowed = g_last.h + q->h + adt * (g_e + g_x) + 2.0;
    double r, e;
    if (fabs(dev) > allowed) {
        g_st.fires++;
        if (fabs(dev) <= allowed + adt * g_c && chord(&g_last, q, &r, &e)) {
            g_r = r; /* a rate change: the chord across it, widened by C until the epoch has two points */
            g_e = e;
        } else {
            g_st.steps++; /* a step: the old rate */
        }
        g_x = g_c;
        g_first = *q;
        g_last = *q;
        g_epoch_n = 1;
        g_samples = REFRESH_READS;
        return 1;
    }
    g_last = *q;
    g_epoch_n++;
    if (g_epoch_n >= 2 && chord(&g_first, q, &r, &e)) {
        g_r = r;
        g_e = e;
        g_x = 0;
    }
    return 0;
}

/* Refresh at the caller's tick. Lock held. Returns 1 when the published record should change. */
static int refresh_locked(uint64_t tick)
{
    uint64_t due = atomic_load_explicit(&kt__hc.due, memory_order_relaxed);
    /* the most any earlier conversion returned: the piece in force at min(tick, due) */
    uint64_t edge = (int64_t)(tick - due) < 0 ? tick : due;
    uint64_t top = kt__hc_seg_ns(atomic_load_explicit(&kt__hc.tick0, memory_order_relaxed),
                                   atomic_load_explicit(&kt__hc.ns0, memory_order_relaxed),
                                   atomic_load_explicit(&kt__hc.mult, memory_order_relaxed), edge);
    point_t q = tightest(REFRESH_READS);
    int fired = 0;
    if (g_kernel_counter || q.m - g_source_checked >= SOURCE_CHECK_NS) {
        int kc = g_kernel_counter;
        g_source_checked = q.m;
        if (kt__hcm_source_changed(&kc)) {
            g_st.source_changes++;
            set_assumption(kc);
            /* a step: the rate stays, the epoch restarts at q, the bound widens */
            g_st.fires++;
            g_st.steps++;
            g_x = g_c;
            g_first = g_last = q;
            g_epoch_n = 1;
            g_samples = REFRESH_READS;
            fired = 1;
        }
    }
    if (!fired)
        fired = refit(&q);
    if (fired && g_may_fall_back && g_st.steps >= KT__HCM_MAX_FIRES) {
        g_st.fell_back = 1;
        atomic_store_explicit(&kt__hc.mode, KT__HC_CLOCK_GETTIME, memory_order_release);
    }
    install(tick, edge, top);
    if (g_st.bound_ns > g_window_max)
        g_window_max = g_st.bound_ns;
    if (fired || g_st.bound_ns > g_pub_bound || q.m - g_pub_at >= PUBLISH_NS) {
        g_pub_at = q.m;
        g_pub_bound = g_window_max;
        g_window_max = g_st.bound_ns;
        return 1;
    }
    return 0;
}

void kt__hclock_refresh(uint64_t tick)
{
    if (pthread_mutex_trylock(&g_lock) != 0)
        pthread_mutex_lock(&g_lock); /* another thread refreshes: wait for its piece rather than convert past due */
    if ((int64_t)(tick - atomic_load_explicit(&kt__hc.due, memory_order_relaxed)) < 0 ||
        atomic_load_explicit(&kt__hc.mode, memory_order_relaxed) != KT__HC_COUNTER) {
        pthread_mutex_unlock(&g_lock);
        return;
    }
    int pub = refresh_locked(tick);
    kt__hcm_stats_t st = g_st;
    if (pub)
        st.bound_ns = g_pub_bound;
    pthread_mutex_unlock(&g_lock);
    if (pub)
        kt__hcm_published(&st);
}
