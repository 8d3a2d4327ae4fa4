/* vulkan_latency.c — submit-and-wait latency of one empty compute dispatch: untimed; with two bare timestamps
 * around it (the driver's floor for timing it); timed through the layer VK_LAYER_KTIMING_timing (a second
 * instance created with the layer enabled, as `ktiming run` would). Interleaved round by round in one run.
 * Last line: vulkan_latency: timed_vs_untimed=<x> floor_vs_untimed=<y> (medians of per-round ratios). */
#include "vk_app.h"

#include "empty_spv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 9
#define PER_ROUND 300 /* submit-and-wait cycles per variant per round */

enum { UNTIMED = 0, FLOOR = 1, TIMED = 2, VARIANTS = 3 };

/* One device with the empty pipeline. */
typedef struct lat_dev_t {
    ktcli_vk_app_t app;
    ktcli_vk_device_t dev;
    ktcli_vk_buffer_t out;
    ktcli_vk_pipeline_t empty;
    VkCommandBuffer cmd;
    VkFence fence;
    VkQueryPool pool; /* the floor's two timestamps */
} lat_dev_t;

static int open_dev(lat_dev_t *d)
{
    const ktcli_vk_buffer_t *b[1] = {&d->out};
    if (ktcli_vk_app_init(&d->app, 0) != 0 || ktcli_vk_device_open(&d->app, 0, NULL, &d->dev) != 0)
        return -1;
    VkQueryPoolCreateInfo qpi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                 .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2};
    if (ktcli_vk_buffer_create(&d->dev, 64, &d->out) != 0 ||
        ktcli_vk_pipeline_create(&d->dev, empty_spv, sizeof(empty_spv), b, 1, 4, &d->empty) != 0 ||
        ktcli_vk_cmd_alloc(&d->dev, &d->cmd) != 0 || ktcli_vk_fence_create(&d->dev, &d->fence) != 0 ||
        d->app.vk.vkCreateQueryPool(d->dev.device, &qpi, NULL, &d->pool) != VK_SUCCESS)
        return -1;
    return 0;
}

static void close_dev(lat_dev_t *d)
{
    d->app.vk.vkDeviceWaitIdle(d->dev.device);
    d->app.vk.vkDestroyQueryPool(d->dev.device, d->pool, NULL);
    ktcli_vk_fence_destroy(&d->dev, d->fence);
    ktcli_vk_cmd_free(&d->dev, d->cmd);
    ktcli_vk_pipeline_destroy(&d->dev, &d->empty);
    ktcli_vk_buffer_destroy(&d->dev, &d->out);
    ktcli_vk_device_close(&d->dev);
    ktcli_vk_app_fini(&d->app);
}

/* Median submit-and-wait latency (ns) of PER_ROUND cycles. */
static double run(lat_dev_t *d, int floor_ts)
{
    const ktcli_vk_fn_t *vk = &d->app.vk;
    static uint64_t lat[PER_ROUND];
    uint32_t push = 0;
    for (int i = 0; i < PER_ROUND; i++) {
        uint64_t t0 = kt_now_ns();
        if (ktcli_vk_cmd_begin(&d->dev, d->cmd) != 0)
            exit(1);
        if (floor_ts) {
            vk->vkCmdResetQueryPool(d->cmd, d->pool, 0, 2);
            vk->vkCmdWriteTimestamp(d->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, d->pool, 0); /* as ktiming */
        }
        ktcli_vk_dispatch(&d->dev, d->cmd, &d->empty, &push, 1, 1);
        if (floor_ts)
            vk->vkCmdWriteTimestamp(d->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->pool, 1);
        if (ktcli_vk_cmd_end(&d->dev, d->cmd) != 0 || ktcli_vk_submit(&d->dev, d->cmd, d->fence) != 0 ||
            ktcli_vk_wait(&d->dev, d->fence) != 0)
            exit(1);
        lat[i] = kt_now_ns() - t0;
    }
    for (int i = 1; i < PER_ROUND; i++) /* insertion sort: small */
        for (int j = i; j > 0 && lat[j - 1] > lat[j]; j--) {
            uint64_t t = lat[j];
            lat[j] = lat[j - 1];
            lat[j - 1] = t;
        }
    return (double)lat[PER_ROUND / 2];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    static lat_dev_t plain, layered;
    if (open_dev(&plain) != 0) {
        printf("vulkan_latency: skipped (no Vulkan device)\n");
        return 0;
    }
    /* The second instance gets the timing layer, the way `ktiming run` enables it. */
    setenv("VK_ADD_LAYER_PATH", KT_LAYER_DIR, 1);
    setenv("VK_INSTANCE_LAYERS", "VK_LAYER_KTIMING_timing", 1);
    int rc = open_dev(&layered);
    unsetenv("VK_INSTANCE_LAYERS");
    unsetenv("VK_ADD_LAYER_PATH");
    if (rc != 0) {
        fprintf(stderr, "vulkan_latency: cannot open a device with the timing layer\n");
        return 1;
    }
    printf("device: %s; %d submit-and-wait cycles per variant per round\n", plain.dev.props.deviceName, PER_ROUND);
    run(&plain, 0); /* warm-up: shader compilation, the layer's context */
    run(&plain, 1);
    run(&layered, 0);
    double ratio[VARIANTS][ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double ns[VARIANTS];
        for (int i = 0; i < VARIANTS; i++) { /* rotate the order so drift in machine load cancels */
            int v = (i + r) % VARIANTS;
            ns[v] = v == TIMED ? run(&layered, 0) : run(&plain, v == FLOOR);
        }
        for (int v = 0; v < VARIANTS; v++)
            ratio[v][r] = ns[v] / ns[UNTIMED];
        printf("round %d: untimed %.1f us, two timestamps %.1f us (%.3f), timed through the layer %.1f us (%.3f)\n",
               r, ns[UNTIMED] / 1e3, ns[FLOOR] / 1e3, ratio[FLOOR][r], ns[TIMED] / 1e3, ratio[TIMED][r]);
    }
    for (int v = 0; v < VARIANTS; v++)
        qsort(ratio[v], ROUNDS, sizeof(double), cmp_double);
    kt_snapshot_t *s = kt_snapshot();
    uint64_t timed = 0, batches = 0;
    for (size_t i = 0; s && i < s->count; i++)
        if (s->entries[i].backend == KT_BACKEND_VULKAN) {
            if (!strcmp(s->entries[i].name, "vkQueueSubmit"))
                batches += s->entries[i].dispatch_count;
            else
                timed += s->entries[i].dispatch_count;
        }
    kt_snapshot_free(s);
    printf("dispatches timed by the layer: %llu (in %llu batches)\n", (unsigned long long)timed,
           (unsigned long long)batches);
    close_dev(&layered);
    close_dev(&plain);
    printf("vulkan_latency: timed_vs_untimed=%.3f floor_vs_untimed=%.3f\n", ratio[TIMED][ROUNDS / 2],
           ratio[FLOOR][ROUNDS / 2]);
    return 0;
}
