/* demo_cpu.c — the CPU kernels of `ktiming demo`: a 3x3 box blur and saxpy on the thread pool
 * (kt_cpu_dispatch_2d) and a reduction in a scoped zone (KT_CPU_BEGIN/END), each checked against a reference
 * so the work is real and cannot be optimised away. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROW_WIDTH 1024u   /* pixels per image row / floats per saxpy row */
#define SAXPY_A 0.5f

/* Results folded here so no kernel's output is dead. */
static volatile double g_sink;

/* ---------------------------------------------------------------------------------------------------
 * Box blur: dst = mean of the 3x3 neighbourhood of src, edges clamped
 * ------------------------------------------------------------------------------------------------- */

typedef struct blur_ctx_t {
    const float *src; /* input image */
    float *dst;       /* output image */
    uint32_t height;  /* rows (width is the dispatch width) */
} blur_ctx_t;

static float blur_at(const float *src, uint32_t w, uint32_t h, uint32_t x, uint32_t y)
{
    uint32_t y0 = y ? y - 1 : 0, y1 = y + 1 < h ? y + 1 : h - 1;
    uint32_t x0 = x ? x - 1 : 0, x1 = x + 1 < w ? x + 1 : w - 1;
    const float *r0 = src + (size_t)y0 * w, *r1 = src + (size_t)y * w, *r2 = src + (size_t)y1 * w;
    return (r0[x0] + r0[x] + r0[x1] + r1[x0] + r1[x] + r1[x1] + r2[x0] + r2[x] + r2[x1]) * (1.0f / 9.0f);
}

static void blur_rows(uint32_t ya, uint32_t yb, uint32_t w, void *user)
{
    const blur_ctx_t *c = user;
    for (uint32_t y = ya; y < yb; y++) {
        float *out = c->dst + (size_t)y * w;
        out[0] = blur_at(c->src, w, c->height, 0, y);
        if (y > 0 && y + 1 < c->height) {
            const float *r0 = c->src + (size_t)(y - 1) * w, *r1 = r0 + w, *r2 = r1 + w;
            for (uint32_t x = 1; x + 1 < w; x++)
                out[x] = (r0[x - 1] + r0[x] + r0[x + 1] + r1[x - 1] + r1[x] + r1[x + 1] + r2[x - 1] + r2[x] +
                          r2[x + 1]) *
                         (1.0f / 9.0f);
        } else {
            for (uint32_t x = 1; x + 1 < w; x++)
                out[x] = blur_at(c->src, w, c->height, x, y);
        }
        out[w - 1] = blur_at(c->src, w, c->height, w - 1, y);
    }
}

/* ---------------------------------------------------------------------------------------------------
 * saxpy: y = a*x + y
 * ------------------------------------------------------------------------------------------------- */

typedef struct saxpy_ctx_t {
    const float *x; /* input */
    float *y;       /* accumulated in place */
} saxpy_ctx_t;

static void saxpy_rows(uint32_t ya, uint32_t yb, uint32_t w, void *user)
{
    const saxpy_ctx_t *c = user;
    for (size_t i = (size_t)ya * w, end = (size_t)yb * w; i < end; i++)
        c->y[i] = SAXPY_A * c->x[i] + c->y[i];
}

/* ---------------------------------------------------------------------------------------------------
 * Reduction: sum of n floats (four double accumulators), timed as a zone on the calling thread
 * ------------------------------------------------------------------------------------------------- */

static double reduce_sum(const float *v, size_t n)
{
    double a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += v[i];
        b += v[i + 1];
        c += v[i + 2];
        d += v[i + 3];
    }
    for (; i < n; i++)
        a += v[i];
    return (a + b) + (c + d);
}

static double reduce_zone(const float *v, size_t n)
{
    KT_CPU_BEGIN(zone, "reduce");
    double s = reduce_sum(v, n);
    KT_CPU_END(zone);
    return s;
}

/* ---------------------------------------------------------------------------------------------------
 * Driver
 * ------------------------------------------------------------------------------------------------- */

/* Runs `warmup` untimed then `dispatches` timed repetitions of step(i); stops at the first failure. */
typedef int (*step_cb)(void *ctx);

static int run_kernel(const ktcli_demo_opts_t *o, step_cb step, void *ctx)
{
    int was_enabled = kt_is_enabled();
    int rc = 0;
    if (o->warmup > 0) {
        kt_disable(); /* warm-up dispatches warm caches, pages and the pool; they are not measurements */
        for (int i = 0; i < o->warmup && !rc; i++) {
            rc = step(ctx);
            ktcli_progress_add(o->progress, 1);
        }
        if (was_enabled)
            kt_enable();
    }
    for (int i = 0; i < o->dispatches && !rc; i++) {
        rc = step(ctx);
        ktcli_progress_add(o->progress, 1);
    }
    return rc;
}

/* Shared state of the three kernels. */
typedef struct demo_cpu_t {
    blur_ctx_t blur;     /* box blur buffers */
    uint32_t blur_h;     /* image rows */
    saxpy_ctx_t saxpy;   /* saxpy buffers */
    uint32_t saxpy_rows; /* rows of ROW_WIDTH floats */
    const float *red;    /* reduction input */
    size_t red_n;        /* its length */
    double red_sum;      /* last result */
} demo_cpu_t;

static int step_blur(void *p)
{
    demo_cpu_t *d = p;
    return kt_cpu_dispatch_2d("box_blur", ROW_WIDTH, d->blur_h, blur_rows, &d->blur);
}

static int step_saxpy(void *p)
{
    demo_cpu_t *d = p;
    return kt_cpu_dispatch_2d("saxpy", ROW_WIDTH, d->saxpy_rows, saxpy_rows, &d->saxpy);
}

static int step_reduce(void *p)
{
    demo_cpu_t *d = p;
    d->red_sum = reduce_zone(d->red, d->red_n);
    return 0;
}

/* Inputs chosen so every result is exact in float/double: multiples of 1/4 with small magnitudes. */
static float x_at(size_t i) { return (float)(i % 17) * 0.25f; }
static float y0_at(size_t i) { return (float)(i % 5); }
static float img_at(size_t i) { return (float)((i * 7) % 256) / 256.0f; }

static int check_blur(const demo_cpu_t *d)
{
    const uint32_t w = ROW_WIDTH, h = d->blur_h;
    const uint32_t xs[] = {0, 1, w / 2, w - 2, w - 1}, ys[] = {0, 1, h / 2, h - 2, h - 1};
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 5; j++) {
            float want = blur_at(d->blur.src, w, h, xs[i], ys[j]);
            float got = d->blur.dst[(size_t)ys[j] * w + xs[i]];
            if (fabsf(want - got) > 1e-5f)
                return -1;
        }
    double sum = 0;
    for (size_t i = 0; i < (size_t)w * h; i++)
        sum += d->blur.dst[i];
    g_sink += sum;
    return 0;
}

static int check_saxpy(const demo_cpu_t *d, int runs)
{
    size_t n = (size_t)ROW_WIDTH * d->saxpy_rows;
    /* Exact for the default counts (every partial sum is a multiple of 1/8 well inside float precision);
     * very long runs may round, hence the tolerance proportional to the run count. */
    for (size_t i = 0; i < n; i++) {
        float want = y0_at(i) + (float)runs * SAXPY_A * x_at(i);
        if (fabsf(d->saxpy.y[i] - want) > 1e-6f * (float)runs * (fabsf(want) + 1.0f))
            return -1;
    }
    g_sink += d->saxpy.y[n / 2];
    return 0;
}

static int check_reduce(const demo_cpu_t *d)
{
    /* Sum of (i % 17) / 4 over i < n, counted exactly. */
    size_t n = d->red_n, full = n / 17, rest = n % 17;
    double want = (double)full * (16.0 * 17.0 / 2.0) * 0.25;
    for (size_t k = 0; k < rest; k++)
        want += (double)k * 0.25;
    g_sink += d->red_sum;
    return d->red_sum == want ? 0 : -1;
}

int ktcli_demo_cpu(const ktcli_demo_opts_t *opts)
{
    if (!opts || opts->dispatches < 1 || opts->warmup < 0 || opts->bytes < ROW_WIDTH * 64)
        return KT_EINVAL;
    demo_cpu_t d;
    memset(&d, 0, sizeof d);
    /* Each kernel touches about opts->bytes: blur and saxpy read one half and write the other. */
    size_t half = opts->bytes / 2 / sizeof(float);
    d.blur_h = (uint32_t)(half / ROW_WIDTH);
    d.saxpy_rows = d.blur_h;
    d.red_n = opts->bytes / sizeof(float);
    float *img = malloc((size_t)ROW_WIDTH * d.blur_h * sizeof(float));
    float *out = malloc((size_t)ROW_WIDTH * d.blur_h * sizeof(float));
    float *x = malloc(d.red_n * sizeof(float)); /* saxpy's x is the first half of the reduction input */
    float *y = malloc((size_t)ROW_WIDTH * d.saxpy_rows * sizeof(float));
    int rc = KT_ENOMEM;
    if (!img || !out || !x || !y)
        goto done;
    for (size_t i = 0; i < (size_t)ROW_WIDTH * d.blur_h; i++)
        img[i] = img_at(i);
    for (size_t i = 0; i < d.red_n; i++)
        x[i] = x_at(i);
    for (size_t i = 0; i < (size_t)ROW_WIDTH * d.saxpy_rows; i++)
        y[i] = y0_at(i);
    d.blur = (blur_ctx_t){img, out, d.blur_h};
    d.saxpy = (saxpy_ctx_t){x, y};
    d.red = x;

    if (opts->verbose)
        fprintf(stderr, "demo cpu: %d threads; box_blur %ux%u, saxpy %zu floats, reduce %zu floats; %d warm-up + "
                        "%d timed dispatches each\n",
                kt_cpu_threads(), ROW_WIDTH, d.blur_h, (size_t)ROW_WIDTH * d.saxpy_rows, d.red_n, opts->warmup,
                opts->dispatches);
    const char *failed = NULL;
    if ((rc = run_kernel(opts, step_blur, &d)) == 0 && check_blur(&d))
        failed = "box_blur";
    if (!rc && !failed && (rc = run_kernel(opts, step_saxpy, &d)) == 0 &&
        check_saxpy(&d, opts->warmup + opts->dispatches))
        failed = "saxpy";
    if (!rc && !failed && (rc = run_kernel(opts, step_reduce, &d)) == 0 && check_reduce(&d))
        failed = "reduce";
    if (failed) {
        fprintf(stderr, "demo cpu: %s computed a wrong result\n", failed);
        rc = KT_ESTATE;
    }
done:
    free(img);
    free(out);
    free(x);
    free(y);
    return rc;
}
