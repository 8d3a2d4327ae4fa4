/* test_vk_layer.c — the timing layer (VK_LAYER_KTIMING_timing, loaded in this process above the validation layer,
 * as `ktiming run` loads it) must not break a command buffer that ends with a suspended dynamic render pass
 * instance (VK_RENDERING_SUSPENDING_BIT), resumed by the next command buffer of the batch: nothing may be recorded
 * between the two (VUID-VkSubmitInfo-pCommandBuffers-06015). The layer recorded its copies at the end of such a
 * one-time primary; it now leaves them to its own command buffer after the batch, and every dispatch is still
 * timed. Fails on any validation message. SKIPPED without a Vulkan 1.3 device with dynamicRendering.
 * With KTIMING_VULKAN_ONCE (test_vk_layer_once: the layer times each recording once, read at its end, as on
 * loaders without vkSetDeviceLoaderData) only the suspend case runs: such a recording is left untimed. */
#include "vk_test.h"

#define FRAMES 3

static struct {
    ktcli_vk_app_t app;
    ktcli_vk_device_t dev;
    ktcli_vk_buffer_t out;
    ktcli_vk_pipeline_t busy;
    VkCommandBuffer cmd[2];
    VkFence fence;
    PFN_vkCmdBeginRendering begin_rendering;
    PFN_vkCmdEndRendering end_rendering;
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
    VkPhysicalDeviceVulkan13Features on = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                           .dynamicRendering = VK_TRUE};
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = dev->family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &on,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci};
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
 * at the first dispatch). With KTIMING_VULKAN_ONCE the layer has no command buffer after the batch to read them:
 * each counts dropped, no timing, and nothing follows the suspend (before: its copies and barrier did,
 * VUID-vkCmdCopyQueryPoolResults-suspended under the layer 1.4.363, and all 3 were timed). */
static void suspended_at_end(void **state)
{
    (void)state;
    const ktcli_vk_fn_t *vk = &g.app.vk;
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
    if (getenv("KTIMING_VULKAN_ONCE")) {
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
    const kt_kernel_timing_t *b = kt_snapshot_find(s, "vkQueueSubmit", KT_BACKEND_VULKAN, NULL);
    assert_non_null(b);
    assert_string_equal(b->device, g.dev.props.deviceName);
    const kt_device_info_t *dev = kt_snapshot_device(s, KT_BACKEND_VULKAN, b->device);
    assert_non_null(dev);
    assert_string_equal(dev->id.id_kind, "uuid");
    assert_int_equal(strlen(dev->id.uuid), 36);
    assert_int_equal(strlen(dev->id.driver_uuid), 36);
    kt_snapshot_free(s);
}

/* The loaded timing layer's symbol `name` (test builds export a few), or NULL. */
static int find_layer_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libktiming_vk_layer")) {
        *(const char **)data = info->dlpi_name;
        return 1;
    }
    return 0;
}

static void *layer_symbol(const char *name)
{
    const char *path = NULL;
    dl_iterate_phdr(find_layer_cb, &path);
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void *sym = h ? dlsym(h, name) : NULL;
    if (h)
        dlclose(h);
    return sym;
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

/* A command buffer that begins a command-buffer-scope performance query must keep it first and its end last
 * (VUID-vkCmdBeginQuery-queryPool-03224, vkCmdEndQuery 03227): the layer records nothing of its own into it, and
 * its 3 dispatches count dropped, no timing, none timed, no batch span. lavapipe has no VK_KHR_performance_query:
 * an occlusion pool stands in, marked through the layer's test hook (test builds). Before: the 3 were timed,
 * with the layer's copies after the query's end. */
static void perf_query_scope_untimed(void **state)
{
    (void)state;
    void (*mark)(VkDevice, VkQueryPool) = (void (*)(VkDevice, VkQueryPool))layer_symbol("kti_vk_layer_test_perf_pool");
    assert_non_null(mark);
    PFN_vkGetDeviceProcAddr gdpa =
        (PFN_vkGetDeviceProcAddr)g.app.vk.vkGetInstanceProcAddr(g.app.instance, "vkGetDeviceProcAddr");
    PFN_vkCreateQueryPool create = (PFN_vkCreateQueryPool)gdpa(g.dev.device, "vkCreateQueryPool");
    PFN_vkDestroyQueryPool destroy = (PFN_vkDestroyQueryPool)gdpa(g.dev.device, "vkDestroyQueryPool");
    PFN_vkCmdResetQueryPool reset = (PFN_vkCmdResetQueryPool)gdpa(g.dev.device, "vkCmdResetQueryPool");
    PFN_vkCmdBeginQuery begin = (PFN_vkCmdBeginQuery)gdpa(g.dev.device, "vkCmdBeginQuery");
    PFN_vkCmdEndQuery end = (PFN_vkCmdEndQuery)gdpa(g.dev.device, "vkCmdEndQuery");
    assert_true(create && destroy && reset && begin && end);
    VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                 .queryType = VK_QUERY_TYPE_OCCLUSION, .queryCount = 1};
    VkQueryPool pool;
    assert_int_equal(create(g.dev.device, &qci, NULL, &pool), VK_SUCCESS);
    mark(g.dev.device, pool);
    uint64_t timed0, none0, batches0, timed1, none1, batches1;
    vk_counts(&timed0, &none0, &batches0);
    const ktcli_vk_fn_t *vk = &g.app.vk;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1};
    assert_int_equal(ktcli_vk_cmd_begin(&g.dev, g.cmd[1]), 0);
    reset(g.cmd[1], pool, 0, 1);
    assert_int_equal(ktcli_vk_cmd_end(&g.dev, g.cmd[1]), 0);
    si.pCommandBuffers = &g.cmd[1];
    assert_int_equal(vk->vkQueueSubmit(g.dev.queue, 1, &si, g.fence), VK_SUCCESS);
    assert_int_equal(ktcli_vk_wait(&g.dev, g.fence), 0);
    uint32_t iters = 1;
    assert_int_equal(ktcli_vk_cmd_begin(&g.dev, g.cmd[0]), 0);
    begin(g.cmd[0], pool, 0, 0); /* the command buffer's first command */
    for (int i = 0; i < 3; i++)
        ktcli_vk_dispatch(&g.dev, g.cmd[0], &g.busy, &iters, 1, 1);
    end(g.cmd[0], pool, 0); /* its last */
    assert_int_equal(ktcli_vk_cmd_end(&g.dev, g.cmd[0]), 0);
    si.pCommandBuffers = &g.cmd[0];
    assert_int_equal(vk->vkQueueSubmit(g.dev.queue, 1, &si, g.fence), VK_SUCCESS);
    assert_int_equal(ktcli_vk_wait(&g.dev, g.fence), 0);
    vk_counts(&timed1, &none1, &batches1);
    destroy(g.dev.device, pool, NULL);
    assert_int_equal(timed1 - timed0, 0);
    assert_int_equal(none1 - none0, 3);
    assert_int_equal(batches1 - batches0, 0);
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
        cmocka_unit_test(validation_clean),
    };
    const struct CMUnitTest once[] = {
        cmocka_unit_test(suspended_at_end),
        cmocka_unit_test(validation_clean),
    };
    if (getenv("KTIMING_VULKAN_ONCE"))
        return cmocka_run_group_tests(once, setup, NULL);
    return cmocka_run_group_tests(tests, setup, NULL);
}
