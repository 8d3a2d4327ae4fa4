/* hist.h — internal: the log-linear duration histogram (64 linear buckets per power of two, exact below 128). */
#ifndef KT_CORE_HIST_H
#define KT_CORE_HIST_H

#include <stdint.h>

/* Values below 128 ns get one bucket each; above, each octave [2^k, 2^(k+1)) is split into 64 equal buckets,
 * so a bucket is at most 1/64 of its lower bound wide and its midpoint is within 1/128 (0.79 %) of any value
 * in it. 128 exact buckets + 57 octaves (k = 7..63) x 64 = 3776 buckets, stored in blocks of 64 allocated on
 * first use, so a kernel whose durations span three octaves costs three blocks. */
#define KT__HIST_SUB 64u
#define KT__HIST_BUCKETS (128u + 57u * KT__HIST_SUB)
#define KT__HIST_BLOCK 64u
#define KT__HIST_BLOCKS (KT__HIST_BUCKETS / KT__HIST_BLOCK)
_Static_assert(KT__HIST_BLOCKS <= 64, "snapshot.c marks used blocks in a 64-bit mask");

static inline uint32_t kt__hist_index(uint64_t v)
{
    if (v < 128)
        return (uint32_t)v;
    uint32_t k = 63u - (uint32_t)__builtin_clzll(v);
    return 128u + (k - 7u) * KT__HIST_SUB + (uint32_t)((v >> (k - 6u)) & (KT__HIST_SUB - 1u));
}

/* Lowest value of a bucket. */
static inline uint64_t kt__hist_lower(uint32_t idx)
{
    if (idx < 128)
        return idx;
    uint32_t j = idx - 128u, k = j / KT__HIST_SUB + 7u, sub = j % KT__HIST_SUB;
    return (uint64_t)(KT__HIST_SUB + sub) << (k - 6u);
}

/* Representative value of a bucket: its midpoint (the value itself below 128). */
static inline uint64_t kt__hist_value(uint32_t idx)
{
    if (idx < 128)
        return idx;
    uint32_t k = (idx - 128u) / KT__HIST_SUB + 7u;
    uint64_t width = (uint64_t)1 << (k - 6u);
    return kt__hist_lower(idx) + (width - 1u) / 2u;
}

#endif
