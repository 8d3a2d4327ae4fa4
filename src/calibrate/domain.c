/* domain.c — host clock domains: reads, resolution, bracketed sampling, domain detection and conversion. */
#include "calib_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------
 * Reads and sampling
 * ------------------------------------------------------------------------------------------------- */

uint64_t kt_clock_now(kt_clock_domain_t domain)
{
    clockid_t id;
    if (kt__domain_clockid(domain, &id) != 0) return 0;
    return kt__clock_read(id);
}

uint64_t kt_clock_domain_resolution_ns(kt_clock_domain_t domain)
{
    clockid_t id;
    struct timespec ts;
    if (kt__domain_clockid(domain, &id) != 0 || clock_getres(id, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int kt_clock_sample(kt_device_clock_read_cb read_device, void *user, kt_clock_domain_t host_domain,
                    kt_clock_sample_t *out, size_t n)
{
    clockid_t id;
    if (!read_device || (!out && n) || kt__domain_clockid(host_domain, &id) != 0) return KT_EINVAL;
    size_t got = 0, retries = 0;
    while (got < n) {
        uint64_t b = kt__clock_read(id);
        uint64_t d = read_device(user);
        uint64_t a = kt__clock_read(id);
        if (d == 0) {
            if (++retries > n) return KT_EBACKEND;
            continue;
        }
        out[got++] = (kt_clock_sample_t){d, b, a};
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Domain detection
 * ------------------------------------------------------------------------------------------------- */

#define DETECT_READS 16

static int cmp_sample_width(const void *a, const void *b)
{
    const kt_clock_sample_t *x = a, *y = b;
    uint64_t wx = x->host_after_ns - x->host_before_ns, wy = y->host_after_ns - y->host_before_ns;
    return (wx > wy) - (wx < wy);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Offset device - bracket midpoint against one host domain: median over the tighter half of the reads. */
static int64_t offset_of(kt_clock_sample_t *s)
{
    qsort(s, DETECT_READS, sizeof(s[0]), cmp_sample_width);
    int64_t o[DETECT_READS / 2];
    for (int i = 0; i < DETECT_READS / 2; i++)
        o[i] = kt__diff(s[i].device_ns, s[i].host_before_ns) -
               (int64_t)((s[i].host_after_ns - s[i].host_before_ns) / 2);
    qsort(o, DETECT_READS / 2, sizeof(o[0]), cmp_i64);
    return o[DETECT_READS / 4];
}

/* DETECT_READS device reads, each bracketed by all n host domains at once (nested: ids[0] outermost), so one
 * read serves every domain: a device read can be a marker round trip of ~50 us. s[k][i] is domain k's sample i.
 * At most DETECT_READS retries for reads that fail (KT_EBACKEND after that). */
static int sample_nested(kt_device_clock_read_cb read_device, void *user, const clockid_t *ids, int n,
                         kt_clock_sample_t s[][DETECT_READS])
{
    int got = 0, retries = 0;
    while (got < DETECT_READS) {
        uint64_t b[3], a[3];
        for (int k = 0; k < n; k++)
            b[k] = kt__clock_read(ids[k]);
        uint64_t d = read_device(user);
        for (int k = n - 1; k >= 0; k--)
            a[k] = kt__clock_read(ids[k]);
        if (d == 0) {
            if (++retries > DETECT_READS) return KT_EBACKEND;
            continue;
        }
        for (int k = 0; k < n; k++)
            s[k][got] = (kt_clock_sample_t){d, b[k], a[k]};
        got++;
    }
    return 0;
}

static uint64_t magnitude(int64_t v) { return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v; }

int kt_clock_detect_domain(kt_device_clock_read_cb read_device, void *user, uint64_t tolerance_ns,
                           kt_clock_domain_t *domain, int64_t *offset_ns)
{
    if (!read_device || !domain) return KT_EINVAL;
    if (!tolerance_ns) tolerance_ns = 1000000u;
    static const kt_clock_domain_t order[] = {KT_DOMAIN_MONOTONIC_RAW, KT_DOMAIN_MONOTONIC, KT_DOMAIN_REALTIME};
    clockid_t ids[3];
    for (int i = 0; i < 3; i++)
        if (kt__domain_clockid(order[i], &ids[i]) != 0) return KT_EINVAL;
    kt_clock_sample_t s[3][DETECT_READS];
    int rc = sample_nested(read_device, user, ids, 3, s);
    if (rc != 0) return rc;
    int64_t off[3];
    int best = -1;
    for (int i = 0; i < 3; i++) {
        off[i] = offset_of(s[i]);
        if (magnitude(off[i]) <= tolerance_ns && (best < 0 || magnitude(off[i]) < magnitude(off[best]))) best = i;
    }
    *domain = best >= 0 ? order[best] : KT_DOMAIN_DEVICE;
    if (offset_ns) *offset_ns = best >= 0 ? off[best] : off[0];
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Conversion between host domains: one tracker per non-RAW domain, "device" = that domain, host = RAW
 * ------------------------------------------------------------------------------------------------- */

#define DOMAIN_SLEW_PPM 500.0 /* the kernel's NTP frequency limit (MAXFREQ) */
/* Host reads never produce gross outliers (the "device" read is inside its bracket by construction) and the
 * tracker keeps the tightest brackets, so weighting by bracket width is enough and costs a tenth of ROBUST. */
#define DOMAIN_FIT KT_FIT_WEIGHTED

static pthread_once_t g_domains_once = PTHREAD_ONCE_INIT;
static kt_clock_tracker_t *g_domains[3]; /* indexed by domain; [RAW] unused */

static uint64_t read_monotonic(void *user)
{
    (void)user;
    return kt__clock_read(CLOCK_MONOTONIC);
}

static uint64_t read_realtime(void *user)
{
    (void)user;
    return kt__clock_read(CLOCK_REALTIME);
}

static kt_clock_tracker_desc_t domain_desc(kt_device_clock_read_cb read)
{
    kt_clock_tracker_desc_t d;
    memset(&d, 0, sizeof(d));
    d.read_device = read;
    d.capacity = 64;
    d.initial_samples = 16;
    d.batch = 8;
    d.keep = 2;
    d.refit_every = 1;
    d.refit_interval_ns = 1000000000ull;
    d.min_poll_interval_ns = 1000000ull;
    d.window_ns = 10000000000ull;
    d.max_error_ns = 1000.0;
    d.max_drift_ppm = DOMAIN_SLEW_PPM;
    d.drift_prior_ppm = DOMAIN_SLEW_PPM;
    d.step_ns = 1000000ull;
    return d;
}

static void domains_init(void)
{
    kt_clock_tracker_desc_t dm = domain_desc(read_monotonic), dr = domain_desc(read_realtime);
    /* the kernel caps the slew: the prior is a hard limit here */
    if (kt_clock_tracker_create(DOMAIN_FIT, KT_DOMAIN_MONOTONIC_RAW, &dm, &g_domains[KT_DOMAIN_MONOTONIC]) == 0) {
        kt__clock_tracker_set_limit(g_domains[KT_DOMAIN_MONOTONIC], DOMAIN_SLEW_PPM);
        kt_clock_tracker_poll(g_domains[KT_DOMAIN_MONOTONIC], kt__clock_read(CLOCK_MONOTONIC_RAW));
    }
    if (kt_clock_tracker_create(DOMAIN_FIT, KT_DOMAIN_MONOTONIC_RAW, &dr, &g_domains[KT_DOMAIN_REALTIME]) == 0) {
        kt__clock_tracker_set_limit(g_domains[KT_DOMAIN_REALTIME], DOMAIN_SLEW_PPM);
        kt_clock_tracker_poll(g_domains[KT_DOMAIN_REALTIME], kt__clock_read(CLOCK_MONOTONIC_RAW));
    }
}

/* Current model of a non-RAW domain against RAW, refreshed if due. While another thread rebuilds the ring
 * after a clock step, a one-off model is fitted from fresh samples instead (bounded: 16 reads, one fit). */
static int domain_model(kt_clock_domain_t domain, kt_clock_model_t *out)
{
    pthread_once(&g_domains_once, domains_init);
    kt_clock_tracker_t *t = g_domains[domain];
    if (!t) return KT_ENOMEM;
    int rc = kt_clock_tracker_poll(t, kt__clock_read(CLOCK_MONOTONIC_RAW));
    if (rc < 0 && rc != KT_ESAMPLES) return rc;
    if (kt_clock_tracker_model(t, out) == 0) return 0;
    kt_clock_sample_t s[16];
    rc = kt_clock_sample(domain == KT_DOMAIN_MONOTONIC ? read_monotonic : read_realtime, NULL,
                         KT_DOMAIN_MONOTONIC_RAW, s, 16);
    if (rc != 0) return rc;
    rc = kt__clock_fit_ex(s, 16, DOMAIN_FIT, KT_DOMAIN_MONOTONIC_RAW, DOMAIN_SLEW_PPM, DOMAIN_SLEW_PPM, out);
    if (rc == 0) out->max_drift_ppm = DOMAIN_SLEW_PPM;
    return rc;
}

static int host_domain(kt_clock_domain_t d)
{
    return (int)d >= KT_DOMAIN_MONOTONIC_RAW && (int)d <= KT_DOMAIN_REALTIME;
}

int kt_clock_domain_model(kt_clock_domain_t domain, kt_clock_model_t *out)
{
    if (!out || !host_domain(domain)) return KT_EINVAL;
    if (domain == KT_DOMAIN_MONOTONIC_RAW)
        return kt_clock_model_identity(KT_DOMAIN_MONOTONIC_RAW, kt_clock_domain_resolution_ns(domain), out);
    return domain_model(domain, out);
}

int kt_clock_domain_convert(uint64_t t_ns, kt_clock_domain_t from, kt_clock_domain_t to, uint64_t *out_ns,
                            uint64_t *uncertainty_ns)
{
    if (!out_ns || !host_domain(from) || !host_domain(to)) return KT_EINVAL;
    if (from == to) {
        *out_ns = t_ns;
        if (uncertainty_ns) *uncertainty_ns = 0;
        return 0;
    }
    uint64_t raw = t_ns, u1 = 0, u2 = 0;
    kt_clock_model_t m;
    int rc;
    if (from != KT_DOMAIN_MONOTONIC_RAW) {
        if ((rc = domain_model(from, &m)) != 0) return rc;
        if ((rc = kt_clock_to_host(&m, t_ns, &raw, &u1)) != 0) return rc;
    }
    if (to != KT_DOMAIN_MONOTONIC_RAW) {
        if ((rc = domain_model(to, &m)) != 0) return rc;
        if ((rc = kt_clock_to_device(&m, raw, out_ns, &u2)) != 0) return rc;
    } else {
        *out_ns = raw;
    }
    if (uncertainty_ns) *uncertainty_ns = u1 > UINT64_MAX - u2 ? UINT64_MAX : u1 + u2;
    return 0;
}
