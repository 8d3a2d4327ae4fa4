/* test_vk_capacity.c — what a program records is never lost for lack of room in ktiming's own tables: more than
 * 64 live contexts are all flushed and stopped (issue 35's list[64]). Fails on any validation message. */
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
    assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, cmd), 0);
    assert_int_equal(kt_vk_begin(kv, cmd, name), 0);
    vkt_busy(cmd, 1);
    assert_int_equal(kt_vk_end(kv, cmd), 0);
    assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, cmd), 0);
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
    kt_init(&(kt_desc_t){0});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(flush_past_64, close_all),
        cmocka_unit_test_teardown(stop_past_64, close_all),
        cmocka_unit_test(vkt_test_validation_clean),
    };
    return cmocka_run_group_tests(tests, vkt_setup_busy, NULL);
}
