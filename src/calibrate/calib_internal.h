/* calib_internal.h — internal: shared pieces of the calibration sources (fit options, host reads, medians). */
#ifndef KT_CALIB_INTERNAL_H
#define KT_CALIB_INTERNAL_H

#include <ktiming/clock_model.h>

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Fit with an optional prior on |drift| (ppm, 0 = none) and a hard limit (ppm, 0 = none): the data's drift
 * interval (drift +- its bound) is cut at +-limit; where it reaches past +-prior, the drift becomes the overlap's
 * value nearest 0, and the bound reaches the cut interval's far edge (fit.c, finish). kt_clock_fit uses
 * KT_CLOCK_DEFAULT_DRIFT_PRIOR_PPM and KT_CLOCK_DRIFT_LIMIT_PPM. */
int kt__clock_fit_ex(const kt_clock_sample_t *samples, size_t n, kt_fit_strategy_t strategy,
                     kt_clock_domain_t host_domain, double drift_prior_ppm, double drift_limit_ppm,
                     kt_clock_model_t *out);
/* Set a tracker's hard drift limit (default KT_CLOCK_DRIFT_LIMIT_PPM, never below its prior): for clocks whose
 * rate is known to stay within the prior (host domains: the kernel caps NTP slew). */
void kt__clock_tracker_set_limit(kt_clock_tracker_t *t, double limit_ppm);

/* k-th smallest of v[0..n) (reorders v). n > 0, k < n. */
double kt__select(double *v, size_t n, size_t k);
/* Median of v[0..n) (reorders v); mean of the two middle values for even n. */
double kt__median(double *v, size_t n);

/* clockid_t of a host domain, -1 for DEVICE/UNKNOWN. */
static inline int kt__domain_clockid(kt_clock_domain_t d, clockid_t *id)
{
    switch (d) {
    case KT_DOMAIN_MONOTONIC_RAW: *id = CLOCK_MONOTONIC_RAW; return 0;
    case KT_DOMAIN_MONOTONIC: *id = CLOCK_MONOTONIC; return 0;
    case KT_DOMAIN_REALTIME: *id = CLOCK_REALTIME; return 0;
    default: return -1;
    }
}

/* Read a host clock in ns (no validation: id from kt__domain_clockid). */
static inline uint64_t kt__clock_read(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Signed difference a - b of two uint64 times (exact while |a - b| < 2^63). */
static inline int64_t kt__diff(uint64_t a, uint64_t b) { return (int64_t)(a - b); }

#endif
