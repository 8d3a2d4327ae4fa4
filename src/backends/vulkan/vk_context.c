/* vk_context.c — Vulkan contexts: the timestamp ring, begin/end recording, non-blocking collection, flush. */
#include "backends/vulkan/vk_internal.h"
#include "core/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KT__VK_WORDS_PER_SLOT 4u /* begin value, begin availability, end value, end availability */
#define KT__VK_RING_MAX (1u << 20)
#define KT__VK_COLLECT_BATCH 128u
#define KT__VK_POLL_CHUNK 128u    /* slots per vkGetQueryPoolResults call of the collector */
#define KT__VK_FLUSH_WAIT_NS UINT64_C(200000000)

static void poll_pass_locked(kt_vk_ctx_t *ctx);
static void *collector_main(void *arg);

/* ---------------------------------------------------------------------------------------------------
 * Registry of live contexts (for kt_flush / exit)
 * ------------------------------------------------------------------------------------------------- */

static pthread_mutex_t g_live_lock = PTHREAD_MUTEX_INITIALIZER;
static kt_vk_ctx_t *g_live;

static void flush_all(uint64_t deadline_ns)
{
    (void)deadline_ns; /* each context bounds its own wait */
    pthread_mutex_lock(&g_live_lock);
    for (kt_vk_ctx_t *c = g_live; c; c = c->next_live)
        kt_vk_collect_wait(c, KT__VK_FLUSH_WAIT_NS);
    pthread_mutex_unlock(&g_live_lock);
}

static void live_add(kt_vk_ctx_t *ctx)
{
    pthread_mutex_lock(&g_live_lock);
    ctx->next_live = g_live;
    g_live = ctx;
    pthread_mutex_unlock(&g_live_lock);
    static const kt__backend_ops_t kOps = {.name = "Vulkan", .flush = flush_all, .stop = flush_all};
    kt__backend_register(&kOps);
}

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

/* ---------------------------------------------------------------------------------------------------
 * Creation and destruction
 * ------------------------------------------------------------------------------------------------- */

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
    VkDeviceSize size = (VkDeviceSize)(ctx->cap + 1) * KT__VK_WORDS_PER_SLOT * sizeof(uint64_t);
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    if (vk->vkCreateBuffer(ctx->device, &bci, NULL, &ctx->buffer) != VK_SUCCESS)
        return KT_EBACKEND;
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
    if (vk->vkAllocateMemory(ctx->device, &mai, NULL, &ctx->memory) != VK_SUCCESS)
        return KT_ENOMEM;
    if (vk->vkBindBufferMemory(ctx->device, ctx->buffer, ctx->memory, 0) != VK_SUCCESS)
        return KT_EBACKEND;
    void *map = NULL;
    if (vk->vkMapMemory(ctx->device, ctx->memory, 0, VK_WHOLE_SIZE, 0, &map) != VK_SUCCESS)
        return KT_EBACKEND;
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
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->model_lock);
    pthread_mutex_destroy(&ctx->collect_lock);
    pthread_cond_destroy(&ctx->wake);
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

int kt_vk_ctx_create(const kt_vk_desc_t *desc, kt_vk_ctx_t **out)
{
    if (!out)
        return KT_EINVAL;
    *out = NULL;
    if (!desc || !desc->instance || !desc->physical_device || !desc->device)
        return KT_EINVAL;
    if (desc->ring_size > KT__VK_RING_MAX)
        return KT_EINVAL;
    PFN_vkGetInstanceProcAddr gipa = desc->get_instance_proc_addr ? desc->get_instance_proc_addr : kt_vk_loader();
    if (!gipa)
        return KT_EUNAVAILABLE;

    kt_vk_ctx_t *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return KT_ENOMEM;
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->model_lock, NULL);
    pthread_mutex_init(&ctx->collect_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ctx->wake, &ca);
    pthread_cond_init(&ctx->pass_done, &ca);
    pthread_condattr_destroy(&ca);
    ctx->instance = desc->instance;
    ctx->physical_device = desc->physical_device;
    ctx->device = desc->device;
    ctx->queue = desc->queue;
    ctx->queue_family = desc->queue_family;
    ctx->cap = desc->ring_size ? desc->ring_size : KT_VK_RING_DEFAULT;
    ctx->recalibrate_ns = desc->recalibrate_ns ? desc->recalibrate_ns : UINT64_C(1000000000);

    int rc = kt__vk_table_load(&ctx->vk, gipa, desc->instance, desc->physical_device, desc->device,
                               desc->calibration);
    if (rc)
        goto fail;
    const kt__vk_table_t *vk = &ctx->vk;

    VkPhysicalDeviceProperties props;
    vk->vkGetPhysicalDeviceProperties(ctx->physical_device, &props);
    snprintf(ctx->device_name, sizeof(ctx->device_name), "%.127s", props.deviceName);
    ctx->period_ns = props.limits.timestampPeriod > 0 ? (double)props.limits.timestampPeriod : 1.0;

    uint32_t nfam = 0;
    vk->vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical_device, &nfam, NULL);
    if (ctx->queue_family >= nfam) {
        rc = KT_EINVAL;
        goto fail;
    }
    VkQueueFamilyProperties *fam = calloc(nfam, sizeof(*fam));
    if (!fam) {
        rc = KT_ENOMEM;
        goto fail;
    }
    vk->vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical_device, &nfam, fam);
    VkQueueFamilyProperties qf = fam[ctx->queue_family];
    free(fam);
    /* Timestamps need valid bits; reading them back with vkCmdCopyQueryPoolResults needs a compute or
     * graphics queue. */
    if (qf.timestampValidBits == 0 || !(qf.queueFlags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT))) {
        rc = KT_EUNAVAILABLE;
        goto fail;
    }
    ctx->family_valid_bits = qf.timestampValidBits;
    ctx->valid_bits = qf.timestampValidBits;
    if (desc->timestamp_valid_bits && desc->timestamp_valid_bits < ctx->valid_bits)
        ctx->valid_bits = desc->timestamp_valid_bits;
    if (ctx->valid_bits < 8) {
        rc = KT_EINVAL;
        goto fail;
    }
    /* hostQueryReset cannot be queried as enabled: the application says so and ktiming needs the entry. */
    ctx->host_reset = desc->host_query_reset && vk->reset_query_pool != NULL;
    /* Polling needs every query reset once before its first use (the collector may look at a slot before its
     * command buffer runs): on the host, or by a submission on desc.queue. Without either, use copies. */
    int cpu_device = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    ctx->copy_readback = desc->readback == KT_VK_READBACK_COPY ||
                         (desc->readback == KT_VK_READBACK_AUTO && cpu_device) || !(ctx->host_reset || ctx->queue);
    ctx->poll_ns = (uint64_t)(desc->poll_us ? desc->poll_us : 500u) * 1000u;

    VkQueryPoolCreateInfo qpi = {
        .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
        .queryType = VK_QUERY_TYPE_TIMESTAMP,
        .queryCount = 2 * ctx->cap + 1,
    };
    if (vk->vkCreateQueryPool(ctx->device, &qpi, NULL, &ctx->pool) != VK_SUCCESS) {
        rc = KT_EBACKEND;
        goto fail;
    }
    if (ctx->host_reset)
        vk->reset_query_pool(ctx->device, ctx->pool, 0, 2 * ctx->cap + 1);
    else if (!ctx->copy_readback && (rc = reset_by_submission(ctx)) != 0)
        goto fail;
    rc = create_readback(ctx);
    if (rc)
        goto fail;
    ctx->slots = calloc(ctx->cap, sizeof(*ctx->slots));
    if (!ctx->slots) {
        rc = KT_ENOMEM;
        goto fail;
    }

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
    if (!ctx->copy_readback) {
        if (pthread_create(&ctx->thread, NULL, collector_main, ctx) != 0) {
            rc = KT_ENOMEM;
            goto fail;
        }
        ctx->thread_started = 1;
    }
    live_add(ctx);
    *out = ctx;
    return 0;

fail:
    destroy_objects(ctx);
    return rc;
}

void kt_vk_ctx_destroy(kt_vk_ctx_t *ctx)
{
    if (!ctx)
        return;
    live_remove(ctx);
    if (ctx->thread_started) {
        pthread_mutex_lock(&ctx->lock);
        ctx->thread_stop = 1;
        pthread_cond_broadcast(&ctx->wake);
        pthread_mutex_unlock(&ctx->lock);
        pthread_join(ctx->thread, NULL);
        ctx->thread_started = 0;
        /* The timed work has finished (the destroy rule), so a last pass here cannot wait long. */
        pthread_mutex_lock(&ctx->lock);
        poll_pass_locked(ctx);
        pthread_mutex_unlock(&ctx->lock);
    }
    kt_vk_collect(ctx);
    pthread_mutex_lock(&ctx->collect_lock); /* wait out a collect still running on another thread */
    pthread_mutex_unlock(&ctx->collect_lock);
    destroy_objects(ctx);
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

static kt__vk_open_t *open_find(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, int add)
{
    kt__vk_open_t *freee = NULL;
    for (uint32_t i = 0; i < KT__VK_OPEN_MAX; i++) {
        if (ctx->open[i].cmd == cmd)
            return &ctx->open[i];
        if (!freee && !ctx->open[i].cmd)
            freee = &ctx->open[i];
    }
    if (add && freee) {
        freee->cmd = cmd;
        freee->depth = 0;
        freee->overflow = 0;
    }
    return add ? freee : NULL;
}

static int begin_locked(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, kt_kernel_id_t kernel, uint64_t now,
                        uint32_t *slot_out)
{
    kt__vk_open_t *o = open_find(ctx, cmd, 1);
    *slot_out = KT__VK_SLOT_DROPPED;
    if (!o) {
        ctx->orphans++; /* too many command buffers open at once */
        return KT_EFULL;
    }
    if (o->depth >= KT_VK_MAX_NESTING) {
        o->overflow++;
        return KT_EFULL;
    }
    uint32_t slot = KT__VK_SLOT_DROPPED;
    if (ctx->head - ctx->tail < ctx->cap) {
        slot = (uint32_t)(ctx->head % ctx->cap);
        ctx->head++;
        kt__vk_slot_t *s = &ctx->slots[slot];
        s->state = KT__VK_SLOT_OPEN;
        s->gen++;
        s->kernel = kernel;
        s->cmd = cmd;
        s->enqueue_ns = now;
        s->thread = kt_thread_ordinal();
    }
    o->stack[o->depth++] = slot;
    *slot_out = slot;
    return slot == KT__VK_SLOT_DROPPED ? KT_EFULL : 0;
}

static int begin_common(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, kt_kernel_id_t kernel, const char *name)
{
    if (!ctx || !cmd)
        return KT_EINVAL;
    if (!kt_is_enabled())
        return 0;
    uint64_t now = kt_now_ns();
    uint32_t slot;
    pthread_mutex_lock(&ctx->lock);
    if (name)
        kernel = kernel_locked(ctx, name);
    int rc = begin_locked(ctx, cmd, kernel, now, &slot);
    pthread_mutex_unlock(&ctx->lock);
    if (rc) {
        atomic_fetch_add(&ctx->dropped, 1);
        kt_record_drop(kernel);
        return rc;
    }
    atomic_fetch_add(&ctx->begun, 1);
    /* Reset in the command buffer, not on the host after reading: a host reset is only valid once the whole
     * submission that wrote the queries has completed, which ktiming cannot know without the app's fence. */
    ctx->vk.vkCmdResetQueryPool(cmd, ctx->pool, 2 * slot, 2);
    ctx->vk.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, ctx->pool, 2 * slot);
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

int kt_vk_end(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    if (!ctx || !cmd)
        return KT_EINVAL;
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
        if (!ctx->copy_readback) {
            ctx->closed_unread++;
            if (ctx->thread_idle)
                pthread_cond_signal(&ctx->wake);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    if (slot == KT__VK_SLOT_DROPPED)
        return 0;

    const kt__vk_table_t *vk = &ctx->vk;
    vk->vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, ctx->pool, 2 * slot + 1);
    if (!ctx->copy_readback)
        return 0;
    vk->vkCmdCopyQueryPoolResults(cmd, ctx->pool, 2 * slot, 2, ctx->buffer,
                                  (VkDeviceSize)slot * KT__VK_WORDS_PER_SLOT * sizeof(uint64_t),
                                  2 * sizeof(uint64_t),
                                  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT |
                                      VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
    };
    vk->vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL,
                             0, NULL);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Collection
 * ------------------------------------------------------------------------------------------------- */

/* A completed slot copied out of the ring. */
typedef struct kt__vk_done_t {
    kt_kernel_id_t kernel;
    uint32_t thread;
    uint64_t enqueue_ns;
    uint64_t begin_raw;
    uint64_t end_raw;
} kt__vk_done_t;

/* Copy mode: both availability words of the slot's copied results are set. */
static int slot_copied(const kt_vk_ctx_t *ctx, uint32_t slot)
{
    const uint64_t *w = ctx->words + (size_t)slot * KT__VK_WORDS_PER_SLOT;
    return __atomic_load_n(&w[1], __ATOMIC_ACQUIRE) != 0 && __atomic_load_n(&w[3], __ATOMIC_ACQUIRE) != 0;
}

/* A slot leaves the ring's pending set (read or abandoned): make it reusable once the tail passes it. */
static void slot_finish_locked(kt_vk_ctx_t *ctx, uint32_t slot)
{
    kt__vk_slot_t *s = &ctx->slots[slot];
    if (ctx->copy_readback) {
        uint64_t *w = ctx->words + (size_t)slot * KT__VK_WORDS_PER_SLOT;
        for (uint32_t i = 0; i < KT__VK_WORDS_PER_SLOT; i++)
            __atomic_store_n(&w[i], 0, __ATOMIC_RELAXED);
    } else if (s->state == KT__VK_SLOT_CLOSED) {
        ctx->closed_unread--; /* discarded before the collector read it; never submitted, nothing to reset */
    }
    s->state = KT__VK_SLOT_DONE;
    s->cmd = NULL;
}

static void advance_tail_locked(kt_vk_ctx_t *ctx)
{
    while (ctx->tail < ctx->head && ctx->slots[ctx->tail % ctx->cap].state == KT__VK_SLOT_DONE) {
        ctx->slots[ctx->tail % ctx->cap].state = KT__VK_SLOT_FREE;
        ctx->tail++;
    }
}

/* Take up to max completed slots out of the ring (oldest first). */
static uint32_t harvest_locked(kt_vk_ctx_t *ctx, kt__vk_done_t *out, uint32_t max)
{
    uint32_t n = 0;
    for (uint64_t pos = ctx->tail; pos < ctx->head && n < max; pos++) {
        uint32_t slot = (uint32_t)(pos % ctx->cap);
        kt__vk_slot_t *s = &ctx->slots[slot];
        if (ctx->copy_readback) {
            if (s->state != KT__VK_SLOT_CLOSED || !slot_copied(ctx, slot))
                continue;
            const uint64_t *w = ctx->words + (size_t)slot * KT__VK_WORDS_PER_SLOT;
            out[n].begin_raw = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
            out[n].end_raw = __atomic_load_n(&w[2], __ATOMIC_RELAXED);
        } else {
            if (s->state != KT__VK_SLOT_READY)
                continue;
            out[n].begin_raw = s->begin_raw;
            out[n].end_raw = s->end_raw;
        }
        out[n].kernel = s->kernel;
        out[n].thread = s->thread;
        out[n].enqueue_ns = s->enqueue_ns;
        n++;
        slot_finish_locked(ctx, slot);
    }
    advance_tail_locked(ctx);
    return n;
}

static void record_done(kt_vk_ctx_t *ctx, const kt__vk_done_t *d, uint32_t n)
{
    pthread_mutex_lock(&ctx->model_lock);
    for (uint32_t i = 0; i < n; i++) {
        kt_dispatch_t r = {0};
        r.kernel = d[i].kernel;
        r.queue = ctx->queue_id;
        r.thread = d[i].thread;
        r.flags = KT_SPAN_DEVICE;
        r.enqueue_ns = d[i].enqueue_ns;
        r.duration_ns = kt__vk_ticks_to_ns(kt__vk_ticks_delta(d[i].begin_raw, d[i].end_raw, ctx->valid_bits),
                                           ctx->period_ns);
        uint64_t start = 0, unc = 0;
        uint64_t dev = kt__vk_device_ns_locked(ctx, d[i].begin_raw, d[i].enqueue_ns);
        if (kt__vk_map_locked(ctx, dev, &start, &unc) == 0) {
            r.start_ns = start;
            r.end_ns = start + r.duration_ns;
            r.uncertainty_ns = unc;
        }
        kt_record_dispatch(&r);
    }
    pthread_mutex_unlock(&ctx->model_lock);
}

int kt_vk_collect(kt_vk_ctx_t *ctx)
{
    if (!ctx)
        return KT_EINVAL;
    if (pthread_mutex_trylock(&ctx->collect_lock) != 0)
        return 0; /* another thread is collecting this context right now */
    uint64_t t0 = kt_now_ns();
    kt__vk_clock_maybe_refit(ctx);
    int total = 0;
    kt__vk_done_t batch[KT__VK_COLLECT_BATCH];
    for (;;) {
        pthread_mutex_lock(&ctx->lock);
        uint32_t n = harvest_locked(ctx, batch, KT__VK_COLLECT_BATCH);
        pthread_mutex_unlock(&ctx->lock);
        if (n)
            record_done(ctx, batch, n);
        total += (int)n;
        if (n < KT__VK_COLLECT_BATCH)
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
 * Collector thread (thread mode): the only place the driver is asked for query results
 * ------------------------------------------------------------------------------------------------- */

/* One pass over the outstanding slots. Called and returns with ctx->lock held; drops it around driver calls. */
static void poll_pass_locked(kt_vk_ctx_t *ctx)
{
    uint64_t pos = ctx->tail;
    while (pos < ctx->head) {
        /* The next run of CLOSED slots, contiguous in the query pool. */
        uint32_t first = (uint32_t)(pos % ctx->cap);
        if (ctx->slots[first].state != KT__VK_SLOT_CLOSED) {
            pos++;
            continue;
        }
        uint32_t gens[KT__VK_POLL_CHUNK], count = 0;
        while (count < KT__VK_POLL_CHUNK && pos + count < ctx->head && first + count < ctx->cap &&
               ctx->slots[first + count].state == KT__VK_SLOT_CLOSED) {
            gens[count] = ctx->slots[first + count].gen;
            count++;
        }
        pthread_mutex_unlock(&ctx->lock);
        uint64_t vals[4 * KT__VK_POLL_CHUNK];
        VkResult r = ctx->vk.vkGetQueryPoolResults(ctx->device, ctx->pool, 2 * first, 2 * count,
                                                   sizeof(uint64_t) * 4 * count, vals, 2 * sizeof(uint64_t),
                                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
        atomic_fetch_add(&ctx->polls, 1);
        pthread_mutex_lock(&ctx->lock);
        if (r == VK_SUCCESS || r == VK_NOT_READY) {
            for (uint32_t i = 0; i < count; i++) {
                kt__vk_slot_t *s = &ctx->slots[first + i];
                if (s->state != KT__VK_SLOT_CLOSED || s->gen != gens[i] || !vals[4 * i + 1] || !vals[4 * i + 3])
                    continue;
                /* Until the reset kt_vk_begin recorded has run, the queries still hold the previous use's
                 * values, available: timestamps never repeat, so equal values mean "not this use yet". */
                if (s->read_once && vals[4 * i] == s->begin_raw && vals[4 * i + 2] == s->end_raw)
                    continue;
                s->begin_raw = vals[4 * i];
                s->end_raw = vals[4 * i + 2];
                s->read_once = 1;
                s->state = KT__VK_SLOT_READY;
                ctx->closed_unread--;
            }
        }
        pos += count;
        if (pos < ctx->tail)
            pos = ctx->tail;
    }
}

static void *collector_main(void *arg)
{
    kt_vk_ctx_t *ctx = arg;
    pthread_mutex_lock(&ctx->lock);
    while (!ctx->thread_stop) {
        if (ctx->closed_unread == 0 && !ctx->pass_requested) {
            ctx->thread_idle = 1;
            pthread_cond_wait(&ctx->wake, &ctx->lock);
            ctx->thread_idle = 0;
            continue;
        }
        ctx->pass_requested = 0;
        poll_pass_locked(ctx);
        ctx->passes++;
        pthread_cond_broadcast(&ctx->pass_done);
        if (ctx->closed_unread && !ctx->pass_requested && !ctx->thread_stop) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t ns = (uint64_t)ts.tv_nsec + ctx->poll_ns;
            ts.tv_sec += (time_t)(ns / 1000000000u);
            ts.tv_nsec = (long)(ns % 1000000000u);
            pthread_cond_timedwait(&ctx->wake, &ctx->lock, &ts);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    return NULL;
}

int kt_vk_collect_wait(kt_vk_ctx_t *ctx, uint64_t timeout_ns)
{
    if (!ctx)
        return KT_EINVAL;
    if (ctx->thread_started) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + timeout_ns;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_mutex_lock(&ctx->lock);
        if (ctx->closed_unread) {
            /* Two passes from now: the first may have begun before the caller's work completed. */
            uint64_t target = ctx->passes + 2;
            ctx->pass_requested = 1;
            pthread_cond_signal(&ctx->wake);
            while (ctx->passes < target && ctx->closed_unread)
                if (pthread_cond_timedwait(&ctx->pass_done, &ctx->lock, &ts) != 0)
                    break;
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    return kt_vk_collect(ctx);
}

int kt_vk_discard(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    if (!ctx || !cmd)
        return KT_EINVAL;
    kt_vk_collect(ctx);
    uint64_t n = 0;
    pthread_mutex_lock(&ctx->lock);
    kt__vk_open_t *o = open_find(ctx, cmd, 0);
    if (o) {
        o->cmd = NULL;
        o->depth = 0;
        o->overflow = 0;
    }
    for (uint64_t pos = ctx->tail; pos < ctx->head; pos++) {
        uint32_t slot = (uint32_t)(pos % ctx->cap);
        kt__vk_slot_t *s = &ctx->slots[slot];
        if ((s->state == KT__VK_SLOT_OPEN || s->state == KT__VK_SLOT_CLOSED) && s->cmd == cmd) {
            slot_finish_locked(ctx, slot);
            n++;
        }
    }
    advance_tail_locked(ctx);
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
    out->readback = ctx->copy_readback ? KT_VK_READBACK_COPY : KT_VK_READBACK_THREAD;
    pthread_mutex_lock(&ctx->lock);
    for (uint64_t pos = ctx->tail; pos < ctx->head; pos++) {
        int st = ctx->slots[pos % ctx->cap].state;
        if (st == KT__VK_SLOT_OPEN || st == KT__VK_SLOT_CLOSED || st == KT__VK_SLOT_READY)
            out->pending++;
    }
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
