/* hclock.h — internal: the host clock's hot path: read the cheapest trustworthy counter, convert it to
 * CLOCK_MONOTONIC_RAW ns with a multiply-shift fitted by hclock.c (docs/host-clock.md). */
#ifndef KT_CORE_HCLOCK_H
#define KT_CORE_HCLOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#if defined(KT_HCLOCK_DOUBLES)
/* Tests: the counter and clock_gettime are the test's doubles (tests/core/test_host_clock_model.c), and the
 * model's symbols are renamed so they never meet the library's. */
#define kt__hc kt__hc_dbl
#define kt__hclock_refresh kt__hclock_dbl_refresh
uint64_t kt__hc_double_tick(void);
uint64_t kt__hc_double_gettime(void);
#define KT__HC_HAVE_COUNTER 1
#elif defined(__x86_64__)
#include <x86intrin.h>
#define KT__HC_HAVE_COUNTER 1
#elif defined(__aarch64__)
#define KT__HC_HAVE_COUNTER 1
#else
#define KT__HC_HAVE_COUNTER 0
#endif

/* Fixed-point fraction bits of the conversion slope: ns per tick * 2^40 needs under 40 bits for counters above
 * 1 MHz... below 1 GHz per ns, and a 63-bit tick distance times it stays inside a signed 128-bit product. */
#define KT__HC_SHIFT 40

enum { KT__HC_CLOCK_GETTIME = 0, KT__HC_COUNTER = 1 };

/* The conversion in force: ns = ns0 + (tick - tick0) * mult / 2^KT__HC_SHIFT: the fitted model's own piece, or,
 * when it lies below what the old piece may already have returned, a slew piece from there onto it (timestamps
 * never step back). Written only by hclock_model.c under its lock, read lock-free through the seqlock. */
typedef struct kt__hclock_t {
    _Atomic uint32_t mode;   /* KT__HC_CLOCK_GETTIME until the counter is trusted and calibrated */
    _Atomic uint32_t seq;    /* seqlock: odd while the piece is rewritten */
    _Atomic uint64_t due;    /* counter value at which hclock.c is called before converting (refresh, slew end) */
    _Atomic uint64_t tick0;  /* anchor tick */
    _Atomic uint64_t ns0;    /* CLOCK_MONOTONIC_RAW ns at the anchor */
    _Atomic uint64_t mult;   /* ns per tick, fixed point */
    _Atomic uint64_t bound_ns; /* the piece's bound on |converted - CLOCK_MONOTONIC_RAW|, rounded up (device spans) */
} kt__hclock_t;

extern kt__hclock_t kt__hc;

/* Called by the first read at or after `due` (hclock_model.c): refreshes the model; a thread that finds another
 * at it waits for that refresh, so no tick past `due` is converted with a stale piece. */
void kt__hclock_refresh(uint64_t tick);

/* Counter reads, two orderings (docs/host-clock.md measures both).
 *
 * kt__hc_tick: ordered. x86-64: `rdtscp` waits until every earlier instruction has executed, and the `lfence`
 * after keeps later ones from starting before the read. aarch64: `isb` then CNTVCT_EL0. Used wherever the read
 * must sit between two other reads: calibration brackets (between two clock_gettime calls, whose vDSO read is
 * itself ordered), kt_now_ns() (backends bracket driver calls with it), kt_cpu_dispatch_2d, the timer.
 *
 * kt__hc_tick_fast: unordered. x86-64: plain `rdtsc`; aarch64: CNTVCT_EL0 without the isb. Used for zone
 * begin/end only: a fence doubles the cost of a read (rdtscp pair ~45 ns vs rdtsc pair ~23 ns on the reference
 * machine) and a zone is only as precise as its own ~30 ns overhead anyway. Without it the read may execute up
 * to the out-of-order window (tens of cycles) early or late against the zone's first and last instructions:
 * a zone's edges are fuzzy by that much, its clock is not (the same counter, the same conversion). */
static inline uint64_t kt__hc_tick_fast(void)
{
#if defined(KT_HCLOCK_DOUBLES)
    return kt__hc_double_tick();
#elif defined(__x86_64__)
    return __rdtsc();
#elif defined(__aarch64__)
    uint64_t t;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(t));
    return t;
#else
    return 0;
#endif
}

static inline uint64_t kt__hc_tick(void)
{
#if defined(KT_HCLOCK_DOUBLES)
    return kt__hc_double_tick();
#elif defined(__x86_64__)
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
#elif defined(__aarch64__)
    uint64_t t;
    __asm__ volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(t) : : "memory");
    return t;
#else
    return 0;
#endif
}

/* ns of a piece at tick t: the floor of the fixed-point product for |t - tick0| < 2^63 (ticks before the anchor,
 * read just before a refit, take the signed path). Within 2^32 ticks of the anchor the slope's low 8 fraction
 * bits are dropped for a 64-bit multiply: under 2^32 * 2^-32 = 1 ns of difference, counted in the bound. */
static inline uint64_t kt__hc_seg_ns(uint64_t tick0, uint64_t ns0, uint64_t mult, uint64_t t)
{
    uint64_t d = t - tick0;
    /* common case, 64-bit multiply: d and mult >> 8 both under 2^32 (refreshes keep d under ~2 s of ticks) */
    if (__builtin_expect((d >> 32) == 0 && (mult >> 40) == 0, 1))
        return ns0 + ((d * (mult >> (KT__HC_SHIFT - 32))) >> 32);
    if ((int64_t)d >= 0)
        return ns0 + (uint64_t)(((unsigned __int128)d * mult) >> KT__HC_SHIFT);
    __int128 p = (__int128)(int64_t)d * (__int128)mult;
    return ns0 + (uint64_t)(int64_t)(p >> KT__HC_SHIFT);
}

/* Convert a tick with the piece in force (lock-free; retried while a refit rewrites it). */
static inline uint64_t kt__hc_convert(uint64_t t)
{
    /* Seqlock without fences (TSan models none, as in the recorder): the writer's data stores are releases, so a
     * reader whose acquire load sees one of them also sees the odd sequence number stored before it; the
     * acquire loads keep the second sequence load after them. On x86 all of these are plain moves. */
    for (;;) {
        uint32_t s = atomic_load_explicit(&kt__hc.seq, memory_order_acquire);
        uint64_t t0 = atomic_load_explicit(&kt__hc.tick0, memory_order_acquire);
        uint64_t n0 = atomic_load_explicit(&kt__hc.ns0, memory_order_acquire);
        uint64_t m = atomic_load_explicit(&kt__hc.mult, memory_order_acquire);
        if (__builtin_expect(!(s & 1u) && s == atomic_load_explicit(&kt__hc.seq, memory_order_relaxed), 1))
            return kt__hc_seg_ns(t0, n0, m, t);
    }
}

static inline uint64_t kt__hc_gettime(void)
{
#if defined(KT_HCLOCK_DOUBLES)
    return kt__hc_double_gettime();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

/* A counter reading on the host timeline: refresh the model first when it is due. */
static inline uint64_t kt__hc_ns(uint64_t t)
{
    if (__builtin_expect((int64_t)(t - atomic_load_explicit(&kt__hc.due, memory_order_relaxed)) >= 0, 0))
        kt__hclock_refresh(t);
    return kt__hc_convert(t);
}

static inline int kt__hc_counting(void)
{
    return __builtin_expect(atomic_load_explicit(&kt__hc.mode, memory_order_relaxed) == KT__HC_COUNTER, 1);
}

/* The bound in force on the host timeline against CLOCK_MONOTONIC_RAW: the counter model's (rounded up), 0 when
 * the timeline is clock_gettime itself. A device span's stated bound adds it to its clock fit's (recorder.c):
 * the fit maps onto CLOCK_MONOTONIC_RAW (or onto counter readings), the host stamps beside it are the counter's. */
static inline uint64_t kt__hc_bound_ns(void)
{
#if KT__HC_HAVE_COUNTER
    if (kt__hc_counting())
        return atomic_load_explicit(&kt__hc.bound_ns, memory_order_relaxed);
#endif
    return 0;
}

/* The host timeline: CLOCK_MONOTONIC_RAW ns, from the counter when it is trusted, else from clock_gettime. */
static inline uint64_t kt__hc_now(void)
{
#if KT__HC_HAVE_COUNTER
    if (kt__hc_counting())
        return kt__hc_ns(kt__hc_tick());
#endif
    return kt__hc_gettime();
}

/* The same for zone edges: the unordered read (see kt__hc_tick_fast). */
static inline uint64_t kt__hc_now_zone(void)
{
#if KT__HC_HAVE_COUNTER
    if (kt__hc_counting())
        return kt__hc_ns(kt__hc_tick_fast());
#endif
    return kt__hc_gettime();
}

/* For the start of an interval (zone begin, a dispatch's or timer's start): when a refresh is due it runs
 * first and the counter is read again, so the refresh's few us never land inside the interval being timed. An
 * end read needs nothing: its tick is taken before any refresh. `fast`: the unordered read. */
static inline uint64_t kt__hc_now_begin(int fast)
{
#if KT__HC_HAVE_COUNTER
    if (kt__hc_counting()) {
        uint64_t t = fast ? kt__hc_tick_fast() : kt__hc_tick();
        if (__builtin_expect((int64_t)(t - atomic_load_explicit(&kt__hc.due, memory_order_relaxed)) >= 0, 0)) {
            kt__hclock_refresh(t);
            t = fast ? kt__hc_tick_fast() : kt__hc_tick();
        }
        return kt__hc_convert(t);
    }
#endif
    return kt__hc_gettime();
}

#endif
