/* ktiming/compare.h — before/after comparison of two snapshots with per-kernel statistical verdicts.
 *
 * Part of the analysis library (CMake target ktiming::analysis, -lktiming_analysis), beside the snapshot loader.
 *
 *     kt_compare_result_t r;
 *     if (kt_compare(before, after, NULL, &r) == 0) {          // NULL options: the defaults below
 *         kt_compare_print(stdout, &r, KT_COMPARE_TEXT);
 *         int regressed = r.slower > 0;
 *         kt_compare_free(&r);
 *     }
 *
 * Kernels are matched by (name, backend, device), never by position, where the device is matched by identity
 * (docs/devices.md): the same stable id on both sides (UUID, else PCI address), else the same model and ordinal,
 * else the same device label; each row says which (kt_compare_row_t.match). For each kernel present on both sides
 * the comparison uses the raw duration samples the snapshots carry (kt_kernel_timing_t.samples): the speedup
 * is before / after (above 1 = faster), of medians and of means; a bootstrap confidence interval for the
 * ratio of medians (seeded, so reproducible); a two-sided Mann-Whitney U p-value; and a verdict:
 *   FASTER / SLOWER  significant (p < alpha and the interval excludes 1), the change is at least the
 *                    threshold, and larger than the noise of either side;
 *   SAME             the interval lies inside the threshold band [1/(1+t), 1+t];
 *   UNSURE           everything else, with the reason: under min_samples samples on a side, no raw samples
 *                    (aggregates only), a change within the noise, or an interval too wide to decide.
 * A geometric-mean row summarises the kernels compared on samples. docs/compare.md explains the statistics.
 */
#ifndef KTIMING_COMPARE_H
#define KTIMING_COMPARE_H

#include <ktiming.h>

#if !KT_ENABLED
#error "ktiming/compare.h needs KTIMING_ENABLE=1 (link ktiming::analysis, which defines it)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Verdict for one kernel (or the geometric-mean summary). */
typedef enum kt_verdict_t {
    KT_VERDICT_SAME = 0,   /* no change beyond the threshold (the confidence interval says so) */
    KT_VERDICT_FASTER = 1, /* significantly faster by at least the threshold */
    KT_VERDICT_SLOWER = 2, /* significantly slower by at least the threshold: a regression */
    KT_VERDICT_UNSURE = 3  /* the data cannot tell; kt_compare_row_t.reason says why */
} kt_verdict_t;

/* Which snapshots a kernel appears in. */
typedef enum kt_presence_t {
    KT_PRESENT_BOTH = 0,   /* matched */
    KT_PRESENT_BEFORE = 1, /* only in BEFORE (removed or renamed) */
    KT_PRESENT_AFTER = 2   /* only in AFTER (new) */
} kt_presence_t;

/* Output formats of kt_compare_print. */
typedef enum kt_compare_format_t {
    KT_COMPARE_TEXT = 0,     /* aligned table for terminals */
    KT_COMPARE_MARKDOWN = 1, /* GitHub-flavoured table, for pull-request comments */
    KT_COMPARE_JSON = 2      /* machine-readable, docs/compare.md */
} kt_compare_format_t;

/* Options. Zero-initialise (or pass NULL); every 0 means the default in the field's comment. */
typedef struct kt_compare_opts_t {
    double threshold_pct;   /* smallest change that counts, in percent (5 means a 5 % change, a speedup ratio of 1.05); 0 = 5, negative = 0 */
    double alpha;           /* significance level of the Mann-Whitney U test; 0 = 0.05 */
    double confidence;      /* confidence level of the intervals; 0 = 0.95 */
    uint32_t min_samples;   /* fewer samples on either side → UNSURE; 0 = 9 (Google Benchmark's warning) */
    uint32_t bootstrap;     /* bootstrap resamples; 0 = 2000 */
    uint64_t seed;          /* bootstrap PRNG seed (mixed with each kernel's key); 0 = a fixed default */
} kt_compare_opts_t;

/* One side of a row. */
typedef struct kt_compare_side_t {
    uint64_t dispatches;    /* dispatch_count in the snapshot */
    uint32_t samples;       /* raw samples used (0 = aggregates only) */
    double median_ns;       /* of the samples; the snapshot's p50 when it has none */
    double mean_ns;         /* of the samples; the snapshot's mean when it has none */
    double noise;           /* robust relative noise 1.4826 * MAD / median of the samples (0 without samples) */
    double stdrel;          /* stddev / mean of the samples (0 without samples) */
} kt_compare_side_t;

/* One kernel. NaN marks a value that could not be computed (e.g. no p-value without samples). */
typedef struct kt_compare_row_t {
    const char *name;         /* kernel name (owned by the result) */
    kt_backend_t backend;     /* API */
    const char *device;       /* device name (owned by the result) */
    kt_presence_t presence;   /* matched or one-sided */
    kt_compare_side_t before; /* BEFORE side (zeros when absent) */
    kt_compare_side_t after;  /* AFTER side (zeros when absent) */
    double speedup_median;    /* before.median / after.median */
    double speedup_mean;      /* before.mean / after.mean */
    double ci_lo;             /* lower end of the bootstrap interval of speedup_median */
    double ci_hi;             /* upper end */
    double p_value;           /* two-sided Mann-Whitney U (exact for small samples without ties) */
    double u;                 /* U statistic of BEFORE (count of pairs where before > after, ties half) */
    kt_verdict_t verdict;     /* for one-sided rows: UNSURE */
    const char *reason;       /* one line explaining the verdict (owned by the result) */
    uint64_t decide_samples;  /* UNSURE on samples: about how many samples (dispatches) per side would decide it
                                 at the observed noise and effect (docs/compare.md, "How many more"); 0 when
                                 more samples would not help (a change within the noise) or cannot be estimated */
    const char *match;        /* how the two sides' devices were matched: "uuid" or "pci" (the same stable id on
                                 both sides), "model+ordinal", "name" (device labels equal: no identity on a
                                 side); NULL for one-sided rows (a static string) */
    const char *device_after; /* AFTER's label of the device when it differs from `device` (BEFORE's), e.g. the
                                 same GPU renumbered by CUDA_VISIBLE_DEVICES; NULL otherwise (owned by the result) */
} kt_compare_row_t;

/* The comparison. Release with kt_compare_free(). */
typedef struct kt_compare_result_t {
    size_t count;              /* rows */
    kt_compare_row_t *rows;    /* sorted by name, backend, device (BEFORE's label); one-sided rows included */
    size_t matched;            /* rows present on both sides */
    size_t faster, slower, same, unsure; /* verdict counts over matched rows */
    size_t before_only;        /* kernels only in BEFORE */
    size_t after_only;         /* kernels only in AFTER */
    size_t geomean_kernels;    /* matched kernels with samples on both sides, summarised below */
    double geomean_speedup;    /* geometric mean of their speedup_median (NaN when none) */
    double geomean_ci_lo;      /* bootstrap interval of the geometric mean */
    double geomean_ci_hi;
    kt_verdict_t geomean_verdict; /* same rule as a row, on the interval of the geometric mean */
    kt_compare_opts_t opts;    /* the options used, defaults filled in */
} kt_compare_result_t;

/* Compare AFTER against BEFORE. opts may be NULL. Returns 0, KT_EINVAL (NULL snapshot or out, options out of
 * range: alpha or confidence outside (0,1)), or KT_ENOMEM. `out` is zeroed first; free it in every case. */
KT_API int kt_compare(const kt_snapshot_t *before, const kt_snapshot_t *after, const kt_compare_opts_t *opts,
                      kt_compare_result_t *out);
KT_API void kt_compare_free(kt_compare_result_t *result);

/* Print the comparison. Returns 0, KT_EINVAL, KT_ENOMEM or KT_EIO. */
KT_API int kt_compare_print(FILE *out, const kt_compare_result_t *result, kt_compare_format_t format);

/* "SAME", "FASTER", "SLOWER", "UNSURE". */
KT_API const char *kt_verdict_name(kt_verdict_t verdict);

/* Two-sided Mann-Whitney U test of a against b: *u is the U statistic of a (pairs with a > b, ties counting
 * half), *p the p-value (exact distribution when both sides have at most 25 samples and there are no ties,
 * otherwise the normal approximation with tie and continuity corrections). Returns 0, KT_EINVAL (an empty
 * side) or KT_ENOMEM. */
KT_API int kt_mann_whitney(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, double *u, double *p);

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_COMPARE_H */
