/* vk_app.h — the application side of Vulkan for the CLI demo, tests and bench: instance, devices, buffers,
 * compute pipelines and submissions, all through ktiming's dlopen'ed loader (nothing links libvulkan). */
#ifndef KTCLI_VK_APP_H
#define KTCLI_VK_APP_H

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <ktiming.h>
#include <ktiming/vk.h>

#include <stdatomic.h>
#include <stddef.h>

/* Functions resolved through vkGetInstanceProcAddr(instance, ...) (loader trampolines work for every device). */
#define KTCLI_VK_FUNCS(X)                                                                                  \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                    \
    X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties)                     \
    X(vkGetPhysicalDeviceFeatures2) X(vkEnumerateDeviceExtensionProperties)                                \
    X(vkGetPhysicalDeviceCalibrateableTimeDomainsEXT) X(vkCreateDevice)                                    \
    X(vkCreateDebugUtilsMessengerEXT) X(vkDestroyDebugUtilsMessengerEXT)                                   \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) X(vkCreateBuffer) X(vkDestroyBuffer)        \
    X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory)             \
    X(vkMapMemory) X(vkUnmapMemory) X(vkCreateShaderModule) X(vkDestroyShaderModule)                       \
    X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout)               \
    X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateDescriptorPool)  \
    X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets)                       \
    X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers)     \
    X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkResetCommandBuffer) X(vkCmdBindPipeline)             \
    X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdPipelineBarrier)              \
    X(vkQueueSubmit) X(vkQueueWaitIdle) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences)              \
    X(vkResetFences) X(vkGetFenceStatus) X(vkCmdWriteTimestamp) X(vkCreateQueryPool)                       \
    X(vkDestroyQueryPool) X(vkGetQueryPoolResults) X(vkCmdResetQueryPool)

/* Resolved functions (optional extension entries may be NULL). */
typedef struct ktcli_vk_fn_t {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr; /* from kt_vk_loader() */
#define KTCLI_VK_FIELD(name) PFN_##name name;
    KTCLI_VK_FUNCS(KTCLI_VK_FIELD)
#undef KTCLI_VK_FIELD
} ktcli_vk_fn_t;

#define KTCLI_VK_MAX_DEVICES 16u

/* An instance and the physical devices it sees. */
typedef struct ktcli_vk_app_t {
    ktcli_vk_fn_t vk;                                   /* functions */
    VkInstance instance;                                /* NULL before init */
    uint32_t api_version;                               /* instance API version requested */
    VkDebugUtilsMessengerEXT messenger;                 /* counts validation messages (debug mode) */
    atomic_int errors;                                  /* error messages seen by the messenger */
    atomic_int warnings;                                /* warning (incl. performance) messages seen */
    int quiet;                                          /* non-zero: do not print counted messages */
    uint32_t device_count;                              /* physical devices */
    VkPhysicalDevice devices[KTCLI_VK_MAX_DEVICES];     /* as enumerated */
} ktcli_vk_app_t;

/* Create an instance. debug != 0 installs a VK_EXT_debug_utils messenger that counts (and prints) warnings and
 * errors, from vkCreateInstance to vkDestroyInstance. KT_EUNAVAILABLE when there is no loader or no device. */
int ktcli_vk_app_init(ktcli_vk_app_t *app, int debug);
void ktcli_vk_app_fini(ktcli_vk_app_t *app);

/* What to enable on a device. */
typedef struct ktcli_vk_device_opts_t {
    int no_calibrated;       /* do not enable VK_KHR/EXT_calibrated_timestamps even when supported */
    int no_host_query_reset; /* do not enable hostQueryReset even when supported */
    int timeline_semaphore;  /* enable timeline semaphores (core 1.2 or VK_KHR_timeline_semaphore); the open fails
                                with KT_EUNAVAILABLE without them (tests gate a queue with a wait-before-signal) */
} ktcli_vk_device_opts_t;

/* A logical device with one compute queue. */
typedef struct ktcli_vk_device_t {
    ktcli_vk_app_t *app;                         /* owner */
    VkPhysicalDevice physical;                   /* physical device */
    VkPhysicalDeviceProperties props;            /* its properties */
    VkPhysicalDeviceMemoryProperties mem;        /* its memory types */
    uint32_t family;                             /* compute queue family used */
    uint32_t valid_bits;                         /* that family's timestampValidBits */
    VkDevice device;                             /* logical device */
    VkQueue queue;                               /* queue 0 of family */
    VkCommandPool pool;                          /* resettable command buffers of family */
    int host_query_reset;                        /* hostQueryReset enabled */
    const char *calibrated_ext;                  /* calibrated-timestamps extension enabled, or NULL */
} ktcli_vk_device_t;

int ktcli_vk_device_open(ktcli_vk_app_t *app, uint32_t index, const ktcli_vk_device_opts_t *opts,
                         ktcli_vk_device_t *dev);
void ktcli_vk_device_close(ktcli_vk_device_t *dev);
/* A ktiming context description for this device (ring size and the rest left at defaults). */
kt_vk_desc_t ktcli_vk_device_desc(const ktcli_vk_device_t *dev);

/* A host-visible, coherent storage buffer, mapped. */
typedef struct ktcli_vk_buffer_t {
    VkBuffer buffer;      /* handle */
    VkDeviceMemory memory;/* backing */
    void *map;            /* host pointer */
    VkDeviceSize size;    /* bytes */
} ktcli_vk_buffer_t;

int ktcli_vk_buffer_create(ktcli_vk_device_t *dev, VkDeviceSize size, ktcli_vk_buffer_t *buf);
void ktcli_vk_buffer_destroy(ktcli_vk_device_t *dev, ktcli_vk_buffer_t *buf);

/* A compute pipeline over storage buffers (bindings 0..n-1, set 0) with push constants. */
typedef struct ktcli_vk_pipeline_t {
    VkShaderModule module;      /* SPIR-V */
    VkDescriptorSetLayout dsl;  /* n storage buffers */
    VkPipelineLayout layout;    /* dsl + push range */
    VkPipeline pipeline;        /* compute */
    VkDescriptorPool dpool;     /* one set */
    VkDescriptorSet set;        /* bound buffers */
    uint32_t push_size;         /* bytes of push constants */
} ktcli_vk_pipeline_t;

int ktcli_vk_pipeline_create(ktcli_vk_device_t *dev, const uint32_t *spirv, size_t spirv_bytes,
                             const ktcli_vk_buffer_t *const *buffers, uint32_t nbuffers, uint32_t push_size,
                             ktcli_vk_pipeline_t *p);
void ktcli_vk_pipeline_destroy(ktcli_vk_device_t *dev, ktcli_vk_pipeline_t *p);
/* Bind p and its set in cmd, push `push` (push_size bytes), dispatch gx x gy x 1 groups. */
void ktcli_vk_dispatch(ktcli_vk_device_t *dev, VkCommandBuffer cmd, const ktcli_vk_pipeline_t *p,
                       const void *push, uint32_t gx, uint32_t gy);
/* A compute->compute memory barrier (successive dispatches over the same buffers). */
void ktcli_vk_barrier(ktcli_vk_device_t *dev, VkCommandBuffer cmd);

/* Command buffers and submissions. */
int ktcli_vk_cmd_alloc(ktcli_vk_device_t *dev, VkCommandBuffer *cmd);
void ktcli_vk_cmd_free(ktcli_vk_device_t *dev, VkCommandBuffer cmd);
int ktcli_vk_cmd_begin(ktcli_vk_device_t *dev, VkCommandBuffer cmd); /* resets, begins ONE_TIME_SUBMIT */
int ktcli_vk_cmd_end(ktcli_vk_device_t *dev, VkCommandBuffer cmd);
int ktcli_vk_fence_create(ktcli_vk_device_t *dev, VkFence *fence);
void ktcli_vk_fence_destroy(ktcli_vk_device_t *dev, VkFence fence);
int ktcli_vk_submit(ktcli_vk_device_t *dev, VkCommandBuffer cmd, VkFence fence);
/* Wait (up to 60 s) and reset the fence. */
int ktcli_vk_wait(ktcli_vk_device_t *dev, VkFence fence);

#endif
