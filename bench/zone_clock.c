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
 * Last line: zone_clock: zone_vs_rdtsc_pair=<a> zone_vs_clock_pair=<b> span_zone_vs_rdtsc_pair=<c>
 *   a = aggregate-only zone / bare rdtsc pair, b = aggregate-only zone / clock_gettime pair,
 *   c = span-keeping zone / bare rdtsc pair (1 thread).
 */
#include <ktiming.h>
#include <ktiming/clock.h>

#include "core/hclock.h"

#include <pthread.h>
#include <stdio.h>
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

int main(void)
{
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
    printf("zone_clock: zone_vs_rdtsc_pair=%.2f zone_vs_clock_pair=%.2f span_zone_vs_rdtsc_pair=%.2f\n",
           med[0][F_AGG] / med[0][F_RDTSC], med[0][F_AGG] / med[0][F_CLOCK], med[0][F_SPAN] / med[0][F_RDTSC]);
    return 0;
}
