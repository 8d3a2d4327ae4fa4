/* vk_loader.c — finds the Vulkan loader with dlopen and resolves the backend's function table through it. */
#include "backends/vulkan/vk_internal.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static PFN_vkGetInstanceProcAddr g_gipa;

static void loader_open(void)
{
    const char *path = secure_getenv("KTIMING_VULKAN_LIBRARY");
    if (!path || !*path)
        path = "libvulkan.so.1";
    /* Kept open for the life of the process: contexts and exit-time flushes call into it. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    g_gipa = (PFN_vkGetInstanceProcAddr)(uintptr_t)dlsym(h, "vkGetInstanceProcAddr");
}

PFN_vkGetInstanceProcAddr kt_vk_loader(void)
{
    pthread_once(&g_once, loader_open);
    return g_gipa;
}

int kt__vk_table_load(kt__vk_table_t *t, PFN_vkGetInstanceProcAddr gipa, VkInstance instance, VkDevice device)
{
    memset(t, 0, sizeof(*t));
    if (!gipa)
        return KT_EUNAVAILABLE;
    t->vkGetInstanceProcAddr = gipa;
    int missing = 0;
#define KT__VK_LOAD_I(name, req)                                                                           \
    t->name = (PFN_##name)gipa(instance, #name);                                                           \
    if (!t->name && (req))                                                                                 \
        missing = 1;
    KT_VK_INSTANCE_FUNCS(KT__VK_LOAD_I)
#undef KT__VK_LOAD_I
    if (missing)
        return KT_EUNAVAILABLE;
#define KT__VK_LOAD_D(name, req)                                                                           \
    t->name = (PFN_##name)t->vkGetDeviceProcAddr(device, #name);                                           \
    if (!t->name && (req))                                                                                 \
        missing = 1;
    KT_VK_DEVICE_FUNCS(KT__VK_LOAD_D)
#undef KT__VK_LOAD_D
    if (missing)
        return KT_EUNAVAILABLE;
    t->reset_query_pool = t->vkResetQueryPool ? t->vkResetQueryPool : t->vkResetQueryPoolEXT;
    /* The KHR and EXT calibrated-timestamp entry points share one ABI (KHR is the promotion of EXT). A device
     * returns them only when the application enabled the extension. */
    t->get_calibrated = (PFN_vkGetCalibratedTimestampsEXT)t->vkGetDeviceProcAddr(device, "vkGetCalibratedTimestampsKHR");
    if (!t->get_calibrated)
        t->get_calibrated = t->vkGetCalibratedTimestampsEXT;
    t->get_domains = (PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT)gipa(
        instance, "vkGetPhysicalDeviceCalibrateableTimeDomainsKHR");
    if (!t->get_domains)
        t->get_domains = t->vkGetPhysicalDeviceCalibrateableTimeDomainsEXT;
    return 0;
}
