/* test_vk_capacity.c — what a program records is never lost for lack of room in ktiming's own tables: more than
 * 64 live contexts are all flushed and stopped (issue 35's list[64]); the recording patterns of renderers and ML
 * runtimes are timed with exact counts (fill-only per-frame command buffers, thousands of dispatches in one
 * reusable command buffer, one-time primaries allocated per iteration). Fails on any validation message. */
#include "vk_test.h"

#define NCTX 70 /* more than the 64 the flush and stop lists held */

static kt_vk_ctx_t *g_ctx[NCTX];

static int close_all(void **state)
{
    (void)state;
    for (int i = 0; i < NCTX; i++) {
        kt_vk_ctx_destroy(g_ctx[i]);
        g_ctx[i] = NULL;
    }
    return 0;
}

static void open_all(void)
{
    for (int i = 0; i < NCTX; i++) {
        kt_vk_desc_t d = vkt_desc();
        d.ring_size = 4;
        d.readback = KT_VK_READBACK_COPY;
        assert_int_equal(kt_vk_ctx_create(&d, &g_ctx[i]), 0);
    }
}

/* One timed dispatch through context kv, submitted and waited for (not collected). */
static void one_dispatch(kt_vk_ctx_t *kv, const char *name)
{
    VkCommandBuffer cmd;
    VkFence fence;
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &fence), 0);
    vkt_record_timed(kv, cmd, name, 1);
    vkt_submit_wait(cmd, fence);
    ktcli_vk_fence_destroy(&g_vkt.dev, fence);
    ktcli_vk_cmd_free(&g_vkt.dev, cmd);
}

/* kt_snapshot flushes every live context: the dispatch of the first one created (last on the live list, past
 * the 64th) is in the snapshot without anyone calling kt_vk_collect. */
static void flush_past_64(void **state)
{
    (void)state;
    kt_reset();
    open_all();
    one_dispatch(g_ctx[0], "first_ctx");
    one_dispatch(g_ctx[NCTX - 1], "last_ctx");
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *first = vkt_find(s, "first_ctx"), *last = vkt_find(s, "last_ctx");
    assert_non_null(last);
    assert_non_null(first);
    assert_int_equal(first->dispatch_count, 1);
    assert_int_equal(last->dispatch_count, 1);
    kt_snapshot_free(s);
}

/* kt_shutdown stops every live context: what the first one has completed is recorded, and it is marked stopped
 * (its stats say one collected). */
static void stop_past_64(void **state)
{
    (void)state;
    kt_reset();
    open_all();
    one_dispatch(g_ctx[0], "first_ctx");
    kt_shutdown();
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(g_ctx[0], &st), 0);
    assert_int_equal(st.collected, 1);
    assert_int_equal(st.pending, 0);
}

/* After stop_past_64, also when it failed: ktiming enabled again for the next tests. */
static int close_all_reinit(void **state)
{
    close_all(state);
    kt_init(&(kt_desc_t){0});
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Recording patterns (every execution timed, kt_vk_queue_submit)
 * ------------------------------------------------------------------------------------------------- */

static struct {
    kt_vk_ctx_t *kv;
    VkCommandBuffer *cmds; /* allocated by the test */
    uint32_t ncmds;
    VkFence fence[3];
} g_rig;

static int rig_close(void **state)
{
    (void)state;
    pthread_mutex_lock(&g_vkt_driver_lock); /* also after a failed assertion: nothing of ours still pending */
    g_vkt.app.vk.vkDeviceWaitIdle(g_vkt.dev.device);
    pthread_mutex_unlock(&g_vkt_driver_lock);
    for (uint32_t i = 0; i < g_rig.ncmds; i++) {
        if (g_rig.kv)
            kt_vk_discard(g_rig.kv, g_rig.cmds[i]);
        ktcli_vk_cmd_free(&g_vkt.dev, g_rig.cmds[i]);
    }
    for (int i = 0; i < 3; i++)
        ktcli_vk_fence_destroy(&g_vkt.dev, g_rig.fence[i]);
    kt_vk_ctx_destroy(g_rig.kv);
    free(g_rig.cmds);
    memset(&g_rig, 0, sizeof g_rig);
    return 0;
}

static void rig_open(uint32_t ring, uint32_t ncmds)
{
    kt_reset();
    kt_vk_desc_t d = vkt_desc();
    d.ring_size = ring;
    d.per_submission = 1;
    assert_int_equal(kt_vk_ctx_create(&d, &g_rig.kv), 0);
    g_rig.cmds = calloc(ncmds, sizeof(*g_rig.cmds));
    assert_non_null(g_rig.cmds);
    for (; g_rig.ncmds < ncmds; g_rig.ncmds++)
        assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &g_rig.cmds[g_rig.ncmds]), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &g_rig.fence[i]), 0);
}

/* Records cmd: begun ONE_TIME_SUBMIT (with kt_vk_cmd_begin/kt_vk_cmd_end, as the layer does) or reusable, with
 * `n` timed tiny dispatches of `name` (0: a barrier only, the fill-only kind). */
static void record(VkCommandBuffer cmd, int one_time, const char *name, uint32_t n)
{
    const ktcli_vk_fn_t *vk = &g_vkt.app.vk;
    kt_vk_discard(g_rig.kv, cmd); /* re-begun: what the layer does at vkBeginCommandBuffer */
    assert_int_equal(vk->vkResetCommandBuffer(cmd, 0), VK_SUCCESS);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = one_time ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0};
    assert_int_equal(vk->vkBeginCommandBuffer(cmd, &bi), VK_SUCCESS);
    if (one_time)
        assert_int_equal(kt_vk_cmd_begin(g_rig.kv, cmd), 0);
    ktcli_vk_barrier(&g_vkt.dev, cmd);
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(kt_vk_begin(g_rig.kv, cmd, name), 0);
        vkt_busy(cmd, 1);
        assert_int_equal(kt_vk_end(g_rig.kv, cmd), 0);
    }
    if (one_time)
        assert_int_equal(kt_vk_cmd_end(g_rig.kv, cmd), 0);
    assert_int_equal(vk->vkEndCommandBuffer(cmd), VK_SUCCESS);
}

/* One kt_vk_queue_submit call of `nb` batches (batch b: cmds[first[b]] .. + count[b]). */
static void submit(const uint32_t *first, const uint32_t *count, uint32_t nb, VkFence fence)
{
    VkSubmitInfo si[4];
    for (uint32_t b = 0; b < nb; b++)
        si[b] = (VkSubmitInfo){.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                               .commandBufferCount = count[b],
                               .pCommandBuffers = g_rig.cmds + first[b]};
    pthread_mutex_lock(&g_vkt_driver_lock);
    VkResult r = kt_vk_queue_submit(g_rig.kv, g_vkt.dev.queue, nb, si, fence);
    pthread_mutex_unlock(&g_vkt_driver_lock);
    assert_int_equal(r, VK_SUCCESS);
}

/* A fresh snapshot has `recorded` and `dropped` dispatches of `name`, and `batches` and `batch_drops` of
 * "vkQueueSubmit" (the batch spans). */
static void assert_counts(const char *name, uint64_t recorded, uint64_t dropped, uint64_t batches,
                          uint64_t batch_drops)
{
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *e = vkt_find(s, name), *b = vkt_find(s, "vkQueueSubmit");
    assert_int_equal(e ? e->dispatch_count : 0, recorded);
    assert_int_equal(e ? e->dropped : 0, dropped);
    assert_int_equal(b ? b->dispatch_count : 0, batches);
    assert_int_equal(b ? b->dropped : 0, batch_drops);
    kt_snapshot_free(s);
}

#define FRAMES 10
#define FILLS 30 /* fill-only one-time command buffers per frame */

/* A renderer: 3 frames in flight, each re-recording one one-time command buffer with 10 dispatches and 30
 * one-time command buffers with none, submitted as two batches of one call. Every dispatch is timed, and only
 * the dispatch batch has a span. Before: the fill-only buffers held the 64-entry open table and a ring slot each
 * until re-begun, so most dispatches were dropped (ring 64 here), and the fill-only batch had a span too. */
static void fill_only_frames(void **state)
{
    (void)state;
    rig_open(64, 3 * (1 + FILLS));
    for (uint32_t f = 0; f < FRAMES; f++) {
        uint32_t set = f % 3, base = set * (1 + FILLS);
        if (f >= 3)
            assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g_rig.fence[set]), 0);
        record(g_rig.cmds[base], 1, "frame_kernel", 10);
        for (uint32_t k = 1; k <= FILLS; k++)
            record(g_rig.cmds[base + k], 1, NULL, 0);
        const uint32_t first[2] = {base, base + 1}, count[2] = {1, FILLS};
        submit(first, count, 2, g_rig.fence[set]);
        kt_vk_collect(g_rig.kv);
    }
    for (uint32_t f = FRAMES - 3; f < FRAMES; f++)
        assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g_rig.fence[f % 3]), 0);
    kt_vk_collect(g_rig.kv);
    assert_counts("frame_kernel", 10 * FRAMES, 0, FRAMES, 0);
}

/* An ML runtime: one reusable command buffer with 1,000 dispatches, submitted twice: 2,000 timed (512 per
 * execution before). */
static void thousand_in_one(void **state)
{
    (void)state;
    rig_open(1100, 1);
    record(g_rig.cmds[0], 0, "ml_op", 1000);
    const uint32_t first = 0, count = 1;
    for (int i = 0; i < 2; i++) {
        submit(&first, &count, 1, g_rig.fence[0]);
        assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g_rig.fence[0]), 0);
        kt_vk_collect(g_rig.kv);
    }
    assert_counts("ml_op", 2000, 0, 2, 0);
}

/* A recording that holds every slot of the ring: its dispatches are timed, only the batch span is dropped (the
 * batch's own pair cannot be had). Before: all 64 dropped. */
static void every_slot_held(void **state)
{
    (void)state;
    rig_open(64, 1);
    record(g_rig.cmds[0], 0, "all_slots", 64);
    const uint32_t first = 0, count = 1;
    submit(&first, &count, 1, g_rig.fence[0]);
    assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g_rig.fence[0]), 0);
    kt_vk_collect(g_rig.kv);
    assert_counts("all_slots", 64, 0, 0, 1);
}

#define ITERS 200

/* A program that allocates per iteration and frees at the end: a one-time primary with one dispatch in a batch
 * with another command buffer, 200 times, with a ring of 64. Every dispatch and batch is timed. Before: the
 * unused pairs were held until the free, so the ring filled after 63 iterations. */
static void per_iteration_pairs(void **state)
{
    (void)state;
    rig_open(64, 2 * ITERS);
    for (uint32_t i = 0; i < ITERS; i++) {
        record(g_rig.cmds[2 * i], 1, "iter_kernel", 1);
        record(g_rig.cmds[2 * i + 1], 1, NULL, 0);
        const uint32_t first = 2 * i, count = 2;
        submit(&first, &count, 1, g_rig.fence[0]);
        assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g_rig.fence[0]), 0);
        kt_vk_collect(g_rig.kv);
    }
    assert_counts("iter_kernel", ITERS, 0, ITERS, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(flush_past_64, close_all),
        cmocka_unit_test_teardown(stop_past_64, close_all_reinit),
        cmocka_unit_test_teardown(fill_only_frames, rig_close),
        cmocka_unit_test_teardown(thousand_in_one, rig_close),
        cmocka_unit_test_teardown(every_slot_held, rig_close),
        cmocka_unit_test_teardown(per_iteration_pairs, rig_close),
        cmocka_unit_test(vkt_test_validation_clean),
    };
    return cmocka_run_group_tests(tests, vkt_setup_busy, NULL);
}
