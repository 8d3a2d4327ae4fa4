/* compare_synth.h — hand-built snapshots with seeded synthetic duration samples for the comparison and history tests. */
#ifndef KT_TEST_COMPARE_SYNTH_H
#define KT_TEST_COMPARE_SYNTH_H

#include <ktiming.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* xorshift64 state for reproducible samples. */
typedef struct synth_rng_t {
    uint64_t s; /* state, never 0 */
} synth_rng_t;

static inline double synth_u01(synth_rng_t *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return ((double)(r->s >> 11) + 0.5) / 9007199254740992.0;
}

static inline double synth_gauss(synth_rng_t *r)
{
    return sqrt(-2.0 * log(synth_u01(r))) * cos(6.283185307179586 * synth_u01(r));
}

/* An empty snapshot with room for `cap` entries (kt_snapshot_free releases it). */
static inline kt_snapshot_t *synth_snapshot(size_t cap)
{
    kt_snapshot_t *s = calloc(1, sizeof *s);
    s->entries = calloc(cap ? cap : 1, sizeof *s->entries);
    return s;
}

/* Append an entry whose n samples are lognormal around median_ns with relative spread sigma. */
static inline kt_kernel_timing_t *synth_add(kt_snapshot_t *s, const char *name, kt_backend_t backend,
                                            const char *device, uint32_t n, double median_ns, double sigma,
                                            uint64_t seed)
{
    kt_kernel_timing_t *e = &s->entries[s->count++];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    e->device = strdup(device);
    e->backend = backend;
    e->samples = n ? malloc(n * sizeof *e->samples) : NULL;
    e->sample_count = n;
    synth_rng_t r = {seed * 0x9e3779b97f4a7c15ull + 1};
    double sum = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        double v = median_ns * exp(sigma * synth_gauss(&r));
        e->samples[i] = v < 1.0 ? 1 : (uint64_t)llround(v);
        sum += (double)e->samples[i];
        if (!e->min_ns || e->samples[i] < e->min_ns) e->min_ns = e->samples[i];
        if (e->samples[i] > e->max_ns) e->max_ns = e->samples[i];
    }
    e->dispatch_count = n;
    e->total_ns = (uint64_t)sum;
    e->mean_ns = n ? sum / n : 0.0;
    e->p50_ns = (uint64_t)median_ns;
    return e;
}

/* Free a snapshot built here without the library (same memory contract as kt_snapshot_free). */
static inline void synth_free(kt_snapshot_t *s)
{
    for (size_t i = 0; i < s->count; i++) {
        free((void *)s->entries[i].name);
        free((void *)s->entries[i].device);
        free(s->entries[i].samples);
    }
    free(s->entries);
    free(s);
}

#endif
