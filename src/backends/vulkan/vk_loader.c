/* vk_loader.c — finds the Vulkan loader with dlopen and resolves the backend's function table through it. */
#include "backends/vulkan/vk_internal.h"
#include "core/env.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static PFN_vkGetInstanceProcAddr g_gipa;

static void loader_open(void)
{
    const char *path = kt__env(KT_ENV_NAME(VULKAN_LIBRARY));
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

/* Which calibrated-timestamps extension the physical device reports: KT_VK_CALIBRATION_KHR (preferred), _EXT or
 * _NONE. The choice follows the device, never the loader: loaders from 1.3.273 on return their own terminator for
 * the KHR physical-device entry point whatever the driver supports, and that terminator aborts the process when
 * the driver has only the EXT extension. */
static kt_vk_calibration_t device_calibration(const kt__vk_table_t *t, VkPhysicalDevice pd)
{
    uint32_t n = 0;
    PFN_vkEnumerateDeviceExtensionProperties en = t->vkEnumerateDeviceExtensionProperties;
    if (!en || en(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return KT_VK_CALIBRATION_NONE;
    VkExtensionProperties *props = calloc(n, sizeof(*props));
    int khr = 0, ext = 0;
    if (props && en(pd, NULL, &n, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++) {
            khr |= !strcmp(props[i].extensionName, "VK_KHR_calibrated_timestamps");
            ext |= !strcmp(props[i].extensionName, "VK_EXT_calibrated_timestamps");
        }
    free(props);
    return khr ? KT_VK_CALIBRATION_KHR : ext ? KT_VK_CALIBRATION_EXT : KT_VK_CALIBRATION_NONE;
}

int kt__vk_table_load(kt__vk_table_t *t, PFN_vkGetInstanceProcAddr gipa, VkInstance instance, VkPhysicalDevice pd,
                      VkDevice device, kt_vk_calibration_t calibration)
{
    memset(t, 0, sizeof(*t));
    if (!gipa)
        return KT_EUNAVAILABLE;
    t->vkGetInstanceProcAddr = gipa;
    int missing = 0;
    /* one loader line per X-macro row; KT__VK_GET is the instance's, then the device's lookup */
#define KT__VK_LOAD(name, req)                                                                             \
    t->name = (PFN_##name)KT__VK_GET(#name);                                                               \
    if (!t->name && (req))                                                                                 \
        missing = 1;
#define KT__VK_GET(fn) gipa(instance, fn)
    KT_VK_INSTANCE_FUNCS(KT__VK_LOAD)
#undef KT__VK_GET
    if (missing)
        return KT_EUNAVAILABLE;
#define KT__VK_GET(fn) t->vkGetDeviceProcAddr(device, fn)
    KT_VK_DEVICE_FUNCS(KT__VK_LOAD)
#undef KT__VK_GET
#undef KT__VK_LOAD
    if (missing)
        return KT_EUNAVAILABLE;
    t->reset_query_pool = t->vkResetQueryPool ? t->vkResetQueryPool : t->vkResetQueryPoolEXT;
    /* The KHR and EXT calibrated-timestamp entry points share one ABI (KHR is the promotion of EXT). Both come
     * from the one extension the device reports (AUTO) or the caller enabled: a lookup that merely returns
     * non-NULL proves nothing (loader terminators, layers that return every name). */
    if (calibration == KT_VK_CALIBRATION_AUTO)
        calibration = device_calibration(t, pd);
    if (calibration == KT_VK_CALIBRATION_KHR) {
        t->get_calibrated =
            (PFN_vkGetCalibratedTimestampsEXT)t->vkGetDeviceProcAddr(device, "vkGetCalibratedTimestampsKHR");
        t->get_domains = (PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT)gipa(
            instance, "vkGetPhysicalDeviceCalibrateableTimeDomainsKHR");
    } else if (calibration == KT_VK_CALIBRATION_EXT) {
        t->get_calibrated = t->vkGetCalibratedTimestampsEXT;
        t->get_domains = t->vkGetPhysicalDeviceCalibrateableTimeDomainsEXT;
    }
    if (!t->get_calibrated || !t->get_domains)
        t->get_calibrated = NULL, t->get_domains = NULL;
    return 0;
}
