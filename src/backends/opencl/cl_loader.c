/* cl_loader.c — loads the OpenCL ICD loader with dlopen and resolves the entry points ktiming uses. */
#include "backends/opencl/cl_internal.h"
#include "core/service.h"
#include "shared/tool_cl.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

kt_cl_api_t kt__cl;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_status = KT_EUNAVAILABLE;
static char g_chosen[4096]; /* kt_cl_use_library's path ("" = none), read once by load_once */
static pthread_mutex_t g_chosen_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_loading; /* load_once has read g_chosen (later choices are refused) */

/* One entry point to resolve: its name, where it goes in kt__cl, and whether the backend needs it. */
typedef struct cl_sym_t {
    const char *name; /* symbol name */
    size_t offset;    /* offsetof(kt_cl_api_t, field) */
    int required;     /* 1: missing means the backend is unavailable */
} cl_sym_t;

#define SYM(fn, req) {#fn, offsetof(kt_cl_api_t, fn), req}
static const cl_sym_t kSyms[] = {
    SYM(clGetPlatformIDs, 1),        SYM(clGetPlatformInfo, 1),
    SYM(clGetDeviceIDs, 1),          SYM(clGetDeviceInfo, 1),
    SYM(clCreateContext, 1),         SYM(clReleaseContext, 1),
    SYM(clCreateCommandQueue, 0),    SYM(clCreateCommandQueueWithProperties, 0),
    SYM(clRetainCommandQueue, 1),    SYM(clReleaseCommandQueue, 1),
    SYM(clGetCommandQueueInfo, 1),   SYM(clFlush, 1),
    SYM(clFinish, 1),                SYM(clCreateProgramWithSource, 1),
    SYM(clBuildProgram, 1),          SYM(clGetProgramBuildInfo, 1),
    SYM(clReleaseProgram, 1),        SYM(clCreateKernel, 1),
    SYM(clReleaseKernel, 1),         SYM(clSetKernelArg, 1),
    SYM(clGetKernelInfo, 1),         SYM(clCreateBuffer, 1),
    SYM(clReleaseMemObject, 1),      SYM(clEnqueueReadBuffer, 1),
    SYM(clEnqueueWriteBuffer, 1),    SYM(clEnqueueNDRangeKernel, 1),
    SYM(clEnqueueMarker, 0),         SYM(clEnqueueMarkerWithWaitList, 0),
    SYM(clWaitForEvents, 1),         SYM(clGetEventInfo, 1),
    SYM(clGetEventProfilingInfo, 1), SYM(clRetainEvent, 1),
    SYM(clReleaseEvent, 1),          SYM(clSetEventCallback, 0),
    SYM(clCreateUserEvent, 0),       SYM(clSetUserEventStatus, 0),
    SYM(clGetDeviceAndHostTimer, 0), SYM(clCreateSubDevices, 0),
    SYM(clReleaseDevice, 0),
};
#undef SYM

static void load_once(void)
{
    char chosen[sizeof g_chosen];
    pthread_mutex_lock(&g_chosen_lock);
    memcpy(chosen, g_chosen, sizeof chosen);
    g_loading = 1;
    pthread_mutex_unlock(&g_chosen_lock);
    const char *path = chosen[0] ? chosen : kt__env(KT_ENV_NAME(OPENCL_LIBRARY));
    if (!path || !*path)
        path = "libOpenCL.so.1";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    kt_cl_api_t api;
    memset(&api, 0, sizeof api);
    api.handle = h;
    for (size_t i = 0; i < sizeof kSyms / sizeof kSyms[0]; i++) {
        void *fn = dlsym(h, kSyms[i].name);
        if (!fn && kSyms[i].required) {
            dlclose(h);
            return;
        }
        /* POSIX guarantees data and function pointers convert through dlsym's void *. */
        memcpy((char *)&api + kSyms[i].offset, &fn, sizeof fn);
    }
    if (!api.clCreateCommandQueue && !api.clCreateCommandQueueWithProperties) {
        dlclose(h);
        return;
    }
    kt__cl = api;
    g_status = 0;
}

int kt_cl_use_library(const char *path)
{
    if (!path || !*path || strlen(path) >= sizeof g_chosen)
        return KT_EINVAL;
    pthread_mutex_lock(&g_chosen_lock);
    int rc = g_loading ? KT_ESTATE : 0;
    if (!rc)
        memcpy(g_chosen, path, strlen(path) + 1);
    pthread_mutex_unlock(&g_chosen_lock);
    return rc;
}

int kt_cl_load(const kt_cl_api_t **api)
{
    pthread_once(&g_once, load_once);
    if (api)
        *api = g_status == 0 ? &kt__cl : NULL;
    return g_status;
}

uint64_t kt__cl_timeout_ns(void)
{
    unsigned long long ms = kt__env_ms(KT_ENV_NAME(OPENCL_TIMEOUT_MS), 10000, 3600000);
    return (ms ? ms : 10000) * 1000000ull;
}
