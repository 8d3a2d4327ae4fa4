/* ktiming/harness.h — measure one kernel until its timing is trustworthy: warm-up, trials, a stopping criterion.
 *
 * The harness calls your dispatch callback over and over. Each call is one sample of `trials` back-to-back
 * dispatches; the harness times it on its clock (or takes the duration your callback measured on the device),
 * keeps the per-dispatch duration, and stops as nvbench does: once the relative noise is at or below the
 * target, with at least min_samples samples and min_time of measured time; or when the noise has stopped
 * moving above the target (it will not get better); or at the wall-clock timeout. Samples are also recorded
 * into ktiming under the kernel's name, so snapshots and their JSON carry them for `ktiming compare`.
 *
 *     static int run_blur(void *user, uint32_t trials, uint64_t *duration_ns)
 *     {
 *         (void)duration_ns;                       // host-timed: the harness brackets this call
 *         for (uint32_t i = 0; i < trials; i++) blur(user);
 *         return 0;
 *     }
 *     kt_harness_result_t r;
 *     kt_harness_run(&(kt_harness_desc_t){.name = "blur", .run = run_blur, .user = img}, &r);
 *     printf("blur: median %.0f ns over %u samples (%s)\n", r.stats.median_ns, r.sample_count,
 *            kt_harness_stop_name(r.stop));
 *     kt_harness_result_free(&r);
 *
 * Defaults (every 0 in the desc): 1 warm-up sample, 1 trial per sample, noise measure stddev/mean, target
 * 0.5 %, at least 10 samples and 0.5 s of measured time, 15 s wall timeout, noise "stable" when the last 64
 * noise values spread less than 5 % of the current one, at most 1 << 20 samples, no cache flush, samples
 * recorded into ktiming, a progress line on stderr when it is a terminal and the run passes 1 s.
 * docs/harness.md explains the criterion.
 */
#ifndef KTIMING_HARNESS_H
#define KTIMING_HARNESS_H

#include <ktiming.h>
#include <ktiming/stats.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One sample: run `trials` dispatches back to back and wait for them to finish. With KT_HARNESS_TIME_HOST the
 * harness times the call and *duration_ns is ignored; with KT_HARNESS_TIME_REPORTED store the measured
 * duration of all the trials (device timestamps, events) in *duration_ns. Return 0, or a negative KT_E* to
 * abort the run (kt_harness_run returns it). */
typedef int (*kt_harness_run_cb)(void *user, uint32_t trials, uint64_t *duration_ns);

/* A clock for the harness: nanoseconds on any monotonic timeline. */
typedef uint64_t (*kt_harness_clock_cb)(void *user);

/* Who measures a sample. */
typedef enum kt_harness_timing_t {
    KT_HARNESS_TIME_HOST = 0,    /* the harness brackets the callback with its clock (CPU kernels, or sync'd GPU) */
    KT_HARNESS_TIME_REPORTED = 1 /* the callback reports the duration it measured (GPU timestamps) */
} kt_harness_timing_t;

/* How the noise compared with max_noise is measured. */
typedef enum kt_harness_noise_t {
    KT_HARNESS_NOISE_STDREL = 0,   /* stddev / mean of the samples (nvbench's measure) */
    KT_HARNESS_NOISE_MEDIAN_CI = 1 /* half-width of the 95 % confidence interval of the median / median */
} kt_harness_noise_t;

/* Why a run stopped. */
typedef enum kt_harness_stop_t {
    KT_HARNESS_STOP_NONE = 0,      /* not run (invalid desc) */
    KT_HARNESS_STOP_CONVERGED = 1, /* noise <= max_noise with min_samples and min_time reached */
    KT_HARNESS_STOP_STABLE = 2,    /* noise above target but no longer changing (it would not converge) */
    KT_HARNESS_STOP_TIMEOUT = 3,   /* the wall-clock timeout passed first */
    KT_HARNESS_STOP_MAX_SAMPLES = 4, /* max_samples reached first */
    KT_HARNESS_STOP_ERROR = 5      /* the callback returned an error (result.error) */
} kt_harness_stop_t;

/* What to measure and how. Zero-initialise; every 0 means the default given in the field's comment. */
typedef struct kt_harness_desc_t {
    const char *name;            /* kernel name the samples are recorded under (required) */
    kt_backend_t backend;        /* backend the kernel runs on, recorded with the samples (0 = CPU) */
    const char *device;          /* device name recorded with the samples; NULL = the backend's default */
    kt_harness_run_cb run;       /* runs one sample (required) */
    void *user;                  /* passed to run */
    kt_harness_timing_t timing;  /* who measures a sample (0 = the harness, on its clock) */
    uint32_t trials;             /* dispatches per sample; 0 = 1, or automatic when min_sample_ns is set */
    uint64_t min_sample_ns;      /* with trials 0: warm-up doubles trials until one sample lasts this long */
    int32_t warmup_samples;      /* untimed samples first; 0 = 1, negative = none */
    uint64_t warmup_ns;          /* keep warming up until this much wall time has passed (0 = no minimum) */
    kt_harness_noise_t noise;    /* noise measure (0 = stddev / mean) */
    double max_noise;            /* target relative noise as a fraction; 0 = 0.005 (0.5 %) */
    uint32_t min_samples;        /* samples before any stop but the timeout; 0 = 10 (at least 2 are used) */
    uint32_t max_samples;        /* hard cap on samples kept; 0 = 1 << 20 */
    uint64_t min_time_ns;        /* measured time (sum of sample durations) before stopping; 0 = 0.5 s */
    uint64_t timeout_ns;         /* wall time from the first warm-up after which the run stops; 0 = 15 s */
    double stable_tolerance;     /* "stable" when stddev of the last stable_window noise values / current noise
                                    is below this; 0 = 0.05, negative = never stop as stable */
    uint32_t stable_window;      /* noise values looked at for stability; 0 = 64 */
    int flush_cache;             /* non-zero: before every sample, write and read a buffer larger than the CPU's
                                    last-level cache (untimed), so each sample starts cold */
    size_t flush_bytes;          /* size of that buffer; 0 = 2 x kt_harness_cache_size() */
    int no_record;               /* non-zero: do not record samples into ktiming (e.g. the callback's backend
                                    already records every dispatch under the same name) */
    int progress;                /* 0 = progress line when progress_out is a terminal and the run passes 1 s,
                                    1 = always (at most every 0.2 s), negative = never */
    FILE *progress_out;          /* where the progress line goes; NULL = stderr */
    kt_harness_clock_cb clock;   /* the harness's clock; NULL = kt_now_ns (CLOCK_MONOTONIC_RAW) */
    void *clock_user;            /* passed to clock */
} kt_harness_desc_t;

/* What a run measured. Release with kt_harness_result_free(). */
typedef struct kt_harness_result_t {
    uint64_t *samples;         /* per-dispatch duration of each measured sample (sample / trials), in order */
    uint32_t sample_count;     /* entries in samples */
    uint32_t trials;           /* dispatches per sample used */
    uint32_t warmup_samples;   /* warm-up samples run (not in samples) */
    kt_harness_stop_t stop;    /* why the run stopped */
    double noise;              /* final noise by the chosen measure, as a fraction */
    double max_noise;          /* the target used */
    kt_sample_stats_t stats;   /* summary of samples (per dispatch) */
    uint64_t measured_ns;      /* sum of measured sample durations (all trials) */
    uint64_t wall_ns;          /* harness clock from the first warm-up to the stop */
    size_t flush_bytes;        /* cache-flush buffer used, 0 when off */
    int error;                 /* the callback's error when stop is KT_HARNESS_STOP_ERROR, else 0 */
} kt_harness_result_t;

#if KT_ENABLED

/* Run the measurement. Returns 0 when it stopped for a measurement reason (converged, stable, timeout,
 * max samples), the callback's negative code when it aborted (result keeps the samples so far), KT_EINVAL for
 * a desc without name or run, KT_ENOMEM. `result` is always initialised (free it in every case). */
KT_API int kt_harness_run(const kt_harness_desc_t *desc, kt_harness_result_t *result);
KT_API void kt_harness_result_free(kt_harness_result_t *result);
KT_API const char *kt_harness_stop_name(kt_harness_stop_t stop); /* "converged", "stable", "timeout", ... */

/* Bytes of the largest CPU cache of this machine: /sys/devices/system/cpu/cpu0/cache, else
 * sysconf(_SC_LEVEL3_CACHE_SIZE / _SC_LEVEL2_CACHE_SIZE), else 32 MiB. Read once. */
KT_API size_t kt_harness_cache_size(void);

#else

static inline int kt_harness_run(const kt_harness_desc_t *desc, kt_harness_result_t *result)
{
    (void)desc;
    if (result) {
#ifdef __cplusplus
        kt_harness_result_t z = {}; /* {0} warns under -Wextra in C++ (missing-field-initializers) */
#else
        kt_harness_result_t z = {0};
#endif
        *result = z;
    }
    return KT_EDISABLED;
}
static inline void kt_harness_result_free(kt_harness_result_t *result) { (void)result; }
static inline const char *kt_harness_stop_name(kt_harness_stop_t stop) { (void)stop; return ""; }
static inline size_t kt_harness_cache_size(void) { return 0; }

#endif

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_HARNESS_H */
