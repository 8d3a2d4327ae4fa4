/* test_vk_resubmit.c — every execution timed (kt_vk_desc_t.per_submission): one recording submitted many times
 * through kt_vk_queue_submit is recorded at every execution, each dispatch inside its batch's "vkQueueSubmit" span;
 * records the ring cannot hold are dropped as `ring full`; a primary submitted around ktiming is counted as never
 * submitted; a secondary is timed at every occurrence; a one-time primary alone in its batch times itself, with no
 * command buffer of ktiming's added. Fails on any validation message. */
#include "vk_test.h"

#include <stdatomic.h>

/* What a test opens: a per-submission context, two primary command buffers and a fence. The cmocka teardown
 * releases it, also after a failed assertion. */
static struct {
    kt_vk_ctx_t *kv;
    VkCommandBuffer cmd[2];
    VkFence fence;
} g_rig;

static int rig_close(void **state)
{
    (void)state;
    ktcli_vk_fence_destroy(&g_vkt.dev, g_rig.fence);
    for (int i = 0; i < 2; i++)
        ktcli_vk_cmd_free(&g_vkt.dev, g_rig.cmd[i]);
    kt_vk_ctx_destroy(g_rig.kv);
    memset(&g_rig, 0, sizeof g_rig);
    return 0;
}

/* kt_reset, then the rig with a ring of `ring` slots (0: the default); cmd[1] at level `second`. */
static kt_vk_ctx_t *rig_open(uint32_t ring, VkCommandBufferLevel second)
{
    kt_reset();
    kt_vk_desc_t d = vkt_desc();
    d.ring_size = ring;
    d.per_submission = 1;
    assert_int_equal(kt_vk_ctx_create(&d, &g_rig.kv), 0);
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(g_rig.kv, &st), 0);
    assert_int_equal(st.readback, KT_VK_READBACK_COPY);
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &g_rig.cmd[0]), 0);
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = g_vkt.dev.pool,
                                      .level = second,
                                      .commandBufferCount = 1};
    assert_int_equal(g_vkt.app.vk.vkAllocateCommandBuffers(g_vkt.dev.device, &ai, &g_rig.cmd[1]), VK_SUCCESS);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &g_rig.fence), 0);
    return g_rig.kv;
}

/* A recording that may be submitted again (no ONE_TIME_SUBMIT): `n` timed dispatches named names[i]. */
static void record_reusable(kt_vk_ctx_t *kv, VkCommandBuffer cmd, const char *const *names, int n, uint32_t groups)
{
    const ktcli_vk_fn_t *vk = &g_vkt.app.vk;
    assert_int_equal(vk->vkResetCommandBuffer(cmd, 0), VK_SUCCESS);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    assert_int_equal(vk->vkBeginCommandBuffer(cmd, &bi), VK_SUCCESS);
    for (int i = 0; i < n; i++) {
        if (i)
            ktcli_vk_barrier(&g_vkt.dev, cmd);
        assert_int_equal(kt_vk_begin(kv, cmd, names[i]), 0);
        vkt_busy(cmd, groups);
        assert_int_equal(kt_vk_end(kv, cmd), 0);
    }
    assert_int_equal(vk->vkEndCommandBuffer(cmd), VK_SUCCESS);
}

/* A one-time primary timing itself: kt_vk_cmd_begin after its begin, kt_vk_cmd_end before its end. */
static void record_one_time(kt_vk_ctx_t *kv, VkCommandBuffer cmd, const char *const *names, int n)
{
    const ktcli_vk_fn_t *vk = &g_vkt.app.vk;
    assert_int_equal(vk->vkResetCommandBuffer(cmd, 0), VK_SUCCESS);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    assert_int_equal(vk->vkBeginCommandBuffer(cmd, &bi), VK_SUCCESS);
    assert_int_equal(kt_vk_cmd_begin(kv, cmd), 0);
    for (int i = 0; i < n; i++) {
        if (i)
            ktcli_vk_barrier(&g_vkt.dev, cmd);
        assert_int_equal(kt_vk_begin(kv, cmd, names[i]), 0);
        vkt_busy(cmd, 1);
        assert_int_equal(kt_vk_end(kv, cmd), 0);
    }
    assert_int_equal(kt_vk_cmd_end(kv, cmd), 0);
    assert_int_equal(vk->vkEndCommandBuffer(cmd), VK_SUCCESS);
}

/* One batch of `n` command buffers through kt_vk_queue_submit. */
static VkResult submit_batch(kt_vk_ctx_t *kv, const VkCommandBuffer *cmds, uint32_t n, VkFence fence)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = n, .pCommandBuffers = cmds};
    pthread_mutex_lock(&g_vkt_driver_lock);
    VkResult r = kt_vk_queue_submit(kv, g_vkt.dev.queue, 1, &si, fence);
    pthread_mutex_unlock(&g_vkt_driver_lock);
    return r;
}

static VkResult submit_kt(kt_vk_ctx_t *kv, VkCommandBuffer cmd, VkFence fence)
{
    return submit_batch(kv, &cmd, 1, fence);
}

/* Submission i of a test: odd ones with the application's fence (waited for), even ones without a fence
 * (vkQueueWaitIdle): ktiming's fence is then the submission's own. */
static void submit_wait_alternating(kt_vk_ctx_t *kv, VkCommandBuffer cmd, int i)
{
    if (i % 2) {
        assert_int_equal(submit_kt(kv, cmd, g_rig.fence), VK_SUCCESS);
        assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g_rig.fence), 0);
    } else {
        assert_int_equal(submit_kt(kv, cmd, VK_NULL_HANDLE), VK_SUCCESS);
        pthread_mutex_lock(&g_vkt_driver_lock);
        assert_int_equal(g_vkt.app.vk.vkQueueWaitIdle(g_vkt.dev.queue), VK_SUCCESS);
        pthread_mutex_unlock(&g_vkt_driver_lock);
    }
}

/* Every "vkQueueSubmit" span of s holds exactly one span of entry ia and one of ib (on its queue), a before b;
 * returns how many batch spans there are. */
static size_t batches_hold_a_then_b(const kt_snapshot_t *s, size_t isub, size_t ia, size_t ib)
{
    size_t batches = 0;
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *bs = &s->spans[i];
        if (bs->entry != isub)
            continue;
        assert_true(bs->start_ns > 0 && bs->end_ns >= bs->start_ns);
        batches++;
        int na = 0, nb = 0;
        uint64_t a_end = 0, b_start = 0;
        for (size_t k = 0; k < s->span_count; k++) {
            const kt_span_t *d = &s->spans[k];
            if ((d->entry != ia && d->entry != ib) || d->start_ns < bs->start_ns || d->end_ns > bs->end_ns)
                continue;
            assert_int_equal(d->queue, bs->queue);
            if (d->entry == ia)
                na++, a_end = d->end_ns;
            else
                nb++, b_start = d->start_ns;
        }
        assert_int_equal(na, 1);
        assert_int_equal(nb, 1);
        assert_true(a_end <= b_start);
    }
    return batches;
}

static const kt_kernel_timing_t *find_ok(const kt_snapshot_t *s, const char *name)
{
    const kt_kernel_timing_t *e = vkt_find(s, name);
    if (!e)
        fail_msg("no entry for %s", name);
    return e;
}

/* 100 executions of one recording (two dispatches), half with the application's fence, half without one: every
 * execution recorded, nothing dropped, and each dispatch's span inside its own batch span, in order. */
static void every_execution(void **state)
{
    (void)state;
    kt_vk_ctx_t *kv = rig_open(0, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    VkCommandBuffer cmd = g_rig.cmd[0];
    static const char *const names[2] = {"resubmit_a", "resubmit_b"};
    record_reusable(kv, cmd, names, 2, 2);
    const int runs = 100;
    for (int i = 0; i < runs; i++) {
        submit_wait_alternating(kv, cmd, i);
        if (i % 10 == 9) /* collection interleaved with submissions: records are reused */
            kt_vk_collect(kv);
    }
    kt_vk_collect_wait(kv, UINT64_C(5000000000));
    record_reusable(kv, cmd, names, 2, 2); /* re-recording releases the slots: nothing counted as never submitted */

    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *a = find_ok(s, "resubmit_a"), *b = find_ok(s, "resubmit_b");
    const kt_kernel_timing_t *sub = find_ok(s, "vkQueueSubmit");
    assert_int_equal(a->dispatch_count, runs);
    assert_int_equal(b->dispatch_count, runs);
    assert_int_equal(sub->dispatch_count, runs);
    assert_int_equal(a->dropped + b->dropped + sub->dropped, 0);
    /* containment: each batch span holds exactly one span of each dispatch, a before b */
    assert_int_equal(batches_hold_a_then_b(s, vkt_entry_index(s, sub), vkt_entry_index(s, a), vkt_entry_index(s, b)),
                     runs);
    kt_snapshot_free(s);
    kt_vk_discard(kv, cmd);
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    assert_int_equal(st.direct_batches, 0); /* a reusable recording: every batch bracketed by ktiming */
}

/* The driver's vkQueueSubmit, counting the calls with no batch (ktiming's fence-only submissions). */
static PFN_vkQueueSubmit g_real_submit;
static atomic_int g_empty_submits;

static VkResult VKAPI_CALL counting_submit(VkQueue q, uint32_t n, const VkSubmitInfo *si, VkFence f)
{
    if (!n)
        atomic_fetch_add(&g_empty_submits, 1);
    return g_real_submit(q, n, si, f);
}

static PFN_vkVoidFunction wrap_submit(const char *name, PFN_vkVoidFunction f)
{
    if (!f || strcmp(name, "vkQueueSubmit"))
        return f;
    g_real_submit = (PFN_vkQueueSubmit)f;
    return (PFN_vkVoidFunction)counting_submit;
}

/* Issue 37.5: a batch bracketed by ktiming with the program's fence cost one more, empty, vkQueueSubmit for a
 * fence of ktiming's (one more wake of the driver's queue thread per batch). Now the next fence of ours on the
 * queue covers it, and an empty one is made only once 16 such submissions wait for one: 40 submissions with the
 * program's fence make 2 (40 before), every execution still timed, and ktiming's command buffers are reused
 * (the validation layer sees none re-recorded while pending). */
static void program_fence_no_extra_submit(void **state)
{
    (void)state;
    kt_reset();
    kt_vk_desc_t d = vkt_desc();
    vkt_set_wrap(wrap_submit);
    d.per_submission = 1;
    atomic_store(&g_empty_submits, 0);
    assert_int_equal(kt_vk_ctx_create(&d, &g_rig.kv), 0);
    kt_vk_ctx_t *kv = g_rig.kv;
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &g_rig.cmd[0]), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &g_rig.fence), 0);
    static const char *const names[1] = {"fenced_by_program"};
    record_reusable(kv, g_rig.cmd[0], names, 1, 1);
    const int runs = 40;
    for (int i = 0; i < runs; i++) {
        assert_int_equal(submit_kt(kv, g_rig.cmd[0], g_rig.fence), VK_SUCCESS);
        assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g_rig.fence), 0);
        kt_vk_collect(kv);
    }
    kt_vk_collect_wait(kv, UINT64_C(5000000000));
    assert_int_equal(atomic_load(&g_empty_submits), runs / 16);
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *a = find_ok(s, "fenced_by_program"), *sub = find_ok(s, "vkQueueSubmit");
    assert_int_equal(a->dispatch_count, runs);
    assert_int_equal(sub->dispatch_count, runs);
    assert_int_equal(a->dropped + sub->dropped, 0);
    kt_snapshot_free(s);
    kt_vk_discard(kv, g_rig.cmd[0]);
}

/* One-time primaries timing themselves (kt_vk_cmd_begin, kt_vk_cmd_end): alone in a batch, the batch goes to the
 * driver as recorded (direct_batches) and its span holds each of its dispatches. The same kind of recording in a
 * batch of two is bracketed by ktiming's command buffers and its dispatches are still read. One never submitted
 * counts its dispatch as never submitted, and no batch. */
static void one_time_direct(void **state)
{
    (void)state;
    kt_vk_ctx_t *kv = rig_open(0, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    VkCommandBuffer cmd = g_rig.cmd[0], other = g_rig.cmd[1];
    static const char *const names[2] = {"direct_a", "direct_b"};
    static const char *const other_name[1] = {"direct_other"};
    const int runs = 20;
    kt_vk_stats_t st;
    for (int i = 0; i < runs; i++) {
        record_one_time(kv, cmd, names, 2);
        submit_wait_alternating(kv, cmd, i);
        assert_int_equal(kt_vk_discard(kv, cmd), 0); /* read, nothing left to count */
    }
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    assert_int_equal(st.direct_batches, runs);

    record_one_time(kv, cmd, names, 2);
    record_reusable(kv, other, other_name, 1, 1);
    VkCommandBuffer two[2] = {cmd, other};
    assert_int_equal(submit_batch(kv, two, 2, g_rig.fence), VK_SUCCESS);
    assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g_rig.fence), 0);
    assert_int_equal(kt_vk_discard(kv, cmd), 0);
    assert_int_equal(kt_vk_discard(kv, other), 0);
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    assert_int_equal(st.direct_batches, runs); /* not one of them */

    record_one_time(kv, cmd, names, 1);
    assert_int_equal(kt_vk_discard(kv, cmd), 1); /* its dispatch; its pair is no batch */

    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *a = find_ok(s, "direct_a"), *b = find_ok(s, "direct_b");
    const kt_kernel_timing_t *o = find_ok(s, "direct_other"), *sub = find_ok(s, "vkQueueSubmit");
    assert_int_equal(a->dispatch_count, runs + 1);
    assert_int_equal(b->dispatch_count, runs + 1);
    assert_int_equal(o->dispatch_count, 1);
    assert_int_equal(sub->dispatch_count, runs + 1);
    assert_int_equal(a->dropped, 1);
    assert_int_equal(a->dropped_by[KT_DROP_NEVER_SUBMITTED], 1);
    assert_int_equal(b->dropped + o->dropped + sub->dropped, 0);
    assert_int_equal(batches_hold_a_then_b(s, vkt_entry_index(s, sub), vkt_entry_index(s, a), vkt_entry_index(s, b)),
                     runs + 1);
    kt_snapshot_free(s);
}

/* A ring of 4 slots has 8 execution records (two executions of a recording holding every slot). Recordings of 2
 * and 1 dispatches hold 3 slots; the first batch takes the last one for its span, so the next batches have none:
 * their dispatches are timed all the same and only their batch spans count as dropped, ring full (before, the
 * whole batch was dropped). Records 3 + 2 + 1 + 1 = 7 of 8; a fifth batch needs 2: its dispatches are dropped. */
static void records_full_dropped(void **state)
{
    (void)state;
    kt_vk_ctx_t *kv = rig_open(4, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    VkCommandBuffer c1 = g_rig.cmd[0], c2 = g_rig.cmd[1];
    VkFence fence = g_rig.fence;
    static const char *const n1[1] = {"full_one"};
    static const char *const n2[2] = {"full_two", "full_two"};
    record_reusable(kv, c1, n1, 1, 1); /* 1 slot */
    record_reusable(kv, c2, n2, 2, 1); /* 2 slots: 3 of 4 slots held, 1 left for a batch */
    const VkCommandBuffer order[5] = {c2, c2, c1, c1, c2};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(submit_kt(kv, order[i], fence), VK_SUCCESS);
        assert_int_equal(ktcli_vk_wait(&g_vkt.dev, fence), 0);
    }
    assert_int_equal(kt_vk_collect(kv), 7);
    assert_int_equal(submit_kt(kv, c2, fence), VK_SUCCESS); /* room again: 2 dispatches and the batch */
    assert_int_equal(ktcli_vk_wait(&g_vkt.dev, fence), 0);
    assert_int_equal(kt_vk_collect(kv), 3);
    kt_vk_discard(kv, c1);
    kt_vk_discard(kv, c2);

    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *one = find_ok(s, "full_one"), *two = find_ok(s, "full_two");
    const kt_kernel_timing_t *sub = find_ok(s, "vkQueueSubmit");
    assert_int_equal(one->dispatch_count, 2);
    assert_int_equal(one->dropped, 0); /* executed twice, timed twice: the discard counts nothing */
    assert_int_equal(two->dispatch_count, 6);
    assert_int_equal(two->dropped, 2);
    assert_int_equal(two->dropped_by[KT_DROP_RING_FULL], 2);
    assert_int_equal(sub->dispatch_count, 2);
    assert_int_equal(sub->dropped_by[KT_DROP_RING_FULL], 4);
    kt_snapshot_free(s);
}

/* A primary submitted with plain vkQueueSubmit is not read in this mode: its slots count as never submitted when
 * it is re-recorded (docs: submit through kt_vk_queue_submit). */
static void around_ktiming_counted(void **state)
{
    (void)state;
    kt_vk_ctx_t *kv = rig_open(0, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    VkCommandBuffer cmd = g_rig.cmd[0];
    static const char *const names[1] = {"around"};
    record_reusable(kv, cmd, names, 1, 1);
    vkt_submit_wait(cmd, g_rig.fence);
    assert_int_equal(kt_vk_collect(kv), 0);
    assert_int_equal(kt_vk_discard(kv, cmd), 1);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = find_ok(s, "around");
    assert_int_equal(e->dispatch_count, 0);
    assert_int_equal(e->dropped_by[KT_DROP_NEVER_SUBMITTED], 1);
    kt_snapshot_free(s);
}

/* A secondary with one timed dispatch, executed twice in a primary that is submitted 3 times: 6 records of its
 * kernel (kt_vk_cmd_execute after each vkCmdExecuteCommands), each inside its batch span; discarding both
 * buffers counts nothing as never submitted. */
static void secondary_every_occurrence(void **state)
{
    (void)state;
    kt_vk_ctx_t *kv = rig_open(0, VK_COMMAND_BUFFER_LEVEL_SECONDARY);
    const ktcli_vk_fn_t *vk = &g_vkt.app.vk;
    PFN_vkCmdExecuteCommands exec =
        (PFN_vkCmdExecuteCommands)vk->vkGetInstanceProcAddr(g_vkt.app.instance, "vkCmdExecuteCommands");
    assert_non_null(exec);
    VkCommandBuffer prim = g_rig.cmd[0], sec = g_rig.cmd[1];
    VkFence fence = g_rig.fence;
    VkCommandBufferInheritanceInfo inh = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO};
    VkCommandBufferBeginInfo sbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .pInheritanceInfo = &inh,
                                    .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT}; /* recorded twice */
    assert_int_equal(vk->vkBeginCommandBuffer(sec, &sbi), VK_SUCCESS);
    assert_int_equal(kt_vk_begin(kv, sec, "in_secondary"), 0);
    vkt_busy(sec, 1);
    assert_int_equal(kt_vk_end(kv, sec), 0);
    assert_int_equal(vk->vkEndCommandBuffer(sec), VK_SUCCESS);
    VkCommandBufferBeginInfo pbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    assert_int_equal(vk->vkBeginCommandBuffer(prim, &pbi), VK_SUCCESS);
    for (int k = 0; k < 2; k++) {
        if (k) /* the two occurrences write one buffer: ordered (synchronization validation) */
            ktcli_vk_barrier(&g_vkt.dev, prim);
        exec(prim, 1, &sec);
        assert_int_equal(kt_vk_cmd_execute(kv, prim, 1, &sec), 1);
    }
    assert_int_equal(vk->vkEndCommandBuffer(prim), VK_SUCCESS);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(submit_kt(kv, prim, fence), VK_SUCCESS);
        assert_int_equal(ktcli_vk_wait(&g_vkt.dev, fence), 0);
    }
    assert_int_equal(kt_vk_collect(kv), 3 * 2 + 3);
    assert_int_equal(kt_vk_discard(kv, prim), 0);
    assert_int_equal(kt_vk_discard(kv, sec), 0);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = find_ok(s, "in_secondary"), *b = find_ok(s, "vkQueueSubmit");
    assert_int_equal(e->dispatch_count, 6);
    assert_int_equal(e->dropped, 0);
    assert_int_equal(b->dispatch_count, 3);
    size_t ie = vkt_entry_index(s, e), ib = vkt_entry_index(s, b);
    for (size_t i = 0; i < s->span_count; i++) { /* each batch holds two occurrences */
        if (s->spans[i].entry != ib)
            continue;
        int inside = 0;
        for (size_t k = 0; k < s->span_count; k++)
            inside += s->spans[k].entry == ie && s->spans[k].start_ns >= s->spans[i].start_ns &&
                      s->spans[k].end_ns <= s->spans[i].end_ns;
        assert_int_equal(inside, 2);
    }
    kt_snapshot_free(s);
}


/* The rig's secondary (cmd[1]) recorded with `n` timed dispatches named `name`, each behind a barrier (its
 * occurrences write one buffer), begun with `flags`; the primary (cmd[0]) executing it `count` times in one
 * vkCmdExecuteCommands, then submitted `subs` times, each waited for. Returns what kt_vk_cmd_execute returned. */
static int secondary_run(kt_vk_ctx_t *kv, const char *name, int n, VkCommandBufferUsageFlags flags, uint32_t count,
                         int subs)
{
    const ktcli_vk_fn_t *vk = &g_vkt.app.vk;
    PFN_vkCmdExecuteCommands exec =
        (PFN_vkCmdExecuteCommands)vk->vkGetInstanceProcAddr(g_vkt.app.instance, "vkCmdExecuteCommands");
    assert_non_null(exec);
    VkCommandBuffer prim = g_rig.cmd[0], sec = g_rig.cmd[1];
    VkCommandBufferInheritanceInfo inh = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO};
    VkCommandBufferBeginInfo sbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .pInheritanceInfo = &inh,
                                    .flags = flags};
    assert_int_equal(vk->vkBeginCommandBuffer(sec, &sbi), VK_SUCCESS);
    for (int i = 0; i < n; i++) {
        ktcli_vk_barrier(&g_vkt.dev, sec);
        assert_int_equal(kt_vk_begin(kv, sec, name), 0);
        vkt_busy(sec, 1);
        assert_int_equal(kt_vk_end(kv, sec), 0);
    }
    assert_int_equal(vk->vkEndCommandBuffer(sec), VK_SUCCESS);
    VkCommandBufferBeginInfo pbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    assert_int_equal(vk->vkBeginCommandBuffer(prim, &pbi), VK_SUCCESS);
    VkCommandBuffer list[4] = {sec, sec, sec, sec};
    assert_true(count <= 4);
    exec(prim, count, list);
    int made = kt_vk_cmd_execute(kv, prim, count, list);
    assert_int_equal(vk->vkEndCommandBuffer(prim), VK_SUCCESS);
    for (int r = 0; r < subs; r++) {
        assert_int_equal(submit_kt(kv, prim, g_rig.fence), VK_SUCCESS);
        assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g_rig.fence), 0);
    }
    kt_vk_collect(kv);
    assert_int_equal(kt_vk_discard(kv, prim), 0);
    assert_int_equal(kt_vk_discard(kv, sec), 0);
    return made;
}

/* A SIMULTANEOUS_USE secondary listed 3 times in one vkCmdExecuteCommands, the primary submitted twice: every
 * occurrence writes the same queries before the copies after the call, so only the last is read: 1 timed and 2
 * dropped, re-executed, per submission (2 and 4), none timed twice. Before: 3 occurrences copied after the call,
 * each with the last one's values: 6 timed, 0 dropped. */
static void secondary_repeated_in_one_call(void **state)
{
    (void)state;
    kt_vk_ctx_t *kv = rig_open(0, VK_COMMAND_BUFFER_LEVEL_SECONDARY);
    /* the last occurrence only */
    assert_int_equal(secondary_run(kv, "repeated_secondary", 1, VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT, 3, 2),
                     1);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = vkt_find(s, "repeated_secondary");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 2);
    assert_int_equal(e->dropped, 4);
    assert_int_equal(e->dropped_by[KT_DROP_RESUBMITTED], 4);
    kt_snapshot_free(s);
}

/* A ring of 16 slots held by a secondary's 16 timed dispatches: kt_vk_cmd_execute finds no slot for their
 * occurrence in the primary, which is submitted twice. Each execution counts the 16 dropped, ring full (32), where
 * they were counted once, at recording (16); the secondary's own discard counts nothing more. */
static void occurrences_without_slot_per_execution(void **state)
{
    (void)state;
    kt_vk_ctx_t *kv = rig_open(16, VK_COMMAND_BUFFER_LEVEL_SECONDARY);
    assert_int_equal(secondary_run(kv, "no_room_occurrence", 16, 0, 1, 2), 0); /* the ring is full */
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = vkt_find(s, "no_room_occurrence");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 0);
    assert_int_equal(e->dropped_by[KT_DROP_RING_FULL], 2 * 16);
    assert_int_equal(e->dropped, 2 * 16);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(every_execution, rig_close),
        cmocka_unit_test_teardown(one_time_direct, rig_close),
        cmocka_unit_test_teardown(program_fence_no_extra_submit, rig_close),
        cmocka_unit_test_teardown(records_full_dropped, rig_close),
        cmocka_unit_test_teardown(around_ktiming_counted, rig_close),
        cmocka_unit_test_teardown(secondary_every_occurrence, rig_close),
        cmocka_unit_test_teardown(secondary_repeated_in_one_call, rig_close),
        cmocka_unit_test_teardown(occurrences_without_slot_per_execution, rig_close),
        cmocka_unit_test(vkt_test_validation_clean),
    };
    return cmocka_run_group_tests(tests, vkt_setup_busy, NULL);
}
