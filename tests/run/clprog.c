/* clprog.c — a small, ordinary OpenCL program (no ktiming inside) that the `ktiming run` tests and the
 * run_overhead bench time from outside. Its stdout is deterministic so runs with and without ktiming compare.
 *
 *   clprog [--no-events] [--iterations N] [--size N]
 *     per iteration: vadd x2 on queue A (clCreateCommandQueue, no profiling asked), scale x1 on queue B
 *     (clCreateCommandQueueWithProperties, a property list without profiling); once: fill via clEnqueueTask,
 *     a vadd with global size 0 (an empty, successful command since OpenCL 2.1 — it is a dispatch too) and
 *     one that fails (a kernel with unset arguments). With events it waits on and releases them; with
 *     --no-events it passes NULL and uses clFinish. Dispatches: vadd 2N+1, scale N, fill 1.
 *   clprog --pipeline [--size N]: instead, PIPE_REPS times write -> vadd -> read on a queue created with NULL
 *     properties (transfers timed as their own entries), one clEnqueueNativeKernel where the device runs
 *     native kernels, and that queue's CL_QUEUE_PROPERTIES_ARRAY (empty: it was created with NULL).
 *   clprog --queues N: instead, N queues made three ways (clCreateCommandQueue, NULL properties, a property list
 *     without profiling), a third of them retained once more; one scale kernel on each; then released in an
 *     interleaved order, every surviving queue's CL_QUEUE_PROPERTIES and CL_QUEUE_PROPERTIES_ARRAY checked against
 *     what the program asked for after each round. Prints "queues: N created, M mismatches".
 *   clprog --cmdbuf N: instead, with cl_khr_command_buffer (entry points from
 *     clGetExtensionFunctionAddressForPlatform): one command buffer recording vadd then scale (ordered by a sync
 *     point), finalized, enqueued N times, each waited for (on its event for odd runs, clFinish for even ones
 *     that pass none). Prints the result's checksum. Exits 77 when the device lacks the extension.
 *   clprog --tiny N: instead, N tiny kernels (scale on 64 floats, no events) with a clFinish after every 100
 *     (the dispatch-heavy case of the run_overhead bench). With --wait-events, every 100th kernel gets an event
 *     and clWaitForEvents on it stands in for clFinish; with --mark, "clprog: synced <k>" goes to stderr after
 *     each of those waits (k kernels enqueued so far).
 *   clprog --truths: instead, what a program sees of its events and refusals: on a queue made without profiling,
 *     a kernel gated by a user event (its CL_EVENT_REFERENCE_COUNT while gated), clGetEventProfilingInfo on its
 *     event before and after the program released the queue, and three clEnqueueTask of a kernel whose
 *     arguments are unset (refused: CL_INVALID_KERNEL_ARGS), each return code printed.
 *   clprog --configs: instead, the launch configurations of issue 40.2 on the scale kernel (64 floats): global 64
 *     local 16 three times, global 32 local 8 twice, global 64 with local NULL once, clEnqueueTask once (1 x 1);
 *     clFinish. Prints "done: configs".
 *   clprog --svm N: instead, with shared virtual memory (two 1 MiB coarse-grain allocations), N times each:
 *     clEnqueueSVMMemFill, clEnqueueSVMMemcpy, clEnqueueSVMMap + clEnqueueSVMUnmap, a scale kernel on the SVM
 *     pointer; then one clEnqueueSVMMigrateMem of both and one clEnqueueSVMFree. Prints a checksum. Exits 77 when
 *     the device has no SVM.
 *   Prints checksums, the return codes, and what the program can observe of its queues: CL_QUEUE_PROPERTIES,
 *   CL_QUEUE_PROPERTIES_ARRAY, clGetEventProfilingInfo on a queue-A event (reference counts are left out:
 *   drivers count their own internal references, so they vary from run to run).
 *
 * Built twice: clprog links -lOpenCL; clprog_dl (CLPROG_DLOPEN) has no link to OpenCL at all, dlopens
 * libOpenCL.so.1 and fetches every entry point with dlsym — clEnqueueNDRangeKernel first through
 * clGetExtensionFunctionAddressForPlatform, as some programs do. Exits 77 when there is no OpenCL device.
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#include <CL/cl.h>
#include <CL/cl_ext.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The entry points used, filled from the linked loader or with dlsym. */
#define CLPROG_FUNCS(X)                                                                                          \
    X(clGetPlatformIDs) X(clGetDeviceIDs) X(clCreateContext) X(clReleaseContext) X(clCreateCommandQueue)         \
    X(clCreateCommandQueueWithProperties) X(clReleaseCommandQueue) X(clGetCommandQueueInfo)                     \
    X(clCreateProgramWithSource) X(clBuildProgram) X(clReleaseProgram) X(clCreateKernel) X(clReleaseKernel)     \
    X(clSetKernelArg) X(clCreateBuffer) X(clReleaseMemObject) X(clEnqueueReadBuffer) X(clEnqueueWriteBuffer)    \
    X(clEnqueueNDRangeKernel) X(clEnqueueTask) X(clWaitForEvents) X(clReleaseEvent) X(clFinish)                 \
    X(clGetEventProfilingInfo) X(clGetExtensionFunctionAddressForPlatform) X(clGetDeviceInfo)                    \
    X(clEnqueueNativeKernel) X(clRetainCommandQueue) X(clCreateUserEvent) X(clSetUserEventStatus)                \
    X(clGetEventInfo) X(clSVMAlloc) X(clSVMFree) X(clSetKernelArgSVMPointer) X(clEnqueueSVMMemFill)             \
    X(clEnqueueSVMMemcpy) X(clEnqueueSVMMap) X(clEnqueueSVMUnmap) X(clEnqueueSVMFree) X(clEnqueueSVMMigrateMem)

/* The program's OpenCL entry points. */
typedef struct clprog_api_t {
#define CLPROG_FIELD(fn) __typeof__(&fn) fn;
    CLPROG_FUNCS(CLPROG_FIELD)
#undef CLPROG_FIELD
} clprog_api_t;

static clprog_api_t cl;

static int load_api(cl_platform_id *platform)
{
#ifdef CLPROG_DLOPEN
    void *h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
#define CLPROG_SYM(fn) *(void **)&cl.fn = dlsym(h, #fn);
    CLPROG_FUNCS(CLPROG_SYM)
#undef CLPROG_SYM
#else
#define CLPROG_LINK(fn) cl.fn = fn;
    CLPROG_FUNCS(CLPROG_LINK)
#undef CLPROG_LINK
#endif
    cl_uint n = 0;
    if (!cl.clGetPlatformIDs || cl.clGetPlatformIDs(1, platform, &n) != CL_SUCCESS || n == 0)
        return -1;
#ifdef CLPROG_DLOPEN
    /* the extension-address route first (loaders and drivers may or may not answer for core names) */
    void *fn = cl.clGetExtensionFunctionAddressForPlatform
                   ? cl.clGetExtensionFunctionAddressForPlatform(*platform, "clEnqueueNDRangeKernel")
                   : NULL;
    if (fn)
        *(void **)&cl.clEnqueueNDRangeKernel = fn;
    fprintf(stderr, "clprog_dl: clEnqueueNDRangeKernel from %s\n", fn ? "clGetExtensionFunctionAddressForPlatform"
                                                                      : "dlsym");
#endif
    return 0;
}

static const char kSource[] =
    "kernel void vadd(global const float *a, global const float *b, global float *c) {\n"
    "  size_t i = get_global_id(0); c[i] = a[i] + b[i]; }\n"
    "kernel void scale(global float *x, float k) { size_t i = get_global_id(0); x[i] = x[i] * k; }\n"
    "kernel void fill(global float *x, int n, float v) { for (int i = 0; i < n; i++) x[i] = v + (float)i; }\n";

#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        cl_int rc_ = (call);                                                                                     \
        if (rc_ != CL_SUCCESS) {                                                                                 \
            fprintf(stderr, "clprog: %s failed: %d\n", #call, rc_);                                              \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

static double checksum(const float *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)v[i] * (double)((i % 7) + 1);
    return s;
}

#define PIPE_REPS 3

static void CL_CALLBACK native_double(void *args)
{
    float *v = args;
    *v *= 2.0f;
}

/* write -> vadd -> read, PIPE_REPS times, on a queue made with NULL properties; a native kernel. */
static int pipeline(cl_context ctx, cl_device_id device, cl_kernel kvadd, size_t n)
{
    cl_int err;
    cl_command_queue q = cl.clCreateCommandQueueWithProperties(ctx, device, NULL, &err);
    CHECK(err);
    float *a = malloc(n * sizeof *a), *c = malloc(n * sizeof *c);
    if (!a || !c)
        return 1;
    cl_mem ba = cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof *a, NULL, &err);
    CHECK(err);
    cl_mem bc = cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof *c, NULL, &err);
    CHECK(err);
    CHECK(cl.clSetKernelArg(kvadd, 0, sizeof ba, &ba));
    CHECK(cl.clSetKernelArg(kvadd, 1, sizeof ba, &ba));
    CHECK(cl.clSetKernelArg(kvadd, 2, sizeof bc, &bc));
    size_t gws = n;
    for (int r = 0; r < PIPE_REPS; r++) {
        for (size_t i = 0; i < n; i++)
            a[i] = (float)((i + (size_t)r) % 100);
        CHECK(cl.clEnqueueWriteBuffer(q, ba, CL_FALSE, 0, n * sizeof *a, a, 0, NULL, NULL));
        CHECK(cl.clEnqueueNDRangeKernel(q, kvadd, 1, NULL, &gws, NULL, 0, NULL, NULL));
        CHECK(cl.clEnqueueReadBuffer(q, bc, CL_TRUE, 0, n * sizeof *c, c, 0, NULL, NULL));
        printf("pipeline %d: checksum %.6f\n", r, checksum(c, n));
    }
    cl_device_exec_capabilities caps = 0;
    CHECK(cl.clGetDeviceInfo(device, CL_DEVICE_EXECUTION_CAPABILITIES, sizeof caps, &caps, NULL));
    if (caps & CL_EXEC_NATIVE_KERNEL) {
        float v = 21.0f;
        CHECK(cl.clEnqueueNativeKernel(q, native_double, &v, sizeof v, 0, NULL, NULL, 0, NULL, NULL));
        CHECK(cl.clFinish(q));
    }
    printf("native kernel: %s\n", caps & CL_EXEC_NATIVE_KERNEL ? "run" : "not supported");
    size_t arr_size = 1234;
    cl_queue_properties arr[16] = {0};
    cl_int rc = cl.clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES_ARRAY, sizeof arr, arr, &arr_size);
    printf("NULL-properties queue array -> %d, %zu bytes\n", rc, arr_size);
    CHECK(cl.clReleaseMemObject(ba));
    CHECK(cl.clReleaseMemObject(bc));
    CHECK(cl.clReleaseCommandQueue(q));
    free(a);
    free(c);
    return 0;
}

/* What the program asked for queue i of many_queues: 0 clCreateCommandQueue, 1 NULL properties, 2 a list. */
static const cl_queue_properties kListProps[] = {CL_QUEUE_PROPERTIES, 0, 0};

/* 1 when q shows exactly what the program asked for (no profiling bit it did not set, its own property array). */
static int queue_as_asked(cl_command_queue q, int how)
{
    cl_command_queue_properties props = 1234;
    cl_queue_properties arr[8];
    size_t arr_size = 1234;
    if (cl.clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL) != CL_SUCCESS ||
        cl.clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES_ARRAY, sizeof arr, arr, &arr_size) != CL_SUCCESS)
        return 0;
    if (props & CL_QUEUE_PROFILING_ENABLE)
        return 0;
    if (how == 2)
        return arr_size == sizeof kListProps && !memcmp(arr, kListProps, sizeof kListProps);
    return arr_size == 0;
}

/* A 64-float buffer with kscale's arguments set on it (x *= 1): the tiny kernel of --queues and --tiny. */
static cl_mem tiny_scale(cl_context ctx, cl_kernel kscale)
{
    cl_int err;
    cl_mem small = cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
    CHECK(err);
    float one = 1.0f;
    CHECK(cl.clSetKernelArg(kscale, 0, sizeof small, &small));
    CHECK(cl.clSetKernelArg(kscale, 1, sizeof one, &one));
    return small;
}

/* --configs: one kernel under four launch configurations (the counts docs/opencl.md's example shows). */
static int configs(cl_context ctx, cl_command_queue q, cl_kernel kscale)
{
    cl_mem small = tiny_scale(ctx, kscale);
    size_t g64 = 64, l16 = 16, g32 = 32, l8 = 8;
    for (int i = 0; i < 3; i++)
        CHECK(cl.clEnqueueNDRangeKernel(q, kscale, 1, NULL, &g64, &l16, 0, NULL, NULL));
    for (int i = 0; i < 2; i++)
        CHECK(cl.clEnqueueNDRangeKernel(q, kscale, 1, NULL, &g32, &l8, 0, NULL, NULL));
    CHECK(cl.clEnqueueNDRangeKernel(q, kscale, 1, NULL, &g64, NULL, 0, NULL, NULL));
    CHECK(cl.clEnqueueTask(q, kscale, 0, NULL, NULL));
    CHECK(cl.clFinish(q));
    CHECK(cl.clReleaseMemObject(small));
    return 0;
}

static int many_queues(cl_context ctx, cl_device_id device, cl_kernel kscale, int nq)
{
    cl_int err;
    cl_command_queue *q = calloc((size_t)nq, sizeof *q);
    int *refs = calloc((size_t)nq, sizeof *refs), mismatches = 0;
    cl_mem small = tiny_scale(ctx, kscale);
    size_t g = 64;
    for (int i = 0; i < nq; i++) {
        int how = i % 3;
        q[i] = how == 0   ? cl.clCreateCommandQueue(ctx, device, 0, &err)
               : how == 1 ? cl.clCreateCommandQueueWithProperties(ctx, device, NULL, &err)
                          : cl.clCreateCommandQueueWithProperties(ctx, device, kListProps, &err);
        CHECK(err);
        refs[i] = 1;
        if (i % 3 == 1) {
            CHECK(cl.clRetainCommandQueue(q[i]));
            refs[i]++;
        }
        CHECK(cl.clEnqueueNDRangeKernel(q[i], kscale, 1, NULL, &g, NULL, 0, NULL, NULL));
    }
    for (int i = 0; i < nq; i++)
        CHECK(cl.clFinish(q[i]));
    /* rounds of releases in a stride order, so entries leave the lookup from everywhere */
    for (int round = 0, left = nq; left > 0; round++) {
        for (int i = round % 7; i < nq; i += 7)
            if (refs[i] > 0) {
                CHECK(cl.clReleaseCommandQueue(q[i]));
                if (--refs[i] == 0)
                    left--;
            }
        for (int i = 0; i < nq; i++)
            if (refs[i] > 0 && !queue_as_asked(q[i], i % 3))
                mismatches++;
    }
    CHECK(cl.clReleaseMemObject(small));
    printf("queues: %d created, %d mismatches\n", nq, mismatches);
    free(q);
    free(refs);
    return mismatches ? 1 : 0;
}

/* cl_khr_command_buffer's entry points, from clGetExtensionFunctionAddressForPlatform. */
typedef struct clprog_cmdbuf_api_t {
    clCreateCommandBufferKHR_fn create;
    clCommandNDRangeKernelKHR_fn ndrange;
    clFinalizeCommandBufferKHR_fn finalize;
    clEnqueueCommandBufferKHR_fn enqueue;
    clReleaseCommandBufferKHR_fn release;
} clprog_cmdbuf_api_t;

static int cmdbuf_api(cl_platform_id platform, cl_device_id device, clprog_cmdbuf_api_t *cb)
{
    char ext[8192] = "";
    if (cl.clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL) != CL_SUCCESS ||
        !strstr(ext, "cl_khr_command_buffer"))
        return -1;
#define CLPROG_EXT(field, fn) *(void **)&cb->field = cl.clGetExtensionFunctionAddressForPlatform(platform, #fn);
    CLPROG_EXT(create, clCreateCommandBufferKHR)
    CLPROG_EXT(ndrange, clCommandNDRangeKernelKHR)
    CLPROG_EXT(finalize, clFinalizeCommandBufferKHR)
    CLPROG_EXT(enqueue, clEnqueueCommandBufferKHR)
    CLPROG_EXT(release, clReleaseCommandBufferKHR)
#undef CLPROG_EXT
    return cb->create && cb->ndrange && cb->finalize && cb->enqueue && cb->release ? 0 : -1;
}

/* One command buffer (vadd, then scale after it) enqueued reps times. */
static int command_buffer(cl_platform_id platform, cl_context ctx, cl_device_id device, cl_kernel kvadd,
                          cl_kernel kscale, int reps)
{
    clprog_cmdbuf_api_t cb;
    if (cmdbuf_api(platform, device, &cb) != 0) {
        fprintf(stderr, "clprog: no cl_khr_command_buffer\n");
        return 77;
    }
    cl_int err;
    cl_command_queue q = cl.clCreateCommandQueueWithProperties(ctx, device, NULL, &err);
    CHECK(err);
    const size_t n = 1024;
    float host[1024];
    for (size_t i = 0; i < n; i++)
        host[i] = (float)(i % 17);
    cl_mem m[3];
    for (int i = 0; i < 3; i++) {
        m[i] = cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host, host, &err);
        CHECK(err);
    }
    float k = 0.5f;
    for (int i = 0; i < 3; i++)
        CHECK(cl.clSetKernelArg(kvadd, (cl_uint)i, sizeof m[i], &m[i]));
    CHECK(cl.clSetKernelArg(kscale, 0, sizeof m[2], &m[2]));
    CHECK(cl.clSetKernelArg(kscale, 1, sizeof k, &k));
    cl_command_buffer_khr buf = cb.create(1, &q, NULL, &err);
    CHECK(err);
    cl_sync_point_khr after_vadd = 0;
    CHECK(cb.ndrange(buf, NULL, NULL, kvadd, 1, NULL, &n, NULL, 0, NULL, &after_vadd, NULL));
    CHECK(cb.ndrange(buf, NULL, NULL, kscale, 1, NULL, &n, NULL, 1, &after_vadd, NULL, NULL));
    CHECK(cb.finalize(buf));
    for (int r = 0; r < reps; r++) {
        cl_event ev = NULL;
        CHECK(cb.enqueue(0, NULL, buf, 0, NULL, (r & 1) ? &ev : NULL));
        if (ev) {
            CHECK(cl.clWaitForEvents(1, &ev));
            CHECK(cl.clReleaseEvent(ev));
        } else {
            CHECK(cl.clFinish(q)); /* not simultaneous-use: the next enqueue needs this one complete */
        }
    }
    CHECK(cl.clEnqueueReadBuffer(q, m[2], CL_TRUE, 0, sizeof host, host, 0, NULL, NULL));
    printf("command buffer: %d executions, checksum %.3f\n", reps, checksum(host, n));
    CHECK(cb.release(buf));
    for (int i = 0; i < 3; i++)
        CHECK(cl.clReleaseMemObject(m[i]));
    CHECK(cl.clReleaseCommandQueue(q));
    return 0;
}

#define SVM_BYTES ((size_t)1 << 20)

static void CL_CALLBACK svm_freed(cl_command_queue q, cl_uint n, void **ptrs, void *ctx)
{
    (void)q;
    for (cl_uint i = 0; i < n; i++)
        cl.clSVMFree((cl_context)ctx, ptrs[i]);
}

/* --svm N (see the header). */
static int svm(cl_context ctx, cl_device_id device, cl_kernel kscale, int reps)
{
    cl_device_svm_capabilities caps = 0;
    if (cl.clGetDeviceInfo(device, CL_DEVICE_SVM_CAPABILITIES, sizeof caps, &caps, NULL) != CL_SUCCESS || !caps ||
        !cl.clSVMAlloc || !cl.clEnqueueSVMMemFill) {
        fprintf(stderr, "clprog: no SVM on this device\n");
        exit(77);
    }
    cl_int err;
    cl_command_queue q = cl.clCreateCommandQueue(ctx, device, 0, &err);
    CHECK(err);
    float *a = cl.clSVMAlloc(ctx, CL_MEM_READ_WRITE, SVM_BYTES, 0);
    float *b = cl.clSVMAlloc(ctx, CL_MEM_READ_WRITE, SVM_BYTES, 0);
    if (!a || !b)
        return 1;
    float k = 1.5f;
    CHECK(cl.clSetKernelArgSVMPointer(kscale, 0, b));
    CHECK(cl.clSetKernelArg(kscale, 1, sizeof k, &k));
    size_t n = SVM_BYTES / sizeof(float);
    double sum = 0;
    for (int i = 0; i < reps; i++) {
        float v = (float)(i + 1);
        CHECK(cl.clEnqueueSVMMemFill(q, a, &v, sizeof v, SVM_BYTES, 0, NULL, NULL));
        CHECK(cl.clEnqueueSVMMemcpy(q, CL_FALSE, b, a, SVM_BYTES, 0, NULL, NULL));
        CHECK(cl.clEnqueueNDRangeKernel(q, kscale, 1, NULL, &n, NULL, 0, NULL, NULL));
        CHECK(cl.clEnqueueSVMMap(q, CL_TRUE, CL_MAP_READ, b, SVM_BYTES, 0, NULL, NULL));
        sum += checksum(b, 1024);
        CHECK(cl.clEnqueueSVMUnmap(q, b, 0, NULL, NULL));
    }
    const void *both[2] = {a, b};
    CHECK(cl.clEnqueueSVMMigrateMem(q, 2, both, NULL, 0, 0, NULL, NULL));
    void *frees[2] = {a, b};
    CHECK(cl.clEnqueueSVMFree(q, 2, frees, svm_freed, ctx, 0, NULL, NULL));
    CHECK(cl.clFinish(q));
    CHECK(cl.clReleaseCommandQueue(q));
    printf("svm checksum = %.3f\n", sum);
    return 0;
}

/* --truths (see the header). */
static int truths(cl_context ctx, cl_device_id device, cl_program prog, cl_kernel kscale)
{
    cl_int err;
    cl_command_queue q = cl.clCreateCommandQueue(ctx, device, 0, &err);
    CHECK(err);
    cl_mem buf = cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
    CHECK(err);
    float k = 2.0f;
    CHECK(cl.clSetKernelArg(kscale, 0, sizeof buf, &buf));
    CHECK(cl.clSetKernelArg(kscale, 1, sizeof k, &k));
    cl_event gate = cl.clCreateUserEvent(ctx, &err);
    CHECK(err);
    size_t g = 64;
    cl_event ev = NULL;
    CHECK(cl.clEnqueueNDRangeKernel(q, kscale, 1, NULL, &g, NULL, 1, &gate, &ev));
    cl_uint refs = 0;
    CHECK(cl.clGetEventInfo(ev, CL_EVENT_REFERENCE_COUNT, sizeof refs, &refs, NULL));
    printf("reference count of a gated kernel's event = %u\n", refs);
    CHECK(cl.clSetUserEventStatus(gate, CL_COMPLETE));
    CHECK(cl.clFinish(q));
    cl_ulong t = 0;
    printf("profiling info before the queue's release -> %d\n",
           cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL));
    CHECK(cl.clReleaseCommandQueue(q));
    printf("profiling info after the queue's release -> %d\n",
           cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL));
    CHECK(cl.clReleaseEvent(ev));
    CHECK(cl.clReleaseEvent(gate));

    q = cl.clCreateCommandQueue(ctx, device, 0, &err);
    CHECK(err);
    cl_kernel unset = cl.clCreateKernel(prog, "fill", &err);
    CHECK(err);
    for (int i = 0; i < 3; i++)
        printf("clEnqueueTask with unset arguments -> %d\n", cl.clEnqueueTask(q, unset, 0, NULL, NULL));
    CHECK(cl.clFinish(q));
    CHECK(cl.clReleaseKernel(unset));
    CHECK(cl.clReleaseCommandQueue(q));
    CHECK(cl.clReleaseMemObject(buf));
    return 0;
}

/* What the command line asks for. */
typedef struct opts_t {
    int events, iterations, pipe, tiny, queues, cmdbuf, mark, wait_events, truth, svm_reps, configs;
    size_t n; /* vector length of the default run */
} opts_t;

/* 0, or 2 after the usage line. */
static int parse_args(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.events = 1, .iterations = 4, .n = 1 << 16};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-events"))
            o->events = 0;
        else if (!strcmp(argv[i], "--pipeline"))
            o->pipe = 1;
        else if (!strcmp(argv[i], "--tiny") && i + 1 < argc)
            o->tiny = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mark"))
            o->mark = 1;
        else if (!strcmp(argv[i], "--svm") && i + 1 < argc)
            o->svm_reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--configs"))
            o->configs = 1;
        else if (!strcmp(argv[i], "--truths"))
            o->truth = 1;
        else if (!strcmp(argv[i], "--wait-events"))
            o->wait_events = 1;
        else if (!strcmp(argv[i], "--queues") && i + 1 < argc)
            o->queues = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cmdbuf") && i + 1 < argc)
            o->cmdbuf = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
            o->iterations = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            o->n = (size_t)strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: clprog [--no-events] [--pipeline] [--queues N] [--cmdbuf N] [--truths] [--configs] [--svm N] "
                            "[--tiny N "
                            "[--wait-events] [--mark]] [--iterations N] [--size N]\n");
            return 2;
        }
    }
    return 0;
}

/* --tiny N: N small kernels on qa, a sync point (clFinish, or clWaitForEvents with --wait-events) every 100th. */
static int tiny_kernels(cl_context ctx, cl_command_queue qa, cl_kernel kscale, const opts_t *o)
{
    cl_mem small = tiny_scale(ctx, kscale);
    size_t g = 64;
    for (int i = 0; i < o->tiny; i++) {
        int sync = i % 100 == 99;
        cl_event ev = NULL;
        CHECK(cl.clEnqueueNDRangeKernel(qa, kscale, 1, NULL, &g, NULL, 0, NULL, sync && o->wait_events ? &ev : NULL));
        if (!sync)
            continue;
        if (ev) { /* an in-order queue: every earlier kernel is done too */
            CHECK(cl.clWaitForEvents(1, &ev));
            CHECK(cl.clReleaseEvent(ev));
        } else {
            CHECK(cl.clFinish(qa));
        }
        if (o->mark)
            fprintf(stderr, "clprog: synced %d\n", i + 1);
    }
    CHECK(cl.clFinish(qa));
    CHECK(cl.clReleaseMemObject(small));
    printf("done: %d tiny kernels\n", o->tiny);
    return 0;
}

/* The modes other than the default run: 1 when one was asked for (*rc: its exit status), else 0. */
static int other_mode(const opts_t *o, cl_platform_id platform, cl_context ctx, cl_device_id device, cl_program prog,
                      cl_command_queue qa, cl_kernel kvadd, cl_kernel kscale, int *rc_out)
{
    int rc = 0;
    const char *what = NULL;
    if (o->pipe)
        rc = pipeline(ctx, device, kvadd, o->n), what = "pipeline";
    else if (o->queues > 0)
        rc = many_queues(ctx, device, kscale, o->queues), what = "queues";
    else if (o->svm_reps > 0)
        rc = svm(ctx, device, kscale, o->svm_reps), what = "svm";
    else if (o->truth)
        rc = truths(ctx, device, prog, kscale), what = "truths";
    else if (o->configs)
        rc = configs(ctx, qa, kscale), what = "configs";
    else if (o->cmdbuf > 0)
        rc = command_buffer(platform, ctx, device, kvadd, kscale, o->cmdbuf), what = "command buffer";
    else if (o->tiny > 0)
        rc = tiny_kernels(ctx, qa, kscale, o), what = "";
    if (what && *what)
        printf("done: %s\n", what);
    *rc_out = rc;
    return what != NULL;
}

/* The default run's vadd/vadd/scale iterations on queues A and B; the first queue-A event is kept (*probe). */
static void iterate(const opts_t *o, cl_command_queue qa, cl_command_queue qb, cl_kernel kvadd, cl_kernel kscale,
                    cl_event *probe)
{
    size_t gws = o->n;
    for (int it = 0; it < o->iterations; it++) {
        cl_event ev[3] = {NULL, NULL, NULL};
        CHECK(cl.clEnqueueNDRangeKernel(qa, kvadd, 1, NULL, &gws, NULL, 0, NULL, o->events ? &ev[0] : NULL));
        CHECK(cl.clEnqueueNDRangeKernel(qa, kvadd, 1, NULL, &gws, NULL, 0, NULL, o->events ? &ev[1] : NULL));
        if (o->events) {
            CHECK(cl.clWaitForEvents(2, ev));
            CHECK(cl.clEnqueueNDRangeKernel(qb, kscale, 1, NULL, &gws, NULL, 0, NULL, &ev[2]));
            CHECK(cl.clWaitForEvents(1, &ev[2]));
            if (!*probe) {
                *probe = ev[0];
                ev[0] = NULL;
            }
            for (int e = 0; e < 3; e++)
                if (ev[e])
                    CHECK(cl.clReleaseEvent(ev[e]));
        } else {
            CHECK(cl.clFinish(qa));
            CHECK(cl.clEnqueueNDRangeKernel(qb, kscale, 1, NULL, &gws, NULL, 0, NULL, NULL));
            CHECK(cl.clFinish(qb));
        }
    }
}

/* A single work-item kernel through clEnqueueTask, filling ba. */
static void task(const opts_t *o, cl_command_queue qa, cl_kernel kfill, cl_mem ba)
{
    int fill_n = 1024;
    float fill_v = 3.0f;
    CHECK(cl.clSetKernelArg(kfill, 0, sizeof ba, &ba));
    CHECK(cl.clSetKernelArg(kfill, 1, sizeof fill_n, &fill_n));
    CHECK(cl.clSetKernelArg(kfill, 2, sizeof fill_v, &fill_v));
    cl_event tev = NULL;
    CHECK(cl.clEnqueueTask(qa, kfill, 0, NULL, o->events ? &tev : NULL));
    if (tev) {
        CHECK(cl.clWaitForEvents(1, &tev));
        CHECK(cl.clReleaseEvent(tev));
    }
}

/* Errors the program must see unchanged; returns the kernel with unset arguments (to release). */
static cl_kernel refused_enqueues(cl_program prog, cl_command_queue qa, cl_kernel kvadd, size_t gws)
{
    size_t zero = 0;
    cl_event bad = NULL;
    cl_int err;
    printf("enqueue with global size 0 -> %d\n",
           cl.clEnqueueNDRangeKernel(qa, kvadd, 1, NULL, &zero, NULL, 0, NULL, &bad));
    cl_kernel unset = cl.clCreateKernel(prog, "vadd", &err);
    CHECK(err);
    printf("enqueue with unset arguments -> %d\n",
           cl.clEnqueueNDRangeKernel(qa, unset, 1, NULL, &gws, NULL, 0, NULL, NULL));
    printf("event of the size-0 enqueue: %s\n", bad ? "set" : "untouched");
    if (bad) {
        CHECK(cl.clWaitForEvents(1, &bad));
        CHECK(cl.clReleaseEvent(bad));
    }
    return unset;
}

/* What the program can see of its queues (and of a queue-A event's profiling info, when kept). */
static void show_queues(cl_command_queue qa, cl_command_queue qb, cl_event probe)
{
    cl_command_queue_properties pa = 0, pb = 0;
    CHECK(cl.clGetCommandQueueInfo(qa, CL_QUEUE_PROPERTIES, sizeof pa, &pa, NULL));
    CHECK(cl.clGetCommandQueueInfo(qb, CL_QUEUE_PROPERTIES, sizeof pb, &pb, NULL));
    printf("queue A properties = 0x%llx, queue B properties = 0x%llx\n", (unsigned long long)pa,
           (unsigned long long)pb);
    size_t arr_size = 0;
    cl_queue_properties arr[16] = {0};
    cl_int arr_rc = cl.clGetCommandQueueInfo(qb, CL_QUEUE_PROPERTIES_ARRAY, sizeof arr, arr, &arr_size);
    printf("queue B properties array -> %d, %zu entries:", arr_rc, arr_size / sizeof arr[0]);
    for (size_t i = 0; arr_rc == CL_SUCCESS && i < arr_size / sizeof arr[0] && i < 16; i++)
        printf(" 0x%llx", (unsigned long long)arr[i]);
    printf("\n");
    if (probe) {
        cl_ulong t = 0;
        printf("profiling info of a queue-A event -> %d\n",
               cl.clGetEventProfilingInfo(probe, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL));
        CHECK(cl.clReleaseEvent(probe));
    }
}

/* The default run: vectors added and scaled over two queues, a task, refused enqueues, the queues' view. */
static int default_run(const opts_t *o, cl_context ctx, cl_program prog, cl_command_queue qa, cl_command_queue qb,
                       cl_kernel kvadd, cl_kernel kscale, cl_kernel kfill)
{
    size_t n = o->n;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c)
        return 1;
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)(i % 1000) * 0.5f;
        b[i] = (float)(i % 37);
    }
    cl_int err;
    cl_mem ba = cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof *a, a, &err);
    CHECK(err);
    cl_mem bb = cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof *b, b, &err);
    CHECK(err);
    cl_mem bc = cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof *c, NULL, &err);
    CHECK(err);
    CHECK(cl.clSetKernelArg(kvadd, 0, sizeof ba, &ba));
    CHECK(cl.clSetKernelArg(kvadd, 1, sizeof bb, &bb));
    CHECK(cl.clSetKernelArg(kvadd, 2, sizeof bc, &bc));
    float k = 1.0009765625f;
    CHECK(cl.clSetKernelArg(kscale, 0, sizeof bc, &bc));
    CHECK(cl.clSetKernelArg(kscale, 1, sizeof k, &k));

    cl_event probe = NULL;
    iterate(o, qa, qb, kvadd, kscale, &probe);
    CHECK(cl.clEnqueueReadBuffer(qa, bc, CL_TRUE, 0, n * sizeof *c, c, 0, NULL, NULL));
    printf("checksum c = %.6f\n", checksum(c, n));
    task(o, qa, kfill, ba);
    CHECK(cl.clEnqueueReadBuffer(qa, ba, CL_TRUE, 0, n * sizeof *a, a, 0, NULL, NULL));
    printf("checksum a = %.6f\n", checksum(a, n));
    cl_kernel unset = refused_enqueues(prog, qa, kvadd, n);
    show_queues(qa, qb, probe);

    CHECK(cl.clReleaseKernel(unset));
    CHECK(cl.clReleaseMemObject(ba));
    CHECK(cl.clReleaseMemObject(bb));
    CHECK(cl.clReleaseMemObject(bc));
    free(a);
    free(b);
    free(c);
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    cl_platform_id platform;
    cl_device_id device;
    cl_uint ndev = 0;
    if (load_api(&platform) != 0 || cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, &ndev) != CL_SUCCESS ||
        ndev == 0) {
        fprintf(stderr, "clprog: no OpenCL device\n");
        return 77;
    }
    cl_int err;
    cl_context ctx = cl.clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CHECK(err);
    cl_command_queue qa = cl.clCreateCommandQueue(ctx, device, 0, &err);
    CHECK(err);
    const cl_queue_properties bprops[] = {CL_QUEUE_PROPERTIES, 0, 0};
    cl_command_queue qb = cl.clCreateCommandQueueWithProperties(ctx, device, bprops, &err);
    CHECK(err);
    const char *src = kSource;
    cl_program prog = cl.clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    CHECK(err);
    CHECK(cl.clBuildProgram(prog, 1, &device, "", NULL, NULL));
    cl_kernel kvadd = cl.clCreateKernel(prog, "vadd", &err);
    CHECK(err);
    cl_kernel kscale = cl.clCreateKernel(prog, "scale", &err);
    CHECK(err);
    cl_kernel kfill = cl.clCreateKernel(prog, "fill", &err);
    CHECK(err);
    int rc;
    if (other_mode(&o, platform, ctx, device, prog, qa, kvadd, kscale, &rc))
        return rc;
    if (default_run(&o, ctx, prog, qa, qb, kvadd, kscale, kfill) != 0)
        return 1;

    CHECK(cl.clReleaseKernel(kvadd));
    CHECK(cl.clReleaseKernel(kscale));
    CHECK(cl.clReleaseKernel(kfill));
    CHECK(cl.clReleaseProgram(prog));
    CHECK(cl.clReleaseCommandQueue(qa));
    CHECK(cl.clReleaseCommandQueue(qb));
    CHECK(cl.clReleaseContext(ctx));
    printf("done: %d iterations, %s\n", o.iterations, o.events ? "events" : "no events");
    return 0;
}
