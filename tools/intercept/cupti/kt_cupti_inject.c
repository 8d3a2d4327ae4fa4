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
 * Delivery: a flush period (KTIMING_CUPTI_FLUSH_MS, default 100 ms) bounds how long completed records wait; at
 * exit everything is flushed. Latency timestamps (queued, submitted) are on. Records CUPTI could not time
 * (start = end = 0) are counted as dropped ("no timing"), not recorded as 0 ns. C++ kernel names are demangled
 * with the C++ runtime's __cxa_demangle, looked up at run time (libstdc++.so.6 is loaded for it in C programs).
 * Tracks are keyed by (context, stream): CUPTI's stream ids repeat across contexts. Context destruction
 * (cuCtxDestroy, or cuDevicePrimaryCtxReset behind cudaDeviceReset): a CUPTI resource callback at
 * CONTEXT_DESTROY_STARTING flushes every buffer (forced) while the context still exists, so its completed
 * records are recorded then rather than at the next flush period or at exit; no handle of the context is kept
 * (records carry CUPTI's ids). Graphs (KTIMING_CUPTI_GRAPHS): `graph` (default) enables
 * CUPTI_ACTIVITY_KIND_GRAPH_TRACE, so each graph launch is one dispatch, "graph <id>" on its stream, and CUPTI
 * then reports none of the graph's nodes; `node` leaves it off: the kernels, copies and memsets inside graphs
 * are recorded one by one. A CUPTI that refuses GRAPH_TRACE (before CUDA 11.7) gives node mode. Tested without
 * a GPU only, against a CUPTI test double. */
#include <cupti.h>

#include "common/kti_run.h"

#include <ktiming.h>
#include <ktiming/clock.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KT_CUPTI_BUFFER_BYTES (1u << 20)
#define KT_CUPTI_SAMPLES 32
#define KT_CUPTI_MAX_DEVICES 64
/* Refit the CUPTI-clock model (fallback only) when it is older than this. */
#define KT_CUPTI_REFIT_NS 1000000000ull
/* Default flush period (ms). */
#define KT_CUPTI_FLUSH_MS 100u

/* A (context, stream) track registered with the recorder. */
typedef struct kt_cupti_queue_t {
    uint32_t context;  /* CUPTI context id */
    uint32_t stream;   /* CUPTI stream id */
    uint32_t queue_id; /* kt_queue_register */
    int used;          /* slot taken */
} kt_cupti_queue_t;

/* A kernel name as CUPTI gave it and the id of its demangled form on one device. */
typedef struct kt_cupti_name_t {
    const char *raw;       /* CUPTI's name pointer (stable for the function's life) */
    uint32_t device;       /* CUPTI device id */
    kt_kernel_id_t id;     /* interned demangled name */
} kt_cupti_name_t;

typedef char *(*kt_cupti_demangle_fn)(const char *mangled, char *out, size_t *len, int *status);

static struct {
    pthread_mutex_t lock;                          /* everything below */
    int initialized;                               /* InitializeInjection succeeded */
    int host_stamps;                               /* the timestamp callback is in force: stamps are host ns */
    kt_clock_model_t model;                        /* fallback: CUPTI timestamps → host timeline */
    int model_valid;                               /* model usable */
    char devices[KT_CUPTI_MAX_DEVICES][128];       /* device names by CUPTI id, from DEVICE records */
    kt_cupti_queue_t *queues;                      /* open-addressing table of tracks */
    uint32_t queue_cap;                            /* its size (power of two), 0 before first use */
    uint32_t queue_count;                          /* tracks used */
    kt_cupti_name_t names[1024];                   /* cache of demangled kernel names (direct-mapped) */
    kt_cupti_demangle_fn demangle;                 /* __cxa_demangle, NULL when no C++ runtime is loaded */
    uint64_t dropped;                              /* records CUPTI dropped */
    int graph_level;                               /* GRAPH_TRACE enabled: one dispatch per graph launch */
    CUpti_SubscriberHandle subscriber;             /* resource callbacks (NULL: another CUPTI client has them) */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t CUPTIAPI host_timestamp(void)
{
    return kt_now_ns();
}

static uint64_t cupti_now(void *user)
{
    (void)user;
    uint64_t t = 0;
    return cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? t : 0;
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
    return cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s ? s : "unknown CUPTI error";
}

/* S.lock held. */
static const char *device_name_locked(uint32_t id)
{
    static char fallback[KT_CUPTI_MAX_DEVICES][32];
    if (id < KT_CUPTI_MAX_DEVICES && S.devices[id][0])
        return S.devices[id];
    uint32_t slot = id < KT_CUPTI_MAX_DEVICES ? id : KT_CUPTI_MAX_DEVICES - 1;
    snprintf(fallback[slot], sizeof fallback[slot], "CUDA device %u", id);
    return fallback[slot];
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

/* S.lock held: the kernel id of a CUPTI kernel name, demangled ("_Z..." names) when the C++ runtime is there. */
static kt_kernel_id_t kernel_locked(const char *raw, uint32_t device)
{
    if (!raw)
        return kt_kernel_intern("(unnamed kernel)", KT_BACKEND_CUDA, device_name_locked(device));
    kt_cupti_name_t *slot = &S.names[((uintptr_t)raw >> 4 ^ device) % (sizeof S.names / sizeof S.names[0])];
    if (slot->raw == raw && slot->device == device)
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
    *slot = (kt_cupti_name_t){raw, device, id};
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
    if (unc && u > *unc)
        *unc = u;
    return host;
}

/* One timed GPU command: kernel, copy or memset. */
static void record_command(kt_kernel_id_t (*name)(const void *rec, uint32_t device), const void *rec,
                           uint32_t device, uint32_t context, uint32_t stream, uint64_t start, uint64_t end,
                           uint64_t queued, uint64_t submitted, uint64_t bytes)
{
    pthread_mutex_lock(&S.lock);
    if (!S.host_stamps && (!S.model_valid || kt_clock_is_stale(&S.model, kt_now_ns(), 0.0, KT_CUPTI_REFIT_NS)))
        calibrate_locked();
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = name(rec, device);
    if (start == 0 && end == 0) { /* CUPTI delivered it without timing */
        pthread_mutex_unlock(&S.lock);
        kt_record_drop_reason(d.kernel, KT_DROP_NO_TIMING);
        return;
    }
    if (end < start) {
        pthread_mutex_unlock(&S.lock);
        kt_record_drop_reason(d.kernel, KT_DROP_INVALID_TIMES);
        return;
    }
    d.queue = queue_locked(device, context, stream);
    d.flags = KT_SPAN_DEVICE;
    d.duration_ns = end - start;
    d.bytes = bytes;
    d.start_ns = to_host_locked(start, &d.uncertainty_ns);
    d.end_ns = d.start_ns ? d.start_ns + d.duration_ns : 0;
    d.queued_ns = to_host_locked(queued, NULL);
    d.submit_ns = to_host_locked(submitted, NULL);
    pthread_mutex_unlock(&S.lock);
    kt_record_dispatch(&d);
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

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, KT_CUPTI_BUFFER_BYTES);
    *size = *buffer ? KT_CUPTI_BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)size;
    CUpti_Activity *rec = NULL;
    while (valid && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)(const void *)rec;
            record_command(kernel_name, k, k->deviceId, k->contextId, k->streamId, k->start, k->end, k->queued,
                           k->submitted, 0);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)(const void *)rec;
            record_command(memcpy_name, m, m->deviceId, m->contextId, m->streamId, m->start, m->end, 0, 0,
                           m->bytes);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)(const void *)rec;
            record_command(memset_name, m, m->deviceId, m->contextId, m->streamId, m->start, m->end, 0, 0,
                           m->bytes);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE) {
            /* the fields read are in the same place in every version of the record; a graph whose first node
             * starts on the host says so with device INT_MAX (named "CUDA device 2147483647" then) */
            const CUpti_ActivityGraphTrace2 *g = (const CUpti_ActivityGraphTrace2 *)(const void *)rec;
            record_command(graph_name, g, g->deviceId, g->contextId, g->streamId, g->start, g->end, 0, 0, 0);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_DEVICE) {
            const CUpti_ActivityDevice5 *dev = (const CUpti_ActivityDevice5 *)(const void *)rec;
            pthread_mutex_lock(&S.lock);
            if (dev->id < KT_CUPTI_MAX_DEVICES && dev->name)
                snprintf(S.devices[dev->id], sizeof S.devices[dev->id], "%s", dev->name);
            pthread_mutex_unlock(&S.lock);
        }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) {
        pthread_mutex_lock(&S.lock);
        S.dropped += dropped;
        pthread_mutex_unlock(&S.lock);
        kt_kernel_id_t id = kt_kernel_intern("(CUPTI records dropped)", KT_BACKEND_CUDA, NULL);
        for (size_t i = 0; i < dropped; i++)
            kt_record_drop_reason(id, KT_DROP_RING_FULL);
    }
    free(buffer);
}

/* Registered after the run-snapshot writer and ktiming's own exit handler, so it runs before both: the snapshot and
 * any output written at exit hold every kernel CUPTI still had buffered. */
static void flush_at_exit(void)
{
    cuptiActivityFlushAll(1);
}

/* A context is about to be destroyed: deliver what CUPTI holds now, the context's completed records among them. */
static void CUPTIAPI resource_callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                       const void *data)
{
    (void)user;
    (void)data;
    if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

/* CUPTI allows one callback subscriber: under Nsight tools, cuda-gdb or a program with its own CUPTI client the
 * subscription fails, and a destroyed context's records then arrive with the next flush (period or exit). */
static void subscribe_resources(void)
{
    CUptiResult r = cuptiSubscribe(&S.subscriber, resource_callback, NULL);
    if (r == CUPTI_SUCCESS) {
        r = cuptiEnableCallback(1, S.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
        if (r != CUPTI_SUCCESS) {
            cuptiUnsubscribe(S.subscriber);
            S.subscriber = NULL;
        }
    } else {
        S.subscriber = NULL;
    }
    if (r != CUPTI_SUCCESS && secure_getenv("KTIMING_RUN_VERBOSE"))
        fprintf(stderr, "ktiming-cupti: no context-destroy callback (%s): records of a destroyed context arrive "
                        "with the next flush\n", result_name(r));
}

/* CUPTI entry points newer than the oldest CUPTI the library runs with: looked up, used when present. */
static void setup_optional(void)
{
    CUptiResult (*reg_ts)(CUpti_TimestampCallbackFunc) = NULL;
    CUptiResult (*period)(uint32_t) = NULL;
    CUptiResult (*latency)(uint8_t) = NULL;
    *(void **)&reg_ts = dlsym(RTLD_DEFAULT, "cuptiActivityRegisterTimestampCallback");
    *(void **)&period = dlsym(RTLD_DEFAULT, "cuptiActivityFlushPeriod");
    *(void **)&latency = dlsym(RTLD_DEFAULT, "cuptiActivityEnableLatencyTimestamps");
    S.host_stamps = reg_ts && reg_ts(host_timestamp) == CUPTI_SUCCESS; /* before any kind is enabled */
    const char *ms = getenv("KTIMING_CUPTI_FLUSH_MS");
    uint32_t flush_ms = ms && ms[0] ? (uint32_t)strtoul(ms, NULL, 10) : KT_CUPTI_FLUSH_MS;
    if (period && flush_ms)
        period(flush_ms);
    if (latency)
        latency(1);
    *(void **)&S.demangle = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!S.demangle) { /* a C program: the C++ runtime CUDA's own libraries bring, else the system's */
        void *cxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
        if (!cxx)
            cxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (cxx)
            *(void **)&S.demangle = dlsym(cxx, "__cxa_demangle"); /* kept loaded for the process's life */
    }
}

/* KTIMING_CUPTI_GRAPHS: graph (default) or node; another value is said and taken as graph. */
static void enable_graphs(void)
{
    const char *mode = getenv("KTIMING_CUPTI_GRAPHS");
    int verbose = secure_getenv("KTIMING_RUN_VERBOSE") != NULL;
    if (mode && !strcmp(mode, "node"))
        return;
    if (mode && mode[0] && strcmp(mode, "graph") != 0)
        fprintf(stderr, "ktiming-cupti: KTIMING_CUPTI_GRAPHS=%s: expected graph or node; using graph\n", mode);
    CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    S.graph_level = r == CUPTI_SUCCESS;
    if (!S.graph_level && verbose)
        fprintf(stderr, "ktiming-cupti: no graph-level records (%s): kernels inside graphs are timed one by one\n",
                result_name(r));
}

__attribute__((visibility("default"))) int InitializeInjection(void)
{
    if (kti_secure()) /* secure-execution mode: CUPTI is left alone, nothing is timed */
        return 0;
    pthread_mutex_lock(&S.lock);
    if (S.initialized) {
        pthread_mutex_unlock(&S.lock);
        return 1;
    }
    kt_desc_t desc = {0};
    kt_init(&desc);
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r == CUPTI_SUCCESS) {
        setup_optional();
        CUptiResult rd = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);
        (void)rd;
        r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        if (r != CUPTI_SUCCESS)
            r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_KERNEL);
    }
    if (r != CUPTI_SUCCESS) {
        pthread_mutex_unlock(&S.lock);
        fprintf(stderr, "ktiming-cupti: kernel activity unavailable: %s\n", result_name(r));
        return 0;
    }
    if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS)
        fprintf(stderr, "ktiming-cupti: memory copy/set activity unavailable: only kernels are timed\n");
    enable_graphs();
    if (!S.host_stamps)
        calibrate_locked();
    subscribe_resources();
    S.initialized = 1;
    pthread_mutex_unlock(&S.lock);
    kti_run_exit_register(); /* ktiming's exit handler, then the snapshot writer (KTIMING_RUN_DIR) */
    atexit(flush_at_exit);   /* last registered: runs first */
    return 1;
}
