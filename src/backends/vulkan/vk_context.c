/* vk_context.c — Vulkan contexts: creation and destruction, the registry of live contexts that the core's flush
 * and stop walk, device loss and statistics. The top of the backend: it calls vk_collect.c, vk_submit.c,
 * vk_clock.c and vk_ring.c; nothing in the folder calls it. */
#include "backends/vulkan/vk_internal.h"
#include "core/internal.h"
#include "core/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KT__VK_RING_MAX (1u << 20)

static void flush_all(uint64_t deadline_ns);
static void stop_all(uint64_t deadline_ns);

/* ---------------------------------------------------------------------------------------------------
 * Registry of live contexts, the collector's step over them (vk_collect.c runs it), the core's flush / stop
 * ------------------------------------------------------------------------------------------------- */

static kt__ctx_set_t g_set = KT__CTX_SET_INIT;                   /* every live context */
/* Held by the collector's step for its whole walk: kt_vk_ctx_destroy takes it once after removing a context from
 * the set, so on return from that the collector is not looking at the context (a pin may still list it). */
static pthread_mutex_t g_step_lock = PTHREAD_MUTEX_INITIALIZER;
static kt__backend_life_t g_life = KT__BACKEND_LIFE_INIT;
static const kt__backend_ops_t kOps = {.name = "Vulkan", .flush = flush_all, .stop = stop_all, .life = &g_life};

/* Thread readback: one pass over every context with slots outstanding (or a pass asked for). Naps the shortest
 * poll period while results are outstanding, otherwise until kt_vk_end or a flush wakes it. */
static int collector_step(void *arg)
{
    (void)arg;
    uint64_t nap = 0;
    kt__ctx_pin_t pin;
    pthread_mutex_lock(&g_step_lock);
    kt__ctx_set_pin(&g_set, &pin, KT__CTX_PIN_LIVE);
    for (size_t i = 0; i < pin.n; i++) {
        kt_vk_ctx_t *c = pin.ctx[i];
        if (c->copy_readback || atomic_load(&c->lost))
            continue;
        pthread_mutex_lock(&c->lock);
        if (c->closed_unread || c->pass_requested) {
            c->pass_requested = 0;
            kt__vk_poll_pass_locked(c, VK_NULL_HANDLE);
            c->passes++;
            pthread_cond_broadcast(&c->pass_done);
        }
        if (c->closed_unread && (!nap || c->poll_ns < nap))
            nap = c->poll_ns;
        pthread_mutex_unlock(&c->lock);
    }
    kt__ctx_set_unpin(&pin);
    pthread_mutex_unlock(&g_step_lock);
    kt__vk_collector_nap(nap);
    return 0;
}

static int live_add(kt_vk_ctx_t *ctx)
{
    if (kt__ctx_set_add(&g_set, ctx) != 0)
        return KT_ENOMEM;
    kt__backend_arm(&kOps); /* again after a stop (kt_shutdown, then use after kt_init) */
    if (!ctx->copy_readback && kt__vk_collector_start(collector_step) != 0)
        return KT_ENOMEM;
    return 0;
}

/* Unlinks ctx; on return the collector is not looking at it. */
static void live_remove(kt_vk_ctx_t *ctx)
{
    kt__ctx_set_remove(&g_set, ctx);
    pthread_mutex_lock(&g_step_lock); /* a step that pinned it before has finished */
    pthread_mutex_unlock(&g_step_lock);
}

/* kt_flush / kt_snapshot: what has completed by now (a fresh pass, bounded by the deadline), recorded. Slots of
 * command buffers not submitted yet are left alone: waiting for them would cost every snapshot its deadline. */
static void flush_all(uint64_t deadline_ns)
{
    /* Contexts are destroyed by their owner, never by a flush; the owner must not destroy one while calling
     * kt_flush concurrently (the same rule as for every other call on a context). */
    kt__ctx_pin_t pin;
    kt__ctx_set_pin(&g_set, &pin, KT__CTX_PIN_LIVE);
    for (size_t i = 0; i < pin.n; i++) {
        kt_vk_ctx_t *c = pin.ctx[i];
        if (atomic_load(&c->stopped))
            continue;
        kt__vk_wait_fresh_pass(c, deadline_ns);
        kt_vk_collect(c);
    }
    kt__ctx_set_unpin(&pin);
}

/* Slots not read yet, counted as dropped and released: at stop (KT_DROP_IN_FLIGHT_AT_EXIT), device loss, or
 * kt_vk_ctx_destroy. At destroy the timed work has finished (the destroy rule), so a slot still unread never ran
 * (its end never recorded, or its command buffer never submitted: `reason`) unless a poll saw one of its two
 * timestamps available and never both: the driver lost the other (`half_read_reason`; lavapipe replaces query
 * objects on its queue thread while vkGetQueryPoolResults reads them). Never freed silently. */
static uint64_t drop_pending(kt_vk_ctx_t *ctx, kt_drop_reason_t reason, kt_drop_reason_t half_read_reason)
{
    uint64_t n = 0;
    pthread_mutex_lock(&ctx->lock);
    /* per_submission: each execution's record stands for itself; a batch's slot goes with its record, and a
     * slot copied by the records of its submissions has nothing of its own left to read. */
    for (uint32_t k = 0; k < ctx->exec_used; k++) {
        uint32_t e = (ctx->exec_head + k) % ctx->exec_cap;
        if (ctx->execs[e].state == KT__VK_EXEC_PENDING) { /* submitted: it ran, or was lost, unread */
            kt_record_drop(ctx->execs[e].kernel, half_read_reason);
            kt__vk_exec_free_locked(ctx, e);
            n++;
        }
    }
    kt__vk_exec_reclaim_locked(ctx);
    kt__vk_lost_occ_release_locked(ctx, VK_NULL_HANDLE); /* counted in ctx->dropped there */
    uint32_t i = ctx->used_first;
    while (i != KT__VK_NONE) {
        kt__vk_slot_t *s = &ctx->slots[i];
        uint32_t next = s->next;
        /* (a one-time primary's pair is read through its own words once armed: in flight like a dispatch) */
        if ((s->submission && !s->self_copy) || (s->executions && !s->self_copy) || s->unused) {
            kt__vk_slot_release_locked(ctx, i);
        } else if (s->state != KT__VK_SLOT_READY) { /* a one-time primary's slot armed by its submission: ran */
            kt_record_drop(s->kernel, s->own_copy && s->self_copy ? half_read_reason
                                                                   : kt__vk_unread_reason(s, half_read_reason, reason));
            kt__vk_slot_release_locked(ctx, i);
            n++;
        }
        i = next;
    }
    pthread_mutex_unlock(&ctx->lock);
    atomic_fetch_add(&ctx->dropped, n);
    return n;
}

/* Whether ctx still has slots whose values have not reached the host. */
static int outstanding(kt_vk_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    int any = 0;
    for (uint32_t i = ctx->used_first; i != KT__VK_NONE && !any; i = ctx->slots[i].next) {
        const kt__vk_slot_t *s = &ctx->slots[i];
        /* per_submission: a primary's slot is read through its executions' records, never by itself */
        any = s->state != KT__VK_SLOT_READY && !(ctx->per_submit && !s->self_copy);
    }
    any |= ctx->exec_pending != 0;
    pthread_mutex_unlock(&ctx->lock);
    return any;
}

/* The contexts stop_all waits for (pinned, not stopped before) and its deadline. */
typedef struct kt__vk_stop_t {
    kt_vk_ctx_t **ctx;
    size_t n;
    uint64_t deadline_ns;
} kt__vk_stop_t;

/* One stop pass (kt__drain): a fresh poll and a collection of every context; returns how many still have slots
 * in flight. */
static uint64_t stop_pass(void *arg)
{
    const kt__vk_stop_t *st = arg;
    uint64_t busy = 0;
    for (size_t i = 0; i < st->n; i++) {
        kt__vk_wait_fresh_pass(st->ctx[i], st->deadline_ns);
        kt_vk_collect(st->ctx[i]);
        busy += (uint64_t)outstanding(st->ctx[i]);
    }
    return busy;
}

/* kt_shutdown / exit: wait (until the deadline, polling every 200 us) for every slot in flight, record it, count
 * the rest as dropped (in flight at exit), stop the collector. Flushes return at once afterwards. */
static void stop_all(uint64_t deadline_ns)
{
    kt__ctx_pin_t pin;
    kt__ctx_set_pin(&g_set, &pin, KT__CTX_PIN_LIVE);
    kt__vk_stop_t st = {.ctx = (kt_vk_ctx_t **)pin.ctx, .n = 0, .deadline_ns = deadline_ns};
    for (size_t i = 0; i < pin.n; i++) /* in place: the pin's copy is the caller's */
        if (!atomic_load(&st.ctx[i]->stopped))
            st.ctx[st.n++] = st.ctx[i];
    const kt__drain_policy_t every_200us = {0, 200000u, 200000u};
    kt__drain_with(deadline_ns, stop_pass, &st, &every_200us, NULL);
    for (size_t i = 0; i < st.n; i++) {
        kt_vk_collect(st.ctx[i]);
        drop_pending(st.ctx[i], KT_DROP_IN_FLIGHT_AT_EXIT, KT_DROP_IN_FLIGHT_AT_EXIT);
        atomic_store(&st.ctx[i]->stopped, 1);
    }
    kt__ctx_set_unpin(&pin);
    kt__vk_collector_stop();
}

/* ---------------------------------------------------------------------------------------------------
 * Creation and destruction
 * ------------------------------------------------------------------------------------------------- */
static void destroy_objects(kt_vk_ctx_t *ctx)
{
    kt__vk_clock_fini(ctx);
    kt__vk_ring_fini(ctx);
    for (uint32_t i = 0; i < KT__VK_NAME_CACHE; i++)
        free(ctx->names[i].copy);
    free(ctx->open);
    pthread_mutex_destroy(&ctx->sub_lock);
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->model_lock);
    pthread_mutex_destroy(&ctx->collect_lock);
    pthread_cond_destroy(&ctx->pass_done);
    free(ctx);
}

/* A zeroed context with its locks and the desc's plain settings. */
static kt_vk_ctx_t *ctx_alloc(const kt_vk_desc_t *desc)
{
    kt_vk_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return NULL;
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->model_lock, NULL);
    pthread_mutex_init(&ctx->collect_lock, NULL);
    pthread_mutex_init(&ctx->sub_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ctx->pass_done, &ca);
    pthread_condattr_destroy(&ca);
    ctx->instance = desc->instance;
    ctx->physical_device = desc->physical_device;
    ctx->device = desc->device;
    ctx->queue = desc->queue;
    ctx->cal_queue = desc->queue;
    ctx->queue_family = desc->queue_family;
    ctx->cap = desc->ring_size ? desc->ring_size : KT_VK_RING_DEFAULT;
    ctx->recalibrate_ns = desc->recalibrate_ns ? desc->recalibrate_ns : UINT64_C(1000000000);
    ctx->poll_ns = (uint64_t)(desc->poll_us ? desc->poll_us : 500u) * 1000u;
    ctx->used_first = ctx->used_last = KT__VK_NONE;
    ctx->per_submit = desc->per_submission != 0;
    ctx->set_loader_data = desc->set_device_loader_data;
    /* two executions of a recording that holds every slot can be in flight at once */
    ctx->exec_cap = ctx->per_submit ? 2 * ctx->cap : 0;
    return ctx;
}

/* Device name, timestamp period and valid bits of the timed family; the readback mode. */
static int query_device(kt_vk_ctx_t *ctx, const kt_vk_desc_t *desc)
{
    const kt__vk_table_t *vk = &ctx->vk;
    VkPhysicalDeviceProperties props;
    vk->vkGetPhysicalDeviceProperties(ctx->physical_device, &props);
    snprintf(ctx->device_name, sizeof(ctx->device_name), "%.127s",
             desc->device_label && *desc->device_label ? desc->device_label : props.deviceName);
    kt__vk_device_register(ctx, desc, &props); /* before anything is interned or registered under its key */
    ctx->period_ns = props.limits.timestampPeriod > 0 ? (double)props.limits.timestampPeriod : 1.0;
    /* A batch ends once all its work has: BOTTOM_OF_PIPE says so on every device. lavapipe (llvmpipe) runs a
     * batch's commands one after another on its queue thread and takes a TOP_OF_PIPE timestamp when the
     * rasterizer scene it was put in runs, after everything recorded before it; for any other stage it first
     * flushes that scene, one more rasterizer round trip per batch (docs/vulkan.md, "Submit-and-wait latency"). */
    ctx->stamps_at_flush =
        props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && !strncmp(props.deviceName, "llvmpipe", 8);
#ifdef KT_VK_TEST_HOOKS
    /* KTIMING_VULKAN_SCENE_STAMPS=0: lavapipe timed as any other device, the path every GPU takes (correct there
     * too, one rasterizer round trip slower per batch): how the tests run that path without a GPU. A test hook:
     * compiled only into builds with the tests (KTIMING_BUILD_TESTS), absent from release builds. */
    const char *scene = kt__env(KT_ENV_NAME(VULKAN_SCENE_STAMPS));
    if (scene && !strcmp(scene, "0"))
        ctx->stamps_at_flush = 0;
#endif
    ctx->batch_end_stage =
        ctx->stamps_at_flush ? VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT : VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT;

    uint32_t nfam = 0;
    vk->vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical_device, &nfam, NULL);
    if (ctx->queue_family >= nfam)
        return KT_EINVAL;
    VkQueueFamilyProperties *fam = calloc(nfam, sizeof(*fam));
    if (!fam)
        return KT_ENOMEM;
    vk->vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical_device, &nfam, fam);
    VkQueueFamilyProperties qf = fam[ctx->queue_family];
    free(fam);
    /* Timestamps need valid bits; reading them back with vkCmdCopyQueryPoolResults needs a compute or
     * graphics queue. */
    if (!(qf.queueFlags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)))
        return KT_EUNAVAILABLE;
    if (qf.timestampValidBits == 0) {
        /* A family without timestamps (the spec allows it): an untimed context, whose kt_vk_begin counts each
         * dispatch dropped, `no timing`, rather than no context and the dispatches silently untimed (issue
         * 37.4). No ring, no clock, nothing submitted. */
        ctx->untimed = 1;
        ctx->per_submit = 0;
        ctx->exec_cap = 0;
        ctx->copy_readback = 1; /* no collector thread */
        ctx->copy_at_end = 0;
        return 0;
    }
    ctx->family_valid_bits = qf.timestampValidBits;
    ctx->valid_bits = qf.timestampValidBits;
    if (desc->timestamp_valid_bits && desc->timestamp_valid_bits < ctx->valid_bits)
        ctx->valid_bits = desc->timestamp_valid_bits;
    if (ctx->valid_bits < 8)
        return KT_EINVAL;
    /* hostQueryReset cannot be queried as enabled: the application says so and ktiming needs the entry. */
    ctx->host_reset = desc->host_query_reset && vk->reset_query_pool != NULL;
    /* Polling needs every query reset once before its first use (the collector may look at a slot before its
     * command buffer runs): on the host, or by a submission on desc.queue. Without either, use copies. */
    int cpu_device = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    ctx->copy_readback = desc->readback == KT_VK_READBACK_COPY ||
                         (desc->readback == KT_VK_READBACK_AUTO && cpu_device) || !(ctx->host_reset || ctx->queue) ||
                         ctx->per_submit;
    /* per_submission: kt_vk_end records no copy; kt_vk_queue_submit copies a primary's slots per execution and
     * kt_vk_cmd_end a secondary's once */
    ctx->copy_at_end = ctx->copy_readback && (desc->copy_at_end || ctx->per_submit);
    return 0;
}

int kt_vk_ctx_create(const kt_vk_desc_t *desc, kt_vk_ctx_t **out)
{
    if (!out)
        return KT_EINVAL;
    *out = NULL;
    kt__vk_create_error_clear();
    if (!desc || !desc->instance || !desc->physical_device || !desc->device)
        return KT_EINVAL;
    if (desc->ring_size > KT__VK_RING_MAX)
        return KT_EINVAL;
    PFN_vkGetInstanceProcAddr gipa = desc->get_instance_proc_addr ? desc->get_instance_proc_addr : kt_vk_loader();
    if (!gipa)
        return KT_EUNAVAILABLE;
    kt_vk_ctx_t *ctx = ctx_alloc(desc);
    if (!ctx)
        return KT_ENOMEM;
    int rc = kt__vk_table_load(&ctx->vk, gipa, desc->instance, desc->physical_device, desc->device,
                               desc->calibration);
    if (!rc)
        rc = query_device(ctx, desc);
    if (!rc && !ctx->untimed)
        rc = kt__vk_ring_create(ctx);
    if (!rc && ctx->per_submit)
        rc = kt__vk_submit_init(ctx);
    if (rc)
        goto fail;
    if (desc->label)
        snprintf(ctx->queue_label, sizeof(ctx->queue_label), "%s", desc->label);
    else
        snprintf(ctx->queue_label, sizeof(ctx->queue_label), "queue family %u", ctx->queue_family);
    ctx->queue_id = kt_queue_register(KT_BACKEND_VULKAN, ctx->device_key, ctx->queue_label);
    if (ctx->queue) { /* desc.queue's track is the context's own */
        ctx->lanes[0].queue = ctx->queue;
        ctx->lanes[0].id = ctx->queue_id;
        ctx->nlanes = 1;
    }
    rc = ctx->untimed ? 0 : kt__vk_clock_init(ctx);
    if (rc)
        goto fail;
    kt__vk_publish(ctx);
    rc = live_add(ctx);
    if (rc) {
        live_remove(ctx);
        goto fail;
    }
    *out = ctx;
    return 0;

fail:
    kt__vk_submit_fini(ctx);
    destroy_objects(ctx);
    return rc;
}

void kt_vk_ctx_destroy(kt_vk_ctx_t *ctx)
{
    if (!ctx)
        return;
    live_remove(ctx); /* the collector thread no longer looks at it */
    if (!ctx->copy_readback) {
        /* The timed work has finished (the destroy rule), so a last pass here cannot wait long. */
        pthread_mutex_lock(&ctx->lock);
        kt__vk_poll_pass_locked(ctx, VK_NULL_HANDLE);
        pthread_mutex_unlock(&ctx->lock);
    }
    kt_vk_collect(ctx);
    pthread_mutex_lock(&ctx->collect_lock); /* wait out a collect still running on another thread */
    pthread_mutex_unlock(&ctx->collect_lock);
    drop_pending(ctx, KT_DROP_NEVER_SUBMITTED, KT_DROP_READ_FAILED);
    kt__vk_submit_fini(ctx);
    destroy_objects(ctx);
}

int kt_vk_device_lost(kt_vk_ctx_t *ctx)
{
    if (!ctx)
        return KT_EINVAL;
    atomic_store(&ctx->lost, 1);
    atomic_store(&ctx->last_error, (int)VK_ERROR_DEVICE_LOST);
    kt_vk_collect(ctx); /* what reached the host before the loss is real */
    return (int)drop_pending(ctx, KT_DROP_DEVICE_LOST, KT_DROP_DEVICE_LOST);
}

VkResult kt_vk_last_error(kt_vk_ctx_t *ctx)
{
    return (VkResult)(ctx ? atomic_load(&ctx->last_error) : kt__vk_create_error());
}

/* ---------------------------------------------------------------------------------------------------
 * Introspection
 * ------------------------------------------------------------------------------------------------- */

int kt_vk_stats(kt_vk_ctx_t *ctx, kt_vk_stats_t *out)
{
    if (!ctx || !out)
        return KT_EINVAL;
    memset(out, 0, sizeof(*out));
    out->begun = atomic_load(&ctx->begun);
    out->collected = atomic_load(&ctx->collected);
    out->dropped = atomic_load(&ctx->dropped);
    out->discarded = atomic_load(&ctx->discarded);
    out->collect_calls = atomic_load(&ctx->collect_calls);
    out->collect_max_ns = atomic_load(&ctx->collect_max_ns);
    out->recalibrations = atomic_load(&ctx->recalibrations);
    out->polls = atomic_load(&ctx->polls);
    out->direct_batches = atomic_load(&ctx->direct_batches);
    out->readback = ctx->copy_readback ? KT_VK_READBACK_COPY : KT_VK_READBACK_THREAD;
    pthread_mutex_lock(&ctx->lock);
    out->pending = ctx->used;
    pthread_mutex_unlock(&ctx->lock);
    out->ring_size = ctx->cap;
    out->valid_bits = ctx->valid_bits;
    out->period_ns = ctx->period_ns;
    out->host_query_reset = ctx->host_reset;
    pthread_mutex_lock(&ctx->model_lock);
    out->calibrated = ctx->calibrated;
    out->host_domain = ctx->host_domain;
    out->device_domain = ctx->device_domain;
    pthread_mutex_unlock(&ctx->model_lock);
    return 0;
}
