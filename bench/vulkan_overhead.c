/* vulkan_overhead.c — submit throughput of small compute dispatches recorded by 2 threads (each its own command
 * pool, one queue shared under a mutex): untimed; with the same timestamp commands ktiming records but written by
 * hand and never read (what the driver charges for timestamps); timed with kt_vk_begin/kt_vk_end and collected
 * after every submission (the recording threads contend on the context as a multi-threaded engine's would);
 * and untimed code recorded on a second device whose instance enables ktiming's layer, VK_LAYER_KTIMING_timing
 * (what `ktiming run` costs the same program: the layer's hooks on every command plus its timing).
 * Interleaved round by round in one run.
 * Next to last line: vulkan_overhead: layer_vs_untimed=<median ratio> (absent when the layer is not built).
 * Last line: vulkan_overhead: timed_vs_untimed=<median of per-round throughput ratios>. */
#include "vk_app.h"

#include "saxpy_spv.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1024u          /* floats: a small dispatch (4 workgroups) */
#define PER_SUBMIT 8     /* dispatches per command buffer */
#define IN_FLIGHT 2      /* command buffers in flight */
#define ROUNDS 9
#define ROUND_NS UINT64_C(300000000) /* per variant per round */
#define LANES 2          /* recording threads */

enum { UNTIMED = 0, RAW = 1, TIMED = 2, LAYER = 3, VARIANTS = 4 };
static const char *const kVariant[VARIANTS] = {"untimed", "raw timestamps", "ktiming", "layer"};

/* One recording thread's objects (command pools are externally synchronised: one per thread). */
typedef struct lane_t {
    VkCommandPool pool;
    VkCommandBuffer cmd[IN_FLIGHT];
    VkFence fence[IN_FLIGHT];
    VkQueryPool raw_pool;      /* hand-written timestamps of the RAW variant */
} lane_t;

/* The bench's Vulkan objects (one set per device: the plain one, and the one under the layer). */
typedef struct bench_t {
    ktcli_vk_app_t app;
    ktcli_vk_device_t dev;
    ktcli_vk_buffer_t x, y;
    ktcli_vk_pipeline_t saxpy;
    lane_t lane[LANES];
    pthread_mutex_t queue_lock; /* VkQueue is externally synchronised */
    kt_vk_ctx_t *kv;
    kt_kernel_id_t kernel;
} bench_t;

/* One thread's share of a variant's round. */
typedef struct lane_run_t {
    bench_t *b;
    lane_t *l;
    int variant;
    uint64_t t0;
    uint64_t dispatches; /* out */
} lane_run_t;

static int submit(bench_t *b, VkCommandBuffer cmd, VkFence fence)
{
    pthread_mutex_lock(&b->queue_lock);
    int rc = ktcli_vk_submit(&b->dev, cmd, fence);
    pthread_mutex_unlock(&b->queue_lock);
    return rc;
}

static void *lane_main(void *arg)
{
    lane_run_t *r = arg;
    bench_t *b = r->b;
    lane_t *l = r->l;
    const ktcli_vk_fn_t *vk = &b->dev.app->vk;
    int timed = r->variant == TIMED;
    struct { uint32_t n; float a; } push = {N, 0.5f};
    int busy[IN_FLIGHT] = {0};
    for (uint64_t i = 0;; i++) {
        int k = (int)(i % IN_FLIGHT);
        if (busy[k]) {
            if (ktcli_vk_wait(&b->dev, l->fence[k]) != 0)
                exit(1);
            busy[k] = 0;
            if (timed)
                kt_vk_collect(b->kv);
        }
        if (kt_now_ns() - r->t0 >= ROUND_NS)
            break;
        if (ktcli_vk_cmd_begin(&b->dev, l->cmd[k]) != 0)
            exit(1);
        for (int d = 0; d < PER_SUBMIT; d++) {
            uint32_t q = (uint32_t)(2 * (k * PER_SUBMIT + d));
            if (timed)
                kt_vk_begin_id(b->kv, l->cmd[k], b->kernel);
            if (r->variant == RAW) {
                vk->vkCmdResetQueryPool(l->cmd[k], l->raw_pool, q, 2);
                vk->vkCmdWriteTimestamp(l->cmd[k], VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, l->raw_pool, q);
            }
            ktcli_vk_dispatch(&b->dev, l->cmd[k], &b->saxpy, &push, N / 256u, 1);
            if (r->variant == RAW)
                vk->vkCmdWriteTimestamp(l->cmd[k], VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, l->raw_pool, q + 1);
            if (timed)
                kt_vk_end(b->kv, l->cmd[k]);
            ktcli_vk_barrier(&b->dev, l->cmd[k]);
        }
        if (ktcli_vk_cmd_end(&b->dev, l->cmd[k]) != 0 || submit(b, l->cmd[k], l->fence[k]) != 0)
            exit(1);
        busy[k] = 1;
        r->dispatches += PER_SUBMIT;
    }
    for (int k = 0; k < IN_FLIGHT; k++)
        if (busy[k] && ktcli_vk_wait(&b->dev, l->fence[k]) != 0)
            exit(1);
    return NULL;
}

/* Run submissions of one variant on LANES threads for about ROUND_NS; returns dispatches per second. */
static double run(bench_t *b, int variant)
{
    lane_run_t r[LANES];
    pthread_t th[LANES];
    uint64_t t0 = kt_now_ns();
    for (int i = 0; i < LANES; i++) {
        r[i] = (lane_run_t){.b = b, .l = &b->lane[i], .variant = variant, .t0 = t0};
        if (pthread_create(&th[i], NULL, lane_main, &r[i]) != 0)
            exit(1);
    }
    uint64_t dispatches = 0;
    for (int i = 0; i < LANES; i++) {
        pthread_join(th[i], NULL);
        dispatches += r[i].dispatches;
    }
    if (variant == TIMED)
        kt_vk_collect_wait(b->kv, UINT64_C(5000000000));
    return (double)dispatches / ((double)(kt_now_ns() - t0) / 1e9);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Buffers, pipeline and the lanes' pools, command buffers, fences and query pools of an opened device. */
static int bench_objects(bench_t *b)
{
    const ktcli_vk_buffer_t *xy[2] = {&b->x, &b->y};
    if (ktcli_vk_buffer_create(&b->dev, N * sizeof(float), &b->x) != 0 ||
        ktcli_vk_buffer_create(&b->dev, N * sizeof(float), &b->y) != 0 ||
        ktcli_vk_pipeline_create(&b->dev, saxpy_spv, sizeof(saxpy_spv), xy, 2, 8, &b->saxpy) != 0)
        return -1;
    pthread_mutex_init(&b->queue_lock, NULL);
    VkQueryPoolCreateInfo qpi = {
        .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
        .queryType = VK_QUERY_TYPE_TIMESTAMP,
        .queryCount = 2 * IN_FLIGHT * PER_SUBMIT,
    };
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = b->dev.family,
    };
    const ktcli_vk_fn_t *vk = &b->app.vk;
    for (int i = 0; i < LANES; i++) {
        lane_t *l = &b->lane[i];
        if (vk->vkCreateCommandPool(b->dev.device, &pci, NULL, &l->pool) != VK_SUCCESS ||
            vk->vkCreateQueryPool(b->dev.device, &qpi, NULL, &l->raw_pool) != VK_SUCCESS)
            return -1;
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = l->pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = IN_FLIGHT};
        if (vk->vkAllocateCommandBuffers(b->dev.device, &ai, l->cmd) != VK_SUCCESS)
            return -1;
        for (int k = 0; k < IN_FLIGHT; k++)
            if (ktcli_vk_fence_create(&b->dev, &l->fence[k]) != 0)
                return -1;
    }
    return 0;
}

static void bench_close(bench_t *b)
{
    const ktcli_vk_fn_t *vk = &b->app.vk;
    vk->vkDeviceWaitIdle(b->dev.device);
    if (b->kv)
        kt_vk_ctx_destroy(b->kv);
    for (int i = 0; i < LANES; i++) {
        vk->vkDestroyQueryPool(b->dev.device, b->lane[i].raw_pool, NULL);
        for (int k = 0; k < IN_FLIGHT; k++)
            ktcli_vk_fence_destroy(&b->dev, b->lane[i].fence[k]);
        vk->vkDestroyCommandPool(b->dev.device, b->lane[i].pool, NULL);
    }
    ktcli_vk_pipeline_destroy(&b->dev, &b->saxpy);
    ktcli_vk_buffer_destroy(&b->dev, &b->y);
    ktcli_vk_buffer_destroy(&b->dev, &b->x);
    ktcli_vk_device_close(&b->dev);
    ktcli_vk_app_fini(&b->app);
}

/* The second device, through an instance with VK_LAYER_KTIMING_timing enabled (found with VK_ADD_LAYER_PATH, as
 * `ktiming run` does; the layer shares this process's libktiming). 0, or -1 when the layer is not there. */
static int open_layered(bench_t *bl)
{
#ifdef KT_BENCH_LAYER_DIR
    setenv("VK_ADD_LAYER_PATH", KT_BENCH_LAYER_DIR, 1);
    setenv("VK_INSTANCE_LAYERS", "VK_LAYER_KTIMING_timing", 1);
    bl->app.quiet = 1;
    int rc = ktcli_vk_app_init(&bl->app, 0) == 0 && ktcli_vk_device_open(&bl->app, 0, NULL, &bl->dev) == 0 &&
                     bench_objects(bl) == 0 ? 0 : -1;
    unsetenv("VK_INSTANCE_LAYERS");
    unsetenv("VK_ADD_LAYER_PATH");
    return rc;
#else
    (void)bl;
    return -1;
#endif
}

int main(void)
{
    static bench_t b, bl;
    if (ktcli_vk_app_init(&b.app, 0) != 0 || ktcli_vk_device_open(&b.app, 0, NULL, &b.dev) != 0) {
        printf("vulkan_overhead: skipped (no Vulkan device)\n");
        return 0;
    }
    kt_vk_desc_t desc = ktcli_vk_device_desc(&b.dev);
    const char *mode = getenv("KTIMING_BENCH_VK_READBACK"); /* "copy" or "thread": compare the two */
    if (mode)
        desc.readback = !strcmp(mode, "copy") ? KT_VK_READBACK_COPY : KT_VK_READBACK_THREAD;
    if (kt_vk_ctx_create(&desc, &b.kv) != 0 || bench_objects(&b) != 0) {
        fprintf(stderr, "vulkan_overhead: setup failed\n");
        return 1;
    }
    int layered = open_layered(&bl) == 0;
    if (!layered)
        printf("layer variant: skipped (VK_LAYER_KTIMING_timing not built or not loadable)\n");
    b.kernel = kt_vk_kernel(b.kv, "bench_saxpy");
    printf("device: %s, %u floats per dispatch, %d dispatches per submit, %d submits in flight per thread, %d "
           "recording threads\n", b.dev.props.deviceName, N, PER_SUBMIT, IN_FLIGHT, LANES);
    int nvar = layered ? VARIANTS : LAYER;

    kt_vk_stats_t st;
    kt_vk_stats(b.kv, &st);
    printf("ktiming readback: %s\n", st.readback == KT_VK_READBACK_COPY ? "copies (kt_vk_end)" : "collector thread");
    for (int v = 0; v < nvar; v++) /* warm-up: shader compilation, allocator, ring */
        run(v == LAYER ? &bl : &b, v == LAYER ? UNTIMED : v);
    double ratio[VARIANTS][ROUNDS] = {{0}};
    for (int r = 0; r < ROUNDS; r++) {
        double rate[VARIANTS] = {0};
        for (int i = 0; i < nvar; i++) { /* rotate the order so drift in machine load cancels */
            int v = (i + r) % nvar;
            rate[v] = v == LAYER ? run(&bl, UNTIMED) : run(&b, v); /* the layer times what it sees untimed */
        }
        for (int v = 0; v < nvar; v++)
            ratio[v][r] = rate[v] / rate[UNTIMED];
        printf("round %2d: untimed %8.0f/s  raw timestamps %8.0f/s (%.3f)  ktiming %8.0f/s (%.3f, %.3f of raw)", r,
               rate[UNTIMED], rate[RAW], ratio[RAW][r], rate[TIMED], ratio[TIMED][r], rate[TIMED] / rate[RAW]);
        if (layered)
            printf("  layer %8.0f/s (%.3f)", rate[LAYER], ratio[LAYER][r]);
        printf("\n");
    }
    double vs_raw[ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        vs_raw[r] = ratio[TIMED][r] / ratio[RAW][r];
    for (int v = 0; v < nvar; v++)
        qsort(ratio[v], ROUNDS, sizeof(double), cmp_double);
    qsort(vs_raw, ROUNDS, sizeof(double), cmp_double);
    printf("median throughput vs untimed: %s %.3f, %s %.3f; ktiming vs raw timestamps %.3f\n", kVariant[RAW],
           ratio[RAW][ROUNDS / 2], kVariant[TIMED], ratio[TIMED][ROUNDS / 2], vs_raw[ROUNDS / 2]);
    kt_vk_stats(b.kv, &st);
    printf("timed dispatches collected %llu, dropped %llu, longest collect %.3f ms\n",
           (unsigned long long)st.collected, (unsigned long long)st.dropped, (double)st.collect_max_ns / 1e6);

    bench_close(&b);
    if (layered) {
        bench_close(&bl);
        printf("vulkan_overhead: layer_vs_untimed=%.3f\n", ratio[LAYER][ROUNDS / 2]);
    }
    printf("vulkan_overhead: timed_vs_untimed=%.3f\n", ratio[TIMED][ROUNDS / 2]);
    return 0;
}
