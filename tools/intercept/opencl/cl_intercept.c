/* cl_intercept.c — libktiming_cl_intercept.so: times every kernel of an unmodified OpenCL program (`ktiming run`).
 *
 * Two ways in, one set of hooks:
 *  - an OpenCL loader layer (OPENCL_LAYERS=<this .so>; ocl-icd >= 2.3, Khronos loader >= 2020.06): the loader
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
 *    clGetEventProfilingInfo on such queues still say "no profiling", and CL_QUEUE_REFERENCE_COUNT leaves out
 *    the reference ktiming holds;
 *  - clEnqueueNDRangeKernel / clEnqueueTask are tracked under the kernel's function name (an event is made and
 *    released by ktiming when the program passed none); the driver's return value is returned unchanged;
 *  - clRetainCommandQueue / clReleaseCommandQueue count the program's own references (ktiming holds one
 *    too, and drivers add internal ones): before the program's last release, ktiming collects everything of
 *    the queue and detaches (kt_cl_detach);
 *  - clGetExtensionFunctionAddress[ForPlatform] answers for the enqueue and queue-creation entry points are
 *    wrapped when the driver returns one (ocl-icd and PoCL return NULL for core names: nothing to wrap there).
 * At exit (when KTIMING_RUN_DIR is set) the snapshot is written to <dir>/<pid>.json for `ktiming run`.
 */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_0_APIS
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl_layer.h>
#include <ktiming.h>
#include <ktiming/cl.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/kti_run.h"

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
    cl_api_clGetExtensionFunctionAddress ext;                   /* clGetExtensionFunctionAddress */
    cl_api_clGetExtensionFunctionAddressForPlatform ext_platform; /* ...ForPlatform */
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
        const char *path = secure_getenv("KTIMING_CL_INTERCEPT_LOADER");
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
    R(ext, clGetExtensionFunctionAddress);
    R(ext_platform, clGetExtensionFunctionAddressForPlatform);
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
    size_t nprops;               /* entries in props including the terminating 0; 0 when it passed NULL */
} kti_queue_t;

static pthread_mutex_t g_queues_lock = PTHREAD_MUTEX_INITIALIZER;
static kti_queue_t *g_queues;        /* live queues */
static size_t g_queues_n;            /* entries used */
static size_t g_queues_cap;          /* entries allocated */
static atomic_size_t g_forced_count; /* forced queues, readable without the lock for the fast paths */

static void queue_add(cl_command_queue q, int forced, const cl_queue_properties *props)
{
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
    pthread_mutex_lock(&g_queues_lock);
    if (g_queues_n == g_queues_cap) {
        size_t cap = g_queues_cap ? 2 * g_queues_cap : 16;
        kti_queue_t *p = realloc(g_queues, cap * sizeof *p);
        if (p) {
            g_queues = p;
            g_queues_cap = cap;
        }
    }
    if (g_queues_n < g_queues_cap) {
        g_queues[g_queues_n++] = (kti_queue_t){q, 1, forced, copy, n};
        copy = NULL;
        if (forced)
            atomic_fetch_add(&g_forced_count, 1);
    }
    pthread_mutex_unlock(&g_queues_lock);
    free(copy);
}

/* The entry of q, or NULL. Caller holds g_queues_lock. */
static kti_queue_t *queue_find_locked(cl_command_queue q)
{
    for (size_t i = 0; q && i < g_queues_n; i++)
        if (g_queues[i].queue == q)
            return &g_queues[i];
    return NULL;
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

/* Counts a release of q; 1 when it is the program's last reference (the entry is then gone). */
static int queue_released(cl_command_queue q)
{
    int last = 0;
    pthread_mutex_lock(&g_queues_lock);
    kti_queue_t *e = queue_find_locked(q);
    if (e && e->refs > 0 && --e->refs == 0) {
        last = 1;
        if (e->forced)
            atomic_fetch_sub(&g_forced_count, 1);
        free(e->props);
        *e = g_queues[--g_queues_n];
    }
    pthread_mutex_unlock(&g_queues_lock);
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
    if (e && e->forced && e->props) {
        size_t bytes = e->nprops * sizeof(cl_queue_properties);
        answered = 1;
        if (value && size < bytes) {
            *rc = CL_INVALID_VALUE;
        } else {
            if (value)
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

/* The ktiming context of a queue, attaching it on first use; NULL when it can't be timed. */
static kt_cl_ctx_t *attach(cl_command_queue q)
{
    unsigned gen = atomic_load_explicit(&g_attach_gen, memory_order_acquire);
    if (q && t_last.queue == q && t_last.gen == gen)
        return t_last.ctx;
    kt_cl_ctx_t *kc = NULL;
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

static cl_command_queue hook_create_queue(const kti_next_t *n, cl_context c, cl_device_id d,
                                          cl_command_queue_properties p, cl_int *err)
{
    if (!n->create_queue)
        return NULL;
    if (!(p & CL_QUEUE_PROFILING_ENABLE)) {
        cl_int e = CL_SUCCESS;
        cl_command_queue q = n->create_queue(c, d, p | CL_QUEUE_PROFILING_ENABLE, &e);
        if (q && e == CL_SUCCESS) {
            queue_add(q, 1, NULL);
            if (err)
                *err = e;
            return q;
        }
    }
    cl_command_queue q = n->create_queue(c, d, p, err);
    if (q)
        queue_add(q, 0, NULL);
    return q;
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
            if (q && e == CL_SUCCESS) {
                queue_add(q, 1, props);
                if (err)
                    *err = e;
                return q;
            }
        }
    }
    cl_command_queue q = n->create_queue_props(c, d, props, err);
    if (q)
        queue_add(q, 0, NULL);
    return q;
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

/* The program's last release: ktiming collects everything of the queue and lets go of it first. */
static cl_int hook_release_queue(const kti_next_t *n, cl_command_queue q)
{
    if (!n->release_queue)
        return CL_INVALID_COMMAND_QUEUE;
    if (q && queue_released(q)) {
        kt_cl_ctx_t *kc = kt_cl_find(q);
        atomic_fetch_add_explicit(&g_attach_gen, 1u, memory_order_acq_rel);
        if (kc)
            kt_cl_detach(kc);
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

static cl_int hook_ndrange(const kti_next_t *n, cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off,
                           const size_t *gws, const size_t *lws, cl_uint nwait, const cl_event *wait, cl_event *ev)
{
    kt_cl_ctx_t *kc = attach(q);
    if (kc)
        return kt_cl_enqueue_ndrange(kc, k, dim, off, gws, lws, nwait, wait, ev);
    return n->ndrange ? n->ndrange(q, k, dim, off, gws, lws, nwait, wait, ev) : CL_INVALID_COMMAND_QUEUE;
}

static cl_int hook_task(const kti_next_t *n, cl_command_queue q, cl_kernel k, cl_uint nwait, const cl_event *wait,
                        cl_event *ev)
{
    if (!n->task)
        return CL_INVALID_COMMAND_QUEUE;
    kt_cl_ctx_t *kc = attach(q);
    if (!kc)
        return n->task(q, k, nwait, wait, ev);
    uint64_t t = kt_now_ns();
    cl_event mine = NULL;
    cl_int rc = n->task(q, k, nwait, wait, ev ? ev : &mine);
    if (rc == CL_SUCCESS) {
        kt_cl_track_kernel(kc, ev ? *ev : mine, k, NULL, t);
        if (mine && n->release_event)
            n->release_event(mine);
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Entry points handed out by clGetExtensionFunctionAddress[ForPlatform]: when a driver returns one of the
 * timed functions directly, the program gets a wrapper calling that same pointer.
 * ------------------------------------------------------------------------------------------------- */

static kti_next_t g_ext_next; /* pointers the driver returned, one per function (first one wins) */
static pthread_mutex_t g_ext_lock = PTHREAD_MUTEX_INITIALIZER;

static cl_int CL_API_CALL ext_ndrange(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off,
                                      const size_t *gws, const size_t *lws, cl_uint nwait, const cl_event *wait,
                                      cl_event *ev)
{
    return hook_ndrange(&g_ext_next, q, k, dim, off, gws, lws, nwait, wait, ev);
}

static cl_int CL_API_CALL ext_task(cl_command_queue q, cl_kernel k, cl_uint nwait, const cl_event *wait,
                                   cl_event *ev)
{
    return hook_task(&g_ext_next, q, k, nwait, wait, ev);
}

static cl_command_queue CL_API_CALL ext_create_queue(cl_context c, cl_device_id d, cl_command_queue_properties p,
                                                     cl_int *err)
{
    return hook_create_queue(&g_ext_next, c, d, p, err);
}

static cl_command_queue CL_API_CALL ext_create_queue_props(cl_context c, cl_device_id d,
                                                           const cl_queue_properties *props, cl_int *err)
{
    return hook_create_queue_props(&g_ext_next, c, d, props, err);
}

/* The wrapper for fn returned under name, or fn itself when it is not one we time (or a different pointer
 * was already wrapped under that name, e.g. by a second platform). */
static void *wrap_ext(const kti_next_t *n, const char *name, void *fn)
{
    if (!fn || !name)
        return fn;
    void **slot = NULL, *wrapper = NULL;
    if (!strcmp(name, "clEnqueueNDRangeKernel")) {
        slot = (void **)&g_ext_next.ndrange;
        wrapper = (void *)ext_ndrange;
    } else if (!strcmp(name, "clEnqueueTask")) {
        slot = (void **)&g_ext_next.task;
        wrapper = (void *)ext_task;
    } else if (!strcmp(name, "clCreateCommandQueue")) {
        slot = (void **)&g_ext_next.create_queue;
        wrapper = (void *)ext_create_queue;
    } else if (!strcmp(name, "clCreateCommandQueueWithProperties")) {
        slot = (void **)&g_ext_next.create_queue_props;
        wrapper = (void *)ext_create_queue_props;
    } else {
        return fn;
    }
    pthread_mutex_lock(&g_ext_lock);
    if (!*slot)
        *slot = fn;
    if (*slot != fn)
        wrapper = fn;
    /* the wrappers' other needs (release an event we made) go where the caller's table goes */
    if (!g_ext_next.release_event)
        g_ext_next.release_event = n->release_event;
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

static void *CL_API_CALL layer_ext(const char *name)
{
    return wrap_ext(&g_layer_next, name, g_layer_next.ext ? g_layer_next.ext(name) : NULL);
}

static void *CL_API_CALL layer_ext_platform(cl_platform_id p, const char *name)
{
    return wrap_ext(&g_layer_next, name, g_layer_next.ext_platform ? g_layer_next.ext_platform(p, name) : NULL);
}

/* Points libktiming at libktiming_cl_direct.so (beside this library) and hands it the target dispatch. */
static int bind_direct(const cl_icd_dispatch *target)
{
    const char *path = secure_getenv("KTIMING_OPENCL_LIBRARY");
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
    if (path == buf) /* libktiming has not loaded OpenCL yet: the hooks only run after this */
        setenv("KTIMING_OPENCL_LIBRARY", path, 1);
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

KTI_EXPORT CL_API_ENTRY cl_int CL_API_CALL clInitLayer(cl_uint num_entries, const cl_icd_dispatch *target,
                                                       cl_uint *num_entries_ret,
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
    n.ext = target->clGetExtensionFunctionAddress;
    n.ext_platform = target->clGetExtensionFunctionAddressForPlatform;
    g_layer_next = n;
    g_layer_dispatch.clCreateCommandQueue = layer_create_queue;
    g_layer_dispatch.clCreateCommandQueueWithProperties = layer_create_queue_props;
    g_layer_dispatch.clRetainCommandQueue = layer_retain_queue;
    g_layer_dispatch.clReleaseCommandQueue = layer_release_queue;
    g_layer_dispatch.clGetCommandQueueInfo = layer_queue_info;
    g_layer_dispatch.clGetEventProfilingInfo = layer_profiling_info;
    g_layer_dispatch.clEnqueueNDRangeKernel = layer_ndrange;
    g_layer_dispatch.clEnqueueTask = layer_task;
    g_layer_dispatch.clGetExtensionFunctionAddress = layer_ext;
    g_layer_dispatch.clGetExtensionFunctionAddressForPlatform = layer_ext_platform;
    *layer_dispatch_ret = &g_layer_dispatch;
    *num_entries_ret = num_entries < ours ? num_entries : ours;
    atomic_store(&g_layer_active, 1);
    if (secure_getenv("KTIMING_RUN_VERBOSE"))
        fprintf(stderr, "ktiming: OpenCL loader layer active\n");
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

KTI_EXPORT CL_API_ENTRY void *CL_API_CALL clGetExtensionFunctionAddress(const char *name)
{
    const kti_next_t *n = preload_next();
    void *fn = n->ext ? n->ext(name) : NULL; /* first: this may be what initialises the loader (and layer) */
    return preload_forwards() ? fn : wrap_ext(n, name, fn);
}

KTI_EXPORT CL_API_ENTRY void *CL_API_CALL clGetExtensionFunctionAddressForPlatform(cl_platform_id p,
                                                                                   const char *name)
{
    const kti_next_t *n = preload_next();
    void *fn = n->ext_platform ? n->ext_platform(p, name) : NULL;
    return preload_forwards() ? fn : wrap_ext(n, name, fn);
}
