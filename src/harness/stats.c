/* stats.c — summary statistics of raw duration samples: moments, percentiles, MAD, median confidence interval. */
#include "harness/harness_internal.h"
#include "shared/sort.h"

#include <ktiming/stats.h>

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

void kt__sort_u64(uint64_t *v, size_t n) { kt__sort_u64_asc(v, n); }

double kt__quantile_sorted(const uint64_t *sorted, size_t n, double q)
{
    if (n == 0) return 0.0;
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)pos;
    if (lo >= n - 1) return (double)sorted[n - 1];
    double frac = pos - (double)lo;
    return (double)sorted[lo] + frac * ((double)sorted[lo + 1] - (double)sorted[lo]);
}

double kt__median_sorted(const uint64_t *sorted, size_t n)
{
    if (n == 0) return 0.0;
    if (n & 1) return (double)sorted[n / 2];
    return 0.5 * ((double)sorted[n / 2 - 1] + (double)sorted[n / 2]);
}

double kt__normal_quantile(double p)
{
    /* Bisection on the normal CDF: slow-ish but exact to double precision, and only called per summary. */
    if (p <= 0.0) return -INFINITY;
    if (p >= 1.0) return INFINITY;
    double lo = -40.0, hi = 40.0;
    for (int i = 0; i < 200 && hi - lo > 1e-15; i++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(-mid / M_SQRT2) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

uint32_t kt_median_ci_rank(uint32_t n, double confidence)
{
    if (n == 0 || !(confidence > 0.0 && confidence < 1.0)) return 0;
    double tail = 0.5 * (1.0 - confidence);
    if (n > 1000) {
        double z = kt__normal_quantile(1.0 - tail);
        double j = floor(0.5 * (double)n - 0.5 * z * sqrt((double)n));
        return j < 1.0 ? 0 : (uint32_t)j;
    }
    /* Exact: the largest j with P(B <= j-1) <= tail, B ~ Binomial(n, 1/2); then
     * P(x(j) <= median <= x(n+1-j)) = 1 - 2 P(B <= j-1) >= confidence. */
    /* lgamma_r, not lgamma: lgamma writes the global signgam, a data race when threads run harnesses. */
    int sign;
    double lfact_n = lgamma_r((double)n + 1.0, &sign), ln2n = (double)n * log(2.0);
    double cdf = 0.0;
    uint32_t j = 0;
    for (uint32_t k = 0; k <= n / 2; k++) {
        cdf += exp(lfact_n - lgamma_r((double)k + 1.0, &sign) - lgamma_r((double)(n - k) + 1.0, &sign) - ln2n);
        if (cdf > tail * (1.0 + 1e-12)) break;
        j = k + 1;
    }
    return j;
}

/* kt_median_ci_rank(n, 0.95), kept per n up to 1000 once worked out: every kernel's statistics ask for it, and
 * each answer is a sum of up to n/2 binomial terms (two lgamma_r and an exp each; 5 % of `ktiming compare`).
 * Relaxed atomics: harness threads may fill an entry at once, with the same value. */
static uint32_t median_ci_rank95(uint32_t n)
{
    static _Atomic uint32_t known[1001]; /* rank + 1; 0: not worked out yet */
    if (n > 1000) return kt_median_ci_rank(n, 0.95);
    uint32_t r = atomic_load_explicit(&known[n], memory_order_relaxed);
    if (!r) {
        r = kt_median_ci_rank(n, 0.95) + 1;
        atomic_store_explicit(&known[n], r, memory_order_relaxed);
    }
    return r - 1;
}

/* The median absolute deviation of sorted[0..n) (n >= 1) from median, their median: the distances fall to the
 * median and rise after it, two sorted runs, merged from the median outward only as far as the middle one (the
 * same values as sorting all n distances, without the sort: 6 % of a comparison's CPU with --bootstrap 100). */
static double mad_sorted(const uint64_t *sorted, size_t n, double median)
{
    size_t lo = 0, hi = n; /* r: the first value at or above the median */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((double)sorted[mid] < median) lo = mid + 1;
        else hi = mid;
    }
    size_t l = lo, r = lo; /* the left run is sorted[l-1], sorted[l-2], ...; the right one sorted[r], ... */
    double prev = 0.0, cur = 0.0;
    for (size_t k = 0; k <= n / 2; k++) {
        double dl = l ? fabs((double)sorted[l - 1] - median) : INFINITY;
        double dr = r < n ? fabs((double)sorted[r] - median) : INFINITY;
        prev = cur;
        if (dl <= dr) {
            cur = dl;
            l--;
        } else {
            cur = dr;
            r++;
        }
    }
    return (n & 1) ? cur : 0.5 * (prev + cur);
}

void kt__stats_from_sorted(const uint64_t *sorted, size_t n, kt_sample_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0) return;
    out->count = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    out->min_ns = sorted[0];
    out->max_ns = sorted[n - 1];
    /* Two-pass mean/variance on sorted data: accurate for the tightly clustered values timing gives. */
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)sorted[i];
    double mean = sum / (double)n, ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)sorted[i] - mean;
        ss += d * d;
    }
    out->mean_ns = mean;
    out->stddev_ns = n > 1 ? sqrt(ss / (double)(n - 1)) : 0.0;
    out->stdrel = mean > 0.0 ? out->stddev_ns / mean : 0.0;
    out->median_ns = kt__median_sorted(sorted, n);
    out->p10_ns = kt__quantile_sorted(sorted, n, 0.10);
    out->p90_ns = kt__quantile_sorted(sorted, n, 0.90);
    out->mad_ns = mad_sorted(sorted, n, out->median_ns);
    out->madrel = out->median_ns > 0.0 ? 1.4826 * out->mad_ns / out->median_ns : 0.0;
    uint32_t j = median_ci_rank95(out->count);
    if (j == 0) {
        out->median_ci_lo_ns = (double)sorted[0];
        out->median_ci_hi_ns = (double)sorted[n - 1];
    } else {
        out->median_ci_lo_ns = (double)sorted[j - 1];
        out->median_ci_hi_ns = (double)sorted[n - j];
    }
}

int kt_sample_stats(const uint64_t *samples, size_t count, kt_sample_stats_t *out)
{
    if (!out || (!samples && count)) return KT_EINVAL;
    memset(out, 0, sizeof *out);
    if (count == 0) return 0;
    uint64_t *sorted = malloc(count * sizeof *sorted);
    if (!sorted) return KT_ENOMEM;
    memcpy(sorted, samples, count * sizeof *sorted);
    kt__sort_u64(sorted, count);
    kt__stats_from_sorted(sorted, count, out);
    free(sorted);
    return 0;
}
