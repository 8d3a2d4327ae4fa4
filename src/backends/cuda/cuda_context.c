/* cuda_context.c — CUDA backend: the registry of contexts (look-up, creation, the enter/leave helper every
 * driver call runs inside, liveness after a reset, retire, release, destroy) and device labels and info. */
#include "cuda_internal.h"

#include "core/device_label.h"
#include "core/internal.h"
#include "core/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* The calling thread's last context look-up, valid while kt__cuda_g.ctx_epoch is unchanged (spares the global lock on
 * every kt_cuda_begin). */
static _Thread_local struct {
    kt__cuctx handle;  /* CUDA context */
    kt__cuda_ctx_t *c; /* its state */
    uint32_t epoch;    /* kt__cuda_g.ctx_epoch when cached */
} t_ctx_cache;

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
int kt__cuda_capture_busy(kt__curesult r)
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
    snprintf(info.key, sizeof info.key, "%s", c->device_key); /* the core keeps the registered identity */
    snprintf(info.name, sizeof info.name, "%s", c->device_key);
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

/* Registers every device the driver enumerates (the core keeps one record per identity, so again is cheap): the
 * labels of a process's snapshots then depend on the machine's devices, not on which of them the run happened to
 * use first, and the label below is final for the process. */
static void register_all_devices(void)
{
    int count = 0;
    if (kt__cu.cuDeviceGetCount(&count) != KT__CU_SUCCESS)
        return;
    for (int i = 0; i < count; i++) {
        kt__cudevice d = 0;
        char key[KT_DEVICE_KEY_MAX];
        if (kt__cu.cuDeviceGet(&d, i) == KT__CU_SUCCESS)
            kt__cuda_device_key(d, key, sizeof key);
    }
}

void kt__cuda_device_label(kt__cudevice dev, char *out, size_t size)
{
    /* One source of labels: the core's (src/core/device_label.c), over the registry as a snapshot takes it. Two
     * GPUs of one model are "<model> #<ordinal>" there; a snapshot's host and rank are alike for all its records,
     * so they change no label of this process's devices. */
    register_all_devices();
    char key[KT_DEVICE_KEY_MAX];
    kt__cuda_device_key(dev, key, sizeof key);
    size_t n = 0;
    kt_device_info_t *all = kt__devices_copy(&n);
    kt__device_labels(all, n);
    const kt_device_info_t *me = all ? kt__device_by_key(all, n, KT_BACKEND_CUDA, key) : NULL;
    if (me)
        snprintf(out, size, "%s", me->name);
    else if (kt__cu.cuDeviceGetName(out, (int)size - 1, dev) != KT__CU_SUCCESS || !out[0])
        snprintf(out, size, "CUDA device %d", dev); /* no memory for the copy: the model, as a lone device's label */
    free(all);
}

/* A context found gone (reset, destroyed) but not yet retired matches no handle: it waits for a holder of the
 * consumer lock to retire it, while the handle gets fresh state. */
static int match_handle(void *c, const void *key)
{
    return ((kt__cuda_ctx_t *)c)->ctx == (kt__cuctx)key && !atomic_load(&((kt__cuda_ctx_t *)c)->gone);
}

static int match_primary0(void *c, const void *key)
{
    (void)key;
    return ((kt__cuda_ctx_t *)c)->retained_primary && ((kt__cuda_ctx_t *)c)->device == 0 &&
           !atomic_load(&((kt__cuda_ctx_t *)c)->gone);
}

/* kt__cuda_g.lock held (a live context is unlinked only under it): the live state of a context handle. */
static kt__cuda_ctx_t *ctx_find_locked(kt__cuctx ctx)
{
    return kt__ctx_set_find(&kt__cuda_g.set, match_handle, ctx);
}

kt__cuda_ctx_t *kt__cuda_ctx_lookup(kt__cuctx ctx)
{
    pthread_mutex_lock(&kt__cuda_g.lock);
    kt__cuda_ctx_t *c = ctx_find_locked(ctx);
    pthread_mutex_unlock(&kt__cuda_g.lock);
    return c;
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
    c->generation = atomic_load(&kt__cuda_g.generation);
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
    kt__cuda_device_key(c->device, c->device_key, sizeof c->device_key);
    kt__cuda_device_label(c->device, c->device_label, sizeof c->device_label);
    kt__cu.cuDeviceGetAttribute(&c->cc_major, KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->device);
    kt__cu.cuDeviceGetAttribute(&c->cc_minor, KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->device);
    kt__cuda_anchor_create(c);
    *out = c;
    return 0;
}

/* kt__cuda_g.lock held: the state of a context, created on first sight. `retained` says ktiming retained it (a primary
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
    /* Releasing ktiming's retain may be the last and destroy the context right here, under kt__cuda_g.lock: the
     * reset watch's callback then has nothing of ours to retire and must not take that lock (t_releasing). */
    if (rc) {
        if (retained) {
            kt__cuda_watch_releasing(1);
            kt__cu.cuDevicePrimaryCtxRelease_v2(dev);
            kt__cuda_watch_releasing(0);
        }
        return rc;
    }
    if (kt__ctx_set_add(&kt__cuda_g.set, c) != 0) {
        kt__cuda_watch_releasing(1);
        kt__cuda_ctx_destroy(c); /* never linked: nobody else has seen it */
        kt__cuda_watch_releasing(0);
        return KT_ENOMEM;
    }
    *created = 1;
    *out = c;
    return 0;
}

/* The 16 bytes of a CUDA UUID as nvidia-smi writes them: <prefix>-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. */
static void uuid_text(const unsigned char u[16], const char *prefix, char *out, size_t size)
{
    snprintf(out, size, "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix, u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

void kt__cuda_device_identity(kt__cudevice dev, kt_device_id_t *id, int *mig)
{
    memset(id, 0, sizeof *id);
    *mig = 0;
    snprintf(id->vendor, sizeof id->vendor, "NVIDIA");
    if (kt__cu.cuDeviceGetName(id->model, (int)sizeof id->model - 1, dev) != KT__CU_SUCCESS || !id->model[0])
        snprintf(id->model, sizeof id->model, "CUDA device %d", dev);
    id->ordinal = dev; /* CUDA's enumeration (CUDA_VISIBLE_DEVICES renumbers it): the uuid is the key */
    id->partition = -1;
    unsigned char u[16], gpu[16];
    if (kt__cu.cuDeviceGetUuid_v2 && kt__cu.cuDeviceGetUuid_v2(u, dev) == KT__CU_SUCCESS) {
        /* Under MIG the enumerated device is a MIG instance: _v2 gives the instance's UUID, the original entry
         * point its GPU's. Two instances of one GPU then differ by UUID though they share the PCI address. */
        *mig = kt__cu.cuDeviceGetUuid && kt__cu.cuDeviceGetUuid(gpu, dev) == KT__CU_SUCCESS && memcmp(u, gpu, 16) != 0;
        uuid_text(u, *mig ? "MIG" : "GPU", id->uuid, sizeof id->uuid);
    }
    int domain = 0, bus = 0, slot = 0;
    if (kt__cu.cuDeviceGetAttribute(&domain, KT__CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) == KT__CU_SUCCESS &&
        kt__cu.cuDeviceGetAttribute(&bus, KT__CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) == KT__CU_SUCCESS &&
        kt__cu.cuDeviceGetAttribute(&slot, KT__CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev) == KT__CU_SUCCESS)
        /* the whole domain: VMD and some hypervisors number domains past 0xffff (nvidia-smi prints 8 digits) */
        snprintf(id->pci, sizeof id->pci, "%04x:%02x:%02x.0", (unsigned)domain, (unsigned)bus & 0xffu,
                 (unsigned)slot & 0xffu);
}

void kt__cuda_device_key(kt__cudevice dev, char *out, size_t size)
{
    kt_device_id_t id;
    int mig = 0;
    kt__cuda_device_identity(dev, &id, &mig);
    const char *key = kt_device_register(KT_BACKEND_CUDA, &id);
    snprintf(out, size, "%s", key ? key : id.model); /* the core's table full: keyed by the model, as before */
}

/* kt__cuda_g.lock held. */
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
    for (int attempt = 0; attempt < 2; attempt++) {
        uint32_t epoch = atomic_load(&kt__cuda_g.ctx_epoch);
        kt__cuda_ctx_t *c = NULL;
        int created = 0;
        if (ctx && t_ctx_cache.handle == ctx && t_ctx_cache.epoch == epoch && !atomic_load(&t_ctx_cache.c->gone)) {
            c = t_ctx_cache.c;
        } else {
            pthread_mutex_lock(&kt__cuda_g.lock);
            c = ctx ? ctx_find_locked(ctx) : NULL;
            if (!c && ctx)
                rc = ctx_lookup_locked(ctx, 0, 0, &c, &created);
            else if (!c) {
                /* No current context: device 0's primary context, as the runtime API would use. */
                c = kt__ctx_set_find(&kt__cuda_g.set, match_primary0, NULL);
                if (!c)
                    rc = ctx_primary_locked(0, &c, &created);
            }
            pthread_mutex_unlock(&kt__cuda_g.lock);
            if (rc)
                return rc;
        }
        /* Re-validate by the context's identity: a primary context reset (cudaDeviceReset) or a destroyed
         * context leaves the same handle with none of ktiming's events, streams or buffers behind it. */
        if (!created && !kt__cuda_ctx_alive(c)) {
            /* Retired here unless a collector pass holds the consumer lock (it may be inside the driver for long:
             * kt_cuda_begin never waits behind it); then the pass retires it (it checks the id of every context
             * with work in flight), or kt_cuda_shutdown does. Marked gone, it matches no handle meanwhile. */
            if (pthread_mutex_trylock(&kt__cuda_g.consumer) == 0) {
                kt__cuda_ctx_retire(c);
                pthread_mutex_unlock(&kt__cuda_g.consumer);
            }
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
    pthread_mutex_lock(&kt__cuda_g.lock);
    rc = ctx_primary_locked(ordinal, &c, &created);
    pthread_mutex_unlock(&kt__cuda_g.lock);
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
    kt_device_id_t id;
    kt__cuda_device_identity(dev, &id, &out->mig);
    snprintf(out->uuid_text, sizeof out->uuid_text, "%s", id.uuid);
    if (id.pci[0]) { /* "dddd:bb:dd" here, as before: the identity's "dddd:bb:dd.0" without the function */
        const char *fn = strrchr(id.pci, '.');
        snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%.*s", fn ? (int)(fn - id.pci) : (int)strlen(id.pci),
                 id.pci);
    }
    const char *key = kt_device_register(KT_BACKEND_CUDA, &id);
    snprintf(out->key, sizeof out->key, "%s", key ? key : id.model);
    int khz = 0;
    kt__cu.cuDeviceGetAttribute(&out->cc_major, KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    kt__cu.cuDeviceGetAttribute(&out->cc_minor, KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    kt__cu.cuDeviceGetAttribute(&out->sm_count, KT__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    if (kt__cu.cuDeviceGetAttribute(&khz, KT__CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev) == KT__CU_SUCCESS && khz > 0)
        out->sm_clock_hz = (uint64_t)khz * 1000u;
    out->driver_version = kt__cu.driver_version;
    return 0;
}

/* Consumer lock held: c's context was reset or destroyed under ktiming. Unlink its state, count what was in
 * flight as dropped (context reset), and keep the host memory (open spans and timers may still point at it)
 * on the retired list until kt_cuda_shutdown. None of its driver handles is used again. */
void kt__cuda_ctx_retire(kt__cuda_ctx_t *c)
{
    atomic_store(&c->gone, 1);
    pthread_mutex_lock(&kt__cuda_g.lock);
    /* KT_EINVAL: retired already. KT_ENOMEM: it stays live but gone (passes skip it) and is retried next time. */
    int rc = kt__ctx_set_retire(&kt__cuda_g.set, c);
    atomic_fetch_add(&kt__cuda_g.ctx_epoch, 1);
    pthread_mutex_unlock(&kt__cuda_g.lock);
    if (rc != 0)
        return;
    uint32_t n = kt__cuda_drop_pending(c, KT_DROP_CONTEXT_RESET);
    kt__cuda_set_error(KT__CU_ERROR_CONTEXT_IS_DESTROYED,
                       "CUDA context %p was reset or destroyed: %u dispatches in flight were dropped",
                       (void *)c->ctx, n);
    kt__cuda_publish(c);
}

/* Frees ktiming's state for a context. A live context's events, streams, module and buffers are destroyed in
 * it; a retired one's (reset, destroyed) are not touched: the driver already freed them. */
void kt__cuda_ctx_destroy(kt__cuda_ctx_t *c)
{
    int alive = kt__cuda_ctx_alive(c); /* not only !gone: a reset ktiming has not noticed yet freed them too */
    int pushed = 0;
    int entered = alive && kt__cuda_ctx_enter(c, &pushed) == 0;
    kt__cuda_drop_pending(c, alive ? KT_DROP_IN_FLIGHT_AT_EXIT : KT_DROP_CONTEXT_RESET);
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
    if (kt__cuda_forked_child())
        return KT_EUNAVAILABLE;
    if (atomic_load(&kt__cuda_g.state) != KT__CUDA_READY)
        return 0;
    if (!ctx && kt__cu.cuCtxGetCurrent(&ctx) != KT__CU_SUCCESS)
        return KT_EINVAL;
    pthread_mutex_lock(&kt__cuda_g.consumer);
    pthread_mutex_lock(&kt__cuda_g.lock);
    kt__cuda_ctx_t *c = ctx_find_locked(ctx);
    pthread_mutex_unlock(&kt__cuda_g.lock);
    if (!c) {
        pthread_mutex_unlock(&kt__cuda_g.consumer);
        return 0;
    }
    kt__cuda_collect_until(c, kt__cuda_deadline_in_ms(kt__cuda_g.desc.flush_timeout_ms), 1);
    kt__cuda_publish(c);
    pthread_mutex_lock(&kt__cuda_g.lock);
    kt__ctx_set_remove(&kt__cuda_g.set, c); /* no pass runs: we hold the consumer lock */
    atomic_fetch_add(&kt__cuda_g.ctx_epoch, 1);
    pthread_mutex_unlock(&kt__cuda_g.lock);
    kt__cuda_watch_releasing(1); /* the last retain released may destroy the context here, calling the watch */
    kt__cuda_ctx_destroy(c);
    kt__cuda_watch_releasing(0);
    pthread_mutex_unlock(&kt__cuda_g.consumer);
    return 0;
}
