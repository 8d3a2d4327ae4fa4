/* cl_intercept.c — libktiming_cl_intercept.so: times every command of an unmodified OpenCL program (`ktiming run`).
 *
 * Two ways in, one set of hooks:
 *  - an OpenCL loader layer (OPENCL_LAYERS=<this .so>; ocl-icd >= 2.3 calls clInitLayer, current Khronos loaders
 *    clInitLayerWithProperties and, before unloading drivers, clDeinitLayer): the loader
 *    routes every call through the dispatch table clInitLayer returns, so programs that dlopen the loader and
 *    dlsym their entry points are timed as well as programs linked with -lOpenCL;
 *  - LD_PRELOAD of the same .so, for loaders without layers: the cl* symbols exported below interpose the
 *    program's. Once the loader has initialised the layer they only forward to the loader, which calls the
 *    layer: nothing is timed twice.
 * libktiming reaches OpenCL through libktiming_cl_direct.so (KTIMING_OPENCL_LIBRARY), which calls the layer's
 * target dispatch, so ktiming's own calls never come back through these hooks.
 *
 * What the hooks do, without changing what the program sees:
 *  - queues are created with CL_QUEUE_PROFILING_ENABLE added (if the driver refuses, the program's own
 *    request is made instead); CL_QUEUE_PROPERTIES / CL_QUEUE_PROPERTIES_ARRAY answers and
 *    clGetEventProfilingInfo on such queues still say "no profiling" (also after the program released the
 *    queue: its events outlive it), and CL_QUEUE_REFERENCE_COUNT and CL_EVENT_REFERENCE_COUNT leave out the
 *    reference ktiming holds;
 *  - clEnqueueNDRangeKernel / clEnqueueTask are tracked under the kernel's function name, clEnqueueNativeKernel
 *    and (unless KTIMING_OPENCL_COMMANDS=kernels) transfers, fills, maps, unmaps and migrations under their entry
 *    point's name with the bytes they move (an event is made and released by ktiming when the program passed
 *    none); the driver's return value is returned unchanged, a refused enqueue is counted as an error of that
 *    kernel or command with the error's name, and the program's event variable is the driver's business only;
 *  - at a clFinish or clWaitForEvents, before it waits, the commands the thread's previous one waited for are
 *    recorded on the program's thread (kt_cl_collect), instead of by the collector while the driver's threads
 *    run the next ones;
 *  - clRetainCommandQueue / clReleaseCommandQueue count the program's own references (ktiming holds one
 *    too, and drivers add internal ones): at the program's last release ktiming detaches without waiting
 *    (kt_cl_detach_async): commands still in flight are recorded as they complete;
 *  - clGetExtensionFunctionAddress[ForPlatform] answers for the enqueue and queue-creation entry points
 *    (clCreateCommandQueueWithPropertiesKHR included) are wrapped when the driver returns one, each driver's
 *    pointers (a second platform's) with wrappers of their own (ocl-icd and PoCL return NULL for core names:
 *    nothing to wrap there);
 *  - SVM enqueues (clEnqueueSVMMemcpy / MemFill / Map / Unmap / Free / MigrateMem) are transfers like the buffer
 *    ones, and so are the cl_intel_unified_shared_memory enqueues a driver hands out through
 *    clGetExtensionFunctionAddress[ForPlatform] (MemFill, Memset, Memcpy, MigrateMem, MemAdvise);
 *  - cl_khr_command_buffer: each clEnqueueCommandBufferKHR is timed as one command named after the kernels
 *    recorded into the buffer ("cmdbuf:<k1>+<k2>"; the wrapped create/record/release keep those names).
 * At exit (when KTIMING_RUN_DIR is set) the snapshot is written to <dir>/<pid>.json for `ktiming run`.
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_0_APIS
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl_layer.h>
#include <ktiming.h>
#include <ktiming/cl.h>

#include "shim/kti_map.h"
#include "core/env.h"
#include "shared/tool_cl.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim/kti_run.h"

#define KTI_EXPORT __attribute__((visibility("default")))

/* ---------------------------------------------------------------------------------------------------
 * The functions a hook forwards to: the layer's target dispatch, or the loader's exports (LD_PRELOAD)
 * ------------------------------------------------------------------------------------------------- */

/* Entry points the hooks call onward. */
typedef struct kti_next_t {
    cl_api_clCreateCommandQueue create_queue;                   /* clCreateCommandQueue */
    cl_api_clCreateCommandQueueWithProperties create_queue_props; /* clCreateCommandQueueWithProperties */
    cl_api_clRetainCommandQueue retain_queue;                   /* clRetainCommandQueue */
    cl_api_clReleaseCommandQueue release_queue;                 /* clReleaseCommandQueue */
    cl_api_clGetCommandQueueInfo queue_info;                    /* clGetCommandQueueInfo */
    cl_api_clEnqueueNDRangeKernel ndrange;                      /* clEnqueueNDRangeKernel */
    cl_api_clEnqueueTask task;                                  /* clEnqueueTask */
    cl_api_clGetEventProfilingInfo profiling_info;              /* clGetEventProfilingInfo */
    cl_api_clGetEventInfo event_info;                           /* clGetEventInfo */
    cl_api_clReleaseEvent release_event;                        /* clReleaseEvent */
    cl_api_clGetKernelInfo kernel_info;                         /* clGetKernelInfo */
    cl_api_clGetExtensionFunctionAddress ext;                   /* clGetExtensionFunctionAddress */
    cl_api_clGetExtensionFunctionAddressForPlatform ext_platform; /* ...ForPlatform */
    cl_api_clFinish finish;                                     /* clFinish */
    cl_api_clWaitForEvents wait_events;                         /* clWaitForEvents */
} kti_next_t;

static kti_next_t g_layer_next;   /* the layer's target dispatch (valid once g_layer_active) */
static kti_next_t g_preload_next; /* the loader's own exports, found past this library */
static atomic_int g_layer_active; /* 1 once the loader called clInitLayer */
static pthread_once_t g_preload_once = PTHREAD_ONCE_INIT;

/* The LD_PRELOAD entry points only forward: the loader layer does the timing, or the process runs in
 * secure-execution mode (setuid/setgid/capabilities), where ktiming stays out of the way entirely. */
static int preload_forwards(void) { return atomic_load(&g_layer_active) || kti_secure(); }

static void *resolve_loader_symbol(const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);
    if (!fn) {
        const char *path = kt__env(KT_ENV_NAME(CL_INTERCEPT_LOADER));
        void *h = dlopen(path && *path ? path : "libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h)
            fn = dlsym(h, name); /* the handle stays open: the program uses this loader for its lifetime */
    }
    return fn;
}

static void preload_resolve(void)
{
    kti_next_t n;
#define R(field, sym) *(void **)&n.field = resolve_loader_symbol(#sym)
    R(create_queue, clCreateCommandQueue);
    R(create_queue_props, clCreateCommandQueueWithProperties);
    R(retain_queue, clRetainCommandQueue);
    R(release_queue, clReleaseCommandQueue);
    R(queue_info, clGetCommandQueueInfo);
    R(ndrange, clEnqueueNDRangeKernel);
    R(task, clEnqueueTask);
    R(profiling_info, clGetEventProfilingInfo);
    R(event_info, clGetEventInfo);
    R(release_event, clReleaseEvent);
    R(kernel_info, clGetKernelInfo);
    R(ext, clGetExtensionFunctionAddress);
    R(ext_platform, clGetExtensionFunctionAddressForPlatform);
    R(finish, clFinish);
    R(wait_events, clWaitForEvents);
#undef R
    g_preload_next = n;
}

static const kti_next_t *preload_next(void)
{
    pthread_once(&g_preload_once, preload_resolve);
    return &g_preload_next;
}

/* ---------------------------------------------------------------------------------------------------
 * The program's queues: its references (ktiming holds one of its own on an attached queue, and drivers add
 * internal ones, so CL_QUEUE_REFERENCE_COUNT can't tell when the program lets go) and the profiling we added
 * ------------------------------------------------------------------------------------------------- */

/* One queue the program created through these hooks. */
typedef struct kti_queue_t {
    cl_command_queue queue;      /* the queue */
    uint32_t refs;               /* the program's references: create 1, clRetainCommandQueue +1, release -1 */
    int forced;                  /* 1: created with CL_QUEUE_PROFILING_ENABLE the program did not ask for */
    cl_queue_properties *props;  /* forced: the program's property list for CL_QUEUE_PROPERTIES_ARRAY (malloc) */
    size_t nprops;               /* entries in props including the terminating 0; 0 when it passed NULL or
                                  * used clCreateCommandQueue (the array is then empty, as the spec says) */
} kti_queue_t;

static pthread_mutex_t g_queues_lock = PTHREAD_MUTEX_INITIALIZER;
static kti_map_t g_queues;           /* live queues: cl_command_queue -> kti_queue_t (malloc'd) */
static atomic_size_t g_forced_count; /* forced queues, readable without the lock for the fast paths */

/* A queue the program made: listed (forced: ktiming added profiling; props: the program's own list), and its
 * device's first-attach work (clock calibrations) started in the background, so the first enqueue on it does
 * not wait for that. */
static void queue_add(cl_command_queue q, cl_device_id d, int forced, const cl_queue_properties *props)
{
    kt_cl_prepare(d);
    size_t n = 0;
    cl_queue_properties *copy = NULL;
    if (forced && props) {
        while (props[n])
            n += 2;
        n++;
        copy = malloc(n * sizeof *copy);
        if (copy)
            memcpy(copy, props, n * sizeof *copy);
        else
            n = 0;
    }
    kti_queue_t *e = malloc(sizeof *e);
    if (e)
        *e = (kti_queue_t){q, 1, forced, copy, n};
    pthread_mutex_lock(&g_queues_lock);
    /* a handle the driver hands out again after the program released it replaces the stale entry */
    kti_queue_t *old = e ? kti_map_del(&g_queues, (uint64_t)(uintptr_t)q) : NULL;
    int added = e && kti_map_put(&g_queues, (uint64_t)(uintptr_t)q, e) == 0;
    if (old && old->forced)
        atomic_fetch_sub(&g_forced_count, 1);
    if (added && forced)
        atomic_fetch_add(&g_forced_count, 1);
    pthread_mutex_unlock(&g_queues_lock);
    if (old) {
        free(old->props);
        free(old);
    }
    if (!added) { /* out of memory: the queue is served as if ktiming had not changed it */
        free(copy);
        free(e);
    }
}

/* The entry of q, or NULL. Caller holds g_queues_lock. */
static kti_queue_t *queue_find_locked(cl_command_queue q)
{
    return q ? kti_map_get(&g_queues, (uint64_t)(uintptr_t)q) : NULL;
}

static int queue_forced(cl_command_queue q)
{
    if (!q || atomic_load(&g_forced_count) == 0)
        return 0;
    pthread_mutex_lock(&g_queues_lock);
    const kti_queue_t *e = queue_find_locked(q);
    int r = e && e->forced;
    pthread_mutex_unlock(&g_queues_lock);
    return r;
}

static void queue_retained(cl_command_queue q)
{
    pthread_mutex_lock(&g_queues_lock);
    kti_queue_t *e = queue_find_locked(q);
    if (e)
        e->refs++;
    pthread_mutex_unlock(&g_queues_lock);
}

/* Counts a release of q; 1 when it is the program's last reference. The entry of a queue ktiming added profiling
 * to stays (refs 0) until the handle is reused by a new queue (queue_add): the program's events of it outlive the
 * queue, and clGetEventProfilingInfo on them must still say "no profiling". Other entries go. */
static int queue_released(cl_command_queue q)
{
    int last = 0;
    pthread_mutex_lock(&g_queues_lock);
    kti_queue_t *e = queue_find_locked(q);
    cl_queue_properties *props = NULL;
    if (e && e->refs > 0 && --e->refs == 0) {
        last = 1;
        if (e->forced) {
            props = e->props; /* only CL_QUEUE_PROPERTIES_ARRAY needs them, and the queue is gone for the program */
            e->props = NULL;
            e->nprops = 0;
            e = NULL;
        } else {
            kti_map_del(&g_queues, (uint64_t)(uintptr_t)q);
        }
    } else {
        e = NULL;
    }
    pthread_mutex_unlock(&g_queues_lock);
    free(props);
    if (e) {
        free(e->props);
        free(e);
    }
    return last;
}

/* Answers CL_QUEUE_PROPERTIES_ARRAY from the program's own list. 1 when answered (*rc set). */
static int queue_props_array(cl_command_queue q, size_t size, void *value, size_t *size_ret, cl_int *rc)
{
    if (atomic_load(&g_forced_count) == 0)
        return 0;
    pthread_mutex_lock(&g_queues_lock);
    const kti_queue_t *e = queue_find_locked(q);
    int answered = 0;
    if (e && e->forced) {
        size_t bytes = e->nprops * sizeof(cl_queue_properties);
        answered = 1;
        if (value && size < bytes) {
            *rc = CL_INVALID_VALUE;
        } else {
            if (value && bytes)
                memcpy(value, e->props, bytes);
            if (size_ret)
                *size_ret = bytes;
            *rc = CL_SUCCESS;
        }
    }
    pthread_mutex_unlock(&g_queues_lock);
    return answered;
}

/* ---------------------------------------------------------------------------------------------------
 * Attaching queues
 * ------------------------------------------------------------------------------------------------- */

/* Generation of attachments: bumped when a queue may have been detached, so per-thread caches refetch. */
static atomic_uint g_attach_gen = 1;

/* One-entry cache of the last queue this thread enqueued on. */
static _Thread_local struct {
    cl_command_queue queue; /* queue */
    kt_cl_ctx_t *ctx;       /* its ktiming context */
    unsigned gen;           /* g_attach_gen when cached */
} t_last;

/* The queue's context from this thread's cache, else NULL. */
static kt_cl_ctx_t *cached(cl_command_queue q, unsigned gen)
{
    return q && t_last.queue == q && t_last.gen == gen ? t_last.ctx : NULL;
}

/* The ktiming context of a queue, attaching it on first use; NULL when it can't be timed. */
static kt_cl_ctx_t *attach(cl_command_queue q)
{
    unsigned gen = atomic_load_explicit(&g_attach_gen, memory_order_acquire);
    kt_cl_ctx_t *kc = cached(q, gen);
    if (kc)
        return kc;
    if (!q || kt_cl_attach(q, NULL, &kc) != 0)
        return NULL;
    kti_run_exit_register();
    t_last.queue = q;
    t_last.ctx = kc;
    t_last.gen = gen;
    return kc;
}

/* ---------------------------------------------------------------------------------------------------
 * Hooks (shared by the layer and the LD_PRELOAD entry points)
 * ------------------------------------------------------------------------------------------------- */

/* A queue made with profiling forced on (props: the program's own list, NULL for the flags form): kept and
 * tracked as forced, the program's err set, when it was made; else 0 and the hook creates the queue as asked. */
static int forced_made(cl_command_queue q, cl_int e, cl_device_id d, const cl_queue_properties *props, cl_int *err)
{
    if (!q || e != CL_SUCCESS)
        return 0;
    queue_add(q, d, 1, props);
    if (err)
        *err = e;
    return 1;
}

/* The queue as the program asked for it (NULL on failure), tracked as not forced. */
static cl_command_queue plain_made(cl_command_queue q, cl_device_id d)
{
    if (q)
        queue_add(q, d, 0, NULL);
    return q;
}

static cl_command_queue hook_create_queue(const kti_next_t *n, cl_context c, cl_device_id d,
                                          cl_command_queue_properties p, cl_int *err)
{
    if (!n->create_queue)
        return NULL;
    if (!(p & CL_QUEUE_PROFILING_ENABLE)) {
        cl_int e = CL_SUCCESS;
        cl_command_queue q = n->create_queue(c, d, p | CL_QUEUE_PROFILING_ENABLE, &e);
        if (forced_made(q, e, d, NULL, err))
            return q;
    }
    return plain_made(n->create_queue(c, d, p, err), d);
}

static int props_have_profiling(const cl_queue_properties *p)
{
    for (size_t i = 0; p && p[i]; i += 2)
        if (p[i] == CL_QUEUE_PROPERTIES && (p[i + 1] & CL_QUEUE_PROFILING_ENABLE))
            return 1;
    return 0;
}

static cl_command_queue hook_create_queue_props(const kti_next_t *n, cl_context c, cl_device_id d,
                                                const cl_queue_properties *props, cl_int *err)
{
    if (!n->create_queue_props)
        return NULL;
    if (!props_have_profiling(props)) {
        cl_queue_properties buf[64];
        if (kt_cl_queue_properties_profiled(props, buf, sizeof buf / sizeof buf[0]) == 0) {
            cl_int e = CL_SUCCESS;
            cl_command_queue q = n->create_queue_props(c, d, buf, &e);
            if (forced_made(q, e, d, props, err))
                return q;
        }
    }
    return plain_made(n->create_queue_props(c, d, props, err), d);
}

static cl_int hook_retain_queue(const kti_next_t *n, cl_command_queue q)
{
    if (!n->retain_queue)
        return CL_INVALID_COMMAND_QUEUE;
    cl_int rc = n->retain_queue(q);
    if (rc == CL_SUCCESS)
        queue_retained(q);
    return rc;
}

/* The program's last release: ktiming detaches without waiting (a release is no synchronisation point and may
 * come from an event callback). Its commands still in flight are recorded as they complete; ktiming's own
 * reference keeps the queue alive until then. */
static cl_int hook_release_queue(const kti_next_t *n, cl_command_queue q)
{
    if (!n->release_queue)
        return CL_INVALID_COMMAND_QUEUE;
    if (q && queue_released(q)) {
        kt_cl_ctx_t *kc = kt_cl_find(q);
        atomic_fetch_add_explicit(&g_attach_gen, 1u, memory_order_acq_rel);
        if (kc)
            kt_cl_detach_async(kc);
    }
    return n->release_queue(q);
}

static cl_int hook_queue_info(const kti_next_t *n, cl_command_queue q, cl_command_queue_info param, size_t size,
                              void *value, size_t *size_ret)
{
    if (!n->queue_info)
        return CL_INVALID_COMMAND_QUEUE;
    cl_int rc;
    if (param == CL_QUEUE_PROPERTIES_ARRAY && queue_props_array(q, size, value, size_ret, &rc))
        return rc;
    rc = n->queue_info(q, param, size, value, size_ret);
    if (rc != CL_SUCCESS || !value)
        return rc;
    if (param == CL_QUEUE_PROPERTIES && size >= sizeof(cl_command_queue_properties) && queue_forced(q)) {
        cl_command_queue_properties p;
        memcpy(&p, value, sizeof p);
        p &= ~(cl_command_queue_properties)CL_QUEUE_PROFILING_ENABLE;
        memcpy(value, &p, sizeof p);
    } else if (param == CL_QUEUE_REFERENCE_COUNT && size >= sizeof(cl_uint) && kt_cl_find(q)) {
        cl_uint refs;
        memcpy(&refs, value, sizeof refs);
        if (refs > 1)
            refs--; /* the reference ktiming holds while attached */
        memcpy(value, &refs, sizeof refs);
    }
    return rc;
}

static cl_int hook_profiling_info(const kti_next_t *n, cl_event ev, cl_profiling_info param, size_t size,
                                  void *value, size_t *size_ret)
{
    if (!n->profiling_info)
        return CL_INVALID_EVENT;
    if (atomic_load(&g_forced_count) && n->event_info) {
        cl_command_queue q = NULL;
        if (n->event_info(ev, CL_EVENT_COMMAND_QUEUE, sizeof q, &q, NULL) == CL_SUCCESS && queue_forced(q))
            return CL_PROFILING_INFO_NOT_AVAILABLE;
    }
    return n->profiling_info(ev, param, size, value, size_ret);
}

/* CL_EVENT_REFERENCE_COUNT without the reference ktiming holds while it tracks the command. */
static cl_int hook_event_info(const kti_next_t *n, cl_event ev, cl_event_info param, size_t size, void *value,
                              size_t *size_ret)
{
    if (!n->event_info)
        return CL_INVALID_EVENT;
    cl_int rc = n->event_info(ev, param, size, value, size_ret);
    if (rc == CL_SUCCESS && param == CL_EVENT_REFERENCE_COUNT && value && size >= sizeof(cl_uint) &&
        kt_cl_event_held(ev)) {
        cl_uint refs;
        memcpy(&refs, value, sizeof refs);
        if (refs > 1)
            refs--;
        memcpy(value, &refs, sizeof refs);
    }
    return rc;
}

/* An enqueue on a queue that could not be attached (NULL, or one the driver does not know) that the driver refused:
 * counted as an error of the kernel or command all the same (on no device), unless the command is one not timed
 * (KTIMING_OPENCL_COMMANDS=kernels). Returns rc. */
static cl_int refused_unattached(cl_command_queue q, cl_kernel k, const char *name, int kernel, cl_int rc)
{
    if (rc != CL_SUCCESS && (kernel || kt_cl_commands_all()))
        kt__cl_enqueue_refused(q, k, name, rc);
    return rc;
}

static cl_int hook_ndrange(const kti_next_t *n, cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off,
                           const size_t *gws, const size_t *lws, cl_uint nwait, const cl_event *wait, cl_event *ev)
{
    kt_cl_ctx_t *kc = attach(q);
    if (kc)
        return kt_cl_enqueue_ndrange(kc, k, dim, off, gws, lws, nwait, wait, ev);
    if (!n->ndrange)
        return CL_INVALID_COMMAND_QUEUE;
    return refused_unattached(q, k, NULL, 1, n->ndrange(q, k, dim, off, gws, lws, nwait, wait, ev));
}

/* Synchronisation points. When one begins, what the thread's previous one (that succeeded) waited for is done: the
 * commands enqueued before that one began are recorded here, on the program's thread (kt_cl_collect: clFinish's queue
 * only, clWaitForEvents' every queue up to its first command still running), while the driver's threads run the
 * commands just enqueued and the program would only wait; then the driver's call is made and its answer returned
 * unchanged. Recording after the wait instead left the driver's threads idle until the program enqueued again, and
 * recording on the collector contended with them (docs/opencl.md). The last commands are recorded by the collector or
 * at exit. */
static _Thread_local uint64_t t_synced_ns; /* when this thread's last successful clFinish/clWaitForEvents began */

static cl_int hook_finish(const kti_next_t *n, cl_command_queue q)
{
    if (t_synced_ns && q) {
        kt_cl_ctx_t *kc = cached(q, atomic_load_explicit(&g_attach_gen, memory_order_acquire));
        if (!kc)
            kc = kt_cl_find(q); /* without attaching: a queue ktiming does not time has nothing to record */
        if (kc)
            kt_cl_collect(kc, t_synced_ns);
    }
    static kt_kernel_id_t api_site;
    kt_zone_t api = kti_wait_begin(&api_site, "clFinish"); /* host API time: the wait itself */
    uint64_t began = api.kernel ? api.start_ns : kt_now_ns(); /* the zone's read serves both when there is one */
    cl_int rc = n->finish ? n->finish(q) : CL_INVALID_COMMAND_QUEUE;
    kt_zone_end(&api);
    if (rc == CL_SUCCESS && q)
        t_synced_ns = began;
    return rc;
}

static cl_int hook_wait_events(const kti_next_t *n, cl_uint num, const cl_event *events)
{
    if (t_synced_ns)
        kt_cl_collect(NULL, t_synced_ns);
    static kt_kernel_id_t api_site;
    kt_zone_t api = kti_wait_begin(&api_site, "clWaitForEvents"); /* host API time: the wait itself */
    uint64_t began = api.kernel ? api.start_ns : kt_now_ns(); /* the zone's read serves both when there is one */
    cl_int rc = n->wait_events ? n->wait_events(num, events) : CL_INVALID_EVENT;
    kt_zone_end(&api);
    if (rc == CL_SUCCESS)
        t_synced_ns = began;
    return rc;
}

static void command_done(cl_api_clReleaseEvent release, kt_cl_ctx_t *kc, cl_int rc, cl_kernel kernel,
                         const char *name, uint64_t bytes, uint64_t t0, cl_event *evp, cl_event mine);

static cl_int hook_task(const kti_next_t *n, cl_command_queue q, cl_kernel k, cl_uint nwait, const cl_event *wait,
                        cl_event *ev)
{
    if (!n->task)
        return CL_INVALID_COMMAND_QUEUE;
    kt_cl_ctx_t *kc = attach(q);
    if (!kc)
        return refused_unattached(q, k, NULL, 1, n->task(q, k, nwait, wait, ev));
    uint64_t t = kt_now_ns();
    cl_event mine = NULL;
    cl_event *evp = ev ? ev : &mine;
    cl_int rc = n->task(q, k, nwait, wait, evp);
    if (rc == CL_SUCCESS && *evp) { /* the spec's 1 x 1 NDRange: its configuration (issue 40.2) */
        static const kt_launch_t kTask = {KT_LAUNCH_ITEMS, 1, {1, 0, 0}, {1, 0, 0}};
        kt__cl_track_launch(kc, *evp, k, &kTask, t);
        if (mine && n->release_event)
            n->release_event(mine);
        return rc;
    }
    command_done(n->release_event, kc, rc, k, NULL, 0, t, evp, mine);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Entry points handed out by clGetExtensionFunctionAddress[ForPlatform]: when a driver returns one of the
 * timed functions directly, the program gets a wrapper calling that same pointer.
 * ------------------------------------------------------------------------------------------------- */

/* The pointers a driver handed out under the timed names, and what their wrappers need. Each name has one per set:
 * a second platform (another driver) hands out other pointers under the same names, which take the next set, and
 * the program gets that set's wrappers. Past KTI_EXT_SETS drivers the pointer is handed out unwrapped. */
#define KTI_EXT_SETS 4
typedef struct kti_ext_set_t {
    kti_next_t next; /* NDRange, task, queue creation; release_event and kernel_info from the caller's table */
    kti_next_t khr;  /* create_queue_props: clCreateCommandQueueWithPropertiesKHR */
    clCreateCommandBufferKHR_fn cb_create; /* cl_khr_command_buffer */
    clCommandNDRangeKernelKHR_fn cb_record;
    clEnqueueCommandBufferKHR_fn cb_enqueue;
    clReleaseCommandBufferKHR_fn cb_release;
    clGetCommandBufferInfoKHR_fn cb_info; /* looked up by ktiming: the reference count at release */
    clEnqueueMemFillINTEL_fn usm_fill;    /* cl_intel_unified_shared_memory */
    clEnqueueMemsetINTEL_fn usm_memset;
    clEnqueueMemcpyINTEL_fn usm_memcpy;
    clEnqueueMigrateMemINTEL_fn usm_migrate;
    clEnqueueMemAdviseINTEL_fn usm_advise;
} kti_ext_set_t;

static kti_ext_set_t g_ext[KTI_EXT_SETS]; /* filled under g_ext_lock, set by set, name by name */
static pthread_mutex_t g_ext_lock = PTHREAD_MUTEX_INITIALIZER;

/* The one path every timed enqueue takes after the driver answered rc (clEnqueueNDRangeKernel's is the same inside
 * kt_cl_enqueue_ndrange): a refusal is counted as an error of the kernel (its function name) or command (`name`)
 * with the error's name; otherwise the event is tracked, and the one made for ktiming (`mine`) released after.
 * The program's event variable is the driver's business only. */
static void command_done(cl_api_clReleaseEvent release, kt_cl_ctx_t *kc, cl_int rc, cl_kernel kernel,
                         const char *name, uint64_t bytes, uint64_t t0, cl_event *evp, cl_event mine)
{
    if (rc != CL_SUCCESS) {
        kt_cl_enqueue_failed(kc, kernel, name, rc);
        return;
    }
    if (evp && *evp) {
        if (kernel)
            kt_cl_track_kernel(kc, *evp, kernel, NULL, t0);
        else
            kt_cl_track_command(kc, *evp, name, bytes, t0);
    }
    if (mine && release)
        release(mine);
}

/* ---------------------------------------------------------------------------------------------------
 * cl_khr_command_buffer: every clEnqueueCommandBufferKHR is one timed command (the spec's event covers the
 * whole execution), named after the kernels recorded into the buffer: "cmdbuf:<k1>+<k2>..." (at most
 * KTI_CMDBUF_NAME - 1 bytes, "+..." when names were left out; "cmdbuf" with no kernel recorded). The names
 * are kept per buffer from clCreateCommandBufferKHR (a reused handle starts afresh) to its last release.
 * ------------------------------------------------------------------------------------------------- */

#define KTI_CMDBUF_NAME 160

/* What ktiming keeps of one command buffer. */
typedef struct kti_cmdbuf_t {
    cl_command_queue queue;     /* its queue (what it runs on when enqueued with no queue list) */
    char name[KTI_CMDBUF_NAME]; /* the entry's name */
    int cut;                    /* a kernel's name did not fit: "+..." ends the name */
} kti_cmdbuf_t;

static struct {
    pthread_mutex_t lock; /* bufs */
    kti_map_t bufs;       /* cl_command_buffer_khr -> kti_cmdbuf_t (malloc'd), every driver's */
} g_cb = {.lock = PTHREAD_MUTEX_INITIALIZER};

static cl_command_buffer_khr cb_create(const kti_ext_set_t *x, cl_uint nq, const cl_command_queue *qs,
                                       const cl_command_buffer_properties_khr *props, cl_int *err)
{
    cl_command_buffer_khr b = x->cb_create(nq, qs, props, err);
    if (!b)
        return b;
    kti_cmdbuf_t *e = calloc(1, sizeof *e);
    if (e) {
        e->queue = nq && qs ? qs[0] : NULL;
        snprintf(e->name, sizeof e->name, "cmdbuf");
    }
    pthread_mutex_lock(&g_cb.lock);
    free(kti_map_del(&g_cb.bufs, (uint64_t)(uintptr_t)b)); /* a handle reused after a release we missed */
    if (e && kti_map_put(&g_cb.bufs, (uint64_t)(uintptr_t)b, e) != 0)
        free(e);
    pthread_mutex_unlock(&g_cb.lock);
    return b;
}

/* Appends a kernel's name to the buffer's entry name (under g_cb.lock). */
static void cb_add_name(kti_cmdbuf_t *e, const char *kernel)
{
    if (e->cut)
        return;
    size_t len = strlen(e->name), add = strlen(kernel) + 1;
    if (len + add + 4 >= sizeof e->name) { /* room for "+..." */
        snprintf(e->name + len, sizeof e->name - len, "+...");
        e->cut = 1;
        return;
    }
    snprintf(e->name + len, sizeof e->name - len, "%c%s", strchr(e->name, ':') ? '+' : ':', kernel);
}

static cl_int cb_record(const kti_ext_set_t *x, cl_command_buffer_khr b, cl_command_queue q,
                        const cl_ndrange_kernel_command_properties_khr *props, cl_kernel k, cl_uint dim,
                        const size_t *off, const size_t *gws, const size_t *lws, cl_uint nsync,
                        const cl_sync_point_khr *sync, cl_sync_point_khr *point, cl_mutable_command_khr *mutable_handle)
{
    cl_int rc = x->cb_record(b, q, props, k, dim, off, gws, lws, nsync, sync, point, mutable_handle);
    if (rc != CL_SUCCESS)
        return rc;
    char kname[KTI_CMDBUF_NAME];
    size_t len = 0;
    if (!x->next.kernel_info ||
        x->next.kernel_info(k, CL_KERNEL_FUNCTION_NAME, sizeof kname, kname, &len) != CL_SUCCESS)
        snprintf(kname, sizeof kname, "kernel");
    pthread_mutex_lock(&g_cb.lock);
    kti_cmdbuf_t *e = kti_map_get(&g_cb.bufs, (uint64_t)(uintptr_t)b);
    if (e)
        cb_add_name(e, kname);
    pthread_mutex_unlock(&g_cb.lock);
    return rc;
}

static cl_int cb_enqueue(const kti_ext_set_t *x, cl_uint nq, cl_command_queue *qs, cl_command_buffer_khr b,
                         cl_uint nwait, const cl_event *wait, cl_event *ev)
{
    char name[KTI_CMDBUF_NAME] = "cmdbuf";
    cl_command_queue q = nq && qs ? qs[0] : NULL;
    pthread_mutex_lock(&g_cb.lock);
    const kti_cmdbuf_t *e = kti_map_get(&g_cb.bufs, (uint64_t)(uintptr_t)b);
    if (e) {
        memcpy(name, e->name, sizeof name);
        if (!q)
            q = e->queue;
    }
    pthread_mutex_unlock(&g_cb.lock);
    kt_cl_ctx_t *kc = q ? attach(q) : NULL;
    if (!kc)
        return refused_unattached(q, NULL, name, 1, x->cb_enqueue(nq, qs, b, nwait, wait, ev));
    cl_event mine = NULL;
    cl_event *evp = ev ? ev : &mine;
    uint64_t t0 = kt_now_ns();
    cl_int rc = x->cb_enqueue(nq, qs, b, nwait, wait, evp);
    command_done(x->next.release_event, kc, rc, NULL, name, 0, t0, evp, mine);
    return rc;
}

/* At the program's last release the names go too (when two threads release the last two references at once,
 * neither sees the count at 1: the entry then stays until the handle is reused by clCreateCommandBufferKHR). */
static cl_int cb_release(const kti_ext_set_t *x, cl_command_buffer_khr b)
{
    cl_uint refs = 0;
    int last = x->cb_info && x->cb_info(b, CL_COMMAND_BUFFER_REFERENCE_COUNT_KHR, sizeof refs, &refs, NULL) ==
                                 CL_SUCCESS && refs == 1;
    cl_int rc = x->cb_release(b);
    if (rc == CL_SUCCESS && last) {
        pthread_mutex_lock(&g_cb.lock);
        free(kti_map_del(&g_cb.bufs, (uint64_t)(uintptr_t)b));
        pthread_mutex_unlock(&g_cb.lock);
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * cl_intel_unified_shared_memory: the enqueues a driver hands out through clGetExtensionFunctionAddress
 * [ForPlatform] are timed as transfers, under their entry point's name with the bytes they move (advice: none).
 * ------------------------------------------------------------------------------------------------- */

static kt_cl_ctx_t *command_ctx(cl_command_queue q, int kernel);

/* Runs `call` (the driver's enqueue, with evp as its event pointer) timed as `name` moving `bytes`. */
#define KTI_USM_TIMED(name, bytes, call)                                                                         \
    kt_cl_ctx_t *kc = command_ctx(q, 0);                                                                         \
    cl_event mine = NULL;                                                                                        \
    cl_event *evp = kc && !ev ? &mine : ev;                                                                      \
    uint64_t t0 = kt_now_ns();                                                                                   \
    cl_int rc = call;                                                                                            \
    if (kc)                                                                                                      \
        command_done(x->next.release_event, kc, rc, NULL, name, rc == CL_SUCCESS ? (uint64_t)(bytes) : 0, t0,    \
                     evp, mine);                                                                                 \
    else                                                                                                         \
        refused_unattached(q, NULL, name, 0, rc);                                                                \
    return rc

static cl_int usm_fill(const kti_ext_set_t *x, cl_command_queue q, void *d, const void *pat, size_t psz, size_t sz,
                       cl_uint nw, const cl_event *w, cl_event *ev)
{
    KTI_USM_TIMED("clEnqueueMemFillINTEL", sz, x->usm_fill(q, d, pat, psz, sz, nw, w, evp));
}

static cl_int usm_memset(const kti_ext_set_t *x, cl_command_queue q, void *d, cl_int v, size_t sz, cl_uint nw,
                         const cl_event *w, cl_event *ev)
{
    KTI_USM_TIMED("clEnqueueMemsetINTEL", sz, x->usm_memset(q, d, v, sz, nw, w, evp));
}

static cl_int usm_memcpy(const kti_ext_set_t *x, cl_command_queue q, cl_bool blk, void *d, const void *src, size_t sz,
                         cl_uint nw, const cl_event *w, cl_event *ev)
{
    KTI_USM_TIMED("clEnqueueMemcpyINTEL", sz, x->usm_memcpy(q, blk, d, src, sz, nw, w, evp));
}

static cl_int usm_migrate(const kti_ext_set_t *x, cl_command_queue q, const void *p, size_t sz,
                          cl_mem_migration_flags f, cl_uint nw, const cl_event *w, cl_event *ev)
{
    KTI_USM_TIMED("clEnqueueMigrateMemINTEL", (f & CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED) ? 0 : sz,
                  x->usm_migrate(q, p, sz, f, nw, w, evp));
}

static cl_int usm_advise(const kti_ext_set_t *x, cl_command_queue q, const void *p, size_t sz, cl_mem_advice_intel a,
                         cl_uint nw, const cl_event *w, cl_event *ev)
{
    KTI_USM_TIMED("clEnqueueMemAdviseINTEL", 0, x->usm_advise(q, p, sz, a, nw, w, evp));
}
#undef KTI_USM_TIMED

/* The wrappers of set s: what the program gets for the pointers of that set. */
#define KTI_EXT_SET_FUNCS(s)                                                                                      \
    static cl_int CL_API_CALL ext_ndrange_##s(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off,   \
                                              const size_t *gws, const size_t *lws, cl_uint nwait,               \
                                              const cl_event *wait, cl_event *ev)                                \
    {                                                                                                             \
        return hook_ndrange(&g_ext[s].next, q, k, dim, off, gws, lws, nwait, wait, ev);                           \
    }                                                                                                             \
    static cl_int CL_API_CALL ext_task_##s(cl_command_queue q, cl_kernel k, cl_uint nwait, const cl_event *wait, \
                                           cl_event *ev)                                                          \
    {                                                                                                             \
        return hook_task(&g_ext[s].next, q, k, nwait, wait, ev);                                                  \
    }                                                                                                             \
    static cl_command_queue CL_API_CALL ext_create_queue_##s(cl_context c, cl_device_id d,                       \
                                                             cl_command_queue_properties p, cl_int *err)         \
    {                                                                                                             \
        return hook_create_queue(&g_ext[s].next, c, d, p, err);                                                   \
    }                                                                                                             \
    static cl_command_queue CL_API_CALL ext_create_queue_props_##s(cl_context c, cl_device_id d,                 \
                                                                   const cl_queue_properties *props, cl_int *err) \
    {                                                                                                             \
        return hook_create_queue_props(&g_ext[s].next, c, d, props, err);                                         \
    }                                                                                                             \
    static cl_command_queue CL_API_CALL ext_create_queue_props_khr_##s(                                          \
        cl_context c, cl_device_id d, const cl_queue_properties *props, cl_int *err)                             \
    {                                                                                                             \
        return hook_create_queue_props(&g_ext[s].khr, c, d, props, err);                                          \
    }                                                                                                             \
    static cl_command_buffer_khr CL_API_CALL cb_create_##s(cl_uint nq, const cl_command_queue *qs,              \
                                                           const cl_command_buffer_properties_khr *props,        \
                                                           cl_int *err)                                          \
    {                                                                                                             \
        return cb_create(&g_ext[s], nq, qs, props, err);                                                          \
    }                                                                                                             \
    static cl_int CL_API_CALL cb_record_##s(cl_command_buffer_khr b, cl_command_queue q,                         \
                                            const cl_ndrange_kernel_command_properties_khr *props, cl_kernel k,  \
                                            cl_uint dim, const size_t *off, const size_t *gws, const size_t *lws, \
                                            cl_uint nsync, const cl_sync_point_khr *sync,                        \
                                            cl_sync_point_khr *point, cl_mutable_command_khr *mh)                \
    {                                                                                                             \
        return cb_record(&g_ext[s], b, q, props, k, dim, off, gws, lws, nsync, sync, point, mh);                  \
    }                                                                                                             \
    static cl_int CL_API_CALL cb_enqueue_##s(cl_uint nq, cl_command_queue *qs, cl_command_buffer_khr b,          \
                                             cl_uint nwait, const cl_event *wait, cl_event *ev)                  \
    {                                                                                                             \
        return cb_enqueue(&g_ext[s], nq, qs, b, nwait, wait, ev);                                                 \
    }                                                                                                             \
    static cl_int CL_API_CALL cb_release_##s(cl_command_buffer_khr b) { return cb_release(&g_ext[s], b); }       \
    static cl_int CL_API_CALL usm_fill_##s(cl_command_queue q, void *d, const void *pat, size_t psz, size_t sz,  \
                                           cl_uint nw, const cl_event *w, cl_event *ev)                           \
    {                                                                                                             \
        return usm_fill(&g_ext[s], q, d, pat, psz, sz, nw, w, ev);                                                \
    }                                                                                                             \
    static cl_int CL_API_CALL usm_memset_##s(cl_command_queue q, void *d, cl_int v, size_t sz, cl_uint nw,       \
                                             const cl_event *w, cl_event *ev)                                     \
    {                                                                                                             \
        return usm_memset(&g_ext[s], q, d, v, sz, nw, w, ev);                                                     \
    }                                                                                                             \
    static cl_int CL_API_CALL usm_memcpy_##s(cl_command_queue q, cl_bool blk, void *d, const void *src,          \
                                             size_t sz, cl_uint nw, const cl_event *w, cl_event *ev)              \
    {                                                                                                             \
        return usm_memcpy(&g_ext[s], q, blk, d, src, sz, nw, w, ev);                                              \
    }                                                                                                             \
    static cl_int CL_API_CALL usm_migrate_##s(cl_command_queue q, const void *p, size_t sz,                      \
                                              cl_mem_migration_flags f, cl_uint nw, const cl_event *w,           \
                                              cl_event *ev)                                                       \
    {                                                                                                             \
        return usm_migrate(&g_ext[s], q, p, sz, f, nw, w, ev);                                                    \
    }                                                                                                             \
    static cl_int CL_API_CALL usm_advise_##s(cl_command_queue q, const void *p, size_t sz,                       \
                                             cl_mem_advice_intel a, cl_uint nw, const cl_event *w, cl_event *ev)  \
    {                                                                                                             \
        return usm_advise(&g_ext[s], q, p, sz, a, nw, w, ev);                                                     \
    }
KTI_EXT_SET_FUNCS(0)
KTI_EXT_SET_FUNCS(1)
KTI_EXT_SET_FUNCS(2)
KTI_EXT_SET_FUNCS(3)
#undef KTI_EXT_SET_FUNCS

/* An entry point handed out by clGetExtensionFunctionAddress[ForPlatform] that ktiming wraps. */
typedef struct kti_ext_hook_t {
    const char *name;               /* its name */
    size_t slot;                    /* where a set keeps the driver's pointer (offset in kti_ext_set_t) */
    void *wrapper[KTI_EXT_SETS];    /* what the program gets, per set */
    int cmdbuf;                     /* a cl_khr_command_buffer entry point */
} kti_ext_hook_t;

#define KTI_EXT_HOOK(name, field, fn, cmdbuf)                                                                    \
    {                                                                                                            \
        name, offsetof(kti_ext_set_t, field), {(void *)fn##_0, (void *)fn##_1, (void *)fn##_2, (void *)fn##_3},  \
            cmdbuf                                                                                               \
    }

static const kti_ext_hook_t kExtHooks[] = {
    KTI_EXT_HOOK("clEnqueueNDRangeKernel", next.ndrange, ext_ndrange, 0),
    KTI_EXT_HOOK("clEnqueueTask", next.task, ext_task, 0),
    KTI_EXT_HOOK("clCreateCommandQueue", next.create_queue, ext_create_queue, 0),
    KTI_EXT_HOOK("clCreateCommandQueueWithProperties", next.create_queue_props, ext_create_queue_props, 0),
    /* cl_khr_create_command_queue */
    KTI_EXT_HOOK("clCreateCommandQueueWithPropertiesKHR", khr.create_queue_props, ext_create_queue_props_khr, 0),
    KTI_EXT_HOOK("clCreateCommandBufferKHR", cb_create, cb_create, 1),
    KTI_EXT_HOOK("clCommandNDRangeKernelKHR", cb_record, cb_record, 1),
    KTI_EXT_HOOK("clEnqueueCommandBufferKHR", cb_enqueue, cb_enqueue, 1),
    KTI_EXT_HOOK("clReleaseCommandBufferKHR", cb_release, cb_release, 1),
    /* cl_intel_unified_shared_memory */
    KTI_EXT_HOOK("clEnqueueMemFillINTEL", usm_fill, usm_fill, 0),
    KTI_EXT_HOOK("clEnqueueMemsetINTEL", usm_memset, usm_memset, 0),
    KTI_EXT_HOOK("clEnqueueMemcpyINTEL", usm_memcpy, usm_memcpy, 0),
    KTI_EXT_HOOK("clEnqueueMigrateMemINTEL", usm_migrate, usm_migrate, 0),
    KTI_EXT_HOOK("clEnqueueMemAdviseINTEL", usm_advise, usm_advise, 0),
};
#undef KTI_EXT_HOOK

static void *wrap_ext(const kti_next_t *n, cl_platform_id p, const char *name, void *fn)
{
    if (!fn || !name)
        return fn;
    const kti_ext_hook_t *h = NULL;
    for (size_t i = 0; i < sizeof kExtHooks / sizeof kExtHooks[0] && !h; i++)
        if (!strcmp(name, kExtHooks[i].name))
            h = &kExtHooks[i];
    if (!h)
        return fn;
    void *info = NULL; /* the command-buffer wrappers read the reference count with it */
    if (h->cmdbuf) {
        const char *info_name = "clGetCommandBufferInfoKHR";
        info = p && n->ext_platform ? n->ext_platform(p, info_name) : n->ext ? n->ext(info_name) : NULL;
    }
    void *wrapper = fn; /* every set holds another driver's pointer under this name: handed out unwrapped */
    pthread_mutex_lock(&g_ext_lock);
    for (size_t i = 0; i < KTI_EXT_SETS; i++) {
        kti_ext_set_t *x = &g_ext[i];
        void **slot = (void **)((char *)x + h->slot);
        if (*slot && *slot != fn)
            continue; /* another driver's (a second platform): the next set */
        /* the wrappers' other needs (release an event we made, a kernel's name, a command buffer's references) */
        if (!x->next.release_event)
            x->next.release_event = n->release_event;
        if (!x->next.kernel_info)
            x->next.kernel_info = n->kernel_info;
        if (!x->cb_info && info)
            *(void **)&x->cb_info = info;
        *slot = fn;
        wrapper = h->wrapper[i];
        break;
    }
    pthread_mutex_unlock(&g_ext_lock);
    return wrapper;
}

/* ---------------------------------------------------------------------------------------------------
 * The loader layer
 * ------------------------------------------------------------------------------------------------- */

static cl_icd_dispatch g_layer_dispatch;

static cl_command_queue CL_API_CALL layer_create_queue(cl_context c, cl_device_id d, cl_command_queue_properties p,
                                                       cl_int *err)
{
    return hook_create_queue(&g_layer_next, c, d, p, err);
}

static cl_command_queue CL_API_CALL layer_create_queue_props(cl_context c, cl_device_id d,
                                                             const cl_queue_properties *props, cl_int *err)
{
    return hook_create_queue_props(&g_layer_next, c, d, props, err);
}

static cl_int CL_API_CALL layer_retain_queue(cl_command_queue q)
{
    return hook_retain_queue(&g_layer_next, q);
}

static cl_int CL_API_CALL layer_release_queue(cl_command_queue q)
{
    return hook_release_queue(&g_layer_next, q);
}

static cl_int CL_API_CALL layer_queue_info(cl_command_queue q, cl_command_queue_info param, size_t size,
                                           void *value, size_t *size_ret)
{
    return hook_queue_info(&g_layer_next, q, param, size, value, size_ret);
}

static cl_int CL_API_CALL layer_profiling_info(cl_event ev, cl_profiling_info param, size_t size, void *value,
                                               size_t *size_ret)
{
    return hook_profiling_info(&g_layer_next, ev, param, size, value, size_ret);
}

static cl_int CL_API_CALL layer_event_info(cl_event ev, cl_event_info param, size_t size, void *value,
                                           size_t *size_ret)
{
    return hook_event_info(&g_layer_next, ev, param, size, value, size_ret);
}

static cl_int CL_API_CALL layer_ndrange(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off,
                                        const size_t *gws, const size_t *lws, cl_uint nwait, const cl_event *wait,
                                        cl_event *ev)
{
    return hook_ndrange(&g_layer_next, q, k, dim, off, gws, lws, nwait, wait, ev);
}

static cl_int CL_API_CALL layer_task(cl_command_queue q, cl_kernel k, cl_uint nwait, const cl_event *wait,
                                     cl_event *ev)
{
    return hook_task(&g_layer_next, q, k, nwait, wait, ev);
}

static cl_int CL_API_CALL layer_finish(cl_command_queue q) { return hook_finish(&g_layer_next, q); }

static cl_int CL_API_CALL layer_wait_events(cl_uint num, const cl_event *events)
{
    return hook_wait_events(&g_layer_next, num, events);
}

static void *CL_API_CALL layer_ext(const char *name)
{
    return wrap_ext(&g_layer_next, NULL, name, g_layer_next.ext ? g_layer_next.ext(name) : NULL);
}

static void *CL_API_CALL layer_ext_platform(cl_platform_id p, const char *name)
{
    return wrap_ext(&g_layer_next, p, name, g_layer_next.ext_platform ? g_layer_next.ext_platform(p, name) : NULL);
}

/* ---------------------------------------------------------------------------------------------------
 * Transfers and other commands: each timed as its own entry named after its entry point, with the bytes it
 * moves (KTIMING_OPENCL_COMMANDS=kernels leaves them untimed; clEnqueueNativeKernel is a kernel and always
 * timed). Markers, barriers and waits are never timed.
 * ------------------------------------------------------------------------------------------------- */

#define KTI_UNPACK(...) __VA_ARGS__

/* X(name, (parameters), (arguments without the event), bytes moved, 1 for a kernel) for every timed command
 * returning a cl_int; q is the queue, ev the program's event pointer. */
#define KTI_COMMANDS(X)                                                                                          \
    X(clEnqueueReadBuffer,                                                                                       \
      (cl_command_queue q, cl_mem m, cl_bool blk, size_t off, size_t sz, void *p, cl_uint nw, const cl_event *w, \
       cl_event *ev),                                                                                            \
      (q, m, blk, off, sz, p, nw, w), sz, 0)                                                                     \
    X(clEnqueueWriteBuffer,                                                                                      \
      (cl_command_queue q, cl_mem m, cl_bool blk, size_t off, size_t sz, const void *p, cl_uint nw,              \
       const cl_event *w, cl_event *ev),                                                                         \
      (q, m, blk, off, sz, p, nw, w), sz, 0)                                                                     \
    X(clEnqueueCopyBuffer,                                                                                       \
      (cl_command_queue q, cl_mem s, cl_mem d, size_t so, size_t dof, size_t sz, cl_uint nw, const cl_event *w,  \
       cl_event *ev),                                                                                            \
      (q, s, d, so, dof, sz, nw, w), sz, 0)                                                                      \
    X(clEnqueueFillBuffer,                                                                                       \
      (cl_command_queue q, cl_mem m, const void *pat, size_t psz, size_t off, size_t sz, cl_uint nw,             \
       const cl_event *w, cl_event *ev),                                                                         \
      (q, m, pat, psz, off, sz, nw, w), sz, 0)                                                                   \
    X(clEnqueueReadBufferRect,                                                                                   \
      (cl_command_queue q, cl_mem m, cl_bool blk, const size_t *bo, const size_t *ho, const size_t *r,           \
       size_t brp, size_t bsp, size_t hrp, size_t hsp, void *p, cl_uint nw, const cl_event *w, cl_event *ev),    \
      (q, m, blk, bo, ho, r, brp, bsp, hrp, hsp, p, nw, w), region_bytes(r, 1), 0)                               \
    X(clEnqueueWriteBufferRect,                                                                                  \
      (cl_command_queue q, cl_mem m, cl_bool blk, const size_t *bo, const size_t *ho, const size_t *r,           \
       size_t brp, size_t bsp, size_t hrp, size_t hsp, const void *p, cl_uint nw, const cl_event *w,             \
       cl_event *ev),                                                                                            \
      (q, m, blk, bo, ho, r, brp, bsp, hrp, hsp, p, nw, w), region_bytes(r, 1), 0)                               \
    X(clEnqueueCopyBufferRect,                                                                                   \
      (cl_command_queue q, cl_mem s, cl_mem d, const size_t *so, const size_t *dof, const size_t *r, size_t srp, \
       size_t ssp, size_t drp, size_t dsp, cl_uint nw, const cl_event *w, cl_event *ev),                         \
      (q, s, d, so, dof, r, srp, ssp, drp, dsp, nw, w), region_bytes(r, 1), 0)                                   \
    X(clEnqueueReadImage,                                                                                        \
      (cl_command_queue q, cl_mem m, cl_bool blk, const size_t *o, const size_t *r, size_t rp, size_t sp,        \
       void *p, cl_uint nw, const cl_event *w, cl_event *ev),                                                    \
      (q, m, blk, o, r, rp, sp, p, nw, w), region_bytes(r, image_elem(n, m)), 0)                                 \
    X(clEnqueueWriteImage,                                                                                       \
      (cl_command_queue q, cl_mem m, cl_bool blk, const size_t *o, const size_t *r, size_t rp, size_t sp,        \
       const void *p, cl_uint nw, const cl_event *w, cl_event *ev),                                              \
      (q, m, blk, o, r, rp, sp, p, nw, w), region_bytes(r, image_elem(n, m)), 0)                                 \
    X(clEnqueueCopyImage,                                                                                        \
      (cl_command_queue q, cl_mem s, cl_mem d, const size_t *so, const size_t *dof, const size_t *r, cl_uint nw, \
       const cl_event *w, cl_event *ev),                                                                         \
      (q, s, d, so, dof, r, nw, w), region_bytes(r, image_elem(n, s)), 0)                                        \
    X(clEnqueueFillImage,                                                                                        \
      (cl_command_queue q, cl_mem m, const void *color, const size_t *o, const size_t *r, cl_uint nw,            \
       const cl_event *w, cl_event *ev),                                                                         \
      (q, m, color, o, r, nw, w), region_bytes(r, image_elem(n, m)), 0)                                          \
    X(clEnqueueCopyImageToBuffer,                                                                                \
      (cl_command_queue q, cl_mem s, cl_mem d, const size_t *so, const size_t *r, size_t dof, cl_uint nw,        \
       const cl_event *w, cl_event *ev),                                                                         \
      (q, s, d, so, r, dof, nw, w), region_bytes(r, image_elem(n, s)), 0)                                        \
    X(clEnqueueCopyBufferToImage,                                                                                \
      (cl_command_queue q, cl_mem s, cl_mem d, size_t so, const size_t *dof, const size_t *r, cl_uint nw,        \
       const cl_event *w, cl_event *ev),                                                                         \
      (q, s, d, so, dof, r, nw, w), region_bytes(r, image_elem(n, d)), 0)                                        \
    X(clEnqueueUnmapMemObject,                                                                                   \
      (cl_command_queue q, cl_mem m, void *p, cl_uint nw, const cl_event *w, cl_event *ev), (q, m, p, nw, w), 0, \
      0)                                                                                                         \
    X(clEnqueueMigrateMemObjects,                                                                                \
      (cl_command_queue q, cl_uint nm, const cl_mem *ms, cl_mem_migration_flags f, cl_uint nw,                   \
       const cl_event *w, cl_event *ev),                                                                         \
      (q, nm, ms, f, nw, w), migrate_bytes(n, nm, ms, f), 0)                                                     \
    X(clEnqueueSVMFree,                                                                                          \
      (cl_command_queue q, cl_uint np, void **ps,                                                                \
       void(CL_CALLBACK * fn)(cl_command_queue, cl_uint, void **, void *), void *ud, cl_uint nw,                 \
       const cl_event *w, cl_event *ev),                                                                         \
      (q, np, ps, fn, ud, nw, w), 0, 0)                                                                          \
    X(clEnqueueSVMMemcpy,                                                                                        \
      (cl_command_queue q, cl_bool blk, void *d, const void *src, size_t sz, cl_uint nw, const cl_event *w,      \
       cl_event *ev),                                                                                            \
      (q, blk, d, src, sz, nw, w), sz, 0)                                                                        \
    X(clEnqueueSVMMemFill,                                                                                       \
      (cl_command_queue q, void *p, const void *pat, size_t psz, size_t sz, cl_uint nw, const cl_event *w,       \
       cl_event *ev),                                                                                            \
      (q, p, pat, psz, sz, nw, w), sz, 0)                                                                        \
    X(clEnqueueSVMMap,                                                                                           \
      (cl_command_queue q, cl_bool blk, cl_map_flags f, void *p, size_t sz, cl_uint nw, const cl_event *w,       \
       cl_event *ev),                                                                                            \
      (q, blk, f, p, sz, nw, w), sz, 0)                                                                          \
    X(clEnqueueSVMUnmap, (cl_command_queue q, void *p, cl_uint nw, const cl_event *w, cl_event *ev),             \
      (q, p, nw, w), 0, 0)                                                                                       \
    X(clEnqueueSVMMigrateMem,                                                                                    \
      (cl_command_queue q, cl_uint np, const void **ps, const size_t *szs, cl_mem_migration_flags f, cl_uint nw, \
       const cl_event *w, cl_event *ev),                                                                         \
      (q, np, ps, szs, f, nw, w), svm_migrate_bytes(np, szs, f), 0)                                              \
    X(clEnqueueNativeKernel,                                                                                     \
      (cl_command_queue q, void(CL_CALLBACK * fn)(void *), void *args, size_t cb, cl_uint nmo, const cl_mem *ml, \
       const void **aml, cl_uint nw, const cl_event *w, cl_event *ev),                                           \
      (q, fn, args, cb, nmo, ml, aml, nw, w), 0, 1)

/* The entry points the command hooks forward to (one table for the layer, one for LD_PRELOAD). */
typedef struct kti_cmd_t {
#define KTI_FIELD(name, params, args, bytes, kernel) cl_api_##name name; /* the next layer's name */
    KTI_COMMANDS(KTI_FIELD)
#undef KTI_FIELD
    cl_api_clEnqueueMapBuffer clEnqueueMapBuffer; /* clEnqueueMapBuffer */
    cl_api_clEnqueueMapImage clEnqueueMapImage;   /* clEnqueueMapImage */
    cl_api_clGetImageInfo clGetImageInfo;         /* bytes per pixel of an image */
    cl_api_clGetMemObjectInfo clGetMemObjectInfo; /* size of a migrated buffer */
    cl_api_clReleaseEvent clReleaseEvent;         /* releases the event made for ktiming */
} kti_cmd_t;

static kti_cmd_t g_layer_cmd;   /* the layer's target dispatch */
static kti_cmd_t g_preload_cmd; /* the loader's exports (LD_PRELOAD) */
static pthread_once_t g_preload_cmd_once = PTHREAD_ONCE_INIT;

static void preload_cmd_resolve(void)
{
    kti_cmd_t n;
    memset(&n, 0, sizeof n);
#define KTI_RESOLVE(name, params, args, bytes, kernel) *(void **)&n.name = resolve_loader_symbol(#name);
    KTI_COMMANDS(KTI_RESOLVE)
    KTI_RESOLVE(clEnqueueMapBuffer, , , , )
    KTI_RESOLVE(clEnqueueMapImage, , , , )
    KTI_RESOLVE(clGetImageInfo, , , , )
    KTI_RESOLVE(clGetMemObjectInfo, , , , )
    KTI_RESOLVE(clReleaseEvent, , , , )
#undef KTI_RESOLVE
    g_preload_cmd = n;
}

static const kti_cmd_t *preload_cmd(void)
{
    pthread_once(&g_preload_cmd_once, preload_cmd_resolve);
    return &g_preload_cmd;
}

static uint64_t region_bytes(const size_t *r, uint64_t elem)
{
    return r ? (uint64_t)r[0] * r[1] * r[2] * elem : 0;
}

static uint64_t image_elem(const kti_cmd_t *n, cl_mem img)
{
    size_t e = 0;
    if (!n->clGetImageInfo || n->clGetImageInfo(img, CL_IMAGE_ELEMENT_SIZE, sizeof e, &e, NULL) != CL_SUCCESS)
        return 0;
    return e;
}

static uint64_t migrate_bytes(const kti_cmd_t *n, cl_uint nm, const cl_mem *ms, cl_mem_migration_flags f)
{
    if ((f & CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED) || !ms || !n->clGetMemObjectInfo)
        return 0; /* nothing is copied */
    uint64_t total = 0;
    for (cl_uint i = 0; i < nm; i++) {
        size_t sz = 0;
        if (n->clGetMemObjectInfo(ms[i], CL_MEM_SIZE, sizeof sz, &sz, NULL) == CL_SUCCESS)
            total += sz;
    }
    return total;
}

/* Bytes an SVM migration moves: the sizes given (0 means "the whole allocation", whose size OpenCL does not tell:
 * counted as 0), nothing when the contents are left undefined. */
static uint64_t svm_migrate_bytes(cl_uint np, const size_t *szs, cl_mem_migration_flags f)
{
    if ((f & CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED) || !szs)
        return 0;
    uint64_t total = 0;
    for (cl_uint i = 0; i < np; i++)
        total += szs[i];
    return total;
}

/* The context a command on q is timed in, or NULL (untimed: not attachable, or kernels only). */
static kt_cl_ctx_t *command_ctx(cl_command_queue q, int kernel)
{
    if (!kernel && !kt_cl_commands_all())
        return NULL;
    return attach(q);
}

#define KTI_CMD_BODY(name, args, bytes, kernel)                                                                  \
    if (!n->name)                                                                                                \
        return CL_INVALID_OPERATION;                                                                             \
    kt_cl_ctx_t *kc = command_ctx(q, kernel);                                                                    \
    if (!kc)                                                                                                     \
        return refused_unattached(q, NULL, #name, kernel, n->name(KTI_UNPACK args, ev));                         \
    cl_event mine = NULL;                                                                                        \
    cl_event *evp = ev ? ev : &mine;                                                                             \
    uint64_t t0 = kt_now_ns();                                                                                   \
    cl_int rc = n->name(KTI_UNPACK args, evp);                                                                   \
    command_done(n->clReleaseEvent, kc, rc, NULL, #name, rc == CL_SUCCESS ? (uint64_t)(bytes) : 0, t0, evp, mine); \
    return rc;

/* The layer's hooks and the LD_PRELOAD entry points (forwarding only once the layer is active). */
#define KTI_CMD_FUNCS(name, params, args, bytes, kernel)                                                         \
    static cl_int CL_API_CALL layer_##name params                                                                \
    {                                                                                                            \
        const kti_cmd_t *n = &g_layer_cmd;                                                                       \
        KTI_CMD_BODY(name, args, bytes, kernel)                                                                  \
    }                                                                                                            \
    KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL name params                                                       \
    {                                                                                                            \
        const kti_cmd_t *n = preload_cmd();                                                                      \
        if (atomic_load(&g_layer_active))                                                                        \
            return n->name ? n->name(KTI_UNPACK args, ev) : CL_INVALID_OPERATION;                                \
        KTI_CMD_BODY(name, args, bytes, kernel)                                                                  \
    }
KTI_COMMANDS(KTI_CMD_FUNCS)
#undef KTI_CMD_FUNCS

/* Map commands return the mapped pointer and report errors through *err. */
static void *map_buffer(const kti_cmd_t *n, cl_command_queue q, cl_mem m, cl_bool blk, cl_map_flags f, size_t off,
                        size_t sz, cl_uint nw, const cl_event *w, cl_event *ev, cl_int *err)
{
    if (!n->clEnqueueMapBuffer) {
        if (err)
            *err = CL_INVALID_OPERATION;
        return NULL;
    }
    kt_cl_ctx_t *kc = command_ctx(q, 0);
    if (!kc) {
        cl_int rc0 = CL_SUCCESS;
        void *p = n->clEnqueueMapBuffer(q, m, blk, f, off, sz, nw, w, ev, &rc0);
        if (err)
            *err = rc0;
        refused_unattached(q, NULL, "clEnqueueMapBuffer", 0, rc0);
        return p;
    }
    cl_event mine = NULL;
    cl_event *evp = ev ? ev : &mine;
    cl_int rc = CL_SUCCESS;
    uint64_t t0 = kt_now_ns();
    void *p = n->clEnqueueMapBuffer(q, m, blk, f, off, sz, nw, w, evp, &rc);
    if (err)
        *err = rc;
    command_done(n->clReleaseEvent, kc, rc, NULL, "clEnqueueMapBuffer", rc == CL_SUCCESS ? sz : 0, t0, evp, mine);
    return p;
}

static void *map_image(const kti_cmd_t *n, cl_command_queue q, cl_mem m, cl_bool blk, cl_map_flags f,
                       const size_t *o, const size_t *r, size_t *rp, size_t *sp, cl_uint nw, const cl_event *w,
                       cl_event *ev, cl_int *err)
{
    if (!n->clEnqueueMapImage) {
        if (err)
            *err = CL_INVALID_OPERATION;
        return NULL;
    }
    kt_cl_ctx_t *kc = command_ctx(q, 0);
    if (!kc) {
        cl_int rc0 = CL_SUCCESS;
        void *p = n->clEnqueueMapImage(q, m, blk, f, o, r, rp, sp, nw, w, ev, &rc0);
        if (err)
            *err = rc0;
        refused_unattached(q, NULL, "clEnqueueMapImage", 0, rc0);
        return p;
    }
    cl_event mine = NULL;
    cl_event *evp = ev ? ev : &mine;
    cl_int rc = CL_SUCCESS;
    uint64_t t0 = kt_now_ns();
    void *p = n->clEnqueueMapImage(q, m, blk, f, o, r, rp, sp, nw, w, evp, &rc);
    if (err)
        *err = rc;
    command_done(n->clReleaseEvent, kc, rc, NULL, "clEnqueueMapImage",
                 rc == CL_SUCCESS ? region_bytes(r, image_elem(n, m)) : 0, t0, evp, mine);
    return p;
}

static void *CL_API_CALL layer_clEnqueueMapBuffer(cl_command_queue q, cl_mem m, cl_bool blk, cl_map_flags f,
                                                  size_t off, size_t sz, cl_uint nw, const cl_event *w,
                                                  cl_event *ev, cl_int *err)
{
    return map_buffer(&g_layer_cmd, q, m, blk, f, off, sz, nw, w, ev, err);
}

static void *CL_API_CALL layer_clEnqueueMapImage(cl_command_queue q, cl_mem m, cl_bool blk, cl_map_flags f,
                                                 const size_t *o, const size_t *r, size_t *rp, size_t *sp,
                                                 cl_uint nw, const cl_event *w, cl_event *ev, cl_int *err)
{
    return map_image(&g_layer_cmd, q, m, blk, f, o, r, rp, sp, nw, w, ev, err);
}

KTI_EXPORT CL_API_ENTRY void *CL_API_CALL clEnqueueMapBuffer(cl_command_queue q, cl_mem m, cl_bool blk,
                                                             cl_map_flags f, size_t off, size_t sz, cl_uint nw,
                                                             const cl_event *w, cl_event *ev, cl_int *err)
{
    const kti_cmd_t *n = preload_cmd();
    if (atomic_load(&g_layer_active) && n->clEnqueueMapBuffer)
        return n->clEnqueueMapBuffer(q, m, blk, f, off, sz, nw, w, ev, err);
    return map_buffer(n, q, m, blk, f, off, sz, nw, w, ev, err);
}

KTI_EXPORT CL_API_ENTRY void *CL_API_CALL clEnqueueMapImage(cl_command_queue q, cl_mem m, cl_bool blk,
                                                            cl_map_flags f, const size_t *o, const size_t *r,
                                                            size_t *rp, size_t *sp, cl_uint nw, const cl_event *w,
                                                            cl_event *ev, cl_int *err)
{
    const kti_cmd_t *n = preload_cmd();
    if (atomic_load(&g_layer_active) && n->clEnqueueMapImage)
        return n->clEnqueueMapImage(q, m, blk, f, o, r, rp, sp, nw, w, ev, err);
    return map_image(n, q, m, blk, f, o, r, rp, sp, nw, w, ev, err);
}

/* Fills the layer's command table from the target dispatch (entries past num_entries stay NULL) and points
 * the layer's dispatch at the hooks. */
static void layer_cmd_init(cl_uint num_entries, const cl_icd_dispatch *target)
{
    kti_cmd_t n;
    memset(&n, 0, sizeof n);
#define KTI_TAKE(name, params, args, bytes, kernel)                                                              \
    if (offsetof(cl_icd_dispatch, name) < num_entries * sizeof(void *)) {                                        \
        n.name = target->name;                                                                                   \
        g_layer_dispatch.name = layer_##name;                                                                    \
    }
    KTI_COMMANDS(KTI_TAKE)
    KTI_TAKE(clEnqueueMapBuffer, , , , )
    KTI_TAKE(clEnqueueMapImage, , , , )
#undef KTI_TAKE
    n.clGetImageInfo = target->clGetImageInfo;
    n.clGetMemObjectInfo = target->clGetMemObjectInfo;
    n.clReleaseEvent = target->clReleaseEvent;
    g_layer_cmd = n;
}

/* Points libktiming at libktiming_cl_direct.so (beside this library) and hands it the target dispatch. */
static int bind_direct(const cl_icd_dispatch *target)
{
    const char *path = kt__env(KT_ENV_NAME(OPENCL_LIBRARY));
    char buf[4096];
    if (!path || !*path || !strstr(path, "libktiming_cl_direct")) {
        Dl_info info;
        if (!dladdr((void *)bind_direct, &info) || !info.dli_fname)
            return -1;
        const char *slash = strrchr(info.dli_fname, '/');
        int dirlen = slash ? (int)(slash - info.dli_fname) : 1;
        snprintf(buf, sizeof buf, "%.*s/libktiming_cl_direct.so", dirlen, slash ? info.dli_fname : ".");
        path = buf;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void (*bind)(const cl_icd_dispatch *) = NULL;
    if (h)
        *(void **)&bind = dlsym(h, "kt_cl_direct_bind");
    if (!bind) {
        fprintf(stderr, "ktiming: OpenCL layer disabled: cannot load %s\n", path);
        return -1;
    }
    bind(target);
    kt_cl_use_library(path); /* libktiming has not loaded OpenCL yet: the hooks only run after this */
    return 0;
}

KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clGetLayerInfo(cl_layer_info param, size_t size, void *value,
                                                          size_t *size_ret)
{
    static const char kName[] = "ktiming kernel timing layer";
    if (param == CL_LAYER_API_VERSION) {
        cl_layer_api_version v = CL_LAYER_API_VERSION_100;
        if (value && size < sizeof v)
            return CL_INVALID_VALUE;
        if (value)
            memcpy(value, &v, sizeof v);
        if (size_ret)
            *size_ret = sizeof v;
        return CL_SUCCESS;
    }
    if (param == CL_LAYER_NAME) {
        if (value && size < sizeof kName)
            return CL_INVALID_VALUE;
        if (value)
            memcpy(value, kName, sizeof kName);
        if (size_ret)
            *size_ret = sizeof kName;
        return CL_SUCCESS;
    }
    return CL_INVALID_VALUE;
}

static cl_int init_layer(cl_uint num_entries, const cl_icd_dispatch *target, cl_uint *num_entries_ret,
                         const cl_icd_dispatch **layer_dispatch_ret)
{
    const cl_uint ours = (cl_uint)(sizeof(cl_icd_dispatch) / sizeof(void *));
    if (!target || !num_entries_ret || !layer_dispatch_ret)
        return CL_INVALID_VALUE;
    /* every entry we replace must be inside the loader's table */
    if (num_entries * sizeof(void *) <= offsetof(cl_icd_dispatch, clCreateCommandQueueWithProperties))
        return CL_INVALID_VALUE;
    memset(&g_layer_dispatch, 0, sizeof g_layer_dispatch);
    memcpy(&g_layer_dispatch, target, (num_entries < ours ? num_entries : ours) * sizeof(void *));
    if (kti_secure() || bind_direct(target) != 0) { /* pass everything through untouched */
        *layer_dispatch_ret = &g_layer_dispatch;
        *num_entries_ret = num_entries < ours ? num_entries : ours;
        return CL_SUCCESS;
    }
    kti_next_t n;
    n.create_queue = target->clCreateCommandQueue;
    n.create_queue_props = target->clCreateCommandQueueWithProperties;
    n.retain_queue = target->clRetainCommandQueue;
    n.release_queue = target->clReleaseCommandQueue;
    n.queue_info = target->clGetCommandQueueInfo;
    n.ndrange = target->clEnqueueNDRangeKernel;
    n.task = target->clEnqueueTask;
    n.profiling_info = target->clGetEventProfilingInfo;
    n.event_info = target->clGetEventInfo;
    n.release_event = target->clReleaseEvent;
    n.kernel_info = target->clGetKernelInfo;
    n.ext = target->clGetExtensionFunctionAddress;
    n.ext_platform = target->clGetExtensionFunctionAddressForPlatform;
    n.finish = target->clFinish;
    n.wait_events = target->clWaitForEvents;
    g_layer_next = n;
    g_layer_dispatch.clCreateCommandQueue = layer_create_queue;
    g_layer_dispatch.clCreateCommandQueueWithProperties = layer_create_queue_props;
    g_layer_dispatch.clRetainCommandQueue = layer_retain_queue;
    g_layer_dispatch.clReleaseCommandQueue = layer_release_queue;
    g_layer_dispatch.clGetCommandQueueInfo = layer_queue_info;
    g_layer_dispatch.clGetEventProfilingInfo = layer_profiling_info;
    g_layer_dispatch.clGetEventInfo = layer_event_info;
    g_layer_dispatch.clEnqueueNDRangeKernel = layer_ndrange;
    g_layer_dispatch.clEnqueueTask = layer_task;
    g_layer_dispatch.clFinish = layer_finish;
    g_layer_dispatch.clWaitForEvents = layer_wait_events;
    g_layer_dispatch.clGetExtensionFunctionAddress = layer_ext;
    g_layer_dispatch.clGetExtensionFunctionAddressForPlatform = layer_ext_platform;
    layer_cmd_init(num_entries, target);
    *layer_dispatch_ret = &g_layer_dispatch;
    *num_entries_ret = num_entries < ours ? num_entries : ours;
    atomic_store(&g_layer_active, 1);
    if (kt__env(KT_ENV_NAME(RUN_VERBOSE)))
        fprintf(stderr, "ktiming: OpenCL loader layer active\n");
    return CL_SUCCESS;
}

/* ocl-icd and Khronos loaders before 2024 (and later ones with OCL_ICD_FORCE_LEGACY_TERMINATION). */
KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clInitLayer(cl_uint num_entries, const cl_icd_dispatch *target,
                                                       cl_uint *num_entries_ret,
                                                       const cl_icd_dispatch **layer_dispatch_ret)
{
    return init_layer(num_entries, target, num_entries_ret, layer_dispatch_ret);
}

/* The layer properties of newer Khronos loaders (cl_layer_properties: a 0-terminated list of cl_properties). */
typedef cl_properties kti_layer_properties;

/* Newer Khronos loaders look this up instead of clInitLayer. No property is defined yet: any is refused, as
 * the loader-layer document asks of unknown properties. */
KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clInitLayerWithProperties(cl_uint num_entries,
                                                                     const cl_icd_dispatch *target,
                                                                     cl_uint *num_entries_ret,
                                                                     const cl_icd_dispatch **layer_dispatch_ret,
                                                                     const kti_layer_properties *properties)
{
    if (properties && properties[0] != 0)
        return CL_INVALID_PROPERTY;
    return init_layer(num_entries, target, num_entries_ret, layer_dispatch_ret);
}

/* The loader is about to unload the drivers: collect what is in flight (bounded) and let go of every queue,
 * so nothing calls into a driver afterwards; the exit snapshot still holds everything recorded. */
KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clDeinitLayer(void)
{
    if (atomic_exchange(&g_layer_active, 0)) {
        kt_cl_shutdown();
        /* Every context was retired and those done freed: no thread's cache of its last queue may hand one back
         * (a program that enqueues again on a queue it still holds attaches it afresh). */
        atomic_fetch_add_explicit(&g_attach_gen, 1u, memory_order_acq_rel);
    }
    return CL_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------------
 * LD_PRELOAD entry points: forward to the loader once the layer is active (the loader then calls the layer),
 * hook directly otherwise
 * ------------------------------------------------------------------------------------------------- */

KTI_EXPORT CL_API_ENTRY cl_command_queue CL_API_CALL clCreateCommandQueue(cl_context c, cl_device_id d,
                                                                         cl_command_queue_properties p,
                                                                         cl_int *err)
{
    const kti_next_t *n = preload_next();
    if (preload_forwards())
        return n->create_queue ? n->create_queue(c, d, p, err) : NULL;
    return hook_create_queue(n, c, d, p, err);
}

KTI_EXPORT CL_API_ENTRY cl_command_queue CL_API_CALL clCreateCommandQueueWithProperties(
    cl_context c, cl_device_id d, const cl_queue_properties *props, cl_int *err)
{
    const kti_next_t *n = preload_next();
    if (preload_forwards())
        return n->create_queue_props ? n->create_queue_props(c, d, props, err) : NULL;
    return hook_create_queue_props(n, c, d, props, err);
}

KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clRetainCommandQueue(cl_command_queue q)
{
    const kti_next_t *n = preload_next();
    if (preload_forwards())
        return n->retain_queue ? n->retain_queue(q) : CL_INVALID_COMMAND_QUEUE;
    return hook_retain_queue(n, q);
}

KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clReleaseCommandQueue(cl_command_queue q)
{
    const kti_next_t *n = preload_next();
    if (preload_forwards())
        return n->release_queue ? n->release_queue(q) : CL_INVALID_COMMAND_QUEUE;
    return hook_release_queue(n, q);
}

KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clGetCommandQueueInfo(cl_command_queue q, cl_command_queue_info param,
                                                                size_t size, void *value, size_t *size_ret)
{
    const kti_next_t *n = preload_next();
    if (preload_forwards())
        return n->queue_info ? n->queue_info(q, param, size, value, size_ret) : CL_INVALID_COMMAND_QUEUE;
    return hook_queue_info(n, q, param, size, value, size_ret);
}

KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clGetEventProfilingInfo(cl_event ev, cl_profiling_info param,
                                                                  size_t size, void *value, size_t *size_ret)
{
    const kti_next_t *n = preload_next();
    if (preload_forwards())
        return n->profiling_info ? n->profiling_info(ev, param, size, value, size_ret) : CL_INVALID_EVENT;
    return hook_profiling_info(n, ev, param, size, value, size_ret);
}

KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clGetEventInfo(cl_event ev, cl_event_info param, size_t size, void *value,
                                                         size_t *size_ret)
{
    const kti_next_t *n = preload_next();
    if (preload_forwards())
        return n->event_info ? n->event_info(ev, param, size, value, size_ret) : CL_INVALID_EVENT;
    return hook_event_info(n, ev, param, size, value, size_ret);
}

KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim,
                                                                 const size_t *off, const size_t *gws,
                                                                 const size_t *lws, cl_uint nwait,
                                                                 const cl_event *wait, cl_event *ev)
{
    const kti_next_t *n = preload_next();
    if (preload_forwards())
        return n->ndrange ? n->ndrange(q, k, dim, off, gws, lws, nwait, wait, ev) : CL_INVALID_COMMAND_QUEUE;
    return hook_ndrange(n, q, k, dim, off, gws, lws, nwait, wait, ev);
}

KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clEnqueueTask(cl_command_queue q, cl_kernel k, cl_uint nwait,
                                                        const cl_event *wait, cl_event *ev)
{
    const kti_next_t *n = preload_next();
    if (preload_forwards())
        return n->task ? n->task(q, k, nwait, wait, ev) : CL_INVALID_COMMAND_QUEUE;
    return hook_task(n, q, k, nwait, wait, ev);
}

KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clFinish(cl_command_queue q)
{
    const kti_next_t *n = preload_next();
    if (preload_forwards())
        return n->finish ? n->finish(q) : CL_INVALID_COMMAND_QUEUE;
    return hook_finish(n, q);
}

KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clWaitForEvents(cl_uint num, const cl_event *events)
{
    const kti_next_t *n = preload_next();
    if (preload_forwards())
        return n->wait_events ? n->wait_events(num, events) : CL_INVALID_EVENT;
    return hook_wait_events(n, num, events);
}

KTI_EXPORT CL_API_ENTRY void *CL_API_CALL clGetExtensionFunctionAddress(const char *name)
{
    const kti_next_t *n = preload_next();
    void *fn = n->ext ? n->ext(name) : NULL; /* first: this may be what initialises the loader (and layer) */
    return preload_forwards() ? fn : wrap_ext(n, NULL, name, fn);
}

KTI_EXPORT CL_API_ENTRY void *CL_API_CALL clGetExtensionFunctionAddressForPlatform(cl_platform_id p,
                                                                                   const char *name)
{
    const kti_next_t *n = preload_next();
    void *fn = n->ext_platform ? n->ext_platform(p, name) : NULL;
    return preload_forwards() ? fn : wrap_ext(n, p, name, fn);
}
