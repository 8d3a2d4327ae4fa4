/* vk_record.c — recording: kernel names, the table of command buffers being recorded, kt_vk_begin/kt_vk_end
 * (the hot path), a one-time primary's own pair (kt_vk_cmd_begin/kt_vk_cmd_end) and kt_vk_discard. Calls
 * vk_collect.c and vk_ring.c; called by the application and the layer. */
#include "backends/vulkan/vk_internal.h"
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

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
            kt_kernel_id_t id = kt_kernel_intern(name, KT_BACKEND_VULKAN, ctx->device_key);
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
    return kt_kernel_intern(name, KT_BACKEND_VULKAN, ctx->device_key);
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

/* A one-time primary's own pair (kt_vk_cmd_begin), allocated at its first kt_vk_begin; KT__VK_SLOT_DROPPED when
 * the ring is full (its batch then gets ktiming's own command buffers instead: not a loss). */
static uint32_t pair_alloc_locked(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, uint64_t now)
{
    uint32_t slot = kt__vk_slot_alloc_locked(ctx);
    if (slot == KT__VK_SLOT_DROPPED)
        return slot;
    kt__vk_slot_t *s = &ctx->slots[slot];
    s->state = KT__VK_SLOT_OPEN;
    s->copy_pending = s->half_read = s->submitted = s->self_copy = s->stage = s->own_copy = s->unused = 0;
    s->submission = s->cmd_pair = 1; /* never one of the dispatches a batch's plan copies */
    s->batch_pair = s->pair_first = KT__VK_NONE;
    s->executions = 0;
    s->lane = 0;
    s->gen++;
    s->kernel = ctx->submit_kernel;
    s->cmd = cmd;
    s->enqueue_ns = now;
    s->thread = kt_thread_ordinal();
    memset(&s->launch, 0, sizeof s->launch);
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
        s->submitted = 0;
        s->self_copy = s->submission = s->stage = s->cmd_pair = s->own_copy = s->unused = 0;
        s->batch_pair = KT__VK_NONE;
        s->executions = 0;
        s->lane = 0;
        s->gen++;
        s->kernel = kernel;
        s->cmd = cmd;
        s->enqueue_ns = now;
        s->thread = kt_thread_ordinal();
        memset(&s->launch, 0, sizeof s->launch);
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
    if (ctx->untimed) { /* counted, never silently untimed */
        if (name)
            kernel = kt_vk_kernel(ctx, name);
        atomic_fetch_add(&ctx->dropped, 1);
        kt_record_drop(kernel, KT_DROP_NO_TIMING);
        return KT_EUNAVAILABLE;
    }
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
        kt_record_drop(kernel, KT_DROP_RING_FULL);
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

int kt_vk_launch(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, const kt_launch_t *launch)
{
    if (!ctx || !cmd || !launch || launch->dims > 3 ||
        (launch->kind != KT_LAUNCH_GROUPS && launch->kind != KT_LAUNCH_ITEMS && launch->kind != KT_LAUNCH_INDIRECT))
        return KT_EINVAL;
    if (ctx->untimed)
        return KT_ESTATE;
    int rc = KT_ESTATE;
    pthread_mutex_lock(&ctx->lock);
    kt__vk_open_t *o = open_find(ctx, cmd, 0);
    if (o && o->depth && !o->overflow && o->stack[o->depth - 1] != KT__VK_SLOT_DROPPED) {
        ctx->slots[o->stack[o->depth - 1]].launch = *launch;
        rc = 0;
    }
    pthread_mutex_unlock(&ctx->lock);
    return rc;
}

int kt_vk_end(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    if (!ctx || !cmd)
        return KT_EINVAL;
    if (ctx->untimed) /* its begin was counted */
        return 0;
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
        if (!ctx->per_submit) /* its submission is not seen: owed from here (kt__vk_inflight_arm) */
            kt__vk_inflight_arm(&ctx->slots[slot].inflight, ctx->slots[slot].kernel);
        if (!ctx->copy_readback)
            wake = ctx->closed_unread++ == 0;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (slot == KT__VK_SLOT_DROPPED)
        return 0;
    if (wake)
        kt__vk_collector_wake();

    const kt__vk_table_t *vk = &ctx->vk;
    vk->vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, ctx->pool, 2 * slot + 1);
    if (!ctx->copy_readback || ctx->copy_at_end)
        return 0;
    kt__vk_record_copy(ctx, cmd, slot);
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
        if (pair != KT__VK_NONE) {
            s->own_copy = 1; /* counted in flight when a submission arms it */
        } else {
            s->self_copy = 1;
            kt__vk_inflight_arm(&s->inflight, s->kernel);
        }
        kt__vk_record_copy(ctx, cmd, i);
        n++;
    }
    if (n && pair != KT__VK_NONE) { /* a pair around no timed dispatch stays OPEN: unused, released at discard */
        kt__vk_slot_t *ps = &ctx->slots[pair];
        ps->state = KT__VK_SLOT_CLOSED;
        ps->own_copy = 1;
        VkDeviceSize at = (VkDeviceSize)pair * KT__VK_WORDS_PER_SLOT * sizeof(uint64_t);
        if (ps->pair_first == KT__VK_NONE) {
            kt__vk_record_copy(ctx, cmd, pair);
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

/* kt_vk_discard, or with `untimed` kt_vk_cmd_untimed: the recording is not executed yet, nothing to read. */
static int discard_cmd(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, int untimed)
{
    if (!ctx || !cmd)
        return KT_EINVAL;
    /* The command buffer is not pending (re-begun, reset or freed), so every execution of it has completed:
     * read its slots now rather than release values the device has written, which the next use of the slot
     * would otherwise take for its own (the stale check knows only values it has read). */
    if (!ctx->copy_readback && !untimed) {
        pthread_mutex_lock(&ctx->lock);
        int mine = 0;
        for (uint32_t i = ctx->used_first; i != KT__VK_NONE && !mine; i = ctx->slots[i].next)
            mine = ctx->slots[i].cmd == cmd && ctx->slots[i].state == KT__VK_SLOT_CLOSED;
        if (mine)
            kt__vk_poll_pass_locked(ctx, cmd);
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
                kt_record_drop(s->kernel, untimed ? KT_DROP_NO_TIMING
                                                  : kt__vk_unread_reason(s, KT_DROP_READ_FAILED,
                                                                         KT_DROP_NEVER_SUBMITTED));
                kt__vk_slot_release_locked(ctx, slot);
                n++;
            }
        }
        slot = next;
    }
    n += kt__vk_lost_occ_release_locked(ctx, cmd); /* its occurrences without a slot, if never submitted */
    pthread_mutex_unlock(&ctx->lock);
    if (!untimed)
        atomic_fetch_add(&ctx->discarded, n);
    return (int)n;
}

int kt_vk_discard(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    return discard_cmd(ctx, cmd, 0);
}

int kt_vk_cmd_untimed(kt_vk_ctx_t *ctx, VkCommandBuffer cmd)
{
    return discard_cmd(ctx, cmd, 1);
}
