/* harness_internal.h — internal: sample-statistics helpers and the cache flush shared by the harness sources. */
#ifndef KT_HARNESS_INTERNAL_H
#define KT_HARNESS_INTERNAL_H

#include <ktiming/stats.h>

#include <stddef.h>
#include <stdint.h>

/* Sort ascending. */
void kt__sort_u64(uint64_t *v, size_t n);

/* Quantile q in [0,1] of sorted[0..n) with linear interpolation; 0 when n is 0. */
double kt__quantile_sorted(const uint64_t *sorted, size_t n, double q);

/* Median of sorted[0..n) (mean of the middle two when n is even); 0 when n is 0. */
double kt__median_sorted(const uint64_t *sorted, size_t n);

/* x with P(Z <= x) = p for a standard normal Z. */
double kt__normal_quantile(double p);

/* Fill *out from sorted[0..n) (ascending). */
void kt__stats_from_sorted(const uint64_t *sorted, size_t n, kt_sample_stats_t *out);

/* Write then read every cache line of buf[0..bytes) so that what a kernel touched before is evicted. */
void kt__cache_flush(unsigned char *buf, size_t bytes, unsigned pass);

#endif
