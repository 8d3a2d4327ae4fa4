/* recorder.c — the hot path: each thread writes its own shard, indexed by kernel id; no lock on record. */
#include "core/internal.h"

#include <link.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------
 * Shards: creation, adoption after thread exit, reset by generation
 * ------------------------------------------------------------------------------------------------- */

static pthread_mutex_t g_shards_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(kt__shard_t *) g_shards; /* newest first; a shard's `next` never changes once published */
static uint32_t g_shard_count;          /* guarded by g_shards_lock */
static _Atomic uint64_t g_gen = 1;      /* reset generation: kt_reset() bumps it, owners clear lazily */
static pthread_mutex_t g_reset_lock = PTHREAD_MUTEX_INITIALIZER; /* kt_reset() vs snapshots reading */
static pthread_key_t g_key;             /* its destructor releases a thread's shard at thread exit */
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

static __thread kt__shard_t *tl_shard __attribute__((tls_model("initial-exec")));
static __thread uint32_t tl_ordinal __attribute__((tls_model("initial-exec")));

kt__shard_t *kt__shards_head(void) { return KT__LDA(&g_shards); }
uint64_t kt__generation(void) { return KT__LDA(&g_gen); }
void kt__reset_hold(void) { pthread_mutex_lock(&g_reset_lock); }
void kt__reset_release(void) { pthread_mutex_unlock(&g_reset_lock); }

/* Thread exit: the shard and its records stay in the list for snapshots and for a later thread to adopt. */
static void shard_release(void *p)
{
    kt__shard_t *s = p;
    tl_shard = NULL;
    pthread_mutex_lock(&g_shards_lock);
    s->owned = 0;
    pthread_mutex_unlock(&g_shards_lock);
}

static void key_create(void) { pthread_key_create(&g_key, shard_release); }

/* The span log, allocated when a thread takes its shard, with every page written once: a zone that keeps its
 * span then never takes a page fault on the hot path (a fault costs more than the zone). */
static void span_log_prefault(kt__shard_t *s)
{
    uint32_t cap = kt__cfg.span_capacity;
    if (!cap || KT__LD(&s->spans))
        return;
    size_t bytes = (size_t)cap * sizeof(kt__span_rec_t);
    kt__span_rec_t *log = calloc(cap, sizeof *log);
    if (!log)
        return; /* span_push retries, and counts spans_dropped if it fails too */
    volatile unsigned char *p = (volatile unsigned char *)log;
    for (size_t off = 0; off < bytes; off += 4096)
        p[off] = 0;
    KT__STR(&s->spans, log);
}

static kt__shard_t *shard_acquire(void)
{
    kt__ensure_init();
    pthread_once(&g_key_once, key_create);
    pthread_mutex_lock(&g_shards_lock);
    kt__shard_t *s;
    for (s = KT__LD(&g_shards); s && s->owned; s = s->next)
        ;
    if (s) {
        s->owned = 1;
    } else if ((s = calloc(1, sizeof *s)) != NULL) {
        s->index = g_shard_count++;
        s->rng = 0x6b74696d696e6700ull + s->index; /* deterministic per creation order: runs reproduce */
        s->owned = 1;
        KT__ST(&s->gen, KT__LD(&g_gen));
        s->next = KT__LD(&g_shards);
        KT__STR(&g_shards, s);
    }
    pthread_mutex_unlock(&g_shards_lock);
    if (!s)
        return NULL;
    span_log_prefault(s);
    tl_shard = s;
    pthread_setspecific(g_key, s);
    if (!tl_ordinal)
        tl_ordinal = kt_thread_ordinal();
    else
        kt__thread_refresh(tl_ordinal);
    return s;
}

static void slot_clear(kt__slot_t *sl)
{
    uint64_t q = KT__LD(&sl->seq);
    KT__ST(&sl->seq, q + 1);
    KT__STR(&sl->count, 0);
    KT__STR(&sl->total, 0);
    KT__STR(&sl->sq_lo, 0);
    KT__STR(&sl->sq_hi, 0);
    KT__STR(&sl->min, UINT64_MAX);
    KT__STR(&sl->max, 0);
    KT__STR(&sl->last, 0);
    KT__STR(&sl->last_stamp, 0);
    KT__STR(&sl->errors, 0);
    KT__STR(&sl->dropped, 0);
    for (int d = 0; d < KT_DROP_REASON_COUNT; d++)
        KT__STR(&sl->dropped_by[d], 0);
    KT__STR(&sl->bytes, 0);
    KT__STR(&sl->total_hi, 0);
    KT__STR(&sl->spans_dropped, 0);
    KT__STR(&sl->seq, q + 2);
    sl->res_next = 0;
    KT__ST(&sl->res_fill, 0);
    for (uint32_t b = 0; b < KT__HIST_BLOCKS; b++) {
        _Atomic uint64_t *blk = KT__LD(&sl->hist[b]);
        if (blk)
            for (uint32_t i = 0; i < KT__HIST_BLOCK; i++)
                KT__ST(&blk[i], 0);
    }
}

/* The owner saw a newer generation: clear its data, then say which generation it now holds. No snapshot reads
 * the shard meanwhile: one that began before the reset holds kt_reset() off until it ends, and one that begins
 * after it skips a shard whose `gen` is not the current generation. */
static void shard_renew(kt__shard_t *s)
{
    uint64_t gen = KT__LD(&g_gen);
    for (uint32_t c = 0; c < KT__DIR; c++) {
        kt__slot_ptr *chunk = KT__LD(&s->dir[c]);
        if (!chunk)
            continue;
        for (uint32_t i = 0; i < KT__CHUNK; i++) {
            kt__slot_t *sl = KT__LD(&chunk[i]);
            if (sl)
                slot_clear(sl);
        }
    }
    KT__ST(&s->span_count, 0);
    KT__STR(&s->gen, gen);
}

static inline kt__shard_t *shard_for_write(void)
{
    kt__shard_t *s = tl_shard;
    if (__builtin_expect(!s, 0) && !(s = shard_acquire()))
        return NULL;
    if (__builtin_expect(KT__LD(&s->gen) != KT__LD(&g_gen), 0))
        shard_renew(s);
    return s;
}

kt__shard_t *kt__shard_self(void) { return shard_for_write(); }

static kt__slot_t *slot_create(kt__shard_t *s, kt_kernel_id_t id)
{
    if (!kt__kernel_get(id))
        return NULL;
    kt__slot_ptr *chunk = KT__LD(&s->dir[id >> KT__CHUNK_BITS]);
    if (!chunk) {
        chunk = calloc(KT__CHUNK, sizeof *chunk);
        if (!chunk)
            return NULL;
        KT__STR(&s->dir[id >> KT__CHUNK_BITS], chunk);
    }
    /* The slot and its reservoir are one block: the reservoir follows the struct. */
    kt__slot_t *sl = calloc(1, sizeof *sl + (size_t)kt__cfg.sample_capacity * sizeof(uint64_t));
    if (!sl)
        return NULL;
    KT__ST(&sl->samples, (kt__au64 *)(void *)(sl + 1));
    KT__ST(&sl->min, UINT64_MAX);
    KT__STR(&chunk[id & (KT__CHUNK - 1u)], sl);
    return sl;
}

/* The shard's slot for a kernel, or NULL if it has none yet (or the id is out of range). */
static inline kt__slot_t *slot_peek(kt__shard_t *s, kt_kernel_id_t id)
{
    if (__builtin_expect((uint32_t)(id - 1u) >= KT__MAX_KERNELS, 0))
        return NULL;
    kt__slot_ptr *chunk = KT__LD(&s->dir[id >> KT__CHUNK_BITS]);
    return chunk ? KT__LD(&chunk[id & (KT__CHUNK - 1u)]) : NULL;
}

static inline kt__slot_t *slot_for(kt__shard_t *s, kt_kernel_id_t id)
{
    kt__slot_t *sl = slot_peek(s, id);
    return __builtin_expect(sl != NULL, 1) || (uint32_t)(id - 1u) >= KT__MAX_KERNELS ? sl : slot_create(s, id);
}

/* The calling thread's shard if it exists and holds the current generation (the hot path's only check). */
static inline kt__shard_t *shard_ready(void)
{
    kt__shard_t *s = tl_shard;
    return __builtin_expect(s != NULL, 1) && __builtin_expect(KT__LD(&s->gen) == KT__LD(&g_gen), 1) ? s : NULL;
}

/* ---------------------------------------------------------------------------------------------------
 * Aggregation
 * ------------------------------------------------------------------------------------------------- */

/* Algorithm L (Li 1994): after the reservoir fills, jump straight to the next record that enters it, so the
 * common case costs one comparison. Uniform over every record of the shard. `res_next` is the count at which
 * the slow path must run next: while the reservoir fills that is every record. Called after the record's
 * scalars are stored (n is the count before it). */
static void reservoir_step(kt__shard_t *s, kt__slot_t *sl, uint64_t n, uint64_t v)
{
    uint32_t cap = kt__cfg.sample_capacity;
    kt__au64 *smp = KT__LD(&sl->samples);
    if (n < cap) {
        KT__STR(&smp[n], v);
        KT__STR(&sl->res_fill, (uint32_t)n + 1u); /* exposes the sample just written */
        if (n + 1 < cap) {
            sl->res_next = n + 1;
            return;
        }
        sl->res_w = exp(log(kt__rand_open01(&s->rng)) / cap);
    } else {
        KT__STR(&smp[kt__rand_below(&s->rng, cap)], v);
        sl->res_w *= exp(log(kt__rand_open01(&s->rng)) / cap);
    }
    double skip = floor(log(kt__rand_open01(&s->rng)) / log1p(-sl->res_w));
    sl->res_next = skip >= 1.8e19 ? UINT64_MAX : n + (uint64_t)skip + 1u;
}

/* The scalars, under the slot's seqlock. */
static inline void slot_scalars(kt__slot_t *sl, uint64_t n, uint64_t v, uint64_t stamp)
{
    unsigned __int128 sq0 = (unsigned __int128)KT__LD(&sl->sq_hi) << 64 | KT__LD(&sl->sq_lo);
    unsigned __int128 sq = sq0 + (unsigned __int128)v * v;
    if (__builtin_expect(sq < sq0, 0)) /* past 2^128 ns^2 (durations near 2^64 ns): saturate, stddev unknown */
        sq = ~(unsigned __int128)0;
    /* Seqlock without fences (TSan models none): the data stores are releases, so a reader that sees any of
     * them also sees the odd sequence number stored before them; on x86 these are plain moves. */
    uint64_t q = KT__LD(&sl->seq);
    KT__ST(&sl->seq, q + 1);
    KT__STR(&sl->count, n + 1);
    uint64_t total = KT__LD(&sl->total) + v;
    KT__STR(&sl->total, total);
    if (__builtin_expect(total < v, 0)) /* carry: totals never wrap */
        KT__STR(&sl->total_hi, KT__LD(&sl->total_hi) + 1);
    KT__STR(&sl->sq_lo, (uint64_t)sq);
    KT__STR(&sl->sq_hi, (uint64_t)(sq >> 64));
    if (v < KT__LD(&sl->min)) /* min starts at UINT64_MAX */
        KT__STR(&sl->min, v);
    if (v > KT__LD(&sl->max))
        KT__STR(&sl->max, v);
    /* `last` is the latest-ending dispatch when records carry end times (completions may arrive out of order);
     * a duration-only record (stamp 0) is taken in record order. */
    if (!stamp || stamp >= KT__LD(&sl->last_stamp)) {
        KT__STR(&sl->last, v);
        KT__STR(&sl->last_stamp, stamp);
    }
    KT__STR(&sl->seq, q + 2);
}

/* A histogram count, after the scalars of its record: a snapshot that sees the count sees those scalars. */
static inline void hist_bump(kt__au64 *c) { KT__STR(c, KT__LD(c) + 1); }

/* The common case, with no call and no allocation: returns 0 (having changed nothing) when the record needs
 * the reservoir or a new histogram block, which slot_add_full handles. */
static inline int slot_add_fast(kt__slot_t *sl, uint64_t v, uint64_t stamp)
{
    uint64_t n = KT__LD(&sl->count);
    if (__builtin_expect(n == sl->res_next, 0))
        return 0;
    uint32_t idx = kt__hist_index(v);
    kt__au64 *blk = KT__LD(&sl->hist[idx / KT__HIST_BLOCK]);
    if (__builtin_expect(!blk, 0))
        return 0;
    slot_scalars(sl, n, v, stamp);
    hist_bump(&blk[idx % KT__HIST_BLOCK]);
    return 1;
}

static __attribute__((noinline)) void slot_add_full(kt__shard_t *s, kt__slot_t *sl, uint64_t v, uint64_t stamp)
{
    uint64_t n = KT__LD(&sl->count);
    uint32_t idx = kt__hist_index(v);
    kt__au64 *blk = KT__LD(&sl->hist[idx / KT__HIST_BLOCK]);
    if (!blk && (blk = calloc(KT__HIST_BLOCK, sizeof *blk)) != NULL)
        KT__STR(&sl->hist[idx / KT__HIST_BLOCK], blk);
    slot_scalars(sl, n, v, stamp);
    if (n == sl->res_next)
        reservoir_step(s, sl, n, v);
    if (blk) /* out of memory: percentiles then miss this record, the exact aggregates do not */
        hist_bump(&blk[idx % KT__HIST_BLOCK]);
}

static inline void slot_add(kt__shard_t *s, kt__slot_t *sl, uint64_t v, uint64_t stamp)
{
    if (!slot_add_fast(sl, v, stamp))
        slot_add_full(s, sl, v, stamp);
}

static inline void counter_add(_Atomic uint64_t *c) { KT__ST(c, KT__LD(c) + 1); }

/* Spans are appended, never overwritten; a full log counts the dispatch in spans_dropped. */
static void span_push(kt__shard_t *s, kt__slot_t *sl, kt_kernel_id_t kernel, uint32_t queue, uint32_t thread,
                      uint32_t flags, const uint64_t t[7])
{
    uint32_t cap = kt__cfg.span_capacity;
    if (!cap)
        return;
    uint32_t n = KT__LD(&s->span_count);
    kt__span_rec_t *log = KT__LD(&s->spans);
    if (n >= cap || (!log && !(log = calloc(cap, sizeof *log)))) {
        counter_add(&sl->spans_dropped);
        return;
    }
    if (!KT__LD(&s->spans))
        KT__STR(&s->spans, log);
    kt__span_rec_t *r = &log[n];
    KT__ST(&r->kernel, kernel);
    KT__ST(&r->queue, queue);
    KT__ST(&r->thread, thread ? thread : tl_ordinal);
    KT__ST(&r->flags, flags);
    for (int i = 0; i < 7; i++)
        KT__ST(&r->t[i], t[i]);
    KT__STR(&s->span_count, n + 1);
}

/* ---------------------------------------------------------------------------------------------------
 * Public recording entry points
 * ------------------------------------------------------------------------------------------------- */

static __attribute__((noinline)) void record_id_slow(kt_kernel_id_t kernel, uint64_t elapsed_ns)
{
    kt__shard_t *s = shard_for_write();
    kt__slot_t *sl = s ? slot_for(s, kernel) : NULL;
    if (sl)
        slot_add_full(s, sl, elapsed_ns, 0);
}

void kt_record_id(kt_kernel_id_t kernel, uint64_t elapsed_ns)
{
    if (!kt__on())
        return;
    kt__shard_t *s = shard_ready();
    kt__slot_t *sl;
    if (__builtin_expect(s && (sl = slot_peek(s, kernel)) && slot_add_fast(sl, elapsed_ns, 0), 1))
        return;
    record_id_slow(kernel, elapsed_ns);
}

/* ---------------------------------------------------------------------------------------------------
 * kt_record(name, ...): the per-thread pointer cache
 * ------------------------------------------------------------------------------------------------- */

/* Is p inside a mapped segment that is not writable (string literals are)? Then the bytes behind a cached
 * pointer cannot change, and a hit needs no string comparison. */
typedef struct ro_query_t {
    uintptr_t addr;  /* the address asked about */
    uintptr_t lo;    /* result: containing segment */
    uintptr_t hi;    /* its end */
    int found;       /* 1 = in a read-only segment, -1 = in a writable one, 0 = not in any */
} ro_query_t;

static int ro_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    ro_query_t *q = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (q->addr >= lo && q->addr < hi) {
            q->found = (ph->p_flags & PF_W) ? -1 : 1;
            q->lo = lo;
            q->hi = hi;
            return 1;
        }
    }
    return 0;
}

static int ptr_readonly(kt__shard_t *s, const char *p)
{
    uintptr_t a = (uintptr_t)p;
    for (uint32_t i = 0; i < KT__RO_RANGES; i++)
        if (a >= s->ro_lo[i] && a < s->ro_hi[i])
            return 1;
    ro_query_t q = {a, 0, 0, 0};
    dl_iterate_phdr(ro_cb, &q);
    if (q.found != 1)
        return 0;
    uint32_t i = s->ro_next++ % KT__RO_RANGES;
    s->ro_lo[i] = q.lo;
    s->ro_hi[i] = q.hi;
    return 1;
}

static inline kt__name_cache_t *cache_entry(kt__shard_t *s, const char *name, kt_backend_t backend)
{
    uintptr_t p = (uintptr_t)name;
    return &s->names[((p >> 3) ^ (p >> 11) ^ (uint32_t)backend) & (KT__NAME_CACHE - 1u)];
}

/* Backend, read-only flag and first byte in one word, so a hit is two comparisons. */
static inline uint32_t cache_tag(kt_backend_t backend, int ro, char c0)
{
    return (uint32_t)backend | (uint32_t)(ro != 0) << 8 | (uint32_t)(uint8_t)c0 << 16;
}

/* A hit that needs no comparison: same pointer into read-only memory (first byte checked for good measure). */
static inline int cache_hit_ro(const kt__name_cache_t *e, const char *name, kt_backend_t backend)
{
    return e->ptr == name && e->tag == cache_tag(backend, 1, name[0]);
}

/* Full lookup: a cached pointer in writable memory is confirmed by comparing the string with the interned
 * copy (a reused buffer holding another name misses); a miss interns and refills the entry. */
static kt_kernel_id_t lookup_cached(kt__shard_t *s, const char *name, kt_backend_t backend)
{
    kt__name_cache_t *e = cache_entry(s, name, backend);
    if (e->ptr == name && (e->tag & 0xffu) == (uint32_t)backend) {
        if (e->tag == cache_tag(backend, 1, name[0]))
            return e->id;
        if (strcmp(kt__kernel_get(e->id)->name, name) == 0)
            return e->id;
    }
    kt_kernel_id_t id = kt_kernel_intern(name, backend, NULL);
    if (id) {
        e->ptr = name;
        e->id = id;
        e->tag = cache_tag(backend, ptr_readonly(s, name), name[0]);
    }
    return id;
}

kt_kernel_id_t kt__kernel_lookup_cached(const char *name, kt_backend_t backend)
{
    if (!name || (unsigned)backend >= KT_BACKEND_COUNT)
        return 0;
    kt__shard_t *s = shard_for_write();
    return s ? lookup_cached(s, name, backend) : kt_kernel_intern(name, backend, NULL);
}

static __attribute__((noinline)) void record_name_slow(const char *name, kt_backend_t backend, uint64_t elapsed_ns)
{
    if ((unsigned)backend >= KT_BACKEND_COUNT)
        return;
    kt__shard_t *s = shard_for_write();
    kt__slot_t *sl = s ? slot_for(s, lookup_cached(s, name, backend)) : NULL;
    if (sl)
        slot_add(s, sl, elapsed_ns, 0);
}

void kt_record(const char *name, kt_backend_t backend, uint64_t elapsed_ns)
{
    if (!kt__on() || !name)
        return;
    kt__shard_t *s = shard_ready();
    if (__builtin_expect(s != NULL, 1)) {
        const kt__name_cache_t *e = cache_entry(s, name, backend);
        kt__slot_t *sl;
        if (__builtin_expect(cache_hit_ro(e, name, backend) && (sl = slot_peek(s, e->id)) &&
                                 slot_add_fast(sl, elapsed_ns, 0),
                             1))
            return;
    }
    record_name_slow(name, backend, elapsed_ns);
}

void kt_record_site(kt_kernel_id_t *site, const char *name, kt_backend_t backend, uint64_t elapsed_ns)
{
    if (!kt__on())
        return;
    kt_kernel_id_t id = __atomic_load_n(site, __ATOMIC_RELAXED);
    if (__builtin_expect(!id, 0)) {
        id = kt_kernel_intern(name, backend, NULL);
        __atomic_store_n(site, id, __ATOMIC_RELAXED);
    }
    kt_record_id(id, elapsed_ns);
}

void kt_record_dispatch(const kt_dispatch_t *d)
{
    if (!kt__on() || !d)
        return;
    kt__shard_t *s = shard_for_write();
    kt__slot_t *sl = s ? slot_for(s, d->kernel) : NULL;
    if (!sl)
        return;
    if (d->flags & KT_SPAN_ERROR) {
        counter_add(&sl->errors);
    } else {
        slot_add(s, sl, d->duration_ns, d->end_ns);
        if (d->bytes) /* after the scalars: a snapshot reads bytes first, so it counts no uncounted dispatch */
            KT__STR(&sl->bytes, KT__LD(&sl->bytes) + d->bytes);
    }
    if (d->start_ns || d->end_ns) {
        const uint64_t t[7] = {d->duration_ns, d->enqueue_ns, d->queued_ns, d->submit_ns,
                               d->start_ns,    d->end_ns,     d->uncertainty_ns};
        span_push(s, sl, d->kernel, d->queue, d->thread, d->flags, t);
    }
}

void kt__record_host_span(kt_kernel_id_t kernel, uint64_t start_ns, uint64_t end_ns)
{
    kt__shard_t *s = shard_for_write();
    kt__slot_t *sl = s ? slot_for(s, kernel) : NULL;
    if (!sl)
        return;
    uint64_t dur = end_ns - start_ns;
    slot_add(s, sl, dur, end_ns);
    const uint64_t t[7] = {dur, start_ns, 0, 0, start_ns, end_ns, 0};
    span_push(s, sl, kernel, 0, 0, 0, t);
}


void kt_record_error_name(kt_kernel_id_t kernel, const char *error_name)
{
    if (!kt__on())
        return;
    kt__shard_t *s = shard_for_write();
    kt__slot_t *sl = s ? slot_for(s, kernel) : NULL;
    if (!sl)
        return;
    if (error_name && *error_name)
        kt__kernel_set_error(kernel, error_name);
    counter_add(&sl->errors);
}

void kt_record_drop_reason(kt_kernel_id_t kernel, kt_drop_reason_t reason)
{
    if (!kt__on())
        return;
    kt__shard_t *s = shard_for_write();
    kt__slot_t *sl = s ? slot_for(s, kernel) : NULL;
    if (!sl)
        return;
    if ((unsigned)reason >= KT_DROP_REASON_COUNT)
        reason = KT_DROP_UNSPECIFIED;
    counter_add(&sl->dropped_by[reason]);
    counter_add(&sl->dropped);
}

void kt_record_drop(kt_kernel_id_t kernel) { kt_record_drop_reason(kernel, KT_DROP_UNSPECIFIED); }

void kt_record_error(kt_kernel_id_t kernel) { kt_record_error_name(kernel, NULL); }

/* Waits for a snapshot in progress: a snapshot reads one generation from start to end. */
void kt_reset(void)
{
    pthread_mutex_lock(&g_reset_lock);
    atomic_fetch_add_explicit(&g_gen, 1, memory_order_acq_rel);
    pthread_mutex_unlock(&g_reset_lock);
}
