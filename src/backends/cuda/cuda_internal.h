/* cuda_internal.h — internal: state shared by the CUDA backend's files (driver table, per-context state). */
#ifndef KT_CUDA_INTERNAL_H
#define KT_CUDA_INTERNAL_H

#include "cu_api.h"

#include "core/service.h"

#include <ktiming.h>
#include <ktiming/clock_model.h>
#include <ktiming/cuda.h>
#include <pthread.h>
#include <stdatomic.h>

/* Event-clock anchors: the newest and the one before it are kept as events; samples of the current chain feed
 * the clock model. */
#define KT__CUDA_ANCHOR_SAMPLES 32
/* %globaltimer brackets kept per context for refits (kt_cuda_slots_record's refreshes lengthen the baseline). */
#define KT__CUDA_GT_RING 128
/* Device positions in an anchor chain are offset by this so ones a little before the chain start stay >= 0. */
#define KT__CUDA_CHAIN_BASE_NS (1ull << 40)
/* Drift bound between device and host clocks before a model is fitted (ppm): the calibration module's prior,
 * so the unfitted bound is as honest as a fitted one (100 ppm did not cover the 200 ppm test clock). */
#define KT__CUDA_ASSUMED_DRIFT_PPM KT_CLOCK_DEFAULT_DRIFT_PRIOR_PPM

/* One pooled (start, end) event pair, owned by the pool, a span/timer, or a stream queue. */
typedef struct kt__cuda_pair_t {
    kt__cuevent start;               /* recorded by kt_cuda_begin / timer start */
    kt__cuevent end;                 /* recorded by kt_cuda_end / timer stop */
    struct kt__cuda_pair_t *next;    /* free list or stream-queue link */
    struct kt__cuda_squeue_t *queue; /* stream it was recorded on (set by begin) */
    kt_kernel_id_t kernel;           /* interned name */
    uint32_t thread;                 /* kt_thread_ordinal of the enqueuing thread */
    uint64_t enqueue_ns;             /* host time at begin */
} kt__cuda_pair_t;

/* A block of pairs created in one pool growth. */
typedef struct kt__cuda_chunk_t {
    struct kt__cuda_chunk_t *next; /* older chunks */
    uint32_t count;                /* pairs in this chunk whose events were created */
    kt__cuda_pair_t pairs[];       /* the pairs */
} kt__cuda_chunk_t;

/* Pending dispatches of one stream, in record order (a stream completes in order). */
typedef struct kt__cuda_squeue_t {
    kt__custream stream;            /* the stream recorded on (NULL = legacy default, 0x2 = per-thread) */
    uint32_t thread;                /* owning thread's ordinal for the per-thread default stream, else 0 */
    uint32_t queue_id;              /* kt_queue_register id */
    kt__cuda_pair_t *head;          /* oldest pending pair */
    kt__cuda_pair_t *tail;          /* newest pending pair */
    struct kt__cuda_squeue_t *next; /* other streams of the context */
} kt__cuda_squeue_t;

/* ktiming's state for one CUDA context. */
typedef struct kt__cuda_ctx_t {
    kt__cuctx ctx;               /* the CUDA context */
    kt__cudevice device;         /* its device */
    int retained_primary;        /* 1: ktiming retained this primary context and releases it at cleanup */
    char device_key[KT_DEVICE_KEY_MAX]; /* the device's identity key (kt__cuda_device_identity): entries, tracks and
                                    clock facts are keyed by it, never by the name */
    char device_label[128];      /* kt__cuda_device_label: the name people read in verbose lines */
    int cc_major, cc_minor;      /* compute capability */
    uint32_t generation;         /* backend generation it was made in */
    unsigned long long ctx_id;   /* cuCtxGetId when made (0: the driver has no ids): a reset changes it */
    atomic_int gone;             /* 1 once the context was found reset or destroyed: no handle is used again */

    pthread_mutex_t lock;        /* pool, stream queues, counters (never held across a driver call) */
    pthread_mutex_t grow_lock;   /* one pool growth at a time (taken before lock) */
    kt__cuda_pair_t *free_list;  /* pairs ready for reuse */
    kt__cuda_chunk_t *chunks;    /* every pair ever created here (for cleanup) */
    uint32_t capacity;           /* pairs created */
    uint32_t free_count;         /* pairs on free_list */
    uint32_t pending;            /* pairs in stream queues */
    kt__cuda_squeue_t *queues;   /* one per stream seen */
    uint64_t events_created;     /* cuEventCreate calls in this context */
    uint64_t recorded;           /* dispatches recorded */
    uint64_t errors;             /* dispatches that failed */
    uint64_t dropped;            /* dispatches dropped at max_pairs */

    /* Anchors (guarded by the backend's consumer lock). */
    kt__custream anchor_stream;  /* private non-blocking stream anchors are recorded on */
    kt__cuevent anchor_ev[2];    /* alternating anchor events */
    int anchor_cur;              /* index of the newest completed anchor, -1 if none */
    uint64_t anchor_mid_ns;      /* host midpoint of the newest anchor's bracket */
    uint64_t anchor_half_ns;     /* half-width of that bracket */
    int64_t anchor_chain_ns;     /* device position of the newest anchor in its chain */
    uint32_t anchors_made;       /* refreshes */
    uint32_t chain_len;          /* anchors in the current chain */
    kt_clock_sample_t chain[KT__CUDA_ANCHOR_SAMPLES]; /* ring of the chain's samples (device = base + pos) */
    kt_clock_model_t event_model; /* fitted on the chain once it has KT_CLOCK_MIN_SAMPLES anchors */
    int event_model_valid;       /* event_model usable */

    /* %globaltimer (cuda_globaltimer.c), guarded by gt_lock. */
    pthread_mutex_t gt_lock;     /* module, scratch, model */
    kt__cumodule module;         /* embedded PTX module, NULL until first use */
    kt__cufunction fn_read;      /* kt_globaltimer_read */
    kt__cufunction fn_batch;     /* kt_globaltimer_batch */
    kt__custream gt_stream;      /* private non-blocking stream for the timer kernels */
    kt__cudeviceptr scratch;     /* device buffer for timer reads */
    size_t scratch_bytes;        /* its size */
    kt_clock_model_t gt_model;   /* globaltimer → host model */
    kt_clock_sample_t gt_ring[KT__CUDA_GT_RING]; /* the brackets it is fitted on (a calibration, then refreshes) */
    uint32_t gt_ring_len, gt_ring_next;
    int gt_valid;                /* gt_model usable */
    kt_clock_domain_t gt_domain; /* host clock the globaltimer follows, KT_DOMAIN_DEVICE if none */
    uint64_t gt_resolution_ns;   /* measured update granularity, 0 if not measured */
    uint32_t slots_queue;        /* queue id for spans from stamp slots, 0 until used */

    /* Held stream (kt_cuda_time_held): made under gt_lock, used under hold_lock. */
    pthread_mutex_t hold_lock;   /* one held timing at a time per context */
    kt__cufunction fn_hold;      /* kt_hold_wait */
    volatile uint32_t *hold_flag; /* host-mapped: [0] release (host), [1] 2 when the kernel gave up */
    kt__cudeviceptr hold_dev;    /* its device address */
    kt__cuevent hold_ev[2];      /* start and end of the held work */
    uint32_t hold_batch;         /* trials per held batch learned here (a smaller batch held after one gave up); 0:
                                    the first size */
    uint32_t hold_good;          /* calls in a row whose batches all held at hold_batch (it doubles after 8) */

} kt__cuda_ctx_t;

/* Backend states (kt__cuda_g.state). */
enum { KT__CUDA_UNINIT = 0, KT__CUDA_READY = 1, KT__CUDA_UNAVAILABLE = 2 };

/* Backend-wide state (defined in cuda_backend.c). */
typedef struct kt__cuda_state_t {
    pthread_mutex_t lock;     /* state, settings, context list, collector lifecycle */
    pthread_mutex_t consumer; /* one consumer of completions at a time (collector pass, flush, sync end, cleanup) */
    atomic_int state;         /* KT__CUDA_* */
    kt_cuda_desc_t desc;      /* settings in force, defaults filled in */
    char load_msg[512];       /* why loading failed, re-reported on every KT_EUNAVAILABLE */
    int load_res;             /* CUresult behind load_msg */
    kt__ctx_set_t set;        /* contexts seen: live, and retired (reset or destroyed under ktiming: their memory
                                 is kept for open spans and timers until kt_cuda_shutdown); changed under `lock`,
                                 removed or retired only under `consumer` too, so a pass under it may use a pin */
    atomic_uint generation;   /* bumped by shutdown: older spans and timers are invalid */
    atomic_uint ctx_epoch;    /* bumped whenever a context's state is freed (release, shutdown, reset) */
    atomic_uint pending;      /* ended dispatches not yet collected, all contexts */
    kt__collector_t collector; /* the background collector (core helper) */
} kt__cuda_state_t;
extern kt__cuda_state_t kt__cuda_g;
/* The backend's registration with the core (kt__backend_arm registers it again after the core's stop). */
extern const kt__backend_ops_t kt__cuda_ops;

/* The resolved driver table (valid once kt__cuda_ready() returned 0). */
extern kt__cu_t kt__cu;

/* cu_loader.c */
int kt__cuda_load(kt__cu_t *cu);                      /* 0 or KT_EUNAVAILABLE (last error set) */
const char *kt__cuda_result_name(kt__curesult res);   /* driver's name, ktiming's table, or "CUDA error N" */
int kt__cuda_fail(const char *call, kt__curesult res); /* sets the last error; returns the KT_E* to report */
void kt__cuda_set_error(kt__curesult res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* cuda_backend.c: lifecycle */
int kt__cuda_ready(void); /* lazy init: 0 or KT_EUNAVAILABLE */
uint32_t kt__cuda_generation(void); /* bumped by kt_cuda_shutdown */
int kt__cuda_forked_child(void);    /* 1 (last error set) in a child forked after initialisation */
uint64_t kt__cuda_deadline_in_ms(uint32_t ms); /* kt_now_ns() + ms */

/* cuda_context.c: the registry of contexts */
/* ktiming's state for ctx (NULL: current, else device 0's primary context), created on first use. */
int kt__cuda_ctx_get(kt__cuctx ctx, kt__cuda_ctx_t **out);
/* Make c current on this thread if it is not; kt__cuda_ctx_leave undoes it. */
int kt__cuda_ctx_enter(kt__cuda_ctx_t *c, int *pushed);
void kt__cuda_ctx_leave(int pushed);
void kt__cuda_publish(kt__cuda_ctx_t *c);
/* Whether c's context is still the one ktiming made its state in (not reset, not destroyed); marks it gone
 * otherwise. Without cuCtxGetId in the driver: 1 unless already marked. */
int kt__cuda_ctx_alive(kt__cuda_ctx_t *c);
/* The stream ktiming uses for the program's `stream`: NULL is the per-thread default stream when the program uses
 * it (kt_cuda_desc_t.per_thread_default_stream, KTIMING_CUDA_PER_THREAD_STREAM, nvcc --default-stream
 * per-thread through ktiming/cuda.h), else the legacy default stream. */
kt__custream kt__cuda_stream_resolve(kt__custream stream);
/* Whether `stream` captures a graph, or is the legacy stream beside a capturing blocking stream (context
 * current): recording there would become a graph node or invalidate the program's capture (cuda_span.c). */
int kt__cuda_stream_capturing(kt__custream stream);
/* The device's label in snapshots, from the core's labeller (docs/devices.md) once every device of the driver is
 * registered: its name, with " #<ordinal>" when another device has the same name. */
void kt__cuda_device_label(kt__cudevice dev, char *out, size_t size);
/* The device's identity as the core records it (docs/devices.md): vendor, model, UUID as nvidia-smi writes it
 * ("GPU-<8-4-4-4-12 hex>", "MIG-..." for a MIG instance), PCI "dddd:bb:dd.0", ordinal. *mig is set to 1 for a
 * MIG instance (cuDeviceGetUuid_v2 names the instance, the original cuDeviceGetUuid its GPU). */
void kt__cuda_device_identity(kt__cudevice dev, kt_device_id_t *id, int *mig);
/* Registers the device's identity with the core (once per device and process; cheap again) and writes its key
 * into out (the model name when the core's table is full). */
void kt__cuda_device_key(kt__cudevice dev, char *out, size_t size);

/* A query answered with a capture error: "not now", never the dispatch's result. */
int kt__cuda_capture_busy(kt__curesult r);
/* Consumer lock held: c's context was reset or destroyed; unlink and retire its state (handles never used again). */
void kt__cuda_ctx_retire(kt__cuda_ctx_t *c);
/* Consumer lock held, c unlinked: free ktiming's state for c (a live context's handles destroyed in it). */
void kt__cuda_ctx_destroy(kt__cuda_ctx_t *c);

/* ktiming's live state for ctx, or NULL (no creation). Hold the consumer lock to keep it linked. */
kt__cuda_ctx_t *kt__cuda_ctx_lookup(kt__cuctx ctx);

/* cuda_reset_watch.c: CUPTI's CONTEXT_DESTROY_STARTING callback (kt__cuda_context_destroying, shared/tool.h) */
void kt__cuda_watch_from_env(void); /* kt_cuda_init: KTIMING_CUDA_WATCH_RESETS=1 */
void kt__cuda_watch_stop(void);     /* kt_cuda_shutdown: the subscription is given back */
/* This thread releases ktiming's retain of a primary context whose state is not (or no longer) in the set (1 around
 * the release: kt_cuda_context_release, holding the consumer lock; a failed creation, holding kt__cuda_g.lock):
 * the release may destroy the context right here, and the callback then has nothing to wait for or retire. */
void kt__cuda_watch_releasing(int on);

/* cuda_pool.c: event-pair pool and stream queues */
int kt__cuda_pool_take_locked(kt__cuda_ctx_t *c, kt__cuda_pair_t **out); /* c->lock held (released to grow) */
void kt__cuda_pool_put(kt__cuda_ctx_t *c, kt__cuda_pair_t *p);
/* c->lock held: the queue of a stream, created (and registered as a timeline track) on first sight. */
kt__cuda_squeue_t *kt__cuda_squeue_get_locked(kt__cuda_ctx_t *c, kt__custream stream, uint32_t thread);

/* cuda_anchor.c: device event time -> host time (consumer lock held, context current) */
void kt__cuda_anchor_create(kt__cuda_ctx_t *c);  /* the anchor stream and events, on the program's thread */
void kt__cuda_anchor_refresh(kt__cuda_ctx_t *c); /* a new anchor when the newest is older than the period */
/* Duration and host placement of a completed pair; KT_ESTATE when the context was reset since. */
int kt__cuda_pair_place(kt__cuda_ctx_t *c, const kt__cuda_pair_t *p, kt_dispatch_t *d);

/* cuda_collect.c: collection (consumer lock held unless said) */
/* Count every dispatch still queued in c as dropped for `reason`; their events are not touched. */
uint32_t kt__cuda_drop_pending(kt__cuda_ctx_t *c, kt_drop_reason_t reason);
/* Collect every live context (or only `only`) until nothing is pending or the deadline passes (kt__drain, at the
 * poll period); `held`: the caller holds the consumer lock. Returns what is left. */
uint32_t kt__cuda_collect_until(kt__cuda_ctx_t *only, uint64_t deadline_ns, int held);
void kt__cuda_collector_kick(void); /* start the collector if needed and wake it (no lock held) */
/* The `ktiming run -v` line of a recorded dispatch d (error NULL) or of a failed one in c (the core's one writer). */
void kt__cuda_verbose(const kt__cuda_ctx_t *c, kt_kernel_id_t kernel, const kt_dispatch_t *d, const char *error);

/* cuda_span.c */
int kt__cuda_valid_ctx(const kt__cuda_ctx_t *c, uint32_t generation); /* c usable by a span/timer of generation */

#endif
