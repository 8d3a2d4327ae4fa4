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
    pthread_mutex_t consumer; /* one consumer of completions at a time (collector pass, flush, sync end, cleanup) */
    pthread_mutex_t reg;      /* registering with the core (never under lock or consumer) */
    atomic_int state;         /* KT__CUDA_* */
    kt_cuda_desc_t desc;      /* settings in force, defaults filled in */
    char load_msg[512];       /* why loading failed, re-reported on every KT_EUNAVAILABLE */
    int load_res;             /* CUresult behind load_msg */
    kt__cuda_ctx_t *ctxs;     /* contexts seen (prepended; nodes are removed only under `consumer`) */
    atomic_uint generation;   /* bumped by shutdown: older spans and timers are invalid */
    atomic_uint ctx_epoch;    /* bumped whenever a context's state is freed (release, shutdown, reset) */
    atomic_uint pending;      /* ended dispatches not yet collected, all contexts */
    kt__cuda_ctx_t *retired;  /* contexts reset or destroyed under ktiming, freed by kt_cuda_shutdown */
    kt__collector_t collector; /* the background collector (core helper) */
    atomic_int stopped;       /* the core's stop ran: no collector until the backend is used again */
} G = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .consumer = PTHREAD_MUTEX_INITIALIZER,
    .reg = PTHREAD_MUTEX_INITIALIZER,
    .generation = 1,
    .ctx_epoch = 1,
    .collector = KT__COLLECTOR_INIT,
};

/* The calling thread's last context look-up, valid while G.ctx_epoch is unchanged (spares the global lock on
 * every kt_cuda_begin). */
static _Thread_local struct {
    kt__cuctx handle;  /* CUDA context */
    kt__cuda_ctx_t *c; /* its state */
    uint32_t epoch;    /* G.ctx_epoch when cached */
} t_ctx_cache;

/* ---------------------------------------------------------------------------------------------------
 * Initialisation
 * ------------------------------------------------------------------------------------------------- */

static void stop_hook(uint64_t deadline_ns);
static void flush_hook(uint64_t deadline_ns);

/* fork: the consumer and state locks are taken around fork(), so the child's copies are consistent and free (the
 * helper ends the collector in the child). CUDA cannot be used in a child forked after initialisation, so there
 * every call returns KT_EUNAVAILABLE at once and touches no lock a vanished thread of the parent may have held. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&G.consumer); /* first: a collector pass takes G.lock under it */
    pthread_mutex_lock(&G.lock);
}

static void fork_release(void)
{
    pthread_mutex_unlock(&G.lock);
    pthread_mutex_unlock(&G.consumer);
}

static const kt__backend_ops_t kOps = {.name = "CUDA",
                                       .flush = flush_hook,
                                       .stop = stop_hook,
                                       .fork_prepare = fork_prepare,
                                       .fork_parent = fork_release,
                                       .fork_child = fork_release};

/* In a forked child: nothing of CUDA may be used (the driver says so too, CUDA_ERROR_INITIALIZATION_ERROR). */
static int forked_child(void)
{
    if (!kt__forked_child())
        return 0;
    kt__cuda_set_error(0, "CUDA cannot be used in a process forked after CUDA was initialised");
    return 1;
}

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
    if (!d->per_thread_default_stream) {
        const char *s = getenv("KTIMING_CUDA_PER_THREAD_STREAM");
        d->per_thread_default_stream = s && s[0] && strcmp(s, "0") != 0;
    }
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
    atomic_store(&G.stopped, 1); /* the caller registers the backend (restart_if_stopped), outside G.lock */
    atomic_store(&G.state, KT__CUDA_READY);
    return 0;
}

static void restart_if_stopped(void);

int kt_cuda_init(const kt_cuda_desc_t *desc)
{
    pthread_mutex_lock(&G.lock);
    int rc = init_locked(desc);
    pthread_mutex_unlock(&G.lock);
    if (rc == 0)
        restart_if_stopped();
    return rc;
}

int kt__cuda_ready(void)
{
    if (forked_child())
        return KT_EUNAVAILABLE;
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

/* What kt__cuda_ctx_enter did, for kt__cuda_ctx_leave: bit 0 a context was pushed, bit 1 the capture mode was
 * exchanged, bits 4.. the mode to restore. */
#define KT__ENTER_PUSHED 0x1
#define KT__ENTER_RELAXED 0x2
#define KT__ENTER_MODE_SHIFT 4

int kt__cuda_ctx_enter(kt__cuda_ctx_t *c, int *pushed)
{
    /* Relaxed capture mode first, for every driver call ktiming makes until the leave: a graph captured in global
     * mode anywhere in the program is then neither failed nor invalidated by ktiming's queries, synchronisations,
     * allocations or module loads (cuThreadExchangeStreamCaptureMode is per thread and nests). */
    *pushed = 0;
    int mode = KT__CU_STREAM_CAPTURE_MODE_RELAXED;
    if (kt__cu.cuThreadExchangeStreamCaptureMode &&
        kt__cu.cuThreadExchangeStreamCaptureMode(&mode) == KT__CU_SUCCESS)
        *pushed = KT__ENTER_RELAXED | (mode << KT__ENTER_MODE_SHIFT);
    kt__cuctx cur = NULL;
    if (kt__cu.cuCtxGetCurrent(&cur) == KT__CU_SUCCESS && cur == c->ctx)
        return 0;
    kt__curesult r = kt__cu.cuCtxPushCurrent_v2(c->ctx);
    if (r) {
        kt__cuda_ctx_leave(*pushed);
        *pushed = 0;
        return kt__cuda_fail("cuCtxPushCurrent", r);
    }
    *pushed |= KT__ENTER_PUSHED;
    return 0;
}

void kt__cuda_ctx_leave(int pushed)
{
    if (pushed & KT__ENTER_PUSHED) {
        kt__cuctx popped = NULL;
        kt__cu.cuCtxPopCurrent_v2(&popped);
    }
    if (pushed & KT__ENTER_RELAXED) {
        int mode = pushed >> KT__ENTER_MODE_SHIFT;
        kt__cu.cuThreadExchangeStreamCaptureMode(&mode);
    }
}

/* A query answered with a capture error (a capture elsewhere forbids it, or it would join one implicitly): not
 * the dispatch's result, only "not now" (the capture ends, the query is asked again). */
static int result_is_capture_busy(kt__curesult r)
{
    return r == KT__CU_ERROR_STREAM_CAPTURE_UNSUPPORTED || r == KT__CU_ERROR_STREAM_CAPTURE_INVALIDATED ||
           r == KT__CU_ERROR_STREAM_CAPTURE_IMPLICIT;
}

void kt__cuda_publish(kt__cuda_ctx_t *c)
{
    kt_device_info_t info;
    kt_clock_model_t model;
    int have_model = 0;
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
        model = c->event_model;
        have_model = 1;
    } else if (c->anchor_cur >= 0) {
        info.error_bound_ns = c->anchor_half_ns; /* one anchor: its bracket, drift not yet known */
    }
    pthread_mutex_unlock(&c->lock);
    kt__device_publish_model(&info, have_model ? &model : NULL, kt_now_ns());
}

int kt__cuda_ctx_alive(kt__cuda_ctx_t *c)
{
    if (atomic_load(&c->gone))
        return 0;
    if (!kt__cu.cuCtxGetId || !c->ctx_id)
        return 1;
    unsigned long long id = 0;
    kt__curesult r = kt__cu.cuCtxGetId(c->ctx, &id);
    if (r == KT__CU_SUCCESS && id == c->ctx_id)
        return 1;
    if (r == KT__CU_ERROR_DEINITIALIZED || r == KT__CU_ERROR_NOT_INITIALIZED)
        return 1; /* the whole driver is gone (exit): not this context's reset */
    atomic_store(&c->gone, 1);
    return 0;
}

void kt__cuda_device_label(kt__cudevice dev, char *out, size_t size)
{
    char name[128] = {0};
    if (kt__cu.cuDeviceGetName(name, (int)sizeof name - 1, dev) != KT__CU_SUCCESS || !name[0])
        snprintf(name, sizeof name, "CUDA device %d", dev);
    /* Devices are told apart by their name in snapshots, so a node of identical GPUs must not fold into one
     * entry (nor their clock facts into one device): a name another device shares gets its ordinal, as OpenCL
     * root devices do. The ordinal follows CUDA's enumeration (CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES); the UUID
     * and PCI id in kt_cuda_device_info say which board it is. */
    int count = 0, twins = 0;
    if (kt__cu.cuDeviceGetCount(&count) != KT__CU_SUCCESS)
        count = 0;
    for (int i = 0; i < count && !twins; i++) {
        kt__cudevice other = 0;
        char other_name[128] = {0};
        if (kt__cu.cuDeviceGet(&other, i) == KT__CU_SUCCESS && other != dev &&
            kt__cu.cuDeviceGetName(other_name, (int)sizeof other_name - 1, other) == KT__CU_SUCCESS)
            twins = strcmp(other_name, name) == 0;
    }
    if (twins)
        snprintf(out, size, "%s #%d", name, dev);
    else
        snprintf(out, size, "%s", name);
}

/* G.lock held. */
static kt__cuda_ctx_t *ctx_find_locked(kt__cuctx ctx)
{
    for (kt__cuda_ctx_t *c = G.ctxs; c; c = c->next)
        if (c->ctx == ctx)
            return c;
    return NULL;
}

static void anchor_create(kt__cuda_ctx_t *c);

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
    pthread_mutex_init(&c->grow_lock, NULL);
    pthread_mutex_init(&c->gt_lock, NULL);
    pthread_mutex_init(&c->hold_lock, NULL);
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
        pthread_mutex_destroy(&c->grow_lock);
        pthread_mutex_destroy(&c->gt_lock);
        pthread_mutex_destroy(&c->hold_lock);
        free(c);
        return rc;
    }
    if (kt__cu.cuCtxGetId && kt__cu.cuCtxGetId(handle, &c->ctx_id) != KT__CU_SUCCESS)
        c->ctx_id = 0;
    kt__cuda_device_label(c->device, c->device_name, sizeof c->device_name);
    kt__cu.cuDeviceGetAttribute(&c->cc_major, KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->device);
    kt__cu.cuDeviceGetAttribute(&c->cc_minor, KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->device);
    anchor_create(c);
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

/* The context of c was reset or destroyed: retire its state (defined with the collection code). */
static void ctx_retire(kt__cuda_ctx_t *c);

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
    for (int attempt = 0; attempt < 2; attempt++) {
        uint32_t epoch = atomic_load(&G.ctx_epoch);
        kt__cuda_ctx_t *c = NULL;
        int created = 0;
        if (ctx && t_ctx_cache.handle == ctx && t_ctx_cache.epoch == epoch) {
            c = t_ctx_cache.c;
        } else {
            pthread_mutex_lock(&G.lock);
            c = ctx ? ctx_find_locked(ctx) : NULL;
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
        }
        /* Re-validate by the context's identity: a primary context reset (cudaDeviceReset) or a destroyed
         * context leaves the same handle with none of ktiming's events, streams or buffers behind it. */
        if (!created && !kt__cuda_ctx_alive(c)) {
            pthread_mutex_lock(&G.consumer);
            ctx_retire(c);
            pthread_mutex_unlock(&G.consumer);
            continue; /* make fresh state for the handle, once */
        }
        if (created)
            kt__cuda_publish(c);
        t_ctx_cache.handle = c->ctx;
        t_ctx_cache.c = c;
        t_ctx_cache.epoch = epoch;
        *out = c;
        return 0;
    }
    kt__cuda_set_error(KT__CU_ERROR_CONTEXT_IS_DESTROYED, "CUDA context %p is destroyed", (void *)ctx);
    return KT_EBACKEND;
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

int kt_cuda_device_info(int ordinal, kt_cuda_device_t *out)
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
    kt__cuda_device_label(dev, out->label, sizeof out->label);
    if (kt__cu.cuDeviceGetUuid_v2 && kt__cu.cuDeviceGetUuid_v2(out->uuid, dev) != KT__CU_SUCCESS)
        memset(out->uuid, 0, sizeof out->uuid);
    int domain = 0, bus = 0, slot = 0;
    if (kt__cu.cuDeviceGetAttribute(&domain, KT__CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) == KT__CU_SUCCESS &&
        kt__cu.cuDeviceGetAttribute(&bus, KT__CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) == KT__CU_SUCCESS &&
        kt__cu.cuDeviceGetAttribute(&slot, KT__CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev) == KT__CU_SUCCESS)
        snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%04x:%02x:%02x", (unsigned)domain & 0xffffu,
                 (unsigned)bus & 0xffu, (unsigned)slot & 0xffu);
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

/* Creates max(pool_chunk, capacity) pairs (the pool doubles), bounded by max_pairs. Called without c->lock: the
 * driver calls (up to 65,536 events) run outside it, so kt_cuda_begin/end and the collector never wait behind
 * them; grow_lock makes one thread grow at a time (a thread that finds the pool grown meanwhile returns). */
static int pool_grow(kt__cuda_ctx_t *c)
{
    pthread_mutex_lock(&c->grow_lock);
    pthread_mutex_lock(&c->lock);
    uint32_t capacity = c->capacity;
    int grown = c->free_list != NULL;
    pthread_mutex_unlock(&c->lock);
    if (grown) {
        pthread_mutex_unlock(&c->grow_lock);
        return 0;
    }
    uint32_t want = capacity > G.desc.pool_chunk ? capacity : G.desc.pool_chunk;
    if (want > G.desc.max_pairs - capacity)
        want = G.desc.max_pairs - capacity;
    if (want == 0) {
        pthread_mutex_unlock(&c->grow_lock);
        return KT_EFULL;
    }
    kt__cuda_chunk_t *chunk = calloc(1, sizeof *chunk + (size_t)want * sizeof(kt__cuda_pair_t));
    if (!chunk) {
        pthread_mutex_unlock(&c->grow_lock);
        return KT_ENOMEM;
    }
    int pushed = 0;
    int rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc) {
        free(chunk);
        pthread_mutex_unlock(&c->grow_lock);
        return rc;
    }
    uint64_t created = 0;
    for (uint32_t i = 0; i < want; i++) {
        kt__cuda_pair_t *p = &chunk->pairs[i];
        kt__curesult r = kt__cu.cuEventCreate(&p->start, KT__CU_EVENT_DEFAULT);
        if (r == KT__CU_SUCCESS) {
            created++;
            r = kt__cu.cuEventCreate(&p->end, KT__CU_EVENT_DEFAULT);
            if (r == KT__CU_SUCCESS)
                created++;
            else
                kt__cu.cuEventDestroy_v2(p->start);
        }
        if (r) {
            rc = kt__cuda_fail("cuEventCreate", r);
            break;
        }
        chunk->count++;
    }
    if (chunk->count && !kt__cuda_ctx_alive(c)) {
        /* Reset while growing: these events may belong to the context's next life, which ktiming would then
         * never destroy (a retired context's handles are not touched). Give them back now. */
        for (uint32_t i = 0; i < chunk->count; i++) {
            kt__cu.cuEventDestroy_v2(chunk->pairs[i].start);
            kt__cu.cuEventDestroy_v2(chunk->pairs[i].end);
        }
        chunk->count = 0;
        rc = KT_EBACKEND;
        kt__cuda_set_error(KT__CU_ERROR_CONTEXT_IS_DESTROYED, "CUDA context %p was reset", (void *)c->ctx);
    }
    kt__cuda_ctx_leave(pushed);
    pthread_mutex_lock(&c->lock);
    c->events_created += created;
    if (chunk->count) {
        chunk->next = c->chunks;
        c->chunks = chunk;
        for (uint32_t i = 0; i < chunk->count; i++) {
            chunk->pairs[i].next = c->free_list;
            c->free_list = &chunk->pairs[i];
        }
        c->capacity += chunk->count;
        c->free_count += chunk->count;
    }
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_unlock(&c->grow_lock);
    if (chunk->count == 0) {
        free(chunk);
        return rc ? rc : KT_EBACKEND;
    }
    return 0;
}

/* c->lock held (released while the pool grows). */
static int pool_take_locked(kt__cuda_ctx_t *c, kt__cuda_pair_t **out)
{
    while (!c->free_list) {
        pthread_mutex_unlock(&c->lock);
        int rc = pool_grow(c);
        pthread_mutex_lock(&c->lock);
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
static kt__cuda_squeue_t *squeue_get_locked(kt__cuda_ctx_t *c, kt__custream stream, uint32_t thread)
{
    uint32_t owner = stream == KT__CU_STREAM_PER_THREAD ? thread : 0; /* one per-thread stream per thread */
    for (kt__cuda_squeue_t *q = c->queues; q; q = q->next)
        if (q->stream == stream && q->thread == owner)
            return q;
    kt__cuda_squeue_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->stream = stream;
    q->thread = owner;
    char label[64];
    if (stream == KT__CU_STREAM_PER_THREAD)
        snprintf(label, sizeof label, "stream per-thread default (thread %u)", owner);
    else if (stream == KT__CU_STREAM_LEGACY)
        snprintf(label, sizeof label, "stream default (ctx %p)", (void *)c->ctx);
    else if (stream)
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

/* The anchor stream and its two events, made once when ktiming first sees the context, on the program's thread
 * (like the pool's events): the collector thread then only uses handles, each after a context-id check, and never
 * has to guess whether handles it made while a reset raced it belong to the context's old life or its new one. */
static void anchor_create(kt__cuda_ctx_t *c)
{
    int pushed = 0;
    if (kt__cuda_ctx_enter(c, &pushed))
        return;
    kt__curesult r = kt__cu.cuStreamCreate(&c->anchor_stream, KT__CU_STREAM_NON_BLOCKING);
    if (r) {
        c->anchor_stream = NULL;
        kt__cuda_fail("cuStreamCreate (anchor stream)", r);
    }
    for (int i = 0; i < 2 && c->anchor_stream; i++) {
        r = kt__cu.cuEventCreate(&c->anchor_ev[i], KT__CU_EVENT_DEFAULT);
        if (r) {
            c->anchor_ev[i] = NULL;
            kt__cuda_fail("cuEventCreate (anchor)", r);
            break;
        }
        c->events_created++;
    }
    kt__cuda_ctx_leave(pushed);
}

static void anchor_refresh(kt__cuda_ctx_t *c)
{
    uint64_t now = kt_now_ns();
    if (c->anchor_cur >= 0 && now - c->anchor_mid_ns < (uint64_t)G.desc.anchor_period_ms * 1000000ull)
        return;
    if (!c->anchor_stream || !c->anchor_ev[0] || !c->anchor_ev[1])
        return; /* they could not be made: durations only */
    kt__curesult r;
    int nxt = c->anchor_cur < 0 ? 0 : 1 - c->anchor_cur;
    kt__cuevent ev = c->anchor_ev[nxt];
    if (!kt__cuda_ctx_alive(c)) /* before every use of a handle: a reset frees them all */
        return;
    uint64_t h0 = kt_now_ns();
    r = kt__cu.cuEventRecord(ev, c->anchor_stream);
    if (r) {
        kt__cuda_fail("cuEventRecord (anchor)", r);
        kt__cuda_ctx_alive(c); /* a reset answers this way too: then the caller queries nothing more */
        return;
    }
    uint32_t spins = 0;
    for (;;) {
        if (!kt__cuda_ctx_alive(c))
            return;
        r = kt__cu.cuEventQuery(ev);
        if (r != KT__CU_ERROR_NOT_READY && !result_is_capture_busy(r))
            break;
        if (result_is_capture_busy(r) || kt_now_ns() - h0 > KT__CUDA_ANCHOR_WAIT_NS)
            return; /* the GPU is slow to reach it; try again next pass */
        if (++spins > 1000)
            sched_yield();
    }
    uint64_t h1 = kt_now_ns();
    if (r) {
        kt__cuda_fail("cuEventQuery (anchor)", r);
        kt__cuda_ctx_alive(c);
        return;
    }
    uint64_t mid = h0 + (h1 - h0) / 2;
    int64_t pos = 0;
    int continues = 0;
    if (c->anchor_cur >= 0 && mid - c->anchor_mid_ns <= KT__CUDA_CHAIN_GAP_NS) {
        float step_ms = 0.0f;
        if (kt__cuda_ctx_alive(c) &&
            kt__cu.cuEventElapsedTime(&step_ms, c->anchor_ev[c->anchor_cur], ev) == KT__CU_SUCCESS) {
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
    if (!kt__cuda_ctx_alive(c))
        return KT_ESTATE; /* reset since it completed: its events are gone (the caller drops it) */
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
    if (!kt__cuda_ctx_alive(c) ||
        kt__cu.cuEventElapsedTime(&off_ms, c->anchor_ev[c->anchor_cur], p->start) != KT__CU_SUCCESS)
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

/* Whether the driver is torn down (process exit after the runtime's own atexit): nothing can be collected. */
static int result_is_deinit(kt__curesult r)
{
    return r == KT__CU_ERROR_DEINITIALIZED || r == KT__CU_ERROR_NOT_INITIALIZED;
}

/* Why collect_ctx stopped using a context. The two are counted differently: a reset's pending dispatches are
 * dropped as KT_DROP_CONTEXT_RESET, a torn-down driver's (process exit) as in flight at exit. */
enum { CTX_LIVE = 0, CTX_RESET = 1, CTX_DRIVER_GONE = 2 };

/* Collect completed dispatches of one context; returns how many remain pending. Sets *gone to CTX_RESET when
 * the context died under ktiming (reset, destroyed) or CTX_DRIVER_GONE when the driver is torn down: the
 * caller then stops using it. */
static uint32_t collect_ctx(kt__cuda_ctx_t *c, int *gone)
{
    if (atomic_load(&c->gone)) {
        *gone = CTX_RESET;
        return 0;
    }
    pthread_mutex_lock(&c->lock);
    uint32_t pending = c->pending;
    pthread_mutex_unlock(&c->lock);
    if (!pending)
        return 0;
    if (!kt__cuda_ctx_alive(c)) { /* reset or destroyed: none of its events may be queried */
        *gone = CTX_RESET;
        return pending;
    }
    int pushed = 0;
    if (kt__cuda_ctx_enter(c, &pushed)) {
        if (result_is_deinit(kt_cuda_last_result()))
            *gone = CTX_DRIVER_GONE;
        else if (!kt__cuda_ctx_alive(c))
            *gone = CTX_RESET;
        return pending;
    }
    anchor_refresh(c);
    if (atomic_load(&c->gone)) { /* the anchor found it reset or destroyed: its events are not queried */
        *gone = CTX_RESET;
        kt__cuda_ctx_leave(pushed);
        return pending;
    }
    for (;;) {
        kt__cuda_pair_t *done[KT__CUDA_BATCH];
        kt__curesult status[KT__CUDA_BATCH];
        uint32_t n = 0;
        int dead = CTX_LIVE;
        /* The queues' heads are read and popped under c->lock, but the driver is asked without it: kt_cuda_begin
         * and kt_cuda_end never wait behind a query (only this consumer pops; producers append at the tail). */
        pthread_mutex_lock(&c->lock);
        kt__cuda_squeue_t *q = c->queues;
        pthread_mutex_unlock(&c->lock);
        while (q && n < KT__CUDA_BATCH && !dead) {
            pthread_mutex_lock(&c->lock);
            kt__cuda_pair_t *head = q->head;
            kt__cuda_squeue_t *qnext = q->next;
            pthread_mutex_unlock(&c->lock);
            if (!head) {
                q = qnext;
                continue;
            }
            if (!kt__cuda_ctx_alive(c)) { /* before every use of a handle: a reset frees them all */
                dead = CTX_RESET;
                break;
            }
            kt__curesult r = kt__cu.cuEventQuery(head->end);
            if (r == KT__CU_ERROR_NOT_READY || result_is_capture_busy(r)) {
                q = qnext; /* later: not complete, or a capture forbids the query now */
                continue;
            }
            /* never a dispatch error: the driver or the context is gone, the caller drops the rest */
            if (r != KT__CU_SUCCESS && result_is_deinit(r)) {
                dead = CTX_DRIVER_GONE;
                break;
            }
            if (r != KT__CU_SUCCESS && !kt__cuda_ctx_alive(c)) {
                dead = CTX_RESET;
                break;
            }
            pthread_mutex_lock(&c->lock);
            q->head = head->next;
            if (!q->head)
                q->tail = NULL;
            head->next = NULL;
            c->pending--;
            pthread_mutex_unlock(&c->lock);
            status[n] = r;
            done[n++] = head;
        }
        pthread_mutex_lock(&c->lock);
        pending = c->pending;
        pthread_mutex_unlock(&c->lock);
        if (dead)
            *gone = dead;
        if (!n)
            break;
        kt_dispatch_t d[KT__CUDA_BATCH];
        const char *err[KT__CUDA_BATCH];
        static const char kReset[] = "context reset";
        for (uint32_t i = 0; i < n; i++) {
            err[i] = NULL;
            int rc = 0;
            if (status[i] != KT__CU_SUCCESS) {
                kt__cuda_fail("cuEventQuery", status[i]);
                err[i] = kt__cuda_result_name(status[i]);
            } else if ((rc = pair_place(c, done[i], &d[i])) != 0) {
                err[i] = rc == KT_ESTATE ? kReset : kt__cuda_result_name(kt_cuda_last_result());
            }
        }
        uint64_t recorded = 0, errors = 0, reset = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (!err[i]) {
                kt_record_dispatch(&d[i]);
                recorded++;
            } else if (err[i] == kReset) { /* completed, but reset before it could be read: dropped */
                kt_record_drop_reason(done[i]->kernel, KT_DROP_CONTEXT_RESET);
                reset++;
            } else {
                kt_record_error_name(done[i]->kernel, err[i]);
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
        c->dropped += reset;
        pthread_mutex_unlock(&c->lock);
        atomic_fetch_sub(&G.pending, n);
        if (reset && !dead)
            *gone = dead = CTX_RESET;
        if (dead)
            break;
    }
    kt__cuda_ctx_leave(pushed);
    return pending;
}

/* Consumer lock held: count every dispatch still queued in c as dropped for `reason` and return its pairs to
 * the pool (their events are not touched). */
static uint32_t drop_pending(kt__cuda_ctx_t *c, kt_drop_reason_t reason)
{
    uint32_t dropped = 0;
    pthread_mutex_lock(&c->lock);
    for (kt__cuda_squeue_t *q = c->queues; q; q = q->next) {
        for (kt__cuda_pair_t *p = q->head, *pn; p; p = pn) {
            pn = p->next;
            kt_record_drop_reason(p->kernel, reason);
            p->queue = NULL;
            p->next = c->free_list;
            c->free_list = p;
            c->free_count++;
            dropped++;
        }
        q->head = q->tail = NULL;
    }
    c->pending -= dropped;
    c->dropped += dropped;
    pthread_mutex_unlock(&c->lock);
    if (dropped)
        atomic_fetch_sub(&G.pending, dropped);
    return dropped;
}

/* Consumer lock held: c's context was reset or destroyed under ktiming. Unlink its state, count what was in
 * flight as dropped (context reset), and keep the host memory (open spans and timers may still point at it)
 * on the retired list until kt_cuda_shutdown. None of its driver handles is used again. */
static void ctx_retire(kt__cuda_ctx_t *c)
{
    atomic_store(&c->gone, 1);
    pthread_mutex_lock(&G.lock);
    int linked = 0;
    for (kt__cuda_ctx_t **pp = &G.ctxs; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            linked = 1;
            break;
        }
    if (linked) {
        c->next = G.retired;
        G.retired = c;
    }
    atomic_fetch_add(&G.ctx_epoch, 1);
    pthread_mutex_unlock(&G.lock);
    if (!linked)
        return;
    uint32_t n = drop_pending(c, KT_DROP_CONTEXT_RESET);
    kt__cuda_set_error(KT__CU_ERROR_CONTEXT_IS_DESTROYED,
                       "CUDA context %p was reset or destroyed: %u dispatches in flight were dropped",
                       (void *)c->ctx, n);
    kt__cuda_publish(c);
}

/* One collection pass over every context (consumer lock held). Returns what is still pending; *deinit is set
 * when the driver is torn down. */
static uint32_t collect_all(int *deinit)
{
    uint32_t left = 0;
    pthread_mutex_lock(&G.lock);
    kt__cuda_ctx_t *c = G.ctxs;
    pthread_mutex_unlock(&G.lock);
    while (c) {
        pthread_mutex_lock(&G.lock);
        kt__cuda_ctx_t *next = c->next; /* read before a retire unlinks c */
        pthread_mutex_unlock(&G.lock);
        int gone = CTX_LIVE;
        left += collect_ctx(c, &gone);
        if (gone == CTX_DRIVER_GONE) { /* exit: the stop hook counts what is left as in flight at exit */
            *deinit = 1;
            return left;
        }
        if (gone == CTX_RESET)
            ctx_retire(c);
        c = next;
    }
    return left;
}

/* Collect every context (or only `only`) until nothing is pending or `deadline_ns` (kt_now_ns time) passes.
 * Gives up at once when the driver is torn down (*deinit set, if given). Takes the consumer lock per pass
 * unless the caller holds it (held = 1). Returns what is left. */
static uint32_t collect_until(kt__cuda_ctx_t *only, uint64_t deadline_ns, int held, int *deinit)
{
    int dead = 0;
    for (;;) {
        uint32_t left = 0;
        if (!held)
            pthread_mutex_lock(&G.consumer);
        if (only) {
            int gone = 0;
            left = collect_ctx(only, &gone);
            if (gone)
                dead = 1;
        } else {
            left = collect_all(&dead);
        }
        if (!held)
            pthread_mutex_unlock(&G.consumer);
        if (dead && deinit)
            *deinit = 1;
        if (!left || dead || kt_now_ns() >= deadline_ns)
            return left;
        kt__nap_ns((uint64_t)G.desc.poll_us * 1000u);
    }
}

static uint64_t deadline_in_ms(uint32_t ms)
{
    return kt_now_ns() + (uint64_t)ms * 1000000ull;
}

/* One step of the collector thread: collect what completed. */
static int collector_step(void *arg)
{
    (void)arg;
    if (atomic_load(&G.pending) == 0) {
        G.collector.nap_ns = 0; /* sleep until kt_cuda_end wakes it */
        return 0;
    }
    pthread_mutex_lock(&G.consumer);
    int deinit = 0;
    uint32_t left = collect_all(&deinit); /* its driver calls run relaxed (kt__cuda_ctx_enter) */
    pthread_mutex_unlock(&G.consumer);
    /* nap on the helper's condition variable (a stop wakes it at once; nanosleep made every exit wait out a
     * poll), or sleep until woken when nothing is left */
    G.collector.nap_ns = !left || deinit ? 0 : (uint64_t)G.desc.poll_us * 1000u;
    return 0;
}

/* Called when the first dispatch becomes pending: starts the collector if needed and wakes it. */
static void collector_kick(void)
{
    if (atomic_load(&G.stopped))
        return;
    pthread_mutex_lock(&G.lock);
    if (!atomic_load(&G.stopped))
        kt__collector_start(&G.collector, "kt-cuda-collect", collector_step, NULL, 0);
    pthread_mutex_unlock(&G.lock);
    kt__collector_wake(&G.collector);
}

static void flush_hook(uint64_t deadline_ns)
{
    if (atomic_load(&G.state) != KT__CUDA_READY || atomic_load(&G.stopped) || kt__forked_child())
        return;
    uint64_t own = deadline_in_ms(G.desc.flush_timeout_ms);
    collect_until(NULL, deadline_ns && deadline_ns < own ? deadline_ns : own, 0, NULL);
    pthread_mutex_lock(&G.lock);
    kt__cuda_ctx_t *head = G.ctxs;
    pthread_mutex_unlock(&G.lock);
    pthread_mutex_lock(&G.consumer);
    for (kt__cuda_ctx_t *c = head; c; c = c->next)
        kt__cuda_publish(c);
    pthread_mutex_unlock(&G.consumer);
}

/* kt_shutdown() and process exit (once): stop the collector so no thread of ktiming is inside the driver while
 * it is torn down, collect until the deadline (at once if the driver is already gone), and count what is left
 * as dropped (in flight at exit). Contexts are not destroyed (other threads may still use them). */
static void stop_hook(uint64_t deadline_ns)
{
    if (kt__forked_child())
        return;
    pthread_mutex_lock(&G.lock);
    atomic_store(&G.stopped, 1);
    pthread_mutex_unlock(&G.lock);
    kt__collector_stop(&G.collector);
    if (atomic_load(&G.state) != KT__CUDA_READY)
        return;
    collect_until(NULL, deadline_ns, 0, NULL);
    pthread_mutex_lock(&G.consumer);
    pthread_mutex_lock(&G.lock);
    kt__cuda_ctx_t *head = G.ctxs;
    pthread_mutex_unlock(&G.lock);
    for (kt__cuda_ctx_t *c = head; c; c = c->next)
        drop_pending(c, KT_DROP_IN_FLIGHT_AT_EXIT);
    pthread_mutex_unlock(&G.consumer);
}

/* After the core's stop, the next span registers the backend again (kt_init after kt_shutdown). */
static void restart_if_stopped(void)
{
    if (!atomic_load(&G.stopped))
        return;
    /* Under its own lock, never G.lock: the core's registry lock is held around fork while fork_prepare takes
     * G.consumer and G.lock, so registering under G.lock would close a lock-order cycle. */
    pthread_mutex_lock(&G.reg);
    if (atomic_load(&G.stopped)) {
        kt__backend_register(&kOps); /* idempotent; again after a kt_shutdown() stopped it */
        atomic_store(&G.stopped, 0);
    }
    pthread_mutex_unlock(&G.reg);
}

/* ---------------------------------------------------------------------------------------------------
 * Cleanup (consumer lock held; c unlinked)
 * ------------------------------------------------------------------------------------------------- */

/* Frees ktiming's state for a context. A live context's events, streams, module and buffers are destroyed in
 * it; a retired one's (reset, destroyed) are not touched: the driver already freed them. */
static void ctx_destroy(kt__cuda_ctx_t *c)
{
    int alive = kt__cuda_ctx_alive(c); /* not only !gone: a reset ktiming has not noticed yet freed them too */
    int pushed = 0;
    int entered = alive && kt__cuda_ctx_enter(c, &pushed) == 0;
    drop_pending(c, alive ? KT_DROP_IN_FLIGHT_AT_EXIT : KT_DROP_CONTEXT_RESET);
    for (kt__cuda_squeue_t *q = c->queues, *qn; q; q = qn) {
        qn = q->next;
        free(q);
    }
    for (kt__cuda_chunk_t *ch = c->chunks, *chn; ch; ch = chn) {
        chn = ch->next;
        for (uint32_t i = 0; entered && i < ch->count; i++) {
            kt__cu.cuEventDestroy_v2(ch->pairs[i].start);
            kt__cu.cuEventDestroy_v2(ch->pairs[i].end);
        }
        free(ch);
    }
    if (entered) {
        for (int i = 0; i < 2; i++)
            if (c->anchor_ev[i])
                kt__cu.cuEventDestroy_v2(c->anchor_ev[i]);
        if (c->anchor_stream)
            kt__cu.cuStreamDestroy_v2(c->anchor_stream);
        pthread_mutex_lock(&c->gt_lock); /* the %globaltimer resources (cuda_globaltimer.c fills them) */
        if (c->module)
            kt__cu.cuModuleUnload(c->module);
        if (c->scratch)
            kt__cu.cuMemFree_v2(c->scratch);
        if (c->gt_stream)
            kt__cu.cuStreamDestroy_v2(c->gt_stream);
        for (int i = 0; i < 2; i++)
            if (c->hold_ev[i])
                kt__cu.cuEventDestroy_v2(c->hold_ev[i]);
        if (c->hold_flag && kt__cu.cuMemFreeHost)
            kt__cu.cuMemFreeHost((void *)c->hold_flag);
        pthread_mutex_unlock(&c->gt_lock);
        kt__cuda_ctx_leave(pushed);
    }
    if (c->retained_primary)
        kt__cu.cuDevicePrimaryCtxRelease_v2(c->device); /* by device: valid across a reset */
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->grow_lock);
    pthread_mutex_destroy(&c->gt_lock);
    pthread_mutex_destroy(&c->hold_lock);
    free(c);
}

int kt_cuda_context_release(struct CUctx_st *ctx)
{
    if (forked_child())
        return KT_EUNAVAILABLE;
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
    collect_until(c, deadline_in_ms(G.desc.flush_timeout_ms), 1, NULL);
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
    if (kt__forked_child())
        return;
    pthread_mutex_lock(&G.lock);
    int state = atomic_load(&G.state);
    if (state != KT__CUDA_READY) {
        atomic_store(&G.state, KT__CUDA_UNINIT);
        pthread_mutex_unlock(&G.lock);
        return;
    }
    pthread_mutex_unlock(&G.lock);
    kt__collector_stop(&G.collector);
    collect_until(NULL, deadline_in_ms(G.desc.flush_timeout_ms), 0, NULL);
    pthread_mutex_lock(&G.consumer);
    pthread_mutex_lock(&G.lock);
    kt__cuda_ctx_t *list = G.ctxs;
    kt__cuda_ctx_t *retired = G.retired;
    G.ctxs = NULL;
    G.retired = NULL;
    atomic_fetch_add(&G.generation, 1);
    atomic_fetch_add(&G.ctx_epoch, 1);
    atomic_store(&G.state, KT__CUDA_UNINIT);
    pthread_mutex_unlock(&G.lock);
    for (kt__cuda_ctx_t *c = list, *cn; c; c = cn) {
        cn = c->next;
        kt__cuda_publish(c);
        ctx_destroy(c);
    }
    for (kt__cuda_ctx_t *c = retired, *cn; c; c = cn) {
        cn = c->next;
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
    return c && !kt__forked_child() && atomic_load(&G.state) == KT__CUDA_READY && generation == atomic_load(&G.generation) &&
           !atomic_load(&c->gone);
}

/* The stream ktiming records on for the user's `stream`: NULL is the per-thread default stream when the
 * program uses it (per_thread_default_stream, KTIMING_CUDA_PER_THREAD_STREAM=1, or ktiming/cuda.h compiled with
 * nvcc --default-stream per-thread), else the legacy default stream. */
kt__custream kt__cuda_stream_resolve(kt__custream stream)
{
    return !stream && G.desc.per_thread_default_stream ? KT__CU_STREAM_PER_THREAD : stream;
}

/* Whether `stream` is capturing a graph (context current). Events recorded there would become graph nodes
 * (queries then fail with CUDA_ERROR_CAPTURED_EVENT), so such spans are skipped. A capture error from the query
 * itself (an implicit legacy-stream dependency on a capture) counts as capturing too. */
static int stream_capturing(kt__custream stream)
{
    if (!kt__cu.cuStreamIsCapturing)
        return 0;
    int status = KT__CU_STREAM_CAPTURE_STATUS_NONE;
    kt__curesult r = kt__cu.cuStreamIsCapturing(stream, &status);
    if (r >= KT__CU_ERROR_STREAM_CAPTURE_UNSUPPORTED && r <= KT__CU_ERROR_CAPTURED_EVENT + 1)
        return 1;
    return r == KT__CU_SUCCESS && status != KT__CU_STREAM_CAPTURE_STATUS_NONE;
}

int(kt_cuda_begin)(kt_cuda_span_t *span, struct CUctx_st *ctx, struct CUstream_st *stream, const char *name)
{
    if (!span)
        return KT_EINVAL;
    span->pair = NULL;
    span->context = NULL;
    span->generation = 0;
    if (!kt_is_enabled())
        return 0;
    restart_if_stopped();
    kt__cuda_ctx_t *c;
    int rc = kt__cuda_ctx_get(ctx, &c);
    if (rc)
        return rc;
    stream = kt__cuda_stream_resolve(stream);
    kt_kernel_id_t id = kt_kernel_intern(name && name[0] ? name : "(unnamed)", KT_BACKEND_CUDA, c->device_name);
    uint32_t thread = kt_thread_ordinal();
    int pushed = 0;
    rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc)
        return rc;
    if (stream_capturing(stream)) {
        kt__cuda_ctx_leave(pushed);
        kt_record_drop_reason(id, KT_DROP_GRAPH_CAPTURE);
        pthread_mutex_lock(&c->lock);
        c->dropped++;
        pthread_mutex_unlock(&c->lock);
        return 0; /* not an error: the span is skipped (kt_cuda_end does nothing) */
    }
    kt__cuda_pair_t *p = NULL;
    pthread_mutex_lock(&c->lock);
    kt__cuda_squeue_t *q = squeue_get_locked(c, stream, thread);
    rc = q ? pool_take_locked(c, &p) : KT_ENOMEM;
    if (rc == KT_EFULL)
        c->dropped++;
    pthread_mutex_unlock(&c->lock);
    if (rc) {
        kt__cuda_ctx_leave(pushed);
        if (rc == KT_EFULL) {
            kt_record_drop_reason(id, KT_DROP_RING_FULL);
            kt__cuda_set_error(0, "CUDA event-pair pool full (%u pairs in flight)", G.desc.max_pairs);
        }
        return rc;
    }
    p->kernel = id;
    p->queue = q;
    p->thread = thread;
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
    if (forked_child()) { /* a span begun in the parent: the child does not touch the parent's pool */
        span->pair = NULL;
        return KT_EUNAVAILABLE;
    }
    kt__cuda_pair_t *p = span->pair;
    kt__cuda_ctx_t *c = span->context;
    span->pair = NULL;
    if (!valid_ctx(c, span->generation)) {
        /* Same backend generation: c's memory is still held (live or retired), so it may be read. */
        if (c && span->generation == atomic_load(&G.generation) && atomic_load(&G.state) == KT__CUDA_READY &&
            atomic_load(&c->gone)) {
            kt_record_drop_reason(p->kernel, KT_DROP_CONTEXT_RESET);
            kt__cuda_set_error(KT__CU_ERROR_CONTEXT_IS_DESTROYED,
                               "kt_cuda_end: the CUDA context was reset or destroyed since kt_cuda_begin");
        } else {
            kt__cuda_set_error(0, "kt_cuda_end: the backend was shut down since kt_cuda_begin");
        }
        return KT_ESTATE;
    }
    int pushed = 0;
    int rc = kt__cuda_ctx_enter(c, &pushed);
    kt__curesult r = KT__CU_SUCCESS;
    int captured = 0;
    if (rc == 0) {
        captured = stream_capturing(p->queue->stream); /* capture began between begin and end */
        if (!captured)
            r = kt__cu.cuEventRecord(p->end, p->queue->stream);
        kt__cuda_ctx_leave(pushed);
        if (r)
            rc = kt__cuda_fail("cuEventRecord", r);
    }
    if (captured) {
        kt_record_drop_reason(p->kernel, KT_DROP_GRAPH_CAPTURE);
        pthread_mutex_lock(&c->lock);
        c->dropped++;
        pthread_mutex_unlock(&c->lock);
        pool_put(c, p);
        return 0;
    }
    if (rc) {
        kt_record_error_name(p->kernel, kt__cuda_result_name(r ? r : kt_cuda_last_result()));
        pthread_mutex_lock(&c->lock);
        c->errors++;
        pthread_mutex_unlock(&c->lock);
        pool_put(c, p);
        return rc;
    }
    if (G.desc.sync) {
        kt_dispatch_t d;
        rc = kt__cuda_ctx_enter(c, &pushed);
        r = rc == 0 ? kt__cu.cuEventSynchronize(p->end) : KT__CU_SUCCESS;
        kt__cuda_ctx_leave(pushed);
        pthread_mutex_lock(&G.consumer);
        if (rc == 0)
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
            kt_record_error_name(p->kernel, kt__cuda_result_name(kt_cuda_last_result()));
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
        collector_kick();
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

int(kt_cuda_timer_init)(kt_cuda_timer_t *t, struct CUctx_st *ctx, struct CUstream_st *stream)
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
    kt__curesult r = kt__cu.cuEventRecord(end ? p->end : p->start, kt__cuda_stream_resolve(t->stream));
    kt__cuda_ctx_leave(pushed);
    return r ? kt__cuda_fail("cuEventRecord", r) : 0;
}

void(kt_cuda_timer_start)(kt_cuda_timer_t *t)
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
    int pushed = 0;
    int rc = kt__cuda_ctx_enter(t->context, &pushed);
    if (rc)
        return rc;
    float f = 0.0f;
    kt__curesult r = kt__cu.cuEventSynchronize(p->end);
    if (r == KT__CU_SUCCESS)
        r = kt__cu.cuEventElapsedTime(&f, p->start, p->end);
    kt__cuda_ctx_leave(pushed);
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
