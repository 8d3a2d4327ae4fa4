/* demo_vulkan.c — `ktiming demo` on Vulkan: box blur, saxpy and a reduction as compute shaders on every device,
 * each warmed up, then timed per dispatch with kt_vk_begin/kt_vk_end, and its results checked on the host. */
#include "cli.h"

#if defined(KTCLI_NO_VULKAN) || defined(KTCLI_NO_SHADERS)

int ktcli_demo_vulkan(const ktcli_demo_opts_t *opts)
{
    (void)opts;
    fprintf(stderr, "vulkan: built without Vulkan headers or glslangValidator; no Vulkan demo\n");
    return KT_EUNAVAILABLE;
}

#else

#include "vk_app.h"

#include "blur_spv.h"
#include "reduce_spv.h"
#include "saxpy_spv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEMO_WIDTH 1024u
#define REDUCE_SPAN (256u * 32u) /* values per reduce workgroup (reduce.comp: 256 threads x PER_THREAD) */

/* Everything one device's demo uses. */
typedef struct demo_t {
    ktcli_vk_device_t dev;       /* device and queue */
    kt_vk_ctx_t *kv;             /* ktiming context */
    ktcli_vk_buffer_t a, b, c;   /* input, output, partial sums */
    ktcli_vk_pipeline_t blur, saxpy, reduce; /* kernels */
    VkCommandBuffer cmd;         /* reused per batch */
    VkFence fence;               /* batch completion */
    uint32_t n;                  /* floats per buffer (DEMO_WIDTH x height) */
    uint32_t height;             /* image rows */
    int verbose;                 /* progress lines */
} demo_t;

/* Push constants of each kernel. */
typedef struct saxpy_push_t { uint32_t n; float a; } saxpy_push_t;
typedef struct blur_push_t { uint32_t w, h; } blur_push_t;
typedef struct reduce_push_t { uint32_t n; } reduce_push_t;

/* Record `count` dispatches of one kernel (timed under `name` when name != NULL), submit, wait, collect. */
static int run_batch(demo_t *d, const ktcli_vk_pipeline_t *p, const void *push, uint32_t gx, uint32_t gy,
                     int count, const char *name)
{
    int rc = ktcli_vk_cmd_begin(&d->dev, d->cmd);
    if (rc)
        return rc;
    for (int i = 0; i < count; i++) {
        if (name && (rc = kt_vk_begin(d->kv, d->cmd, name)) != 0 && rc != KT_EFULL)
            return rc;
        ktcli_vk_dispatch(&d->dev, d->cmd, p, push, gx, gy);
        if (name && (rc = kt_vk_end(d->kv, d->cmd)) != 0)
            return rc;
        ktcli_vk_barrier(&d->dev, d->cmd);
    }
    if ((rc = ktcli_vk_cmd_end(&d->dev, d->cmd)) != 0 || (rc = ktcli_vk_submit(&d->dev, d->cmd, d->fence)) != 0 ||
        (rc = ktcli_vk_wait(&d->dev, d->fence)) != 0)
        return rc;
    kt_vk_collect_wait(d->kv, UINT64_C(5000000000));
    return 0;
}

static void fill_inputs(demo_t *d)
{
    float *a = d->a.map, *b = d->b.map;
    for (uint32_t i = 0; i < d->n; i++) {
        a[i] = (float)(i % 17u);
        b[i] = (float)(i % 13u);
    }
}

static int check_blur(const demo_t *d)
{
    const float *src = d->a.map, *dst = d->b.map;
    uint32_t w = DEMO_WIDTH, h = d->height;
    for (uint32_t y = 0; y < h; y += (y < 4 || y + 4 > h) ? 1u : 61u) {
        for (uint32_t x = 0; x < w; x++) {
            float sum = 0.0f;
            for (int dy = -1; dy <= 1; dy++) {
                int yy = (int)y + dy;
                yy = yy < 0 ? 0 : (yy >= (int)h ? (int)h - 1 : yy);
                for (int dx = -1; dx <= 1; dx++) {
                    int xx = (int)x + dx;
                    xx = xx < 0 ? 0 : (xx >= (int)w ? (int)w - 1 : xx);
                    sum += src[(uint32_t)yy * w + (uint32_t)xx];
                }
            }
            float want = sum / 9.0f;
            if (fabsf(dst[y * w + x] - want) > 1e-4f * (1.0f + fabsf(want))) {
                fprintf(stderr, "vulkan demo: blur wrong at (%u,%u): %g, want %g\n", x, y, dst[y * w + x], want);
                return KT_EBACKEND;
            }
        }
    }
    return 0;
}

static int check_saxpy(const demo_t *d, int applied, float alpha)
{
    const float *x = d->a.map, *y = d->b.map;
    for (uint32_t i = 0; i < d->n; i++) {
        float want = (float)(i % 13u) + (float)applied * alpha * x[i];
        if (fabsf(y[i] - want) > 1e-3f * (1.0f + fabsf(want))) {
            fprintf(stderr, "vulkan demo: saxpy wrong at %u: %g, want %g\n", i, y[i], want);
            return KT_EBACKEND;
        }
    }
    return 0;
}

static int check_reduce(const demo_t *d)
{
    const float *v = d->a.map, *part = d->c.map;
    double want = 0, got = 0;
    for (uint32_t i = 0; i < d->n; i++)
        want += v[i];
    for (uint32_t g = 0; g < (d->n + REDUCE_SPAN - 1u) / REDUCE_SPAN; g++)
        got += part[g];
    if (fabs(got - want) > 1e-5 * want) {
        fprintf(stderr, "vulkan demo: reduce sum %.1f, want %.1f\n", got, want);
        return KT_EBACKEND;
    }
    return 0;
}

static int demo_kernels(demo_t *d, const ktcli_demo_opts_t *opts)
{
    int warm = opts->warmup > 0 ? opts->warmup : 0, n = opts->dispatches > 0 ? opts->dispatches : 10;
    int rc;
    fill_inputs(d);
    blur_push_t bp = {DEMO_WIDTH, d->height};
    if ((warm && (rc = run_batch(d, &d->blur, &bp, DEMO_WIDTH / 16u, (d->height + 15u) / 16u, warm, NULL))) ||
        (rc = run_batch(d, &d->blur, &bp, DEMO_WIDTH / 16u, (d->height + 15u) / 16u, n, "box_blur")) ||
        (rc = check_blur(d)))
        return rc;
    if (d->verbose)
        fprintf(stderr, "vulkan: %s: box_blur %ux%u x%d ok\n", d->dev.props.deviceName, DEMO_WIDTH, d->height, n);

    fill_inputs(d);
    saxpy_push_t sp = {d->n, 2.0f};
    uint32_t groups = (d->n + 255u) / 256u;
    if ((warm && (rc = run_batch(d, &d->saxpy, &sp, groups, 1, warm, NULL))) ||
        (rc = run_batch(d, &d->saxpy, &sp, groups, 1, n, "saxpy")) || (rc = check_saxpy(d, warm + n, sp.a)))
        return rc;
    if (d->verbose)
        fprintf(stderr, "vulkan: %s: saxpy n=%u x%d ok\n", d->dev.props.deviceName, d->n, n);

    fill_inputs(d);
    reduce_push_t rp = {d->n};
    uint32_t rgroups = (d->n + REDUCE_SPAN - 1u) / REDUCE_SPAN;
    if ((warm && (rc = run_batch(d, &d->reduce, &rp, rgroups, 1, warm, NULL))) ||
        (rc = run_batch(d, &d->reduce, &rp, rgroups, 1, n, "reduce")) || (rc = check_reduce(d)))
        return rc;
    if (d->verbose)
        fprintf(stderr, "vulkan: %s: reduce n=%u x%d ok\n", d->dev.props.deviceName, d->n, n);
    return 0;
}

static int demo_device(ktcli_vk_app_t *app, uint32_t index, const ktcli_demo_opts_t *opts)
{
    demo_t d;
    memset(&d, 0, sizeof(d));
    d.verbose = opts->verbose;
    int rc = ktcli_vk_device_open(app, index, NULL, &d.dev);
    if (rc) {
        fprintf(stderr, "vulkan: device %u: cannot open (%s)\n", index, kt_strerror(rc));
        return rc;
    }
    kt_vk_desc_t desc = ktcli_vk_device_desc(&d.dev);
    desc.ring_size = (uint32_t)(opts->dispatches > 0 ? opts->dispatches : 10) + 64u;
    if (desc.ring_size < KT_VK_RING_DEFAULT)
        desc.ring_size = KT_VK_RING_DEFAULT;
    if ((rc = kt_vk_ctx_create(&desc, &d.kv)) != 0) {
        fprintf(stderr, "vulkan: %s: no timestamps (%s)\n", d.dev.props.deviceName, kt_strerror(rc));
        ktcli_vk_device_close(&d.dev);
        return rc;
    }
    size_t bytes = opts->bytes ? opts->bytes : (size_t)8 << 20;
    d.height = (uint32_t)(bytes / 2u / sizeof(float) / DEMO_WIDTH);
    if (d.height < 16u)
        d.height = 16u;
    d.n = DEMO_WIDTH * d.height;
    const ktcli_vk_buffer_t *ab[2] = {&d.a, &d.b}, *ac[2] = {&d.a, &d.c};
    if ((rc = ktcli_vk_buffer_create(&d.dev, (VkDeviceSize)d.n * sizeof(float), &d.a)) ||
        (rc = ktcli_vk_buffer_create(&d.dev, (VkDeviceSize)d.n * sizeof(float), &d.b)) ||
        (rc = ktcli_vk_buffer_create(&d.dev, (VkDeviceSize)((d.n + REDUCE_SPAN - 1u) / REDUCE_SPAN) * sizeof(float),
                                     &d.c)) ||
        (rc = ktcli_vk_pipeline_create(&d.dev, blur_spv, sizeof(blur_spv), ab, 2, sizeof(blur_push_t), &d.blur)) ||
        (rc = ktcli_vk_pipeline_create(&d.dev, saxpy_spv, sizeof(saxpy_spv), ab, 2, sizeof(saxpy_push_t), &d.saxpy)) ||
        (rc = ktcli_vk_pipeline_create(&d.dev, reduce_spv, sizeof(reduce_spv), ac, 2, sizeof(reduce_push_t),
                                       &d.reduce)) ||
        (rc = ktcli_vk_cmd_alloc(&d.dev, &d.cmd)) || (rc = ktcli_vk_fence_create(&d.dev, &d.fence)))
        fprintf(stderr, "vulkan: %s: setup failed (%s)\n", d.dev.props.deviceName, kt_strerror(rc));
    else
        rc = demo_kernels(&d, opts);

    app->vk.vkDeviceWaitIdle(d.dev.device);
    kt_vk_ctx_destroy(d.kv);
    ktcli_vk_fence_destroy(&d.dev, d.fence);
    ktcli_vk_cmd_free(&d.dev, d.cmd);
    ktcli_vk_pipeline_destroy(&d.dev, &d.reduce);
    ktcli_vk_pipeline_destroy(&d.dev, &d.saxpy);
    ktcli_vk_pipeline_destroy(&d.dev, &d.blur);
    ktcli_vk_buffer_destroy(&d.dev, &d.c);
    ktcli_vk_buffer_destroy(&d.dev, &d.b);
    ktcli_vk_buffer_destroy(&d.dev, &d.a);
    ktcli_vk_device_close(&d.dev);
    return rc;
}

int ktcli_demo_vulkan(const ktcli_demo_opts_t *opts)
{
    static ktcli_vk_app_t app; /* large; one demo at a time */
    int rc = ktcli_vk_app_init(&app, 1);
    if (rc) {
        fprintf(stderr, "vulkan: no Vulkan loader or device; skipping\n");
        return KT_EUNAVAILABLE;
    }
    int ok = 0, failed = 0;
    for (uint32_t i = 0; i < app.device_count; i++) {
        rc = demo_device(&app, i, opts);
        if (rc == 0)
            ok++;
        else if (rc != KT_EUNAVAILABLE)
            failed++;
    }
    ktcli_vk_app_fini(&app);
    if (failed)
        return KT_EBACKEND;
    return ok ? 0 : KT_EUNAVAILABLE;
}

#endif
