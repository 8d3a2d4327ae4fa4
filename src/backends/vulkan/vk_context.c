/* vk_context.c — Vulkan contexts: the timestamp ring, begin/end recording, non-blocking collection, flush. */
#include "backends/vulkan/vk_internal.h"
#include "core/internal.h"
#include "core/service.h"
#include "export/escape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KT__VK_RING_MAX (1u << 20)
#define KT__VK_COLLECT_BATCH 128u
#define KT__VK_POLL_CHUNK 128u    /* slots per vkGetQueryPoolResults call of the collector */

static int poll_pass_locked(kt_vk_ctx_t *ctx, VkCommandBuffer only);
static void flush_all(uint64_t deadline_ns);
static void stop_all(uint64_t deadline_ns);

/* ---------------------------------------------------------------------------------------------------
 * Registry of live contexts, the one collector thread (thread readback) and the core's flush / stop
 * ------------------------------------------------------------------------------------------------- */

static pthread_mutex_t g_live_lock = PTHREAD_MUTEX_INITIALIZER; /* the list; held by the collector's step */
static kt_vk_ctx_t *g_live;
static kt__collector_t g_collector = KT__COLLECTOR_INIT;         /* polls every thread-readback context */
static const kt__backend_ops_t kOps = {.name = "Vulkan", .flush = flush_all, .stop = stop_all};

/* Thread readback: one pass over every context with slots outstanding (or a pass asked for). Naps the shortest
 * poll period while results are outstanding, otherwise until kt_vk_end or a flush wakes it. */
static int collector_step(void *arg)
{
    (void)arg;
    uint64_t nap = 0;
    pthread_mutex_lock(&g_live_lock);
    for (kt_vk_ctx_t *c = g_live; c; c = c->next_live) {
        if (c->copy_readback || atomic_load(&c->lost))
            continue;
        pthread_mutex_lock(&c->lock);
        if (c->closed_unread || c->pass_requested) {
            c->pass_requested = 0;
            poll_pass_locked(c, VK_NULL_HANDLE);
            c->passes++;
            pthread_cond_broadcast(&c->pass_done);
        }
        if (c->closed_unread && (!nap || c->poll_ns < nap))
            nap = c->poll_ns;
        pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_unlock(&g_live_lock);
    g_collector.nap_ns = nap; /* read by the collector thread itself, after this step */
    return 0;
}

static int live_add(kt_vk_ctx_t *ctx)
{
    pthread_mutex_lock(&g_live_lock);
    ctx->next_live = g_live;
    g_live = ctx;
    pthread_mutex_unlock(&g_live_lock);
    kt__backend_register(&kOps); /* again after a stop (kt_shutdown, then use after kt_init) */
    if (!ctx->copy_readback && kt__collector_start(&g_collector, "kt-vulkan", collector_step, NULL, 0) != 0)
        return KT_ENOMEM;
    return 0;
}

/* Unlinks ctx; on return the collector is not looking at it. */
static void live_remove(kt_vk_ctx_t *ctx)
{
    pthread_mutex_lock(&g_live_lock);
    for (kt_vk_ctx_t **p = &g_live; *p; p = &(*p)->next_live)
        if (*p == ctx) {
            *p = ctx->next_live;
            break;
        }
    pthread_mutex_unlock(&g_live_lock);
}

/* Thread readback: ask for passes and wait (until the deadline, kt_now_ns time) for one that began after this
 * call, or until nothing is outstanding. */
static void wait_fresh_pass(kt_vk_ctx_t *ctx, uint64_t deadline_ns)
{
    if (ctx->copy_readback || !kt__collector_running(&g_collector))
        return;
    pthread_mutex_lock(&ctx->lock);
    uint64_t target = ctx->passes + 2; /* the next pass may have begun before the caller's work completed */
    while (ctx->closed_unread && ctx->passes < target) {
        uint64_t now = kt_now_ns();
        if (now >= deadline_ns)
            break;
        ctx->pass_requested = 1;
        pthread_mutex_unlock(&ctx->lock);
        kt__collector_wake(&g_collector);
        pthread_mutex_lock(&ctx->lock);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t step = deadline_ns - now < 10000000u ? deadline_ns - now : 10000000u;
        uint64_t ns = (uint64_t)ts.tv_nsec + step;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&ctx->pass_done, &ctx->lock, &ts);
    }
    pthread_mutex_unlock(&ctx->lock);
}

/* Up to `max` live contexts from position `start` of the live list (every context counts for the position,
 * stopped or not, so marking some stopped does not move the others). Returns how many were copied; fewer than
 * max means the list ended. The caller works through a chunk without g_live_lock (a pass waits for the
 * collector, whose step holds it), so any number of contexts is flushed and stopped, never only the first 64. */
#define KT__VK_CHUNK 64u
static size_t live_chunk(size_t start, kt_vk_ctx_t **out, size_t max)
{
    size_t n = 0, at = 0;
    pthread_mutex_lock(&g_live_lock);
    for (kt_vk_ctx_t *c = g_live; c && n < max; c = c->next_live, at++)
        if (at >= start)
            out[n++] = c;
    pthread_mutex_unlock(&g_live_lock);
    return n;
}

/* kt_flush / kt_snapshot: what has completed by now (a fresh pass, bounded by the deadline), recorded. Slots of
 * command buffers not submitted yet are left alone: waiting for them would cost every snapshot its deadline. */
static void flush_all(uint64_t deadline_ns)
{
    /* Contexts are destroyed by their owner, never by a flush; the owner must not destroy one while calling
     * kt_flush concurrently (the same rule as for every other call on a context). */
    kt_vk_ctx_t *list[KT__VK_CHUNK];
    for (size_t start = 0;; start += KT__VK_CHUNK) {
        size_t n = live_chunk(start, list, KT__VK_CHUNK);
        for (size_t i = 0; i < n; i++) {
            if (list[i]->stopped)
                continue;
            wait_fresh_pass(list[i], deadline_ns);
            kt_vk_collect(list[i]);
        }
        if (n < KT__VK_CHUNK)
            break;
    }
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
        if (ctx->execs[e].state == KT__VK_EXEC_PENDING) {
            kt_record_drop_reason(ctx->execs[e].kernel, reason);
            kt__vk_exec_free_locked(ctx, e);
            n++;
        }
    }
    kt__vk_exec_reclaim_locked(ctx);
    uint32_t i = ctx->used_first;
    while (i != KT__VK_NONE) {
        kt__vk_slot_t *s = &ctx->slots[i];
        uint32_t next = s->next;
        /* (a one-time primary's pair is read through its own words once armed: in flight like a dispatch) */
        if ((s->submission && !s->self_copy) || (s->executions && !s->self_copy) || s->unused) {
            kt__vk_slot_release_locked(ctx, i);
        } else if (s->state != KT__VK_SLOT_READY) {
            kt_record_drop_reason(s->kernel, s->half_read ? half_read_reason : reason);
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

/* kt_shutdown / exit: wait (until the deadline) for every slot in flight, record it, count the rest as dropped
 * (in flight at exit), stop the collector. Flushes return at once afterwards. Contexts go in chunks of 64 (each
 * waited for in turn against the one deadline). */
static void stop_all(uint64_t deadline_ns)
{
    kt_vk_ctx_t *list[KT__VK_CHUNK];
    for (size_t start = 0;; start += KT__VK_CHUNK) {
        size_t got = live_chunk(start, list, KT__VK_CHUNK), n = 0;
        for (size_t i = 0; i < got; i++)
            if (!list[i]->stopped)
                list[n++] = list[i];
        for (;;) {
            int busy = 0;
            for (size_t i = 0; i < n; i++) {
                wait_fresh_pass(list[i], deadline_ns);
                kt_vk_collect(list[i]);
                busy |= outstanding(list[i]);
            }
            if (!busy || kt_now_ns() >= deadline_ns)
                break;
            kt__nap_ns(200000);
        }
        for (size_t i = 0; i < n; i++) {
            kt_vk_collect(list[i]);
            drop_pending(list[i], KT_DROP_IN_FLIGHT_AT_EXIT, KT_DROP_IN_FLIGHT_AT_EXIT);
        }
        pthread_mutex_lock(&g_live_lock);
        for (size_t i = 0; i < n; i++)
            list[i]->stopped = 1;
        pthread_mutex_unlock(&g_live_lock);
        if (got < KT__VK_CHUNK)
            break;
    }
    kt__collector_stop(&g_collector);
}

/* ---------------------------------------------------------------------------------------------------
 * Creation and destruction
 * ------------------------------------------------------------------------------------------------- */

/* Thread-local: the VkResult of the last failed driver call of a kt_vk_ctx_create on this thread. */
static _Thread_local int t_create_error;

/* Notes a failed driver call (kt_vk_last_error) and returns the ktiming error for it. */
static int vk_fail(kt_vk_ctx_t *ctx, VkResult r, int rc)
{
    atomic_store(&ctx->last_error, (int)r);
    t_create_error = (int)r;
    return r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? KT_ENOMEM : rc;
}

static int find_memory_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits)
{
    const VkMemoryPropertyFlags need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int best = -1;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if (!(bits & (1u << i)) || (f & need) != need)
            continue;
        if (best < 0 || ((f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) &&
                         !(mp->memoryTypes[best].propertyFlags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)))
            best = (int)i;
    }
    return best;
}

static int create_readback(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    VkDeviceSize size = (VkDeviceSize)(ctx->cap + 1 + ctx->exec_cap) * KT__VK_WORDS_PER_SLOT * sizeof(uint64_t);
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT, /* SRC: occurrence copies */
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = vk->vkCreateBuffer(ctx->device, &bci, NULL, &ctx->buffer);
    if (r != VK_SUCCESS)
        return vk_fail(ctx, r, KT_EBACKEND);
    VkMemoryRequirements mr;
    vk->vkGetBufferMemoryRequirements(ctx->device, ctx->buffer, &mr);
    VkPhysicalDeviceMemoryProperties mp;
    vk->vkGetPhysicalDeviceMemoryProperties(ctx->physical_device, &mp);
    int type = find_memory_type(&mp, mr.memoryTypeBits);
    if (type < 0)
        return KT_EUNAVAILABLE;
    VkMemoryAllocateInfo mai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = mr.size,
        .memoryTypeIndex = (uint32_t)type,
    };
    if ((r = vk->vkAllocateMemory(ctx->device, &mai, NULL, &ctx->memory)) != VK_SUCCESS)
        return vk_fail(ctx, r, KT_ENOMEM);
    if ((r = vk->vkBindBufferMemory(ctx->device, ctx->buffer, ctx->memory, 0)) != VK_SUCCESS)
        return vk_fail(ctx, r, KT_EBACKEND);
    void *map = NULL;
    if ((r = vk->vkMapMemory(ctx->device, ctx->memory, 0, VK_WHOLE_SIZE, 0, &map)) != VK_SUCCESS)
        return vk_fail(ctx, r, KT_EBACKEND);
    ctx->words = map;
    memset(map, 0, (size_t)size);
    return 0;
}

static void destroy_objects(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    kt__vk_clock_fini(ctx);
    if (ctx->words)
        vk->vkUnmapMemory(ctx->device, ctx->memory);
    if (ctx->buffer)
        vk->vkDestroyBuffer(ctx->device, ctx->buffer, NULL);
    if (ctx->memory)
        vk->vkFreeMemory(ctx->device, ctx->memory, NULL);
    if (ctx->pool)
        vk->vkDestroyQueryPool(ctx->device, ctx->pool, NULL);
    for (uint32_t i = 0; i < KT__VK_NAME_CACHE; i++)
        free(ctx->names[i].copy);
    free(ctx->slots);
    free(ctx->open);
    free(ctx->free_q);
    free(ctx->execs);
    pthread_mutex_destroy(&ctx->sub_lock);
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->model_lock);
    pthread_mutex_destroy(&ctx->collect_lock);
    pthread_cond_destroy(&ctx->pass_done);
    free(ctx);
}

/* Reset the whole pool once with a submission on desc.queue (the device lacks or did not enable hostQueryReset). */
static int reset_by_submission(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    VkCommandPool pool = VK_NULL_HANDLE;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    int rc = KT_EBACKEND;
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
        .queueFamilyIndex = ctx->queue_family,
    };
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (vk->vkCreateCommandPool(ctx->device, &pci, NULL, &pool) != VK_SUCCESS)
        return KT_EBACKEND;
    ai.commandPool = pool;
    if (vk->vkAllocateCommandBuffers(ctx->device, &ai, &cmd) == VK_SUCCESS &&
        vk->vkCreateFence(ctx->device, &fci, NULL, &fence) == VK_SUCCESS &&
        vk->vkBeginCommandBuffer(cmd, &bi) == VK_SUCCESS) {
        vk->vkCmdResetQueryPool(cmd, ctx->pool, 0, 2 * ctx->cap + 1);
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
        if (vk->vkEndCommandBuffer(cmd) == VK_SUCCESS && vk->vkQueueSubmit(ctx->queue, 1, &si, fence) == VK_SUCCESS &&
            vk->vkWaitForFences(ctx->device, 1, &fence, VK_TRUE, UINT64_C(10000000000)) == VK_SUCCESS)
            rc = 0;
    }
    if (fence)
        vk->vkDestroyFence(ctx->device, fence, NULL);
    vk->vkDestroyCommandPool(ctx->device, pool, NULL);
    return rc;
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
    ctx->period_ns = props.limits.timestampPeriod > 0 ? (double)props.limits.timestampPeriod : 1.0;
    /* A batch ends once all its work has: BOTTOM_OF_PIPE says so on every device. lavapipe (llvmpipe) runs a
     * batch's commands one after another on its queue thread and takes a TOP_OF_PIPE timestamp when the
     * rasterizer scene it was put in runs, after everything recorded before it; for any other stage it first
     * flushes that scene, one more rasterizer round trip per batch (docs/vulkan.md, "Submit-and-wait latency"). */
    ctx->stamps_at_flush =
        props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && !strncmp(props.deviceName, "llvmpipe", 8);
    /* KTIMING_VULKAN_SCENE_STAMPS=0: lavapipe timed as any other device, the path every GPU takes (correct there
     * too, one rasterizer round trip slower per batch): how the tests run that path without a GPU */
    const char *scene = kt__env("KTIMING_VULKAN_SCENE_STAMPS");
    if (scene && !strcmp(scene, "0"))
        ctx->stamps_at_flush = 0;
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
    if (qf.timestampValidBits == 0 || !(qf.queueFlags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)))
        return KT_EUNAVAILABLE;
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

/* Query pool (reset once), readback buffer and the slot bookkeeping. */
static int create_ring(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    VkQueryPoolCreateInfo qpi = {
        .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
        .queryType = VK_QUERY_TYPE_TIMESTAMP,
        .queryCount = 2 * ctx->cap + 1,
    };
    VkResult r = vk->vkCreateQueryPool(ctx->device, &qpi, NULL, &ctx->pool);
    if (r != VK_SUCCESS)
        return vk_fail(ctx, r, KT_EBACKEND);
    int rc = 0;
    if (ctx->host_reset)
        vk->reset_query_pool(ctx->device, ctx->pool, 0, 2 * ctx->cap + 1);
    else if (!ctx->copy_readback && (rc = reset_by_submission(ctx)) != 0)
        return rc;
    rc = create_readback(ctx);
    if (rc)
        return rc;
    ctx->slots = calloc(ctx->cap, sizeof(*ctx->slots));
    ctx->free_q = calloc(ctx->cap, sizeof(*ctx->free_q));
    if (!ctx->slots || !ctx->free_q)
        return KT_ENOMEM;
    if (ctx->per_submit && (rc = kt__vk_submit_init(ctx)) != 0)
        return rc;
    for (uint32_t i = 0; i < ctx->cap; i++) {
        ctx->free_q[i] = i;
        ctx->slots[i].prev = ctx->slots[i].next = KT__VK_NONE;
        ctx->slots[i].batch_pair = ctx->slots[i].pair_first = KT__VK_NONE;
    }
    return 0;
}

int kt_vk_ctx_create(const kt_vk_desc_t *desc, kt_vk_ctx_t **out)
{
    if (!out)
        return KT_EINVAL;
    *out = NULL;
    t_create_error = VK_SUCCESS;
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
    if (!rc)
        rc = create_ring(ctx);
    if (rc)
        goto fail;
    char label[64];
    if (desc->label)
        snprintf(label, sizeof(label), "%s", desc->label);
    else
        snprintf(label, sizeof(label), "queue family %u", ctx->queue_family);
    ctx->queue_id = kt_queue_register(KT_BACKEND_VULKAN, ctx->device_name, label);
    rc = kt__vk_clock_init(ctx);
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
        poll_pass_locked(ctx, VK_NULL_HANDLE);
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
    return (VkResult)(ctx ? atomic_load(&ctx->last_error) : t_create_error);
}

/* ---------------------------------------------------------------------------------------------------
 * Names
 * ------------------------------------------------------------------------------------------------- */

static kt_kernel_id_t kernel_locked(kt_vk_ctx_t *ctx, const char *name)
{
    uint32_t h = (uint32_t)(((uintptr_t)name >> 3) * 2654435761u) % KT__VK_NAME_CACHE;
    for (uint32_t i = 0; i < KT__VK_NAME_CACHE; i++) {
        kt__vk_name_t *e = &ctx->names[(h + i) % KT__VK_NAME_CACHE];
        if (e->key == name && !strcmp(e->copy, name))
            return e->id;
        if (e->key == name || !e->key) {
            /* New name, or the caller's buffer now holds another string: (re)intern. */
            kt_kernel_id_t id = kt_kernel_intern(name, KT_BACKEND_VULKAN, ctx->device_name);
            char *copy = strdup(name);
            if (!copy)
                return id;
            free(e->copy);
            e->key = name;
            e->copy = copy;
            e->id = id;
            return id;
        }
    }
    return kt_kernel_intern(name, KT_BACKEND_VULKAN, ctx->device_name);
}

kt_kernel_id_t kt_vk_kernel(kt_vk_ctx_t *ctx, const char *name)
{
    if (!ctx || !name)
        return 0;
    pthread_mutex_lock(&ctx->lock);
    kt_kernel_id_t id = kernel_locked(ctx, name);
    pthread_mutex_unlock(&ctx->lock);
    return id;
}

/* ---------------------------------------------------------------------------------------------------
 * Begin / end (hot path)
 * ------------------------------------------------------------------------------------------------- */

/* The open-table entry of cmd; with `add`, a free one for it (the table doubles when full, so any number of
 * command buffers may record at once). NULL when absent, or when it cannot grow (counted by the caller). */
static kt__vk_open_t *open_find(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, int add)
{
    kt__vk_open_t *freee = NULL;
    for (uint32_t i = 0; i < ctx->nopen; i++) {
        if (ctx->open[i].cmd == cmd)
            return &ctx->open[i];
        if (!freee && !ctx->open[i].cmd)
            freee = &ctx->open[i];
    }
    if (!add)
        return NULL;
    if (!freee) {
        uint32_t n = ctx->nopen ? 2 * ctx->nopen : KT__VK_OPEN_INITIAL;
        kt__vk_open_t *grown = realloc(ctx->open, (size_t)n * sizeof(*grown));
        if (!grown)
            return NULL;
        memset(grown + ctx->nopen, 0, (size_t)(n - ctx->nopen) * sizeof(*grown));
        freee = grown + ctx->nopen;
        ctx->open = grown;
        ctx->nopen = n;
    }
    freee->cmd = cmd;
    freee->depth = 0;
    freee->overflow = 0;
    freee->pair = KT__VK_NONE;
    return freee;
}

/* Takes the oldest free slot and appends it to the in-use list; KT__VK_SLOT_DROPPED when none is free. */
uint32_t kt__vk_slot_alloc_locked(kt_vk_ctx_t *ctx)
{
    if (ctx->used == ctx->cap)
        return KT__VK_SLOT_DROPPED;
    uint32_t slot = ctx->free_q[ctx->free_head];
    ctx->free_head = (ctx->free_head + 1) % ctx->cap;
    ctx->used++;
    kt__vk_slot_t *s = &ctx->slots[slot];
    s->prev = ctx->used_last;
    s->next = KT__VK_NONE;
    if (ctx->used_last != KT__VK_NONE)
        ctx->slots[ctx->used_last].next = slot;
    else
        ctx->used_first = slot;
    ctx->used_last = slot;
    return slot;
}

/* A slot leaves the in-use list (read, or given up) and goes to the back of the free FIFO. Its last values read
 * stay in begin_raw/end_raw for the stale check of its next use. */
void kt__vk_slot_release_locked(kt_vk_ctx_t *ctx, uint32_t slot)
{
    kt__vk_slot_t *s = &ctx->slots[slot];
    if (ctx->copy_readback) {
        uint64_t *w = ctx->words + (size_t)slot * KT__VK_WORDS_PER_SLOT;
        for (uint32_t i = 0; i < KT__VK_WORDS_PER_SLOT; i++)
            __atomic_store_n(&w[i], 0, __ATOMIC_RELAXED);
    } else if (s->state == KT__VK_SLOT_CLOSED) {
        ctx->closed_unread--;
    }
    if (s->prev != KT__VK_NONE)
        ctx->slots[s->prev].next = s->next;
    else
        ctx->used_first = s->next;
    if (s->next != KT__VK_NONE)
        ctx->slots[s->next].prev = s->prev;
    else
        ctx->used_last = s->prev;
    s->prev = s->next = KT__VK_NONE;
    s->state = KT__VK_SLOT_FREE;
    s->cmd = NULL;
    s->self_copy = s->submission = s->stage = s->cmd_pair = s->own_copy = s->copy_pending = s->unused = 0;
    s->batch_pair = KT__VK_NONE;
    s->executions = 0;
    ctx->free_q[(ctx->free_head + ctx->cap - ctx->used) % ctx->cap] = slot;
    ctx->used--;
}

/* A one-time primary's own pair (kt_vk_cmd_begin), allocated at its first kt_vk_begin; KT__VK_SLOT_DROPPED when
 * the ring is full (its batch then gets ktiming's own command buffers instead: not a loss). */
static uint32_t pair_alloc_locked(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, uint64_t now)
{
    uint32_t slot = kt__vk_slot_alloc_locked(ctx);
    if (slot == KT__VK_SLOT_DROPPED)
        return slot;
    kt__vk_slot_t *s = &ctx->slots[slot];
    s->state = KT__VK_SLOT_OPEN;
    s->copy_pending = s->half_read = s->self_copy = s->stage = s->own_copy = s->unused = 0;
    s->submission = s->cmd_pair = 1; /* never one of the dispatches a batch's plan copies */
    s->batch_pair = s->pair_first = KT__VK_NONE;
    s->executions = 0;
    s->gen++;
    s->kernel = ctx->submit_kernel;
    s->cmd = cmd;
    s->enqueue_ns = now;
    s->thread = kt_thread_ordinal();
    return slot;
}

/* *pair_out: a pair made by this begin (the command buffer's first) that needs a reset recorded, and with
 * *pair_stamp its own begin timestamp (not on stamps_at_flush devices, where it takes this dispatch's). */
static int begin_locked(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, kt_kernel_id_t kernel, uint64_t now,
                        uint32_t *slot_out, uint32_t *pair_out, int *pair_stamp)
{
    kt__vk_open_t *o = open_find(ctx, cmd, 1);
    *slot_out = KT__VK_SLOT_DROPPED;
    *pair_out = KT__VK_NONE;
    *pair_stamp = 0;
    if (!o) {
        ctx->orphans++; /* the open table could not grow */
        return KT_EFULL;
    }
    if (o->pair == KT__VK_PAIR_WANTED && o->depth == 0) { /* the command buffer's first begin: its pair now */
        o->pair = KT__VK_NONE;
        uint32_t p = pair_alloc_locked(ctx, cmd, now);
        if (p != KT__VK_SLOT_DROPPED)
            *pair_out = p;
    }
    if (o->depth >= KT_VK_MAX_NESTING) {
        o->overflow++;
        return KT_EFULL;
    }
    uint32_t slot = kt__vk_slot_alloc_locked(ctx);
    if (slot != KT__VK_SLOT_DROPPED) {
        kt__vk_slot_t *s = &ctx->slots[slot];
        s->state = KT__VK_SLOT_OPEN;
        s->copy_pending = 0;
        s->half_read = 0;
        s->self_copy = s->submission = s->stage = s->cmd_pair = s->own_copy = s->unused = 0;
        s->batch_pair = KT__VK_NONE;
        s->executions = 0;
        s->gen++;
        s->kernel = kernel;
        s->cmd = cmd;
        s->enqueue_ns = now;
        s->thread = kt_thread_ordinal();
    }
    o->stack[o->depth++] = slot;
    *slot_out = slot;
    if (*pair_out != KT__VK_NONE) {
        /* lavapipe: the pair's begin is this dispatch's begin timestamp (kt_vk_cmd_begin says why) */
        if (ctx->stamps_at_flush && slot != KT__VK_SLOT_DROPPED)
            ctx->slots[*pair_out].pair_first = slot;
        else
            *pair_stamp = 1;
    }
    return slot == KT__VK_SLOT_DROPPED ? KT_EFULL : 0;
}

static int begin_common(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, kt_kernel_id_t kernel, const char *name)
{
    if (!ctx || !cmd)
        return KT_EINVAL;
    if (!kt_is_enabled())
        return 0;
    uint64_t now = kt_now_ns();
    uint32_t slot, pair;
    int pair_stamp;
    pthread_mutex_lock(&ctx->lock);
    if (name)
        kernel = kernel_locked(ctx, name);
    int rc = begin_locked(ctx, cmd, kernel, now, &slot, &pair, &pair_stamp);
    pthread_mutex_unlock(&ctx->lock);
    if (pair != KT__VK_NONE) {
        ctx->vk.vkCmdResetQueryPool(cmd, ctx->pool, 2 * pair, 2);
        /* TOP_OF_PIPE, as the batch timestamp of ktiming's own first command buffer (record_plan in vk_submit.c) */
        if (pair_stamp)
            ctx->vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, ctx->pool, 2 * pair);
    }
    if (rc) {
        atomic_fetch_add(&ctx->dropped, 1);
        kt_record_drop_reason(kernel, KT_DROP_RING_FULL);
        return rc;
    }
    atomic_fetch_add(&ctx->begun, 1);
    /* Reset in the command buffer, not on the host after reading: a host reset is only valid once the whole
     * submission that wrote the queries has completed, which ktiming cannot know without the app's fence. */
    ctx->vk.vkCmdResetQueryPool(cmd, ctx->pool, 2 * slot, 2);
    /* COMPUTE_SHADER, not TOP_OF_PIPE: a timestamp at a stage is written once every earlier command has
     * completed that stage, so the begin waits for the previous dispatch's shaders instead of being taken while
     * they still run (GPUs that write TOP_OF_PIPE timestamps from the command processor). */
    ctx->vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, ctx->pool, 2 * slot);
    return 0;
}

int kt_vk_begin(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, const char *name)
{
    if (!name)
        return KT_EINVAL;
    return begin_common(ctx, cmd, 0, name);
}

int kt_vk_begin_id(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, kt_kernel_id_t kernel)
{
    return begin_common(ctx, cmd, kernel, NULL);
}

void kt__vk_copy_results(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, uint32_t first, uint32_t count, VkDeviceSize dst)
{
    ctx->vk.vkCmdCopyQueryPoolResults(cmd, ctx->pool, first, count, ctx->buffer, dst, 2 * sizeof(uint64_t),
                                      VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT |
                                          VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
}

/* Copy mode: the slot's two results into its words of the readback buffer. */
static void record_copy(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, uint32_t slot)
{
    kt__vk_copy_results(ctx, cmd, 2 * slot, 2, (VkDeviceSize)slot * KT__VK_WORDS_PER_SLOT * sizeof(uint64_t));
}

void kt__vk_host_barrier(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
    };
    ctx->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL,
                                 0, NULL);
}

int kt_vk_end(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    if (!ctx || !cmd)
        return KT_EINVAL;
    int wake = 0;
    pthread_mutex_lock(&ctx->lock);
    kt__vk_open_t *o = open_find(ctx, cmd, 0);
    if (o && o->overflow) {
        o->overflow--;
        pthread_mutex_unlock(&ctx->lock);
        return 0;
    }
    if (!o || o->depth == 0) {
        int orphan = ctx->orphans > 0;
        if (orphan)
            ctx->orphans--;
        pthread_mutex_unlock(&ctx->lock);
        /* A begin dropped for lack of a table entry, or made while recording was disabled: nothing to close. */
        return (orphan || !kt_is_enabled()) ? 0 : KT_ESTATE;
    }
    uint32_t slot = o->stack[--o->depth];
    if (o->depth == 0)
        o->cmd = NULL;
    if (slot != KT__VK_SLOT_DROPPED) {
        ctx->slots[slot].state = KT__VK_SLOT_CLOSED;
        ctx->slots[slot].copy_pending = ctx->copy_at_end;
        if (!ctx->copy_readback)
            wake = ctx->closed_unread++ == 0;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (slot == KT__VK_SLOT_DROPPED)
        return 0;
    if (wake)
        kt__collector_wake(&g_collector);

    const kt__vk_table_t *vk = &ctx->vk;
    vk->vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, ctx->pool, 2 * slot + 1);
    if (!ctx->copy_readback || ctx->copy_at_end)
        return 0;
    record_copy(ctx, cmd, slot);
    kt__vk_host_barrier(ctx, cmd);
    return 0;
}

int kt_vk_cmd_begin(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    if (!ctx || !cmd)
        return KT_EINVAL;
    if (!ctx->per_submit || !ctx->copy_readback || !ctx->copy_at_end || !kt_is_enabled())
        return 0;
    /* Only a mark: the pair is made at the command buffer's first kt_vk_begin (begin_locked), so a recording
     * with no timed dispatch holds no slot (per-frame command buffers that only fill or copy pinned the ring and
     * the open table: 3 of 300 dispatches timed with 3 frames of 30 such buffers in flight).
     *
     * lavapipe takes a TOP_OF_PIPE timestamp when the rasterizer scene it joined runs. Written at the start,
     * the pair's begin would be taken at the flush the first dispatch's begin timestamp makes, in a scene of its
     * own: one more rasterizer round trip per batch (bench/vulkan_latency: timed/floor 1.3-1.6 against 1.2-1.3).
     * There the pair's begin is the begin timestamp of the command buffer's first kt_vk_begin (pair_first);
     * elsewhere a TOP_OF_PIPE timestamp of its own right before it. The batch span starts with its first timed
     * dispatch either way. */
    pthread_mutex_lock(&ctx->lock);
    kt__vk_open_t *o = open_find(ctx, cmd, 1);
    if (o && o->depth == 0)
        o->pair = KT__VK_PAIR_WANTED;
    pthread_mutex_unlock(&ctx->lock);
    return o ? 0 : KT_ENOMEM; /* not a loss: a batch of it gets ktiming's own command buffers instead */
}

int kt_vk_cmd_end(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    if (!ctx || !cmd)
        return KT_EINVAL;
    if (!ctx->copy_at_end)
        return 0;
    uint32_t n = 0, pair = KT__VK_NONE;
    pthread_mutex_lock(&ctx->lock);
    /* A one-time primary with its own pair (kt_vk_cmd_begin): the pair ends after everything recorded, and the
     * copies wait to be read until a submission arms them (own_copy), so a recording never submitted is not
     * waited for at exit. Without a pair (a secondary, or copy mode): read as soon as the copy lands. */
    for (uint32_t i = ctx->used_first; i != KT__VK_NONE && pair == KT__VK_NONE; i = ctx->slots[i].next)
        if (ctx->slots[i].cmd == cmd && ctx->slots[i].cmd_pair && ctx->slots[i].state == KT__VK_SLOT_OPEN)
            pair = i;
    /* The slots stay in use while we record: collection releases a slot only once its copy has run. */
    for (uint32_t i = ctx->used_first; i != KT__VK_NONE; i = ctx->slots[i].next) {
        kt__vk_slot_t *s = &ctx->slots[i];
        if (s->cmd != cmd || !s->copy_pending || s->stage || s->submission)
            continue;
        if (!n && pair != KT__VK_NONE)
            ctx->vk.vkCmdWriteTimestamp(cmd, ctx->batch_end_stage, ctx->pool, 2 * pair + 1);
        s->copy_pending = 0;
        if (pair != KT__VK_NONE)
            s->own_copy = 1;
        else
            s->self_copy = 1;
        record_copy(ctx, cmd, i);
        n++;
    }
    if (n && pair != KT__VK_NONE) { /* a pair around no timed dispatch stays OPEN: unused, released at discard */
        kt__vk_slot_t *ps = &ctx->slots[pair];
        ps->state = KT__VK_SLOT_CLOSED;
        ps->own_copy = 1;
        VkDeviceSize at = (VkDeviceSize)pair * KT__VK_WORDS_PER_SLOT * sizeof(uint64_t);
        if (ps->pair_first == KT__VK_NONE) {
            record_copy(ctx, cmd, pair);
        } else { /* begin: the first dispatch's begin; end: the pair's own */
            kt__vk_copy_results(ctx, cmd, 2 * ps->pair_first, 1, at);
            kt__vk_copy_results(ctx, cmd, 2 * pair + 1, 1, at + 2 * sizeof(uint64_t));
        }
    }
    kt__vk_open_t *o = open_find(ctx, cmd, 0); /* a pair asked for and never made: no timed dispatch */
    if (o && o->depth == 0 && o->pair == KT__VK_PAIR_WANTED)
        o->cmd = NULL;
    pthread_mutex_unlock(&ctx->lock);
    if (n)
        kt__vk_host_barrier(ctx, cmd);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Collection
 * ------------------------------------------------------------------------------------------------- */

/* A completed slot copied out of the ring. */
typedef struct kt__vk_done_t {
    kt_kernel_id_t kernel; /* what was timed */
    uint32_t thread;       /* recording thread */
    uint64_t enqueue_ns;   /* host time of the begin */
    uint64_t begin_raw;    /* device timestamps */
    uint64_t end_raw;
    uint32_t begin_as;     /* index of the entry of this pass whose begin is the same device timestamp (a direct
                              batch's pair, for its first dispatch), mapped once for both; KT__VK_NONE: none */
} kt__vk_done_t;

/* Copy mode: both availability words of the slot's copied results are set. */
/* Copy readback: whether both values have landed. The availability words alone do not say so for a read made
 * before the application's fence wait: lavapipe's copy was seen to store an availability before its value (end
 * read as 0 with its availability set, 11 of 640 dispatches of test_vk_threads, recorded as 584-year
 * durations before the sanity check). The words are zeroed at release and a timestamp is never 0 in practice,
 * so a value still 0 means "not yet". */
static int words_landed(const uint64_t *w)
{
    return __atomic_load_n(&w[1], __ATOMIC_ACQUIRE) != 0 && __atomic_load_n(&w[3], __ATOMIC_ACQUIRE) != 0 &&
           __atomic_load_n(&w[0], __ATOMIC_ACQUIRE) != 0 && __atomic_load_n(&w[2], __ATOMIC_ACQUIRE) != 0;
}

static int slot_copied(const kt_vk_ctx_t *ctx, uint32_t slot)
{
    return words_landed(ctx->words + (size_t)slot * KT__VK_WORDS_PER_SLOT);
}

/* Whether the pair s still has its first dispatch to be read with: not when that dispatch was read in an earlier
 * pass (its slot released, or taken since by another recording). A pass can read the dispatch without the pair
 * (the dispatch first on the in-use list, the pass full before the pair); the pair then waited for words its
 * released slot no longer held, and the discard of its command buffer counted the batch as never submitted
 * (test_run_vulkan_threads `record_threads`, about 1 run in 100 under TSan on a loaded machine). */
static int pair_first_unread(const kt_vk_ctx_t *ctx, const kt__vk_slot_t *s)
{
    if (s->pair_first == KT__VK_NONE)
        return 0;
    const kt__vk_slot_t *f = &ctx->slots[s->pair_first];
    return f->state != KT__VK_SLOT_FREE && f->batch_pair == (uint32_t)(s - ctx->slots) && f->batch_pair_gen == s->gen;
}

/* A direct batch whose begin is its first dispatch's (lavapipe, pair_first): the pair and that dispatch are read
 * in one pass, neither before the other has landed (the pair's copy is the command buffer's last, and the pair
 * usually comes first on the in-use list, allocated at kt_vk_cmd_begin). The shared begin is then mapped once
 * (begin_as), so the batch span holds its first dispatch to the nanosecond, not only within the clock's bound:
 * the host-domain conversion moves between two calls. */
static int pair_pending(const kt_vk_ctx_t *ctx, const kt__vk_slot_t *s)
{
    if (s->cmd_pair)
        return pair_first_unread(ctx, s) && !slot_copied(ctx, s->pair_first);
    if (s->batch_pair == KT__VK_NONE)
        return 0;
    const kt__vk_slot_t *p = &ctx->slots[s->batch_pair];
    if (p->gen != s->batch_pair_gen || p->state == KT__VK_SLOT_FREE) /* read already */
        return 0;
    return !slot_copied(ctx, s->batch_pair);
}

/* Take up to max completed slots out of the ring (oldest first). *more: stopped early, another pass has work. */
static uint32_t harvest_locked(kt_vk_ctx_t *ctx, kt__vk_done_t *out, uint32_t max, int *more)
{
    *more = 0;
    uint32_t n = 0;
    uint32_t slot = ctx->used_first;
    /* per_submission: the execution records (each a dispatch's or a batch's execution) */
    for (uint32_t k = 0; k < ctx->exec_used && n < max; k++) {
        uint32_t e = (ctx->exec_head + k) % ctx->exec_cap;
        kt__vk_exec_t *x = &ctx->execs[e];
        const uint64_t *w = ctx->words + kt__vk_exec_word(ctx, e);
        if (x->state != KT__VK_EXEC_PENDING || !words_landed(w))
            continue;
        out[n].begin_raw = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
        out[n].end_raw = __atomic_load_n(&w[2], __ATOMIC_RELAXED);
        out[n].begin_as = KT__VK_NONE;
        out[n].kernel = x->kernel;
        out[n].thread = x->thread;
        out[n].enqueue_ns = x->enqueue_ns;
        n++;
        kt__vk_exec_free_locked(ctx, e);
    }
    kt__vk_exec_reclaim_locked(ctx);
    uint32_t firsts[KT__VK_COLLECT_BATCH], first_at[KT__VK_COLLECT_BATCH], nfirsts = 0; /* pair_first -> entry */
    while (slot != KT__VK_NONE && n < max) {
        kt__vk_slot_t *s = &ctx->slots[slot];
        uint32_t next = s->next;
        out[n].begin_as = KT__VK_NONE;
        if (ctx->copy_readback) {
            /* per_submission: only a secondary's own copy is read here; the rest through execution records */
            if (s->state != KT__VK_SLOT_CLOSED || (ctx->per_submit && !s->self_copy) || !slot_copied(ctx, slot) ||
                pair_pending(ctx, s)) {
                slot = next;
                continue;
            }
            if (s->cmd_pair && pair_first_unread(ctx, s)) {
                if (n + 2 > max || nfirsts == KT__VK_COLLECT_BATCH) {
                    *more = 1; /* with its first dispatch, in the next pass */
                    break;
                }
                firsts[nfirsts] = s->pair_first;
                first_at[nfirsts++] = n;
            }
            if (s->unused) { /* a pair its batch did not need: its copy has landed, nothing writes it now */
                kt__vk_slot_release_locked(ctx, slot);
                slot = next;
                continue;
            }
            for (uint32_t f = 0; f < nfirsts && !s->cmd_pair; f++)
                if (firsts[f] == slot)
                    out[n].begin_as = first_at[f];
            const uint64_t *w = ctx->words + (size_t)slot * KT__VK_WORDS_PER_SLOT;
            out[n].begin_raw = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
            out[n].end_raw = __atomic_load_n(&w[2], __ATOMIC_RELAXED);
        } else {
            if (s->state != KT__VK_SLOT_READY) {
                slot = next;
                continue;
            }
            out[n].begin_raw = s->begin_raw;
            out[n].end_raw = s->end_raw;
        }
        out[n].kernel = s->kernel;
        out[n].thread = s->thread;
        out[n].enqueue_ns = s->enqueue_ns;
        n++;
        kt__vk_slot_release_locked(ctx, slot);
        slot = next;
    }
    return n;
}

static pthread_once_t g_verbose_once = PTHREAD_ONCE_INIT;
static int g_verbose; /* KTIMING_VERBOSE contains profile_exec or all (`ktiming run -v`) */

static void read_verbose(void)
{
    const char *v = kt__env("KTIMING_VERBOSE");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v ? v : "");
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        g_verbose |= !strcmp(tok, "profile_exec") || !strcmp(tok, "all");
}

/* One line per recorded dispatch on stderr (the program's stdout stays its own):
 * ktiming,exec,vulkan,<device>,<kernel>,<duration ms>,<start ns or empty>,device */
static void verbose_line(const kt_vk_ctx_t *ctx, const kt_dispatch_t *r)
{
    const kt__kernel_t *k = kt__kernel_get(r->kernel);
    char line[768], dev[160], name[256]; /* the names escaped: no control byte reaches the terminal, no comma */
    kt__escape_field(dev, sizeof dev, ctx->device_name);
    kt__escape_field(name, sizeof name, k ? k->name : "?");
    if (r->start_ns)
        snprintf(line, sizeof line, "ktiming,exec,vulkan,%s,%s,%.6f,%llu,device\n", dev, name,
                 (double)r->duration_ns / 1e6, (unsigned long long)r->start_ns);
    else
        snprintf(line, sizeof line, "ktiming,exec,vulkan,%s,%s,%.6f,,device\n", dev, name,
                 (double)r->duration_ns / 1e6);
    fputs(line, stderr);
}

/* Whether a device duration can be true: a dispatch runs after kt_vk_begin recorded it and before its values
 * were read, so it cannot last longer than the host time between the two (1 % and 100 us of slack for the
 * device's tick period and the host clock). Values a driver or a stray write left in the queries or the readback
 * buffer (a begin of 0, an end from another use) fail it by far. */
static int duration_plausible(uint64_t duration_ns, uint64_t enqueue_ns, uint64_t now_ns)
{
    uint64_t elapsed = now_ns > enqueue_ns ? now_ns - enqueue_ns : 0;
    return duration_ns <= elapsed + elapsed / 100 + 100000u;
}

/* Records what was harvested; returns how many passed the sanity check (the rest are dropped, invalid times). */
static uint32_t record_done(kt_vk_ctx_t *ctx, const kt__vk_done_t *d, uint32_t n)
{
    pthread_once(&g_verbose_once, read_verbose);
    uint32_t kept = 0;
    uint64_t now = kt_now_ns();
    uint64_t starts[KT__VK_COLLECT_BATCH], uncs[KT__VK_COLLECT_BATCH]; /* mapped begins (0: none) */
    pthread_mutex_lock(&ctx->model_lock);
    for (uint32_t i = 0; i < n; i++) {
        starts[i] = uncs[i] = 0;
        kt_dispatch_t r = {0};
        r.kernel = d[i].kernel;
        r.queue = ctx->queue_id;
        r.thread = d[i].thread;
        r.flags = KT_SPAN_DEVICE;
        r.enqueue_ns = d[i].enqueue_ns;
        r.duration_ns = kt__vk_ticks_to_ns(kt__vk_ticks_delta(d[i].begin_raw, d[i].end_raw, ctx->valid_bits),
                                           ctx->period_ns);
        if (!duration_plausible(r.duration_ns, d[i].enqueue_ns, now)) {
            kt_record_drop_reason(d[i].kernel, KT_DROP_INVALID_TIMES);
            atomic_fetch_add(&ctx->dropped, 1);
            continue;
        }
        kept++;
        uint64_t start = 0, unc = 0;
        uint32_t as = d[i].begin_as;
        int mapped = as < i && starts[as] && d[as].begin_raw == d[i].begin_raw;
        if (mapped) {
            start = starts[as];
            unc = uncs[as];
        } else {
            uint64_t dev = kt__vk_device_ns_locked(ctx, d[i].begin_raw, d[i].enqueue_ns);
            mapped = kt__vk_map_locked(ctx, dev, &start, &unc) == 0;
        }
        if (mapped) {
            starts[i] = start;
            uncs[i] = unc;
            r.start_ns = start;
            r.end_ns = start + r.duration_ns;
            r.uncertainty_ns = unc;
        }
        kt_record_dispatch(&r);
        if (g_verbose && (!ctx->per_submit || r.kernel != ctx->submit_kernel)) /* a line per dispatch */
            verbose_line(ctx, &r);
    }
    pthread_mutex_unlock(&ctx->model_lock);
    return kept;
}

int kt_vk_collect(kt_vk_ctx_t *ctx)
{
    if (!ctx)
        return KT_EINVAL;
    /* One collector at a time, and callers wait for it rather than return 0 while it runs: a caller that has
     * just waited for its work (kt_vk_collect_wait, flushes) must see that work recorded when this returns. */
    pthread_mutex_lock(&ctx->collect_lock);
    uint64_t t0 = kt_now_ns();
    kt__vk_clock_maybe_refit(ctx);
    int total = 0;
    kt__vk_done_t batch[KT__VK_COLLECT_BATCH];
    for (;;) {
        int more;
        pthread_mutex_lock(&ctx->lock);
        uint32_t n = harvest_locked(ctx, batch, KT__VK_COLLECT_BATCH, &more);
        pthread_mutex_unlock(&ctx->lock);
        if (n)
            total += (int)record_done(ctx, batch, n);
        if (n < KT__VK_COLLECT_BATCH && !more)
            break;
    }
    atomic_fetch_add(&ctx->collected, (uint64_t)total);
    atomic_fetch_add(&ctx->collect_calls, 1);
    uint64_t dt = kt_now_ns() - t0;
    uint_fast64_t prev = atomic_load(&ctx->collect_max_ns);
    while (dt > prev && !atomic_compare_exchange_weak(&ctx->collect_max_ns, &prev, dt))
        ;
    pthread_mutex_unlock(&ctx->collect_lock);
    return total;
}

/* ---------------------------------------------------------------------------------------------------
 * Thread readback: the collector's poll pass, the only place the driver is asked for query results
 * ------------------------------------------------------------------------------------------------- */

/* One pass over the CLOSED slots (of `only`, unless VK_NULL_HANDLE), in runs contiguous in the query pool.
 * Called and returns with ctx->lock held; drops it around driver calls (the generations snapshot tells a slot
 * reused meanwhile). Passes may run concurrently (collector, discard, destroy): each has its own snapshot and
 * reads every slot it marked itself. Returns slots read. */
static int poll_pass_locked(kt_vk_ctx_t *ctx, VkCommandBuffer only)
{
    int read = 0;
    uint32_t *mark = calloc(ctx->cap, sizeof(*mark));
    if (!mark)
        return 0;
    /* Snapshot the generations of the CLOSED slots: the list may change while the lock is dropped. */
    uint32_t nclosed = 0;
    for (uint32_t i = ctx->used_first; i != KT__VK_NONE; i = ctx->slots[i].next)
        if (ctx->slots[i].state == KT__VK_SLOT_CLOSED && (!only || ctx->slots[i].cmd == only)) {
            mark[i] = ctx->slots[i].gen | 0x80000000u; /* high bit: polled in this pass */
            nclosed++;
        }
    for (uint32_t first = 0; first < ctx->cap && nclosed;) {
        if (!(mark[first] & 0x80000000u)) {
            first++;
            continue;
        }
        uint32_t gens[KT__VK_POLL_CHUNK], count = 0;
        while (count < KT__VK_POLL_CHUNK && first + count < ctx->cap &&
               (mark[first + count] & 0x80000000u)) {
            gens[count] = mark[first + count] & 0x7fffffffu;
            count++;
        }
        nclosed -= count;
        pthread_mutex_unlock(&ctx->lock);
        uint64_t vals[4 * KT__VK_POLL_CHUNK];
        VkResult r = ctx->vk.vkGetQueryPoolResults(ctx->device, ctx->pool, 2 * first, 2 * count,
                                                   sizeof(uint64_t) * 4 * count, vals, 2 * sizeof(uint64_t),
                                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
        atomic_fetch_add(&ctx->polls, 1);
        pthread_mutex_lock(&ctx->lock);
        if (r != VK_SUCCESS && r != VK_NOT_READY)
            atomic_store(&ctx->last_error, (int)r);
        if (r == VK_SUCCESS || r == VK_NOT_READY) {
            for (uint32_t i = 0; i < count; i++) {
                kt__vk_slot_t *s = &ctx->slots[first + i];
                if (s->state != KT__VK_SLOT_CLOSED || (s->gen & 0x7fffffffu) != gens[i])
                    continue;
                if (!vals[4 * i + 1] || !vals[4 * i + 3]) {
                    s->half_read |= !vals[4 * i + 1] != !vals[4 * i + 3];
                    continue;
                }
                /* Until the reset kt_vk_begin recorded has run, the queries still hold the values they held
                 * when the slot was last released, available: timestamps never repeat, so equal values mean
                 * "not this use yet". Every release after a use that ran follows a read of it (collection, or
                 * the pass kt_vk_discard makes first), so those are the values kept here. */
                if (s->read_once && vals[4 * i] == s->begin_raw && vals[4 * i + 2] == s->end_raw)
                    continue;
                s->begin_raw = vals[4 * i];
                s->end_raw = vals[4 * i + 2];
                s->read_once = 1;
                s->state = KT__VK_SLOT_READY;
                ctx->closed_unread--;
                read++;
            }
        }
        first += count;
    }
    free(mark);
    return read;
}

int kt_vk_collect_wait(kt_vk_ctx_t *ctx, uint64_t timeout_ns)
{
    if (!ctx)
        return KT_EINVAL;
    uint64_t now = kt_now_ns();
    wait_fresh_pass(ctx, timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns);
    return kt_vk_collect(ctx);
}

int kt_vk_discard(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    if (!ctx || !cmd)
        return KT_EINVAL;
    /* The command buffer is not pending (re-begun, reset or freed), so every execution of it has completed:
     * read its slots now rather than release values the device has written, which the next use of the slot
     * would otherwise take for its own (the stale check knows only values it has read). */
    if (!ctx->copy_readback) {
        pthread_mutex_lock(&ctx->lock);
        int mine = 0;
        for (uint32_t i = ctx->used_first; i != KT__VK_NONE && !mine; i = ctx->slots[i].next)
            mine = ctx->slots[i].cmd == cmd && ctx->slots[i].state == KT__VK_SLOT_CLOSED;
        if (mine)
            poll_pass_locked(ctx, cmd);
        pthread_mutex_unlock(&ctx->lock);
    }
    kt_vk_collect(ctx);
    uint64_t n = 0;
    pthread_mutex_lock(&ctx->lock);
    kt__vk_open_t *o = open_find(ctx, cmd, 0);
    if (o) {
        o->cmd = NULL;
        o->depth = 0;
        o->overflow = 0;
    }
    uint32_t slot = ctx->used_first;
    while (slot != KT__VK_NONE) {
        kt__vk_slot_t *s = &ctx->slots[slot];
        uint32_t next = s->next;
        if ((s->state == KT__VK_SLOT_OPEN || s->state == KT__VK_SLOT_CLOSED) && s->cmd == cmd) {
            if ((s->cmd_pair && !s->self_copy) || s->unused) { /* the batch span it could have been: none */
                kt__vk_slot_release_locked(ctx, slot);
            } else if (s->executions && !s->self_copy) { /* every execution has its own record */
                kt__vk_slot_release_locked(ctx, slot);
            } else {
                kt_record_drop_reason(s->kernel, KT_DROP_NEVER_SUBMITTED);
                kt__vk_slot_release_locked(ctx, slot);
                n++;
            }
        }
        slot = next;
    }
    pthread_mutex_unlock(&ctx->lock);
    atomic_fetch_add(&ctx->discarded, n);
    return (int)n;
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
