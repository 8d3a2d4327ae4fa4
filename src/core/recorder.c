/* recorder.c — the hot path: each thread writes its own shard, indexed by kernel id; no lock on record. */
#include "core/internal.h"
#include "core/service.h"
#include "shared/shared.h"

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

/* A span log of `cap` records with every page written once (NULL when out of memory); stops writing when the
 * backends stop (see span_log_prefault). */
static kt__span_rec_t *span_log_written(uint32_t cap)
{
    size_t bytes = (size_t)cap * sizeof(kt__span_rec_t);
    kt__span_rec_t *log = kt__zalloc(bytes);
    if (!log)
        return NULL;
    volatile unsigned char *p = (volatile unsigned char *)log;
    for (size_t off = 0; off < bytes && !kt__backends_stopping(); off += 4096)
        p[off] = 0;
    return log;
}

/* The spare span log (kt__span_log_spare_reserve): written ahead on a thread off the program's path, taken by the
 * next shard that needs a log. Made once (the capacity is set once, at the first initialisation), taken once by
 * an exchange: nothing to lock, so a fork can never find it held. Never freed, like every log. */
static _Atomic(kt__span_rec_t *) g_spare_log;
static atomic_flag g_spare_log_once = ATOMIC_FLAG_INIT;
static __thread int tl_spare_maker __attribute__((tls_model("initial-exec"))); /* made the spare: never takes it */

void kt__span_log_spare_reserve(void)
{
    kt__ensure_init(); /* the capacity is set by the first initialisation */
    uint32_t cap = kt__cfg.span_capacity;
    if (!cap || atomic_flag_test_and_set(&g_spare_log_once))
        return;
    tl_spare_maker = 1;
    kt__span_rec_t *log = span_log_written(cap);
    if (log)
        atomic_store_explicit(&g_spare_log, log, memory_order_release);
}

/* The span log, allocated when a thread takes its shard, with every page written once: a zone that keeps its
 * span then never takes a page fault on the hot path (a fault costs more than the zone). The spare log is taken
 * when there is one (its pages were written on another thread). Otherwise not for a shard first taken while the
 * backends stop (the exit flush recording the last few commands on the exiting thread): there nothing is hot, and
 * the default log is 288 pages, ~0.5 ms of faults at the exit of every timed program. */
static void span_log_prefault(kt__shard_t *s)
{
    uint32_t cap = kt__cfg.span_capacity;
    if (!cap || KT__LD(&s->spans))
        return;
    kt__span_rec_t *log = tl_spare_maker ? NULL : atomic_exchange_explicit(&g_spare_log, NULL, memory_order_acquire);
    if (!log && !(log = span_log_written(cap)))
        return; /* span_push retries, and counts spans_dropped if it fails too */
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
    } else if ((s = kt__zalloc(sizeof *s)) != NULL) {
        s->index = g_shard_count++;
        s->rng = 0x6b74696d696e6700ull + s->index; /* deterministic per creation order: runs reproduce */
        s->owned = 1;
        KT__ST(&s->gen, KT__LD(&g_gen));
        s->next = KT__LD(&g_shards);
        KT__STR(&g_shards, s);
        /* the root `ktiming run` reads a dead program's shards from: never a shard on the heap (a full arena),
         * whose records run cannot read, and whose list would hide every shard behind it */
        if (kt__arena && kt__in_arena(s))
            KT__STR(&kt__arena->shards, s);
        else if (kt__arena)
            kt__arena_shard_outside();
    }
    pthread_mutex_unlock(&g_shards_lock);
    if (!s)
        return NULL;
    if (__builtin_expect(KT__LD(&kt__arena_child_pending), 0)) /* a forked child's first record */
        kt__arena_child_records();
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
    kt__slot_cold_t *c = KT__LD(&sl->cold);
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
    KT__STR(&c->errors, 0);
    KT__STR(&c->dropped, 0);
    for (int d = 0; d < KT_DROP_REASON_COUNT; d++)
        KT__STR(&c->dropped_by[d], 0);
    KT__STR(&c->bytes, 0);
    kt__cfg_tab_t *ct = KT__LD(&c->cfgs);
    if (ct) { /* rows are re-initialised when taken again; the OTHER row is always there */
        KT__ST(&ct->n, 0);
        kt__cfg_row_t *o = &ct->rows[KT_LAUNCH_CONFIGS_MAX];
        KT__ST(&o->count, 0);
        KT__ST(&o->total, 0);
        KT__ST(&o->min, UINT64_MAX);
        KT__ST(&o->max, 0);
    }
    KT__STR(&sl->total_hi, 0);
    KT__STR(&sl->spans_dropped, 0);
    KT__STR(&sl->seq, q + 2);
    sl->res_next = 0;
    KT__ST(&sl->res_fill, 0);
    for (uint32_t b = 0; b < KT__HIST_BLOCKS; b++) {
        _Atomic uint64_t *blk = KT__LD(&c->hist[b]);
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
    if (__builtin_expect(KT__LD(&kt__arena_child_pending), 0)) /* a forked child's first record */
        kt__arena_child_records();
    uint64_t gen = KT__LD(&g_gen);
    for (uint32_t c = 0; c < KT__DIR; c++) {
        kt__slot_t *chunk = KT__LD(&s->dir[c]);
        if (!chunk)
            continue;
        for (uint32_t i = 0; i < KT__CHUNK; i++)
            if (KT__LD(&chunk[i].cold))
                slot_clear(&chunk[i]);
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

int kt__span_room(void)
{
    kt__ensure_init(); /* the capacity is set by the first initialisation: read it after that (acquire) */
    uint32_t cap = kt__cfg.span_capacity;
    kt__shard_t *s = tl_shard;
    return cap && (!s || KT__LD(&s->gen) != KT__LD(&g_gen) || KT__LD(&s->span_count) < cap);
}

static kt__slot_t *slot_create(kt__shard_t *s, kt_kernel_id_t id)
{
    if (!kt__kernel_get(id))
        return NULL;
    kt__slot_t *chunk = KT__LD(&s->dir[id >> KT__CHUNK_BITS]);
    if (!chunk) {
        /* aligned to a cache line by hand (chunks are never freed): each slot is exactly its two lines */
        unsigned char *mem = kt__zalloc(KT__CHUNK * sizeof *chunk + 63u);
        if (!mem)
            return NULL;
        chunk = (kt__slot_t *)(void *)(mem + ((64u - ((uintptr_t)mem & 63u)) & 63u));
        KT__STR(&s->dir[id >> KT__CHUNK_BITS], chunk);
    }
    kt__slot_cold_t *cold = kt__zalloc(sizeof *cold); /* the reservoir's blocks come with the samples */
    if (!cold)
        return NULL;
    kt__slot_t *sl = &chunk[id & (KT__CHUNK - 1u)];
    KT__ST(&sl->min, UINT64_MAX);
    sl->hcache_block = KT__HIST_BLOCKS;
    KT__STR(&sl->cold, cold); /* the slot exists from here */
    return sl;
}

/* The shard's slot for a kernel, or NULL if it has none yet (or the id is out of range). */
static inline kt__slot_t *slot_peek(kt__shard_t *s, kt_kernel_id_t id)
{
    if (__builtin_expect((uint32_t)(id - 1u) >= KT__MAX_KERNELS, 0))
        return NULL;
    kt__slot_t *chunk = KT__LD(&s->dir[id >> KT__CHUNK_BITS]);
    if (!chunk)
        return NULL;
    kt__slot_t *sl = &chunk[id & (KT__CHUNK - 1u)];
    return KT__LD(&sl->cold) ? sl : NULL;
}

/* Records whose kernel could not be interned (kernel table full: the id is 0) or was never handed out. */
static _Atomic uint64_t g_kernels_dropped;

uint64_t kt__kernels_dropped(void) { return KT__LD(&g_kernels_dropped); }

static inline kt__slot_t *slot_for(kt__shard_t *s, kt_kernel_id_t id)
{
    kt__slot_t *sl = slot_peek(s, id);
    return __builtin_expect(sl != NULL, 1) || (uint32_t)(id - 1u) >= KT__MAX_KERNELS ? sl : slot_create(s, id);
}

/* slot_for on the slow paths: a record without a valid kernel is counted in kernels_dropped. */
static kt__slot_t *slot_for_counted(kt__shard_t *s, kt_kernel_id_t id)
{
    kt__slot_t *sl = slot_for(s, id);
    if (!sl && !kt__kernel_get(id)) {
        atomic_fetch_add_explicit(&g_kernels_dropped, 1, memory_order_relaxed);
        if (kt__arena)
            atomic_fetch_add_explicit(&kt__arena->kernels_dropped, 1, memory_order_relaxed);
    }
    return sl;
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
/* Draw the reservoir position the next replacement will take, and start fetching its line (for writing): with
 * many kernels in a loop the write would otherwise miss the caches on every replacement, and replacements are
 * frequent while a kernel's count is a few times the capacity (probability capacity / count). */
static void reservoir_aim(kt__shard_t *s, kt__slot_t *sl, kt__slot_cold_t *c)
{
    uint32_t fill = KT__LD(&sl->res_fill), off; /* = cap unless memory ran out while filling */
    if (!fill)
        return;
    c->res_idx = (uint32_t)kt__rand_below(&s->rng, fill);
    __builtin_prefetch((const void *)&KT__LD(&c->smp[kt__smp_block(c->res_idx, &off)])[off], 1, 3);
}

static void reservoir_step(kt__shard_t *s, kt__slot_t *sl, uint64_t n, uint64_t v)
{
    uint32_t cap = kt__cfg.sample_capacity, off;
    kt__slot_cold_t *c = KT__LD(&sl->cold);
    if (n < cap) {
        /* Filling: the next position (n, unless a block could not be allocated before). */
        uint32_t pos = KT__LD(&sl->res_fill), k = kt__smp_block(pos, &off);
        kt__au64 *blk = KT__LD(&c->smp[k]);
        if (!blk && (blk = kt__zalloc(kt__smp_block_size(k) * sizeof *blk)) != NULL)
            KT__STR(&c->smp[k], blk);
        if (blk) { /* out of memory: the sample is lost, the exact aggregates are not */
            KT__STR(&blk[off], v);
            KT__STR(&sl->res_fill, pos + 1u); /* exposes the sample just written */
        }
        if (n + 1 < cap) {
            sl->res_next = n + 1;
            return;
        }
        c->res_w = exp(log(kt__rand_open01(&s->rng)) / cap);
    } else {
        if (KT__LD(&sl->res_fill)) { /* the position drawn by the previous step (uniform, independent of v) */
            uint32_t k = kt__smp_block(c->res_idx, &off);
            KT__STR(&KT__LD(&c->smp[k])[off], v);
        }
        c->res_w *= exp(log(kt__rand_open01(&s->rng)) / cap);
    }
    reservoir_aim(s, sl, c);
    double skip = floor(log(kt__rand_open01(&s->rng)) / log1p(-c->res_w));
    sl->res_next = skip >= 1.8e19 ? UINT64_MAX : n + (uint64_t)skip + 1u;
}

/* A histogram count (the previous record's, see slot_add_fast). */
static inline void hist_bump(kt__au64 *c) { KT__STR(c, KT__LD(c) + 1); }

/* The scalars, under the slot's seqlock, and the previous record's histogram count (`bump`, NULL for none). The
 * count is stored inside the seqlock: a snapshot that reads it (before the scalars) then reads the sequence
 * number of this record or a later one, so it never also takes that record from `pend`. */
static inline __attribute__((always_inline)) void slot_scalars(kt__slot_t *sl, uint64_t n, uint64_t v, uint64_t stamp,
                                                               kt__au64 *bump)
{
    unsigned __int128 sq0 = (unsigned __int128)KT__LD(&sl->sq_hi) << 64 | KT__LD(&sl->sq_lo);
    unsigned __int128 sq = sq0 + (unsigned __int128)v * v;
    if (__builtin_expect(sq < sq0, 0)) /* past 2^128 ns^2 (durations near 2^64 ns): saturate, stddev unknown */
        sq = ~(unsigned __int128)0;
    /* Seqlock without fences (TSan models none): the data stores are releases, so a reader that sees any of
     * them also sees the odd sequence number stored before them; on x86 these are plain moves. */
    uint64_t q = KT__LD(&sl->seq);
    KT__ST(&sl->seq, q + 1);
    if (bump)
        hist_bump(bump);
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
    KT__STR(&sl->pend, v);
    KT__STR(&sl->seq, q + 2);
}

/* The histogram lags one record: each record bumps the bucket of the one before it (`pend`, stored with the
 * scalars) and leaves its own value pending; a snapshot adds `pend` to what it reads. Why: the bucket's address
 * depends on the duration, known only after a zone's last counter read, and a store whose address resolves that
 * late held up the next zone (bench/zone_clock: 28.7 ns per aggregate-only zone, 20.7 ns with the lag, over a
 * bare rdtsc pair of 19 ns). The previous record's value was stored long before: its bucket's address is ready
 * at once. Each count still follows the scalars of the record it counts. */

/* The common case, with no call and no allocation: returns 0 (having changed nothing) when the record needs
 * the reservoir or a new histogram block, which slot_add_full handles. */
static inline __attribute__((always_inline)) int slot_add_fast(kt__slot_t *sl, uint64_t v, uint64_t stamp)
{
    uint64_t n = KT__LD(&sl->count);
    if (__builtin_expect(n == sl->res_next, 0))
        return 0;
    kt__au64 *bump = NULL;
    if (__builtin_expect(n != 0, 1)) {
        /* the block bumped last, kept beside the scalars: the directory's line stays cold */
        uint32_t idx = kt__hist_index(KT__LD(&sl->pend));
        if (__builtin_expect(idx / KT__HIST_BLOCK != sl->hcache_block, 0)) {
            kt__au64 *blk = KT__LD(&KT__LD(&sl->cold)->hist[idx / KT__HIST_BLOCK]);
            if (__builtin_expect(!blk, 0))
                return 0;
            sl->hcache = blk;
            sl->hcache_block = idx / KT__HIST_BLOCK;
        }
        bump = &sl->hcache[idx % KT__HIST_BLOCK];
    }
    slot_scalars(sl, n, v, stamp, bump);
    return 1;
}

static __attribute__((noinline)) void slot_add_full(kt__shard_t *s, kt__slot_t *sl, uint64_t v, uint64_t stamp)
{
    uint64_t n = KT__LD(&sl->count);
    kt__au64 *bump = NULL;
    if (n) {
        uint32_t idx = kt__hist_index(KT__LD(&sl->pend));
        kt__slot_cold_t *c = KT__LD(&sl->cold);
        kt__au64 *blk = KT__LD(&c->hist[idx / KT__HIST_BLOCK]);
        if (!blk && (blk = kt__zalloc(KT__HIST_BLOCK * sizeof *blk)) != NULL)
            KT__STR(&c->hist[idx / KT__HIST_BLOCK], blk);
        if (blk) /* out of memory: percentiles then miss this record, the exact aggregates do not */
            bump = &blk[idx % KT__HIST_BLOCK];
    }
    slot_scalars(sl, n, v, stamp, bump);
    if (n == sl->res_next)
        reservoir_step(s, sl, n, v);
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
    if (n >= cap || (!log && !(log = kt__zalloc((size_t)cap * sizeof *log)))) {
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
    kt__slot_t *sl = s ? slot_for_counted(s, kernel) : NULL;
    if (sl)
        slot_add_full(s, sl, elapsed_ns, 0);
}

/* A duration record by id (kt__record_site's hot path: no span, no bytes, no error). */
static void record_id(kt_kernel_id_t kernel, uint64_t elapsed_ns)
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

static inline kt__name_cache_t *cache_entry(kt__shard_t *s, const char *name, kt_backend_t backend)
{
    uintptr_t p = (uintptr_t)name;
    return &s->names[((p >> 3) ^ (p >> 11) ^ (uint32_t)backend) & (KT__NAME_CACHE - 1u)];
}

/* Same pointer, same backend, same bytes as the interned name it stood for. The bytes are compared on every
 * hit: whether the memory is read-only says nothing once a library can be unloaded and another loaded at its
 * address (dlclose/dlopen), and no cheap unload signal exists for the hot path. */
static inline int cache_hit(const kt__name_cache_t *e, const char *name, kt_backend_t backend)
{
    if (e->ptr != name || e->backend != (uint32_t)backend + 1u)
        return 0;
    /* inline: a kernel name is short, and a library call would cost more than the bytes */
    const char *a = name, *b = e->name;
    if (__builtin_expect(e->keep != 0, 0)) {
        /* truncated when interned: the kept bytes match, and the caller's name still runs past KT__NAME_MAX
         * (what made it truncate); nothing beyond byte KT__NAME_MAX is read, however long the name */
        for (uint32_t i = 0; i < e->keep; i++)
            if (a[i] != b[i])
                return 0;
        for (uint32_t i = e->keep; i <= KT__NAME_MAX; i++)
            if (!a[i])
                return 0;
        return 1;
    }
    while (*a == *b && *a)
        a++, b++;
    return *a == *b;
}

/* A hit, or intern and refill the entry. */
static kt_kernel_id_t lookup_cached(kt__shard_t *s, const char *name, kt_backend_t backend)
{
    kt__name_cache_t *e = cache_entry(s, name, backend);
    if (cache_hit(e, name, backend))
        return e->id;
    kt_kernel_id_t id = kt_kernel_intern(name, backend, NULL);
    const kt__kernel_t *k = kt__kernel_get(id);
    if (k) {
        e->ptr = name;
        e->name = k->name;
        e->id = id;
        e->backend = (uint32_t)backend + 1u;
        e->keep = k->name_keep;
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
    kt__slot_t *sl = s ? slot_for_counted(s, lookup_cached(s, name, backend)) : NULL;
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
        if (__builtin_expect(cache_hit(e, name, backend) && (sl = slot_peek(s, e->id)) &&
                                 slot_add_fast(sl, elapsed_ns, 0),
                             1))
            return;
    }
    record_name_slow(name, backend, elapsed_ns);
}

void kt__record_site(kt_kernel_id_t *site, const char *name, kt_backend_t backend, uint64_t elapsed_ns)
{
    if (!kt__on())
        return;
    kt_kernel_id_t id = __atomic_load_n(site, __ATOMIC_RELAXED);
    if (__builtin_expect(!id, 0)) {
        id = kt_kernel_intern(name, backend, NULL);
        __atomic_store_n(site, id, __ATOMIC_RELAXED);
    }
    record_id(id, elapsed_ns);
}

/* ---------------------------------------------------------------------------------------------------
 * Launch configurations (kt_dispatch_t.launch): off the common path, reached by one branch
 * ------------------------------------------------------------------------------------------------- */

/* The configuration as kept: kind checked, dims at most 3, sizes past dims 0. 0 when it counts as none. */
static int launch_norm(const kt_launch_t *in, kt_launch_t *out)
{
    memset(out, 0, sizeof *out);
    if (in->kind == KT_LAUNCH_NONE || in->kind >= KT_LAUNCH_OTHER)
        return 0;
    out->kind = in->kind;
    if (in->kind == KT_LAUNCH_INDIRECT)
        return 1;
    out->dims = in->dims > 3 ? 3 : in->dims;
    for (uint32_t i = 0; i < out->dims; i++) {
        out->size[i] = in->size[i];
        out->local[i] = in->local[i];
    }
    return 1;
}

static void cfg_row_init(kt__cfg_row_t *r)
{
    KT__ST(&r->count, 0);
    KT__ST(&r->total, 0);
    KT__ST(&r->min, UINT64_MAX);
    KT__ST(&r->max, 0);
}

/* Adds a counted dispatch of duration v to its configuration's row (called after the slot's scalars). */
static __attribute__((noinline)) void config_add(kt__slot_t *sl, const kt_launch_t *launch, uint64_t v)
{
    kt_launch_t key;
    if (!launch_norm(launch, &key))
        return;
    kt__slot_cold_t *c = KT__LD(&sl->cold);
    kt__cfg_tab_t *t = KT__LD(&c->cfgs);
    if (!t) {
        if (!(t = kt__zalloc(sizeof *t)))
            return; /* out of memory: the breakdown misses it; the entry's aggregates do not */
        cfg_row_init(&t->rows[KT_LAUNCH_CONFIGS_MAX]);
        t->rows[KT_LAUNCH_CONFIGS_MAX].key.kind = KT_LAUNCH_OTHER;
        KT__STR(&c->cfgs, t);
    }
    uint32_t n = KT__LD(&t->n), i = t->hint;
    if (!(i < n && kt__launch_same(&t->rows[i].key, &key))) {
        for (i = 0; i < n && !kt__launch_same(&t->rows[i].key, &key); i++)
            ;
        if (i == n && n < KT_LAUNCH_CONFIGS_MAX) { /* a new row: key and stats before it is published */
            t->rows[n].key = key;
            cfg_row_init(&t->rows[n]);
            KT__STR(&t->n, n + 1);
        }
        t->hint = i; /* KT_LAUNCH_CONFIGS_MAX: the OTHER row */
    }
    kt__cfg_row_t *r = &t->rows[i];
    uint64_t q = KT__LD(&t->seq);
    KT__ST(&t->seq, q + 1);
    KT__STR(&r->count, KT__LD(&r->count) + 1);
    uint64_t tot = KT__LD(&r->total);
    KT__STR(&r->total, tot > UINT64_MAX - v ? UINT64_MAX : tot + v);
    if (v < KT__LD(&r->min))
        KT__STR(&r->min, v);
    if (v > KT__LD(&r->max))
        KT__STR(&r->max, v);
    KT__STR(&t->seq, q + 2);
}

void kt_record_dispatch(const kt_dispatch_t *d)
{
    if (!kt__on() || !d)
        return;
    kt__shard_t *s = shard_for_write();
    kt__slot_t *sl = s ? slot_for_counted(s, d->kernel) : NULL;
    if (!sl)
        return;
    if (d->flags & KT_SPAN_ERROR) {
        counter_add(&KT__LD(&sl->cold)->errors);
    } else {
        slot_add(s, sl, d->duration_ns, d->end_ns);
        if (__builtin_expect(d->launch.kind != 0, 0)) /* the one branch a dispatch without one pays */
            config_add(sl, &d->launch, d->duration_ns);
        if (d->bytes) { /* after the scalars: a snapshot reads bytes first, so it counts no uncounted dispatch */
            kt__slot_cold_t *c = KT__LD(&sl->cold);
            KT__STR(&c->bytes, KT__LD(&c->bytes) + d->bytes);
        }
    }
    if (d->start_ns || d->end_ns) {
        /* a device span's bound: its clock fit's plus the host counter model's (hclock.h), the one place both
         * meet; host spans keep their own (0) */
        uint64_t unc = d->uncertainty_ns;
        if (d->flags & KT_SPAN_DEVICE) {
            uint64_t hb = kt__hc_bound_ns();
            unc = unc > UINT64_MAX - hb ? UINT64_MAX : unc + hb;
        }
        const uint64_t t[7] = {d->duration_ns, d->enqueue_ns, d->queued_ns, d->submit_ns,
                               d->start_ns,    d->end_ns,     unc};
        span_push(s, sl, d->kernel, d->queue, d->thread, d->flags, t);
    }
}

static __attribute__((noinline)) void record_host_span_slow(kt_kernel_id_t kernel, uint64_t start_ns,
                                                            uint64_t end_ns)
{
    kt__shard_t *s = shard_for_write();
    kt__slot_t *sl = s ? slot_for_counted(s, kernel) : NULL;
    if (!sl)
        return;
    uint64_t dur = end_ns - start_ns;
    slot_add(s, sl, dur, end_ns);
    const uint64_t t[7] = {dur, start_ns, 0, 0, start_ns, end_ns, 0};
    span_push(s, sl, kernel, 0, 0, 0, t);
}

/* A zone's end: the common case with no call (shard ready, slot present, no reservoir step or new histogram
 * block, span log allocated) written out here, so the path is one leaf function; anything else goes to the slow
 * path. The span's stores match span_push's. */
void kt__record_host_span(kt_kernel_id_t kernel, uint64_t start_ns, uint64_t end_ns)
{
    kt__shard_t *s = shard_ready();
    kt__slot_t *sl;
    uint64_t dur = end_ns - start_ns;
    if (__builtin_expect(!s || !(sl = slot_peek(s, kernel)) || !slot_add_fast(sl, dur, end_ns), 0)) {
        record_host_span_slow(kernel, start_ns, end_ns);
        return;
    }
    uint32_t cap = kt__cfg.span_capacity, n = KT__LD(&s->span_count);
    kt__span_rec_t *log = KT__LD(&s->spans);
    if (__builtin_expect(n >= cap || !log, 0)) {
        if (cap && n >= cap) {
            counter_add(&sl->spans_dropped);
        } else if (cap) {
            const uint64_t t[7] = {dur, start_ns, 0, 0, start_ns, end_ns, 0};
            span_push(s, sl, kernel, 0, 0, 0, t);
        }
        return;
    }
    kt__span_rec_t *r = &log[n];
    KT__ST(&r->kernel, kernel);
    KT__ST(&r->queue, 0);
    KT__ST(&r->thread, tl_ordinal);
    KT__ST(&r->flags, 0);
    KT__ST(&r->t[0], dur);
    KT__ST(&r->t[1], start_ns);
    KT__ST(&r->t[2], 0);
    KT__ST(&r->t[3], 0);
    KT__ST(&r->t[4], start_ns);
    KT__ST(&r->t[5], end_ns);
    KT__ST(&r->t[6], 0);
    KT__STR(&s->span_count, n + 1);
}


void kt_record_error(kt_kernel_id_t kernel, const char *error_name)
{
    if (!kt__on())
        return;
    kt__shard_t *s = shard_for_write();
    kt__slot_t *sl = s ? slot_for_counted(s, kernel) : NULL;
    if (!sl)
        return;
    if (error_name && *error_name)
        kt__kernel_set_error(kernel, error_name);
    counter_add(&KT__LD(&sl->cold)->errors);
}

void kt_record_drop(kt_kernel_id_t kernel, kt_drop_reason_t reason)
{
    if (!kt__on())
        return;
    kt__shard_t *s = shard_for_write();
    kt__slot_t *sl = s ? slot_for_counted(s, kernel) : NULL;
    if (!sl)
        return;
    if ((unsigned)reason >= KT_DROP_REASON_COUNT)
        reason = KT_DROP_UNSPECIFIED;
    kt__slot_cold_t *c = KT__LD(&sl->cold);
    counter_add(&c->dropped_by[reason]);
    counter_add(&c->dropped);
}



/* Waits for a snapshot in progress: a snapshot reads one generation from start to end. */
void kt_reset(void)
{
    pthread_mutex_lock(&g_reset_lock);
    uint64_t gen = atomic_fetch_add_explicit(&g_gen, 1, memory_order_acq_rel) + 1;
    KT__ST(&g_kernels_dropped, 0);
    if (kt__arena) {
        KT__STR(&kt__arena->gen, gen);
        KT__ST(&kt__arena->kernels_dropped, 0);
    }
    pthread_mutex_unlock(&g_reset_lock);
}

/* fork (core.c's handlers): the reset lock, then the shard list lock, held across fork. */
void kt__recorder_fork_prepare(void)
{
    pthread_mutex_lock(&g_reset_lock);
    pthread_mutex_lock(&g_shards_lock);
}

void kt__recorder_fork_release(void)
{
    pthread_mutex_unlock(&g_shards_lock);
    pthread_mutex_unlock(&g_reset_lock);
}

/* In the child, after the locks are released. Only the forking thread exists; the other threads' shards stay
 * marked owned and are never adopted: their owners may have been mid-record at the fork (a slot's seqlock odd
 * forever), and they belong to the parent's generation, which snapshots skip. The child starts empty (a new
 * generation, as kt_reset), so what it writes is what it recorded itself, never a copy of the parent's. */
void kt__recorder_fork_child(void)
{
    atomic_fetch_add_explicit(&g_gen, 1, memory_order_acq_rel);
    KT__ST(&g_kernels_dropped, 0);
}
