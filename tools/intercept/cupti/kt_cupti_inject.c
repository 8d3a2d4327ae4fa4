/* kt_cupti_inject.c — CUDA injection library (CUDA_INJECTION64_PATH): the driver calls InitializeInjection() when
 * a CUDA program initialises; CUPTI's activity API then delivers a record per kernel with GPU start/end times,
 * which are mapped to the host timeline (CLOCK_MONOTONIC_RAW) through a clock model fitted on
 * cuptiGetTimestamp() reads bracketed by host reads, and recorded into ktiming. KTIMING_OUTPUT / KTIMING_REPORT /
 * KTIMING_TRACE then write the results at exit, and under `ktiming run` (KTIMING_RUN_DIR) the process's snapshot
 * goes to KTIMING_RUN_DIR/<pid>.json. Without a usable driver/CUPTI, InitializeInjection returns 0 and nothing is
 * written. Tested without a GPU only (load, failure path, exit order against a CUPTI test double). */
#include <cupti.h>

#include "common/kti_run.h"

#include <ktiming.h>
#include <ktiming/clock.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KT_CUPTI_BUFFER_BYTES (4u << 20)
#define KT_CUPTI_SAMPLES 32
#define KT_CUPTI_MAX_DEVICES 64
#define KT_CUPTI_MAX_QUEUES 256
/* Refit the CUPTI-clock model when it is older than this. */
#define KT_CUPTI_REFIT_NS 1000000000ull

/* A (device, stream) track registered with the recorder. */
typedef struct kt_cupti_queue_t {
    uint32_t device;   /* CUPTI device id */
    uint32_t stream;   /* CUPTI stream id */
    uint32_t queue_id; /* kt_queue_register */
} kt_cupti_queue_t;

static struct {
    pthread_mutex_t lock;                          /* everything below */
    int initialized;                               /* InitializeInjection succeeded */
    kt_clock_model_t model;                        /* CUPTI timestamps → host timeline */
    int model_valid;                               /* model usable */
    char devices[KT_CUPTI_MAX_DEVICES][128];       /* device names by CUPTI id, from DEVICE records */
    kt_cupti_queue_t queues[KT_CUPTI_MAX_QUEUES];  /* tracks seen */
    uint32_t queue_count;                          /* tracks used */
    uint64_t dropped;                              /* records CUPTI dropped */
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

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

/* S.lock held. */
static uint32_t queue_locked(uint32_t device, uint32_t stream)
{
    for (uint32_t i = 0; i < S.queue_count; i++)
        if (S.queues[i].device == device && S.queues[i].stream == stream)
            return S.queues[i].queue_id;
    char label[64];
    snprintf(label, sizeof label, "stream %u", stream);
    uint32_t id = kt_queue_register(KT_BACKEND_CUDA, device_name_locked(device), label);
    if (S.queue_count < KT_CUPTI_MAX_QUEUES)
        S.queues[S.queue_count++] = (kt_cupti_queue_t){device, stream, id};
    return id;
}

/* S.lock held: a CUPTI timestamp on the host timeline (0 when unknown). */
static uint64_t to_host_locked(uint64_t t, uint64_t *unc)
{
    uint64_t host = 0, u = 0;
    if (t == (uint64_t)CUPTI_TIMESTAMP_UNKNOWN || !S.model_valid || kt_clock_to_host(&S.model, t, &host, &u) != 0)
        return 0;
    if (unc && u > *unc)
        *unc = u;
    return host;
}

static void record_kernel(const CUpti_ActivityKernel10 *k)
{
    pthread_mutex_lock(&S.lock);
    if (!S.model_valid || kt_clock_is_stale(&S.model, kt_now_ns(), 0.0, KT_CUPTI_REFIT_NS))
        calibrate_locked();
    const char *device = device_name_locked(k->deviceId);
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = kt_kernel_intern(k->name ? k->name : "(unnamed kernel)", KT_BACKEND_CUDA, device);
    d.queue = queue_locked(k->deviceId, k->streamId);
    d.flags = KT_SPAN_DEVICE;
    d.duration_ns = k->end > k->start ? k->end - k->start : 0;
    d.start_ns = to_host_locked(k->start, &d.uncertainty_ns);
    d.end_ns = d.start_ns ? d.start_ns + d.duration_ns : 0;
    d.queued_ns = to_host_locked(k->queued, NULL);
    d.submit_ns = to_host_locked(k->submitted, NULL);
    pthread_mutex_unlock(&S.lock);
    kt_record_dispatch(&d);
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
            record_kernel((const CUpti_ActivityKernel10 *)(const void *)rec);
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
            kt_record_drop(id);
    }
    free(buffer);
}

/* Registered after the run-snapshot writer and ktiming's own exit handler, so it runs before both: the snapshot and
 * any output written at exit hold every kernel CUPTI still had buffered. */
static void flush_at_exit(void)
{
    cuptiActivityFlushAll(1);
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
    calibrate_locked();
    S.initialized = 1;
    pthread_mutex_unlock(&S.lock);
    kti_run_exit_register(); /* ktiming's exit handler, then the snapshot writer (KTIMING_RUN_DIR) */
    atexit(flush_at_exit);   /* last registered: runs first */
    return 1;
}
