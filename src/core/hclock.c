/* hclock.c — the host timeline: CLOCK_MONOTONIC_RAW ns from the cheapest trustworthy counter (TSC, CNTVCT_EL0),
 * calibrated against clock_gettime with a stated bound; the fallback, the resolution and the cost of a read. */
#include "core/hclock_decide.h"
#include "core/hclock_model.h"
#include "core/internal.h"
#include "core/service.h"

#include <ktiming/clock_model.h>

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <fcntl.h>
#include <unistd.h>

#define NS_PER_S 1000000000ull
#define CROSS_READS 4u                /* bracketed reads per CPU in the start-up check */
#define CROSS_TOLERANCE_NS 1000.0     /* allowed beyond the bracket and the model's bound */

/* What kt_host_clock_info reports and the host device record shows; guarded by g_lock. The model itself
 * (hclock_model.c) has its own lock, taken first where both are. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static kt_host_clock_info_t g_info;
static char g_reason[sizeof g_info.reason]; /* why the counter was chosen at start */
static int g_source_fd = -1;               /* current_clocksource, kept open for the refresh's re-read */
static char g_source[32];                  /* its last contents */
static char g_expected[32];                /* the counter's own clocksource name */

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
 * What the model tells (hclock_model.c calls these)
 * ------------------------------------------------------------------------------------------------- */

/* Re-read the clocksource with one pread of the file kept open (a few us; at most every 100 ms, or at the
 * refresh of a kernel-clocksource counter, at most once a second after the first). */
int kt__hcm_source_changed(int *kernel_counter)
{
    char buf[32];
    if (g_source_fd < 0)
        return 0;
    ssize_t n = pread(g_source_fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    buf[strcspn(buf, "\n")] = 0;
    if (!strcmp(buf, g_source))
        return 0;
    snprintf(g_source, sizeof g_source, "%s", buf);
    *kernel_counter = g_expected[0] && !strcmp(g_source, g_expected);
    return 1;
}

static void info_from(const kt__hcm_stats_t *st)
{
    g_info.frequency_hz = (uint64_t)(1e9 / st->ns_per_tick + 0.5);
    g_info.nominal_hz = (uint64_t)(1e9 / st->nominal_ns_per_tick + 0.5);
    g_info.drift_ppm = (st->nominal_ns_per_tick / st->ns_per_tick - 1.0) * 1e6;
    g_info.drift_bound_ppm = st->rate_bound_ppm;
    g_info.error_bound_ns = st->bound_ns;
    g_info.model_samples = st->samples;
    g_info.span_ms = st->span_ms;
    g_info.fits = st->refreshes;
    if (st->fell_back) {
        g_info.frequency_hz = g_info.nominal_hz = NS_PER_S;
        g_info.drift_ppm = g_info.drift_bound_ppm = g_info.error_bound_ns = 0;
        snprintf(g_info.counter, sizeof g_info.counter, "CLOCK_MONOTONIC_RAW");
        snprintf(g_info.reason, sizeof g_info.reason,
                 "the counter stepped against CLOCK_MONOTONIC_RAW %llu times (the guard fired): clock_gettime since",
                 (unsigned long long)st->steps);
    } else if (st->source_changes) {
        snprintf(g_info.reason, sizeof g_info.reason, "%.120s; clocksource changed to %s at run time", g_reason,
                 g_source);
    }
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
        host.resolution_ns = g_info.frequency_hz >= NS_PER_S ? 1 : NS_PER_S / (g_info.frequency_hz | 1);
        host.error_bound_ns = (uint64_t)ceil(g_info.error_bound_ns);
        host.drift_ppm = g_info.drift_ppm;
        host.model_samples = g_info.model_samples;
    } else {
        host.frequency_hz = NS_PER_S;
        host.resolution_ns = kt_clock_resolution_ns();
    }
    kt_device_publish(&host);
}

void kt__hcm_published(const kt__hcm_stats_t *st)
{
    pthread_mutex_lock(&g_lock);
    if (g_info.counter[0]) { /* not during kt__hclock_init: it publishes itself */
        info_from(st);
        publish();
    }
    pthread_mutex_unlock(&g_lock);
}

/* ---------------------------------------------------------------------------------------------------
 * Start-up: the decision, the first window, the per-CPU check
 * ------------------------------------------------------------------------------------------------- */

/* Every CPU this process may run on: after migrating there, the counter must not be behind the last CPU's
 * reading, and its conversion must fall inside a clock_gettime bracket (widened by the model's bound). */
static void cross_cpu_check(kt__hc_facts_t *f, double bound)
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
        if (worst > bound + CROSS_TOLERANCE_NS) {
            snprintf(f->cross_cpu_note, sizeof f->cross_cpu_note,
                     "the counter on cpu %d is %.0f ns off CLOCK_MONOTONIC_RAW (bound %.0f ns)", cpu, worst, bound);
            f->cross_cpu_ok = 0;
        }
        last_cpu = cpu;
    }
    sched_setaffinity(0, sizeof orig, &orig);
}

/* fork (core.c's handlers, in the core's lock order: after the recorder's locks, before the registry's). */
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER; /* not g_lock: the model publishes through it */
static int g_inited;

/* Lock order: g_init_lock, the model's lock, g_lock. */
void kt__hclock_fork_prepare(void)
{
    pthread_mutex_lock(&g_init_lock);
    kt__hcm_fork_prepare();
    pthread_mutex_lock(&g_lock);
}

void kt__hclock_fork_release(void)
{
    pthread_mutex_unlock(&g_lock);
    kt__hcm_fork_release();
    pthread_mutex_unlock(&g_init_lock);
}

void kt__hclock_init(void)
{
    pthread_mutex_lock(&g_init_lock);
    if (g_inited) {
        pthread_mutex_unlock(&g_init_lock);
        return;
    }
    kt__hc_facts_t f;
    gather_facts(&f);
    int req = kt__hc_request_parse(kt__env(KT_ENV_NAME(CLOCK)));
    char reason[sizeof g_info.reason];
    int use = kt__hc_decide(&f, req, reason, sizeof reason);
    if (use) {
        snprintf(g_source, sizeof g_source, "%s", f.clocksource);
        snprintf(g_expected, sizeof g_expected, "%s", f.expected_clocksource);
        g_source_fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
        if (kt__hcm_start(kt__hc_kernel_counter(&f), req == KT__HC_REQ_AUTO || req == KT__HC_REQ_INVALID) != 0) {
            use = 0;
            snprintf(reason, sizeof reason, "the counter could not be calibrated against clock_gettime");
        }
    }
    kt__hcm_stats_t st;
    memset(&st, 0, sizeof st);
    if (use) {
        kt__hcm_stats(&st);
        cross_cpu_check(&f, st.bound_ns);
        if (!f.cross_cpu_ok) {
            use = kt__hc_decide(&f, req, reason, sizeof reason);
            if (!use)
                atomic_store_explicit(&kt__hc.mode, KT__HC_CLOCK_GETTIME, memory_order_release);
        }
    }
    if (use)
        kt__hcm_stats(&st); /* refreshes may have run meanwhile; read before g_lock (lock order: model, g_lock) */
    pthread_mutex_lock(&g_lock);
    snprintf(g_info.counter, sizeof g_info.counter, "%s",
             !use ? "CLOCK_MONOTONIC_RAW" : f.is_x86 ? "tsc" : "cntvct");
    snprintf(g_info.reason, sizeof g_info.reason, "%s", reason);
    snprintf(g_reason, sizeof g_reason, "%s", reason);
    if (use) {
        info_from(&st);
    } else {
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
    g_inited = 1;
    pthread_mutex_unlock(&g_init_lock);
}

int kt_host_clock_info(kt_host_clock_info_t *out)
{
    if (!out)
        return KT_EINVAL;
    kt__ensure_init();
    (void)kt__hc_now(); /* a due refresh happens first */
    kt__hcm_stats_t st;
    kt__hcm_stats(&st);
    pthread_mutex_lock(&g_lock);
    if (st.refreshes && strcmp(g_info.counter, "CLOCK_MONOTONIC_RAW") != 0)
        info_from(&st); /* the bound in force now, not the largest published */
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
