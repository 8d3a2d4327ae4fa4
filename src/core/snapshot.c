/* snapshot.c — merge every shard into a sorted, immutable kt_snapshot_t; find and free. */
#include "core/device_label.h"
#include "core/internal.h"
#include "core/service.h"
#include "shared/clock_anchor.h"
#include "shared/shared.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
    uint64_t count, total, total_hi, sq_lo, sq_hi, min, max, last, last_stamp, pend, bytes;
} slot_read_t;

/* Does [p, p + n) lie in what src may read: any non-NULL pointer of this process, or the dead program's arena? */
static inline int src_ok(const kt__src_t *src, const void *p, size_t n)
{
    if (src->lo == src->hi)
        return p != NULL;
    uintptr_t a = (uintptr_t)p;
    return a >= src->lo && a < src->hi && n <= src->hi - a;
}

/* Seqlock read attempts on a dead program's slot: its owner may have died mid-update (the sequence number odd
 * forever); the values then read are taken as they are, the interrupted record counted or not. */
#define KT__DEAD_TRIES 64

static void slot_read(const kt__src_t *src, kt__slot_t *sl, slot_read_t *r)
{
    for (int tries = 0;; tries++) {
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
        r->pend = KT__LDA(&sl->pend);
        uint64_t q2 = KT__LD(&sl->seq);
        if ((q1 == q2 && !(q1 & 1)) || (src->lo != src->hi && tries >= KT__DEAD_TRIES)) {
            if (r->min > r->max && r->count) /* a torn read of a dead owner's record */
                r->min = r->max;
            return;
        }
        sched_yield();
    }
}

static kt__slot_t *shard_slot(const kt__src_t *src, kt__shard_t *s, uint32_t id)
{
    kt__slot_t *chunk = KT__LDA(&s->dir[id >> KT__CHUNK_BITS]);
    if (!chunk || !src_ok(src, chunk, KT__CHUNK * sizeof *chunk))
        return NULL;
    kt__slot_cold_t *cold = KT__LDA(&chunk[id & (KT__CHUNK - 1u)].cold);
    return cold && src_ok(src, cold, sizeof *cold) ? &chunk[id & (KT__CHUNK - 1u)] : NULL;
}

/* Kernel id's record in src, ids 1..nk (NULL: none, or not readable). */
static const kt__kernel_t *src_kernel(const kt__src_t *src, uint32_t nk, uint32_t id)
{
    if (id == 0 || id > nk)
        return NULL;
    kt__kernel_t *chunk = KT__LDA(&src->kdir[id >> KT__CHUNK_BITS]);
    if (!chunk || !src_ok(src, chunk, KT__CHUNK * sizeof *chunk))
        return NULL;
    const kt__kernel_t *k = &chunk[id & (KT__CHUNK - 1u)];
    if (src->lo == src->hi)
        return k;
    /* a dead program's strings: NUL-terminated inside the arena */
    if (!src_ok(src, k->name, 1) || !src_ok(src, k->device, 1) ||
        !memchr(k->name, 0, src->hi - (uintptr_t)k->name) || !memchr(k->device, 0, src->hi - (uintptr_t)k->device))
        return NULL;
    return k;
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

/* Merges the sorted runs a[lo, mid) and a[mid, hi) in place, through tmp (room for the shorter run). Stable. */
static void merge_runs(kt_span_t *a, size_t lo, size_t mid, size_t hi, kt_span_t *tmp)
{
    size_t nl = mid - lo, nr = hi - mid;
    if (nl <= nr) { /* the left run aside, merged forward: writes never pass the right run's next read */
        memcpy(tmp, a + lo, nl * sizeof *a);
        size_t i = 0, j = mid, w = lo;
        while (i < nl && j < hi)
            a[w++] = span_cmp(&a[j], &tmp[i]) < 0 ? a[j++] : tmp[i++];
        memcpy(a + w, tmp + i, (nl - i) * sizeof *a);
    } else { /* the right run aside, merged backward */
        memcpy(tmp, a + mid, nr * sizeof *a);
        size_t i = mid, j = nr, w = hi; /* one past the next to take */
        while (i > lo && j > 0)
            a[--w] = span_cmp(&tmp[j - 1], &a[i - 1]) < 0 ? a[--i] : tmp[--j];
        memcpy(a + lo, tmp, j * sizeof *a);
    }
}

/* Sorts spans by span_cmp. Each shard's log is usually in order already (a collector records in completion
 * order), so the spans are a few ascending runs: those are merged pairwise in place, O(n log runs), through a
 * buffer the size of the shorter run of each pair (a few spans when one shard holds nearly all), instead of a
 * full sort (16,384 spans: ~1 ms with qsort). Many short runs, or no memory, fall back to qsort. */
static void sort_spans(kt_span_t *a, size_t n)
{
    if (n < 2)
        return;
    size_t runs = 1;
    for (size_t i = 1; i < n; i++)
        runs += span_cmp(&a[i - 1], &a[i]) > 0;
    if (runs == 1)
        return;
    size_t *edge = runs <= n / 16 ? malloc((runs + 1) * sizeof *edge) : NULL; /* run k is [edge[k], edge[k+1]) */
    if (!edge) {
        qsort(a, n, sizeof *a, span_cmp);
        return;
    }
    size_t k = 0;
    edge[k++] = 0;
    for (size_t i = 1; i < n; i++)
        if (span_cmp(&a[i - 1], &a[i]) > 0)
            edge[k++] = i;
    edge[k] = n;
    size_t need = 0; /* the largest shorter run of a pair, over every level */
    for (size_t r = runs, level = 1; r > 1; r = (r + 1) / 2, level *= 2)
        for (size_t p = 0; p + level < runs; p += 2 * level) {
            size_t lo = edge[p], mid = edge[p + level], hi = edge[p + 2 * level < runs ? p + 2 * level : runs];
            size_t m = mid - lo < hi - mid ? mid - lo : hi - mid;
            need = m > need ? m : need;
        }
    kt_span_t *tmp = malloc(need * sizeof *tmp);
    if (!tmp) {
        free(edge);
        qsort(a, n, sizeof *a, span_cmp);
        return;
    }
    for (size_t level = 1; level < runs; level *= 2)
        for (size_t p = 0; p + level < runs; p += 2 * level)
            merge_runs(a, edge[p], edge[p + level], edge[p + 2 * level < runs ? p + 2 * level : runs], tmp);
    free(tmp);
    free(edge);
}

/* ---------------------------------------------------------------------------------------------------
 * kt_snapshot
 * ------------------------------------------------------------------------------------------------- */

/* Consistency (the guarantee ktiming.h states): kt_reset() waits while a snapshot runs, so the generation read
 * here holds to the end and no shard read is cleared under it; a shard still holding an older generation has
 * no record of this one and is skipped. Within the generation every owner writes in this order: a record's
 * scalars (with `pend`, its duration), then its reservoir sample, then (zones, dispatches) its span and the
 * shard's span_count, each published by a release store; its histogram count is stored by the slot's next
 * record, inside that record's seqlock (recorder.c, slot_add_fast). The snapshot reads in the opposite order
 * with acquire loads: span counts, then per slot the reservoir and histogram, then the scalars and `pend`,
 * whose bucket it adds. So every span, sample and histogram count it copies belongs to
 * a record the scalars it reads afterwards include, `pend` is never a record already in the histogram it read,
 * and as min only falls and max only rises within a generation, every sample lies in [min_ns, max_ns]. */
/* The working state of one snapshot: the shards of the generation being read, the reservoir pools and the
 * merged histogram of the kernel being built, and the entries built so far (owned here until published). */
typedef struct build_t {
    const kt__src_t *src;    /* what is read */
    uint32_t cap;            /* sample capacity */
    kt__shard_t **shards;    /* shards holding this generation's data */
    uint32_t *span_n;        /* each shard's spans, counted before the slots */
    uint32_t nvalid;         /* shards[0..nvalid) */
    pool_t *pools;           /* one per shard holding the kernel */
    uint64_t *poolbuf;       /* their samples; grows to the largest kernel's reservoirs, not nvalid x cap */
    size_t poolcap, poolused;
    uint64_t *hist;          /* the kernel's merged histogram */
    uint64_t used;           /* its blocks holding counts, zeroed again before the next kernel */
    uint64_t hist_n;         /* the counts it holds */
    kt_config_timing_t *cfg; /* the kernel's rows by launch configuration from every shard, folded at the end */
    uint32_t ncfg, cfgcap;
    entry_build_t *eb;       /* entries built */
    uint32_t ne;             /* eb[0..ne) owned here */
    uint32_t *kid_entry;     /* kernel id -> entry index (UINT32_MAX: none) */
    uint32_t nk;             /* kernel ids 1..nk */
    uint64_t rng;            /* reservoir merging */
    const kt_device_info_t *dev; /* the snapshot's device records, labelled (entries take their labels) */
    size_t ndev;
} build_t;

static void build_free(build_t *b)
{
    for (uint32_t i = 0; i < b->ne; i++)
        kt__entry_release(&b->eb[i].t);
    free(b->cfg);
    free(b->shards);
    free(b->span_n);
    free(b->pools);
    free(b->poolbuf);
    free(b->hist);
    free(b->eb);
    free(b->kid_entry);
}

static uint64_t read_host(void *ctx)
{
    (void)ctx;
    return kt__now();
}

/* Host, pid, rank, time, the kernel-limit count, and the clock anchor (CLOCK_MONOTONIC against the host
 * timeline: what `ktiming merge` puts a Node WebGPU snapshot's times on this timeline with). */
static void snapshot_header(kt_snapshot_t *snap, const kt__src_t *src)
{
    /* a dead program's: read here without calibrating this process's clock (same base) */
    snap->taken_ns = !src->arena ? kt__now() : kt__clock_ns(CLOCK_MONOTONIC_RAW);
    if (gethostname(snap->host, sizeof snap->host) != 0)
        snap->host[0] = 0;
    snap->host[sizeof snap->host - 1] = 0;
    snap->pid = (int64_t)getpid();
    snap->rank = kt__rank();
    snap->kernels_dropped = src->kernels_dropped;
    snap->names_truncated = src->names_truncated;
    snprintf(snap->clock_domain, sizeof snap->clock_domain, "%s", KT_CLOCK_HOST);
    if (!src->arena) /* a dead program's times are CLOCK_MONOTONIC_RAW of this machine: read that */
        kt__clock_anchor_take(kt__clock_read_monotonic, read_host, NULL, kt__hc_bound_ns(), KT_CLOCK_ANCHOR_TRIES,
                              &snap->clock_anchor);
    else
        kt__clock_anchor_take(kt__clock_read_monotonic, kt__clock_read_raw, NULL, 0, KT_CLOCK_ANCHOR_TRIES,
                              &snap->clock_anchor);
}

/* Shards in a dead program's list at most (a list corrupted into a cycle ends there). */
#define KT__DEAD_SHARDS (1u << 20)

/* The shards of generation gen (a shard not yet renewed after a reset holds none), their span counts, then the
 * kernel count: every kernel a counted span names is at most nk. -1 when out of memory. */

static int build_init(build_t *b, const kt__src_t *src)
{
    uint64_t gen = src->gen;
    memset(b, 0, sizeof *b);
    b->src = src;
    b->cap = src->sample_capacity ? src->sample_capacity : 1;
    kt__shard_t *head = src->head; /* shards are pushed at the head: the list from here is fixed */
    uint32_t ns = 0;
    /* shards are pushed at the head in creation order: a dead program's list whose indices stop falling is
     * looped (or torn) there */
    for (kt__shard_t *s = head, *prev = NULL; s && src_ok(src, s, sizeof *s) && ns < KT__DEAD_SHARDS &&
                                              (src->lo == src->hi || !prev || s->index < prev->index);
         prev = s, s = s->next)
        ns++;
    b->shards = calloc(ns ? ns : 1, sizeof *b->shards);
    b->span_n = calloc(ns ? ns : 1, sizeof *b->span_n);
    b->pools = calloc(ns ? ns : 1, sizeof *b->pools);
    b->poolcap = b->cap;
    b->poolbuf = malloc(b->poolcap * sizeof(uint64_t));
    b->hist = calloc(KT__HIST_BUCKETS, sizeof(uint64_t));
    if (!b->shards || !b->span_n || !b->pools || !b->poolbuf || !b->hist)
        return -1;
    uint32_t seen = 0;
    for (kt__shard_t *s = head; s && seen < ns; s = s->next, seen++)
        if (KT__LDA(&s->gen) == gen) {
            uint32_t n = KT__LDA(&s->span_count);
            kt__span_rec_t *log = KT__LDA(&s->spans);
            if (src->lo != src->hi && (n > src->span_capacity || !src_ok(src, log, (size_t)n * sizeof *log)))
                n = 0; /* a dead program's span log not readable whole: its spans are left out */
            b->span_n[b->nvalid] = n;
            b->shards[b->nvalid++] = s;
        }
    b->nk = src->arena ? src->nk : kt__kernel_count(); /* live: read after the span counts */
    b->eb = calloc(b->nk ? b->nk : 1, sizeof *b->eb);
    b->kid_entry = malloc(((size_t)b->nk + 1) * sizeof *b->kid_entry);
    b->rng = 0x736e617073686f74ull ^ gen;
    return b->eb && b->kid_entry ? 0 : -1;
}

/* Copies a slot's reservoir to the pool buffer and adds its histogram to the merged one (reservoir and
 * histogram before the scalars: see the comment above kt_snapshot). Returns the reservoir's fill, or -1. */
static int64_t gather_samples(build_t *b, kt__slot_t *sl)
{
    uint32_t fill = KT__LDA(&sl->res_fill);
    if (fill > b->cap) /* a dead program's torn slot */
        fill = b->cap;
    if (b->poolused + fill > b->poolcap) {
        size_t nc = b->poolcap * 2 > b->poolused + fill ? b->poolcap * 2 : b->poolused + fill;
        uint64_t *nb = realloc(b->poolbuf, nc * sizeof(uint64_t));
        if (!nb)
            return -1;
        b->poolbuf = nb;
        b->poolcap = nc;
    }
    for (uint32_t j = 0, off; j < fill; j++) { /* every block below res_fill is published */
        uint32_t k = kt__smp_block(j, &off);
        kt__au64 *blk = KT__LDA(&KT__LDA(&sl->cold)->smp[k]);
        if (b->src->lo != b->src->hi && !src_ok(b->src, blk, kt__smp_block_size(k) * sizeof *blk)) {
            fill = j; /* a dead program's block not readable: the samples before it */
            break;
        }
        b->poolbuf[b->poolused + j] = KT__LDA(&blk[off]);
    }
    for (uint32_t blk_i = 0; blk_i < KT__HIST_BLOCKS; blk_i++) {
        _Atomic uint64_t *blk = KT__LDA(&KT__LDA(&sl->cold)->hist[blk_i]);
        if (!blk || !src_ok(b->src, blk, KT__HIST_BLOCK * sizeof *blk))
            continue;
        b->used |= (uint64_t)1 << blk_i;
        for (uint32_t j = 0; j < KT__HIST_BLOCK; j++) {
            uint64_t c = KT__LDA(&blk[j]);
            b->hist[blk_i * KT__HIST_BLOCK + j] += c;
            b->hist_n += c;
        }
    }
    return fill;
}

/* A slot's rows by launch configuration appended to b->cfg, read under the table's seqlock (a dead program's:
 * after KT__DEAD_TRIES as they are). Read before the slot's scalars: every dispatch a row counts is in them.
 * 0, or -1 when out of memory. */
static int gather_configs(build_t *b, kt__slot_cold_t *cold)
{
    kt__cfg_tab_t *t = KT__LDA(&cold->cfgs);
    if (!t || !src_ok(b->src, t, sizeof *t))
        return 0;
    if (b->cfgcap - b->ncfg < KT_LAUNCH_CONFIGS_MAX + 1u) {
        uint32_t nc = b->cfgcap ? b->cfgcap * 2 : 4 * (KT_LAUNCH_CONFIGS_MAX + 1u);
        kt_config_timing_t *nb = realloc(b->cfg, nc * sizeof *nb);
        if (!nb)
            return -1;
        b->cfg = nb;
        b->cfgcap = nc;
    }
    for (int tries = 0;; tries++) {
        uint64_t q1 = KT__LDA(&t->seq);
        uint32_t n = KT__LDA(&t->n);
        if (n > KT_LAUNCH_CONFIGS_MAX) /* a dead program's torn table */
            n = KT_LAUNCH_CONFIGS_MAX;
        kt_config_timing_t *out = b->cfg + b->ncfg;
        uint32_t w = 0;
        for (uint32_t i = 0; i <= n; i++) {
            kt__cfg_row_t *r = &t->rows[i < n ? i : KT_LAUNCH_CONFIGS_MAX];
            kt_config_timing_t *o = &out[w];
            o->dispatch_count = KT__LDA(&r->count);
            o->total_ns = KT__LDA(&r->total);
            o->min_ns = KT__LDA(&r->min);
            o->max_ns = KT__LDA(&r->max);
            o->launch = r->key;
            if (i == n) /* the OTHER row's key is set once; read it as the kind it is */
                memset(&o->launch, 0, sizeof o->launch), o->launch.kind = KT_LAUNCH_OTHER;
            if (!o->dispatch_count)
                continue;
            if (o->min_ns > o->max_ns) /* a torn read of a dead owner's row */
                o->min_ns = o->max_ns;
            if (o->launch.kind == KT_LAUNCH_NONE || o->launch.kind > KT_LAUNCH_OTHER || o->launch.dims > 3)
                continue; /* a dead program's row not readable */
            w++;
        }
        uint64_t q2 = KT__LD(&t->seq);
        if ((q1 == q2 && !(q1 & 1)) || (b->src->lo != b->src->hi && tries >= KT__DEAD_TRIES)) {
            b->ncfg += w;
            return 0;
        }
        sched_yield();
    }
}

/* The kernel's rows folded into its entry's breakdown (shared.h: equal ones added, capped, OTHER last). */
static int publish_configs(build_t *b, kt_kernel_timing_t *t)
{
    uint32_t n = kt__configs_fold(b->cfg, b->ncfg);
    if (!n)
        return 0;
    if (!(t->configs = malloc(n * sizeof *t->configs)))
        return -1;
    memcpy(t->configs, b->cfg, n * sizeof *t->configs);
    t->config_count = n;
    return 0;
}

/* What gather_kernel merges besides the entry's own fields. */
typedef struct gathered_t {
    unsigned __int128 sum, sq; /* exact total and sum of squares */
    uint32_t npools;           /* reservoirs in b->pools */
    uint64_t pool_total;       /* the records they stand for */
} gathered_t;

/* One kernel's records across the shards, merged: scalars into t, exact sums and the reservoirs into g. 1 when
 * any shard counted a dispatch, 0 when none, -1 when out of memory. */

static int gather_kernel(build_t *b, uint32_t id, kt_kernel_timing_t *t, gathered_t *g)
{
    uint64_t best_stamp = 0;
    uint32_t best_shard = 0;
    int any = 0;
    b->poolused = 0;
    b->ncfg = 0;
    for (uint32_t si = 0; si < b->nvalid; si++) {
        kt__slot_t *sl = shard_slot(b->src, b->shards[si], id);
        if (!sl)
            continue;
        int64_t fill = gather_samples(b, sl);
        if (fill < 0)
            return -1;
        slot_read_t r;
        kt__slot_cold_t *cold = KT__LDA(&sl->cold);
        uint64_t bytes = KT__LDA(&cold->bytes); /* before the scalars: only bytes of counted dispatches */
        if (gather_configs(b, cold) != 0) /* so are the configurations */
            return -1;
        slot_read(b->src, sl, &r);
        t->errors += KT__LD(&cold->errors);
        t->dropped += KT__LD(&cold->dropped);
        for (int d = 0; d < KT_DROP_REASON_COUNT; d++)
            t->dropped_by[d] += KT__LD(&cold->dropped_by[d]);
        t->spans_dropped += KT__LD(&sl->spans_dropped);
        if (!r.count)
            continue;
        if (!any || r.min < t->min_ns)
            t->min_ns = r.min;
        if (r.max > t->max_ns)
            t->max_ns = r.max;
        /* Latest by end time when records carry one; else the most recently created shard's last. */
        uint32_t idx = b->shards[si]->index;
        if (!any || r.last_stamp > best_stamp || (r.last_stamp == best_stamp && idx > best_shard)) {
            best_stamp = r.last_stamp;
            best_shard = idx;
            t->last_ns = r.last;
        }
        any = 1;
        /* the newest record, not in the slot's histogram yet (recorder.c, slot_add_fast); read after the
         * histogram, so it cannot be counted twice */
        uint32_t hi = kt__hist_index(r.pend);
        b->hist[hi]++;
        b->hist_n++;
        b->used |= (uint64_t)1 << (hi / KT__HIST_BLOCK);
        t->dispatch_count += r.count;
        t->bytes += bytes;
        g->sum += (unsigned __int128)r.total_hi << 64 | r.total;
        g->sq += (unsigned __int128)r.sq_hi << 64 | r.sq_lo;
        /* A reservoir still filling holds exactly its first `fill` records (a record being stored may be
         * counted already); a full one is a uniform sample of the shard's records. */
        pool_t *p = &b->pools[g->npools++];
        p->size = (uint32_t)fill;
        p->remaining = fill < b->cap ? (uint64_t)fill : r.count;
        p->buf = NULL;
        p->off = b->poolused;
        g->pool_total += p->remaining;
        b->poolused += (size_t)fill;
    }
    for (uint32_t i = 0; i < g->npools; i++) /* poolbuf may have moved while growing */
        b->pools[i].buf = b->poolbuf + b->pools[i].off;
    return any;
}

/* A dead program's device work still in flight for kernel id (kt__inflight_begin/_end, arena.c): lost with the
 * program. 0 for a live snapshot, a counter block outside the arena, or a count below zero. */
static uint64_t arena_inflight(const kt__src_t *src, uint32_t id)
{
    if (!src->arena || id > KT__MAX_KERNELS)
        return 0;
    kt__au64 *blk = KT__LDA(&src->arena->inflight[id >> KT__CHUNK_BITS]);
    if (!blk || !src_ok(src, blk, KT__CHUNK * sizeof *blk))
        return 0;
    int64_t n = (int64_t)KT__LD(&blk[id & (KT__CHUNK - 1u)]);
    return n > 0 ? (uint64_t)n : 0;
}

/* Kernel id's entry appended to b->eb (nothing when it recorded nothing); -1 when out of memory. */
static int build_entry(build_t *b, uint32_t id)
{
    for (uint32_t blk = 0; blk < KT__HIST_BLOCKS; blk++)
        if (b->used >> blk & 1)
            memset(b->hist + blk * KT__HIST_BLOCK, 0, KT__HIST_BLOCK * sizeof(uint64_t));
    b->used = b->hist_n = 0;
    b->kid_entry[id] = UINT32_MAX;
    kt_kernel_timing_t t;
    memset(&t, 0, sizeof t);
    gathered_t g;
    memset(&g, 0, sizeof g);
    int any = gather_kernel(b, id, &t, &g);
    if (any < 0)
        return -1;
    uint64_t lost = arena_inflight(b->src, id);
    t.dropped += lost;
    t.dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT] += lost;
    if (!any && !t.errors && !t.dropped && !t.spans_dropped)
        return 0;
    const kt__kernel_t *k = src_kernel(b->src, b->nk, id);
    if (!k) /* a dead program's kernel record not readable: its records cannot be named */
        return 0;
    /* t's allocations go into eb at once, so build_free releases them whatever fails next */
    entry_build_t *e = &b->eb[b->ne++];
    e->kernel = id;
    t.backend = (unsigned)k->backend < KT_BACKEND_COUNT ? k->backend : KT_BACKEND_CPU;
    t.name = strdup(k->name);
    /* entries name their device by its label (the kernel was interned with the device's key) */
    const kt_device_info_t *dv = kt__device_by_key(b->dev, b->ndev, k->backend, k->device);
    t.device = strdup(dv ? dv->name : k->device);
    t.total_ns = g.sum > UINT64_MAX ? UINT64_MAX : (uint64_t)g.sum;
    t.total128 = (kt_u128_t){(uint64_t)g.sum, (uint64_t)(g.sum >> 64)};
    t.sumsq128 = (kt_u128_t){(uint64_t)g.sq, (uint64_t)(g.sq >> 64)};
    if (!b->src->arena)
        kt__kernel_last_error(id, t.last_error, sizeof t.last_error);
    e->t = t;
    if (!t.name || !t.device)
        return -1;
    if (!t.dispatch_count)
        return 0;
    e->t.mean_ns = (double)g.sum / (double)t.dispatch_count;
    e->t.stddev_ns = kt__stddev_exact(t.dispatch_count, g.sum, g.sq);
    hist_percentiles(b->hist, b->used, b->hist_n, &e->t);
    if (hist_bins(b->hist, b->used, &e->t) != 0 || publish_configs(b, &e->t) != 0)
        return -1;
    uint32_t want = t.dispatch_count < b->cap ? (uint32_t)t.dispatch_count : b->cap;
    if (!(e->t.samples = malloc(want * sizeof(uint64_t))))
        return -1;
    e->t.sample_count = merge_samples(b->pools, g.npools, g.pool_total, b->cap, e->t.samples, &b->rng);
    return 0;
}

/* The built entries, sorted, handed to snap (b->kid_entry then maps kernel ids to their index). */
static int publish_entries(build_t *b, kt_snapshot_t *snap)
{
    qsort(b->eb, b->ne, sizeof *b->eb, entry_cmp);
    if (!b->ne)
        return 0;
    snap->entries = malloc(b->ne * sizeof *snap->entries);
    if (!snap->entries)
        return -1;
    for (uint32_t i = 0; i < b->ne; i++) {
        snap->entries[i] = b->eb[i].t;
        b->kid_entry[b->eb[i].kernel] = i;
    }
    snap->count = b->ne;
    b->ne = 0; /* owned by snap from here */
    return 0;
}

/* The spare span array (kt__snapshot_spare_reserve): allocated and written ahead, taken by the next snapshot.
 * Copying a snapshot's spans into fresh memory costs a page fault per 4 KiB: 16,384 spans are 1.2 MB, ~0.4 ms on
 * the 2-core VM, at the exit of every timed program; the copy itself is a tenth of that. Set once (g_spare_once),
 * taken once by an exchange: nothing to lock, so a fork can never find it held. */
static _Atomic(kt_span_t *) g_spare;
static size_t g_spare_cap; /* its capacity in spans: written before g_spare is published, read after taking it */
static atomic_flag g_spare_once = ATOMIC_FLAG_INIT;

void kt__snapshot_spare_reserve(void)
{
    size_t cap = kt__cfg.span_capacity;
    if (!cap || !kt__exit_snapshot_wanted() || atomic_flag_test_and_set(&g_spare_once))
        return;
    /* one full log and an eighth: the program's own threads add spans beside the collector's log (clprog --tiny
     * 20000: 16,384 + ~370), and growing the array at exit is a mremap and fresh pages */
    cap += cap / 8;
    size_t bytes = cap * sizeof(kt_span_t);
    kt_span_t *p = malloc(bytes);
    if (!p)
        return;
    volatile unsigned char *w = (volatile unsigned char *)p;
    for (size_t off = 0; off < bytes; off += 4096)
        w[off] = 0;
    g_spare_cap = cap;
    atomic_store_explicit(&g_spare, p, memory_order_release);
}

/* Room for n spans: the spare when there is one (grown in place when n is more: realloc keeps its pages), else
 * new memory. NULL when out of memory. */
static kt_span_t *spans_alloc(size_t n)
{
    kt_span_t *p = atomic_exchange_explicit(&g_spare, NULL, memory_order_acquire);
    if (!p)
        return malloc(n * sizeof *p);
    if (n <= g_spare_cap)
        return p;
    kt_span_t *q = realloc(p, n * sizeof *p);
    if (!q)
        free(p);
    return q;
}

/* Spans: those each shard had published before its slots were read (all counted in the entries). */
static int copy_spans(const build_t *b, kt_snapshot_t *snap)
{
    size_t nspan = 0, w = 0;
    for (uint32_t si = 0; si < b->nvalid; si++)
        nspan += b->span_n[si];
    if (!nspan)
        return 0;
    if (!(snap->spans = spans_alloc(nspan)))
        return -1;
    for (uint32_t si = 0; si < b->nvalid && w < nspan; si++) {
        kt__span_rec_t *log = KT__LDA(&b->shards[si]->spans);
        for (uint32_t i = 0; log && i < b->span_n[si] && w < nspan; i++) {
            uint32_t kid = KT__LD(&log[i].kernel);
            if (kid == 0 || kid > b->nk || b->kid_entry[kid] == UINT32_MAX)
                continue;
            kt_span_t *o = &snap->spans[w++];
            o->entry = b->kid_entry[kid];
            uint32_t q = KT__LD(&log[i].queue), th = KT__LD(&log[i].thread);
            o->queue = q ? q - 1 : UINT32_MAX;
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
    return 0;
}

/* A table of a dead program's arena copied out: count read before the pointer (the pointer then holds at least
 * that many), both inside the arena. */
static void *arena_table(const kt__src_t *src, void *_Atomic const *ptr, const _Atomic uint32_t *count,
                         size_t size, size_t *out_n)
{
    uint32_t n = atomic_load_explicit(count, memory_order_acquire);
    void *p = atomic_load_explicit((void *_Atomic *)ptr, memory_order_acquire);
    *out_n = 0;
    if (!n || !src_ok(src, p, (size_t)n * size))
        return NULL;
    void *c = malloc((size_t)n * size);
    if (c) {
        memcpy(c, p, (size_t)n * size);
        *out_n = n;
    }
    return c;
}

/* The snapshot's device records, labelled once (docs/devices.md): the live registry's, or a dead program's table
 * with its strings terminated here. Host and rank are the snapshot's. Out of memory: no device records. */
static void snapshot_devices(const kt__src_t *src, kt_snapshot_t *snap)
{
    kt__arena_t *a = src->arena;
    if (a) {
        snap->devices = arena_table(src, (void *_Atomic const *)&a->devices, &a->device_count,
                                    sizeof *snap->devices, &snap->device_count);
    } else {
        snap->devices = kt__devices_copy(&snap->device_count);
    }
    for (size_t i = 0; i < snap->device_count; i++) {
        kt_device_info_t *d = &snap->devices[i];
        d->name[sizeof d->name - 1] = 0;
        d->clock_domain[sizeof d->clock_domain - 1] = 0;
        d->key[sizeof d->key - 1] = 0;
        d->id.vendor[sizeof d->id.vendor - 1] = 0;
        d->id.model[sizeof d->id.model - 1] = 0;
        d->id.id_kind[sizeof d->id.id_kind - 1] = 0;
        d->id.uuid[sizeof d->id.uuid - 1] = 0;
        d->id.pci[sizeof d->id.pci - 1] = 0;
        d->id.driver_uuid[sizeof d->id.driver_uuid - 1] = 0;
        d->id.platform[sizeof d->id.platform - 1] = 0;
        d->id.parent[sizeof d->id.parent - 1] = 0;
        if ((unsigned)d->backend >= KT_BACKEND_COUNT)
            d->backend = KT_BACKEND_CPU;
        snprintf(d->host, sizeof d->host, "%s", snap->host);
        d->rank = snap->rank;
    }
    kt__device_labels(snap->devices, snap->device_count);
}

/* Queues name their device by its label, as entries do (they were registered with the device's key). */
static void queues_relabel(kt_snapshot_t *snap)
{
    for (size_t i = 0; i < snap->queue_count; i++) {
        kt_queue_info_t *q = &snap->queues[i];
        const kt_device_info_t *dv = kt__device_by_key(snap->devices, snap->device_count, q->backend, q->device);
        if (dv)
            snprintf(q->device, sizeof q->device, "%s", dv->name);
    }
}

/* Entries and spans of src into snap; 0 or -1 (out of memory). */
static int snapshot_build(const kt__src_t *src, kt_snapshot_t *snap)
{
    build_t b;
    int rc = build_init(&b, src);
    /* devices after build_init: every kernel it counted was interned with a key registered before it */
    if (!rc)
        snapshot_devices(src, snap);
    b.dev = snap->devices;
    b.ndev = snap->device_count;
    for (uint32_t id = 1; !rc && id <= b.nk; id++)
        rc = build_entry(&b, id);
    if (!rc)
        rc = publish_entries(&b, snap);
    if (!rc)
        rc = copy_spans(&b, snap);
    build_free(&b);
    return rc;
}

/* Spans naming a queue or thread the tables do not hold go on the host track of the first thread: a dispatch
 * recorded with an id kt_queue_register / kt_thread_ordinal never gave, or a dead program's torn update. The span,
 * and its entry's statistics, are kept; one bad id never makes the whole snapshot unwritable. */
static void spans_to_tables(kt_snapshot_t *snap)
{
    for (size_t i = 0; i < snap->span_count; i++) {
        if (snap->spans[i].queue != UINT32_MAX && snap->spans[i].queue >= snap->queue_count)
            snap->spans[i].queue = UINT32_MAX;
        if (snap->spans[i].thread >= snap->thread_count)
            snap->spans[i].thread = 0;
    }
}

kt_snapshot_t *kt_snapshot(void)
{
    kt__ensure_init();
    kt__backends_flush(kt__now() + KT__FLUSH_WAIT_NS);

    kt_snapshot_t *snap = calloc(1, sizeof *snap);
    if (!snap)
        return NULL;
    kt__reset_hold();
    /* nk is read by build_init after the shards' span counts (every kernel a counted span names is then known) */
    kt__src_t src = {.head = kt__shards_head(), .gen = kt__generation(), .nk = 0, .kdir = kt__kernel_dir(),
                     .sample_capacity = kt__cfg.sample_capacity, .span_capacity = kt__cfg.span_capacity,
                     .kernels_dropped = kt__kernels_dropped(), .names_truncated = kt__names_truncated()};
    snapshot_header(snap, &src);
    int rc = snapshot_build(&src, snap);
    kt__reset_release();
    if (rc) {
        kt_snapshot_free(snap);
        return NULL;
    }
    sort_spans(snap->spans, snap->span_count);
    snap->queues = kt__queues_copy(&snap->queue_count);
    queues_relabel(snap);
    snap->threads = kt__threads_copy(&snap->thread_count);
    spans_to_tables(snap);
    return snap;
}

kt_snapshot_t *kt__snapshot_from(const kt__src_t *src)
{
    kt_snapshot_t *snap = calloc(1, sizeof *snap);
    if (!snap)
        return NULL;
    snapshot_header(snap, src);
    if (snapshot_build(src, snap) != 0) {
        kt_snapshot_free(snap);
        return NULL;
    }
    sort_spans(snap->spans, snap->span_count);
    kt__arena_t *a = src->arena;
    if (a) {
        snap->queues = arena_table(src, (void *_Atomic const *)&a->queues, &a->queue_count, sizeof *snap->queues,
                                   &snap->queue_count);
        snap->threads = arena_table(src, (void *_Atomic const *)&a->threads, &a->thread_count,
                                    sizeof *snap->threads, &snap->thread_count);
        for (size_t i = 0; i < snap->queue_count; i++) { /* strings of a dead program: terminated here */
            snap->queues[i].device[sizeof snap->queues[i].device - 1] = 0;
            snap->queues[i].label[sizeof snap->queues[i].label - 1] = 0;
            if ((unsigned)snap->queues[i].backend >= KT_BACKEND_COUNT)
                snap->queues[i].backend = KT_BACKEND_CPU;
        }
        for (size_t i = 0; i < snap->thread_count; i++)
            snap->threads[i].name[sizeof snap->threads[i].name - 1] = 0;
        queues_relabel(snap);
    }
    spans_to_tables(snap);
    return snap;
}

void kt_snapshot_free(kt_snapshot_t *snap)
{
    if (!snap)
        return;
    for (size_t i = 0; i < snap->count; i++)
        kt__entry_release(&snap->entries[i]);
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
    /* a device key: the entry of its device's label */
    const kt_device_info_t *dv = device ? kt__device_by_key(snap->devices, snap->device_count, backend, device) : NULL;
    return dv && strcmp(dv->name, device) ? kt_snapshot_find(snap, name, backend, dv->name) : NULL;
}

const kt_device_info_t *kt_snapshot_device(const kt_snapshot_t *snap, kt_backend_t backend, const char *device)
{
    return snap ? kt__device_lookup(snap->devices, snap->device_count, backend, device) : NULL;
}
