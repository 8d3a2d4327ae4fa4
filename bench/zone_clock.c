/* zone_clock.c — what a CPU zone costs against the bare clock reads it is made of, in one run.
 *
 * Interleaved, median of 7 repetitions of the cheapest 1024-iteration chunk of each loop (a shared machine
 * preempts long loops; noise only adds time), at 1 and 2 threads (each thread runs the same loops at once; the
 * slower thread's figure is kept): a bare `rdtsc` pair (no fence: the cheapest possible pair), a bare
 * clock_gettime(CLOCK_MONOTONIC_RAW) pair, a ktiming zone that only aggregates (its thread's span log is full,
 * so the span is counted as dropped instead of written), a zone that keeps its span, and a runtime-disabled
 * zone. Also the two conversion designs: a fenced counter pair alone (what deferring the conversion to snapshot
 * time would leave on the hot path) and the same pair with the multiply-shift of src/core/hclock.h.
 * The host counter is forced to the TSC (KTIMING_CLOCK=tsc unless set): the figures are those of the counter
 * path; the line "host timestamps" says which counter auto would pick on this machine and why.
 * Before the last line (issue 43):
 *   zone_clock_auto: clock=<tsc|monotonic_raw> zone_vs_rdtsc_pair=<d>
 *     d = aggregate-only zone / bare rdtsc pair (1 thread) with the clock `auto` picks: measured in a child
 *     process started without KTIMING_CLOCK (the clock is chosen once per process);
 *   zone_clock_names: names=1000 zone_vs_one_name=<r>
 *     r = aggregate-only zone cycling through 1,000 kernel names / the same loop on one name (forced counter,
 *     1 thread), with every name at ~20,000 records (its reservoir replacing 1 record in 20 or fewer); the
 *     same at ~2,000 records a name is printed on the line before.
 * Last line: zone_clock: zone_vs_rdtsc_pair=<a> zone_vs_clock_pair=<b> span_zone_vs_rdtsc_pair=<c>
 *   a = aggregate-only zone / bare rdtsc pair, b = aggregate-only zone / clock_gettime pair,
 *   c = span-keeping zone / bare rdtsc pair (1 thread).
 */
#include <ktiming.h>
#include <ktiming/clock_model.h>

#include "core/hclock.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 7
#define N_PAIR 400000u
#define N_ZONE 400000u
#define N_OFF 4000000u
#define BATCH 8192u

static uint64_t now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
static inline uint64_t bare_tick(void) { return __rdtsc(); }
#else
static inline uint64_t bare_tick(void) { return kt__hc_tick(); }
#endif

/* ---------------------------------------------------------------------------------------------------
 * Loops: ns per iteration
 * ------------------------------------------------------------------------------------------------- */

/* Each loop is timed in chunks of CHUNK iterations and reports the cheapest chunk: on a shared machine a chunk
 * (~50-200 us) is seldom preempted, and noise only ever adds time. */
#define CHUNK 1024u

/* Keep the cheaper of *best and this chunk's ns per iteration. */
static void chunk_done(double *best, uint64_t t0, uint64_t t1, uint32_t n)
{
    double v = (double)(t1 - t0) / (double)n;
    if (v < *best)
        *best = v;
}

static double rdtsc_pair(void)
{
    uint64_t sink = 0;
    double best = 1e30;
    for (uint32_t c = 0; c < N_PAIR / CHUNK; c++) {
        uint64_t t0 = now();
        for (uint32_t i = 0; i < CHUNK; i++) {
            uint64_t a = bare_tick(), b = bare_tick();
            sink += b - a;
        }
        chunk_done(&best, t0, now(), CHUNK);
    }
    __asm__ volatile("" : : "r"(sink));
    return best;
}

static double clock_pair(void)
{
    uint64_t sink = 0;
    double best = 1e30;
    for (uint32_t c = 0; c < N_PAIR / CHUNK; c++) {
        uint64_t t0 = now();
        for (uint32_t i = 0; i < CHUNK; i++) {
            uint64_t a = now(), b = now();
            sink += b - a;
        }
        chunk_done(&best, t0, now(), CHUNK);
    }
    __asm__ volatile("" : : "r"(sink));
    return best;
}

/* The two conversion designs, with a slope and anchor like the library's. */
static double fenced_pair(int convert)
{
    uint64_t sink = 0, base = kt__hc_tick(), mult = 1ull << (KT__HC_SHIFT - 1);
    double best = 1e30;
    for (uint32_t c = 0; c < N_PAIR / CHUNK; c++) {
        uint64_t t0 = now();
        for (uint32_t i = 0; i < CHUNK; i++) {
            uint64_t a = kt__hc_tick(), b = kt__hc_tick();
            if (convert) {
                __asm__ volatile("" : "+r"(mult));
                a = kt__hc_seg_ns(base, 1000, mult, a);
                b = kt__hc_seg_ns(base, 1000, mult, b);
            }
            sink += b - a;
        }
        chunk_done(&best, t0, now(), CHUNK);
    }
    __asm__ volatile("" : : "r"(sink));
    return best;
}

/* Zones that keep their span: batches after a reset, so the log never sits full. Only thread 0 resets. */
static double zones_span(int resetter, pthread_barrier_t *sync)
{
    double best = 1e30;
    for (uint32_t done = 0; done < N_ZONE; done += BATCH) {
        if (sync)
            pthread_barrier_wait(sync);
        if (resetter)
            kt_reset();
        if (sync)
            pthread_barrier_wait(sync);
        for (uint32_t c = 0; c < BATCH / CHUNK; c++) {
            uint64_t t0 = now();
            for (uint32_t i = 0; i < CHUNK; i++) {
                KT_CPU_BEGIN(z, "zone_span");
                __asm__ volatile("" ::: "memory");
                KT_CPU_END(z);
            }
            chunk_done(&best, t0, now(), CHUNK);
        }
    }
    return best;
}

/* Zones that only aggregate: the log is filled first, then every zone's span is counted as dropped. */
static double zones_aggregate(int resetter, pthread_barrier_t *sync)
{
    if (sync)
        pthread_barrier_wait(sync);
    if (resetter)
        kt_reset();
    if (sync)
        pthread_barrier_wait(sync);
    for (uint32_t i = 0; i < KT_SPANS_DEFAULT; i++) {
        KT_CPU_BEGIN(f, "zone_fill");
        KT_CPU_END(f);
    }
    double best = 1e30;
    for (uint32_t c = 0; c < N_ZONE / CHUNK; c++) {
        uint64_t t0 = now();
        for (uint32_t i = 0; i < CHUNK; i++) {
            KT_CPU_BEGIN(z, "zone_aggregate");
            __asm__ volatile("" ::: "memory");
            KT_CPU_END(z);
        }
        chunk_done(&best, t0, now(), CHUNK);
    }
    return best;
}

static double zones_disabled(void)
{
    double best = 1e30;
    for (uint32_t c = 0; c < N_OFF / (16 * CHUNK); c++) {
        uint64_t t0 = now();
        for (uint32_t i = 0; i < 16 * CHUNK; i++) {
            KT_CPU_BEGIN(z, "zone_off");
            __asm__ volatile("" ::: "memory");
            KT_CPU_END(z);
        }
        chunk_done(&best, t0, now(), 16 * CHUNK);
    }
    return best;
}

static int cmp_double_fwd(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Aggregate-only zones cycling through the first `n` of `sites`/`names` (the span log is full: see
 * zones_aggregate). The function API, as a loop over many kernels would use it. */
#define NAMES 1000u
static kt_kernel_id_t g_sites[NAMES];
static char g_names[NAMES][24];

static double zones_names(uint32_t n)
{
    double best = 1e30;
    uint32_t j = 0;
    for (uint32_t c = 0; c < N_ZONE / CHUNK; c++) {
        uint64_t t0 = now();
        for (uint32_t i = 0; i < CHUNK; i++) {
            kt_zone_t z = kt_zone_begin(&g_sites[j], g_names[j]);
            __asm__ volatile("" ::: "memory");
            kt_zone_end(&z);
            if (++j == n)
                j = 0;
        }
        chunk_done(&best, t0, now(), CHUNK);
    }
    return best;
}

/* Medians of REPS interleaved runs of the one-name and the 1,000-name loop: *one, *many. */
static void names_pair(double *one_med, double *many_med)
{
    double one[REPS], many[REPS];
    for (int rep = 0; rep < REPS; rep++) {
        one[rep] = zones_names(1);
        many[rep] = zones_names(NAMES);
    }
    qsort(one, REPS, sizeof(double), cmp_double_fwd);
    qsort(many, REPS, sizeof(double), cmp_double_fwd);
    *one_med = one[REPS / 2];
    *many_med = many[REPS / 2];
}

/* Bring every name to `records` records. */
static void names_warm(uint32_t from, uint32_t records)
{
    for (uint64_t i = (uint64_t)from * NAMES; i < (uint64_t)records * NAMES; i++) {
        kt_zone_t z = kt_zone_begin(&g_sites[i % NAMES], g_names[i % NAMES]);
        kt_zone_end(&z);
    }
}

/* zone_clock_names: r = 1,000 names / one name at 20,000 records a name. A kernel's reservoir replaces a sample
 * with probability capacity / count (1,024 / count by default): at 2,000 records a name that is every other
 * record, a random write into 8 KB per kernel plus Algorithm L's logarithms, a cost of the count and not of the
 * number of kernels; it is printed too. */
static double names_ratio(void)
{
    kt_reset();
    for (uint32_t i = 0; i < NAMES; i++)
        snprintf(g_names[i], sizeof g_names[i], "zone_name_%04u", i);
    for (uint32_t i = 0; i < KT_SPANS_DEFAULT; i++) { /* fill the span log: aggregate only from here */
        KT_CPU_BEGIN(f, "zone_fill");
        KT_CPU_END(f);
    }
    double one, many;
    names_warm(0, 2000);
    names_pair(&one, &many);
    printf("zone_clock: aggregate-only zone over %u names at ~2,000 records a name %.2f ns, over one name %.2f ns "
           "(ratio %.2f: reservoir replacements)\n", NAMES, many, one, many / one);
    names_warm(2000 + 7 * N_ZONE / NAMES, 20000);
    names_pair(&one, &many);
    printf("zone_clock: aggregate-only zone over %u names at ~20,000 records a name %.2f ns, over one name %.2f ns\n",
           NAMES, many, one);
    return many / one;
}

/* ---------------------------------------------------------------------------------------------------
 * One round of every figure on `threads` threads
 * ------------------------------------------------------------------------------------------------- */

enum { F_RDTSC, F_CLOCK, F_AGG, F_SPAN, F_OFF, F_FENCED, F_CONVERT, F_COUNT };
static const char *const kNames[F_COUNT] = {"bare rdtsc pair", "clock_gettime pair", "zone (aggregate only)",
                                            "zone keeping its span", "runtime-disabled zone",
                                            "fenced counter pair", "fenced pair + multiply-shift"};

/* One bench thread. */
typedef struct arg_t {
    int index;                /* 0 resets and toggles recording */
    pthread_barrier_t *sync;  /* NULL with one thread */
    double f[F_COUNT];        /* results, ns */
} arg_t;

static void *round_thread(void *p)
{
    arg_t *a = p;
    a->f[F_RDTSC] = rdtsc_pair();
    a->f[F_CLOCK] = clock_pair();
    a->f[F_FENCED] = fenced_pair(0);
    a->f[F_CONVERT] = fenced_pair(1);
    a->f[F_AGG] = zones_aggregate(a->index == 0, a->sync);
    a->f[F_SPAN] = zones_span(a->index == 0, a->sync);
    if (a->sync)
        pthread_barrier_wait(a->sync);
    if (a->index == 0)
        kt_disable();
    if (a->sync)
        pthread_barrier_wait(a->sync);
    a->f[F_OFF] = zones_disabled();
    if (a->sync)
        pthread_barrier_wait(a->sync);
    if (a->index == 0)
        kt_enable();
    return NULL;
}

static void run_round(int threads, double out[F_COUNT])
{
    pthread_t t[2];
    arg_t a[2];
    pthread_barrier_t sync;
    if (threads > 1)
        pthread_barrier_init(&sync, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].index = i;
        a[i].sync = threads > 1 ? &sync : NULL;
        pthread_create(&t[i], NULL, round_thread, &a[i]);
    }
    for (int k = 0; k < F_COUNT; k++)
        out[k] = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        for (int k = 0; k < F_COUNT; k++)
            if (a[i].f[k] > out[k])
                out[k] = a[i].f[k];
    }
    if (threads > 1)
        pthread_barrier_destroy(&sync);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The child: the clock auto picks, one thread, aggregate-only zone against the bare rdtsc pair. */
static int auto_child(void)
{
    kt_init(NULL);
    kt_host_clock_info_t hc;
    kt_host_clock_info(&hc);
    double agg[REPS], pair[REPS];
    for (int rep = 0; rep < REPS; rep++) {
        pair[rep] = rdtsc_pair();
        agg[rep] = zones_aggregate(1, NULL);
    }
    qsort(agg, REPS, sizeof(double), cmp_double_fwd);
    qsort(pair, REPS, sizeof(double), cmp_double_fwd);
    const char *clock = !strcmp(hc.counter, "CLOCK_MONOTONIC_RAW") ? "monotonic_raw" : hc.counter;
    printf("zone_clock: auto picks %s (%s): zone %.2f ns, bare rdtsc pair %.2f ns\n", clock, hc.reason,
           agg[REPS / 2], pair[REPS / 2]);
    printf("zone_clock_auto: clock=%s zone_vs_rdtsc_pair=%.2f\n", clock, agg[REPS / 2] / pair[REPS / 2]);
    return 0;
}

/* Run this program again as auto_child, without KTIMING_CLOCK; its lines go to our stdout. */
static int run_auto_child(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        unsetenv("KTIMING_CLOCK");
        setenv("ZONE_CLOCK_AUTO_CHILD", "1", 1);
        execl("/proc/self/exe", "zone_clock", (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return 0;
}

int main(void)
{
    if (getenv("ZONE_CLOCK_AUTO_CHILD"))
        return auto_child();
    setenv("KTIMING_CLOCK", "tsc", 0);
    kt_init(NULL);
    kt_host_clock_info_t hc;
    kt_host_clock_info(&hc);
    printf("zone_clock: host timestamps from %s (%s), %.3f MHz, bound %.0f ns\n", hc.counter, hc.reason,
           (double)hc.frequency_hz / 1e6, hc.error_bound_ns);
    double v[2][F_COUNT][REPS], med[2][F_COUNT];
    for (int rep = 0; rep < REPS; rep++)
        for (int th = 0; th < 2; th++) {
            double r[F_COUNT];
            run_round(th + 1, r);
            for (int k = 0; k < F_COUNT; k++)
                v[th][k][rep] = r[k];
        }
    for (int th = 0; th < 2; th++)
        for (int k = 0; k < F_COUNT; k++) {
            qsort(v[th][k], REPS, sizeof(double), cmp_double);
            med[th][k] = v[th][k][REPS / 2];
        }
    printf("zone_clock: medians of %d interleaved runs, ns per pair or zone (1 thread | 2 threads)\n", REPS);
    for (int k = 0; k < F_COUNT; k++)
        printf("zone_clock:   %-30s %8.2f | %8.2f\n", kNames[k], med[0][k], med[1][k]);
    printf("zone_clock: conversion on the hot path costs %.2f ns per zone over a fenced pair (deferring it to "
           "snapshot time would save at most that)\n", med[0][F_CONVERT] - med[0][F_FENCED]);
    printf("zone_clock: 2 threads: zone_vs_rdtsc_pair=%.2f zone_vs_clock_pair=%.2f span_zone_vs_rdtsc_pair=%.2f\n",
           med[1][F_AGG] / med[1][F_RDTSC], med[1][F_AGG] / med[1][F_CLOCK], med[1][F_SPAN] / med[1][F_RDTSC]);
    double names = names_ratio();
    int child = run_auto_child();
    printf("zone_clock_names: names=%u zone_vs_one_name=%.2f\n", NAMES, names);
    printf("zone_clock: zone_vs_rdtsc_pair=%.2f zone_vs_clock_pair=%.2f span_zone_vs_rdtsc_pair=%.2f\n",
           med[0][F_AGG] / med[0][F_RDTSC], med[0][F_AGG] / med[0][F_CLOCK], med[0][F_SPAN] / med[0][F_RDTSC]);
    if (child != 0) {
        fprintf(stderr, "zone_clock: the auto-clock child failed\n");
        return 1;
    }
    return 0;
}
