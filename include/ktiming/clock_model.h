/* ktiming/clock_model.h — clock models: place device timestamps on the host timeline with a stated error bound.
 *
 * A device clock is sampled as {device_ns, host_before_ns, host_after_ns}: one device read bracketed by two
 * host reads in a known host domain. Fitting turns samples into a linear model, on centred values so raw
 * counts near 1e18 keep their precision:
 *
 *     host = host_ref + (device - device_ref) / (1 + drift_ppm * 1e-6) + offset_ns
 *
 * (drift_ppm > 0: the device clock runs fast against the host). Integer parts stay integers: only the small
 * correction (drift times distance, plus offset_ns) is computed in double, so mapping is exact to the ns at
 * any absolute value.
 *
 * The error bound of a mapping at device time d is
 *
 *     bound(d) = bracket_ns + spread_ns + 1 ns + dist(d) * (drift_bound_ppm + max_drift_ppm) * 1e-6
 *
 *   bracket_ns   the largest error the position of each device read inside its bracket can cause anywhere in
 *                the fitted span: max over the span of sum_i |c_i(x)| * halfwidth_i, where c_i(x) are the
 *                fit's coefficients (the prediction is linear in the midpoints). Exact worst case, not a guess,
 *                as long as every kept device read happened inside its bracket.
 *   spread_ns    the larger of the biggest part of a kept sample's residual its bracket cannot explain
 *                (max_i |residual_i| - halfwidth_i: device jitter, quantisation) and k times the (HC3)
 *                standard error of the prediction at the span ends (small fits of noisy clocks).
 *   dist(d)      distance from the fitted span (0 inside it), in ns.
 *   drift_bound_ppm  bound on the fitted drift's error: k * drift_se_ppm (k = 3 plus a small-sample allowance,
 *                drift_se_ppm the drift's standard error from the residuals) plus the slope error read positions
 *                inside their brackets can cause (sum_i |b_i| * halfwidth_i, b_i the slope's coefficients; large
 *                over a span of a few ms, and invisible in the residuals). That interval is cut at
 *                +-KT_CLOCK_DRIFT_LIMIT_PPM. Where it reaches past the prior |drift| <=
 *                KT_CLOCK_DEFAULT_DRIFT_PRIOR_PPM, the drift is the overlap's value nearest 0, but the bound
 *                still reaches the far edge of the data's (cut) interval: a clock outside the prior (a 2,000 ppm
 *                oscillator) stays contained, and the prior only steadies the estimate.
 *   max_drift_ppm  the assumed worst change of the rate since the fit (default 10 ppm for device clocks).
 * docs/calibration.md gives the measured accuracy and containment of this bound per strategy and scenario.
 *
 * Models age: kt_clock_is_stale() says when the bound at "now" is above what the caller accepts, and
 * kt_clock_tracker_t (below) keeps a ring of recent samples and refits periodically with bounded work.
 * Pure math plus host clock reads: no driver calls, so everything here is testable with synthetic clocks.
 */
#ifndef KTIMING_CLOCK_MODEL_H
#define KTIMING_CLOCK_MODEL_H

#include <ktiming.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Host clock domains. The ktiming timeline is KT_DOMAIN_MONOTONIC_RAW. */
typedef enum kt_clock_domain_t {
    KT_DOMAIN_MONOTONIC_RAW = 0,
    KT_DOMAIN_MONOTONIC = 1,
    KT_DOMAIN_REALTIME = 2,
    KT_DOMAIN_DEVICE = 3,  /* a device clock with its own epoch: only a fitted model maps it */
    KT_DOMAIN_UNKNOWN = 4
} kt_clock_domain_t;

/* Fitting strategies. Every strategy ends in a (weighted) least-squares fit over the samples it
 * keeps, so the bound terms above are computed the same way for all of them. */
typedef enum kt_fit_strategy_t {
    KT_FIT_BASIC = 0,    /* least squares on bracket midpoints, every sample kept */
    KT_FIT_WEIGHTED = 1, /* weights 1/halfwidth^2: tight brackets count more; every sample kept */
    KT_FIT_ROBUST = 2,   /* Theil-Sen (median pairwise slope, median intercept), then least squares on the
                            samples within 3.5 + 20/n robust sigmas (MAD, floored by a line-free local
                            scale); gross outliers are dropped */
    KT_FIT_RANSAC = 3    /* deterministic seeded RANSAC (MSAC scoring of at most 256 2-sample lines), then
                            the same band and least squares as ROBUST */
} kt_fit_strategy_t;

/* One device read bracketed by two host reads. */
typedef struct kt_clock_sample_t {
    uint64_t device_ns;      /* device timestamp, already scaled to ns */
    uint64_t host_before_ns; /* host read just before the device read */
    uint64_t host_after_ns;  /* host read just after */
} kt_clock_sample_t;

#define KT_CLOCK_MIN_SAMPLES 10
#define KT_CLOCK_DEFAULT_MAX_DRIFT_PPM 10.0 /* max_drift_ppm a fit starts with (device oscillators) */
#define KT_CLOCK_DEFAULT_DRIFT_PRIOR_PPM 500.0 /* |drift| of device oscillators against the host is usually below
                                                  this: the drift estimate of a short span shrinks towards it */
#define KT_CLOCK_DRIFT_LIMIT_PPM 5000.0 /* no clock is further off than this: bounds never reach past it */

/* A fitted device-clock model. Fields are plain data: copy freely; kt_clock_fit() fills every one. */
typedef struct kt_clock_model_t {
    kt_clock_domain_t host_domain; /* domain of the host reads the model maps to */
    kt_fit_strategy_t strategy;    /* how it was fitted */
    uint64_t device_ref_ns;        /* centring point on the device clock (mean of the device reads) */
    uint64_t host_ref_ns;          /* centring point on the host clock (mean of the bracket midpoints) */
    double offset_ns;              /* fitted host time at device_ref_ns minus host_ref_ns (small after centring);
                                      kt_clock_model_offset_ns() gives the full host - device offset */
    double drift_ppm;              /* device rate error against the host: + means the device runs fast */
    double error_ns;               /* error bound inside the fitted span: bracket_ns + spread_ns + 1 */
    double residual_ns;            /* RMS fit residual over the kept samples (midpoint minus line) */
    double max_drift_ppm;          /* assumed worst rate change since the fit, for extrapolation growth; the
                                      caller may change it after fitting */
    uint32_t samples;              /* samples given */
    uint32_t inliers;              /* samples the fit kept */
    uint64_t fitted_at_ns;         /* host time (host_domain) of the fit: the newest kept sample's midpoint */
    uint64_t device_fitted_at_ns;  /* device time of the newest kept sample */
    uint64_t host_first_ns;        /* midpoint of the oldest kept sample: the fitted span is
                                      [host_first_ns, fitted_at_ns] */
    uint64_t device_first_ns;      /* device time of the oldest kept sample */
    double bracket_ns;             /* bound term from read positions inside brackets (see header comment) */
    double spread_ns;              /* bound term from residuals the brackets do not explain and the
                                      statistical error of the line */
    double drift_se_ppm;           /* standard error of drift_ppm (from the kept residuals) */
    double drift_k;                /* multiplier of drift_se_ppm in the statistical part of drift_bound_ppm */
    double drift_bound_ppm;        /* bound on |drift_ppm - true drift| at the fit: k * drift_se_ppm plus what
                                      read positions can do to the slope, capped by the prior (header comment);
                                      the extrapolation grows by this plus max_drift_ppm */
} kt_clock_model_t;

/* Fit a model. KT_ESAMPLES under KT_CLOCK_MIN_SAMPLES samples (or when a robust strategy keeps fewer than 5);
 * KT_EINVAL on bad input (NULL pointers, brackets with after < before, a strategy or host domain out of range,
 * device reads that never advance); KT_ENOMEM if scratch memory is unavailable. Work is O(n) for BASIC and
 * WEIGHTED, O(n log n + 8192) for ROBUST, O(256 n) for RANSAC. */
KT_API int kt_clock_fit(const kt_clock_sample_t *samples, size_t n, kt_fit_strategy_t strategy,
                        kt_clock_domain_t host_domain, kt_clock_model_t *out);

/* A model for a device clock that IS host domain `domain` (detected by kt_clock_detect_domain): offset 0,
 * drift 0, error bound resolution_ns (at least 1), never stale through extrapolation (max_drift_ppm 0). */
KT_API int kt_clock_model_identity(kt_clock_domain_t domain, uint64_t resolution_ns, kt_clock_model_t *out);

/* Full offset host - device at the reference point, in ns (host_ref - device_ref + offset_ns, rounded). */
KT_API int64_t kt_clock_model_offset_ns(const kt_clock_model_t *m);

/* Map a device time to the model's host domain, with the uncertainty at that point (grows with the distance
 * from the fitted span). uncertainty_ns may be NULL. */
KT_API int kt_clock_to_host(const kt_clock_model_t *m, uint64_t device_ns, uint64_t *host_ns,
                            uint64_t *uncertainty_ns);
/* The inverse: host time (model's domain) to device time, uncertainty in device ns. */
KT_API int kt_clock_to_device(const kt_clock_model_t *m, uint64_t host_ns, uint64_t *device_ns,
                              uint64_t *uncertainty_ns);
/* Error bound of the model if used at host time now_ns (model's domain). */
KT_API double kt_clock_error_at(const kt_clock_model_t *m, uint64_t now_ns);
/* Non-zero when the bound at now_ns exceeds max_error_ns or the model is older than max_age_ns (0 = no limit). */
KT_API int kt_clock_is_stale(const kt_clock_model_t *m, uint64_t now_ns, double max_error_ns, uint64_t max_age_ns);

/* Fill the clock fields of a device-info record: clock_domain gets the name of `device_domain` (the detected
 * time base, kt_clock_domain_name), and from the model (may be NULL) error_bound_ns (the bound at the fit;
 * backends publish the bound at the time of publishing), drift_ppm and model_samples (the samples the fit
 * kept, its inliers). Other fields (resolution, frequency, valid bits, name) are the backend's. */
KT_API void kt_clock_model_describe(const kt_clock_model_t *m, kt_clock_domain_t device_domain,
                                    kt_device_info_t *info);

/* Extend a timestamp that keeps only its low valid_bits bits (e.g. Vulkan timestampValidBits) to the 64-bit
 * value nearest to `near` (a recent full value of the same counter). valid_bits 0 or >= 64 returns raw. */
KT_API uint64_t kt_clock_extend(uint64_t near, uint64_t raw, uint32_t valid_bits);

/* ---------------------------------------------------------------------------------------------------
 * Host domains
 * ------------------------------------------------------------------------------------------------- */

KT_API uint64_t kt_clock_now(kt_clock_domain_t domain); /* ns; 0 for DEVICE/UNKNOWN */
KT_API const char *kt_clock_domain_name(kt_clock_domain_t domain); /* "CLOCK_MONOTONIC_RAW", ..., "device",
                                                                       "unknown" */
/* Resolution of a host domain from clock_getres (0 for DEVICE/UNKNOWN). */
KT_API uint64_t kt_clock_domain_resolution_ns(kt_clock_domain_t domain);
/* Convert a host time between domains using sampled models of MONOTONIC and REALTIME against
 * MONOTONIC_RAW (conversions between two non-RAW domains go through RAW and add both bounds). The models are
 * process-wide trackers (thread-safe) over the last 10 s: a call refreshes first when the model's bound at the
 * current time exceeds 1 us and the last refresh is over 1 ms old, or its newest sample is over 1 s old; a
 * refresh is 8 bracketed reads (the 2 tightest kept) plus one WEIGHTED fit of at most 64 samples (a few us).
 * The rate between domains is assumed to change by under 500 ppm (the kernel's NTP frequency limit) outside the
 * sampled span, so times far from any refresh carry a bound growing by 1 us per ms; a CLOCK_REALTIME step is
 * detected and restarts the model. KT_EINVAL for DEVICE/UNKNOWN domains. uncertainty_ns may be NULL. */
KT_API int kt_clock_domain_convert(uint64_t t_ns, kt_clock_domain_t from, kt_clock_domain_t to, uint64_t *out_ns,
                                   uint64_t *uncertainty_ns);
/* The current model of host domain `domain` (as a "device") against MONOTONIC_RAW, refreshed as by
 * kt_clock_domain_convert at the current time: its drift_ppm is the domain's rate against RAW (NTP slew) and
 * kt_clock_model_offset_ns() the offset. KT_DOMAIN_MONOTONIC_RAW gives the identity model. */
KT_API int kt_clock_domain_model(kt_clock_domain_t domain, kt_clock_model_t *out);

/* Decide which host domain a device clock follows. read_device returns one device timestamp in ns (0 on
 * failure); the helper takes 16 reads, each bracketed by all three host domains at once (16 device reads in
 * all), takes per domain the median offset (device - bracket midpoint) of the tighter half, and picks the
 * domain with the smallest |offset| that is within tolerance_ns (0 = default 1 ms), else KT_DOMAIN_DEVICE. offset_ns (optional) gets the offset to the chosen domain, or to
 * MONOTONIC_RAW for KT_DOMAIN_DEVICE. Where two host domains are closer to each other than the tolerance
 * (MONOTONIC and RAW right after boot), the nearer one wins. KT_EBACKEND when reads keep failing. */
typedef uint64_t (*kt_device_clock_read_cb)(void *user);
KT_API int kt_clock_detect_domain(kt_device_clock_read_cb read_device, void *user, uint64_t tolerance_ns,
                                  kt_clock_domain_t *domain, int64_t *offset_ns);

/* Take n bracketed samples of a device clock against a host domain (bounded work: exactly n reads plus at
 * most n retries for reads that fail, i.e. return 0). KT_EBACKEND when the retries run out. */
KT_API int kt_clock_sample(kt_device_clock_read_cb read_device, void *user, kt_clock_domain_t host_domain,
                           kt_clock_sample_t *out, size_t n);

/* ---------------------------------------------------------------------------------------------------
 * The host timeline's own counter (docs/host-clock.md)
 *
 * kt_now_ns(), zones, kt_cpu_dispatch_2d and backends' host brackets read the cheapest trustworthy counter: the
 * TSC on x86-64 when it is invariant (CPUID 0x80000007 EDX bit 8, Linux's constant_tsc and nonstop_tsc, the
 * kernel's clocksource is tsc) and agrees across every CPU the process may run on; CNTVCT_EL0 on aarch64 when
 * the clocksource is arch_sys_counter; else clock_gettime(CLOCK_MONOTONIC_RAW). KTIMING_CLOCK=auto|tsc|
 * monotonic_raw overrides ("tsc" means the CPU counter on either architecture). Counter ticks become
 * CLOCK_MONOTONIC_RAW ns by a multiply-shift fitted with a kt_clock_tracker_t (WEIGHTED) on brackets of
 * clock_gettime around the counter, refreshed by the first read after the refresh point (2 ms after start,
 * then as long as the fitted span, at most 1 s); a refit slews onto the new model (no step back in time).
 * ------------------------------------------------------------------------------------------------- */

/* Facts about the host counter in force. */
typedef struct kt_host_clock_info_t {
    char counter[32];        /* "tsc", "cntvct" or "CLOCK_MONOTONIC_RAW" (clock_gettime) */
    char reason[192];        /* why this counter: the checks passed, the override, or why the counter fell back */
    uint64_t frequency_hz;   /* fitted counter rate against CLOCK_MONOTONIC_RAW; 1e9 for clock_gettime */
    uint64_t nominal_hz;     /* the rate the model is relative to (start-up estimate, CNTFRQ_EL0 on aarch64) */
    double drift_ppm;        /* fitted rate against nominal_hz (> 0: counter fast) */
    double drift_bound_ppm;  /* bound on drift_ppm's error */
    double error_bound_ns;   /* bound on |converted - CLOCK_MONOTONIC_RAW| of any timestamp converted by the
                                current model (until its next refresh, including the slew onto it), plus 1 ns
                                of rounding; 0 for clock_gettime */
    uint32_t model_samples;  /* samples in the current model */
    double span_ms;          /* host time the current model's samples span */
    uint64_t fits;           /* models fitted since start */
} kt_host_clock_info_t;

/* Fill *out (initialising ktiming if needed). KT_EINVAL when out is NULL. */
KT_API int kt_host_clock_info(kt_host_clock_info_t *out);

/* ---------------------------------------------------------------------------------------------------
 * Periodic refit: a tracker keeps a ring of recent samples of one device clock and a current model
 *
 * Use from a backend:
 *     kt_clock_tracker_desc_t d = {0};
 *     d.read_device = my_read; d.user = dev;               // optional: lets the tracker sample by itself
 *     kt_clock_tracker_t *t;
 *     kt_clock_tracker_create(KT_FIT_ROBUST, KT_DOMAIN_MONOTONIC_RAW, &d, &t);
 *     ...
 *     kt_clock_tracker_poll(t, kt_now_ns());                // cheap unless a refit is due; bounded when it is
 *     kt_clock_tracker_to_host(t, stamp, &host, &unc);      // map with the current model
 *     ...
 *     kt_clock_tracker_destroy(t);
 * Backends that get samples another way (clGetDeviceAndHostTimer, VK_EXT_calibrated_timestamps) push them
 * with kt_clock_tracker_add() instead of giving read_device. Every call is thread-safe (one mutex per
 * tracker; read_device and the fit itself run without it held, so mapping never waits for a device read or a
 * fit; concurrent polls sample once). now_ns is in the tracker's host domain.
 * ------------------------------------------------------------------------------------------------- */

/* Tracker tunables: zero-initialise; every 0 means the default given. */
typedef struct kt_clock_tracker_desc_t {
    kt_device_clock_read_cb read_device; /* device read for poll(); NULL = samples only come from add() */
    void *user;                          /* passed to read_device */
    uint32_t capacity;                   /* samples kept in the ring; 0 = 256 (min KT_CLOCK_MIN_SAMPLES) */
    uint32_t initial_samples;            /* bracketed reads of the first poll; 0 = 32 (min 10) */
    uint32_t batch;                      /* bracketed reads per later poll; 0 = 8 */
    uint32_t keep;                       /* tightest of each batch pushed to the ring; 0 = 2 (<= batch) */
    uint32_t refit_every;                /* refit after this many new samples; 0 = 16 */
    uint64_t refit_interval_ns;          /* poll samples and refits when the newest sample is older; 0 = 1 s.
                                            A model spanning less is refreshed sooner: once the newest sample
                                            is as old as the span (at least 100 ms), so the second fit comes
                                            ~100 ms after the first and the span doubles until this cap */
    uint64_t min_poll_interval_ns;       /* polls driven by max_error_ns come at most this often; 0 = 1 ms */
    uint64_t window_ns;                  /* samples older than this (host time) leave the ring; 0 = 120 s */
    double max_error_ns;                 /* poll samples when the bound at now exceeds this; 0 = no limit */
    double max_drift_ppm;                /* max_drift_ppm of the fitted models; 0 = 10 */
    double drift_prior_ppm;              /* |drift| is known to be below this: where a fit's drift interval
                                            reaches past it (short spans), the drift comes from the overlap and
                                            the bound from the data (cut at KT_CLOCK_DRIFT_LIMIT_PPM or this,
                                            the larger); 0 = KT_CLOCK_DEFAULT_DRIFT_PRIOR_PPM (500), negative =
                                            none */
    uint64_t step_ns;                    /* a new sample this far (beyond the bound) from the model means the
                                            clock was stepped or reset: the ring restarts; 0 = 1 ms */
} kt_clock_tracker_desc_t;

typedef struct kt_clock_tracker_t kt_clock_tracker_t;

/* Create a tracker fitting with `strategy` against `host_domain`. desc may be NULL (all defaults). No sampling
 * happens here. KT_EINVAL / KT_ENOMEM. */
KT_API int kt_clock_tracker_create(kt_fit_strategy_t strategy, kt_clock_domain_t host_domain,
                                   const kt_clock_tracker_desc_t *desc, kt_clock_tracker_t **out);
KT_API void kt_clock_tracker_destroy(kt_clock_tracker_t *t);
/* Push samples taken elsewhere (oldest first); refits when refit_every new samples arrived, when the model is
 * older than the refresh interval (refit_interval_ns, shorter for young models), or when none exists yet and the ring holds enough. Returns 0 or the fit's
 * error (the previous model stays in use); KT_EINVAL for a bracket with after < before (nothing pushed). */
KT_API int kt_clock_tracker_add(kt_clock_tracker_t *t, const kt_clock_sample_t *samples, size_t n);
/* If a refresh is due at host time now_ns (no model yet, newest sample older than the refresh interval, or the
 * bound at now above max_error_ns and min_poll_interval_ns elapsed), take one batch through read_device
 * (initial_samples for the first, else batch reads keeping the `keep` tightest; failed reads retried at most
 * once each) and refit. Returns 1 when it refreshed, 0 when nothing was due, negative KT_E* on failure
 * (KT_ESTATE when a refresh is due but there is no read_device). */
KT_API int kt_clock_tracker_poll(kt_clock_tracker_t *t, uint64_t now_ns);
/* Force a refit of the ring now (bounded: one fit over at most `capacity` samples). */
KT_API int kt_clock_tracker_refit(kt_clock_tracker_t *t);
/* Copy the current model. KT_ESTATE when there is none yet. */
KT_API int kt_clock_tracker_model(kt_clock_tracker_t *t, kt_clock_model_t *out);
/* Map with the current model (KT_ESTATE when there is none yet). */
KT_API int kt_clock_tracker_to_host(kt_clock_tracker_t *t, uint64_t device_ns, uint64_t *host_ns,
                                    uint64_t *uncertainty_ns);
/* Counters for reports and tests. */
typedef struct kt_clock_tracker_stats_t {
    uint64_t fits;       /* successful fits */
    uint64_t fit_errors; /* fits that failed (previous model kept) */
    uint64_t polls;      /* polls that sampled */
    uint64_t reads;      /* device reads done by polls */
    uint64_t resets;     /* ring restarts after a detected step */
    uint32_t ring;       /* samples in the ring now */
} kt_clock_tracker_stats_t;
KT_API void kt_clock_tracker_stats(kt_clock_tracker_t *t, kt_clock_tracker_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_CLOCK_MODEL_H */
