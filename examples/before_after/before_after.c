/* before_after.c — the seed's validation plan as a program: time a slow and an optimised version of the same
 * CPU kernels with the harness, write before.json and after.json, then let `ktiming compare` judge them.
 *
 *     ./kt_example_before_after [--quick] [--flush] [--dir DIR]
 *     ktiming compare DIR/before.json DIR/after.json
 *
 * Kernels (the seed's "blur" and "vignette"): blur is a (2R+1)^2 box blur, first written the naive way
 * (every tap read, column by column), then optimised as two separable running sums row by row; vignette is
 * the same code in both runs, so its verdict should be SAME (or UNSURE on a busy machine), never a change
 * worth reporting. The optimised blur must produce the same image: the program checks it before writing.
 */
#include <ktiming.h>
#include <ktiming/harness.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RADIUS 4

/* An image and its output buffer, plus scratch for the separable pass. */
typedef struct image_t {
    int w, h;     /* size in pixels */
    float *src;   /* input */
    float *dst;   /* output of the last kernel run */
    float *tmp;   /* horizontal pass of the separable blur */
} image_t;

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---------------------------------------------------------------------------------------------------
 * Kernels
 * ------------------------------------------------------------------------------------------------- */

/* Before: every output pixel reads its whole (2R+1)^2 window, walking the image column by column. */
static void blur_naive(image_t *im)
{
    const float inv = 1.0f / (float)((2 * RADIUS + 1) * (2 * RADIUS + 1));
    for (int x = 0; x < im->w; x++)
        for (int y = 0; y < im->h; y++) {
            float acc = 0.0f;
            for (int dy = -RADIUS; dy <= RADIUS; dy++) {
                const float *row = im->src + (size_t)clampi(y + dy, 0, im->h - 1) * (size_t)im->w;
                for (int dx = -RADIUS; dx <= RADIUS; dx++) acc += row[clampi(x + dx, 0, im->w - 1)];
            }
            im->dst[(size_t)y * (size_t)im->w + (size_t)x] = acc * inv;
        }
}

/* After: the box is separable; each pass keeps a running sum, so a pixel costs O(1), row by row. */
static void blur_separable(image_t *im)
{
    const float inv = 1.0f / (float)((2 * RADIUS + 1) * (2 * RADIUS + 1));
    for (int y = 0; y < im->h; y++) {
        const float *s = im->src + (size_t)y * (size_t)im->w;
        float *t = im->tmp + (size_t)y * (size_t)im->w;
        float acc = 0.0f;
        for (int dx = -RADIUS; dx <= RADIUS; dx++) acc += s[clampi(dx, 0, im->w - 1)];
        for (int x = 0; x < im->w; x++) {
            t[x] = acc;
            acc += s[clampi(x + RADIUS + 1, 0, im->w - 1)] - s[clampi(x - RADIUS, 0, im->w - 1)];
        }
    }
    /* vertical pass: a running sum per column, advanced row by row so memory is read in order */
    float *acc = calloc((size_t)im->w, sizeof *acc);
    if (!acc) return;
    for (int dy = -RADIUS; dy <= RADIUS; dy++) {
        const float *t = im->tmp + (size_t)clampi(dy, 0, im->h - 1) * (size_t)im->w;
        for (int x = 0; x < im->w; x++) acc[x] += t[x];
    }
    for (int y = 0; y < im->h; y++) {
        float *d = im->dst + (size_t)y * (size_t)im->w;
        const float *add = im->tmp + (size_t)clampi(y + RADIUS + 1, 0, im->h - 1) * (size_t)im->w;
        const float *sub = im->tmp + (size_t)clampi(y - RADIUS, 0, im->h - 1) * (size_t)im->w;
        for (int x = 0; x < im->w; x++) {
            d[x] = acc[x] * inv;
            acc[x] += add[x] - sub[x];
        }
    }
    free(acc);
}

/* Unchanged between the runs: darken towards the corners. */
static void vignette(image_t *im)
{
    const float cx = 0.5f * (float)im->w, cy = 0.5f * (float)im->h, r2 = cx * cx + cy * cy;
    for (int y = 0; y < im->h; y++)
        for (int x = 0; x < im->w; x++) {
            float dx = (float)x - cx, dy = (float)y - cy;
            size_t i = (size_t)y * (size_t)im->w + (size_t)x;
            im->dst[i] = im->src[i] * (1.0f - 0.6f * (dx * dx + dy * dy) / r2);
        }
}

/* ---------------------------------------------------------------------------------------------------
 * Harness callbacks: one sample = `trials` runs of a kernel
 * ------------------------------------------------------------------------------------------------- */

static int run_blur_naive(void *user, uint32_t trials, uint64_t *duration_ns)
{
    (void)duration_ns;
    for (uint32_t i = 0; i < trials; i++) blur_naive(user);
    return 0;
}

static int run_blur_separable(void *user, uint32_t trials, uint64_t *duration_ns)
{
    (void)duration_ns;
    for (uint32_t i = 0; i < trials; i++) blur_separable(user);
    return 0;
}

static int run_vignette(void *user, uint32_t trials, uint64_t *duration_ns)
{
    (void)duration_ns;
    for (uint32_t i = 0; i < trials; i++) vignette(user);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * The validation plan
 * ------------------------------------------------------------------------------------------------- */

/* How hard to measure. */
typedef struct plan_t {
    int quick;          /* short runs, for tests */
    int flush;          /* flush the CPU caches between samples */
    const char *dir;    /* where the snapshots go */
} plan_t;

static int measure(const plan_t *p, const char *name, kt_harness_run_cb fn, image_t *im, double *median_ns)
{
    kt_harness_desc_t d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.run = fn;
    d.user = im;
    d.flush_cache = p->flush;
    /* On a shared machine preemptions put rare huge outliers into the samples: stddev/mean stays far above any
     * target, while the confidence interval of the median still tightens. Stop on that, at 1 %. */
    d.noise = KT_HARNESS_NOISE_MEDIAN_CI;
    d.max_noise = 0.01;
    if (p->quick) {
        d.min_time_ns = 100000000ull;  /* 0.1 s */
        d.timeout_ns = 2000000000ull;  /* 2 s */
        d.min_samples = 12;            /* above compare's 9 */
    }
    kt_harness_result_t r;
    int rc = kt_harness_run(&d, &r);
    if (rc) {
        fprintf(stderr, "%s: harness failed: %s\n", name, kt_strerror(rc));
        kt_harness_result_free(&r);
        return rc;
    }
    printf("  %-9s median %10.1f us  noise %5.2f %%  %4u samples  (%s)\n", name, r.stats.median_ns / 1e3,
           100.0 * r.noise, r.sample_count, kt_harness_stop_name(r.stop));
    *median_ns = r.stats.median_ns;
    kt_harness_result_free(&r);
    return 0;
}

/* Reset, measure both kernels, write the snapshot to dir/file. */
static int run_phase(const plan_t *p, const char *label, kt_harness_run_cb blur, image_t *im, const char *file,
                     double medians[2])
{
    printf("%s:\n", label);
    kt_reset();
    int rc = measure(p, "blur", blur, im, &medians[0]);
    if (!rc) rc = measure(p, "vignette", run_vignette, im, &medians[1]);
    if (rc) return rc;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", p->dir, file);
    kt_snapshot_t *snap = kt_snapshot();
    if (!snap) return KT_ENOMEM;
    rc = kt_report_write(path, snap, KT_FORMAT_JSON, NULL);
    kt_snapshot_free(snap);
    if (rc) fprintf(stderr, "%s: %s\n", path, kt_strerror(rc));
    else printf("  wrote %s\n", path);
    return rc;
}

int main(int argc, char **argv)
{
    plan_t p = {0, 0, "."};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) p.quick = 1;
        else if (!strcmp(argv[i], "--flush")) p.flush = 1;
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) p.dir = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--quick] [--flush] [--dir DIR]\n", argv[0]);
            return 2;
        }
    }
    image_t im;
    im.w = im.h = p.quick ? 256 : 512;
    size_t n = (size_t)im.w * (size_t)im.h;
    im.src = malloc(n * sizeof *im.src);
    im.dst = malloc(n * sizeof *im.dst);
    im.tmp = malloc(n * sizeof *im.tmp);
    float *ref = malloc(n * sizeof *ref);
    if (!im.src || !im.dst || !im.tmp || !ref) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) im.src[i] = (float)((i * 2654435761u) % 1000u) / 1000.0f;

    /* The optimisation must not change the result. */
    blur_naive(&im);
    memcpy(ref, im.dst, n * sizeof *ref);
    blur_separable(&im);
    float worst = 0.0f;
    for (size_t i = 0; i < n; i++) worst = fmaxf(worst, fabsf(ref[i] - im.dst[i]));
    if (worst > 1e-3f) {
        fprintf(stderr, "the separable blur differs from the naive one by %g\n", (double)worst);
        return 1;
    }

    double before[2], after[2];
    int rc = run_phase(&p, "before (naive blur)", run_blur_naive, &im, "before.json", before);
    if (!rc) rc = run_phase(&p, "after (separable blur)", run_blur_separable, &im, "after.json", after);
    if (!rc) {
        /* The seed's one-line summary; `ktiming compare` adds intervals, p-values and verdicts. */
        printf("[bench] %-9s %.2fx speedup\n", "blur", before[0] / after[0]);
        printf("[bench] %-9s %.2fx speedup\n", "vignette", before[1] / after[1]);
        printf("next: ktiming compare %s/before.json %s/after.json\n", p.dir, p.dir);
    }
    free(im.src);
    free(im.dst);
    free(im.tmp);
    free(ref);
    return rc ? 1 : 0;
}
