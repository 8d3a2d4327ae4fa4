/* vk_clock.c — Vulkan device clock: counter unwrapping, calibrated-timestamp or bracketed sampling, model fits.
 * Calls vk_ring.c only (the calibration query's copy); called by vk_collect.c, vk_submit.c and vk_context.c. */
#include "backends/vulkan/vk_internal.h"
#include "core/service.h"

#include <math.h>
#include <string.h>

#define KT__VK_FULL_SAMPLES 16u   /* samples of a full calibration */
#define KT__VK_BURST 4u           /* calibrated samples per periodic refit (the tightest one is kept) */
#define KT__VK_RETRIES 3u         /* extra attempts per sample when a read fails or is too loose */
#define KT__VK_MAX_DEVIATION_NS 1000000u /* a calibrated sample looser than this is retried */
#define KT__VK_FENCE_TIMEOUT_NS UINT64_C(1000000000)
#define KT__VK_EARLY_SLACK_NS 1000.0  /* a bound grown past 2x its value at the fit plus this is refitted early */
#define KT__VK_EARLY_MIN_NS UINT64_C(1000000) /* at most one early refit per ms */

static int create_bracketing(kt_vk_ctx_t *ctx);
static int bound_widened_locked(const kt_vk_ctx_t *ctx, uint64_t now_dom);

/* ---------------------------------------------------------------------------------------------------
 * Device timeline
 * ------------------------------------------------------------------------------------------------- */

/* Unwrapped ticks to device ns, in integer arithmetic (absolute device times reach 2^60 ns and more). */
static uint64_t ext_to_ns(const kt_vk_ctx_t *ctx, int64_t ext)
{
    if (ext >= 0) {
        uint64_t d = kt__vk_ticks_to_ns((uint64_t)ext, ctx->period_ns);
        return d > UINT64_MAX - ctx->base_ns ? UINT64_MAX : ctx->base_ns + d;
    }
    uint64_t d = kt__vk_ticks_to_ns((uint64_t)0 - (uint64_t)ext, ctx->period_ns);
    return d >= ctx->base_ns ? 0 : ctx->base_ns - d;
}

/* Host time (ktiming timeline) to the model's host domain. */
static int to_model_domain(const kt_vk_ctx_t *ctx, uint64_t host_ns, uint64_t *out)
{
    if (ctx->host_domain == KT_DOMAIN_MONOTONIC_RAW) {
        *out = host_ns;
        return 0;
    }
    return kt_clock_domain_convert(host_ns, KT_DOMAIN_MONOTONIC_RAW, ctx->host_domain, out, NULL);
}

/* Unwrapped ticks of raw; host_dom_ns (model host domain, 0 = none) predicts where it should land. */
static int64_t unwrap_locked(kt_vk_ctx_t *ctx, uint64_t raw, uint64_t host_dom_ns)
{
    uint64_t pred = 0;
    if (host_dom_ns && ctx->have_model && kt_clock_to_device(&ctx->model, host_dom_ns, &pred, NULL) == 0) {
        double ext = ((double)pred - (double)ctx->base_ns) / ctx->period_ns;
        if (fabs(ext) < 9e18)
            return kt__vk_unwrap_near(&ctx->unwrap, raw, (int64_t)llround(ext));
    }
    return kt__vk_unwrap(&ctx->unwrap, raw);
}

uint64_t kt__vk_device_ns_locked(kt_vk_ctx_t *ctx, uint64_t raw, uint64_t host_ref_ns)
{
    uint64_t dom = 0;
    if (host_ref_ns && to_model_domain(ctx, host_ref_ns, &dom) != 0)
        dom = 0;
    return ext_to_ns(ctx, unwrap_locked(ctx, raw, dom));
}

int kt__vk_map_locked(kt_vk_ctx_t *ctx, uint64_t device_ns, uint64_t *host_ns, uint64_t *uncertainty_ns)
{
    if (!ctx->have_model)
        return KT_ESTATE;
    uint64_t h = 0, u = 0;
    int rc = kt_clock_to_host(&ctx->model, device_ns, &h, &u);
    if (rc)
        return rc;
    if (ctx->host_domain != KT_DOMAIN_MONOTONIC_RAW) {
        uint64_t h2 = 0, u2 = 0;
        rc = kt_clock_domain_convert(h, ctx->host_domain, KT_DOMAIN_MONOTONIC_RAW, &h2, &u2);
        if (rc)
            return rc;
        h = h2;
        u += u2;
    }
    *host_ns = h;
    if (uncertainty_ns)
        *uncertainty_ns = u;
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Reading the device clock
 * ------------------------------------------------------------------------------------------------- */

/* One VK_*_calibrated_timestamps read: raw device ticks, host ns in the model's domain, maxDeviation (ns). */
static int read_calibrated(kt_vk_ctx_t *ctx, uint64_t *raw, uint64_t *host, uint64_t *max_dev)
{
    VkCalibratedTimestampInfoEXT info[2] = {
        {.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, .timeDomain = VK_TIME_DOMAIN_DEVICE_EXT},
        {.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, .timeDomain = ctx->cal_host_domain},
    };
    uint64_t ts[2] = {0, 0}, dev = 0;
    if (ctx->vk.get_calibrated(ctx->device, host ? 2 : 1, info, ts, &dev) != VK_SUCCESS)
        return KT_EBACKEND;
    *raw = ts[0];
    if (host)
        *host = ts[1];
    if (max_dev)
        *max_dev = dev;
    return 0;
}

/* Records cal_cmd (not pending: the caller checked cal_pending) to write one timestamp into the calibration
 * query and copy it to its readback words, which are zeroed (model_lock held). */
static int record_sample(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    uint32_t q = 2 * ctx->cap;
    uint64_t *w = ctx->words + (size_t)ctx->cap * KT__VK_WORDS_PER_SLOT;
    if (kt__vk_cmd_restart(ctx, ctx->cal_cmd) != 0)
        return KT_EBACKEND;
    vk->vkCmdResetQueryPool(ctx->cal_cmd, ctx->pool, q, 1);
    vk->vkCmdWriteTimestamp(ctx->cal_cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, ctx->pool, q);
    kt__vk_copy_results(ctx, ctx->cal_cmd, q, 1, (VkDeviceSize)ctx->cap * 32);
    kt__vk_host_barrier(ctx, ctx->cal_cmd);
    if (vk->vkEndCommandBuffer(ctx->cal_cmd) != VK_SUCCESS)
        return KT_EBACKEND;
    __atomic_store_n(&w[0], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&w[1], 0, __ATOMIC_RELAXED);
    return 0;
}

/* The sample's raw timestamp once its copy has landed (model_lock held, its fence signalled). */
static int sample_value(kt_vk_ctx_t *ctx, uint64_t *raw)
{
    const uint64_t *w = ctx->words + (size_t)ctx->cap * KT__VK_WORDS_PER_SLOT;
    if (!__atomic_load_n(&w[1], __ATOMIC_ACQUIRE))
        return KT_EBACKEND;
    *raw = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
    return 0;
}

/* A sample submitted without a wait, still pending, is waited for and given up (model_lock held): only the
 * explicit calls that wait by contract (context creation with desc.queue, kt_vk_recalibrate, destroy) get here. */
static void settle_pending(kt_vk_ctx_t *ctx)
{
    if (!ctx->cal_pending)
        return;
    if (ctx->vk.vkWaitForFences(ctx->device, 1, &ctx->cal_fence, VK_TRUE, KT__VK_FENCE_TIMEOUT_NS) != VK_SUCCESS)
        return; /* still pending: left alone (cal_cmd is not re-recorded while cal_pending) */
    ctx->vk.vkResetFences(ctx->device, 1, &ctx->cal_fence);
    ctx->cal_pending = 0;
}

/* One timestamp written by a tiny submission on cal_queue and read back after its fence (model_lock held). Used
 * only where ktiming's own call may wait: kt_vk_ctx_create with desc.queue and kt_vk_recalibrate. */
static int read_submitted(kt_vk_ctx_t *ctx, uint64_t *raw)
{
    const kt__vk_table_t *vk = &ctx->vk;
    settle_pending(ctx);
    if (ctx->cal_pending || record_sample(ctx) != 0)
        return KT_EBACKEND;
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &ctx->cal_cmd,
    };
    if (vk->vkQueueSubmit(ctx->cal_queue, 1, &si, ctx->cal_fence) != VK_SUCCESS)
        return KT_EBACKEND;
    ctx->cal_pending = 1;
    VkResult wr = vk->vkWaitForFences(ctx->device, 1, &ctx->cal_fence, VK_TRUE, KT__VK_FENCE_TIMEOUT_NS);
    if (wr != VK_SUCCESS) /* still pending: never re-recorded until its fence is seen signalled */
        return wr == VK_TIMEOUT ? KT_ETIMEDOUT : KT_EBACKEND;
    vk->vkResetFences(ctx->device, 1, &ctx->cal_fence);
    ctx->cal_pending = 0;
    return sample_value(ctx, raw);
}

/* kt_device_clock_read_cb over either method: device ns on the model's device timeline, 0 on failure. */
static uint64_t read_device_cb(void *user)
{
    kt_vk_ctx_t *ctx = user;
    uint64_t raw = 0;
    uint64_t before = kt_clock_now(ctx->host_domain);
    int rc = ctx->calibrated ? read_calibrated(ctx, &raw, NULL, NULL) : read_submitted(ctx, &raw);
    if (rc)
        return 0;
    uint64_t ns = ext_to_ns(ctx, unwrap_locked(ctx, raw, before));
    return ns ? ns : 1;
}

/* ---------------------------------------------------------------------------------------------------
 * Fitting
 * ------------------------------------------------------------------------------------------------- */

/* Hand samples to the tracker (which refits when due) and cache its current model. */
static int tracker_add(kt_vk_ctx_t *ctx, const kt_clock_sample_t *s, size_t n, int force_fit)
{
    int rc = kt_clock_tracker_add(ctx->tracker, s, n);
    if (force_fit)
        rc = kt_clock_tracker_refit(ctx->tracker);
    kt_clock_model_t m;
    if (kt_clock_tracker_model(ctx->tracker, &m) == 0) {
        ctx->model = m;
        ctx->have_model = 1;
    }
    return rc;
}

/* One calibrated sample, retried (bounded) when the read fails or its deviation is too large. */
static int sample_calibrated(kt_vk_ctx_t *ctx, kt_clock_sample_t *out)
{
    for (uint32_t attempt = 0; attempt <= KT__VK_RETRIES; attempt++) {
        uint64_t raw = 0, host = 0, dev = 0;
        if (read_calibrated(ctx, &raw, &host, &dev) != 0 || dev > KT__VK_MAX_DEVIATION_NS || host <= dev)
            continue;
        /* maxDeviation bounds how far apart the two reads were: it is the sample's bracket. */
        out->device_ns = ext_to_ns(ctx, unwrap_locked(ctx, raw, host));
        out->host_before_ns = host - dev;
        out->host_after_ns = host + dev;
        return 0;
    }
    return KT_EBACKEND;
}

int kt__vk_clock_refit_locked(kt_vk_ctx_t *ctx, int full)
{
    kt_clock_sample_t s[KT__VK_FULL_SAMPLES];
    size_t n = 0;
    if (ctx->calibrated) {
        uint32_t reads = full ? KT__VK_FULL_SAMPLES : KT__VK_BURST;
        for (uint32_t i = 0; i < reads; i++) {
            kt_clock_sample_t one;
            if (sample_calibrated(ctx, &one) != 0)
                continue;
            if (full || n == 0)
                s[n++] = one;
            else if (one.host_after_ns - one.host_before_ns < s[0].host_after_ns - s[0].host_before_ns)
                s[0] = one; /* periodic: keep the tightest of the burst */
        }
    } else {
        if (!ctx->cal_queue || !ctx->cal_cmd)
            return KT_EUNAVAILABLE;
        int rc = kt_clock_sample(read_device_cb, ctx, ctx->host_domain, s, KT__VK_FULL_SAMPLES);
        if (rc)
            return rc;
        n = KT__VK_FULL_SAMPLES;
    }
    ctx->last_fit_ns = kt_now_ns(); /* also after a failure: retried next period, not on every collect */
    if (n == 0)
        return KT_EBACKEND;
    int rc = tracker_add(ctx, s, n, full);
    if (rc == 0)
        atomic_fetch_add(&ctx->recalibrations, 1);
    return rc;
}

void kt__vk_clock_maybe_refit(kt_vk_ctx_t *ctx)
{
    if (!ctx->calibrated) {
        kt__vk_clock_bracket_poll(ctx);
        return;
    }
    uint64_t since = kt_now_ns() - ctx->last_fit_ns;
    if (since < KT__VK_EARLY_MIN_NS)
        return;
    pthread_mutex_lock(&ctx->model_lock);
    int rc = 1;
    since = kt_now_ns() - ctx->last_fit_ns;
    if (since >= ctx->recalibrate_ns) {
        rc = kt__vk_clock_refit_locked(ctx, 0);
    } else if (since >= KT__VK_EARLY_MIN_NS && bound_widened_locked(ctx, kt_clock_now(ctx->host_domain))) {
        /* young fit, wide drift interval: one more sample and a fit over the longer span now */
        rc = kt__vk_clock_refit_locked(ctx, 0);
        if (rc == 0 && kt_clock_tracker_refit(ctx->tracker) == 0) {
            kt_clock_model_t m;
            if (kt_clock_tracker_model(ctx->tracker, &m) == 0)
                ctx->model = m;
        }
    }
    pthread_mutex_unlock(&ctx->model_lock);
    if (rc == 0)
        kt__vk_publish(ctx);
}

/* ---------------------------------------------------------------------------------------------------
 * Setup
 * ------------------------------------------------------------------------------------------------- */

static void choose_calibrated(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    if (!vk->get_calibrated || !vk->get_domains)
        return;
    VkTimeDomainEXT doms[16];
    uint32_t n = 16;
    VkResult r = vk->get_domains(ctx->physical_device, &n, doms);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return;
    int dev = 0, raw = 0, mono = 0;
    for (uint32_t i = 0; i < n; i++) {
        dev |= doms[i] == VK_TIME_DOMAIN_DEVICE_EXT;
        raw |= doms[i] == VK_TIME_DOMAIN_CLOCK_MONOTONIC_RAW_EXT;
        mono |= doms[i] == VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
    }
    if (!dev || !(raw || mono))
        return;
    ctx->calibrated = 1;
    ctx->cal_host_domain = raw ? VK_TIME_DOMAIN_CLOCK_MONOTONIC_RAW_EXT : VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
    ctx->host_domain = raw ? KT_DOMAIN_MONOTONIC_RAW : KT_DOMAIN_MONOTONIC;
}

static int create_bracketing(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = ctx->queue_family,
    };
    if (vk->vkCreateCommandPool(ctx->device, &pci, NULL, &ctx->cal_pool) != VK_SUCCESS)
        return KT_EBACKEND;
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = ctx->cal_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    if (vk->vkAllocateCommandBuffers(ctx->device, &ai, &ctx->cal_cmd) != VK_SUCCESS)
        return KT_EBACKEND;
    if (ctx->set_loader_data && ctx->set_loader_data(ctx->device, ctx->cal_cmd) != VK_SUCCESS)
        return KT_EBACKEND; /* under a layer: the loader's dispatch data, or the command buffer is unusable */
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (vk->vkCreateFence(ctx->device, &fci, NULL, &ctx->cal_fence) != VK_SUCCESS)
        return KT_EBACKEND;
    return 0;
}

int kt__vk_clock_init(kt_vk_ctx_t *ctx)
{
    ctx->host_domain = KT_DOMAIN_MONOTONIC_RAW;
    ctx->device_domain = KT_DOMAIN_UNKNOWN;
    ctx->cal_domain = KT_DOMAIN_UNKNOWN;
    choose_calibrated(ctx);
    if (!ctx->calibrated && ctx->queue) {
        int rc = create_bracketing(ctx);
        if (rc)
            return rc;
    }
    kt_clock_tracker_desc_t td = {0};
    td.capacity = 64;
    td.refit_interval_ns = ctx->recalibrate_ns;
    /* Short rings cannot measure a device oscillator's drift better than its specification: fix it at 0 and
     * let the bound grow with the prior instead of extrapolating a noisy slope. */
    td.drift_prior_ppm = 100.0;
    int rc = kt_clock_tracker_create(ctx->calibrated ? KT_FIT_WEIGHTED : KT_FIT_ROBUST, ctx->host_domain, &td,
                                     &ctx->tracker);
    if (rc)
        return rc;
    uint64_t base = 0;
    rc = KT_EUNAVAILABLE;
    if (ctx->calibrated)
        rc = read_calibrated(ctx, &base, NULL, NULL);
    else if (ctx->cal_cmd)
        rc = read_submitted(ctx, &base);
    kt__vk_unwrap_init(&ctx->unwrap, ctx->valid_bits, base);
    ctx->base_ns = kt__vk_ticks_to_ns(ctx->unwrap.base_raw, ctx->period_ns);
    if (rc)
        return 0; /* no way to read the device clock: durations only, spans unplaced */

    pthread_mutex_lock(&ctx->model_lock);
    kt_clock_domain_t dom = KT_DOMAIN_UNKNOWN;
    if (kt_clock_detect_domain(read_device_cb, ctx, 0, &dom, NULL) == 0)
        ctx->device_domain = dom;
    kt__vk_clock_refit_locked(ctx, 1);
    pthread_mutex_unlock(&ctx->model_lock);
    return 0;
}

void kt__vk_clock_fini(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    kt_clock_tracker_destroy(ctx->tracker);
    ctx->tracker = NULL;
    if (ctx->cal_fence) /* a sample still in flight is waited for (bounded) before its objects go */
        settle_pending(ctx);
    if (ctx->cal_fence)
        vk->vkDestroyFence(ctx->device, ctx->cal_fence, NULL);
    if (ctx->cal_pool)
        vk->vkDestroyCommandPool(ctx->device, ctx->cal_pool, NULL);
    ctx->cal_fence = VK_NULL_HANDLE;
    ctx->cal_pool = VK_NULL_HANDLE;
    ctx->cal_cmd = VK_NULL_HANDLE;
}

/* An offset-only model from one bracketed sample (model_lock held): until the tracker has the samples a fit needs
 * (KT_CLOCK_MIN_SAMPLES), spans are placed by the tightest sample so far, drift 0 and the bound growing from its
 * half-width at the drift limit, so a program with few submissions still gets placed spans. */
static void offset_model_locked(kt_vk_ctx_t *ctx, const kt_clock_sample_t *s)
{
    kt_clock_model_t m;
    memset(&m, 0, sizeof m);
    double half = (double)(s->host_after_ns - s->host_before_ns) / 2.0;
    m.host_domain = ctx->host_domain;
    m.strategy = KT_FIT_ROBUST;
    m.device_ref_ns = m.device_first_ns = m.device_fitted_at_ns = s->device_ns;
    m.host_ref_ns = m.host_first_ns = m.fitted_at_ns = s->host_before_ns + (s->host_after_ns - s->host_before_ns) / 2;
    m.bracket_ns = half;
    m.error_ns = half + 1.0;
    m.max_drift_ppm = KT_CLOCK_DEFAULT_MAX_DRIFT_PPM;
    m.drift_bound_ppm = KT_CLOCK_DRIFT_LIMIT_PPM; /* one sample says nothing of the rate */
    m.drift_k = 3.0;
    m.samples = m.inliers = 1;
    ctx->model = m;
    ctx->have_model = 1;
}

/* Whether the bound at host time now (model domain) has grown well past the bound at the fit: a young fit's
 * drift interval is wide (a few samples over a short span), so its extrapolation widens fast. Refitting then,
 * rather than only every recalibrate_ns, keeps the first second's spans as tight as the later ones. */
static int bound_widened_locked(const kt_vk_ctx_t *ctx, uint64_t now_dom)
{
    if (!ctx->have_model)
        return 0;
    double at_fit = ctx->model.error_ns;
    return kt_clock_error_at(&ctx->model, now_dom) > 2.0 * at_fit + KT__VK_EARLY_SLACK_NS;
}

/* The host domain a bracketed sample's device time lies in (its bracket converted there, with the conversion's
 * uncertainty and 1 us of slack), KT_DOMAIN_DEVICE for none. A device counter with an epoch of its own never
 * lands inside a bracket of a host clock by chance (they differ by seconds or more); lavapipe's is CLOCK_MONOTONIC. */
static kt_clock_domain_t sample_domain(const kt_clock_sample_t *s)
{
    static const kt_clock_domain_t kCandidates[2] = {KT_DOMAIN_MONOTONIC, KT_DOMAIN_MONOTONIC_RAW};
    for (int i = 0; i < 2; i++) {
        uint64_t lo = s->host_before_ns, hi = s->host_after_ns, ulo = 0, uhi = 0;
        if (kCandidates[i] != KT_DOMAIN_MONOTONIC_RAW &&
            (kt_clock_domain_convert(s->host_before_ns, KT_DOMAIN_MONOTONIC_RAW, kCandidates[i], &lo, &ulo) != 0 ||
             kt_clock_domain_convert(s->host_after_ns, KT_DOMAIN_MONOTONIC_RAW, kCandidates[i], &hi, &uhi) != 0))
            continue;
        uint64_t slack = 1000 + (ulo > uhi ? ulo : uhi);
        if (s->device_ns + slack >= lo && s->device_ns <= hi + slack)
            return kCandidates[i];
    }
    return KT_DOMAIN_DEVICE;
}

/* Which model a new bracketed sample leaves (model_lock held): while every sample so far lay in one host domain,
 * the device clock IS that domain (identity model, mapped to the timeline by the live domain conversion, as
 * calibrated lavapipe is): exact from the first sample, and never moving between batches. Otherwise a fit of
 * the tracker's samples, or an offset-only model until it has enough. */
static void bracket_model_locked(kt_vk_ctx_t *ctx, const kt_clock_sample_t *one)
{
    kt_clock_domain_t d = sample_domain(one);
    if (ctx->cal_domain == KT_DOMAIN_UNKNOWN)
        ctx->cal_domain = d;
    else if (ctx->cal_domain != d)
        ctx->cal_domain = KT_DOMAIN_DEVICE; /* contradicted: fitted from now on */
    kt_clock_model_t m;
    if (ctx->cal_domain != KT_DOMAIN_DEVICE && kt_clock_model_identity(ctx->cal_domain, 1, &m) == 0) {
        ctx->host_domain = ctx->cal_domain;
        ctx->device_domain = ctx->cal_domain;
        ctx->model = m;
        ctx->have_model = 1;
        return;
    }
    ctx->host_domain = KT_DOMAIN_MONOTONIC_RAW;
    ctx->device_domain = KT_DOMAIN_DEVICE;
    if (kt_clock_tracker_model(ctx->tracker, &m) == 0) {
        ctx->model = m;
        ctx->have_model = 1;
    } else {
        offset_model_locked(ctx, &ctx->cal_best);
    }
}

void kt__vk_clock_bracket_poll(kt_vk_ctx_t *ctx)
{
    if (ctx->calibrated)
        return;
    int fitted = 0;
    pthread_mutex_lock(&ctx->model_lock);
    if (ctx->cal_pending && ctx->vk.vkGetFenceStatus(ctx->device, ctx->cal_fence) == VK_SUCCESS) {
        uint64_t after = kt_clock_now(KT_DOMAIN_MONOTONIC_RAW), raw = 0; /* brackets: the tracker's domain */
        ctx->vk.vkResetFences(ctx->device, 1, &ctx->cal_fence);
        ctx->cal_pending = 0;
        if (sample_value(ctx, &raw) == 0 && after > ctx->cal_before_ns) {
            /* the timestamp was written after the submission began and before its fence was seen signalled */
            kt_clock_sample_t one = {
                .device_ns = ext_to_ns(ctx, unwrap_locked(ctx, raw, 0)),
                .host_before_ns = ctx->cal_before_ns,
                .host_after_ns = after,
            };
            if (!ctx->cal_taken++ ||
                one.host_after_ns - one.host_before_ns < ctx->cal_best.host_after_ns - ctx->cal_best.host_before_ns)
                ctx->cal_best = one;
            if (ctx->cal_burst)
                ctx->cal_burst--;
            int done = ctx->cal_burst == 0;
            if (kt_clock_tracker_add(ctx->tracker, &one, 1) == 0 && done)
                kt_clock_tracker_refit(ctx->tracker);
            bracket_model_locked(ctx, &one);
            if (done) {
                ctx->last_fit_ns = kt_now_ns();
                atomic_fetch_add(&ctx->recalibrations, 1);
            }
            fitted = 1;
        }
    }
    pthread_mutex_unlock(&ctx->model_lock);
    if (fitted)
        kt__vk_publish(ctx);
}

void kt__vk_clock_bracket_submit(kt_vk_ctx_t *ctx, VkQueue queue, int (*seen_idle)(kt_vk_ctx_t *))
{
    if (ctx->calibrated || !queue)
        return;
    kt__vk_clock_bracket_poll(ctx);
    pthread_mutex_lock(&ctx->model_lock);
    uint64_t now = kt_now_ns();
    if (!ctx->cal_burst && !ctx->cal_pending &&
        (!ctx->have_model || now - ctx->last_fit_ns >= ctx->recalibrate_ns ||
         (now - ctx->last_fit_ns >= KT__VK_EARLY_MIN_NS && bound_widened_locked(ctx, kt_clock_now(ctx->host_domain))))) {
        ctx->cal_burst = ctx->have_model ? KT__VK_BURST : KT__VK_FULL_SAMPLES;
        ctx->cal_stuck_ns = 0;
    }
    if (ctx->cal_burst && !ctx->cal_pending && !ctx->cal_pool)
        create_bracketing(ctx); /* once: a failure leaves what it made for kt__vk_clock_fini */
    if (!ctx->cal_burst || ctx->cal_pending || !ctx->cal_cmd || !ctx->cal_fence) {
        pthread_mutex_unlock(&ctx->model_lock);
        return;
    }
    /* A sample queued behind the application's work would be as wide as that work: taken when the queue was
     * seen idle, or, when it never is, after a period of waiting for that (a wide bracket is still a true one). */
    int idle = seen_idle(ctx); /* only when a sample is due: it walks the slots (lock order: model_lock, lock) */
    if (!idle && !ctx->cal_stuck_ns)
        ctx->cal_stuck_ns = now;
    if (!idle && now - ctx->cal_stuck_ns < ctx->recalibrate_ns) {
        pthread_mutex_unlock(&ctx->model_lock);
        return;
    }
    ctx->cal_stuck_ns = 0;
    if (record_sample(ctx) == 0) {
        VkSubmitInfo si = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
            .commandBufferCount = 1,
            .pCommandBuffers = &ctx->cal_cmd,
        };
        ctx->cal_before_ns = kt_clock_now(KT_DOMAIN_MONOTONIC_RAW);
        if (ctx->vk.vkQueueSubmit(queue, 1, &si, ctx->cal_fence) == VK_SUCCESS)
            ctx->cal_pending = 1;
        else
            ctx->cal_burst = 0, ctx->last_fit_ns = now; /* tried again a period later, not on every submission */
    }
    pthread_mutex_unlock(&ctx->model_lock);
}

/* ---------------------------------------------------------------------------------------------------
 * Public clock functions
 * ------------------------------------------------------------------------------------------------- */

int kt_vk_recalibrate(kt_vk_ctx_t *ctx)
{
    if (!ctx)
        return KT_EINVAL;
    if (ctx->untimed)
        return KT_EUNAVAILABLE;
    if (!ctx->calibrated && !ctx->cal_cmd)
        return KT_EUNAVAILABLE;
    pthread_mutex_lock(&ctx->model_lock);
    int rc = kt__vk_clock_refit_locked(ctx, 1);
    pthread_mutex_unlock(&ctx->model_lock);
    if (rc == 0)
        kt__vk_publish(ctx);
    return rc;
}

int kt_vk_timestamp_to_host(kt_vk_ctx_t *ctx, uint64_t timestamp, uint64_t *host_ns, uint64_t *uncertainty_ns)
{
    if (!ctx || !host_ns)
        return KT_EINVAL;
    if (ctx->untimed)
        return KT_EUNAVAILABLE;
    pthread_mutex_lock(&ctx->model_lock);
    uint64_t dev = kt__vk_device_ns_locked(ctx, timestamp, kt_now_ns());
    int rc = kt__vk_map_locked(ctx, dev, host_ns, uncertainty_ns);
    pthread_mutex_unlock(&ctx->model_lock);
    return rc;
}

int kt_vk_device_info(kt_vk_ctx_t *ctx, kt_device_info_t *out)
{
    if (!ctx || !out)
        return KT_EINVAL;
    memset(out, 0, sizeof(*out));
    out->backend = KT_BACKEND_VULKAN;
    snprintf(out->name, sizeof(out->name), "%.127s", ctx->device_name);
    snprintf(out->key, sizeof(out->key), "%s", ctx->device_key); /* the registered identity */
    out->resolution_ns = (uint64_t)ceil(ctx->period_ns);
    out->frequency_hz = (uint64_t)llround(1e9 / ctx->period_ns);
    out->valid_bits = ctx->valid_bits;
    pthread_mutex_lock(&ctx->model_lock);
    snprintf(out->clock_domain, sizeof(out->clock_domain), "%s", kt_clock_domain_name(ctx->device_domain));
    if (ctx->have_model) {
        uint64_t now = kt_clock_now(ctx->host_domain);
        out->error_bound_ns = (uint64_t)ceil(kt_clock_error_at(&ctx->model, now));
        out->drift_ppm = ctx->model.drift_ppm;
        out->model_samples = ctx->model.samples;
    }
    pthread_mutex_unlock(&ctx->model_lock);
    return 0;
}

void kt__vk_publish(kt_vk_ctx_t *ctx)
{
    kt_device_info_t info;
    if (kt_vk_device_info(ctx, &info) != 0)
        return;
    pthread_mutex_lock(&ctx->model_lock);
    kt_clock_model_t m = ctx->model;
    int have = ctx->have_model;
    uint64_t now = kt_clock_now(ctx->host_domain);
    pthread_mutex_unlock(&ctx->model_lock);
    kt__device_publish_model(&info, have ? &m : NULL, now);
}
