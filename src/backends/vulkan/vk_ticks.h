/* vk_ticks.h — internal: pure timestamp arithmetic (valid-bits masking, wrap, period scaling), unit-tested. */
#ifndef KT_VK_TICKS_H
#define KT_VK_TICKS_H

#include <math.h>
#include <stdint.h>

/* Mask of the valid bits of a timestamp (0 or >= 64 bits: all). */
static inline uint64_t kt__vk_ticks_mask(uint32_t valid_bits)
{
    return (valid_bits == 0 || valid_bits >= 64) ? UINT64_MAX : ((UINT64_C(1) << valid_bits) - 1);
}

/* Ticks from begin to end on a counter of valid_bits bits that may have wrapped once in between. */
static inline uint64_t kt__vk_ticks_delta(uint64_t begin, uint64_t end, uint32_t valid_bits)
{
    uint64_t m = kt__vk_ticks_mask(valid_bits);
    return ((end & m) - (begin & m)) & m;
}

/* Signed distance from `from` to `to`, taking the shorter way round the counter: right as long as the true
 * distance is under half the counter range. */
static inline int64_t kt__vk_ticks_signed_delta(uint64_t from, uint64_t to, uint32_t valid_bits)
{
    uint64_t d = kt__vk_ticks_delta(from, to, valid_bits);
    if (valid_bits == 0 || valid_bits >= 64)
        return (int64_t)d;
    uint64_t half = UINT64_C(1) << (valid_bits - 1);
    return d >= half ? (int64_t)d - (int64_t)(half << 1) : (int64_t)d;
}

/* Scale ticks to ns by timestampPeriod (ns per tick), rounded to the nearest ns, in integer arithmetic: the
 * period (a float widened to double) is exactly m * 2^e, so ticks * m is exact in 128 bits and the shift
 * rounds once. A double product would be off by hundreds of ns at absolute device times near 2^60 ns.
 * Saturates at UINT64_MAX. */
static inline uint64_t kt__vk_ticks_to_ns(uint64_t ticks, double period_ns)
{
    if (period_ns == 1.0 || ticks == 0)
        return ticks;
    if (!(period_ns > 0) || isinf(period_ns))
        return 0;
    int e = 0;
    double f = frexp(period_ns, &e);                     /* period = f * 2^e, f in [0.5, 1) */
    uint64_t m = (uint64_t)ldexp(f, 53);                 /* exact: a double has 53 mantissa bits */
    e -= 53;
    while (!(m & 1u)) {
        m >>= 1;
        e++;
    }
    unsigned __int128 p = (unsigned __int128)ticks * m;  /* < 2^117 */
    if (e >= 0) {
        if (e >= 64 || (p >> (64 - e)) != 0)
            return UINT64_MAX;
        return (uint64_t)(p << e);
    }
    if (-e >= 127)
        return 0;
    p = (p + ((unsigned __int128)1 << (-e - 1))) >> -e;
    return p > UINT64_MAX ? UINT64_MAX : (uint64_t)p;
}

/* Unwraps a masked counter into a 64-bit tick count relative to a base value. */
typedef struct kt__vk_unwrap_t {
    uint32_t valid_bits; /* counter width */
    uint64_t base_raw;   /* raw (masked) value at tick 0 */
    uint64_t last_raw;   /* newest raw value seen */
    int64_t last_ext;    /* its unwrapped ticks */
} kt__vk_unwrap_t;

static inline void kt__vk_unwrap_init(kt__vk_unwrap_t *u, uint32_t valid_bits, uint64_t base_raw)
{
    u->valid_bits = valid_bits;
    u->base_raw = base_raw & kt__vk_ticks_mask(valid_bits);
    u->last_raw = u->base_raw;
    u->last_ext = 0;
}

static inline void kt__vk_unwrap_note(kt__vk_unwrap_t *u, uint64_t raw, int64_t ext)
{
    if (ext > u->last_ext) {
        u->last_raw = raw & kt__vk_ticks_mask(u->valid_bits);
        u->last_ext = ext;
    }
}

/* Unwrapped ticks of raw, placed at the signed distance from the newest value seen: right when raw is within
 * half the counter range of it (values may arrive out of order). */
static inline int64_t kt__vk_unwrap(kt__vk_unwrap_t *u, uint64_t raw)
{
    int64_t ext = u->last_ext + kt__vk_ticks_signed_delta(u->last_raw, raw, u->valid_bits);
    kt__vk_unwrap_note(u, raw, ext);
    return ext;
}

/* Unwrapped ticks of raw, placed nearest to an expected tick count (e.g. predicted by the clock model from the
 * host time the timestamp was requested): right however long ago the last value was seen, as long as the
 * prediction is within half the counter range. */
static inline int64_t kt__vk_unwrap_near(kt__vk_unwrap_t *u, uint64_t raw, int64_t expected_ext)
{
    uint64_t expected_raw = (u->base_raw + (uint64_t)expected_ext) & kt__vk_ticks_mask(u->valid_bits);
    int64_t ext = expected_ext + kt__vk_ticks_signed_delta(expected_raw, raw, u->valid_bits);
    kt__vk_unwrap_note(u, raw, ext);
    return ext;
}

#endif
