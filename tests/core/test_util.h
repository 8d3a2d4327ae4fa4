/* test_util.h — small helpers shared by the core tests (cmocka includes, a seeded PRNG, exact statistics). */
#ifndef KT_TEST_UTIL_H
#define KT_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdatomic.h>
#include <cmocka.h>

#include <ktiming.h>

static inline uint64_t tu_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double tu_unif(uint64_t *s) { return ((double)(tu_rand(s) >> 11) + 0.5) * 0x1p-53; }

static inline int tu_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The ceil(p*n)-th smallest of sorted v (nearest rank). */
static inline uint64_t tu_rank(const uint64_t *sorted, size_t n, double p)
{
    size_t r = (size_t)ceil(p * (double)n - 1e-9);
    if (r < 1)
        r = 1;
    return sorted[r - 1];
}

static inline void tu_assert_rel(double got, double want, double rel)
{
    double err = want != 0 ? fabs(got - want) / fabs(want) : fabs(got);
    if (err > rel)
        fail_msg("got %.9g want %.9g (relative error %.3g > %.3g)", got, want, err, rel);
}

#endif
