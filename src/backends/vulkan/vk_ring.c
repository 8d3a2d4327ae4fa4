/* vk_ring.c — the timestamp ring: query pool, readback buffer, slot and execution-record bookkeeping, and the
 * copy commands that bring query results into the buffer. The bottom of the backend: it calls only the driver
 * table (vk_loader.c); vk_clock.c, vk_submit.c, vk_collect.c, vk_record.c and vk_context.c call it. */
#include "backends/vulkan/vk_internal.h"
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------
 * Creation and destruction of the ring's objects
 * ------------------------------------------------------------------------------------------------- */

/* Thread-local: the VkResult of the last failed driver call of a kt_vk_ctx_create on this thread. */
static _Thread_local int t_create_error;

/* Notes a failed driver call (kt_vk_last_error) and returns the ktiming error for it. */
int kt__vk_fail(kt_vk_ctx_t *ctx, VkResult r, int rc)
{
    atomic_store(&ctx->last_error, (int)r);
    t_create_error = (int)r;
    return r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? KT_ENOMEM : rc;
}

int kt__vk_create_error(void)
{
    return t_create_error;
}

void kt__vk_create_error_clear(void)
{
    t_create_error = VK_SUCCESS;
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
        return kt__vk_fail(ctx, r, KT_EBACKEND);
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
        return kt__vk_fail(ctx, r, KT_ENOMEM);
    if ((r = vk->vkBindBufferMemory(ctx->device, ctx->buffer, ctx->memory, 0)) != VK_SUCCESS)
        return kt__vk_fail(ctx, r, KT_EBACKEND);
    void *map = NULL;
    if ((r = vk->vkMapMemory(ctx->device, ctx->memory, 0, VK_WHOLE_SIZE, 0, &map)) != VK_SUCCESS)
        return kt__vk_fail(ctx, r, KT_EBACKEND);
    ctx->words = map;
    memset(map, 0, (size_t)size);
    return 0;
}

/* A command pool (flags) on the context's queue family, one primary command buffer from it and an unsignalled
 * fence. On failure returns KT_EBACKEND and leaves in *pool and *fence what was made, for the caller to destroy
 * (destroying the pool frees the buffer). */
int kt__vk_cmd_create(kt_vk_ctx_t *ctx, VkCommandPoolCreateFlags flags, VkCommandPool *pool, VkCommandBuffer *cmd,
                      VkFence *fence)
{
    const kt__vk_table_t *vk = &ctx->vk;
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = flags,
        .queueFamilyIndex = ctx->queue_family,
    };
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (vk->vkCreateCommandPool(ctx->device, &pci, NULL, pool) != VK_SUCCESS)
        return KT_EBACKEND;
    ai.commandPool = *pool;
    if (vk->vkAllocateCommandBuffers(ctx->device, &ai, cmd) != VK_SUCCESS ||
        vk->vkCreateFence(ctx->device, &fci, NULL, fence) != VK_SUCCESS)
        return KT_EBACKEND;
    return 0;
}

/* Reset cmd (its pool allows it) and begin it for one submission; 0 or KT_EBACKEND. */
int kt__vk_cmd_restart(const kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    if (ctx->vk.vkResetCommandBuffer(cmd, 0) != VK_SUCCESS || ctx->vk.vkBeginCommandBuffer(cmd, &bi) != VK_SUCCESS)
        return KT_EBACKEND;
    return 0;
}

/* Reset the whole pool once with a submission on desc.queue (the device lacks or did not enable hostQueryReset). */
static int reset_by_submission(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    VkCommandPool pool = VK_NULL_HANDLE;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    int rc = KT_EBACKEND;
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    if (kt__vk_cmd_create(ctx, VK_COMMAND_POOL_CREATE_TRANSIENT_BIT, &pool, &cmd, &fence) == 0 &&
        vk->vkBeginCommandBuffer(cmd, &bi) == VK_SUCCESS) {
        vk->vkCmdResetQueryPool(cmd, ctx->pool, 0, 2 * ctx->cap + 1);
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
        if (vk->vkEndCommandBuffer(cmd) == VK_SUCCESS && vk->vkQueueSubmit(ctx->queue, 1, &si, fence) == VK_SUCCESS &&
            vk->vkWaitForFences(ctx->device, 1, &fence, VK_TRUE, UINT64_C(10000000000)) == VK_SUCCESS)
            rc = 0;
    }
    if (fence)
        vk->vkDestroyFence(ctx->device, fence, NULL);
    if (pool)
        vk->vkDestroyCommandPool(ctx->device, pool, NULL);
    return rc;
}

/* Query pool (reset once), readback buffer and the slot bookkeeping. */
int kt__vk_ring_create(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    VkQueryPoolCreateInfo qpi = {
        .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
        .queryType = VK_QUERY_TYPE_TIMESTAMP,
        .queryCount = 2 * ctx->cap + 1,
    };
    VkResult r = vk->vkCreateQueryPool(ctx->device, &qpi, NULL, &ctx->pool);
    if (r != VK_SUCCESS)
        return kt__vk_fail(ctx, r, KT_EBACKEND);
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
    for (uint32_t i = 0; i < ctx->cap; i++) {
        ctx->free_q[i] = i;
        ctx->slots[i].prev = ctx->slots[i].next = KT__VK_NONE;
        ctx->slots[i].batch_pair = ctx->slots[i].pair_first = KT__VK_NONE;
    }
    return 0;
}

void kt__vk_ring_fini(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    if (ctx->words)
        vk->vkUnmapMemory(ctx->device, ctx->memory);
    if (ctx->buffer)
        vk->vkDestroyBuffer(ctx->device, ctx->buffer, NULL);
    if (ctx->memory)
        vk->vkFreeMemory(ctx->device, ctx->memory, NULL);
    if (ctx->pool)
        vk->vkDestroyQueryPool(ctx->device, ctx->pool, NULL);
    /* destroy released every unit it counted (drop_pending); nothing stays counted past the context */
    for (uint32_t i = 0; ctx->slots && i < ctx->cap; i++)
        kt__vk_inflight_settle(&ctx->slots[i].inflight);
    for (uint32_t e = 0; ctx->execs && e < ctx->exec_cap; e++)
        kt__vk_inflight_settle(&ctx->execs[e].inflight);
    free(ctx->slots);
    free(ctx->free_q);
    free(ctx->execs);
    free(ctx->lost_occ);
    ctx->lost_occ = NULL;
    ctx->nlost_occ = ctx->cap_lost_occ = 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Slots and execution records (ctx->lock held)
 * ------------------------------------------------------------------------------------------------- */

void kt__vk_inflight_arm(kt_kernel_id_t *held, kt_kernel_id_t kernel)
{
    if (*held || !kernel)
        return;
    *held = kernel;
    kt__inflight_begin(kernel);
}

void kt__vk_inflight_settle(kt_kernel_id_t *held)
{
    if (!*held)
        return;
    kt__inflight_end(*held);
    *held = 0;
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
    kt__vk_inflight_settle(&s->inflight);
    s->prev = s->next = KT__VK_NONE;
    s->state = KT__VK_SLOT_FREE;
    s->cmd = NULL;
    s->self_copy = s->submission = s->stage = s->cmd_pair = s->own_copy = s->copy_pending = s->unused = 0;
    s->stage_lost = 0;
    s->batch_pair = KT__VK_NONE;
    s->executions = 0;
    memset(&s->launch, 0, sizeof s->launch);
    ctx->free_q[(ctx->free_head + ctx->cap - ctx->used) % ctx->cap] = slot;
    ctx->used--;
}

void kt__vk_exec_free_locked(kt_vk_ctx_t *ctx, uint32_t e)
{
    kt__vk_exec_t *x = &ctx->execs[e];
    if (x->state == KT__VK_EXEC_PENDING)
        ctx->exec_pending--;
    x->state = KT__VK_EXEC_FREE;
    kt__vk_inflight_settle(&x->inflight);
    uint64_t *w = ctx->words + kt__vk_exec_word(ctx, e);
    for (uint32_t i = 0; i < KT__VK_WORDS_PER_SLOT; i++)
        __atomic_store_n(&w[i], 0, __ATOMIC_RELAXED);
    if (x->slot != KT__VK_NONE)
        kt__vk_slot_release_locked(ctx, x->slot);
    x->slot = KT__VK_NONE;
}

void kt__vk_exec_reclaim_locked(kt_vk_ctx_t *ctx)
{
    while (ctx->exec_used && ctx->execs[ctx->exec_head].state == KT__VK_EXEC_FREE) {
        ctx->exec_head = (ctx->exec_head + 1) % ctx->exec_cap;
        ctx->exec_used--;
    }
}


/* ---------------------------------------------------------------------------------------------------
 * Copies into the readback buffer
 * ------------------------------------------------------------------------------------------------- */

void kt__vk_copy_results(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, uint32_t first, uint32_t count, VkDeviceSize dst)
{
    ctx->vk.vkCmdCopyQueryPoolResults(cmd, ctx->pool, first, count, ctx->buffer, dst, 2 * sizeof(uint64_t),
                                      VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT |
                                          VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
}


/* Copy mode: the slot's two results into its words of the readback buffer. */
void kt__vk_record_copy(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, uint32_t slot)
{
    kt__vk_copy_results(ctx, cmd, 2 * slot, 2, (VkDeviceSize)slot * KT__VK_WORDS_PER_SLOT * sizeof(uint64_t));
}

/* Also orders the copies after it behind the ones before it: a secondary executed several times in one primary
 * (or a recording that is otherwise run again) copies into the same words at every execution, and two copies with
 * no dependency between them are a write-after-write hazard (SYNC-HAZARD-WRITE-AFTER-WRITE under synchronization
 * validation, test_run_vulkan `secondary_executed_4_times` with KTIMING_VULKAN_ONCE): the last execution's values
 * land. */
void kt__vk_host_barrier(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    ctx->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                 VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL, 0,
                                 NULL);
}

/* Copy mode: both availability words of the slot's copied results are set. */
/* Copy readback: whether both values have landed. The availability words alone do not say so for a read made
 * before the application's fence wait: lavapipe's copy was seen to store an availability before its value (end
 * read as 0 with its availability set, 11 of 640 dispatches of test_vk_threads, recorded as 584-year
 * durations before the sanity check). The words are zeroed at release and a timestamp is never 0 in practice,
 * so a value still 0 means "not yet". */
int kt__vk_words_landed(const uint64_t *w)
{
    return __atomic_load_n(&w[1], __ATOMIC_ACQUIRE) != 0 && __atomic_load_n(&w[3], __ATOMIC_ACQUIRE) != 0 &&
           __atomic_load_n(&w[0], __ATOMIC_ACQUIRE) != 0 && __atomic_load_n(&w[2], __ATOMIC_ACQUIRE) != 0;
}

int kt__vk_slot_copied(const kt_vk_ctx_t *ctx, uint32_t slot)
{
    return kt__vk_words_landed(ctx->words + (size_t)slot * KT__VK_WORDS_PER_SLOT);
}

uint32_t kt__vk_lost_occ_release_locked(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    uint32_t keep = 0, counted = 0;
    for (uint32_t k = 0; k < ctx->nlost_occ; k++) {
        kt__vk_lost_occ_t *o = &ctx->lost_occ[k];
        if (cmd && o->cmd != cmd) {
            ctx->lost_occ[keep++] = *o;
            continue;
        }
        if (!o->executions) {
            kt_record_drop(o->kernel, KT_DROP_RING_FULL);
            counted++;
        }
    }
    ctx->nlost_occ = keep;
    atomic_fetch_add(&ctx->dropped, counted);
    return counted;
}
