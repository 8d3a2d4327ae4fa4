/* ktiming/stats.h — summary statistics of raw duration samples (median, robust noise, median confidence interval).
 *
 * Used by the measurement harness (ktiming/harness.h) to decide when to stop and by the comparison
 * (ktiming/compare.h) to describe each side; usable on any array of nanosecond durations.
 *
 *     kt_sample_stats_t st;
 *     if (kt_sample_stats(samples, n, &st) == 0)
 *         printf("median %.0f ns, 95 %% CI [%.0f, %.0f], noise %.2f %%\n",
 *                st.median_ns, st.median_ci_lo_ns, st.median_ci_hi_ns, 100 * st.stdrel);
 */
#ifndef KTIMING_STATS_H
#define KTIMING_STATS_H

#include <ktiming.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Summary of one array of durations. All fields are 0 when count is 0. */
typedef struct kt_sample_stats_t {
    uint32_t count;         /* samples summarised */
    uint64_t min_ns;        /* smallest sample */
    uint64_t max_ns;        /* largest sample */
    double mean_ns;         /* arithmetic mean */
    double stddev_ns;       /* sample standard deviation (n-1 denominator), 0 under 2 samples */
    double median_ns;       /* middle value; mean of the two middle values when count is even */
    double p10_ns;          /* 10th percentile (linear interpolation between order statistics) */
    double p90_ns;          /* 90th percentile */
    double mad_ns;          /* median absolute deviation from the median (unscaled) */
    double stdrel;          /* stddev / mean: the relative noise nvbench reports (0 when mean is 0) */
    double madrel;          /* 1.4826 * MAD / median: a relative noise that outliers do not inflate */
    double median_ci_lo_ns; /* lower end of the distribution-free 95 % confidence interval of the median */
    double median_ci_hi_ns; /* upper end; with fewer than 6 samples no 95 % interval exists: min and max */
} kt_sample_stats_t;

#if KT_ENABLED

/* Summarise samples[0..count). Does not modify the array (sorts a copy). Returns 0, KT_EINVAL (NULL out, or
 * NULL samples with count > 0) or KT_ENOMEM. */
KT_API int kt_sample_stats(const uint64_t *samples, size_t count, kt_sample_stats_t *out);

/* The 1-based rank j of the order statistic that bounds a distribution-free confidence interval of the
 * median of n samples from below: [x(j), x(n+1-j)] covers the median with probability >= confidence
 * (exact binomial for n <= 1000, normal approximation above). 0 when no such interval exists (n too small). */
KT_API uint32_t kt_median_ci_rank(uint32_t n, double confidence);

#else

static inline int kt_sample_stats(const uint64_t *samples, size_t count, kt_sample_stats_t *out)
{ (void)samples; (void)count; (void)out; return KT_EDISABLED; }
static inline uint32_t kt_median_ci_rank(uint32_t n, double confidence) { (void)n; (void)confidence; return 0; }

#endif

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_STATS_H */
