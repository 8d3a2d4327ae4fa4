/* ktiming/primitive.h — multi-kernel primitives run with trials: one GPU time per kernel plus the CPU time.
 *
 * A primitive is a named sequence of kernels (as Gridwise's Primitive). Executing it with trials = n
 * replaces every dispatch with n consecutive dispatches and returns:
 *   - per kernel, the device time from before its first dispatch to after its last (gpu_total_ns) and that
 *     divided by the trials (gpu_ns: one dispatch);
 *   - the CPU time of the whole primitive measured as Gridwise does: drain the queue, read the host clock,
 *     submit, wait until the queue is idle again, read the host clock (cpu_total_ns; cpu_ns = / trials).
 *
 *     kt_primitive_backend_t be;
 *     kt_vk_primitive_backend_create(vk_ctx, &be);  // or kt_cl_primitive_backend_create(queue, &be),
 *                                                   //    kt_cpu_primitive_backend(&be)
 *     const kt_primitive_kernel_t k[] = {{"upsweep", rec_upsweep, &st}, {"downsweep", rec_down, &st}};
 *     kt_primitive_t *scan;
 *     kt_primitive_create(&(kt_primitive_desc_t){.name = "scan", .kernels = k, .kernel_count = 2,
 *                                                .backend = be}, &scan);
 *     kt_primitive_result_t r;
 *     kt_primitive_execute(scan, &(kt_primitive_run_t){.trials = 10}, &r);   // r.gpu_ns[0], r.cpu_ns ...
 *     kt_primitive_destroy(scan);
 *     kt_primitive_backend_destroy(&be);
 *
 * A kernel callback records ONE dispatch of its kernel into the backend's encoder (Vulkan: the primitive's
 * own VkCommandBuffer; OpenCL: the cl_command_queue; CUDA: the stream; CPU: NULL, the callback runs the
 * kernel itself). The engine calls it `trials` times in a row between two timestamp marks. Marks are written
 * when everything recorded before them has completed, so kernels the callbacks do not separate with
 * barriers may overlap on real GPUs and then their times overlap too.
 *
 * Each execution is also recorded: every kernel as "<primitive>/<kernel>" with its per-dispatch time and
 * flag KT_SPAN_TRIALS (one record per execution, spanning all its trials), and the primitive itself as
 * "<primitive>" with cpu_ns and KT_SPAN_HOST_TIMED | KT_SPAN_TRIALS. kt_primitive_run_t.no_record turns it off.
 *
 * Backends plug in through kt_primitive_ops_t (below): Vulkan (vk.h), OpenCL (cl.h) and CPU ship with
 * ktiming; a CUDA backend would fill the same table (events as marks, the stream as encoder). An execution holds the backend's queue for its duration:
 * nobody else may submit to it meanwhile. Primitives are not thread-safe; backends may be shared by
 * primitives used from one thread at a time.
 */
#ifndef KTIMING_PRIMITIVE_H
#define KTIMING_PRIMITIVE_H

#include <ktiming.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KT_PRIMITIVE_MAX_KERNELS 16u

/* Backend flag: recording a dispatch already submits it (CPU runs it, OpenCL/CUDA enqueue it), so the CPU
 * time starts before the kernels are recorded rather than at submit. */
#define KT_PRIMITIVE_OPS_RECORDING_SUBMITS 0x1u

/* What a backend provides. Every function returns 0 or a negative KT_E*; `be` is kt_primitive_backend_t.ctx. */
typedef struct kt_primitive_ops_t {
    kt_backend_t backend; /* recorded as this backend */
    uint32_t flags;       /* KT_PRIMITIVE_OPS_* */
    /* Device name used for interning (stable for the backend's life). */
    const char *(*device_name)(void *be);
    /* Start a batch able to hold `marks` timestamps; *encoder is what kernel callbacks receive. */
    int (*open)(void *be, uint32_t marks, void **encoder);
    /* Timestamp `index` (0 <= index < marks), taken when everything recorded before it has completed. */
    int (*mark)(void *be, void *encoder, uint32_t index);
    /* Finish recording the batch. */
    int (*close)(void *be, void *encoder);
    /* Wait until the queue has no work left (WebGPU's onSubmittedWorkDone before the CPU clock starts). */
    int (*drain)(void *be);
    /* Submit the closed batch. */
    int (*submit)(void *be, void *encoder);
    /* Wait until the submitted batch has completed. */
    int (*wait)(void *be, void *encoder);
    /* Read marks [0, count): device_ns on one monotonic device timeline (differences are durations, counter
     * wrap already undone), host_ns on the ktiming host timeline (0 = unknown) with its error bound. */
    int (*read)(void *be, void *encoder, uint32_t count, uint64_t *device_ns, uint64_t *host_ns,
                uint64_t *uncertainty_ns);
    /* Release the backend (kt_primitive_backend_destroy). May be NULL. */
    void (*destroy)(void *be);
} kt_primitive_ops_t;

/* A backend instance: its operations and its state. */
typedef struct kt_primitive_backend_t {
    const kt_primitive_ops_t *ops; /* operations; NULL = no backend */
    void *ctx;                     /* state passed to every operation */
} kt_primitive_backend_t;

/* Records one dispatch of a kernel into the backend's encoder (see the header comment). trial counts 0..n-1. */
typedef int (*kt_primitive_kernel_cb)(void *encoder, uint32_t trial, void *user);

/* One kernel of a primitive. */
typedef struct kt_primitive_kernel_t {
    const char *name;          /* kernel name (copied) */
    kt_primitive_kernel_cb fn; /* records one dispatch */
    void *user;                /* passed to fn */
} kt_primitive_kernel_t;

/* Primitive description. Zero-initialise. */
typedef struct kt_primitive_desc_t {
    const char *name;                      /* primitive name (copied) */
    const kt_primitive_kernel_t *kernels;  /* in execution order (copied) */
    uint32_t kernel_count;                 /* 1 .. KT_PRIMITIVE_MAX_KERNELS */
    kt_primitive_backend_t backend;        /* where it runs (not owned) */
} kt_primitive_desc_t;

/* Options of one execution. Zero-initialise; NULL means all defaults. */
typedef struct kt_primitive_run_t {
    uint32_t trials;   /* consecutive dispatches per kernel; 0 = 1 */
    int no_gpu_timing; /* non-zero: no timestamp marks (gpu_* fields are 0) */
    int no_cpu_timing; /* non-zero: no drain and no CPU clock (cpu_* fields are 0) */
    int no_record;     /* non-zero: do not hand the result to the recorder */
} kt_primitive_run_t;

/* Result of one execution. */
typedef struct kt_primitive_result_t {
    uint32_t kernel_count;                           /* kernels in the primitive */
    uint32_t trials;                                 /* trials used */
    uint64_t gpu_total_ns[KT_PRIMITIVE_MAX_KERNELS]; /* per kernel: all its trials */
    uint64_t gpu_ns[KT_PRIMITIVE_MAX_KERNELS];       /* per kernel: gpu_total_ns / trials */
    uint64_t cpu_total_ns;                           /* drain; clock; submit + wait; clock */
    uint64_t cpu_ns;                                 /* cpu_total_ns / trials */
    uint64_t start_ns;                               /* host time the CPU clock started (0 if not timed) */
    uint64_t end_ns;                                 /* host time it stopped */
} kt_primitive_result_t;

typedef struct kt_primitive_t kt_primitive_t;

#if KT_ENABLED

KT_API int kt_primitive_create(const kt_primitive_desc_t *desc, kt_primitive_t **out);
KT_API int kt_primitive_execute(kt_primitive_t *prim, const kt_primitive_run_t *run, kt_primitive_result_t *out);
KT_API void kt_primitive_destroy(kt_primitive_t *prim);
/* Releases a backend made by a kt_*_primitive_backend* function and clears *be. */
KT_API void kt_primitive_backend_destroy(kt_primitive_backend_t *be);
/* The host backend: kernels run inside their callbacks on the calling thread; marks read kt_now_ns(). */
KT_API int kt_cpu_primitive_backend(kt_primitive_backend_t *out);

#else

static inline int kt_primitive_create(const kt_primitive_desc_t *desc, kt_primitive_t **out)
{ (void)desc; if (out) *out = NULL; return KT_EDISABLED; }
static inline int kt_primitive_execute(kt_primitive_t *prim, const kt_primitive_run_t *run, kt_primitive_result_t *out)
{ (void)prim; (void)run; (void)out; return KT_EDISABLED; }
static inline void kt_primitive_destroy(kt_primitive_t *prim) { (void)prim; }
static inline void kt_primitive_backend_destroy(kt_primitive_backend_t *be) { (void)be; }
static inline int kt_cpu_primitive_backend(kt_primitive_backend_t *out) { (void)out; return KT_EDISABLED; }

#endif

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_PRIMITIVE_H */
