/* ktiming.h — the public core API of ktiming: recording, snapshots, reports, CPU zones and timers.
 *
 * ktiming times kernels per kernel and per dispatch, on the CPU and on GPU APIs, and can be compiled out.
 *
 * Quick start (compile with -DKTIMING_ENABLE=1, link with -lktiming or the CMake target ktiming::ktiming):
 *
 *     #include <ktiming.h>
 *     KT_CPU_BEGIN(z, "blur");                     // scoped zone: one dispatch of kernel "blur"
 *     blur(img);
 *     KT_CPU_END(z);
 *     kt_record("upload", KT_BACKEND_CPU, 1500);   // or record a duration you measured (ns)
 *     kt_snapshot_t *s = kt_snapshot();            // merged, sorted by name, backend, device
 *     kt_report_print(stdout, s, KT_FORMAT_TEXT, NULL); // [timing] blur  CPU  20  24.68 ms ...
 *     kt_snapshot_free(s);
 *
 * Reading snapshots back (kt_snapshot_load, <ktiming/analysis.h>) and comparing them (kt_compare,
 * <ktiming/compare.h>) live in a separate library (ktiming::analysis, uses cJSON), so this core stays free of
 * dependencies beyond libc, pthreads, libdl and libm. Measuring a kernel until its timing is stable (warm-up,
 * trials, nvbench's stopping rule) is <ktiming/harness.h>, in this core.
 *
 * Recording. Pick the cheapest call that fits the site:
 *   KT_CPU_BEGIN/KT_CPU_END   a scoped CPU zone; the id is cached in a static at the site (name must not vary).
 *   KT_RECORD(name, b, ns)    a duration you measured, id cached at the site (name must not vary).
 *   kt_record(name, b, ns)    any string, copied on first use. A per-thread pointer cache avoids hashing; a
 *                             hit is confirmed by comparing the string with the interned copy, so reusing a
 *                             buffer, or a library unloaded and another loaded at its address, is safe.
 *   kt_kernel_intern + kt_record_dispatch   what backends use (ids are dense, from 1); a dispatch with only
 *                             duration_ns set is a duration record, as kt_record's.
 * A kernel is the triple (name, backend, device); device NULL means "host" for the CPU, "default" otherwise.
 * Each thread writes only its own store (no lock, no shared cache line on the hot path); kt_snapshot() merges
 * them. Counts and totals are exact under any contention, a thread's records stay after it exits, and
 * kt_snapshot() and kt_reset() may run while other threads record. At most 65535 kernels; interning more
 * returns id 0 (every record of such a kernel, zones included, is counted in kernels_dropped).
 *
 * Snapshots and resets. kt_reset() starts a new generation: a snapshot taken after kt_reset() returned holds
 * no record, sample or span made before kt_reset() was called (a record racing with the reset counts on one
 * side or the other, or not at all). A reset waits for a snapshot in progress, so one snapshot never mixes two
 * generations. While threads record, a snapshot reads each thread's data for a kernel at some moment during
 * the call (different threads and kernels at slightly different moments, not one global instant), and each
 * entry is consistent in itself: every sample, percentile and the mean lie in [min_ns, max_ns];
 * sample_count <= dispatch_count; the histogram behind the percentiles counts only dispatches in
 * dispatch_count; every span belongs to a dispatch its entry counts (dispatch_count, or errors for a span
 * flagged KT_SPAN_ERROR), so a successful span's duration lies in [min_ns, max_ns] too. Recorders never wait.
 *
 * Statistics (kt_kernel_timing_t): count, total, min, max exact; mean exact; stddev the exact sample standard
 * deviation (n-1), from 128-bit integer sums; p50/p90/p99 the nearest-rank percentile (the ceil(p*n)-th
 * smallest) read from a log-linear histogram (64 buckets per power of two, exact below 128 ns): within 0.8 %;
 * its non-empty buckets are in hist[], so merged snapshots (ktiming/analysis.h) keep that bound.
 * last_ns: the dispatch that ended latest when records carry an end time (zones, backends: completions that
 * arrive out of order do not matter); duration-only records count in record order within a thread, and
 * across threads one thread's last is taken. samples[] is a uniform random sample
 * of up to sample_capacity durations over all dispatches and threads (per-thread reservoirs, Algorithm L,
 * merged weighting each thread by its count); the generator is seeded, so a run's samples are reproducible.
 *
 * Memory, per thread and kernel that thread recorded: about 0.9 KB of aggregates (and 8 KB per block of 64
 * consecutive kernel ids it records in: the part every record touches is kept dense), 512 bytes per histogram
 * block the durations touched (64 buckets; usually one or two), and samples that grow with use: 128 bytes up
 * to 16 samples, doubling up to sample_capacity x 8 bytes (8 KB at the default 1024). At most 65,535 kernels
 * (names x backends x devices) are interned; records for more are counted in kernels_dropped, never silent.
 *
 * Spans (for timelines) come from records that carry times: zones, kt_cpu_dispatch_2d, and kt_record_dispatch
 * with a start or end; kt_record and KT_RECORD carry a duration only and add none. Each thread keeps up to
 * span_capacity spans (desc, else env KTIMING_SPANS, else 16384; 0 = off). A full log never blocks and never
 * overwrites: the dispatch is still aggregated and counted in spans_dropped ("span log overflow"). `dropped`
 * is different: dispatches lost entirely before reaching the recorder (kt_record_drop, e.g. a full GPU query
 * ring). A thread that exits leaves its log, and a later new thread continues in it. kt_reset() empties logs.
 *
 * Launch configurations: a dispatch may carry its sizes (kt_dispatch_t.launch: OpenCL global/local work sizes,
 * Vulkan group counts, CUDA grid/block); each entry then keeps a breakdown by configuration (configs[]: count,
 * total, min, max; at most KT_LAUNCH_CONFIGS_MAX rows, the rest added up in one KT_LAUNCH_OTHER row). A dispatch
 * without one pays a single predictable branch; a thread's first configured record of a kernel allocates its table
 * (about 3 KB: 33 rows).
 *
 * Nothing needs initialising: the first call sets ktiming up with defaults. kt_init(&(kt_desc_t){0}) chooses
 * sizes up front and must come first (KT_ESTATE once anything initialised); after kt_shutdown() it re-enables
 * recording, keeping the first sizes (a kt_shutdown() before any use drops records until kt_init, whose sizes
 * count). kt_reset() keeps interned ids valid.
 *
 * Environment: KTIMING_SPANS=N (span log entries per thread, 0 = off), KTIMING_CPU_THREADS=N (pool size for
 * kt_cpu_dispatch_2d, default the online cores), and at process exit (an atexit handler installed on first
 * use, after backends flush): KTIMING_OUTPUT=path.json writes the snapshot as JSON, KTIMING_TRACE=path a
 * Chrome trace, KTIMING_REPORT=1 prints the text table on stderr. Both paths are templates (kt_path_expand:
 * %p pid, %h host, %r rank, %%), so every process or MPI rank of a job writes its own file. Every variable:
 * docs/environment.md.
 *
 * Without KTIMING_ENABLE (or with it 0) every KT_* macro expands to nothing and every function below is a
 * static inline no-op, while the types stay: instrumented code compiles unchanged and needs no library. The
 * same holds for the backend headers (cl.h, vk.h, cuda.h), harness.h, primitive.h and stats.h. Exceptions,
 * checked by the test core_headers: clock_model.h (clock-model math a program calls deliberately: its types stay,
 * its functions need the library in both modes) and the analysis library's analysis.h and compare.h (they
 * refuse to compile without KTIMING_ENABLE=1).
 * Compiled in but runtime-disabled (kt_disable), a KT_CPU zone costs one load and a branch.
 *
 * Times are nanoseconds on the host timeline, which is CLOCK_MONOTONIC_RAW (kt_now_ns): a clock NTP never
 * slews, so a duration measured on it is the hardware's, and the clock PoCL stamps OpenCL events with. Where
 * the CPU's counter is trustworthy (invariant TSC that Linux itself uses as its clocksource; CNTVCT_EL0 on
 * aarch64) host times are read from it and converted to CLOCK_MONOTONIC_RAW by a fitted multiply-shift with a
 * published error bound (the "host" device record, kt_host_clock_info in ktiming/clock_model.h, `ktiming devices`);
 * else clock_gettime is called. KTIMING_CLOCK=auto|tsc|monotonic_raw overrides (docs/host-clock.md).
 * kt_clock_resolution_ns() is what clock_getres reports; kt_clock_read_cost_ns() is measured on first call
 * (cheapest of 16 batches of 1000 reads of the host timeline, whichever counter it comes from). Functions that can fail return 0 or a negative KT_E* code;
 * kt_strerror() names it.
 */
#ifndef KTIMING_H
#define KTIMING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KT_VERSION_MAJOR 0
#define KT_VERSION_MINOR 1
#define KT_VERSION_PATCH 0
#define KT_VERSION_STRING "0.1.0"

#if defined(KTIMING_ENABLE) && (KTIMING_ENABLE + 0)
#define KT_ENABLED 1
#else
#define KT_ENABLED 0
#endif

#if defined(__GNUC__)
#define KT_API __attribute__((visibility("default")))
#else
#define KT_API
#endif

/* ---------------------------------------------------------------------------------------------------
 * Types (always present, enabled or not)
 * ------------------------------------------------------------------------------------------------- */

/* Which API ran a dispatch. */
typedef enum kt_backend_t {
    KT_BACKEND_CPU = 0,
    KT_BACKEND_OPENCL = 1,
    KT_BACKEND_VULKAN = 2,
    KT_BACKEND_CUDA = 3,
    KT_BACKEND_METAL = 4,
    KT_BACKEND_WEBGPU = 5, /* written by the JavaScript package bindings/webgpu (read back, never recorded in C) */
    KT_BACKEND_HOST_API = 6, /* host API time: a program thread blocked in a GPU API call (clFinish, vkWaitForFences,
                                ...), one entry per API function, recorded on the thread's track by `ktiming run` */
    KT_BACKEND_COUNT = 7
} kt_backend_t;

/* Error codes: name, value, message. One table, as libuv's UV_ERRNO_MAP. */
#define KT_ERRNO_MAP(XX)                                                                                   \
    XX(EINVAL, -1, "invalid argument")                                                                     \
    XX(ENOMEM, -2, "out of memory")                                                                        \
    XX(EUNAVAILABLE, -3, "backend or device unavailable")                                                  \
    XX(EIO, -4, "input/output error")                                                                      \
    XX(EPARSE, -5, "malformed input")                                                                      \
    XX(ESAMPLES, -6, "too few samples")                                                                    \
    XX(EBACKEND, -7, "backend API call failed")                                                            \
    XX(EFULL, -8, "capacity exhausted")                                                                    \
    XX(ESTATE, -9, "invalid state for this call")                                                          \
    XX(ENOTSUP, -10, "not supported")                                                                      \
    XX(ETIMEDOUT, -11, "timed out")                                                                        \
    XX(EDISABLED, -12, "ktiming compiled out")

typedef enum kt_errno_t {
#define KT__ERRNO_ENUM(name, val, msg) KT_##name = (val),
    KT_ERRNO_MAP(KT__ERRNO_ENUM)
#undef KT__ERRNO_ENUM
    KT_OK = 0
} kt_errno_t;

/* Why a dispatch was dropped (lost before it could be timed): one counter per reason per kernel, so a report
 * can say what was lost and why. Columns: name (KT_DROP_<name>), display text (kt_drop_reason_name), identifier
 * written in the JSON snapshot (lower-case, '_' between words). */
#define KT_DROP_REASON_MAP(XX)                                                                              \
    /* kt_record_drop(k, KT_DROP_UNSPECIFIED): none given */                                                \
    XX(UNSPECIFIED, "unspecified", "unspecified")                                                           \
    /* a backend's query/event ring had no free slot */                                                     \
    XX(RING_FULL, "ring full", "ring_full")                                                                 \
    /* not complete when the bounded exit wait ran out */                                                   \
    XX(IN_FLIGHT_AT_EXIT, "in flight at exit", "in_flight_at_exit")                                         \
    /* executions that overlap cannot be told apart */                                                      \
    XX(SIMULTANEOUS_USE, "simultaneous-use command buffer", "simultaneous_use")                             \
    /* recorded into a command buffer that was freed unsubmitted */                                         \
    XX(NEVER_SUBMITTED, "never submitted", "never_submitted")                                               \
    /* the device or context was lost with the command pending */                                           \
    XX(DEVICE_LOST, "device lost", "device_lost")                                                           \
    /* the context/device was destroyed or reset under it */                                                \
    XX(CONTEXT_RESET, "context reset", "context_reset")                                                     \
    /* begun on a stream that was capturing a graph */                                                      \
    XX(GRAPH_CAPTURE, "graph capture", "graph_capture")                                                     \
    /* the driver delivered the command without timestamps */                                               \
    XX(NO_TIMING, "no timing", "no_timing")                                                                 \
    /* reading the timestamps failed */                                                                     \
    XX(READ_FAILED, "read failed", "read_failed")                                                           \
    /* timestamps failed a sanity check (end before start, ...) */                                          \
    XX(INVALID_TIMES, "invalid times", "invalid_times")                                                     \
    /* a recording run again without re-recording: timed once */                                            \
    XX(RESUBMITTED, "re-executed", "resubmitted")

typedef enum kt_drop_reason_t {
#define KT__DROP_ENUM(name, text, id) KT_DROP_##name,
    KT_DROP_REASON_MAP(KT__DROP_ENUM)
#undef KT__DROP_ENUM
    KT_DROP_REASON_COUNT
} kt_drop_reason_t;

/* An unsigned 128-bit integer as two halves (exact sums that a uint64_t could overflow). */
typedef struct kt_u128_t {
    uint64_t lo; /* low 64 bits */
    uint64_t hi; /* high 64 bits */
} kt_u128_t;

/* Interned (name, backend, device) triple; 0 is never a valid id, so a zeroed static means "not yet". */
typedef uint32_t kt_kernel_id_t;

/* Setup. Zero-initialise; every 0 means the default. */
typedef struct kt_desc_t {
    uint32_t span_capacity;   /* spans kept per recording thread; 0 = env KTIMING_SPANS or 16384 */
    int spans_off;            /* non-zero: keep no spans (aggregates only) */
    uint32_t sample_capacity; /* raw durations kept per kernel (reservoir); 0 = 1024 */
    int start_disabled;       /* non-zero: start with recording disabled (kt_enable() turns it on) */
} kt_desc_t;

/* Span flags. */
#define KT_SPAN_DEVICE 0x1u     /* start/end come from a device clock mapped to the host timeline */
#define KT_SPAN_HOST_TIMED 0x2u /* host-bracketed fallback: the device gave no timestamps */
#define KT_SPAN_ERROR 0x4u      /* the command ended in error (duration may be 0) */
#define KT_SPAN_TRIALS 0x8u     /* one of several trial dispatches of a primitive */

/* Launch configurations (issue 40.2). The same kernel launched with other sizes is other work: a dispatch may
 * carry its configuration (kt_dispatch_t.launch; all zero = none), and each snapshot entry then keeps a breakdown
 * by configuration (kt_kernel_timing_t.configs). Kinds: */
typedef enum kt_launch_kind_t {
    KT_LAUNCH_NONE = 0,     /* the dispatch carries no configuration */
    KT_LAUNCH_ITEMS = 1,    /* OpenCL NDRange: size[] = global work-items per dimension, local[] = work-items per
                               work-group (all 0: the driver chose, local_work_size NULL); clEnqueueTask: 1 x 1 */
    KT_LAUNCH_GROUPS = 2,   /* groups x threads per group: size[] = groups per dimension (Vulkan group counts, CUDA
                               grid), local[] = threads per group (CUDA block; all 0: not known, e.g. a Vulkan
                               shader's local size) */
    KT_LAUNCH_INDIRECT = 3, /* sizes the device reads at execution (vkCmdDispatchIndirect, ...): unknown when
                               recorded; dims and sizes 0 */
    KT_LAUNCH_OTHER = 4     /* in snapshots only: every configuration past KT_LAUNCH_CONFIGS_MAX, added together;
                               a dispatch recorded with it (or a kind past it) counts as carrying none */
} kt_launch_kind_t;

/* Configurations kept per snapshot entry (and per recording thread and kernel); the rest are added into one
 * KT_LAUNCH_OTHER row, so every configured dispatch is counted in some row. */
#define KT_LAUNCH_CONFIGS_MAX 32

/* One launch configuration. Sizes past `dims` are ignored (kept as 0); two dispatches have the same configuration
 * when kind, dims and the sizes within dims are equal. A global offset is not part of it (the same work elsewhere
 * in the index space). */
typedef struct kt_launch_t {
    uint32_t kind;     /* kt_launch_kind_t; 0: no configuration */
    uint32_t dims;     /* dimensions given, 1..3 (0 with INDIRECT and OTHER); more than 3 keeps the first 3 */
    uint64_t size[3];  /* ITEMS: global work-items; GROUPS: groups (group counts, grid), per dimension */
    uint64_t local[3]; /* ITEMS: work-items per group, GROUPS: threads per group (block); all 0 = not given */
} kt_launch_t;

/* One dispatch, as a backend (or a user writing their own backend) hands it to the recorder. All
 * times are host-timeline ns (kt_now_ns domain); 0 means unknown. */
typedef struct kt_dispatch_t {
    kt_kernel_id_t kernel;   /* from kt_kernel_intern() */
    uint32_t queue;          /* from kt_queue_register(); 0 = the host thread's own track */
    uint32_t thread;         /* kt_thread_ordinal() of the thread that enqueued; 0 = the recording thread */
    uint32_t flags;          /* KT_SPAN_* */
    uint64_t duration_ns;    /* the duration aggregated (device END-START for device spans) */
    uint64_t enqueue_ns;     /* host time the enqueue call was made (flow arrow origin) */
    uint64_t queued_ns;      /* device QUEUED mapped to host */
    uint64_t submit_ns;      /* device SUBMIT mapped to host */
    uint64_t start_ns;       /* execution start on the host timeline */
    uint64_t end_ns;         /* execution end on the host timeline */
    uint64_t uncertainty_ns; /* error bound of start/end placement (clock model), 0 for host clocks */
    uint64_t bytes;          /* bytes the command moved (transfers), 0 for kernels */
    kt_launch_t launch;      /* its launch configuration; zero = none (kt_kernel_timing_t.configs) */
} kt_dispatch_t;

/* A recorded span as kept in a snapshot. */
typedef struct kt_span_t {
    uint32_t entry;          /* index into kt_snapshot_t.entries */
    uint32_t queue;          /* index into kt_snapshot_t.queues, or UINT32_MAX for a host-thread span */
    uint32_t thread;         /* index into kt_snapshot_t.threads (the enqueuing thread) */
    uint32_t flags;          /* KT_SPAN_* */
    uint64_t duration_ns;    /* as recorded */
    uint64_t enqueue_ns;     /* host time of the enqueue call, 0 if unknown */
    uint64_t queued_ns;      /* 0 if unknown */
    uint64_t submit_ns;      /* 0 if unknown */
    uint64_t start_ns;       /* host timeline */
    uint64_t end_ns;         /* host timeline */
    uint64_t uncertainty_ns; /* placement error bound */
} kt_span_t;

/* Device identity (issue 34, docs/devices.md): what a backend knows of a device, given once to kt_device_register.
 * Zero-initialise and fill what the API gives; every string is NUL-terminated text ("" = the API gave none). */
#define KT_DEVICE_KEY_MAX 128 /* bytes of a device key with its NUL (kt_device_register) */
typedef struct kt_device_id_t {
    char vendor[64];       /* vendor name as the API gives it ("NVIDIA Corporation", "Intel(R) Corporation") */
    char model[128];       /* model name as the API gives it ("NVIDIA H100 80GB HBM3"); required */
    char id_kind[16];      /* how stable the identity is: "uuid", "pci", "enumeration", "host", or "name" (a record
                              published by name only, not an identity). "" at registration: the core derives it
                              (uuid if set, else pci, else a sub-device's parent's kind, else "host" for the CPU,
                              else "enumeration") */
    char uuid[48];         /* device UUID as text: CUDA "GPU-8c1f..." / "MIG-...", OpenCL and Vulkan the 16 bytes as
                              8-4-4-4-12 lowercase hex */
    char pci[24];          /* PCI address "dddd:bb:dd.f" (domain:bus:device.function, lowercase hex) */
    char driver_uuid[48];  /* Vulkan driverUUID (8-4-4-4-12 hex); kept as a fact, not part of the key */
    char platform[64];     /* OpenCL platform name (part of the key: equal devices of two platforms stay apart) */
    char parent[KT_DEVICE_KEY_MAX]; /* a sub-device: its parent's key (register the parent first); "" for roots */
    int32_t partition;     /* a sub-device: its index among the sub-devices made from parent (with parent only) */
    int32_t ordinal;       /* enumeration index in this process (CUDA ordinal, OpenCL index over all platforms,
                              Vulkan physical-device index); -1 unknown. Changes with CUDA_VISIBLE_DEVICES */
} kt_device_id_t;

/* Clock facts and identity of one device, for reports. In a snapshot, `name` is the device's label: its model
 * plus the shortest suffix that makes it unique among the snapshot's devices of its backend ("NVIDIA H100 80GB
 * HBM3 #3", "... #3 (0000:41:00.0)"); entries and queues name their device by that label. */
typedef struct kt_device_info_t {
    kt_backend_t backend;      /* which API */
    char name[128];            /* device name as the API gives it; "host" for the CPU backend */
    char clock_domain[32];     /* detected time base: "CLOCK_MONOTONIC_RAW", "CLOCK_MONOTONIC", "CLOCK_REALTIME",
                                  "device" (own epoch, mapped by fit) or "unknown" */
    uint64_t resolution_ns;    /* timestamp resolution, 0 if unknown */
    uint64_t frequency_hz;     /* ticks per second, 0 if unknown */
    uint32_t valid_bits;       /* timestamp valid bits, 0 if unknown */
    uint64_t error_bound_ns;   /* current clock-model error bound, 0 for host clocks */
    double drift_ppm;          /* fitted drift against the host timeline */
    uint32_t model_samples;    /* samples in the current clock model, 0 if none */
    /* identity (kt_device_register; zero when publishing: the core fills them from the registered device) */
    char key[KT_DEVICE_KEY_MAX]; /* the device key: publish matches records by (backend, key); "" on publish
                                    means key = name (a device known by name only: id.id_kind "name") */
    kt_device_id_t id;         /* as registered; a snapshot without identity (older files): id.model = name,
                                  id_kind "name", ordinal and partition -1 */
    char host[64];             /* machine the device is in (filled by the core at snapshot time) */
    int32_t rank;              /* MPI-style rank of the process that used it, -1 if none (filled by the core) */
} kt_device_info_t;

/* A device queue / stream track for timelines. */
typedef struct kt_queue_info_t {
    kt_backend_t backend; /* which API */
    char device[128];     /* device: its key while recording (kt_queue_register), its label in a snapshot */
    char label[64];       /* e.g. "queue 0x55d0..." or "stream 1" */
    uint32_t source;      /* index into kt_snapshot_t.sources (0 when the snapshot has none) */
} kt_queue_info_t;

/* A host thread that recorded or enqueued. */
typedef struct kt_thread_info_t {
    uint64_t os_tid;  /* gettid() */
    char name[32];    /* pthread name if set */
    uint32_t source;  /* index into kt_snapshot_t.sources (0 when the snapshot has none) */
} kt_thread_info_t;

/* One process a merged snapshot holds data of (kt_snapshot_merge in ktiming/analysis.h, the MPI gather). Its
 * span times were moved onto the merged snapshot's timeline by adding offset_ns. */
typedef struct kt_source_info_t {
    char host[64];            /* machine name */
    int64_t pid;              /* process id, 0 if unknown */
    int32_t rank;             /* MPI-style rank, -1 if none */
    int64_t offset_ns;        /* added to this source's host times to put them on the merged timeline */
    uint64_t offset_bound_ns; /* error bound of offset_ns; UINT64_MAX: unknown (another host's clock, no sync) */
    char clock_domain[32];    /* the clock its host times were read from before the merge moved them
                                 (kt_snapshot_t.clock_domain); "" unknown */
} kt_source_info_t;

/* A reading of CLOCK_MONOTONIC paired with the host timeline, taken with a snapshot: what puts times of a
 * CLOCK_MONOTONIC timeline (the Node WebGPU package's) on this one (docs/json-schema.md, "Clock anchor"). */
typedef struct kt_clock_anchor_t {
    uint64_t host_ns;      /* the host timeline (kt_now_ns) at the anchor; 0 = no anchor */
    uint64_t monotonic_ns; /* CLOCK_MONOTONIC at that instant */
    uint64_t bound_ns;     /* error bound of the pair: how far monotonic_ns may be from CLOCK_MONOTONIC at the
                              instant host_ns was read, plus the host timeline's own bound against
                              CLOCK_MONOTONIC_RAW */
} kt_clock_anchor_t;

/* One source's share of a merged entry (fixed size per source and kernel, whatever the span count). */
typedef struct kt_source_total_t {
    uint32_t source;         /* index into kt_snapshot_t.sources */
    uint64_t dispatch_count; /* that source's successful dispatches of the kernel */
    uint64_t total_ns;       /* their summed duration (saturating) */
} kt_source_total_t;

/* One non-empty bucket of an entry's log-linear duration histogram (64 buckets per power of two, one per ns
 * below 128 ns): what merging snapshots needs to keep percentiles within their stated error. */
typedef struct kt_hist_bin_t {
    uint64_t lower_ns; /* lowest duration the bucket holds */
    uint64_t count;    /* dispatches in it */
} kt_hist_bin_t;

/* One launch configuration's share of an entry (kt_kernel_timing_t.configs). */
typedef struct kt_config_timing_t {
    kt_launch_t launch;      /* the configuration; kind KT_LAUNCH_OTHER: every one past KT_LAUNCH_CONFIGS_MAX */
    uint64_t dispatch_count; /* successful dispatches with it */
    uint64_t total_ns;       /* their summed duration (saturating at UINT64_MAX); mean = total_ns / dispatch_count */
    uint64_t min_ns;         /* shortest */
    uint64_t max_ns;         /* longest */
} kt_config_timing_t;

/* Statistics for one (kernel, backend, device), accumulated across dispatches. */
typedef struct kt_kernel_timing_t {
    const char *name;        /* kernel name (owned by the snapshot) */
    kt_backend_t backend;    /* API */
    const char *device;      /* device label (kt_device_info_t.name; owned by the snapshot); "host" for CPU */
    uint64_t dispatch_count; /* successful dispatches aggregated */
    uint64_t total_ns;       /* sum of durations, saturating at UINT64_MAX (584 years) instead of wrapping;
                                total128 is the exact sum */
    uint64_t min_ns;         /* 0 when dispatch_count is 0 */
    uint64_t max_ns;
    uint64_t last_ns;        /* most recent dispatch (latest end time; see the top of this file) */
    double mean_ns;          /* exact */
    double stddev_ns;        /* exact sample standard deviation (n-1 denominator), 0 under 2 dispatches; NaN
                                when the sum of squares passed 2^128 ns^2 (durations near 2^64 ns) */
    uint64_t p50_ns;         /* percentiles from a log-linear histogram, within 0.8 % relative error */
    uint64_t p90_ns;
    uint64_t p99_ns;
    uint64_t errors;         /* dispatches that ended in error (not in the aggregates) */
    uint64_t dropped;        /* dispatches lost entirely before reaching the recorder (a backend's full query
                                ring, kt_record_drop): not in the aggregates, counted so the loss is not silent */
    uint64_t spans_dropped;  /* dispatches whose span was not kept because the recording thread's span log was
                                full ("span log overflow"): the aggregates above still include them */
    uint32_t sample_count;   /* raw durations in samples[] (uniform reservoir over all dispatches) */
    uint64_t *samples;       /* owned by the snapshot */
    kt_u128_t total128;      /* exact sum of durations (ns) */
    kt_u128_t sumsq128;      /* exact sum of squared durations (ns^2): with total128 and dispatch_count, what an
                                exact merge of two snapshots needs for the sample stddev */
    uint64_t bytes;          /* bytes moved by the successful dispatches (transfers); 0 for kernels */
    uint64_t dropped_by[KT_DROP_REASON_COUNT]; /* `dropped` split by reason (kt_drop_reason_t); sums to dropped */
    char last_error[48];     /* name of the most recent error (e.g. "CL_INVALID_WORK_GROUP_SIZE"), "" if none
                                named; `errors` counts them all */
    uint32_t hist_count;     /* non-empty histogram buckets in hist[] (0: none, e.g. a version-1 file) */
    kt_hist_bin_t *hist;     /* the histogram behind p50/p90/p99, ascending (owned by the snapshot) */
    uint32_t by_source_count; /* entries in by_source[] (a merged snapshot; 0 otherwise) */
    kt_source_total_t *by_source; /* this kernel's count and total per source, ascending by source (owned by the
                                     snapshot): what per-rank load balance is computed from */
    uint32_t config_count;   /* rows in configs[] (0: no dispatch carried a launch configuration) */
    kt_config_timing_t *configs; /* the breakdown by launch configuration (owned by the snapshot): largest total
                                    first, at most KT_LAUNCH_CONFIGS_MAX rows and then one KT_LAUNCH_OTHER row;
                                    counts dispatches that carried one (their sum <= dispatch_count) */
} kt_kernel_timing_t;

/* A merged, immutable view of everything recorded. Memory contract (shared by kt_snapshot() and the loader in
 * ktiming/analysis.h): the struct, each array, and each entry's name, device, samples, hist, by_source and configs are
 * separate malloc blocks (NULL when empty), released by kt_snapshot_free(). */
typedef struct kt_snapshot_t {
    size_t count;                 /* entries */
    kt_kernel_timing_t *entries;  /* sorted by name, then backend, then device */
    size_t span_count;
    kt_span_t *spans;             /* sorted by start_ns */
    size_t queue_count;
    kt_queue_info_t *queues;
    size_t thread_count;
    kt_thread_info_t *threads;
    size_t device_count;
    kt_device_info_t *devices;
    uint64_t taken_ns;            /* host time the snapshot was taken */
    char host[64];                /* machine name */
    int64_t pid;                  /* process that recorded it; 0 if unknown (older snapshots) or a merge (see
                                     sources) */
    int32_t rank;                 /* MPI-style rank of that process (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK,
                                     SLURM_PROCID), -1 if none */
    uint64_t kernels_dropped;     /* records lost because their kernel could not be interned (kernel table
                                     full, see kt_kernel_intern): counted, never silent */
    size_t source_count;          /* processes a merged snapshot holds (0: one process, the one above) */
    kt_source_info_t *sources;    /* threads and queues name theirs by index */
    uint64_t names_truncated;     /* kernels whose name passed 4,096 bytes: kept as its first bytes and
                                     "...[truncated]" (names alike in those bytes share an entry) */
    char ended[48];               /* how the program ended when it died before writing its snapshot ("signal 11",
                                     "exit 3 via _exit"; docs/run.md), "" when it wrote it itself */
    char clock_domain[32];        /* clock of the host times: "CLOCK_MONOTONIC_RAW" (ktiming), "CLOCK_MONOTONIC"
                                     (the Node WebGPU package), ...; "" unknown (files before it was written) */
    kt_clock_anchor_t clock_anchor; /* CLOCK_MONOTONIC paired with the host timeline when the snapshot was taken
                                       (host_ns 0: none) */
} kt_snapshot_t;

/* Output formats. */
typedef enum kt_format_t {
    KT_FORMAT_TEXT = 0,   /* the [timing] table: one line per kernel with its statistics */
    KT_FORMAT_CSV = 1,    /* one row per entry, header first */
    KT_FORMAT_JSON = 2,   /* versioned schema, docs/json-schema.md */
    KT_FORMAT_CHROME = 3, /* Chrome trace / Perfetto JSON from spans */
    KT_FORMAT_HTML = 4,   /* self-contained HTML report */
    KT_FORMAT_MARKDOWN = 5, /* the text table as a GitHub-flavoured markdown table */
    KT_FORMAT_LINES = 6     /* the grep-friendly seed format, one line per kernel:
                               [timing] blur                 CPU   avg=  12.34ms min=  11.98ms max=  14.02ms n=3 */
} kt_format_t;

/* Row order of the text, markdown and CSV reports. */
typedef enum kt_sort_t {
    KT_SORT_TOTAL = 0, /* total time, largest first (the default) */
    KT_SORT_NAME = 1,  /* name, then backend, then device (the snapshot's order) */
    KT_SORT_MEAN = 2,  /* mean time per dispatch, largest first */
    KT_SORT_COUNT = 3  /* dispatch count, largest first */
} kt_sort_t;

/* Options of kt_report_print / kt_report_write (NULL or zero-initialised = the defaults). */
typedef struct kt_report_opts_t {
    kt_sort_t sort;     /* row order of text, markdown and CSV */
    const char *filter; /* fnmatch(3) glob on kernel names for text, markdown and CSV rows; NULL = every kernel */
    int by_api;         /* text and markdown: first the total time per API (the `ktiming run` summary) */
    int by_config;      /* text, markdown, lines and CSV: a row per kernel and launch configuration (configs[]) */
} kt_report_opts_t;

/* Host-clock timer with the same interface as the GPU timers (kt_cuda_timer_t).
 * start() begins an interval; elapsed_ms() while running is the time since the last start() (so it can be
 * read repeatedly: cumulative time since start); stop() freezes the interval and elapsed_ms() then returns
 * start→stop. A timer never started reads 0. */
typedef struct kt_cpu_timer_t {
    uint64_t start_ns; /* host time of the last start() */
    uint64_t stop_ns;  /* host time of the last stop(), 0 while running */
    int running;       /* 1 between start() and stop() */
} kt_cpu_timer_t;

/* A CPU zone in flight (from KT_CPU_BEGIN / kt_zone_begin). */
typedef struct kt_zone_t {
    kt_kernel_id_t kernel; /* 0 when recording was disabled at begin */
    uint64_t start_ns;     /* host time at begin */
} kt_zone_t;

/* Row function for kt_cpu_dispatch_2d: processes rows [y0, y1) of a width-wide image. */
typedef void (*kt_cpu_rows_cb)(uint32_t y0, uint32_t y1, uint32_t width, void *user);

#define KT_SPANS_DEFAULT 16384u

/* ---------------------------------------------------------------------------------------------------
 * Functions (compiled in)
 * ------------------------------------------------------------------------------------------------- */
#if KT_ENABLED

KT_API int kt_init(const kt_desc_t *desc); /* optional; KT_ESTATE if already initialised */
KT_API void kt_shutdown(void);             /* flushes backends; further records are dropped until kt_init */
KT_API void kt_flush(void);                /* collect every outstanding GPU completion into the recorder now */
KT_API const char *kt_strerror(int err);
KT_API const char *kt_err_name(int err); /* "KT_EINVAL", ..., "KT_OK"; "KT_E?" for an unknown code */
KT_API const char *kt_backend_name(kt_backend_t backend); /* "CPU", "OpenCL", "Vulkan", "CUDA", "Metal", "WebGPU",
                                                            "host-api" */
KT_API const char *kt_version(void);

/* Recording control (enabled by default). */
KT_API void kt_enable(void);
KT_API void kt_disable(void);
KT_API int kt_is_enabled(void);
KT_API void kt_reset(void); /* clears aggregates, samples and spans (waits for a snapshot in progress); ids stay */

/* Recording. */
KT_API void kt_record(const char *name, kt_backend_t backend, uint64_t elapsed_ns);
/* Names past 4,096 bytes are kept as their first bytes and "...[truncated]" (counted in names_truncated); no
 * call reads more than 4,097 bytes of a name. A byte that is not UTF-8 is kept as U+FFFD and the byte in two
 * hex digits ("k\xff" is kernel "k\uFFFDFF"; docs/json-schema.md). */
KT_API kt_kernel_id_t kt_kernel_intern(const char *name, kt_backend_t backend, const char *device);
/* One dispatch: aggregated (duration_ns), plus a span when start_ns or end_ns is set. With KT_SPAN_ERROR it
 * counts in `errors` instead of the aggregates (its span is still kept, flagged). */
KT_API void kt_record_dispatch(const kt_dispatch_t *d);
/* A dispatch lost before it could be timed, and why: counted in `dropped` and dropped_by[reason] (a reason out of
 * range counts as KT_DROP_UNSPECIFIED). */
KT_API void kt_record_drop(kt_kernel_id_t kernel, kt_drop_reason_t reason);
/* A dispatch that failed: counted in `errors`; error_name, the API's name for the error (copied), becomes the
 * entry's last_error (NULL or "": none named). */
KT_API void kt_record_error(kt_kernel_id_t kernel, const char *error_name);
KT_API const char *kt_drop_reason_name(kt_drop_reason_t reason); /* "ring full", ...; "unknown" if out of range */
KT_API uint32_t kt_queue_register(kt_backend_t backend, const char *device, const char *label);
KT_API uint32_t kt_thread_ordinal(void); /* stable small number for the calling thread, from 1 */
/* Backends publish clock facts for reports: the record of (backend, key) is replaced, keeping its registered
 * identity; an empty key means key = name. */
KT_API void kt_device_publish(const kt_device_info_t *info);
/* Registers a device's identity once (docs/devices.md) and returns its key: the string a backend passes as
 * `device` to kt_kernel_intern and kt_queue_register and copies into kt_device_info_t.key when publishing, so
 * entries, queues, clock facts and device records are keyed by identity, never by name. The key is derived from
 * the strongest id: "uuid:<uuid>", "pci:<pci>", "enumeration:<ordinal>:<model>", a sub-device "<parent key>/<partition>",
 * with "@<platform>" appended where a platform is set; at most KT_DEVICE_KEY_MAX - 1 bytes. The same identity
 * always gives the same pointer, valid until the process exits. NULL: backend out of range, id NULL, empty
 * model, or the table is full (1,024 devices) / out of memory; the caller then passes the model name. */
KT_API const char *kt_device_register(kt_backend_t backend, const kt_device_id_t *id);
/* The snapshot's device record that `device` names: its label (kt_device_info_t.name) or its key; NULL if none. */
KT_API const kt_device_info_t *kt_snapshot_device(const kt_snapshot_t *snap, kt_backend_t backend,
                                                  const char *device);

/* Host clock. */
KT_API uint64_t kt_now_ns(void);            /* CLOCK_MONOTONIC_RAW in ns (from the host counter, see above) */
KT_API uint64_t kt_clock_resolution_ns(void);
KT_API double kt_clock_read_cost_ns(void);  /* measured once, cached */

/* Snapshots. */
KT_API kt_snapshot_t *kt_snapshot(void);
KT_API void kt_snapshot_free(kt_snapshot_t *snap);
/* The entry for (name, backend, device); device is a label or a key (kt_snapshot_device); NULL matches the first
 * entry of any device. */
KT_API const kt_kernel_timing_t *kt_snapshot_find(const kt_snapshot_t *snap, const char *name,
                                                  kt_backend_t backend, const char *device);
/* Prints the report in `format`; opts: row order, name filter, per-API block (NULL = the defaults). 0, KT_EINVAL,
 * KT_EIO. */
KT_API int kt_report_print(FILE *out, const kt_snapshot_t *snap, kt_format_t format, const kt_report_opts_t *opts);
/* Writes the report to path atomically (a temporary file beside it, then rename), as kt_report_print would print
 * it (opts NULL = the defaults). On KT_EIO errno holds the system's reason (strerror(errno): "No such file or
 * directory", "Permission denied", ...). */
KT_API int kt_report_write(const char *path, const kt_snapshot_t *snap, kt_format_t format,
                           const kt_report_opts_t *opts);
/* Expands an output path template as KTIMING_OUTPUT / KTIMING_TRACE / `ktiming run -o` do: %p the pid (pid < 0:
 * the calling process's), %h the host name, %r the MPI-style rank (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK,
 * SLURM_PROCID; 0 without one), %% a '%'; anything else is kept. 0, KT_EINVAL, or KT_EFULL (out too small). */
KT_API int kt_path_expand(const char *tmpl, long pid, char *out, size_t size);
/* Self-contained HTML report of `after` with a speedup view against `before` (NULL: a plain report).
 * compare_json: the JSON `ktiming compare` writes (ktiming/compare.h, KT_COMPARE_JSON), shown with its
 * verdicts and confidence intervals; NULL: ratios of sample medians without verdicts. 0, KT_EINVAL, KT_EIO. */
KT_API int kt_report_compare_html(FILE *out, const kt_snapshot_t *before, const kt_snapshot_t *after,
                                  const char *compare_json);

/* CPU backend. */
KT_API kt_zone_t kt_zone_begin(kt_kernel_id_t *site_cache, const char *name);
KT_API void kt_zone_end(const kt_zone_t *zone);
KT_API void kt_cpu_timer_start(kt_cpu_timer_t *t);
KT_API void kt_cpu_timer_stop(kt_cpu_timer_t *t);
KT_API double kt_cpu_timer_elapsed_ms(const kt_cpu_timer_t *t);
/* Runs fn over bands of rows [y0, y1) covering 0..height exactly once, on a persistent pool (the caller works
 * too), and returns when all are done: one dispatch of `name` (CPU, "host") with its span. Width or height 0:
 * nothing runs, nothing is recorded, returns 0. fn or name NULL: KT_EINVAL. The pool runs one dispatch at a
 * time; a concurrent call, or one made from inside fn, runs its rows on the calling thread instead. */
KT_API int kt_cpu_dispatch_2d(const char *name, uint32_t width, uint32_t height, kt_cpu_rows_cb fn, void *user);
KT_API int kt_cpu_threads(void); /* pool size (env KTIMING_CPU_THREADS, default: online cores) */

/* Runtime switch read inline by the macros, so a runtime-disabled zone costs a load and a branch. Written only
 * by kt_enable / kt_disable / kt_init / kt_shutdown; read it through kt_is_enabled(). */
extern KT_API int kt__recording;
#if defined(__GNUC__)
#define KT__ON() __atomic_load_n(&kt__recording, __ATOMIC_RELAXED)
#else
#define KT__ON() kt_is_enabled()
#endif
static inline kt_zone_t kt__zone_none(void) { kt_zone_t z = {0, 0}; return z; }
/* kt_zone_end taking the zone by value, for KT_CPU_END: the zone never has its address taken, so it stays in
 * registers and a runtime-disabled zone folds to one load and a branch. */
KT_API void kt__zone_end_id(kt_kernel_id_t kernel, uint64_t start_ns);
/* kt_record with the id cached in *site (a zero-initialised static at the call site), for KT_RECORD. */
KT_API void kt__record_site(kt_kernel_id_t *site, const char *name, kt_backend_t backend, uint64_t elapsed_ns);

/* Scoped CPU zone. `name` must be the same string every time this site runs (it is interned once; a debug build
 * or KTIMING_CHECK=1 says so on stderr when it varies). For a name that varies, kt_zone_begin(NULL, name). */
#define KT_CPU_BEGIN(zone, name)                                                                           \
    static kt_kernel_id_t zone##_kt_site_ = 0;                                                             \
    kt_zone_t zone = KT__ON() ? kt_zone_begin(&zone##_kt_site_, (name)) : kt__zone_none()
#define KT_CPU_END(zone)                                                                                   \
    do {                                                                                                   \
        if ((zone).kernel) kt__zone_end_id((zone).kernel, (zone).start_ns);                                \
    } while (0)
/* Record a precomputed duration with a per-call-site cached id (no string hashing after the first call).
 * `name` must be the same string every time this site runs. */
#define KT_RECORD(name, backend, elapsed_ns)                                                               \
    do {                                                                                                   \
        static kt_kernel_id_t kt_site_id_ = 0;                                                             \
        if (KT__ON()) kt__record_site(&kt_site_id_, (name), (backend), (elapsed_ns));                      \
    } while (0)

#else /* !KT_ENABLED: everything is a no-op, types stay */

static inline int kt_init(const kt_desc_t *desc) { (void)desc; return 0; }
static inline void kt_shutdown(void) {}
static inline void kt_flush(void) {}
static inline const char *kt_strerror(int err) { (void)err; return "ktiming compiled out"; }
static inline const char *kt_err_name(int err) { (void)err; return "KT_EDISABLED"; }
static inline const char *kt_backend_name(kt_backend_t backend) { (void)backend; return ""; }
static inline const char *kt_version(void) { return KT_VERSION_STRING; }
static inline void kt_enable(void) {}
static inline void kt_disable(void) {}
static inline int kt_is_enabled(void) { return 0; }
static inline void kt_reset(void) {}
static inline void kt_record(const char *name, kt_backend_t backend, uint64_t elapsed_ns)
{ (void)name; (void)backend; (void)elapsed_ns; }
static inline kt_kernel_id_t kt_kernel_intern(const char *name, kt_backend_t backend, const char *device)
{ (void)name; (void)backend; (void)device; return 0; }
static inline void kt_record_dispatch(const kt_dispatch_t *d) { (void)d; }
static inline void kt_record_drop(kt_kernel_id_t kernel, kt_drop_reason_t reason) { (void)kernel; (void)reason; }
static inline void kt_record_error(kt_kernel_id_t kernel, const char *error_name) { (void)kernel; (void)error_name; }
static inline const char *kt_drop_reason_name(kt_drop_reason_t reason) { (void)reason; return ""; }
static inline uint32_t kt_queue_register(kt_backend_t backend, const char *device, const char *label)
{ (void)backend; (void)device; (void)label; return 0; }
static inline uint32_t kt_thread_ordinal(void) { return 0; }
static inline void kt_device_publish(const kt_device_info_t *info) { (void)info; }
static inline const char *kt_device_register(kt_backend_t backend, const kt_device_id_t *id)
{ (void)backend; (void)id; return NULL; }
static inline const kt_device_info_t *kt_snapshot_device(const kt_snapshot_t *snap, kt_backend_t backend,
                                                         const char *device)
{ (void)snap; (void)backend; (void)device; return NULL; }
static inline uint64_t kt_now_ns(void) { return 0; }
static inline uint64_t kt_clock_resolution_ns(void) { return 0; }
static inline double kt_clock_read_cost_ns(void) { return 0.0; }
static inline kt_snapshot_t *kt_snapshot(void) { return NULL; }
static inline void kt_snapshot_free(kt_snapshot_t *snap) { (void)snap; }
static inline const kt_kernel_timing_t *kt_snapshot_find(const kt_snapshot_t *snap, const char *name,
                                                         kt_backend_t backend, const char *device)
{ (void)snap; (void)name; (void)backend; (void)device; return NULL; }
static inline int kt_report_print(FILE *out, const kt_snapshot_t *snap, kt_format_t format,
                                  const kt_report_opts_t *opts)
{ (void)out; (void)snap; (void)format; (void)opts; return KT_EDISABLED; }
static inline int kt_report_write(const char *path, const kt_snapshot_t *snap, kt_format_t format,
                                  const kt_report_opts_t *opts)
{ (void)path; (void)snap; (void)format; (void)opts; return KT_EDISABLED; }
static inline int kt_path_expand(const char *tmpl, long pid, char *out, size_t size)
{ (void)tmpl; (void)pid; (void)out; (void)size; return KT_EDISABLED; }
static inline int kt_report_compare_html(FILE *out, const kt_snapshot_t *before, const kt_snapshot_t *after,
                                         const char *compare_json)
{ (void)out; (void)before; (void)after; (void)compare_json; return KT_EDISABLED; }
static inline kt_zone_t kt_zone_begin(kt_kernel_id_t *site_cache, const char *name)
{ kt_zone_t z = {0, 0}; (void)site_cache; (void)name; return z; }
static inline void kt_zone_end(const kt_zone_t *zone) { (void)zone; }
static inline void kt_cpu_timer_start(kt_cpu_timer_t *t) { (void)t; }
static inline void kt_cpu_timer_stop(kt_cpu_timer_t *t) { (void)t; }
static inline double kt_cpu_timer_elapsed_ms(const kt_cpu_timer_t *t) { (void)t; return 0.0; }
static inline int kt_cpu_dispatch_2d(const char *name, uint32_t width, uint32_t height, kt_cpu_rows_cb fn, void *user)
{ (void)name; if (fn && width && height) fn(0, height, width, user); return 0; }
static inline int kt_cpu_threads(void) { return 1; }

#define KT_CPU_BEGIN(zone, name)
#define KT_CPU_END(zone)
#define KT_RECORD(name, backend, elapsed_ns)

#endif /* KT_ENABLED */

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_H */
