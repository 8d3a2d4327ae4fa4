/* fit.c — fitting device-clock models from bracketed samples: BASIC, WEIGHTED, ROBUST (Theil-Sen), RANSAC. */
#include "calib_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------
 * Selection (medians)
 * ------------------------------------------------------------------------------------------------- */

double kt__select(double *v, size_t n, size_t k)
{
    /* Wirth's selection: afterwards v[0..k) <= v[k] <= v(k..n) */
    ptrdiff_t l = 0, m = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
    while (l < m) {
        double x = v[kk];
        ptrdiff_t i = l, j = m;
        do {
            while (v[i] < x) i++;
            while (x < v[j]) j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        } while (i <= j);
        if (j < kk) l = i;
        if (kk < i) m = j;
    }
    return v[kk];
}

double kt__median(double *v, size_t n)
{
    double hi = kt__select(v, n, n / 2);
    if (n % 2) return hi;
    /* the lower middle is the largest value left of n/2 after selection */
    double lo = v[0];
    for (size_t i = 1; i < n / 2; i++)
        if (v[i] > lo) lo = v[i];
    return 0.5 * (lo + hi);
}

/* ---------------------------------------------------------------------------------------------------
 * Fit data: centred samples and the weighted least-squares core every strategy ends with
 * ------------------------------------------------------------------------------------------------- */

/* Centred samples of one fit and its scratch. z = (host midpoint - host_ref) - (device - device_ref): the
 * host-minus-device residual is small, so slope 1 + c is fitted as c on well-conditioned numbers. */
typedef struct fit_data_t {
    size_t n;            /* samples */
    const kt_clock_sample_t *s; /* the caller's samples */
    uint64_t dref;       /* device centring point */
    uint64_t href;       /* host centring point */
    double *x;           /* device - dref */
    double *z;           /* host midpoint - href - x */
    double *w;           /* bracket half-width */
    double *v;           /* weight of each sample in the final least squares */
    double *r;           /* residual z - line */
    double *tmp;         /* n scratch values for medians */
    unsigned char *keep; /* 1 = sample used by the fit */
} fit_data_t;

/* A line z = a + c x on centred values. */
typedef struct line_t {
    double a; /* z at x = 0 (device_ref) */
    double c; /* slope: host ns per device ns minus 1 */
} line_t;

/* Weighted least squares over kept samples: the line plus what the bound needs. */
typedef struct wls_t {
    line_t line;  /* fitted line */
    double V;     /* sum of weights */
    double xbar;  /* weighted mean of x */
    double sxx;   /* weighted sum of squared x deviations */
    size_t m;     /* kept samples */
} wls_t;

static int wls_fit(const fit_data_t *f, wls_t *out)
{
    double V = 0, sx = 0, sz = 0;
    size_t m = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (!f->keep[i]) continue;
        V += f->v[i];
        sx += f->v[i] * f->x[i];
        sz += f->v[i] * f->z[i];
        m++;
    }
    if (m < 2 || !(V > 0)) return -1;
    double xbar = sx / V, zbar = sz / V, sxx = 0, sxz = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (!f->keep[i]) continue;
        double dx = f->x[i] - xbar;
        sxx += f->v[i] * dx * dx;
        sxz += f->v[i] * dx * (f->z[i] - zbar);
    }
    if (!(sxx > 0)) return -1;
    out->line.c = sxz / sxx;
    out->line.a = zbar - out->line.c * xbar;
    out->V = V;
    out->xbar = xbar;
    out->sxx = sxx;
    out->m = m;
    return 0;
}

static void residuals(fit_data_t *f, line_t l)
{
    for (size_t i = 0; i < f->n; i++) f->r[i] = f->z[i] - (l.a + l.c * f->x[i]);
}

/* (1 - leverage)^2 of sample i: dividing squared residuals by it (HC3) undoes their shrinkage at the ends of
 * small fits, where the line is pulled towards each sample. */
static double lev1(const fit_data_t *f, const wls_t *q, size_t i)
{
    double h = f->v[i] / q->V + f->v[i] * (f->x[i] - q->xbar) * (f->x[i] - q->xbar) / q->sxx;
    double one = 1.0 - h;
    if (one < 0.05) one = 0.05;
    return one * one;
}

/* The two bound terms at x, from the fit's coefficients c_i(x) (prediction at x = sum c_i(x) z_i):
 * brk = sum |c_i(x)| w_i, the worst error bracket positions can cause; var = sum c_i(x)^2 r_i^2 / (1-h_i)^2,
 * the heteroscedasticity-consistent (HC3) variance of the prediction from the residuals. With mean_only, the
 * coefficients of the weighted mean (the line's value at xbar) whatever x is. */
static void bound_terms(const fit_data_t *f, const wls_t *q, double x, int mean_only, double *brk, double *var)
{
    double b = 0, v = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (!f->keep[i]) continue;
        double ci = f->v[i] / q->V;
        if (!mean_only) ci += (x - q->xbar) * f->v[i] * (f->x[i] - q->xbar) / q->sxx;
        b += fabs(ci) * f->w[i];
        v += ci * ci * f->r[i] * f->r[i] / lev1(f, q, i);
    }
    *brk = b;
    *var = v;
}

/* Turn the final kept set and weights into the model (bound terms, span, drift and the bound on its error).
 *
 * The slope's error has two parts: the statistical one (k HC3 standard errors, from the residuals) and the one
 * read positions inside their brackets can cause, sum_i |b_i| w_i (b_i the slope coefficients). Residuals
 * cannot reveal the second: reads that sit late in their brackets early in the batch and early later on (a
 * warming-up path) tilt the line while the residuals stay small. Over a long span it is negligible; over the
 * few ms of a first batch it is hundreds to thousands of ppm, which is what the extrapolation must carry.
 *
 * The data's interval [drift - u, drift + u] is first cut at +-limit_ppm (no clock is further off; ignored when
 * the interval lies entirely outside). With a prior (|drift| <= prior_ppm, what device oscillators usually
 * satisfy), when the interval reaches past [-prior, prior], the drift becomes the value of their overlap nearest
 * 0: it shrinks towards 0 only as far as the data allow. The bound always reaches the far edge of the (cut) data
 * interval, so a clock outside the prior is still contained; with limit = prior (host domains, whose rate the
 * kernel bounds) this is the overlap's far edge. */
/* The slope's error: its HC3 standard error, var(c) = sum b_i^2 r_i^2 / (1-h_i)^2, and the brackets' part
 * sum |b_i| w_i. */
static void slope_error(const fit_data_t *f, const wls_t *q, double *se_c, double *brk_c)
{
    double var_c = 0;
    *brk_c = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (!f->keep[i]) continue;
        double bi = f->v[i] * (f->x[i] - q->xbar) / q->sxx;
        var_c += bi * bi * f->r[i] * f->r[i] / lev1(f, q, i);
        *brk_c += fabs(bi) * f->w[i];
    }
    *se_c = sqrt(var_c);
}

/* The fitted drift and what the prior and the limit make of it. */
typedef struct drift_t {
    double drift;  /* ppm */
    double bound;  /* ppm, either side */
    double c;      /* the line's slope (host ns per device ns, minus 1) */
    double g_c;    /* bound on the slope's error */
} drift_t;

/* Applies the limit (no clock is that far off: the data's interval ends there) and the prior (the estimate is
 * the rate nearest 0 that both the data and the prior allow: device oscillators cluster near the host's rate,
 * and a short batch's noise then does not stretch or shrink durations). Returns 1 when either changed d. */
static int constrain_drift(drift_t *d, double prior_ppm, double limit_ppm)
{
    double dlo = d->drift - d->bound, dhi = d->drift + d->bound; /* the data's own interval */
    if (limit_ppm > 0 && dlo < limit_ppm && dhi > -limit_ppm) {
        if (dlo < -limit_ppm) dlo = -limit_ppm;
        if (dhi > limit_ppm) dhi = limit_ppm;
    }
    double est = d->drift, lo = d->drift - d->bound, hi = d->drift + d->bound;
    if (prior_ppm > 0 && lo < prior_ppm && hi > -prior_ppm && (lo < -prior_ppm || hi > prior_ppm)) {
        double plo = lo > -prior_ppm ? lo : -prior_ppm, phi = hi < prior_ppm ? hi : prior_ppm;
        est = plo > 0 ? plo : phi < 0 ? phi : 0.0;
    }
    if (est == d->drift && dlo <= lo && dhi >= hi)
        return 0;
    /* the bound still reaches both ends of the data's interval (within the limit), not only the prior's: the
     * prior may be wrong for this clock (a 2,000 ppm oscillator), and then only the data are honest */
    d->drift = est;
    d->bound = dhi - est > est - dlo ? dhi - est : est - dlo;
    double D = est * 1e-6, L = (dlo < est ? dlo : est) * 1e-6;
    d->c = -D / (1.0 + D);
    /* |dc| = |dD| / ((1 + D1)(1 + D2)) <= |dD| / (1 + L)^2 for rates in [L, dhi] */
    d->g_c = d->bound * 1e-6 / ((1.0 + L) * (1.0 + L));
    return 1;
}

/* The kept samples at the ends of the span (smallest and largest x), and the largest residual beyond its
 * bracket. */
static void span_ends(const fit_data_t *f, size_t *ilo, size_t *ihi, double *excess)
{
    *ilo = *ihi = SIZE_MAX;
    *excess = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (!f->keep[i]) continue;
        if (*ilo == SIZE_MAX || f->x[i] < f->x[*ilo]) *ilo = i;
        if (*ihi == SIZE_MAX || f->x[i] > f->x[*ihi]) *ihi = i;
        double ex = fabs(f->r[i]) - f->w[i];
        if (ex > *excess) *excess = ex;
    }
}

static void fill_model(const fit_data_t *f, const wls_t *q, size_t ilo, size_t ihi, kt_clock_model_t *out)
{
    out->device_ref_ns = f->dref;
    out->host_ref_ns = f->href;
    out->offset_ns = q->line.a;
    out->max_drift_ppm = KT_CLOCK_DEFAULT_MAX_DRIFT_PPM;
    out->samples = (uint32_t)(f->n > UINT32_MAX ? UINT32_MAX : f->n);
    out->inliers = (uint32_t)(q->m > UINT32_MAX ? UINT32_MAX : q->m);
    const kt_clock_sample_t *lo = &f->s[ilo], *hi = &f->s[ihi];
    out->device_first_ns = lo->device_ns;
    out->host_first_ns = lo->host_before_ns + (lo->host_after_ns - lo->host_before_ns) / 2;
    out->device_fitted_at_ns = hi->device_ns;
    out->fitted_at_ns = hi->host_before_ns + (hi->host_after_ns - hi->host_before_ns) / 2;
}

static int finish(fit_data_t *f, kt_fit_strategy_t strategy, kt_clock_domain_t domain, double prior_ppm,
                  double limit_ppm, kt_clock_model_t *out)
{
    wls_t q;
    if (wls_fit(f, &q) != 0) return KT_ESAMPLES;
    size_t m = q.m;
    if (m < 5) return KT_ESAMPLES;
    residuals(f, q.line);

    double se_c, brk_c;
    slope_error(f, &q, &se_c, &brk_c);
    double k = 3.0 + 8.0 / (double)(m - 2), c = q.line.c;
    if (!(1.0 + c > 0) || !isfinite(c) || !isfinite(q.line.a)) return KT_EINVAL;
    drift_t d;
    d.c = c;
    d.g_c = k * se_c + brk_c; /* bound on the slope's error, host ns per device ns */
    d.drift = -c / (1.0 + c) * 1e6;
    d.bound = d.g_c / ((1.0 + c) * (1.0 + c)) * 1e6;
    double drift_se = se_c / ((1.0 + c) * (1.0 + c)) * 1e6;
    int constrained = constrain_drift(&d, prior_ppm, limit_ppm);
    c = q.line.c = d.c;

    size_t ilo, ihi;
    double excess;
    span_ends(f, &ilo, &ihi, &excess);
    double b_lo, b_hi, v_lo, v_hi, slope_part = 0;
    if (!constrained) {
        /* both terms are convex in x: their largest values over the span are at its ends */
        bound_terms(f, &q, f->x[ilo], 0, &b_lo, &v_lo);
        bound_terms(f, &q, f->x[ihi], 0, &b_hi, &v_hi);
    } else {
        /* the line goes through the weighted mean at xbar with the prior-bounded slope: error at x is the
         * mean's error plus |x - xbar| times the slope's */
        bound_terms(f, &q, q.xbar, 1, &b_lo, &v_lo);
        b_hi = b_lo;
        v_hi = v_lo;
        double zbar = 0;
        for (size_t i = 0; i < f->n; i++)
            if (f->keep[i]) zbar += f->v[i] * f->z[i];
        zbar /= q.V;
        q.line.a = zbar - c * q.xbar;
        double xlo = fabs(f->x[ilo] - q.xbar), xhi = fabs(f->x[ihi] - q.xbar);
        slope_part = (xlo > xhi ? xlo : xhi) * d.g_c;
    }
    double stat = k * sqrt(v_lo > v_hi ? v_lo : v_hi);
    double ss = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (!f->keep[i]) continue;
        double r = f->z[i] - (q.line.a + c * f->x[i]);
        ss += r * r;
    }
    if (!isfinite(q.line.a) || !isfinite(d.g_c)) return KT_EINVAL;

    memset(out, 0, sizeof(*out));
    out->host_domain = domain;
    out->strategy = strategy;
    out->drift_ppm = d.drift;
    out->bracket_ns = b_lo > b_hi ? b_lo : b_hi;
    out->spread_ns = (excess > stat ? excess : stat) + slope_part;
    out->error_ns = out->bracket_ns + out->spread_ns + 1.0;
    out->residual_ns = sqrt(ss / (double)m);
    out->drift_se_ppm = drift_se;
    out->drift_k = k;
    out->drift_bound_ppm = d.g_c * 1e6;
    fill_model(f, &q, ilo, ihi, out);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Robust start points: Theil-Sen and RANSAC, then the shared inlier refinement
 * ------------------------------------------------------------------------------------------------- */

#define TS_MAX_PAIRS 8192u    /* Theil-Sen slopes examined at most */
#define RANSAC_ITERATIONS 256u
#define RANSAC_SEED 0x6b74696d696e6721ull /* "ktiming!" */
#define INLIER_SIGMAS 3.5

/* A sample sorted by device time. */
typedef struct xz_t {
    double x; /* centred device time */
    double z; /* host-minus-device residual */
} xz_t;

static int cmp_xz(const void *a, const void *b)
{
    double xa = ((const xz_t *)a)->x, xb = ((const xz_t *)b)->x;
    return (xa > xb) - (xa < xb);
}

/* Noise scale that needs no global line: successive differences in device-time order, detrended by their
 * median slope; a difference of two noisy samples has twice the noise variance. The lower quartile of the
 * absolute deviations (0.4506 sigma for Gaussian noise, about the same for uniform quantisation) resists up
 * to ~35 % outliers even on 10 samples; the steadier median is used when both agree. Keeps the inlier threshold honest when a few samples happen to align
 * by chance (RANSAC on quantised clocks). */
static int local_scale(const fit_data_t *f, double *out)
{
    size_t n = f->n;
    xz_t *p = malloc(n * sizeof(*p));
    if (!p) return KT_ENOMEM;
    for (size_t i = 0; i < n; i++) p[i] = (xz_t){f->x[i], f->z[i]};
    qsort(p, n, sizeof(*p), cmp_xz);
    size_t m = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (p[i + 1].x > p[i].x) f->tmp[m++] = (p[i + 1].z - p[i].z) / (p[i + 1].x - p[i].x);
    *out = 0;
    if (m >= 2) {
        double slope = kt__median(f->tmp, m);
        m = 0;
        for (size_t i = 0; i + 1 < n; i++)
            if (p[i + 1].x > p[i].x) f->tmp[m++] = (p[i + 1].z - p[i].z) - slope * (p[i + 1].x - p[i].x);
        double mid = kt__median(f->tmp, m);
        for (size_t i = 0; i < m; i++) f->tmp[i] = fabs(f->tmp[i] - mid);
        double s25 = kt__select(f->tmp, m, m / 4) / 0.4506;
        double s50 = kt__median(f->tmp, m) / 0.9539;
        /* the median is steadier; the lower quartile wins when the two disagree (outliers present) */
        *out = s50 <= 1.5 * s25 ? s50 : s25;
    }
    free(p);
    return 0;
}

/* Theil-Sen: median of pairwise slopes. Pairs (i, i+g) in device-time order for gaps g starting at n/2 and
 * moving outwards, so every sample takes part and baselines are long; all pairs when they fit the cap. */
static int theil_sen(const fit_data_t *f, line_t *out)
{
    size_t n = f->n;
    xz_t *p = malloc(n * sizeof(*p));
    size_t total = n * (n - 1) / 2;
    size_t cap = total < TS_MAX_PAIRS ? total : TS_MAX_PAIRS;
    double *slopes = malloc(cap * sizeof(*slopes));
    if (!p || !slopes) {
        free(p);
        free(slopes);
        return KT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) p[i] = (xz_t){f->x[i], f->z[i]};
    qsort(p, n, sizeof(*p), cmp_xz);
    size_t count = 0;
    size_t g0 = n / 2;
    for (size_t step = 0; count < cap && step < 2 * n; step++) {
        /* g0, g0+1, g0-1, g0+2, g0-2, ... */
        size_t off = (step + 1) / 2;
        size_t g;
        if (step % 2) {
            g = g0 + off;
        } else {
            if (off > g0) continue;
            g = g0 - off;
        }
        if (g == 0 || g >= n) continue;
        for (size_t i = 0; i + g < n && count < cap; i++) {
            double dx = p[i + g].x - p[i].x;
            if (dx > 0) slopes[count++] = (p[i + g].z - p[i].z) / dx;
        }
    }
    if (count == 0) {
        free(p);
        free(slopes);
        return KT_EINVAL;
    }
    out->c = kt__median(slopes, count);
    for (size_t i = 0; i < n; i++) f->tmp[i] = f->z[i] - out->c * f->x[i];
    out->a = kt__median(f->tmp, n);
    free(p);
    free(slopes);
    return 0;
}

/* splitmix64: the deterministic generator RANSAC draws pairs from. */
static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* RANSAC with MSAC scoring (sum of residuals squared, truncated at t0): deterministic for given samples. */
static int ransac(fit_data_t *f, double scale, line_t *out)
{
    size_t n = f->n;
    double xmin = f->x[0], xmax = f->x[0];
    for (size_t i = 1; i < n; i++) {
        if (f->x[i] < xmin) xmin = f->x[i];
        if (f->x[i] > xmax) xmax = f->x[i];
    }
    if (!(xmax > xmin)) return KT_EINVAL;
    memcpy(f->tmp, f->w, n * sizeof(double));
    double t0 = 3.0 * kt__median(f->tmp, n) + 1.0;
    if (t0 < 3.0 * scale) t0 = 3.0 * scale;
    double t02 = t0 * t0;
    double min_base = (xmax - xmin) / 4.0;
    uint64_t state = RANSAC_SEED ^ (uint64_t)n;
    size_t iters = RANSAC_ITERATIONS;
    if (n * (n - 1) / 2 < iters) iters = n * (n - 1) / 2;
    double best = INFINITY;
    int found = 0;
    for (size_t it = 0; it < iters; it++) {
        size_t i = 0, j = 0;
        int ok = 0;
        for (int tries = 0; tries < 4 && !ok; tries++) {
            i = (size_t)(splitmix64(&state) % n);
            j = (size_t)(splitmix64(&state) % n);
            ok = i != j && fabs(f->x[j] - f->x[i]) >= min_base && f->x[j] != f->x[i];
        }
        if (!ok) continue;
        line_t h;
        h.c = (f->z[j] - f->z[i]) / (f->x[j] - f->x[i]);
        h.a = f->z[i] - h.c * f->x[i];
        double cost = 0;
        for (size_t k = 0; k < n && cost < best; k++) {
            double r = f->z[k] - (h.a + h.c * f->x[k]);
            double r2 = r * r;
            cost += r2 < t02 ? r2 : t02;
        }
        if (cost < best) {
            best = cost;
            *out = h;
            found = 1;
        }
    }
    return found ? 0 : KT_EINVAL;
}

/* From a robust start line: keep samples within INLIER_SIGMAS (+ 20/n) robust sigmas (the larger of the MAD of all
 * residuals and the line-free local scale; at least the median half-width + 1 ns), refit by least squares,
 * repeat while the kept set changes (3 rounds max). */
static void refine(fit_data_t *f, double scale, line_t start)
{
    size_t n = f->n;
    /* scales estimated from few samples are rough: widen the band for small fits */
    double sigmas = INLIER_SIGMAS + 20.0 / (double)n;
    memcpy(f->tmp, f->w, n * sizeof(double));
    double floor_t = kt__median(f->tmp, n) + 1.0;
    if (floor_t < sigmas * scale) floor_t = sigmas * scale;
    line_t l = start;
    for (int round = 0; round < 3; round++) {
        residuals(f, l);
        for (size_t i = 0; i < n; i++) f->tmp[i] = fabs(f->r[i]);
        double s = 1.4826 * kt__median(f->tmp, n);
        double t = sigmas * s;
        if (t < floor_t) t = floor_t;
        int changed = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned char k = fabs(f->r[i]) <= t;
            if (k != f->keep[i]) changed = 1;
            f->keep[i] = k;
            f->v[i] = 1.0;
        }
        if (!changed && round > 0) break;
        wls_t q;
        if (wls_fit(f, &q) != 0) break;
        l = q.line;
    }
}

/* ---------------------------------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------------------------------- */

int kt__clock_fit_ex(const kt_clock_sample_t *samples, size_t n, kt_fit_strategy_t strategy,
                     kt_clock_domain_t host_domain, double drift_prior_ppm, double drift_limit_ppm,
                     kt_clock_model_t *out)
{
    if (!samples || !out) return KT_EINVAL;
    if (n < KT_CLOCK_MIN_SAMPLES) return KT_ESAMPLES;
    if ((int)strategy < KT_FIT_BASIC || (int)strategy > KT_FIT_RANSAC) return KT_EINVAL;
    if ((int)host_domain < KT_DOMAIN_MONOTONIC_RAW || (int)host_domain > KT_DOMAIN_REALTIME) return KT_EINVAL;
    const uint64_t limit = (uint64_t)1 << 62;
    for (size_t i = 0; i < n; i++) {
        if (samples[i].host_after_ns < samples[i].host_before_ns) return KT_EINVAL;
        if (samples[i].host_after_ns - samples[i].host_before_ns >= limit) return KT_EINVAL;
    }

    /* centring points: means of the offsets from the first sample, in integer ns */
    uint64_t d0 = samples[0].device_ns, b0 = samples[0].host_before_ns;
    double md = 0, mh = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t dd = kt__diff(samples[i].device_ns, d0), dh = kt__diff(samples[i].host_before_ns, b0);
        if (dd >= (int64_t)limit || dd <= -(int64_t)limit || dh >= (int64_t)limit || dh <= -(int64_t)limit)
            return KT_EINVAL;
        md += (double)dd;
        mh += (double)dh + (double)(samples[i].host_after_ns - samples[i].host_before_ns) / 2.0;
    }
    fit_data_t f = {0};
    f.n = n;
    f.s = samples;
    f.dref = d0 + (uint64_t)(int64_t)llround(md / (double)n);
    f.href = b0 + (uint64_t)(int64_t)llround(mh / (double)n);
    double *mem = malloc(n * 6 * sizeof(double));
    f.keep = malloc(n);
    if (!mem || !f.keep) {
        free(mem);
        free(f.keep);
        return KT_ENOMEM;
    }
    f.x = mem;
    f.z = mem + n;
    f.w = mem + 2 * n;
    f.v = mem + 3 * n;
    f.r = mem + 4 * n;
    f.tmp = mem + 5 * n;
    int distinct = 0;
    for (size_t i = 0; i < n; i++) {
        const kt_clock_sample_t *s = &samples[i];
        int64_t dx = kt__diff(s->device_ns, f.dref);
        int64_t dy = kt__diff(s->host_before_ns, f.href);
        f.w[i] = (double)(s->host_after_ns - s->host_before_ns) / 2.0;
        f.x[i] = (double)dx;
        f.z[i] = (double)(dy - dx) + f.w[i];
        f.keep[i] = 1;
        f.v[i] = 1.0;
        if (s->device_ns != samples[0].device_ns) distinct = 1;
    }
    int rc = 0;
    if (!distinct) {
        rc = KT_EINVAL;
    } else if (strategy == KT_FIT_WEIGHTED) {
        for (size_t i = 0; i < n; i++) {
            double w = f.w[i] > 0.5 ? f.w[i] : 0.5;
            f.v[i] = 1.0 / (w * w);
        }
    } else if (strategy == KT_FIT_ROBUST || strategy == KT_FIT_RANSAC) {
        line_t start = {0, 0};
        double scale = 0;
        rc = local_scale(&f, &scale);
        if (rc == 0) rc = strategy == KT_FIT_ROBUST ? theil_sen(&f, &start) : ransac(&f, scale, &start);
        if (rc == 0) refine(&f, scale, start);
    }
    if (rc == 0) rc = finish(&f, strategy, host_domain, drift_prior_ppm, drift_limit_ppm, out);
    free(mem);
    free(f.keep);
    return rc;
}

int kt_clock_fit(const kt_clock_sample_t *samples, size_t n, kt_fit_strategy_t strategy,
                 kt_clock_domain_t host_domain, kt_clock_model_t *out)
{
    return kt__clock_fit_ex(samples, n, strategy, host_domain, KT_CLOCK_DEFAULT_DRIFT_PRIOR_PPM,
                            KT_CLOCK_DRIFT_LIMIT_PPM, out);
}
