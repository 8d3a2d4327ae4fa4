/* before_after_cl.c — the validation plan on an OpenCL device: a naive and a separable blur kernel timed with
 * the harness from the device's own profiling timestamps, written as before.json and after.json.
 *
 *     ./kt_example_before_after_opencl [--quick] [--dir DIR]     (exit status 77: no OpenCL device)
 *     ktiming compare DIR/before.json DIR/after.json
 *
 * The harness runs any backend: here each sample enqueues `trials` blurs, waits, and reports the time the
 * device stamped from the first command's START to the last command's END (KT_HARNESS_TIME_REPORTED), so
 * host-side enqueue and wait overheads stay out of the numbers. Samples are recorded under backend OpenCL and
 * the device's name. "copy" (a plain buffer copy, unchanged) is the control kernel.
 */
#include <ktiming.h>
#include <ktiming/harness.h>

#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KT_EXIT_SKIP 77

static const char *kSource =
    "#define R 4\n"
    "#define TAPS ((2 * R + 1) * (2 * R + 1))\n"
    "__kernel void blur_naive(__global const float *src, __global float *dst, int w, int h) {\n"
    "    int x = get_global_id(0), y = get_global_id(1);\n"
    "    float acc = 0.0f;\n"
    "    for (int dy = -R; dy <= R; dy++) {\n"
    "        int yy = clamp(y + dy, 0, h - 1);\n"
    "        for (int dx = -R; dx <= R; dx++) acc += src[yy * w + clamp(x + dx, 0, w - 1)];\n"
    "    }\n"
    "    dst[y * w + x] = acc / TAPS;\n"
    "}\n"
    "__kernel void blur_rows(__global const float *src, __global float *tmp, int w, int h) {\n"
    "    int x = get_global_id(0), y = get_global_id(1);\n"
    "    float acc = 0.0f;\n"
    "    for (int dx = -R; dx <= R; dx++) acc += src[y * w + clamp(x + dx, 0, w - 1)];\n"
    "    tmp[y * w + x] = acc;\n"
    "}\n"
    "__kernel void blur_cols(__global const float *tmp, __global float *dst, int w, int h) {\n"
    "    int x = get_global_id(0), y = get_global_id(1);\n"
    "    float acc = 0.0f;\n"
    "    for (int dy = -R; dy <= R; dy++) acc += tmp[clamp(y + dy, 0, h - 1) * w + x];\n"
    "    dst[y * w + x] = acc / TAPS;\n"
    "}\n"
    "__kernel void copy(__global const float *src, __global float *dst, int w, int h) {\n"
    "    int x = get_global_id(0), y = get_global_id(1);\n"
    "    dst[y * w + x] = src[y * w + x];\n"
    "}\n";

/* Everything a sample needs. */
typedef struct cl_state_t {
    cl_context ctx;          /* context of the chosen device */
    cl_command_queue queue;  /* in-order, profiling enabled */
    cl_program program;      /* kSource */
    cl_kernel naive, rows, cols, copy; /* kernels */
    cl_mem src, tmp, dst;    /* w*h floats each */
    int w, h;                /* image size */
    char device[128];        /* device name for the records */
} cl_state_t;

/* One variant of the blur (or the control) as a list of kernels enqueued in order. */
typedef struct variant_t {
    cl_state_t *cl;          /* shared state */
    cl_kernel kernels[2];    /* enqueued in order per trial */
    int count;               /* kernels used */
} variant_t;

/* ---------------------------------------------------------------------------------------------------
 * Harness callback: enqueue, wait, report device time
 * ------------------------------------------------------------------------------------------------- */

static int run_variant(void *user, uint32_t trials, uint64_t *duration_ns)
{
    variant_t *v = user;
    cl_state_t *cl = v->cl;
    size_t gws[2] = {(size_t)cl->w, (size_t)cl->h};
    cl_event first = NULL, last = NULL;
    for (uint32_t t = 0; t < trials; t++)
        for (int k = 0; k < v->count; k++) {
            cl_event ev = NULL;
            if (clEnqueueNDRangeKernel(cl->queue, v->kernels[k], 2, NULL, gws, NULL, 0, NULL, &ev) != CL_SUCCESS) {
                clFinish(cl->queue);
                if (last) clReleaseEvent(last);
                if (first) clReleaseEvent(first);
                return KT_EBACKEND;
            }
            if (!first) {
                first = ev;
            } else {
                if (last) clReleaseEvent(last);
                last = ev;
            }
        }
    if (!last) last = first;
    int rc = clFinish(cl->queue) == CL_SUCCESS ? 0 : KT_EBACKEND;
    cl_ulong start = 0, end = 0;
    if (!rc && (clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL) != CL_SUCCESS ||
                clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) != CL_SUCCESS))
        rc = KT_EBACKEND;
    if (last != first) clReleaseEvent(last);
    clReleaseEvent(first);
    /* In-order queue: the commands ran back to back between these two stamps. */
    *duration_ns = end > start ? (uint64_t)(end - start) : 0;
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Setup
 * ------------------------------------------------------------------------------------------------- */

static int set_args(cl_kernel k, cl_mem in, cl_mem out, int w, int h)
{
    return clSetKernelArg(k, 0, sizeof in, &in) | clSetKernelArg(k, 1, sizeof out, &out) |
           clSetKernelArg(k, 2, sizeof w, &w) | clSetKernelArg(k, 3, sizeof h, &h);
}

static int cl_setup(cl_state_t *cl, int w, int h)
{
    memset(cl, 0, sizeof *cl);
    cl->w = w;
    cl->h = h;
    cl_platform_id plats[8];
    cl_uint np = 0;
    if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS || np == 0) return KT_EUNAVAILABLE;
    cl_device_id dev = NULL;
    for (cl_uint i = 0; i < np && !dev; i++)
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) dev = NULL;
    if (!dev) return KT_EUNAVAILABLE;
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof cl->device, cl->device, NULL);
    cl_int err;
    cl->ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (!cl->ctx) return KT_EBACKEND;
    cl->queue = clCreateCommandQueue(cl->ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
    cl->program = clCreateProgramWithSource(cl->ctx, 1, &kSource, NULL, &err);
    if (!cl->queue || !cl->program || clBuildProgram(cl->program, 1, &dev, "", NULL, NULL) != CL_SUCCESS)
        return KT_EBACKEND;
    cl->naive = clCreateKernel(cl->program, "blur_naive", &err);
    cl->rows = clCreateKernel(cl->program, "blur_rows", &err);
    cl->cols = clCreateKernel(cl->program, "blur_cols", &err);
    cl->copy = clCreateKernel(cl->program, "copy", &err);
    size_t bytes = (size_t)w * (size_t)h * sizeof(float);
    cl->src = clCreateBuffer(cl->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl->tmp = clCreateBuffer(cl->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl->dst = clCreateBuffer(cl->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (!cl->naive || !cl->rows || !cl->cols || !cl->copy || !cl->src || !cl->tmp || !cl->dst) return KT_EBACKEND;
    if (set_args(cl->naive, cl->src, cl->dst, w, h) || set_args(cl->rows, cl->src, cl->tmp, w, h) ||
        set_args(cl->cols, cl->tmp, cl->dst, w, h) || set_args(cl->copy, cl->src, cl->tmp, w, h))
        return KT_EBACKEND;
    float *img = malloc(bytes);
    if (!img) return KT_ENOMEM;
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) img[i] = (float)((i * 2654435761u) % 1000u) / 1000.0f;
    int rc = clEnqueueWriteBuffer(cl->queue, cl->src, CL_TRUE, 0, bytes, img, 0, NULL, NULL) == CL_SUCCESS
                 ? 0 : KT_EBACKEND;
    free(img);
    return rc;
}

static void cl_teardown(cl_state_t *cl)
{
    cl_mem mems[] = {cl->src, cl->tmp, cl->dst};
    for (int i = 0; i < 3; i++)
        if (mems[i]) clReleaseMemObject(mems[i]);
    cl_kernel ks[] = {cl->naive, cl->rows, cl->cols, cl->copy};
    for (int i = 0; i < 4; i++)
        if (ks[i]) clReleaseKernel(ks[i]);
    if (cl->program) clReleaseProgram(cl->program);
    if (cl->queue) clReleaseCommandQueue(cl->queue);
    if (cl->ctx) clReleaseContext(cl->ctx);
}

/* Run a variant once and read the output back. */
static int output_of(variant_t *v, float *out)
{
    uint64_t d;
    if (run_variant(v, 1, &d)) return KT_EBACKEND;
    size_t bytes = (size_t)v->cl->w * (size_t)v->cl->h * sizeof(float);
    return clEnqueueReadBuffer(v->cl->queue, v->cl->dst, CL_TRUE, 0, bytes, out, 0, NULL, NULL) == CL_SUCCESS
               ? 0 : KT_EBACKEND;
}

/* ---------------------------------------------------------------------------------------------------
 * The plan
 * ------------------------------------------------------------------------------------------------- */

static int measure(const char *name, variant_t *v, int quick, double *median_ns)
{
    kt_harness_desc_t d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.backend = KT_BACKEND_OPENCL;
    d.device = v->cl->device;
    d.run = run_variant;
    d.user = v;
    d.timing = KT_HARNESS_TIME_REPORTED;
    d.warmup_samples = 2;              /* the first launch includes the kernel's compilation on PoCL */
    d.noise = KT_HARNESS_NOISE_MEDIAN_CI;
    d.max_noise = 0.01;
    if (quick) {
        d.min_time_ns = 50000000ull;   /* 50 ms of device time */
        d.timeout_ns = 2000000000ull;
        d.min_samples = 12;
    }
    kt_harness_result_t r;
    int rc = kt_harness_run(&d, &r);
    if (!rc)
        printf("  %-9s median %10.1f us  noise %5.2f %%  %4u samples  (%s)\n", name, r.stats.median_ns / 1e3,
               100.0 * r.noise, r.sample_count, kt_harness_stop_name(r.stop));
    *median_ns = r.stats.median_ns;
    kt_harness_result_free(&r);
    return rc;
}

static int phase(const char *label, variant_t *blur, variant_t *control, int quick, const char *dir,
                 const char *file, double med[2])
{
    printf("%s:\n", label);
    kt_reset();
    int rc = measure("blur", blur, quick, &med[0]);
    if (!rc) rc = measure("copy", control, quick, &med[1]);
    if (rc) return rc;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    kt_snapshot_t *snap = kt_snapshot();
    rc = snap ? kt_report_write(path, snap, KT_FORMAT_JSON, NULL) : KT_ENOMEM;
    kt_snapshot_free(snap);
    if (!rc) printf("  wrote %s\n", path);
    return rc;
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *dir = ".";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--quick] [--dir DIR]\n", argv[0]);
            return 2;
        }
    }
    cl_state_t cl;
    int rc = cl_setup(&cl, quick ? 256 : 1024, quick ? 256 : 1024);
    if (rc == KT_EUNAVAILABLE) {
        fprintf(stderr, "no OpenCL device: nothing to measure\n");
        cl_teardown(&cl);
        return KT_EXIT_SKIP;
    }
    if (rc) {
        fprintf(stderr, "OpenCL setup failed: %s\n", kt_strerror(rc));
        cl_teardown(&cl);
        return 1;
    }
    printf("device: %s\n", cl.device);
    variant_t naive = {&cl, {cl.naive, NULL}, 1}, separable = {&cl, {cl.rows, cl.cols}, 2},
              control = {&cl, {cl.copy, NULL}, 1};

    /* The optimisation must not change the result. */
    size_t n = (size_t)cl.w * (size_t)cl.h;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b || output_of(&naive, a) || output_of(&separable, b)) rc = KT_EBACKEND;
    float worst = 0.0f;
    for (size_t i = 0; !rc && i < n; i++) worst = fmaxf(worst, fabsf(a[i] - b[i]));
    free(a);
    free(b);
    if (rc || worst > 1e-3f) {
        fprintf(stderr, "the separable blur does not match the naive one (%g)\n", (double)worst);
        cl_teardown(&cl);
        return 1;
    }

    double before[2], after[2];
    rc = phase("before (naive blur)", &naive, &control, quick, dir, "before.json", before);
    if (!rc) rc = phase("after (separable blur)", &separable, &control, quick, dir, "after.json", after);
    if (!rc) {
        printf("[bench] %-9s %.2fx speedup\n", "blur", before[0] / after[0]);
        printf("[bench] %-9s %.2fx speedup\n", "copy", before[1] / after[1]);
        printf("next: ktiming compare %s/before.json %s/after.json\n", dir, dir);
    } else {
        fprintf(stderr, "measurement failed: %s\n", kt_strerror(rc));
    }
    cl_teardown(&cl);
    return rc ? 1 : 0;
}
