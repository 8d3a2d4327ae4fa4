/* test_vk_identity.c — the Vulkan backend's device identity (issue 34): a context's device is registered with its
 * deviceUUID and driverUUID (read by ktiming through vkGetPhysicalDeviceProperties2 when the instance allows it),
 * its PCI address where VK_EXT_pci_bus_info is offered, its enumeration index, and keyed by it: two VkDevices of
 * one physical device are one device (one entry, one device record, the label the bare model name). Without
 * vkGetPhysicalDeviceProperties2 (a 1.0 instance without the extensions) the record says "enumeration". The test
 * reads the UUIDs itself to compare. Fails on any validation message. */
#include "vk_test.h"

/* The snapshot's entry `name` (any Vulkan device), or NULL. */
static const kt_kernel_timing_t *entry_named(const kt_snapshot_t *s, const char *name)
{
    for (size_t i = 0; i < s->count; i++)
        if (s->entries[i].backend == KT_BACKEND_VULKAN && !strcmp(s->entries[i].name, name))
            return &s->entries[i];
    return NULL;
}

/* Vulkan device records of the snapshot whose uuid is `uuid`. */
static size_t records_with_uuid(const kt_snapshot_t *s, const char *uuid)
{
    size_t n = 0;
    for (size_t i = 0; i < s->device_count; i++)
        n += s->devices[i].backend == KT_BACKEND_VULKAN && !strcmp(s->devices[i].id.uuid, uuid);
    return n;
}

/* The device's UUIDs as 8-4-4-4-12 text, read here, not through ktiming. */
static void own_uuids(char *device_uuid, char *driver_uuid, size_t size)
{
    PFN_vkGetPhysicalDeviceProperties2 get2 = (PFN_vkGetPhysicalDeviceProperties2)g_vkt.app.vk.vkGetInstanceProcAddr(
        g_vkt.app.instance, "vkGetPhysicalDeviceProperties2");
    assert_non_null(get2);
    VkPhysicalDeviceIDProperties idp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &idp};
    get2(g_vkt.dev.physical, &p2);
    const uint8_t *u[2] = {idp.deviceUUID, idp.driverUUID};
    char *out[2] = {device_uuid, driver_uuid};
    for (int k = 0; k < 2; k++)
        snprintf(out[k], size, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[k][0],
                 u[k][1], u[k][2], u[k][3], u[k][4], u[k][5], u[k][6], u[k][7], u[k][8], u[k][9], u[k][10], u[k][11],
                 u[k][12], u[k][13], u[k][14], u[k][15]);
}

/* One empty timed region `name` on dev through kv, submitted, waited for and collected. */
static void time_one(kt_vk_ctx_t *kv, ktcli_vk_device_t *dev, const char *name)
{
    VkCommandBuffer cmd;
    VkFence fence;
    assert_int_equal(ktcli_vk_cmd_alloc(dev, &cmd), 0);
    assert_int_equal(ktcli_vk_fence_create(dev, &fence), 0);
    assert_int_equal(ktcli_vk_cmd_begin(dev, cmd), 0);
    assert_int_equal(kt_vk_begin(kv, cmd, name), 0);
    ktcli_vk_barrier(dev, cmd);
    assert_int_equal(kt_vk_end(kv, cmd), 0);
    assert_int_equal(ktcli_vk_cmd_end(dev, cmd), 0);
    pthread_mutex_lock(&g_vkt_driver_lock);
    int rc = ktcli_vk_submit(dev, cmd, fence);
    pthread_mutex_unlock(&g_vkt_driver_lock);
    assert_int_equal(rc, 0);
    assert_int_equal(ktcli_vk_wait(dev, fence), 0);
    assert_int_equal(kt_vk_collect_wait(kv, UINT64_C(5000000000)), 1);
    ktcli_vk_fence_destroy(dev, fence);
    ktcli_vk_cmd_free(dev, cmd);
}

/* The record carries the UUIDs this test reads itself, kind "uuid", the model, a vendor, enumeration index 0 (the
 * suite opens physical device 0) and the PCI address exactly when the device offers VK_EXT_pci_bus_info. The
 * entry's device is the bare model (one device). Before: no identity (kind "name", no UUID). */
static void uuid_identity(void **state)
{
    (void)state;
    if (g_vkt.app.api_version < VK_API_VERSION_1_1 || g_vkt.dev.props.apiVersion < VK_API_VERSION_1_1)
        skip();
    kt_reset();
    kt_vk_ctx_t *kv = NULL;
    kt_vk_desc_t d = vkt_desc();
    assert_int_equal(d.instance_api_version, g_vkt.app.api_version);
    assert_int_equal(kt_vk_ctx_create(&d, &kv), 0);
    time_one(kv, &g_vkt.dev, "ident_uuid");
    char uuid[48], driver[48];
    own_uuids(uuid, driver, sizeof uuid);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = entry_named(s, "ident_uuid");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 1);
    assert_string_equal(e->device, g_vkt.dev.props.deviceName);
    const kt_device_info_t *dev = kt_snapshot_device(s, KT_BACKEND_VULKAN, e->device);
    assert_non_null(dev);
    assert_string_equal(dev->id.id_kind, "uuid");
    assert_string_equal(dev->id.uuid, uuid);
    assert_string_equal(dev->id.driver_uuid, driver);
    assert_string_equal(dev->id.model, g_vkt.dev.props.deviceName);
    assert_true(dev->id.vendor[0] != '\0');
    assert_int_equal(dev->id.ordinal, 0);
    int pci_offered = 0;
    uint32_t n = 0;
    g_vkt.app.vk.vkEnumerateDeviceExtensionProperties(g_vkt.dev.physical, NULL, &n, NULL);
    VkExtensionProperties *ep = calloc(n ? n : 1, sizeof *ep);
    g_vkt.app.vk.vkEnumerateDeviceExtensionProperties(g_vkt.dev.physical, NULL, &n, ep);
    for (uint32_t i = 0; i < n; i++)
        pci_offered |= !strcmp(ep[i].extensionName, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
    free(ep);
    assert_int_equal(dev->id.pci[0] != '\0', pci_offered);
    kt_device_info_t info;
    assert_int_equal(kt_vk_device_info(kv, &info), 0);
    assert_string_equal(info.key, dev->key);
    kt_snapshot_free(s);
    kt_vk_ctx_destroy(kv);
}

/* Two VkDevices of the one physical device, a context on each, a region timed on each: one entry of 2 under the
 * bare model name, one device record. Before: the two were told apart only by a label the program gave (the
 * layer's "#2"), or merged by name with no identity. */
static void two_logical_devices_one_device(void **state)
{
    (void)state;
    if (g_vkt.app.api_version < VK_API_VERSION_1_1 || g_vkt.dev.props.apiVersion < VK_API_VERSION_1_1)
        skip();
    kt_reset();
    ktcli_vk_device_t second;
    assert_int_equal(ktcli_vk_device_open(&g_vkt.app, 0, NULL, &second), 0);
    kt_vk_ctx_t *kv1 = NULL, *kv2 = NULL;
    kt_vk_desc_t d1 = vkt_desc();
    assert_int_equal(kt_vk_ctx_create(&d1, &kv1), 0);
    kt_vk_desc_t d2 = ktcli_vk_device_desc(&second);
    assert_int_equal(kt_vk_ctx_create(&d2, &kv2), 0);
    time_one(kv1, &g_vkt.dev, "ident_two");
    time_one(kv2, &second, "ident_two");
    char uuid[48], driver[48];
    own_uuids(uuid, driver, sizeof uuid);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = entry_named(s, "ident_two");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 2);
    assert_string_equal(e->device, g_vkt.dev.props.deviceName);
    assert_int_equal(records_with_uuid(s, uuid), 1);
    kt_snapshot_free(s);
    kt_vk_ctx_destroy(kv2);
    kt_vk_ctx_destroy(kv1);
    ktcli_vk_device_close(&second);
}

/* A 1.0 instance without VK_KHR_get_physical_device_properties2: ktiming may not call
 * vkGetPhysicalDeviceProperties2 (a validation error), so the device is known by its enumeration index: kind
 * "enumeration", no UUID, ordinal 0. Last: its record is a second one for the suite's device. */
static void enumeration_without_properties2(void **state)
{
    (void)state;
    kt_reset();
    kt_vk_ctx_t *kv = NULL;
    kt_vk_desc_t d = vkt_desc();
    d.instance_api_version = 0;
    d.instance_extensions = KT_VK_INSTANCE_PROPERTIES2; /* one of the two it needs on a 1.0 instance */
    assert_int_equal(kt_vk_ctx_create(&d, &kv), 0);
    time_one(kv, &g_vkt.dev, "ident_enum");
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = entry_named(s, "ident_enum");
    assert_non_null(e);
    const kt_device_info_t *dev = kt_snapshot_device(s, KT_BACKEND_VULKAN, e->device);
    assert_non_null(dev);
    assert_string_equal(dev->id.id_kind, "enumeration");
    assert_string_equal(dev->id.uuid, "");
    assert_int_equal(dev->id.ordinal, 0);
    assert_string_equal(dev->id.model, g_vkt.dev.props.deviceName);
    kt_snapshot_free(s);
    kt_vk_ctx_destroy(kv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(uuid_identity),
        cmocka_unit_test(two_logical_devices_one_device),
        cmocka_unit_test(enumeration_without_properties2),
        cmocka_unit_test(vkt_test_validation_clean),
    };
    return cmocka_run_group_tests(tests, vkt_setup_busy, NULL);
}
