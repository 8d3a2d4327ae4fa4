/* record_overhead.c — what recording costs, against bare clock reads and seed 000's design, in one run.
 *
 * Measures: two bare CLOCK_MONOTONIC_RAW reads; an enabled CPU zone (begin, end, aggregate, span); the same
 * zone runtime-disabled; kt_record() alone with precomputed durations; and seed 000's record() (one global
 * pthread mutex around a string-keyed hash map), built in here and fed the same durations; kt_record and the
 * seed at 1 and 2 threads. Each figure is the median of 7 interleaved repetitions.
 * Last line: record_overhead: ratio_vs_clock=<x> ratio_seed_design=<y> disabled_ns=<z>
 *   x = enabled zone / its two clock reads (1 thread), y = seed record / kt_record (2 threads each recording),
 *   z = runtime-disabled zone, ns per zone.
 */
#include <ktiming.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 7
#define NDUR 1024u

static uint64_t g_dur[NDUR];

static uint64_t now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------------------
 * Seed 000's record(): a global mutex around a string-keyed hash map. The seed's map is a Rust
 * HashMap<&'static str, _>, whose default hasher is SipHash-1-3 over the bytes plus a 0xff terminator, run
 * inside the lock (guard.entry(name)); the reference does the same. An FNV-1a variant (a cheaper hash than the
 * seed's) is measured too and printed, so the ratio can be read against either.
 * ------------------------------------------------------------------------------------------------- */

/* One kernel's stats in the seed design. */
typedef struct seed_stats_t {
    const char *name;          /* key (the caller's static string, as &'static str) */
    kt_backend_t backend;      /* backend of the first record */
    uint64_t dispatch_count;   /* records */
    uint64_t total_ns;         /* sum */
    uint64_t min_ns;           /* smallest */
    uint64_t max_ns;           /* largest */
    uint64_t last_ns;          /* most recent */
    struct seed_stats_t *next; /* bucket chain */
} seed_stats_t;

#define SEED_BUCKETS 256u
static pthread_mutex_t g_seed_lock = PTHREAD_MUTEX_INITIALIZER;
static seed_stats_t *g_seed_map[SEED_BUCKETS];
static int g_seed_fnv; /* 1: FNV-1a instead of SipHash-1-3 */
static const uint64_t g_sip_k0 = 0x0706050403020100ull, g_sip_k1 = 0x0f0e0d0c0b0a0908ull;

static inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

#define SIPROUND                                                                                           \
    do {                                                                                                   \
        v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32);                                          \
        v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;                                                             \
        v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;                                                             \
        v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32);                                          \
    } while (0)

/* SipHash-1-3 of the string's bytes followed by 0xff, as Rust's `impl Hash for str` feeds it. */
static uint64_t sip13_str(const char *s)
{
    uint64_t v0 = g_sip_k0 ^ 0x736f6d6570736575ull, v1 = g_sip_k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = g_sip_k0 ^ 0x6c7967656e657261ull, v3 = g_sip_k1 ^ 0x7465646279746573ull;
    size_t n = strlen(s), len = n + 1, i = 0;
    uint64_t m = 0;
    int fill = 0;
    for (; i < len; i++) {
        uint8_t byte = i < n ? (uint8_t)s[i] : 0xff;
        m |= (uint64_t)byte << (8 * fill);
        if (++fill == 8) {
            v3 ^= m;
            SIPROUND;
            v0 ^= m;
            m = 0;
            fill = 0;
        }
    }
    m |= (uint64_t)(len & 0xff) << 56;
    v3 ^= m;
    SIPROUND;
    v0 ^= m;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

static uint64_t fnv_str(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static __thread uint64_t tl_seed_waits; /* calls that found the seed's lock held (how much the run contended) */

static void seed_record(const char *name, kt_backend_t backend, uint64_t elapsed_ns)
{
    if (pthread_mutex_trylock(&g_seed_lock) != 0) {
        tl_seed_waits++;
        pthread_mutex_lock(&g_seed_lock);
    }
    uint64_t h = g_seed_fnv ? fnv_str(name) : sip13_str(name);
    seed_stats_t **b = &g_seed_map[h % SEED_BUCKETS], *e;
    for (e = *b; e && strcmp(e->name, name) != 0; e = e->next)
        ;
    if (!e && (e = calloc(1, sizeof *e)) != NULL) {
        e->name = name;
        e->backend = backend;
        e->min_ns = UINT64_MAX;
        e->next = *b;
        *b = e;
    }
    if (e) {
        e->dispatch_count++;
        e->total_ns += elapsed_ns;
        if (elapsed_ns < e->min_ns)
            e->min_ns = elapsed_ns;
        if (elapsed_ns > e->max_ns)
            e->max_ns = elapsed_ns;
        e->last_ns = elapsed_ns;
    }
    pthread_mutex_unlock(&g_seed_lock);
}

/* ---------------------------------------------------------------------------------------------------
 * Single-thread loops (ns per iteration)
 * ------------------------------------------------------------------------------------------------- */

static double clock_pair(uint64_t n)
{
    uint64_t sink = 0, t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t a = now(), b = now();
        sink += b - a;
    }
    uint64_t t1 = now();
    __asm__ volatile("" : : "r"(sink));
    return (double)(t1 - t0) / (double)n;
}

/* Zones in batches after a reset, so every zone also writes its span (the log never sits full). */
static double zones(uint64_t n)
{
    const uint64_t batch = 8192;
    uint64_t t = 0;
    for (uint64_t done = 0; done < n; done += batch) {
        kt_reset();
        uint64_t t0 = now();
        for (uint64_t i = 0; i < batch; i++) {
            KT_CPU_BEGIN(z, "bench_zone");
            __asm__ volatile("" ::: "memory");
            KT_CPU_END(z);
        }
        t += now() - t0;
    }
    return (double)t / (double)n;
}

static double zones_disabled(uint64_t n)
{
    uint64_t t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        KT_CPU_BEGIN(z, "bench_zone_off");
        __asm__ volatile("" ::: "memory");
        KT_CPU_END(z);
    }
    return (double)(now() - t0) / (double)n;
}

/* ---------------------------------------------------------------------------------------------------
 * Threaded record loops: ns per call on the slowest thread, all threads recording at once
 * ------------------------------------------------------------------------------------------------- */

/* One recording thread. */
typedef struct rec_arg_t {
    int seed;                  /* 1: seed_record, 0: kt_record */
    uint64_t n;                /* calls */
    pthread_barrier_t *go;     /* common start */
    double ns;                 /* result: ns per call */
    uint64_t waits;            /* result: seed calls that found the lock held */
} rec_arg_t;

static void *rec_thread(void *p)
{
    rec_arg_t *a = p;
    pthread_barrier_wait(a->go);
    uint64_t t0 = now();
    if (a->seed)
        for (uint64_t i = 0; i < a->n; i++)
            seed_record("bench_record", KT_BACKEND_CPU, g_dur[i & (NDUR - 1)]);
    else
        for (uint64_t i = 0; i < a->n; i++)
            kt_record("bench_record", KT_BACKEND_CPU, g_dur[i & (NDUR - 1)]);
    a->ns = (double)(now() - t0) / (double)a->n;
    a->waits = tl_seed_waits;
    tl_seed_waits = 0;
    return NULL;
}

static double g_contended; /* share of the last seed run's calls that found the lock held */

static double record_threads(int seed, int threads, uint64_t n)
{
    pthread_t t[2];
    rec_arg_t a[2];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        a[i].seed = seed;
        a[i].n = n;
        a[i].go = &go;
        pthread_create(&t[i], NULL, rec_thread, &a[i]);
    }
    double worst = 0;
    uint64_t waits = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        if (a[i].ns > worst)
            worst = a[i].ns;
        waits += a[i].waits;
    }
    g_contended = (double)waits / (double)(n * (uint64_t)threads);
    pthread_barrier_destroy(&go);
    return worst;
}

/* ---------------------------------------------------------------------------------------------------
 * Driver
 * ------------------------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v)
{
    qsort(v, REPS, sizeof *v, cmp_double);
    return v[REPS / 2];
}

int main(void)
{
    uint64_t s = 42;
    for (uint32_t i = 0; i < NDUR; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        g_dur[i] = 1000 + (s >> 33) % 1000000;
    }
    kt_init(NULL);
    /* Interleaved repetitions, so a burst of load from elsewhere hits every figure alike; medians reported. */
    double c2[REPS], zon[REPS], zoff[REPS], r1[REPS], r2[REPS], s1[REPS], s2[REPS], f2[REPS], cont[REPS];
    for (int rep = 0; rep < REPS; rep++) {
        c2[rep] = clock_pair(400000);
        zon[rep] = zones(400000);
        kt_disable();
        zoff[rep] = zones_disabled(20000000);
        kt_enable();
        r1[rep] = record_threads(0, 1, 4000000);
        r2[rep] = record_threads(0, 2, 4000000);
        g_seed_fnv = 0;
        s1[rep] = record_threads(1, 1, 2000000);
        s2[rep] = record_threads(1, 2, 1000000);
        cont[rep] = g_contended;
        g_seed_fnv = 1;
        f2[rep] = record_threads(1, 2, 1000000);
    }
    kt_reset();
    double mc2 = median(c2), mzon = median(zon), mzoff = median(zoff), mr1 = median(r1), mr2 = median(r2);
    double ms1 = median(s1), ms2 = median(s2), mf2 = median(f2);
    printf("record_overhead: medians of %d runs\n", REPS);
    printf("record_overhead: two clock reads %.2f ns (kt_clock_read_cost_ns %.2f, resolution %llu ns)\n", mc2,
           kt_clock_read_cost_ns(), (unsigned long long)kt_clock_resolution_ns());
    printf("record_overhead: enabled zone %.2f ns, runtime-disabled zone %.3f ns\n", mzon, mzoff);
    printf("record_overhead: kt_record %.2f ns (1 thread) %.2f ns (2 threads)\n", mr1, mr2);
    printf("record_overhead: seed record (SipHash-1-3) %.2f ns (1 thread) %.2f ns (2 threads, lock found held "
           "on %.0f %% of calls: low means the two threads seldom ran at once)\n", ms1, ms2, 100 * median(cont));
    printf("record_overhead: seed record with FNV-1a instead: %.2f ns (2 threads), ratio %.1f\n", mf2, mf2 / mr2);
    printf("record_overhead: ratio_vs_clock=%.2f ratio_seed_design=%.1f disabled_ns=%.3f\n", mzon / mc2, ms2 / mr2,
           mzoff);
    return 0;
}
