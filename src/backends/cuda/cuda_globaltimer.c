/* cuda_globaltimer.c — %globaltimer through the embedded PTX kernels: reads, batches, resolution, calibration
 * against the host timeline (ktiming/clock_model.h), and the slot buffers KT_KERNEL_ENTER/EXIT stamp into. */
#include "cuda_internal.h"
#include "kt__cuda_ptx.h" /* kt__cuda_ptx[]: kt_cuda_kernels.ptx, embedded at build time */

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A device buffer of stamp slots. */
struct kt_cuda_slots_t {
    kt__cuda_ctx_t *c;     /* owning context */
    uint32_t generation;   /* backend generation at creation */
    uint32_t count;        /* slots */
    kt__cudeviceptr base;  /* device address of slot 0 */
};

static const kt_cuda_stamp_t kSlotReset = {UINT64_MAX, 0};

/* Calibration samples are spread over at least this long, so the fitted drift is not extrapolated from a burst
 * of a few milliseconds. */
#define KT__CUDA_CAL_SPAN_NS 20000000ull

/* kt_cuda_slots_record and kt_cuda_globaltimer_to_host refresh a %globaltimer model older than this, or whose bound at the time of use has
 * grown past twice its bound at the fit (plus the timer's granularity): the fitted drift of a 20 ms calibration
 * is uncertain, and extrapolated over seconds its bound grows by milliseconds. A refresh takes a few new brackets
 * and refits on them together with the earlier ones (a ring of KT__CUDA_GT_RING), so the baseline lengthens and
 * the drift, hence the bound, tightens instead of the same 20 ms of brackets being extrapolated for 10 s. */
#define KT__CUDA_GT_MAX_AGE_NS 1000000000ull
#define KT__CUDA_GT_REFRESH_SAMPLES 16u

/* ---------------------------------------------------------------------------------------------------
 * Module, stream and scratch buffer (gt_lock held, context current)
 * ------------------------------------------------------------------------------------------------- */

static int gt_supported(void)
{
    if (kt__cu.cuModuleLoadData && kt__cu.cuModuleUnload && kt__cu.cuModuleGetFunction && kt__cu.cuLaunchKernel &&
        kt__cu.cuMemAlloc_v2 && kt__cu.cuMemFree_v2 && kt__cu.cuMemcpyDtoHAsync_v2 && kt__cu.cuMemcpyHtoDAsync_v2)
        return 0;
    kt__cuda_set_error(0, "the CUDA driver lacks module, launch or copy entry points");
    return KT_ENOTSUP;
}

static int gt_prepare(kt__cuda_ctx_t *c, size_t scratch_bytes)
{
    int rc = gt_supported();
    if (rc)
        return rc;
    kt__curesult r;
    if (!c->module) {
        r = kt__cu.cuModuleLoadData(&c->module, kt__cuda_ptx);
        if (r) {
            c->module = NULL;
            return kt__cuda_fail("cuModuleLoadData (ktiming globaltimer PTX)", r);
        }
        r = kt__cu.cuModuleGetFunction(&c->fn_read, c->module, "kt_globaltimer_read");
        if (!r)
            r = kt__cu.cuModuleGetFunction(&c->fn_batch, c->module, "kt_globaltimer_batch");
        if (r) {
            kt__cu.cuModuleUnload(c->module);
            c->module = NULL;
            return kt__cuda_fail("cuModuleGetFunction", r);
        }
    }
    if (!c->gt_stream) {
        r = kt__cu.cuStreamCreate(&c->gt_stream, KT__CU_STREAM_NON_BLOCKING);
        if (r) {
            c->gt_stream = NULL;
            return kt__cuda_fail("cuStreamCreate", r);
        }
    }
    if (scratch_bytes > c->scratch_bytes) {
        if (c->scratch)
            kt__cu.cuMemFree_v2(c->scratch);
        c->scratch = 0;
        c->scratch_bytes = 0;
        r = kt__cu.cuMemAlloc_v2(&c->scratch, scratch_bytes);
        if (r)
            return kt__cuda_fail("cuMemAlloc", r);
        c->scratch_bytes = scratch_bytes;
    }
    return 0;
}

static int gt_launch_read(kt__cuda_ctx_t *c, kt__cudeviceptr dst)
{
    void *params[] = {&dst};
    kt__curesult r = kt__cu.cuLaunchKernel(c->fn_read, 1, 1, 1, 1, 1, 1, 0, c->gt_stream, params, NULL);
    return r ? kt__cuda_fail("cuLaunchKernel (kt_globaltimer_read)", r) : 0;
}

static int gt_sync(kt__cuda_ctx_t *c)
{
    kt__curesult r = kt__cu.cuStreamSynchronize(c->gt_stream);
    return r ? kt__cuda_fail("cuStreamSynchronize", r) : 0;
}

static int gt_copy_back(kt__cuda_ctx_t *c, void *dst, kt__cudeviceptr src, size_t bytes)
{
    kt__curesult r = kt__cu.cuMemcpyDtoHAsync_v2(dst, src, bytes, c->gt_stream);
    if (r)
        return kt__cuda_fail("cuMemcpyDtoHAsync", r);
    return gt_sync(c);
}

/* Enter the context and lock its timer state; gt_end undoes it. */
static int gt_begin(kt__cuctx ctx, kt__cuda_ctx_t **out, int *pushed)
{
    int rc = kt__cuda_ctx_get(ctx, out);
    if (rc)
        return rc;
    pthread_mutex_lock(&(*out)->gt_lock);
    rc = kt__cuda_ctx_enter(*out, pushed);
    if (rc)
        pthread_mutex_unlock(&(*out)->gt_lock);
    return rc;
}

static void gt_end(kt__cuda_ctx_t *c, int pushed)
{
    kt__cuda_ctx_leave(pushed);
    pthread_mutex_unlock(&c->gt_lock);
}

/* One read: launch, synchronise, copy (gt_lock held, context current). */
static int gt_read_locked(kt__cuda_ctx_t *c, uint64_t *ns)
{
    int rc = gt_prepare(c, sizeof(uint64_t));
    if (!rc)
        rc = gt_launch_read(c, c->scratch);
    if (!rc)
        rc = gt_copy_back(c, ns, c->scratch, sizeof *ns);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Reads, batches, resolution, frequency
 * ------------------------------------------------------------------------------------------------- */

static int gt_batch_locked(kt__cuda_ctx_t *c, uint64_t *out, uint32_t n)
{
    int rc = gt_prepare(c, (size_t)n * sizeof(uint64_t));
    if (rc)
        return rc;
    kt__cudeviceptr dst = c->scratch;
    void *params[] = {&dst, &n};
    kt__curesult r = kt__cu.cuLaunchKernel(c->fn_batch, 1, 1, 1, 1, 1, 1, 0, c->gt_stream, params, NULL);
    if (r)
        return kt__cuda_fail("cuLaunchKernel (kt_globaltimer_batch)", r);
    return gt_copy_back(c, out, c->scratch, (size_t)n * sizeof(uint64_t));
}

/* Runs one reading step inside gt_begin/gt_end; *cp (when given) is the context, for its state after. */
static int gt_run(struct CUctx_st *ctx, int (*step)(kt__cuda_ctx_t *, uint64_t *, uint32_t), uint64_t *out,
                  uint32_t n, kt__cuda_ctx_t **cp)
{
    kt__cuda_ctx_t *c;
    int pushed;
    int rc = gt_begin(ctx, &c, &pushed);
    if (rc)
        return rc;
    rc = step(c, out, n);
    gt_end(c, pushed);
    if (cp)
        *cp = c;
    return rc;
}

/* gt_read_locked in the shape of gt_batch_locked, for gt_run (n is 1). */
static int gt_read_one_locked(kt__cuda_ctx_t *c, uint64_t *ns, uint32_t n)
{
    (void)n;
    return gt_read_locked(c, ns);
}

int kt_cuda_globaltimer_read(struct CUctx_st *ctx, uint64_t *ns)
{
    if (!ns)
        return KT_EINVAL;
    return gt_run(ctx, gt_read_one_locked, ns, 1, NULL);
}

int kt_cuda_globaltimer_batch(struct CUctx_st *ctx, uint64_t *out, uint32_t n)
{
    if (!out || n == 0)
        return KT_EINVAL;
    return gt_run(ctx, gt_batch_locked, out, n, NULL);
}

int kt_cuda_globaltimer_resolution(struct CUctx_st *ctx, uint64_t *resolution_ns)
{
    enum { N = 1024 };
    if (!resolution_ns)
        return KT_EINVAL;
    uint64_t *v = malloc(N * sizeof *v);
    if (!v)
        return KT_ENOMEM;
    kt__cuda_ctx_t *c = NULL;
    int rc = gt_run(ctx, gt_batch_locked, v, N, &c);
    if (rc) {
        free(v);
        return rc;
    }
    uint64_t best = 0;
    for (uint32_t i = 1; i < N; i++)
        if (v[i] > v[i - 1] && (best == 0 || v[i] - v[i - 1] < best))
            best = v[i] - v[i - 1];
    free(v);
    if (best == 0) {
        kt__cuda_set_error(0, "%%globaltimer did not advance over %d consecutive reads", N);
        return KT_EBACKEND;
    }
    pthread_mutex_lock(&c->lock);
    c->gt_resolution_ns = best;
    pthread_mutex_unlock(&c->lock);
    kt__cuda_publish(c);
    *resolution_ns = best;
    return 0;
}

int kt_cuda_globaltimer_frequency(struct CUctx_st *ctx, uint64_t *timer_hz, uint64_t *sm_clock_hz)
{
    kt__cuda_ctx_t *c;
    int rc = kt__cuda_ctx_get(ctx, &c);
    if (rc)
        return rc;
    if (timer_hz)
        *timer_hz = KT_CUDA_GLOBALTIMER_HZ;
    if (sm_clock_hz) {
        int khz = 0;
        kt__curesult r = kt__cu.cuDeviceGetAttribute(&khz, KT__CU_DEVICE_ATTRIBUTE_CLOCK_RATE, c->device);
        *sm_clock_hz = (r == KT__CU_SUCCESS && khz > 0) ? (uint64_t)khz * 1000u : 0;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Calibration against the host timeline
 * ------------------------------------------------------------------------------------------------- */

/* kt_device_clock_read_cb for domain detection (gt_lock held and context current by the caller). */
static uint64_t gt_read_cb(void *user)
{
    uint64_t ns = 0;
    return gt_read_locked(user, &ns) == 0 ? ns : 0;
}

/* gt_lock held, context current: n launch+synchronise brackets paced over span_ns, appended to the context's ring
 * (reset first when `fresh`), then a fit on the whole ring. */
static int gt_sample_and_fit(kt__cuda_ctx_t *c, uint32_t n, uint64_t span_ns, int fresh, kt_fit_strategy_t strategy,
                             kt_clock_model_t *m)
{
    kt_clock_sample_t *s = calloc(n, sizeof *s);
    uint64_t *dev = calloc(n, sizeof *dev);
    if (!s || !dev) {
        free(s);
        free(dev);
        return KT_ENOMEM;
    }
    int rc = gt_prepare(c, (size_t)n * sizeof(uint64_t));
    /* One launch per sample, each bracketed by host reads around launch + synchronise, paced so the samples
     * span span_ns; values copied after. */
    uint64_t t0 = kt_now_ns();
    for (uint32_t i = 0; i < n && !rc; i++) {
        uint64_t due = t0 + span_ns * i / n, now = kt_now_ns();
        if (now < due) {
            struct timespec ts = {0, (long)(due - now)};
            nanosleep(&ts, NULL);
        }
        s[i].host_before_ns = kt_now_ns();
        rc = gt_launch_read(c, c->scratch + (kt__cudeviceptr)i * sizeof(uint64_t));
        if (!rc)
            rc = gt_sync(c);
        s[i].host_after_ns = kt_now_ns();
    }
    if (!rc)
        rc = gt_copy_back(c, dev, c->scratch, (size_t)n * sizeof(uint64_t));
    if (!rc) {
        if (fresh)
            c->gt_ring_len = c->gt_ring_next = 0;
        for (uint32_t i = 0; i < n; i++) {
            s[i].device_ns = dev[i];
            c->gt_ring[c->gt_ring_next] = s[i];
            c->gt_ring_next = (c->gt_ring_next + 1) % KT__CUDA_GT_RING;
            if (c->gt_ring_len < KT__CUDA_GT_RING)
                c->gt_ring_len++;
        }
        /* a calibration fits on all its samples; a refresh on the ring (earlier brackets and its own) */
        rc = fresh ? kt_clock_fit(s, n, strategy, KT_DOMAIN_MONOTONIC_RAW, m)
                   : kt_clock_fit(c->gt_ring, c->gt_ring_len, strategy, KT_DOMAIN_MONOTONIC_RAW, m);
    }
    free(s);
    free(dev);
    return rc;
}

int kt_cuda_calibrate(struct CUctx_st *ctx, uint32_t samples, kt_fit_strategy_t strategy, kt_clock_model_t *out,
                      kt_clock_domain_t *domain)
{
    uint32_t n = samples ? samples : 64;
    if (n < KT_CLOCK_MIN_SAMPLES)
        return KT_ESAMPLES;
    kt__cuda_ctx_t *c;
    int pushed;
    int rc = gt_begin(ctx, &c, &pushed);
    if (rc)
        return rc;
    kt_clock_model_t m;
    rc = gt_sample_and_fit(c, n, KT__CUDA_CAL_SPAN_NS, 1, strategy, &m);
    kt_clock_domain_t dom = KT_DOMAIN_DEVICE;
    if (!rc) {
        int64_t off = 0;
        if (kt_clock_detect_domain(gt_read_cb, c, 0, &dom, &off) != 0)
            dom = KT_DOMAIN_DEVICE;
        c->gt_model = m;
    }
    gt_end(c, pushed);
    if (rc)
        return rc;
    pthread_mutex_lock(&c->lock);
    c->gt_valid = 1;
    c->gt_domain = dom;
    pthread_mutex_unlock(&c->lock);
    kt__cuda_publish(c);
    if (out)
        *out = m;
    if (domain)
        *domain = dom;
    return 0;
}

/* kt_cuda_slots_record and kt_cuda_globaltimer_to_host: the model, refreshed first when it is stale (see
 * KT__CUDA_GT_MAX_AGE_NS), or made (slots_record only: to_host needs a calibration first). */
static int gt_model_fresh(kt__cuda_ctx_t *c, kt_clock_model_t *m)
{
    pthread_mutex_lock(&c->lock);
    int valid = c->gt_valid;
    uint64_t res = c->gt_resolution_ns;
    pthread_mutex_unlock(&c->lock);
    if (!valid)
        return kt_cuda_calibrate(c->ctx, 32, KT_FIT_WEIGHTED, m, NULL);
    int pushed;
    pthread_mutex_lock(&c->gt_lock);
    *m = c->gt_model;
    double fit_bound = kt_clock_error_at(m, m->host_ref_ns);
    int rc = 0;
    if (kt_clock_is_stale(m, kt_now_ns(), 2.0 * fit_bound + (double)res, KT__CUDA_GT_MAX_AGE_NS) &&
        (rc = kt__cuda_ctx_enter(c, &pushed)) == 0) {
        kt_clock_model_t fresh;
        rc = gt_sample_and_fit(c, KT__CUDA_GT_REFRESH_SAMPLES, KT__CUDA_CAL_SPAN_NS / 4, 0, m->strategy, &fresh);
        kt__cuda_ctx_leave(pushed);
        if (!rc)
            *m = c->gt_model = fresh;
    }
    pthread_mutex_unlock(&c->gt_lock);
    return rc;
}

/* The timer's update granularity for c, measured once (one launch of 1024 reads) if the program did not ask for
 * it: a value read from %globaltimer stands for any instant of its step, so every bound stated for one holds it. */
static int gt_granularity(kt__cuda_ctx_t *c, uint64_t *res)
{
    pthread_mutex_lock(&c->lock);
    *res = c->gt_resolution_ns;
    pthread_mutex_unlock(&c->lock);
    return *res ? 0 : kt_cuda_globaltimer_resolution(c->ctx, res);
}

int kt_cuda_globaltimer_to_host(struct CUctx_st *ctx, uint64_t device_ns, uint64_t *host_ns,
                                uint64_t *uncertainty_ns)
{
    kt__cuda_ctx_t *c;
    int rc = kt__cuda_ctx_get(ctx, &c);
    if (rc)
        return rc;
    pthread_mutex_lock(&c->lock);
    int valid = c->gt_valid;
    pthread_mutex_unlock(&c->lock);
    if (!valid) {
        kt__cuda_set_error(0, "no %%globaltimer calibration for this context (call kt_cuda_calibrate)");
        return KT_ESTATE;
    }
    /* the same rules as kt_cuda_slots_record: the bound holds the timer's granularity, and a stale model is
     * refreshed first, so the bound stays near the fit's */
    uint64_t res = 0;
    kt_clock_model_t m;
    if ((rc = gt_granularity(c, &res)) != 0 || (rc = gt_model_fresh(c, &m)) != 0)
        return rc;
    rc = kt_clock_to_host(&m, device_ns, host_ns, uncertainty_ns);
    if (!rc && uncertainty_ns)
        *uncertainty_ns += res;
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Slot buffers
 * ------------------------------------------------------------------------------------------------- */

static int slots_valid(const kt_cuda_slots_t *s, uint32_t index)
{
    if (!s || index >= s->count)
        return KT_EINVAL;
    if (s->generation != kt__cuda_generation()) {
        kt__cuda_set_error(0, "stamp slots outlived kt_cuda_shutdown");
        return KT_ESTATE;
    }
    if (!kt__cuda_ctx_alive(s->c)) {
        kt__cuda_set_error(KT__CU_ERROR_CONTEXT_IS_DESTROYED, "stamp slots outlived their context (reset or destroyed)");
        return KT_ESTATE;
    }
    return kt__cuda_ready();
}

int kt_cuda_slots_create(kt_cuda_slots_t **out, struct CUctx_st *ctx, uint32_t count)
{
    if (!out || count == 0)
        return KT_EINVAL;
    *out = NULL;
    kt_cuda_slots_t *s = calloc(1, sizeof *s);
    kt_cuda_stamp_t *init = malloc((size_t)count * sizeof *init);
    if (!s || !init) {
        free(s);
        free(init);
        return KT_ENOMEM;
    }
    for (uint32_t i = 0; i < count; i++)
        init[i] = kSlotReset;
    kt__cuda_ctx_t *c;
    int pushed;
    int rc = gt_begin(ctx, &c, &pushed);
    if (rc) {
        free(s);
        free(init);
        return rc;
    }
    rc = gt_prepare(c, 0);
    size_t bytes = (size_t)count * sizeof(kt_cuda_stamp_t);
    if (!rc) {
        kt__curesult r = kt__cu.cuMemAlloc_v2(&s->base, bytes);
        if (r)
            rc = kt__cuda_fail("cuMemAlloc (stamp slots)", r);
    }
    if (!rc) {
        kt__curesult r = kt__cu.cuMemcpyHtoDAsync_v2(s->base, init, bytes, c->gt_stream);
        rc = r ? kt__cuda_fail("cuMemcpyHtoDAsync", r) : gt_sync(c);
        if (rc)
            kt__cu.cuMemFree_v2(s->base);
    }
    gt_end(c, pushed);
    free(init);
    if (rc) {
        free(s);
        return rc;
    }
    s->c = c;
    s->generation = c->generation;
    s->count = count;
    *out = s;
    return 0;
}

uint64_t kt_cuda_slots_device_ptr(const kt_cuda_slots_t *s, uint32_t index)
{
    if (!s || index >= s->count)
        return 0;
    return s->base + (uint64_t)index * sizeof(kt_cuda_stamp_t);
}

int(kt_cuda_slots_bind)(kt_cuda_slots_t *s, struct CUmod_st *module, struct CUstream_st *stream, uint32_t index)
{
    int rc = slots_valid(s, index);
    if (rc)
        return rc;
    if (!module)
        return KT_EINVAL;
    if ((rc = gt_supported()) != 0)
        return rc;
    if (!kt__cu.cuModuleGetGlobal_v2) {
        kt__cuda_set_error(0, "the CUDA driver lacks cuModuleGetGlobal_v2");
        return KT_ENOTSUP;
    }
    kt__cuda_ctx_t *c = s->c;
    kt__custream st = kt__cuda_stream_resolve((kt__custream)stream);
    int pushed;
    rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc)
        return rc;
    kt__cudeviceptr var = 0;
    size_t bytes = 0;
    kt__curesult r = 0;
    if (kt__cuda_stream_capturing(st)) {
        /* as spans skip a capture: the copies would become nodes of the program's graph, or (the legacy stream
         * beside a capturing blocking stream) invalidate its capture */
        kt__cuda_set_error(0, "kt_cuda_slots_bind: the stream is capturing a graph (or is the legacy stream while a "
                              "blocking stream captures): bind before the capture begins, or on another stream");
        rc = KT_ESTATE;
    } else if ((r = kt__cu.cuModuleGetGlobal_v2(&var, &bytes, module, "kt_cuda_slot_ptr")) != 0) {
        kt__cuda_set_error(r, "cuModuleGetGlobal(kt_cuda_slot_ptr): %s (%d): the module was not compiled with "
                              "ktiming/cuda_device.cuh in whole-program mode",
                           kt__cuda_result_name(r), r);
        rc = r == KT__CU_ERROR_NOT_FOUND ? KT_EINVAL : KT_EBACKEND;
    } else if (bytes != sizeof(uint64_t)) {
        kt__cuda_set_error(0, "kt_cuda_slot_ptr in the module is %zu bytes, not a pointer", bytes);
        rc = KT_EINVAL;
    }
    uint64_t addr = kt_cuda_slots_device_ptr(s, index);
    if (!rc) {
        /* Pageable sources: the driver stages them before returning, so stack values are fine. */
        r = kt__cu.cuMemcpyHtoDAsync_v2(addr, &kSlotReset, sizeof kSlotReset, st);
        if (!r)
            r = kt__cu.cuMemcpyHtoDAsync_v2(var, &addr, sizeof addr, st);
        if (r)
            rc = kt__cuda_fail("cuMemcpyHtoDAsync (slot bind)", r);
    }
    kt__cuda_ctx_leave(pushed);
    return rc;
}

int kt_cuda_slots_read(kt_cuda_slots_t *s, uint32_t index, kt_cuda_stamp_t *out)
{
    int rc = slots_valid(s, index);
    if (rc)
        return rc;
    if (!out)
        return KT_EINVAL;
    kt__cuda_ctx_t *c = s->c;
    int pushed;
    pthread_mutex_lock(&c->gt_lock);
    rc = kt__cuda_ctx_enter(c, &pushed);
    if (!rc) {
        rc = gt_prepare(c, 0);
        if (!rc)
            rc = gt_copy_back(c, out, kt_cuda_slots_device_ptr(s, index), sizeof *out);
        kt__cuda_ctx_leave(pushed);
    }
    pthread_mutex_unlock(&c->gt_lock);
    return rc;
}

int kt_cuda_slots_record(kt_cuda_slots_t *s, uint32_t index, const char *name)
{
    kt_cuda_stamp_t st;
    int rc = kt_cuda_slots_read(s, index, &st);
    if (rc)
        return rc;
    kt__cuda_ctx_t *c = s->c;
    kt_kernel_id_t id = kt_kernel_intern(name && name[0] ? name : "(unnamed)", KT_BACKEND_CUDA, c->device_key);
    if (st.enter_ns == UINT64_MAX || st.exit_ns == 0 || st.exit_ns < st.enter_ns) {
        kt__cuda_set_error(0, "slot %u holds no complete stamps (kernel not run, not bound, or still running)",
                           index);
        kt_record_error(id, NULL);
        return KT_ESTATE;
    }
    /* the timer's update granularity bounds each stamp */
    uint64_t res = 0;
    if ((rc = gt_granularity(c, &res)) != 0)
        return rc;
    kt_clock_model_t m;
    if ((rc = gt_model_fresh(c, &m)) != 0)
        return rc;
    uint64_t h0 = 0, h1 = 0, u0 = 0, u1 = 0;
    rc = kt_clock_to_host(&m, st.enter_ns, &h0, &u0);
    if (!rc)
        rc = kt_clock_to_host(&m, st.exit_ns, &h1, &u1);
    if (rc)
        return rc;
    pthread_mutex_lock(&c->lock);
    if (!c->slots_queue)
        c->slots_queue = kt_queue_register(KT_BACKEND_CUDA, c->device_key, "kernel stamps");
    uint32_t queue = c->slots_queue;
    pthread_mutex_unlock(&c->lock);
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = id;
    d.queue = queue;
    d.thread = kt_thread_ordinal();
    d.flags = KT_SPAN_DEVICE;
    d.duration_ns = st.exit_ns - st.enter_ns;
    d.start_ns = h0;
    d.end_ns = h0 + d.duration_ns;
    d.uncertainty_ns = (u0 > u1 ? u0 : u1) + res;
    kt_record_dispatch(&d);
    return 0;
}

void kt_cuda_slots_destroy(kt_cuda_slots_t *s)
{
    if (!s)
        return;
    if (slots_valid(s, 0) == 0) {
        kt__cuda_ctx_t *c = s->c;
        int pushed;
        if (kt__cuda_ctx_enter(c, &pushed) == 0) {
            kt__cu.cuMemFree_v2(s->base);
            kt__cuda_ctx_leave(pushed);
        }
    }
    free(s);
}

/* ---------------------------------------------------------------------------------------------------
 * Held stream (kt_cuda_time_held)
 *
 * An event recorded before a launch on an idle stream completes at once, so an event pair around a short kernel
 * also holds the host's time to launch it. Here a one-thread kernel (kt_hold_wait) spins on a host-mapped word
 * first; the start event, the launches and the end event queue up behind it, and the host releases the word
 * once all are enqueued: the pair then brackets the launches' execution only, back to back.
 * ------------------------------------------------------------------------------------------------- */

/* gt_lock held, context current: the spin kernel, the flag words and the two events. */
static int hold_prepare(kt__cuda_ctx_t *c)
{
    if (!kt__cu.cuMemHostAlloc || !kt__cu.cuMemHostGetDevicePointer_v2 || !kt__cu.cuMemFreeHost) {
        kt__cuda_set_error(0, "the CUDA driver lacks mapped host memory entry points (cuMemHostAlloc)");
        return KT_ENOTSUP;
    }
    int rc = gt_prepare(c, 0);
    if (rc)
        return rc;
    kt__curesult r;
    if (!c->fn_hold && (r = kt__cu.cuModuleGetFunction(&c->fn_hold, c->module, "kt_hold_wait")) != 0) {
        c->fn_hold = NULL;
        return kt__cuda_fail("cuModuleGetFunction (kt_hold_wait)", r);
    }
    if (!c->hold_flag) {
        void *p = NULL;
        if ((r = kt__cu.cuMemHostAlloc(&p, 64, KT__CU_MEMHOSTALLOC_DEVICEMAP)) != 0)
            return kt__cuda_fail("cuMemHostAlloc (held stream flag)", r);
        if ((r = kt__cu.cuMemHostGetDevicePointer_v2(&c->hold_dev, p, 0)) != 0) {
            kt__cu.cuMemFreeHost(p);
            return kt__cuda_fail("cuMemHostGetDevicePointer", r);
        }
        c->hold_flag = p;
    }
    for (int i = 0; i < 2; i++)
        if (!c->hold_ev[i] && (r = kt__cu.cuEventCreate(&c->hold_ev[i], KT__CU_EVENT_DEFAULT)) != 0) {
            c->hold_ev[i] = NULL;
            return kt__cuda_fail("cuEventCreate", r);
        }
    return 0;
}

/* One kt_cuda_time_held call, as its warm-up and batches see it. */
typedef struct hold_call_t {
    const kt_cuda_held_t *h; /* the program's description */
    kt__custream stream;     /* h->stream resolved (the per-thread default stream where stream 0 means it) */
    int program_mode;        /* the thread's capture mode as the program set it; -1 when the driver cannot say */
    uint64_t warm_ns;        /* host time the warm-up's callback (one trial, unheld) took to return */
} hold_call_t;

/* The calling thread's stream-capture mode as the program set it (read before kt__cuda_ctx_enter switches it to
 * relaxed), -1 when the driver cannot say. */
static int hold_program_mode(void)
{
    int mode = KT__CU_STREAM_CAPTURE_MODE_RELAXED;
    if (!kt__cu.cuThreadExchangeStreamCaptureMode || kt__cu.cuThreadExchangeStreamCaptureMode(&mode) != 0)
        return -1;
    int back = mode;
    kt__cu.cuThreadExchangeStreamCaptureMode(&back);
    return mode;
}

/* The program's enqueue callback, in the program's own capture mode: ktiming's relaxed mode is left around it, so
 * a capture-unsafe call of the program's fails (and invalidates a global-mode capture) as it would without
 * ktiming instead of being hidden; the held context stays current (the callback's launches go to its stream). */
static int hold_callback(const hold_call_t *k, uint32_t trials)
{
    int mode = k->program_mode;
    if (mode >= 0)
        kt__cu.cuThreadExchangeStreamCaptureMode(&mode);
    int rc = k->h->enqueue(k->h->user, k->stream, trials);
    if (k->program_mode >= 0)
        kt__cu.cuThreadExchangeStreamCaptureMode(&mode); /* relaxed again, for ktiming's own calls */
    return rc;
}

/* Trials per held batch at first. The driver's launch queue is finite, and once it is full cuLaunchKernel blocks,
 * so the host would never reach the release (nvbench's blocking kernel documents a cap of about 32 launches). A
 * trial may enqueue any number of launches, which ktiming cannot count, so a batch whose spin kernel gave up
 * before the release is retried with half its trials (half the smaller of it and the size in use: a short last
 * batch that gave up says nothing of the full size). The context keeps a smaller size only once a full batch of it
 * held (hold_batch), and doubles it again after KT__CUDA_HOLD_REGROW calls in a row held at it, so one stall (a
 * host hiccup, a lazy load) does not shrink later calls for good, nor a callback that cannot be held at all. */
#define KT__CUDA_HOLD_BATCH 32u
#define KT__CUDA_HOLD_REGROW 8u

/* How long the spin kernel waits for one batch's release before it gives up, when the program sets no
 * hold_timeout_ms: KT__CUDA_HOLD_SLACK times what the warm-up's one trial took to enqueue, per trial of the batch,
 * at least KT__CUDA_HOLD_MIN_MS and at most KT__CUDA_HOLD_TIMEOUT_MS. */
#define KT__CUDA_HOLD_TIMEOUT_MS 10000u
#define KT__CUDA_HOLD_MIN_MS 100u
#define KT__CUDA_HOLD_SLACK 4u

/* How long the spin kernel of a batch of `trials` waits for its release. */
static uint64_t hold_timeout_ns(const hold_call_t *k, uint32_t trials)
{
    if (k->h->hold_timeout_ms)
        return (uint64_t)k->h->hold_timeout_ms * 1000000u;
    const uint64_t lo = (uint64_t)KT__CUDA_HOLD_MIN_MS * 1000000u, hi = (uint64_t)KT__CUDA_HOLD_TIMEOUT_MS * 1000000u;
    uint64_t per = (uint64_t)KT__CUDA_HOLD_SLACK * (trials ? trials : 1);
    if (k->warm_ns >= hi / per)
        return hi;
    return k->warm_ns * per > lo ? k->warm_ns * per : lo;
}

/* One held batch: the spin kernel, then the start event, the caller's launches and the end event, then the
 * release. 0 with *duration_ns, or with *gave_up set when the spin kernel gave up before the release (the batch
 * ran partly unheld: no duration), or a KT_E* (last error set) or the callback's own return. */
static int hold_run(kt__cuda_ctx_t *c, const hold_call_t *k, uint32_t trials, uint64_t *duration_ns, int *gave_up)
{
    kt__custream stream = k->stream;
    uint64_t timeout_ns = hold_timeout_ns(k, trials);
    __atomic_store_n(&c->hold_flag[0], 0u, __ATOMIC_RELEASE);
    __atomic_store_n(&c->hold_flag[1], 0u, __ATOMIC_RELEASE);
    kt__cudeviceptr flag = c->hold_dev;
    void *params[] = {&flag, &timeout_ns};
    kt__curesult r = kt__cu.cuLaunchKernel(c->fn_hold, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
    if (r)
        return kt__cuda_fail("cuLaunchKernel (kt_hold_wait)", r);
    int rc = 0;
    if ((r = kt__cu.cuEventRecord(c->hold_ev[0], stream)) != 0)
        rc = kt__cuda_fail("cuEventRecord", r);
    if (!rc && (rc = hold_callback(k, trials)) != 0)
        kt__cuda_set_error(0, "the enqueue callback returned %d", rc);
    if (!rc && (r = kt__cu.cuEventRecord(c->hold_ev[1], stream)) != 0)
        rc = kt__cuda_fail("cuEventRecord", r);
    __atomic_store_n(&c->hold_flag[0], 1u, __ATOMIC_RELEASE); /* release the stream, whatever happened */
    if (rc)
        return rc;
    if ((r = kt__cu.cuEventSynchronize(c->hold_ev[1])) != 0)
        return kt__cuda_fail("cuEventSynchronize", r);
    *gave_up = __atomic_load_n(&c->hold_flag[1], __ATOMIC_ACQUIRE) == 2u;
    if (*gave_up)
        return 0; /* when, against the enqueuing, is unknown: the pair is not trusted */
    float ms = 0.0f;
    if ((r = kt__cu.cuEventElapsedTime(&ms, c->hold_ev[0], c->hold_ev[1])) != 0)
        return kt__cuda_fail("cuEventElapsedTime", r);
    *duration_ns = ms > 0.0f ? (uint64_t)((double)ms * 1e6 + 0.5) : 0;
    return 0;
}

/* hold_lock held, context entered: one trial of the work, unheld, at the start of every call. Under lazy loading
 * (the default since CUDA 12.2) a kernel's first launch loads its module, which can synchronise the context:
 * behind the spin kernel that would wait for the release that never comes. Which kernels the callback launches
 * cannot be known (a program may reuse one callback and user pointer for another kernel), so no call skips it. */
static int hold_warm_up(hold_call_t *k)
{
    uint64_t t0 = kt_now_ns();
    int rc = hold_callback(k, 1);
    k->warm_ns = kt_now_ns() - t0;
    if (rc) {
        kt__cuda_set_error(0, "the enqueue callback returned %d (warm-up)", rc);
        return rc;
    }
    kt__curesult r = kt__cu.cuStreamSynchronize(k->stream);
    return r ? kt__cuda_fail("cuStreamSynchronize (held-stream warm-up)", r) : 0;
}

int(kt_cuda_time_held)(const kt_cuda_held_t *h, uint32_t trials, uint64_t *duration_ns)
{
    if (!h || !h->enqueue || !duration_ns)
        return KT_EINVAL;
    *duration_ns = 0;
    kt__cuda_ctx_t *c;
    int rc = kt__cuda_ctx_get((kt__cuctx)h->ctx, &c);
    if (rc)
        return rc;
    kt__custream stream = kt__cuda_stream_resolve((kt__custream)h->stream);
    if (!stream || stream == KT__CU_STREAM_LEGACY) {
        kt__cuda_set_error(0, "kt_cuda_time_held: the legacy default stream cannot be held (it synchronises with "
                              "every blocking stream); pass a stream of your own");
        return KT_EINVAL;
    }
    hold_call_t k = {.h = h, .stream = stream, .program_mode = hold_program_mode()};
    pthread_mutex_lock(&c->hold_lock);
    int pushed = 0;
    rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc) {
        pthread_mutex_unlock(&c->hold_lock);
        return rc;
    }
    if (kt__cuda_stream_capturing(stream)) {
        /* the spin kernel, the events and the launches would become nodes of the program's graph */
        kt__cuda_set_error(0, "kt_cuda_time_held: the stream is capturing a graph; hold it before or after the "
                              "capture (time the graph's launch instead)");
        rc = KT_ESTATE;
    }
    if (!rc) {
        pthread_mutex_lock(&c->gt_lock);
        rc = hold_prepare(c);
        pthread_mutex_unlock(&c->gt_lock);
    }
    if (!rc)
        rc = hold_warm_up(&k);
    uint64_t total = 0;
    uint32_t kept = c->hold_batch ? c->hold_batch : KT__CUDA_HOLD_BATCH;
    uint32_t batch = kept;
    int shrunk = 0, full_held = 0; /* this call halved the size; a full batch of the current size held */
    for (uint32_t done = 0; !rc && (done < trials || (trials == 0 && done == 0));) {
        uint32_t n = trials - done < batch ? trials - done : batch;
        uint64_t ns = 0;
        int gave_up = 0;
        rc = hold_run(c, &k, n, &ns, &gave_up);
        if (!rc && gave_up && n > 1) {
            /* too many launches queued behind the spin kernel (or enqueuing was slow): the batch ran partly
             * unheld, so it is not counted; half as many trials per hold (kept for later calls once it held) */
            batch = n / 2;
            shrunk = 1;
            full_held = 0;
            continue;
        }
        if (!rc && !gave_up && n == batch)
            full_held = 1;
        if (!rc && gave_up) {
            kt__cuda_set_error(0, "kt_cuda_time_held: the stream was held for %llu ms without being released, with "
                                  "%u trial%s per hold: the enqueue callback waits on the held stream (a "
                                  "synchronisation, a blocking copy, a free), one trial enqueues more launches than "
                                  "the driver's launch queue holds (cuLaunchKernel then blocks before the release), or "
                                  "enqueuing one trial took that long (set hold_timeout_ms for a slow callback)",
                               (unsigned long long)(hold_timeout_ns(&k, n) / 1000000u), n, n == 1 ? "" : "s");
            rc = KT_ETIMEDOUT;
            break;
        }
        total += ns;
        done += n;
        if (n == 0)
            break;
    }
    if (!rc && shrunk && full_held) { /* a smaller size proved to hold: later calls start from it */
        c->hold_batch = batch;
        c->hold_good = 0;
    } else if (!rc && !shrunk && full_held && kept < KT__CUDA_HOLD_BATCH &&
               ++c->hold_good >= KT__CUDA_HOLD_REGROW) { /* held at the kept size for a while: try twice as many */
        c->hold_batch = kept * 2 < KT__CUDA_HOLD_BATCH ? kept * 2 : KT__CUDA_HOLD_BATCH;
        c->hold_good = 0;
    }
    kt__cuda_ctx_leave(pushed);
    pthread_mutex_unlock(&c->hold_lock);
    if (!rc)
        *duration_ns = total;
    return rc;
}

int kt_cuda_harness_run(void *user, uint32_t trials, uint64_t *duration_ns)
{
    return kt_cuda_time_held((const kt_cuda_held_t *)user, trials, duration_ns);
}
