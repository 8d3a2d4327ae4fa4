/* vkcrashprog.c — an ordinary Vulkan compute program (no ktiming; Vulkan through dlopen and vkGet*ProcAddr) for
 * the in-flight-at-death test (issue 39.1), run under `ktiming run`:
 *   vkcrashprog [--validation] segv|kill A B
 *     records `gated_b` B times into a reusable command buffer and `gated_a` A times into a one-time one (the
 *     layer reads the first per submission through records of its own, the second through its own pair and
 *     words), submits both (the first with a fence of the program's, the second without), each batch waiting for
 *     value 1 of a timeline semaphore the host never signals, then dies: segv (a write to an unmapped address) or
 *     kill (SIGKILL to itself). Nothing of it can complete: A + B dispatches and 2 batches are in flight. (A
 *     VkEvent the host never sets was the gate before; the layer 1.4.363 reports that as
 *     VUID-vkCmdWaitEvents-srcStageMask-01158, and setting it while pending is VUID-vkSetEvent-event-09543.)
 *   vkcrashprog [--validation] settled A B
 *     every way a timed dispatch of the layer ends, each its own pipeline, all completed and waited for: `once`
 *     (one-time primaries submitted alone, A times), `reuse` (one reusable primary submitted A times with a
 *     fence), `pair2` (a one-time primary in a batch with another command buffer), `sec` (a secondary executed once
 *     by a primary submitted twice), `unsent` (a reusable primary recorded with B dispatches, never submitted, reset),
 *     `destroyed` (B dispatches submitted on a second VkDevice, destroyed at once without a wait); then SIGKILL
 *     to itself: nothing may be left counted in flight.
 *   vkcrashprog [--validation] probe 0 0: exits 0 when it could make its device.
 *   vkcrashprog [--validation] configs 0 0
 *     launch configurations (issue 40.2): one pipeline `cfg` dispatched with group counts (4,1,1) and (8,2,1),
 *     vkCmdDispatchBase (base (1,0,0), counts (2,1,1)) and vkCmdDispatchIndirect, in a reusable command buffer
 *     submitted twice and a one-time one; exits 0.
 * Built a second time with VKC_API (kt_vkcrashprog_api, linked with ktiming, run with `--vulkan off`): the same
 * through the backend's own API, no layer, in the readback mode VKCRASH_READBACK names (copy or thread):
 *   segv|kill: `gated_a` A times and `gated_b` B times (kt_vk_begin/kt_vk_end) in one one-time command buffer
 *     submitted with a plain vkQueueSubmit behind the semaphore; A + B dispatches in flight.
 *   settled: `once` A dispatches submitted, waited for and collected (kt_vk_collect_wait); `unsent` B
 *     dispatches recorded, never submitted, discarded (kt_vk_discard); `destroyed` B dispatches recorded into a
 *     command buffer of a context destroyed before it was submitted; `lost` B dispatches recorded, never submitted,
 *     into a context told the device was lost (kt_vk_device_lost); then SIGKILL.
 *   configs: the same 7 launches timed as `cfg` with kt_vk_launch, submitted once.
 *   Prints "validation messages: N" before dying (settled: before the destroy in flight, invalid usage on purpose) (--validation: VK_LAYER_KHRONOS_validation, warnings and errors).
 *   Exit 77: no Vulkan device with a compute queue (or no validation layer with --validation). */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkcrash_spv.h"

#ifdef VKC_API
#include <ktiming.h>
#include <ktiming/vk.h>

#ifdef VKC_API
#include "vk_results_lock.h" /* lavapipe's THREAD readback race: `configs` serialises its submissions with the reads */
static int g_serialise_submits; /* submit() holds g_vkt_driver_lock (configs, THREAD readback) */
#endif
static VkInstance g_inst;
#endif

#define VKC_INSTANCE_FUNCS(X)                                                                                    \
    X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceQueueFamilyProperties)                                    \
    X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)                             \
    X(vkCreateDebugUtilsMessengerEXT) X(vkEnumerateDeviceExtensionProperties)
#define VKC_DEVICE_FUNCS(X)                                                                                      \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkGetBufferMemoryRequirements)                    \
    X(vkAllocateMemory) X(vkBindBufferMemory) X(vkCreateShaderModule) X(vkCreateDescriptorSetLayout)             \
    X(vkCreatePipelineLayout) X(vkCreateComputePipelines) X(vkCreateDescriptorPool) X(vkAllocateDescriptorSets)  \
    X(vkUpdateDescriptorSets) X(vkCreateCommandPool) X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer)          \
    X(vkEndCommandBuffer) X(vkResetCommandBuffer) X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets)               \
    X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkCmdExecuteCommands) X(vkQueueSubmit)                            \
    X(vkCreateFence) X(vkWaitForFences) X(vkResetFences) X(vkCreateSemaphore) X(vkDeviceWaitIdle)                \
    X(vkSetDebugUtilsObjectNameEXT) X(vkCmdDispatchBase) X(vkCmdDispatchIndirect) X(vkCmdFillBuffer)

#define VKC_DECLARE(fn) static PFN_##fn fn;
static PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
VKC_INSTANCE_FUNCS(VKC_DECLARE)
VKC_DEVICE_FUNCS(VKC_DECLARE)
#undef VKC_DECLARE

static int g_messages;
static int g_quiet; /* messages no longer counted or shown (settled: the destroy in flight) */

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    (void)user;
    if (__atomic_load_n(&g_quiet, __ATOMIC_RELAXED))
        return VK_FALSE;
    if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) {
        __atomic_fetch_add(&g_messages, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "vkcrashprog: validation: %s\n", data && data->pMessage ? data->pMessage : "?");
    }
    return VK_FALSE;
}

#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        VkResult r_ = (call);                                                                                    \
        if (r_ != VK_SUCCESS) {                                                                                  \
            fprintf(stderr, "vkcrashprog: %s failed: %d\n", #call, (int)r_);                                     \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

/* One device: a storage buffer, a descriptor set, a command pool. */
typedef struct vkc_dev_t {
    VkDevice dev;
    VkQueue queue;
    uint32_t family;
    VkShaderModule module;
    VkPipelineLayout layout;
    VkDescriptorSet set;
    VkCommandPool pool;
    VkBuffer buf;        /* the storage buffer; at VKC_INDIRECT_AT a VkDispatchIndirectCommand (configs) */
} vkc_dev_t;

#define VKC_INDIRECT_AT 32768u

static VkPhysicalDevice g_pd;

static int device_open(vkc_dev_t *d)
{
    uint32_t nfam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(g_pd, &nfam, NULL);
    VkQueueFamilyProperties fams[16];
    nfam = nfam > 16 ? 16 : nfam;
    vkGetPhysicalDeviceQueueFamilyProperties(g_pd, &nfam, fams);
    d->family = UINT32_MAX;
    for (uint32_t i = 0; i < nfam && d->family == UINT32_MAX; i++)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            d->family = i;
    if (d->family == UINT32_MAX)
        return 77;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = d->family,
                                   .queueCount = 1, .pQueuePriorities = &prio};
    /* timeline semaphores (the gate): the instance is 1.1, so through VK_KHR_timeline_semaphore */
    VkPhysicalDeviceTimelineSemaphoreFeaturesKHR tsf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES_KHR, .timelineSemaphore = VK_TRUE};
    const char *ext = VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME;
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &tsf, .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci, .enabledExtensionCount = 1, .ppEnabledExtensionNames = &ext};
    CHECK(vkCreateDevice(g_pd, &dci, NULL, &d->dev));
#define VKC_LOAD_D(fn) *(void **)&fn = (void *)vkGetDeviceProcAddr(d->dev, #fn);
    VKC_DEVICE_FUNCS(VKC_LOAD_D)
#undef VKC_LOAD_D
    vkGetDeviceQueue(d->dev, d->family, 0, &d->queue);

    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 64 * 1024,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    VkBuffer buf;
    CHECK(vkCreateBuffer(d->dev, &bci, NULL, &buf));
    d->buf = buf;
    VkMemoryRequirements mr;
    vkGetBufferMemoryRequirements(d->dev, buf, &mr);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(g_pd, &mp);
    uint32_t type = 0;
    while (type < mp.memoryTypeCount && !(mr.memoryTypeBits & (1u << type)))
        type++;
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = mr.size,
                                .memoryTypeIndex = type};
    VkDeviceMemory mem;
    CHECK(vkAllocateMemory(d->dev, &mai, NULL, &mem));
    CHECK(vkBindBufferMemory(d->dev, buf, mem, 0));

    VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                    .codeSize = sizeof vkcrash_spv, .pCode = vkcrash_spv};
    CHECK(vkCreateShaderModule(d->dev, &smi, NULL, &d->module));
    VkDescriptorSetLayoutBinding b = {.binding = 0, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dli = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = 1, .pBindings = &b};
    VkDescriptorSetLayout dsl;
    CHECK(vkCreateDescriptorSetLayout(d->dev, &dli, NULL, &dsl));
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                      .pSetLayouts = &dsl};
    CHECK(vkCreatePipelineLayout(d->dev, &pli, NULL, &d->layout));
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1,
                                      .poolSizeCount = 1, .pPoolSizes = &ps};
    VkDescriptorPool dpool;
    CHECK(vkCreateDescriptorPool(d->dev, &dpi, NULL, &dpool));
    VkDescriptorSetAllocateInfo dai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                       .descriptorPool = dpool, .descriptorSetCount = 1, .pSetLayouts = &dsl};
    CHECK(vkAllocateDescriptorSets(d->dev, &dai, &d->set));
    VkDescriptorBufferInfo dbi = {buf, 0, VKC_INDIRECT_AT}; /* the shaders' part, apart from the indirect command */
    VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = d->set, .dstBinding = 0,
                              .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                              .pBufferInfo = &dbi};
    vkUpdateDescriptorSets(d->dev, 1, &w, 0, NULL);
    VkCommandPoolCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = d->family};
    CHECK(vkCreateCommandPool(d->dev, &cpi, NULL, &d->pool));
    return 0;
}

/* A compute pipeline named `name` (VK_EXT_debug_utils: the kernel's name in the snapshot). */
static VkPipeline pipeline(const vkc_dev_t *d, const char *name)
{
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = VK_PIPELINE_CREATE_DISPATCH_BASE_BIT, /* configs: vkCmdDispatchBase with a base */
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = d->module, .pName = "main"},
        .layout = d->layout};
    VkPipeline p;
    CHECK(vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &ci, NULL, &p));
    VkDebugUtilsObjectNameInfoEXT ni = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT,
                                        .objectType = VK_OBJECT_TYPE_PIPELINE, .objectHandle = (uint64_t)p,
                                        .pObjectName = name};
    CHECK(vkSetDebugUtilsObjectNameEXT(d->dev, &ni));
    return p;
}

static VkCommandBuffer cmd_alloc(const vkc_dev_t *d, VkCommandBufferLevel level)
{
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = d->pool, .level = level, .commandBufferCount = 1};
    VkCommandBuffer c;
    CHECK(vkAllocateCommandBuffers(d->dev, &ai, &c));
    return c;
}

/* Begins c (flags), then n dispatches of p with a barrier after each. */
static void record(const vkc_dev_t *d, VkCommandBuffer c, VkCommandBufferUsageFlags flags, VkPipeline p, int n)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = flags};
    CHECK(vkBeginCommandBuffer(c, &bi));
    if (p) {
        vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, p);
        vkCmdBindDescriptorSets(c, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &d->set, 0, NULL);
    }
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    for (int i = 0; i < n; i++) {
        vkCmdDispatch(c, 4, 1, 1);
        vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb,
                             0, NULL, 0, NULL);
    }
}

static void submit(const vkc_dev_t *d, uint32_t n, const VkCommandBuffer *cmds, VkFence fence)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = n, .pCommandBuffers = cmds};
#ifdef VKC_API
    if (g_serialise_submits)
        pthread_mutex_lock(&g_vkt_driver_lock);
#endif
    VkResult r = vkQueueSubmit(d->queue, 1, &si, fence);
#ifdef VKC_API
    if (g_serialise_submits)
        pthread_mutex_unlock(&g_vkt_driver_lock);
#endif
    CHECK(r);
}

/* A timeline semaphore at 0 that nothing signals: a batch waiting for 1 never runs. */
static VkSemaphore gate_new(const vkc_dev_t *d)
{
    VkSemaphoreTypeCreateInfoKHR sti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO_KHR,
                                        .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE_KHR};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &sti};
    VkSemaphore s;
    CHECK(vkCreateSemaphore(d->dev, &sci, NULL, &s));
    return s;
}

/* submit(), the batch waiting (every stage) for value 1 of `gate`. */
static void submit_gated(const vkc_dev_t *d, uint32_t n, const VkCommandBuffer *cmds, VkFence fence, VkSemaphore gate)
{
    static const uint64_t one = 1;
    static const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkTimelineSemaphoreSubmitInfoKHR tsi = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO_KHR,
                                            .waitSemaphoreValueCount = 1, .pWaitSemaphoreValues = &one};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &tsi, .waitSemaphoreCount = 1,
                       .pWaitSemaphores = &gate, .pWaitDstStageMask = &stage, .commandBufferCount = n,
                       .pCommandBuffers = cmds};
    CHECK(vkQueueSubmit(d->queue, 1, &si, fence));
}

static VkFence fence_new(const vkc_dev_t *d)
{
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence f;
    CHECK(vkCreateFence(d->dev, &fci, NULL, &f));
    return f;
}

static void wait_reset(const vkc_dev_t *d, VkFence f)
{
    CHECK(vkWaitForFences(d->dev, 1, &f, VK_TRUE, UINT64_MAX));
    CHECK(vkResetFences(d->dev, 1, &f));
}


/* configs: the indirect command (1 x 1 x 1 groups) written once, before the dispatches that read it. */
static void indirect_fill(const vkc_dev_t *d, VkFence f)
{
    VkCommandBuffer c = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    record(d, c, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, VK_NULL_HANDLE, 0);
    vkCmdFillBuffer(c, d->buf, VKC_INDIRECT_AT, 3 * sizeof(uint32_t), 1);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_INDIRECT_COMMAND_READ_BIT};
    vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, 0, 1, &mb, 0, NULL,
                         0, NULL);
    CHECK(vkEndCommandBuffer(c));
    submit(d, 1, &c, f);
    wait_reset(d, f);
}

/* configs: launch i of 7 into c (its pipeline bound), then a barrier: (4,1,1) x3, (8,2,1) x2, base (1,0,0) with
 * (2,1,1) groups, indirect. */
static void config_dispatch(const vkc_dev_t *d, VkCommandBuffer c, int i)
{
    if (i < 3)
        vkCmdDispatch(c, 4, 1, 1);
    else if (i < 5)
        vkCmdDispatch(c, 8, 2, 1);
    else if (i == 5)
        vkCmdDispatchBase(c, 1, 0, 0, 2, 1, 1);
    else
        vkCmdDispatchIndirect(c, d->buf, VKC_INDIRECT_AT);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                         NULL, 0, NULL);
}

#ifdef VKC_API
/* A context of the backend's own on d, in the readback mode VKCRASH_READBACK names. `serialise`: under THREAD
 * readback its query reads hold g_vkt_driver_lock, as submit() then does (vk_results_lock.h); only where no
 * submission waits on a gate (a read would wait in lavapipe for the device to go idle, holding the lock). */
static kt_vk_ctx_t *ctx_new(const vkc_dev_t *d, int serialise)
{
    const char *mode = getenv("VKCRASH_READBACK");
    int thread = mode && !strcmp(mode, "thread");
    kt_vk_desc_t desc = {.instance = g_inst, .physical_device = g_pd, .device = d->dev,
                         .queue_family = d->family, .queue = d->queue,
                         .get_instance_proc_addr = vkGetInstanceProcAddr,
                         .readback = thread ? KT_VK_READBACK_THREAD : KT_VK_READBACK_COPY,
                         .instance_api_version = VK_API_VERSION_1_1};
    if (thread && serialise) {
        desc.get_instance_proc_addr = vkt_locked_gipa_over(vkGetInstanceProcAddr, NULL);
        g_serialise_submits = 1;
    }
    kt_vk_ctx_t *ctx = NULL;
    if (kt_vk_ctx_create(&desc, &ctx) != 0) {
        fprintf(stderr, "vkcrashprog: kt_vk_ctx_create failed\n");
        exit(1);
    }
    return ctx;
}

/* With `begin`: begins c (one-time), p bound; then n timed dispatches of `name`. */
static void record_api(const vkc_dev_t *d, kt_vk_ctx_t *ctx, VkCommandBuffer c, int begin, VkPipeline p,
                       const char *name, int n)
{
    if (begin)
        record(d, c, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, p, 0);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    for (int i = 0; i < n; i++) {
        kt_vk_begin(ctx, c, name);
        vkCmdDispatch(c, 4, 1, 1);
        kt_vk_end(ctx, c);
        vkCmdPipelineBarrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb,
                             0, NULL, 0, NULL);
    }
}

static void gated(const vkc_dev_t *d, int na, int nb)
{
    VkSemaphore gate = gate_new(d);
    kt_vk_ctx_t *ctx = ctx_new(d, 0);
    VkCommandBuffer c = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    VkPipeline p = pipeline(d, "p");
    record_api(d, ctx, c, 1, p, "gated_a", na);
    record_api(d, ctx, c, 0, p, "gated_b", nb);
    CHECK(vkEndCommandBuffer(c));
    submit_gated(d, 1, &c, VK_NULL_HANDLE, gate);
}

static void settled(const vkc_dev_t *d, int na, int nb)
{
    kt_vk_ctx_t *ctx = ctx_new(d, 0);
    VkFence f = fence_new(d);
    VkPipeline p = pipeline(d, "p");
    VkCommandBuffer c = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    record_api(d, ctx, c, 1, p, "once", na);
    CHECK(vkEndCommandBuffer(c));
    submit(d, 1, &c, f);
    wait_reset(d, f);
    kt_vk_collect_wait(ctx, UINT64_C(10000000000));
    kt_vk_discard(ctx, c);
    record_api(d, ctx, c, 1, p, "unsent", nb);
    CHECK(vkEndCommandBuffer(c));
    kt_vk_discard(ctx, c);
    CHECK(vkResetCommandBuffer(c, 0));
    kt_vk_ctx_t *gone = ctx_new(d, 0);
    record_api(d, gone, c, 1, p, "destroyed", nb);
    CHECK(vkEndCommandBuffer(c));
    kt_vk_ctx_destroy(gone);
    CHECK(vkResetCommandBuffer(c, 0));
    kt_vk_ctx_t *lost = ctx_new(d, 0); /* told the device was lost with dispatches unread */
    record_api(d, lost, c, 1, p, "lost", nb);
    CHECK(vkEndCommandBuffer(c));
    kt_vk_device_lost(lost);
    kt_vk_ctx_destroy(lost);
    CHECK(vkDeviceWaitIdle(d->dev));
    printf("validation messages: %d\n", __atomic_load_n(&g_messages, __ATOMIC_RELAXED));
    fflush(stdout);
}

/* configs: the 7 launches of config_dispatch timed as `cfg`, each with its configuration (kt_vk_launch). */
static void configs(const vkc_dev_t *d)
{
    static const kt_launch_t launches[7] = {
        {KT_LAUNCH_GROUPS, 3, {4, 1, 1}, {0, 0, 0}}, {KT_LAUNCH_GROUPS, 3, {4, 1, 1}, {0, 0, 0}},
        {KT_LAUNCH_GROUPS, 3, {4, 1, 1}, {0, 0, 0}}, {KT_LAUNCH_GROUPS, 3, {8, 2, 1}, {0, 0, 0}},
        {KT_LAUNCH_GROUPS, 3, {8, 2, 1}, {0, 0, 0}}, {KT_LAUNCH_GROUPS, 3, {2, 1, 1}, {0, 0, 0}},
        {KT_LAUNCH_INDIRECT, 0, {0, 0, 0}, {0, 0, 0}}};
    kt_vk_ctx_t *ctx = ctx_new(d, 1); /* no gated submission here */
    VkFence f = fence_new(d);
    indirect_fill(d, f);
    VkCommandBuffer c = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    record(d, c, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, pipeline(d, "p"), 0);
    for (int i = 0; i < 7; i++) {
        kt_vk_begin(ctx, c, "cfg");
        if (kt_vk_launch(ctx, c, &launches[i]) != 0) {
            fprintf(stderr, "vkcrashprog: kt_vk_launch failed\n");
            exit(1);
        }
        config_dispatch(d, c, i);
        kt_vk_end(ctx, c);
    }
    CHECK(vkEndCommandBuffer(c));
    submit(d, 1, &c, f);
    wait_reset(d, f);
    kt_vk_collect_wait(ctx, UINT64_C(10000000000));
}
#else

/* configs: the 7 launches of config_dispatch in a reusable command buffer submitted twice, then (4,1,1) once in
 * a one-time one (read through its own pair): `cfg` is 4x1x1 7 times, 8x2x1 4, 2x1x1 2 (a base is an offset),
 * indirect 2. */
static void configs(const vkc_dev_t *d)
{
    VkFence f = fence_new(d);
    indirect_fill(d, f);
    VkPipeline p = pipeline(d, "cfg");
    VkCommandBuffer c = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    record(d, c, 0, p, 0);
    for (int i = 0; i < 7; i++)
        config_dispatch(d, c, i);
    CHECK(vkEndCommandBuffer(c));
    for (int k = 0; k < 2; k++) {
        submit(d, 1, &c, f);
        wait_reset(d, f);
    }
    VkCommandBuffer once = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    record(d, once, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, p, 0);
    config_dispatch(d, once, 0);
    CHECK(vkEndCommandBuffer(once));
    submit(d, 1, &once, f);
    wait_reset(d, f);
    CHECK(vkDeviceWaitIdle(d->dev));
}

/* segv / kill: A + B dispatches behind an event never set. */
static void gated(const vkc_dev_t *d, int na, int nb)
{
    VkSemaphore gate = gate_new(d);
    VkCommandBuffer reused = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    VkCommandBuffer once = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    /* the reusable one first: its first dispatch makes the layer's context, so the one-time one gets its pair */
    record(d, reused, 0, pipeline(d, "gated_b"), nb);
    CHECK(vkEndCommandBuffer(reused));
    record(d, once, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, pipeline(d, "gated_a"), na);
    CHECK(vkEndCommandBuffer(once));
    submit_gated(d, 1, &reused, fence_new(d), gate);
    submit_gated(d, 1, &once, VK_NULL_HANDLE, gate);
}

/* settled: every way a timed dispatch ends, all completed. */
static void settled(const vkc_dev_t *d, int na, int nb)
{
    VkFence f = fence_new(d);
    VkCommandBuffer reused = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    record(d, reused, 0, pipeline(d, "reuse"), 1);
    CHECK(vkEndCommandBuffer(reused));
    for (int i = 0; i < na; i++) {
        submit(d, 1, &reused, f);
        wait_reset(d, f);
    }
    VkCommandBuffer once = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    VkPipeline p_once = pipeline(d, "once");
    for (int i = 0; i < na; i++) {
        record(d, once, VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, p_once, 1);
        CHECK(vkEndCommandBuffer(once));
        submit(d, 1, &once, f);
        wait_reset(d, f);
    }
    /* a one-time primary beside another command buffer: its pair is not the batch's */
    VkCommandBuffer two[2] = {once, cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY)};
    record(d, two[0], VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, pipeline(d, "pair2"), 1);
    CHECK(vkEndCommandBuffer(two[0]));
    record(d, two[1], VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, VK_NULL_HANDLE, 0);
    CHECK(vkEndCommandBuffer(two[1]));
    submit(d, 2, two, f);
    wait_reset(d, f);
    /* a secondary (not SIMULTANEOUS_USE: the layer times no simultaneous-use secondary) executed by a primary
     * submitted twice: one occurrence per execution */
    VkCommandBuffer sec = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_SECONDARY);
    VkCommandBufferInheritanceInfo ii = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO};
    VkCommandBufferBeginInfo sbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .pInheritanceInfo = &ii};
    CHECK(vkBeginCommandBuffer(sec, &sbi));
    vkCmdBindPipeline(sec, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline(d, "sec"));
    vkCmdBindDescriptorSets(sec, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &d->set, 0, NULL);
    vkCmdDispatch(sec, 4, 1, 1);
    CHECK(vkEndCommandBuffer(sec));
    VkCommandBuffer prim = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    record(d, prim, 0, VK_NULL_HANDLE, 0);
    vkCmdExecuteCommands(prim, 1, &sec);
    CHECK(vkEndCommandBuffer(prim));
    for (int r = 0; r < 2; r++) {
        submit(d, 1, &prim, f);
        wait_reset(d, f);
    }
    /* recorded, never submitted, reset */
    VkCommandBuffer unsent = cmd_alloc(d, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    record(d, unsent, 0, pipeline(d, "unsent"), nb);
    CHECK(vkEndCommandBuffer(unsent));
    CHECK(vkResetCommandBuffer(unsent, 0));
    CHECK(vkDeviceWaitIdle(d->dev));
    /* a second device destroyed with its work in flight: invalid usage the validation layer reports (the device
     * not idle, its children alive), which is what is exercised; what it said before counts */
    printf("validation messages: %d\n", __atomic_load_n(&g_messages, __ATOMIC_RELAXED));
    fflush(stdout);
    __atomic_store_n(&g_quiet, 1, __ATOMIC_RELAXED);
    vkc_dev_t d2 = {0};
    if (device_open(&d2) != 0)
        exit(1);
    VkCommandBuffer gone = cmd_alloc(&d2, VK_COMMAND_BUFFER_LEVEL_PRIMARY);
    record(&d2, gone, 0, pipeline(&d2, "destroyed"), nb);
    CHECK(vkEndCommandBuffer(gone));
    submit(&d2, 1, &gone, VK_NULL_HANDLE);
    vkDestroyDevice(d2.dev, NULL);
    /* the first device's functions again (the second's were loaded last) */
#define VKC_LOAD_D(fn) *(void **)&fn = (void *)vkGetDeviceProcAddr(d->dev, #fn);
    VKC_DEVICE_FUNCS(VKC_LOAD_D)
#undef VKC_LOAD_D
    CHECK(vkDeviceWaitIdle(d->dev));
}

#endif

int main(int argc, char **argv)
{
    int validation = argc > 1 && !strcmp(argv[1], "--validation");
    argv += validation;
    argc -= validation;
    if (argc != 4 || (strcmp(argv[1], "segv") && strcmp(argv[1], "kill") && strcmp(argv[1], "settled") &&
                      strcmp(argv[1], "probe") && strcmp(argv[1], "configs"))) {
        fprintf(stderr, "usage: vkcrashprog [--validation] segv|kill|settled|configs|probe A B\n");
        return 2;
    }
    int na = atoi(argv[2]), nb = atoi(argv[3]);
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(*(void **)&vkGetInstanceProcAddr = dlsym(lib, "vkGetInstanceProcAddr")))
        return 77;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)vkGetInstanceProcAddr(NULL, "vkCreateInstance");
    const char *layer = "VK_LAYER_KHRONOS_validation", *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "vkcrashprog",
                             .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app,
                                .enabledLayerCount = (uint32_t)validation, .ppEnabledLayerNames = &layer,
                                .enabledExtensionCount = 1, .ppEnabledExtensionNames = &ext};
    VkInstance inst;
    if (!create || create(&ici, NULL, &inst) != VK_SUCCESS)
        return 77;
#ifdef VKC_API
    g_inst = inst;
#endif
#define VKC_LOAD_I(fn) *(void **)&fn = (void *)vkGetInstanceProcAddr(inst, #fn);
    VKC_INSTANCE_FUNCS(VKC_LOAD_I)
#undef VKC_LOAD_I
    if (validation) {
        VkDebugUtilsMessengerCreateInfoEXT mi = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity =
                VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            .pfnUserCallback = on_message};
        VkDebugUtilsMessengerEXT m;
        CHECK(vkCreateDebugUtilsMessengerEXT(inst, &mi, NULL, &m));
    }
    uint32_t n = 1;
    VkResult r = vkEnumeratePhysicalDevices(inst, &n, &g_pd);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || !n)
        return 77;
    vkc_dev_t d = {0};
    if (device_open(&d) != 0)
        return 77;
    if (!strcmp(argv[1], "probe"))
        return 0;
    if (!strcmp(argv[1], "configs")) { /* exits normally: the snapshot is the program's own */
        configs(&d);
        printf("validation messages: %d\n", g_messages);
        return 0;
    }
    if (!strcmp(argv[1], "settled")) {
        settled(&d, na, nb);
    } else {
        gated(&d, na, nb);
        printf("validation messages: %d\n", g_messages);
        fflush(stdout);
    }
    if (!strcmp(argv[1], "segv")) { /* a write to an unmapped page (an address the compiler cannot see) */
        volatile uintptr_t at = 8;
        *(volatile int *)at = 1;
    }
    raise(SIGKILL);
    return 4;
}
