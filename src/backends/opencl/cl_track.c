/* cl_track.c — tracking an enqueued command: its name interned, a record published as polled or with a completion
 * callback (or, in blocking mode, waited for here when that is safe); refused enqueues counted. */
#include "backends/opencl/cl_collector.h"
#include "backends/opencl/cl_env.h"
#include "backends/opencl/cl_outcome.h"
#include "backends/opencl/cl_poll.h"
#include "backends/opencl/cl_service.h"
#include "core/internal.h"
#include "core/service.h"
#include "shared/tool_cl.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *command_name(cl_event event)
{
    cl_command_type t = 0;
    kt__cl.clGetEventInfo(event, CL_EVENT_COMMAND_TYPE, sizeof t, &t, NULL);
    switch (t) {
    case CL_COMMAND_NDRANGE_KERNEL: return "ndrange_kernel";
    case CL_COMMAND_TASK: return "task";
    case CL_COMMAND_NATIVE_KERNEL: return "native_kernel";
    case CL_COMMAND_READ_BUFFER: return "read_buffer";
    case CL_COMMAND_WRITE_BUFFER: return "write_buffer";
    case CL_COMMAND_COPY_BUFFER: return "copy_buffer";
    case CL_COMMAND_READ_IMAGE: return "read_image";
    case CL_COMMAND_WRITE_IMAGE: return "write_image";
    case CL_COMMAND_COPY_IMAGE: return "copy_image";
    case CL_COMMAND_MAP_BUFFER: return "map_buffer";
    case CL_COMMAND_UNMAP_MEM_OBJECT: return "unmap_mem_object";
    case CL_COMMAND_MARKER: return "marker";
    case CL_COMMAND_READ_BUFFER_RECT: return "read_buffer_rect";
    case CL_COMMAND_WRITE_BUFFER_RECT: return "write_buffer_rect";
    case CL_COMMAND_COPY_BUFFER_RECT: return "copy_buffer_rect";
    case CL_COMMAND_FILL_BUFFER: return "fill_buffer";
    case CL_COMMAND_BARRIER: return "barrier";
    default: return "opencl_command";
    }
}

/* Name of a kernel into buf (or a heap copy when longer; *heap gets it to free). */
static const char *kernel_name(cl_kernel kernel, char *buf, size_t cap, char **heap)
{
    size_t len = 0;
    *heap = NULL;
    if (kt__cl.clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, cap, buf, &len) == CL_SUCCESS && buf[0])
        return buf;
    if (kt__cl.clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, 0, NULL, &len) == CL_SUCCESS && len > 1 &&
        (*heap = malloc(len)) != NULL &&
        kt__cl.clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, len, *heap, NULL) == CL_SUCCESS)
        return *heap;
    free(*heap);
    *heap = NULL;
    return "opencl_kernel";
}

/* Per-thread cache of interned kernel names: (kernel, device, name) -> id. The name is re-read each time (a
 * released kernel's handle may come back for another kernel), only the interning is saved. */
#define KCACHE 8
typedef struct kcache_t {
    cl_kernel kernel;        /* key */
    const kt__cl_dev_t *dev; /* key */
    kt_kernel_id_t id;       /* interned (name, OpenCL, device) */
    char name[64];           /* the name interned */
} kcache_t;
/* One thread-local object, its address taken once a call: each use of a thread-local variable of a shared library
 * can be a call to __tls_get_addr (two a command here: the compiler computed the address again after strcmp). */
static _Thread_local struct {
    kcache_t e[KCACHE];
    unsigned next; /* the entry replaced next */
} t_kcache;

static kt_kernel_id_t intern_cached(cl_kernel kernel, const kt__cl_dev_t *dev, const char *name)
{
    if (!kernel || strlen(name) >= sizeof t_kcache.e[0].name)
        return kt_kernel_intern(name, KT_BACKEND_OPENCL, dev->key);
    __typeof__(t_kcache) *kc = &t_kcache;
    __asm__("" : "+r"(kc)); /* kept in a register across the calls below, not recomputed */
    for (unsigned i = 0; i < KCACHE; i++)
        if (kc->e[i].kernel == kernel && kc->e[i].dev == dev && !strcmp(kc->e[i].name, name))
            return kc->e[i].id;
    kcache_t *c = &kc->e[kc->next++ % KCACHE];
    c->id = kt_kernel_intern(name, KT_BACKEND_OPENCL, dev->key);
    c->kernel = kernel;
    c->dev = dev;
    snprintf(c->name, sizeof c->name, "%s", name);
    return c->id;
}

/* The device of an enqueue refused on a queue that could not be attached (NULL or invalid): none is known. */
#define KT__CL_NO_DEVICE "unknown"

/* Blocking mode: wait here and record on this thread. */
static void track_sync(kt_cl_ctx_t *c, cl_event event, kt_kernel_id_t id, uint64_t enqueue_ns, const char *name,
                       uint64_t bytes, const kt_launch_t *launch)
{
    cl_int status = CL_COMPLETE;
    kt__inflight_begin(id); /* a program that dies (another thread) during the wait loses it */
    kt__cl.clWaitForEvents(1, &event);
    uint64_t observed = kt_now_ns();
    if (kt__cl.clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) != CL_SUCCESS)
        status = CL_INVALID_EVENT;
    kt__cl_outcome_t o = {c, event, id, kt_thread_ordinal(), enqueue_ns, name, bytes, 0, launch};
    atomic_fetch_add(&c->tracked, 1);
    kt__cl_outcome_record(&o, status, observed);
    kt__inflight_end(id);
    atomic_fetch_add(&c->finished, 1);
}

static cl_int event_status(cl_event ev)
{
    cl_int st = CL_QUEUED;
    if (kt__cl.clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL) != CL_SUCCESS)
        st = CL_INVALID_EVENT;
    return st;
}

/* Blocking mode may wait inside the enqueue only for a command that can no longer depend on anything the program
 * does later: one whose wait list is complete and that the driver has started (CL_RUNNING) or finished. A command
 * gated by a user event, directly (its wait list) or through a marker or barrier before it on its queue (not
 * visible here: it then does not start within SYNC_START_GRACE_NS), would wait forever for the program's
 * clSetUserEventStatus: it goes to the collector instead, like any asynchronous command. */
#define SYNC_START_GRACE_NS 1000000000ull /* long enough for a loaded machine to start a ready command */
static int sync_may_wait(kt_cl_ctx_t *c, cl_event event, cl_uint nwait, const cl_event *wait)
{
    for (cl_uint i = 0; wait && i < nwait; i++)
        if (event_status(wait[i]) > CL_COMPLETE)
            return 0;
    kt__cl.clFlush(c->queue); /* a command never submitted would never start */
    uint64_t deadline = kt_now_ns() + SYNC_START_GRACE_NS, nap = 20000;
    for (unsigned spins = 0;; spins++) {
        if (event_status(event) <= CL_RUNNING)
            return 1;
        if (kt_now_ns() >= deadline)
            return 0;
        if (spins < 64) {
            sched_yield();
            continue;
        }
        kt__nap_ns(nap);
        if (nap < 2000000)
            nap *= 2;
    }
}

/* Publishes a record as polled: POLLED, on its queue's FIFO, and the collector woken if it sleeps (the FIFO's
 * seq_cst count is raised before the load in kt__cl_collector_wake). */
static void publish_polled(kt_cl_ctx_t *ctx, kt__cl_rec_t *r, uint64_t gen)
{
    kt__cl_rec_set_polled(r, gen);
    kt__cl_fifo_append(ctx, r);
    kt__cl_collector_wake();
}

/* A record for the command, filled in (not published yet); NULL when refused: the command is then counted
 * finished and dropped (its queue being detached, or a forked child's command on a queue its parent attached,
 * whose context the child's flushes and exit leave alone: in flight at its exit from timing; no record: ring full;
 * no reference: unspecified), the event released when owned, *rc set. */
static kt__cl_rec_t *rec_take(kt_cl_ctx_t *ctx, cl_event event, kt_kernel_id_t id, const char *name,
                              uint64_t enqueue_ns, uint64_t bytes, const kt_launch_t *launch, int owned, int *rc)
{
    atomic_fetch_add(&ctx->tracked, 1);
    if (atomic_load(&ctx->detaching) || !kt__cl_ctx_mine(ctx)) {
        kt_record_drop(id, KT_DROP_IN_FLIGHT_AT_EXIT); /* it ran, untimed: counted, never silent */
        atomic_fetch_add(&ctx->finished, 1);
        if (owned)
            kt__cl.clReleaseEvent(event);
        *rc = KT_ESTATE;
        return NULL;
    }
    kt__cl_rec_t *r = kt__cl_slot_alloc();
    if (!r || (!owned && kt__cl.clRetainEvent(event) != CL_SUCCESS)) {
        if (r)
            kt__cl_slot_free(r);
        else if (owned)
            kt__cl.clReleaseEvent(event);
        atomic_fetch_add(&ctx->finished, 1);
        kt_record_drop(id, r ? KT_DROP_UNSPECIFIED : KT_DROP_RING_FULL);
        *rc = r ? KT_EINVAL : KT_EFULL;
        return NULL;
    }
    r->ctx = ctx;
    __atomic_store_n(&r->event, event, __ATOMIC_RELAXED); /* kt_cl_event_held reads it from any thread */
    r->kernel = id;
    r->thread = kt_thread_ordinal();
    r->enqueue_ns = enqueue_ns;
    *kt__cl_rec_bytes(r) = bytes;
    kt_launch_t *l = kt__cl_rec_launch(r); /* a recycled slot's: overwritten, or marked none */
    if (launch)
        *l = *launch;
    else
        l->kind = KT_LAUNCH_NONE;
    if (kt__verbose_on()) /* its line's name: raw (kt__verbose_line escapes it), cut to the record's buffer */
        snprintf(kt__cl_rec_name(r), NAME_CAP, "%s", name);
    kt__inflight_begin(id); /* ended in kt__cl_rec_finish_stamped, the one way out of a taken record */
    return r;
}

/* Publishes a record: polled (force_poll, or a profiled queue with the collector running), else with a completion
 * callback, held (PEEKED) through clSetEventCallback so that flushes pass it by and a callback leaves its status. */
static void rec_publish(kt_cl_ctx_t *ctx, kt__cl_rec_t *r, int force_poll)
{
    uint64_t gen = kt__cl_rec_gen(r);
    if (force_poll || (ctx->profiling && !kt__cl_env.callbacks && kt__cl_collector_running())) {
        /* polled: the stamps are the event's, so the collector reads them whenever it sees the command done */
        publish_polled(ctx, r, gen);
        return;
    }
    kt__cl_rec_hold(r, gen);
    cl_int set = kt__cl.clSetEventCallback(r->event, CL_COMPLETE, kt__cl_on_complete, kt__cl_rec_handle(r, gen));
    if (set != CL_SUCCESS) {
        /* No callback will come: the collector polls the command instead. Never a wait here: the command may be
         * gated by a user event the program sets only after this enqueue returns. */
        publish_polled(ctx, r, gen);
        return;
    }
    if (kt__cl_rec_hold_end(r, gen))
        return; /* from here its callback or a flush completes it */
    /* The callback came during the call (inline, or on a driver thread): finish it here, now the driver is done
     * with the event. */
    kt__cl_rec_finish(r, (cl_int)atomic_load(&r->cb_status), kt_now_ns(), 0);
}

/* Track; with `owned` the caller hands over its reference (no retain here, and it is released on failure). launch:
 * the command's configuration (NULL: none). */
static int track(kt_cl_ctx_t *ctx, cl_event event, cl_kernel kernel, const char *name, uint64_t enqueue_ns,
                 uint64_t bytes, const kt_launch_t *launch, int owned, cl_uint nwait, const cl_event *wait)
{
    if (!ctx || !event)
        return KT_EINVAL;
    if (!enqueue_ns)
        enqueue_ns = kt_now_ns();
    if (kt__cl_stopped())
        kt__cl_arm(); /* used again after kt_shutdown (and kt_init) */
    char buf[128];
    char *heap = NULL;
    kt_kernel_id_t id;
    if (!name) {
        name = kernel ? kernel_name(kernel, buf, sizeof buf, &heap) : command_name(event);
        id = intern_cached(kernel, ctx->dev, name);
    } else {
        id = kt_kernel_intern(name, KT_BACKEND_OPENCL, ctx->dev->key);
    }
    int rc = 0;
    int force_poll = 0; /* no callback to rely on: the collector (or the next flush) polls it */
    if (!kt__cl_ctx_mine(ctx) && event_status(event) <= CL_COMPLETE) {
        /* a forked child's command on a queue its parent attached, already finished: timed now (the child's
         * collection leaves the parent's context alone; one not finished is counted as dropped by rec_take) */
        track_sync(ctx, event, id, enqueue_ns, name, bytes, launch);
        if (owned)
            kt__cl.clReleaseEvent(event);
        goto out;
    }
    if (ctx->mode == KT_CL_MODE_SYNC) {
        if (sync_may_wait(ctx, event, nwait, wait)) {
            track_sync(ctx, event, id, enqueue_ns, name, bytes, launch);
            if (owned)
                kt__cl.clReleaseEvent(event);
            goto out;
        }
        force_poll = 1;
    }
    if (!kt__cl.clSetEventCallback)
        force_poll = 1;
    kt__cl_rec_t *r = rec_take(ctx, event, id, name, enqueue_ns, bytes, launch, owned, &rc);
    if (r)
        rec_publish(ctx, r, force_poll);
out:
    free(heap);
    return rc;
}

int kt_cl_track_kernel(kt_cl_ctx_t *ctx, cl_event event, cl_kernel kernel, const char *name, uint64_t enqueue_ns)
{
    return track(ctx, event, kernel, name, enqueue_ns, 0, NULL, 0, 0, NULL);
}

int kt__cl_track_launch(kt_cl_ctx_t *ctx, cl_event event, cl_kernel kernel, const kt_launch_t *launch,
                        uint64_t enqueue_ns)
{
    return track(ctx, event, kernel, NULL, enqueue_ns, 0, launch && launch->kind ? launch : NULL, 0, 0, NULL);
}

int kt_cl_track(kt_cl_ctx_t *ctx, cl_event event, const char *name)
{
    return kt_cl_track_kernel(ctx, event, NULL, name, 0);
}

int kt_cl_track_command(kt_cl_ctx_t *ctx, cl_event event, const char *name, uint64_t bytes, uint64_t enqueue_ns)
{
    return track(ctx, event, NULL, name, enqueue_ns, bytes, NULL, 0, 0, NULL);
}

/* A refused enqueue: an error of the kernel (name NULL: its function name) or command `name`, with the error's name,
 * on dev (NULL: none known, KT__CL_NO_DEVICE), and its verbose line. */
static void refusal_record(const kt__cl_dev_t *dev, cl_kernel kernel, const char *name, cl_int error)
{
    kt__cl_note_error(error);
    char buf[128];
    char *heap = NULL;
    if (!name)
        name = kernel ? kernel_name(kernel, buf, sizeof buf, &heap) : "opencl_command";
    kt_kernel_id_t id =
        dev ? intern_cached(kernel, dev, name) : kt_kernel_intern(name, KT_BACKEND_OPENCL, KT__CL_NO_DEVICE);
    kt_record_error(id, kt_cl_error_name(error));
    char lab[128]; /* the device's label: two of one model are told apart */
    if (kt__verbose_on())
        kt__verbose_line("error", "opencl",
                         dev ? kt__device_label_now(KT_BACKEND_OPENCL, dev->key, dev->model, lab, sizeof lab)
                             : KT__CL_NO_DEVICE,
                         name, "%d,%s", (int)error, kt_cl_error_name(error));
    free(heap);
}

void kt_cl_enqueue_failed(kt_cl_ctx_t *ctx, cl_kernel kernel, const char *name, cl_int error)
{
    if (ctx && error != CL_SUCCESS)
        refusal_record(ctx->dev, kernel, name, error);
}

void kt__cl_enqueue_refused(cl_command_queue queue, cl_kernel kernel, const char *name, cl_int error)
{
    (void)queue; /* not attachable: the driver answered no query about it, so neither would it name a device */
    if (error != CL_SUCCESS && kt__cl_env_load() >= 0)
        refusal_record(NULL, kernel, name, error);
}

cl_int kt_cl_enqueue_ndrange(kt_cl_ctx_t *ctx, cl_kernel kernel, cl_uint work_dim, const size_t *global_offset,
                             const size_t *global_size, const size_t *local_size, cl_uint num_events,
                             const cl_event *wait_list, cl_event *event)
{
    if (!ctx)
        return CL_INVALID_COMMAND_QUEUE;
    cl_event ev = NULL;
    /* the unordered counter read (hclock.h): the stamp is tens of cycles fuzzy against the call, and ~15 ns
     * cheaper than kt_now_ns's fenced one on every kernel of a dispatch-bound program */
    uint64_t t0 = kt__now_zone_begin();
    cl_int rc = kt__cl.clEnqueueNDRangeKernel(ctx->queue, kernel, work_dim, global_offset, global_size, local_size,
                                              num_events, wait_list, &ev);
    if (rc != CL_SUCCESS) { /* the program's event variable stays as it was, as the driver leaves it */
        kt_cl_enqueue_failed(ctx, kernel, NULL, rc);
        return rc;
    }
    if (!ev)
        return rc;
    /* the configuration: global and local sizes per dimension (local NULL: 0, the driver chose); the offset is
     * not part of it (docs/opencl.md, "Launch configurations") */
    kt_launch_t launch;
    launch.kind = KT_LAUNCH_ITEMS;
    launch.dims = work_dim > 3 ? 3 : work_dim;
    for (cl_uint i = 0; i < 3; i++) {
        launch.size[i] = i < launch.dims && global_size ? (uint64_t)global_size[i] : 0;
        launch.local[i] = i < launch.dims && local_size ? (uint64_t)local_size[i] : 0;
    }
    if (event) {
        *event = ev;
        track(ctx, ev, kernel, NULL, t0, 0, &launch, 0, num_events, wait_list);
    } else {
        /* the event exists only for ktiming: hand it over */
        track(ctx, ev, kernel, NULL, t0, 0, &launch, 1, num_events, wait_list);
    }
    return rc;
}
