/* merge.c — kt_snapshot_merge(): several snapshots (processes, ranks, runs) into one, exact where the schema
 * carries what exactness needs (see ktiming/analysis.h for the rules). */
#include <ktiming/analysis.h>

#include "analysis/load_sink.h"
#include "analysis/merge_clock.h"
#include "analysis/merge_consume.h"
#include "shared/clock_anchor.h"
#include "shared/shared.h"
#include "core/device_label.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Reservoir size kept when no input's reservoir was full (kt_desc_t.sample_capacity's default). */
#define MERGE_SAMPLES_DEFAULT 1024u

/* One input entry, for grouping equal (name, backend, device) triples. */
typedef struct ref_t {
    const kt_kernel_timing_t *e; /* the entry */
    const char *device;          /* its device's label in the result (grouping is by this, not e->device) */
    uint32_t input;              /* which input */
    uint32_t entry;              /* its index there */
} ref_t;

/* Per-input facts the merge needs. */
typedef struct input_t {
    const kt_snapshot_t *s;    /* the snapshot */
    int64_t offset;            /* added to its times */
    uint64_t bound;            /* error bound of offset, UINT64_MAX unknown */
    kt_clock_anchor_t anchor;  /* host_ns != 0: its times are CLOCK_MONOTONIC moved through this anchor, and each
                                  span's bound grows with its distance from it (merge_clock.h) */
    __int128 taken;            /* taken_ns on the merged timeline */
    uint32_t source_base;      /* its first source in the result */
    uint32_t thread_base;      /* its first thread in the result */
    uint32_t queue_base;       /* its first queue in the result */
    uint32_t *entry_map;       /* its entry index -> the result's */
    uint32_t *dev_map;         /* its device index -> the result's */
    kt_snapshot_t *own;        /* kt__snapshot_merge_consume: the same snapshot, whose entries are released as
                                  they are merged (NULL: kt_snapshot_merge, the inputs are left as they are) */
    uint8_t *merged;           /* own: which of its entries are merged */
    size_t next;               /* own: entries below this are merged */
    size_t freed;              /* own: entries below this are released (a batch behind next) */
    size_t given;              /* own: bytes of its entries array given back to the system */
} input_t;

/* A reservoir being drawn from. */
typedef struct pool_t {
    uint64_t remaining; /* dispatches of the input not yet accounted for */
    uint32_t size;      /* samples left in buf */
    uint64_t *buf;      /* copy of the input's samples */
} pool_t;

/* A span with its position, for a stable sort by start. */
typedef struct span_key_t {
    uint64_t start; /* start_ns */
    size_t at;      /* position in concatenation order */
} span_key_t;

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n) { return (uint64_t)(((unsigned __int128)rng_next(s) * n) >> 64); }

/* (name, backend, device in the result): the result's entry order */
static int ref_order(const ref_t *x, const ref_t *y)
{
    int r = strcmp(x->e->name, y->e->name);
    if (r)
        return r;
    if (x->e->backend != y->e->backend)
        return x->e->backend < y->e->backend ? -1 : 1;
    return strcmp(x->device, y->device);
}

static int ref_cmp(const void *a, const void *b)
{
    const ref_t *x = a, *y = b;
    int r = ref_order(x, y);
    if (r)
        return r;
    if (x->input != y->input)
        return x->input < y->input ? -1 : 1;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

static int span_key_cmp(const void *a, const void *b)
{
    const span_key_t *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* A host time moved by off; 0 (unknown) stays 0, results clamp to [1, UINT64_MAX]. */
static uint64_t shift(uint64_t t, int64_t off)
{
    if (!t || !off)
        return t;
    __int128 v = (__int128)t + off;
    return v < 1 ? 1 : v > (__int128)UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* A histogram being summed: a count per bucket, and which buckets have one (a bit per bucket, a bit per word of
 * them), so that summing k counts and reading the buckets back in order is O(k + KT__HIST_BLOCKS), with nothing
 * to clear but the words used. Sorting the inputs' counts by bucket (glibc's qsort, a merge sort through a
 * callback) was an eighth of merging a file of 32 samples per kernel. */
typedef struct hist_acc_t {
    uint64_t words;                     /* bit b: used[b] is not 0 */
    uint64_t used[KT__HIST_BLOCKS];     /* bit i of used[b]: bucket b * 64 + i has a count */
    uint64_t count[KT__HIST_BUCKETS];   /* a used bucket's count */
} hist_acc_t;
_Static_assert(KT__HIST_BLOCK == 64, "a word of used[] per block");

/* count dispatches added to bucket b (saturating, so in any order). */
static void acc_add(hist_acc_t *a, uint32_t b, uint64_t count)
{
    uint64_t bit = (uint64_t)1 << (b % 64);
    if (a->used[b / 64] & bit) {
        a->count[b] = sat_add(a->count[b], count);
        return;
    }
    a->count[b] = count;
    a->used[b / 64] |= bit;
    a->words |= (uint64_t)1 << (b / 64);
}

/* The buckets with a count other than 0, in order, as bins in a new array (NULL when none): *n of them; a emptied
 * for the next histogram (also when out of memory, KT_ENOMEM). */
static int acc_take(hist_acc_t *a, kt_hist_bin_t **out, uint32_t *n)
{
    size_t w = 0;
    for (uint64_t m = a->words; m; m &= m - 1)
        w += (size_t)__builtin_popcountll(a->used[__builtin_ctzll(m)]);
    kt_hist_bin_t *bins = w ? malloc(w * sizeof *bins) : NULL;
    size_t k = 0;
    for (uint64_t m = a->words; m; m &= m - 1) {
        uint32_t word = (uint32_t)__builtin_ctzll(m);
        for (uint64_t u = a->used[word]; bins && u; u &= u - 1) {
            uint32_t b = word * 64u + (uint32_t)__builtin_ctzll(u);
            if (a->count[b])
                bins[k++] = (kt_hist_bin_t){kt__hist_lower(b), a->count[b]};
        }
        a->used[word] = 0;
    }
    a->words = 0;
    if (w && !bins)
        return KT_ENOMEM;
    if (!k) {
        free(bins);
        bins = NULL;
    }
    *out = bins;
    *n = (uint32_t)k;
    return 0;
}

/* The group's breakdowns by launch configuration added up: equal configurations summed, then capped as a
 * snapshot caps them (kt__configs_fold: KT_LAUNCH_CONFIGS_MAX rows, the rest in one "other" row). */
static int merge_configs(const ref_t *g, size_t m, kt_kernel_timing_t *t)
{
    size_t n = 0;
    for (size_t i = 0; i < m; i++)
        n += g[i].e->configs ? g[i].e->config_count : 0;
    if (!n)
        return 0;
    if (n > UINT32_MAX || !(t->configs = malloc(n * sizeof *t->configs)))
        return KT_ENOMEM;
    size_t w = 0;
    for (size_t i = 0; i < m; i++)
        for (uint32_t k = 0; g[i].e->configs && k < g[i].e->config_count; k++)
            t->configs[w++] = g[i].e->configs[k];
    t->config_count = kt__configs_fold(t->configs, (uint32_t)n);
    return 0;
}

/* Histogram of the group: input histograms added bucket by bucket; an input without one (version 1) adds its
 * samples, each standing for count/sample_count dispatches (or its mean for all of them): *approx is then set.
 * The inputs' counts are summed in acc (hist_acc_t), O(k) for k counts: not a pass over every bucket per
 * kernel, which was a third of merging a million kernels. */
static int merge_hist(const ref_t *g, size_t m, hist_acc_t *acc, kt_hist_bin_t **out, uint32_t *nout, int *approx)
{
    *approx = 0;
    *out = NULL;
    *nout = 0;
    for (size_t i = 0; i < m; i++) {
        const kt_kernel_timing_t *e = g[i].e;
        if (!e->dispatch_count)
            continue;
        if (e->hist && e->hist_count) {
            for (uint32_t h = 0; h < e->hist_count; h++)
                acc_add(acc, kt__hist_index(e->hist[h].lower_ns), e->hist[h].count);
            continue;
        }
        *approx = 1;
        if (e->samples && e->sample_count) {
            uint64_t each = e->dispatch_count / e->sample_count, extra = e->dispatch_count % e->sample_count;
            for (uint32_t h = 0; h < e->sample_count; h++)
                acc_add(acc, kt__hist_index(e->samples[h]), each + (h < extra));
        } else {
            acc_add(acc, kt__hist_index((uint64_t)llround(e->mean_ns)), e->dispatch_count);
        }
    }
    return acc_take(acc, out, nout);
}

/* Uniform sample without replacement of the group's dispatches, from the inputs' reservoirs. */
static int merge_samples(const ref_t *g, size_t m, kt_kernel_timing_t *t, uint64_t seed)
{
    /* Capacity: that of the largest full reservoir (fewer samples than dispatches); when no input ever filled
     * its reservoir, all samples are kept, up to the default capacity. */
    uint32_t cap = 0;
    size_t all = 0;
    for (size_t i = 0; i < m; i++)
        if (g[i].e->samples && g[i].e->sample_count) {
            if (g[i].e->sample_count < g[i].e->dispatch_count && g[i].e->sample_count > cap)
                cap = g[i].e->sample_count;
            all += g[i].e->sample_count;
        }
    if (!all)
        return 0;
    if (!cap)
        cap = all < MERGE_SAMPLES_DEFAULT ? (uint32_t)all : MERGE_SAMPLES_DEFAULT;
    pool_t *pools = calloc(m, sizeof *pools);
    uint64_t *buf = malloc(all * sizeof *buf);
    t->samples = malloc((size_t)cap * sizeof *t->samples);
    if (!pools || !buf || !t->samples) {
        free(pools);
        free(buf);
        free(t->samples);
        t->samples = NULL;
        return KT_ENOMEM;
    }
    uint64_t total = 0;
    size_t off = 0;
    for (size_t i = 0; i < m; i++) {
        const kt_kernel_timing_t *e = g[i].e;
        uint32_t sc = e->samples ? e->sample_count : 0;
        pools[i].buf = buf + off;
        pools[i].size = sc;
        pools[i].remaining = sc ? (e->dispatch_count > sc ? e->dispatch_count : sc) : 0;
        if (sc)
            memcpy(buf + off, e->samples, sc * sizeof *buf);
        off += sc;
        total += pools[i].remaining;
    }
    uint32_t k = 0;
    while (k < cap && total) {
        uint64_t r = rng_below(&seed, total);
        size_t i = 0;
        while (i + 1 < m && r >= pools[i].remaining)
            r -= pools[i++].remaining;
        pool_t *p = &pools[i];
        if (!p->size) { /* a smaller reservoir than the others ran out: it can give no more */
            total -= p->remaining;
            p->remaining = 0;
            continue;
        }
        uint32_t j = (uint32_t)rng_below(&seed, p->size);
        t->samples[k++] = p->buf[j];
        p->buf[j] = p->buf[--p->size];
        p->remaining--;
        total--;
    }
    t->sample_count = k;
    free(pools);
    free(buf);
    return 0;
}

/* One merged entry from the group g[0..m) (all the same triple, ascending by input). */
/* Gives the whole pages of base[0..upto) above base + *given back to the system (MADV_DONTNEED: they read as zeros
 * from then on) and moves *given up to the last of them. */
static void give_back_below(const void *base, size_t *given, size_t upto)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return;
    uintptr_t b = (uintptr_t)base, lo = (b + *given + (uintptr_t)page - 1) & ~((uintptr_t)page - 1),
              hi = (b + upto) & ~((uintptr_t)page - 1);
    if (hi > lo && madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0)
        *given = hi - b;
}

#define RELEASE_BATCH 256u

/* Input ip's entries merged so far, from the lowest not yet released up, once they are a batch (or all = 1):
 * what they own freed (kt__entries_free, which frees what kt_snapshot_free does) and the entries zeroed, so
 * kt_snapshot_free of the input later finds nothing in them; and the whole pages of the array they fill given
 * back to the system (MADV_DONTNEED: they read as zeros from then on). An input of 1,000,000 kernels then
 * shrinks as the merged snapshot grows, instead of both being held at once. */
static void release_merged(input_t *ip, int all)
{
    kt_snapshot_t *s = ip->own;
    while (ip->next < s->count && ip->merged[ip->next])
        ip->next++;
    size_t n = ip->next - ip->freed;
    if (!n || (!all && n < RELEASE_BATCH))
        return;
    kt_kernel_timing_t *batch = malloc(n * sizeof *batch);
    if (!batch) /* kept: kt_snapshot_free of the input releases them */
        return;
    memcpy(batch, &s->entries[ip->freed], n * sizeof *batch);
    memset(&s->entries[ip->freed], 0, n * sizeof *batch);
    kt__entries_free(batch, n);
    ip->freed = ip->next;
    give_back_below(s->entries, &ip->given, ip->freed * sizeof *s->entries);
}

static int merge_group(const ref_t *g, size_t m, const input_t *in, hist_acc_t *acc, kt_kernel_timing_t *t)
{
    unsigned __int128 sum = 0, sq = 0;
    int sq_unknown = 0, have_last = 0, have_err = 0;
    __int128 last_at = 0, err_at = 0;
    size_t nsrc = 0;
    memset(t, 0, sizeof *t);
    t->backend = g[0].e->backend;
    kt_kernel_timing_t *first = in[g[0].input].own ? &in[g[0].input].own->entries[g[0].entry] : NULL;
    if (first) { /* the input's strings are released after the group anyway: taken, not copied */
        t->name = first->name;
        first->name = NULL;
        if (g[0].device == first->device) { /* its own label, not a device record's */
            t->device = first->device;
            first->device = NULL;
        }
    } else {
        t->name = strdup(g[0].e->name);
    }
    if (!t->device)
        t->device = strdup(g[0].device);
    if (!t->name || !t->device)
        return KT_ENOMEM;
    for (size_t i = 0; i < m; i++) {
        const kt_kernel_timing_t *e = g[i].e;
        const input_t *ip = &in[g[i].input];
        kt_u128_t s, q;
        uint64_t by[KT_DROP_REASON_COUNT];
        kt__entry_sums(e, &s, &q);
        unsigned __int128 s1 = (unsigned __int128)s.hi << 64 | s.lo, q1 = (unsigned __int128)q.hi << 64 | q.lo;
        sum = sum + s1 < sum ? ~(unsigned __int128)0 : sum + s1;
        if (q1 == ~(unsigned __int128)0 || sq + q1 < sq)
            sq_unknown = 1;
        sq += q1;
        if (e->dispatch_count) {
            if (!t->dispatch_count || e->min_ns < t->min_ns)
                t->min_ns = e->min_ns;
            if (e->max_ns > t->max_ns)
                t->max_ns = e->max_ns;
            if (!have_last || ip->taken >= last_at) {
                t->last_ns = e->last_ns;
                last_at = ip->taken;
                have_last = 1;
            }
        }
        if (e->last_error[0] && (!have_err || ip->taken >= err_at)) {
            memcpy(t->last_error, e->last_error, sizeof t->last_error);
            t->last_error[sizeof t->last_error - 1] = 0;
            err_at = ip->taken;
            have_err = 1;
        }
        t->dispatch_count = sat_add(t->dispatch_count, e->dispatch_count);
        t->errors = sat_add(t->errors, e->errors);
        t->dropped = sat_add(t->dropped, e->dropped);
        t->spans_dropped = sat_add(t->spans_dropped, e->spans_dropped);
        t->bytes = sat_add(t->bytes, e->bytes);
        kt__entry_dropped_by(e, by);
        for (int r = 0; r < KT_DROP_REASON_COUNT; r++)
            t->dropped_by[r] = sat_add(t->dropped_by[r], by[r]);
        nsrc += ip->s->source_count ? (e->by_source ? e->by_source_count : 0) : 1;
    }
    if (sq_unknown)
        sq = ~(unsigned __int128)0;
    t->total128 = (kt_u128_t){(uint64_t)sum, (uint64_t)(sum >> 64)};
    t->sumsq128 = (kt_u128_t){(uint64_t)sq, (uint64_t)(sq >> 64)};
    t->total_ns = sum > UINT64_MAX ? UINT64_MAX : (uint64_t)sum;
    if (t->dispatch_count) {
        t->mean_ns = (double)sum / (double)t->dispatch_count;
        t->stddev_ns = kt__stddev_exact(t->dispatch_count, sum, sq);
    }

    /* per-source shares */
    if (nsrc) {
        t->by_source = malloc(nsrc * sizeof *t->by_source);
        if (!t->by_source)
            return KT_ENOMEM;
        for (size_t i = 0; i < m; i++) {
            const kt_kernel_timing_t *e = g[i].e;
            const input_t *ip = &in[g[i].input];
            if (!ip->s->source_count) {
                t->by_source[t->by_source_count++] =
                    (kt_source_total_t){ip->source_base, e->dispatch_count, e->total_ns};
                continue;
            }
            for (uint32_t k = 0; e->by_source && k < e->by_source_count; k++) {
                kt_source_total_t b = e->by_source[k];
                b.source += ip->source_base;
                t->by_source[t->by_source_count++] = b;
            }
        }
    }

    int approx, rc = merge_configs(g, m, t);
    if (rc)
        return rc;
    rc = merge_hist(g, m, acc, &t->hist, &t->hist_count, &approx);
    if (rc)
        return rc;
    if (t->dispatch_count) {
        t->p50_ns = kt__bins_percentile(t->hist, t->hist_count, 0.50, t->min_ns, t->max_ns);
        t->p90_ns = kt__bins_percentile(t->hist, t->hist_count, 0.90, t->min_ns, t->max_ns);
        t->p99_ns = kt__bins_percentile(t->hist, t->hist_count, 0.99, t->min_ns, t->max_ns);
    }
    if (approx) { /* estimates: not passed on as if they were the exact histogram */
        free(t->hist);
        t->hist = NULL;
        t->hist_count = 0;
    }
    uint64_t seed = hash_str(hash_str(0xcbf29ce484222325ull, t->name), t->device) ^ (uint64_t)t->backend;
    return merge_samples(g, m, t, seed);
}

/* Whether the input's indices are in range (the exporters' own check, so a result is always writable). */
static int input_ok(const kt_snapshot_t *s)
{
    if ((s->count && !s->entries) || (s->span_count && !s->spans) || (s->queue_count && !s->queues) ||
        (s->thread_count && !s->threads) || (s->device_count && !s->devices) || (s->source_count && !s->sources))
        return 0;
    for (size_t i = 0; i < s->count; i++) {
        if (!s->entries[i].name || !s->entries[i].device)
            return 0;
        for (uint32_t k = 0; s->entries[i].by_source && k < s->entries[i].by_source_count; k++)
            if (s->entries[i].by_source[k].source >= s->source_count)
                return 0;
    }
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        if (sp->entry >= s->count || sp->thread >= s->thread_count ||
            (sp->queue != UINT32_MAX && sp->queue >= s->queue_count))
            return 0;
    }
    for (size_t i = 0; s->source_count && i < s->thread_count; i++)
        if (s->threads[i].source >= s->source_count)
            return 0;
    for (size_t i = 0; s->source_count && i < s->queue_count; i++)
        if (s->queues[i].source >= s->source_count)
            return 0;
    return 1;
}

static const char *device_in_result(const input_t *ip, const kt_snapshot_t *o, kt_backend_t backend,
                                    const char *device);

static int merge_tables(input_t *in, size_t n, kt_snapshot_t *o)
{
    size_t ns = 0, nt = 0, nq = 0;
    for (size_t i = 0; i < n; i++) {
        ns += in[i].s->source_count ? in[i].s->source_count : 1;
        nt += in[i].s->thread_count;
        nq += in[i].s->queue_count;
    }
    o->sources = calloc(ns, sizeof *o->sources);
    o->threads = nt ? malloc(nt * sizeof *o->threads) : NULL;
    o->queues = nq ? malloc(nq * sizeof *o->queues) : NULL;
    if (!o->sources || (nt && !o->threads) || (nq && !o->queues))
        return KT_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const kt_snapshot_t *s = in[i].s;
        in[i].source_base = (uint32_t)o->source_count;
        in[i].thread_base = (uint32_t)o->thread_count;
        in[i].queue_base = (uint32_t)o->queue_count;
        if (!s->source_count) {
            kt_source_info_t *so = &o->sources[o->source_count++];
            memcpy(so->host, s->host, sizeof so->host);
            so->host[sizeof so->host - 1] = 0;
            so->pid = s->pid;
            so->rank = s->rank;
            so->offset_ns = in[i].offset;
            so->offset_bound_ns = in[i].bound;
            memcpy(so->clock_domain, s->clock_domain, sizeof so->clock_domain);
            so->clock_domain[sizeof so->clock_domain - 1] = 0;
        }
        for (size_t k = 0; k < s->source_count; k++) {
            kt_source_info_t so = s->sources[k];
            __int128 off = (__int128)so.offset_ns + in[i].offset;
            so.offset_ns = off > INT64_MAX ? INT64_MAX : off < INT64_MIN ? INT64_MIN : (int64_t)off;
            so.offset_bound_ns = sat_add(so.offset_bound_ns, in[i].bound);
            o->sources[o->source_count++] = so;
        }
        uint32_t single = in[i].source_base;
        for (size_t k = 0; k < s->thread_count; k++) {
            kt_thread_info_t t = s->threads[k];
            t.source = s->source_count ? in[i].source_base + t.source : single;
            o->threads[o->thread_count++] = t;
        }
        for (size_t k = 0; k < s->queue_count; k++) {
            kt_queue_info_t q = s->queues[k];
            q.source = s->source_count ? in[i].source_base + q.source : single;
            snprintf(q.device, sizeof q.device, "%s", device_in_result(&in[i], o, q.backend, s->queues[k].device));
            o->queues[o->queue_count++] = q;
        }
    }
    return 0;
}

/* Whether input device d (of a snapshot taken on `host`) is the result's device r: the same (backend, host, key),
 * or with by_model the same (backend, model). */
static int same_device(const kt_device_info_t *r, const kt_device_info_t *d, const char *host, int by_model)
{
    if (r->backend != d->backend)
        return 0;
    if (by_model)
        return !strcmp(r->id.model, d->id.model[0] ? d->id.model : d->name);
    return !strcmp(r->host, host) && !strcmp(r->key, d->key[0] ? d->key : d->name);
}

/* The result's devices: one per (backend, host, key), or per (backend, model) with by_model (a folded record keeps
 * the model and vendor, not the ids of one device), labelled afresh for the result; in[i].dev_map maps. */
static int merge_devices(input_t *in, size_t n, kt_snapshot_t *o, int by_model)
{
    size_t nd = 0;
    for (size_t i = 0; i < n; i++)
        nd += in[i].s->device_count;
    o->devices = nd ? malloc(nd * sizeof *o->devices) : NULL;
    if (nd && !o->devices)
        return KT_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const kt_snapshot_t *s = in[i].s;
        if (s->device_count && !(in[i].dev_map = malloc(s->device_count * sizeof *in[i].dev_map)))
            return KT_ENOMEM;
        for (size_t k = 0; k < s->device_count; k++) {
            const kt_device_info_t *d = &s->devices[k];
            const char *host = d->host[0] ? d->host : s->host;
            size_t j;
            for (j = 0; j < o->device_count; j++)
                if (same_device(&o->devices[j], d, host, by_model))
                    break;
            in[i].dev_map[k] = (uint32_t)j;
            if (j < o->device_count) {
                kt_device_info_t *r = &o->devices[j];
                if (d->error_bound_ns > r->error_bound_ns)
                    r->error_bound_ns = d->error_bound_ns;
                if (r->rank != d->rank)
                    r->rank = -1; /* used by several ranks */
                if (strcmp(r->host, host))
                    r->host[0] = 0; /* folded across hosts */
                continue;
            }
            kt_device_info_t *r = &o->devices[o->device_count++];
            *r = *d;
            snprintf(r->host, sizeof r->host, "%s", host);
            if (!r->key[0])
                snprintf(r->key, sizeof r->key, "%s", d->name);
            if (!r->id.model[0])
                snprintf(r->id.model, sizeof r->id.model, "%s", d->name);
            if (by_model) { /* stands for every device of the model */
                kt_device_id_t id = r->id;
                memset(&r->id, 0, sizeof r->id);
                memcpy(r->id.model, id.model, sizeof id.model);
                memcpy(r->id.vendor, id.vendor, sizeof id.vendor);
                snprintf(r->id.id_kind, sizeof r->id.id_kind, "model");
                r->id.ordinal = r->id.partition = -1;
                snprintf(r->key, sizeof r->key, "model:%.120s", id.model);
            }
        }
    }
    kt__device_labels(o->devices, o->device_count);
    return 0;
}

/* The result's label of input i's device `device` (a label in that input), or `device` itself when the input has
 * no record of it (older files: entries are then grouped by that name, as before identities). */
static const char *device_in_result(const input_t *ip, const kt_snapshot_t *o, kt_backend_t backend,
                                    const char *device)
{
    const kt_device_info_t *d = kt__device_lookup(ip->s->devices, ip->s->device_count, backend, device);
    return d ? o->devices[ip->dev_map[d - ip->s->devices]].name : device;
}

/* The refs of several inputs (each input's a run, in input order) in ref_cmp order when each run is in order:
 * runs merged pairwise, a pass over all of them per doubling, into a second array that then replaces *refs.
 * Returns 0, leaving *refs as it was, when a run is out of order or there is no memory for the second array. */
static int merge_runs(const input_t *in, size_t n, ref_t **refs, size_t total)
{
    size_t *run = malloc((n + 1) * sizeof *run), nrun = 0, at = 0;
    if (!run)
        return 0;
    for (size_t i = 0; i < n; i++) {
        size_t c = in[i].s->count;
        for (size_t k = at + 1; k < at + c; k++)
            if (ref_cmp(&(*refs)[k - 1], &(*refs)[k]) >= 0) {
                free(run);
                return 0;
            }
        if (c)
            run[nrun++] = at;
        at += c;
    }
    run[nrun] = total;
    ref_t *src = *refs, *dst = malloc(total * sizeof *dst);
    if (!dst) {
        free(run);
        return 0;
    }
    while (nrun > 1) {
        size_t w = 0;
        for (size_t r = 0; r < nrun; r += 2) {
            /* runs r and r + 1 (run[nrun] is the end), or the last run alone, copied */
            size_t a = run[r], ae = run[r + 1], b = ae, be = r + 1 < nrun ? run[r + 2] : ae, o = a;
            while (a < ae && b < be)
                dst[o++] = ref_cmp(&src[a], &src[b]) < 0 ? src[a++] : src[b++];
            while (a < ae)
                dst[o++] = src[a++];
            while (b < be)
                dst[o++] = src[b++];
            run[w++] = run[r];
        }
        run[w] = total;
        nrun = w;
        ref_t *t = src;
        src = dst;
        dst = t;
    }
    free(dst);
    free(run);
    *refs = src;
    return 1;
}

/* Entry k of input i (in[i]) as a ref. */
static ref_t ref_of(const input_t *ip, uint32_t i, const kt_snapshot_t *o, size_t k)
{
    const kt_kernel_timing_t *e = &ip->s->entries[k];
    return (ref_t){e, device_in_result(ip, o, e->backend, e->device), i, (uint32_t)k};
}

/* The inputs' entries as refs in the result's order (name, backend, device, then input and index): each run of
 * equal triples is a group, one entry of the result; *groups says how many. A single input in that order (as the
 * loader gives it) needs no refs: *out stays NULL, *in_order is set, and the groups are read from its entries as
 * they are merged (next_group), so a merge of one file of a million kernels holds no 24 MB of refs. */
static int sort_refs(input_t *in, size_t n, const kt_snapshot_t *o, ref_t **out, size_t *total_out, size_t *groups,
                     int *in_order)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += in[i].s->count;
    *out = NULL;
    *total_out = total;
    *groups = 0;
    *in_order = 0;
    if (!total)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (in[i].s->count && !(in[i].entry_map = malloc(in[i].s->count * sizeof *in[i].entry_map)))
            return KT_ENOMEM;
    if (n == 1) {
        ref_t prev = ref_of(&in[0], 0, o, 0);
        size_t k = 1, g = 1;
        for (; k < total; k++) {
            ref_t cur = ref_of(&in[0], 0, o, k);
            int r = ref_order(&prev, &cur);
            if (r > 0) /* equal triples are in index order: ref_cmp's order */
                break;
            g += r != 0;
            prev = cur;
        }
        if (k == total) {
            *groups = g;
            *in_order = 1;
            return 0;
        }
    }
    ref_t *refs = malloc(total * sizeof *refs);
    if (!refs)
        return KT_ENOMEM;
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < in[i].s->count; k++)
            refs[w++] = ref_of(&in[i], (uint32_t)i, o, k);
    /* one input's entries come sorted from the loader: a pass that finds them in order instead of a sort (a
     * fifth of merging one 100,000-kernel file), counting the groups as it goes; several inputs each in order are
     * merged (merge_runs) instead of sorted. ref_cmp is a total order, so the result is the same either way. */
    size_t sorted = 1, n_groups = 1;
    for (; sorted < total; sorted++) {
        int r = ref_order(&refs[sorted - 1], &refs[sorted]);
        if (r > 0 || (!r && ref_cmp(&refs[sorted - 1], &refs[sorted]) >= 0))
            break;
        n_groups += r != 0;
    }
    if (sorted < total) {
        if (!merge_runs(in, n, &refs, total))
            qsort(refs, total, sizeof *refs, ref_cmp);
        n_groups = 1;
        for (size_t i = 1; i < total; i++)
            n_groups += ref_order(&refs[i - 1], &refs[i]) != 0;
    }
    *groups = n_groups;
    *out = refs;
    return 0;
}

static int merge_spans(const input_t *in, size_t n, kt_snapshot_t *o)
{
    size_t total = 0, w = 0;
    for (size_t i = 0; i < n; i++)
        total += in[i].s->span_count;
    if (!total)
        return 0;
    kt_span_t *cat = malloc(total * sizeof *cat);
    span_key_t *keys = malloc(total * sizeof *keys);
    o->spans = malloc(total * sizeof *o->spans);
    if (!cat || !keys || !o->spans) {
        free(cat);
        free(keys);
        return KT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const kt_snapshot_t *s = in[i].s;
        for (size_t k = 0; k < s->span_count; k++) {
            kt_span_t sp = s->spans[k];
            int64_t off = in[i].offset; /* a merged input's spans are on its timeline already */
            uint64_t bound = in[i].bound;
            sp.entry = in[i].entry_map[sp.entry];
            sp.thread += in[i].thread_base;
            if (sp.queue != UINT32_MAX)
                sp.queue += in[i].queue_base;
            sp.enqueue_ns = shift(sp.enqueue_ns, off);
            sp.queued_ns = shift(sp.queued_ns, off);
            sp.submit_ns = shift(sp.submit_ns, off);
            sp.start_ns = shift(sp.start_ns, off);
            sp.end_ns = shift(sp.end_ns, off);
            if (bound != UINT64_MAX && in[i].anchor.host_ns) { /* the farther end from the anchor */
                uint64_t b0 = kt__clock_anchor_bound(&in[i].anchor, s->spans[k].start_ns),
                         b1 = kt__clock_anchor_bound(&in[i].anchor, s->spans[k].end_ns);
                sp.uncertainty_ns = sat_add(sp.uncertainty_ns, b0 > b1 ? b0 : b1);
            } else if (bound != UINT64_MAX) {
                sp.uncertainty_ns = sat_add(sp.uncertainty_ns, bound);
            }
            keys[w] = (span_key_t){sp.start_ns, w};
            cat[w++] = sp;
        }
    }
    qsort(keys, total, sizeof *keys, span_key_cmp);
    for (size_t k = 0; k < total; k++)
        o->spans[k] = cat[keys[k].at];
    o->span_count = total;
    free(cat);
    free(keys);
    return 0;
}

/* A merge being made (merge_consume.h): the result's header, tables and devices first, then its entries one group
 * at a time, then its spans (which need every input entry's place in the result). */
struct kt__merge_iter_t {
    input_t *in;          /* the inputs */
    size_t n;             /* how many */
    kt_snapshot_t *o;     /* the result: no entries (kt_snapshot_merge puts them in); spans once all are made */
    ref_t *refs;          /* the inputs' entries in the result's order; NULL once all are made, or in_order */
    int in_order;         /* one input, in the result's order: no refs, each group read from its entries */
    ref_t *group;         /* in_order: the group being merged */
    ref_t peek;           /* in_order: the ref after the last group read (e NULL: none) */
    size_t group_cap;     /* its room */
    size_t total;         /* refs (the inputs' entries) */
    size_t at;            /* the next group's first ref */
    size_t refs_given;    /* bytes of refs given back to the system */
    size_t groups;        /* entries of the result */
    size_t made;          /* of them made */
    int rc;               /* the first failure: nothing is made after it */
    hist_acc_t *acc;      /* the histogram being summed (merge_hist) */
    kt_kernel_timing_t cur; /* the view's entry (kt__merge_view) */
};

/* What the entry owns freed, and the entry zeroed. */
static void entry_clear(kt_kernel_timing_t *t)
{
    kt__entry_release(t);
    memset(t, 0, sizeof *t);
}

/* After the last group: the consumed inputs' last entries released, the refs freed, the spans merged. */
static int merge_finish(kt__merge_iter_t *it)
{
    for (size_t k = 0; k < it->n; k++)
        if (it->in[k].own)
            release_merged(&it->in[k], 1);
    free(it->refs);
    it->refs = NULL;
    return merge_spans(it->in, it->n, it->o);
}

static int merge_end(kt__merge_iter_t *it, kt_snapshot_t **out);

int kt__merge_begin(const kt_snapshot_t *const *inputs, kt_snapshot_t *const *own, size_t n,
                    const kt_merge_opts_t *opts, kt__merge_iter_t **out)
{
    if (!out)
        return KT_EINVAL;
    *out = NULL;
    if (!inputs || !n || n > UINT32_MAX)
        return KT_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!inputs[i] || !input_ok(inputs[i]))
            return KT_EINVAL;
    kt__merge_iter_t *it = calloc(1, sizeof *it);
    input_t *in = calloc(n, sizeof *in);
    kt_snapshot_t *o = calloc(1, sizeof *o);
    kt__merge_clock_t *pl = calloc(n, sizeof *pl);
    hist_acc_t *acc = calloc(1, sizeof *acc);
    if (!it || !in || !o || !pl || !acc) {
        free(acc);
        free(it);
        free(in);
        free(o);
        free(pl);
        return KT_ENOMEM;
    }
    it->in = in;
    it->n = n;
    it->o = o;
    it->acc = acc;
    memcpy(o->host, inputs[0]->host, sizeof o->host);
    o->host[sizeof o->host - 1] = 0;
    kt__merge_clocks(inputs, n, pl, o); /* where each goes when the caller does not say */
    __int128 latest = 0;
    for (size_t i = 0; i < n; i++) {
        const kt_snapshot_t *s = inputs[i];
        in[i].s = s;
        if (own && s->count) {
            in[i].own = own[i];
            if (!(in[i].merged = calloc(s->count, 1))) {
                free(pl);
                it->rc = KT_ENOMEM;
                return merge_end(it, NULL);
            }
        }
        if (opts && opts->offset_ns) { /* the caller's alignment (the MPI gather's) */
            in[i].offset = opts->offset_ns[i];
            in[i].bound = strncmp(s->host, inputs[0]->host, sizeof s->host) ? UINT64_MAX : 0;
        } else {
            in[i].offset = pl[i].offset;
            in[i].bound = pl[i].bound;
            in[i].anchor = pl[i].anchor;
        }
        if (opts && opts->bound_ns) { /* the caller's bound, at every time */
            in[i].bound = opts->bound_ns[i];
            memset(&in[i].anchor, 0, sizeof in[i].anchor);
        }
        pl[i].offset = in[i].offset;
        pl[i].bound = in[i].bound;
        in[i].taken = (__int128)s->taken_ns + in[i].offset;
        if (in[i].taken > latest)
            latest = in[i].taken;
        o->kernels_dropped = sat_add(o->kernels_dropped, s->kernels_dropped);
        o->names_truncated = sat_add(o->names_truncated, s->names_truncated);
    }
    kt__merge_clock_anchor(inputs, n, pl, o);
    free(pl);
    o->pid = 0;
    o->rank = -1;
    o->taken_ns = latest > (__int128)UINT64_MAX ? UINT64_MAX : (uint64_t)latest;
    int rc = merge_devices(in, n, o, opts && opts->by_model);
    if (!rc)
        rc = merge_tables(in, n, o);
    if (!rc)
        rc = sort_refs(in, n, o, &it->refs, &it->total, &it->groups, &it->in_order);
    if (!rc && !it->groups)
        rc = merge_finish(it);
    if (rc) {
        it->rc = rc;
        return merge_end(it, NULL);
    }
    *out = it;
    return 0;
}

const kt_snapshot_t *kt__merge_result(const kt__merge_iter_t *it) { return it->o; }

size_t kt__merge_count(const kt__merge_iter_t *it) { return it->groups; }

int kt__merge_status(const kt__merge_iter_t *it) { return it->rc; }

/* The next group: *g[0..*m), in refs or (in_order) read from the input's entries into it->group. */
static int next_group(kt__merge_iter_t *it, const ref_t **g, size_t *m)
{
    size_t i = it->at, j = i + 1;
    if (!it->in_order) {
        while (j < it->total && !ref_order(&it->refs[i], &it->refs[j]))
            j++;
        *g = it->refs + i;
        *m = j - i;
        return 0;
    }
    size_t n = 0;
    for (;;) {
        if (n == it->group_cap) {
            size_t cap = it->group_cap ? 2 * it->group_cap : 8;
            ref_t *grown = realloc(it->group, cap * sizeof *grown);
            if (!grown)
                return KT_ENOMEM;
            it->group = grown;
            it->group_cap = cap;
        }
        /* the ref read as the last group's end is this one: not looked up again */
        it->group[n] = it->peek.e && it->peek.entry == i + n ? it->peek : ref_of(&it->in[0], 0, it->o, i + n);
        n++;
        if (i + n >= it->total)
            break;
        it->peek = ref_of(&it->in[0], 0, it->o, i + n);
        if (ref_order(&it->group[0], &it->peek))
            break;
    }
    *g = it->group;
    *m = n;
    return 0;
}

int kt__merge_next(kt__merge_iter_t *it, kt_kernel_timing_t *t)
{
    memset(t, 0, sizeof *t);
    if (it->rc)
        return it->rc;
    if (it->made >= it->groups)
        return KT_EINVAL;
    input_t *in = it->in;
    const ref_t *g;
    size_t m;
    int rc = next_group(it, &g, &m);
    if (rc) {
        it->rc = rc;
        return rc;
    }
    for (size_t k = 0; k < m; k++)
        in[g[k].input].entry_map[g[k].entry] = (uint32_t)it->made;
    rc = merge_group(g, m, in, it->acc, t);
    for (size_t k = 0; k < m && in[g[k].input].own; k++)
        in[g[k].input].merged[g[k].entry] = 1;
    for (size_t k = 0; k < m && in[g[k].input].own; k++)
        if (k == 0 || g[k].input != g[k - 1].input)
            release_merged(&in[g[k].input], 0);
    it->at += m;
    it->made++;
    if (it->refs) /* groups done are not read again */
        give_back_below(it->refs, &it->refs_given, it->at * sizeof *it->refs);
    if (!rc && it->made == it->groups)
        rc = merge_finish(it);
    it->rc = rc;
    return rc;
}

/* Frees the iteration; *out: the result (NULL: freed), only when every entry was made without failure. Returns the
 * first failure, KT_EINVAL when not every entry was made, or 0. */
static int merge_end(kt__merge_iter_t *it, kt_snapshot_t **out)
{
    if (out)
        *out = NULL;
    if (!it)
        return KT_EINVAL;
    int rc = it->rc ? it->rc : it->made < it->groups ? KT_EINVAL : 0;
    for (size_t k = 0; k < it->n; k++) {
        if (it->in[k].own && it->in[k].merged)
            release_merged(&it->in[k], 1);
        free(it->in[k].entry_map);
        free(it->in[k].dev_map);
        free(it->in[k].merged);
    }
    free(it->in);
    free(it->refs);
    free(it->group);
    free(it->acc);
    entry_clear(&it->cur);
    if (rc || !out)
        kt_snapshot_free(it->o);
    else
        *out = it->o;
    free(it);
    return rc;
}

void kt__merge_end(kt__merge_iter_t *it) { merge_end(it, NULL); }

/* Entry i of the view: the next group merged into the iterator's own entry, the one before it freed. In order
 * only (i is the count made so far); NULL on a failure (kt__merge_status says which) or out of order. */
static const kt_kernel_timing_t *view_next(const kt__entry_view_t *v, size_t i, kt_kernel_timing_t *tmp)
{
    (void)tmp;
    kt__merge_iter_t *it = (kt__merge_iter_t *)v->user;
    entry_clear(&it->cur);
    if (i != it->made || kt__merge_next(it, &it->cur)) {
        entry_clear(&it->cur);
        return NULL;
    }
    return &it->cur;
}

void kt__merge_view(kt__merge_iter_t *it, kt__entry_view_t *v)
{
    *v = (kt__entry_view_t){it->groups, NULL, view_next, it, NULL, 0, 1};
}

static int merge_any(const kt_snapshot_t *const *inputs, kt_snapshot_t *const *own, size_t n,
                     const kt_merge_opts_t *opts, kt_snapshot_t **out)
{
    if (!out)
        return KT_EINVAL;
    *out = NULL;
    kt__merge_iter_t *it;
    int rc = kt__merge_begin(inputs, own, n, opts, &it);
    if (rc)
        return rc;
    kt_snapshot_t *o = it->o;
    if (it->groups && !(o->entries = calloc(it->groups, sizeof *o->entries)))
        it->rc = KT_ENOMEM;
    while (!it->rc && o->count < it->groups) {
        kt__merge_next(it, &o->entries[o->count]);
        o->count++; /* also on failure: kt_snapshot_free releases what the entry holds */
    }
    return merge_end(it, out);
}

int kt_snapshot_merge(const kt_snapshot_t *const *inputs, size_t n, const kt_merge_opts_t *opts, kt_snapshot_t **out)
{
    return merge_any(inputs, NULL, n, opts, out);
}

int kt__snapshot_merge_consume(kt_snapshot_t *const *inputs, size_t n, const kt_merge_opts_t *opts,
                               kt_snapshot_t **out)
{
    return merge_any((const kt_snapshot_t *const *)inputs, inputs, n, opts, out);
}
