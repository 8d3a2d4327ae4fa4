/* cu_api.h — internal: the slice of the CUDA driver ABI ktiming uses (declared here, so building needs no cuda.h)
 * and the table of entry points resolved from the dlopen'ed driver. Values are those of cuda.h (CUDA 13). */
#ifndef KT_CUDA_CU_API_H
#define KT_CUDA_CU_API_H

#include <stddef.h>
#include <stdint.h>

struct CUctx_st;
struct CUstream_st;
struct CUmod_st;
struct CUevent_st;
struct CUfunc_st;

typedef int kt__curesult;                    /* CUresult */
typedef int kt__cudevice;                    /* CUdevice */
typedef unsigned long long kt__cudeviceptr;  /* CUdeviceptr */
typedef struct CUctx_st *kt__cuctx;          /* CUcontext */
typedef struct CUstream_st *kt__custream;    /* CUstream */
typedef struct CUevent_st *kt__cuevent;      /* CUevent */
typedef struct CUmod_st *kt__cumodule;       /* CUmodule */
typedef struct CUfunc_st *kt__cufunction;    /* CUfunction */

/* CUresult values ktiming acts on. */
#define KT__CU_SUCCESS 0
#define KT__CU_ERROR_INVALID_VALUE 1
#define KT__CU_ERROR_NOT_INITIALIZED 3
#define KT__CU_ERROR_DEINITIALIZED 4
#define KT__CU_ERROR_STUB_LIBRARY 34
#define KT__CU_ERROR_NO_DEVICE 100
#define KT__CU_ERROR_NO_BINARY_FOR_GPU 209
#define KT__CU_ERROR_INVALID_CONTEXT 201
#define KT__CU_ERROR_INVALID_PTX 218
#define KT__CU_ERROR_UNSUPPORTED_PTX_VERSION 222
#define KT__CU_ERROR_INVALID_HANDLE 400
#define KT__CU_ERROR_NOT_FOUND 500
#define KT__CU_ERROR_NOT_READY 600
#define KT__CU_ERROR_CONTEXT_IS_DESTROYED 709
#define KT__CU_ERROR_STREAM_CAPTURE_UNSUPPORTED 900
#define KT__CU_ERROR_STREAM_CAPTURE_INVALIDATED 901
#define KT__CU_ERROR_STREAM_CAPTURE_IMPLICIT 906
#define KT__CU_ERROR_CAPTURED_EVENT 907

/* Flags and attributes. */
#define KT__CU_EVENT_DEFAULT 0x0
#define KT__CU_STREAM_NON_BLOCKING 0x1
#define KT__CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define KT__CU_STREAM_LEGACY ((kt__custream)0x1)     /* CU_STREAM_LEGACY */
#define KT__CU_STREAM_PER_THREAD ((kt__custream)0x2) /* CU_STREAM_PER_THREAD */
#define KT__CU_STREAM_CAPTURE_STATUS_NONE 0
#define KT__CU_STREAM_CAPTURE_MODE_RELAXED 2
#define KT__CU_DEVICE_ATTRIBUTE_CLOCK_RATE 13 /* kHz */
#define KT__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define KT__CU_DEVICE_ATTRIBUTE_PCI_BUS_ID 33
#define KT__CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID 34
#define KT__CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID 50
#define KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define KT__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

/* Entry points, named as the driver exports them (the _v2 names cuda.h maps to). */
#define KT__CU_REQUIRED(X)                                                                                 \
    X(cuInit, kt__curesult, (unsigned int flags))                                                          \
    X(cuDriverGetVersion, kt__curesult, (int *version))                                                    \
    X(cuDeviceGetCount, kt__curesult, (int *count))                                                        \
    X(cuDeviceGet, kt__curesult, (kt__cudevice * dev, int ordinal))                                        \
    X(cuDeviceGetName, kt__curesult, (char *name, int len, kt__cudevice dev))                              \
    X(cuDeviceGetAttribute, kt__curesult, (int *value, int attrib, kt__cudevice dev))                      \
    X(cuDevicePrimaryCtxRetain, kt__curesult, (kt__cuctx * ctx, kt__cudevice dev))                         \
    X(cuDevicePrimaryCtxRelease_v2, kt__curesult, (kt__cudevice dev))                                      \
    X(cuCtxGetCurrent, kt__curesult, (kt__cuctx * ctx))                                                    \
    X(cuCtxPushCurrent_v2, kt__curesult, (kt__cuctx ctx))                                                  \
    X(cuCtxPopCurrent_v2, kt__curesult, (kt__cuctx * ctx))                                                 \
    X(cuCtxGetDevice, kt__curesult, (kt__cudevice * dev))                                                  \
    X(cuEventCreate, kt__curesult, (kt__cuevent * ev, unsigned int flags))                                 \
    X(cuEventRecord, kt__curesult, (kt__cuevent ev, kt__custream stream))                                  \
    X(cuEventQuery, kt__curesult, (kt__cuevent ev))                                                        \
    X(cuEventSynchronize, kt__curesult, (kt__cuevent ev))                                                  \
    X(cuEventDestroy_v2, kt__curesult, (kt__cuevent ev))                                                   \
    X(cuStreamCreate, kt__curesult, (kt__custream * stream, unsigned int flags))                           \
    X(cuStreamDestroy_v2, kt__curesult, (kt__custream stream))                                             \
    X(cuStreamSynchronize, kt__curesult, (kt__custream stream))

/* Optional: the globaltimer and slot features (KT_ENOTSUP when absent); context identity (cuCtxGetId, CUDA
 * 12.0+: a reset or destroyed context is told by its id), device identity (cuDeviceGetUuid_v2, CUDA 11.4+:
 * a MIG instance's UUID; the original cuDeviceGetUuid: its GPU's) and
 * graph capture (CUDA 10.1+), used when present. */
#define KT__CU_OPTIONAL(X)                                                                                 \
    X(cuCtxGetId, kt__curesult, (kt__cuctx ctx, unsigned long long *id))                                  \
    X(cuDeviceGetUuid_v2, kt__curesult, (unsigned char *uuid16, kt__cudevice dev))                          \
    X(cuDeviceGetUuid, kt__curesult, (unsigned char *uuid16, kt__cudevice dev))                             \
    X(cuStreamIsCapturing, kt__curesult, (kt__custream stream, int *status))                               \
    X(cuThreadExchangeStreamCaptureMode, kt__curesult, (int *mode))                                        \
    X(cuGetErrorName, kt__curesult, (kt__curesult err, const char **name))                                 \
    X(cuModuleLoadData, kt__curesult, (kt__cumodule * mod, const void *image))                             \
    X(cuModuleUnload, kt__curesult, (kt__cumodule mod))                                                    \
    X(cuModuleGetFunction, kt__curesult, (kt__cufunction * fn, kt__cumodule mod, const char *name))        \
    X(cuModuleGetGlobal_v2, kt__curesult,                                                                  \
      (kt__cudeviceptr * dptr, size_t *bytes, kt__cumodule mod, const char *name))                         \
    X(cuLaunchKernel, kt__curesult,                                                                        \
      (kt__cufunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, \
       unsigned int bz, unsigned int shmem, kt__custream stream, void **params, void **extra))             \
    X(cuMemAlloc_v2, kt__curesult, (kt__cudeviceptr * dptr, size_t bytes))                                 \
    X(cuMemFree_v2, kt__curesult, (kt__cudeviceptr dptr))                                                  \
    X(cuMemcpyDtoHAsync_v2, kt__curesult, (void *dst, kt__cudeviceptr src, size_t bytes, kt__custream stream)) \
    X(cuMemcpyHtoDAsync_v2, kt__curesult,                                                                  \
      (kt__cudeviceptr dst, const void *src, size_t bytes, kt__custream stream))                           \
    X(cuMemHostAlloc, kt__curesult, (void **p, size_t bytes, unsigned int flags))                          \
    X(cuMemHostGetDevicePointer_v2, kt__curesult, (kt__cudeviceptr * dptr, void *p, unsigned int flags))    \
    X(cuMemFreeHost, kt__curesult, (void *p))

/* cuEventElapsedTime: "cuEventElapsedTime_v2" since CUDA 12.8, plain before; same signature. */
typedef kt__curesult (*kt__cu_elapsed_fn)(float *ms, kt__cuevent start, kt__cuevent end);

/* The resolved table. */
typedef struct kt__cu_t {
    void *lib; /* dlopen handle */
#define KT__CU_FIELD(name, ret, args) ret(*name) args;
    KT__CU_REQUIRED(KT__CU_FIELD)
    KT__CU_OPTIONAL(KT__CU_FIELD)
#undef KT__CU_FIELD
    kt__cu_elapsed_fn cuEventElapsedTime; /* _v2 when exported, else the original */
    int driver_version;                   /* cuDriverGetVersion, e.g. 13000 */
} kt__cu_t;

#endif
