/* test_cl_layer_hooks.c — every enqueue entry point the layer hooks, table-driven, on a loader double (as in
 * test_cl_layer_props.c) over the driver double fake_opencl.c: each entry point's driver function is a stub here
 * that either refuses (CL_OUT_OF_RESOURCES) or enqueues a marker of the double in its place. Refused: every entry
 * point counts exactly one error under its kernel's or its own name, with the error's name, and nothing timed
 * (clEnqueueTask's refusals were not counted), also on a NULL queue ktiming cannot attach (device "unknown"; they
 * were passed through uncounted). Accepted: every one is timed once with the bytes it moves — the SVM enqueues and
 * the cl_intel_unified_shared_memory ones handed out by clGetExtensionFunctionAddressForPlatform included (neither
 * was timed), and a second platform's, handed out under the same names (they were returned unwrapped). Also what the program reads of its events: "no profiling" on a queue created
 * without it, also after the program released the queue, and CL_EVENT_REFERENCE_COUNT without ktiming's own
 * reference. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_0_APIS
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl_icd.h>
#include <CL/cl_ext.h>
#include <ktiming.h>

#include "cl_layer_double.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wunused-parameter" /* the stubs take the entry points' parameters */

#define REFUSED CL_OUT_OF_RESOURCES
#define SZ 4096u
#define DEVICE "ktiming fake device"


static cl_icd_dispatch g_fake;   /* the double's own entry points */
static cl_icd_dispatch g_target; /* what the layer calls: the double, and the stubs below */
static const cl_icd_dispatch *L; /* the layer's dispatch: what the program calls */
static int g_refuse;             /* the stubs refuse (1) or enqueue a marker (0) */
static char g_host[SZ];          /* host memory and "SVM" pointers the stubs are handed */

/* An accepted command: a marker of the double stands in for it. */
static cl_int marker(cl_command_queue q, cl_uint nw, const cl_event *w, cl_event *ev)
{
    return g_refuse ? REFUSED : g_fake.clEnqueueMarkerWithWaitList(q, nw, w, ev);
}

#define STUB(name, params) static cl_int CL_API_CALL stub_##name params { return marker(q, nw, w, ev); }
STUB(clEnqueueNDRangeKernel, (cl_command_queue q, cl_kernel k, cl_uint d, const size_t *o, const size_t *g,
                              const size_t *l, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(clEnqueueTask, (cl_command_queue q, cl_kernel k, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(clEnqueueNativeKernel, (cl_command_queue q, void(CL_CALLBACK *fn)(void *), void *a, size_t cb, cl_uint nmo,
                             const cl_mem *ml, const void **aml, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(clEnqueueReadBuffer, (cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t s, void *p, cl_uint nw,
                           const cl_event *w, cl_event *ev))
STUB(clEnqueueWriteBuffer, (cl_command_queue q, cl_mem m, cl_bool b, size_t o, size_t s, const void *p, cl_uint nw,
                            const cl_event *w, cl_event *ev))
STUB(clEnqueueCopyBuffer, (cl_command_queue q, cl_mem a, cl_mem b, size_t so, size_t d, size_t s, cl_uint nw,
                           const cl_event *w, cl_event *ev))
STUB(clEnqueueFillBuffer, (cl_command_queue q, cl_mem m, const void *pat, size_t ps, size_t o, size_t s, cl_uint nw,
                           const cl_event *w, cl_event *ev))
STUB(clEnqueueReadBufferRect, (cl_command_queue q, cl_mem m, cl_bool b, const size_t *bo, const size_t *ho,
                               const size_t *r, size_t a, size_t c, size_t d, size_t e, void *p, cl_uint nw,
                               const cl_event *w, cl_event *ev))
STUB(clEnqueueWriteBufferRect, (cl_command_queue q, cl_mem m, cl_bool b, const size_t *bo, const size_t *ho,
                                const size_t *r, size_t a, size_t c, size_t d, size_t e, const void *p, cl_uint nw,
                                const cl_event *w, cl_event *ev))
STUB(clEnqueueCopyBufferRect, (cl_command_queue q, cl_mem s, cl_mem d, const size_t *so, const size_t *dof,
                               const size_t *r, size_t a, size_t b, size_t c, size_t e, cl_uint nw,
                               const cl_event *w, cl_event *ev))
STUB(clEnqueueReadImage, (cl_command_queue q, cl_mem m, cl_bool b, const size_t *o, const size_t *r, size_t rp,
                          size_t sp, void *p, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(clEnqueueWriteImage, (cl_command_queue q, cl_mem m, cl_bool b, const size_t *o, const size_t *r, size_t rp,
                           size_t sp, const void *p, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(clEnqueueCopyImage, (cl_command_queue q, cl_mem s, cl_mem d, const size_t *so, const size_t *dof,
                          const size_t *r, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(clEnqueueFillImage, (cl_command_queue q, cl_mem m, const void *c, const size_t *o, const size_t *r, cl_uint nw,
                          const cl_event *w, cl_event *ev))
STUB(clEnqueueCopyImageToBuffer, (cl_command_queue q, cl_mem s, cl_mem d, const size_t *so, const size_t *r,
                                  size_t dof, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(clEnqueueCopyBufferToImage, (cl_command_queue q, cl_mem s, cl_mem d, size_t so, const size_t *dof,
                                  const size_t *r, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(clEnqueueUnmapMemObject, (cl_command_queue q, cl_mem m, void *p, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(clEnqueueMigrateMemObjects, (cl_command_queue q, cl_uint n, const cl_mem *ms, cl_mem_migration_flags f,
                                  cl_uint nw, const cl_event *w, cl_event *ev))
STUB(clEnqueueSVMFree, (cl_command_queue q, cl_uint n, void **ps,
                        void(CL_CALLBACK *fn)(cl_command_queue, cl_uint, void **, void *), void *u, cl_uint nw,
                        const cl_event *w, cl_event *ev))
STUB(clEnqueueSVMMemcpy, (cl_command_queue q, cl_bool b, void *d, const void *s, size_t n, cl_uint nw,
                          const cl_event *w, cl_event *ev))
STUB(clEnqueueSVMMemFill, (cl_command_queue q, void *p, const void *pat, size_t ps, size_t n, cl_uint nw,
                           const cl_event *w, cl_event *ev))
STUB(clEnqueueSVMMap, (cl_command_queue q, cl_bool b, cl_map_flags f, void *p, size_t n, cl_uint nw,
                       const cl_event *w, cl_event *ev))
STUB(clEnqueueSVMUnmap, (cl_command_queue q, void *p, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(clEnqueueSVMMigrateMem, (cl_command_queue q, cl_uint n, const void **ps, const size_t *s,
                              cl_mem_migration_flags f, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(usm_fill, (cl_command_queue q, void *d, const void *p, size_t ps, size_t n, cl_uint nw, const cl_event *w,
                cl_event *ev))
STUB(usm_memset, (cl_command_queue q, void *d, cl_int v, size_t n, cl_uint nw, const cl_event *w, cl_event *ev))
STUB(usm_memcpy, (cl_command_queue q, cl_bool b, void *d, const void *s, size_t n, cl_uint nw, const cl_event *w,
                  cl_event *ev))
STUB(usm_migrate, (cl_command_queue q, const void *p, size_t n, cl_mem_migration_flags f, cl_uint nw,
                   const cl_event *w, cl_event *ev))
STUB(usm_advise, (cl_command_queue q, const void *p, size_t n, cl_mem_advice_intel a, cl_uint nw, const cl_event *w,
                  cl_event *ev))
#undef STUB

/* A command buffer's enqueue: the double has no command buffers, the layer only needs the entry point. */
static cl_int CL_API_CALL stub_cmdbuf(cl_uint nq, cl_command_queue *qs, cl_command_buffer_khr b, cl_uint nw,
                                      const cl_event *w, cl_event *ev)
{
    return marker(qs[0], nw, w, ev);
}

static void *CL_API_CALL stub_clEnqueueMapBuffer(cl_command_queue q, cl_mem m, cl_bool b, cl_map_flags f, size_t o,
                                                 size_t s, cl_uint nw, const cl_event *w, cl_event *ev, cl_int *err)
{
    cl_int rc = marker(q, nw, w, ev);
    if (err)
        *err = rc;
    return rc == CL_SUCCESS ? g_host : NULL;
}

static void *CL_API_CALL stub_clEnqueueMapImage(cl_command_queue q, cl_mem m, cl_bool b, cl_map_flags f,
                                                const size_t *o, const size_t *r, size_t *rp, size_t *sp, cl_uint nw,
                                                const cl_event *w, cl_event *ev, cl_int *err)
{
    cl_int rc = marker(q, nw, w, ev);
    if (err)
        *err = rc;
    return rc == CL_SUCCESS ? g_host : NULL;
}

/* What the layer asks of images and buffers to count bytes: 4-byte pixels, SZ-byte buffers. */
static cl_int CL_API_CALL stub_image_info(cl_mem m, cl_image_info what, size_t cap, void *v, size_t *ret)
{
    size_t e = 4;
    if (what != CL_IMAGE_ELEMENT_SIZE || cap < sizeof e)
        return CL_INVALID_VALUE;
    memcpy(v, &e, sizeof e);
    return CL_SUCCESS;
}

static cl_int CL_API_CALL stub_mem_info(cl_mem m, cl_mem_info what, size_t cap, void *v, size_t *ret)
{
    size_t s = SZ;
    if (what != CL_MEM_SIZE || cap < sizeof s)
        return CL_INVALID_VALUE;
    memcpy(v, &s, sizeof s);
    return CL_SUCCESS;
}

/* A second platform's driver: its own entry points under the same names (they count their calls). */
static struct { int platform; } g_second_platform;
#define SECOND ((cl_platform_id)&g_second_platform)
static int g_second_calls;
static cl_int CL_API_CALL second_usm_fill(cl_command_queue q, void *d, const void *p, size_t ps, size_t n, cl_uint nw,
                                          const cl_event *w, cl_event *ev)
{
    g_second_calls++;
    return marker(q, nw, w, ev);
}
static cl_int CL_API_CALL second_cmdbuf(cl_uint nq, cl_command_queue *qs, cl_command_buffer_khr b, cl_uint nw,
                                        const cl_event *w, cl_event *ev)
{
    g_second_calls++;
    return marker(qs[0], nw, w, ev);
}

/* The extension entry points the "driver" hands out. */
static void *CL_API_CALL stub_ext_platform(cl_platform_id p, const char *name)
{
    if (p == SECOND)
        return !strcmp(name, "clEnqueueMemFillINTEL")       ? (void *)second_usm_fill
               : !strcmp(name, "clEnqueueCommandBufferKHR") ? (void *)second_cmdbuf
                                                             : NULL;
    static const struct {
        const char *name;
        void *fn;
    } kExt[] = {{"clEnqueueMemFillINTEL", (void *)stub_usm_fill},
                {"clEnqueueMemsetINTEL", (void *)stub_usm_memset},
                {"clEnqueueMemcpyINTEL", (void *)stub_usm_memcpy},
                {"clEnqueueMigrateMemINTEL", (void *)stub_usm_migrate},
                {"clEnqueueMemAdviseINTEL", (void *)stub_usm_advise},
                {"clEnqueueCommandBufferKHR", (void *)stub_cmdbuf}};
    for (size_t i = 0; i < sizeof kExt / sizeof kExt[0]; i++)
        if (!strcmp(name, kExt[i].name))
            return kExt[i].fn;
    return NULL;
}

/* ---------------------------------------------------------------------------------------------------
 * The table: one call per hooked entry point, through the layer, with the entry it is timed under and its bytes
 * ------------------------------------------------------------------------------------------------- */

static cl_platform_id g_platform;
static cl_context g_ctx;
static cl_mem g_mem;
static cl_kernel g_k_ndrange, g_k_task;

static const size_t kOrigin[3] = {0, 0, 0};
static const size_t kRegion[3] = {16, 4, 2}; /* 128 elements */

static void CL_CALLBACK native_fn(void *args) {}

static cl_int c_ndrange(cl_command_queue q)
{
    size_t g = 1;
    return L->clEnqueueNDRangeKernel(q, g_k_ndrange, 1, NULL, &g, NULL, 0, NULL, NULL);
}
static cl_int c_task(cl_command_queue q) { return L->clEnqueueTask(q, g_k_task, 0, NULL, NULL); }
static cl_int c_native(cl_command_queue q)
{
    return L->clEnqueueNativeKernel(q, native_fn, NULL, 0, 0, NULL, NULL, 0, NULL, NULL);
}
static cl_int c_read(cl_command_queue q) { return L->clEnqueueReadBuffer(q, g_mem, 0, 0, SZ, g_host, 0, NULL, NULL); }
static cl_int c_write(cl_command_queue q)
{
    return L->clEnqueueWriteBuffer(q, g_mem, 0, 0, SZ, g_host, 0, NULL, NULL);
}
static cl_int c_copy(cl_command_queue q) { return L->clEnqueueCopyBuffer(q, g_mem, g_mem, 0, 0, SZ, 0, NULL, NULL); }
static cl_int c_fill(cl_command_queue q) { return L->clEnqueueFillBuffer(q, g_mem, g_host, 4, 0, SZ, 0, NULL, NULL); }
static cl_int c_read_rect(cl_command_queue q)
{
    return L->clEnqueueReadBufferRect(q, g_mem, 0, kOrigin, kOrigin, kRegion, 0, 0, 0, 0, g_host, 0, NULL, NULL);
}
static cl_int c_write_rect(cl_command_queue q)
{
    return L->clEnqueueWriteBufferRect(q, g_mem, 0, kOrigin, kOrigin, kRegion, 0, 0, 0, 0, g_host, 0, NULL, NULL);
}
static cl_int c_copy_rect(cl_command_queue q)
{
    return L->clEnqueueCopyBufferRect(q, g_mem, g_mem, kOrigin, kOrigin, kRegion, 0, 0, 0, 0, 0, NULL, NULL);
}
static cl_int c_read_image(cl_command_queue q)
{
    return L->clEnqueueReadImage(q, g_mem, 0, kOrigin, kRegion, 0, 0, g_host, 0, NULL, NULL);
}
static cl_int c_write_image(cl_command_queue q)
{
    return L->clEnqueueWriteImage(q, g_mem, 0, kOrigin, kRegion, 0, 0, g_host, 0, NULL, NULL);
}
static cl_int c_copy_image(cl_command_queue q)
{
    return L->clEnqueueCopyImage(q, g_mem, g_mem, kOrigin, kOrigin, kRegion, 0, NULL, NULL);
}
static cl_int c_fill_image(cl_command_queue q)
{
    return L->clEnqueueFillImage(q, g_mem, g_host, kOrigin, kRegion, 0, NULL, NULL);
}
static cl_int c_image_to_buffer(cl_command_queue q)
{
    return L->clEnqueueCopyImageToBuffer(q, g_mem, g_mem, kOrigin, kRegion, 0, 0, NULL, NULL);
}
static cl_int c_buffer_to_image(cl_command_queue q)
{
    return L->clEnqueueCopyBufferToImage(q, g_mem, g_mem, 0, kOrigin, kRegion, 0, NULL, NULL);
}
static cl_int c_map(cl_command_queue q)
{
    cl_int err = 0;
    L->clEnqueueMapBuffer(q, g_mem, 0, CL_MAP_READ, 0, SZ, 0, NULL, NULL, &err);
    return err;
}
static cl_int c_map_image(cl_command_queue q)
{
    cl_int err = 0;
    size_t rp = 0, sp = 0;
    L->clEnqueueMapImage(q, g_mem, 0, CL_MAP_READ, kOrigin, kRegion, &rp, &sp, 0, NULL, NULL, &err);
    return err;
}
static cl_int c_unmap(cl_command_queue q) { return L->clEnqueueUnmapMemObject(q, g_mem, g_host, 0, NULL, NULL); }
static cl_int c_migrate(cl_command_queue q)
{
    cl_mem two[2] = {g_mem, g_mem};
    return L->clEnqueueMigrateMemObjects(q, 2, two, 0, 0, NULL, NULL);
}
static cl_int c_svm_free(cl_command_queue q)
{
    void *p[1] = {g_host};
    return L->clEnqueueSVMFree(q, 1, p, NULL, NULL, 0, NULL, NULL);
}
static cl_int c_svm_memcpy(cl_command_queue q)
{
    return L->clEnqueueSVMMemcpy(q, 0, g_host, g_host, SZ, 0, NULL, NULL);
}
static cl_int c_svm_fill(cl_command_queue q) { return L->clEnqueueSVMMemFill(q, g_host, g_host, 4, SZ, 0, NULL, NULL); }
static cl_int c_svm_map(cl_command_queue q) { return L->clEnqueueSVMMap(q, 0, CL_MAP_READ, g_host, SZ, 0, NULL, NULL); }
static cl_int c_svm_unmap(cl_command_queue q) { return L->clEnqueueSVMUnmap(q, g_host, 0, NULL, NULL); }
static cl_int c_svm_migrate(cl_command_queue q)
{
    const void *p[2] = {g_host, g_host};
    const size_t s[2] = {SZ, SZ / 2};
    return L->clEnqueueSVMMigrateMem(q, 2, p, s, 0, 0, NULL, NULL);
}
static void *ext(const char *name)
{
    void *fn = L->clGetExtensionFunctionAddressForPlatform(g_platform, name);
    assert_non_null(fn);
    return fn;
}
static cl_int c_usm_fill(cl_command_queue q)
{
    clEnqueueMemFillINTEL_fn fn = (clEnqueueMemFillINTEL_fn)ext("clEnqueueMemFillINTEL");
    return fn(q, g_host, g_host, 4, SZ, 0, NULL, NULL);
}
static cl_int c_usm_memset(cl_command_queue q)
{
    clEnqueueMemsetINTEL_fn fn = (clEnqueueMemsetINTEL_fn)ext("clEnqueueMemsetINTEL");
    return fn(q, g_host, 0, SZ, 0, NULL, NULL);
}
static cl_int c_usm_memcpy(cl_command_queue q)
{
    clEnqueueMemcpyINTEL_fn fn = (clEnqueueMemcpyINTEL_fn)ext("clEnqueueMemcpyINTEL");
    return fn(q, 0, g_host, g_host, SZ, 0, NULL, NULL);
}
static cl_int c_usm_migrate(cl_command_queue q)
{
    clEnqueueMigrateMemINTEL_fn fn = (clEnqueueMigrateMemINTEL_fn)ext("clEnqueueMigrateMemINTEL");
    return fn(q, g_host, SZ, 0, 0, NULL, NULL);
}
static cl_int c_usm_advise(cl_command_queue q)
{
    clEnqueueMemAdviseINTEL_fn fn = (clEnqueueMemAdviseINTEL_fn)ext("clEnqueueMemAdviseINTEL");
    return fn(q, g_host, SZ, 0, 0, NULL, NULL);
}
static cl_int c_cmdbuf(cl_command_queue q)
{
    clEnqueueCommandBufferKHR_fn fn = (clEnqueueCommandBufferKHR_fn)ext("clEnqueueCommandBufferKHR");
    return fn(1, &q, (cl_command_buffer_khr)g_host, 0, NULL, NULL);
}

/* A hooked entry point: how to call it, the entry it is timed under, the bytes an accepted call moves. */
typedef struct row_t {
    cl_int (*call)(cl_command_queue);
    const char *entry;
    uint64_t bytes;
} row_t;

static const row_t kRows[] = {
    {c_ndrange, "k_ndrange", 0},
    {c_task, "k_task", 0},
    {c_native, "clEnqueueNativeKernel", 0},
    {c_read, "clEnqueueReadBuffer", SZ},
    {c_write, "clEnqueueWriteBuffer", SZ},
    {c_copy, "clEnqueueCopyBuffer", SZ},
    {c_fill, "clEnqueueFillBuffer", SZ},
    {c_read_rect, "clEnqueueReadBufferRect", 128},
    {c_write_rect, "clEnqueueWriteBufferRect", 128},
    {c_copy_rect, "clEnqueueCopyBufferRect", 128},
    {c_read_image, "clEnqueueReadImage", 128 * 4},
    {c_write_image, "clEnqueueWriteImage", 128 * 4},
    {c_copy_image, "clEnqueueCopyImage", 128 * 4},
    {c_fill_image, "clEnqueueFillImage", 128 * 4},
    {c_image_to_buffer, "clEnqueueCopyImageToBuffer", 128 * 4},
    {c_buffer_to_image, "clEnqueueCopyBufferToImage", 128 * 4},
    {c_map, "clEnqueueMapBuffer", SZ},
    {c_map_image, "clEnqueueMapImage", 128 * 4},
    {c_unmap, "clEnqueueUnmapMemObject", 0},
    {c_migrate, "clEnqueueMigrateMemObjects", 2 * SZ},
    {c_svm_free, "clEnqueueSVMFree", 0},
    {c_svm_memcpy, "clEnqueueSVMMemcpy", SZ},
    {c_svm_fill, "clEnqueueSVMMemFill", SZ},
    {c_svm_map, "clEnqueueSVMMap", SZ},
    {c_svm_unmap, "clEnqueueSVMUnmap", 0},
    {c_svm_migrate, "clEnqueueSVMMigrateMem", SZ + SZ / 2},
    {c_usm_fill, "clEnqueueMemFillINTEL", SZ},
    {c_usm_memset, "clEnqueueMemsetINTEL", SZ},
    {c_usm_memcpy, "clEnqueueMemcpyINTEL", SZ},
    {c_usm_migrate, "clEnqueueMigrateMemINTEL", SZ},
    {c_usm_advise, "clEnqueueMemAdviseINTEL", 0},
    {c_cmdbuf, "cmdbuf", 0},
};
#define NROWS (sizeof kRows / sizeof kRows[0])

static cl_command_queue layer_queue(cl_command_queue_properties props)
{
    cl_device_id d;
    cl_int err = 0;
    assert_int_equal(L->clGetDeviceIDs(g_platform, CL_DEVICE_TYPE_ALL, 1, &d, NULL), CL_SUCCESS);
    cl_command_queue q = L->clCreateCommandQueue(g_ctx, d, props, &err);
    assert_non_null(q);
    return q;
}

static void test_refused_everywhere(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = layer_queue(0);
    g_refuse = 1;
    for (size_t i = 0; i < NROWS; i++)
        assert_int_equal(kRows[i].call(q), REFUSED); /* the driver's answer, unchanged */
    g_refuse = 0;
    assert_int_equal(L->clFinish(q), CL_SUCCESS);
    assert_int_equal(L->clReleaseCommandQueue(q), CL_SUCCESS);
    kt_snapshot_t *s = kt_snapshot();
    for (size_t i = 0; i < NROWS; i++) {
        const kt_kernel_timing_t *e = kt_snapshot_find(s, kRows[i].entry, KT_BACKEND_OPENCL, DEVICE);
        if (!e)
            fail_msg("%s: the refusal was not counted", kRows[i].entry);
        if (e->errors != 1 || strcmp(e->last_error, "CL_OUT_OF_RESOURCES") != 0 || e->dispatch_count != 0)
            fail_msg("%s: %llu errors (%s), %llu dispatches", kRows[i].entry, (unsigned long long)e->errors,
                     e->last_error, (unsigned long long)e->dispatch_count);
    }
    kt_snapshot_free(s);
}

/* The same refusals on a NULL queue (one ktiming cannot attach): still one error each under the kernel's or the
 * command's name, on no device ("unknown"); they were passed through uncounted. */
static void test_refused_unattached(void **state)
{
    (void)state;
    kt_reset();
    g_refuse = 1;
    for (size_t i = 0; i < NROWS; i++)
        assert_int_equal(kRows[i].call(NULL), REFUSED); /* the driver's answer, unchanged */
    g_refuse = 0;
    kt_snapshot_t *s = kt_snapshot();
    for (size_t i = 0; i < NROWS; i++) {
        const kt_kernel_timing_t *e = kt_snapshot_find(s, kRows[i].entry, KT_BACKEND_OPENCL, NULL);
        if (!e)
            fail_msg("%s on a NULL queue: the refusal was not counted", kRows[i].entry);
        if (e->errors != 1 || strcmp(e->last_error, "CL_OUT_OF_RESOURCES") != 0 || e->dispatch_count != 0 ||
            strcmp(e->device, "unknown") != 0)
            fail_msg("%s on a NULL queue: %llu errors (%s), %llu dispatches, device %s", kRows[i].entry,
                     (unsigned long long)e->errors, e->last_error, (unsigned long long)e->dispatch_count, e->device);
    }
    kt_snapshot_free(s);
}

static void test_timed_everywhere(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = layer_queue(0);
    for (size_t i = 0; i < NROWS; i++)
        assert_int_equal(kRows[i].call(q), CL_SUCCESS);
    assert_int_equal(L->clFinish(q), CL_SUCCESS);
    assert_int_equal(L->clReleaseCommandQueue(q), CL_SUCCESS);
    kt_flush();
    kt_snapshot_t *s = kt_snapshot();
    for (size_t i = 0; i < NROWS; i++) {
        const kt_kernel_timing_t *e = kt_snapshot_find(s, kRows[i].entry, KT_BACKEND_OPENCL, DEVICE);
        if (!e)
            fail_msg("%s: not timed", kRows[i].entry);
        if (e->dispatch_count != 1 || e->bytes != kRows[i].bytes || e->errors != 0)
            fail_msg("%s: %llu dispatches, %llu bytes (expected 1, %llu), %llu errors", kRows[i].entry,
                     (unsigned long long)e->dispatch_count, (unsigned long long)e->bytes,
                     (unsigned long long)kRows[i].bytes, (unsigned long long)e->errors);
    }
    kt_snapshot_free(s);
}

/* A second platform's driver hands out its own pointers under the names the first's were wrapped under: the program
 * gets wrappers of them too (it got them unwrapped: neither timed nor counted), and they call that driver's. */
static void test_second_platform_wrapped(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = layer_queue(0);
    clEnqueueMemFillINTEL_fn fill1 = (clEnqueueMemFillINTEL_fn)ext("clEnqueueMemFillINTEL");
    clEnqueueMemFillINTEL_fn fill2 =
        (clEnqueueMemFillINTEL_fn)L->clGetExtensionFunctionAddressForPlatform(SECOND, "clEnqueueMemFillINTEL");
    clEnqueueCommandBufferKHR_fn cb2 =
        (clEnqueueCommandBufferKHR_fn)L->clGetExtensionFunctionAddressForPlatform(SECOND, "clEnqueueCommandBufferKHR");
    assert_non_null(fill2);
    assert_non_null(cb2);
    assert_true(fill2 != fill1);
    assert_true((void *)fill2 != (void *)second_usm_fill);
    assert_true((void *)cb2 != (void *)second_cmdbuf);
    g_second_calls = 0;
    assert_int_equal(fill2(q, g_host, g_host, 4, SZ, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(cb2(1, &q, (cl_command_buffer_khr)g_host, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(g_second_calls, 2); /* the second driver's functions ran, not the first's */
    assert_int_equal(fill1(q, g_host, g_host, 4, SZ, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(g_second_calls, 2);
    assert_int_equal(L->clFinish(q), CL_SUCCESS);
    assert_int_equal(L->clReleaseCommandQueue(q), CL_SUCCESS);
    kt_flush();
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = kt_snapshot_find(s, "clEnqueueMemFillINTEL", KT_BACKEND_OPENCL, DEVICE);
    if (!e || e->dispatch_count != 2 || e->bytes != 2 * SZ)
        fail_msg("USM fill through both platforms: %llu dispatches (expected 2)",
                 e ? (unsigned long long)e->dispatch_count : 0ull);
    e = kt_snapshot_find(s, "cmdbuf", KT_BACKEND_OPENCL, DEVICE);
    if (!e || e->dispatch_count != 1)
        fail_msg("the second platform's command buffer enqueue: %llu dispatches (expected 1)",
                 e ? (unsigned long long)e->dispatch_count : 0ull);
    kt_snapshot_free(s);
}

/* The program's view of its events: the profiling it did not ask for stays hidden after it released the queue,
 * and the reference count leaves out ktiming's (read natively on the double: the same sequence without the
 * layer). */
static void test_event_view(void **state)
{
    (void)state;
    cl_device_id d;
    cl_int err = 0;
    assert_int_equal(g_fake.clGetDeviceIDs(g_platform, CL_DEVICE_TYPE_ALL, 1, &d, NULL), CL_SUCCESS);
    size_t g = 1;
    cl_uint native = 0, seen = 0;
    for (int layered = 0; layered < 2; layered++) {
        const cl_icd_dispatch *api = layered ? L : &g_fake;
        cl_command_queue q = api->clCreateCommandQueue(g_ctx, d, 0, &err);
        assert_non_null(q);
        cl_event gate = api->clCreateUserEvent(g_ctx, &err), ev = NULL;
        assert_int_equal(api->clEnqueueNDRangeKernel(q, g_k_ndrange, 1, NULL, &g, NULL, 1, &gate, &ev), CL_SUCCESS);
        cl_uint refs = 0;
        assert_int_equal(api->clGetEventInfo(ev, CL_EVENT_REFERENCE_COUNT, sizeof refs, &refs, NULL), CL_SUCCESS);
        *(layered ? &seen : &native) = refs;
        assert_int_equal(api->clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
        assert_int_equal(api->clFinish(q), CL_SUCCESS);
        cl_ulong t = 0;
        if (layered) {
            assert_int_equal(api->clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL),
                             CL_PROFILING_INFO_NOT_AVAILABLE);
            /* the double frees a released queue at once: keep it alive for the event, as real drivers do */
            assert_int_equal(g_fake.clRetainCommandQueue(q), CL_SUCCESS);
            assert_int_equal(api->clReleaseCommandQueue(q), CL_SUCCESS);
            assert_int_equal(api->clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL),
                             CL_PROFILING_INFO_NOT_AVAILABLE);
            kt_flush();
            g_fake.clReleaseCommandQueue(q);
        } else {
            api->clReleaseCommandQueue(q);
        }
        api->clReleaseEvent(ev);
        api->clReleaseEvent(gate);
    }
    assert_int_equal(seen, native);
}

int main(void)
{
    void *driver = dlopen(FAKE_OPENCL, RTLD_NOW | RTLD_LOCAL);
    void *layer = dlopen(CL_INTERCEPT, RTLD_NOW | RTLD_LOCAL);
    if (!driver || !layer) {
        fprintf(stderr, "cannot load the driver double or the layer: %s\n", dlerror());
        return 1;
    }
    cl_layer_double_fill(&g_fake, driver);
    g_target = g_fake;
#define STUBBED(fn) g_target.fn = stub_##fn;
    STUBBED(clEnqueueNDRangeKernel) STUBBED(clEnqueueTask) STUBBED(clEnqueueNativeKernel)
    STUBBED(clEnqueueReadBuffer) STUBBED(clEnqueueWriteBuffer) STUBBED(clEnqueueCopyBuffer)
    STUBBED(clEnqueueFillBuffer) STUBBED(clEnqueueReadBufferRect) STUBBED(clEnqueueWriteBufferRect)
    STUBBED(clEnqueueCopyBufferRect) STUBBED(clEnqueueReadImage) STUBBED(clEnqueueWriteImage)
    STUBBED(clEnqueueCopyImage) STUBBED(clEnqueueFillImage) STUBBED(clEnqueueCopyImageToBuffer)
    STUBBED(clEnqueueCopyBufferToImage) STUBBED(clEnqueueMapBuffer) STUBBED(clEnqueueMapImage)
    STUBBED(clEnqueueUnmapMemObject) STUBBED(clEnqueueMigrateMemObjects) STUBBED(clEnqueueSVMFree)
    STUBBED(clEnqueueSVMMemcpy) STUBBED(clEnqueueSVMMemFill) STUBBED(clEnqueueSVMMap) STUBBED(clEnqueueSVMUnmap)
    STUBBED(clEnqueueSVMMigrateMem)
#undef STUBBED
    g_target.clGetImageInfo = stub_image_info;
    g_target.clGetMemObjectInfo = stub_mem_info;
    g_target.clGetExtensionFunctionAddressForPlatform = stub_ext_platform;
    cl_int (*init)(cl_uint, const cl_icd_dispatch *, cl_uint *, const cl_icd_dispatch **);
    *(void **)&init = dlsym(layer, "clInitLayer");
    cl_uint got = 0;
    if (!init || init((cl_uint)(sizeof g_target / sizeof(void *)), &g_target, &got, &L) != CL_SUCCESS) {
        fprintf(stderr, "clInitLayer failed\n");
        return 1;
    }
    cl_device_id d;
    cl_int err = 0;
    L->clGetPlatformIDs(1, &g_platform, NULL);
    L->clGetDeviceIDs(g_platform, CL_DEVICE_TYPE_ALL, 1, &d, NULL);
    g_ctx = L->clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    g_mem = L->clCreateBuffer(g_ctx, CL_MEM_READ_WRITE, SZ, NULL, &err);
    g_k_ndrange = L->clCreateKernel(NULL, "k_ndrange", &err);
    g_k_task = L->clCreateKernel(NULL, "k_task", &err);
    cl_uint us = 0;
    L->clSetKernelArg(g_k_ndrange, 0, sizeof us, &us);
    L->clSetKernelArg(g_k_task, 0, sizeof us, &us);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_refused_everywhere),
                                       cmocka_unit_test(test_refused_unattached),
                                       cmocka_unit_test(test_second_platform_wrapped),
                                       cmocka_unit_test(test_timed_everywhere), cmocka_unit_test(test_event_view)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    L->clReleaseKernel(g_k_ndrange);
    L->clReleaseKernel(g_k_task);
    L->clReleaseMemObject(g_mem);
    L->clReleaseContext(g_ctx);
    return rc;
}
