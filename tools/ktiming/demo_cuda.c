/* demo_cuda.c — `ktiming demo` on CUDA: runs two small kernels (checked-in PTX for sm_50, embedded at build time)
 * through the driver API, each dispatch timed with kt_cuda_begin/end. Without a driver it says why and returns
 * KT_EUNAVAILABLE. It has been run against ktiming's driver test double only, not on a GPU. */
#include "cli.h"
#include "core/env.h"

#include <ktiming/cuda.h>

#if defined(KTCLI_CUDA_DEMO_PTX)

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "ktcli_demo_cuda_ptx.h" /* ktcli_demo_cuda_ptx[]: demo_cuda_kernels.ptx, embedded */

/* The driver entry points the demo itself calls (ktiming's own table is internal). */
typedef struct ktcli_cu_t {
    void *lib;                                                                   /* dlopen handle */
    int (*cuCtxPushCurrent_v2)(struct CUctx_st *);                               /* make the context current */
    int (*cuCtxPopCurrent_v2)(struct CUctx_st **);                               /* and undo it */
    int (*cuModuleLoadData)(struct CUmod_st **, const void *);                   /* load the PTX */
    int (*cuModuleUnload)(struct CUmod_st *);                                    /* unload it */
    int (*cuModuleGetFunction)(void **, struct CUmod_st *, const char *);        /* find a kernel */
    int (*cuLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                          struct CUstream_st *, void **, void **);               /* launch */
    int (*cuMemAlloc_v2)(unsigned long long *, size_t);                          /* device buffers */
    int (*cuMemFree_v2)(unsigned long long);
    int (*cuStreamCreate)(struct CUstream_st **, unsigned);                      /* the demo's stream */
    int (*cuStreamDestroy_v2)(struct CUstream_st *);
    int (*cuStreamSynchronize)(struct CUstream_st *);
    int (*cuGetErrorName)(int, const char **);                                   /* names a CUresult (optional) */
} ktcli_cu_t;

/* Prints which call failed with the driver's own error name and code; returns KT_EBACKEND. */
static int fail(const ktcli_cu_t *cu, const char *what, int r)
{
    const char *name = NULL;
    if (!cu->cuGetErrorName || cu->cuGetErrorName(r, &name) != 0 || !name)
        name = "unnamed CUDA error";
    fprintf(stderr, "CUDA: %s failed: %s (%d)%s\n", what, name, r,
            r == 222 || r == 218 ? " (the driver is older than the demo's PTX needs)" : "");
    return KT_EBACKEND;
}

static int load(ktcli_cu_t *cu)
{
    const char *path = kt__env(KT_ENV_NAME(CUDA_LIBRARY));
    memset(cu, 0, sizeof *cu);
    cu->lib = dlopen(path && path[0] ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu->lib)
        return KT_EUNAVAILABLE;
#define KTCLI_SYM(name)                                                                                    \
    *(void **)&cu->name = dlsym(cu->lib, #name);                                                           \
    if (!cu->name)                                                                                         \
        return KT_EUNAVAILABLE;
    KTCLI_SYM(cuCtxPushCurrent_v2)
    KTCLI_SYM(cuCtxPopCurrent_v2)
    KTCLI_SYM(cuModuleLoadData)
    KTCLI_SYM(cuModuleUnload)
    KTCLI_SYM(cuModuleGetFunction)
    KTCLI_SYM(cuLaunchKernel)
    KTCLI_SYM(cuMemAlloc_v2)
    KTCLI_SYM(cuMemFree_v2)
    KTCLI_SYM(cuStreamCreate)
    KTCLI_SYM(cuStreamDestroy_v2)
    KTCLI_SYM(cuStreamSynchronize)
#undef KTCLI_SYM
    *(void **)&cu->cuGetErrorName = dlsym(cu->lib, "cuGetErrorName");
    return 0;
}

/* Launch one kernel `count` times, timed when `name` is given. */
static int run(const ktcli_cu_t *cu, struct CUctx_st *ctx, struct CUstream_st *s, void *fn, void **params,
               unsigned grid, const char *name, int count)
{
    for (int i = 0; i < count; i++) {
        kt_cuda_span_t span = {0};
        if (name && kt_cuda_begin(&span, ctx, s, name) != 0)
            return KT_EBACKEND;
        int r = cu->cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, s, params, NULL);
        if (name)
            kt_cuda_end(&span);
        if (r)
            return fail(cu, "cuLaunchKernel", r);
    }
    return 0;
}

int ktcli_demo_cuda(const ktcli_demo_opts_t *opts)
{
    int rc = kt_cuda_init(NULL);
    if (rc) {
        fprintf(stderr, "CUDA: driver unavailable: %s\n", kt_cuda_last_error());
        return rc;
    }
    struct CUctx_st *ctx = NULL;
    ktcli_cu_t cu = {0};
    if ((rc = kt_cuda_device_primary(0, &ctx)) != 0 || (rc = load(&cu)) != 0) {
        fprintf(stderr, "CUDA: unavailable: %s\n", kt_cuda_last_error());
        if (cu.lib)
            dlclose(cu.lib);
        return rc ? rc : KT_EUNAVAILABLE;
    }
    unsigned n = (unsigned)((opts && opts->bytes ? opts->bytes : 8u << 20) / (2 * sizeof(float)));
    int warmup = opts && opts->warmup > 0 ? opts->warmup : 2;
    int dispatches = opts && opts->dispatches >= 10 ? opts->dispatches : 20;
    struct CUmod_st *mod = NULL;
    struct CUstream_st *s = NULL;
    void *saxpy = NULL, *scale = NULL;
    unsigned long long x = 0, y = 0;
    rc = KT_EBACKEND;
    cu.cuCtxPushCurrent_v2(ctx);
    int r = 0;
    const char *what = NULL;
    if ((r = cu.cuModuleLoadData(&mod, ktcli_demo_cuda_ptx)) != 0)
        what = "cuModuleLoadData (demo kernels, PTX ISA 6.0, sm_50)";
    else if ((r = cu.cuModuleGetFunction(&saxpy, mod, "kt_demo_saxpy")) != 0 ||
             (r = cu.cuModuleGetFunction(&scale, mod, "kt_demo_scale")) != 0)
        what = "cuModuleGetFunction";
    else if ((r = cu.cuMemAlloc_v2(&x, n * sizeof(float))) != 0 || (r = cu.cuMemAlloc_v2(&y, n * sizeof(float))) != 0)
        what = "cuMemAlloc";
    else if ((r = cu.cuStreamCreate(&s, 0)) != 0)
        what = "cuStreamCreate";
    if (what) {
        fail(&cu, what, r);
    } else {
        float a = 2.0f, b = 0.5f;
        void *p_saxpy[] = {&a, &x, &y, &n};
        void *p_scale[] = {&b, &y, &n};
        unsigned grid = (n + 255) / 256;
        if (opts && opts->verbose)
            fprintf(stderr, "CUDA: %d warm-up + %d timed dispatches per kernel over %u floats\n", warmup,
                    dispatches, n);
        rc = run(&cu, ctx, s, saxpy, p_saxpy, grid, NULL, warmup);
        if (!rc)
            rc = run(&cu, ctx, s, scale, p_scale, 128, NULL, warmup);
        if (!rc)
            rc = run(&cu, ctx, s, saxpy, p_saxpy, grid, "saxpy", dispatches);
        if (!rc)
            rc = run(&cu, ctx, s, scale, p_scale, 128, "scale", dispatches);
        if ((r = cu.cuStreamSynchronize(s)) != 0 && !rc)
            rc = fail(&cu, "cuStreamSynchronize", r);
        kt_flush();
    }
    if (s)
        cu.cuStreamDestroy_v2(s);
    if (x)
        cu.cuMemFree_v2(x);
    if (y)
        cu.cuMemFree_v2(y);
    if (mod)
        cu.cuModuleUnload(mod);
    struct CUctx_st *popped = NULL;
    cu.cuCtxPopCurrent_v2(&popped);
    dlclose(cu.lib);
    return rc;
}

#else /* built without the embedded demo PTX: no kernels to run */

int ktcli_demo_cuda(const ktcli_demo_opts_t *opts)
{
    (void)opts;
    int rc = kt_cuda_init(NULL);
    if (rc) {
        fprintf(stderr, "CUDA: driver unavailable: %s\n", kt_cuda_last_error());
        return rc;
    }
    fprintf(stderr, "CUDA: this ktiming was built without the CUDA demo kernels\n");
    return KT_EUNAVAILABLE;
}

#endif
