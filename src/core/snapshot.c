/* snapshot.c — merge every shard into a sorted, immutable kt_snapshot_t; find and free. */
#include "core/internal.h"
#include "core/service.h"
#include "common/shared.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One entry while it is being built, with the kernel id spans refer to. */
typedef struct entry_build_t {
    kt_kernel_timing_t t; /* the public entry */
    uint32_t kernel;      /* kernel id */
} entry_build_t;

/* A shard's reservoir for one kernel, being drawn from. */
typedef struct pool_t {
    uint64_t remaining; /* records of the shard not yet accounted for */
    uint32_t size;      /* samples left in buf */
    size_t off;         /* where the copy starts in the snapshot's pool buffer */
    uint64_t *buf;      /* copy of the shard's reservoir */
} pool_t;

/* Scalars of one slot, read under its seqlock. */
typedef struct slot_read_t {
    uint64_t count, total, total_hi, sq_lo, sq_hi, min, max, last, last_stamp, bytes;
} slot_read_t;

static void slot_read(kt__slot_t *sl, slot_read_t *r)
{
    for (;;) {
        /* Acquire loads throughout: the matching half of the writer's release stores (recorder.c). */
        uint64_t q1 = KT__LDA(&sl->seq);
        r->count = KT__LDA(&sl->count);
        r->total = KT__LDA(&sl->total);
        r->total_hi = KT__LDA(&sl->total_hi);
        r->sq_lo = KT__LDA(&sl->sq_lo);
        r->sq_hi = KT__LDA(&sl->sq_hi);
        r->min = KT__LDA(&sl->min);
        r->max = KT__LDA(&sl->max);
        r->last = KT__LDA(&sl->last);
        r->last_stamp = KT__LDA(&sl->last_stamp);
        uint64_t q2 = KT__LD(&sl->seq);
        if (q1 == q2 && !(q1 & 1))
            return;
        sched_yield();
    }
}

static kt__slot_t *shard_slot(kt__shard_t *s, uint32_t id)
{
    kt__slot_ptr *chunk = KT__LDA(&s->dir[id >> KT__CHUNK_BITS]);
    return chunk ? KT__LDA(&chunk[id & (KT__CHUNK - 1u)]) : NULL;
}

/* Nearest-rank percentiles (the ceil(p*n)-th smallest) from the merged histogram, clamped to [min, max], all
 * three in one pass over the blocks marked in `used`. */
static void hist_percentiles(const uint64_t *h, uint64_t used, uint64_t n, kt_kernel_timing_t *t)
{
    static const double ps[3] = {0.50, 0.90, 0.99};
    uint64_t *out[3] = {&t->p50_ns, &t->p90_ns, &t->p99_ns};
    uint64_t rank[3];
    for (int k = 0; k < 3; k++) {
        double want = ps[k] * (double)n;
        rank[k] = (uint64_t)want;
        if ((double)rank[k] < want)
            rank[k]++;
        if (rank[k] < 1)
            rank[k] = 1;
        *out[k] = t->max_ns;
    }
    if (!n)
        return;
    uint64_t cum = 0;
    int k = 0;
    for (uint32_t b = 0; b < KT__HIST_BLOCKS && k < 3; b++) {
        if (!(used >> b & 1))
            continue;
        for (uint32_t j = 0; j < KT__HIST_BLOCK && k < 3; j++) {
            uint32_t i = b * KT__HIST_BLOCK + j;
            cum += h[i];
            while (k < 3 && cum >= rank[k])
                *out[k++] = kt__hist_value(i);
        }
    }
    for (k = 0; k < 3; k++)
        *out[k] = *out[k] < t->min_ns ? t->min_ns : *out[k] > t->max_ns ? t->max_ns : *out[k];
}

/* The merged histogram's non-empty buckets into t->hist (what merging snapshots needs). 0 or KT_ENOMEM. */
static int hist_bins(const uint64_t *h, uint64_t used, kt_kernel_timing_t *t)
{
    uint32_t n = 0;
    for (uint32_t b = 0; b < KT__HIST_BLOCKS; b++)
        for (uint32_t j = 0; (used >> b & 1) && j < KT__HIST_BLOCK; j++)
            n += h[b * KT__HIST_BLOCK + j] != 0;
    if (!n)
        return 0;
    t->hist = malloc(n * sizeof *t->hist);
    if (!t->hist)
        return KT_ENOMEM;
    for (uint32_t b = 0, w = 0; b < KT__HIST_BLOCKS; b++)
        for (uint32_t j = 0; (used >> b & 1) && j < KT__HIST_BLOCK; j++) {
            uint32_t i = b * KT__HIST_BLOCK + j;
            if (h[i])
                t->hist[w++] = (kt_hist_bin_t){kt__hist_lower(i), h[i]};
        }
    t->hist_count = n;
    return 0;
}

/* Uniform sample of min(cap, N) of the N records behind the shards' reservoirs (N = the pools' `remaining`
 * summed): draw without replacement,
 * choosing a shard in proportion to its records not yet drawn, then a random unused sample of that shard (a
 * uniform subset of a uniform reservoir is a uniform subset of the shard's records). */
static uint32_t merge_samples(pool_t *pools, uint32_t npools, uint64_t total, uint32_t cap, uint64_t *out,
                              uint64_t *rng)
{
    uint32_t k = total < cap ? (uint32_t)total : cap;
    for (uint32_t t = 0; t < k; t++) {
        uint64_t r = kt__rand_below(rng, total);
        uint32_t i = 0;
        while (i + 1 < npools && r >= pools[i].remaining)
            r -= pools[i++].remaining;
        pool_t *p = &pools[i];
        if (!p->size) /* defensive: remaining >= size in every pool and at most cap draws keep size above 0 */
            return t;
        uint32_t j = (uint32_t)kt__rand_below(rng, p->size);
        out[t] = p->buf[j];
        p->buf[j] = p->buf[--p->size];
        p->remaining--;
        total--;
    }
    return k;
}

static int entry_cmp(const void *a, const void *b)
{
    return kt__entry_order(&((const entry_build_t *)a)->t, &((const entry_build_t *)b)->t);
}

static int span_cmp(const void *a, const void *b)
{
    const kt_span_t *x = a, *y = b;
    if (x->start_ns != y->start_ns)
        return x->start_ns < y->start_ns ? -1 : 1;
    if (x->end_ns != y->end_ns)
        return x->end_ns < y->end_ns ? -1 : 1;
    return x->entry < y->entry ? -1 : x->entry > y->entry;
}

/* ---------------------------------------------------------------------------------------------------
 * kt_snapshot
 * ------------------------------------------------------------------------------------------------- */

/* Consistency (the guarantee ktiming.h states): kt_reset() waits while a snapshot runs, so the generation read
 * here holds to the end and no shard read is cleared under it; a shard still holding an older generation has
 * no record of this one and is skipped. Within the generation every owner writes in this order: a record's
 * scalars, then its histogram count and reservoir sample, then (zones, dispatches) its span and the shard's
 * span_count, each published by a release store. The snapshot reads in the opposite order with acquire
 * loads: span counts, then per slot the reservoir and histogram, then the scalars. So every span, sample and
 * histogram count it copies belongs to a record the scalars it reads afterwards include, and as min only
 * falls and max only rises within a generation, every sample lies in [min_ns, max_ns]. */
kt_snapshot_t *kt_snapshot(void)
{
    kt__ensure_init();
    kt__backends_flush(kt__now() + KT__FLUSH_WAIT_NS);

    kt_snapshot_t *snap = calloc(1, sizeof *snap);
    if (!snap)
        return NULL;
    snap->taken_ns = kt__now();
    if (gethostname(snap->host, sizeof snap->host) != 0)
        snap->host[0] = 0;
    snap->host[sizeof snap->host - 1] = 0;
    snap->pid = (int64_t)getpid();
    snap->rank = kt__rank();
    snap->kernels_dropped = kt__kernels_dropped();

    kt__reset_hold();
    uint64_t gen = kt__generation();
    uint32_t cap = kt__cfg.sample_capacity;

    /* Shards holding this generation's data (a shard not yet renewed after a reset holds none). */
    kt__shard_t *head = kt__shards_head(); /* shards are pushed at the head: the list from here is fixed */
    uint32_t ns = 0;
    for (kt__shard_t *s = head; s; s = s->next)
        ns++;
    kt__shard_t **shards = calloc(ns ? ns : 1, sizeof *shards);
    uint32_t *span_n = calloc(ns ? ns : 1, sizeof *span_n); /* each shard's spans, counted before the slots */
    pool_t *pools = calloc(ns ? ns : 1, sizeof *pools);
    size_t poolcap = cap, poolused; /* poolbuf grows to the largest kernel's reservoirs, not ns x cap */
    uint64_t *poolbuf = malloc(poolcap * sizeof(uint64_t));
    uint64_t *hist = calloc(KT__HIST_BUCKETS, sizeof(uint64_t)); /* zeroed again block by block after use */
    entry_build_t *eb = NULL;
    uint32_t *kid_entry = NULL;
    if (!shards || !span_n || !pools || !poolbuf || !hist)
        goto fail;
    uint32_t nvalid = 0;
    for (kt__shard_t *s = head; s; s = s->next)
        if (KT__LDA(&s->gen) == gen) {
            span_n[nvalid] = KT__LDA(&s->span_count);
            shards[nvalid++] = s;
        }
    /* After the span counts: every kernel a counted span names is at most nk. */
    uint32_t nk = kt__kernel_count();
    eb = calloc(nk ? nk : 1, sizeof *eb);
    kid_entry = malloc(((size_t)nk + 1) * sizeof *kid_entry);
    if (!eb || !kid_entry)
        goto fail;
    uint64_t rng = 0x736e617073686f74ull ^ gen;
    uint32_t ne = 0;
    uint64_t used = 0; /* histogram blocks holding counts, zeroed again before the next kernel */

    for (uint32_t id = 1; id <= nk; id++) {
        for (uint32_t b = 0; b < KT__HIST_BLOCKS; b++)
            if (used >> b & 1)
                memset(hist + b * KT__HIST_BLOCK, 0, KT__HIST_BLOCK * sizeof(uint64_t));
        used = 0;
        kid_entry[id] = UINT32_MAX;
        kt_kernel_timing_t t;
        memset(&t, 0, sizeof t);
        unsigned __int128 sum = 0, sq = 0;
        uint64_t best_stamp = 0;
        uint32_t best_shard = 0, npools = 0;
        int any = 0;
        uint64_t hist_n = 0;           /* counts merged into hist */
        uint64_t pool_total = 0;       /* records the pools stand for */
        poolused = 0;

        for (uint32_t si = 0; si < nvalid; si++) {
            kt__slot_t *sl = shard_slot(shards[si], id);
            if (!sl)
                continue;
            /* Reservoir and histogram before the scalars (see the comment above kt_snapshot). */
            uint32_t fill = KT__LDA(&sl->res_fill);
            if (poolused + fill > poolcap) {
                size_t nc = poolcap * 2 > poolused + fill ? poolcap * 2 : poolused + fill;
                uint64_t *nb = realloc(poolbuf, nc * sizeof(uint64_t));
                if (!nb)
                    goto fail_entries;
                poolbuf = nb;
                poolcap = nc;
            }
            for (uint32_t j = 0, off; j < fill; j++) { /* every block below res_fill is published */
                uint32_t k = kt__smp_block(j, &off);
                poolbuf[poolused + j] = KT__LDA(&KT__LDA(&sl->smp[k])[off]);
            }
            for (uint32_t b = 0; b < KT__HIST_BLOCKS; b++) {
                _Atomic uint64_t *blk = KT__LDA(&sl->hist[b]);
                if (!blk)
                    continue;
                used |= (uint64_t)1 << b;
                for (uint32_t j = 0; j < KT__HIST_BLOCK; j++) {
                    uint64_t c = KT__LDA(&blk[j]);
                    hist[b * KT__HIST_BLOCK + j] += c;
                    hist_n += c;
                }
            }
            slot_read_t r;
            uint64_t bytes = KT__LDA(&sl->bytes); /* before the scalars: only bytes of counted dispatches */
            slot_read(sl, &r);
            r.bytes = bytes;
            t.errors += KT__LD(&sl->errors);
            t.dropped += KT__LD(&sl->dropped);
            for (int d = 0; d < KT_DROP_REASON_COUNT; d++)
                t.dropped_by[d] += KT__LD(&sl->dropped_by[d]);
            t.spans_dropped += KT__LD(&sl->spans_dropped);
            if (!r.count)
                continue;
            if (!any || r.min < t.min_ns)
                t.min_ns = r.min;
            if (r.max > t.max_ns)
                t.max_ns = r.max;
            /* Latest by end time when records carry one; else the most recently created shard's last. */
            uint32_t idx = shards[si]->index;
            if (!any || r.last_stamp > best_stamp || (r.last_stamp == best_stamp && idx > best_shard)) {
                best_stamp = r.last_stamp;
                best_shard = idx;
                t.last_ns = r.last;
            }
            any = 1;
            t.dispatch_count += r.count;
            t.bytes += r.bytes;
            sum += (unsigned __int128)r.total_hi << 64 | r.total;
            sq += (unsigned __int128)r.sq_hi << 64 | r.sq_lo;
            /* A reservoir still filling holds exactly its first `fill` records (a record being stored may be
             * counted already); a full one is a uniform sample of the shard's records. */
            pool_t *p = &pools[npools++];
            p->size = fill;
            p->remaining = fill < cap ? fill : r.count;
            p->buf = NULL;
            p->off = poolused;
            pool_total += p->remaining;
            poolused += fill;
        }
        for (uint32_t i = 0; i < npools; i++) /* poolbuf may have moved while growing */
            pools[i].buf = poolbuf + pools[i].off;
        if (!any && !t.errors && !t.dropped && !t.spans_dropped)
            continue;

        const kt__kernel_t *k = kt__kernel_get(id);
        t.backend = k->backend;
        t.name = strdup(k->name);
        t.device = strdup(k->device);
        if (!t.name || !t.device) {
            free((void *)t.name);
            free((void *)t.device);
            goto fail_entries;
        }
        t.total_ns = sum > UINT64_MAX ? UINT64_MAX : (uint64_t)sum;
        t.total128 = (kt_u128_t){(uint64_t)sum, (uint64_t)(sum >> 64)};
        t.sumsq128 = (kt_u128_t){(uint64_t)sq, (uint64_t)(sq >> 64)};
        kt__kernel_last_error(id, t.last_error, sizeof t.last_error);
        if (t.dispatch_count) {
            t.mean_ns = (double)sum / (double)t.dispatch_count;
            t.stddev_ns = kt__stddev_exact(t.dispatch_count, sum, sq);
            hist_percentiles(hist, used, hist_n, &t);
            if (hist_bins(hist, used, &t) != 0) {
                free((void *)t.name);
                free((void *)t.device);
                goto fail_entries;
            }
            uint32_t want = t.dispatch_count < cap ? (uint32_t)t.dispatch_count : cap;
            t.samples = malloc(want * sizeof(uint64_t));
            if (!t.samples) {
                free(t.hist);
                free((void *)t.name);
                free((void *)t.device);
                goto fail_entries;
            }
            t.sample_count = merge_samples(pools, npools, pool_total, cap, t.samples, &rng);
        }
        eb[ne].t = t;
        eb[ne].kernel = id;
        ne++;
    }

    qsort(eb, ne, sizeof *eb, entry_cmp);
    if (ne) {
        snap->entries = malloc(ne * sizeof *snap->entries);
        if (!snap->entries)
            goto fail_entries;
        for (uint32_t i = 0; i < ne; i++) {
            snap->entries[i] = eb[i].t;
            kid_entry[eb[i].kernel] = i;
        }
        snap->count = ne;
    }
    ne = 0; /* owned by snap from here */

    /* Spans: those each shard had published before its slots were read (all counted in the entries). */
    size_t nspan = 0;
    for (uint32_t si = 0; si < nvalid; si++)
        nspan += span_n[si];
    if (nspan) {
        snap->spans = malloc(nspan * sizeof *snap->spans);
        if (!snap->spans)
            goto fail_entries;
        size_t w = 0;
        for (uint32_t si = 0; si < nvalid && w < nspan; si++) {
            kt__shard_t *s = shards[si];
            uint32_t n = span_n[si];
            kt__span_rec_t *log = KT__LDA(&s->spans);
            for (uint32_t i = 0; log && i < n && w < nspan; i++) {
                uint32_t kid = KT__LD(&log[i].kernel);
                if (kid == 0 || kid > nk || kid_entry[kid] == UINT32_MAX)
                    continue;
                kt_span_t *o = &snap->spans[w++];
                o->entry = kid_entry[kid];
                uint32_t q = KT__LD(&log[i].queue);
                o->queue = q ? q - 1 : UINT32_MAX;
                uint32_t th = KT__LD(&log[i].thread);
                o->thread = th ? th - 1 : 0;
                o->flags = KT__LD(&log[i].flags);
                o->duration_ns = KT__LD(&log[i].t[0]);
                o->enqueue_ns = KT__LD(&log[i].t[1]);
                o->queued_ns = KT__LD(&log[i].t[2]);
                o->submit_ns = KT__LD(&log[i].t[3]);
                o->start_ns = KT__LD(&log[i].t[4]);
                o->end_ns = KT__LD(&log[i].t[5]);
                o->uncertainty_ns = KT__LD(&log[i].t[6]);
            }
        }
        snap->span_count = w;
    }
    kt__reset_release();
    if (snap->span_count)
        qsort(snap->spans, snap->span_count, sizeof *snap->spans, span_cmp);
    snap->queues = kt__queues_copy(&snap->queue_count);
    snap->threads = kt__threads_copy(&snap->thread_count);
    snap->devices = kt__devices_copy(&snap->device_count);

    free(shards);
    free(span_n);
    free(pools);
    free(poolbuf);
    free(hist);
    free(eb);
    free(kid_entry);
    return snap;

fail_entries:
    for (uint32_t i = 0; i < ne; i++) {
        free((void *)eb[i].t.name);
        free((void *)eb[i].t.device);
        free(eb[i].t.samples);
        free(eb[i].t.hist);
    }
fail:
    kt__reset_release();
    free(shards);
    free(span_n);
    free(pools);
    free(poolbuf);
    free(hist);
    free(eb);
    free(kid_entry);
    kt_snapshot_free(snap);
    return NULL;
}

void kt_snapshot_free(kt_snapshot_t *snap)
{
    if (!snap)
        return;
    for (size_t i = 0; i < snap->count; i++) {
        free((void *)snap->entries[i].name);
        free((void *)snap->entries[i].device);
        free(snap->entries[i].samples);
        free(snap->entries[i].hist);
        free(snap->entries[i].by_source);
    }
    free(snap->entries);
    free(snap->sources);
    free(snap->spans);
    free(snap->queues);
    free(snap->threads);
    free(snap->devices);
    free(snap);
}

const kt_kernel_timing_t *kt_snapshot_find(const kt_snapshot_t *snap, const char *name, kt_backend_t backend,
                                           const char *device)
{
    if (!snap || !name)
        return NULL;
    for (size_t i = 0; i < snap->count; i++) {
        const kt_kernel_timing_t *t = &snap->entries[i];
        if (t->backend == backend && t->name && !strcmp(t->name, name) &&
            (!device || (t->device && !strcmp(t->device, device))))
            return t;
    }
    return NULL;
}
