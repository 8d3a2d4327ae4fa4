/* test_vk_loader_khr.c — a test double of loaders >= 1.3.273: their vkGetInstanceProcAddr returns a terminator for
 * vkGetPhysicalDeviceCalibrateableTimeDomainsKHR (and devices may answer vkGetCalibratedTimestampsKHR) whatever
 * the driver supports, and that terminator aborts when the driver has only the EXT extension. The backend must
 * pick the entry points by the extension the device reports: no KHR call when it reports EXT only, KHR calls
 * when it reports KHR. Fails on any validation message. */
#include "vk_test.h"

static PFN_vkGetInstanceProcAddr g_real_gipa;
static PFN_vkGetDeviceProcAddr g_real_gdpa;
static int g_report_khr;   /* the double's device reports VK_KHR_calibrated_timestamps too */
static int g_khr_calls;    /* KHR entry points called (forwarded to the EXT ones) */
static int g_khr_abort;    /* a KHR call happened while the device reports EXT only: the real loader aborts */

static VkResult VKAPI_CALL khr_domains(VkPhysicalDevice pd, uint32_t *n, VkTimeDomainEXT *d)
{
    g_khr_calls++;
    g_khr_abort += !g_report_khr;
    PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT ext = (PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT)
        g_real_gipa(g_vkt.app.instance, "vkGetPhysicalDeviceCalibrateableTimeDomainsEXT");
    return ext(pd, n, d);
}

static VkResult VKAPI_CALL khr_timestamps(VkDevice dev, uint32_t n, const VkCalibratedTimestampInfoEXT *info,
                                          uint64_t *ts, uint64_t *dev_ns)
{
    g_khr_calls++;
    g_khr_abort += !g_report_khr;
    PFN_vkGetCalibratedTimestampsEXT ext =
        (PFN_vkGetCalibratedTimestampsEXT)g_real_gdpa(dev, "vkGetCalibratedTimestampsEXT");
    return ext(dev, n, info, ts, dev_ns);
}

/* The driver's extensions, plus the KHR name when the double says so. */
static VkResult VKAPI_CALL enum_exts(VkPhysicalDevice pd, const char *layer, uint32_t *n, VkExtensionProperties *p)
{
    PFN_vkEnumerateDeviceExtensionProperties real = (PFN_vkEnumerateDeviceExtensionProperties)g_real_gipa(
        g_vkt.app.instance, "vkEnumerateDeviceExtensionProperties");
    uint32_t real_n = 0;
    VkResult r = real(pd, layer, &real_n, NULL);
    if (r != VK_SUCCESS)
        return r;
    uint32_t total = real_n + (g_report_khr ? 1u : 0u);
    if (!p) {
        *n = total;
        return VK_SUCCESS;
    }
    if (*n < total)
        return VK_INCOMPLETE;
    r = real(pd, layer, &real_n, p);
    if (g_report_khr) {
        memset(&p[real_n], 0, sizeof p[real_n]);
        snprintf(p[real_n].extensionName, sizeof p[real_n].extensionName, "VK_KHR_calibrated_timestamps");
        p[real_n].specVersion = 1;
    }
    *n = total;
    return r;
}

static PFN_vkVoidFunction VKAPI_CALL double_gdpa(VkDevice dev, const char *name)
{
    if (!strcmp(name, "vkGetCalibratedTimestampsKHR"))
        return (PFN_vkVoidFunction)khr_timestamps;
    return g_real_gdpa(dev, name);
}

static PFN_vkVoidFunction VKAPI_CALL double_gipa(VkInstance inst, const char *name)
{
    if (!strcmp(name, "vkGetPhysicalDeviceCalibrateableTimeDomainsKHR"))
        return (PFN_vkVoidFunction)khr_domains;
    if (!strcmp(name, "vkEnumerateDeviceExtensionProperties"))
        return (PFN_vkVoidFunction)enum_exts;
    if (!strcmp(name, "vkGetDeviceProcAddr"))
        return (PFN_vkVoidFunction)double_gdpa;
    return g_real_gipa(inst, name);
}

static void run_case(int report_khr, int expect_khr_calls)
{
    g_report_khr = report_khr;
    g_khr_calls = g_khr_abort = 0;
    kt_vk_desc_t d = ktcli_vk_device_desc(&g_vkt.dev);
    d.get_instance_proc_addr = double_gipa;
    d.calibration = KT_VK_CALIBRATION_AUTO; /* decided by what the device reports */
    kt_vk_ctx_t *kv = NULL;
    assert_int_equal(kt_vk_ctx_create(&d, &kv), 0);
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_stats(kv, &st), 0);
    assert_int_equal(st.calibrated, 1); /* the EXT path (or the KHR one, forwarded) feeds the clock model */
    assert_int_equal(kt_vk_recalibrate(kv), 0);
    kt_vk_ctx_destroy(kv);
    assert_int_equal(g_khr_abort, 0);
    if (expect_khr_calls)
        assert_true(g_khr_calls > 0);
    else
        assert_int_equal(g_khr_calls, 0);
}

/* Driver with EXT only behind a loader that answers the KHR names: the KHR entries are never called. */
static void test_ext_only_no_khr_call(void **state)
{
    (void)state;
    run_case(0, 0);
}

/* Device reporting KHR: the KHR entries are the ones used. */
static void test_khr_reported_used(void **state)
{
    (void)state;
    run_case(1, 1);
}

int main(void)
{
    vkt_open_or_skip(NULL);
    if (!g_vkt.dev.calibrated_ext || strcmp(g_vkt.dev.calibrated_ext, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME)) {
        fprintf(stderr, "device without (only) VK_EXT_calibrated_timestamps: skipped\n");
        vkt_close_and_check();
        return 77;
    }
    g_real_gipa = g_vkt.app.vk.vkGetInstanceProcAddr;
    g_real_gdpa = (PFN_vkGetDeviceProcAddr)g_real_gipa(g_vkt.app.instance, "vkGetDeviceProcAddr");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ext_only_no_khr_call),
        cmocka_unit_test(test_khr_reported_used),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    vkt_close_and_check();
    return rc;
}
