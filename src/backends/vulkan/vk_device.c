/* vk_device.c — the identity of a context's physical device (issue 34, docs/devices.md): model, vendor,
 * deviceUUID / driverUUID (VkPhysicalDeviceIDProperties), PCI address (VK_EXT_pci_bus_info), enumeration index;
 * registered once with kt_device_register, whose key the context records everything under. Every VkDevice of one
 * physical device gets the same key. Calls only the driver table (vk_loader.c); called by vk_context.c. */
#include "backends/vulkan/vk_internal.h"

#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* 16 bytes as 8-4-4-4-12 lowercase hex; "" when all are zero (a driver that fills none). */
static void uuid_text(char *out, size_t size, const uint8_t *u)
{
    int any = 0;
    for (uint32_t i = 0; i < VK_UUID_SIZE; i++)
        any |= u[i];
    if (!any) {
        out[0] = '\0';
        return;
    }
    snprintf(out, size, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
             u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* The PCI vendor id's name where it is a well-known one, else the id in hex. */
static void vendor_text(char *out, size_t size, uint32_t id)
{
    static const struct {
        uint32_t id;
        const char *name;
    } known[] = {{0x1002, "AMD"},      {0x10de, "NVIDIA"},   {0x8086, "Intel"}, {0x13b5, "ARM"},
                 {0x5143, "Qualcomm"}, {0x1010, "ImgTec"},   {0x10005, "Mesa"}, {0x106b, "Apple"},
                 {0x14e4, "Broadcom"}, {0x1ae0, "Google"}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].id == id) {
            snprintf(out, size, "%s", known[i].name);
            return;
        }
    snprintf(out, size, "0x%04x", (unsigned)id);
}

/* Whether the physical device offers the device extension `name`. */
static int has_device_ext(const kt__vk_table_t *vk, VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (!vk->vkEnumerateDeviceExtensionProperties || vk->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) ||
        !n)
        return 0;
    VkExtensionProperties *e = calloc(n, sizeof(*e));
    int found = 0;
    if (e && vk->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = !strcmp(e[i].extensionName, name);
    free(e);
    return found;
}

/* The vkGetPhysicalDeviceProperties2 the application's instance allows ktiming to call with
 * VkPhysicalDeviceIDProperties chained: the core entry on a 1.1 instance and device, else the KHR one when both
 * instance extensions are enabled; NULL otherwise (calling either would be a validation error there). */
static PFN_vkGetPhysicalDeviceProperties2 properties2(const kt__vk_table_t *vk, const kt_vk_desc_t *desc,
                                                      const VkPhysicalDeviceProperties *props)
{
    if (desc->instance_api_version >= VK_API_VERSION_1_1 && props->apiVersion >= VK_API_VERSION_1_1 &&
        vk->vkGetPhysicalDeviceProperties2)
        return vk->vkGetPhysicalDeviceProperties2;
    const uint32_t both = KT_VK_INSTANCE_PROPERTIES2 | KT_VK_INSTANCE_EXTERNAL_MEMORY_CAPABILITIES;
    if ((desc->instance_extensions & both) == both && vk->vkGetPhysicalDeviceProperties2KHR)
        return (PFN_vkGetPhysicalDeviceProperties2)vk->vkGetPhysicalDeviceProperties2KHR;
    return NULL;
}

/* ktiming's own vkEnumeratePhysicalDevices calls, one at a time: contexts made at the same moment on several
 * threads (the layer makes one at a queue family's first dispatch) called it at once on one instance, and the
 * loader of Debian 12 with Mesa's device-select layer then frees its device list twice (`bench/vulkan_overhead`,
 * 4 lanes: "double free or corruption" in about one run of three). */
static pthread_mutex_t g_enumerate_lock = PTHREAD_MUTEX_INITIALIZER;

/* The physical device's index in vkEnumeratePhysicalDevices; -1 when it cannot be told. */
static int32_t ordinal_of(const kt__vk_table_t *vk, VkInstance instance, VkPhysicalDevice pd)
{
    if (!vk->vkEnumeratePhysicalDevices)
        return -1;
    int32_t at = -1;
    pthread_mutex_lock(&g_enumerate_lock);
    uint32_t n = 0;
    if (vk->vkEnumeratePhysicalDevices(instance, &n, NULL) == VK_SUCCESS && n) {
        VkPhysicalDevice *all = calloc(n, sizeof(*all));
        VkResult r = all ? vk->vkEnumeratePhysicalDevices(instance, &n, all) : VK_ERROR_OUT_OF_HOST_MEMORY;
        if (r == VK_SUCCESS || r == VK_INCOMPLETE)
            for (uint32_t i = 0; i < n && at < 0; i++)
                if (all[i] == pd)
                    at = (int32_t)i;
        free(all);
    }
    pthread_mutex_unlock(&g_enumerate_lock);
    return at;
}

void kt__vk_device_register(kt_vk_ctx_t *ctx, const kt_vk_desc_t *desc, const VkPhysicalDeviceProperties *props)
{
    const kt__vk_table_t *vk = &ctx->vk;
    kt_device_id_t id;
    memset(&id, 0, sizeof id);
    snprintf(id.model, sizeof id.model, "%s", ctx->device_name);
    vendor_text(id.vendor, sizeof id.vendor, props->vendorID);
    id.partition = -1;
    id.ordinal = ordinal_of(vk, ctx->instance, ctx->physical_device);
    PFN_vkGetPhysicalDeviceProperties2 get2 = properties2(vk, desc, props);
    if (get2) {
        VkPhysicalDevicePCIBusInfoPropertiesEXT pci = {.sType =
                                                           VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT};
        VkPhysicalDeviceIDProperties idp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
        int with_pci = has_device_ext(vk, ctx->physical_device, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
        if (with_pci)
            idp.pNext = &pci;
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &idp};
        get2(ctx->physical_device, &p2);
        uuid_text(id.uuid, sizeof id.uuid, idp.deviceUUID);
        uuid_text(id.driver_uuid, sizeof id.driver_uuid, idp.driverUUID);
        if (with_pci)
            snprintf(id.pci, sizeof id.pci, "%04x:%02x:%02x.%x", (unsigned)pci.pciDomain & 0xffffu,
                     (unsigned)pci.pciBus & 0xffu, (unsigned)pci.pciDevice & 0xffu, (unsigned)pci.pciFunction & 0xfu);
    }
    const char *key = kt_device_register(KT_BACKEND_VULKAN, &id);
    snprintf(ctx->device_key, sizeof ctx->device_key, "%s", key ? key : ctx->device_name);
}
