/* test_vk_layer.c — the timing layer (VK_LAYER_KTIMING_timing, loaded in this process above the validation layer,
 * as `ktiming run` loads it) must not break a command buffer that ends with a suspended dynamic render pass
 * instance (VK_RENDERING_SUSPENDING_BIT), resumed by the next command buffer of the batch: nothing may be recorded
 * between the two (VUID-VkSubmitInfo-pCommandBuffers-06015). The layer recorded its copies at the end of such a
 * one-time primary; it now leaves them to its own command buffer after the batch, and every dispatch is still
 * timed. Bookworm's validation layer does not report that; the test layer below the timing layer
 * (VK_LAYER_KTIMING_test, vk_test_layer.c) counts commands recorded between a suspend and its resume. It also gives
 * VK_KHR_performance_query, for the command-buffer-scope performance query tests. Fails on any validation message.
 * With KTIMING_VULKAN_ONCE (test_vk_layer_once: the layer times each recording once, read at its end, as on
 * loaders without vkSetDeviceLoaderData) a recording that ends suspended is left untimed.
 * SKIPPED without a Vulkan 1.3 device with dynamicRendering. */
#include "vk_test.h"

#define FRAMES 3

/* KTIMING_VULKAN_ONCE=1 (test_vk_layer_once): each recording timed once, no batch spans. */
static int once(void)
{
    const char *v = getenv("KTIMING_VULKAN_ONCE");
    return v && atoi(v) != 0;
}

static struct {
    ktcli_vk_app_t app;
    ktcli_vk_device_t dev;
    ktcli_vk_buffer_t out;
    ktcli_vk_pipeline_t busy;
    VkCommandBuffer cmd[2];
    VkFence fence;
    PFN_vkCmdBeginRendering begin_rendering;
    PFN_vkCmdEndRendering end_rendering;
    int perf_query; /* VK_KHR_performance_query and performanceCounterQueryPools enabled on the device */
    int transform_feedback; /* VK_EXT_transform_feedback enabled on the device */
    int timeline; /* timelineSemaphore enabled on the device */
    uint64_t pinned; /* dispatch executions left pending for good (records_behind_pending_head) */
} g;

/* A device of family `family` (graphics and compute) with dynamicRendering, in the fixture's device record. */
static int open_device(void)
{
    const ktcli_vk_fn_t *vk = &g.app.vk;
    ktcli_vk_device_t *dev = &g.dev;
    dev->app = &g.app;
    dev->physical = g.app.devices[0];
    vk->vkGetPhysicalDeviceProperties(dev->physical, &dev->props);
    vk->vkGetPhysicalDeviceMemoryProperties(dev->physical, &dev->mem);
    if (g.app.api_version < VK_API_VERSION_1_3 || dev->props.apiVersion < VK_API_VERSION_1_3)
        return -1;
    VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f13};
    vk->vkGetPhysicalDeviceFeatures2(dev->physical, &f2);
    if (!f13.dynamicRendering)
        return -1;
    uint32_t n = 0;
    vk->vkGetPhysicalDeviceQueueFamilyProperties(dev->physical, &n, NULL);
    VkQueueFamilyProperties fam[16];
    n = n > 16 ? 16 : n;
    vk->vkGetPhysicalDeviceQueueFamilyProperties(dev->physical, &n, fam);
    const VkQueueFlags need = VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT;
    dev->family = UINT32_MAX;
    for (uint32_t i = 0; i < n && dev->family == UINT32_MAX; i++)
        if ((fam[i].queueFlags & need) == need && fam[i].timestampValidBits)
            dev->family = i;
    if (dev->family == UINT32_MAX)
        return -1;
    dev->valid_bits = fam[dev->family].timestampValidBits;
    /* VK_KHR_performance_query with performanceCounterQueryPools, where the device has them (here: the test layer
     * below the timing layer gives them), as a profiling program enables them */
    VkPhysicalDevicePerformanceQueryFeaturesKHR pqf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_QUERY_FEATURES_KHR};
    const char *perf_ext = VK_KHR_PERFORMANCE_QUERY_EXTENSION_NAME;
    const char *names[2];
    uint32_t nnames = 0;
    VkExtensionProperties ext[256];
    n = 256;
    if (vk->vkEnumerateDeviceExtensionProperties(dev->physical, NULL, &n, ext) < 0)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        g.perf_query |= !strcmp(ext[i].extensionName, perf_ext);
        g.transform_feedback |= !strcmp(ext[i].extensionName, VK_EXT_TRANSFORM_FEEDBACK_EXTENSION_NAME);
    }
    if (g.perf_query) {
        f2.pNext = &pqf;
        vk->vkGetPhysicalDeviceFeatures2(dev->physical, &f2);
        g.perf_query = pqf.performanceCounterQueryPools;
    }
    if (g.perf_query)
        names[nnames++] = perf_ext;
    if (g.transform_feedback) /* vkCmdBeginQueryIndexedEXT */
        names[nnames++] = VK_EXT_TRANSFORM_FEEDBACK_EXTENSION_NAME;
    VkPhysicalDevicePerformanceQueryFeaturesKHR pq_on = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_QUERY_FEATURES_KHR,
        .performanceCounterQueryPools = VK_TRUE};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    f2.pNext = &f12;
    vk->vkGetPhysicalDeviceFeatures2(dev->physical, &f2);
    VkPhysicalDeviceVulkan12Features on12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                             .pNext = g.perf_query ? &pq_on : NULL,
                                             .timelineSemaphore = f12.timelineSemaphore}; /* device_lost_by_wait */
    g.timeline = f12.timelineSemaphore;
    VkPhysicalDeviceVulkan13Features on = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                           .pNext = &on12,
                                           .dynamicRendering = VK_TRUE};
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = dev->family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &on,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = nnames,
                              .ppEnabledExtensionNames = names};
    if (vk->vkCreateDevice(dev->physical, &dci, NULL, &dev->device) != VK_SUCCESS)
        return -1;
    vk->vkGetDeviceQueue(dev->device, dev->family, 0, &dev->queue);
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = dev->family};
    if (vk->vkCreateCommandPool(dev->device, &pci, NULL, &dev->pool) != VK_SUCCESS)
        return -1;
    g.begin_rendering = (PFN_vkCmdBeginRendering)vk->vkGetInstanceProcAddr(g.app.instance, "vkCmdBeginRendering");
    g.end_rendering = (PFN_vkCmdEndRendering)vk->vkGetInstanceProcAddr(g.app.instance, "vkCmdEndRendering");
    return g.begin_rendering && g.end_rendering ? 0 : -1;
}

static int setup(void **state)
{
    (void)state;
    int rc = ktcli_vk_app_init(&g.app, 1);
    if (rc == KT_EUNAVAILABLE || (rc == 0 && open_device() != 0)) {
        fprintf(stderr, "no Vulkan 1.3 device with dynamicRendering: skipped\n");
        exit(77);
    }
    if (rc) {
        fprintf(stderr, "Vulkan instance: %s\n", kt_strerror(rc));
        exit(1);
    }
    dl_iterate_phdr(vkt_pin_cb, NULL);
    fprintf(stderr, "device: %s; layers: %s\n", g.dev.props.deviceName, getenv("VK_INSTANCE_LAYERS"));
    const ktcli_vk_buffer_t *b[1] = {&g.out};
    assert_int_equal(ktcli_vk_buffer_create(&g.dev, 64 * sizeof(uint32_t), &g.out), 0);
    assert_int_equal(ktcli_vk_pipeline_create(&g.dev, busy_spv, sizeof(busy_spv), b, 1, sizeof(uint32_t), &g.busy), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(ktcli_vk_cmd_alloc(&g.dev, &g.cmd[i]), 0);
    assert_int_equal(ktcli_vk_fence_create(&g.dev, &g.fence), 0);
    return 0;
}

/* The symbol `name` of the loaded layer library whose path holds `lib` (test builds of the timing layer export a
 * few; the test layer one), or NULL. */
static int find_layer_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char **want = data;
    if (info->dlpi_name && strstr(info->dlpi_name, want[0])) {
        want[1] = info->dlpi_name;
        return 1;
    }
    return 0;
}

static void *lib_symbol(const char *lib, const char *name)
{
    const char *want[2] = {lib, NULL};
    dl_iterate_phdr(find_layer_cb, want);
    const char *path = want[1];
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void *sym = h ? dlsym(h, name) : NULL;
    if (h)
        dlclose(h);
    return sym;
}

static void *layer_symbol(const char *name)
{
    return lib_symbol("libktiming_vk_layer", name);
}

/* An empty dynamic render pass instance with `flags`. */
static void rendering(VkCommandBuffer cmd, VkRenderingFlags flags)
{
    VkRenderingInfo ri = {.sType = VK_STRUCTURE_TYPE_RENDERING_INFO,
                          .flags = flags,
                          .renderArea = {.extent = {16, 16}},
                          .layerCount = 1};
    g.begin_rendering(cmd, &ri);
    g.end_rendering(cmd);
}

/* FRAMES times: cmd[0] (one-time) dispatches, then suspends a render pass instance; cmd[1] (one-time) resumes
 * and ends it; one batch of both. Every dispatch is timed (the first recording's too: the layer's context is made
 * at the first dispatch), and the test layer saw FRAMES suspends and no command between one and its resume.
 * With KTIMING_VULKAN_ONCE the layer has no command buffer after the batch to read them: each counts dropped, no
 * timing, and nothing follows the suspend. Before (abdab98^; with KTIMING_VULKAN_ONCE=1 until this change): the
 * layer's copies followed the suspend (10, resp. 6, commands between; VUID-vkCmdCopyQueryPoolResults-suspended
 * under the layer 1.4.363), and all 3 were timed. */
static void suspended_at_end(void **state)
{
    (void)state;
    const ktcli_vk_fn_t *vk = &g.app.vk;
    void (*spy)(unsigned long *, unsigned long *) =
        (void (*)(unsigned long *, unsigned long *))lib_symbol("libkt_vk_test_layer", "kt_test_layer_suspend_counts");
    assert_non_null(spy); /* the test layer is in the chain under ctest (VK_INSTANCE_LAYERS) */
    unsigned long suspends0, between0, suspends1, between1;
    spy(&suspends0, &between0);
    uint32_t iters = 1;
    for (int f = 0; f < FRAMES; f++) {
        assert_int_equal(ktcli_vk_cmd_begin(&g.dev, g.cmd[0]), 0); /* ONE_TIME_SUBMIT */
        ktcli_vk_dispatch(&g.dev, g.cmd[0], &g.busy, &iters, 1, 1);
        rendering(g.cmd[0], VK_RENDERING_SUSPENDING_BIT);
        assert_int_equal(ktcli_vk_cmd_end(&g.dev, g.cmd[0]), 0);
        assert_int_equal(ktcli_vk_cmd_begin(&g.dev, g.cmd[1]), 0);
        rendering(g.cmd[1], VK_RENDERING_RESUMING_BIT);
        assert_int_equal(ktcli_vk_cmd_end(&g.dev, g.cmd[1]), 0);
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 2, .pCommandBuffers = g.cmd};
        assert_int_equal(vk->vkQueueSubmit(g.dev.queue, 1, &si, g.fence), VK_SUCCESS);
        assert_int_equal(ktcli_vk_wait(&g.dev, g.fence), 0); /* the layer collects here */
    }
    spy(&suspends1, &between1);
    assert_int_equal(suspends1 - suspends0, FRAMES); /* the test layer saw each suspend */
    assert_int_equal(between1 - between0, 0);         /* and nothing of ours after one */
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    uint64_t timed = 0, dropped = 0, no_timing = 0, batches = 0;
    for (size_t i = 0; i < s->count; i++) {
        const kt_kernel_timing_t *e = &s->entries[i];
        if (e->backend != KT_BACKEND_VULKAN)
            continue;
        if (!strcmp(e->name, "vkQueueSubmit")) {
            batches += e->dispatch_count;
            continue;
        }
        timed += e->dispatch_count;
        dropped += e->dropped;
        no_timing += e->dropped_by[KT_DROP_NO_TIMING];
    }
    kt_snapshot_free(s);
    if (once()) {
        assert_int_equal(timed, 0);
        assert_int_equal(dropped, FRAMES);
        assert_int_equal(no_timing, FRAMES);
        assert_int_equal(batches, 0);
        return;
    }
    assert_int_equal(timed, FRAMES);
    assert_int_equal(dropped, 0);
    assert_int_equal(batches, FRAMES);
}

/* The layer registers the device with its identity: this 1.3 instance lets it read the deviceUUID (kind "uuid",
 * the model's own name as the label). Before: the layer labelled devices by deviceName only (kind "name"). */
static void device_identity(void **state)
{
    (void)state;
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *b = NULL; /* any Vulkan entry: a batch, or with KTIMING_VULKAN_ONCE a dispatch */
    for (size_t i = 0; i < s->count && !b; i++)
        if (s->entries[i].backend == KT_BACKEND_VULKAN)
            b = &s->entries[i];
    assert_non_null(b);
    assert_string_equal(b->device, g.dev.props.deviceName);
    const kt_device_info_t *dev = kt_snapshot_device(s, KT_BACKEND_VULKAN, b->device);
    assert_non_null(dev);
    assert_string_equal(dev->id.id_kind, "uuid");
    assert_int_equal(strlen(dev->id.uuid), 36);
    assert_int_equal(strlen(dev->id.driver_uuid), 36);
    kt_snapshot_free(s);
}


/* Freeing other command buffers while one is recorded leaves this thread's cached lookup of it valid: 8 dispatches
 * recorded between 8 vkFreeCommandBuffers make 0 lookups in the device's map. Before: every free moved one
 * process-wide epoch, and each next dispatch looked its command buffer up again under the device lock (8). */
static void free_elsewhere_keeps_cache(void **state)
{
    (void)state;
    unsigned long (*lookups)(void) = (unsigned long (*)(void))layer_symbol("kti_vk_layer_cmd_lookups");
    assert_non_null(lookups);
    enum { N = 8 };
    VkCommandBuffer others[N];
    for (int i = 0; i < N; i++)
        assert_int_equal(ktcli_vk_cmd_alloc(&g.dev, &others[i]), 0);
    uint32_t iters = 1;
    assert_int_equal(ktcli_vk_cmd_begin(&g.dev, g.cmd[0]), 0);
    ktcli_vk_dispatch(&g.dev, g.cmd[0], &g.busy, &iters, 1, 1); /* its record now in this thread's cache */
    unsigned long before = lookups();
    for (int i = 0; i < N; i++) {
        ktcli_vk_cmd_free(&g.dev, others[i]);
        ktcli_vk_dispatch(&g.dev, g.cmd[0], &g.busy, &iters, 1, 1);
    }
    unsigned long during = lookups() - before;
    assert_int_equal(ktcli_vk_cmd_end(&g.dev, g.cmd[0]), 0);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = g.cmd};
    assert_int_equal(g.app.vk.vkQueueSubmit(g.dev.queue, 1, &si, g.fence), VK_SUCCESS);
    assert_int_equal(ktcli_vk_wait(&g.dev, g.fence), 0);
    assert_int_equal(during, 0);
}

/* Vulkan dispatches of the snapshot, timed and dropped with no timing, summed over kernels (batches excluded). */
static void vk_counts(uint64_t *timed, uint64_t *no_timing, uint64_t *batches)
{
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    *timed = *no_timing = *batches = 0;
    for (size_t i = 0; i < s->count; i++) {
        const kt_kernel_timing_t *e = &s->entries[i];
        if (e->backend != KT_BACKEND_VULKAN)
            continue;
        if (!strcmp(e->name, "vkQueueSubmit")) {
            *batches += e->dispatch_count;
            continue;
        }
        *timed += e->dispatch_count;
        *no_timing += e->dropped_by[KT_DROP_NO_TIMING];
    }
    kt_snapshot_free(s);
}

/* VK_KHR_performance_query's entry points and the query commands, as a program gets them from the loader. */
typedef struct perf_fns_t {
    PFN_vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR counters;
    PFN_vkGetPhysicalDeviceQueueFamilyPerformanceQueryPassesKHR passes;
    PFN_vkAcquireProfilingLockKHR acquire;
    PFN_vkReleaseProfilingLockKHR release;
    PFN_vkCreateQueryPool create;
    PFN_vkDestroyQueryPool destroy;
    PFN_vkCmdResetQueryPool reset;
    PFN_vkCmdBeginQuery begin;
    PFN_vkCmdEndQuery end;
    PFN_vkCmdBeginQueryIndexedEXT begin_indexed; /* NULL without VK_EXT_transform_feedback */
    PFN_vkCmdEndQueryIndexedEXT end_indexed;
} perf_fns_t;

static perf_fns_t perf_fns(void)
{
    assert_true(g.perf_query); /* the test layer gives them under ctest (VK_INSTANCE_LAYERS) */
    PFN_vkGetInstanceProcAddr gipa = g.app.vk.vkGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr gdpa = (PFN_vkGetDeviceProcAddr)gipa(g.app.instance, "vkGetDeviceProcAddr");
    perf_fns_t f = {
        .counters = (PFN_vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR)gipa(
            g.app.instance, "vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR"),
        .passes = (PFN_vkGetPhysicalDeviceQueueFamilyPerformanceQueryPassesKHR)gipa(
            g.app.instance, "vkGetPhysicalDeviceQueueFamilyPerformanceQueryPassesKHR"),
        .acquire = (PFN_vkAcquireProfilingLockKHR)gdpa(g.dev.device, "vkAcquireProfilingLockKHR"),
        .release = (PFN_vkReleaseProfilingLockKHR)gdpa(g.dev.device, "vkReleaseProfilingLockKHR"),
        .create = (PFN_vkCreateQueryPool)gdpa(g.dev.device, "vkCreateQueryPool"),
        .destroy = (PFN_vkDestroyQueryPool)gdpa(g.dev.device, "vkDestroyQueryPool"),
        .reset = (PFN_vkCmdResetQueryPool)gdpa(g.dev.device, "vkCmdResetQueryPool"),
        .begin = (PFN_vkCmdBeginQuery)gdpa(g.dev.device, "vkCmdBeginQuery"),
        .end = (PFN_vkCmdEndQuery)gdpa(g.dev.device, "vkCmdEndQuery"),
        .begin_indexed = (PFN_vkCmdBeginQueryIndexedEXT)gdpa(g.dev.device, "vkCmdBeginQueryIndexedEXT"),
        .end_indexed = (PFN_vkCmdEndQueryIndexedEXT)gdpa(g.dev.device, "vkCmdEndQueryIndexedEXT"),
    };
    assert_true(f.counters && f.passes && f.acquire && f.release && f.create && f.destroy && f.reset && f.begin &&
                f.end);
    return f;
}

/* The index of the first performance counter of `scope` in the device's queue family (fails the test if none). */
static uint32_t perf_counter(VkPerformanceCounterScopeKHR scope)
{
    const perf_fns_t f = perf_fns();
    VkPerformanceCounterKHR c[64];
    VkPerformanceCounterDescriptionKHR d[64];
    for (int i = 0; i < 64; i++) {
        c[i] = (VkPerformanceCounterKHR){.sType = VK_STRUCTURE_TYPE_PERFORMANCE_COUNTER_KHR};
        d[i] = (VkPerformanceCounterDescriptionKHR){.sType = VK_STRUCTURE_TYPE_PERFORMANCE_COUNTER_DESCRIPTION_KHR};
    }
    uint32_t n = 64;
    assert_true(f.counters(g.dev.physical, g.dev.family, &n, c, d) >= 0);
    uint32_t i = 0;
    while (i < n && c[i].scope != scope)
        i++;
    assert_true(i < n);
    return i;
}

/* One performance query of counter `counter` (a one-pass pool) around 3 dispatches, as the first and the last
 * command of a one-time command buffer, the profiling lock held, begun and ended with vkCmdBeginQuery or (`indexed`)
 * vkCmdBeginQueryIndexedEXT; the Vulkan counts' changes (vk_counts). */
static void perf_query_frame(uint32_t counter, int indexed, uint64_t *timed, uint64_t *no_timing, uint64_t *batches)
{
    const perf_fns_t f = perf_fns();
    assert_true(!indexed || (f.begin_indexed && f.end_indexed));
    const ktcli_vk_fn_t *vk = &g.app.vk;
    VkQueryPoolPerformanceCreateInfoKHR pci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_PERFORMANCE_CREATE_INFO_KHR,
                                               .queueFamilyIndex = g.dev.family,
                                               .counterIndexCount = 1,
                                               .pCounterIndices = &counter};
    uint32_t passes = 0;
    f.passes(g.dev.physical, &pci, &passes);
    assert_int_equal(passes, 1); /* so no VkPerformanceQuerySubmitInfoKHR is needed */
    VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                 .pNext = &pci,
                                 .queryType = VK_QUERY_TYPE_PERFORMANCE_QUERY_KHR,
                                 .queryCount = 1};
    VkQueryPool pool;
    assert_int_equal(f.create(g.dev.device, &qci, NULL, &pool), VK_SUCCESS);
    VkAcquireProfilingLockInfoKHR li = {.sType = VK_STRUCTURE_TYPE_ACQUIRE_PROFILING_LOCK_INFO_KHR,
                                        .timeout = UINT64_MAX};
    assert_int_equal(f.acquire(g.dev.device, &li), VK_SUCCESS);
    uint64_t timed0, none0, batches0, timed1, none1, batches1;
    vk_counts(&timed0, &none0, &batches0);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1};
    assert_int_equal(ktcli_vk_cmd_begin(&g.dev, g.cmd[1]), 0); /* the reset: a command buffer of its own */
    f.reset(g.cmd[1], pool, 0, 1);
    assert_int_equal(ktcli_vk_cmd_end(&g.dev, g.cmd[1]), 0);
    si.pCommandBuffers = &g.cmd[1];
    assert_int_equal(vk->vkQueueSubmit(g.dev.queue, 1, &si, g.fence), VK_SUCCESS);
    assert_int_equal(ktcli_vk_wait(&g.dev, g.fence), 0);
    uint32_t iters = 1;
    assert_int_equal(ktcli_vk_cmd_begin(&g.dev, g.cmd[0]), 0);
    if (indexed) /* the command buffer's first command */
        f.begin_indexed(g.cmd[0], pool, 0, 0, 0);
    else
        f.begin(g.cmd[0], pool, 0, 0);
    for (int i = 0; i < 3; i++)
        ktcli_vk_dispatch(&g.dev, g.cmd[0], &g.busy, &iters, 1, 1);
    if (indexed) /* its last */
        f.end_indexed(g.cmd[0], pool, 0, 0);
    else
        f.end(g.cmd[0], pool, 0);
    assert_int_equal(ktcli_vk_cmd_end(&g.dev, g.cmd[0]), 0);
    si.pCommandBuffers = &g.cmd[0];
    assert_int_equal(vk->vkQueueSubmit(g.dev.queue, 1, &si, g.fence), VK_SUCCESS);
    assert_int_equal(ktcli_vk_wait(&g.dev, g.fence), 0);
    vk_counts(&timed1, &none1, &batches1);
    f.release(g.dev.device);
    f.destroy(g.dev.device, pool, NULL);
    *timed = timed1 - timed0;
    *no_timing = none1 - none0;
    *batches = batches1 - batches0;
}

/* A command buffer that begins a command-buffer-scope performance query must keep it first and its end last
 * (VUID-vkCmdBeginQuery-queryPool-03224, vkCmdEndQuery 03227): the layer records nothing of its own into it, and
 * its 3 dispatches count dropped, no timing, none timed, no batch span. The pool is a real
 * VK_QUERY_TYPE_PERFORMANCE_QUERY_KHR pool of a counter of VK_PERFORMANCE_COUNTER_SCOPE_COMMAND_BUFFER_KHR: the
 * test layer below the timing layer gives the extension (lavapipe has none), so the timing layer's own detection at
 * vkCreateQueryPool runs. Before: the 3 were timed, with the layer's copies after the query's end. */
static void perf_query_scope_untimed(void **state)
{
    (void)state;
    uint64_t timed, no_timing, batches;
    perf_query_frame(perf_counter(VK_PERFORMANCE_COUNTER_SCOPE_COMMAND_BUFFER_KHR), 0, &timed, &no_timing, &batches);
    assert_int_equal(timed, 0);
    assert_int_equal(no_timing, 3);
    assert_int_equal(batches, 0);
}

/* The same with a counter of VK_PERFORMANCE_COUNTER_SCOPE_COMMAND_KHR, which may begin and end anywhere: all 3
 * dispatches timed, one batch span. Fails where the detection leaves every performance pool untimed (its
 * counters' scopes not read, or read wrong). */
static void perf_query_command_scope_timed(void **state)
{
    (void)state;
    uint64_t timed, no_timing, batches;
    perf_query_frame(perf_counter(VK_PERFORMANCE_COUNTER_SCOPE_COMMAND_KHR), 0, &timed, &no_timing, &batches);
    assert_int_equal(timed, 3);
    assert_int_equal(no_timing, 0);
    assert_int_equal(batches, once() ? 0 : 1);
}

/* The same query begun with VK_EXT_transform_feedback's vkCmdBeginQueryIndexedEXT (index 0), which has the same
 * rule (VUID-vkCmdBeginQueryIndexedEXT-queryPool-03224): untimed, counted. Before: the layer did not watch that
 * begin, and timed all 3 with its copies after the query's end. Skipped on a device without the extension. */
static void perf_query_indexed_scope_untimed(void **state)
{
    (void)state;
    if (!g.transform_feedback)
        skip();
    uint64_t timed, no_timing, batches;
    perf_query_frame(perf_counter(VK_PERFORMANCE_COUNTER_SCOPE_COMMAND_BUFFER_KHR), 1, &timed, &no_timing, &batches);
    assert_int_equal(timed, 0);
    assert_int_equal(no_timing, 3);
    assert_int_equal(batches, 0);
}


/* Vulkan dispatches of the snapshot dropped for `why`, summed over kernels (batches excluded). */
static uint64_t vk_drops(kt_drop_reason_t why)
{
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    uint64_t n = 0;
    for (size_t i = 0; i < s->count; i++)
        if (s->entries[i].backend == KT_BACKEND_VULKAN && strcmp(s->entries[i].name, "vkQueueSubmit") != 0)
            n += s->entries[i].dropped_by[why];
    kt_snapshot_free(s);
    return n;
}

/* cmd[0] reset and recorded for reuse (no ONE_TIME_SUBMIT) with n dispatches of busy, barriers between. */
static void record_reusable(int n)
{
    const ktcli_vk_fn_t *vk = &g.app.vk;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    assert_int_equal(vk->vkResetCommandBuffer(g.cmd[0], 0), VK_SUCCESS);
    assert_int_equal(vk->vkBeginCommandBuffer(g.cmd[0], &bi), VK_SUCCESS);
    uint32_t iters = 1;
    for (int i = 0; i < n; i++) {
        if (i)
            ktcli_vk_barrier(&g.dev, g.cmd[0]);
        ktcli_vk_dispatch(&g.dev, g.cmd[0], &g.busy, &iters, 1, 1);
    }
    assert_int_equal(vk->vkEndCommandBuffer(g.cmd[0]), VK_SUCCESS);
}

/* cmd[0] submitted alone n times, each waited for (the layer collects there). */
static void submit_times(int n)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = g.cmd};
    for (int r = 0; r < n; r++) {
        assert_int_equal(g.app.vk.vkQueueSubmit(g.dev.queue, 1, &si, g.fence), VK_SUCCESS);
        assert_int_equal(ktcli_vk_wait(&g.dev, g.fence), 0);
    }
}

/* A SIMULTANEOUS_USE secondary (a barrier, one dispatch) listed twice in one vkCmdExecuteCommands of a primary
 * submitted twice: nothing of the layer's goes into the secondary (pending in several primaries at once, its
 * executions would reset and write the same queries unordered; Debian 12's validation layer aborts on the resets
 * in a secondary pending twice), and its dispatch counts as dropped, simultaneous-use, per occurrence and
 * submission: 4, none timed; the primary's batches keep their spans (2; none with KTIMING_VULKAN_ONCE). Before:
 * 4 timed, each pair of occurrences with the values of the second (KTIMING_VULKAN_ONCE: 1 timed, 3 re-executed). */
static void simultaneous_secondary_untimed(void **state)
{
    (void)state;
    const ktcli_vk_fn_t *vk = &g.app.vk;
    VkCommandBuffer sec;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = g.dev.pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_SECONDARY,
                                      .commandBufferCount = 1};
    assert_int_equal(vk->vkAllocateCommandBuffers(g.dev.device, &ai, &sec), VK_SUCCESS);
    VkCommandBufferInheritanceInfo inh = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO};
    VkCommandBufferBeginInfo sbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .pInheritanceInfo = &inh,
                                    .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT};
    uint64_t timed0, none0, batches0, timed1, none1, batches1;
    vk_counts(&timed0, &none0, &batches0);
    uint64_t simul0 = vk_drops(KT_DROP_SIMULTANEOUS_USE);
    assert_int_equal(vk->vkBeginCommandBuffer(sec, &sbi), VK_SUCCESS);
    ktcli_vk_barrier(&g.dev, sec); /* its two occurrences write one buffer: ordered */
    uint32_t iters = 1;
    ktcli_vk_dispatch(&g.dev, sec, &g.busy, &iters, 1, 1);
    assert_int_equal(vk->vkEndCommandBuffer(sec), VK_SUCCESS);
    PFN_vkCmdExecuteCommands exec =
        (PFN_vkCmdExecuteCommands)vk->vkGetInstanceProcAddr(g.app.instance, "vkCmdExecuteCommands");
    assert_non_null(exec);
    VkCommandBufferBeginInfo pbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    assert_int_equal(vk->vkResetCommandBuffer(g.cmd[0], 0), VK_SUCCESS);
    assert_int_equal(vk->vkBeginCommandBuffer(g.cmd[0], &pbi), VK_SUCCESS);
    const VkCommandBuffer list[2] = {sec, sec};
    exec(g.cmd[0], 2, list);
    assert_int_equal(vk->vkEndCommandBuffer(g.cmd[0]), VK_SUCCESS);
    submit_times(2);
    vk_counts(&timed1, &none1, &batches1);
    uint64_t simul1 = vk_drops(KT_DROP_SIMULTANEOUS_USE);
    assert_int_equal(vk->vkResetCommandBuffer(g.cmd[0], 0), VK_SUCCESS);
    vk->vkFreeCommandBuffers(g.dev.device, g.dev.pool, 1, &sec);
    assert_int_equal(timed1 - timed0, 0);
    assert_int_equal(simul1 - simul0, 4);
    assert_int_equal(batches1 - batches0, once() ? 0 : 2);
}


/* test_vk_layer_ring16 (KTIMING_VULKAN_QUERIES=16): a reusable primary of 20 dispatches submitted 3 times. The ring
 * holds 16: 16 timed per execution, and the 4 whose begin failed at recording count as dropped, ring full, at
 * every execution: 48 timed, 12 dropped. Before: counted once, at recording (48 timed, 4 dropped: 8 executions
 * lost without a count). Skipped without KTIMING_VULKAN_QUERIES. */
static void ring_full_every_execution(void **state)
{
    (void)state;
    const char *q = getenv("KTIMING_VULKAN_QUERIES");
    if (!q || atoi(q) != 16 || once())
        skip();
    const ktcli_vk_fn_t *vk = &g.app.vk;
    uint64_t timed0, none0, batches0, timed1, none1, batches1;
    vk_counts(&timed0, &none0, &batches0);
    uint64_t full0 = vk_drops(KT_DROP_RING_FULL);
    record_reusable(20);
    submit_times(3);
    vk_counts(&timed1, &none1, &batches1);
    uint64_t full1 = vk_drops(KT_DROP_RING_FULL);
    assert_int_equal(vk->vkResetCommandBuffer(g.cmd[0], 0), VK_SUCCESS);
    assert_int_equal(timed1 - timed0, 3 * 16);
    assert_int_equal(full1 - full0, 3 * 4);
}




/* test_vk_layer_ring16 (KTIMING_VULKAN_QUERIES=16: 32 execution records): the first of 21 submissions of a reusable
 * primary (1 dispatch) goes down without the timing layer's last command buffer (the test layer drops it), so its
 * 2 execution records stay pending for good, at the head of the record FIFO, as a long batch on another queue of
 * the family holds it. The 20 after it are read and freed behind it: each is timed, none dropped. Before: records
 * were taken only after the FIFO's tail, so once the 2 pinned ones and 30 read ones had filled it, every later
 * execution counted as dropped, ring full (5 of 20). */
static void records_behind_pending_head(void **state)
{
    (void)state;
    const char *q = getenv("KTIMING_VULKAN_QUERIES");
    if (!q || atoi(q) != 16 || once())
        skip();
    void (*drop_last)(unsigned) = (void (*)(unsigned))lib_symbol("libkt_vk_test_layer", "kt_test_layer_drop_last_cmd");
    assert_non_null(drop_last);
    const ktcli_vk_fn_t *vk = &g.app.vk;
    record_reusable(1);
    drop_last(1);
    submit_times(1);
    drop_last(0);
    g.pinned++; /* its dispatch's record: counted when the device is lost (device_lost_by_semaphore_wait) */
    uint64_t timed0, none0, batches0, timed1, none1, batches1;
    vk_counts(&timed0, &none0, &batches0);
    uint64_t full0 = vk_drops(KT_DROP_RING_FULL);
    submit_times(20);
    vk_counts(&timed1, &none1, &batches1);
    uint64_t full1 = vk_drops(KT_DROP_RING_FULL);
    assert_int_equal(vk->vkResetCommandBuffer(g.cmd[0], 0), VK_SUCCESS);
    assert_int_equal(full1 - full0, 0);
    assert_int_equal(timed1 - timed0, 20);
    assert_int_equal(batches1 - batches0, 20);
}

/* A family the layer has no context for (its creation failed: here the test layer below refuses the context's
 * timestamp query pool, on a second VkDevice): a reusable primary of 2 dispatches submitted twice counts them as
 * dropped, no timing, at every submission (4), none timed. Before: left untimed without a count (0). */
static void untimed_family_counted(void **state)
{
    (void)state;
    void (*fail_pools)(unsigned) =
        (void (*)(unsigned))lib_symbol("libkt_vk_test_layer", "kt_test_layer_fail_timestamp_pools");
    assert_non_null(fail_pools);
    ktcli_vk_device_t dev;
    assert_int_equal(ktcli_vk_device_open(&g.app, 0, NULL, &dev), 0);
    ktcli_vk_buffer_t out;
    ktcli_vk_pipeline_t busy;
    const ktcli_vk_buffer_t *b[1] = {&out};
    assert_int_equal(ktcli_vk_buffer_create(&dev, 64 * sizeof(uint32_t), &out), 0);
    assert_int_equal(ktcli_vk_pipeline_create(&dev, busy_spv, sizeof(busy_spv), b, 1, sizeof(uint32_t), &busy), 0);
    VkCommandBuffer cmd;
    VkFence fence;
    assert_int_equal(ktcli_vk_cmd_alloc(&dev, &cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(&dev, &fence), 0);
    uint64_t timed0, none0, batches0, timed1, none1, batches1;
    vk_counts(&timed0, &none0, &batches0);
    fail_pools(1); /* the layer's context for this device's family: made at its first dispatch, and failing */
    const ktcli_vk_fn_t *vk = &g.app.vk;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    assert_int_equal(vk->vkBeginCommandBuffer(cmd, &bi), VK_SUCCESS);
    uint32_t iters = 1;
    ktcli_vk_dispatch(&dev, cmd, &busy, &iters, 1, 1);
    ktcli_vk_barrier(&dev, cmd);
    ktcli_vk_dispatch(&dev, cmd, &busy, &iters, 1, 1);
    assert_int_equal(vk->vkEndCommandBuffer(cmd), VK_SUCCESS);
    fail_pools(0);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(ktcli_vk_submit(&dev, cmd, fence), 0);
        assert_int_equal(ktcli_vk_wait(&dev, fence), 0);
    }
    vk_counts(&timed1, &none1, &batches1);
    ktcli_vk_fence_destroy(&dev, fence);
    ktcli_vk_cmd_free(&dev, cmd);
    ktcli_vk_pipeline_destroy(&dev, &busy);
    ktcli_vk_buffer_destroy(&dev, &out);
    ktcli_vk_device_close(&dev);
    assert_int_equal(timed1 - timed0, 0);
    assert_int_equal(none1 - none0, 4);
}

/* The last before validation_clean (the device's contexts stay lost): a reusable primary of 2 dispatches submitted
 * behind a timeline semaphore the host has not signalled, then a vkWaitSemaphores that answers
 * VK_ERROR_DEVICE_LOST (the test layer below says so; the device is not lost). The 2 pending dispatches count as
 * dropped, device lost, none timed once the gate opens and the work completes. Before: the layer did not hook
 * vkWaitSemaphores, and the 2 were timed (on a really lost device: counted `never submitted` at vkDestroyDevice,
 * or waited for 2 s at exit). */
static void device_lost_by_semaphore_wait(void **state)
{
    (void)state;
    if (!g.timeline)
        skip();
    void (*lose)(unsigned) = (void (*)(unsigned))lib_symbol("libkt_vk_test_layer", "kt_test_layer_lose_semaphore_waits");
    assert_non_null(lose);
    const ktcli_vk_fn_t *vk = &g.app.vk;
    PFN_vkGetDeviceProcAddr gdpa =
        (PFN_vkGetDeviceProcAddr)vk->vkGetInstanceProcAddr(g.app.instance, "vkGetDeviceProcAddr");
    PFN_vkCreateSemaphore create = (PFN_vkCreateSemaphore)gdpa(g.dev.device, "vkCreateSemaphore");
    PFN_vkDestroySemaphore destroy = (PFN_vkDestroySemaphore)gdpa(g.dev.device, "vkDestroySemaphore");
    PFN_vkSignalSemaphore signal = (PFN_vkSignalSemaphore)gdpa(g.dev.device, "vkSignalSemaphore");
    PFN_vkWaitSemaphores wait = (PFN_vkWaitSemaphores)gdpa(g.dev.device, "vkWaitSemaphores");
    assert_true(create && destroy && signal && wait);
    VkSemaphoreTypeCreateInfo tci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &tci};
    VkSemaphore gate;
    assert_int_equal(create(g.dev.device, &sci, NULL, &gate), VK_SUCCESS);
    uint64_t timed0, none0, batches0, timed1, none1, batches1;
    vk_counts(&timed0, &none0, &batches0);
    uint64_t lost0 = vk_drops(KT_DROP_DEVICE_LOST);
    record_reusable(2);
    const uint64_t one = 1;
    VkTimelineSemaphoreSubmitInfo tsi = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                         .waitSemaphoreValueCount = 1,
                                         .pWaitSemaphoreValues = &one};
    const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &tsi, .waitSemaphoreCount = 1,
                       .pWaitSemaphores = &gate, .pWaitDstStageMask = &stage, .commandBufferCount = 1,
                       .pCommandBuffers = g.cmd};
    assert_int_equal(vk->vkQueueSubmit(g.dev.queue, 1, &si, g.fence), VK_SUCCESS);
    lose(1);
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
                              .pSemaphores = &gate, .pValues = &one};
    assert_int_equal(wait(g.dev.device, &wi, 0), VK_ERROR_DEVICE_LOST);
    VkSemaphoreSignalInfo sig = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, .semaphore = gate, .value = 1};
    assert_int_equal(signal(g.dev.device, &sig), VK_SUCCESS); /* the work runs and completes */
    assert_int_equal(ktcli_vk_wait(&g.dev, g.fence), 0);
    vk_counts(&timed1, &none1, &batches1);
    uint64_t lost1 = vk_drops(KT_DROP_DEVICE_LOST);
    assert_int_equal(vk->vkResetCommandBuffer(g.cmd[0], 0), VK_SUCCESS);
    destroy(g.dev.device, gate, NULL);
    assert_int_equal(timed1 - timed0, 0);
    assert_int_equal(lost1 - lost0, 2 + g.pinned); /* and what records_behind_pending_head left pending */
}

static void validation_clean(void **state)
{
    (void)state;
    g.app.vk.vkDeviceWaitIdle(g.dev.device);
    ktcli_vk_fence_destroy(&g.dev, g.fence);
    for (int i = 0; i < 2; i++)
        ktcli_vk_cmd_free(&g.dev, g.cmd[i]);
    ktcli_vk_pipeline_destroy(&g.dev, &g.busy);
    ktcli_vk_buffer_destroy(&g.dev, &g.out);
    vkt_close_app_and_check(&g.dev, &g.app);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(suspended_at_end),
        cmocka_unit_test(device_identity),
        cmocka_unit_test(free_elsewhere_keeps_cache),
        cmocka_unit_test(perf_query_scope_untimed),
        cmocka_unit_test(perf_query_command_scope_timed),
        cmocka_unit_test(perf_query_indexed_scope_untimed),
        cmocka_unit_test(simultaneous_secondary_untimed),
        cmocka_unit_test(ring_full_every_execution),
        cmocka_unit_test(records_behind_pending_head),
        cmocka_unit_test(untimed_family_counted),
        cmocka_unit_test(device_lost_by_semaphore_wait),
        cmocka_unit_test(validation_clean),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
