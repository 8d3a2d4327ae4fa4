/* model.c — using a fitted clock model: mapping both ways, error bound at a point, staleness, descriptions.
 * Calls nothing else in src/calibrate (domain.c and tracker.c build on it, not the other way round). */
#include "calib_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Bound growth per ns outside the fitted span (dimensionless). */
static double growth(const kt_clock_model_t *m)
{
    /* fitted models carry drift_bound_ppm; one built by hand may carry only the standard error */
    double d = m->drift_bound_ppm > 0 ? m->drift_bound_ppm : m->drift_k * m->drift_se_ppm;
    double g = (d + m->max_drift_ppm) * 1e-6;
    return g > 0 && isfinite(g) ? g : (g > 0 ? INFINITY : 0.0);
}

/* Distance of t from [lo, hi] in ns (0 inside). */
static double outside(uint64_t t, uint64_t lo, uint64_t hi)
{
    if (kt__diff(t, lo) < 0) return (double)(lo - t);
    if (kt__diff(t, hi) > 0) return (double)(t - hi);
    return 0.0;
}

static uint64_t to_u64_ceil(double v)
{
    if (!(v > 0)) return 0;
    if (v >= 1.8e19) return UINT64_MAX;
    return (uint64_t)ceil(v);
}

static int model_ok(const kt_clock_model_t *m)
{
    return m && isfinite(m->offset_ns) && isfinite(m->drift_ppm) && m->drift_ppm > -1e6 && isfinite(m->error_ns);
}

int kt_clock_to_host(const kt_clock_model_t *m, uint64_t device_ns, uint64_t *host_ns, uint64_t *uncertainty_ns)
{
    if (!model_ok(m) || !host_ns) return KT_EINVAL;
    double D = m->drift_ppm * 1e-6;
    double c = -D / (1.0 + D); /* host ns per device ns minus 1 */
    int64_t dx = kt__diff(device_ns, m->device_ref_ns);
    double corr = c * (double)dx + m->offset_ns;
    if (!(fabs(corr) < 4e18)) return KT_EINVAL;
    *host_ns = m->host_ref_ns + (uint64_t)dx + (uint64_t)(int64_t)llround(corr);
    if (uncertainty_ns) {
        double dist = outside(device_ns, m->device_first_ns, m->device_fitted_at_ns);
        *uncertainty_ns = to_u64_ceil(m->error_ns + dist * growth(m));
    }
    return 0;
}

int kt_clock_to_device(const kt_clock_model_t *m, uint64_t host_ns, uint64_t *device_ns, uint64_t *uncertainty_ns)
{
    if (!model_ok(m) || !device_ns) return KT_EINVAL;
    double D = m->drift_ppm * 1e-6;
    int64_t dy = kt__diff(host_ns, m->host_ref_ns);
    /* x = (dy - offset)(1 + D) = dy + dy D - offset (1 + D) */
    double corr = (double)dy * D - m->offset_ns * (1.0 + D);
    if (!(fabs(corr) < 4e18)) return KT_EINVAL;
    *device_ns = m->device_ref_ns + (uint64_t)dy + (uint64_t)(int64_t)llround(corr);
    if (uncertainty_ns) {
        double dist = outside(host_ns, m->host_first_ns, m->fitted_at_ns);
        *uncertainty_ns = to_u64_ceil((m->error_ns + dist * growth(m)) * (1.0 + D));
    }
    return 0;
}

double kt_clock_error_at(const kt_clock_model_t *m, uint64_t now_ns)
{
    if (!model_ok(m)) return INFINITY;
    return m->error_ns + outside(now_ns, m->host_first_ns, m->fitted_at_ns) * growth(m);
}

int kt_clock_is_stale(const kt_clock_model_t *m, uint64_t now_ns, double max_error_ns, uint64_t max_age_ns)
{
    if (!model_ok(m)) return 1;
    if (max_error_ns > 0 && kt_clock_error_at(m, now_ns) > max_error_ns) return 1;
    if (max_age_ns > 0 && kt__diff(now_ns, m->fitted_at_ns) > 0 && now_ns - m->fitted_at_ns > max_age_ns)
        return 1;
    return 0;
}

int kt_clock_model_identity(kt_clock_domain_t domain, uint64_t resolution_ns, kt_clock_model_t *out)
{
    clockid_t id;
    if (!out || kt__domain_clockid(domain, &id) != 0) return KT_EINVAL;
    memset(out, 0, sizeof(*out));
    uint64_t now = kt__clock_read(id);
    out->host_domain = domain;
    out->strategy = KT_FIT_BASIC;
    out->device_ref_ns = now;
    out->host_ref_ns = now;
    out->bracket_ns = resolution_ns ? (double)resolution_ns : 1.0;
    out->error_ns = out->bracket_ns;
    out->fitted_at_ns = now;
    out->device_fitted_at_ns = now;
    out->host_first_ns = now;
    out->device_first_ns = now;
    out->drift_k = 3.0;
    return 0;
}

int64_t kt_clock_model_offset_ns(const kt_clock_model_t *m)
{
    if (!model_ok(m)) return 0;
    return kt__diff(m->host_ref_ns, m->device_ref_ns) + (int64_t)llround(m->offset_ns);
}

const char *kt_clock_domain_name(kt_clock_domain_t domain)
{
    switch (domain) {
    case KT_DOMAIN_MONOTONIC_RAW: return "CLOCK_MONOTONIC_RAW";
    case KT_DOMAIN_MONOTONIC: return "CLOCK_MONOTONIC";
    case KT_DOMAIN_REALTIME: return "CLOCK_REALTIME";
    case KT_DOMAIN_DEVICE: return "device";
    default: return "unknown";
    }
}

void kt_clock_model_describe(const kt_clock_model_t *m, kt_clock_domain_t device_domain, kt_device_info_t *info)
{
    if (!info) return;
    const char *name = kt_clock_domain_name(device_domain);
    snprintf(info->clock_domain, sizeof(info->clock_domain), "%s", name);
    if (!model_ok(m)) return;
    info->error_bound_ns = to_u64_ceil(kt_clock_error_at(m, m->fitted_at_ns)); /* at the fit; publishers refresh
                                                                                 it to "now" */
    info->drift_ppm = m->drift_ppm;
    info->model_samples = m->inliers; /* the samples the fit kept: one meaning for every backend */
}

uint64_t kt_clock_extend(uint64_t near, uint64_t raw, uint32_t valid_bits)
{
    if (valid_bits == 0 || valid_bits >= 64) return raw;
    uint64_t period = (uint64_t)1 << valid_bits, mask = period - 1, half = period / 2;
    uint64_t cand = (near & ~mask) | (raw & mask);
    if (cand > near && cand - near > half && cand >= period)
        cand -= period;
    else if (cand < near && near - cand > half && cand <= UINT64_MAX - period)
        cand += period;
    return cand;
}
