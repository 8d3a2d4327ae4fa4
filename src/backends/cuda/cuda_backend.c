/* cuda_backend.c — CUDA backend: per-context pools of event pairs, kt_cuda_begin/end, the collector thread, the
 * anchors that place device events on the host timeline, flush/release/shutdown, and the GPU timer. */
#include "cuda_internal.h"

#include "core/service.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { KT__CUDA_UNINIT = 0, KT__CUDA_READY = 1, KT__CUDA_UNAVAILABLE = 2 };

/* Longest gap between two anchors that still continues a chain (float ms keeps ~60 ns at 1 s). */
#define KT__CUDA_CHAIN_GAP_NS 2000000000ull
/* Longest spin waiting for an anchor event on the private stream. */
#define KT__CUDA_ANCHOR_WAIT_NS 20000000ull
/* Dispatches handled per collection batch. */
#define KT__CUDA_BATCH 128

/* Backend-wide state. */
static struct {
    pthread_mutex_t lock;     /* state, settings, context list, collector lifecycle */
    pthread_cond_t wake;      /* the collector sleeps here while nothing is pending */
    pthread_mutex_t consumer; /* one consumer of completions at a time (collector pass, flush, sync end, cleanup) */
    atomic_int state;         /* KT__CUDA_* */
    kt_cuda_desc_t desc;      /* settings in force, defaults filled in */
    char load_msg[512];       /* why loading failed, re-reported on every KT_EUNAVAILABLE */
    int load_res;             /* CUresult behind load_msg */
    kt__cuda_ctx_t *ctxs;     /* contexts seen (prepended; nodes are removed only under `consumer`) */
    atomic_uint generation;   /* bumped by shutdown: older spans and timers are invalid */
    atomic_uint ctx_epoch;    /* bumped whenever a context's state is freed (release, shutdown) */
    atomic_uint pending;      /* ended dispatches not yet collected, all contexts */
    pthread_t collector;      /* collector thread */
    int collector_running;    /* the thread exists */
    int collector_stop;       /* asks it to exit */
    int exiting;              /* process exit began: no new collector */
} G = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .consumer = PTHREAD_MUTEX_INITIALIZER,
    .generation = 1,
    .ctx_epoch = 1,
};

/* The calling thread's last context look-up, valid while G.ctx_epoch is unchanged (spares the global lock on
 * every kt_cuda_begin). */
static _Thread_local struct {
    kt__cuctx handle;  /* CUDA context */
    kt__cuda_ctx_t *c; /* its state */
    uint32_t epoch;    /* G.ctx_epoch when cached */
} t_ctx_cache;

static void sleep_us(uint32_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------------------------------------------
 * Initialisation
 * ------------------------------------------------------------------------------------------------- */

static void atexit_handler(uint64_t deadline_ns);
static void flush_hook(uint64_t deadline_ns);
static const kt__backend_ops_t kOps = {.name = "CUDA", .flush = flush_hook, .stop = atexit_handler};

static void fill_defaults(kt_cuda_desc_t *d)
{
    if (!d->pool_chunk)
        d->pool_chunk = 16;
    if (!d->max_pairs)
        d->max_pairs = 65536;
    if (!d->poll_us)
        d->poll_us = 100;
    if (!d->anchor_period_ms)
        d->anchor_period_ms = 100;
    if (!d->flush_timeout_ms)
        d->flush_timeout_ms = 2000;
    if (!d->sync) {
        const char *s = secure_getenv("KTIMING_CUDA_SYNC");
        d->sync = s && s[0] && strcmp(s, "0") != 0;
    }
}

/* G.lock held. */
static int init_locked(const kt_cuda_desc_t *desc)
{
    kt_cuda_desc_t want = desc ? *desc : (kt_cuda_desc_t){0};
    fill_defaults(&want);
    int state = atomic_load(&G.state);
    if (state == KT__CUDA_READY)
        return (desc && memcmp(&want, &G.desc, sizeof want) != 0) ? KT_ESTATE : 0;
    if (state == KT__CUDA_UNAVAILABLE) {
        kt__cuda_set_error(G.load_res, "%s", G.load_msg);
        return KT_EUNAVAILABLE;
    }
    kt__cu_t cu;
    int rc = kt__cuda_load(&cu);
    if (rc != 0) {
        snprintf(G.load_msg, sizeof G.load_msg, "%s", kt_cuda_last_error());
        G.load_res = kt_cuda_last_result();
        atomic_store(&G.state, KT__CUDA_UNAVAILABLE);
        return KT_EUNAVAILABLE;
    }
    G.desc = want;
    kt__backend_register(&kOps); /* idempotent; again after a kt_shutdown() stopped it */
    atomic_store(&G.state, KT__CUDA_READY);
    return 0;
}

int kt_cuda_init(const kt_cuda_desc_t *desc)
{
    pthread_mutex_lock(&G.lock);
    int rc = init_locked(desc);
    pthread_mutex_unlock(&G.lock);
    return rc;
}

int kt__cuda_ready(void)
{
    if (atomic_load_explicit(&G.state, memory_order_acquire) == KT__CUDA_READY)
        return 0;
    return kt_cuda_init(NULL);
}

uint32_t kt__cuda_generation(void)
{
    return atomic_load(&G.generation);
}

int kt_cuda_device_count(void)
{
    int rc = kt__cuda_ready();
    if (rc)
        return rc;
    int n = 0;
    kt__curesult r = kt__cu.cuDeviceGetCount(&n);
    return r ? kt__cuda_fail("cuDeviceGetCount", r) : n;
}

/* ---------------------------------------------------------------------------------------------------
 * Contexts
 * ------------------------------------------------------------------------------------------------- */

int kt__cuda_ctx_enter(kt__cuda_ctx_t *c, int *pushed)
{
    kt__cuctx cur = NULL;
    *pushed = 0;
    if (kt__cu.cuCtxGetCurrent(&cur) == KT__CU_SUCCESS && cur == c->ctx)
        return 0;
    kt__curesult r = kt__cu.cuCtxPushCurrent_v2(c->ctx);
    if (r)
        return kt__cuda_fail("cuCtxPushCurrent", r);
    *pushed = 1;
    return 0;
}

void kt__cuda_ctx_leave(int pushed)
{
    if (pushed) {
        kt__cuctx popped = NULL;
        kt__cu.cuCtxPopCurrent_v2(&popped);
    }
}

void kt__cuda_publish(kt__cuda_ctx_t *c)
{
    kt_device_info_t info;
    pthread_mutex_lock(&c->lock);
    memset(&info, 0, sizeof info);
    info.backend = KT_BACKEND_CUDA;
    snprintf(info.name, sizeof info.name, "%s", c->device_name);
    if (c->gt_valid && c->gt_domain != KT_DOMAIN_DEVICE && c->gt_domain != KT_DOMAIN_UNKNOWN)
        snprintf(info.clock_domain, sizeof info.clock_domain, "%s", kt_clock_domain_name(c->gt_domain));
    else
        snprintf(info.clock_domain, sizeof info.clock_domain, "device");
    info.resolution_ns = c->gt_resolution_ns ? c->gt_resolution_ns : KT_CUDA_EVENT_RESOLUTION_NS;
    info.frequency_hz = KT_CUDA_GLOBALTIMER_HZ;
    info.valid_bits = 64;
    if (c->event_model_valid) {
        info.error_bound_ns = (uint64_t)llround(c->event_model.error_ns);
        info.drift_ppm = c->event_model.drift_ppm;
        info.model_samples = c->event_model.inliers;
    } else if (c->anchor_cur >= 0) {
        info.error_bound_ns = c->anchor_half_ns;
    }
    pthread_mutex_unlock(&c->lock);
    kt_device_publish(&info);
}

/* G.lock held. */
static kt__cuda_ctx_t *ctx_find_locked(kt__cuctx ctx)
{
    for (kt__cuda_ctx_t *c = G.ctxs; c; c = c->next)
        if (c->ctx == ctx)
            return c;
    return NULL;
}

static int ctx_create(kt__cuctx handle, int retained, kt__cuda_ctx_t **out)
{
    kt__cuda_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return KT_ENOMEM;
    c->ctx = handle;
    c->retained_primary = retained;
    c->anchor_cur = -1;
    c->gt_domain = KT_DOMAIN_UNKNOWN;
    c->generation = atomic_load(&G.generation);
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->gt_lock, NULL);
    int pushed = 0;
    int rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc == 0) {
        kt__curesult r = kt__cu.cuCtxGetDevice(&c->device);
        kt__cuda_ctx_leave(pushed);
        if (r)
            rc = kt__cuda_fail("cuCtxGetDevice", r);
    }
    if (rc) {
        pthread_mutex_destroy(&c->lock);
        pthread_mutex_destroy(&c->gt_lock);
        free(c);
        return rc;
    }
    if (kt__cu.cuDeviceGetName(c->device_name, (int)sizeof c->device_name - 1, c->device) != KT__CU_SUCCESS)
        snprintf(c->device_name, sizeof c->device_name, "CUDA device %d", c->device);
    kt__cu.cuDeviceGetAttribute(&c->cc_major, KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->device);
    kt__cu.cuDeviceGetAttribute(&c->cc_minor, KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->device);
    *out = c;
    return 0;
}

/* G.lock held: the state of a context, created on first sight. `retained` says ktiming retained it (a primary
 * context), in which case an already known entry releases the extra retain. */
static int ctx_lookup_locked(kt__cuctx ctx, int retained, kt__cudevice dev, kt__cuda_ctx_t **out, int *created)
{
    kt__cuda_ctx_t *c = ctx_find_locked(ctx);
    *created = 0;
    if (c) {
        if (retained && c->retained_primary)
            kt__cu.cuDevicePrimaryCtxRelease_v2(dev);
        else if (retained)
            c->retained_primary = 1;
        *out = c;
        return 0;
    }
    int rc = ctx_create(ctx, retained, &c);
    if (rc) {
        if (retained)
            kt__cu.cuDevicePrimaryCtxRelease_v2(dev);
        return rc;
    }
    c->next = G.ctxs;
    G.ctxs = c;
    *created = 1;
    *out = c;
    return 0;
}

/* G.lock held. */
static int ctx_primary_locked(int ordinal, kt__cuda_ctx_t **out, int *created)
{
    kt__cudevice dev = 0;
    kt__cuctx ctx = NULL;
    kt__curesult r = kt__cu.cuDeviceGet(&dev, ordinal);
    if (r)
        return kt__cuda_fail("cuDeviceGet", r);
    r = kt__cu.cuDevicePrimaryCtxRetain(&ctx, dev);
    if (r)
        return kt__cuda_fail("cuDevicePrimaryCtxRetain", r);
    return ctx_lookup_locked(ctx, 1, dev, out, created);
}

int kt__cuda_ctx_get(kt__cuctx ctx, kt__cuda_ctx_t **out)
{
    int rc = kt__cuda_ready();
    if (rc)
        return rc;
    if (!ctx) {
        kt__curesult r = kt__cu.cuCtxGetCurrent(&ctx);
        if (r)
            return kt__cuda_fail("cuCtxGetCurrent", r);
    }
    uint32_t epoch = atomic_load(&G.ctx_epoch);
    if (ctx && t_ctx_cache.handle == ctx && t_ctx_cache.epoch == epoch) {
        *out = t_ctx_cache.c;
        return 0;
    }
    int created = 0;
    pthread_mutex_lock(&G.lock);
    kt__cuda_ctx_t *c = ctx ? ctx_find_locked(ctx) : NULL;
    if (!c && ctx)
        rc = ctx_lookup_locked(ctx, 0, 0, &c, &created);
    else if (!c) {
        /* No current context: device 0's primary context, as the runtime API would use. */
        for (kt__cuda_ctx_t *it = G.ctxs; it && !c; it = it->next)
            if (it->retained_primary && it->device == 0)
                c = it;
        if (!c)
            rc = ctx_primary_locked(0, &c, &created);
    }
    pthread_mutex_unlock(&G.lock);
    if (rc)
        return rc;
    if (created)
        kt__cuda_publish(c);
    t_ctx_cache.handle = c->ctx;
    t_ctx_cache.c = c;
    t_ctx_cache.epoch = epoch;
    *out = c;
    return 0;
}

int kt_cuda_device_primary(int ordinal, struct CUctx_st **ctx)
{
    if (!ctx)
        return KT_EINVAL;
    *ctx = NULL;
    int rc = kt__cuda_ready();
    if (rc)
        return rc;
    kt__cuda_ctx_t *c = NULL;
    int created = 0;
    pthread_mutex_lock(&G.lock);
    rc = ctx_primary_locked(ordinal, &c, &created);
    pthread_mutex_unlock(&G.lock);
    if (rc)
        return rc;
    if (created)
        kt__cuda_publish(c);
    *ctx = c->ctx;
    return 0;
}

int kt_cuda_device_get(int ordinal, kt_cuda_device_t *out)
{
    if (!out)
        return KT_EINVAL;
    int rc = kt__cuda_ready();
    if (rc)
        return rc;
    memset(out, 0, sizeof *out);
    kt__cudevice dev = 0;
    kt__curesult r = kt__cu.cuDeviceGet(&dev, ordinal);
    if (r)
        return kt__cuda_fail("cuDeviceGet", r);
    out->ordinal = ordinal;
    if (kt__cu.cuDeviceGetName(out->name, (int)sizeof out->name - 1, dev) != KT__CU_SUCCESS)
        snprintf(out->name, sizeof out->name, "CUDA device %d", ordinal);
    int khz = 0;
    kt__cu.cuDeviceGetAttribute(&out->cc_major, KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    kt__cu.cuDeviceGetAttribute(&out->cc_minor, KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    kt__cu.cuDeviceGetAttribute(&out->sm_count, KT__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    if (kt__cu.cuDeviceGetAttribute(&khz, KT__CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev) == KT__CU_SUCCESS && khz > 0)
        out->sm_clock_hz = (uint64_t)khz * 1000u;
    out->driver_version = kt__cu.driver_version;
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Event-pair pool
 * ------------------------------------------------------------------------------------------------- */

/* c->lock held. Creates max(pool_chunk, capacity) pairs (the pool doubles), bounded by max_pairs. */
static int pool_grow_locked(kt__cuda_ctx_t *c)
{
    uint32_t want = c->capacity > G.desc.pool_chunk ? c->capacity : G.desc.pool_chunk;
    if (want > G.desc.max_pairs - c->capacity)
        want = G.desc.max_pairs - c->capacity;
    if (want == 0)
        return KT_EFULL;
    kt__cuda_chunk_t *chunk = calloc(1, sizeof *chunk + (size_t)want * sizeof(kt__cuda_pair_t));
    if (!chunk)
        return KT_ENOMEM;
    int pushed = 0;
    int rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc) {
        free(chunk);
        return rc;
    }
    for (uint32_t i = 0; i < want; i++) {
        kt__cuda_pair_t *p = &chunk->pairs[i];
        kt__curesult r = kt__cu.cuEventCreate(&p->start, KT__CU_EVENT_DEFAULT);
        if (r == KT__CU_SUCCESS) {
            c->events_created++;
            r = kt__cu.cuEventCreate(&p->end, KT__CU_EVENT_DEFAULT);
            if (r == KT__CU_SUCCESS)
                c->events_created++;
            else
                kt__cu.cuEventDestroy_v2(p->start);
        }
        if (r) {
            rc = kt__cuda_fail("cuEventCreate", r);
            break;
        }
        chunk->count++;
    }
    kt__cuda_ctx_leave(pushed);
    if (chunk->count == 0) {
        free(chunk);
        return rc ? rc : KT_EBACKEND;
    }
    chunk->next = c->chunks;
    c->chunks = chunk;
    for (uint32_t i = 0; i < chunk->count; i++) {
        chunk->pairs[i].next = c->free_list;
        c->free_list = &chunk->pairs[i];
    }
    c->capacity += chunk->count;
    c->free_count += chunk->count;
    return 0;
}

/* c->lock held. */
static int pool_take_locked(kt__cuda_ctx_t *c, kt__cuda_pair_t **out)
{
    if (!c->free_list) {
        int rc = pool_grow_locked(c);
        if (rc)
            return rc;
    }
    kt__cuda_pair_t *p = c->free_list;
    c->free_list = p->next;
    c->free_count--;
    p->next = NULL;
    *out = p;
    return 0;
}

static void pool_put(kt__cuda_ctx_t *c, kt__cuda_pair_t *p)
{
    pthread_mutex_lock(&c->lock);
    p->queue = NULL;
    p->next = c->free_list;
    c->free_list = p;
    c->free_count++;
    pthread_mutex_unlock(&c->lock);
}

/* c->lock held: the queue of a stream, created (and registered as a timeline track) on first sight. */
static kt__cuda_squeue_t *squeue_get_locked(kt__cuda_ctx_t *c, kt__custream stream)
{
    for (kt__cuda_squeue_t *q = c->queues; q; q = q->next)
        if (q->stream == stream)
            return q;
    kt__cuda_squeue_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->stream = stream;
    char label[64];
    if (stream)
        snprintf(label, sizeof label, "stream %p", (void *)stream);
    else
        snprintf(label, sizeof label, "stream default (ctx %p)", (void *)c->ctx);
    q->queue_id = kt_queue_register(KT_BACKEND_CUDA, c->device_name, label);
    q->next = c->queues;
    c->queues = q;
    return q;
}

/* ---------------------------------------------------------------------------------------------------
 * Anchors: device event time → host time (consumer lock held, context current)
 * ------------------------------------------------------------------------------------------------- */

static void anchor_refresh(kt__cuda_ctx_t *c)
{
    uint64_t now = kt_now_ns();
    if (c->anchor_cur >= 0 && now - c->anchor_mid_ns < (uint64_t)G.desc.anchor_period_ms * 1000000ull)
        return;
    kt__curesult r;
    if (!c->anchor_stream) {
        r = kt__cu.cuStreamCreate(&c->anchor_stream, KT__CU_STREAM_NON_BLOCKING);
        if (r) {
            c->anchor_stream = NULL;
            kt__cuda_fail("cuStreamCreate (anchor stream)", r);
            return;
        }
    }
    for (int i = 0; i < 2; i++) { /* both at once: no event is created later in the context's life */
        if (c->anchor_ev[i])
            continue;
        r = kt__cu.cuEventCreate(&c->anchor_ev[i], KT__CU_EVENT_DEFAULT);
        if (r) {
            c->anchor_ev[i] = NULL;
            kt__cuda_fail("cuEventCreate (anchor)", r);
            return;
        }
        pthread_mutex_lock(&c->lock);
        c->events_created++;
        pthread_mutex_unlock(&c->lock);
    }
    int nxt = c->anchor_cur < 0 ? 0 : 1 - c->anchor_cur;
    kt__cuevent ev = c->anchor_ev[nxt];
    uint64_t h0 = kt_now_ns();
    r = kt__cu.cuEventRecord(ev, c->anchor_stream);
    if (r) {
        kt__cuda_fail("cuEventRecord (anchor)", r);
        return;
    }
    uint32_t spins = 0;
    while ((r = kt__cu.cuEventQuery(ev)) == KT__CU_ERROR_NOT_READY) {
        if (kt_now_ns() - h0 > KT__CUDA_ANCHOR_WAIT_NS)
            return; /* the GPU is slow to reach it; try again next pass */
        if (++spins > 1000)
            sched_yield();
    }
    uint64_t h1 = kt_now_ns();
    if (r) {
        kt__cuda_fail("cuEventQuery (anchor)", r);
        return;
    }
    uint64_t mid = h0 + (h1 - h0) / 2;
    int64_t pos = 0;
    int continues = 0;
    if (c->anchor_cur >= 0 && mid - c->anchor_mid_ns <= KT__CUDA_CHAIN_GAP_NS) {
        float step_ms = 0.0f;
        if (kt__cu.cuEventElapsedTime(&step_ms, c->anchor_ev[c->anchor_cur], ev) == KT__CU_SUCCESS) {
            pos = c->anchor_chain_ns + (int64_t)llround((double)step_ms * 1e6);
            continues = 1;
        }
    }
    c->chain_len = continues ? c->chain_len + 1 : 1;
    c->chain[(c->chain_len - 1) % KT__CUDA_ANCHOR_SAMPLES] =
        (kt_clock_sample_t){KT__CUDA_CHAIN_BASE_NS + (uint64_t)pos, h0, h1};
    int publish = 0;
    kt_clock_model_t m;
    uint32_t n = c->chain_len < KT__CUDA_ANCHOR_SAMPLES ? c->chain_len : KT__CUDA_ANCHOR_SAMPLES;
    int fitted = n >= KT_CLOCK_MIN_SAMPLES &&
                 kt_clock_fit(c->chain, n, KT_FIT_WEIGHTED, KT_DOMAIN_MONOTONIC_RAW, &m) == 0;
    pthread_mutex_lock(&c->lock); /* publish and stats read these under c->lock */
    c->anchor_cur = nxt;
    c->anchor_chain_ns = pos;
    c->anchors_made++;
    c->anchor_mid_ns = mid;
    c->anchor_half_ns = (h1 - h0 + 1) / 2;
    if (fitted) {
        publish = !c->event_model_valid || (c->anchors_made % 64) == 0;
        c->event_model = m;
        c->event_model_valid = 1;
    } else {
        c->event_model_valid = 0;
    }
    pthread_mutex_unlock(&c->lock);
    if (publish)
        kt__cuda_publish(c);
}

/* Fill duration and host placement of a completed pair (consumer lock held, context current). */
static int pair_place(kt__cuda_ctx_t *c, const kt__cuda_pair_t *p, kt_dispatch_t *d)
{
    float dur_ms = 0.0f;
    kt__curesult r = kt__cu.cuEventElapsedTime(&dur_ms, p->start, p->end);
    if (r)
        return kt__cuda_fail("cuEventElapsedTime", r);
    memset(d, 0, sizeof *d);
    d->kernel = p->kernel;
    d->queue = p->queue ? p->queue->queue_id : 0;
    d->thread = p->thread;
    d->flags = KT_SPAN_DEVICE;
    d->enqueue_ns = p->enqueue_ns;
    d->duration_ns = dur_ms > 0.0f ? (uint64_t)llround((double)dur_ms * 1e6) : 0;
    if (c->anchor_cur < 0)
        return 0; /* no anchor yet: duration only, placement unknown (0) */
    float off_ms = 0.0f;
    if (kt__cu.cuEventElapsedTime(&off_ms, c->anchor_ev[c->anchor_cur], p->start) != KT__CU_SUCCESS)
        return 0;
    double off_ns = (double)off_ms * 1e6;
    /* Half a float ulp of the offset, and half the event timestamp resolution. */
    double rounding = fabs(off_ns) * ldexp(1.0, -24) + KT_CUDA_EVENT_RESOLUTION_NS / 2.0;
    int64_t dev = c->anchor_chain_ns + (int64_t)llround(off_ns);
    uint64_t host = 0, unc = 0;
    if (c->event_model_valid &&
        kt_clock_to_host(&c->event_model, KT__CUDA_CHAIN_BASE_NS + (uint64_t)dev, &host, &unc) == 0) {
        unc += (uint64_t)llround(rounding);
    } else {
        double h = (double)c->anchor_mid_ns + off_ns;
        if (h <= 0.0)
            return 0;
        host = (uint64_t)llround(h);
        unc = c->anchor_half_ns + (uint64_t)llround(fabs(off_ns) * KT__CUDA_ASSUMED_DRIFT_PPM * 1e-6 + rounding);
    }
    d->start_ns = host;
    d->end_ns = host + d->duration_ns;
    d->uncertainty_ns = unc;
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Collection (consumer lock held)
 * ------------------------------------------------------------------------------------------------- */

/* Collect completed dispatches of one context; returns how many remain pending. */
static uint32_t collect_ctx(kt__cuda_ctx_t *c)
{
    pthread_mutex_lock(&c->lock);
    uint32_t pending = c->pending;
    pthread_mutex_unlock(&c->lock);
    if (!pending)
        return 0;
    int pushed = 0;
    if (kt__cuda_ctx_enter(c, &pushed))
        return pending;
    anchor_refresh(c);
    for (;;) {
        kt__cuda_pair_t *done[KT__CUDA_BATCH];
        kt__curesult status[KT__CUDA_BATCH];
        uint32_t n = 0;
        pthread_mutex_lock(&c->lock);
        for (kt__cuda_squeue_t *q = c->queues; q && n < KT__CUDA_BATCH; q = q->next) {
            while (q->head && n < KT__CUDA_BATCH) {
                kt__curesult r = kt__cu.cuEventQuery(q->head->end);
                if (r == KT__CU_ERROR_NOT_READY)
                    break;
                kt__cuda_pair_t *p = q->head;
                q->head = p->next;
                if (!q->head)
                    q->tail = NULL;
                p->next = NULL;
                status[n] = r;
                done[n++] = p;
                c->pending--;
            }
        }
        pending = c->pending;
        pthread_mutex_unlock(&c->lock);
        if (!n)
            break;
        kt_dispatch_t d[KT__CUDA_BATCH];
        int ok[KT__CUDA_BATCH];
        for (uint32_t i = 0; i < n; i++) {
            ok[i] = status[i] == KT__CU_SUCCESS;
            if (!ok[i])
                kt__cuda_fail("cuEventQuery", status[i]);
            else if (pair_place(c, done[i], &d[i]) != 0)
                ok[i] = 0;
        }
        uint64_t recorded = 0, errors = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (ok[i]) {
                kt_record_dispatch(&d[i]);
                recorded++;
            } else {
                kt_record_error(done[i]->kernel);
                errors++;
            }
        }
        pthread_mutex_lock(&c->lock);
        for (uint32_t i = 0; i < n; i++) {
            done[i]->queue = NULL;
            done[i]->next = c->free_list;
            c->free_list = done[i];
            c->free_count++;
        }
        c->recorded += recorded;
        c->errors += errors;
        pthread_mutex_unlock(&c->lock);
        atomic_fetch_sub(&G.pending, n);
    }
    kt__cuda_ctx_leave(pushed);
    return pending;
}

/* Collect every context (or only `only`), waiting up to timeout_ms for pending dispatches. Takes the consumer
 * lock per pass unless the caller holds it (held = 1). */
static uint32_t collect_wait(kt__cuda_ctx_t *only, uint32_t timeout_ms, int held)
{
    uint64_t deadline = kt_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        uint32_t left = 0;
        if (!held)
            pthread_mutex_lock(&G.consumer);
        if (only) {
            left = collect_ctx(only);
        } else {
            pthread_mutex_lock(&G.lock);
            kt__cuda_ctx_t *head = G.ctxs;
            pthread_mutex_unlock(&G.lock);
            for (kt__cuda_ctx_t *c = head; c; c = c->next)
                left += collect_ctx(c);
        }
        if (!held)
            pthread_mutex_unlock(&G.consumer);
        if (!left || kt_now_ns() >= deadline)
            return left;
        sleep_us(G.desc.poll_us);
    }
}

static void *collector_main(void *arg)
{
    (void)arg;
#if defined(__linux__)
    pthread_setname_np(pthread_self(), "kt-cuda-collect");
#endif
    pthread_mutex_lock(&G.lock);
    while (!G.collector_stop) {
        if (atomic_load(&G.pending) == 0) {
            pthread_cond_wait(&G.wake, &G.lock);
            continue;
        }
        uint32_t poll = G.desc.poll_us;
        pthread_mutex_unlock(&G.lock);
        collect_wait(NULL, 0, 0);
        sleep_us(poll);
        pthread_mutex_lock(&G.lock);
    }
    pthread_mutex_unlock(&G.lock);
    return NULL;
}

static void collector_wake(void)
{
    pthread_mutex_lock(&G.lock);
    if (!G.collector_running && !G.exiting && !G.collector_stop) {
        if (pthread_create(&G.collector, NULL, collector_main, NULL) == 0)
            G.collector_running = 1;
    }
    pthread_cond_signal(&G.wake);
    pthread_mutex_unlock(&G.lock);
}

static void collector_stop(void)
{
    pthread_mutex_lock(&G.lock);
    int running = G.collector_running;
    G.collector_stop = 1;
    pthread_cond_broadcast(&G.wake);
    pthread_mutex_unlock(&G.lock);
    if (running)
        pthread_join(G.collector, NULL);
    pthread_mutex_lock(&G.lock);
    G.collector_running = 0;
    G.collector_stop = 0;
    pthread_mutex_unlock(&G.lock);
}

static void flush_hook(uint64_t deadline_ns)
{
    (void)deadline_ns; /* bounded by flush_timeout_ms */
    if (atomic_load(&G.state) != KT__CUDA_READY)
        return;
    collect_wait(NULL, G.desc.flush_timeout_ms, 0);
    pthread_mutex_lock(&G.lock);
    kt__cuda_ctx_t *head = G.ctxs;
    pthread_mutex_unlock(&G.lock);
    pthread_mutex_lock(&G.consumer);
    for (kt__cuda_ctx_t *c = head; c; c = c->next)
        kt__cuda_publish(c);
    pthread_mutex_unlock(&G.consumer);
}

/* At exit: stop the collector so no thread is inside the driver while it is torn down, then collect what is
 * left. Contexts are not destroyed here (other threads may still use them). */
static void atexit_handler(uint64_t deadline_ns)
{
    (void)deadline_ns; /* bounded by flush_timeout_ms */
    pthread_mutex_lock(&G.lock);
    G.exiting = 1;
    pthread_mutex_unlock(&G.lock);
    collector_stop();
    if (atomic_load(&G.state) == KT__CUDA_READY)
        collect_wait(NULL, G.desc.flush_timeout_ms, 0);
}

/* ---------------------------------------------------------------------------------------------------
 * Cleanup (consumer lock held; c unlinked)
 * ------------------------------------------------------------------------------------------------- */

static void ctx_destroy(kt__cuda_ctx_t *c)
{
    int pushed = 0;
    int entered = kt__cuda_ctx_enter(c, &pushed) == 0;
    uint32_t dropped = 0;
    for (kt__cuda_squeue_t *q = c->queues, *qn; q; q = qn) {
        qn = q->next;
        for (kt__cuda_pair_t *p = q->head; p; p = p->next) {
            kt_record_drop(p->kernel);
            dropped++;
        }
        free(q);
    }
    if (dropped)
        atomic_fetch_sub(&G.pending, dropped);
    for (kt__cuda_chunk_t *ch = c->chunks, *chn; ch; ch = chn) {
        chn = ch->next;
        for (uint32_t i = 0; i < ch->count; i++) {
            kt__cu.cuEventDestroy_v2(ch->pairs[i].start);
            kt__cu.cuEventDestroy_v2(ch->pairs[i].end);
        }
        free(ch);
    }
    for (int i = 0; i < 2; i++)
        if (c->anchor_ev[i])
            kt__cu.cuEventDestroy_v2(c->anchor_ev[i]);
    if (c->anchor_stream)
        kt__cu.cuStreamDestroy_v2(c->anchor_stream);
    kt__cuda_gt_cleanup(c);
    if (entered)
        kt__cuda_ctx_leave(pushed);
    if (c->retained_primary)
        kt__cu.cuDevicePrimaryCtxRelease_v2(c->device);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->gt_lock);
    free(c);
}

int kt_cuda_context_release(struct CUctx_st *ctx)
{
    if (atomic_load(&G.state) != KT__CUDA_READY)
        return 0;
    if (!ctx && kt__cu.cuCtxGetCurrent(&ctx) != KT__CU_SUCCESS)
        return KT_EINVAL;
    pthread_mutex_lock(&G.consumer);
    pthread_mutex_lock(&G.lock);
    kt__cuda_ctx_t *c = ctx_find_locked(ctx);
    pthread_mutex_unlock(&G.lock);
    if (!c) {
        pthread_mutex_unlock(&G.consumer);
        return 0;
    }
    collect_wait(c, G.desc.flush_timeout_ms, 1);
    kt__cuda_publish(c);
    pthread_mutex_lock(&G.lock);
    for (kt__cuda_ctx_t **pp = &G.ctxs; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    atomic_fetch_add(&G.ctx_epoch, 1);
    pthread_mutex_unlock(&G.lock);
    ctx_destroy(c);
    pthread_mutex_unlock(&G.consumer);
    return 0;
}

void kt_cuda_shutdown(void)
{
    pthread_mutex_lock(&G.lock);
    int state = atomic_load(&G.state);
    if (state != KT__CUDA_READY) {
        atomic_store(&G.state, KT__CUDA_UNINIT);
        pthread_mutex_unlock(&G.lock);
        return;
    }
    pthread_mutex_unlock(&G.lock);
    collector_stop();
    collect_wait(NULL, G.desc.flush_timeout_ms, 0);
    pthread_mutex_lock(&G.consumer);
    pthread_mutex_lock(&G.lock);
    kt__cuda_ctx_t *list = G.ctxs;
    G.ctxs = NULL;
    atomic_fetch_add(&G.generation, 1);
    atomic_fetch_add(&G.ctx_epoch, 1);
    atomic_store(&G.state, KT__CUDA_UNINIT);
    pthread_mutex_unlock(&G.lock);
    for (kt__cuda_ctx_t *c = list, *cn; c; c = cn) {
        cn = c->next;
        kt__cuda_publish(c);
        ctx_destroy(c);
    }
    atomic_store(&G.pending, 0);
    pthread_mutex_unlock(&G.consumer);
}

/* ---------------------------------------------------------------------------------------------------
 * Dispatch spans
 * ------------------------------------------------------------------------------------------------- */

static int valid_ctx(const kt__cuda_ctx_t *c, uint32_t generation)
{
    return c && atomic_load(&G.state) == KT__CUDA_READY && generation == atomic_load(&G.generation);
}

int kt_cuda_begin(kt_cuda_span_t *span, struct CUctx_st *ctx, struct CUstream_st *stream, const char *name)
{
    if (!span)
        return KT_EINVAL;
    span->pair = NULL;
    span->context = NULL;
    span->generation = 0;
    if (!kt_is_enabled())
        return 0;
    kt__cuda_ctx_t *c;
    int rc = kt__cuda_ctx_get(ctx, &c);
    if (rc)
        return rc;
    kt_kernel_id_t id = kt_kernel_intern(name && name[0] ? name : "(unnamed)", KT_BACKEND_CUDA, c->device_name);
    kt__cuda_pair_t *p = NULL;
    pthread_mutex_lock(&c->lock);
    kt__cuda_squeue_t *q = squeue_get_locked(c, stream);
    rc = q ? pool_take_locked(c, &p) : KT_ENOMEM;
    if (rc == KT_EFULL)
        c->dropped++;
    pthread_mutex_unlock(&c->lock);
    if (rc) {
        if (rc == KT_EFULL) {
            kt_record_drop(id);
            kt__cuda_set_error(0, "CUDA event-pair pool full (%u pairs in flight)", G.desc.max_pairs);
        }
        return rc;
    }
    p->kernel = id;
    p->queue = q;
    p->thread = kt_thread_ordinal();
    int pushed = 0;
    rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc) {
        pool_put(c, p);
        return rc;
    }
    p->enqueue_ns = kt_now_ns();
    kt__curesult r = kt__cu.cuEventRecord(p->start, stream);
    kt__cuda_ctx_leave(pushed);
    if (r) {
        pool_put(c, p);
        return kt__cuda_fail("cuEventRecord", r);
    }
    span->pair = p;
    span->context = c;
    span->generation = c->generation;
    return 0;
}

int kt_cuda_end(kt_cuda_span_t *span)
{
    if (!span || !span->pair)
        return 0;
    kt__cuda_pair_t *p = span->pair;
    kt__cuda_ctx_t *c = span->context;
    span->pair = NULL;
    if (!valid_ctx(c, span->generation)) {
        kt__cuda_set_error(0, "kt_cuda_end: the backend was shut down since kt_cuda_begin");
        return KT_ESTATE;
    }
    int pushed = 0;
    int rc = kt__cuda_ctx_enter(c, &pushed);
    kt__curesult r = KT__CU_SUCCESS;
    if (rc == 0) {
        r = kt__cu.cuEventRecord(p->end, p->queue->stream);
        kt__cuda_ctx_leave(pushed);
        if (r)
            rc = kt__cuda_fail("cuEventRecord", r);
    }
    if (rc) {
        kt_record_error(p->kernel);
        pthread_mutex_lock(&c->lock);
        c->errors++;
        pthread_mutex_unlock(&c->lock);
        pool_put(c, p);
        return rc;
    }
    if (G.desc.sync) {
        r = kt__cu.cuEventSynchronize(p->end);
        kt_dispatch_t d;
        pthread_mutex_lock(&G.consumer);
        rc = kt__cuda_ctx_enter(c, &pushed);
        if (rc == 0) {
            if (r)
                rc = kt__cuda_fail("cuEventSynchronize", r);
            else {
                anchor_refresh(c);
                rc = pair_place(c, p, &d);
            }
            kt__cuda_ctx_leave(pushed);
        }
        pthread_mutex_unlock(&G.consumer);
        if (rc == 0)
            kt_record_dispatch(&d);
        else
            kt_record_error(p->kernel);
        pthread_mutex_lock(&c->lock);
        if (rc == 0)
            c->recorded++;
        else
            c->errors++;
        pthread_mutex_unlock(&c->lock);
        pool_put(c, p);
        return rc;
    }
    pthread_mutex_lock(&c->lock);
    kt__cuda_squeue_t *q = p->queue;
    p->next = NULL;
    if (q->tail)
        q->tail->next = p;
    else
        q->head = p;
    q->tail = p;
    c->pending++;
    pthread_mutex_unlock(&c->lock);
    if (atomic_fetch_add(&G.pending, 1) == 0)
        collector_wake();
    return 0;
}

int kt_cuda_stats(struct CUctx_st *ctx, kt_cuda_stats_t *out)
{
    if (!out)
        return KT_EINVAL;
    kt__cuda_ctx_t *c;
    int rc = kt__cuda_ctx_get(ctx, &c);
    if (rc)
        return rc;
    pthread_mutex_lock(&c->lock);
    out->pairs_capacity = c->capacity;
    out->pairs_free = c->free_count;
    out->pending = c->pending;
    out->events_created = c->events_created;
    out->recorded = c->recorded;
    out->errors = c->errors;
    out->dropped = c->dropped;
    out->anchors = c->anchors_made;
    out->model_samples = c->event_model_valid ? c->event_model.inliers : 0;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * GPU timer
 * ------------------------------------------------------------------------------------------------- */

static int timer_valid(const kt_cuda_timer_t *t)
{
    return t->pair && valid_ctx(t->context, t->generation);
}

static int timer_acquire(kt_cuda_timer_t *t)
{
    kt__cuda_ctx_t *c;
    int rc = kt__cuda_ctx_get(t->ctx, &c);
    if (rc)
        return rc;
    kt__cuda_pair_t *p = NULL;
    pthread_mutex_lock(&c->lock);
    rc = pool_take_locked(c, &p);
    pthread_mutex_unlock(&c->lock);
    if (rc)
        return rc;
    t->pair = p;
    t->context = c;
    t->generation = c->generation;
    t->running = 0;
    t->started = 0;
    return 0;
}

int kt_cuda_timer_init(kt_cuda_timer_t *t, struct CUctx_st *ctx, struct CUstream_st *stream)
{
    if (!t)
        return KT_EINVAL;
    memset(t, 0, sizeof *t);
    t->ctx = ctx;
    t->stream = stream;
    return timer_acquire(t);
}

static int timer_record(const kt_cuda_timer_t *t, int end)
{
    kt__cuda_ctx_t *c = t->context;
    kt__cuda_pair_t *p = t->pair;
    int pushed = 0;
    int rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc)
        return rc;
    kt__curesult r = kt__cu.cuEventRecord(end ? p->end : p->start, t->stream);
    kt__cuda_ctx_leave(pushed);
    return r ? kt__cuda_fail("cuEventRecord", r) : 0;
}

void kt_cuda_timer_start(kt_cuda_timer_t *t)
{
    if (!t)
        return;
    if (!timer_valid(t) && timer_acquire(t) != 0) {
        t->pair = NULL;
        t->started = 0;
        return;
    }
    if (timer_record(t, 0) != 0) {
        t->started = 0;
        t->running = 0;
        return;
    }
    t->started = 1;
    t->running = 1;
}

void kt_cuda_timer_stop(kt_cuda_timer_t *t)
{
    if (!t || !t->running || !timer_valid(t))
        return;
    if (timer_record(t, 1) != 0)
        t->started = 0;
    t->running = 0;
}

int kt_cuda_timer_elapsed(const kt_cuda_timer_t *t, double *ms)
{
    if (!t || !ms)
        return KT_EINVAL;
    *ms = 0.0;
    if (!t->started)
        return 0;
    if (!timer_valid(t)) {
        kt__cuda_set_error(0, "kt_cuda_timer: the backend was shut down since start");
        return KT_ESTATE;
    }
    if (t->running) {
        int rc = timer_record(t, 1); /* lap: stream time since start, up to now */
        if (rc)
            return rc;
    }
    kt__cuda_pair_t *p = t->pair;
    kt__curesult r = kt__cu.cuEventSynchronize(p->end);
    if (r)
        return kt__cuda_fail("cuEventSynchronize", r);
    float f = 0.0f;
    r = kt__cu.cuEventElapsedTime(&f, p->start, p->end);
    if (r)
        return kt__cuda_fail("cuEventElapsedTime", r);
    *ms = (double)f;
    return 0;
}

double kt_cuda_timer_elapsed_ms(const kt_cuda_timer_t *t)
{
    double ms = 0.0;
    return kt_cuda_timer_elapsed(t, &ms) == 0 ? ms : 0.0;
}

void kt_cuda_timer_destroy(kt_cuda_timer_t *t)
{
    if (!t)
        return;
    if (timer_valid(t))
        pool_put(t->context, t->pair);
    memset(t, 0, sizeof *t);
}
