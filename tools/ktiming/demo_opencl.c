/* demo_opencl.c — the OpenCL kernels of `ktiming demo`: the CPU demo's box blur, saxpy and reduction as
 * OpenCL C on every OpenCL device found, timed through ktiming's asynchronous tracking and checked against
 * the same references. */
#include "cli.h"

#include <ktiming/cl.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ROW_WIDTH 1024u /* pixels per image row / floats per saxpy row, as the CPU demo */
#define SAXPY_A 0.5f
#define REDUCE_GROUP 256u  /* work-group size of the reduction */
#define REDUCE_GROUPS 256u /* work-groups of the reduction (partial sums read back) */

/* Kernel names match the CPU demo's so the table lines them up by name, backend and device. */
static const char *kSource =
    "__kernel void box_blur(__global const float *src, __global float *dst, uint w, uint h) {\n"
    "  uint x = get_global_id(0), y = get_global_id(1);\n"
    "  if (x >= w || y >= h) return;\n"
    "  uint x0 = x ? x - 1 : 0, x1 = x + 1 < w ? x + 1 : w - 1;\n"
    "  uint y0 = y ? y - 1 : 0, y1 = y + 1 < h ? y + 1 : h - 1;\n"
    "  __global const float *r0 = src + (size_t)y0 * w, *r1 = src + (size_t)y * w, *r2 = src + (size_t)y1 * w;\n"
    "  dst[(size_t)y * w + x] = (r0[x0] + r0[x] + r0[x1] + r1[x0] + r1[x] + r1[x1] + r2[x0] + r2[x] + r2[x1])\n"
    "                           * (1.0f / 9.0f);\n"
    "}\n"
    "__kernel void saxpy(__global const float *x, __global float *y, float a) {\n"
    "  size_t i = get_global_id(0);\n"
    "  y[i] = a * x[i] + y[i];\n"
    "}\n"
    "__kernel void reduce(__global const float *v, ulong n, __global float *partial, __local float *scratch) {\n"
    "  size_t lid = get_local_id(0), gsz = get_global_size(0);\n"
    "  float acc = 0.0f;\n"
    "  for (size_t i = get_global_id(0); i < n; i += gsz) acc += v[i];\n"
    "  scratch[lid] = acc;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {\n"
    "    if (lid < s) scratch[lid] += scratch[lid + s];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  if (lid == 0) partial[get_group_id(0)] = scratch[0];\n"
    "}\n";

static const kt_cl_api_t *cl;

/* Inputs as the CPU demo: multiples of 1/4 with small magnitudes, so every result is exact. */
static float x_at(size_t i) { return (float)(i % 17) * 0.25f; }
static float y0_at(size_t i) { return (float)(i % 5); }
static float img_at(size_t i) { return (float)((i * 7) % 256) / 256.0f; }

static float blur_ref(const float *src, uint32_t w, uint32_t h, uint32_t x, uint32_t y)
{
    uint32_t y0 = y ? y - 1 : 0, y1 = y + 1 < h ? y + 1 : h - 1;
    uint32_t x0 = x ? x - 1 : 0, x1 = x + 1 < w ? x + 1 : w - 1;
    const float *r0 = src + (size_t)y0 * w, *r1 = src + (size_t)y * w, *r2 = src + (size_t)y1 * w;
    return (r0[x0] + r0[x] + r0[x1] + r1[x0] + r1[x] + r1[x1] + r2[x0] + r2[x] + r2[x1]) * (1.0f / 9.0f);
}

/* One device's demo state. */
typedef struct cl_demo_t {
    cl_device_id device;   /* the device */
    char name[128];        /* its name */
    cl_context context;    /* private context */
    cl_command_queue queue; /* in-order, profiling */
    cl_program program;    /* kSource */
    cl_kernel k[3];        /* box_blur, saxpy, reduce */
    cl_mem img, out, x, y, partial; /* buffers */
    kt_cl_ctx_t *kc;       /* ktiming attachment */
    uint32_t h;            /* image rows = saxpy rows */
    size_t red_n;          /* reduction length */
} cl_demo_t;

enum { K_BLUR, K_SAXPY, K_REDUCE };

static void demo_release(cl_demo_t *d)
{
    if (d->kc)
        kt_cl_detach(d->kc);
    cl_mem mems[] = {d->img, d->out, d->x, d->y, d->partial};
    for (size_t i = 0; i < 5; i++)
        if (mems[i])
            cl->clReleaseMemObject(mems[i]);
    for (size_t i = 0; i < 3; i++)
        if (d->k[i])
            cl->clReleaseKernel(d->k[i]);
    if (d->program)
        cl->clReleaseProgram(d->program);
    if (d->queue)
        cl->clReleaseCommandQueue(d->queue);
    if (d->context)
        cl->clReleaseContext(d->context);
}

static cl_mem make_buffer(cl_demo_t *d, size_t floats, float (*init)(size_t))
{
    cl_int err = 0;
    float *host = NULL;
    if (init) {
        host = malloc(floats * sizeof *host);
        if (!host)
            return NULL;
        for (size_t i = 0; i < floats; i++)
            host[i] = init(i);
    }
    cl_mem m = cl->clCreateBuffer(d->context, CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0),
                                  floats * sizeof(float), host, &err);
    free(host);
    return err == CL_SUCCESS ? m : NULL;
}

static int demo_setup(cl_demo_t *d, const ktcli_demo_opts_t *o)
{
    cl_int err = 0;
    d->context = cl->clCreateContext(NULL, 1, &d->device, NULL, NULL, &err);
    if (!d->context)
        return KT_EBACKEND;
    if (cl->clCreateCommandQueueWithProperties) {
        cl_queue_properties qp[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
        d->queue = cl->clCreateCommandQueueWithProperties(d->context, d->device, qp, &err);
    }
    if (!d->queue && cl->clCreateCommandQueue)
        d->queue = cl->clCreateCommandQueue(d->context, d->device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (!d->queue)
        return KT_EBACKEND;
    d->program = cl->clCreateProgramWithSource(d->context, 1, &kSource, NULL, &err);
    if (!d->program)
        return KT_EBACKEND;
    if (cl->clBuildProgram(d->program, 1, &d->device, "", NULL, NULL) != CL_SUCCESS) {
        char log[2048] = {0};
        cl->clGetProgramBuildInfo(d->program, d->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        fprintf(stderr, "demo opencl: %s: build failed:\n%s\n", d->name, log);
        return KT_EBACKEND;
    }
    static const char *kNames[3] = {"box_blur", "saxpy", "reduce"};
    for (int i = 0; i < 3; i++)
        if (!(d->k[i] = cl->clCreateKernel(d->program, kNames[i], &err)))
            return KT_EBACKEND;
    size_t half = o->bytes / 2 / sizeof(float);
    d->h = (uint32_t)(half / ROW_WIDTH);
    d->red_n = o->bytes / sizeof(float);
    size_t img_n = (size_t)ROW_WIDTH * d->h;
    d->img = make_buffer(d, img_n, img_at);
    d->out = make_buffer(d, img_n, NULL);
    d->x = make_buffer(d, d->red_n, x_at); /* saxpy's x is the first half of the reduction input */
    d->y = make_buffer(d, img_n, y0_at);
    d->partial = make_buffer(d, REDUCE_GROUPS, NULL);
    if (!d->img || !d->out || !d->x || !d->y || !d->partial)
        return KT_ENOMEM;
    cl_uint w = ROW_WIDTH, h = d->h;
    float a = SAXPY_A;
    cl_ulong n = d->red_n;
    int bad = 0;
    bad |= cl->clSetKernelArg(d->k[K_BLUR], 0, sizeof(cl_mem), &d->img);
    bad |= cl->clSetKernelArg(d->k[K_BLUR], 1, sizeof(cl_mem), &d->out);
    bad |= cl->clSetKernelArg(d->k[K_BLUR], 2, sizeof w, &w);
    bad |= cl->clSetKernelArg(d->k[K_BLUR], 3, sizeof h, &h);
    bad |= cl->clSetKernelArg(d->k[K_SAXPY], 0, sizeof(cl_mem), &d->x);
    bad |= cl->clSetKernelArg(d->k[K_SAXPY], 1, sizeof(cl_mem), &d->y);
    bad |= cl->clSetKernelArg(d->k[K_SAXPY], 2, sizeof a, &a);
    bad |= cl->clSetKernelArg(d->k[K_REDUCE], 0, sizeof(cl_mem), &d->x);
    bad |= cl->clSetKernelArg(d->k[K_REDUCE], 1, sizeof n, &n);
    bad |= cl->clSetKernelArg(d->k[K_REDUCE], 2, sizeof(cl_mem), &d->partial);
    bad |= cl->clSetKernelArg(d->k[K_REDUCE], 3, REDUCE_GROUP * sizeof(float), NULL);
    return bad ? KT_EBACKEND : 0;
}

/* Enqueue one dispatch of kernel i, tracked (timed) or not (warm-up). */
static cl_int enqueue(cl_demo_t *d, int i, int timed)
{
    size_t g2[2] = {ROW_WIDTH, d->h}, g1 = (size_t)ROW_WIDTH * d->h;
    size_t gr = (size_t)REDUCE_GROUP * REDUCE_GROUPS, lr = REDUCE_GROUP;
    cl_uint dim = i == K_BLUR ? 2 : 1;
    const size_t *gs = i == K_BLUR ? g2 : i == K_SAXPY ? &g1 : &gr;
    const size_t *ls = i == K_REDUCE ? &lr : NULL;
    if (timed)
        return kt_cl_enqueue_ndrange(d->kc, d->k[i], dim, NULL, gs, ls, 0, NULL, NULL);
    return cl->clEnqueueNDRangeKernel(d->queue, d->k[i], dim, NULL, gs, ls, 0, NULL, NULL);
}

static int check(cl_demo_t *d, int runs, const char **failed)
{
    size_t img_n = (size_t)ROW_WIDTH * d->h;
    float *img = malloc(img_n * sizeof(float)), *out = malloc(img_n * sizeof(float));
    float *y = malloc(img_n * sizeof(float)), partial[REDUCE_GROUPS];
    int rc = KT_ENOMEM;
    if (!img || !out || !y)
        goto done;
    rc = KT_EBACKEND;
    if (cl->clEnqueueReadBuffer(d->queue, d->out, CL_TRUE, 0, img_n * sizeof(float), out, 0, NULL, NULL) ||
        cl->clEnqueueReadBuffer(d->queue, d->y, CL_TRUE, 0, img_n * sizeof(float), y, 0, NULL, NULL) ||
        cl->clEnqueueReadBuffer(d->queue, d->partial, CL_TRUE, 0, sizeof partial, partial, 0, NULL, NULL))
        goto done;
    rc = 0;
    for (size_t i = 0; i < img_n; i++)
        img[i] = img_at(i);
    const uint32_t w = ROW_WIDTH, h = d->h;
    const uint32_t xs[] = {0, 1, w / 2, w - 2, w - 1}, ys[] = {0, 1, h / 2, h - 2, h - 1};
    for (size_t i = 0; i < 5 && !*failed; i++)
        for (size_t j = 0; j < 5; j++)
            if (fabsf(blur_ref(img, w, h, xs[i], ys[j]) - out[(size_t)ys[j] * w + xs[i]]) > 1e-5f)
                *failed = "box_blur";
    for (size_t i = 0; i < img_n && !*failed; i++) {
        float want = y0_at(i) + (float)runs * SAXPY_A * x_at(i);
        if (fabsf(y[i] - want) > 1e-6f * (float)runs * (fabsf(want) + 1.0f))
            *failed = "saxpy";
    }
    size_t n = d->red_n, full = n / 17, rest = n % 17;
    double want = (double)full * (16.0 * 17.0 / 2.0) * 0.25, got = 0;
    for (size_t k = 0; k < rest; k++)
        want += (double)k * 0.25;
    for (size_t i = 0; i < REDUCE_GROUPS; i++)
        got += partial[i];
    /* Float partial sums of multiples of 1/4 stay exact while they are below 2^22 (the default sizes); past
     * that, float rounding is allowed for. */
    double per_group = 4.0 * (double)n / (double)REDUCE_GROUPS;
    double tol = per_group < 4194304.0 ? 0.0 : want * 1e-3;
    if (!*failed && fabs(got - want) > tol)
        *failed = "reduce";
done:
    free(img);
    free(out);
    free(y);
    return rc;
}

static int demo_device(cl_demo_t *d, const ktcli_demo_opts_t *o)
{
    int rc = demo_setup(d, o);
    if (rc < 0)
        return rc;
    kt_cl_attach_desc_t desc = {.mode = KT_CL_MODE_DEFAULT, .label = "demo queue"};
    if ((rc = kt_cl_attach(d->queue, &desc, &d->kc)) < 0)
        return rc;
    if (o->verbose)
        fprintf(stderr, "demo opencl: %s: box_blur %ux%u, saxpy %zu floats, reduce %zu floats; %d warm-up + %d "
                        "timed dispatches each (the first launch includes compilation)\n",
                d->name, ROW_WIDTH, d->h, (size_t)ROW_WIDTH * d->h, d->red_n, o->warmup, o->dispatches);
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < o->warmup; i++, ktcli_progress_add(o->progress, 1))
            if (enqueue(d, k, 0) != CL_SUCCESS)
                return KT_EBACKEND;
        if (cl->clFinish(d->queue) != CL_SUCCESS) /* warm-up done before the timed run starts */
            return KT_EBACKEND;
        for (int i = 0; i < o->dispatches; i++, ktcli_progress_add(o->progress, 1))
            if (enqueue(d, k, 1) != CL_SUCCESS)
                return KT_EBACKEND;
    }
    if (cl->clFinish(d->queue) != CL_SUCCESS)
        return KT_EBACKEND;
    const char *failed = NULL;
    if ((rc = check(d, o->warmup + o->dispatches, &failed)) < 0)
        return rc;
    if (failed) {
        fprintf(stderr, "demo opencl: %s: %s computed a wrong result\n", d->name, failed);
        return KT_ESTATE;
    }
    return kt_cl_flush(d->kc, 0);
}

int ktcli_demo_opencl(const ktcli_demo_opts_t *opts)
{
    if (!opts || opts->dispatches < 1 || opts->warmup < 0 || opts->bytes < ROW_WIDTH * 64)
        return KT_EINVAL;
    if (kt_cl_load(&cl) != 0) {
        fprintf(stderr, "demo opencl: no OpenCL loader (libOpenCL.so.1): skipped\n");
        return KT_EUNAVAILABLE;
    }
    cl_platform_id platforms[16];
    cl_uint np = 0;
    if (cl->clGetPlatformIDs(16, platforms, &np) != CL_SUCCESS)
        np = 0;
    int devices = 0, rc = 0;
    for (cl_uint p = 0; p < np && p < 16; p++) {
        cl_device_id ids[16];
        cl_uint nd = 0;
        if (cl->clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, ids, &nd) != CL_SUCCESS)
            continue;
        for (cl_uint i = 0; i < nd && i < 16; i++) {
            cl_demo_t d;
            memset(&d, 0, sizeof d);
            d.device = ids[i];
            cl->clGetDeviceInfo(ids[i], CL_DEVICE_NAME, sizeof d.name - 1, d.name, NULL);
            devices++;
            int r = demo_device(&d, opts);
            demo_release(&d);
            if (r < 0) {
                fprintf(stderr, "demo opencl: %s: %s\n", d.name, kt_strerror(r));
                if (!rc)
                    rc = r;
            }
        }
    }
    if (!devices) {
        fprintf(stderr, "demo opencl: no OpenCL device: skipped\n");
        return KT_EUNAVAILABLE;
    }
    return rc;
}
