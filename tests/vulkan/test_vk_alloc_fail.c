/* test_vk_alloc_fail.c — ktiming's own allocation failing inside kt_vk_queue_submit[2] (issue 37.4) must not fail the
 * program's submission: its batches go to the driver as the program made them, and that execution's dispatches are
 * counted (timed, or dropped: `ring full`), never lost silently. The test replaces malloc, calloc and realloc in this
 * process; while armed on this thread, the k-th of them called from libktiming returns NULL, for k = 1, 2, ... until a
 * submission makes fewer than k allocations (every allocation on the path, one at a time). Before: on 9fbb4ef the
 * failed rewrite returned VK_ERROR_OUT_OF_HOST_MEMORY to the program; on b23a24d the batch list's or the plans'
 * allocation failing (allocations 1-2 of kt_vk_queue_submit, 1-3 of kt_vk_queue_submit2) sent the batches untimed and
 * counted nothing (0 of 2). SKIPPED under ASan and TSan, whose allocators cannot be replaced this way, and where
 * libktiming is static; fails on any validation message. lavapipe's device here has no synchronization2: the test's
 * vkQueueSubmit2 hands what ktiming submits to vkQueueSubmit (as test_vk_rules). */
#include "vk_test.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VKA_SANITIZED 1
#else
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);

static uintptr_t g_lib_lo, g_lib_hi;        /* libktiming's code */
static __thread unsigned g_fail_at, g_seen; /* fail the g_fail_at-th allocation of libktiming (0: none) */
static __thread int g_failed;               /* it was failed */

/* Whether the allocation called from `caller` is the one to fail. */
static int fail_now(void *caller)
{
    uintptr_t a = (uintptr_t)caller;
    if (!g_fail_at || a < g_lib_lo || a >= g_lib_hi)
        return 0;
    if (++g_seen != g_fail_at)
        return 0;
    g_failed = 1;
    return 1;
}

void *malloc(size_t n)
{
    return fail_now(__builtin_return_address(0)) ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    return fail_now(__builtin_return_address(0)) ? NULL : __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    return fail_now(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n);
}

/* The executable segment of libktiming.so. */
static int find_lib_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "libktiming.so"))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            g_lib_lo = info->dlpi_addr + ph->p_vaddr;
            g_lib_hi = g_lib_lo + ph->p_memsz;
        }
    }
    return 1;
}
#endif

#ifndef VKA_SANITIZED
/* vkQueueSubmit2 as vkQueueSubmit (no synchronization2 on the device; plain batches only). */
static VkResult VKAPI_CALL stand_in_submit2(VkQueue queue, uint32_t n, const VkSubmitInfo2 *si, VkFence fence)
{
    return vkt_submit2_via_submit(queue, n, si, fence);
}

static PFN_vkVoidFunction wrap(const char *name, PFN_vkVoidFunction f)
{
    if (!strcmp(name, "vkQueueSubmit2") || !strcmp(name, "vkQueueSubmit2KHR"))
        return (PFN_vkVoidFunction)stand_in_submit2;
    return f;
}
#endif

static struct {
    kt_vk_ctx_t *kv;
    VkCommandBuffer cmd;
    VkFence fence;
} g;

static int setup(void **state)
{
#ifdef VKA_SANITIZED
    (void)state;
    fprintf(stderr, "ASan/TSan: their allocator cannot be replaced by the test's: skipped\n");
    exit(77);
#else
    dl_iterate_phdr(find_lib_cb, NULL);
    if (g_lib_hi <= g_lib_lo) { /* BUILD_SHARED_LIBS=OFF: its allocations cannot be told from the test's */
        fprintf(stderr, "libktiming.so not loaded (a static build): skipped\n");
        exit(77);
    }
    vkt_setup_busy(state);
    kt_vk_desc_t d = vkt_desc();
    vkt_set_wrap(wrap);
    d.per_submission = 1;
    assert_int_equal(kt_vk_ctx_create(&d, &g.kv), 0);
    assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &g.cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &g.fence), 0);
    return 0;
#endif
}

static int teardown(void **state)
{
    (void)state;
    vkt_set_wrap(NULL);
    g_vkt.app.vk.vkDeviceWaitIdle(g_vkt.dev.device);
    kt_vk_discard(g.kv, g.cmd);
    ktcli_vk_fence_destroy(&g_vkt.dev, g.fence);
    ktcli_vk_cmd_free(&g_vkt.dev, g.cmd);
    kt_vk_ctx_destroy(g.kv);
    return 0;
}

#ifndef VKA_SANITIZED
/* Dispatches of `name` in the snapshot: timed, and dropped. */
static void counts(const char *name, uint64_t *timed, uint64_t *dropped)
{
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *e = vkt_find(s, name);
    *timed = e ? e->dispatch_count : 0;
    *dropped = e ? e->dropped : 0;
    kt_snapshot_free(s);
}

/* One execution of g.cmd (reusable: a batch bracketed by ktiming's command buffers) through kt_vk_queue_submit or
 * kt_vk_queue_submit2, the k-th allocation of libktiming in the call failed; whether one was. */
static int submit_failing(unsigned k, int two)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &g.cmd};
    VkCommandBufferSubmitInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO, .commandBuffer = g.cmd};
    VkSubmitInfo2 si2 = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO_2, .commandBufferInfoCount = 1,
                         .pCommandBufferInfos = &ci};
    pthread_mutex_lock(&g_vkt_driver_lock);
    g_seen = 0;
    g_failed = 0;
    g_fail_at = k;
    VkResult r = two ? kt_vk_queue_submit2(g.kv, g_vkt.dev.queue, 1, &si2, g.fence)
                     : kt_vk_queue_submit(g.kv, g_vkt.dev.queue, 1, &si, g.fence);
    g_fail_at = 0;
    pthread_mutex_unlock(&g_vkt_driver_lock);
    assert_int_equal(r, VK_SUCCESS); /* the program's work went to the queue */
    assert_int_equal(ktcli_vk_wait(&g_vkt.dev, g.fence), 0);
    assert_int_equal(g_vkt.app.vk.vkResetFences(g_vkt.dev.device, 1, &g.fence), VK_SUCCESS);
    kt_vk_collect(g.kv);
    return g_failed;
}
#endif

/* Every allocation of libktiming in a submission failed in turn: each submission succeeds, and its 2 dispatches are
 * counted (timed, or dropped), none lost. A last submission with nothing failed is timed. */
static void each_allocation_fails(int two)
{
#ifndef VKA_SANITIZED
    const char *name = two ? "alloc_fail2" : "alloc_fail";
    const ktcli_vk_fn_t *vk = &g_vkt.app.vk;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    assert_int_equal(vk->vkResetCommandBuffer(g.cmd, 0), VK_SUCCESS);
    assert_int_equal(vk->vkBeginCommandBuffer(g.cmd, &bi), VK_SUCCESS);
    for (int i = 0; i < 2; i++) {
        if (i)
            ktcli_vk_barrier(&g_vkt.dev, g.cmd);
        assert_int_equal(kt_vk_begin(g.kv, g.cmd, name), 0);
        vkt_busy(g.cmd, 1);
        assert_int_equal(kt_vk_end(g.kv, g.cmd), 0);
    }
    assert_int_equal(vk->vkEndCommandBuffer(g.cmd), VK_SUCCESS);
    uint64_t timed0, dropped0, timed1, dropped1;
    unsigned k = 1, failed = 0, lost = 0;
    for (; k <= 64; k++) {
        counts(name, &timed0, &dropped0);
        if (!submit_failing(k, two))
            break;
        failed++;
        counts(name, &timed1, &dropped1);
        fprintf(stderr, "allocation %u failed: %llu of 2 dispatches timed, %llu dropped\n", k,
                (unsigned long long)(timed1 - timed0), (unsigned long long)(dropped1 - dropped0));
        lost += timed1 - timed0 + dropped1 - dropped0 != 2;
    }
    assert_int_equal(lost, 0);
    fprintf(stderr, "%s: %u allocations of ktiming's failed one at a time\n", two ? "vkQueueSubmit2" : "vkQueueSubmit",
            failed);
    assert_true(failed >= 3); /* the batch list, the plan, the rewrite at least */
    /* the k-th was never reached: that submission ran with nothing failed, timed */
    counts(name, &timed1, &dropped1);
    assert_int_equal(timed1 - timed0, 2);
    assert_int_equal(dropped1 - dropped0, 0);
#else
    (void)two;
#endif
}

static void submit1_allocations_fail(void **state)
{
    (void)state;
    each_allocation_fails(0);
}

static void submit2_allocations_fail(void **state)
{
    (void)state;
    each_allocation_fails(1);
}

static void validation_clean(void **state)
{
    teardown(state);
    vkt_test_validation_clean(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(submit1_allocations_fail),
        cmocka_unit_test(submit2_allocations_fail),
        cmocka_unit_test(validation_clean),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
