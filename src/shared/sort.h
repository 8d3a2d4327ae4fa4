/* sort.h — the ascending sort of the small arrays that statistics sort most (a kernel's samples, 32 of them in a
 * typical snapshot): insertion sort up to KT_SORT_SMALL values, where qsort's calls through a comparison function
 * cost several times more, and qsort above. Header-only: both libraries use it
 * (src/harness/stats.c, src/analysis/compare.c). */
#ifndef KT_SHARED_SORT_H
#define KT_SHARED_SORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define KT_SORT_SMALL 32u

static inline int kt__sort_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Insertion sort of v[0..n), of any type ordered by <. */
#define KT__INSERTION_SORT(v, n) \
    do { \
        for (size_t i_ = 1; i_ < (n); i_++) { \
            __typeof__((v)[0]) x_ = (v)[i_]; \
            size_t j_ = i_; \
            for (; j_ > 0 && x_ < (v)[j_ - 1]; j_--) \
                (v)[j_] = (v)[j_ - 1]; \
            (v)[j_] = x_; \
        } \
    } while (0)

static inline void kt__sort_u64_asc(uint64_t *v, size_t n)
{
    if (n > KT_SORT_SMALL)
        qsort(v, n, sizeof *v, kt__sort_cmp_u64);
    else
        KT__INSERTION_SORT(v, n);
}

#endif
