/* cu_loader.c — loads the CUDA driver with dlopen, resolves the entry points ktiming uses, and keeps the last
 * error with the driver's own error name (the toolkit's stub libcuda cannot name its errors, so a table does). */
#include "cuda_internal.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kt__cu_t kt__cu;

/* ---------------------------------------------------------------------------------------------------
 * Last error
 * ------------------------------------------------------------------------------------------------- */

static pthread_mutex_t g_err_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_err[512];
static kt__curesult g_err_res;
static _Thread_local char t_err[512];

void kt__cuda_set_error(kt__curesult res, const char *fmt, ...)
{
    char buf[sizeof g_err];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_err_lock);
    memcpy(g_err, buf, sizeof g_err);
    g_err_res = res;
    pthread_mutex_unlock(&g_err_lock);
}

const char *kt_cuda_last_error(void)
{
    pthread_mutex_lock(&g_err_lock);
    memcpy(t_err, g_err, sizeof t_err);
    pthread_mutex_unlock(&g_err_lock);
    return t_err;
}

int kt_cuda_last_result(void)
{
    pthread_mutex_lock(&g_err_lock);
    int r = g_err_res;
    pthread_mutex_unlock(&g_err_lock);
    return r;
}

/* ---------------------------------------------------------------------------------------------------
 * Error names: CUresult values of cuda.h (CUDA 13)
 * ------------------------------------------------------------------------------------------------- */

/* One CUresult and its name. */
typedef struct kt__cu_errname_t {
    int value;        /* CUresult */
    const char *name; /* enumerator name */
} kt__cu_errname_t;

static const kt__cu_errname_t kErrNames[] = {
    {0, "CUDA_SUCCESS"},
    {1, "CUDA_ERROR_INVALID_VALUE"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY"},
    {3, "CUDA_ERROR_NOT_INITIALIZED"},
    {4, "CUDA_ERROR_DEINITIALIZED"},
    {5, "CUDA_ERROR_PROFILER_DISABLED"},
    {6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED"},
    {7, "CUDA_ERROR_PROFILER_ALREADY_STARTED"},
    {8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED"},
    {34, "CUDA_ERROR_STUB_LIBRARY"},
    {36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE"},
    {100, "CUDA_ERROR_NO_DEVICE"},
    {101, "CUDA_ERROR_INVALID_DEVICE"},
    {102, "CUDA_ERROR_DEVICE_NOT_LICENSED"},
    {200, "CUDA_ERROR_INVALID_IMAGE"},
    {201, "CUDA_ERROR_INVALID_CONTEXT"},
    {202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT"},
    {205, "CUDA_ERROR_MAP_FAILED"},
    {206, "CUDA_ERROR_UNMAP_FAILED"},
    {207, "CUDA_ERROR_ARRAY_IS_MAPPED"},
    {208, "CUDA_ERROR_ALREADY_MAPPED"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
    {210, "CUDA_ERROR_ALREADY_ACQUIRED"},
    {211, "CUDA_ERROR_NOT_MAPPED"},
    {212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY"},
    {213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE"},
    {215, "CUDA_ERROR_UNSUPPORTED_LIMIT"},
    {216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"},
    {218, "CUDA_ERROR_INVALID_PTX"},
    {219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT"},
    {220, "CUDA_ERROR_NVLINK_UNCORRECTABLE"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
    {223, "CUDA_ERROR_JIT_COMPILATION_DISABLED"},
    {224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY"},
    {225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC"},
    {226, "CUDA_ERROR_CONTAINED"},
    {300, "CUDA_ERROR_INVALID_SOURCE"},
    {301, "CUDA_ERROR_FILE_NOT_FOUND"},
    {302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND"},
    {303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM"},
    {400, "CUDA_ERROR_INVALID_HANDLE"},
    {401, "CUDA_ERROR_ILLEGAL_STATE"},
    {402, "CUDA_ERROR_LOSSY_QUERY"},
    {500, "CUDA_ERROR_NOT_FOUND"},
    {600, "CUDA_ERROR_NOT_READY"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT"},
    {703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"},
    {705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"},
    {708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
    {710, "CUDA_ERROR_ASSERT"},
    {711, "CUDA_ERROR_TOO_MANY_PEERS"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
    {714, "CUDA_ERROR_HARDWARE_STACK_ERROR"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS"},
    {717, "CUDA_ERROR_INVALID_ADDRESS_SPACE"},
    {718, "CUDA_ERROR_INVALID_PC"},
    {719, "CUDA_ERROR_LAUNCH_FAILED"},
    {720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"},
    {721, "CUDA_ERROR_TENSOR_MEMORY_LEAK"},
    {800, "CUDA_ERROR_NOT_PERMITTED"},
    {801, "CUDA_ERROR_NOT_SUPPORTED"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"},
    {805, "CUDA_ERROR_MPS_CONNECTION_FAILED"},
    {806, "CUDA_ERROR_MPS_RPC_FAILURE"},
    {807, "CUDA_ERROR_MPS_SERVER_NOT_READY"},
    {808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED"},
    {809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED"},
    {810, "CUDA_ERROR_MPS_CLIENT_TERMINATED"},
    {811, "CUDA_ERROR_CDP_NOT_SUPPORTED"},
    {812, "CUDA_ERROR_CDP_VERSION_MISMATCH"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
    {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE"},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"},
    {907, "CUDA_ERROR_CAPTURED_EVENT"},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"},
    {909, "CUDA_ERROR_TIMEOUT"},
    {910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"},
    {911, "CUDA_ERROR_EXTERNAL_DEVICE"},
    {912, "CUDA_ERROR_INVALID_CLUSTER_SIZE"},
    {913, "CUDA_ERROR_FUNCTION_NOT_LOADED"},
    {914, "CUDA_ERROR_INVALID_RESOURCE_TYPE"},
    {915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION"},
    {916, "CUDA_ERROR_KEY_ROTATION"},
    {999, "CUDA_ERROR_UNKNOWN"},
};

const char *kt__cuda_result_name(kt__curesult res)
{
    if (kt__cu.cuGetErrorName) {
        const char *name = NULL;
        if (kt__cu.cuGetErrorName(res, &name) == KT__CU_SUCCESS && name && name[0])
            return name;
    }
    for (size_t i = 0; i < sizeof kErrNames / sizeof kErrNames[0]; i++)
        if (kErrNames[i].value == res)
            return kErrNames[i].name;
    return "unknown CUresult";
}

int kt__cuda_fail(const char *call, kt__curesult res)
{
    kt__cuda_set_error(res, "%s: %s (%d)", call, kt__cuda_result_name(res), res);
    switch (res) {
    case KT__CU_ERROR_STUB_LIBRARY:
    case KT__CU_ERROR_NO_DEVICE:
    case KT__CU_ERROR_DEINITIALIZED:
    case KT__CU_ERROR_NOT_INITIALIZED:
        return KT_EUNAVAILABLE;
    case KT__CU_ERROR_INVALID_VALUE:
    case KT__CU_ERROR_INVALID_HANDLE:
    case KT__CU_ERROR_INVALID_CONTEXT:
        return KT_EINVAL;
    default:
        return KT_EBACKEND;
    }
}

/* ---------------------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------------------- */

static void *sym(void *lib, const char *name)
{
    return dlsym(lib, name);
}

int kt__cuda_load(kt__cu_t *cu)
{
    const char *path = kt__env(KT_ENV_NAME(CUDA_LIBRARY));
    if (!path || !path[0])
        path = "libcuda.so.1";
    memset(cu, 0, sizeof *cu);
    dlerror();
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        kt__cuda_set_error(0, "CUDA driver not found: dlopen(%s): %s", path, why ? why : "failed");
        return KT_EUNAVAILABLE;
    }
    cu->lib = lib;
#define KT__CU_RESOLVE_REQ(name, ret, args)                                                                \
    *(void **)&cu->name = sym(lib, #name);                                                                 \
    if (!cu->name) {                                                                                       \
        kt__cuda_set_error(0, "CUDA driver %s lacks the entry point %s", path, #name);                     \
        goto fail;                                                                                         \
    }
    KT__CU_REQUIRED(KT__CU_RESOLVE_REQ)
#undef KT__CU_RESOLVE_REQ
#define KT__CU_RESOLVE_OPT(name, ret, args) *(void **)&cu->name = sym(lib, #name);
    KT__CU_OPTIONAL(KT__CU_RESOLVE_OPT)
#undef KT__CU_RESOLVE_OPT
    *(void **)&cu->cuEventElapsedTime = sym(lib, "cuEventElapsedTime_v2");
    if (!cu->cuEventElapsedTime)
        *(void **)&cu->cuEventElapsedTime = sym(lib, "cuEventElapsedTime");
    if (!cu->cuEventElapsedTime) {
        kt__cuda_set_error(0, "CUDA driver %s lacks the entry point cuEventElapsedTime", path);
        goto fail;
    }

    /* Install the table before the first call so kt__cuda_result_name can use cuGetErrorName. */
    kt__cu = *cu;
    kt__curesult r = cu->cuInit(0);
    if (r != KT__CU_SUCCESS) {
        kt__cuda_set_error(r, "cuInit: %s (%d)%s", kt__cuda_result_name(r), r,
                           r == KT__CU_ERROR_STUB_LIBRARY ? ": the toolkit's stub libcuda, no NVIDIA driver installed"
                           : r == KT__CU_ERROR_NO_DEVICE  ? ": no CUDA-capable device"
                                                          : "");
        goto fail;
    }
    int version = 0;
    if (cu->cuDriverGetVersion(&version) == KT__CU_SUCCESS)
        cu->driver_version = version;
    int count = 0;
    r = cu->cuDeviceGetCount(&count);
    if (r != KT__CU_SUCCESS) {
        kt__cuda_set_error(r, "cuDeviceGetCount: %s (%d)", kt__cuda_result_name(r), r);
        goto fail;
    }
    if (count <= 0) {
        kt__cuda_set_error(KT__CU_ERROR_NO_DEVICE, "cuDeviceGetCount: 0 devices (CUDA_ERROR_NO_DEVICE)");
        goto fail;
    }
    kt__cu = *cu;
    return 0;

fail:
    dlclose(lib);
    memset(cu, 0, sizeof *cu);
    memset(&kt__cu, 0, sizeof kt__cu);
    return KT_EUNAVAILABLE;
}
