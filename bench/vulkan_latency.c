/* vulkan_latency.c — submit-and-wait latency of one empty compute dispatch: untimed; with two bare timestamps
 * around it (the driver's floor for timing it); timed through the layer VK_LAYER_KTIMING_timing (a second
 * instance created with the layer enabled, as `ktiming run` would). Each cycle records a one-time command buffer;
 * two more variants submit one command buffer recorded once instead (no ONE_TIME_SUBMIT), untimed and through the
 * layer: the layer then brackets the batch with command buffers of its own, and the program's fence is not
 * ktiming's (issue 37.5: that cost one more, empty, vkQueueSubmit per batch). Interleaved in short rounds in one
 * run, the order rotated each round. Last line: vulkan_latency: timed_vs_untimed=<x> floor_vs_untimed=<y>
 * reuse_timed_vs_untimed=<z>, ratios of the medians of every cycle of each variant (this machine's load moves in
 * bursts of milliseconds; longer rounds compared one against another gave ratios wandering by ±20 %). */
#include "vk_app.h"

#include "empty_spv.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 60
#define PER_ROUND 40 /* submit-and-wait cycles per variant per round: short, so the variants see the same load */

enum { UNTIMED = 0, FLOOR = 1, TIMED = 2, REUSE_UNTIMED = 3, REUSE_TIMED = 4, VARIANTS = 5 };

/* One device with the empty pipeline. */
typedef struct lat_dev_t {
    ktcli_vk_app_t app;
    ktcli_vk_device_t dev;
    ktcli_vk_buffer_t out;
    ktcli_vk_pipeline_t empty;
    VkCommandBuffer cmd;
    VkCommandBuffer reused; /* recorded once (no ONE_TIME_SUBMIT): the empty dispatch */
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
        d->app.vk.vkCreateQueryPool(d->dev.device, &qpi, NULL, &d->pool) != VK_SUCCESS ||
        ktcli_vk_cmd_alloc(&d->dev, &d->reused) != 0)
        return -1;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    uint32_t push = 0;
    if (d->app.vk.vkBeginCommandBuffer(d->reused, &bi) != VK_SUCCESS)
        return -1;
    ktcli_vk_dispatch(&d->dev, d->reused, &d->empty, &push, 1, 1);
    return ktcli_vk_cmd_end(&d->dev, d->reused) == 0 ? 0 : -1;
}

static void close_dev(lat_dev_t *d)
{
    d->app.vk.vkDeviceWaitIdle(d->dev.device);
    d->app.vk.vkDestroyQueryPool(d->dev.device, d->pool, NULL);
    ktcli_vk_fence_destroy(&d->dev, d->fence);
    ktcli_vk_cmd_free(&d->dev, d->cmd);
    ktcli_vk_cmd_free(&d->dev, d->reused);
    ktcli_vk_pipeline_destroy(&d->dev, &d->empty);
    ktcli_vk_buffer_destroy(&d->dev, &d->out);
    ktcli_vk_device_close(&d->dev);
    ktcli_vk_app_fini(&d->app);
}

/* n submit-and-wait cycles; their latencies (ns) into lat. reused: the command buffer recorded once. */
static void run(lat_dev_t *d, int floor_ts, int reused, uint64_t *lat, int n)
{
    const ktcli_vk_fn_t *vk = &d->app.vk;
    uint32_t push = 0;
    for (int i = 0; i < n; i++) {
        uint64_t t0 = kt_now_ns();
        if (reused) {
            if (ktcli_vk_submit(&d->dev, d->reused, d->fence) != 0 || ktcli_vk_wait(&d->dev, d->fence) != 0)
                exit(1);
            lat[i] = kt_now_ns() - t0;
            continue;
        }
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
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts lat[0..n) and returns its q-quantile (ns). */
static double quantile(uint64_t *lat, int n, double q)
{
    qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
    return (double)lat[(int)(q * (n - 1) + 0.5)];
}

/* This process's threads: id, name and voluntary context switches (each one a sleep, so the next run of that
 * thread was a wake-up); how many were read. */
#define LAT_THREADS 64
typedef struct lat_thread_t {
    long tid;
    char comm[32];
    unsigned long long vol;
} lat_thread_t;

static int threads_read(lat_thread_t *t, int max)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && n < max && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], line[128];
        t[n] = (lat_thread_t){.tid = atol(e->d_name)};
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(t[n].comm, sizeof t[n].comm, f))
            t[n].comm[strcspn(t[n].comm, "\n")] = 0;
        if (f)
            fclose(f);
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "voluntary_ctxt_switches: %llu", &t[n].vol) == 1)
                break;
        if (f)
            fclose(f);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* `vulkan_latency timed|untimed|floor|reuse-timed|reuse-untimed [cycles]`: that variant alone, for profilers
 * (perf, strace); no verdict. Then, per thread of the process, its voluntary context switches per cycle during
 * the run: how often each was woken (the program's own thread sleeps in its fence wait once per cycle). */
static int run_one(lat_dev_t *plain, lat_dev_t *layered, const char *which, int cycles)
{
    int v = !strcmp(which, "timed")           ? TIMED
            : !strcmp(which, "floor")         ? FLOOR
            : !strcmp(which, "untimed")       ? UNTIMED
            : !strcmp(which, "reuse-untimed") ? REUSE_UNTIMED
            : !strcmp(which, "reuse-timed")   ? REUSE_TIMED
                                              : -1;
    if (v < 0) {
        fprintf(stderr, "usage: vulkan_latency [timed|untimed|floor|reuse-timed|reuse-untimed [cycles]]\n");
        return 2;
    }
    static uint64_t lat[ROUNDS * PER_ROUND];
    if (cycles < 1 || cycles > ROUNDS * PER_ROUND)
        cycles = ROUNDS * PER_ROUND;
    static lat_thread_t t0[LAT_THREADS], t1[LAT_THREADS];
    int n0 = threads_read(t0, LAT_THREADS);
    run(v == TIMED || v == REUSE_TIMED ? layered : plain, v == FLOOR, v >= REUSE_UNTIMED, lat, cycles);
    int n1 = threads_read(t1, LAT_THREADS);
    for (int i = 0; i < n1; i++)
        for (int k = 0; k < n0; k++)
            if (t0[k].tid == t1[i].tid && t1[i].vol > t0[k].vol)
                printf("  thread %-16s %.2f wake-ups per cycle\n", t1[i].comm,
                       (double)(t1[i].vol - t0[k].vol) / cycles);
    printf("%s: median of %d cycles %.1f us\n", which, cycles, quantile(lat, cycles, 0.5) / 1e3);
    return 0;
}

int main(int argc, char **argv)
{
    /* One device per kind of variant (untimed, floor, layer; the reused variants share the untimed and the
     * layer's): each idles while the others run their rounds, so all pay a like cost of waking their driver's
     * threads again (with untimed and floor on one device, that device idled for one round in three and the
     * timed one for two). */
    static lat_dev_t plain, floor_dev, layered;
    if (open_dev(&plain) != 0 || open_dev(&floor_dev) != 0) {
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
    if (argc > 1) {
        rc = run_one(&plain, &layered, argv[1], argc > 2 ? atoi(argv[2]) : 0);
        close_dev(&layered);
        close_dev(&floor_dev);
        close_dev(&plain);
        return rc;
    }
    printf("device: %s; %d submit-and-wait cycles per variant per round\n", plain.dev.props.deviceName, PER_ROUND);
    static uint64_t lat[VARIANTS][ROUNDS * PER_ROUND], warm[PER_ROUND];
    run(&plain, 0, 0, warm, PER_ROUND); /* warm-up: shader compilation, the layer's context */
    run(&floor_dev, 1, 0, warm, PER_ROUND);
    run(&layered, 0, 0, warm, PER_ROUND);
    run(&plain, 0, 1, warm, PER_ROUND);
    run(&layered, 0, 1, warm, PER_ROUND);
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < VARIANTS; i++) { /* rotate the order so drift in machine load cancels */
            int v = (i + r) % VARIANTS;
            run(v == TIMED || v == REUSE_TIMED ? &layered : v == FLOOR ? &floor_dev : &plain, v == FLOOR,
                v >= REUSE_UNTIMED, lat[v] + r * PER_ROUND, PER_ROUND);
        }
    const int n = ROUNDS * PER_ROUND;
    const char *label[VARIANTS] = {"untimed", "two timestamps", "timed through the layer", "reused, untimed",
                                   "reused, through the layer"};
    double med[VARIANTS];
    for (int v = 0; v < VARIANTS; v++) {
        double q1 = quantile(lat[v], n, 0.25);
        med[v] = quantile(lat[v], n, 0.5);
        printf("%-24s median %6.1f us  (quartiles %.1f .. %.1f us)\n", label[v], med[v] / 1e3, q1 / 1e3,
               quantile(lat[v], n, 0.75) / 1e3);
    }
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
    close_dev(&floor_dev);
    close_dev(&plain);
    printf("vulkan_latency: timed_vs_untimed=%.3f floor_vs_untimed=%.3f reuse_timed_vs_untimed=%.3f\n",
           med[TIMED] / med[UNTIMED], med[FLOOR] / med[UNTIMED], med[REUSE_TIMED] / med[REUSE_UNTIMED]);
    return 0;
}
