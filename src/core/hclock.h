/* hclock.h — internal: the host clock's hot path: read the cheapest trustworthy counter, convert it to
 * CLOCK_MONOTONIC_RAW ns with a multiply-shift fitted by clock.c (docs/host-clock.md). */
#ifndef KT_CORE_HCLOCK_H
#define KT_CORE_HCLOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__)
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

/* One linear piece of the conversion: ns = ns0 + (tick - tick0) * mult / 2^KT__HC_SHIFT (tick distance signed). */
typedef struct kt__hc_seg_t {
    uint64_t tick0; /* anchor tick */
    uint64_t ns0;   /* CLOCK_MONOTONIC_RAW ns at the anchor */
    uint64_t mult;  /* ns per tick, fixed point */
} kt__hc_seg_t;

/* The conversion in force: a short slew piece (a) until `until`, then the fitted model (b). A refit anchors the
 * slew at the old model's value, so timestamps never jump; it meets the new model at `until`. Written only by
 * clock.c under its lock, read lock-free through the seqlock `seq`. */
typedef struct kt__hclock_t {
    _Atomic uint32_t mode;       /* KT__HC_CLOCK_GETTIME until the counter is trusted and calibrated */
    _Atomic uint32_t seq;        /* seqlock: odd while the pieces are rewritten */
    _Atomic uint64_t due;        /* counter value at which the model is refreshed before converting */
    _Atomic uint64_t until;      /* first tick of piece b */
    _Atomic uint64_t a_tick0;    /* piece a: anchor tick */
    _Atomic uint64_t a_ns0;      /* ... its ns */
    _Atomic uint64_t a_mult;     /* ... its slope */
    _Atomic uint64_t b_tick0;    /* piece b: anchor tick */
    _Atomic uint64_t b_ns0;      /* ... its ns */
    _Atomic uint64_t b_mult;     /* ... its slope */
} kt__hclock_t;

extern kt__hclock_t kt__hc;

/* Refresh the model (clock.c): called by the first read at or after `due`; cheap when another thread is at it. */
void kt__hclock_refresh(uint64_t tick);

/* Counter reads. x86-64: the TSC. `rdtscp` waits until every earlier instruction has executed, so work before
 * the read is inside the interval it ends; the `lfence` after keeps later instructions (a zone's body) from
 * starting before the read. aarch64: `isb` then CNTVCT_EL0 (the isb keeps the read from being taken early). */
static inline uint64_t kt__hc_tick(void)
{
#if defined(__x86_64__)
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

/* ns of one piece at tick t: exact floor of the fixed-point product for |t - tick0| < 2^63. */
static inline uint64_t kt__hc_seg_ns(uint64_t tick0, uint64_t ns0, uint64_t mult, uint64_t t)
{
    __int128 d = (__int128)(int64_t)(t - tick0) * (__int128)mult;
    return ns0 + (uint64_t)(int64_t)(d >> KT__HC_SHIFT);
}

/* Convert a tick with the pieces in force (lock-free; retried while a refit rewrites them). */
static inline uint64_t kt__hc_convert(uint64_t t)
{
    for (;;) {
        uint32_t s = atomic_load_explicit(&kt__hc.seq, memory_order_acquire);
        uint64_t until = atomic_load_explicit(&kt__hc.until, memory_order_relaxed);
        uint64_t t0, n0, m;
        if ((int64_t)(t - until) < 0) {
            t0 = atomic_load_explicit(&kt__hc.a_tick0, memory_order_relaxed);
            n0 = atomic_load_explicit(&kt__hc.a_ns0, memory_order_relaxed);
            m = atomic_load_explicit(&kt__hc.a_mult, memory_order_relaxed);
        } else {
            t0 = atomic_load_explicit(&kt__hc.b_tick0, memory_order_relaxed);
            n0 = atomic_load_explicit(&kt__hc.b_ns0, memory_order_relaxed);
            m = atomic_load_explicit(&kt__hc.b_mult, memory_order_relaxed);
        }
        atomic_thread_fence(memory_order_acquire);
        if (!(s & 1u) && s == atomic_load_explicit(&kt__hc.seq, memory_order_relaxed))
            return kt__hc_seg_ns(t0, n0, m, t);
    }
}

static inline uint64_t kt__hc_gettime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The host timeline: CLOCK_MONOTONIC_RAW ns, from the counter when it is trusted, else from clock_gettime. */
static inline uint64_t kt__hc_now(void)
{
#if KT__HC_HAVE_COUNTER
    if (__builtin_expect(atomic_load_explicit(&kt__hc.mode, memory_order_relaxed) == KT__HC_COUNTER, 1)) {
        uint64_t t = kt__hc_tick();
        if (__builtin_expect((int64_t)(t - atomic_load_explicit(&kt__hc.due, memory_order_relaxed)) >= 0, 0))
            kt__hclock_refresh(t);
        return kt__hc_convert(t);
    }
#endif
    return kt__hc_gettime();
}

#endif
