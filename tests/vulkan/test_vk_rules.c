/* test_vk_rules.c — batches ktiming must leave as the program made them: a vkQueueSubmit2 batch with
 * VK_SUBMIT_PROTECTED_BIT may hold only protected command buffers (VUID-VkSubmitInfo2-flags-03886), so ktiming adds
 * none of its own and counts the batch's dispatches as dropped, `no timing`. lavapipe has no protected memory: the
 * test's vkQueueSubmit2 records what ktiming hands the driver and submits it without the flag (as vkQueueSubmit,
 * so the device needs no synchronization2). A queue family without timestamps: its dispatches counted dropped, no
 * timing. Two VkQueues of one family: two queue tracks. Fails on any validation message. */
#include "vk_test.h"

static uint32_t g_seen_cmds;        /* command buffers of the last vkQueueSubmit2 batch */
static VkSubmitFlags g_seen_flags;  /* its flags */

static VkResult VKAPI_CALL stand_in_submit2(VkQueue queue, uint32_t n, const VkSubmitInfo2 *si, VkFence fence)
{
    assert_int_equal(n, 1);
    g_seen_cmds = si[0].commandBufferInfoCount;
    g_seen_flags = si[0].flags;
    return vkt_submit2_via_submit(queue, n, si, fence);
}

static PFN_vkVoidFunction wrap(const char *name, PFN_vkVoidFunction f)
{
    if (!strcmp(name, "vkQueueSubmit2") || !strcmp(name, "vkQueueSubmit2KHR"))
        return (PFN_vkVoidFunction)stand_in_submit2;
    return f;
}

static struct {
    kt_vk_ctx_t *kv;
    VkCommandBuffer cmd;
    VkFence fence;
} g_rig;

static int rig_close(void **state)
{
    (void)state;
    vkt_set_wrap(NULL);
    pthread_mutex_lock(&g_vkt_driver_lock);
    g_vkt.app.vk.vkDeviceWaitIdle(g_vkt.dev.device);
    pthread_mutex_unlock(&g_vkt_driver_lock);
    if (g_rig.kv && g_rig.cmd)
        kt_vk_discard(g_rig.kv, g_rig.cmd);
    ktcli_vk_fence_destroy(&g_vkt.dev, g_rig.fence);
    ktcli_vk_cmd_free(&g_vkt.dev, g_rig.cmd);
    kt_vk_ctx_destroy(g_rig.kv);
    memset(&g_rig, 0, sizeof g_rig);
    return 0;
}

static void submit2(VkSubmitFlags flags)
{
    VkCommandBufferSubmitInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO, .commandBuffer = g_rig.cmd};
    VkSubmitInfo2 si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO_2,
                        .flags = flags,
                        .commandBufferInfoCount = 1,
                        .pCommandBufferInfos = &ci};
    pthread_mutex_lock(&g_vkt_driver_lock);
    VkResult r = kt_vk_queue_submit2(g_rig.kv, g_vkt.dev.queue, 1, &si, g_rig.fence);
    pthread_mutex_unlock(&g_vkt_driver_lock);
    assert_int_equal(r, VK_SUCCESS);
    assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g_rig.fence), 0);
    kt_vk_collect(g_rig.kv);
}

/* A protected batch reaches the driver with the program's one command buffer only, flag kept; its two dispatches
 * count as dropped, no timing, and it has no batch span. The same recording in an ordinary batch is timed (with
 * ktiming's two command buffers around it). Before: ktiming's unprotected command buffers joined the protected
 * batch (3 command buffers). */
static void protected_submit2_untimed(void **state)
{
    (void)state;
    kt_reset();
    kt_vk_desc_t d = vkt_desc();
    vkt_set_wrap(wrap);
    d.per_submission = 1;
    assert_int_equal(kt_vk_ctx_create(&d, &g_rig.kv), 0);
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &g_rig.cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &g_rig.fence), 0);
    const ktcli_vk_fn_t *vk = &g_vkt.app.vk;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    assert_int_equal(vk->vkBeginCommandBuffer(g_rig.cmd, &bi), VK_SUCCESS);
    for (int i = 0; i < 2; i++) {
        if (i)
            ktcli_vk_barrier(&g_vkt.dev, g_rig.cmd);
        assert_int_equal(kt_vk_begin(g_rig.kv, g_rig.cmd, "protected_batch"), 0);
        vkt_busy(g_rig.cmd, 1);
        assert_int_equal(kt_vk_end(g_rig.kv, g_rig.cmd), 0);
    }
    assert_int_equal(vk->vkEndCommandBuffer(g_rig.cmd), VK_SUCCESS);

    submit2(VK_SUBMIT_PROTECTED_BIT);
    assert_int_equal(g_seen_cmds, 1);
    assert_int_equal(g_seen_flags, VK_SUBMIT_PROTECTED_BIT);
    submit2(0);
    assert_int_equal(g_seen_cmds, 3);

    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *e = vkt_find(s, "protected_batch"), *b = vkt_find(s, "vkQueueSubmit");
    assert_non_null(e);
    assert_non_null(b);
    assert_int_equal(e->dispatch_count, 2);
    assert_int_equal(e->dropped, 2);
    assert_int_equal(e->dropped_by[KT_DROP_NO_TIMING], 2);
    assert_int_equal(b->dispatch_count, 1);
    kt_snapshot_free(s);
}

/* ---------------------------------------------------------------------------------------------------
 * A queue family without timestamps (issue 37.4)
 * ------------------------------------------------------------------------------------------------- */

static PFN_vkGetPhysicalDeviceQueueFamilyProperties g_families_next;

/* The driver's families, each reporting timestampValidBits 0 (the spec allows it: no timestamps there). */
static void VKAPI_CALL no_timestamp_families(VkPhysicalDevice pd, uint32_t *n, VkQueueFamilyProperties *props)
{
    g_families_next(pd, n, props);
    for (uint32_t i = 0; props && i < *n; i++)
        props[i].timestampValidBits = 0;
}

static PFN_vkVoidFunction wrap_families(const char *name, PFN_vkVoidFunction f)
{
    if (strcmp(name, "vkGetPhysicalDeviceQueueFamilyProperties"))
        return f;
    g_families_next = (PFN_vkGetPhysicalDeviceQueueFamilyProperties)f;
    return (PFN_vkVoidFunction)no_timestamp_families;
}

/* Its context is untimed: every kt_vk_begin says KT_EUNAVAILABLE and counts the dispatch dropped, no timing (3 of
 * 3); the command buffer runs as recorded (nothing of ktiming's in it). Before: kt_vk_ctx_create failed, and the
 * layer left such a family's dispatches untimed without a count. */
static void family_without_timestamps_counted(void **state)
{
    (void)state;
    kt_reset();
    kt_vk_desc_t d = vkt_desc();
    vkt_set_wrap(wrap_families);
    assert_int_equal(kt_vk_ctx_create(&d, &g_rig.kv), 0);
    vkt_set_wrap(NULL);
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &g_rig.cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &g_rig.fence), 0);
    assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, g_rig.cmd), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(kt_vk_begin(g_rig.kv, g_rig.cmd, "untimed_family"), KT_EUNAVAILABLE);
        vkt_busy(g_rig.cmd, 1);
        assert_int_equal(kt_vk_end(g_rig.kv, g_rig.cmd), 0);
    }
    assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, g_rig.cmd), 0);
    vkt_submit_wait(g_rig.cmd, g_rig.fence);
    assert_int_equal(kt_vk_collect(g_rig.kv), 0);
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(g_rig.kv, &st), 0);
    assert_int_equal(st.dropped, 3);
    assert_int_equal(st.begun, 0);
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *e = vkt_find(s, "untimed_family");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 0);
    assert_int_equal(e->dropped, 3);
    assert_int_equal(e->dropped_by[KT_DROP_NO_TIMING], 3);
    kt_snapshot_free(s);
}

/* ---------------------------------------------------------------------------------------------------
 * Several queues of one family (issue 37.4)
 * ------------------------------------------------------------------------------------------------- */

static PFN_vkQueueSubmit g_submit_next;
#define QUEUE_B ((VkQueue)(uintptr_t)0x5151) /* a second VkQueue of the family, as far as ktiming can tell */

/* lavapipe has one queue per family: the second queue's submissions go to the one queue. */
static VkResult VKAPI_CALL two_queue_submit(VkQueue q, uint32_t n, const VkSubmitInfo *si, VkFence f)
{
    return g_submit_next(q == QUEUE_B ? g_vkt.dev.queue : q, n, si, f);
}

static PFN_vkVoidFunction wrap_two_queues(const char *name, PFN_vkVoidFunction f)
{
    if (strcmp(name, "vkQueueSubmit"))
        return f;
    g_submit_next = (PFN_vkQueueSubmit)f;
    return (PFN_vkVoidFunction)two_queue_submit;
}

/* One recording submitted to two VkQueues of the family: its two executions (and their batch spans) lie on two
 * queue tracks, "queue family F" and "queue family F (queue 2)", one each. Before: one track for the family. */
static void two_queues_two_tracks(void **state)
{
    (void)state;
    kt_reset();
    kt_vk_desc_t d = vkt_desc();
    vkt_set_wrap(wrap_two_queues);
    d.per_submission = 1;
    assert_int_equal(kt_vk_ctx_create(&d, &g_rig.kv), 0);
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &g_rig.cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &g_rig.fence), 0);
    const ktcli_vk_fn_t *vk = &g_vkt.app.vk;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO}; /* reusable */
    assert_int_equal(vk->vkBeginCommandBuffer(g_rig.cmd, &bi), VK_SUCCESS);
    assert_int_equal(kt_vk_begin(g_rig.kv, g_rig.cmd, "two_queues"), 0);
    vkt_busy(g_rig.cmd, 1);
    assert_int_equal(kt_vk_end(g_rig.kv, g_rig.cmd), 0);
    assert_int_equal(vk->vkEndCommandBuffer(g_rig.cmd), VK_SUCCESS);
    VkQueue queues[2] = {g_vkt.dev.queue, QUEUE_B};
    for (int q = 0; q < 2; q++) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                           .pCommandBuffers = &g_rig.cmd};
        pthread_mutex_lock(&g_vkt_driver_lock);
        VkResult r = kt_vk_queue_submit(g_rig.kv, queues[q], 1, &si, g_rig.fence);
        pthread_mutex_unlock(&g_vkt_driver_lock);
        assert_int_equal(r, VK_SUCCESS);
        assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g_rig.fence), 0);
    }
    kt_vk_collect(g_rig.kv);
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *e = vkt_find(s, "two_queues"), *b = vkt_find(s, "vkQueueSubmit");
    assert_non_null(e);
    assert_non_null(b);
    assert_int_equal(e->dispatch_count, 2);
    assert_int_equal(b->dispatch_count, 2);
    char first[64], second[96];
    snprintf(first, sizeof first, "queue family %u", g_vkt.dev.family);
    snprintf(second, sizeof second, "%s (queue 2)", first);
    size_t on_first = 0, on_second = 0;
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        if (sp->entry != (uint32_t)(e - s->entries) && sp->entry != (uint32_t)(b - s->entries))
            continue;
        assert_true(sp->queue < s->queue_count);
        const char *label = s->queues[sp->queue].label;
        on_first += !strcmp(label, first);
        on_second += !strcmp(label, second);
    }
    assert_int_equal(on_first, 2);  /* its dispatch and its batch */
    assert_int_equal(on_second, 2);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(protected_submit2_untimed, rig_close),
        cmocka_unit_test_teardown(family_without_timestamps_counted, rig_close),
        cmocka_unit_test_teardown(two_queues_two_tracks, rig_close),
        cmocka_unit_test(vkt_test_validation_clean),
    };
    return cmocka_run_group_tests(tests, vkt_setup_busy, NULL);
}
