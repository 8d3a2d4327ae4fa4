/* cl_direct.c — libktiming_cl_direct.so: the OpenCL entry points libktiming uses, bypassing ktiming's own hooks.
 *
 * `ktiming run` points KTIMING_OPENCL_LIBRARY here. When the intercept layer is active it binds this library
 * to the layer's target dispatch (kt_cl_direct_bind), so libktiming's own calls (attach, calibration, event
 * callbacks, releases at exit) go straight to the driver instead of through the layer's hooks. Unbound (a
 * loader without layers, where the LD_PRELOAD entry points hook instead), every call goes to the real loader
 * (env KTIMING_CL_INTERCEPT_LOADER, default libOpenCL.so.1), opened here with RTLD_LOCAL so the preloaded
 * symbols are never found. Only libktiming opens this library (dlopen, RTLD_LOCAL): it interposes nothing.
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_0_APIS
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl_icd.h>

#include "core/env.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define KTI_EXPORT __attribute__((visibility("default")))

/* Every entry point exported: X(return type, name, (parameters), (arguments), value when the target lacks it).
 * This is what libktiming's OpenCL backend resolves, plus a few neighbours it may come to use. */
#define KTI_DIRECT_FUNCS(X)                                                                                      \
    X(cl_int, clGetPlatformIDs, (cl_uint n, cl_platform_id *p, cl_uint *np), (n, p, np), CL_INVALID_OPERATION)  \
    X(cl_int, clGetPlatformInfo, (cl_platform_id p, cl_platform_info i, size_t s, void *v, size_t *r),           \
      (p, i, s, v, r), CL_INVALID_OPERATION)                                                                     \
    X(cl_int, clGetDeviceIDs, (cl_platform_id p, cl_device_type t, cl_uint n, cl_device_id *d, cl_uint *nd),     \
      (p, t, n, d, nd), CL_INVALID_OPERATION)                                                                    \
    X(cl_int, clGetDeviceInfo, (cl_device_id d, cl_device_info i, size_t s, void *v, size_t *r), (d, i, s, v, r), \
      CL_INVALID_OPERATION)                                                                                      \
    X(cl_context, clCreateContext,                                                                               \
      (const cl_context_properties *p, cl_uint n, const cl_device_id *d,                                        \
       void(CL_CALLBACK *cb)(const char *, const void *, size_t, void *), void *u, cl_int *e),                   \
      (p, n, d, cb, u, e), (e ? (*e = CL_INVALID_OPERATION, NULL) : NULL))                                       \
    X(cl_int, clRetainContext, (cl_context c), (c), CL_INVALID_OPERATION)                                        \
    X(cl_int, clReleaseContext, (cl_context c), (c), CL_INVALID_OPERATION)                                       \
    X(cl_int, clGetContextInfo, (cl_context c, cl_context_info i, size_t s, void *v, size_t *r), (c, i, s, v, r), \
      CL_INVALID_OPERATION)                                                                                      \
    X(cl_command_queue, clCreateCommandQueue, (cl_context c, cl_device_id d, cl_command_queue_properties p,      \
      cl_int *e), (c, d, p, e), (e ? (*e = CL_INVALID_OPERATION, NULL) : NULL))                                  \
    X(cl_command_queue, clCreateCommandQueueWithProperties,                                                      \
      (cl_context c, cl_device_id d, const cl_queue_properties *p, cl_int *e), (c, d, p, e),                     \
      (e ? (*e = CL_INVALID_OPERATION, NULL) : NULL))                                                            \
    X(cl_int, clRetainCommandQueue, (cl_command_queue q), (q), CL_INVALID_OPERATION)                             \
    X(cl_int, clReleaseCommandQueue, (cl_command_queue q), (q), CL_INVALID_OPERATION)                            \
    X(cl_int, clGetCommandQueueInfo, (cl_command_queue q, cl_command_queue_info i, size_t s, void *v, size_t *r), \
      (q, i, s, v, r), CL_INVALID_OPERATION)                                                                     \
    X(cl_int, clFlush, (cl_command_queue q), (q), CL_INVALID_OPERATION)                                          \
    X(cl_int, clFinish, (cl_command_queue q), (q), CL_INVALID_OPERATION)                                         \
    X(cl_program, clCreateProgramWithSource, (cl_context c, cl_uint n, const char **s, const size_t *l, cl_int *e), \
      (c, n, s, l, e), (e ? (*e = CL_INVALID_OPERATION, NULL) : NULL))                                           \
    X(cl_int, clBuildProgram,                                                                                    \
      (cl_program p, cl_uint n, const cl_device_id *d, const char *o, void(CL_CALLBACK *cb)(cl_program, void *), \
       void *u), (p, n, d, o, cb, u), CL_INVALID_OPERATION)                                                      \
    X(cl_int, clGetProgramBuildInfo,                                                                             \
      (cl_program p, cl_device_id d, cl_program_build_info i, size_t s, void *v, size_t *r), (p, d, i, s, v, r), \
      CL_INVALID_OPERATION)                                                                                      \
    X(cl_int, clReleaseProgram, (cl_program p), (p), CL_INVALID_OPERATION)                                       \
    X(cl_kernel, clCreateKernel, (cl_program p, const char *n, cl_int *e), (p, n, e),                            \
      (e ? (*e = CL_INVALID_OPERATION, NULL) : NULL))                                                            \
    X(cl_int, clRetainKernel, (cl_kernel k), (k), CL_INVALID_OPERATION)                                          \
    X(cl_int, clReleaseKernel, (cl_kernel k), (k), CL_INVALID_OPERATION)                                         \
    X(cl_int, clSetKernelArg, (cl_kernel k, cl_uint i, size_t s, const void *v), (k, i, s, v), CL_INVALID_OPERATION) \
    X(cl_int, clGetKernelInfo, (cl_kernel k, cl_kernel_info i, size_t s, void *v, size_t *r), (k, i, s, v, r),   \
      CL_INVALID_OPERATION)                                                                                      \
    X(cl_int, clGetKernelWorkGroupInfo,                                                                          \
      (cl_kernel k, cl_device_id d, cl_kernel_work_group_info i, size_t s, void *v, size_t *r),                  \
      (k, d, i, s, v, r), CL_INVALID_OPERATION)                                                                  \
    X(cl_mem, clCreateBuffer, (cl_context c, cl_mem_flags f, size_t s, void *h, cl_int *e), (c, f, s, h, e),     \
      (e ? (*e = CL_INVALID_OPERATION, NULL) : NULL))                                                            \
    X(cl_int, clReleaseMemObject, (cl_mem m), (m), CL_INVALID_OPERATION)                                         \
    X(cl_int, clEnqueueReadBuffer,                                                                               \
      (cl_command_queue q, cl_mem b, cl_bool bl, size_t o, size_t s, void *p, cl_uint n, const cl_event *w,      \
       cl_event *e), (q, b, bl, o, s, p, n, w, e), CL_INVALID_OPERATION)                                         \
    X(cl_int, clEnqueueWriteBuffer,                                                                              \
      (cl_command_queue q, cl_mem b, cl_bool bl, size_t o, size_t s, const void *p, cl_uint n, const cl_event *w, \
       cl_event *e), (q, b, bl, o, s, p, n, w, e), CL_INVALID_OPERATION)                                         \
    X(cl_int, clEnqueueNDRangeKernel,                                                                            \
      (cl_command_queue q, cl_kernel k, cl_uint d, const size_t *o, const size_t *g, const size_t *l, cl_uint n, \
       const cl_event *w, cl_event *e), (q, k, d, o, g, l, n, w, e), CL_INVALID_OPERATION)                       \
    X(cl_int, clEnqueueMarker, (cl_command_queue q, cl_event *e), (q, e), CL_INVALID_OPERATION)                  \
    X(cl_int, clEnqueueMarkerWithWaitList, (cl_command_queue q, cl_uint n, const cl_event *w, cl_event *e),      \
      (q, n, w, e), CL_INVALID_OPERATION)                                                                        \
    X(cl_int, clEnqueueBarrierWithWaitList, (cl_command_queue q, cl_uint n, const cl_event *w, cl_event *e),     \
      (q, n, w, e), CL_INVALID_OPERATION)                                                                        \
    X(cl_int, clWaitForEvents, (cl_uint n, const cl_event *l), (n, l), CL_INVALID_OPERATION)                     \
    X(cl_int, clGetEventInfo, (cl_event ev, cl_event_info i, size_t s, void *v, size_t *r), (ev, i, s, v, r),    \
      CL_INVALID_OPERATION)                                                                                      \
    X(cl_int, clGetEventProfilingInfo, (cl_event ev, cl_profiling_info i, size_t s, void *v, size_t *r),         \
      (ev, i, s, v, r), CL_INVALID_OPERATION)                                                                    \
    X(cl_int, clRetainEvent, (cl_event ev), (ev), CL_INVALID_OPERATION)                                          \
    X(cl_int, clReleaseEvent, (cl_event ev), (ev), CL_INVALID_OPERATION)                                         \
    X(cl_int, clSetEventCallback, (cl_event ev, cl_int t, void(CL_CALLBACK *cb)(cl_event, cl_int, void *),       \
      void *u), (ev, t, cb, u), CL_INVALID_OPERATION)                                                            \
    X(cl_event, clCreateUserEvent, (cl_context c, cl_int *e), (c, e), (e ? (*e = CL_INVALID_OPERATION, NULL) : NULL)) \
    X(cl_int, clSetUserEventStatus, (cl_event ev, cl_int s), (ev, s), CL_INVALID_OPERATION)                      \
    X(cl_int, clGetDeviceAndHostTimer, (cl_device_id d, cl_ulong *dt, cl_ulong *ht), (d, dt, ht),                \
      CL_INVALID_OPERATION)                                                                                      \
    X(cl_int, clGetHostTimer, (cl_device_id d, cl_ulong *ht), (d, ht), CL_INVALID_OPERATION)

/* Where calls go. */
static _Atomic(const cl_icd_dispatch *) g_bound; /* the layer's target dispatch, once bound */
static cl_icd_dispatch g_loader;                 /* the real loader's exports (unbound case) */
static pthread_once_t g_loader_once = PTHREAD_ONCE_INIT;

static void loader_resolve(void)
{
    const char *path = kt__env(KT_ENV_NAME(CL_INTERCEPT_LOADER));
    void *h = dlopen(path && *path ? path : "libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
#define KTI_RESOLVE(ret, name, params, args, fail) *(void **)&g_loader.name = dlsym(h, #name);
    KTI_DIRECT_FUNCS(KTI_RESOLVE)
#undef KTI_RESOLVE
}

static const cl_icd_dispatch *target(void)
{
    const cl_icd_dispatch *d = atomic_load_explicit(&g_bound, memory_order_acquire);
    if (d)
        return d;
    pthread_once(&g_loader_once, loader_resolve);
    return &g_loader;
}

/* Called by the intercept layer from clInitLayer with its target dispatch. */
KTI_EXPORT void kt_cl_direct_bind(const cl_icd_dispatch *dispatch)
{
    atomic_store_explicit(&g_bound, dispatch, memory_order_release);
}

#define KTI_DEFINE(ret, name, params, args, fail)                                                               \
    KTI_EXPORT CL_API_ENTRY ret CL_API_CALL name params                                                          \
    {                                                                                                            \
        const cl_icd_dispatch *kti_t_ = target();                                                                \
        return kti_t_->name ? kti_t_->name args : fail;                                                          \
    }
KTI_DIRECT_FUNCS(KTI_DEFINE)
#undef KTI_DEFINE
