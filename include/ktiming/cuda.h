/* ktiming/cuda.h — CUDA backend (host side): pooled event pairs per dispatch, asynchronous collection, a GPU
 * timer shaped like kt_cpu_timer_t, and %globaltimer reads, calibration and slot buffers.
 *
 * Usage (driver or runtime API; ktiming never links libcuda or cudart, it dlopens libcuda.so.1):
 *
 *     #include <ktiming/cuda.h>
 *     kt_cuda_span_t s;
 *     kt_cuda_begin(&s, NULL, stream, "blur");   // NULL context = the calling thread's current context
 *     blur<<<grid, block, 0, stream>>>(...);     // or cuLaunchKernel(...)
 *     kt_cuda_end(&s);                           // returns at once; a collector thread records the dispatch
 *     ...
 *     kt_flush();                                // or kt_snapshot(): outstanding completions are collected
 *
 * Handles are the driver's own opaque types, forward-declared here so this header needs no cuda.h:
 * `struct CUctx_st *` is CUcontext, `struct CUstream_st *` is CUstream and also cudaStream_t, `struct CUmod_st *`
 * is CUmodule. A NULL stream is the legacy default stream, as in CUDA.
 *
 * Loading. The driver is dlopen'ed on first use: env KTIMING_CUDA_LIBRARY (a path) or "libcuda.so.1". A missing
 * library, the toolkit's stub libcuda (cuInit returns CUDA_ERROR_STUB_LIBRARY), a driver without devices
 * (CUDA_ERROR_NO_DEVICE) or a missing entry point make every call return KT_EUNAVAILABLE; kt_cuda_last_error()
 * then names the cause with the driver's own error name, e.g. "cuInit: CUDA_ERROR_STUB_LIBRARY (34)".
 *
 * Event pairs. Each context keeps a pool of (start, end) event pairs that grows on demand (in chunks, never one
 * cuEventCreate per dispatch) and is reused, so many dispatches can be in flight at once. kt_cuda_begin records
 * the start event on the stream, kt_cuda_end the end event. In the default asynchronous mode a collector thread
 * polls cuEventQuery on the oldest pending pair of each stream and records completed dispatches: the enqueuing
 * thread never waits for the GPU, and no CUDA call is made from a stream host callback (CUDA forbids it). In
 * synchronous mode (desc.sync or env KTIMING_CUDA_SYNC=1) kt_cuda_end waits for its own pair and records it
 * before returning.
 *
 * Precision. cuEventElapsedTime returns float milliseconds (resolution about 0.5 us): a float keeps 24 bits, so
 * an elapsed time of one hour is only known to 0.25 ms. ktiming therefore never measures against one reference
 * event made at start-up:
 *   - a duration is cuEventElapsedTime(start, end) of the dispatch's own pair, which are close together;
 *   - to place a dispatch on the host timeline, each context keeps an anchor: an event recorded on a private
 *     stream and bracketed by two host clock reads, refreshed by the collector every desc.anchor_period_ms
 *     (default 100) while work is pending. A start event is measured against the newest anchor, so the float
 *     offset stays within about one period (float rounding under 10 ns). Successive anchors form a chain whose
 *     positions are kept in integer ns, and once KT_CLOCK_MIN_SAMPLES anchors exist a clock model is fitted
 *     (ktiming/clock_model.h) so device/host drift is corrected. The span's uncertainty_ns states the resulting bound.
 *
 * Cleanup. kt_cuda_context_release(ctx) must be called before destroying a context you created; it collects
 * what is outstanding and destroys every event, stream, module and buffer ktiming made in it. kt_cuda_shutdown()
 * does that for every context. At kt_shutdown() and process exit the collector is stopped and outstanding work
 * collected until KTIMING_EXIT_WAIT_MS (default 2 s); what is still in flight is counted as dropped ("in flight at
 * exit"), at once if the driver is already torn down. A context destroyed or reset without the call is noticed
 * (see kt_cuda_begin), its in-flight work counted as dropped ("context reset").
 *
 * Device side (nvcc): <ktiming/cuda_device.cuh> has KT_GLOBALTIMER(), KT_KERNEL_ENTER()/KT_KERNEL_EXIT() writing
 * entry/exit stamps into a slot (see kt_cuda_slots_* below) and a batch-timestamp kernel.
 *
 * This backend has been tested against a test double of the driver, not on a GPU (see docs/cuda.md).
 */
#ifndef KTIMING_CUDA_H
#define KTIMING_CUDA_H

#include <ktiming.h>
#include <ktiming/clock_model.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The driver's opaque handle types (compatible with cuda.h's CUcontext, CUstream/cudaStream_t, CUmodule). */
struct CUctx_st;
struct CUstream_st;
struct CUmod_st;

/* Documented resolution of CUDA event timestamps (cuEventElapsedTime: "around 0.5 microseconds"). */
#define KT_CUDA_EVENT_RESOLUTION_NS 500u
/* %globaltimer counts nanoseconds; its update granularity varies by GPU (kt_cuda_globaltimer_resolution). */
#define KT_CUDA_GLOBALTIMER_HZ 1000000000ull

/* Backend setup. Zero-initialise; 0 means the default. */
typedef struct kt_cuda_desc_t {
    int sync;                  /* non-zero: kt_cuda_end waits for its dispatch (env KTIMING_CUDA_SYNC=1) */
    uint32_t pool_chunk;       /* event pairs created per pool growth; 0 = 16 */
    uint32_t max_pairs;        /* pairs per context, in flight at once; 0 = 65536 (beyond: dropped, counted) */
    uint32_t poll_us;          /* collector poll interval while work is pending; 0 = 100 */
    uint32_t anchor_period_ms; /* anchor refresh period while work is pending; 0 = 100 */
    uint32_t flush_timeout_ms; /* how long a flush waits for pending dispatches; 0 = 2000 */
    int per_thread_default_stream; /* non-zero: a NULL stream is the calling thread's per-thread default stream
                                    * (CU_STREAM_PER_THREAD), as in programs built with nvcc --default-stream
                                    * per-thread (env KTIMING_CUDA_PER_THREAD_STREAM=1; automatic for spans
                                    * begun in code compiled that way, see kt_cuda_begin) */
} kt_cuda_desc_t;

/* A dispatch in flight between kt_cuda_begin and kt_cuda_end. Treat as opaque. */
typedef struct kt_cuda_span_t {
    void *pair;          /* pooled event pair, NULL when recording was off or begin failed */
    void *context;       /* ktiming's state for the CUDA context */
    uint32_t generation; /* backend generation at begin (a shutdown in between invalidates the span) */
} kt_cuda_span_t;

/* GPU timer with kt_cpu_timer_t's interface: start() records the start event on the stream, stop()
 * the stop event; neither waits. elapsed_ms() enforces the synchronisation rule itself: it waits for the stop
 * event (not the whole stream), so its value is always start→stop of the work on the stream, never a read of
 * unfinished events. While running (no stop yet) elapsed_ms() records a lap event now and waits for it: the
 * cumulative stream time since start(), as kt_cpu_timer_elapsed_ms() gives host time since start. A timer never
 * started reads 0. A zeroed timer is valid: its first start() takes the current context and stream 0 (the
 * legacy default stream, or the per-thread one: see "Per-thread default stream" below); kt_cuda_timer_init()
 * chooses them. start() and stop() record nothing on a stream that captures a graph (or on the legacy stream
 * while a blocking stream captures: that would invalidate your capture); elapsed() then returns KT_ESTATE, as it
 * does after the context was reset (cudaDeviceReset) or destroyed since start(). kt_cuda_timer_destroy() returns its events to the context pool.
 * Timers are not recorded into the recorder (use kt_cuda_begin/end for that). Not thread-safe per timer. */
typedef struct kt_cuda_timer_t {
    struct CUctx_st *ctx;       /* context, NULL = current at first start() */
    struct CUstream_st *stream; /* stream the events are recorded on (NULL = stream 0) */
    void *pair;                 /* event pair borrowed from the context pool, NULL until first start() */
    void *context;              /* ktiming's state for ctx */
    uint32_t generation;        /* backend generation the pair belongs to */
    int running;                /* 1 between start() and stop() */
    int started;                /* 1 once start() succeeded; -1: the last start()/stop() recorded nothing */
} kt_cuda_timer_t;

/* Entry/exit stamps written by KT_KERNEL_ENTER/EXIT (layout shared with cuda_device.cuh). */
typedef struct kt_cuda_stamp_t {
    uint64_t enter_ns; /* earliest block entry, %globaltimer ns; UINT64_MAX if no block entered */
    uint64_t exit_ns;  /* latest block exit, %globaltimer ns; 0 if no block exited */
} kt_cuda_stamp_t;

/* A device buffer of stamp slots (opaque). */
typedef struct kt_cuda_slots_t kt_cuda_slots_t;

/* Facts about one device (no context needed). */
typedef struct kt_cuda_device_t {
    int ordinal;          /* device number */
    char name[128];       /* cuDeviceGetName */
    int cc_major;         /* compute capability, major */
    int cc_minor;         /* compute capability, minor */
    int sm_count;         /* multiprocessors */
    uint64_t sm_clock_hz; /* SM clock (clock64() ticks per second), 0 if the driver does not say */
    int driver_version;   /* cuDriverGetVersion, e.g. 13000 */
    char label[128];      /* the device's name in snapshots, from the core's labeller (docs/devices.md): `name`,
                             or `name #<ordinal>` when another CUDA device has the same name (8 GPUs of one model
                             stay 8 devices; every device the driver enumerates is registered, used or not) */
    unsigned char uuid[16]; /* cuDeviceGetUuid (all zero when the driver cannot say) */
    char pci_bus_id[16];  /* PCI domain:bus:device, e.g. "0000:17:00", "" when the driver cannot say */
    char key[128];        /* the device's identity key: entries, tracks and device records are keyed by it
                             (kt_device_register, docs/devices.md), e.g. "uuid:gpu-8c1f..." */
    char uuid_text[48];   /* the UUID as nvidia-smi writes it, "GPU-xxxxxxxx-xxxx-..." or "MIG-..." for a MIG
                             instance; "" when the driver cannot say */
    int mig;              /* 1: a MIG instance (its UUID is the instance's; instances of one GPU share its PCI id) */
} kt_cuda_device_t;

/* Counters of one context's pool, for tests and diagnostics. */
typedef struct kt_cuda_stats_t {
    uint32_t pairs_capacity;  /* event pairs created in the pool */
    uint32_t pairs_free;      /* pairs ready for reuse */
    uint32_t pending;         /* ended dispatches not yet collected */
    uint64_t events_created;  /* cuEventCreate calls made by ktiming in this context (pool, anchors) */
    uint64_t recorded;        /* dispatches recorded */
    uint64_t errors;          /* dispatches that failed (recorded with kt_record_error) */
    uint64_t dropped;         /* dispatches not timed because the pool hit max_pairs */
    uint32_t anchors;         /* anchor refreshes made */
    uint32_t model_samples;   /* anchors in the current event-clock model, 0 before it is fitted */
} kt_cuda_stats_t;

/* Held-stream timing (kt_cuda_time_held, the harness's CUDA path): enqueue `trials` launches of the work to time
 * on `stream`, and return 0 (or a negative KT_E* to abort). The callback must only enqueue: the stream is held
 * while it runs, so anything that waits for the stream (cuStreamSynchronize, a blocking copy on it, cudaFree)
 * waits until the hold gives up (hold_timeout_ms), in each of up to six holds. It runs on the calling thread, with the held context current and in the thread's
 * own stream-capture mode (not ktiming's relaxed one). */
typedef int (*kt_cuda_enqueue_cb)(void *user, struct CUstream_st *stream, uint32_t trials);
typedef struct kt_cuda_held_t {
    struct CUctx_st *ctx;         /* NULL: current context, or device 0's primary context */
    struct CUstream_st *stream;   /* the stream the work goes to; not the legacy default stream (KT_EINVAL) */
    kt_cuda_enqueue_cb enqueue;   /* enqueues the launches */
    void *user;                   /* passed to enqueue */
    uint32_t hold_timeout_ms;     /* how long the hold kernel waits for one batch's release before it gives up
                                     (0: automatic, 4 times the warm-up trial's enqueue time per trial of the
                                     batch, 100 ms to 10 s; see kt_cuda_time_held) */
} kt_cuda_held_t;

#if KT_ENABLED

/* Load the driver and initialise the backend (optional: every call does it lazily with defaults). Returns 0,
 * KT_EUNAVAILABLE (see kt_cuda_last_error) or KT_ESTATE if already initialised with other settings. */
KT_API int kt_cuda_init(const kt_cuda_desc_t *desc);
/* Collect outstanding dispatches, destroy every event/stream/module/buffer ktiming made, stop the collector.
 * Spans, timers and slots from before are invalid afterwards; the next call initialises again. */
KT_API void kt_cuda_shutdown(void);
/* Why the last CUDA call failed (or why the backend is unavailable), naming the driver's error; "" if none.
 * The string is a per-thread copy, valid until the next call from the same thread. */
KT_API const char *kt_cuda_last_error(void);
/* The CUresult behind kt_cuda_last_error(), 0 if none (e.g. 34 for the stub driver). */
KT_API int kt_cuda_last_result(void);
/* Number of CUDA devices, or KT_EUNAVAILABLE. */
KT_API int kt_cuda_device_count(void);
/* Facts about device `ordinal`. */
KT_API int kt_cuda_device_info(int ordinal, kt_cuda_device_t *out);
/* The primary context of device `ordinal`, retained by ktiming until kt_cuda_shutdown (usable as `ctx` below;
 * the runtime API uses the same context). */
KT_API int kt_cuda_device_primary(int ordinal, struct CUctx_st **ctx);

/* Time one dispatch: begin before the launch, end after it, on the same stream. ctx NULL = the calling thread's
 * current context, or device 0's primary context when none is current (what the runtime API would use). When
 * recording is disabled both are no-ops returning 0.
 *   Launch latency: the start event is enqueued before the launch, so on an idle stream the span also holds the
 *   host's launch time of the kernel (a few us). For kernels under ~20 us that bias dominates; time them in a
 *   batch, or hold the stream (kt_cuda_time_held, kt_cuda_harness_run for the harness), or use
 *   KT_KERNEL_ENTER/EXIT stamps.
 *   Graph capture: a span begun (or ended) on a stream that is capturing a graph is skipped, 0 returned, and
 *   counted as dropped with reason "graph capture"; time the graph's launch instead (a span around
 *   cuGraphLaunch/cudaGraphLaunch is one dispatch). Every driver call ktiming makes, on any thread (the
 *   collector, and yours in kt_flush/kt_snapshot, sync mode, timers, calibration, slots, held timings), runs in
 *   relaxed capture mode, so a capture in global mode elsewhere is neither failed nor invalidated by ktiming.
 *   Your own code that ktiming calls (kt_cuda_time_held's enqueue callback) runs in your capture mode.
 *   Device reset: after cudaDeviceReset / cuDevicePrimaryCtxReset or cuCtxDestroy, ktiming notices (the
 *   context's id changed, CUDA 12.0+ drivers; checked before each use of its handles), forgets the context's
 *   events without touching them and counts what was in flight as dropped ("context reset"); a span open
 *   across the reset ends with KT_ESTATE. A reset landing between that check and the collector's next call
 *   makes one use of a freed event; kt_cuda_watch_resets (or `ktiming run`) closes that window. In a process forked after CUDA was initialised every call returns
 *   KT_EUNAVAILABLE.
 *   Per-thread default stream: a NULL stream is the legacy default stream unless per_thread_default_stream is
 *   set, or this header is compiled with nvcc --default-stream per-thread (CUDA_API_PER_THREAD_DEFAULT_STREAM):
 *   then spans on stream NULL go to the calling thread's per-thread default stream (CU_STREAM_PER_THREAD). */
KT_API int kt_cuda_begin(kt_cuda_span_t *span, struct CUctx_st *ctx, struct CUstream_st *stream, const char *name);
KT_API int kt_cuda_end(kt_cuda_span_t *span);
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
/* Code built with --default-stream per-thread: its stream 0 is the per-thread default stream. */
static inline struct CUstream_st *kt__cuda_ptds_stream(struct CUstream_st *stream)
{
    return stream ? stream : (struct CUstream_st *)0x2; /* CU_STREAM_PER_THREAD */
}
#define kt_cuda_begin(span, ctx, stream, name) (kt_cuda_begin)((span), (ctx), kt__cuda_ptds_stream(stream), (name))
#endif
/* Collect ktiming's state for a context before you destroy it (waits up to flush_timeout_ms), then destroy
 * its events. No span, timer or slot buffer of that context may be in use during or after the call. */
KT_API int kt_cuda_context_release(struct CUctx_st *ctx);
/* Device reset without the race (on = 1; 0 gives it back). A reset (cudaDeviceReset, cuDevicePrimaryCtxReset)
 * or cuCtxDestroy frees ktiming's events with the program's; ktiming notices by the context's id, but a reset
 * landing between that check and the collector's next call makes one use of a freed event. Watching, ktiming
 * holds CUPTI's callback subscription (libcupti is dlopen'ed: KTIMING_CUPTI_LIBRARY, else libcupti.so.13/.12)
 * and is told on the destroying thread before anything is freed: it waits for a collection in progress, records
 * what completes (up to flush_timeout_ms) and forgets the context: no use of a freed handle. CUPTI allows one
 * subscriber per process, so a profiler in the program (torch.profiler, Nsight tools) then cannot subscribe:
 * this is not the default. Under `ktiming run` its CUPTI library does this itself (and 1 returns 0 at once). Env
 * KTIMING_CUDA_WATCH_RESETS=1 asks for it at initialisation. 0, or KT_EUNAVAILABLE (no CUDA, no libcupti, or
 * another client holds the subscription; kt_cuda_last_error says which, naming the holder where CUPTI does). */
KT_API int kt_cuda_watch_resets(int on);
/* Pool counters of a context (NULL = current). */
KT_API int kt_cuda_stats(struct CUctx_st *ctx, kt_cuda_stats_t *out);

/* GPU timer (see kt_cuda_timer_t). */
KT_API int kt_cuda_timer_init(kt_cuda_timer_t *t, struct CUctx_st *ctx, struct CUstream_st *stream);
KT_API void kt_cuda_timer_start(kt_cuda_timer_t *t);
KT_API void kt_cuda_timer_stop(kt_cuda_timer_t *t);
KT_API double kt_cuda_timer_elapsed_ms(const kt_cuda_timer_t *t); /* 0 on failure (kt_cuda_last_error) */
KT_API int kt_cuda_timer_elapsed(const kt_cuda_timer_t *t, double *ms); /* same, with the error code */
KT_API void kt_cuda_timer_destroy(kt_cuda_timer_t *t);

/* %globaltimer through small kernels ktiming embeds as PTX (ISA 6.0, JIT-compiled by the driver, sm_50 and later).
 * read: one value; batch: n consecutive reads by one thread in one launch (minimal skew between them);
 * resolution: the smallest non-zero step seen in a batch of 1024 reads, i.e. the update granularity (1 us has
 * been seen); frequency: the counter's unit (1 GHz, it counts ns) and the SM clock for clock64() cycles. */
KT_API int kt_cuda_globaltimer_read(struct CUctx_st *ctx, uint64_t *ns);
KT_API int kt_cuda_globaltimer_batch(struct CUctx_st *ctx, uint64_t *out, uint32_t n);
KT_API int kt_cuda_globaltimer_resolution(struct CUctx_st *ctx, uint64_t *resolution_ns);
KT_API int kt_cuda_globaltimer_frequency(struct CUctx_st *ctx, uint64_t *timer_hz, uint64_t *sm_clock_hz);
/* Calibrate %globaltimer against the host timeline (CLOCK_MONOTONIC_RAW): `samples` reads (>= 10; 0 = 64),
 * each bracketed by host reads around launch+synchronise, spread over about 20 ms, fitted with `strategy`. The model is kept for the
 * context (used by kt_cuda_globaltimer_to_host and kt_cuda_slots_record) and published as a device fact;
 * `out` may be NULL. `domain` (may be NULL) gets the host clock the globaltimer follows, if any.
 * to_host maps a %globaltimer value with that model (KT_ESTATE before a calibration); *uncertainty_ns is its bound,
 * which includes the timer's update granularity (a value stands for any instant of its step; measured once, one
 * launch, if kt_cuda_globaltimer_resolution was not called).
 * A model's bound grows with its age, so to_host, like slots_record, refreshes a model over 1 s old (or whose bound
 * now is over twice its bound at the fit) before mapping: 16 new brackets over ~5 ms, launched and synchronised on
 * ktiming's own stream, refitted with the earlier ones. A fresh model maps without any driver call. */
KT_API int kt_cuda_calibrate(struct CUctx_st *ctx, uint32_t samples, kt_fit_strategy_t strategy,
                             kt_clock_model_t *out, kt_clock_domain_t *domain);
KT_API int kt_cuda_globaltimer_to_host(struct CUctx_st *ctx, uint64_t device_ns, uint64_t *host_ns,
                                       uint64_t *uncertainty_ns);

/* Slot buffers for KT_KERNEL_ENTER/EXIT. A slot holds one launch's stamps. bind() makes the next launch on
 * `stream` of a kernel from `module` stamp slot `index`: stream-ordered, it resets the slot and writes its
 * address into the module's `kt_cuda_slot_ptr` variable (two small async copies, no kernel-signature change).
 * Runtime-API programs have no CUmodule: use kt_cuda_slot_bind() from cuda_device.cuh with
 * kt_cuda_slots_device_ptr(). bind() on stream 0 uses the per-thread default stream where stream 0 means it (see
 * kt_cuda_begin); on a stream that is capturing a graph, or on the legacy stream while a blocking stream captures,
 * it returns KT_ESTATE and enqueues nothing (its copies would join or invalidate the capture). read() copies a
 * slot back (synchronous; the launch must have completed); record() reads it, maps the stamps to the host
 * timeline with the context's globaltimer model (calibrating first when there is none, refreshing it as
 * kt_cuda_globaltimer_to_host does) and records a device span named `name`. */
KT_API int kt_cuda_slots_create(kt_cuda_slots_t **out, struct CUctx_st *ctx, uint32_t count);
KT_API int kt_cuda_slots_bind(kt_cuda_slots_t *slots, struct CUmod_st *module, struct CUstream_st *stream,
                              uint32_t index);
KT_API uint64_t kt_cuda_slots_device_ptr(const kt_cuda_slots_t *slots, uint32_t index);
KT_API int kt_cuda_slots_read(kt_cuda_slots_t *slots, uint32_t index, kt_cuda_stamp_t *out);
KT_API int kt_cuda_slots_record(kt_cuda_slots_t *slots, uint32_t index, const char *name);
KT_API void kt_cuda_slots_destroy(kt_cuda_slots_t *slots);

/* Times `trials` launches on a held stream: a one-thread kernel spins on a host-mapped word at the head of the
 * stream, the start event, h->enqueue's launches and the end event queue up behind it, then the host releases
 * it. The event pair then brackets the launches back to back, without the host's launch time that an event
 * pair on an idle stream holds (the bias of kt_cuda_begin/end for kernels under ~20 us). *duration_ns: the
 * pair's elapsed time (cuEventElapsedTime: ~0.5 us resolution), for all trials together. Not recorded into the
 * recorder by itself (the harness records its samples). KT_ENOTSUP without mapped host memory or module entry
 * points. One held timing at a time per context; the callback must not call it again. Trials are held in batches
 * of at most 32 (a full launch queue would block the enqueuing before the release), the callback is called once
 * per batch, and at the start of every call once more unheld (1 trial, then the stream is synchronised: a
 * kernel's first launch may synchronise the context under lazy loading, and which kernels the callback launches
 * cannot be known). A trial may enqueue many launches: a batch whose hold kernel gave up before the release
 * (hold_timeout_ms) ran partly unheld, is not counted, and is retried with half its trials; the context keeps
 * a smaller size once a full batch of it held (and doubles it back after 8 calls held at it). KT_ETIMEDOUT when
 * even one trial could not be held (more launches than the launch queue holds, a callback waiting on the stream,
 * or slower than the bound; kt_cuda_last_error says so), after up to six holds of hold_timeout_ms each. KT_ESTATE
 * on a stream that is capturing a graph (nothing is enqueued and the callback is not called). The legacy default
 * stream is refused (KT_EINVAL): it waits on every blocking stream. */
KT_API int kt_cuda_time_held(const kt_cuda_held_t *h, uint32_t trials, uint64_t *duration_ns);
/* kt_harness_run_cb (ktiming/harness.h) over kt_cuda_time_held: user is a const kt_cuda_held_t *. Use it with
 * .timing = KT_HARNESS_TIME_REPORTED. */
KT_API int kt_cuda_harness_run(void *user, uint32_t trials, uint64_t *duration_ns);
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
/* Code built with --default-stream per-thread: stream 0 of its timers, held timings and slot binds is its
 * per-thread default stream too, as for its spans (kt_cuda_harness_run, passed as a pointer, is not mapped: give
 * it a stream). */
static inline void kt__cuda_ptds_timer_start(kt_cuda_timer_t *t)
{
    if (t && !t->stream)
        t->stream = (struct CUstream_st *)0x2; /* CU_STREAM_PER_THREAD */
    (kt_cuda_timer_start)(t);
}
static inline int kt__cuda_ptds_time_held(const kt_cuda_held_t *h, uint32_t trials, uint64_t *duration_ns)
{
    kt_cuda_held_t mapped;
    if (h) {
        mapped = *h;
        mapped.stream = kt__cuda_ptds_stream(h->stream);
        h = &mapped;
    }
    return (kt_cuda_time_held)(h, trials, duration_ns);
}
#define kt_cuda_timer_init(t, ctx, stream) (kt_cuda_timer_init)((t), (ctx), kt__cuda_ptds_stream(stream))
#define kt_cuda_timer_start(t) kt__cuda_ptds_timer_start(t)
#define kt_cuda_time_held(h, trials, duration_ns) kt__cuda_ptds_time_held((h), (trials), (duration_ns))
#define kt_cuda_slots_bind(slots, module, stream, index)                                                   \
    (kt_cuda_slots_bind)((slots), (module), kt__cuda_ptds_stream(stream), (index))
#endif

/* Scoped form: KT_CUDA_BEGIN(s, ctx, stream, "blur"); launch; KT_CUDA_END(s); */
#define KT_CUDA_BEGIN(span, ctx, stream, name)                                                             \
    kt_cuda_span_t span;                                                                                   \
    kt_cuda_begin(&(span), (ctx), (stream), (name))
#define KT_CUDA_END(span) kt_cuda_end(&(span))

#else /* !KT_ENABLED: no-ops, types stay */

static inline int kt_cuda_init(const kt_cuda_desc_t *desc) { (void)desc; return 0; }
static inline void kt_cuda_shutdown(void) {}
static inline const char *kt_cuda_last_error(void) { return ""; }
static inline int kt_cuda_last_result(void) { return 0; }
static inline int kt_cuda_device_count(void) { return 0; }
static inline int kt_cuda_device_info(int ordinal, kt_cuda_device_t *out) { (void)ordinal; (void)out; return KT_EDISABLED; }
static inline int kt_cuda_device_primary(int ordinal, struct CUctx_st **ctx)
{ (void)ordinal; if (ctx) *ctx = 0; return KT_EDISABLED; }
static inline int kt_cuda_begin(kt_cuda_span_t *span, struct CUctx_st *ctx, struct CUstream_st *stream,
                                const char *name)
{ (void)ctx; (void)stream; (void)name; if (span) { span->pair = 0; span->context = 0; span->generation = 0; } return 0; }
static inline int kt_cuda_end(kt_cuda_span_t *span) { (void)span; return 0; }
static inline int kt_cuda_context_release(struct CUctx_st *ctx) { (void)ctx; return 0; }
static inline int kt_cuda_watch_resets(int on) { (void)on; return 0; }
static inline int kt_cuda_stats(struct CUctx_st *ctx, kt_cuda_stats_t *out) { (void)ctx; (void)out; return KT_EDISABLED; }
static inline int kt_cuda_timer_init(kt_cuda_timer_t *t, struct CUctx_st *ctx, struct CUstream_st *stream)
{ (void)t; (void)ctx; (void)stream; return 0; }
static inline void kt_cuda_timer_start(kt_cuda_timer_t *t) { (void)t; }
static inline void kt_cuda_timer_stop(kt_cuda_timer_t *t) { (void)t; }
static inline double kt_cuda_timer_elapsed_ms(const kt_cuda_timer_t *t) { (void)t; return 0.0; }
static inline int kt_cuda_timer_elapsed(const kt_cuda_timer_t *t, double *ms) { (void)t; if (ms) *ms = 0.0; return 0; }
static inline void kt_cuda_timer_destroy(kt_cuda_timer_t *t) { (void)t; }
static inline int kt_cuda_globaltimer_read(struct CUctx_st *ctx, uint64_t *ns) { (void)ctx; (void)ns; return KT_EDISABLED; }
static inline int kt_cuda_globaltimer_batch(struct CUctx_st *ctx, uint64_t *out, uint32_t n)
{ (void)ctx; (void)out; (void)n; return KT_EDISABLED; }
static inline int kt_cuda_globaltimer_resolution(struct CUctx_st *ctx, uint64_t *resolution_ns)
{ (void)ctx; (void)resolution_ns; return KT_EDISABLED; }
static inline int kt_cuda_globaltimer_frequency(struct CUctx_st *ctx, uint64_t *timer_hz, uint64_t *sm_clock_hz)
{ (void)ctx; (void)timer_hz; (void)sm_clock_hz; return KT_EDISABLED; }
static inline int kt_cuda_calibrate(struct CUctx_st *ctx, uint32_t samples, kt_fit_strategy_t strategy,
                                    kt_clock_model_t *out, kt_clock_domain_t *domain)
{ (void)ctx; (void)samples; (void)strategy; (void)out; (void)domain; return KT_EDISABLED; }
static inline int kt_cuda_globaltimer_to_host(struct CUctx_st *ctx, uint64_t device_ns, uint64_t *host_ns,
                                              uint64_t *uncertainty_ns)
{ (void)ctx; (void)device_ns; (void)host_ns; (void)uncertainty_ns; return KT_EDISABLED; }
static inline int kt_cuda_slots_create(kt_cuda_slots_t **out, struct CUctx_st *ctx, uint32_t count)
{ (void)ctx; (void)count; if (out) *out = 0; return KT_EDISABLED; }
static inline int kt_cuda_slots_bind(kt_cuda_slots_t *slots, struct CUmod_st *module, struct CUstream_st *stream,
                                     uint32_t index)
{ (void)slots; (void)module; (void)stream; (void)index; return KT_EDISABLED; }
static inline uint64_t kt_cuda_slots_device_ptr(const kt_cuda_slots_t *slots, uint32_t index)
{ (void)slots; (void)index; return 0; }
static inline int kt_cuda_slots_read(kt_cuda_slots_t *slots, uint32_t index, kt_cuda_stamp_t *out)
{ (void)slots; (void)index; (void)out; return KT_EDISABLED; }
static inline int kt_cuda_slots_record(kt_cuda_slots_t *slots, uint32_t index, const char *name)
{ (void)slots; (void)index; (void)name; return KT_EDISABLED; }
static inline void kt_cuda_slots_destroy(kt_cuda_slots_t *slots) { (void)slots; }
static inline int kt_cuda_time_held(const kt_cuda_held_t *h, uint32_t trials, uint64_t *duration_ns)
{ (void)h; (void)trials; if (duration_ns) *duration_ns = 0; return KT_EDISABLED; }
static inline int kt_cuda_harness_run(void *user, uint32_t trials, uint64_t *duration_ns)
{ (void)user; (void)trials; if (duration_ns) *duration_ns = 0; return KT_EDISABLED; }

#define KT_CUDA_BEGIN(span, ctx, stream, name)
#define KT_CUDA_END(span)

#endif /* KT_ENABLED */

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_CUDA_H */
