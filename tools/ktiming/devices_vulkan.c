/* devices_vulkan.c — `ktiming devices` for Vulkan: each device with its timestamp facts and fitted clock model. */
#include "cli.h"

#if defined(KTCLI_NO_VULKAN)

int ktcli_devices_vulkan(FILE *out)
{
    (void)out;
    return KT_EUNAVAILABLE;
}

#else

#include "vk_app.h"

#include <stdlib.h>
#include <string.h>

static const char *device_type(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
    }
}

static const char *domain_name(VkTimeDomainEXT d)
{
    switch (d) {
    case VK_TIME_DOMAIN_DEVICE_EXT: return "device";
    case VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT: return "CLOCK_MONOTONIC";
    case VK_TIME_DOMAIN_CLOCK_MONOTONIC_RAW_EXT: return "CLOCK_MONOTONIC_RAW";
    case VK_TIME_DOMAIN_QUERY_PERFORMANCE_COUNTER_EXT: return "QPC";
    default: return "?";
    }
}

static void print_device(FILE *out, ktcli_vk_app_t *app, uint32_t index)
{
    const ktcli_vk_fn_t *vk = &app->vk;
    VkPhysicalDevice pd = app->devices[index];
    VkPhysicalDeviceProperties p;
    vk->vkGetPhysicalDeviceProperties(pd, &p);
    fprintf(out, "Vulkan  %s  (%s, API %u.%u.%u)\n", p.deviceName, device_type(p.deviceType),
            VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion), VK_API_VERSION_PATCH(p.apiVersion));

    uint32_t nf = 0;
    vk->vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, NULL);
    VkQueueFamilyProperties *fam = calloc(nf ? nf : 1, sizeof(*fam));
    if (fam) {
        vk->vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, fam);
        for (uint32_t i = 0; i < nf; i++)
            fprintf(out, "  queue family %u: %s%s%s x%u, timestamps %u valid bits\n", i,
                    (fam[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) ? "graphics " : "",
                    (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT) ? "compute " : "",
                    (fam[i].queueFlags & VK_QUEUE_TRANSFER_BIT) ? "transfer" : "", fam[i].queueCount,
                    fam[i].timestampValidBits);
        free(fam);
    }
    fprintf(out, "  timestampPeriod %.3f ns, timestampComputeAndGraphics %s\n", (double)p.limits.timestampPeriod,
            p.limits.timestampComputeAndGraphics ? "yes" : "no");

    PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT domains =
        (PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT)vk->vkGetInstanceProcAddr(
            app->instance, "vkGetPhysicalDeviceCalibrateableTimeDomainsKHR");
    if (!domains)
        domains = vk->vkGetPhysicalDeviceCalibrateableTimeDomainsEXT;

    ktcli_vk_device_t dev;
    if (ktcli_vk_device_open(app, index, NULL, &dev) != 0) {
        fprintf(out, "  (cannot create a device)\n");
        return;
    }
    if (dev.calibrated_ext && domains) {
        VkTimeDomainEXT d[8];
        uint32_t nd = 8;
        domains(pd, &nd, d);
        fprintf(out, "  calibrated timestamps: %s, domains", dev.calibrated_ext);
        for (uint32_t i = 0; i < nd; i++)
            fprintf(out, "%s %s", i ? "," : "", domain_name(d[i]));
        fprintf(out, "\n");
    } else {
        fprintf(out, "  calibrated timestamps: none (clock fitted from bracketed submissions)\n");
    }
    fprintf(out, "  hostQueryReset: %s\n", dev.host_query_reset ? "yes" : "no");
    kt_vk_desc_t desc = ktcli_vk_device_desc(&dev);
    desc.ring_size = 16;
    kt_vk_ctx_t *kv = NULL;
    int rc = kt_vk_ctx_create(&desc, &kv);
    if (rc == 0) {
        kt_device_info_t info;
        kt_vk_stats_t st;
        kt_vk_device_info(kv, &info);
        kt_vk_stats(kv, &st);
        fprintf(out, "  clock: time base %s, model %s -> %s, error bound %llu ns, drift %+.3f ppm, %u samples\n",
                info.clock_domain, st.calibrated ? "calibrated" : "bracketed",
                kt_clock_domain_name(st.host_domain), (unsigned long long)info.error_bound_ns, info.drift_ppm,
                info.model_samples);
        fprintf(out, "  ktiming readback: %s\n",
                st.readback == KT_VK_READBACK_COPY ? "copies recorded by kt_vk_end" : "collector thread");
        kt_vk_ctx_destroy(kv);
    } else {
        fprintf(out, "  clock: not timed (%s)\n", kt_strerror(rc));
    }
    ktcli_vk_device_close(&dev);
}

int ktcli_devices_vulkan(FILE *out)
{
    static ktcli_vk_app_t app;
    if (ktcli_vk_app_init(&app, 0) != 0)
        return KT_EUNAVAILABLE;
    for (uint32_t i = 0; i < app.device_count; i++)
        print_device(out, &app, i);
    int n = (int)app.device_count;
    ktcli_vk_app_fini(&app);
    return n;
}

#endif
