/* ktiming/cl.h — OpenCL backend: time enqueued commands by their cl_event, collected asynchronously.
 *
 * libktiming loads the OpenCL ICD loader itself with dlopen ("libOpenCL.so.1", or the path in env
 * KTIMING_OPENCL_LIBRARY); it is never linked against OpenCL. With no loader every call returns
 * KT_EUNAVAILABLE. This header needs the Khronos headers only for the types.
 *
 * Use:
 *
 *     kt_cl_ctx_t *kc;
 *     kt_cl_attach(queue, NULL, &kc);                       // once per queue
 *     kt_cl_enqueue_ndrange(kc, kernel, 1, NULL, &n, NULL, 0, NULL, NULL); // clEnqueueNDRangeKernel, timed
 *     clEnqueueNDRangeKernel(queue, k2, 1, NULL, &n, NULL, 0, NULL, &ev);  // or track your own event:
 *     kt_cl_track(kc, ev, "blur_pass2");                   //   name, or NULL for the command type
 *     ...                                                   // nothing waits: completion callbacks record
 *     kt_cl_detach(kc);                                     // collects everything outstanding, then detaches
 *
 * Completion. kt_cl_track retains the event. On a queue with CL_QUEUE_PROFILING_ENABLE (the stamps come from the event,
 * not from when its completion is seen) it registers nothing: the collector thread reads the status of such commands
 * about every millisecond while any is in flight and records the finished ones, oldest enqueue first
 * (KTIMING_OPENCL_COMPLETION=poll, the default; a driver that runs callbacks on its execution thread, as PoCL does, is
 * then spared one per command). Otherwise (no profiling, KTIMING_OPENCL_COMPLETION=callback, no collector thread) it
 * registers a CL_COMPLETE callback (clSetEventCallback). The callback runs on whatever thread the driver chooses (PoCL:
 * the worker that executes commands, so work there delays the next command), and does only the minimum: it claims the
 * record and pushes it onto a lock-free queue. The record is held through clSetEventCallback itself, so no flush can
 * release the event while the driver is still inside that call (a callback arriving meanwhile is finished by the
 * tracking thread once the call returns). A ktiming collector thread (the core's collector helper, started at the first
 * attach or kt_cl_prepare) pops it, reads the profiling stamps and records one dispatch: duration END-START in device
 * time, the stage delays QUEUED->SUBMIT->START, and start/end placed on the host timeline (CLOCK_MONOTONIC_RAW) through
 * the device's clock model, whose error bound goes into the span's uncertainty; then it releases the event. The
 * collector drains about every millisecond while commands complete (up to every 8 ms while the program records
 * them itself at its synchronisation points with kt_cl_collect), and kt_cl_flush (and so kt_flush, kt_snapshot,
 * kt_shutdown, exit) drains the queue itself, so a flush never waits for the collector to be scheduled. When the event
 * had already completed (the driver calls back at once, on the enqueuing thread, inside kt_cl_track), the record is
 * finished right there. The enqueuing thread never waits. The event is released exactly once. Commands may finish in
 * any order (out-of-order queues, several queues, several threads).
 *
 * Failures. A command whose status ends negative is counted in the kernel's `errors`, with the status's name
 * (kt_cl_error_name) as the entry's last_error; so is an enqueue the driver refuses (kt_cl_enqueue_ndrange
 * records it itself and leaves the caller's event variable untouched; an interception shim does so for other calls).
 * kt_cl_last_error() is the last failing cl_int. PoCL fires no callback for failed events, so kt_cl_flush /
 * kt_cl_detach / kt_flush / kt_shutdown / process exit poll the status of every tracked event (bounded) and
 * record what they find. Commands still unfinished when kt_cl_detach times out are counted as `dropped` "in
 * flight at exit" (the queue's exit from timing); at exit (and kt_shutdown) the core calls the backend's stop once,
 * which waits at most KTIMING_EXIT_WAIT_MS (default 2 s) and counts what is left as dropped "in flight at exit". A
 * forked child does the same for the queues it attached itself, and never touches its parent's.
 *
 * Queues without CL_QUEUE_PROFILING_ENABLE. By default attach succeeds and every record is an explicit
 * host-timed fallback, flagged KT_SPAN_HOST_TIMED: start = the enqueue time (or, on an in-order queue, the
 * previous command's end if later), end = the host time the completion was observed. That is an upper bound
 * on execution time (it includes callback latency; with KTIMING_VERBOSE_SYNC=1 it is enqueue→wait-return).
 * Set kt_cl_attach_desc_t.require_profiling to get KT_ENOTSUP instead.
 *
 * Device clocks. Per device, the time base of its profiling stamps is detected, never assumed: stamps are
 * read either with clGetDeviceAndHostTimer (only when the device version is >= 2.1 and the platform's
 * CL_PLATFORM_HOST_TIMER_RESOLUTION is non-zero; some 1.2 stacks hang in it) or from a marker's END stamp
 * bracketed by host reads, and compared with CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC and CLOCK_REALTIME. Stamps
 * in the host timeline's own clock (PoCL) are used as they are; MONOTONIC/REALTIME stamps are converted with
 * the sampled domain models; a clock with its own epoch gets a calibration tracker (ktiming/clock_model.h): drift is
 * held at 0 under a 500 ppm prior until the samples span long enough to measure it, and the model is
 * refreshed on each mapping when reads use the host timer, else (marker reads block) at attach and flush,
 * its bound growing in between. The facts are published with kt_device_publish() for reports.
 *
 * Threads. Every function is thread-safe and a context may be shared by enqueuing threads; kt_cl_detach must
 * not race with tracking on the same context. No ktiming lock is held across a driver call or a wait: queue
 * lookups are a hash under a short lock, a device's first calibration runs outside it, flushes wait on a
 * pinned copy of the queue list. Compiled out (no KTIMING_ENABLE), kt_cl_attach hands back the
 * queue itself as the context and kt_cl_enqueue_ndrange is a plain clEnqueueNDRangeKernel of the program's
 * own OpenCL; the rest does nothing.
 *
 * Environment.
 *   KTIMING_OPENCL_LIBRARY=path  loader to dlopen instead of libOpenCL.so.1
 *   KTIMING_VERBOSE=profile_exec print one line per completed command to stderr (or KTIMING_LOG), never to the
 *     program's stdout, from the completion path
 *     (the collector thread; a flushing thread for what it drains; the enqueuing thread for a command that had
 *     completed before its callback was set, or in blocking mode):
 *       ktiming,exec,opencl,<device>,<kernel>,<exec_ms>,<queued_to_submit_ms>,<submit_to_start_ms>,<timing>
 *     <timing> is "device" (profiling stamps) or "host" (host-timed fallback, stage delays then empty);
 *     a failed or refused command prints  ktiming,error,opencl,<device>,<kernel>,<cl_status>,<CL_ERROR_NAME>
 *     Commas in names are replaced by ';'. ("all" also enables it.)
 *   KTIMING_VERBOSE_SYNC=1       blocking mode: kt_cl_track waits for the command on the enqueuing thread and
 *     records it there (a blocking design this backend avoids), but only once the command has started and its
 *     wait list is complete: one that may wait for a user event is left to the collector, as is every command
 *     when callbacks can't be set (no thread of the program ever waits inside an enqueue for those)
 *   KTIMING_LOG=path             verbose lines appended to this file instead of stderr (%p %h %r expanded)
 *   KTIMING_OPENCL_TIMEOUT_MS=n  bound on kt_cl_flush / kt_cl_detach waits (default 10000); exit uses
 *     KTIMING_EXIT_WAIT_MS
 *   KTIMING_OPENCL_COMMANDS=kernels|all  what an interception shim times: kernels only, or
 *     transfers and other commands too (default all)
 *   KTIMING_OPENCL_COLLECTOR=0   no collector thread: callbacks finish records on the driver's thread
 *
 * For an interception shim (LD_PRELOAD, `ktiming run`): kt_cl_load() hands out the real entry points of the
 * loader libktiming opened (dlsym on that handle, so the shim's own interposed symbols are never returned);
 * the shim creates queues with CL_QUEUE_PROFILING_ENABLE added to their properties; and clEnqueueNDRangeKernel is
 * replaced by
 *
 *     kt_cl_ctx_t *kc;
 *     if (kt_cl_attach(queue, NULL, &kc) == 0)             // attaching is idempotent: a lookup after the first
 *         return kt_cl_enqueue_ndrange(kc, kernel, dim, off, gws, lws, n, wait, event);
 *     return api->clEnqueueNDRangeKernel(queue, kernel, dim, off, gws, lws, n, wait, event);
 *
 * which creates (and later releases) an event when the program passed none, leaves the program's own event
 * reference untouched when it passed one, and returns exactly what the driver returned. ktiming holds a
 * reference of its own on an attached queue, so CL_QUEUE_REFERENCE_COUNT cannot tell when the program lets go
 * (drivers add internal references too): the shim counts the program's references itself (create = 1,
 * clRetainCommandQueue +1, clReleaseCommandQueue -1) and calls kt_cl_detach_async (which never waits) before
 * forwarding the release that drops the last one. At exit, kt_shutdown / the exit handler collect every tracked
 * event first (bounded); a loader layer's clDeinitLayer calls kt_cl_shutdown before drivers are unloaded.
 */
#ifndef KTIMING_CL_H
#define KTIMING_CL_H

#include <ktiming.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>
#include <ktiming/primitive.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------
 * Types
 * ------------------------------------------------------------------------------------------------- */

/* The OpenCL entry points libktiming resolved from the loader it opened. Functions the loader lacks (older
 * versions) are NULL; the ones marked "required" are always present when kt_cl_load() succeeds. */
typedef struct kt_cl_api_t {
    void *handle; /* dlopen handle of the loader */
    /* platforms and devices (required) */
    cl_int (CL_API_CALL *clGetPlatformIDs)(cl_uint, cl_platform_id *, cl_uint *);
    cl_int (CL_API_CALL *clGetPlatformInfo)(cl_platform_id, cl_platform_info, size_t, void *, size_t *);
    cl_int (CL_API_CALL *clGetDeviceIDs)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *);
    cl_int (CL_API_CALL *clGetDeviceInfo)(cl_device_id, cl_device_info, size_t, void *, size_t *);
    /* contexts and queues (required, except the *WithProperties variant from 2.0) */
    cl_context (CL_API_CALL *clCreateContext)(const cl_context_properties *, cl_uint, const cl_device_id *,
                                              void (CL_CALLBACK *)(const char *, const void *, size_t, void *),
                                              void *, cl_int *);
    cl_int (CL_API_CALL *clReleaseContext)(cl_context);
    cl_command_queue (CL_API_CALL *clCreateCommandQueue)(cl_context, cl_device_id, cl_command_queue_properties,
                                                         cl_int *);
    cl_command_queue (CL_API_CALL *clCreateCommandQueueWithProperties)(cl_context, cl_device_id,
                                                                       const cl_queue_properties *, cl_int *);
    cl_int (CL_API_CALL *clRetainCommandQueue)(cl_command_queue);
    cl_int (CL_API_CALL *clReleaseCommandQueue)(cl_command_queue);
    cl_int (CL_API_CALL *clGetCommandQueueInfo)(cl_command_queue, cl_command_queue_info, size_t, void *, size_t *);
    cl_int (CL_API_CALL *clFlush)(cl_command_queue);
    cl_int (CL_API_CALL *clFinish)(cl_command_queue);
    /* programs and kernels (required) */
    cl_program (CL_API_CALL *clCreateProgramWithSource)(cl_context, cl_uint, const char **, const size_t *,
                                                        cl_int *);
    cl_int (CL_API_CALL *clBuildProgram)(cl_program, cl_uint, const cl_device_id *, const char *,
                                         void (CL_CALLBACK *)(cl_program, void *), void *);
    cl_int (CL_API_CALL *clGetProgramBuildInfo)(cl_program, cl_device_id, cl_program_build_info, size_t, void *,
                                                size_t *);
    cl_int (CL_API_CALL *clReleaseProgram)(cl_program);
    cl_kernel (CL_API_CALL *clCreateKernel)(cl_program, const char *, cl_int *);
    cl_int (CL_API_CALL *clReleaseKernel)(cl_kernel);
    cl_int (CL_API_CALL *clSetKernelArg)(cl_kernel, cl_uint, size_t, const void *);
    cl_int (CL_API_CALL *clGetKernelInfo)(cl_kernel, cl_kernel_info, size_t, void *, size_t *);
    /* memory (required) */
    cl_mem (CL_API_CALL *clCreateBuffer)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
    cl_int (CL_API_CALL *clReleaseMemObject)(cl_mem);
    cl_int (CL_API_CALL *clEnqueueReadBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint,
                                              const cl_event *, cl_event *);
    cl_int (CL_API_CALL *clEnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *,
                                               cl_uint, const cl_event *, cl_event *);
    /* commands and events (required, except where noted) */
    cl_int (CL_API_CALL *clEnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t *,
                                                 const size_t *, const size_t *, cl_uint, const cl_event *,
                                                 cl_event *);
    cl_int (CL_API_CALL *clEnqueueMarker)(cl_command_queue, cl_event *); /* 1.0-1.1; may be NULL */
    cl_int (CL_API_CALL *clEnqueueMarkerWithWaitList)(cl_command_queue, cl_uint, const cl_event *,
                                                      cl_event *); /* 1.2; may be NULL */
    cl_int (CL_API_CALL *clWaitForEvents)(cl_uint, const cl_event *);
    cl_int (CL_API_CALL *clGetEventInfo)(cl_event, cl_event_info, size_t, void *, size_t *);
    cl_int (CL_API_CALL *clGetEventProfilingInfo)(cl_event, cl_profiling_info, size_t, void *, size_t *);
    cl_int (CL_API_CALL *clRetainEvent)(cl_event);
    cl_int (CL_API_CALL *clReleaseEvent)(cl_event);
    cl_int (CL_API_CALL *clSetEventCallback)(cl_event, cl_int, void (CL_CALLBACK *)(cl_event, cl_int, void *),
                                             void *); /* 1.1; may be NULL (then commands are polled) */
    cl_event (CL_API_CALL *clCreateUserEvent)(cl_context, cl_int *);          /* 1.1; may be NULL */
    cl_int (CL_API_CALL *clSetUserEventStatus)(cl_event, cl_int);             /* 1.1; may be NULL */
    cl_int (CL_API_CALL *clGetDeviceAndHostTimer)(cl_device_id, cl_ulong *, cl_ulong *); /* 2.1; may be NULL */
    cl_int (CL_API_CALL *clCreateSubDevices)(cl_device_id, const cl_device_partition_property *, cl_uint,
                                             cl_device_id *, cl_uint *); /* 1.2; may be NULL (for tests) */
    cl_int (CL_API_CALL *clReleaseDevice)(cl_device_id);                     /* 1.2; may be NULL */
} kt_cl_api_t;

/* A command queue attached to ktiming (opaque). */
typedef struct kt_cl_ctx_t kt_cl_ctx_t;

/* How tracked commands are completed. */
typedef enum kt_cl_mode_t {
    KT_CL_MODE_DEFAULT = 0, /* env KTIMING_VERBOSE_SYNC=1 selects SYNC, otherwise ASYNC */
    KT_CL_MODE_ASYNC = 1,   /* completion callbacks; the enqueuing thread never waits */
    KT_CL_MODE_SYNC = 2     /* kt_cl_track waits for a started command on the calling thread, then records it */
} kt_cl_mode_t;

/* Attach options. Zero-initialise; 0 means the default. */
typedef struct kt_cl_attach_desc_t {
    int require_profiling; /* non-zero: KT_ENOTSUP for a queue without profiling instead of host-timed */
    kt_cl_mode_t mode;     /* completion mode for this queue */
    const char *label;     /* timeline label of the queue; NULL = "queue <n>" (copied) */
} kt_cl_attach_desc_t;

/* What kt_cl_stats reports about an attached queue. */
typedef struct kt_cl_stats_t {
    cl_command_queue queue;   /* the queue */
    cl_device_id device;      /* its device */
    char device_name[128];    /* as reported by the driver */
    uint32_t queue_id;        /* kt_queue_register() id used in the spans */
    int profiling;            /* 1: device timestamps; 0: host-timed fallback */
    int out_of_order;         /* 1: CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE */
    kt_cl_mode_t mode;        /* ASYNC or SYNC (never DEFAULT) */
    uint64_t tracked;         /* commands tracked since attach */
    uint64_t in_flight;       /* tracked, not yet recorded */
} kt_cl_stats_t;

/* What ktiming knows about a device's profiling clock. */
typedef struct kt_cl_device_info_t {
    kt_device_info_t clock;             /* as published with kt_device_publish (domain, bound, resolution) */
    int version_major;                  /* CL_DEVICE_VERSION */
    int version_minor;
    uint64_t host_timer_resolution_ns;  /* CL_PLATFORM_HOST_TIMER_RESOLUTION (0: none, or platform < 2.1) */
    int uses_host_timer;                /* 1: clock read with clGetDeviceAndHostTimer; 0: marker stamps bracketed */
    int64_t domain_offset_ns;           /* device stamp minus the detected host domain's clock, as measured */
} kt_cl_device_info_t;

/* ---------------------------------------------------------------------------------------------------
 * Functions
 * ------------------------------------------------------------------------------------------------- */
#if KT_ENABLED

/* Load the OpenCL loader (once; later calls are cheap). *api (optional) gets the resolved entry points.
 * 0, or KT_EUNAVAILABLE when the library or a required entry point is missing. */
KT_API int kt_cl_load(const kt_cl_api_t **api);

/* Attach a command queue. Retains the queue until kt_cl_detach. Calibrates the device clock on the first
 * attach to a device (a few ms: a private queue on a private context, markers waited on), unless kt_cl_prepare
 * did it already (or waits for the one it started). Attaching an
 * attached queue returns the same context (and ignores desc). KT_EUNAVAILABLE without a loader, KT_EINVAL
 * for a NULL/invalid queue, KT_ENOTSUP with require_profiling on a queue without profiling. */
KT_API int kt_cl_attach(cl_command_queue queue, const kt_cl_attach_desc_t *desc, kt_cl_ctx_t **ctx);

/* Optional: start a device's first-attach work now, in the background (the collector thread): its clock
 * calibration, and ktiming's own set-up with the host clock's calibration (as the first record would: call
 * kt_init before this to choose sizes), so a later first kt_cl_attach of a queue on it finds them done instead
 * of doing them (~1-3 ms) on the enqueuing thread. An interception shim calls it when the program creates a
 * queue. Attaching waits for a calibration still under way; exit waits for it too. 0, KT_EUNAVAILABLE without a
 * loader, KT_EINVAL for NULL, KT_ENOMEM. With KTIMING_OPENCL_COLLECTOR=0 nothing starts: the first attach
 * calibrates as before. */
KT_API int kt_cl_prepare(cl_device_id device);

/* The context attached to a queue, or NULL. */
KT_API kt_cl_ctx_t *kt_cl_find(cl_command_queue queue);

/* Track a command by its event (retained; the caller keeps its own reference). name NULL: the command type
 * ("ndrange_kernel", "read_buffer", ...). The event must come from the attached queue. 0, KT_EINVAL,
 * KT_ESTATE (context detaching: counted as dropped, in flight at exit), KT_EFULL (too many commands in flight:
 * counted as dropped). */
KT_API int kt_cl_track(kt_cl_ctx_t *ctx, cl_event event, const char *name);

/* As kt_cl_track, with the kernel known: name NULL means the kernel's function name
 * (CL_KERNEL_FUNCTION_NAME). enqueue_ns is the host time of the enqueue call (0: now). */
KT_API int kt_cl_track_kernel(kt_cl_ctx_t *ctx, cl_event event, cl_kernel kernel, const char *name,
                              uint64_t enqueue_ns);

/* Track any other command (a transfer, a fill, a map): like kt_cl_track, with the bytes it moves (counted in the
 * entry's `bytes` and the dispatch's bytes; 0 for none) and its enqueue time (0: now). Shims name transfers
 * after their entry point ("clEnqueueWriteBuffer"). */
KT_API int kt_cl_track_command(kt_cl_ctx_t *ctx, cl_event event, const char *name, uint64_t bytes,
                               uint64_t enqueue_ns);

/* The name of an OpenCL error code ("CL_INVALID_WORK_GROUP_SIZE"); "CL_UNKNOWN_ERROR" for others. */
KT_API const char *kt_cl_error_name(cl_int error);

/* The cl_int of the last OpenCL failure ktiming saw (a refused enqueue, a command that ended with a negative
 * status, a failed query at attach), 0 if none. Process-wide. */
KT_API int kt_cl_last_error(void);

/* clEnqueueNDRangeKernel on the attached queue, tracked under the kernel's function name. Same arguments
 * and return value as clEnqueueNDRangeKernel; when event is NULL an event is created for tracking and
 * released by ktiming. Returns CL_INVALID_COMMAND_QUEUE for a NULL ctx. Tracking problems never change the
 * result (they are counted as dropped). */
KT_API cl_int kt_cl_enqueue_ndrange(kt_cl_ctx_t *ctx, cl_kernel kernel, cl_uint work_dim,
                                    const size_t *global_offset, const size_t *global_size,
                                    const size_t *local_size, cl_uint num_events, const cl_event *wait_list,
                                    cl_event *event);

/* Collect: flush the queue(s) and record every tracked command that has finished or failed, waiting up to
 * timeout_ns (0 = KTIMING_OPENCL_TIMEOUT_MS) for the rest. ctx NULL: every attached queue. 0 when nothing
 * is left in flight, KT_ETIMEDOUT otherwise (those stay tracked). Do not call from an event callback. */
KT_API int kt_cl_flush(kt_cl_ctx_t *ctx, uint64_t timeout_ns);

/* For a program's synchronisation points: record, on the calling thread, the tracked commands that have finished,
 * of those enqueued before enqueued_before_ns (kt_now_ns time; 0: before now), on ctx's queue (NULL: on every
 * queue), without waiting for the rest and without flushing (a pass the collector is making is waited for first).
 * A queue is looked at from its oldest command to the first still running: the cost is what finished since the
 * last call, not what else is pending. Right after a clFinish, 0
 * records that queue's commands; at the start of the next one, the time the previous one began records them while
 * the driver runs the new ones, and polls nothing still running. While a program does this, the collector thread
 * polls less often (up to every 8 ms), so the driver's threads are not contended while they run its commands.
 * Returns at once when ctx (if not NULL) has nothing in flight. 0, or KT_EUNAVAILABLE when OpenCL is not loaded and
 * ctx is not NULL. `ktiming run` calls it at each clFinish and clWaitForEvents, with the time the thread's previous
 * one began. Do not call from an event callback. */
KT_API int kt_cl_collect(kt_cl_ctx_t *ctx, uint64_t enqueued_before_ns);

/* Collect everything outstanding (as kt_cl_flush with the default timeout), count what is still unfinished
 * as dropped, release the queue and free ctx. 0, or KT_ETIMEDOUT when something had to be dropped (ctx is
 * freed either way). Do not call from an event callback. */
KT_API int kt_cl_detach(kt_cl_ctx_t *ctx);

/* Detach without waiting (for a shim's clReleaseCommandQueue, which is no synchronisation point, and may be
 * called from an event callback): the context is no longer found or tracked into; its commands in flight are
 * still recorded as they complete, and then ktiming releases its queue reference and frees the context. Do
 * not use ctx afterwards. */
KT_API int kt_cl_detach_async(kt_cl_ctx_t *ctx);

/* Final collection for OpenCL alone, before the drivers go away (a loader layer's clDeinitLayer): waits for
 * commands in flight up to KTIMING_EXIT_WAIT_MS, counts the rest as dropped (in flight at exit), stops the
 * collector and releases every attached queue. Afterwards ktiming makes no OpenCL call until the next
 * kt_cl_attach; contexts from before are gone. */
KT_API void kt_cl_shutdown(void);

/* Facts about an attached queue. */
KT_API int kt_cl_stats(const kt_cl_ctx_t *ctx, kt_cl_stats_t *info);

/* Clock facts of a device (calibrating it on first use, as attach does). info is filled either way; the
 * return is 0, or the KT_E* the detection ended with (clock.clock_domain then reads "unknown"). */
KT_API int kt_cl_device_info(cl_device_id device, kt_cl_device_info_t *info);

/* A primitive backend (ktiming/primitive.h) on a profiling queue (retained until kt_primitive_backend_destroy):
 * kernel callbacks get the cl_command_queue and enqueue one dispatch; marks are markers' END stamps mapped
 * through the device's clock model. KT_ENOTSUP for a queue without CL_QUEUE_PROFILING_ENABLE. */
KT_API int kt_cl_primitive_backend_create(cl_command_queue queue, kt_primitive_backend_t *out);

#else /* !KT_ENABLED */

static inline int kt_cl_load(const kt_cl_api_t **api) { if (api) *api = NULL; return KT_EDISABLED; }
/* Compiled out, the "context" is the queue itself, so kt_cl_enqueue_ndrange still enqueues (through the
 * program's own OpenCL). */
static inline int kt_cl_attach(cl_command_queue queue, const kt_cl_attach_desc_t *desc, kt_cl_ctx_t **ctx)
{ (void)desc; if (ctx) *ctx = (kt_cl_ctx_t *)queue; return 0; }
static inline kt_cl_ctx_t *kt_cl_find(cl_command_queue queue) { (void)queue; return NULL; }
static inline int kt_cl_prepare(cl_device_id device) { (void)device; return 0; }
static inline int kt_cl_track(kt_cl_ctx_t *ctx, cl_event event, const char *name)
{ (void)ctx; (void)event; (void)name; return 0; }
static inline int kt_cl_track_kernel(kt_cl_ctx_t *ctx, cl_event event, cl_kernel kernel, const char *name,
                                     uint64_t enqueue_ns)
{ (void)ctx; (void)event; (void)kernel; (void)name; (void)enqueue_ns; return 0; }
static inline int kt_cl_flush(kt_cl_ctx_t *ctx, uint64_t timeout_ns) { (void)ctx; (void)timeout_ns; return 0; }
static inline int kt_cl_collect(kt_cl_ctx_t *ctx, uint64_t enqueued_before_ns)
{ (void)ctx; (void)enqueued_before_ns; return 0; }
static inline int kt_cl_detach(kt_cl_ctx_t *ctx) { (void)ctx; return 0; }
static inline int kt_cl_detach_async(kt_cl_ctx_t *ctx) { (void)ctx; return 0; }
static inline void kt_cl_shutdown(void) {}
static inline int kt_cl_track_command(kt_cl_ctx_t *ctx, cl_event event, const char *name, uint64_t bytes,
                                      uint64_t enqueue_ns)
{ (void)ctx; (void)event; (void)name; (void)bytes; (void)enqueue_ns; return 0; }
static inline const char *kt_cl_error_name(cl_int error) { (void)error; return ""; }
static inline int kt_cl_last_error(void) { return 0; }
static inline int kt_cl_stats(const kt_cl_ctx_t *ctx, kt_cl_stats_t *info)
{ (void)ctx; (void)info; return KT_EDISABLED; }
static inline int kt_cl_device_info(cl_device_id device, kt_cl_device_info_t *info)
{ (void)device; (void)info; return KT_EDISABLED; }
static inline int kt_cl_primitive_backend_create(cl_command_queue queue, kt_primitive_backend_t *out)
{ (void)queue; if (out) { out->ops = NULL; out->ctx = NULL; } return KT_EDISABLED; }
static inline cl_int kt_cl_enqueue_ndrange(kt_cl_ctx_t *ctx, cl_kernel kernel, cl_uint work_dim,
                                           const size_t *global_offset, const size_t *global_size,
                                           const size_t *local_size, cl_uint num_events,
                                           const cl_event *wait_list, cl_event *event)
{
    return clEnqueueNDRangeKernel((cl_command_queue)ctx, kernel, work_dim, global_offset, global_size, local_size,
                                  num_events, wait_list, event);
}

#endif /* KT_ENABLED */

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_CL_H */
