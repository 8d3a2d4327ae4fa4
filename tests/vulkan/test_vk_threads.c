/* test_vk_threads.c — several threads record timed dispatches into their own command buffers while another thread
 * collects continuously: every dispatch is recorded exactly once or (lavapipe under THREAD readback only) counted as
 * dropped with a reason, none lost silently. Fails on validation messages. */
#include "vk_test.h"

#include <pthread.h>

#define THREADS 4
#define ITERATIONS 40
#define PAIRS 4

static kt_vk_ctx_t *g_kv;
static atomic_int g_stop;
static atomic_int g_failures;

/* One recording thread's objects. */
typedef struct worker_t {
    int index;               /* 0..THREADS-1 */
    VkCommandPool pool;      /* pools are externally synchronized: one per thread */
    VkCommandBuffer cmd;
    VkFence fence;
    kt_kernel_id_t own;      /* per-thread kernel id */
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    const ktcli_vk_fn_t *vk = &g_vkt.app.vk;
    VkDevice dev = g_vkt.dev.device;
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    for (int it = 0; it < ITERATIONS; it++) {
        if (vk->vkResetCommandBuffer(w->cmd, 0) != VK_SUCCESS || vk->vkBeginCommandBuffer(w->cmd, &bi) != VK_SUCCESS)
            atomic_fetch_add(&g_failures, 1);
        for (int p = 0; p < PAIRS; p++) {
            int rc = (p & 1) ? kt_vk_begin_id(g_kv, w->cmd, w->own) : kt_vk_begin(g_kv, w->cmd, "mt_shared");
            if (rc)
                atomic_fetch_add(&g_failures, 1);
            vkt_busy(w->cmd, 1);
            if (kt_vk_end(g_kv, w->cmd))
                atomic_fetch_add(&g_failures, 1);
        }
        if (vk->vkEndCommandBuffer(w->cmd) != VK_SUCCESS)
            atomic_fetch_add(&g_failures, 1);
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &w->cmd};
        /* VkQueue is externally synchronized; the lock also keeps submissions apart from query reads (vk_test.h). */
        pthread_mutex_lock(&g_vkt_driver_lock);
        VkResult r = vk->vkQueueSubmit(g_vkt.dev.queue, 1, &si, w->fence);
        pthread_mutex_unlock(&g_vkt_driver_lock);
        if (r != VK_SUCCESS || vk->vkWaitForFences(dev, 1, &w->fence, VK_TRUE, UINT64_C(60000000000)) != VK_SUCCESS ||
            vk->vkResetFences(dev, 1, &w->fence) != VK_SUCCESS)
            atomic_fetch_add(&g_failures, 1);
    }
    return NULL;
}

static void *collector_main(void *arg)
{
    atomic_int *collected = arg;
    while (!atomic_load(&g_stop)) {
        int n = kt_vk_collect(g_kv);
        if (n < 0)
            atomic_fetch_add(&g_failures, 1);
        else
            atomic_fetch_add(collected, n);
    }
    return NULL;
}

/* Worker i's command pool, command buffer, fence and own kernel name. */
static void worker_setup(worker_t *w, int i)
{
    const ktcli_vk_fn_t *vk = &g_vkt.app.vk;
    memset(w, 0, sizeof(*w));
    w->index = i;
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = g_vkt.dev.family,
    };
    assert_int_equal(vk->vkCreateCommandPool(g_vkt.dev.device, &pci, NULL, &w->pool), VK_SUCCESS);
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = w->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    assert_int_equal(vk->vkAllocateCommandBuffers(g_vkt.dev.device, &ai, &w->cmd), VK_SUCCESS);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &w->fence), 0);
    char name[32];
    snprintf(name, sizeof(name), "mt_thread%d", i);
    w->own = kt_vk_kernel(g_kv, name);
    assert_true(w->own != 0);
}

/* The snapshot after a run: every dispatch of each kernel recorded or dropped with a reason, no duration longer
 * than the run (`elapsed`), the counts equal to the context's statistics. */
static void check_snapshot(const kt_vk_stats_t *st, int total, uint64_t elapsed)
{
    kt_snapshot_t *s = kt_snapshot();
    uint64_t recorded = 0, read_failed = 0, invalid = 0;
    for (int i = -1; i < THREADS; i++) {
        char name[32];
        if (i < 0)
            snprintf(name, sizeof(name), "mt_shared");
        else
            snprintf(name, sizeof(name), "mt_thread%d", i);
        const kt_kernel_timing_t *e = vkt_find(s, name);
        assert_non_null(e);
        assert_int_equal(e->dispatch_count + e->dropped, i < 0 ? total / 2 : ITERATIONS * PAIRS / 2);
        assert_int_equal(e->dropped, e->dropped_by[KT_DROP_READ_FAILED] + e->dropped_by[KT_DROP_INVALID_TIMES]);
        /* Every duration lies within the host time the whole run took (a torn read of copy readback was once
         * recorded as 584 years). */
        assert_true(e->dispatch_count == 0 || e->max_ns <= elapsed);
        recorded += e->dispatch_count;
        read_failed += e->dropped_by[KT_DROP_READ_FAILED];
        invalid += e->dropped_by[KT_DROP_INVALID_TIMES];
    }
    assert_int_equal(recorded, st->collected);
    assert_int_equal(read_failed, st->pending);
    assert_int_equal(invalid, st->dropped);
    kt_snapshot_free(s);
}

static void run_threads(kt_vk_readback_t mode)
{
    kt_reset();
    atomic_store(&g_failures, 0);
    kt_vk_desc_t d = vkt_desc();
    d.readback = mode;
    assert_int_equal(kt_vk_ctx_create(&d, &g_kv), 0);
    const ktcli_vk_fn_t *vk = &g_vkt.app.vk;
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++)
        worker_setup(&w[i], i);
    atomic_int collected;
    atomic_init(&collected, 0);
    atomic_store(&g_stop, 0);
    pthread_t tc, tw[THREADS];
    uint64_t t0 = kt_now_ns();
    assert_int_equal(pthread_create(&tc, NULL, collector_main, &collected), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&tw[i], NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(tw[i], NULL);
    atomic_store(&g_stop, 1);
    pthread_join(tc, NULL);
    atomic_fetch_add(&collected, kt_vk_collect_wait(g_kv, UINT64_C(5000000000)));
    uint64_t t1 = kt_now_ns();

    const int total = THREADS * ITERATIONS * PAIRS;
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(g_kv, &st), 0);
    fprintf(stderr,
            "threads (%s): begun %llu collected %llu dropped %llu pending %llu, %llu collect calls, longest %.3f ms\n",
            mode == KT_VK_READBACK_COPY ? "copy" : "thread", (unsigned long long)st.begun,
            (unsigned long long)st.collected, (unsigned long long)st.dropped, (unsigned long long)st.pending, (unsigned long long)st.collect_calls,
            (double)st.collect_max_ns / 1e6);
    /* Release everything before asserting: a failed assertion must not leave the collector polling a device the
     * suite destroys next. The destroy counts what is still unread as dropped, with a reason. */
    kt_vk_ctx_destroy(g_kv);
    g_kv = NULL;
    for (int i = 0; i < THREADS; i++) {
        ktcli_vk_fence_destroy(&g_vkt.dev, w[i].fence);
        vk->vkDestroyCommandPool(g_vkt.dev.device, w[i].pool, NULL);
    }
    assert_int_equal(st.readback, mode);
    assert_int_equal(atomic_load(&g_failures), 0);
    assert_int_equal(st.begun, total);
    /* Every record is returned by exactly one kt_vk_collect call (collect waits for a concurrent collector
     * instead of returning 0 while it runs), or is still pending, or was dropped with a reason. */
    assert_int_equal(atomic_load(&collected), st.collected);
    assert_int_equal(st.collected + st.pending + st.dropped, total);
    /* lavapipe replaces query objects on its queue thread while vkGetQueryPoolResults reads them (vk.h, why
     * AUTO picks COPY there): under THREAD readback one timestamp of a pair can stay unavailable for good, or a
     * read can pair an old value with a new one. Such a dispatch is never recorded, and never lost silently
     * either: the destroy counts it read failed, the sanity check invalid times. The suite keeps its
     * submissions apart from query reads (vk_test.h), which closes the window it has seen; the accounting path
     * stays allowed there in case the driver has another. Any other device, and COPY readback everywhere, must
     * deliver every one. */
    int racy = mode == KT_VK_READBACK_THREAD && g_vkt.dev.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    if (!racy) {
        assert_int_equal(st.pending, 0);
        assert_int_equal(st.dropped, 0);
    }
    check_snapshot(&st, total, t1 - t0);
}

static void test_threads_collector(void **state)
{
    (void)state;
    run_threads(KT_VK_READBACK_THREAD);
}

static void test_threads_copy(void **state)
{
    (void)state;
    run_threads(KT_VK_READBACK_COPY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_collector),
        cmocka_unit_test(test_threads_copy),
        cmocka_unit_test(vkt_test_validation_clean),
    };
    return cmocka_run_group_tests(tests, vkt_setup_busy, NULL);
}
