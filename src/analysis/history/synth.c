/* synth.c — synthetic histories with known truth (steps of given sizes at given runs, run-to-run noise, noisy
 * samples, outlier runs, machines drifting), all derived from one seed: any (series, run) is regenerated alone. */

#include "history.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64 of a tuple: the one source of randomness, so nothing depends on generation order. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct rng_t {
    uint64_t s; /* state */
} rng_t;

static rng_t rng_for(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    return (rng_t){mix(mix(mix(seed ^ 0x5eed) ^ a) ^ (b * 0x100000001b3ull)) ^ (c << 17)};
}

static double u01(rng_t *r)
{
    r->s = mix(r->s);
    return ((double)(r->s >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(rng_t *r) { return sqrt(-2.0 * log(u01(r))) * cos(6.283185307179586 * u01(r)); }

/* The true level of series s at run i, with its run noise and outlier. */
static double run_level(const kth_synth_t *sy, size_t s, size_t i)
{
    const kth_synth_opts_t *o = &sy->opts;
    rng_t r = rng_for(o->seed, s, 0, 1);
    double base = exp(log(1e3) + u01(&r) * log(1e4));
    double drift = (2.0 * u01(&r) - 1.0) * o->drift;
    double n = o->runs > 1 ? (double)(o->runs - 1) : 1.0;
    double v = base * (1.0 + drift * (double)i / n);
    if (sy->step[s] != 0.0 && i >= sy->step_at[s])
        v *= 1.0 + sy->step[s];
    rng_t q = rng_for(o->seed, s, i, 2);
    v *= exp(o->run_noise * gauss(&q));
    if (u01(&q) < o->outlier_rate)
        v *= 1.3 + 0.5 * u01(&q);
    return v;
}

int kth_synth_samples_fn(void *ctx, const kth_history_t *h, size_t series, size_t point, uint64_t **out, size_t *n)
{
    (void)h;
    const kth_synth_t *sy = ctx;
    *n = 0;
    *out = NULL;
    uint32_t m = sy->opts.samples;
    if (!m)
        return 0;
    uint64_t *v = malloc(m * sizeof *v);
    if (!v)
        return KT_ENOMEM;
    double lv = run_level(sy, series, point);
    rng_t r = rng_for(sy->opts.seed, series, point, 3);
    for (uint32_t k = 0; k < m; k++) {
        double x = lv * exp(sy->opts.sample_noise * gauss(&r));
        v[k] = x < 1.0 ? 1 : (uint64_t)llround(x);
    }
    *out = v;
    *n = m;
    return 0;
}

int kth_synth(const kth_synth_opts_t *o, kth_synth_t *out)
{
    memset(out, 0, sizeof *out);
    out->opts = *o;
    size_t R = o->runs, K = o->kernels;
    kth_history_t *h = &out->h;
    out->step = calloc(K + 1, sizeof *out->step);
    out->step_at = calloc(K + 1, sizeof *out->step_at);
    h->runs = calloc(R + 1, sizeof *h->runs);
    h->series = calloc(K + 1, sizeof *h->series);
    if (!out->step || !out->step_at || !h->runs || !h->series)
        goto oom;
    for (size_t i = 0; i < R; i++) {
        kth_run_t *r = &h->runs[h->run_count++];
        r->id = (int64_t)i + 1;
        r->when = 1780000000 + (int64_t)i * 3600;
        if (asprintf(&r->commit, "%012llx", (unsigned long long)(mix(o->seed + i) & 0xffffffffffffull)) < 0)
            r->commit = NULL;
        r->branch = strdup("main");
        r->machine = strdup("synth");
        if (!r->commit || !r->branch || !r->machine)
            goto oom;
    }
    for (size_t s = 0; s < K; s++) {
        rng_t r = rng_for(o->seed, s, 0, 4);
        if (o->step_kinds && u01(&r) < o->step_share) {
            double size = o->steps[(size_t)(u01(&r) * (double)o->step_kinds) % o->step_kinds];
            out->step[s] = u01(&r) < 0.7 ? size : 1.0 / (1.0 + size) - 1.0; /* mostly regressions */
            out->step_at[s] = R / 4 + (size_t)(u01(&r) * (double)(R / 2));
        }
        kth_series_t *se = &h->series[h->series_count++];
        se->id = (int64_t)s + 1;
        if (asprintf(&se->kernel, "k%05zu", s) < 0)
            se->kernel = NULL;
        se->backend = strdup("CPU");
        se->device = strdup("synth-dev");
        se->machine = strdup("synth");
        se->pts = calloc(R + 1, sizeof *se->pts);
        if (!se->kernel || !se->backend || !se->device || !se->machine || !se->pts)
            goto oom;
        for (size_t i = 0; i < R; i++) {
            uint64_t *v;
            size_t n;
            if (kth_synth_samples_fn(out, h, s, i, &v, &n))
                goto oom;
            kth_point_t *p = &se->pts[se->n++];
            p->run = (uint32_t)i;
            p->samples = (uint32_t)n;
            if (n) {
                kth__sort_u64(v, n);
                p->median = kth__quantile(v, n, 0.5);
                p->q1 = kth__quantile(v, n, 0.25);
                p->q3 = kth__quantile(v, n, 0.75);
            } else {
                p->median = p->q1 = p->q3 = run_level(out, s, i);
            }
            free(v);
        }
    }
    return 0;
oom:
    kth_synth_free(out);
    return KT_ENOMEM;
}

void kth_synth_free(kth_synth_t *s)
{
    if (!s)
        return;
    kth_history_free(&s->h);
    free(s->step);
    free(s->step_at);
    s->step = NULL;
    s->step_at = NULL;
}

char *kth_synth_run_json(const kth_synth_t *sy, size_t run, size_t *len)
{
    size_t K = sy->h.series_count;
    kt_snapshot_t snap;
    memset(&snap, 0, sizeof snap);
    kt_kernel_timing_t *e = calloc(K + 1, sizeof *e);
    kt_device_info_t dev = {.backend = KT_BACKEND_CPU};
    char *buf = NULL;
    size_t n = 0;
    FILE *f = e ? open_memstream(&buf, &n) : NULL;
    int rc = f ? 0 : KT_ENOMEM;
    for (size_t s = 0; !rc && s < K; s++) {
        size_t m = 0;
        rc = kth_synth_samples_fn((void *)sy, &sy->h, s, run, &e[s].samples, &m);
        e[s].sample_count = (uint32_t)m;
        e[s].name = sy->h.series[s].kernel;
        e[s].device = "host";
        e[s].backend = KT_BACKEND_CPU;
        e[s].dispatch_count = m;
        double sum = 0.0;
        for (size_t k = 0; k < m; k++) {
            uint64_t v = e[s].samples[k];
            sum += (double)v;
            if (!e[s].min_ns || v < e[s].min_ns)
                e[s].min_ns = v;
            if (v > e[s].max_ns)
                e[s].max_ns = v;
        }
        e[s].total_ns = (uint64_t)sum;
        e[s].total128.lo = (uint64_t)sum;
        e[s].mean_ns = m ? sum / (double)m : 0.0;
        e[s].p50_ns = e[s].p90_ns = e[s].p99_ns = (uint64_t)sy->h.series[s].pts[run].median;
        e[s].last_ns = e[s].max_ns;
    }
    if (!rc) {
        snprintf(dev.name, sizeof dev.name, "host");
        snprintf(dev.clock_domain, sizeof dev.clock_domain, "CLOCK_MONOTONIC_RAW");
        snap.count = K;
        snap.entries = e;
        snap.device_count = 1;
        snap.devices = &dev;
        snap.taken_ns = 1000000000ull + run;
        snap.pid = 1000 + (int64_t)run;
        snap.rank = -1;
        snprintf(snap.host, sizeof snap.host, "synth");
        rc = kt_report_print(f, &snap, KT_FORMAT_JSON, NULL);
    }
    if (f && fclose(f))
        rc = KT_EIO;
    for (size_t s = 0; e && s < K; s++)
        free(e[s].samples);
    free(e);
    if (rc) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}
