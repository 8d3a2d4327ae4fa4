/* vulkan_clock.c — the Vulkan device clock as `ktiming run` sees it: (1) how far a dispatch span may be off (its
 * uncertainty) in the first 100 ms, up to 1 s and after, on the calibrated path and on the bracketed one (a Vulkan
 * 1.0 program: no calibrated timestamps, samples only inside the program's submissions); (2) what a timed
 * vkQueueSubmit costs the program on the bracketed path with three long dispatches queued ahead (a fresh context
 * each time, so a fit is due). A submit-and-wait loop of one tiny timed dispatch every ~2 ms for 1.5 s, through
 * kt_vk_queue_submit as the layer does. Last line: vulkan_clock: <figures>. Absolute times: read them against
 * each other, on one machine. */
#include "vk_app.h"

#include "busy_spv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct clk_t {
    ktcli_vk_app_t app;
    ktcli_vk_device_t dev;
    ktcli_vk_buffer_t out;
    ktcli_vk_pipeline_t busy;
    VkCommandBuffer probe, longc[3];
    VkFence fence, longf;
} clk_t;

static void nap_ms(int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

static kt_vk_ctx_t *open_ctx(clk_t *c, int calibrated)
{
    kt_vk_desc_t d = ktcli_vk_device_desc(&c->dev);
    d.queue = VK_NULL_HANDLE; /* as the layer: no submissions of ktiming's own outside the program's */
    d.per_submission = 1;
    if (!calibrated)
        d.calibration = KT_VK_CALIBRATION_NONE;
    kt_vk_ctx_t *kv = NULL;
    return kt_vk_ctx_create(&d, &kv) == 0 ? kv : NULL;
}

/* The probe: one tiny timed dispatch, reusable. */
static void record_probe(clk_t *c, kt_vk_ctx_t *kv)
{
    const ktcli_vk_fn_t *vk = &c->app.vk;
    uint32_t iters = 1;
    vk->vkResetCommandBuffer(c->probe, 0);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    vk->vkBeginCommandBuffer(c->probe, &bi);
    kt_vk_begin(kv, c->probe, "probe");
    ktcli_vk_dispatch(&c->dev, c->probe, &c->busy, &iters, 1, 1);
    kt_vk_end(kv, c->probe);
    vk->vkEndCommandBuffer(c->probe);
}

static uint64_t submit_probe(clk_t *c, kt_vk_ctx_t *kv)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &c->probe};
    uint64_t t0 = kt_now_ns();
    kt_vk_queue_submit(kv, c->dev.queue, 1, &si, c->fence);
    return kt_now_ns() - t0;
}

/* Worst uncertainty of the probe's spans starting in [lo, hi) ns after t0. */
static double worst_us(const kt_snapshot_t *s, uint64_t t0, uint64_t lo, uint64_t hi)
{
    const kt_kernel_timing_t *e = kt_snapshot_find(s, "probe", KT_BACKEND_VULKAN, NULL);
    uint64_t worst = 0;
    for (size_t i = 0; e && i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        if (sp->entry != (size_t)(e - s->entries) || sp->start_ns < t0 + lo || sp->start_ns >= t0 + hi)
            continue;
        if (sp->uncertainty_ns > worst)
            worst = sp->uncertainty_ns;
    }
    return (double)worst / 1e3;
}

/* One path: 1.5 s of submit-and-wait; the worst span uncertainty per window, in us. */
static int bounds(clk_t *c, int calibrated, double out[3])
{
    kt_reset();
    kt_vk_ctx_t *kv = open_ctx(c, calibrated);
    if (!kv)
        return -1;
    record_probe(c, kv);
    uint64_t t0 = kt_now_ns();
    while (kt_now_ns() - t0 < UINT64_C(1500000000)) {
        submit_probe(c, kv);
        ktcli_vk_wait(&c->dev, c->fence);
        kt_vk_collect(kv);
        nap_ms(2);
    }
    kt_snapshot_t *s = kt_snapshot();
    out[0] = worst_us(s, t0, 0, 100000000);
    out[1] = worst_us(s, t0, 100000000, 1000000000);
    out[2] = worst_us(s, t0, 1000000000, UINT64_MAX / 2);
    kt_snapshot_free(s);
    kt_vk_discard(kv, c->probe);
    kt_vk_ctx_destroy(kv);
    return 0;
}

/* Bracketed path: a timed submission behind three ~20 ms dispatches of the program; worst and median of 5. */
static void blocking(clk_t *c, double *worst_ms, double *median_ms, double *alone_ms)
{
    const ktcli_vk_fn_t *vk = &c->app.vk;
    /* workgroups for ~20 ms */
    uint32_t iters = 60000, groups = 16;
    ktcli_vk_cmd_begin(&c->dev, c->longc[0]);
    ktcli_vk_dispatch(&c->dev, c->longc[0], &c->busy, &iters, groups, 1);
    ktcli_vk_cmd_end(&c->dev, c->longc[0]);
    uint64_t t0 = kt_now_ns();
    ktcli_vk_submit(&c->dev, c->longc[0], c->longf);
    ktcli_vk_wait(&c->dev, c->longf);
    double per_group = (double)(kt_now_ns() - t0) / groups;
    groups = (uint32_t)(20e6 / per_group) + 1;
    for (int k = 0; k < 3; k++) {
        ktcli_vk_cmd_begin(&c->dev, c->longc[k]);
        ktcli_vk_dispatch(&c->dev, c->longc[k], &c->busy, &iters, groups, 1);
        ktcli_vk_cmd_end(&c->dev, c->longc[k]);
    }
    double t[5], a[5];
    for (int r = 0; r < 5; r++) {
        kt_reset();
        kt_vk_ctx_t *kv = open_ctx(c, 0);
        if (!kv)
            return;
        record_probe(c, kv);
        a[r] = (double)submit_probe(c, kv) / 1e6; /* alone: the queue idle */
        ktcli_vk_wait(&c->dev, c->fence);
        kt_vk_collect(kv);
        kt_vk_ctx_destroy(kv);
        kt_reset();
        kv = open_ctx(c, 0); /* fresh: a fit is due again */
        record_probe(c, kv);
        for (int k = 0; k < 3; k++) {
            VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                               .pCommandBuffers = &c->longc[k]};
            vk->vkQueueSubmit(c->dev.queue, 1, &si, k == 2 ? c->longf : VK_NULL_HANDLE);
        }
        t[r] = (double)submit_probe(c, kv) / 1e6;
        ktcli_vk_wait(&c->dev, c->fence);
        ktcli_vk_wait(&c->dev, c->longf);
        kt_vk_collect(kv);
        kt_vk_discard(kv, c->probe);
        kt_vk_ctx_destroy(kv);
    }
    *worst_ms = 0;
    for (int r = 0; r < 5; r++)
        if (t[r] > *worst_ms)
            *worst_ms = t[r];
    for (int i = 1; i < 5; i++) /* sort for the medians */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    for (int i = 1; i < 5; i++)
        for (int j = i; j > 0 && a[j] < a[j - 1]; j--) {
            double x = a[j];
            a[j] = a[j - 1];
            a[j - 1] = x;
        }
    *median_ms = t[2];
    *alone_ms = a[2];
}

int main(void)
{
    static clk_t c;
    if (ktcli_vk_app_init(&c.app, 0) != 0 || ktcli_vk_device_open(&c.app, 0, NULL, &c.dev) != 0) {
        printf("vulkan_clock: skipped (no Vulkan device)\n");
        return 0;
    }
    const ktcli_vk_buffer_t *b[1] = {&c.out};
    if (ktcli_vk_buffer_create(&c.dev, 64 * sizeof(uint32_t), &c.out) != 0 ||
        ktcli_vk_pipeline_create(&c.dev, busy_spv, sizeof(busy_spv), b, 1, sizeof(uint32_t), &c.busy) != 0 ||
        ktcli_vk_cmd_alloc(&c.dev, &c.probe) != 0 || ktcli_vk_fence_create(&c.dev, &c.fence) != 0 ||
        ktcli_vk_fence_create(&c.dev, &c.longf) != 0) {
        fprintf(stderr, "vulkan_clock: setup failed\n");
        return 1;
    }
    for (int k = 0; k < 3; k++)
        ktcli_vk_cmd_alloc(&c.dev, &c.longc[k]);
    double cal[3] = {0}, br[3] = {0}, worst = 0, median = 0, alone = 0;
    int have_cal = c.dev.calibrated_ext && bounds(&c, 1, cal) == 0;
    bounds(&c, 0, br);
    blocking(&c, &worst, &median, &alone);
    if (have_cal)
        printf("calibrated: worst span uncertainty %.3f us (first 100 ms), %.3f us (0.1-1 s), %.3f us (after 1 s)\n",
               cal[0], cal[1], cal[2]);
    printf("bracketed:  worst span uncertainty %.3f us (first 100 ms), %.3f us (0.1-1 s), %.3f us (after 1 s)\n",
           br[0], br[1], br[2]);
    printf("bracketed submit behind 3 x 20 ms dispatches: worst %.3f ms, median %.3f ms of 5 (alone: %.3f ms)\n",
           worst, median, alone);
    c.app.vk.vkDeviceWaitIdle(c.dev.device);
    for (int k = 0; k < 3; k++)
        ktcli_vk_cmd_free(&c.dev, c.longc[k]);
    ktcli_vk_cmd_free(&c.dev, c.probe);
    ktcli_vk_fence_destroy(&c.dev, c.fence);
    ktcli_vk_fence_destroy(&c.dev, c.longf);
    ktcli_vk_pipeline_destroy(&c.dev, &c.busy);
    ktcli_vk_buffer_destroy(&c.dev, &c.out);
    ktcli_vk_device_close(&c.dev);
    ktcli_vk_app_fini(&c.app);
    printf("vulkan_clock: cal_100ms_us=%.3f cal_1s_us=%.3f br_100ms_us=%.3f br_1s_us=%.3f submit_worst_ms=%.3f\n",
           cal[0], cal[1], br[0], br[1], worst);
    return 0;
}
