/* vk_test.h — shared fixture of the Vulkan tests: instance with a counting validation messenger, one device, a
 * busy shader whose duration is tuned at run time, and helpers to find recorded spans. */
#ifndef KT_TEST_VK_TEST_H
#define KT_TEST_VK_TEST_H

#include "vk_app.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "busy_spv.h"

#define BUSY_ITERS 60000u

/* Everything a Vulkan test uses. */
typedef struct vkt_t {
    ktcli_vk_app_t app;          /* instance + messenger */
    ktcli_vk_device_t dev;       /* device 0 */
    ktcli_vk_buffer_t out;       /* busy shader output */
    ktcli_vk_pipeline_t busy;    /* busy shader */
    double ns_per_group;         /* measured cost of one busy workgroup */
} vkt_t;

static vkt_t g_vkt;

/* Keep the Vulkan drivers and layers that are loaded now mapped until exit (RTLD_NODELETE): the loader unloads
 * them at vkDestroyInstance, after which LeakSanitizer can no longer name their frames, so the driver-only
 * suppressions in tests/lsan.supp could not match. */
static int vkt_pin_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *n = info->dlpi_name;
    if (n && (strstr(n, "libvulkan_") || strstr(n, "libVkLayer") || strstr(n, "libLLVM")))
        dlopen(n, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}

/* Exit 77 (skipped) when there is no Vulkan device; otherwise instance (validation messages counted) + device. */
static inline void vkt_open_or_skip(const ktcli_vk_device_opts_t *opts)
{
    int rc = ktcli_vk_app_init(&g_vkt.app, 1);
    if (rc == KT_EUNAVAILABLE) {
        fprintf(stderr, "no Vulkan device: skipped\n");
        exit(77);
    }
    if (rc) {
        fprintf(stderr, "Vulkan instance: %s\n", kt_strerror(rc));
        exit(1);
    }
    if (ktcli_vk_device_open(&g_vkt.app, 0, opts, &g_vkt.dev) != 0) {
        fprintf(stderr, "cannot open Vulkan device 0\n");
        exit(1);
    }
    dl_iterate_phdr(vkt_pin_cb, NULL);
    const char *layers = getenv("VK_INSTANCE_LAYERS");
    fprintf(stderr, "device: %s; layers: %s\n", g_vkt.dev.props.deviceName, layers ? layers : "(none)");
}

#include "vk_results_lock.h" /* lavapipe's THREAD readback race, and the lock the tests serialise it with */

/* Stand-ins for driver functions: after vkt_desc(), vkt_set_wrap(wrap) makes the backend resolve every function
 * through wrap(name, function), which returns the one to use (a test's counting or recording stand-in). */
typedef PFN_vkVoidFunction (*vkt_wrap_fn)(const char *name, PFN_vkVoidFunction f);
static vkt_wrap_fn g_vkt_wrap;

static inline void vkt_set_wrap(vkt_wrap_fn wrap)
{
    g_vkt_wrap = wrap;
}

/* The locking vkGetQueryPoolResults, then the test's wrap. */
static inline PFN_vkVoidFunction vkt_resolve(const char *name, PFN_vkVoidFunction f)
{
    f = vkt_lock_results(name, f);
    return g_vkt_wrap ? g_vkt_wrap(name, f) : f;
}

/* The description of the suite's device, its query reads serialised with the tests' submissions (no wrap). */
static inline kt_vk_desc_t vkt_desc(void)
{
    kt_vk_desc_t d = ktcli_vk_device_desc(&g_vkt.dev);
    d.get_instance_proc_addr = vkt_locked_gipa_over(d.get_instance_proc_addr, vkt_resolve);
    g_vkt_wrap = NULL;
    return d;
}

/* Submit cmd to the suite's queue, never while a query read is in the driver (above). */
static inline void vkt_submit(VkCommandBuffer cmd, VkFence fence)
{
    pthread_mutex_lock(&g_vkt_driver_lock);
    int rc = ktcli_vk_submit(&g_vkt.dev, cmd, fence);
    pthread_mutex_unlock(&g_vkt_driver_lock);
    assert_int_equal(rc, 0);
}

/* vkQueueSubmit2's batches (at most 4, of at most 8 command buffers each, no semaphores) handed to the suite's
 * vkQueueSubmit: the tests' stand-in vkQueueSubmit2 on a device without synchronization2. */
static inline VkResult vkt_submit2_via_submit(VkQueue queue, uint32_t n, const VkSubmitInfo2 *si, VkFence fence)
{
    VkSubmitInfo one[4];
    VkCommandBuffer cmds[4][8];
    assert_true(n <= 4);
    for (uint32_t i = 0; i < n; i++) {
        assert_true(si[i].commandBufferInfoCount <= 8 && !si[i].waitSemaphoreInfoCount &&
                    !si[i].signalSemaphoreInfoCount);
        for (uint32_t k = 0; k < si[i].commandBufferInfoCount; k++)
            cmds[i][k] = si[i].pCommandBufferInfos[k].commandBuffer;
        one[i] = (VkSubmitInfo){.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                .commandBufferCount = si[i].commandBufferInfoCount,
                                .pCommandBuffers = cmds[i]};
    }
    return g_vkt.app.vk.vkQueueSubmit(queue, n, one, fence);
}

/* The busy pipeline over a small output buffer. */
static inline void vkt_busy_init(void)
{
    assert_int_equal(ktcli_vk_buffer_create(&g_vkt.dev, 64 * sizeof(uint32_t), &g_vkt.out), 0);
    const ktcli_vk_buffer_t *b[1] = {&g_vkt.out};
    assert_int_equal(ktcli_vk_pipeline_create(&g_vkt.dev, busy_spv, sizeof(busy_spv), b, 1, sizeof(uint32_t),
                                              &g_vkt.busy), 0);
}

/* Record one busy dispatch of `groups` workgroups. */
static inline void vkt_busy(VkCommandBuffer cmd, uint32_t groups)
{
    uint32_t iters = BUSY_ITERS;
    ktcli_vk_dispatch(&g_vkt.dev, cmd, &g_vkt.busy, &iters, groups, 1);
}

/* Record cmd afresh: one busy dispatch of `groups` workgroups timed as `name` through context kv. */
static inline void vkt_record_timed(kt_vk_ctx_t *kv, VkCommandBuffer cmd, const char *name, uint32_t groups)
{
    assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, cmd), 0);
    assert_int_equal(kt_vk_begin(kv, cmd, name), 0);
    vkt_busy(cmd, groups);
    assert_int_equal(kt_vk_end(kv, cmd), 0);
    assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, cmd), 0);
}

/* Submit cmd, wait; host ns from before submit to after the fence. */
static inline uint64_t vkt_submit_wait(VkCommandBuffer cmd, VkFence fence)
{
    uint64_t t0 = kt_now_ns();
    vkt_submit(cmd, fence);
    assert_int_equal(ktcli_vk_wait(&g_vkt.dev, fence), 0);
    return kt_now_ns() - t0;
}

/* Workgroups of the busy shader that take about `ms` milliseconds (measured now, at least 1). */
static inline uint32_t vkt_busy_groups(double ms)
{
    if (g_vkt.ns_per_group == 0) {
        VkCommandBuffer cmd;
        VkFence fence;
        assert_int_equal(ktcli_vk_cmd_alloc(&g_vkt.dev, &cmd), 0);
        assert_int_equal(ktcli_vk_fence_create(&g_vkt.dev, &fence), 0);
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            assert_int_equal(ktcli_vk_cmd_begin(&g_vkt.dev, cmd), 0);
            vkt_busy(cmd, 16);
            assert_int_equal(ktcli_vk_cmd_end(&g_vkt.dev, cmd), 0);
            double t = (double)vkt_submit_wait(cmd, fence);
            if (rep > 0 && t < best) /* the first run compiles the shader */
                best = t;
        }
        ktcli_vk_fence_destroy(&g_vkt.dev, fence);
        ktcli_vk_cmd_free(&g_vkt.dev, cmd);
        g_vkt.ns_per_group = best / 16.0;
    }
    double g = ms * 1e6 / g_vkt.ns_per_group;
    return g < 1 ? 1u : (uint32_t)g;
}

static inline void vkt_busy_fini(void)
{
    ktcli_vk_pipeline_destroy(&g_vkt.dev, &g_vkt.busy);
    ktcli_vk_buffer_destroy(&g_vkt.dev, &g_vkt.out);
}

/* Close dev and app, and fail if the validation layer (or the loader) reported a warning or an error. */
static inline void vkt_close_app_and_check(ktcli_vk_device_t *dev, ktcli_vk_app_t *app)
{
    ktcli_vk_device_close(dev);
    ktcli_vk_app_fini(app);
    int errors = atomic_load(&app->errors), warnings = atomic_load(&app->warnings);
    if (errors || warnings)
        fprintf(stderr, "validation: %d errors, %d warnings\n", errors, warnings);
    assert_int_equal(errors, 0);
    assert_int_equal(warnings, 0);
}

/* The suite's device and instance. */
static inline void vkt_close_and_check(void)
{
    vkt_close_app_and_check(&g_vkt.dev, &g_vkt.app);
}

/* Group setup of the tests that record busy dispatches: the device (or the group skips), then the busy pipeline. */
static inline int vkt_setup_busy(void **state)
{
    (void)state;
    vkt_open_or_skip(NULL);
    vkt_busy_init();
    return 0;
}

/* The last test of such a group: release everything and require a silent validation layer. */
static inline void vkt_test_validation_clean(void **state)
{
    (void)state;
    vkt_busy_fini();
    vkt_close_and_check();
}

/* The snapshot entry of a kernel on the test device (NULL if none). */
static inline const kt_kernel_timing_t *vkt_find(const kt_snapshot_t *s, const char *name)
{
    return kt_snapshot_find(s, name, KT_BACKEND_VULKAN, g_vkt.dev.props.deviceName);
}

/* Index of an entry in the snapshot (for matching spans), or SIZE_MAX. */
static inline size_t vkt_entry_index(const kt_snapshot_t *s, const kt_kernel_timing_t *e)
{
    return e ? (size_t)(e - s->entries) : SIZE_MAX;
}

#endif
