/* ktiming/clock.h — clock models: place device timestamps on the host timeline with a stated error bound.
 *
 * A device clock is sampled as {device_ns, host_before_ns, host_after_ns}: one device read bracketed by two
 * host reads in a known host domain. Fitting turns samples into a linear model
 *     host = host_ref + (device - device_ref) * (1 + drift_ppm * 1e-6) + offset
 * fitted on centred values (raw counts near 1e18 keep their precision), with an error bound that covers the
 * bracket half-width, the residual spread and the extrapolation since the fit. Pure math: no driver calls,
 * so everything here is testable with synthetic clocks.
 */
#ifndef KTIMING_CLOCK_H
#define KTIMING_CLOCK_H

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

/* Fitting strategies (seed 002). */
typedef enum kt_fit_strategy_t {
    KT_FIT_BASIC = 0,    /* least squares on bracket midpoints */
    KT_FIT_WEIGHTED = 1, /* weights from bracket width: tight brackets count more */
    KT_FIT_ROBUST = 2,   /* robust to gross outliers */
    KT_FIT_RANSAC = 3    /* deterministic, seeded RANSAC */
} kt_fit_strategy_t;

/* One device read bracketed by two host reads. */
typedef struct kt_clock_sample_t {
    uint64_t device_ns;      /* device timestamp, already scaled to ns */
    uint64_t host_before_ns; /* host read just before the device read */
    uint64_t host_after_ns;  /* host read just after */
} kt_clock_sample_t;

#define KT_CLOCK_MIN_SAMPLES 10

/* A fitted device-clock model. */
typedef struct kt_clock_model_t {
    kt_clock_domain_t host_domain; /* domain of the host reads the model maps to */
    kt_fit_strategy_t strategy;    /* how it was fitted */
    uint64_t device_ref_ns;        /* centring point on the device clock */
    uint64_t host_ref_ns;          /* host time matching device_ref_ns, before offset */
    double offset_ns;              /* host - device at the reference, after centring (see header comment) */
    double drift_ppm;              /* device rate error against the host: + means device runs fast */
    double error_ns;               /* error bound at fit time (bracket half-width + residual spread) */
    double residual_ns;            /* RMS fit residual over the inliers */
    double max_drift_ppm;          /* assumed worst drift change since the fit, for extrapolation growth */
    uint32_t samples;              /* samples given */
    uint32_t inliers;              /* samples the fit kept */
    uint64_t fitted_at_ns;         /* host time (host_domain) of the fit: the newest sample's midpoint */
    uint64_t device_fitted_at_ns;  /* device time of the newest sample */
} kt_clock_model_t;

/* Fit a model. KT_ESAMPLES under KT_CLOCK_MIN_SAMPLES samples, KT_EINVAL on bad input (brackets with
 * after < before, NULL pointers). */
KT_API int kt_clock_fit(const kt_clock_sample_t *samples, size_t n, kt_fit_strategy_t strategy,
                        kt_clock_domain_t host_domain, kt_clock_model_t *out);

/* Map a device time to the model's host domain, with the uncertainty at that point (grows with the distance
 * from the fitted span). */
KT_API int kt_clock_to_host(const kt_clock_model_t *m, uint64_t device_ns, uint64_t *host_ns,
                            uint64_t *uncertainty_ns);
/* The inverse. */
KT_API int kt_clock_to_device(const kt_clock_model_t *m, uint64_t host_ns, uint64_t *device_ns,
                              uint64_t *uncertainty_ns);
/* Error bound of the model if used at host time now_ns. */
KT_API double kt_clock_error_at(const kt_clock_model_t *m, uint64_t now_ns);
/* Non-zero when the bound at now_ns exceeds max_error_ns or the model is older than max_age_ns (0 = no limit). */
KT_API int kt_clock_is_stale(const kt_clock_model_t *m, uint64_t now_ns, double max_error_ns, uint64_t max_age_ns);

/* Host domains. */
KT_API uint64_t kt_clock_now(kt_clock_domain_t domain); /* ns; 0 for DEVICE/UNKNOWN */
KT_API const char *kt_clock_domain_name(kt_clock_domain_t domain);
/* Convert a host time between domains using sampled models of the domains against each other (refreshed
 * when stale), so the MONOTONIC-vs-RAW slew is modelled. */
KT_API int kt_clock_domain_convert(uint64_t t_ns, kt_clock_domain_t from, kt_clock_domain_t to, uint64_t *out_ns,
                                   uint64_t *uncertainty_ns);

/* Decide which host domain a device clock follows. read_device returns one device timestamp in ns (0 on
 * failure); the helper brackets reads with each host domain and picks the domain whose offset is within
 * tolerance_ns (0 = default 1 ms), else KT_DOMAIN_DEVICE. offset_ns (optional) gets the offset to the chosen
 * domain. */
typedef uint64_t (*kt_device_clock_read_cb)(void *user);
KT_API int kt_clock_detect_domain(kt_device_clock_read_cb read_device, void *user, uint64_t tolerance_ns,
                                  kt_clock_domain_t *domain, int64_t *offset_ns);

/* Take n bracketed samples of a device clock against a host domain (bounded work: exactly n reads plus at
 * most n retries for reads that fail). */
KT_API int kt_clock_sample(kt_device_clock_read_cb read_device, void *user, kt_clock_domain_t host_domain,
                           kt_clock_sample_t *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_CLOCK_H */
