/* vk_submit.c — every execution timed (kt_vk_desc_t.per_submission): ktiming's own command buffers around each
 * batch of a vkQueueSubmit.
 *
 * A primary command buffer recorded once and submitted many times writes its timestamps into the same queries
 * at every execution (kt_vk_begin records their reset too). What makes each execution readable is where the
 * values go: per batch, a command buffer of ktiming's appended after the application's copies every slot of the
 * batch's primaries into a fresh execution record of the readback buffer (WAIT + availability, as copy readback
 * does), and one prepended to the batch writes the begin timestamp of the batch itself. The application's
 * command buffers carry only resets and timestamps: no wait between its dispatches.
 *
 * ktiming's command buffers can be re-recorded once their submission completed: a fence of ours tells. It is the
 * submission's own when the application passed none. With the application's fence, none is added per
 * submission: a fence signals once every earlier submission to its queue has completed, so the next fence of ours
 * on that queue covers it too. Only when KT__VK_UNFENCED submissions of one queue wait for one does an empty
 * vkQueueSubmit carry a fence of ours (issue 37.5: one per submission woke the driver's queue thread once more
 * per batch, a wake-up the program did not pay for).
 *
 * Calls vk_clock.c (bracketing samples) and vk_ring.c (slots, records, copies); called by vk_context.c (init,
 * fini) and by the application or the layer (kt_vk_queue_submit, kt_vk_cmd_execute).
 */
#include "backends/vulkan/vk_internal.h"

#include <stdlib.h>
#include <string.h>

#define KT__VK_SUBS_MAX 1024u /* ktiming submissions in flight per context */
#define KT__VK_UNFENCED 16u   /* submissions of one queue with the program's fence before an empty one of ours */

int kt__vk_submit_init(kt_vk_ctx_t *ctx)
{
    ctx->execs = calloc(ctx->exec_cap, sizeof(*ctx->execs));
    ctx->subs = calloc(KT__VK_SUBS_MAX, sizeof(*ctx->subs));
    if (!ctx->execs || !ctx->subs)
        return KT_ENOMEM;
    for (uint32_t e = 0; e < ctx->exec_cap; e++)
        ctx->execs[e].slot = KT__VK_NONE;
    ctx->submit_kernel = kt_kernel_intern("vkQueueSubmit", KT_BACKEND_VULKAN, ctx->device_key);
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = ctx->queue_family,
    };
    VkResult r = ctx->vk.vkCreateCommandPool(ctx->device, &pci, NULL, &ctx->sub_pool);
    if (r != VK_SUCCESS) {
        ctx->sub_pool = VK_NULL_HANDLE;
        atomic_store(&ctx->last_error, (int)r);
        return KT_EBACKEND;
    }
    return 0;
}

/* After kt_vk_ctx_destroy's last collection (the timed work has finished, by the destroy rule): waits for our own
 * submissions (bounded), then frees their fences and command buffers with the pool. */
void kt__vk_submit_fini(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    for (uint32_t i = 0; i < ctx->nsubs; i++) {
        kt__vk_sub_t *s = &ctx->subs[i];
        if (s->fence) {
            vk->vkWaitForFences(ctx->device, 1, &s->fence, VK_TRUE, UINT64_C(2000000000));
            vk->vkDestroyFence(ctx->device, s->fence, NULL);
        }
        free(s->cmds);
    }
    for (uint32_t i = 0; i < ctx->nfree_fences; i++)
        vk->vkDestroyFence(ctx->device, ctx->free_fences[i], NULL);
    if (ctx->sub_pool) /* frees its command buffers (also those whose submission could not be fenced) */
        vk->vkDestroyCommandPool(ctx->device, ctx->sub_pool, NULL);
    free(ctx->subs);
    free(ctx->free_cmds);
    free(ctx->free_fences);
    ctx->subs = NULL;
    ctx->free_cmds = NULL;
    ctx->free_fences = NULL;
    ctx->nsubs = ctx->nfree_fences = ctx->nfree_cmds = 0;
    ctx->sub_pool = VK_NULL_HANDLE;
}

/* ---------------------------------------------------------------------------------------------------
 * Execution records (ctx->lock held; freeing and reclaiming them is vk_ring.c's)
 * ------------------------------------------------------------------------------------------------- */

/* n consecutive records (modulo the ring) from *first (kt__vk_exec_pick); -1 when the ring has no room. */
static int exec_alloc_locked(kt_vk_ctx_t *ctx, uint32_t n, uint32_t *first)
{
    kt__vk_exec_reclaim_locked(ctx);
    int at = kt__vk_exec_pick(ctx->execs, ctx->exec_cap, ctx->exec_head, ctx->exec_used, n, first);
    if (at < 0)
        return -1;
    if (at > 0)
        ctx->exec_used += n;
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * One batch's plan
 * ------------------------------------------------------------------------------------------------- */

typedef struct kt__vk_plan_t {
    uint32_t nslots;                       /* timed slots of the batch's primaries (as many as it holds) */
    uint32_t cap_slots;                    /* entries of slots and stage (malloc'ed, freed with the plan) */
    uint32_t *slots;
    uint8_t *stage;                        /* the slot's words hold a secondary occurrence's copy */
    uint32_t batch_slot;                   /* the batch's own timestamp pair, KT__VK_NONE when the ring had none
                                              (its dispatches are timed all the same; the batch span is dropped) */
    uint32_t nexec;                        /* records: nslots, plus one for the batch when batch_slot is set */
    uint32_t first_exec;                   /* records: first_exec .. + nslots for the slots, then the batch's */
    int timed;                             /* 0: the batch goes as the application made it */
    uint32_t pair;                         /* its one command buffer's own pair (kt_vk_cmd_begin), or NONE */
    int direct;                            /* timed by that pair: no command buffer of ours, no batch slot */
    int arm;                               /* slots copied into their own words (own_copy) wait for it */
    VkCommandBuffer head, tail;            /* ours */
    int fallback;                          /* timed, but the rewrite could not be allocated: the batch went to the
                                              driver as the program made it, this execution counted as dropped */
} kt__vk_plan_t;

/* Whether a batch's extension structures let us add command buffers: a device-group submission gives one mask
 * per command buffer, and a protected submission may only hold protected command buffers (ours are not). */
static int batch_extensible(const void *pnext)
{
    for (const VkBaseInStructure *s = pnext; s; s = s->pNext) {
        if (s->sType == VK_STRUCTURE_TYPE_DEVICE_GROUP_SUBMIT_INFO)
            return 0;
        if (s->sType == VK_STRUCTURE_TYPE_PROTECTED_SUBMIT_INFO && ((const VkProtectedSubmitInfo *)s)->protectedSubmit)
            return 0;
    }
    return 1;
}

static int cmd_in(VkCommandBuffer cmd, const VkCommandBuffer *cmds, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (cmds[i] == cmd)
            return 1;
    return 0;
}

/* Under ctx->lock: this execution of the plan's slots cannot be timed (ring full); the batch is counted by the
 * caller. */
static void drop_slots_locked(kt_vk_ctx_t *ctx, const kt__vk_plan_t *p)
{
    for (uint32_t k = 0; k < p->nslots; k++) {
        kt_record_drop(ctx->slots[p->slots[k]].kernel, KT_DROP_RING_FULL);
        ctx->slots[p->slots[k]].executions++;
    }
    atomic_fetch_add(&ctx->dropped, p->nslots);
}

/* Appends slot i to the plan (its arrays grow); 0 when ktiming's own memory ran out. */
static int plan_push(kt__vk_plan_t *p, uint32_t i, int stage)
{
    if (p->nslots == p->cap_slots) {
        uint32_t n = p->cap_slots ? 2 * p->cap_slots : 64;
        uint32_t *slots = realloc(p->slots, (size_t)n * sizeof(*slots));
        if (slots)
            p->slots = slots;
        uint8_t *stage_ = slots ? realloc(p->stage, n) : NULL;
        if (!slots || !stage_)
            return 0;
        p->stage = stage_;
        p->cap_slots = n;
    }
    p->stage[p->nslots] = (uint8_t)stage;
    p->slots[p->nslots++] = i;
    return 1;
}

/* Under ctx->lock: finds the batch's timed slots and takes its records and its own slot. What cannot be had is
 * counted as dropped (ring full), never left unread silently. */
static void plan_locked(kt_vk_ctx_t *ctx, const VkCommandBuffer *cmds, uint32_t ncmds, int extensible,
                        kt_drop_reason_t closed, uint32_t nbatches, kt__vk_plan_t *p)
{
    p->nslots = 0;
    p->timed = p->direct = p->arm = 0;
    p->pair = KT__VK_NONE;
    uint32_t overflow = 0;
    for (uint32_t k = 0; k < ctx->nlost_occ; k++) /* occurrences kt_vk_cmd_execute had no slot for */
        if (cmd_in(ctx->lost_occ[k].cmd, cmds, ncmds)) {
            kt_record_drop(ctx->lost_occ[k].kernel, KT_DROP_RING_FULL);
            ctx->lost_occ[k].executions++;
            overflow++;
        }
    for (uint32_t i = ctx->used_first; i != KT__VK_NONE; i = ctx->slots[i].next) {
        const kt__vk_slot_t *s = &ctx->slots[i];
        if (s->state != KT__VK_SLOT_CLOSED || s->self_copy || !cmd_in(s->cmd, cmds, ncmds))
            continue;
        if (s->stage_lost) { /* an occurrence overwritten by a later one of the same call: counted, never read */
            kt_record_drop(s->kernel, KT_DROP_RESUBMITTED);
            ctx->slots[i].executions++;
            overflow++;
            continue;
        }
        if (s->own_copy) { /* a one-time primary's: read from its own words once submitted */
            if (!s->cmd_pair)
                p->arm = 1;
            else if (ncmds == 1)
                p->pair = i;
            continue;
        }
        if (s->submission)
            continue;
        if (!extensible || !plan_push(p, i, s->stage)) {
            /* this execution is counted here, so a later discard does not count the slot again */
            kt_record_drop(s->kernel, extensible ? KT_DROP_RING_FULL : closed);
            ctx->slots[i].executions++;
            overflow++;
        }
    }
    /* A batch of one one-time primary timing itself needs nothing added (so it may be any batch) */
    p->direct = p->pair != KT__VK_NONE && p->nslots == 0;
    /* A batch with nothing timed goes as the program made it beside timed batches of the same call (it got
     * ktiming's command buffers and a batch span: 600 batch spans for 300 frames). Alone in its call it was sent
     * here for work the caller counts (a simultaneous-use primary's dispatches): its span stays. */
    if (!extensible || p->direct || (!p->nslots && !p->arm && nbatches > 1)) {
        atomic_fetch_add(&ctx->dropped, overflow);
        return;
    }
    /* The batch's own pair: when the ring has none (a recording holding every slot), its dispatches are still
     * timed and only the batch span is dropped (before, the whole batch was: 0 of 4,095 dispatches). */
    p->batch_slot = kt__vk_slot_alloc_locked(ctx);
    if (p->batch_slot == KT__VK_SLOT_DROPPED) {
        p->batch_slot = KT__VK_NONE;
        kt_record_drop(ctx->submit_kernel, KT_DROP_RING_FULL);
        overflow++;
    }
    p->nexec = p->nslots + (p->batch_slot != KT__VK_NONE);
    if (!p->nexec || exec_alloc_locked(ctx, p->nexec, &p->first_exec) != 0) {
        if (p->batch_slot != KT__VK_NONE) {
            kt__vk_slot_release_locked(ctx, p->batch_slot);
            kt_record_drop(ctx->submit_kernel, KT_DROP_RING_FULL);
            overflow++;
        }
        drop_slots_locked(ctx, p);
        atomic_fetch_add(&ctx->dropped, overflow);
        p->nslots = 0;
        return;
    }
    atomic_fetch_add(&ctx->dropped, overflow);
    for (uint32_t k = 0; k < p->nexec; k++)
        ctx->execs[(p->first_exec + k) % ctx->exec_cap].state = KT__VK_EXEC_RESERVED;
    p->timed = 1;
    if (p->batch_slot == KT__VK_NONE)
        return;
    kt__vk_slot_t *b = &ctx->slots[p->batch_slot];
    b->state = KT__VK_SLOT_CLOSED;
    b->submission = 1;
    b->kernel = ctx->submit_kernel;
    b->cmd = VK_NULL_HANDLE;
    b->gen++;
    p->timed = 1;
}

/* Under ctx->lock, once the submission is accepted: the records wait for their copies. */
/* The queue track of `queue` (issue 37.4: several queues of one family shared one): the context's own for the
 * first VkQueue, "<label> (queue k)" for the k-th one seen; past KT__VK_LANES, the last one's. */
static uint32_t lane_of(kt_vk_ctx_t *ctx, VkQueue queue)
{
    pthread_mutex_lock(&ctx->lock);
    for (uint32_t i = 0; i < ctx->nlanes; i++)
        if (ctx->lanes[i].queue == queue) {
            uint32_t id = ctx->lanes[i].id;
            pthread_mutex_unlock(&ctx->lock);
            return id;
        }
    uint32_t k = ctx->nlanes;
    pthread_mutex_unlock(&ctx->lock);
    if (k >= KT__VK_LANES)
        return ctx->lanes[KT__VK_LANES - 1].id;
    uint32_t id = ctx->queue_id;
    if (k > 0) { /* registered outside ctx->lock (the registry's lock is the core's) */
        char label[96];
        snprintf(label, sizeof label, "%s (queue %u)", ctx->queue_label, k + 1);
        id = kt_queue_register(KT_BACKEND_VULKAN, ctx->device_key, label);
    }
    pthread_mutex_lock(&ctx->lock);
    for (uint32_t i = 0; i < ctx->nlanes; i++) /* another thread may have added it meanwhile */
        if (ctx->lanes[i].queue == queue)
            id = ctx->lanes[i].id, k = KT__VK_LANES;
    if (k < KT__VK_LANES && ctx->nlanes == k) {
        ctx->lanes[k].queue = queue;
        ctx->lanes[k].id = id;
        ctx->nlanes = k + 1;
    }
    pthread_mutex_unlock(&ctx->lock);
    return id;
}

static void plan_commit_locked(kt_vk_ctx_t *ctx, const kt__vk_plan_t *p, uint64_t now, uint32_t thread,
                               uint32_t lane)
{
    for (uint32_t k = 0; k < p->nexec; k++) {
        uint32_t e = (p->first_exec + k) % ctx->exec_cap;
        kt__vk_exec_t *x = &ctx->execs[e];
        x->state = KT__VK_EXEC_PENDING;
        x->thread = thread;
        x->lane = lane;
        x->enqueue_ns = now;
        if (k < p->nslots) {
            x->kernel = ctx->slots[p->slots[k]].kernel;
            x->launch = ctx->slots[p->slots[k]].launch;
            x->slot = KT__VK_NONE;
            ctx->slots[p->slots[k]].executions++;
        } else {
            x->kernel = ctx->submit_kernel;
            memset(&x->launch, 0, sizeof x->launch);
            x->slot = p->batch_slot;
        }
        kt__vk_inflight_arm(&x->inflight, x->kernel);
        ctx->exec_pending++;
    }
    atomic_fetch_add(&ctx->begun, p->nexec);
}

/* Under ctx->lock, once the submission is accepted: the slots a one-time primary copied into their own words are
 * read from there (and its pair, when it times the batch, is the batch's record). */
static void plan_arm_locked(kt_vk_ctx_t *ctx, const kt__vk_plan_t *p, const VkCommandBuffer *cmds, uint32_t ncmds,
                            uint64_t now, uint32_t thread, uint32_t lane)
{
    if (!p->arm && !p->direct)
        return;
    for (uint32_t i = ctx->used_first; i != KT__VK_NONE; i = ctx->slots[i].next) {
        kt__vk_slot_t *s = &ctx->slots[i];
        if (s->state != KT__VK_SLOT_CLOSED || !s->own_copy || s->self_copy || !cmd_in(s->cmd, cmds, ncmds))
            continue;
        if (s->cmd_pair && !(p->direct && i == p->pair)) {
            /* its batch holds other command buffers too: the pair is not the batch span; read quietly once its
             * copy has landed and released, rather than held until the command buffer is discarded (programs
             * that allocate per iteration and free at the end pinned the ring: 4,095 of 6,000 timed) */
            s->unused = 1;
            s->self_copy = 1;
            continue;
        }
        s->self_copy = 1;
        s->executions++;
        s->lane = lane;
        kt__vk_inflight_arm(&s->inflight, s->kernel);
        /* the dispatch whose begin is the pair's: read with it (vk_context.c pair_pending) */
        int first = p->direct && ctx->slots[p->pair].pair_first == i;
        s->batch_pair = first ? p->pair : KT__VK_NONE;
        s->batch_pair_gen = first ? ctx->slots[p->pair].gen : 0;
        if (s->cmd_pair) {
            s->enqueue_ns = now;
            s->thread = thread;
            atomic_fetch_add(&ctx->begun, 1);
            atomic_fetch_add(&ctx->direct_batches, 1);
        }
    }
}

/* Under ctx->lock, when the submission failed or was not made: nothing executed, nothing is counted. */
static void plan_cancel_locked(kt_vk_ctx_t *ctx, const kt__vk_plan_t *p)
{
    for (uint32_t k = 0; k < p->nexec; k++)
        ctx->execs[(p->first_exec + k) % ctx->exec_cap].state = KT__VK_EXEC_FREE; /* never PENDING */
    kt__vk_exec_reclaim_locked(ctx);
    if (p->batch_slot != KT__VK_NONE)
        kt__vk_slot_release_locked(ctx, p->batch_slot);
}

/* Under ctx->lock, after a batch went to the driver unplanned, as the program made it, because ktiming's own memory
 * ran out (issue 37.4): this execution of the slots of `cmds` (the batch, or a part of a long one) counts as dropped
 * -- `ring full`, or `no timing` for a batch that cannot take ours -- and one-time primaries' own copies are read
 * as after any submission. Before, the execution was lost silently. */
static void unplanned_locked(kt_vk_ctx_t *ctx, const VkCommandBuffer *cmds, uint32_t ncmds, int extensible,
                             uint64_t now, uint32_t thread, uint32_t lane)
{
    kt__vk_plan_t p = {.pair = KT__VK_NONE, .batch_slot = KT__VK_NONE};
    plan_locked(ctx, cmds, ncmds, 0, extensible ? KT_DROP_RING_FULL : KT_DROP_NO_TIMING, 1, &p);
    plan_arm_locked(ctx, &p, cmds, ncmds, now, thread, lane);
}

/* ---------------------------------------------------------------------------------------------------
 * ktiming's command buffers and fences (ctx->sub_lock held)
 * ------------------------------------------------------------------------------------------------- */

/* Completed submissions give their command buffers and fences back. A sub is complete when its fence, or a later
 * fence of ours on its queue, has signalled (found newest first, so each queue's latest signalled fence is asked
 * once and covers the rest). What cannot be given back (memory) stays for the next call. */
#define KT__VK_RECLAIM_QUEUES 16u
static void reclaim_locked(kt_vk_ctx_t *ctx)
{
    const kt__vk_table_t *vk = &ctx->vk;
    VkQueue done_q[KT__VK_RECLAIM_QUEUES];
    uint32_t ndone = 0, keep = 0;
    uint8_t done[KT__VK_SUBS_MAX];
    for (uint32_t i = ctx->nsubs; i-- > 0;) {
        const kt__vk_sub_t *s = &ctx->subs[i];
        int covered = 0;
        for (uint32_t q = 0; q < ndone && !covered; q++)
            covered = done_q[q] == s->queue;
        if (!covered && s->fence && vk->vkGetFenceStatus(ctx->device, s->fence) == VK_SUCCESS) {
            covered = 1;
            if (ndone < KT__VK_RECLAIM_QUEUES) /* past that, older subs of the queue ask their own fence */
                done_q[ndone++] = s->queue;
        }
        done[i] = (uint8_t)covered;
    }
    for (uint32_t i = 0; i < ctx->nsubs; i++) {
        kt__vk_sub_t *s = &ctx->subs[i];
        int back = done[i];
        if (back && ctx->nfree_cmds + s->ncmds > ctx->cap_free_cmds) {
            uint32_t cap = ctx->cap_free_cmds ? 2 * ctx->cap_free_cmds : 16;
            while (cap < ctx->nfree_cmds + s->ncmds)
                cap *= 2;
            VkCommandBuffer *p = realloc(ctx->free_cmds, cap * sizeof(*p));
            if (p) {
                ctx->free_cmds = p;
                ctx->cap_free_cmds = cap;
            } else {
                back = 0;
            }
        }
        if (back && s->fence && ctx->nfree_fences == ctx->cap_free_fences) {
            uint32_t cap = ctx->cap_free_fences ? 2 * ctx->cap_free_fences : 8;
            VkFence *p = realloc(ctx->free_fences, cap * sizeof(*p));
            if (p) {
                ctx->free_fences = p;
                ctx->cap_free_fences = cap;
            } else {
                back = 0;
            }
        }
        if (!back) {
            ctx->subs[keep++] = *s;
            continue;
        }
        memcpy(ctx->free_cmds + ctx->nfree_cmds, s->cmds, s->ncmds * sizeof(*s->cmds));
        ctx->nfree_cmds += s->ncmds;
        if (s->fence && vk->vkResetFences(ctx->device, 1, &s->fence) == VK_SUCCESS)
            ctx->free_fences[ctx->nfree_fences++] = s->fence;
        else if (s->fence)
            vk->vkDestroyFence(ctx->device, s->fence, NULL);
        free(s->cmds);
    }
    ctx->nsubs = keep;
}

/* Submissions of `queue` in flight after its last fence of ours: waiting for a later one (sub_lock held). */
static uint32_t unfenced_locked(const kt_vk_ctx_t *ctx, VkQueue queue)
{
    uint32_t n = 0;
    for (uint32_t i = ctx->nsubs; i-- > 0;) {
        if (ctx->subs[i].queue != queue)
            continue;
        if (ctx->subs[i].fence)
            break;
        n++;
    }
    return n;
}

static VkCommandBuffer cmd_take_locked(kt_vk_ctx_t *ctx)
{
    if (ctx->nfree_cmds)
        return ctx->free_cmds[--ctx->nfree_cmds];
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = ctx->sub_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    if (ctx->vk.vkAllocateCommandBuffers(ctx->device, &ai, &cmd) != VK_SUCCESS)
        return VK_NULL_HANDLE;
    /* Under a layer, a dispatchable object made below the loader needs the loader's dispatch data. */
    if (ctx->set_loader_data && ctx->set_loader_data(ctx->device, cmd) != VK_SUCCESS) {
        ctx->vk.vkFreeCommandBuffers(ctx->device, ctx->sub_pool, 1, &cmd);
        return VK_NULL_HANDLE;
    }
    return cmd;
}

static VkFence fence_take_locked(kt_vk_ctx_t *ctx)
{
    if (ctx->nfree_fences)
        return ctx->free_fences[--ctx->nfree_fences];
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence f = VK_NULL_HANDLE;
    if (ctx->vk.vkCreateFence(ctx->device, &fci, NULL, &f) != VK_SUCCESS)
        return VK_NULL_HANDLE;
    return f;
}

/* Records the batch's two command buffers: head = reset + begin timestamp of the batch; tail = its end timestamp,
 * the copies of every timed slot and of the batch's pair into their records, and a barrier for host reads. */
static int record_plan(kt_vk_ctx_t *ctx, kt__vk_plan_t *p)
{
    const kt__vk_table_t *vk = &ctx->vk;
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    int span = p->batch_slot != KT__VK_NONE; /* else the dispatches' copies only (head left empty) */
    uint32_t q = span ? 2 * p->batch_slot : 0;
    if (vk->vkBeginCommandBuffer(p->head, &bi) != VK_SUCCESS)
        return -1;
    if (span)
        vk->vkCmdResetQueryPool(p->head, ctx->pool, q, 2);
    /* TOP_OF_PIPE: the batch begins when the queue reaches it, so none of its dispatches' begins (COMPUTE_SHADER)
     * can precede it; on a GPU it may be stamped while the previous batch's work still drains (batch spans can
     * then overlap on the queue track, dispatch spans do not). lavapipe flushes its rasterizer for a timestamp
     * at any other stage (lvp_execute.c), one more scene per batch. */
    if (span)
        vk->vkCmdWriteTimestamp(p->head, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, ctx->pool, q);
    if (vk->vkEndCommandBuffer(p->head) != VK_SUCCESS || vk->vkBeginCommandBuffer(p->tail, &bi) != VK_SUCCESS)
        return -1;
    if (span)
        vk->vkCmdWriteTimestamp(p->tail, ctx->batch_end_stage, ctx->pool, q + 1);
    /* An execution dependency on everything before (the batch's timestamps included) ahead of the copies: their
     * WAIT then finds the values written. Without it lavapipe's WAIT copy costs a queue-wide wait per batch
     * (bench/vulkan_latency: timed_vs_untimed 3.3 without, 2.3 with, against a floor of 1.45-1.6 for two bare
     * timestamps). WAIT stays: it is what the spec orders the copy after the timestamp writes by. */
    /* (also makes the primaries' copies of secondary occurrences visible to the buffer copies below) */
    VkMemoryBarrier staged = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT,
    };
    vk->vkCmdPipelineBarrier(p->tail, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                             &staged, 0, NULL, 0, NULL);
    for (uint32_t k = 0; k < p->nexec; k++) {
        uint32_t e = (p->first_exec + k) % ctx->exec_cap;
        VkDeviceSize dst = (VkDeviceSize)kt__vk_exec_word(ctx, e) * sizeof(uint64_t);
        if (k < p->nslots && p->stage[k]) { /* a secondary's occurrence: the primary's copy of it, as it is */
            VkBufferCopy bc = {.srcOffset = (VkDeviceSize)p->slots[k] * KT__VK_WORDS_PER_SLOT * sizeof(uint64_t),
                               .dstOffset = dst,
                               .size = KT__VK_WORDS_PER_SLOT * sizeof(uint64_t)};
            vk->vkCmdCopyBuffer(p->tail, ctx->buffer, ctx->buffer, 1, &bc);
            continue;
        }
        kt__vk_copy_results(ctx, p->tail, k < p->nslots ? 2 * p->slots[k] : q, 2, dst);
    }
    kt__vk_host_barrier(ctx, p->tail);
    return vk->vkEndCommandBuffer(p->tail) == VK_SUCCESS ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------------
 * The submission
 * ------------------------------------------------------------------------------------------------- */

/* A batch as both submit structures see it. */
typedef struct kt__vk_batch_t {
    const void *pnext;
    const VkCommandBuffer *cmds;
    uint32_t ncmds;
    int sealed; /* VkSubmitInfo2 with VK_SUBMIT_PROTECTED_BIT: only protected command buffers may join it */
} kt__vk_batch_t;

/* Either submit: the original batches rewritten by `rewrite` into `scratch` (or left alone), then submitted. */
typedef VkResult (*kt__vk_submit_fn)(kt_vk_ctx_t *ctx, VkQueue queue, uint32_t n, const void *orig,
                                     kt__vk_plan_t *plans, VkFence fence, void *fn);

/* The rewrite could not be allocated: every timed plan falls back (the caller counts it), and the program's
 * batches go to the driver untouched rather than fail with VK_ERROR_OUT_OF_HOST_MEMORY. */
static void plans_fall_back(kt__vk_plan_t *plans, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (plans[i].timed) {
            plans[i].timed = 0;
            plans[i].fallback = 1;
        }
}

/* Whether everything timed that went to the queue through this context has been seen complete: no submission of
 * ours in flight, no execution record unread, no one-time primary armed and unread. A bracketing sample
 * submitted then is not queued behind the application's timed work. */
static int seen_idle(kt_vk_ctx_t *ctx)
{
    /* (sub_lock held by the caller) a sub waiting for a later fence of ours has its records in exec_pending */
    for (uint32_t i = 0; i < ctx->nsubs; i++)
        if (ctx->subs[i].fence)
            return 0;
    pthread_mutex_lock(&ctx->lock);
    int idle = ctx->exec_pending == 0;
    for (uint32_t i = ctx->used_first; i != KT__VK_NONE && idle; i = ctx->slots[i].next)
        idle = !(ctx->slots[i].self_copy && ctx->slots[i].state == KT__VK_SLOT_CLOSED);
    pthread_mutex_unlock(&ctx->lock);
    return idle;
}

/* A timed plan whose rewrite cannot go to the queue: its slots dropped, the batch span counted as lost, the
 * plan cancelled (ctx->lock held). */
static void plan_give_up_locked(kt_vk_ctx_t *ctx, kt__vk_plan_t *p)
{
    drop_slots_locked(ctx, p);
    if (p->batch_slot != KT__VK_NONE) {
        kt_record_drop(ctx->submit_kernel, KT_DROP_RING_FULL);
        atomic_fetch_add(&ctx->dropped, 1);
    }
    plan_cancel_locked(ctx, p);
}

/* A timed plan's head and tail command buffers of ours (sub_lock held), recorded; each one taken joins mine[]
 * (*nmine). Without both (no room to track them: mine NULL; none free) or when recording fails, the plan is given
 * up and the batch goes untimed. */
static void record_ours_locked(kt_vk_ctx_t *ctx, kt__vk_plan_t *p, VkCommandBuffer *mine, uint32_t *nmine)
{
    p->head = mine ? cmd_take_locked(ctx) : VK_NULL_HANDLE;
    p->tail = p->head ? cmd_take_locked(ctx) : VK_NULL_HANDLE;
    if (p->head)
        mine[(*nmine)++] = p->head;
    if (p->tail)
        mine[(*nmine)++] = p->tail;
    if (!p->head || !p->tail || record_plan(ctx, p) != 0) {
        pthread_mutex_lock(&ctx->lock);
        plan_give_up_locked(ctx, p);
        pthread_mutex_unlock(&ctx->lock);
        p->timed = 0;
    }
}

/* A fence of ours not submitted goes back to the free list (sub_lock held). */
static void fence_give_back_locked(kt_vk_ctx_t *ctx, VkFence f)
{
    if (f && ctx->nfree_fences < ctx->cap_free_fences)
        ctx->free_fences[ctx->nfree_fences++] = f;
    else if (f)
        ctx->vk.vkDestroyFence(ctx->device, f, NULL);
}

/* Our command buffers and fence after a submission that put nothing of ours on the queue (it failed, or nothing
 * was timed): reusable at once (sub_lock held). */
static void settle_ours_locked(kt_vk_ctx_t *ctx, VkFence ours, VkCommandBuffer *mine, uint32_t nmine)
{
    for (uint32_t k = 0; k < nmine; k++)
        if (ctx->nfree_cmds < ctx->cap_free_cmds)
            ctx->free_cmds[ctx->nfree_cmds++] = mine[k];
        else
            ctx->vk.vkFreeCommandBuffers(ctx->device, ctx->sub_pool, 1, &mine[k]);
    fence_give_back_locked(ctx, ours);
}

/* Plans, records and submits; `submit` makes the driver call with the batches rewritten from plans. */
static VkResult submit_common(kt_vk_ctx_t *ctx, VkQueue queue, uint32_t n, const kt__vk_batch_t *batches,
                              const void *orig, VkFence fence, kt__vk_submit_fn submit, void *fn)
{
    kt__vk_plan_t *plans = calloc(n ? n : 1, sizeof(*plans));
    uint64_t now = kt_now_ns();
    uint32_t thread = kt_thread_ordinal(), ntimed = 0;
    uint32_t lane = lane_of(ctx, queue);
    if (!plans) {
        VkResult r = submit(ctx, queue, n, orig, NULL, fence, fn);
        pthread_mutex_lock(&ctx->lock);
        for (uint32_t i = 0; r == VK_SUCCESS && i < n; i++)
            unplanned_locked(ctx, batches[i].cmds, batches[i].ncmds,
                             !batches[i].sealed && batch_extensible(batches[i].pnext), now, thread, lane);
        pthread_mutex_unlock(&ctx->lock);
        return r;
    }
    pthread_mutex_lock(&ctx->lock);
    for (uint32_t i = 0; i < n; i++)
        if (batches[i].ncmds)
            plan_locked(ctx, batches[i].cmds, batches[i].ncmds,
                        !batches[i].sealed && batch_extensible(batches[i].pnext), KT_DROP_NO_TIMING, n, &plans[i]);
    pthread_mutex_unlock(&ctx->lock);

    pthread_mutex_lock(&ctx->sub_lock);
    reclaim_locked(ctx);
    /* No calibrated timestamps: a bracketing sample goes to the queue here, where we hold it, ahead of the
     * application's batches and never waited for (issue 37.1: waiting made a submit behind work that waits on a
     * host-set event block 17 s); a later collection takes it once its fence is seen signalled. */
    if (!ctx->calibrated)
        kt__vk_clock_bracket_submit(ctx, queue, seen_idle);
    VkFence ours = VK_NULL_HANDLE;
    VkCommandBuffer *mine = NULL;
    uint32_t nmine = 0;
    int room = ctx->nsubs < KT__VK_SUBS_MAX, flush = 0;
    for (uint32_t i = 0; i < n; i++)
        ntimed += plans[i].timed;
    /* A fence of ours: the submission's own when the program passed none. With the program's fence, the next
     * fence of ours on the queue covers it; an empty submission carries one only every KT__VK_UNFENCED-th time
     * (before, every time: one more wake of the driver's queue thread per batch). */
    if (ntimed && room && (mine = malloc(2 * ntimed * sizeof(*mine))) != NULL) {
        flush = fence && unfenced_locked(ctx, queue) + 1 >= KT__VK_UNFENCED;
        if (!fence || flush)
            ours = fence_take_locked(ctx);
        if (!ours && !fence) { /* nothing would tell when our command buffers are done: untimed */
            free(mine);
            mine = NULL;
        }
        flush &= ours != VK_NULL_HANDLE;
    }
    for (uint32_t i = 0; i < n; i++)
        if (plans[i].timed)
            record_ours_locked(ctx, &plans[i], mine, &nmine);
    ntimed = 0;
    for (uint32_t i = 0; i < n; i++)
        ntimed += plans[i].timed;

    VkResult r = submit(ctx, queue, n, orig, plans, fence ? fence : (ntimed ? ours : VK_NULL_HANDLE), fn);
    int fenced = r == VK_SUCCESS && ntimed; /* by ours on it, by the empty one after, or by a later one */
    if (fenced && flush && ctx->vk.vkQueueSubmit(queue, 0, NULL, ours) != VK_SUCCESS)
        flush = 0; /* covered by a later one */

    pthread_mutex_lock(&ctx->lock);
    for (uint32_t i = 0; i < n; i++) {
        if (plans[i].fallback)
            plan_give_up_locked(ctx, &plans[i]);
        if (r == VK_SUCCESS)
            plan_arm_locked(ctx, &plans[i], batches[i].cmds, batches[i].ncmds, now, thread, lane);
        if (!plans[i].timed)
            continue;
        if (r == VK_SUCCESS)
            plan_commit_locked(ctx, &plans[i], now, thread, lane);
        else
            plan_cancel_locked(ctx, &plans[i]);
    }
    pthread_mutex_unlock(&ctx->lock);
    if (mine && nmine && fenced) { /* in flight: reused once a fence of ours on the queue signalled */
        VkFence mark = !fence || flush ? ours : VK_NULL_HANDLE;
        if (!mark)
            fence_give_back_locked(ctx, ours);
        ctx->subs[ctx->nsubs++] = (kt__vk_sub_t){.fence = mark, .queue = queue, .ncmds = nmine, .cmds = mine};
        mine = NULL;
    } else {
        settle_ours_locked(ctx, ours, mine, nmine);
    }
    pthread_mutex_unlock(&ctx->sub_lock);
    free(mine);
    for (uint32_t i = 0; i < n; i++) {
        free(plans[i].slots);
        free(plans[i].stage);
    }
    free(plans);
    return r;
}

/* vkQueueSubmit with each timed batch's command buffers between our head and tail. */
static VkResult submit1(kt_vk_ctx_t *ctx, VkQueue queue, uint32_t n, const void *orig, kt__vk_plan_t *plans,
                        VkFence fence, void *fn)
{
    (void)fn;
    const VkSubmitInfo *si = orig;
    if (!plans)
        return ctx->vk.vkQueueSubmit(queue, n, si, fence);
    VkSubmitInfo *mod = malloc((n ? n : 1) * sizeof(*mod));
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += plans[i].timed ? si[i].commandBufferCount + 2u : 0u;
    VkCommandBuffer *cmds = malloc((total ? total : 1) * sizeof(*cmds));
    if (!mod || !cmds) {
        free(mod);
        free(cmds);
        plans_fall_back(plans, n);
        return ctx->vk.vkQueueSubmit(queue, n, si, fence);
    }
    VkCommandBuffer *at = cmds;
    for (uint32_t i = 0; i < n; i++) {
        mod[i] = si[i];
        if (!plans[i].timed)
            continue;
        at[0] = plans[i].head;
        memcpy(at + 1, si[i].pCommandBuffers, si[i].commandBufferCount * sizeof(*at));
        at[si[i].commandBufferCount + 1] = plans[i].tail;
        mod[i].pCommandBuffers = at;
        mod[i].commandBufferCount = si[i].commandBufferCount + 2;
        at += si[i].commandBufferCount + 2;
    }
    VkResult r = ctx->vk.vkQueueSubmit(queue, n, mod, fence);
    free(mod);
    free(cmds);
    return r;
}

/* Not per_submission: the slots of the submitted command buffers are marked submitted (kt__vk_unread_reason), so a
 * dispatch that ran and was never read is not counted "never submitted" when its command buffer is discarded. */
static void mark_submitted(kt_vk_ctx_t *ctx, const VkCommandBuffer *cmds, uint32_t ncmds)
{
    pthread_mutex_lock(&ctx->lock);
    for (uint32_t i = ctx->used_first; i != KT__VK_NONE; i = ctx->slots[i].next)
        if (ctx->slots[i].state == KT__VK_SLOT_CLOSED && cmd_in(ctx->slots[i].cmd, cmds, ncmds))
            ctx->slots[i].submitted = 1;
    pthread_mutex_unlock(&ctx->lock);
}

/* The program's batches (si1 or si2) went to the driver unplanned, as the program made them, ktiming's memory
 * having run out before a plan could be made: each batch's execution accounted by unplanned_locked. A
 * vkQueueSubmit2 batch's command buffers go in parts of up to 64. */
static void unplanned(kt_vk_ctx_t *ctx, VkQueue queue, uint32_t n, const VkSubmitInfo *si1, const VkSubmitInfo2 *si2)
{
    uint64_t now = kt_now_ns();
    uint32_t thread = kt_thread_ordinal(), lane = lane_of(ctx, queue);
    VkCommandBuffer part[64];
    pthread_mutex_lock(&ctx->lock);
    for (uint32_t i = 0; i < n; i++) {
        if (si1) {
            unplanned_locked(ctx, si1[i].pCommandBuffers, si1[i].commandBufferCount, batch_extensible(si1[i].pNext),
                             now, thread, lane);
            continue;
        }
        int extensible = !(si2[i].flags & VK_SUBMIT_PROTECTED_BIT) && batch_extensible(si2[i].pNext);
        for (uint32_t at = 0; at < si2[i].commandBufferInfoCount; at += 64) {
            uint32_t m = si2[i].commandBufferInfoCount - at < 64 ? si2[i].commandBufferInfoCount - at : 64;
            for (uint32_t k = 0; k < m; k++)
                part[k] = si2[i].pCommandBufferInfos[at + k].commandBuffer;
            unplanned_locked(ctx, part, m, extensible, now, thread, lane);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
}

VkResult kt_vk_queue_submit(kt_vk_ctx_t *ctx, VkQueue queue, uint32_t n, const VkSubmitInfo *si, VkFence fence)
{
    if (!ctx)
        return VK_ERROR_INITIALIZATION_FAILED;
    if (!ctx->per_submit || !kt_is_enabled() || atomic_load(&ctx->lost) || ctx->stopped) {
        VkResult r = ctx->vk.vkQueueSubmit(queue, n, si, fence);
        for (uint32_t i = 0; r == VK_SUCCESS && !ctx->per_submit && i < n; i++)
            mark_submitted(ctx, si[i].pCommandBuffers, si[i].commandBufferCount);
        return r;
    }
    kt__vk_batch_t *b = calloc(n ? n : 1, sizeof(*b));
    if (!b) {
        VkResult r = ctx->vk.vkQueueSubmit(queue, n, si, fence);
        if (r == VK_SUCCESS)
            unplanned(ctx, queue, n, si, NULL);
        return r;
    }
    for (uint32_t i = 0; i < n; i++)
        b[i] = (kt__vk_batch_t){si[i].pNext, si[i].pCommandBuffers, si[i].commandBufferCount, 0};
    VkResult r = submit_common(ctx, queue, n, b, si, fence, submit1, NULL);
    free(b);
    return r;
}

/* vkQueueSubmit2: the same with VkCommandBufferSubmitInfo (ours with device mask 0: all devices). */
static VkResult submit2(kt_vk_ctx_t *ctx, VkQueue queue, uint32_t n, const void *orig, kt__vk_plan_t *plans,
                        VkFence fence, void *fn)
{
    (void)ctx;
    PFN_vkQueueSubmit2 call = (PFN_vkQueueSubmit2)fn;
    const VkSubmitInfo2 *si = orig;
    if (!plans)
        return call(queue, n, si, fence);
    VkSubmitInfo2 *mod = malloc((n ? n : 1) * sizeof(*mod));
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += plans[i].timed ? si[i].commandBufferInfoCount + 2u : 0u;
    VkCommandBufferSubmitInfo *infos = calloc(total ? total : 1, sizeof(*infos));
    if (!mod || !infos) {
        free(mod);
        free(infos);
        plans_fall_back(plans, n);
        return call(queue, n, si, fence);
    }
    VkCommandBufferSubmitInfo *at = infos;
    for (uint32_t i = 0; i < n; i++) {
        mod[i] = si[i];
        if (!plans[i].timed)
            continue;
        uint32_t c = si[i].commandBufferInfoCount;
        at[0] = (VkCommandBufferSubmitInfo){.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO,
                                            .commandBuffer = plans[i].head};
        memcpy(at + 1, si[i].pCommandBufferInfos, c * sizeof(*at));
        at[c + 1] = (VkCommandBufferSubmitInfo){.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO,
                                                .commandBuffer = plans[i].tail};
        mod[i].pCommandBufferInfos = at;
        mod[i].commandBufferInfoCount = c + 2;
        at += c + 2;
    }
    VkResult r = call(queue, n, mod, fence);
    free(mod);
    free(infos);
    return r;
}

VkResult kt_vk_queue_submit2(kt_vk_ctx_t *ctx, VkQueue queue, uint32_t n, const VkSubmitInfo2 *si, VkFence fence)
{
    if (!ctx)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkQueueSubmit2 call = ctx->vk.vkQueueSubmit2 ? ctx->vk.vkQueueSubmit2 : ctx->vk.vkQueueSubmit2KHR;
    if (!call)
        return VK_ERROR_FEATURE_NOT_PRESENT;
    if (!ctx->per_submit || !kt_is_enabled() || atomic_load(&ctx->lost) || ctx->stopped) {
        VkResult r = call(queue, n, si, fence);
        for (uint32_t i = 0; r == VK_SUCCESS && !ctx->per_submit && i < n; i++)
            for (uint32_t k = 0; k < si[i].commandBufferInfoCount; k++)
                mark_submitted(ctx, &si[i].pCommandBufferInfos[k].commandBuffer, 1);
        return r;
    }
    uint32_t ncmd = 0;
    for (uint32_t i = 0; i < n; i++)
        ncmd += si[i].commandBufferInfoCount;
    kt__vk_batch_t *b = calloc(n ? n : 1, sizeof(*b));
    VkCommandBuffer *cmds = malloc((ncmd ? ncmd : 1) * sizeof(*cmds));
    if (!b || !cmds) {
        free(b);
        free(cmds);
        VkResult r = call(queue, n, si, fence);
        if (r == VK_SUCCESS)
            unplanned(ctx, queue, n, NULL, si);
        return r;
    }
    VkCommandBuffer *at = cmds;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < si[i].commandBufferInfoCount; k++)
            at[k] = si[i].pCommandBufferInfos[k].commandBuffer;
        /* a protected batch may hold only protected command buffers; ours are not (VUID-VkSubmitInfo2-flags-03886):
         * left as the program made it, its dispatches counted as dropped, no timing */
        b[i] = (kt__vk_batch_t){si[i].pNext, at, si[i].commandBufferInfoCount,
                                (si[i].flags & VK_SUBMIT_PROTECTED_BIT) != 0};
        at += si[i].commandBufferInfoCount;
    }
    VkResult r = submit_common(ctx, queue, n, b, si, fence, submit2, (void *)call);
    free(b);
    free(cmds);
    return r;
}

/* ---------------------------------------------------------------------------------------------------
 * Secondaries: one occurrence slot per timed slot per vkCmdExecuteCommands
 * ------------------------------------------------------------------------------------------------- */

/* ctx->lock held: an occurrence of `kernel` in `primary` without a slot; 0 when ktiming's memory ran out. */
static int lost_occ_add_locked(kt_vk_ctx_t *ctx, VkCommandBuffer primary, kt_kernel_id_t kernel)
{
    if (ctx->nlost_occ == ctx->cap_lost_occ) {
        uint32_t cap = ctx->cap_lost_occ ? 2 * ctx->cap_lost_occ : 16;
        kt__vk_lost_occ_t *p = realloc(ctx->lost_occ, (size_t)cap * sizeof(*p));
        if (!p)
            return 0;
        ctx->lost_occ = p;
        ctx->cap_lost_occ = cap;
    }
    ctx->lost_occ[ctx->nlost_occ++] = (kt__vk_lost_occ_t){.cmd = primary, .kernel = kernel, .executions = 0};
    return 1;
}

int kt_vk_cmd_execute(kt_vk_ctx_t *ctx, VkCommandBuffer primary, uint32_t n, const VkCommandBuffer *secondaries)
{
    if (!ctx || !primary || (n && !secondaries))
        return KT_EINVAL;
    if (!ctx->per_submit || !kt_is_enabled())
        return 0;
    const kt__vk_table_t *vk = &ctx->vk;
    int made = 0, barrier = 0;
    for (uint32_t i = 0; i < n; i++) {
        /* The same secondary again later in this call (legal with SIMULTANEOUS_USE): it writes the same queries
         * again before the copies recorded after the call, so this occurrence cannot be read. It gets a stage
         * slot with no copy, counted dropped (re-executed) at every submission; only the last occurrence is timed.
         * Before, every occurrence was copied after the call, each with the last one's values. */
        int lost = 0;
        for (uint32_t j = i + 1; j < n && !lost; j++)
            lost = secondaries[j] == secondaries[i];
        /* one pass per secondary: its slots, in recording order, each copied into an occurrence slot of the
         * primary (recorded under the lock: slots and the primary are this caller's, the ring is shared) */
        pthread_mutex_lock(&ctx->lock);
        for (uint32_t slot = ctx->used_first; slot != KT__VK_NONE; slot = ctx->slots[slot].next) {
            kt__vk_slot_t *s = &ctx->slots[slot];
            if (s->cmd != secondaries[i] || s->state != KT__VK_SLOT_CLOSED || s->stage || s->submission)
                continue;
            s->executions++; /* accounted through its occurrences: its own discard counts nothing */
            uint32_t o = kt__vk_slot_alloc_locked(ctx);
            if (o == KT__VK_SLOT_DROPPED) { /* counted at every execution of the primary (plan_locked) */
                if (!lost_occ_add_locked(ctx, primary, s->kernel)) { /* no memory: counted once, now */
                    kt_record_drop(s->kernel, KT_DROP_RING_FULL);
                    atomic_fetch_add(&ctx->dropped, 1);
                }
                continue;
            }
            kt__vk_slot_t *os = &ctx->slots[o];
            os->state = KT__VK_SLOT_CLOSED;
            os->stage = 1;
            os->gen++;
            os->kernel = s->kernel;
            os->launch = s->launch;
            os->thread = s->thread;
            os->cmd = primary;
            os->enqueue_ns = s->enqueue_ns;
            if (lost) {
                os->stage_lost = 1;
                continue;
            }
            if (!barrier) { /* the secondary's timestamps written before the copies read them */
                vk->vkCmdPipelineBarrier(primary, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                         0, 0, NULL, 0, NULL, 0, NULL);
                barrier = 1;
            }
            kt__vk_copy_results(ctx, primary, 2 * slot, 2,
                                (VkDeviceSize)o * KT__VK_WORDS_PER_SLOT * sizeof(uint64_t));
            made++;
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    return made;
}
