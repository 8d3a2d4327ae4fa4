/* vk_results_lock.h — lavapipe (Mesa 22.3) races with itself under THREAD readback: its vkGetQueryPoolResults waits
 * for the device to go idle and then reads the pool's query objects, which the queue thread destroys and recreates
 * when it executes the vkCmdResetQueryPool before each begin timestamp. A submission landing between the two left a
 * timestamp unavailable for good (kt_vk_collect_wait returned 3 of 4 in 2 of about 90 runs of test_vk_ring under
 * TSan; vkcrashprog's `configs` run under `ktiming run` recorded 6 of 7, the 7th "in flight at exit", twice in a
 * day of full suites on a loaded machine), and the suite state that failure left behind ended in SIGSEGV in CI.
 * The tests serialise the two: a context they create gets the driver through vkt_locked_gipa_over(), whose
 * vkGetQueryPoolResults holds g_vkt_driver_lock, and they submit holding it too. A poll then either ends before a
 * submission or begins after it and waits for all of it. A driver defect, not ktiming's: AUTO picks COPY readback
 * on CPU devices, where nothing polls (vk.h); GPU drivers read query results from any thread. No cmocka here:
 * tests/vulkan/vk_test.h (the suite) and vkcrashprog.c (a program run under `ktiming run`) both include it. */
#ifndef KT_TESTS_VK_RESULTS_LOCK_H
#define KT_TESTS_VK_RESULTS_LOCK_H

#include <vulkan/vulkan.h>

#include <pthread.h>
#include <string.h>

static pthread_mutex_t g_vkt_driver_lock = PTHREAD_MUTEX_INITIALIZER;
static PFN_vkGetQueryPoolResults g_vkt_real_results;

static inline VkResult VKAPI_CALL vkt_locked_results(VkDevice dev, VkQueryPool pool, uint32_t first, uint32_t count,
                                                     size_t size, void *data, VkDeviceSize stride,
                                                     VkQueryResultFlags flags)
{
    pthread_mutex_lock(&g_vkt_driver_lock);
    VkResult r = g_vkt_real_results(dev, pool, first, count, size, data, stride, flags);
    pthread_mutex_unlock(&g_vkt_driver_lock);
    return r;
}

/* f, or the locking stand-in when f is the driver's vkGetQueryPoolResults. */
static inline PFN_vkVoidFunction vkt_lock_results(const char *name, PFN_vkVoidFunction f)
{
    if (!f || strcmp(name, "vkGetQueryPoolResults"))
        return f;
    g_vkt_real_results = (PFN_vkGetQueryPoolResults)f;
    return (PFN_vkVoidFunction)vkt_locked_results;
}

/* How a resolved function is handed to the backend (vkt_lock_results, or a test's resolver around it). */
typedef PFN_vkVoidFunction (*vkt_resolve_fn)(const char *name, PFN_vkVoidFunction f);
static PFN_vkGetInstanceProcAddr g_vkt_real_gipa;
static PFN_vkGetDeviceProcAddr g_vkt_real_gdpa;
static vkt_resolve_fn g_vkt_resolve = vkt_lock_results;

static inline PFN_vkVoidFunction VKAPI_CALL vkt_locked_gdpa(VkDevice dev, const char *name)
{
    return g_vkt_resolve(name, g_vkt_real_gdpa(dev, name));
}

static inline PFN_vkVoidFunction VKAPI_CALL vkt_locked_gipa(VkInstance inst, const char *name)
{
    PFN_vkVoidFunction f = g_vkt_real_gipa(inst, name);
    if (f && !strcmp(name, "vkGetDeviceProcAddr")) {
        g_vkt_real_gdpa = (PFN_vkGetDeviceProcAddr)f;
        return (PFN_vkVoidFunction)vkt_locked_gdpa;
    }
    return g_vkt_resolve(name, f);
}

/* The get_instance_proc_addr to give kt_vk_desc_t: `real`'s functions, passed through `resolve` (NULL: only the
 * locking vkGetQueryPoolResults). */
static inline PFN_vkGetInstanceProcAddr vkt_locked_gipa_over(PFN_vkGetInstanceProcAddr real, vkt_resolve_fn resolve)
{
    g_vkt_real_gipa = real;
    g_vkt_resolve = resolve ? resolve : vkt_lock_results;
    return vkt_locked_gipa;
}

#endif
