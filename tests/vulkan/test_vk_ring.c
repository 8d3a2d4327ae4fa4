/* test_vk_ring.c — the Vulkan timestamp ring: overflow counted as dropped (never overwritten), slots reused after
 * collection (pool first reset on the host or by a submission; copy readback), nesting, discard. Fails on any
 * validation message. */
#include "vk_test.h"

#include "backends/vulkan/vk_internal.h" /* white box: the readback words of a slot */

/* The context of the test running: its teardown destroys it when an assertion ended the test early, so no
 * collector keeps polling into the next test (or into a device a test swapped in and closed). */
static kt_vk_ctx_t *g_kv_open;

static void close_ctx(kt_vk_ctx_t *kv)
{
    kt_vk_ctx_destroy(kv);
    g_kv_open = NULL;
}

static int teardown_ctx(void **state)
{
    (void)state;
    if (g_kv_open)
        close_ctx(g_kv_open);
    vkt_set_wrap(NULL); /* a stand-in of a test that ended early serves no later context */
    return 0;
}

static kt_vk_ctx_t *open_ctx_mode(uint32_t ring, kt_vk_readback_t readback)
{
    kt_vk_desc_t d = vkt_desc();
    d.ring_size = ring;
    d.readback = readback;
    kt_vk_ctx_t *kv = NULL;
    assert_int_equal(kt_vk_ctx_create(&d, &kv), 0);
    g_kv_open = kv;
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    if (readback != KT_VK_READBACK_AUTO)
        assert_int_equal(st.readback, readback);
    assert_non_null(g_vkt_real_results); /* the backend reads query results through vkt_desc's lock */
    assert_int_equal(st.host_query_reset, g_vkt.dev.host_query_reset);
    return kv;
}

static kt_vk_ctx_t *open_ctx(uint32_t ring)
{
    return open_ctx_mode(ring, KT_VK_READBACK_AUTO);
}

/* Record `pairs` timed tiny dispatches of `name`; returns how many begins were dropped. */
static int record_pairs(kt_vk_ctx_t *kv, VkCommandBuffer cmd, const char *name, int pairs)
{
    int dropped = 0;
    for (int i = 0; i < pairs; i++) {
        int rc = kt_vk_begin(kv, cmd, name);
        assert_true(rc == 0 || rc == KT_EFULL);
        dropped += rc == KT_EFULL;
        vkt_busy(cmd, 1);
        assert_int_equal(kt_vk_end(kv, cmd), 0);
    }
    return dropped;
}

static void overflow_rounds(const char *name, kt_vk_readback_t readback)
{
    kt_reset();
    kt_vk_ctx_t *kv = open_ctx_mode(4, readback);
    VkCommandBuffer cmd;
    VkFence fence;
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &fence), 0);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, cmd), 0);
        assert_int_equal(record_pairs(kv, cmd, name, 10), 6); /* 4 slots: 6 of 10 dropped */
        assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, cmd), 0);
        vkt_submit_wait(cmd, fence);
        assert_int_equal(kt_vk_collect_wait(kv, UINT64_C(5000000000)), 4); /* and the slots are free again for the next round */
    }
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    assert_int_equal(st.begun, 12);
    assert_int_equal(st.collected, 12);
    assert_int_equal(st.dropped, 18);
    assert_int_equal(st.pending, 0);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = vkt_find(s, name);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 12);
    assert_int_equal(e->dropped, 18);
    assert_true(e->min_ns > 0);
    kt_snapshot_free(s);
    ktcli_vk_fence_destroy(&g_vkt.dev, fence);
    ktcli_vk_cmd_free(&g_vkt.dev, cmd);
    close_ctx(kv);
}

static void test_overflow_thread(void **state)
{
    (void)state;
    if (!g_vkt.dev.host_query_reset)
        skip();
    overflow_rounds("ovf_thread", KT_VK_READBACK_THREAD);
}

static void test_overflow_copy_readback(void **state)
{
    (void)state;
    overflow_rounds("ovf_copy", KT_VK_READBACK_COPY);
}

/* Same on a device created without hostQueryReset: the pool's first reset is a submission. The suite's device is
 * swapped for such a device by the setup and back by the teardown, which runs after a failed assertion too. */
static ktcli_vk_device_t g_saved_dev;
static ktcli_vk_pipeline_t g_saved_busy;
static ktcli_vk_buffer_t g_saved_out;

static int setup_no_host_reset(void **state)
{
    (void)state;
    g_saved_dev = g_vkt.dev;
    g_saved_busy = g_vkt.busy;
    g_saved_out = g_vkt.out;
    ktcli_vk_device_opts_t o = {.no_host_query_reset = 1};
    if (ktcli_vk_device_open(&g_vkt.app, 0, &o, &g_vkt.dev) != 0) {
        g_vkt.dev = g_saved_dev;
        return -1;
    }
    vkt_busy_init();
    return 0;
}

static int teardown_no_host_reset(void **state)
{
    teardown_ctx(state);
    vkt_busy_fini();
    ktcli_vk_device_close(&g_vkt.dev);
    g_vkt.dev = g_saved_dev;
    g_vkt.busy = g_saved_busy;
    g_vkt.out = g_saved_out;
    return 0;
}

static void test_overflow_no_host_reset(void **state)
{
    (void)state;
    assert_int_equal(g_vkt.dev.host_query_reset, 0);
    overflow_rounds("ovf_no_host_reset", KT_VK_READBACK_THREAD);
}

static void test_nesting_and_errors(void **state)
{
    (void)state;
    kt_reset();
    kt_vk_ctx_t *kv = open_ctx(16);
    VkCommandBuffer cmd;
    VkFence fence;
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &fence), 0);
    assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, cmd), 0);
    assert_int_equal(kt_vk_end(kv, cmd), KT_ESTATE); /* nothing open */
    assert_int_equal(kt_vk_begin(kv, cmd, "outer"), 0);
    vkt_busy(cmd, 1);
    assert_int_equal(kt_vk_begin_id(kv, cmd, kt_vk_kernel(kv, "inner")), 0);
    vkt_busy(cmd, 2);
    assert_int_equal(kt_vk_end(kv, cmd), 0);
    assert_int_equal(kt_vk_end(kv, cmd), 0);
    assert_int_equal(kt_vk_end(kv, cmd), KT_ESTATE);
    assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, cmd), 0);
    vkt_submit_wait(cmd, fence);
    assert_int_equal(kt_vk_collect_wait(kv, UINT64_C(5000000000)), 2);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *outer = vkt_find(s, "outer"), *inner = vkt_find(s, "inner");
    assert_non_null(outer);
    assert_non_null(inner);
    assert_true(outer->total_ns > inner->total_ns);
    kt_snapshot_free(s);
    assert_int_equal(kt_vk_begin(kv, NULL, "x"), KT_EINVAL);
    assert_int_equal(kt_vk_begin(NULL, cmd, "x"), KT_EINVAL);
    assert_int_equal(kt_vk_collect(NULL), KT_EINVAL);
    ktcli_vk_fence_destroy(&g_vkt.dev, fence);
    ktcli_vk_cmd_free(&g_vkt.dev, cmd);
    close_ctx(kv);
}

static void test_discard(void **state)
{
    (void)state;
    kt_reset();
    kt_vk_ctx_t *kv = open_ctx(4);
    VkCommandBuffer cmd;
    VkFence fence;
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &fence), 0);
    /* Recorded, never submitted: the slots would stay pending forever; discard gives them back. */
    assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, cmd), 0);
    assert_int_equal(record_pairs(kv, cmd, "never", 3), 0);
    assert_int_equal(kt_vk_begin(kv, cmd, "open"), 0);
    assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, cmd), 0);
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    assert_int_equal(st.pending, 4);
    assert_int_equal(kt_vk_discard(kv, cmd), 4);
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.discarded, 4);
    /* The whole ring is usable again. */
    assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, cmd), 0);
    assert_int_equal(record_pairs(kv, cmd, "after", 4), 0);
    assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, cmd), 0);
    vkt_submit_wait(cmd, fence);
    assert_int_equal(kt_vk_collect_wait(kv, UINT64_C(5000000000)), 4);
    ktcli_vk_fence_destroy(&g_vkt.dev, fence);
    ktcli_vk_cmd_free(&g_vkt.dev, cmd);
    close_ctx(kv);
}

/* Thread readback, a command buffer re-begun right after its fence (the layer discards its slots then, before the
 * collector has polled them): long/short/short across many ring wraps. Every dispatch is read before its slot
 * is reused -- none discarded, none dropped -- and no "short" is credited a long kernel's time (a stale read). */
static void test_retire_long_short_short(void **state)
{
    (void)state;
    if (!g_vkt.dev.host_query_reset)
        skip();
    kt_reset();
    kt_vk_desc_t d = vkt_desc();
    d.ring_size = 8;
    d.readback = KT_VK_READBACK_THREAD;
    d.poll_us = 1000000; /* the collector polls rarely: the discard after each fence finds unread slots */
    kt_vk_ctx_t *kv = NULL;
    assert_int_equal(kt_vk_ctx_create(&d, &kv), 0);
    g_kv_open = kv;
    uint32_t long_groups = vkt_busy_groups(20.0);
    VkCommandBuffer cmd;
    VkFence fence;
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &fence), 0);
    const int rounds = 12; /* 36 dispatches through 8 slots */
    for (int r = 0; r < rounds; r++) {
        assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, cmd), 0);
        assert_int_equal(kt_vk_begin(kv, cmd, "lss_long"), 0);
        vkt_busy(cmd, long_groups);
        assert_int_equal(kt_vk_end(kv, cmd), 0);
        for (int k = 0; k < 2; k++) {
            uint32_t one = 1; /* one loop iteration of one workgroup: microseconds */
            assert_int_equal(kt_vk_begin(kv, cmd, "lss_short"), 0);
            ktcli_vk_dispatch(&g_vkt.dev, cmd, &g_vkt.busy, &one, 1, 1);
            assert_int_equal(kt_vk_end(kv, cmd), 0);
        }
        assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, cmd), 0);
        vkt_submit_wait(cmd, fence);
        assert_int_equal(kt_vk_discard(kv, cmd), 0); /* what the layer does when the buffer is re-begun */
    }
    kt_vk_collect_wait(kv, UINT64_C(5000000000));
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    assert_int_equal(st.discarded, 0);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.collected, 3 * rounds);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *lo = vkt_find(s, "lss_long"), *sh = vkt_find(s, "lss_short");
    assert_non_null(lo);
    assert_non_null(sh);
    assert_int_equal(lo->dispatch_count, rounds);
    assert_int_equal(sh->dispatch_count, 2 * rounds);
    assert_int_equal(lo->dropped + sh->dropped, 0);
    /* The dispatches ran one after the other: on the timeline (spans sorted by start) they must read long,
     * short, short, long, ... A stale read would carry an earlier use's timestamps into a later kernel: the
     * same start as another span, out of this order. (No duration bound: CI load stretches any kernel.) */
    const kt_kernel_timing_t *order[3] = {lo, sh, sh};
    size_t k = 0;
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        if (sp->entry != vkt_entry_index(s, lo) && sp->entry != vkt_entry_index(s, sh))
            continue;
        assert_int_equal(sp->entry, vkt_entry_index(s, order[k % 3]));
        if (k)
            assert_true(sp->start_ns > s->spans[i - 1].start_ns);
        k++;
    }
    assert_int_equal(k, 3 * rounds);
    kt_snapshot_free(s);
    ktcli_vk_fence_destroy(&g_vkt.dev, fence);
    ktcli_vk_cmd_free(&g_vkt.dev, cmd);
    close_ctx(kv);
}

/* A command buffer recorded and kept unsubmitted pins its slots only: 40 later dispatches through a ring of 8 are
 * all timed. Discarding it at last counts its dispatches as dropped, never submitted. */
static void pinned_rounds(kt_vk_readback_t mode)
{
    kt_reset();
    kt_vk_ctx_t *kv = open_ctx_mode(8, mode);
    VkCommandBuffer pinned, cmd;
    VkFence fence;
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &pinned), 0);
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &fence), 0);
    assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, pinned), 0);
    assert_int_equal(record_pairs(kv, pinned, "pin_never", 3), 0);
    assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, pinned), 0);
    for (int r = 0; r < 10; r++) {
        assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, cmd), 0);
        assert_int_equal(record_pairs(kv, cmd, "pin_after", 4), 0);
        assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, cmd), 0);
        vkt_submit_wait(cmd, fence);
        assert_int_equal(kt_vk_collect_wait(kv, UINT64_C(5000000000)), 4);
    }
    assert_int_equal(kt_vk_discard(kv, pinned), 3);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *after = vkt_find(s, "pin_after"), *never = vkt_find(s, "pin_never");
    assert_non_null(after);
    assert_non_null(never);
    assert_int_equal(after->dispatch_count, 40);
    assert_int_equal(after->dropped, 0);
    assert_int_equal(never->dispatch_count, 0);
    assert_int_equal(never->dropped, 3);
    assert_int_equal(never->dropped_by[KT_DROP_NEVER_SUBMITTED], 3);
    kt_snapshot_free(s);
    ktcli_vk_fence_destroy(&g_vkt.dev, fence);
    ktcli_vk_cmd_free(&g_vkt.dev, cmd);
    ktcli_vk_cmd_free(&g_vkt.dev, pinned);
    close_ctx(kv);
}

static void test_pinned_unsubmitted_copy(void **state)
{
    (void)state;
    pinned_rounds(KT_VK_READBACK_COPY);
}

static void test_pinned_unsubmitted_thread(void **state)
{
    (void)state;
    if (!g_vkt.dev.host_query_reset)
        skip();
    pinned_rounds(KT_VK_READBACK_THREAD);
}

/* kt_vk_device_lost: pending slots are counted as dropped, device lost, and released. */
static void test_device_lost(void **state)
{
    (void)state;
    kt_reset();
    kt_vk_ctx_t *kv = open_ctx(8);
    VkCommandBuffer cmd;
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &cmd), 0);
    assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, cmd), 0);
    assert_int_equal(record_pairs(kv, cmd, "lost", 3), 0);
    assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, cmd), 0);
    assert_int_equal(kt_vk_device_lost(kv), 3);
    assert_int_equal(kt_vk_last_error(kv), VK_ERROR_DEVICE_LOST);
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    assert_int_equal(st.pending, 0);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = vkt_find(s, "lost");
    assert_non_null(e);
    assert_int_equal(e->dropped_by[KT_DROP_DEVICE_LOST], 3);
    kt_snapshot_free(s);
    ktcli_vk_cmd_free(&g_vkt.dev, cmd);
    close_ctx(kv);
}

/* kt_vk_ctx_destroy with dispatches still unread (a command buffer recorded and never submitted, one pair left
 * open) counts them as dropped, never submitted, instead of freeing them silently; what completed is recorded. */
static void destroy_unread(kt_vk_readback_t mode)
{
    kt_reset();
    kt_vk_ctx_t *kv = open_ctx_mode(8, mode);
    VkCommandBuffer done, never;
    VkFence fence;
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &done), 0);
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &never), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &fence), 0);
    assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, done), 0);
    assert_int_equal(record_pairs(kv, done, "destroy_done", 2), 0);
    assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, done), 0);
    vkt_submit_wait(done, fence);
    assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, never), 0);
    assert_int_equal(record_pairs(kv, never, "destroy_never", 3), 0);
    assert_int_equal(kt_vk_begin(kv, never, "destroy_open"), 0);
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    assert_int_equal(st.begun, 6);
    close_ctx(kv);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *d = vkt_find(s, "destroy_done"), *n = vkt_find(s, "destroy_never"),
                             *o = vkt_find(s, "destroy_open");
    assert_non_null(d);
    assert_non_null(n);
    assert_non_null(o);
    assert_int_equal(d->dispatch_count, 2);
    assert_int_equal(d->dropped, 0);
    assert_int_equal(n->dispatch_count, 0);
    assert_int_equal(n->dropped, 3);
    assert_int_equal(n->dropped_by[KT_DROP_NEVER_SUBMITTED], 3);
    assert_int_equal(o->dispatch_count, 0);
    assert_int_equal(o->dropped, 1);
    assert_int_equal(o->dropped_by[KT_DROP_NEVER_SUBMITTED], 1);
    kt_snapshot_free(s);
    ktcli_vk_fence_destroy(&g_vkt.dev, fence);
    ktcli_vk_cmd_free(&g_vkt.dev, done);
    ktcli_vk_cmd_free(&g_vkt.dev, never);
}

static void test_destroy_unread_copy(void **state)
{
    (void)state;
    destroy_unread(KT_VK_READBACK_COPY);
}

static void test_destroy_unread_thread(void **state)
{
    (void)state;
    if (!g_vkt.dev.host_query_reset)
        skip();
    destroy_unread(KT_VK_READBACK_THREAD);
}

/* Copy readback: values in the readback buffer that cannot be true (here an end 10^15 ticks after the begin,
 * far longer than the time since kt_vk_begin) are dropped, invalid times, never recorded as a duration. */
static void test_insane_values_dropped(void **state)
{
    (void)state;
    kt_reset();
    kt_vk_ctx_t *kv = open_ctx_mode(8, KT_VK_READBACK_COPY);
    VkCommandBuffer cmd;
    VkFence fence;
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &fence), 0);
    assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, cmd), 0);
    assert_int_equal(record_pairs(kv, cmd, "sane_first", 1), 0);
    assert_int_equal(record_pairs(kv, cmd, "sane_second", 1), 0);
    assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, cmd), 0);
    vkt_submit_wait(cmd, fence);
    /* The oldest slot in use is the first pair's; its copy has landed (the fence). */
    uint32_t slot = kv->used_first;
    assert_int_not_equal(slot, KT__VK_NONE);
    uint64_t *w = kv->words + (size_t)slot * KT__VK_WORDS_PER_SLOT;
    assert_true(w[1] != 0 && w[3] != 0);
    uint64_t far = kv->valid_bits >= 51 ? UINT64_C(1000000000000000) : UINT64_C(1) << (kv->valid_bits - 1);
    __atomic_store_n(&w[2], w[0] + far, __ATOMIC_RELEASE);
    assert_int_equal(kt_vk_collect(kv), 1);
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    assert_int_equal(st.collected, 1);
    assert_int_equal(st.dropped, 1);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *bad = vkt_find(s, "sane_first"), *good = vkt_find(s, "sane_second");
    assert_non_null(bad);
    assert_non_null(good);
    assert_int_equal(bad->dispatch_count, 0);
    assert_int_equal(bad->dropped_by[KT_DROP_INVALID_TIMES], 1);
    assert_int_equal(good->dispatch_count, 1);
    assert_int_equal(good->dropped, 0);
    kt_snapshot_free(s);
    ktcli_vk_fence_destroy(&g_vkt.dev, fence);
    ktcli_vk_cmd_free(&g_vkt.dev, cmd);
    close_ctx(kv);
}

/* ---------------------------------------------------------------------------------------------------
 * Thread readback: what ran and was never read is not "never submitted" (issue 37.4)
 * ------------------------------------------------------------------------------------------------- */

static PFN_vkGetQueryPoolResults g_lossy_next; /* the locked driver call under the stand-in */
static int g_lossy_both;                       /* 1: both availabilities read 0; 0: the end's only */

/* vkGetQueryPoolResults of a driver that lost results: the values as the driver gives them, the end's
 * availability (or both) 0 -- what lavapipe's query-object race leaves (vk_test.h), on demand. */
static VkResult VKAPI_CALL lossy_results(VkDevice dev, VkQueryPool pool, uint32_t first, uint32_t count, size_t size,
                                         void *data, VkDeviceSize stride, VkQueryResultFlags flags)
{
    VkResult r = g_lossy_next(dev, pool, first, count, size, data, stride, flags);
    if (!(flags & VK_QUERY_RESULT_WITH_AVAILABILITY_BIT) || !(flags & VK_QUERY_RESULT_64_BIT))
        return r;
    for (uint32_t q = 0; q < count; q++)
        if (((first + q) & 1u) || g_lossy_both)
            ((uint64_t *)((char *)data + q * stride))[1] = 0;
    return r == VK_SUCCESS ? VK_NOT_READY : r;
}

static PFN_vkVoidFunction lossy_wrap(const char *name, PFN_vkVoidFunction f)
{
    if (strcmp(name, "vkGetQueryPoolResults"))
        return f;
    g_lossy_next = (PFN_vkGetQueryPoolResults)f;
    return (PFN_vkVoidFunction)lossy_results;
}

/* One dispatch "lossy_<how>" under thread readback, submitted (through kt_vk_queue_submit when `through`), waited
 * for, then its command buffer discarded: how that dispatch is counted. */
static void lossy_case(const char *name, int both, int through, kt_drop_reason_t expected)
{
    kt_reset();
    kt_vk_desc_t d = vkt_desc();
    g_lossy_both = both;
    vkt_set_wrap(lossy_wrap);
    d.readback = KT_VK_READBACK_THREAD;
    d.poll_us = 100;
    kt_vk_ctx_t *kv = NULL;
    assert_int_equal(kt_vk_ctx_create(&d, &kv), 0);
    g_kv_open = kv;
    VkCommandBuffer cmd;
    VkFence fence;
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &fence), 0);
    vkt_record_timed(kv, cmd, name, 1);
    if (through) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
        pthread_mutex_lock(&g_vkt_driver_lock);
        VkResult r = kt_vk_queue_submit(kv, g_vkt.dev.queue, 1, &si, fence);
        pthread_mutex_unlock(&g_vkt_driver_lock);
        assert_int_equal(r, VK_SUCCESS);
        assert_int_equal(ktcli_vk_wait(&g_vkt.dev, fence), 0);
    } else {
        vkt_submit_wait(cmd, fence);
    }
    assert_int_equal(kt_vk_collect_wait(kv, UINT64_C(100000000)), 0); /* a fresh pass: nothing readable */
    assert_int_equal(kt_vk_discard(kv, cmd), 1);
    close_ctx(kv);
    vkt_set_wrap(NULL);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = vkt_find(s, name);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 0);
    assert_int_equal(e->dropped, 1);
    assert_int_equal(e->dropped_by[expected], 1);
    kt_snapshot_free(s);
    ktcli_vk_fence_destroy(&g_vkt.dev, fence);
    ktcli_vk_cmd_free(&g_vkt.dev, cmd);
}

/* A dispatch whose begin timestamp was read and whose end never became available ran: read failed, not never
 * submitted (as kt_vk_ctx_destroy already said). Before: kt_vk_discard counted it never submitted. */
static void test_discard_half_read(void **state)
{
    (void)state;
    if (!g_vkt.dev.host_query_reset)
        skip();
    lossy_case("lossy_half", 0, 0, KT_DROP_READ_FAILED);
}

/* Neither timestamp ever readable, but submitted through kt_vk_queue_submit: read failed. Before: never
 * submitted. */
static void test_discard_submitted_unread(void **state)
{
    (void)state;
    if (!g_vkt.dev.host_query_reset)
        skip();
    lossy_case("lossy_submitted", 1, 1, KT_DROP_READ_FAILED);
}

/* Neither readable and submitted behind ktiming's back: as far as ktiming can tell never submitted (unchanged). */
static void test_discard_unknown_unread(void **state)
{
    (void)state;
    if (!g_vkt.dev.host_query_reset)
        skip();
    lossy_case("lossy_unknown", 1, 0, KT_DROP_NEVER_SUBMITTED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_overflow_thread, teardown_ctx),
        cmocka_unit_test_setup_teardown(test_overflow_no_host_reset, setup_no_host_reset,
                                        teardown_no_host_reset),
        cmocka_unit_test_teardown(test_overflow_copy_readback, teardown_ctx),
        cmocka_unit_test_teardown(test_nesting_and_errors, teardown_ctx),
        cmocka_unit_test_teardown(test_discard, teardown_ctx),
        cmocka_unit_test_teardown(test_retire_long_short_short, teardown_ctx),
        cmocka_unit_test_teardown(test_pinned_unsubmitted_copy, teardown_ctx),
        cmocka_unit_test_teardown(test_pinned_unsubmitted_thread, teardown_ctx),
        cmocka_unit_test_teardown(test_device_lost, teardown_ctx),
        cmocka_unit_test_teardown(test_destroy_unread_copy, teardown_ctx),
        cmocka_unit_test_teardown(test_destroy_unread_thread, teardown_ctx),
        cmocka_unit_test_teardown(test_insane_values_dropped, teardown_ctx),
        cmocka_unit_test_teardown(test_discard_half_read, teardown_ctx),
        cmocka_unit_test_teardown(test_discard_submitted_unread, teardown_ctx),
        cmocka_unit_test_teardown(test_discard_unknown_unread, teardown_ctx),
        cmocka_unit_test(vkt_test_validation_clean),
    };
    return cmocka_run_group_tests(tests, vkt_setup_busy, NULL);
}
