/* vkprog.c — a small, ordinary Vulkan compute program (no ktiming inside) for the `ktiming run` tests. It loads
 * Vulkan the way an LD_PRELOAD hook can't see: dlopen("libvulkan.so.1") and every function through
 * vkGetInstanceProcAddr / vkGetDeviceProcAddr. stdout is deterministic, to compare runs with and without ktiming.
 *
 *   vkprog [--validation] [--reuse] [--resubmit N] [--simultaneous] [--iterations N] [--size N] [--api 1.0|1.1|1.2|1.3] [--props2]
 *          [--in-flight destroy|exit] [--devices N] [--secondary K]
 *     per iteration, one ONE_TIME_SUBMIT command buffer: vadd (entry point "vadd"), barrier, scale (entry point
 *     "main", pipeline named "scale" with VK_EXT_debug_utils), submitted and waited on with a fence.
 *     --reuse: then one command buffer recorded once (no ONE_TIME_SUBMIT) with a scale dispatch, submitted 3
 *     times (--resubmit N: N times; --simultaneous: begun with SIMULTANEOUS_USE; --submit2: with vkQueueSubmit2,
 *     on a device with synchronization2 enabled, which needs --api 1.3). --validation: enables VK_LAYER_KHRONOS_validation; every warning or error it reports is printed
 *     on stderr and makes the exit status 3.
 *     --unnamed: the "scale" pipeline gets no debug name; --debug-marker: it is named "scale_marker" with
 *     VK_EXT_debug_marker instead (exits 77 when the device cannot enable that extension).
 *     --api: the instance's apiVersion (default 1.1); --props2: also enable VK_KHR_get_physical_device_properties2.
 *     --in-flight: instead of the loop, one command buffer with N = iterations vadd dispatches is submitted and
 *     never waited for; then the device is destroyed at once (destroy) or main returns at once (exit).
 *     --secondary K: then one secondary command buffer (SIMULTANEOUS_USE) with a scale dispatch, recorded K
 *     times into one primary submitted once.
 *     --devices N (1-4): N VkDevices on the first physical device, each running the whole program on its own
 *     thread at the same time; each device's lines are printed after all finished, in device order.
 *     --sequential: the N devices one after another instead, each destroyed before the next is created.
 *     --record-threads T (1-8): then T threads of one device each record and submit `iterations` command
 *     buffers with one scale dispatch (own command pool, the queue shared under a mutex) while another thread
 *     keeps creating, naming, renaming and destroying compute pipelines of its own.
 *   Exits 77 when there is no Vulkan device with a compute queue.
 */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vadd_spv.h"
#include "scale_spv.h"

/* ---------------------------------------------------------------------------------------------------
 * Entry points, all fetched at run time
 * ------------------------------------------------------------------------------------------------- */
#define VKP_INSTANCE_FUNCS(X)                                                                                    \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceQueueFamilyProperties)               \
    X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)                             \
    X(vkCreateDebugUtilsMessengerEXT) X(vkDestroyDebugUtilsMessengerEXT)
#define VKP_DEVICE_FUNCS(X)                                                                                      \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements)   \
    X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory)                    \
    X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout)                              \
    X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout)                         \
    X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool)        \
    X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCreateCommandPool) X(vkDestroyCommandPool)         \
    X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer)            \
    X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch)                       \
    X(vkCmdPipelineBarrier) X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences)               \
    X(vkResetFences) X(vkDeviceWaitIdle) X(vkSetDebugUtilsObjectNameEXT) X(vkCmdExecuteCommands)

#define VKP_DECLARE(fn) static PFN_##fn fn;
static PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
static PFN_vkCreateInstance vkCreateInstance;
static PFN_vkEnumerateInstanceLayerProperties vkEnumerateInstanceLayerProperties;
VKP_INSTANCE_FUNCS(VKP_DECLARE)
VKP_DEVICE_FUNCS(VKP_DECLARE)
#undef VKP_DECLARE

static int g_validation_messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    (void)user;
    if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) {
        __atomic_fetch_add(&g_validation_messages, 1, __ATOMIC_RELAXED);
        fprintf(stderr, "vkprog: validation: %s\n", data && data->pMessage ? data->pMessage : "?");
    }
    return VK_FALSE;
}

#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        VkResult r_ = (call);                                                                                    \
        if (r_ != VK_SUCCESS) {                                                                                  \
            fprintf(stderr, "vkprog: %s failed: %d\n", #call, (int)r_);                                          \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

/* A host-visible buffer. */
typedef struct vkp_buf_t {
    VkBuffer buf;       /* buffer */
    VkDeviceMemory mem; /* its memory */
    float *map;         /* mapped */
} vkp_buf_t;

static void buf_create(VkDevice dev, const VkPhysicalDeviceMemoryProperties *mp, size_t bytes, vkp_buf_t *b)
{
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = bytes,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    CHECK(vkCreateBuffer(dev, &bi, NULL, &b->buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, b->buf, &req);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < mp->memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) && (mp->memoryTypes[i].propertyFlags & want) == want)
            type = i;
    if (type == UINT32_MAX) {
        fprintf(stderr, "vkprog: no host-visible coherent memory\n");
        exit(1);
    }
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = type};
    CHECK(vkAllocateMemory(dev, &ai, NULL, &b->mem));
    CHECK(vkBindBufferMemory(dev, b->buf, b->mem, 0));
    CHECK(vkMapMemory(dev, b->mem, 0, VK_WHOLE_SIZE, 0, (void **)&b->map));
}

static double checksum(const float *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)v[i] * (double)((i % 7) + 1);
    return s;
}

/* One device's run: everything from the queue to the device's destruction. */
typedef struct vkp_job_t {
    VkPhysicalDevice pd;   /* the physical device */
    int reuse, iterations, unnamed, secondary, record_threads, simultaneous, submit2, debug_marker;
    const char *in_flight; /* --in-flight, or NULL */
    uint32_t n;            /* elements per buffer */
    char out[1024];        /* the device's stdout lines, printed by main in device order */
    size_t len;
    int rc;                /* 0, 77 (no compute queue), or VKP_RETURN_NOW / VKP_DESTROYED_EARLY (--in-flight) */
} vkp_job_t;

#define VKP_RETURN_NOW 1001
#define VKP_DESTROYED_EARLY 1002

static void job_printf(vkp_job_t *job, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(job->out + job->len, sizeof job->out - job->len, fmt, ap);
    va_end(ap);
    if (k > 0)
        job->len = job->len + (size_t)k < sizeof job->out ? job->len + (size_t)k : sizeof job->out - 1;
}

/* Device-level entry points, fetched once: through the layers they are the same for every device. */
static void load_device_funcs(VkDevice dev)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int loaded;
    pthread_mutex_lock(&lock);
    if (!loaded) {
#define VKP_LOAD_D(fn) *(void **)&fn = (void *)vkGetDeviceProcAddr(dev, #fn);
        VKP_DEVICE_FUNCS(VKP_LOAD_D)
#undef VKP_LOAD_D
        loaded = 1;
    }
    pthread_mutex_unlock(&lock);
}

/* Ends cmd after a barrier making the shaders' writes visible to the host, submits it (holding queue_lock when
 * given: VkQueue is externally synchronized) and waits for it. */
static void end_submit_wait_locked(VkDevice dev, VkQueue queue, pthread_mutex_t *queue_lock, VkCommandBuffer cmd,
                                   VkFence fence, const VkMemoryBarrier *hb)
{
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, hb, 0, NULL, 0,
                         NULL);
    CHECK(vkEndCommandBuffer(cmd));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    if (queue_lock)
        pthread_mutex_lock(queue_lock);
    VkResult r = vkQueueSubmit(queue, 1, &si, fence);
    if (queue_lock)
        pthread_mutex_unlock(queue_lock);
    CHECK(r);
    CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
    CHECK(vkResetFences(dev, 1, &fence));
}

static void end_submit_wait(VkDevice dev, VkQueue queue, VkCommandBuffer cmd, VkFence fence, const VkMemoryBarrier *hb)
{
    end_submit_wait_locked(dev, queue, NULL, cmd, fence, hb);
}

/* --record-threads: what the recording threads and the pipeline churner share. */
typedef struct vkp_rec_t {
    VkDevice dev;
    VkQueue queue;
    pthread_mutex_t *lock;       /* the queue (VkQueue is externally synchronized) and the two counters below */
    pthread_cond_t *cond;        /* `made` moved */
    uint32_t family, groups;
    VkPipelineLayout layout;
    VkDescriptorSet set;
    VkPipeline scale;            /* bound by the recorders */
    VkShaderModule module;       /* what the churner's pipelines are made of */
    int iterations;
    float k;
    int *made;                   /* pipelines the churner created so far */
    int *done;                   /* recorders finished */
} vkp_rec_t;

#define VKP_CHURN_BATCH 48 /* alive at once: with the program's own two, a 64-slot handle map grows */

static void *record_thread(void *arg)
{
    const vkp_rec_t *r = arg;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = r->family};
    VkCommandPool pool;
    CHECK(vkCreateCommandPool(r->dev, &pci, NULL, &pool));
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBuffer cmd;
    CHECK(vkAllocateCommandBuffers(r->dev, &ai, &cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    CHECK(vkCreateFence(r->dev, &fci, NULL, &fence));
    VkMemoryBarrier hb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    for (int it = 0; it < r->iterations; it++) {
        /* in step with the churner: iteration `it` starts once it made its share of a batch, so bindings and
         * dispatches interleave with its creations (and the map's growth) whatever the machine's speed */
        pthread_mutex_lock(r->lock);
        while (*r->made < it * VKP_CHURN_BATCH / r->iterations)
            pthread_cond_wait(r->cond, r->lock);
        pthread_mutex_unlock(r->lock);
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        CHECK(vkBeginCommandBuffer(cmd, &bi));
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, r->layout, 0, 1, &r->set, 0, NULL);
        vkCmdPushConstants(cmd, r->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof r->k, &r->k);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, r->scale);
        vkCmdDispatch(cmd, r->groups, 1, 1);
        end_submit_wait_locked(r->dev, r->queue, r->lock, cmd, fence, &hb);
    }
    vkDestroyFence(r->dev, fence, NULL);
    vkFreeCommandBuffers(r->dev, pool, 1, &cmd);
    vkDestroyCommandPool(r->dev, pool, NULL);
    return NULL;
}

/* Creates pipelines one by one, names and renames each, and destroys them VKP_CHURN_BATCH at a time, until the
 * recorders are done: the layer's pipeline map grows and shrinks, and names change, while they bind and dispatch. */
static void *churn_thread(void *arg)
{
    const vkp_rec_t *r = arg;
    VkPipeline p[VKP_CHURN_BATCH];
    int alive = 0;
    for (;;) {
        pthread_mutex_lock(r->lock);
        int done = *r->done;
        pthread_mutex_unlock(r->lock);
        if (done)
            break;
        if (alive == VKP_CHURN_BATCH) {
            for (int k = 0; k < alive; k++)
                vkDestroyPipeline(r->dev, p[k], NULL);
            alive = 0;
        }
        VkComputePipelineCreateInfo ci = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                      .module = r->module, .pName = "vadd"},
            .layout = r->layout};
        CHECK(vkCreateComputePipelines(r->dev, VK_NULL_HANDLE, 1, &ci, NULL, &p[alive]));
        const char *names[2] = {"churn_a", "churn_b"};
        for (int i = 0; i < 2 && vkSetDebugUtilsObjectNameEXT; i++) {
            VkDebugUtilsObjectNameInfoEXT ni = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT,
                                                .objectType = VK_OBJECT_TYPE_PIPELINE,
                                                .objectHandle = (uint64_t)p[alive], .pObjectName = names[i]};
            CHECK(vkSetDebugUtilsObjectNameEXT(r->dev, &ni));
        }
        alive++;
        pthread_mutex_lock(r->lock);
        (*r->made)++;
        pthread_cond_broadcast(r->cond);
        pthread_mutex_unlock(r->lock);
    }
    for (int k = 0; k < alive; k++)
        vkDestroyPipeline(r->dev, p[k], NULL);
    return NULL;
}

/* --record-threads: T recorders and the churner on one device; returns the dispatches recorded. */
static int record_on_threads(const vkp_rec_t *proto, int threads)
{
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    int made = 0, done = 0;
    vkp_rec_t r = *proto;
    r.lock = &lock;
    r.cond = &cond;
    r.made = &made;
    r.done = &done;
    pthread_t rec[8], churn;
    if (pthread_create(&churn, NULL, churn_thread, &r) != 0)
        exit(1);
    for (int t = 0; t < threads; t++)
        if (pthread_create(&rec[t], NULL, record_thread, &r) != 0)
            exit(1);
    for (int t = 0; t < threads; t++)
        pthread_join(rec[t], NULL);
    pthread_mutex_lock(&lock);
    done = 1;
    pthread_mutex_unlock(&lock);
    pthread_join(churn, NULL);
    return threads * r.iterations;
}

/* One device's objects, made by the steps of run_device in order. */
typedef struct vkp_dev_t {
    uint32_t family;             /* the first family with a compute queue */
    VkDevice dev;
    VkQueue queue;
    PFN_vkQueueSubmit2 submit2;  /* --submit2 only */
    VkPhysicalDeviceMemoryProperties mp;
    vkp_buf_t a, b, c;           /* c = a + b, then scaled */
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkShaderModule mods[2];      /* vadd, scale */
    VkPipeline pipes[2];         /* vadd, scale */
    VkDescriptorPool dpool;
    VkDescriptorSet set;
    VkCommandPool cpool;
    VkCommandBuffer cmd;         /* the program's one primary */
    VkFence fence;
    VkMemoryBarrier mb, hb;      /* shader -> shader, shader -> host */
    float k;                     /* the scale factor (push constant) */
    uint32_t groups;             /* workgroups of 64 per dispatch */
    VkSubmitInfo si;             /* cmd alone */
} vkp_dev_t;

/* The device with one queue of the first compute family; 0, or 77 (job->rc set) when it cannot be made. */
static int device_open(vkp_job_t *job, vkp_dev_t *d)
{
    VkPhysicalDevice pd = job->pd;
    uint32_t nfam = 0, family = UINT32_MAX;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nfam, NULL);
    VkQueueFamilyProperties *fams = calloc(nfam ? nfam : 1, sizeof *fams);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nfam, fams);
    for (uint32_t i = 0; i < nfam && family == UINT32_MAX; i++)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
            family = i;
    free(fams);
    if (family == UINT32_MAX) {
        fprintf(stderr, "vkprog: no compute queue\n");
        return job->rc = 77;
    }
    d->family = family;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = family,
                                   .queueCount = 1, .pQueuePriorities = &prio};
    VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                            .synchronization2 = VK_TRUE};
    const char *marker_ext = VK_EXT_DEBUG_MARKER_EXTENSION_NAME;
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci, .pNext = job->submit2 ? &f13 : NULL,
                              .enabledExtensionCount = job->debug_marker ? 1 : 0, .ppEnabledExtensionNames = &marker_ext};
    if (job->debug_marker && vkCreateDevice(pd, &dci, NULL, &d->dev) != VK_SUCCESS) {
        fprintf(stderr, "vkprog: %s not available\n", marker_ext);
        return job->rc = 77;
    }
    if (!job->debug_marker)
        CHECK(vkCreateDevice(pd, &dci, NULL, &d->dev));
    load_device_funcs(d->dev);
    d->submit2 = job->submit2 ? (PFN_vkQueueSubmit2)vkGetDeviceProcAddr(d->dev, "vkQueueSubmit2") : NULL;
    if (job->submit2 && !d->submit2) {
        fprintf(stderr, "vkprog: no vkQueueSubmit2\n");
        return job->rc = 77;
    }
    vkGetDeviceQueue(d->dev, family, 0, &d->queue);
    vkGetPhysicalDeviceMemoryProperties(pd, &d->mp);
    return 0;
}

/* The three buffers, filled. */
static void buffers_create(const vkp_job_t *job, vkp_dev_t *d)
{
    const uint32_t n = job->n;
    size_t bytes = (size_t)n * sizeof(float);
    buf_create(d->dev, &d->mp, bytes, &d->a);
    buf_create(d->dev, &d->mp, bytes, &d->b);
    buf_create(d->dev, &d->mp, bytes, &d->c);
    for (uint32_t i = 0; i < n; i++) {
        d->a.map[i] = (float)(i % 1000) * 0.5f;
        d->b.map[i] = (float)(i % 37);
        d->c.map[i] = 0.0f;
    }
}

/* The scale pipeline's name: VK_EXT_debug_marker (--debug-marker), VK_EXT_debug_utils, or none (--unnamed). */
static void pipeline_name(const vkp_job_t *job, vkp_dev_t *d)
{
    if (job->debug_marker) {
        PFN_vkDebugMarkerSetObjectNameEXT set_marker =
            (PFN_vkDebugMarkerSetObjectNameEXT)vkGetDeviceProcAddr(d->dev, "vkDebugMarkerSetObjectNameEXT");
        VkDebugMarkerObjectNameInfoEXT mi = {.sType = VK_STRUCTURE_TYPE_DEBUG_MARKER_OBJECT_NAME_INFO_EXT,
                                             .objectType = VK_DEBUG_REPORT_OBJECT_TYPE_PIPELINE_EXT,
                                             .object = (uint64_t)d->pipes[1], .pObjectName = "scale_marker"};
        if (!set_marker) {
            fprintf(stderr, "vkprog: no vkDebugMarkerSetObjectNameEXT\n");
            exit(1);
        }
        CHECK(set_marker(d->dev, &mi));
    } else if (vkSetDebugUtilsObjectNameEXT && !job->unnamed) {
        VkDebugUtilsObjectNameInfoEXT ni = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_OBJECT_NAME_INFO_EXT,
                                            .objectType = VK_OBJECT_TYPE_PIPELINE,
                                            .objectHandle = (uint64_t)d->pipes[1], .pObjectName = "scale"};
        CHECK(vkSetDebugUtilsObjectNameEXT(d->dev, &ni));
    }
}

/* Layouts, the two shader modules and their compute pipelines (vadd, scale), the scale one named. */
static void pipelines_create(const vkp_job_t *job, vkp_dev_t *d)
{
    VkDevice dev = d->dev;
    VkDescriptorSetLayoutBinding binds[3];
    for (uint32_t i = 0; i < 3; i++)
        binds[i] = (VkDescriptorSetLayoutBinding){.binding = i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                  .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dli = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = 3, .pBindings = binds};
    CHECK(vkCreateDescriptorSetLayout(dev, &dli, NULL, &d->dsl));
    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = sizeof(float)};
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                      .pSetLayouts = &d->dsl, .pushConstantRangeCount = 1, .pPushConstantRanges = &pcr};
    CHECK(vkCreatePipelineLayout(dev, &pli, NULL, &d->layout));

    const uint32_t *codes[2] = {vadd_spv, scale_spv};
    const size_t sizes[2] = {sizeof vadd_spv, sizeof scale_spv};
    for (int i = 0; i < 2; i++) {
        VkShaderModuleCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = sizes[i],
                                       .pCode = codes[i]};
        CHECK(vkCreateShaderModule(dev, &si, NULL, &d->mods[i]));
    }
    VkComputePipelineCreateInfo cpi[2];
    const char *entries[2] = {"vadd", "main"};
    for (int i = 0; i < 2; i++)
        cpi[i] = (VkComputePipelineCreateInfo){
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                      .module = d->mods[i], .pName = entries[i]},
            .layout = d->layout};
    CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 2, cpi, NULL, d->pipes));
    pipeline_name(job, d);
}

/* The descriptor set over the three buffers, the command pool, the primary, the fence and the barriers. */
static void commands_create(const vkp_job_t *job, vkp_dev_t *d)
{
    VkDevice dev = d->dev;
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 3};
    VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1,
                                      .poolSizeCount = 1, .pPoolSizes = &ps};
    CHECK(vkCreateDescriptorPool(dev, &dpi, NULL, &d->dpool));
    VkDescriptorSetAllocateInfo dai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                       .descriptorPool = d->dpool, .descriptorSetCount = 1, .pSetLayouts = &d->dsl};
    CHECK(vkAllocateDescriptorSets(dev, &dai, &d->set));
    VkDescriptorBufferInfo dbi[3] = {
        {d->a.buf, 0, VK_WHOLE_SIZE}, {d->b.buf, 0, VK_WHOLE_SIZE}, {d->c.buf, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w[3];
    for (uint32_t i = 0; i < 3; i++)
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = d->set,
                                      .dstBinding = i, .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &dbi[i]};
    vkUpdateDescriptorSets(dev, 3, w, 0, NULL);

    VkCommandPoolCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                    .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                    .queueFamilyIndex = d->family};
    CHECK(vkCreateCommandPool(dev, &cpci, NULL, &d->cpool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = d->cpool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    CHECK(vkAllocateCommandBuffers(dev, &cai, &d->cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    CHECK(vkCreateFence(dev, &fci, NULL, &d->fence));
    d->mb = (VkMemoryBarrier){.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    d->hb = (VkMemoryBarrier){.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    d->k = 1.0009765625f;
    d->groups = (job->n + 63) / 64;
    d->si = (VkSubmitInfo){.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                           .pCommandBuffers = &d->cmd};
}

/* --in-flight: N dispatches submitted and never waited for; then main returns at once (exit) or the device is
 * destroyed at once (destroy). */
static void run_in_flight(vkp_job_t *job, vkp_dev_t *d)
{
    VkCommandBuffer cmd = d->cmd;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    CHECK(vkBeginCommandBuffer(cmd, &bi));
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &d->set, 0, NULL);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->pipes[0]);
    for (int it = 0; it < job->iterations; it++) {
        vkCmdDispatch(cmd, d->groups, 1, 1);
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                             &d->mb, 0, NULL, 0, NULL);
    }
    CHECK(vkEndCommandBuffer(cmd));
    CHECK(vkQueueSubmit(d->queue, 1, &d->si, VK_NULL_HANDLE));
    printf("submitted %d dispatches, not waited for (%s)\n", job->iterations, job->in_flight);
    fflush(stdout);
    if (!strcmp(job->in_flight, "exit")) {
        job->rc = VKP_RETURN_NOW;
        return;
    }
    vkDestroyDevice(d->dev, NULL);
    job->rc = VKP_DESTROYED_EARLY;
}

/* The loop: per iteration one ONE_TIME_SUBMIT command buffer (vadd, barrier, scale), submitted and waited on. */
static void run_iterations(vkp_job_t *job, vkp_dev_t *d)
{
    VkCommandBuffer cmd = d->cmd;
    for (int it = 0; it < job->iterations; it++) {
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        CHECK(vkBeginCommandBuffer(cmd, &bi));
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &d->set, 0, NULL);
        vkCmdPushConstants(cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof d->k, &d->k);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->pipes[0]);
        vkCmdDispatch(cmd, d->groups, 1, 1);
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                             &d->mb, 0, NULL, 0, NULL);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->pipes[1]);
        vkCmdDispatch(cmd, d->groups, 1, 1);
        end_submit_wait(d->dev, d->queue, cmd, d->fence, &d->hb);
    }
    job_printf(job, "checksum after %d iterations = %.6f\n", job->iterations, checksum(d->c.map, job->n));
}

/* --reuse N: one command buffer recorded once (a scale dispatch), submitted N times (vkQueueSubmit2 with
 * --submit2), each waited on. */
static void run_reuse(vkp_job_t *job, vkp_dev_t *d)
{
    VkCommandBuffer cmd = d->cmd;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = job->simultaneous ? VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT : 0};
    CHECK(vkBeginCommandBuffer(cmd, &bi));
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &d->set, 0, NULL);
    vkCmdPushConstants(cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof d->k, &d->k);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->pipes[1]);
    vkCmdDispatch(cmd, d->groups, 1, 1);
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &d->hb, 0,
                         NULL, 0, NULL);
    CHECK(vkEndCommandBuffer(cmd));
    VkCommandBufferSubmitInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_SUBMIT_INFO, .commandBuffer = cmd};
    VkSubmitInfo2 si2 = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO_2, .commandBufferInfoCount = 1,
                         .pCommandBufferInfos = &cbi};
    for (int r = 0; r < job->reuse; r++) {
        if (d->submit2)
            CHECK(d->submit2(d->queue, 1, &si2, d->fence));
        else
            CHECK(vkQueueSubmit(d->queue, 1, &d->si, d->fence));
        CHECK(vkWaitForFences(d->dev, 1, &d->fence, VK_TRUE, UINT64_MAX));
        CHECK(vkResetFences(d->dev, 1, &d->fence));
    }
    job_printf(job, "checksum after %d resubmissions = %.6f\n", job->reuse, checksum(d->c.map, job->n));
}

/* --secondary K: one secondary (SIMULTANEOUS_USE) with a scale dispatch, executed K times by one primary. */
static void run_secondary(vkp_job_t *job, vkp_dev_t *d)
{
    VkDevice dev = d->dev;
    VkCommandBufferAllocateInfo sai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = d->cpool, .level = VK_COMMAND_BUFFER_LEVEL_SECONDARY,
                                       .commandBufferCount = 1};
    VkCommandBuffer sec;
    CHECK(vkAllocateCommandBuffers(dev, &sai, &sec));
    VkCommandBufferInheritanceInfo inh = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO};
    VkCommandBufferBeginInfo sbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT, .pInheritanceInfo = &inh};
    CHECK(vkBeginCommandBuffer(sec, &sbi));
    vkCmdBindDescriptorSets(sec, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &d->set, 0, NULL);
    vkCmdPushConstants(sec, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof d->k, &d->k);
    vkCmdBindPipeline(sec, VK_PIPELINE_BIND_POINT_COMPUTE, d->pipes[1]);
    vkCmdDispatch(sec, d->groups, 1, 1);
    CHECK(vkEndCommandBuffer(sec));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    CHECK(vkBeginCommandBuffer(d->cmd, &bi));
    for (int r = 0; r < job->secondary; r++) {
        vkCmdExecuteCommands(d->cmd, 1, &sec);
        vkCmdPipelineBarrier(d->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                             &d->mb, 0, NULL, 0, NULL);
    }
    end_submit_wait(dev, d->queue, d->cmd, d->fence, &d->hb);
    job_printf(job, "checksum after %d secondary executions = %.6f\n", job->secondary, checksum(d->c.map, job->n));
    vkFreeCommandBuffers(dev, d->cpool, 1, &sec);
}

/* Everything made, destroyed in reverse, the device last. */
static void device_close(vkp_dev_t *d)
{
    VkDevice dev = d->dev;
    vkDestroyFence(dev, d->fence, NULL);
    vkFreeCommandBuffers(dev, d->cpool, 1, &d->cmd);
    vkDestroyCommandPool(dev, d->cpool, NULL);
    vkDestroyDescriptorPool(dev, d->dpool, NULL);
    for (int i = 0; i < 2; i++) {
        vkDestroyPipeline(dev, d->pipes[i], NULL);
        vkDestroyShaderModule(dev, d->mods[i], NULL);
    }
    vkDestroyPipelineLayout(dev, d->layout, NULL);
    vkDestroyDescriptorSetLayout(dev, d->dsl, NULL);
    vkp_buf_t *bufs[3] = {&d->a, &d->b, &d->c};
    for (int i = 0; i < 3; i++) {
        vkUnmapMemory(dev, bufs[i]->mem);
        vkDestroyBuffer(dev, bufs[i]->buf, NULL);
        vkFreeMemory(dev, bufs[i]->mem, NULL);
    }
    vkDestroyDevice(dev, NULL);
}

static void *run_device(void *arg)
{
    vkp_job_t *job = arg;
    vkp_dev_t d = {0};
    if (device_open(job, &d) != 0)
        return NULL;
    buffers_create(job, &d);
    pipelines_create(job, &d);
    commands_create(job, &d);
    if (job->in_flight) {
        run_in_flight(job, &d);
        return NULL;
    }
    run_iterations(job, &d);
    if (job->record_threads > 0) {
        vkp_rec_t rec = {.dev = d.dev, .queue = d.queue, .family = d.family, .groups = d.groups,
                         .layout = d.layout, .set = d.set, .scale = d.pipes[1], .module = d.mods[0],
                         .iterations = job->iterations, .k = d.k};
        int nd = record_on_threads(&rec, job->record_threads);
        job_printf(job, "recorded %d scale dispatches on %d threads\n", nd, job->record_threads);
    }
    if (job->reuse)
        run_reuse(job, &d);
    if (job->secondary > 0)
        run_secondary(job, &d);
    CHECK(vkDeviceWaitIdle(d.dev));
    device_close(&d);
    job->rc = 0;
    return NULL;
}

/* The command line: what main itself uses, and the job every device runs. */
typedef struct vkp_opts_t {
    int validation, props2, devices, sequential;
    uint32_t api;   /* the instance's apiVersion */
    vkp_job_t job;  /* copied for each device (pd set by main) */
} vkp_opts_t;

/* 0, or 2 (usage printed) for a command line vkprog does not take. */
static int parse_args(int argc, char **argv, vkp_opts_t *o)
{
    vkp_job_t *j = &o->job;
    *o = (vkp_opts_t){.devices = 1, .api = VK_API_VERSION_1_1, .job = {.iterations = 4, .n = 1u << 16}};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--validation"))
            o->validation = 1;
        else if (!strcmp(argv[i], "--reuse"))
            j->reuse = j->reuse ? j->reuse : 3;
        else if (!strcmp(argv[i], "--resubmit") && i + 1 < argc && (j->reuse = atoi(argv[++i])) >= 1)
            ;
        else if (!strcmp(argv[i], "--simultaneous"))
            j->simultaneous = 1;
        else if (!strcmp(argv[i], "--submit2"))
            j->submit2 = 1;
        else if (!strcmp(argv[i], "--debug-marker"))
            j->debug_marker = 1;
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
            j->iterations = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            j->n = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--api") && i + 1 < argc) {
            unsigned minor = 0;
            if (sscanf(argv[++i], "1.%u", &minor) != 1 || minor > 3)
                return 2;
            o->api = VK_MAKE_API_VERSION(0, 1, minor, 0);
        } else if (!strcmp(argv[i], "--props2"))
            o->props2 = 1;
        else if (!strcmp(argv[i], "--sequential"))
            o->sequential = 1;
        else if (!strcmp(argv[i], "--unnamed"))
            j->unnamed = 1;
        else if (!strcmp(argv[i], "--in-flight") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "destroy") || !strcmp(argv[i + 1], "exit")))
            j->in_flight = argv[++i];
        else if (!strcmp(argv[i], "--devices") && i + 1 < argc && (o->devices = atoi(argv[++i])) >= 1 &&
                 o->devices <= 4)
            ;
        else if (!strcmp(argv[i], "--secondary") && i + 1 < argc && (j->secondary = atoi(argv[++i])) >= 1)
            ;
        else if (!strcmp(argv[i], "--record-threads") && i + 1 < argc &&
                 (j->record_threads = atoi(argv[++i])) >= 1 && j->record_threads <= 8)
            ;
        else {
            fprintf(stderr, "usage: vkprog [--validation] [--reuse] [--resubmit N] [--simultaneous] [--submit2] "
                            "[--iterations N] "
                            "[--size N] [--api 1.N] "
                            "[--props2] [--unnamed] [--debug-marker] [--in-flight destroy|exit] [--devices 1-4] "
                            "[--sequential] [--secondary K] [--record-threads 1-8]\n");
            return 2;
        }
    }
    if (j->in_flight && o->devices > 1) {
        fprintf(stderr, "vkprog: --in-flight runs on one device\n");
        return 2;
    }
    return 0;
}

/* The loader (dlopen), the instance (the validation layer with --validation, and its messenger) and the
 * instance-level entry points; 0, or 77 when any of them is missing. */
static int instance_create(const vkp_opts_t *o, VkInstance *inst, VkDebugUtilsMessengerEXT *messenger)
{
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib || !(*(void **)&vkGetInstanceProcAddr = dlsym(lib, "vkGetInstanceProcAddr"))) {
        fprintf(stderr, "vkprog: no Vulkan loader\n");
        return 77;
    }
    *(void **)&vkCreateInstance = (void *)vkGetInstanceProcAddr(NULL, "vkCreateInstance");
    *(void **)&vkEnumerateInstanceLayerProperties =
        (void *)vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceLayerProperties");

    const char *layers[1] = {"VK_LAYER_KHRONOS_validation"};
    uint32_t nlayers = 0;
    if (o->validation) {
        uint32_t count = 0;
        vkEnumerateInstanceLayerProperties(&count, NULL);
        VkLayerProperties *props = calloc(count ? count : 1, sizeof *props);
        vkEnumerateInstanceLayerProperties(&count, props);
        for (uint32_t i = 0; i < count; i++)
            if (!strcmp(props[i].layerName, layers[0]))
                nlayers = 1;
        free(props);
        if (!nlayers) {
            fprintf(stderr, "vkprog: VK_LAYER_KHRONOS_validation is not installed\n");
            return 77;
        }
    }
    const char *exts[3] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME, NULL, NULL};
    uint32_t nexts = 1;
    if (o->props2)
        exts[nexts++] = "VK_KHR_get_physical_device_properties2";
    if (o->job.debug_marker) /* VK_EXT_debug_marker's dependency */
        exts[nexts++] = VK_EXT_DEBUG_REPORT_EXTENSION_NAME;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "vkprog",
                             .apiVersion = o->api};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app,
                                .enabledLayerCount = nlayers, .ppEnabledLayerNames = layers,
                                .enabledExtensionCount = nexts, .ppEnabledExtensionNames = exts};
    if (vkCreateInstance(&ici, NULL, inst) != VK_SUCCESS) {
        fprintf(stderr, "vkprog: no Vulkan instance\n");
        return 77;
    }
#define VKP_LOAD_I(fn) *(void **)&fn = (void *)vkGetInstanceProcAddr(*inst, #fn);
    VKP_INSTANCE_FUNCS(VKP_LOAD_I)
#undef VKP_LOAD_I
    *messenger = VK_NULL_HANDLE;
    if (o->validation) {
        VkDebugUtilsMessengerCreateInfoEXT mi = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            .pfnUserCallback = on_message};
        CHECK(vkCreateDebugUtilsMessengerEXT(*inst, &mi, NULL, messenger));
    }
    return 0;
}

int main(int argc, char **argv)
{
    vkp_opts_t o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    const int devices = o.devices;
    VkInstance inst;
    VkDebugUtilsMessengerEXT messenger;
    if ((rc = instance_create(&o, &inst, &messenger)) != 0)
        return rc;
    uint32_t ndev = 0;
    vkEnumeratePhysicalDevices(inst, &ndev, NULL);
    if (ndev == 0) {
        fprintf(stderr, "vkprog: no Vulkan device\n");
        return 77;
    }
    VkPhysicalDevice *pds = calloc(ndev, sizeof *pds);
    vkEnumeratePhysicalDevices(inst, &ndev, pds);
    o.job.pd = pds[0];
    free(pds);
    vkp_job_t jobs[4];
    pthread_t threads[4];
    for (int d = 0; d < devices; d++) {
        jobs[d] = o.job;
        if (devices == 1 || o.sequential)
            run_device(&jobs[d]);
        else if (pthread_create(&threads[d], NULL, run_device, &jobs[d]) != 0) {
            fprintf(stderr, "vkprog: pthread_create failed\n");
            return 1;
        }
    }
    for (int d = 0; devices > 1 && !o.sequential && d < devices; d++)
        pthread_join(threads[d], NULL);
    for (int d = 0; d < devices; d++) {
        if (jobs[d].rc == 77 || jobs[d].rc == VKP_RETURN_NOW)
            return jobs[d].rc == 77 ? 77 : 0;
        if (devices > 1)
            printf("device %d:\n", d + 1);
        fputs(jobs[d].out, stdout);
    }
    if (jobs[0].rc == VKP_DESTROYED_EARLY) {
        vkDestroyInstance(inst, NULL);
        return 0;
    }
    if (messenger)
        vkDestroyDebugUtilsMessengerEXT(inst, messenger, NULL);
    vkDestroyInstance(inst, NULL);
    printf("done: %d iterations%s\n", o.job.iterations, o.job.reuse ? ", reuse" : "");
    if (g_validation_messages) {
        fprintf(stderr, "vkprog: %d validation messages\n", g_validation_messages);
        return 3;
    }
    return 0;
}
