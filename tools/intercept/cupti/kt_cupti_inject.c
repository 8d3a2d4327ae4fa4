/* kt_cupti_inject.c — CUDA injection library (CUDA_INJECTION64_PATH): the driver calls InitializeInjection() when
 * a CUDA program initialises; CUPTI's activity API then delivers a record per kernel, memory copy and memset with
 * GPU start/end times, recorded into ktiming. KTIMING_OUTPUT / KTIMING_REPORT / KTIMING_TRACE then write the
 * results at exit, and under `ktiming run` (KTIMING_RUN_DIR) the process's snapshot goes to
 * KTIMING_RUN_DIR/<pid>.json. Without a usable driver/CUPTI, InitializeInjection returns 0 and nothing is written.
 *
 * Clock: CUPTI stamps with CLOCK_REALTIME on Linux, which NTP steps. The library registers a timestamp callback
 * (cuptiActivityRegisterTimestampCallback) returning ktiming's host clock (CLOCK_MONOTONIC_RAW), so records are
 * on the host timeline as delivered; only a CUPTI without that entry point falls back to a model fitted on
 * cuptiGetTimestamp() reads (refitted every second, so a step misplaces at most the records in between).
 * Delivery: CUPTI's own flush period returns only FULL buffers, so a slow program's records would wait in CUPTI
 * until exit, and SIGKILL, abort, _exit or MPI_Abort would lose them. A flusher thread therefore calls
 * cuptiActivityFlushAll(0) every KTIMING_CUPTI_FLUSH_MS (default 100 ms), as the header advises. That flush returns
 * no buffer holding a record still in flight, and CUPTI fills a buffer in order, so: completed records reach the
 * recorder within that period unless they share a buffer with a command still running; a buffer takes at most 128
 * records (KT_CUPTI_BUFFER_RECORDS), so a running command holds back at most 127 completed ones, until it ends or
 * the exit flush. At exit everything is flushed (forced).
 * A child forked without exec makes no CUPTI call and records nothing CUPTI hands it (its parent's records): its
 * exit writes what it timed itself. Latency timestamps (queued, submitted) are on. Records CUPTI could not time
 * (start = end = 0) are counted as dropped ("no timing"), not recorded as 0 ns. C++ kernel names are demangled
 * with the C++ runtime's __cxa_demangle, looked up at run time (libstdc++.so.6 is loaded for it in C programs).
 * Records CUPTI dropped for lack of buffer space are counted per process under "(CUPTI records dropped)": CUPTI
 * counts them in its one global queue. Tracks are keyed by (context, stream): CUPTI's stream ids repeat across
 * contexts. Context destruction (cuCtxDestroy, or cuDevicePrimaryCtxReset behind cudaDeviceReset): a CUPTI
 * resource callback at CONTEXT_DESTROY_STARTING flushes completed records (flag 0: a forced flush would hand over
 * other contexts' still running commands as untimed) while the context still exists; no handle of the context is
 * kept (records carry CUPTI's ids). CUPTI allows one callback subscriber and one set of activity callbacks: when
 * another client (Nsight, Kineto / torch.profiler) holds the subscription, or later replaces the activity
 * callbacks, the library says so once on stderr, and buffers CUPTI never returned are counted, one drop a buffer
 * of up to 128 records ("(CUPTI buffers taken by another client)") rather than left as a silent zero; a takeover
 * while no buffer of the library's is out cannot be seen (CUPTI says nothing of it). Peer-to-peer copies (MEMCPY2
 * records) are timed as "memcpy PtoP". Graphs (KTIMING_CUPTI_GRAPHS): `graph` (default) enables
 * CUPTI_ACTIVITY_KIND_GRAPH_TRACE, so each graph launch is one dispatch, "graph <id>" on its stream, and CUPTI
 * then reports none of the graph's nodes; `node` leaves it off: the kernels, copies and memsets inside graphs
 * are recorded one by one. A CUPTI that refuses GRAPH_TRACE (before CUDA 11.7) gives node mode. Tested against a
 * CUPTI test double, and on a GPU by tests/gpu/run.sh (docs/cuda.md). Host API time: the same subscription's
 * driver/runtime API callbacks time cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize and the runtime's
 * cuda{Device,Stream,Event}Synchronize as host-api zones on the calling thread (docs/cli.md), the outermost call
 * only; without the subscription (KTIMING_CUPTI_SUBSCRIBE=0, or another client holds it) there is none. Each
 * kernel dispatch carries its launch configuration (grid, block) from the record (issue 40.2). */
#include <cupti.h>

#include "shim/kti_run.h"
#include "core/env.h"
#include "shared/clock_anchor.h"
#include "shared/cupti_subscribe.h"
#include "shared/deadline.h"
#include "shared/tool.h"

#include <ktiming.h>
#include <ktiming/clock_model.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Records a buffer takes (buffer_requested's max_records). CUPTI fills a buffer with records in order, and a
 * flag-0 flush does not return a buffer holding a record still in flight (cupti_activity.h, cuptiActivityFlushAll):
 * a long-running kernel (a persistent one, one spinning on a host flag, a blocked NCCL kernel) holds back every
 * completed record of its buffer until it ends, and a SIGKILL meanwhile loses them. CUPTI returns a buffer once it
 * holds max_records, so that kernel holds back at most KT_CUPTI_BUFFER_RECORDS - 1 completed records, where a
 * 1 MiB buffer filled as far as it goes held back ~4.8k. The cost is a buffer request and return (an allocation,
 * a free, two callbacks) per 128 records instead of per ~4.8k: small beside the per-record work (a lock and a
 * dispatch recorded each), and a 27 KiB buffer comes from the heap where a 1 MiB one was an mmap and munmap. */
#define KT_CUPTI_BUFFER_RECORDS 128u
/* Sized to hold that many of the largest record the library enables (a kernel's), so no space is left unused. */
#define KT_CUPTI_BUFFER_BYTES (KT_CUPTI_BUFFER_RECORDS * sizeof(CUpti_ActivityKernel10))
_Static_assert(sizeof(CUpti_ActivityMemcpy6) <= sizeof(CUpti_ActivityKernel10), "a kernel record is the largest");
_Static_assert(sizeof(CUpti_ActivityMemcpyPtoP4) <= sizeof(CUpti_ActivityKernel10), "a kernel record is the largest");
_Static_assert(sizeof(CUpti_ActivityMemset4) <= sizeof(CUpti_ActivityKernel10), "a kernel record is the largest");
_Static_assert(sizeof(CUpti_ActivityGraphTrace2) <= sizeof(CUpti_ActivityKernel10), "a kernel record is the largest");
_Static_assert(sizeof(CUpti_ActivityDevice5) <= sizeof(CUpti_ActivityKernel10), "a kernel record is the largest");
_Static_assert(sizeof(CUpti_ActivityKernel10) % 8 == 0, "aligned_alloc's size is a multiple of its alignment");
#define KT_CUPTI_SAMPLES 32
#define KT_CUPTI_MAX_DEVICES 64
/* Refit the CUPTI-clock model (fallback only) when it is older than this. */
#define KT_CUPTI_REFIT_NS 1000000000ull
/* Bound on a record's placement when CUPTI already stamped it with ktiming's host clock: CUPTI reads GPU
 * timestamps and converts them to the host clock by interpolating between its own CPU-GPU sync points, so a record
 * is never exact. 1 us is the assumed bound; tests/gpu/run.sh (cupti-bracket) checks every CUPTI span against the
 * host's bracket around its launch and completion on a real GPU. */
#define KT_CUPTI_CONVERSION_NS 1000u
/* Default flush period (ms). */
#define KT_CUPTI_FLUSH_MS 100u

/* ---------------------------------------------------------------------------------------------------
 * CUPTI, loaded at start-up
 *
 * The library does not link libcupti: no DT_NEEDED and no RUNPATH into the CUDA toolkit (a package cannot know
 * where the machine's toolkit is, and a missing libcupti would make the driver's dlopen of this library fail with
 * no word from ktiming). InitializeInjection dlopens KTIMING_CUPTI_LIBRARY when it is set, else the soname
 * (KT_CUPTI_SONAME, libcupti.so.13 for CUDA 13) as the dynamic loader finds it — a copy the program already
 * loaded (Kineto's), LD_LIBRARY_PATH, ldconfig's cache, where the toolkit's packages register their lib
 * directory — else the toolkit's copy the library was built against. When none loads it says which library is
 * missing and what driver that CUPTI needs, and times nothing.
 * ------------------------------------------------------------------------------------------------- */

/* The entry points every CUPTI since the oldest the library supports has. */
#define KT_CUPTI_REQUIRED(X)                                                                                   \
    X(cuptiActivityRegisterCallbacks) X(cuptiActivityEnable) X(cuptiActivityFlushAll)                         \
    X(cuptiActivityGetNextRecord) X(cuptiActivityGetNumDroppedRecords) X(cuptiGetResultString)                \
    X(cuptiGetTimestamp) X(cuptiSubscribe) X(cuptiUnsubscribe) X(cuptiEnableCallback) X(cuptiGetVersion)
/* Newer ones: used when present. */
#define KT_CUPTI_OPTIONAL(X) X(cuptiActivityRegisterTimestampCallback) X(cuptiActivityEnableLatencyTimestamps)

#define KT_CUPTI_POINTER(f) __typeof__(f) *f;
static struct {
    KT_CUPTI_REQUIRED(KT_CUPTI_POINTER)
    KT_CUPTI_OPTIONAL(KT_CUPTI_POINTER)
    /* CUPTI 13's named subscription (shared/cupti_subscribe.h mirrors its parameters, so older headers build) */
    CUptiResult (*cuptiSubscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                                     kt__cupti_subscriber_params_t *);
} K; /* CUPTI's entry points, from kt_cupti_load */
#undef KT_CUPTI_POINTER

/* The first Linux driver branch of a CUDA major version (its x.0 release), for the messages; NULL if unknown. */
static const char *driver_floor(int cuda_major)
{
    switch (cuda_major) {
    case 11: return "R450";
    case 12: return "R525";
    case 13: return "R580";
    default: return NULL;
    }
}

/* What this library needs, for the messages: "CUDA 13.0's CUPTI, which needs a driver for CUDA 13.0 or newer (R580
 * or newer)". */
static void needs_text(char *out, size_t size)
{
    const char *floor = driver_floor(CUDA_VERSION / 1000);
    char branch[32] = "";
    if (floor)
        snprintf(branch, sizeof branch, ", %s or newer", floor);
    snprintf(out, size, "CUDA %d.%d's CUPTI, which needs an NVIDIA driver for CUDA %d.0 or newer%s", CUDA_VERSION / 1000,
             (CUDA_VERSION % 1000) / 10, CUDA_VERSION / 1000, branch);
}

/* The CUDA major version a CUPTI API version (cuptiGetVersion, CUPTI_API_VERSION) belongs to, per
 * cupti_version.h: 13 to 18 CUDA 11, 19 to 28 CUDA 12, from CUDA 13 on xxyyzz (xx the major); 0 before CUDA 11. */
static int cupti_cuda_major(uint32_t v)
{
    if (v >= 10000)
        return (int)(v / 10000);
    return v >= 19 ? 12 : v >= 13 ? 11 : 0;
}

/* "CUPTI API version <v> (CUDA <major>)" */
static void cupti_version_text(uint32_t v, char *out, size_t size)
{
    int major = cupti_cuda_major(v);
    if (major)
        snprintf(out, size, "CUPTI API version %u (CUDA %d)", v, major);
    else
        snprintf(out, size, "CUPTI API version %u (before CUDA 11)", v);
}

/* The loaded CUPTI belongs to the CUDA major version this library was built against: the activity records it
 * reads (CUpti_ActivityKernel10, ...) are laid out as that version's headers say, and another major's differ. 0,
 * or -1 after saying so. */
static int kt_cupti_same_major(const char *name)
{
    uint32_t v = 0;
    if (K.cuptiGetVersion(&v) != CUPTI_SUCCESS || cupti_cuda_major(v) == cupti_cuda_major(CUPTI_API_VERSION))
        return 0;
    char have[64], built[64];
    cupti_version_text(v, have, sizeof have);
    cupti_version_text(CUPTI_API_VERSION, built, sizeof built);
    fprintf(stderr, "ktiming-cupti: %s is %s, but this library was built against %s, whose activity records are "
                    "laid out differently; nothing is timed. Set KTIMING_CUPTI_LIBRARY to a CUDA %d CUPTI (%s), or "
                    "build the library with the toolkit of the CUPTI you use\n",
            name, have, built, cupti_cuda_major(CUPTI_API_VERSION), KT_CUPTI_SONAME);
    return -1;
}

/* Loads CUPTI and resolves K; 0, or -1 after saying on stderr why nothing will be timed. */
static int kt_cupti_load(void)
{
    char needs[160], err[400] = "";
    needs_text(needs, sizeof needs);
    const char *path = kt__env(KT_ENV_NAME(CUPTI_LIBRARY));
    int by_soname = !(path && path[0]);
    const char *name = by_soname ? KT_CUPTI_SONAME : path;
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(err, sizeof err, "%s", e ? e : "not found");
        if (by_soname) /* the toolkit this library was built against, if it is here */
            lib = dlopen(KT_CUPTI_TOOLKIT_COPY, RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
        fprintf(stderr, "ktiming-cupti: cannot load %s (%s); nothing is timed. This library needs %s: put the "
                        "directory of %s on LD_LIBRARY_PATH, or set KTIMING_CUPTI_LIBRARY to its path\n",
                name, err, needs, KT_CUPTI_SONAME);
        return -1;
    }
    const char *missing = NULL;
#define KT_CUPTI_RESOLVE(f)                                                                                    \
    if (!(*(void **)&K.f = dlsym(lib, #f)) && !missing)                                                        \
        missing = #f;
    KT_CUPTI_REQUIRED(KT_CUPTI_RESOLVE)
#undef KT_CUPTI_RESOLVE
    if (missing)
        fprintf(stderr, "ktiming-cupti: %s has no %s; nothing is timed. This library needs %s\n", name, missing,
                needs);
    if (missing || kt_cupti_same_major(name) != 0) {
        memset(&K, 0, sizeof K);
        dlclose(lib);
        return -1;
    }
#define KT_CUPTI_RESOLVE_OPTIONAL(f) *(void **)&K.f = dlsym(lib, #f);
    KT_CUPTI_OPTIONAL(KT_CUPTI_RESOLVE_OPTIONAL)
#undef KT_CUPTI_RESOLVE_OPTIONAL
    *(void **)&K.cuptiSubscribe_v2 = dlsym(lib, "cuptiSubscribe_v2");
    return 0; /* kept loaded for the process's life: CUPTI calls back into this library until exit */
}

/* A (context, stream) track registered with the recorder. */
typedef struct kt_cupti_queue_t {
    uint32_t context;  /* CUPTI context id */
    uint32_t stream;   /* CUPTI stream id */
    uint32_t queue_id; /* kt_queue_register */
    int used;          /* slot taken */
} kt_cupti_queue_t;

/* A kernel name as CUPTI gave it and the id of its demangled form on one device. Keyed by the name's text (its
 * hash, then a compare), not CUPTI's pointer: a program that unloads and reloads modules (Triton, Inductor) can
 * get the same address back for another kernel. */
typedef struct kt_cupti_name_t {
    char *raw;             /* copy of CUPTI's name */
    uint64_t hash;         /* its FNV-1a hash */
    uint32_t device;       /* CUPTI device id */
    kt_kernel_id_t id;     /* interned demangled name */
} kt_cupti_name_t;

typedef char *(*kt_cupti_demangle_fn)(const char *mangled, char *out, size_t *len, int *status);

static struct {
    pthread_mutex_t lock;                          /* everything below; held into CUPTI only for cuptiGetTimestamp
                                                      (the fallback model), never for a call that delivers */
    int initialized;                               /* InitializeInjection succeeded (g_init_lock) */
    pid_t pid;                                     /* the process that initialised: CUPTI is its alone */
    int host_stamps;                               /* the timestamp callback is in force: stamps are host ns */
    kt_clock_model_t model;                        /* fallback: CUPTI timestamps → host timeline */
    int model_valid;                               /* model usable */
    char devices[KT_CUPTI_MAX_DEVICES][KT_DEVICE_KEY_MAX]; /* device keys by CUPTI id (kt_device_register of the
                                                      DEVICE record's identity): entries and tracks keyed by them */
    kt_cupti_queue_t *queues;                      /* open-addressing table of tracks */
    uint32_t queue_cap;                            /* its size (power of two), 0 before first use */
    uint32_t queue_count;                          /* tracks used */
    kt_cupti_name_t names[1024];                   /* cache of demangled kernel names (direct-mapped) */
    kt_cupti_demangle_fn demangle;                 /* __cxa_demangle, NULL when no C++ runtime is loaded */
    int graph_level;                               /* GRAPH_TRACE enabled: one dispatch per graph launch */
    CUpti_SubscriberHandle subscriber;             /* resource callbacks (NULL: another CUPTI client has them) */
    uint64_t buffers_out;                          /* buffers handed to CUPTI and not yet returned */
    uint32_t delivering;                           /* buffer_completed calls running now (any thread) */
    uint32_t flush_ms;                             /* flusher period, 0: no flusher thread */
    pthread_t flusher;                             /* the flusher thread */
    int flusher_running;                           /* started and not yet stopped */
    int flusher_stop;                              /* asks it to end */
    pthread_cond_t flusher_cond;                   /* wakes it (stop) */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER}; /* flusher_cond: made on CLOCK_MONOTONIC when the flusher starts */

static uint64_t CUPTIAPI host_timestamp(void)
{
    return kt_now_ns();
}

static uint64_t cupti_now(void *user)
{
    (void)user;
    uint64_t t = 0;
    return K.cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? t : 0;
}

/* S.lock held. */
static void calibrate_locked(void)
{
    kt_clock_sample_t s[KT_CUPTI_SAMPLES];
    kt_clock_model_t m;
    if (kt_clock_sample(cupti_now, NULL, KT_DOMAIN_MONOTONIC_RAW, s, KT_CUPTI_SAMPLES) == 0 &&
        kt_clock_fit(s, KT_CUPTI_SAMPLES, KT_FIT_WEIGHTED, KT_DOMAIN_MONOTONIC_RAW, &m) == 0) {
        S.model = m;
        S.model_valid = 1;
    }
}

static const char *result_name(CUptiResult r)
{
    const char *s = NULL;
    return K.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s ? s : "unknown CUPTI error";
}

/* S.lock held. The key entries and tracks of a CUPTI device id are recorded under: its identity as registered from
 * CUPTI's DEVICE record (UUID, model, ordinal: two GPUs of one model stay two devices, labelled "<model> #<id>" by
 * the snapshot), else, before that record arrived, "CUDA device <id>" (a device known by name only). */
static const char *device_name_locked(uint32_t id)
{
    static char fallback[KT_CUPTI_MAX_DEVICES][32];
    if (id < KT_CUPTI_MAX_DEVICES && S.devices[id][0])
        return S.devices[id];
    uint32_t slot = id < KT_CUPTI_MAX_DEVICES ? id : KT_CUPTI_MAX_DEVICES - 1;
    snprintf(fallback[slot], sizeof fallback[slot], "CUDA device %u", id);
    return fallback[slot];
}

static int uuid_set(const CUuuid *u)
{
    for (size_t i = 0; i < sizeof u->bytes; i++)
        if (u->bytes[i])
            return 1;
    return 0;
}

/* The 16 bytes of a CUDA UUID as nvidia-smi writes them: <prefix>-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. */
static void uuid_text(const CUuuid *uuid, const char *prefix, char *out, size_t size)
{
    const unsigned char *u = (const unsigned char *)uuid->bytes;
    snprintf(out, size, "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix, u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* S.lock held: a DEVICE record registers the device's identity (docs/devices.md): the record's UUID, or under MIG
 * the instance's (migUuid, "MIG-..."); CUPTI's device id is the CUDA ordinal. The record has no PCI address. */
static void device_record_locked(const CUpti_ActivityDevice5 *dev)
{
    if (dev->id >= KT_CUPTI_MAX_DEVICES || !dev->name)
        return;
    kt_device_id_t id;
    memset(&id, 0, sizeof id);
    snprintf(id.vendor, sizeof id.vendor, "NVIDIA");
    snprintf(id.model, sizeof id.model, "%s", dev->name);
    id.ordinal = (int32_t)dev->id;
    id.partition = -1;
    if (dev->isMigEnabled && uuid_set(&dev->migUuid))
        uuid_text(&dev->migUuid, "MIG", id.uuid, sizeof id.uuid);
    else if (uuid_set(&dev->uuid))
        uuid_text(&dev->uuid, "GPU", id.uuid, sizeof id.uuid);
    const char *key = kt_device_register(KT_BACKEND_CUDA, &id);
    snprintf(S.devices[dev->id], sizeof S.devices[dev->id], "%s", key ? key : id.model);
}

static uint32_t track_hash(uint32_t context, uint32_t stream)
{
    uint64_t k = ((uint64_t)context << 32 | stream) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(k >> 32);
}

/* S.lock held: grows the track table to hold one more. 0 or -1 (no memory: the track is then not cached). */
static int tracks_reserve_locked(void)
{
    if (S.queue_cap && (S.queue_count + 1) * 4 <= S.queue_cap * 3)
        return 0;
    uint32_t cap = S.queue_cap ? S.queue_cap * 2 : 64;
    kt_cupti_queue_t *t = calloc(cap, sizeof *t);
    if (!t)
        return -1;
    for (uint32_t i = 0; i < S.queue_cap; i++) {
        if (!S.queues[i].used)
            continue;
        uint32_t h = track_hash(S.queues[i].context, S.queues[i].stream) & (cap - 1);
        while (t[h].used)
            h = (h + 1) & (cap - 1);
        t[h] = S.queues[i];
    }
    free(S.queues);
    S.queues = t;
    S.queue_cap = cap;
    return 0;
}

/* S.lock held: the track of (context, stream) on a device, registered on first sight. */
static uint32_t queue_locked(uint32_t device, uint32_t context, uint32_t stream)
{
    if (S.queue_cap) {
        for (uint32_t h = track_hash(context, stream) & (S.queue_cap - 1); S.queues[h].used;
             h = (h + 1) & (S.queue_cap - 1))
            if (S.queues[h].context == context && S.queues[h].stream == stream)
                return S.queues[h].queue_id;
    }
    char label[64];
    snprintf(label, sizeof label, "stream %u (context %u)", stream, context);
    uint32_t id = kt_queue_register(KT_BACKEND_CUDA, device_name_locked(device), label);
    if (tracks_reserve_locked() == 0) {
        uint32_t h = track_hash(context, stream) & (S.queue_cap - 1);
        while (S.queues[h].used)
            h = (h + 1) & (S.queue_cap - 1);
        S.queues[h] = (kt_cupti_queue_t){context, stream, id, 1};
        S.queue_count++;
    }
    return id;
}

static uint64_t name_hash(const char *s, uint32_t device)
{
    uint64_t h = 1469598103934665603ull ^ device;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* S.lock held: the kernel id of a CUPTI kernel name, demangled ("_Z..." names) when the C++ runtime is there. */
static kt_kernel_id_t kernel_locked(const char *raw, uint32_t device)
{
    if (!raw)
        return kt_kernel_intern("(unnamed kernel)", KT_BACKEND_CUDA, device_name_locked(device));
    uint64_t h = name_hash(raw, device);
    kt_cupti_name_t *slot = &S.names[h % (sizeof S.names / sizeof S.names[0])];
    if (slot->raw && slot->hash == h && slot->device == device && !strcmp(slot->raw, raw))
        return slot->id;
    char *plain = NULL;
    if (S.demangle && raw[0] == '_' && raw[1] == 'Z') {
        int status = -1;
        plain = S.demangle(raw, NULL, NULL, &status);
        if (status != 0) {
            free(plain);
            plain = NULL;
        }
    }
    kt_kernel_id_t id = kt_kernel_intern(plain ? plain : raw, KT_BACKEND_CUDA, device_name_locked(device));
    free(plain);
    char *copy = strdup(raw);
    if (copy) { /* cached only when it could be copied */
        free(slot->raw);
        *slot = (kt_cupti_name_t){copy, h, device, id};
    }
    return id;
}

/* S.lock held: a CUPTI timestamp on the host timeline (0 when unknown). */
static uint64_t to_host_locked(uint64_t t, uint64_t *unc)
{
    if (t == 0 || t == (uint64_t)CUPTI_TIMESTAMP_UNKNOWN)
        return 0;
    if (S.host_stamps)
        return t; /* the timestamp callback already gave host ns */
    uint64_t host = 0, u = 0;
    if (!S.model_valid || kt_clock_to_host(&S.model, t, &host, &u) != 0)
        return 0;
    if (unc)
        *unc += u; /* the fallback model's bound on top of CUPTI's own conversion */
    return host;
}

/* One timed GPU command: kernel, copy or memset; `launch` its configuration (NULL: none). */
static void record_command(kt_kernel_id_t (*name)(const void *rec, uint32_t device), const void *rec,
                           uint32_t device, uint32_t context, uint32_t stream, uint64_t start, uint64_t end,
                           uint64_t queued, uint64_t submitted, uint64_t bytes, const kt_launch_t *launch)
{
    pthread_mutex_lock(&S.lock);
    if (!S.host_stamps && (!S.model_valid || kt_clock_is_stale(&S.model, kt_now_ns(), 0.0, KT_CUPTI_REFIT_NS)))
        calibrate_locked();
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = name(rec, device);
    if (start == 0 && end == 0) { /* CUPTI delivered it without timing */
        pthread_mutex_unlock(&S.lock);
        kt_record_drop(d.kernel, KT_DROP_NO_TIMING);
        return;
    }
    if (end < start) {
        pthread_mutex_unlock(&S.lock);
        kt_record_drop(d.kernel, KT_DROP_INVALID_TIMES);
        return;
    }
    d.queue = queue_locked(device, context, stream);
    d.flags = KT_SPAN_DEVICE;
    d.duration_ns = end - start;
    d.bytes = bytes;
    d.uncertainty_ns = KT_CUPTI_CONVERSION_NS;
    d.start_ns = to_host_locked(start, &d.uncertainty_ns);
    d.end_ns = d.start_ns ? d.start_ns + d.duration_ns : 0;
    d.queued_ns = to_host_locked(queued, NULL);
    d.submit_ns = to_host_locked(submitted, NULL);
    if (launch)
        d.launch = *launch;
    pthread_mutex_unlock(&S.lock);
    kt_record_dispatch(&d);
}

/* A kernel record's launch configuration (issue 40.2): grid and block, three dimensions always, as cuLaunchKernel
 * takes them (so <<<64, 256>>> and <<<dim3(64, 1, 1), dim3(256, 1, 1)>>> are one configuration). A record without a
 * grid (not filled by this CUPTI) carries none. The dynamic shared memory is not part of kt_launch_t. */
static int kernel_launch(const CUpti_ActivityKernel10 *k, kt_launch_t *out)
{
    if (k->gridX <= 0 || k->gridY <= 0 || k->gridZ <= 0)
        return 0;
    memset(out, 0, sizeof *out);
    out->kind = KT_LAUNCH_GROUPS;
    out->dims = 3;
    out->size[0] = (uint64_t)k->gridX;
    out->size[1] = (uint64_t)k->gridY;
    out->size[2] = (uint64_t)k->gridZ;
    if (k->blockX > 0 && k->blockY > 0 && k->blockZ > 0) { /* else: threads per block not known (0) */
        out->local[0] = (uint64_t)k->blockX;
        out->local[1] = (uint64_t)k->blockY;
        out->local[2] = (uint64_t)k->blockZ;
    }
    return 1;
}

static kt_kernel_id_t kernel_name(const void *rec, uint32_t device)
{
    return kernel_locked(((const CUpti_ActivityKernel10 *)rec)->name, device);
}

static const char *copy_kind_name(uint8_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
    }
}

static kt_kernel_id_t memcpy_name(const void *rec, uint32_t device)
{
    const CUpti_ActivityMemcpy6 *m = rec;
    return kt_kernel_intern(copy_kind_name(m->copyKind), KT_BACKEND_CUDA, device_name_locked(device));
}

/* A peer-to-peer copy (MEMCPY2 record): "memcpy PtoP" on the device that ran it. */
static kt_kernel_id_t memcpy2_name(const void *rec, uint32_t device)
{
    (void)rec;
    return kt_kernel_intern("memcpy PtoP", KT_BACKEND_CUDA, device_name_locked(device));
}

/* A graph launch: CUPTI's graph id is its only name (graphs have none of their own); ids are handed out in
 * creation order, so the same program names its graphs alike from run to run. */
static kt_kernel_id_t graph_name(const void *rec, uint32_t device)
{
    char name[32];
    snprintf(name, sizeof name, "graph %u", ((const CUpti_ActivityGraphTrace2 *)rec)->graphId);
    return kt_kernel_intern(name, KT_BACKEND_CUDA, device_name_locked(device));
}

static kt_kernel_id_t memset_name(const void *rec, uint32_t device)
{
    (void)rec;
    return kt_kernel_intern("memset", KT_BACKEND_CUDA, device_name_locked(device));
}

/* CUPTI belongs to the process that initialised it. A child forked from it (fork without exec) holds a copy of
 * CUPTI's state whose records are its parent's: it makes no CUPTI call and records nothing CUPTI hands it, so
 * its exit writes only what the child recorded itself. */
static int cupti_owner(void)
{
    return getpid() == S.pid;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, KT_CUPTI_BUFFER_BYTES);
    *size = *buffer ? KT_CUPTI_BUFFER_BYTES : 0;
    *max_records = *buffer ? KT_CUPTI_BUFFER_RECORDS : 0; /* returned once full: KT_CUPTI_BUFFER_RECORDS above */
    if (*buffer)
        __atomic_add_fetch(&S.buffers_out, 1, __ATOMIC_RELAXED);
}

/* Records CUPTI dropped for lack of buffer space since the last read (the count is reset when read), recorded under
 * "(CUPTI records dropped)". Per process: since CUDA 6.0 CUPTI keeps one global queue and counts its drops there
 * (the buffer-completed callback's context is always NULL), so no context can be named. */
static void record_dropped(void)
{
    size_t dropped = 0;
    if (K.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) != CUPTI_SUCCESS || !dropped)
        return;
    kt_kernel_id_t id = kt_kernel_intern("(CUPTI records dropped)", KT_BACKEND_CUDA, NULL);
    for (size_t i = 0; i < dropped; i++)
        kt_record_drop(id, KT_DROP_RING_FULL);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx; /* NULL since CUDA 6.0: every buffer is global */
    (void)stream;
    (void)size;
    if (!cupti_owner()) { /* the parent's records, not this child's */
        free(buffer);
        return;
    }
    __atomic_add_fetch(&S.delivering, 1, __ATOMIC_ACQ_REL);
    CUpti_Activity *rec = NULL;
    while (valid && K.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)(const void *)rec;
            kt_launch_t launch;
            int has_launch = kernel_launch(k, &launch);
            record_command(kernel_name, k, k->deviceId, k->contextId, k->streamId, k->start, k->end, k->queued,
                           k->submitted, 0, has_launch ? &launch : NULL);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)(const void *)rec;
            record_command(memcpy_name, m, m->deviceId, m->contextId, m->streamId, m->start, m->end, 0, 0,
                           m->bytes, NULL);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY2) {
            const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)(const void *)rec;
            record_command(memcpy2_name, m, m->deviceId, m->contextId, m->streamId, m->start, m->end, 0, 0,
                           m->bytes, NULL);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)(const void *)rec;
            record_command(memset_name, m, m->deviceId, m->contextId, m->streamId, m->start, m->end, 0, 0,
                           m->bytes, NULL);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) {
            /* the fields read are in the same place in every version of the record; a graph whose first node
             * starts on the host says so with device INT_MAX (named "CUDA device 2147483647" then) */
            const CUpti_ActivityGraphTrace2 *g = (const CUpti_ActivityGraphTrace2 *)(const void *)rec;
            record_command(graph_name, g, g->deviceId, g->contextId, g->streamId, g->start, g->end, 0, 0, 0, NULL);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_DEVICE) {
            const CUpti_ActivityDevice5 *dev = (const CUpti_ActivityDevice5 *)(const void *)rec;
            pthread_mutex_lock(&S.lock);
            device_record_locked(dev);
            pthread_mutex_unlock(&S.lock);
        }
    }
    record_dropped();
    if (buffer)
        __atomic_sub_fetch(&S.buffers_out, 1, __ATOMIC_RELAXED);
    free(buffer);
    __atomic_sub_fetch(&S.delivering, 1, __ATOMIC_ACQ_REL);
}

/* Waits until no buffer_completed call is running, at most KTIMING_EXIT_WAIT_MS (the wait every backend's exit
 * shares): a buffer CUPTI's own thread was still handing over when the exit's forced flush returned is then in the
 * recorder before the snapshot is written, not counted as taken by another client. Returns how many calls still
 * run (0 normally). */
static uint32_t wait_deliveries(void)
{
    uint64_t start = kt__clock_ns(CLOCK_MONOTONIC);
    uint64_t wait = kt__env_ms(KT_ENV_NAME(EXIT_WAIT_MS), 2000, 3600000) * 1000000ull;
    const struct timespec nap = {0, 1000000}; /* 1 ms */
    uint32_t running;
    while ((running = __atomic_load_n(&S.delivering, __ATOMIC_ACQUIRE)) != 0 &&
           kt__clock_ns(CLOCK_MONOTONIC) - start < wait)
        nanosleep(&nap, NULL);
    return running;
}

/* Says a CUPTI conflict once, on stderr or KTIMING_LOG. */
static void say_once(int *said, const char *fmt, const char *arg)
{
    if (__atomic_exchange_n(said, 1, __ATOMIC_ACQ_REL))
        return;
    const char *path = kt__env(KT_ENV_NAME(LOG));
    FILE *f = path && path[0] ? fopen(path, "ae") : NULL;
    fprintf(f ? f : stderr, fmt, arg);
    if (f)
        fclose(f);
}

/* The flusher thread: completed records reach the recorder within a period, not at exit only. Named, with every
 * signal blocked (set by its creator), as the core's collector threads are. */
#define KT_CUPTI_FLUSHER_NAME "kt-cupti-flush"
static void *flusher_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), KT_CUPTI_FLUSHER_NAME);
    pthread_mutex_lock(&S.lock);
    while (!S.flusher_stop) {
        struct timespec until = kt__timespec_in(CLOCK_MONOTONIC, (uint64_t)S.flush_ms * 1000000ull);
        int rc = 0;
        while (!S.flusher_stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&S.flusher_cond, &S.lock, &until);
        if (S.flusher_stop)
            break;
        pthread_mutex_unlock(&S.lock); /* buffer_completed takes it */
        K.cuptiActivityFlushAll(0);
        pthread_mutex_lock(&S.lock);
    }
    pthread_mutex_unlock(&S.lock);
    return NULL;
}

static void flusher_stop(void)
{
    pthread_mutex_lock(&S.lock);
    int running = S.flusher_running;
    S.flusher_running = 0;
    S.flusher_stop = 1;
    pthread_cond_broadcast(&S.flusher_cond);
    pthread_mutex_unlock(&S.lock);
    if (running)
        pthread_join(S.flusher, NULL);
}

/* Fork handler of the child, registered at initialisation whether or not the flusher runs. A forked child has no
 * flusher thread (only the forking thread survives a fork) and does not start one: CUDA itself is unusable in a
 * child forked from an initialised process, and the child makes no CUPTI call and reads nothing of S behind
 * S.lock (cupti_owner), so the lock (which CUPTI's thread may have held at the fork) is only made free again. No
 * prepare/parent pair takes S.lock around fork(): it would make every fork of the program wait for the record
 * CUPTI's thread is processing, and deadlock a fork made on a thread that holds it. */
static void flusher_atfork_child(void)
{
    S.flusher_running = 0;
    S.flusher_stop = 1;
    pthread_mutex_init(&S.lock, NULL);
}

static int g_said_buffers;

/* Registered after the run-snapshot writer and ktiming's own exit handler, so it runs before both: the snapshot and
 * any output written at exit hold every kernel CUPTI still had buffered, and the records CUPTI dropped since the
 * last buffer it returned (a buffer request that could not be met drops records no later buffer reports). Buffers
 * CUPTI still holds afterwards were given to another client (it replaced the activity callbacks): their records
 * never arrive, and that is counted, one drop a buffer (its records cannot be counted). A takeover while no buffer
 * was out leaves nothing to count: CUPTI does not say its callbacks were replaced. */
static void flush_at_exit(void)
{
    if (!cupti_owner()) /* a forked child: CUPTI and what it still holds are the parent's */
        return;
    flusher_stop();
    /* The forced flush hands over, on this thread, what CUPTI still holds; a buffer CUPTI's own thread took before
     * it may still be in buffer_completed on that thread (cupti_activity.h promises no order between the two), so
     * that delivery is waited for before anything still out is counted as another client's. */
    K.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    uint32_t late = wait_deliveries();
    record_dropped();
    uint64_t out = __atomic_load_n(&S.buffers_out, __ATOMIC_RELAXED);
    if (late) { /* still being handed over past the exit wait: their records may miss the snapshot */
        kt_kernel_id_t id = kt_kernel_intern("(CUPTI buffers still being delivered at exit)", KT_BACKEND_CUDA, NULL);
        for (uint32_t i = 0; i < late; i++)
            kt_record_drop(id, KT_DROP_IN_FLIGHT_AT_EXIT);
    }
    uint64_t lost = out > late ? out - late : 0;
    if (lost) {
        char n[32];
        snprintf(n, sizeof n, "%llu", (unsigned long long)lost);
        say_once(&g_said_buffers, "ktiming-cupti: %s CUPTI activity buffers were never returned: another CUPTI client "
                                  "(a profiler in the program) replaced ktiming's activity callbacks, and the kernels "
                                  "they held were not timed\n", n);
        kt_kernel_id_t id = kt_kernel_intern("(CUPTI buffers taken by another client)", KT_BACKEND_CUDA, NULL);
        for (uint64_t i = 0; i < lost; i++)
            kt_record_drop(id, KT_DROP_READ_FAILED);
    }
}

/* Host API time (issue 40.1, docs/cli.md): the CUDA calls that block the program's thread until the GPU is done
 * are host-api zones, as clFinish is for OpenCL. The runtime's calls run the driver's inside them (cudaDeviceSynchronize
 * calls cuCtxSynchronize): only the outermost call of a thread is a zone, so a wait is counted once, under the name
 * the program called. */
typedef struct kt_cupti_wait_api_t {
    CUpti_CallbackDomain domain; /* driver or runtime API */
    CUpti_CallbackId cbid;       /* the call */
    const char *name;            /* the zone's name: the API function */
} kt_cupti_wait_api_t;

static const kt_cupti_wait_api_t kWaitApis[] = {
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, "cuStreamSynchronize"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz, "cuStreamSynchronize"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, "cuCtxSynchronize"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize, "cuEventSynchronize"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, "cudaDeviceSynchronize"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020, "cudaThreadSynchronize"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, "cudaStreamSynchronize"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000, "cudaStreamSynchronize"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, "cudaEventSynchronize"},
};
#define KT_CUPTI_WAIT_APIS (sizeof kWaitApis / sizeof kWaitApis[0])

static kt_kernel_id_t g_wait_sites[KT_CUPTI_WAIT_APIS]; /* interned zone names, one per row */

/* The calling thread's open wait: the outermost call's zone and how deep the thread is in waiting calls. */
static _Thread_local struct {
    uint32_t depth;  /* waiting calls entered and not yet left */
    kt_zone_t zone;  /* the outermost one's zone */
} t_wait;

static void wait_api_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *data)
{
    for (size_t i = 0; i < KT_CUPTI_WAIT_APIS; i++) {
        if (kWaitApis[i].domain != domain || kWaitApis[i].cbid != cbid)
            continue;
        if (data->callbackSite == CUPTI_API_ENTER) {
            if (t_wait.depth++ == 0)
                t_wait.zone = kti_wait_begin(&g_wait_sites[i], kWaitApis[i].name);
        } else if (t_wait.depth > 0 && --t_wait.depth == 0) {
            kt_zone_end(&t_wait.zone);
        }
        return;
    }
}

/* The one CUPTI subscriber's callback: a context about to be destroyed (deliver what CUPTI holds now, the
 * context's completed records among them, and let the CUDA backend of a program that also times with kt_cuda_*
 * collect and forget its events there before they are freed), or a waiting API call entered or left. */
static void CUPTIAPI api_callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
    (void)user;
    if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
        if (cupti_owner()) /* completed records only: forced would hand over other contexts' running ones */
            K.cuptiActivityFlushAll(0);
        if (data)
            kt__cuda_context_destroying(((const CUpti_ResourceData *)data)->context);
    } else if ((domain == CUPTI_CB_DOMAIN_DRIVER_API || domain == CUPTI_CB_DOMAIN_RUNTIME_API) && data)
        wait_api_callback(domain, cbid, data);
}

/* Asks for the waiting calls' callbacks; a call CUPTI refuses is left untimed (0: at least one is on). */
static int enable_wait_apis(void)
{
    int any = 0;
    for (size_t i = 0; i < KT_CUPTI_WAIT_APIS; i++)
        any |= K.cuptiEnableCallback(1, S.subscriber, kWaitApis[i].domain, kWaitApis[i].cbid) == CUPTI_SUCCESS;
    return any ? 0 : -1;
}

static int g_said_subscriber;

/* CUPTI allows one callback subscriber: under Nsight tools, cuda-gdb or a program with its own CUPTI client the
 * subscription fails, and a destroyed context's records then arrive with the next flush (period or exit). */
static void subscribe_resources(void)
{
    /* KTIMING_CUPTI_SUBSCRIBE=0 leaves CUPTI's one subscription to the program: holding it, the library makes a
     * profiler of the program's own fail to initialise (on an H200, torch.profiler then recorded no CUDA event:
     * docs/cuda.md). The flusher thread still delivers a destroyed context's completed records; host API time
     * (the synchronisation callbacks) is not recorded then. */
    const char *sub = kt__env(KT_ENV_NAME(CUPTI_SUBSCRIBE));
    if (sub && !strcmp(sub, "0")) {
        S.subscriber = NULL;
        return;
    }
    /* Under a name that tells a refused profiler how to free the slot (CUPTI 13); a refusal names the holder. */
    char holder[KT__CUPTI_HOLDER_NAME_LEN], held_by[KT__CUPTI_HOLDER_NAME_LEN + 16], why[160];
    kt__cupti_subscriber_params_t params = kt__cupti_subscriber_params(KT__CUPTI_NAME_RUN, holder);
    CUptiResult r = K.cuptiSubscribe_v2 ? K.cuptiSubscribe_v2(&S.subscriber, api_callback, NULL, &params)
                                        : K.cuptiSubscribe(&S.subscriber, api_callback, NULL);
    kt__cupti_holder_text(holder, held_by, sizeof held_by);
    if (r == CUPTI_SUCCESS) {
        r = K.cuptiEnableCallback(1, S.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
        if (r != CUPTI_SUCCESS) {
            K.cuptiUnsubscribe(S.subscriber);
            S.subscriber = NULL;
        } else {
            kt__cuda_resets_watched_by_tool(1); /* the backend's kt_cuda_watch_resets(1) needs no slot of its own */
            if (enable_wait_apis() != 0 && kt__env(KT_ENV_NAME(RUN_VERBOSE)))
                fprintf(stderr, "ktiming-cupti: CUPTI refused the synchronisation callbacks: no host API time\n");
        }
    } else {
        S.subscriber = NULL;
    }
    if (r != CUPTI_SUCCESS) {
        snprintf(why, sizeof why, "%s%s%s", result_name(r), held_by[0] ? ", " : "", held_by);
        say_once(&g_said_subscriber, "ktiming-cupti: another CUPTI client holds the callback subscription (%s): "
                                     "records of a destroyed context arrive with the next flush, and no host API "
                                     "time is recorded\n", why);
    }
    else if (kt__env(KT_ENV_NAME(RUN_VERBOSE)))
        fprintf(stderr, "ktiming-cupti: holding CUPTI's callback subscription: a profiler in the program (Kineto, "
                        "torch.profiler) cannot subscribe; KTIMING_CUPTI_SUBSCRIBE=0 leaves it free\n");
}

/* CUPTI entry points newer than the oldest CUPTI the library runs with: used when present (KT_CUPTI_OPTIONAL). */
static void setup_optional(void)
{
    S.host_stamps = K.cuptiActivityRegisterTimestampCallback &&
                    K.cuptiActivityRegisterTimestampCallback(host_timestamp) == CUPTI_SUCCESS; /* before any kind */
    S.flush_ms = (uint32_t)kt__env_ms(KT_ENV_NAME(CUPTI_FLUSH_MS), KT_CUPTI_FLUSH_MS, 3600000);
    if (K.cuptiActivityEnableLatencyTimestamps)
        K.cuptiActivityEnableLatencyTimestamps(1);
    *(void **)&S.demangle = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!S.demangle) { /* a C program: the C++ runtime CUDA's own libraries bring, else the system's */
        void *cxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
        if (!cxx)
            cxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (cxx)
            *(void **)&S.demangle = dlsym(cxx, "__cxa_demangle"); /* kept loaded for the process's life */
    }
}

/* Memory copies and memsets, each asked for on its own: a CUPTI refusing one still times the other. */
static void enable_transfers(void)
{
    static const struct {
        CUpti_ActivityKind kind;
        const char *what, *untimed;
    } kinds[] = {{CUPTI_ACTIVITY_KIND_MEMCPY, "memory copy", "copies"},
                 {CUPTI_ACTIVITY_KIND_MEMSET, "memset", "memsets"}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        CUptiResult r = K.cuptiActivityEnable(kinds[i].kind);
        if (r != CUPTI_SUCCESS)
            fprintf(stderr, "ktiming-cupti: %s activity unavailable (%s): %s are not timed\n", kinds[i].what,
                    result_name(r), kinds[i].untimed);
    }
}

/* KTIMING_CUPTI_GRAPHS: graph (default) or node; another value is said and taken as graph. */
static void enable_graphs(void)
{
    const char *mode = kt__env(KT_ENV_NAME(CUPTI_GRAPHS));
    int verbose = kt__env(KT_ENV_NAME(RUN_VERBOSE)) != NULL;
    if (mode && !strcmp(mode, "node"))
        return;
    if (mode && mode[0] && strcmp(mode, "graph") != 0)
        fprintf(stderr, "ktiming-cupti: KTIMING_CUPTI_GRAPHS=%s: expected graph or node; using graph\n", mode);
    CUptiResult r = K.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    S.graph_level = r == CUPTI_SUCCESS;
    if (!S.graph_level && verbose)
        fprintf(stderr, "ktiming-cupti: no graph-level records (%s): kernels inside graphs are timed one by one\n",
                result_name(r));
}

/* The CUDA version of the driver in the process, 0 when none answers. libcuda is looked up by its soname among the
 * loaded objects first: a program built with nvcc (static cudart, its default) dlopens it RTLD_LOCAL, where a
 * lookup in the global scope (RTLD_DEFAULT) does not see it. */
static int driver_version(void)
{
    CUresult (*get_version)(int *) = NULL;
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (cuda)
        *(void **)&get_version = dlsym(cuda, "cuDriverGetVersion");
    if (!get_version) /* a driver under another name, linked into the global scope */
        *(void **)&get_version = dlsym(RTLD_DEFAULT, "cuDriverGetVersion");
    int drv = 0;
    if (get_version && get_version(&drv) != CUDA_SUCCESS)
        drv = 0;
    if (cuda)
        dlclose(cuda); /* NOLOAD took a reference: given back, the driver stays loaded by its owner */
    return drv;
}

/* One InitializeInjection at a time. Not S.lock: CUPTI calls buffer_completed (which takes S.lock) with its own
 * locks held, so S.lock is never held across a CUPTI call that can deliver records (enable, subscribe, flush). */
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;

static int initialize(void);

__attribute__((visibility("default"))) int InitializeInjection(void)
{
    if (kti_secure()) /* secure-execution mode: CUPTI is left alone, nothing is timed */
        return 0;
    pthread_mutex_lock(&g_init_lock);
    int ok = S.initialized || initialize() == 0;
    pthread_mutex_unlock(&g_init_lock);
    return ok;
}

/* g_init_lock held: loads CUPTI and sets everything up; 0, or -1 when nothing will be timed (said on stderr). */
static int initialize(void)
{
    if (kt_cupti_load() != 0)
        return -1;
    S.pid = getpid(); /* before any callback can come */
    kt_desc_t desc = {0};
    kt_init(&desc);
    CUptiResult r = K.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r == CUPTI_SUCCESS) {
        setup_optional();
        CUptiResult rd = K.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);
        (void)rd;
        r = K.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        if (r != CUPTI_SUCCESS)
            r = K.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_KERNEL);
    }
    if (r != CUPTI_SUCCESS) {
        /* The usual cause: this library uses the CUPTI of the toolkit it was built with (CUDA_VERSION below),
         * which needs a driver of that CUDA version or newer. Say which driver this is. */
        int drv = driver_version();
        char have[48] = "no CUDA driver answered";
        if (drv)
            snprintf(have, sizeof have, "the driver supports CUDA %d.%d", drv / 1000, (drv % 1000) / 10);
        char needs[160];
        needs_text(needs, sizeof needs);
        fprintf(stderr, "ktiming-cupti: kernel activity unavailable: %s; nothing is timed (%s; this library was "
                        "built with %s)\n",
                result_name(r), have, needs);
        return -1;
    }
    enable_transfers();
    K.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2); /* peer-to-peer copies: none before CUDA 4, then optional */
    enable_graphs();
    subscribe_resources();
    pthread_atfork(NULL, NULL, flusher_atfork_child);
    pthread_mutex_lock(&S.lock);
    if (!S.host_stamps)
        calibrate_locked();
    S.initialized = 1;
    if (S.flush_ms) { /* its period on CLOCK_MONOTONIC: a step of the wall clock neither stalls nor hurries it */
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&S.flusher_cond, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (S.flush_ms) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits the mask: no program signal reaches it */
        S.flusher_running = pthread_create(&S.flusher, NULL, flusher_main, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    pthread_mutex_unlock(&S.lock);
    kti_run_exit_register(); /* ktiming's exit handler, then the snapshot writer (KTIMING_RUN_DIR) */
    atexit(flush_at_exit);   /* last registered: runs first */
    return 0;
}
