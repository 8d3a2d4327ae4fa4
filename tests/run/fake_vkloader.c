/* fake_vkloader.c — a stand-in Vulkan loader for the `ktiming run` loader-version check: vkEnumerateInstanceVersion
 * reports 1.3.200 (older than 1.3.207, which added VK_ADD_LAYER_PATH); nothing else exists. */
#include <stdint.h>
#include <string.h>

typedef void (*fake_void_fn)(void);

static int fake_enumerate_instance_version(uint32_t *v)
{
    *v = (1u << 22) | (3u << 12) | 200u;
    return 0;
}

__attribute__((visibility("default"))) fake_void_fn vkGetInstanceProcAddr(void *instance, const char *name)
{
    if (!instance && name && !strcmp(name, "vkEnumerateInstanceVersion"))
        return (fake_void_fn)fake_enumerate_instance_version;
    return 0;
}
