/* fake_opencl.c — TEST DOUBLE, not a driver: a tiny in-process "OpenCL" that ktiming's tests load through
 * KTIMING_OPENCL_LIBRARY to reproduce driver behaviours PoCL does not show (DESIGN §4): profiling stamps in
 * CLOCK_REALTIME or in a device epoch with drift, a 2.1+ host timer, a 1.2 stack whose
 * clGetDeviceAndHostTimer never returns, callbacks run on the enqueuing thread, callbacks fired for failed
 * commands. Only what ktiming and its tests call is implemented; commands run in order on one worker thread
 * per queue (or inline). Configured by environment:
 *   FAKE_CL_VERSION=1.2|3.0 (default 3.0)      FAKE_CL_HOST_TIMER_RES=ns (default 0)
 *   FAKE_CL_CLOCK=raw|realtime|device          FAKE_CL_HANG_TIMER=1 (clGetDeviceAndHostTimer blocks forever)
 *   FAKE_CL_INLINE=1 (commands complete inside the enqueue; callbacks on the caller's thread)
 *   FAKE_CL_ERROR_CALLBACKS=1 (CL_COMPLETE callbacks also fire, with the negative status, for failed commands)
 *   FAKE_CL_SETCB_DELAY_US=n (clSetEventCallback is slow to start: it reads the event only after n us, as when
 *     the calling thread is preempted there)
 *   FAKE_CL_PLATFORMS=2 (two platforms, each with one device of the same name, as two drivers of one model)
 *   clCreateSubDevices: a root device has 4 compute units; CL_DEVICE_PARTITION_EQUALLY makes 4 / n sub-devices
 *     (kept until exit), each with the root's name, ids and platform, and CL_DEVICE_PARENT_DEVICE
 *   FAKE_CL_IDS=1 (devices list cl_khr_device_uuid and cl_khr_pci_bus_info: UUID 0000000<p>-0000-4000-8000-
 *     0000000000<p>0 with <p> the platform's index, driver UUID all ff, PCI address 0000:<41+p>:00.0)
 *   FAKE_CL_SETCB_FAIL=1 (clSetEventCallback refuses every callback with CL_OUT_OF_RESOURCES)
 *   FAKE_CL_CONTEXT_DELAY_US=n (clCreateContext takes n us, after counting the call: a calibration's private
 *     context is then slow enough to fork during it)
 * fake_cl_set_failed_status(n) (exported, for the tests): a command whose dependency failed ends with execution
 * status n (e.g. -1; 0: CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, the default), as drivers that report their own
 * negative statuses.
 * fake_cl_event_queries() (exported, for the tests) tells how many clGetEventInfo / clGetEventProfilingInfo calls the
 * calling thread made.
 * fake_cl_context_calls() (exported, for the tests) tells how many clCreateContext calls began, and how many of
 * them on a thread other than the process's main thread.
 * A kernel's first argument, if a cl_uint, is its run time in microseconds. */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAKE_API __attribute__((visibility("default")))
#define DEVICE_DRIFT_PPM 50.0
#define DEVICE_EPOCH_NS 1000000000000000ull

/* ---------------------------------------------------------------------------------------------------
 * Objects
 * ------------------------------------------------------------------------------------------------- */

struct _cl_platform_id { int index; /* 0, or 1 with FAKE_CL_PLATFORMS=2 */ };
struct _cl_device_id {
    int index;                       /* its platform's */
    struct _cl_device_id *parent;    /* clCreateSubDevices: the device it was made from (NULL: a root device) */
};
struct _cl_context { int refs; /* reference count */ };
struct _cl_program { int refs; /* reference count */ };
struct _cl_mem { int refs; /* reference count */ size_t size; /* bytes */ void *data; /* contents */ };

struct _cl_kernel {
    int refs;        /* reference count */
    char name[64];   /* function name */
    cl_uint run_us;  /* run time per dispatch */
};

typedef struct fake_cb_t {
    void (CL_CALLBACK *fn)(cl_event, cl_int, void *); /* user callback */
    void *user;                                        /* its data */
    struct fake_cb_t *next;                            /* list link */
} fake_cb_t;

struct _cl_event {
    int refs;                /* reference count (the queue holds one while the command is pending) */
    cl_int status;           /* CL_QUEUED .. CL_COMPLETE, or negative */
    cl_command_type type;    /* command type */
    cl_command_queue queue;  /* NULL for user events */
    cl_ulong stamp[4];       /* queued, submit, start, end (device clock) */
    cl_uint run_us;          /* command run time */
    cl_event dep;            /* one dependency (user event) or NULL */
    fake_cb_t *cbs;          /* CL_COMPLETE callbacks not yet fired */
    struct _cl_event *next;  /* queue FIFO link */
    struct _cl_event *waiter; /* FAKE_CL_INLINE: command to run when this (user) event is set */
};

struct _cl_command_queue {
    int refs;                              /* reference count */
    cl_command_queue_properties props;     /* as created */
    cl_context context;                    /* owner */
    cl_device_id device;                   /* its device */
    cl_event head, tail;                   /* pending commands in order */
    int busy;                              /* the worker is running a command */
    int stop;                              /* worker exit request */
    pthread_t worker;                      /* runs commands (not in FAKE_CL_INLINE mode) */
};

static struct _cl_platform_id g_platforms[2] = {{0}, {1}};
static struct _cl_device_id g_devices[2] = {{0, NULL}, {1, NULL}}; /* one per platform */
static pthread_mutex_t G = PTHREAD_MUTEX_INITIALIZER; /* one lock for everything */
static pthread_cond_t CV = PTHREAD_COND_INITIALIZER;  /* any state change */
static uint64_t g_raw0;                               /* RAW time of the first clock read */

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static int version_major(void) { const char *v = getenv("FAKE_CL_VERSION"); return v && v[0] == '1' ? 1 : 3; }
static int version_minor(void) { return version_major() == 1 ? 2 : 0; }

static uint64_t host_raw(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_RAW, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The device clock profiling stamps use. */
static cl_ulong device_now(void)
{
    const char *c = getenv("FAKE_CL_CLOCK");
    if (c && !strcmp(c, "realtime")) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        return (cl_ulong)t.tv_sec * 1000000000ull + (cl_ulong)t.tv_nsec;
    }
    uint64_t raw = host_raw();
    if (c && !strcmp(c, "device")) {
        pthread_mutex_lock(&G);
        if (!g_raw0)
            g_raw0 = raw;
        uint64_t since = raw - g_raw0;
        pthread_mutex_unlock(&G);
        return DEVICE_EPOCH_NS + since + (cl_ulong)((double)since * DEVICE_DRIFT_PPM * 1e-6);
    }
    return raw;
}

static cl_int copy_info(const void *src, size_t n, size_t cap, void *dst, size_t *ret)
{
    if (ret)
        *ret = n;
    if (dst) {
        if (cap < n)
            return CL_INVALID_VALUE;
        memcpy(dst, src, n);
    }
    return CL_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------------
 * Platform and device
 * ------------------------------------------------------------------------------------------------- */

static cl_uint platform_count(void) { return env_int("FAKE_CL_PLATFORMS", 1) == 2 ? 2 : 1; }

FAKE_API cl_int clGetPlatformIDs(cl_uint n, cl_platform_id *p, cl_uint *np)
{
    if (np)
        *np = platform_count();
    for (cl_uint i = 0; p && i < n && i < platform_count(); i++)
        p[i] = &g_platforms[i];
    return CL_SUCCESS;
}

FAKE_API cl_int clGetPlatformInfo(cl_platform_id p, cl_platform_info what, size_t cap, void *v, size_t *ret)
{
    (void)p;
    char buf[64];
    switch (what) {
    case CL_PLATFORM_NAME: return copy_info("ktiming test fake platform", 27, cap, v, ret);
    case CL_PLATFORM_VERSION:
        snprintf(buf, sizeof buf, "OpenCL %d.%d fake", version_major(), version_minor());
        return copy_info(buf, strlen(buf) + 1, cap, v, ret);
    case CL_PLATFORM_HOST_TIMER_RESOLUTION: {
        if (version_major() < 2)
            return CL_INVALID_VALUE;
        cl_ulong r = (cl_ulong)env_int("FAKE_CL_HOST_TIMER_RES", 0);
        return copy_info(&r, sizeof r, cap, v, ret);
    }
    default: return CL_INVALID_VALUE;
    }
}

FAKE_API cl_int clGetDeviceIDs(cl_platform_id p, cl_device_type t, cl_uint n, cl_device_id *d, cl_uint *nd)
{
    (void)t;
    if (nd)
        *nd = 1;
    if (d && n)
        d[0] = &g_devices[p ? p->index : 0];
    return CL_SUCCESS;
}

/* FAKE_CL_IDS=1: the stable ids of cl_khr_device_uuid and cl_khr_pci_bus_info (values of cl_ext.h, so this file
 * needs no extension header). */
#define FAKE_DEVICE_UUID 0x106A
#define FAKE_DRIVER_UUID 0x106B
#define FAKE_PCI_BUS_INFO 0x410F
static cl_int device_ids(cl_device_id d, cl_device_info what, size_t cap, void *v, size_t *ret)
{
    if (!env_int("FAKE_CL_IDS", 0))
        return what == CL_DEVICE_EXTENSIONS ? copy_info("", 1, cap, v, ret) : CL_INVALID_VALUE;
    unsigned char uuid[16] = {0, 0, 0, (unsigned char)d->index, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0,
                              (unsigned char)(d->index << 4)};
    switch (what) {
    case CL_DEVICE_EXTENSIONS: {
        static const char kExt[] = "cl_khr_icd cl_khr_device_uuid cl_khr_pci_bus_info";
        return copy_info(kExt, sizeof kExt, cap, v, ret);
    }
    case FAKE_DEVICE_UUID: return copy_info(uuid, sizeof uuid, cap, v, ret);
    case FAKE_DRIVER_UUID: memset(uuid, 0xff, sizeof uuid); return copy_info(uuid, sizeof uuid, cap, v, ret);
    case FAKE_PCI_BUS_INFO: {
        const cl_uint pci[4] = {0, 0x41u + (cl_uint)d->index, 0, 0}; /* domain, bus, device, function */
        return copy_info(pci, sizeof pci, cap, v, ret);
    }
    default: return CL_INVALID_VALUE;
    }
}

FAKE_API cl_int clGetDeviceInfo(cl_device_id d, cl_device_info what, size_t cap, void *v, size_t *ret)
{
    char buf[64];
    switch (what) {
    case CL_DEVICE_NAME: return copy_info("ktiming fake device", 20, cap, v, ret);
    case CL_DEVICE_VERSION:
        snprintf(buf, sizeof buf, "OpenCL %d.%d fake", version_major(), version_minor());
        return copy_info(buf, strlen(buf) + 1, cap, v, ret);
    case CL_DRIVER_VERSION: return copy_info("0.0", 4, cap, v, ret);
    case CL_DEVICE_PROFILING_TIMER_RESOLUTION: {
        size_t r = 1;
        return copy_info(&r, sizeof r, cap, v, ret);
    }
    case CL_DEVICE_PLATFORM: {
        cl_platform_id p = &g_platforms[d->index];
        return copy_info(&p, sizeof p, cap, v, ret);
    }
    case CL_DEVICE_TYPE: {
        cl_device_type t = CL_DEVICE_TYPE_CPU;
        return copy_info(&t, sizeof t, cap, v, ret);
    }
    case CL_DEVICE_VENDOR: return copy_info("ktiming", 8, cap, v, ret);
    case CL_DEVICE_PARENT_DEVICE: {
        cl_device_id parent = d->parent;
        return copy_info(&parent, sizeof parent, cap, v, ret);
    }
    case CL_DEVICE_MAX_COMPUTE_UNITS: {
        cl_uint units = d->parent ? 2 : 4;
        return copy_info(&units, sizeof units, cap, v, ret);
    }
    default: return device_ids(d, what, cap, v, ret);
    }
}

FAKE_API cl_int clCreateSubDevices(cl_device_id in, const cl_device_partition_property *props, cl_uint n,
                                   cl_device_id *out, cl_uint *n_ret)
{
    if (!in || !props || props[0] != CL_DEVICE_PARTITION_EQUALLY || props[1] <= 0 || props[1] > 4)
        return CL_INVALID_VALUE;
    cl_uint count = 4 / (cl_uint)props[1];
    if (n_ret)
        *n_ret = count;
    if (out && n < count)
        return CL_INVALID_VALUE;
    for (cl_uint i = 0; out && i < count; i++) {
        out[i] = calloc(1, sizeof *out[i]); /* kept until exit (clReleaseDevice does not free) */
        out[i]->index = in->index;
        out[i]->parent = in;
    }
    return CL_SUCCESS;
}

FAKE_API cl_int clRetainDevice(cl_device_id d) { (void)d; return CL_SUCCESS; }
FAKE_API cl_int clReleaseDevice(cl_device_id d) { (void)d; return CL_SUCCESS; }

FAKE_API cl_int clGetDeviceAndHostTimer(cl_device_id d, cl_ulong *dev, cl_ulong *host)
{
    (void)d;
    if (env_int("FAKE_CL_HANG_TIMER", 0))
        for (;;)
            pause(); /* as some 1.2 stacks through the ICD loader: never returns */
    if (version_major() < 2 || env_int("FAKE_CL_HOST_TIMER_RES", 0) == 0)
        return CL_INVALID_OPERATION;
    *host = host_raw();
    *dev = device_now();
    return CL_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------------
 * Contexts, programs, kernels, buffers (bookkeeping only)
 * ------------------------------------------------------------------------------------------------- */

static int g_contexts_begun;    /* clCreateContext calls begun */
static int g_contexts_off_main; /* ... on a thread other than the main thread */

FAKE_API void fake_cl_context_calls(int *begun, int *off_main)
{
    *begun = __atomic_load_n(&g_contexts_begun, __ATOMIC_SEQ_CST);
    *off_main = __atomic_load_n(&g_contexts_off_main, __ATOMIC_SEQ_CST);
}

FAKE_API cl_context clCreateContext(const cl_context_properties *p, cl_uint n, const cl_device_id *d,
                                    void (CL_CALLBACK *cb)(const char *, const void *, size_t, void *), void *u,
                                    cl_int *err)
{
    (void)p, (void)n, (void)d, (void)cb, (void)u;
    __atomic_add_fetch(&g_contexts_begun, 1, __ATOMIC_SEQ_CST);
    if (gettid() != getpid())
        __atomic_add_fetch(&g_contexts_off_main, 1, __ATOMIC_SEQ_CST);
    int delay_us = env_int("FAKE_CL_CONTEXT_DELAY_US", 0);
    if (delay_us > 0) {
        struct timespec ts = {delay_us / 1000000, (long)(delay_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    cl_context c = calloc(1, sizeof *c);
    c->refs = 1;
    if (err)
        *err = CL_SUCCESS;
    return c;
}

FAKE_API cl_int clReleaseContext(cl_context c)
{
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_SEQ_CST) == 0)
        free(c);
    return CL_SUCCESS;
}

FAKE_API cl_program clCreateProgramWithSource(cl_context c, cl_uint n, const char **s, const size_t *l, cl_int *err)
{
    (void)c, (void)n, (void)s, (void)l;
    cl_program p = calloc(1, sizeof *p);
    p->refs = 1;
    if (err)
        *err = CL_SUCCESS;
    return p;
}

FAKE_API cl_int clBuildProgram(cl_program p, cl_uint n, const cl_device_id *d, const char *o,
                               void (CL_CALLBACK *cb)(cl_program, void *), void *u)
{
    (void)p, (void)n, (void)d, (void)o, (void)cb, (void)u;
    return CL_SUCCESS;
}

FAKE_API cl_int clGetProgramBuildInfo(cl_program p, cl_device_id d, cl_program_build_info w, size_t cap, void *v,
                                      size_t *ret)
{
    (void)p, (void)d, (void)w;
    return copy_info("", 1, cap, v, ret);
}

FAKE_API cl_int clReleaseProgram(cl_program p)
{
    if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_SEQ_CST) == 0)
        free(p);
    return CL_SUCCESS;
}

FAKE_API cl_kernel clCreateKernel(cl_program p, const char *name, cl_int *err)
{
    (void)p;
    cl_kernel k = calloc(1, sizeof *k);
    k->refs = 1;
    snprintf(k->name, sizeof k->name, "%s", name);
    if (err)
        *err = CL_SUCCESS;
    return k;
}

FAKE_API cl_int clReleaseKernel(cl_kernel k)
{
    if (__atomic_sub_fetch(&k->refs, 1, __ATOMIC_SEQ_CST) == 0)
        free(k);
    return CL_SUCCESS;
}

FAKE_API cl_int clSetKernelArg(cl_kernel k, cl_uint i, size_t size, const void *v)
{
    if (i == 0 && size == sizeof(cl_uint) && v)
        memcpy(&k->run_us, v, sizeof k->run_us);
    return CL_SUCCESS;
}

FAKE_API cl_int clGetKernelInfo(cl_kernel k, cl_kernel_info what, size_t cap, void *v, size_t *ret)
{
    if (what != CL_KERNEL_FUNCTION_NAME)
        return CL_INVALID_VALUE;
    return copy_info(k->name, strlen(k->name) + 1, cap, v, ret);
}

FAKE_API cl_mem clCreateBuffer(cl_context c, cl_mem_flags f, size_t size, void *host, cl_int *err)
{
    (void)c;
    cl_mem m = calloc(1, sizeof *m);
    m->refs = 1;
    m->size = size;
    m->data = calloc(1, size ? size : 1);
    if (host && (f & CL_MEM_COPY_HOST_PTR))
        memcpy(m->data, host, size);
    if (err)
        *err = CL_SUCCESS;
    return m;
}

FAKE_API cl_int clReleaseMemObject(cl_mem m)
{
    if (__atomic_sub_fetch(&m->refs, 1, __ATOMIC_SEQ_CST) == 0) {
        free(m->data);
        free(m);
    }
    return CL_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------------
 * Events
 * ------------------------------------------------------------------------------------------------- */

static void event_release_locked(cl_event e)
{
    if (--e->refs == 0) {
        while (e->cbs) {
            fake_cb_t *n = e->cbs->next;
            free(e->cbs);
            e->cbs = n;
        }
        cl_event dep = e->dep;
        free(e);
        if (dep)
            event_release_locked(dep);
    }
}

FAKE_API cl_int clRetainEvent(cl_event e)
{
    pthread_mutex_lock(&G);
    e->refs++;
    pthread_mutex_unlock(&G);
    return CL_SUCCESS;
}

FAKE_API cl_int clReleaseEvent(cl_event e)
{
    pthread_mutex_lock(&G);
    event_release_locked(e);
    pthread_mutex_unlock(&G);
    return CL_SUCCESS;
}

static void run_command(cl_event e);

/* Set a final status and fire callbacks (outside the lock) as the configuration says. */
static void event_finish(cl_event e, cl_int status)
{
    pthread_mutex_lock(&G);
    e->status = status;
    fake_cb_t *cbs = NULL;
    if (status == CL_COMPLETE || env_int("FAKE_CL_ERROR_CALLBACKS", 0)) {
        cbs = e->cbs;
        e->cbs = NULL;
    }
    e->refs++; /* alive through the callbacks */
    pthread_cond_broadcast(&CV);
    pthread_mutex_unlock(&G);
    while (cbs) {
        fake_cb_t *n = cbs->next;
        cbs->fn(e, status, cbs->user);
        free(cbs);
        cbs = n;
    }
    pthread_mutex_lock(&G);
    cl_event waiter = e->waiter;
    e->waiter = NULL;
    pthread_mutex_unlock(&G);
    if (waiter) { /* inline mode: the command held back by this event runs on the thread that set it */
        run_command(waiter);
        clReleaseEvent(waiter);
    }
    clReleaseEvent(e);
}

FAKE_API cl_int clSetEventCallback(cl_event e, cl_int type, void (CL_CALLBACK *fn)(cl_event, cl_int, void *),
                                   void *user)
{
    if (type != CL_COMPLETE)
        return CL_INVALID_VALUE;
    if (env_int("FAKE_CL_SETCB_FAIL", 0))
        return CL_OUT_OF_RESOURCES;
    int delay = env_int("FAKE_CL_SETCB_DELAY_US", 0);
    if (delay > 0) {
        struct timespec ts = {0, (long)delay * 1000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&G);
    cl_int st = e->status;
    if (st > CL_COMPLETE) {
        fake_cb_t *cb = calloc(1, sizeof *cb);
        cb->fn = fn;
        cb->user = user;
        cb->next = e->cbs;
        e->cbs = cb;
        pthread_mutex_unlock(&G);
        return CL_SUCCESS;
    }
    pthread_mutex_unlock(&G);
    if (st == CL_COMPLETE || env_int("FAKE_CL_ERROR_CALLBACKS", 0))
        fn(e, st, user); /* already final: on the calling thread, as the spec allows */
    return CL_SUCCESS;
}

FAKE_API cl_event clCreateUserEvent(cl_context c, cl_int *err)
{
    (void)c;
    cl_event e = calloc(1, sizeof *e);
    e->refs = 1;
    e->status = CL_SUBMITTED;
    e->type = CL_COMMAND_USER;
    if (err)
        *err = CL_SUCCESS;
    return e;
}

FAKE_API cl_int clSetUserEventStatus(cl_event e, cl_int status)
{
    event_finish(e, status);
    return CL_SUCCESS;
}

static _Thread_local unsigned long t_event_queries; /* this thread's event queries */

FAKE_API unsigned long fake_cl_event_queries(void) { return t_event_queries; }

FAKE_API cl_int clGetEventInfo(cl_event e, cl_event_info what, size_t cap, void *v, size_t *ret)
{
    t_event_queries++;
    pthread_mutex_lock(&G);
    cl_int st = e->status;
    cl_uint refs = (cl_uint)e->refs;
    pthread_mutex_unlock(&G);
    switch (what) {
    case CL_EVENT_COMMAND_EXECUTION_STATUS: return copy_info(&st, sizeof st, cap, v, ret);
    case CL_EVENT_REFERENCE_COUNT: return copy_info(&refs, sizeof refs, cap, v, ret);
    case CL_EVENT_COMMAND_TYPE: return copy_info(&e->type, sizeof e->type, cap, v, ret);
    case CL_EVENT_COMMAND_QUEUE: return copy_info(&e->queue, sizeof e->queue, cap, v, ret);
    default: return CL_INVALID_VALUE;
    }
}

FAKE_API cl_int clGetEventProfilingInfo(cl_event e, cl_profiling_info what, size_t cap, void *v, size_t *ret)
{
    t_event_queries++;
    pthread_mutex_lock(&G);
    int ok = e->queue && (e->queue->props & CL_QUEUE_PROFILING_ENABLE) && e->status == CL_COMPLETE;
    cl_ulong t = 0;
    if (what >= CL_PROFILING_COMMAND_QUEUED && what <= CL_PROFILING_COMMAND_END)
        t = e->stamp[what - CL_PROFILING_COMMAND_QUEUED];
    pthread_mutex_unlock(&G);
    if (!ok)
        return CL_PROFILING_INFO_NOT_AVAILABLE;
    if (what < CL_PROFILING_COMMAND_QUEUED || what > CL_PROFILING_COMMAND_END)
        return CL_INVALID_VALUE;
    return copy_info(&t, sizeof t, cap, v, ret);
}

FAKE_API cl_int clWaitForEvents(cl_uint n, const cl_event *list)
{
    int failed = 0;
    pthread_mutex_lock(&G);
    for (cl_uint i = 0; i < n; i++) {
        while (list[i]->status > CL_COMPLETE)
            pthread_cond_wait(&CV, &G);
        failed |= list[i]->status < 0;
    }
    pthread_mutex_unlock(&G);
    return failed ? CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST : CL_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------------
 * Queues and commands
 * ------------------------------------------------------------------------------------------------- */

static int g_failed_status; /* fake_cl_set_failed_status */

FAKE_API void fake_cl_set_failed_status(int status) { __atomic_store_n(&g_failed_status, status, __ATOMIC_RELAXED); }

/* Run one command: wait for its dependency, stamp, spin for its run time, finish. */
static void run_command(cl_event e)
{
    pthread_mutex_lock(&G);
    while (e->dep && e->dep->status > CL_COMPLETE)
        pthread_cond_wait(&CV, &G);
    cl_int dep_status = e->dep ? e->dep->status : CL_COMPLETE;
    pthread_mutex_unlock(&G);
    if (dep_status < 0) {
        cl_int failed = (cl_int)__atomic_load_n(&g_failed_status, __ATOMIC_RELAXED);
        event_finish(e, failed ? failed : CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
        return;
    }
    cl_ulong submit = device_now();
    pthread_mutex_lock(&G);
    e->status = CL_RUNNING;
    pthread_mutex_unlock(&G);
    cl_ulong start = device_now(); /* before the deadline is read: END-START is never below the run time */
    uint64_t until = host_raw() + (uint64_t)e->run_us * 1000u;
    while (host_raw() < until) {
    }
    cl_ulong end = device_now();
    pthread_mutex_lock(&G);
    e->stamp[1] = submit;
    e->stamp[2] = start;
    e->stamp[3] = end;
    pthread_mutex_unlock(&G);
    event_finish(e, CL_COMPLETE);
}

static void *worker_main(void *arg)
{
    cl_command_queue q = arg;
    pthread_mutex_lock(&G);
    for (;;) {
        while (!q->head && !q->stop)
            pthread_cond_wait(&CV, &G);
        if (!q->head)
            break;
        cl_event e = q->head;
        q->head = e->next;
        if (!q->head)
            q->tail = NULL;
        q->busy = 1;
        pthread_mutex_unlock(&G);
        run_command(e);
        pthread_mutex_lock(&G);
        q->busy = 0;
        event_release_locked(e); /* the queue's reference */
        pthread_cond_broadcast(&CV);
    }
    pthread_mutex_unlock(&G);
    return NULL;
}

static cl_command_queue queue_create(cl_device_id d, cl_command_queue_properties props, cl_int *err)
{
    cl_command_queue q = calloc(1, sizeof *q);
    q->refs = 1;
    q->device = d ? d : &g_devices[0];
    q->props = props;
    if (!env_int("FAKE_CL_INLINE", 0))
        pthread_create(&q->worker, NULL, worker_main, q);
    if (err)
        *err = CL_SUCCESS;
    return q;
}

FAKE_API cl_command_queue clCreateCommandQueue(cl_context c, cl_device_id d, cl_command_queue_properties props,
                                               cl_int *err)
{
    (void)c;
    return queue_create(d, props, err);
}

FAKE_API cl_command_queue clCreateCommandQueueWithProperties(cl_context c, cl_device_id d,
                                                             const cl_queue_properties *p, cl_int *err)
{
    (void)c;
    if (version_major() < 2) { /* a 1.2 loader would not have it; the backend must cope */
        if (err)
            *err = CL_INVALID_OPERATION;
        return NULL;
    }
    cl_command_queue_properties props = 0;
    for (size_t i = 0; p && p[i]; i += 2)
        if (p[i] == CL_QUEUE_PROPERTIES)
            props = (cl_command_queue_properties)p[i + 1];
    return queue_create(d, props, err);
}

FAKE_API cl_int clRetainCommandQueue(cl_command_queue q)
{
    __atomic_add_fetch(&q->refs, 1, __ATOMIC_SEQ_CST);
    return CL_SUCCESS;
}

FAKE_API cl_int clFinish(cl_command_queue q)
{
    pthread_mutex_lock(&G);
    while (q->head || q->busy)
        pthread_cond_wait(&CV, &G);
    pthread_mutex_unlock(&G);
    return CL_SUCCESS;
}

FAKE_API cl_int clFlush(cl_command_queue q)
{
    (void)q;
    return CL_SUCCESS;
}

FAKE_API cl_int clReleaseCommandQueue(cl_command_queue q)
{
    if (__atomic_sub_fetch(&q->refs, 1, __ATOMIC_SEQ_CST) != 0)
        return CL_SUCCESS;
    clFinish(q);
    if (!env_int("FAKE_CL_INLINE", 0)) {
        pthread_mutex_lock(&G);
        q->stop = 1;
        pthread_cond_broadcast(&CV);
        pthread_mutex_unlock(&G);
        pthread_join(q->worker, NULL);
    }
    free(q);
    return CL_SUCCESS;
}

FAKE_API cl_int clGetCommandQueueInfo(cl_command_queue q, cl_command_queue_info what, size_t cap, void *v,
                                      size_t *ret)
{
    switch (what) {
    case CL_QUEUE_DEVICE: {
        cl_device_id d = q->device;
        return copy_info(&d, sizeof d, cap, v, ret);
    }
    case CL_QUEUE_PROPERTIES: return copy_info(&q->props, sizeof q->props, cap, v, ret);
    case CL_QUEUE_REFERENCE_COUNT: {
        cl_uint r = (cl_uint)__atomic_load_n(&q->refs, __ATOMIC_SEQ_CST);
        return copy_info(&r, sizeof r, cap, v, ret);
    }
    default: return CL_INVALID_VALUE;
    }
}

static cl_int enqueue(cl_command_queue q, cl_command_type type, cl_uint run_us, cl_uint ndeps, const cl_event *deps,
                      cl_event *out)
{
    cl_event e = calloc(1, sizeof *e);
    e->refs = 2; /* the caller's (released below if not wanted) and the queue's */
    e->status = CL_QUEUED;
    e->type = type;
    e->queue = q;
    e->run_us = run_us;
    e->stamp[0] = device_now();
    pthread_mutex_lock(&G);
    if (ndeps) {
        e->dep = deps[0];
        e->dep->refs++;
    }
    if (!env_int("FAKE_CL_INLINE", 0)) {
        if (q->tail)
            q->tail->next = e;
        else
            q->head = e;
        q->tail = e;
        pthread_cond_broadcast(&CV);
    }
    pthread_mutex_unlock(&G);
    if (env_int("FAKE_CL_INLINE", 0)) {
        pthread_mutex_lock(&G);
        int held = e->dep && e->dep->status > CL_COMPLETE && !e->dep->waiter;
        if (held)
            e->dep->waiter = e; /* keeps the queue's reference until it runs */
        pthread_mutex_unlock(&G);
        if (!held) {
            run_command(e);
            clReleaseEvent(e);
        }
    }
    if (out)
        *out = e;
    else
        clReleaseEvent(e);
    return CL_SUCCESS;
}

FAKE_API cl_int clEnqueueNDRangeKernel(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *off,
                                       const size_t *gws, const size_t *lws, cl_uint ndeps, const cl_event *deps,
                                       cl_event *out)
{
    (void)off, (void)gws, (void)lws;
    if (dim < 1 || dim > 3)
        return CL_INVALID_WORK_DIMENSION;
    return enqueue(q, CL_COMMAND_NDRANGE_KERNEL, k->run_us, ndeps, deps, out);
}

FAKE_API cl_int clEnqueueMarkerWithWaitList(cl_command_queue q, cl_uint ndeps, const cl_event *deps, cl_event *out)
{
    return enqueue(q, CL_COMMAND_MARKER, 0, ndeps, deps, out);
}

FAKE_API cl_int clEnqueueMarker(cl_command_queue q, cl_event *out)
{
    return enqueue(q, CL_COMMAND_MARKER, 0, 0, NULL, out);
}

FAKE_API cl_int clEnqueueReadBuffer(cl_command_queue q, cl_mem m, cl_bool block, size_t off, size_t n, void *dst,
                                    cl_uint ndeps, const cl_event *deps, cl_event *out)
{
    (void)block;
    clFinish(q);
    memcpy(dst, (char *)m->data + off, n);
    return enqueue(q, CL_COMMAND_READ_BUFFER, 0, ndeps, deps, out);
}

FAKE_API cl_int clEnqueueWriteBuffer(cl_command_queue q, cl_mem m, cl_bool block, size_t off, size_t n,
                                     const void *src, cl_uint ndeps, const cl_event *deps, cl_event *out)
{
    (void)block;
    clFinish(q);
    memcpy((char *)m->data + off, src, n);
    return enqueue(q, CL_COMMAND_WRITE_BUFFER, 0, ndeps, deps, out);
}
