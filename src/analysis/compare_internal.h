/* compare_internal.h — internal: helpers of the comparison shared between its sources and white-box tests. */
#ifndef KT_COMPARE_INTERNAL_H
#define KT_COMPARE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Median of v[0..n) by quickselect (reorders v); mean of the two middle values when n is even; 0 when empty. */
double kt__median_unsorted(uint64_t *v, size_t n);

#endif
