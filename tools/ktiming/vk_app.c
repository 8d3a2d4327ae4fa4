/* vk_app.c — the application side of Vulkan shared by the CLI demo, the Vulkan tests and the Vulkan bench. */
#include "vk_app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#include <link.h>
#endif

/* ---------------------------------------------------------------------------------------------------
 * Instance
 * ------------------------------------------------------------------------------------------------- */

static VKAPI_ATTR VkBool32 VKAPI_CALL messenger_cb(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                  VkDebugUtilsMessageTypeFlagsEXT type,
                                                  const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    ktcli_vk_app_t *app = user;
    const char *what = NULL;
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        atomic_fetch_add(&app->errors, 1);
        what = "error";
    } else if ((severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) &&
               (type & (VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT))) {
        atomic_fetch_add(&app->warnings, 1);
        what = "warning";
    }
    if (what && !app->quiet)
        fprintf(stderr, "vulkan %s: %s\n", what, data && data->pMessage ? data->pMessage : "(no message)");
    return VK_FALSE;
}

int ktcli_vk_app_init(ktcli_vk_app_t *app, int debug)
{
    int quiet = app->quiet;
    memset(app, 0, sizeof(*app));
    app->quiet = quiet;
    PFN_vkGetInstanceProcAddr gipa = kt_vk_loader();
    if (!gipa)
        return KT_EUNAVAILABLE;
    app->vk.vkGetInstanceProcAddr = gipa;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance");
    PFN_vkEnumerateInstanceVersion version = (PFN_vkEnumerateInstanceVersion)gipa(NULL, "vkEnumerateInstanceVersion");
    PFN_vkEnumerateInstanceExtensionProperties exts =
        (PFN_vkEnumerateInstanceExtensionProperties)gipa(NULL, "vkEnumerateInstanceExtensionProperties");
    if (!create || !exts)
        return KT_EUNAVAILABLE;
    uint32_t api = VK_API_VERSION_1_0;
    if (version && version(&api) != VK_SUCCESS)
        api = VK_API_VERSION_1_0;
    if (api > VK_API_VERSION_1_3)
        api = VK_API_VERSION_1_3;
    app->api_version = api;

    int have_debug_utils = 0;
    uint32_t n = 0;
    if (exts(NULL, &n, NULL) == VK_SUCCESS && n) {
        VkExtensionProperties *ep = calloc(n, sizeof(*ep));
        if (ep && exts(NULL, &n, ep) == VK_SUCCESS)
            for (uint32_t i = 0; i < n; i++)
                have_debug_utils |= !strcmp(ep[i].extensionName, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
        free(ep);
    }
    debug = debug && have_debug_utils;

    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = messenger_cb,
        .pUserData = app,
    };
    const char *ext_names[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkApplicationInfo ai = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "ktiming",
        .applicationVersion = 1,
        .pEngineName = "ktiming",
        .apiVersion = api,
    };
    VkInstanceCreateInfo ici = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = debug ? &mci : NULL,
        .pApplicationInfo = &ai,
        .enabledExtensionCount = debug ? 1u : 0u,
        .ppEnabledExtensionNames = ext_names,
    };
    if (create(&ici, NULL, &app->instance) != VK_SUCCESS) {
        app->instance = VK_NULL_HANDLE;
        return KT_EUNAVAILABLE;
    }
#define KTCLI_VK_LOAD(name) app->vk.name = (PFN_##name)gipa(app->instance, #name);
    KTCLI_VK_FUNCS(KTCLI_VK_LOAD)
#undef KTCLI_VK_LOAD
    if (debug && app->vk.vkCreateDebugUtilsMessengerEXT)
        app->vk.vkCreateDebugUtilsMessengerEXT(app->instance, &mci, NULL, &app->messenger);
    if (api < VK_API_VERSION_1_1)
        app->vk.vkGetPhysicalDeviceFeatures2 = NULL;

    app->device_count = KTCLI_VK_MAX_DEVICES;
    VkResult r = app->vk.vkEnumeratePhysicalDevices(app->instance, &app->device_count, app->devices);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || app->device_count == 0) {
        ktcli_vk_app_fini(app);
        return KT_EUNAVAILABLE;
    }
    return 0;
}

#if defined(__SANITIZE_ADDRESS__)
/* ASan builds only: keep the drivers and layers mapped until exit (RTLD_NODELETE). The loader unloads them at
 * vkDestroyInstance, after which LeakSanitizer cannot name their frames and the driver-only suppressions in
 * tests/lsan.supp cannot match a driver's own leak. */
static int pin_driver_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *n = info->dlpi_name;
    if (n && (strstr(n, "libvulkan_") || strstr(n, "libVkLayer") || strstr(n, "libLLVM")))
        dlopen(n, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}
#endif

void ktcli_vk_app_fini(ktcli_vk_app_t *app)
{
    if (!app->instance)
        return;
#if defined(__SANITIZE_ADDRESS__)
    dl_iterate_phdr(pin_driver_cb, NULL);
#endif
    if (app->messenger)
        app->vk.vkDestroyDebugUtilsMessengerEXT(app->instance, app->messenger, NULL);
    app->vk.vkDestroyInstance(app->instance, NULL);
    app->instance = VK_NULL_HANDLE;
    app->messenger = VK_NULL_HANDLE;
}

/* ---------------------------------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------------------------------- */

static int has_ext(const VkExtensionProperties *ep, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(ep[i].extensionName, name))
            return 1;
    return 0;
}

int ktcli_vk_device_open(ktcli_vk_app_t *app, uint32_t index, const ktcli_vk_device_opts_t *opts,
                         ktcli_vk_device_t *dev)
{
    const ktcli_vk_fn_t *vk = &app->vk;
    ktcli_vk_device_opts_t o = opts ? *opts : (ktcli_vk_device_opts_t){0};
    memset(dev, 0, sizeof(*dev));
    if (index >= app->device_count)
        return KT_EINVAL;
    dev->app = app;
    dev->physical = app->devices[index];
    vk->vkGetPhysicalDeviceProperties(dev->physical, &dev->props);
    vk->vkGetPhysicalDeviceMemoryProperties(dev->physical, &dev->mem);

    uint32_t nf = 0;
    vk->vkGetPhysicalDeviceQueueFamilyProperties(dev->physical, &nf, NULL);
    VkQueueFamilyProperties *fam = calloc(nf ? nf : 1, sizeof(*fam));
    if (!fam)
        return KT_ENOMEM;
    vk->vkGetPhysicalDeviceQueueFamilyProperties(dev->physical, &nf, fam);
    int chosen = -1;
    for (uint32_t i = 0; i < nf; i++) {
        if (!(fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
            continue;
        if (chosen < 0 || (fam[i].timestampValidBits && !fam[chosen].timestampValidBits))
            chosen = (int)i;
    }
    if (chosen >= 0)
        dev->valid_bits = fam[chosen].timestampValidBits;
    free(fam);
    if (chosen < 0)
        return KT_EUNAVAILABLE;
    dev->family = (uint32_t)chosen;

    uint32_t ne = 0;
    vk->vkEnumerateDeviceExtensionProperties(dev->physical, NULL, &ne, NULL);
    VkExtensionProperties *ep = calloc(ne ? ne : 1, sizeof(*ep));
    if (!ep)
        return KT_ENOMEM;
    vk->vkEnumerateDeviceExtensionProperties(dev->physical, NULL, &ne, ep);
    const char *exts[2];
    uint32_t next = 0;
    int core12 = app->api_version >= VK_API_VERSION_1_2 && dev->props.apiVersion >= VK_API_VERSION_1_2;
    if (o.timeline_semaphore && !core12) {
        if (!has_ext(ep, ne, VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME)) {
            free(ep);
            return KT_EUNAVAILABLE;
        }
        exts[next++] = VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME;
    }
    if (!o.no_calibrated) {
        if (has_ext(ep, ne, "VK_KHR_calibrated_timestamps"))
            dev->calibrated_ext = "VK_KHR_calibrated_timestamps";
        else if (has_ext(ep, ne, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME))
            dev->calibrated_ext = VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME;
        if (dev->calibrated_ext)
            exts[next++] = dev->calibrated_ext;
    }
    free(ep);

    VkPhysicalDeviceHostQueryResetFeatures hqr = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_HOST_QUERY_RESET_FEATURES};
    int can_hqr = 0;
    if (!o.no_host_query_reset && vk->vkGetPhysicalDeviceFeatures2 && app->api_version >= VK_API_VERSION_1_2 &&
        dev->props.apiVersion >= VK_API_VERSION_1_2) {
        VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &hqr};
        vk->vkGetPhysicalDeviceFeatures2(dev->physical, &f2);
        can_hqr = hqr.hostQueryReset == VK_TRUE;
    }
    hqr.pNext = NULL;
    hqr.hostQueryReset = VK_TRUE;
    VkPhysicalDeviceTimelineSemaphoreFeatures tsf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES,
        .pNext = can_hqr ? &hqr : NULL,
        .timelineSemaphore = VK_TRUE,
    };

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = dev->family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = o.timeline_semaphore ? (void *)&tsf : can_hqr ? (void *)&hqr : NULL,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = next,
        .ppEnabledExtensionNames = exts,
    };
    if (vk->vkCreateDevice(dev->physical, &dci, NULL, &dev->device) != VK_SUCCESS) {
        dev->device = VK_NULL_HANDLE;
        return KT_EBACKEND;
    }
    dev->host_query_reset = can_hqr;
    vk->vkGetDeviceQueue(dev->device, dev->family, 0, &dev->queue);
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = dev->family,
    };
    if (vk->vkCreateCommandPool(dev->device, &pci, NULL, &dev->pool) != VK_SUCCESS) {
        ktcli_vk_device_close(dev);
        return KT_EBACKEND;
    }
    return 0;
}

void ktcli_vk_device_close(ktcli_vk_device_t *dev)
{
    if (!dev->device)
        return;
    const ktcli_vk_fn_t *vk = &dev->app->vk;
    vk->vkDeviceWaitIdle(dev->device);
    if (dev->pool)
        vk->vkDestroyCommandPool(dev->device, dev->pool, NULL);
    vk->vkDestroyDevice(dev->device, NULL);
    dev->device = VK_NULL_HANDLE;
    dev->pool = VK_NULL_HANDLE;
}

kt_vk_desc_t ktcli_vk_device_desc(const ktcli_vk_device_t *dev)
{
    kt_vk_desc_t d = {0};
    d.instance = dev->app->instance;
    d.physical_device = dev->physical;
    d.device = dev->device;
    d.queue_family = dev->family;
    d.queue = dev->queue;
    d.get_instance_proc_addr = dev->app->vk.vkGetInstanceProcAddr;
    d.instance_api_version = dev->app->api_version; /* the device identity through vkGetPhysicalDeviceProperties2 */
    d.host_query_reset = dev->host_query_reset;
    d.calibration = !dev->calibrated_ext                                          ? KT_VK_CALIBRATION_NONE
                    : !strcmp(dev->calibrated_ext, "VK_KHR_calibrated_timestamps") ? KT_VK_CALIBRATION_KHR
                                                                                   : KT_VK_CALIBRATION_EXT;
    return d;
}

/* ---------------------------------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------------------------------- */

int ktcli_vk_buffer_create(ktcli_vk_device_t *dev, VkDeviceSize size, ktcli_vk_buffer_t *buf)
{
    const ktcli_vk_fn_t *vk = &dev->app->vk;
    memset(buf, 0, sizeof(*buf));
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    if (vk->vkCreateBuffer(dev->device, &bci, NULL, &buf->buffer) != VK_SUCCESS)
        return KT_EBACKEND;
    VkMemoryRequirements mr;
    vk->vkGetBufferMemoryRequirements(dev->device, buf->buffer, &mr);
    const VkMemoryPropertyFlags need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int type = -1;
    for (uint32_t i = 0; i < dev->mem.memoryTypeCount && type < 0; i++)
        if ((mr.memoryTypeBits & (1u << i)) && (dev->mem.memoryTypes[i].propertyFlags & need) == need)
            type = (int)i;
    if (type < 0) {
        ktcli_vk_buffer_destroy(dev, buf);
        return KT_EUNAVAILABLE;
    }
    VkMemoryAllocateInfo mai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = mr.size,
        .memoryTypeIndex = (uint32_t)type,
    };
    if (vk->vkAllocateMemory(dev->device, &mai, NULL, &buf->memory) != VK_SUCCESS ||
        vk->vkBindBufferMemory(dev->device, buf->buffer, buf->memory, 0) != VK_SUCCESS ||
        vk->vkMapMemory(dev->device, buf->memory, 0, VK_WHOLE_SIZE, 0, &buf->map) != VK_SUCCESS) {
        ktcli_vk_buffer_destroy(dev, buf);
        return KT_ENOMEM;
    }
    buf->size = size;
    return 0;
}

void ktcli_vk_buffer_destroy(ktcli_vk_device_t *dev, ktcli_vk_buffer_t *buf)
{
    const ktcli_vk_fn_t *vk = &dev->app->vk;
    if (buf->map)
        vk->vkUnmapMemory(dev->device, buf->memory);
    if (buf->buffer)
        vk->vkDestroyBuffer(dev->device, buf->buffer, NULL);
    if (buf->memory)
        vk->vkFreeMemory(dev->device, buf->memory, NULL);
    memset(buf, 0, sizeof(*buf));
}

/* ---------------------------------------------------------------------------------------------------
 * Pipelines
 * ------------------------------------------------------------------------------------------------- */

#define KTCLI_VK_MAX_BINDINGS 8u

int ktcli_vk_pipeline_create(ktcli_vk_device_t *dev, const uint32_t *spirv, size_t spirv_bytes,
                             const ktcli_vk_buffer_t *const *buffers, uint32_t nbuffers, uint32_t push_size,
                             ktcli_vk_pipeline_t *p)
{
    const ktcli_vk_fn_t *vk = &dev->app->vk;
    memset(p, 0, sizeof(*p));
    if (nbuffers == 0 || nbuffers > KTCLI_VK_MAX_BINDINGS)
        return KT_EINVAL;
    p->push_size = push_size;
    VkShaderModuleCreateInfo smi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = spirv_bytes,
        .pCode = spirv,
    };
    VkDescriptorSetLayoutBinding b[KTCLI_VK_MAX_BINDINGS];
    VkDescriptorBufferInfo bi[KTCLI_VK_MAX_BINDINGS];
    VkWriteDescriptorSet w[KTCLI_VK_MAX_BINDINGS];
    for (uint32_t i = 0; i < nbuffers; i++) {
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
        bi[i] = (VkDescriptorBufferInfo){.buffer = buffers[i]->buffer, .offset = 0, .range = VK_WHOLE_SIZE};
    }
    VkDescriptorSetLayoutCreateInfo dli = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = nbuffers,
        .pBindings = b,
    };
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = push_size};
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = nbuffers};
    VkDescriptorPoolCreateInfo dpi = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = 1,
        .poolSizeCount = 1,
        .pPoolSizes = &ps,
    };
    if (vk->vkCreateShaderModule(dev->device, &smi, NULL, &p->module) != VK_SUCCESS ||
        vk->vkCreateDescriptorSetLayout(dev->device, &dli, NULL, &p->dsl) != VK_SUCCESS)
        goto fail;
    VkPipelineLayoutCreateInfo pli = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &p->dsl,
        .pushConstantRangeCount = push_size ? 1u : 0u,
        .pPushConstantRanges = &pr,
    };
    if (vk->vkCreatePipelineLayout(dev->device, &pli, NULL, &p->layout) != VK_SUCCESS)
        goto fail;
    VkComputePipelineCreateInfo cpi = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = p->module,
            .pName = "main",
        },
        .layout = p->layout,
    };
    if (vk->vkCreateComputePipelines(dev->device, VK_NULL_HANDLE, 1, &cpi, NULL, &p->pipeline) != VK_SUCCESS ||
        vk->vkCreateDescriptorPool(dev->device, &dpi, NULL, &p->dpool) != VK_SUCCESS)
        goto fail;
    VkDescriptorSetAllocateInfo dsai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = p->dpool,
        .descriptorSetCount = 1,
        .pSetLayouts = &p->dsl,
    };
    if (vk->vkAllocateDescriptorSets(dev->device, &dsai, &p->set) != VK_SUCCESS)
        goto fail;
    for (uint32_t i = 0; i < nbuffers; i++)
        w[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = p->set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &bi[i],
        };
    vk->vkUpdateDescriptorSets(dev->device, nbuffers, w, 0, NULL);
    return 0;
fail:
    ktcli_vk_pipeline_destroy(dev, p);
    return KT_EBACKEND;
}

void ktcli_vk_pipeline_destroy(ktcli_vk_device_t *dev, ktcli_vk_pipeline_t *p)
{
    const ktcli_vk_fn_t *vk = &dev->app->vk;
    if (p->dpool)
        vk->vkDestroyDescriptorPool(dev->device, p->dpool, NULL);
    if (p->pipeline)
        vk->vkDestroyPipeline(dev->device, p->pipeline, NULL);
    if (p->layout)
        vk->vkDestroyPipelineLayout(dev->device, p->layout, NULL);
    if (p->dsl)
        vk->vkDestroyDescriptorSetLayout(dev->device, p->dsl, NULL);
    if (p->module)
        vk->vkDestroyShaderModule(dev->device, p->module, NULL);
    memset(p, 0, sizeof(*p));
}

void ktcli_vk_dispatch(ktcli_vk_device_t *dev, VkCommandBuffer cmd, const ktcli_vk_pipeline_t *p,
                       const void *push, uint32_t gx, uint32_t gy)
{
    const ktcli_vk_fn_t *vk = &dev->app->vk;
    vk->vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    vk->vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &p->set, 0, NULL);
    if (p->push_size && push)
        vk->vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_size, push);
    vk->vkCmdDispatch(cmd, gx, gy, 1);
}

void ktcli_vk_barrier(ktcli_vk_device_t *dev, VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT,
    };
    dev->app->vk.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                                      0, NULL, 0, NULL);
}

/* ---------------------------------------------------------------------------------------------------
 * Command buffers and submission
 * ------------------------------------------------------------------------------------------------- */

int ktcli_vk_cmd_alloc(ktcli_vk_device_t *dev, VkCommandBuffer *cmd)
{
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = dev->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    return dev->app->vk.vkAllocateCommandBuffers(dev->device, &ai, cmd) == VK_SUCCESS ? 0 : KT_EBACKEND;
}

void ktcli_vk_cmd_free(ktcli_vk_device_t *dev, VkCommandBuffer cmd)
{
    if (cmd)
        dev->app->vk.vkFreeCommandBuffers(dev->device, dev->pool, 1, &cmd);
}

int ktcli_vk_cmd_begin(ktcli_vk_device_t *dev, VkCommandBuffer cmd)
{
    const ktcli_vk_fn_t *vk = &dev->app->vk;
    if (vk->vkResetCommandBuffer(cmd, 0) != VK_SUCCESS)
        return KT_EBACKEND;
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    return vk->vkBeginCommandBuffer(cmd, &bi) == VK_SUCCESS ? 0 : KT_EBACKEND;
}

int ktcli_vk_cmd_end(ktcli_vk_device_t *dev, VkCommandBuffer cmd)
{
    return dev->app->vk.vkEndCommandBuffer(cmd) == VK_SUCCESS ? 0 : KT_EBACKEND;
}

int ktcli_vk_fence_create(ktcli_vk_device_t *dev, VkFence *fence)
{
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    return dev->app->vk.vkCreateFence(dev->device, &fci, NULL, fence) == VK_SUCCESS ? 0 : KT_EBACKEND;
}

void ktcli_vk_fence_destroy(ktcli_vk_device_t *dev, VkFence fence)
{
    if (fence)
        dev->app->vk.vkDestroyFence(dev->device, fence, NULL);
}

int ktcli_vk_submit(ktcli_vk_device_t *dev, VkCommandBuffer cmd, VkFence fence)
{
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &cmd,
    };
    return dev->app->vk.vkQueueSubmit(dev->queue, 1, &si, fence) == VK_SUCCESS ? 0 : KT_EBACKEND;
}

int ktcli_vk_wait(ktcli_vk_device_t *dev, VkFence fence)
{
    const ktcli_vk_fn_t *vk = &dev->app->vk;
    VkResult r = vk->vkWaitForFences(dev->device, 1, &fence, VK_TRUE, UINT64_C(60000000000));
    if (r != VK_SUCCESS)
        return r == VK_TIMEOUT ? KT_ETIMEDOUT : KT_EBACKEND;
    return vk->vkResetFences(dev->device, 1, &fence) == VK_SUCCESS ? 0 : KT_EBACKEND;
}
