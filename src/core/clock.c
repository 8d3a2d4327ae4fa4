/* clock.c — the host timeline: CLOCK_MONOTONIC_RAW ns from the cheapest trustworthy counter (TSC, CNTVCT_EL0),
 * calibrated against clock_gettime with a stated bound; the fallback, the resolution and the cost of a read. */
#include "core/hclock_decide.h"
#include "core/internal.h"
#include "core/service.h"

#include <ktiming/clock.h>

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

kt__hclock_t kt__hc; /* mode 0: clock_gettime until kt__hclock_init trusts the counter */

#define NS_PER_S 1000000000ull
#define FIRST_SAMPLES 32u             /* first batch, spread over FIRST_SPAN_NS */
#define FIRST_SPAN_NS 1000000ull
#define REFRESH_READS 8u              /* bracketed reads per refresh, the REFRESH_KEEP tightest kept */
#define REFRESH_KEEP 2u
#define REFRESH_MIN_NS 2000000ull     /* refresh when the model is as old as its span, within these */
#define REFRESH_MAX_NS 1000000000ull  /* ... when the counter is the kernel's clocksource (a fixed rate) */
#define REFRESH_MAX_OTHER_NS 100000000ull /* ... when it is not (the kernel may re-scale it, e.g. kvm-clock) */
#define SLEW_PPM 100.0                /* a refit's correction is slewed in at this rate ... */
#define SLEW_MIN_NS 1000000ull        /* ... over at least this long */
#define CROSS_READS 4u                /* bracketed reads per CPU in the start-up check */
#define CROSS_TOLERANCE_NS 1000.0     /* allowed beyond the bracket and the model's bound */

/* Everything below is guarded by g_lock (the hot path reads only kt__hc). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static kt_clock_tracker_t *g_tracker;  /* ring of (counter, clock_gettime) samples and the current model */
static uint64_t g_base_tick;           /* counter value at start: device ns are measured from here */
static uint64_t g_nom_mult;            /* nominal ns per tick * 2^32 (start-up estimate) */
static uint64_t g_nom_hz;              /* nominal ticks per second */
static kt_host_clock_info_t g_info;    /* what kt_host_clock_info reports */
static double g_prev_bound;            /* the last model's bound, for the slew onto the next */
static uint64_t g_tick_ns_q32;         /* current ns per tick * 2^32, for refresh scheduling */
static uint64_t g_refresh_max_ns;      /* REFRESH_MAX_NS or REFRESH_MAX_OTHER_NS */

/* ---------------------------------------------------------------------------------------------------
 * Counter facts
 * ------------------------------------------------------------------------------------------------- */

static int read_line(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\n")] = 0;
    return 0;
}

#if defined(__x86_64__)
/* Does the first "flags" line of /proc/cpuinfo list `word`? */
static int cpuinfo_flag(const char *line, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(line, word); p; p = strstr(p + 1, word))
        if ((p == line || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
            return 1;
    return 0;
}
#endif

static void gather_facts(kt__hc_facts_t *f)
{
    memset(f, 0, sizeof *f);
#if defined(__x86_64__)
    f->have_counter = 1;
    f->is_x86 = 1;
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000007u && __get_cpuid(0x80000007u, &a, &b, &c, &d))
        f->invariant = (d >> 8) & 1u;
    snprintf(f->expected_clocksource, sizeof f->expected_clocksource, "tsc");
    FILE *in = fopen("/proc/cpuinfo", "re");
    if (in) {
        char line[4096];
        while (fgets(line, sizeof line, in))
            if (!strncmp(line, "flags", 5)) {
                f->constant_tsc = cpuinfo_flag(line, "constant_tsc");
                f->nonstop_tsc = cpuinfo_flag(line, "nonstop_tsc");
                break;
            }
        fclose(in);
    }
#elif defined(__aarch64__)
    f->have_counter = 1;
    f->invariant = 1;
    snprintf(f->expected_clocksource, sizeof f->expected_clocksource, "arch_sys_counter");
#endif
    if (read_line("/sys/devices/system/clocksource/clocksource0/current_clocksource", f->clocksource,
                  sizeof f->clocksource) != 0)
        f->clocksource[0] = 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Calibration: ticks -> "device ns" (nominal scale) for the tracker, its model -> the hot path's pieces
 * ------------------------------------------------------------------------------------------------- */

/* Device ns of a tick: nominal scale from the start, offset by 1 s (a device read of 0 means failure). */
static uint64_t dev_ns(uint64_t tick)
{
    unsigned __int128 p = (unsigned __int128)(tick - g_base_tick) * g_nom_mult;
    return NS_PER_S + (uint64_t)(p >> 32);
}

static kt_clock_sample_t bracket(void)
{
    kt_clock_sample_t s;
    s.host_before_ns = kt__hc_gettime();
    s.device_ns = dev_ns(kt__hc_tick());
    s.host_after_ns = kt__hc_gettime();
    return s;
}

/* One raw bracketed counter read. */
typedef struct raw_read_t {
    uint64_t before, tick, after; /* clock_gettime, counter, clock_gettime */
} raw_read_t;

/* The start-up window: FIRST_SAMPLES brackets spread over FIRST_SPAN_NS. Between reads the CPU is offered to
 * any thread that wants it (sched_yield), so a start-up on a busy machine does not take a CPU from the program
 * for the whole window. One window serves both the nominal rate and the first fit. */
static void first_window(raw_read_t *r)
{
    uint64_t t0 = kt__hc_gettime();
    for (unsigned i = 0; i < FIRST_SAMPLES; i++) {
        uint64_t at = t0 + FIRST_SPAN_NS * i / (FIRST_SAMPLES - 1);
        while (kt__hc_gettime() < at)
            sched_yield();
        r[i].before = kt__hc_gettime();
        r[i].tick = kt__hc_tick();
        r[i].after = kt__hc_gettime();
    }
}

/* Nominal rate: the tightest of the window's first 4 brackets against the tightest of its last 4; ticks are
 * counted from the window's first read. */
static int estimate_rate(const raw_read_t *r)
{
    uint64_t best_w[2] = {UINT64_MAX, UINT64_MAX}, tick[2] = {0, 0}, mid[2] = {0, 0};
    for (int end = 0; end < 2; end++) {
        for (unsigned i = 0; i < 4; i++) {
            const raw_read_t *x = &r[end ? FIRST_SAMPLES - 4 + i : i];
            if (x->after - x->before < best_w[end]) {
                best_w[end] = x->after - x->before;
                tick[end] = x->tick;
                mid[end] = x->before + (x->after - x->before) / 2;
            }
        }
    }
    if (tick[1] <= tick[0] || mid[1] <= mid[0] || r[0].tick > tick[0])
        return KT_EBACKEND;
    long double ns_per_tick = (long double)(mid[1] - mid[0]) / (long double)(tick[1] - tick[0]);
    if (!(ns_per_tick > 1e-3L && ns_per_tick < 1e3L))
        return KT_EBACKEND;
    g_base_tick = r[0].tick;
    g_nom_mult = (uint64_t)(ns_per_tick * 4294967296.0L + 0.5L);
    g_nom_hz = (uint64_t)(1e9L / ns_per_tick + 0.5L);
#if defined(__aarch64__)
    uint64_t frq;
    __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(frq));
    if (frq) {
        g_nom_hz = frq;
        g_nom_mult = (uint64_t)(1e9L * 4294967296.0L / (long double)frq + 0.5L);
    }
#endif
    return 0;
}

/* ns per tick * 2^KT__HC_SHIFT of a model (device ns at the nominal scale, drift against it). */
static uint64_t model_mult(const kt_clock_model_t *m)
{
    long double v = (long double)g_nom_mult * (long double)(1u << (KT__HC_SHIFT - 32)) /
                    (1.0L + (long double)m->drift_ppm * 1e-6L);
    return (uint64_t)(v + 0.5L);
}

/* Bound on every timestamp the model converts until its next refresh at host time due_host. */
static double model_bound(const kt_clock_model_t *m, uint64_t due_host)
{
    return kt_clock_error_at(m, due_host) + 1.0;
}

static void hc_store(_Atomic uint64_t *p, uint64_t v) { atomic_store_explicit(p, v, memory_order_relaxed); }

/* The fitted model's piece, waiting for the slew piece in force to end at kt__hc.due. Lock held. */
static int g_pending;                 /* a piece waits */
static uint64_t g_pend_tick0, g_pend_ns0, g_pend_mult, g_pend_due; /* it, and the refresh point after it */

/* Rewrite the piece in force and the next call-out point. Lock held. */
static void piece_store(uint64_t tick0, uint64_t ns0, uint64_t mult, uint64_t due)
{
    uint32_t s = atomic_load_explicit(&kt__hc.seq, memory_order_relaxed);
    atomic_store_explicit(&kt__hc.seq, s + 1, memory_order_relaxed);
    atomic_store_explicit(&kt__hc.tick0, tick0, memory_order_release);
    atomic_store_explicit(&kt__hc.ns0, ns0, memory_order_release);
    atomic_store_explicit(&kt__hc.mult, mult, memory_order_release);
    atomic_store_explicit(&kt__hc.seq, s + 2, memory_order_release);
    hc_store(&kt__hc.due, due);
}

/* Install the tracker's model from tick `now` on: a slew piece from the current conversion onto the model (at
 * SLEW_PPM, at least SLEW_MIN_NS, never past the next refresh), then the model's own piece; next refresh when
 * the model is as old as its span. Lock held. */
static int install(uint64_t now, int first)
{
    kt_clock_model_t m;
    int rc = kt_clock_tracker_model(g_tracker, &m);
    if (rc != 0)
        return rc;
    uint64_t mult = model_mult(&m), ns_now;
    if (kt_clock_to_host(&m, dev_ns(now), &ns_now, NULL) != 0 || mult == 0)
        return KT_EINVAL;
    uint64_t span = m.fitted_at_ns - m.host_first_ns, wait = span;
    if (wait < REFRESH_MIN_NS)
        wait = REFRESH_MIN_NS;
    if (wait > g_refresh_max_ns)
        wait = g_refresh_max_ns;
    long double ticks_per_ns = (long double)(1ull << KT__HC_SHIFT) / (long double)mult;
    uint64_t wait_ticks = (uint64_t)((long double)wait * ticks_per_ns);

    uint64_t cur = first ? ns_now : kt__hc_convert(now);
    double jump = fabs((double)(int64_t)(ns_now - cur));
    double slew_ns = jump / (SLEW_PPM * 1e-6);
    if (slew_ns < (double)SLEW_MIN_NS)
        slew_ns = (double)SLEW_MIN_NS;
    if (slew_ns > (double)wait)
        slew_ns = (double)wait;
    uint64_t until = now + (uint64_t)((long double)slew_ns * ticks_per_ns);
    g_pending = 0;
    if (first || until == now) {
        piece_store(now, ns_now, mult, now + wait_ticks);
    } else {
        uint64_t target = kt__hc_seg_ns(now, ns_now, mult, until);
        uint64_t slew_mult = (uint64_t)((long double)(target - cur) * (long double)(1ull << KT__HC_SHIFT) /
                                        (long double)(until - now) + 0.5L);
        g_pending = 1;
        g_pend_tick0 = until;
        g_pend_ns0 = target;
        g_pend_mult = mult;
        g_pend_due = now + wait_ticks;
        piece_store(now, cur, slew_mult, until);
    }
    g_tick_ns_q32 = mult >> (KT__HC_SHIFT - 32);

    /* while slewing, a timestamp lies between the old model and the new: the larger bound holds */
    double bound = model_bound(&m, ns_now + wait);
    double during = first ? 0.0 : g_prev_bound;
    g_prev_bound = bound;
    kt_clock_tracker_stats_t st;
    kt_clock_tracker_stats(g_tracker, &st);
    g_info.frequency_hz = (uint64_t)((long double)g_nom_hz * (1.0L + (long double)m.drift_ppm * 1e-6L) + 0.5L);
    g_info.nominal_hz = g_nom_hz;
    g_info.drift_ppm = m.drift_ppm;
    g_info.drift_bound_ppm = m.drift_bound_ppm;
    g_info.error_bound_ns = bound > during ? bound : during;
    g_info.model_samples = m.samples;
    g_info.span_ms = (double)span / 1e6;
    g_info.fits = st.fits;
    return 0;
}

static void publish(void)
{
    kt_device_info_t host;
    memset(&host, 0, sizeof host);
    host.backend = KT_BACKEND_CPU;
    snprintf(host.name, sizeof host.name, "host");
    snprintf(host.clock_domain, sizeof host.clock_domain, "CLOCK_MONOTONIC_RAW");
    host.valid_bits = 64;
    if (atomic_load_explicit(&kt__hc.mode, memory_order_relaxed) == KT__HC_COUNTER) {
        host.frequency_hz = g_info.frequency_hz;
        host.resolution_ns = g_tick_ns_q32 >> 32 ? g_tick_ns_q32 >> 32 : 1;
        host.error_bound_ns = (uint64_t)ceil(g_info.error_bound_ns);
        host.drift_ppm = g_info.drift_ppm;
        host.model_samples = g_info.model_samples;
    } else {
        host.frequency_hz = NS_PER_S;
        host.resolution_ns = kt_clock_resolution_ns();
    }
    kt_device_publish(&host);
}

/* Take REFRESH_READS brackets, push the REFRESH_KEEP tightest, refit, install. Lock held. */
static int refresh_locked(uint64_t now)
{
    kt_clock_sample_t s[REFRESH_READS];
    for (unsigned i = 0; i < REFRESH_READS; i++)
        s[i] = bracket();
    for (unsigned k = 0; k < REFRESH_KEEP; k++) /* selection of the tightest to the front */
        for (unsigned i = k + 1; i < REFRESH_READS; i++)
            if (s[i].host_after_ns - s[i].host_before_ns < s[k].host_after_ns - s[k].host_before_ns) {
                kt_clock_sample_t t = s[k];
                s[k] = s[i];
                s[i] = t;
            }
    if (s[1].host_before_ns < s[0].host_before_ns) {
        kt_clock_sample_t t = s[0];
        s[0] = s[1];
        s[1] = t;
    }
    int rc = kt_clock_tracker_add(g_tracker, s, REFRESH_KEEP);
    if (rc == 0)
        rc = kt_clock_tracker_refit(g_tracker);
    if (rc == KT_ESAMPLES) {
        /* the tracker saw the counter step and restarted its ring: refill it now rather than over 5 refreshes */
        kt_clock_sample_t b[FIRST_SAMPLES];
        for (unsigned i = 0; i < FIRST_SAMPLES; i++)
            b[i] = bracket();
        rc = kt_clock_tracker_add(g_tracker, b, FIRST_SAMPLES);
        if (rc == 0)
            rc = kt_clock_tracker_refit(g_tracker);
    }
    if (rc == 0)
        rc = install(now, 0);
    return rc;
}

void kt__hclock_refresh(uint64_t tick)
{
    if (pthread_mutex_trylock(&g_lock) != 0)
        return; /* another thread refreshes; this read converts with the model in force */
    if ((int64_t)(tick - atomic_load_explicit(&kt__hc.due, memory_order_relaxed)) < 0) {
        pthread_mutex_unlock(&g_lock);
        return;
    }
    if (g_pending) {
        /* the slew ends: the fitted model's piece takes over (no sampling) */
        g_pending = 0;
        piece_store(g_pend_tick0, g_pend_ns0, g_pend_mult, g_pend_due);
        g_info.error_bound_ns = g_prev_bound;
        publish();
    } else {
        if (refresh_locked(kt__hc_tick()) != 0) {
            /* keep the model in force; try again after its own span */
            uint64_t wait = REFRESH_MIN_NS * (g_tick_ns_q32 ? 4294967296ull / g_tick_ns_q32 : 1);
            hc_store(&kt__hc.due, tick + wait);
        }
        publish();
    }
    pthread_mutex_unlock(&g_lock);
}

/* ---------------------------------------------------------------------------------------------------
 * Start-up: first batch, the per-CPU check, the decision
 * ------------------------------------------------------------------------------------------------- */

static int first_fit(int clocksource_is_counter)
{
    raw_read_t r[FIRST_SAMPLES];
    first_window(r);
    if (estimate_rate(r) != 0)
        return KT_EBACKEND;
    kt_clock_tracker_desc_t d;
    memset(&d, 0, sizeof d);
    d.capacity = 256;
    d.initial_samples = FIRST_SAMPLES;
    d.refit_every = 1u << 30;   /* refits come from refresh_locked */
    d.refit_interval_ns = UINT64_MAX / 4;
    d.window_ns = 120 * NS_PER_S;
    d.drift_prior_ppm = -1;     /* the nominal rate is our own estimate: no prior, the data set the bound */
    /* with the counter as the kernel's clocksource, CLOCK_MONOTONIC_RAW is a fixed linear function of it */
    d.max_drift_ppm = clocksource_is_counter ? 0.01 : KT_CLOCK_DEFAULT_MAX_DRIFT_PPM;
    g_refresh_max_ns = clocksource_is_counter ? REFRESH_MAX_NS : REFRESH_MAX_OTHER_NS;
    d.step_ns = 100000;
    int rc = kt_clock_tracker_create(KT_FIT_WEIGHTED, KT_DOMAIN_MONOTONIC_RAW, &d, &g_tracker);
    if (rc != 0)
        return rc;
    kt_clock_sample_t s[FIRST_SAMPLES];
    for (unsigned i = 0; i < FIRST_SAMPLES; i++)
        s[i] = (kt_clock_sample_t){dev_ns(r[i].tick), r[i].before, r[i].after};
    rc = kt_clock_tracker_add(g_tracker, s, FIRST_SAMPLES);
    if (rc == 0)
        rc = kt_clock_tracker_refit(g_tracker);
    if (rc == 0)
        rc = install(kt__hc_tick(), 1);
    if (rc != 0) {
        kt_clock_tracker_destroy(g_tracker);
        g_tracker = NULL;
    }
    return rc;
}

/* Every CPU this process may run on: after migrating there, the counter must not be behind the last CPU's
 * reading, and its conversion must fall inside a clock_gettime bracket (widened by the model's bound). */
static void cross_cpu_check(kt__hc_facts_t *f)
{
    cpu_set_t orig, one;
    f->cross_cpu_checked = 1;
    f->cross_cpu_ok = 1;
    if (sched_getaffinity(0, sizeof orig, &orig) != 0)
        return;
    uint64_t last = 0;
    int last_cpu = -1;
    for (int cpu = 0; cpu < CPU_SETSIZE && f->cross_cpu_ok; cpu++) {
        if (!CPU_ISSET(cpu, &orig))
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0)
            continue;
        uint64_t t = kt__hc_tick();
        if (last_cpu >= 0 && (int64_t)(t - last) < 0) {
            snprintf(f->cross_cpu_note, sizeof f->cross_cpu_note,
                     "the counter on cpu %d reads behind cpu %d's earlier reading", cpu, last_cpu);
            f->cross_cpu_ok = 0;
            break;
        }
        double worst = 0;
        for (unsigned i = 0; i < CROSS_READS; i++) {
            uint64_t b = kt__hc_gettime(), k = kt__hc_tick(), a = kt__hc_gettime();
            uint64_t ns = kt__hc_convert(k);
            double off = ns < b ? (double)(b - ns) : ns > a ? (double)(ns - a) : 0.0;
            if (i == 0 || off < worst)
                worst = off;
            last = k;
        }
        if (worst > g_info.error_bound_ns + CROSS_TOLERANCE_NS) {
            snprintf(f->cross_cpu_note, sizeof f->cross_cpu_note,
                     "the counter on cpu %d is %.0f ns off CLOCK_MONOTONIC_RAW (bound %.0f ns)", cpu, worst,
                     g_info.error_bound_ns);
            f->cross_cpu_ok = 0;
        }
        last_cpu = cpu;
    }
    sched_setaffinity(0, sizeof orig, &orig);
}

/* fork (core.c's handlers, in the core's lock order: after the recorder's locks, before the registry's). */
void kt__hclock_fork_prepare(void) { pthread_mutex_lock(&g_lock); }
void kt__hclock_fork_release(void) { pthread_mutex_unlock(&g_lock); }

void kt__hclock_init(void)
{
    pthread_mutex_lock(&g_lock);
    if (g_info.counter[0]) {
        pthread_mutex_unlock(&g_lock);
        return;
    }
    kt__hc_facts_t f;
    gather_facts(&f);
    int req = kt__hc_request_parse(kt__env("KTIMING_CLOCK"));
    char reason[sizeof g_info.reason];
    int use = kt__hc_decide(&f, req, reason, sizeof reason);
    if (use && first_fit(!strcmp(f.clocksource, f.expected_clocksource)) != 0) {
        use = 0;
        snprintf(reason, sizeof reason, "the counter could not be calibrated against clock_gettime");
    }
    if (use) {
        atomic_store_explicit(&kt__hc.mode, KT__HC_COUNTER, memory_order_release);
        cross_cpu_check(&f);
        if (!f.cross_cpu_ok) {
            use = kt__hc_decide(&f, req, reason, sizeof reason);
            if (!use)
                atomic_store_explicit(&kt__hc.mode, KT__HC_CLOCK_GETTIME, memory_order_release);
        }
    }
    snprintf(g_info.counter, sizeof g_info.counter, "%s",
             !use ? "CLOCK_MONOTONIC_RAW" : f.is_x86 ? "tsc" : "cntvct");
    snprintf(g_info.reason, sizeof g_info.reason, "%s", reason);
    if (!use) {
        g_info.frequency_hz = NS_PER_S;
        g_info.nominal_hz = NS_PER_S;
        g_info.drift_ppm = 0;
        g_info.drift_bound_ppm = 0;
        g_info.error_bound_ns = 0;
        g_info.model_samples = 0;
        g_info.span_ms = 0;
        g_info.fits = 0;
    }
    publish();
    pthread_mutex_unlock(&g_lock);
}

int kt_host_clock_info(kt_host_clock_info_t *out)
{
    if (!out)
        return KT_EINVAL;
    kt__ensure_init();
    (void)kt__hc_now(); /* a due refresh happens first */
    pthread_mutex_lock(&g_lock);
    *out = g_info;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Public reads
 * ------------------------------------------------------------------------------------------------- */

uint64_t kt_now_ns(void) { return kt__now(); }

uint64_t kt_clock_resolution_ns(void)
{
    struct timespec ts;
    if (clock_getres(CLOCK_MONOTONIC_RAW, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static pthread_once_t g_cost_once = PTHREAD_ONCE_INIT;
static double g_cost_ns;

/* The cheapest of 16 batches of 1000 back-to-back reads: noise from a shared machine only adds time. */
static void measure_cost(void)
{
    double best = 0;
    for (int b = 0; b < 16; b++) {
        uint64_t t0 = kt__now(), t = t0;
        for (int i = 0; i < 1000; i++)
            t = kt__now();
        double per = (double)(t - t0) / 1001.0;
        if (b == 0 || per < best)
            best = per;
    }
    g_cost_ns = best;
}

double kt_clock_read_cost_ns(void)
{
    pthread_once(&g_cost_once, measure_cost);
    return g_cost_ns;
}
