/* vk_test_layer.c — a test-only Vulkan layer, VK_LAYER_KTIMING_test (test_vk_layer enables it, below the timing
 * layer and above the validation layer), with two jobs.
 *
 * Performance queries (issue 37.3). To the layers above it, the device has
 * VK_KHR_performance_query: the extension in the device extension list, performanceCounterQueryPools in
 * VkPhysicalDevicePerformanceQueryFeaturesKHR, one pass per pool, a profiling lock that is always granted, and two
 * counters in every queue family: counter 0 of command-buffer scope, counter 1 of command scope. To the layers
 * below it (the validation layer, lavapipe), the program is an ordinary one: the extension and its feature struct are
 * taken out of vkCreateDevice and the physical-device queries, and a performance query pool is created as an
 * occlusion pool of the same size. The timing layer's detection of command-buffer-scope performance pools then
 * runs on what a GPU driver with the extension would give it, on a driver that has none.
 *
 * Suspended render pass instances (VUID-VkSubmitInfo-pCommandBuffers-06015, 06193: no action or synchronization
 * command between a render pass instance that suspends and the one that resumes it). It counts every such command
 * recorded through it (timestamps, query resets and copies, barriers, buffer copies, dispatches) after a
 * vkCmdEndRendering of an instance begun with VK_RENDERING_SUSPENDING_BIT, and before a vkCmdBeginRendering with
 * VK_RENDERING_RESUMING_BIT in a command buffer whose first instance resumes one. The installed validation layer
 * (1.3.239) reports neither. kt_test_layer_suspend_counts() (exported) gives the counts to the test.
 *
 * Device loss: kt_test_layer_lose_semaphore_waits(n) (exported) makes the next n vkWaitSemaphores[KHR] calls answer
 * VK_ERROR_DEVICE_LOST, as a driver whose device was lost does, on a device that is not.
 * kt_test_layer_fail_timestamp_pools(n) makes the next n timestamp query pools fail to be created;
 * kt_test_layer_drop_last_cmd(n) submits the next n bracketed batches without their last command buffer. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#define TL_EXPORT __attribute__((visibility("default")))
#define TL_LAYER_NAME "VK_LAYER_KTIMING_test"
#define TL_COUNTERS 2u
#define TL_CMDS 1024u /* command buffers tracked (a test's few, and the timing layer's) */

/* What the layer keeps of an instance or a device: the next layer's entry points, by dispatch key. */
typedef struct tl_link_t {
    void *key;                      /* the handle's dispatch table pointer */
    VkInstance instance;            /* an instance's own handle (its physical devices share its key) */
    PFN_vkGetInstanceProcAddr gipa; /* next layer's */
    PFN_vkGetDeviceProcAddr gdpa;   /* next layer's (devices) */
    /* devices: the next layer's commands that this layer watches */
    PFN_vkBeginCommandBuffer BeginCommandBuffer;
    PFN_vkCmdBeginRendering BeginRendering, BeginRenderingKHR;
    PFN_vkCmdEndRendering EndRendering, EndRenderingKHR;
    PFN_vkCmdWriteTimestamp WriteTimestamp;
    PFN_vkCmdResetQueryPool ResetQueryPool;
    PFN_vkCmdCopyQueryPoolResults CopyQueryPoolResults;
    PFN_vkCmdPipelineBarrier PipelineBarrier;
    PFN_vkCmdCopyBuffer CopyBuffer;
    PFN_vkCmdDispatch Dispatch;
    PFN_vkQueueSubmit QueueSubmit;
    struct tl_link_t *next;
} tl_link_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static tl_link_t *g_links;

static void *tl_key(const void *handle)
{
    return *(void *const *)handle;
}

static tl_link_t *tl_find(const void *handle)
{
    void *key = tl_key(handle);
    pthread_mutex_lock(&g_lock);
    tl_link_t *l = g_links;
    while (l && l->key != key)
        l = l->next;
    pthread_mutex_unlock(&g_lock);
    return l;
}

static int tl_add(const void *handle, VkInstance instance, PFN_vkGetInstanceProcAddr gipa,
                  PFN_vkGetDeviceProcAddr gdpa)
{
    tl_link_t *l = calloc(1, sizeof *l);
    if (!l)
        return -1;
    l->key = tl_key(handle);
    l->instance = instance;
    l->gipa = gipa;
    l->gdpa = gdpa;
    pthread_mutex_lock(&g_lock);
    l->next = g_links;
    g_links = l;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

static void tl_remove(const void *handle)
{
    void *key = tl_key(handle);
    pthread_mutex_lock(&g_lock);
    for (tl_link_t **p = &g_links; *p; p = &(*p)->next)
        if ((*p)->key == key) {
            tl_link_t *l = *p;
            *p = l->next;
            free(l);
            break;
        }
    pthread_mutex_unlock(&g_lock);
}

/* The next layer's instance function `name` for an instance or physical device handle. */
static PFN_vkVoidFunction tl_next_instance_fn(const void *handle, const char *name)
{
    tl_link_t *l = tl_find(handle);
    return l ? l->gipa(l->instance, name) : NULL;
}

/* Takes the structure of type `type` out of a pNext chain; returns it (NULL if none) and its predecessor. */
static VkBaseOutStructure *tl_unlink(void *chain_head, VkStructureType type, VkBaseOutStructure **prev)
{
    VkBaseOutStructure *p = chain_head;
    while (p->pNext && p->pNext->sType != type)
        p = p->pNext;
    VkBaseOutStructure *s = p->pNext;
    if (s)
        p->pNext = s->pNext;
    *prev = p;
    return s;
}

static void tl_relink(VkBaseOutStructure *prev, VkBaseOutStructure *s)
{
    if (s)
        prev->pNext = s;
}

/* The loader's link to the next layer in a create info's pNext chain (VkLayerInstanceCreateInfo and
 * VkLayerDeviceCreateInfo begin alike: sType, pNext, function), of sType `type`; NULL if none. */
static void *tl_chain_link(const void *pnext, VkStructureType type)
{
    for (const VkLayerInstanceCreateInfo *l = pnext; l; l = (const VkLayerInstanceCreateInfo *)l->pNext)
        if (l->sType == type && l->function == VK_LAYER_LINK_INFO)
            return (void *)l;
    return NULL;
}

/* ---- instance level ---- */

static VkResult VKAPI_CALL tl_CreateInstance(const VkInstanceCreateInfo *ci, const VkAllocationCallbacks *a,
                                             VkInstance *out)
{
    VkLayerInstanceCreateInfo *link = tl_chain_link(ci->pNext, VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO);
    PFN_vkGetInstanceProcAddr gipa = link ? link->u.pLayerInfo->pfnNextGetInstanceProcAddr : NULL;
    if (gipa) /* the next layer's link for the next layer */
        link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = gipa ? (PFN_vkCreateInstance)gipa(VK_NULL_HANDLE, "vkCreateInstance") : NULL;
    VkResult r = create ? create(ci, a, out) : VK_ERROR_INITIALIZATION_FAILED;
    if (r == VK_SUCCESS && tl_add(*out, *out, gipa, NULL) != 0) { /* not tracked: a clean failure */
        ((PFN_vkDestroyInstance)gipa(*out, "vkDestroyInstance"))(*out, a);
        r = VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    return r;
}

static void VKAPI_CALL tl_DestroyInstance(VkInstance instance, const VkAllocationCallbacks *a)
{
    if (!instance)
        return;
    PFN_vkDestroyInstance destroy = (PFN_vkDestroyInstance)tl_next_instance_fn(instance, "vkDestroyInstance");
    tl_remove(instance);
    if (destroy)
        destroy(instance, a);
}

static const VkExtensionProperties kPerfExt = {VK_KHR_PERFORMANCE_QUERY_EXTENSION_NAME,
                                               VK_KHR_PERFORMANCE_QUERY_SPEC_VERSION};

/* Copies `n` properties into the caller's array of *count, the two-call idiom's way. */
static VkResult tl_fill_ext(const VkExtensionProperties *all, uint32_t n, uint32_t *count, VkExtensionProperties *out)
{
    if (!out) {
        *count = n;
        return VK_SUCCESS;
    }
    uint32_t k = *count < n ? *count : n;
    memcpy(out, all, k * sizeof *out);
    *count = k;
    return k < n ? VK_INCOMPLETE : VK_SUCCESS;
}

/* The driver's (and lower layers') device extensions plus VK_KHR_performance_query; ours alone for our name. */
static VkResult VKAPI_CALL tl_EnumerateDeviceExtensionProperties(VkPhysicalDevice pd, const char *layer,
                                                                 uint32_t *count, VkExtensionProperties *out)
{
    if (layer && !strcmp(layer, TL_LAYER_NAME))
        return tl_fill_ext(&kPerfExt, 1, count, out);
    PFN_vkEnumerateDeviceExtensionProperties next = (PFN_vkEnumerateDeviceExtensionProperties)tl_next_instance_fn(
        pd, "vkEnumerateDeviceExtensionProperties");
    if (!next)
        return VK_ERROR_INITIALIZATION_FAILED;
    if (layer)
        return next(pd, layer, count, out);
    uint32_t n = 0;
    VkResult r = next(pd, NULL, &n, NULL);
    if (r != VK_SUCCESS)
        return r;
    VkExtensionProperties *all = calloc(n + 1u, sizeof *all);
    if (!all)
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    r = next(pd, NULL, &n, all);
    if (r == VK_SUCCESS) {
        uint32_t i = 0;
        while (i < n && strcmp(all[i].extensionName, kPerfExt.extensionName))
            i++;
        if (i == n)
            all[n++] = kPerfExt;
        r = tl_fill_ext(all, n, count, out);
    }
    free(all);
    return r;
}

/* vkGetPhysicalDeviceFeatures2[KHR] below us, without the performance query features; then ours filled in. */
static void tl_features2(VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f, const char *name)
{
    PFN_vkGetPhysicalDeviceFeatures2 next = (PFN_vkGetPhysicalDeviceFeatures2)tl_next_instance_fn(pd, name);
    VkBaseOutStructure *prev;
    VkBaseOutStructure *s = tl_unlink(f, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_QUERY_FEATURES_KHR, &prev);
    if (next)
        next(pd, f);
    tl_relink(prev, s);
    if (s) {
        VkPhysicalDevicePerformanceQueryFeaturesKHR *pf = (VkPhysicalDevicePerformanceQueryFeaturesKHR *)s;
        pf->performanceCounterQueryPools = VK_TRUE;
        pf->performanceCounterMultipleQueryPools = VK_FALSE;
    }
}

static void VKAPI_CALL tl_GetPhysicalDeviceFeatures2(VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f)
{
    tl_features2(pd, f, "vkGetPhysicalDeviceFeatures2");
}

static void VKAPI_CALL tl_GetPhysicalDeviceFeatures2KHR(VkPhysicalDevice pd, VkPhysicalDeviceFeatures2 *f)
{
    tl_features2(pd, f, "vkGetPhysicalDeviceFeatures2KHR");
}

/* vkGetPhysicalDeviceProperties2[KHR] likewise: allowCommandBufferQueryCopies is VK_FALSE. */
static void tl_properties2(VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p, const char *name)
{
    PFN_vkGetPhysicalDeviceProperties2 next =
        (PFN_vkGetPhysicalDeviceProperties2)tl_next_instance_fn(pd, name);
    VkBaseOutStructure *prev;
    VkBaseOutStructure *s = tl_unlink(p, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_QUERY_PROPERTIES_KHR, &prev);
    if (next)
        next(pd, p);
    tl_relink(prev, s);
    if (s)
        ((VkPhysicalDevicePerformanceQueryPropertiesKHR *)s)->allowCommandBufferQueryCopies = VK_FALSE;
}

static void VKAPI_CALL tl_GetPhysicalDeviceProperties2(VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p)
{
    tl_properties2(pd, p, "vkGetPhysicalDeviceProperties2");
}

static void VKAPI_CALL tl_GetPhysicalDeviceProperties2KHR(VkPhysicalDevice pd, VkPhysicalDeviceProperties2 *p)
{
    tl_properties2(pd, p, "vkGetPhysicalDeviceProperties2KHR");
}

/* Counter 0: command-buffer scope; counter 1: command scope. The same in every queue family. */
static VkResult VKAPI_CALL tl_EnumerateCounters(VkPhysicalDevice pd, uint32_t family, uint32_t *count,
                                                VkPerformanceCounterKHR *counters,
                                                VkPerformanceCounterDescriptionKHR *descriptions)
{
    (void)pd;
    (void)family;
    if (!counters && !descriptions) {
        *count = TL_COUNTERS;
        return VK_SUCCESS;
    }
    static const VkPerformanceCounterScopeKHR scope[TL_COUNTERS] = {VK_PERFORMANCE_COUNTER_SCOPE_COMMAND_BUFFER_KHR,
                                                                    VK_PERFORMANCE_COUNTER_SCOPE_COMMAND_KHR};
    static const char *const name[TL_COUNTERS] = {"test command-buffer counter", "test command counter"};
    uint32_t k = *count < TL_COUNTERS ? *count : TL_COUNTERS;
    for (uint32_t i = 0; i < k; i++) {
        if (counters) {
            counters[i].unit = VK_PERFORMANCE_COUNTER_UNIT_GENERIC_KHR;
            counters[i].scope = scope[i];
            counters[i].storage = VK_PERFORMANCE_COUNTER_STORAGE_UINT64_KHR;
            memset(counters[i].uuid, 0, sizeof counters[i].uuid);
            counters[i].uuid[0] = (uint8_t)(0x70u + i);
        }
        if (descriptions) {
            descriptions[i].flags = 0;
            strcpy(descriptions[i].name, name[i]);
            strcpy(descriptions[i].category, "ktiming test");
            strcpy(descriptions[i].description, "no value: the pool is an occlusion pool below this layer");
        }
    }
    *count = k;
    return k < TL_COUNTERS ? VK_INCOMPLETE : VK_SUCCESS;
}

static void VKAPI_CALL tl_GetPasses(VkPhysicalDevice pd, const VkQueryPoolPerformanceCreateInfoKHR *ci,
                                    uint32_t *passes)
{
    (void)pd;
    (void)ci;
    *passes = 1;
}

/* ---- device level ---- */

static VkResult VKAPI_CALL tl_CreateDevice(VkPhysicalDevice pd, const VkDeviceCreateInfo *ci,
                                           const VkAllocationCallbacks *a, VkDevice *out)
{
    VkLayerDeviceCreateInfo *link = tl_chain_link(ci->pNext, VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO);
    tl_link_t *inst = tl_find(pd);
    if (!link || !inst)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(inst->instance, "vkCreateDevice");
    if (!create)
        return VK_ERROR_INITIALIZATION_FAILED;
    /* below us: neither the extension nor its feature struct (the program's chain, restored after) */
    const char **names = calloc(ci->enabledExtensionCount + 1u, sizeof *names);
    if (!names)
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    VkDeviceCreateInfo mine = *ci;
    mine.enabledExtensionCount = 0;
    mine.ppEnabledExtensionNames = names;
    for (uint32_t i = 0; i < ci->enabledExtensionCount; i++)
        if (strcmp(ci->ppEnabledExtensionNames[i], VK_KHR_PERFORMANCE_QUERY_EXTENSION_NAME))
            names[mine.enabledExtensionCount++] = ci->ppEnabledExtensionNames[i];
    VkBaseOutStructure *prev;
    VkBaseOutStructure *s = tl_unlink(&mine, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PERFORMANCE_QUERY_FEATURES_KHR, &prev);
    VkResult r = create(pd, &mine, a, out);
    if (prev != (VkBaseOutStructure *)&mine)
        tl_relink(prev, s);
    free(names);
    if (r == VK_SUCCESS && tl_add(*out, VK_NULL_HANDLE, gipa, gdpa) != 0) {
        PFN_vkDestroyDevice destroy = (PFN_vkDestroyDevice)gdpa(*out, "vkDestroyDevice");
        destroy(*out, a);
        r = VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (r == VK_SUCCESS) {
        tl_link_t *l = tl_find(*out);
#define TL_NEXT(field, name) l->field = (void *)gdpa(*out, name);
        TL_NEXT(BeginCommandBuffer, "vkBeginCommandBuffer")
        TL_NEXT(BeginRendering, "vkCmdBeginRendering")
        TL_NEXT(BeginRenderingKHR, "vkCmdBeginRenderingKHR")
        TL_NEXT(EndRendering, "vkCmdEndRendering")
        TL_NEXT(EndRenderingKHR, "vkCmdEndRenderingKHR")
        TL_NEXT(WriteTimestamp, "vkCmdWriteTimestamp")
        TL_NEXT(ResetQueryPool, "vkCmdResetQueryPool")
        TL_NEXT(CopyQueryPoolResults, "vkCmdCopyQueryPoolResults")
        TL_NEXT(PipelineBarrier, "vkCmdPipelineBarrier")
        TL_NEXT(CopyBuffer, "vkCmdCopyBuffer")
        TL_NEXT(Dispatch, "vkCmdDispatch")
        TL_NEXT(QueueSubmit, "vkQueueSubmit")
#undef TL_NEXT
    }
    return r;
}

static PFN_vkVoidFunction tl_next_device_fn(VkDevice device, const char *name)
{
    tl_link_t *l = tl_find(device);
    return l ? l->gdpa(device, name) : NULL;
}

static void VKAPI_CALL tl_DestroyDevice(VkDevice device, const VkAllocationCallbacks *a)
{
    if (!device)
        return;
    PFN_vkDestroyDevice destroy = (PFN_vkDestroyDevice)tl_next_device_fn(device, "vkDestroyDevice");
    tl_remove(device);
    if (destroy)
        destroy(device, a);
}

/* kt_test_layer_fail_timestamp_pools(n) (exported): the next n timestamp query pools fail to be created
 * (VK_ERROR_OUT_OF_DEVICE_MEMORY), as the timing layer's context creation then does. */
static unsigned g_fail_timestamp_pools;

TL_EXPORT void kt_test_layer_fail_timestamp_pools(unsigned n)
{
    pthread_mutex_lock(&g_lock);
    g_fail_timestamp_pools = n;
    pthread_mutex_unlock(&g_lock);
}

/* A performance query pool is an occlusion pool of as many queries below us (no pNext: the performance create
 * info is ours). */
static VkResult VKAPI_CALL tl_CreateQueryPool(VkDevice device, const VkQueryPoolCreateInfo *ci,
                                              const VkAllocationCallbacks *a, VkQueryPool *out)
{
    PFN_vkCreateQueryPool next = (PFN_vkCreateQueryPool)tl_next_device_fn(device, "vkCreateQueryPool");
    if (!next)
        return VK_ERROR_INITIALIZATION_FAILED;
    if (ci->queryType == VK_QUERY_TYPE_TIMESTAMP) {
        pthread_mutex_lock(&g_lock);
        int fail = g_fail_timestamp_pools > 0;
        if (fail)
            g_fail_timestamp_pools--;
        pthread_mutex_unlock(&g_lock);
        if (fail)
            return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    }
    if (ci->queryType != VK_QUERY_TYPE_PERFORMANCE_QUERY_KHR)
        return next(device, ci, a, out);
    VkQueryPoolCreateInfo occ = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                 .queryType = VK_QUERY_TYPE_OCCLUSION,
                                 .queryCount = ci->queryCount};
    return next(device, &occ, a, out);
}

static VkResult VKAPI_CALL tl_AcquireProfilingLock(VkDevice device, const VkAcquireProfilingLockInfoKHR *info)
{
    (void)device;
    (void)info;
    return VK_SUCCESS;
}

static void VKAPI_CALL tl_ReleaseProfilingLock(VkDevice device)
{
    (void)device;
}

/* ---- suspended render pass instances ---- */

/* A command buffer's state since its vkBeginCommandBuffer. */
typedef struct tl_cmd_t {
    VkCommandBuffer cb;
    VkRenderingFlags flags; /* of the render pass instance begun last */
    int suspended;          /* its last instance ended suspended, and none began since */
    int commands;           /* commands recorded since vkBeginCommandBuffer */
    int rendered;           /* a render pass instance began since vkBeginCommandBuffer */
} tl_cmd_t;

static tl_cmd_t g_cmds[TL_CMDS];
static unsigned long g_suspends, g_between; /* instances suspended; commands recorded where none may be */

/* The state of cb (a free entry taken when `fresh`), or NULL when the table is full (then nothing is checked). */
static tl_cmd_t *tl_cmd(VkCommandBuffer cb, int fresh)
{
    tl_cmd_t *free_entry = NULL;
    for (unsigned i = 0; i < TL_CMDS; i++) {
        if (g_cmds[i].cb == cb) {
            if (fresh)
                g_cmds[i] = (tl_cmd_t){.cb = cb};
            return &g_cmds[i];
        }
        if (!g_cmds[i].cb && !free_entry)
            free_entry = &g_cmds[i];
    }
    if (fresh && free_entry)
        *free_entry = (tl_cmd_t){.cb = cb};
    return fresh ? free_entry : NULL;
}

/* A command recorded into cb: counted when it lies between a suspend and its resume. */
static void tl_command(VkCommandBuffer cb)
{
    pthread_mutex_lock(&g_lock);
    tl_cmd_t *c = tl_cmd(cb, 0);
    if (c) {
        g_between += c->suspended;
        c->commands++;
    }
    pthread_mutex_unlock(&g_lock);
}

static VkResult VKAPI_CALL tl_BeginCommandBuffer(VkCommandBuffer cb, const VkCommandBufferBeginInfo *bi)
{
    pthread_mutex_lock(&g_lock);
    tl_cmd(cb, 1);
    pthread_mutex_unlock(&g_lock);
    return tl_find(cb)->BeginCommandBuffer(cb, bi);
}

/* A render pass instance begins: one that resumes, as the command buffer's first, must be its first command. */
static void tl_rendering_begun(VkCommandBuffer cb, const VkRenderingInfo *ri)
{
    pthread_mutex_lock(&g_lock);
    tl_cmd_t *c = tl_cmd(cb, 0);
    if (c) {
        if ((ri->flags & VK_RENDERING_RESUMING_BIT) && !c->rendered)
            g_between += (unsigned long)c->commands;
        c->flags = ri->flags;
        c->suspended = 0;
        c->rendered = 1;
        c->commands++;
    }
    pthread_mutex_unlock(&g_lock);
}

static void tl_rendering_ended(VkCommandBuffer cb)
{
    pthread_mutex_lock(&g_lock);
    tl_cmd_t *c = tl_cmd(cb, 0);
    if (c) {
        c->suspended = (c->flags & VK_RENDERING_SUSPENDING_BIT) != 0;
        g_suspends += (unsigned long)c->suspended;
        c->commands++;
    }
    pthread_mutex_unlock(&g_lock);
}

static void VKAPI_CALL tl_CmdBeginRendering(VkCommandBuffer cb, const VkRenderingInfo *ri)
{
    tl_rendering_begun(cb, ri);
    tl_find(cb)->BeginRendering(cb, ri);
}

static void VKAPI_CALL tl_CmdBeginRenderingKHR(VkCommandBuffer cb, const VkRenderingInfo *ri)
{
    tl_rendering_begun(cb, ri);
    tl_find(cb)->BeginRenderingKHR(cb, ri);
}

static void VKAPI_CALL tl_CmdEndRendering(VkCommandBuffer cb)
{
    tl_rendering_ended(cb);
    tl_find(cb)->EndRendering(cb);
}

static void VKAPI_CALL tl_CmdEndRenderingKHR(VkCommandBuffer cb)
{
    tl_rendering_ended(cb);
    tl_find(cb)->EndRenderingKHR(cb);
}

static void VKAPI_CALL tl_CmdWriteTimestamp(VkCommandBuffer cb, VkPipelineStageFlagBits stage, VkQueryPool pool,
                                            uint32_t query)
{
    tl_command(cb);
    tl_find(cb)->WriteTimestamp(cb, stage, pool, query);
}

static void VKAPI_CALL tl_CmdResetQueryPool(VkCommandBuffer cb, VkQueryPool pool, uint32_t first, uint32_t count)
{
    tl_command(cb);
    tl_find(cb)->ResetQueryPool(cb, pool, first, count);
}

static void VKAPI_CALL tl_CmdCopyQueryPoolResults(VkCommandBuffer cb, VkQueryPool pool, uint32_t first,
                                                  uint32_t count, VkBuffer dst, VkDeviceSize offset,
                                                  VkDeviceSize stride, VkQueryResultFlags flags)
{
    tl_command(cb);
    tl_find(cb)->CopyQueryPoolResults(cb, pool, first, count, dst, offset, stride, flags);
}

static void VKAPI_CALL tl_CmdPipelineBarrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkPipelineStageFlags dst,
                                             VkDependencyFlags dep, uint32_t nm, const VkMemoryBarrier *m,
                                             uint32_t nb, const VkBufferMemoryBarrier *b, uint32_t ni,
                                             const VkImageMemoryBarrier *im)
{
    tl_command(cb);
    tl_find(cb)->PipelineBarrier(cb, src, dst, dep, nm, m, nb, b, ni, im);
}

static void VKAPI_CALL tl_CmdCopyBuffer(VkCommandBuffer cb, VkBuffer src, VkBuffer dst, uint32_t n,
                                        const VkBufferCopy *regions)
{
    tl_command(cb);
    tl_find(cb)->CopyBuffer(cb, src, dst, n, regions);
}

static void VKAPI_CALL tl_CmdDispatch(VkCommandBuffer cb, uint32_t x, uint32_t y, uint32_t z)
{
    tl_command(cb);
    tl_find(cb)->Dispatch(cb, x, y, z);
}

/* For the test: render pass instances suspended so far, and commands recorded between a suspend and its resume. */
TL_EXPORT void kt_test_layer_suspend_counts(unsigned long *suspends, unsigned long *between)
{
    pthread_mutex_lock(&g_lock);
    *suspends = g_suspends;
    *between = g_between;
    pthread_mutex_unlock(&g_lock);
}

/* ---- device loss reported by a semaphore wait ---- */

/* vkWaitSemaphores[KHR] answers VK_ERROR_DEVICE_LOST (without waiting) while g_lose_waits > 0, one per call:
 * kt_test_layer_lose_semaphore_waits(n) (exported) sets it. The device below is not lost: the test sees what the
 * timing layer does with a loss only a semaphore wait reports. */
static unsigned g_lose_waits;

TL_EXPORT void kt_test_layer_lose_semaphore_waits(unsigned n)
{
    pthread_mutex_lock(&g_lock);
    g_lose_waits = n;
    pthread_mutex_unlock(&g_lock);
}

static int tl_lose_one(void)
{
    pthread_mutex_lock(&g_lock);
    int lose = g_lose_waits > 0;
    if (lose)
        g_lose_waits--;
    pthread_mutex_unlock(&g_lock);
    return lose;
}

static VkResult VKAPI_CALL tl_WaitSemaphores(VkDevice device, const VkSemaphoreWaitInfo *wi, uint64_t timeout)
{
    if (tl_lose_one())
        return VK_ERROR_DEVICE_LOST;
    PFN_vkWaitSemaphores next = (PFN_vkWaitSemaphores)tl_next_device_fn(device, "vkWaitSemaphores");
    return next ? next(device, wi, timeout) : VK_ERROR_INITIALIZATION_FAILED;
}

static VkResult VKAPI_CALL tl_WaitSemaphoresKHR(VkDevice device, const VkSemaphoreWaitInfo *wi, uint64_t timeout)
{
    if (tl_lose_one())
        return VK_ERROR_DEVICE_LOST;
    PFN_vkWaitSemaphoresKHR next = (PFN_vkWaitSemaphoresKHR)tl_next_device_fn(device, "vkWaitSemaphoresKHR");
    return next ? next(device, wi, timeout) : VK_ERROR_INITIALIZATION_FAILED;
}

/* ---- a batch whose last command buffer never runs ---- */

/* kt_test_layer_drop_last_cmd(n) (exported): the next n vkQueueSubmit calls whose first batch holds 3 or more
 * command buffers (a batch the timing layer brackets: its head, the program's, its tail) go down without that
 * batch's last one, so the copies it holds never run: the execution records of that batch stay pending for good,
 * as those of a batch still running on another queue do. */
static unsigned g_drop_last;

TL_EXPORT void kt_test_layer_drop_last_cmd(unsigned n)
{
    pthread_mutex_lock(&g_lock);
    g_drop_last = n;
    pthread_mutex_unlock(&g_lock);
}

static VkResult VKAPI_CALL tl_QueueSubmit(VkQueue q, uint32_t n, const VkSubmitInfo *si, VkFence fence)
{
    tl_link_t *l = tl_find(q); /* a queue has its device's dispatch key */
    PFN_vkQueueSubmit next = l ? l->QueueSubmit : NULL;
    if (!next)
        return VK_ERROR_INITIALIZATION_FAILED;
    int drop = 0;
    if (n && si[0].commandBufferCount >= 3) {
        pthread_mutex_lock(&g_lock);
        drop = g_drop_last > 0;
        if (drop)
            g_drop_last--;
        pthread_mutex_unlock(&g_lock);
    }
    if (!drop || n > 8)
        return next(q, n, si, fence);
    VkSubmitInfo mod[8];
    memcpy(mod, si, n * sizeof *si);
    mod[0].commandBufferCount--;
    return next(q, n, mod, fence);
}

/* ---- proc addresses and the loader interface ---- */

typedef struct tl_fn_t {
    const char *name;
    PFN_vkVoidFunction fn;
} tl_fn_t;

#define TL_FN(name, fn) {name, (PFN_vkVoidFunction)fn}
static const tl_fn_t kDeviceFns[] = {
    TL_FN("vkDestroyDevice", tl_DestroyDevice),
    TL_FN("vkCreateQueryPool", tl_CreateQueryPool),
    TL_FN("vkAcquireProfilingLockKHR", tl_AcquireProfilingLock),
    TL_FN("vkReleaseProfilingLockKHR", tl_ReleaseProfilingLock),
    TL_FN("vkBeginCommandBuffer", tl_BeginCommandBuffer),
    TL_FN("vkCmdBeginRendering", tl_CmdBeginRendering),
    TL_FN("vkCmdBeginRenderingKHR", tl_CmdBeginRenderingKHR),
    TL_FN("vkCmdEndRendering", tl_CmdEndRendering),
    TL_FN("vkCmdEndRenderingKHR", tl_CmdEndRenderingKHR),
    TL_FN("vkCmdWriteTimestamp", tl_CmdWriteTimestamp),
    TL_FN("vkCmdResetQueryPool", tl_CmdResetQueryPool),
    TL_FN("vkCmdCopyQueryPoolResults", tl_CmdCopyQueryPoolResults),
    TL_FN("vkCmdPipelineBarrier", tl_CmdPipelineBarrier),
    TL_FN("vkCmdCopyBuffer", tl_CmdCopyBuffer),
    TL_FN("vkCmdDispatch", tl_CmdDispatch),
    TL_FN("vkQueueSubmit", tl_QueueSubmit),
    TL_FN("vkWaitSemaphores", tl_WaitSemaphores),
    TL_FN("vkWaitSemaphoresKHR", tl_WaitSemaphoresKHR),
};
/* ours only where the layer below has the function (the KHR names need their extension) */
static const char *const kOptional[] = {"vkCmdBeginRenderingKHR", "vkCmdEndRenderingKHR", "vkCmdBeginRendering",
                                        "vkCmdEndRendering", "vkWaitSemaphores", "vkWaitSemaphoresKHR"};
static const tl_fn_t kInstanceFns[] = {
    TL_FN("vkCreateInstance", tl_CreateInstance),
    TL_FN("vkDestroyInstance", tl_DestroyInstance),
    TL_FN("vkCreateDevice", tl_CreateDevice),
    TL_FN("vkEnumerateDeviceExtensionProperties", tl_EnumerateDeviceExtensionProperties),
    TL_FN("vkGetPhysicalDeviceFeatures2", tl_GetPhysicalDeviceFeatures2),
    TL_FN("vkGetPhysicalDeviceFeatures2KHR", tl_GetPhysicalDeviceFeatures2KHR),
    TL_FN("vkGetPhysicalDeviceProperties2", tl_GetPhysicalDeviceProperties2),
    TL_FN("vkGetPhysicalDeviceProperties2KHR", tl_GetPhysicalDeviceProperties2KHR),
    TL_FN("vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR", tl_EnumerateCounters),
    TL_FN("vkGetPhysicalDeviceQueueFamilyPerformanceQueryPassesKHR", tl_GetPasses),
};
#undef TL_FN

static PFN_vkVoidFunction tl_lookup(const tl_fn_t *fns, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(fns[i].name, name))
            return fns[i].fn;
    return NULL;
}

static PFN_vkVoidFunction VKAPI_CALL tl_gdpa(VkDevice device, const char *name);

static PFN_vkVoidFunction VKAPI_CALL tl_gipa(VkInstance instance, const char *name)
{
    if (!strcmp(name, "vkGetInstanceProcAddr"))
        return (PFN_vkVoidFunction)tl_gipa;
    if (!strcmp(name, "vkGetDeviceProcAddr"))
        return (PFN_vkVoidFunction)tl_gdpa;
    PFN_vkVoidFunction f = tl_lookup(kInstanceFns, sizeof kInstanceFns / sizeof *kInstanceFns, name);
    if (!f)
        f = tl_lookup(kDeviceFns, sizeof kDeviceFns / sizeof *kDeviceFns, name);
    PFN_vkVoidFunction next = instance ? tl_next_instance_fn(instance, name) : NULL;
    /* the features and properties queries: ours only where the layer below has them */
    if (f && !next && !strncmp(name, "vkGetPhysicalDevice", 19) && strstr(name, "2"))
        return NULL;
    for (size_t i = 0; f && i < sizeof kOptional / sizeof *kOptional; i++)
        if (!strcmp(name, kOptional[i]) && !next)
            return NULL;
    return f ? f : next;
}

static PFN_vkVoidFunction VKAPI_CALL tl_gdpa(VkDevice device, const char *name)
{
    if (!strcmp(name, "vkGetDeviceProcAddr"))
        return (PFN_vkVoidFunction)tl_gdpa;
    PFN_vkVoidFunction f = tl_lookup(kDeviceFns, sizeof kDeviceFns / sizeof *kDeviceFns, name);
    PFN_vkVoidFunction next = tl_next_device_fn(device, name);
    for (size_t i = 0; f && i < sizeof kOptional / sizeof *kOptional; i++)
        if (!strcmp(name, kOptional[i]) && !next)
            return NULL;
    return f ? f : next;
}

TL_EXPORT VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v)
{
    if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT || v->loaderLayerInterfaceVersion < 2)
        return VK_ERROR_INITIALIZATION_FAILED;
    v->loaderLayerInterfaceVersion = 2;
    v->pfnGetInstanceProcAddr = tl_gipa;
    v->pfnGetDeviceProcAddr = tl_gdpa;
    v->pfnGetPhysicalDeviceProcAddr = NULL;
    return VK_SUCCESS;
}
