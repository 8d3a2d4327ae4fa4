/* kt_test_cupti.c — CUPTI TEST DOUBLE (not CUPTI) for the injection library: built with the real libcupti's
 * soname and loaded first, it accepts the activity setup and delivers its records as CUPTI documents it:
 *   - records go into the tool's buffers in the order they were made, each buffer filled until it holds what fits
 *     or the max_records the tool's request asked for ("filled with at most that many records before it is
 *     returned"), then a new one is requested. A record whose command is still in flight sits in its buffer like
 *     any other, and the completed records made after it follow it there.
 *   - cuptiActivityFlushAll(0) hands over, in the calling thread and in fill order, every buffer whose records are
 *     all complete, full or not (one not full takes no more records); it keeps each buffer holding a record still
 *     in flight ("It doesn't return buffers which have one or more incomplete records"), the completed records in
 *     it included, and nothing more: buffers after it whose records are complete are handed over, as the header
 *     says. CUPTI_ACTIVITY_FLAG_FLUSH_FORCED hands over every buffer, records in flight untimed (start = end = 0).
 *     Without KT_TEST_CUPTI_WORKER_MS nothing else delivers: records wait for a flush, as a slow program's records
 *     wait in CUPTI (its periodic flush, cuptiActivityFlushPeriod, returns full buffers only; the period is only
 *     stored). KT_TEST_CUPTI_WORKER_MS=N starts the double's own worker thread, which every N ms hands over what a
 *     flag-0 flush would, as CUPTI's worker delivers buffers by its own heuristics. KT_TEST_CUPTI_WORKER_SLOW_MS=M
 *     makes that worker hand its buffers over outside the double's lock (the buffers of a delivery's last step; the
 *     first delivery's early buffers still go out under it) and stay M ms inside the tool's callback the first
 *     time, so a flush on another thread (the exit's forced one) can return while the worker is still inside the
 *     tool with a buffer (cupti_activity.h promises no order between the two); kt_test_cupti_wait_slow_delivery()
 *     waits until the worker is inside.
 *   - records CUPTI finds no space for are dropped and counted in the one global queue (CUPTI since CUDA 6.0:
 *     every buffer is handed over with context NULL) that cuptiActivityGetNumDroppedRecords(NULL, ...) reads and
 *     resets (a context of its own counts none): KT_TEST_CUPTI_SHORT=N keeps only N records of each batch the
 *     double makes (the fixed records come in batches of 2, 3, 4, 5 and 2 to 5; launched kernels 8 a batch), and a
 *     record for which the tool declined a buffer (its request gave none) is dropped and counted, once, the next
 *     record asking again; only records of enabled kinds count. KT_TEST_CUPTI_LATE_DROPS=N counts N more dropped
 *     after the forced flush that hands over the record in flight, so no buffer callback follows them (only a
 *     read after the flush finds them, as after a buffer request the tool could not meet near exit).
 *   - the first buffer is requested when activity is enabled and held until a flush returns it with records; if
 *     another client replaces the activity callbacks meanwhile (kt_test_cupti_other_client()), every buffer,
 *     the tool's held ones included, goes to that client.
 *   - it records only the activity kinds enabled (a kernel record under KERNEL or CONCURRENT_KERNEL);
 *     KT_TEST_CUPTI_REFUSE_KIND=N refuses kind N (CUPTI_ERROR_NOT_SUPPORTED), as a CUPTI without it would.
 *   - a CUDA driver in the process (libcuda.so.1, however loaded) older than the double's CUDA makes it refuse
 *     every activity kind (CUPTI_ERROR_NOT_INITIALIZED, what a CUPTI newer than the driver answers).
 *   - cuptiGetVersion answers the CUPTI_API_VERSION of the headers it was built with, or KT_TEST_CUPTI_VERSION
 *     (another CUPTI's, e.g. 28: CUDA 12.9's).
 * Like CUPTI on Linux it stamps with CLOCK_REALTIME unless a timestamp callback was registered, and its REALTIME
 * takes an NTP-like step of +KT_TEST_CUPTI_STEP_S seconds (default 30) once activity was enabled, so a library
 * that fitted REALTIME at start-up misplaces every record. Records:
 *   "_ZN2kt4fake12saxpy_kernelEifPfS1_" (mangled C++, context 1, stream 7), queued/submitted/start/end
 *   two DEVICE records, ids 0 and 1, both named "kt fake GPU" (two boards of one model), UUIDs 10 11 12 .. 1f
 *   and 20 21 .. 2f; device 1 is a MIG instance (migUuid c0 c1 .. cf)
 *   "kt_fake_cupti_kernel"  (context 2, stream 7: the same stream id in another context; on device 1)
 *   "kt_fake_module_v1", then "kt_fake_module_v2" from the same name address (a module reloaded)
 *   "kt_fake_untimed"       start = end = 0 (CUPTI could not time it)
 *   a 4096-byte HtoD memcpy and a 1024-byte memset (context 1, stream 7)
 *   "kt_fake_configured" launched with grid 128x1x1 / block 256x1x1 three times, 16x8x1 / 32x8x1 twice (context 1,
 *   stream 7); the other kernels' records carry no grid (0)
 *   graph 3 launched twice (context 1, stream 9), each launch running two "kt_fake_graph_node" kernels: with
 *   CUPTI_ACTIVITY_KIND_GRAPH_TRACE enabled one graph record per launch and no record of its nodes, as CUPTI
 *   does at graph level; without it the four node kernels
 *   an 8192-byte peer-to-peer copy (MEMCPY2 record, context 1, stream 7), only when MEMCPY2 was enabled
 *   (the records above are made at the first delivery, flush or worker; the first three in a buffer that delivery
 *   hands over before the rest are made, since the module is reloaded after them)
 *   "kt_fake_running" (context 2) still running, never completing: placed right after the first delivery's
 *   buffers went out (first in a new buffer), or before a forced flush hands everything over when that is the
 *   first delivery; handed over only by a forced flush, untimed
 *   "kt_fake_stream" (context 1, stream 11): one per kernel the program launched with kt_test_cupti_launch(n), each
 *   completed at once, none otherwise, made at the next delivery (so after "kt_fake_running" once that was placed:
 *   the first of them share its buffer); kt_test_cupti_stream_delivered() says how many the worker thread and
 *   cuptiActivityFlushAll have handed over
 * Every timed record lies within the 23 us before the delivery that made it. Like CUPTI it delivers a record once. One
 * callback subscriber at a time (KT_TEST_CUPTI_OTHER_SUBSCRIBER=1: another client already has it, as under Nsight
 * tools; any other value but 0 is that client's name, which cuptiSubscribe_v2 gives a refused client, as it gives
 * "CUPTI for <name>" of a subscriber that named itself). The exported kt_test_cupti_settings() reports what the
 * library configured (flush period, latency timestamps, timestamp callback), kt_test_cupti_flushes() how many
 * cuptiActivityFlushAll calls have returned; kt_test_cupti_destroy_context() plays the driver's part in
 * cuCtxDestroy: it calls the resource callback at CONTEXT_DESTROY_STARTING when one is enabled and returns how
 * many records were delivered during it, plus 10 for each in-flight record a forced flush handed over then;
 * kt_test_cupti_program_waits() makes the driver/runtime API callbacks of a program's synchronisation calls.
 * In a process that also holds the CUDA driver double (tests linking it), the subscriber's CONTEXT_DESTROY_STARTING
 * callback is made from inside the double's cuDevicePrimaryCtxReset and cuCtxDestroy too, with the real context,
 * on the destroying thread and before anything is freed, as CUPTI does (kt_test_cuda_driver_on_destroy). */
#include <cupti.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KT_FAKE_CUPTI_API __attribute__((visibility("default")))
#define KT_FAKE_RECORD_BYTES sizeof(CUpti_ActivityKernel10) /* one stride for every record kind */

_Static_assert(sizeof(CUpti_ActivityMemcpy6) <= KT_FAKE_RECORD_BYTES, "memcpy record fits the stride");
_Static_assert(sizeof(CUpti_ActivityMemset4) <= KT_FAKE_RECORD_BYTES, "memset record fits the stride");
_Static_assert(sizeof(CUpti_ActivityGraphTrace2) <= KT_FAKE_RECORD_BYTES, "graph record fits the stride");
_Static_assert(sizeof(CUpti_ActivityDevice5) <= KT_FAKE_RECORD_BYTES, "device record fits the stride");

static CUpti_BuffersCallbackRequestFunc g_request;   /* the tool's buffer allocator */
static CUpti_BuffersCallbackCompleteFunc g_complete; /* the tool's record consumer */
static CUpti_TimestampCallbackFunc g_timestamp;      /* the tool's clock, if registered */
static int g_enabled;                                /* an activity kind was enabled: REALTIME has stepped */
static uint32_t g_flush_period_ms;                   /* cuptiActivityFlushPeriod */
static int g_latency;                                /* cuptiActivityEnableLatencyTimestamps */
static int g_made_all;                               /* the fixed records were made (CUPTI makes each once) */
static size_t g_records_out;                         /* records handed to the tool so far */
static CUpti_CallbackFunc g_callback;                /* the one subscriber's callback, NULL: none */
static void *g_callback_user;
static char g_callback_name[64];                     /* "CUPTI for <name>" (cuptiSubscribe_v2), "" unnamed */
static int g_destroy_enabled;                        /* CONTEXT_DESTROY_STARTING enabled for it */
static uint32_t g_api_enabled[2][1024];              /* driver [0] / runtime [1] API callbacks enabled, by cbid */
static uint64_t g_kinds;                             /* activity kinds enabled (bit = kind, kinds below 64) */
static int g_graph_trace;                            /* CUPTI_ACTIVITY_KIND_GRAPH_TRACE enabled */
static int g_memcpy2;                                /* CUPTI_ACTIVITY_KIND_MEMCPY2 enabled */
static int g_running_made;                           /* the in-flight record was placed in a buffer */
static size_t g_forced_inflight;                     /* in-flight records handed over by forced flushes */
static size_t g_dropped;                             /* dropped records, unread (one global queue) */
/* One of the tool's buffers CUPTI holds: records go in at `count`, up to `cap` (what fits, and at most the
 * max_records the tool asked for); only the last buffer of the list takes records. */
typedef struct fake_buffer_t {
    uint8_t *buf;      /* the tool's */
    size_t size;       /* its size */
    size_t cap;        /* records it takes */
    size_t count;      /* records in it */
    size_t incomplete; /* of them, still in flight */
    size_t stream;     /* of them, "kt_fake_stream" */
} fake_buffer_t;
static fake_buffer_t *g_bufs;                        /* the tool's buffers CUPTI holds, in the order it filled them */
static size_t g_nbufs, g_bufs_cap;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* delivery (flushes, the worker) */
static pthread_t g_worker;                           /* CUPTI's own thread (KT_TEST_CUPTI_WORKER_MS) */
static int g_worker_started;
static size_t g_stream_pending;                      /* "kt_fake_stream" kernels completed, not yet delivered */
static size_t g_stream_batch;                        /* of them, those in the batch being made */
static size_t g_stream_out;                          /* of them, handed to the tool (not dropped) */
static size_t g_stream_by_worker, g_stream_by_flush; /* ... by the worker thread / by cuptiActivityFlushAll */
static unsigned long g_flushes;                      /* cuptiActivityFlushAll calls returned */
static fake_buffer_t *g_aside;                       /* g_lock held: buffers set aside for the slow worker */
static size_t g_naside, g_aside_cap;
static int g_setting_aside;                          /* hand_over sets buffers aside instead of handing them */
static pthread_mutex_t g_slow_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_slow_cond = PTHREAD_COND_INITIALIZER;
static int g_slow_inside;                            /* the slow worker entered the tool's callback (g_slow_lock) */
static int g_slow_outside;                           /* the worker hands buffers over outside g_lock now */
static long g_worker_tid;                            /* its thread id (no TLS: LeakSanitizer's tracer faults on a
                                                        dlopen'ed library's thread-local storage) */

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    if (g_enabled) {
        const char *s = getenv("KT_TEST_CUPTI_STEP_S");
        t += (s && s[0] ? strtoull(s, NULL, 10) : 30ull) * 1000000000ull;
    }
    return t;
}

/* CUPTI's notion of now: the tool's callback when registered, else (stepping) REALTIME. */
static uint64_t stamp_now(void)
{
    return g_timestamp ? g_timestamp() : realtime_ns();
}

KT_FAKE_CUPTI_API void kt_test_cupti_settings(uint32_t *flush_period_ms, int *latency, int *timestamp_callback)
{
    *flush_period_ms = g_flush_period_ms;
    *latency = g_latency;
    *timestamp_callback = g_timestamp != NULL;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                                      CUpti_BuffersCallbackCompleteFunc done)
{
    g_request = req;
    g_complete = done;
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    if (g_enabled)
        return CUPTI_ERROR_INVALID_OPERATION; /* must come before any kind is enabled */
    g_timestamp = f;
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityFlushPeriod(uint32_t ms)
{
    g_flush_period_ms = ms;
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityEnableLatencyTimestamps(uint8_t enable)
{
    g_latency = enable != 0;
    return CUPTI_SUCCESS;
}

static void *worker_main(void *arg);
static int g_slow_inside_once(void);
static int open_buffer(void);

/* A CUDA driver in the process (libcuda.so.1, however it was loaded) older than the CUDA this CUPTI belongs to:
 * CUPTI then refuses the activity setup. */
static int driver_too_old(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!cuda)
        return 0;
    CUresult (*get_version)(int *) = NULL;
    *(void **)&get_version = dlsym(cuda, "cuDriverGetVersion");
    int drv = 0, old = get_version && get_version(&drv) == CUDA_SUCCESS && drv < CUDA_VERSION;
    dlclose(cuda);
    return old;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    if (driver_too_old())
        return CUPTI_ERROR_NOT_INITIALIZED; /* what a CUPTI newer than the driver answers */
    const char *refuse = getenv("KT_TEST_CUPTI_REFUSE_KIND");
    if (refuse && refuse[0] && strtoul(refuse, NULL, 10) == (unsigned long)kind)
        return CUPTI_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&g_lock);
    if ((unsigned)kind < 64)
        g_kinds |= 1ull << kind;
    if (kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE)
        g_graph_trace = 1;
    if (kind == CUPTI_ACTIVITY_KIND_MEMCPY2)
        g_memcpy2 = 1;
    g_enabled = 1;
    if (!g_nbufs && g_request) /* a place for the first records, asked for up front as CUPTI does */
        open_buffer();
    const char *worker_ms = getenv("KT_TEST_CUPTI_WORKER_MS");
    unsigned long ms = worker_ms && worker_ms[0] ? strtoul(worker_ms, NULL, 10) : 0;
    if (ms && !g_worker_started && pthread_create(&g_worker, NULL, worker_main, (void *)(uintptr_t)ms) == 0) {
        pthread_detach(g_worker);
        g_worker_started = 1;
    }
    pthread_mutex_unlock(&g_lock);
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiGetContextId(CUcontext context, uint32_t *id)
{
    if (!context || !id)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *id = (uint32_t)(uintptr_t)context;
    return CUPTI_SUCCESS;
}

/* The CUPTI API version of the headers the double was built with, or KT_TEST_CUPTI_VERSION (another CUPTI's). */
KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
    if (!version)
        return CUPTI_ERROR_INVALID_PARAMETER;
    const char *v = getenv("KT_TEST_CUPTI_VERSION");
    *version = v && v[0] ? (uint32_t)strtoul(v, NULL, 10) : CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
    *timestamp = stamp_now();
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
    switch (result) { /* CUPTI names its results by their enumerators */
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
    case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
    case CUPTI_ERROR_NOT_SUPPORTED: *str = "CUPTI_ERROR_NOT_SUPPORTED"; break;
    default: *str = "fake CUPTI error"; break;
    }
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                                                  CUpti_Activity **record)
{
    if (!*record && __atomic_load_n(&g_slow_outside, __ATOMIC_ACQUIRE) &&
        syscall(SYS_gettid) == __atomic_load_n(&g_worker_tid, __ATOMIC_ACQUIRE)) {
        /* the slow worker, inside the tool's callback, the first time */
        __atomic_store_n(&g_slow_outside, 0, __ATOMIC_RELEASE);
        pthread_mutex_lock(&g_slow_lock);
        g_slow_inside = 1;
        pthread_cond_broadcast(&g_slow_cond);
        pthread_mutex_unlock(&g_slow_lock);
        const char *ms_env = getenv("KT_TEST_CUPTI_WORKER_SLOW_MS");
        unsigned long ms = ms_env && ms_env[0] ? strtoul(ms_env, NULL, 10) : 0;
        nanosleep(&(struct timespec){(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L}, NULL);
    }
    uint8_t *next = *record ? (uint8_t *)*record + KT_FAKE_RECORD_BYTES : buffer;
    if ((size_t)(next - buffer) + KT_FAKE_RECORD_BYTES > valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)(void *)next;
    return CUPTI_SUCCESS;
}

/* Dropped records, reset when read, as CUPTI does. Since CUDA 6.0 CUPTI keeps one global queue: its count is
 * the global one (context NULL); a context of its own has none. */
KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream,
                                                                        size_t *dropped)
{
    (void)stream;
    if (!dropped)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *dropped = ctx ? 0 : __atomic_exchange_n(&g_dropped, 0, __ATOMIC_ACQ_REL); /* the tool reads it inside its
                                                                                 buffer callback, g_lock held */
    return CUPTI_SUCCESS;
}

static void kernel_on(uint8_t *slot, const char *name, uint32_t context, uint32_t stream, uint64_t start,
                      uint64_t len, int latency)
{
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = name;
    k.start = start;
    k.end = start ? start + len : 0;
    if (latency && start) {
        k.queued = start - 3000;
        k.submitted = start - 2000;
    }
    k.deviceId = 0;
    k.contextId = context;
    k.streamId = stream;
    memcpy(slot, &k, sizeof k);
}

static void kernel(uint8_t *slot, const char *name, uint32_t context, uint64_t start, uint64_t len, int latency)
{
    kernel_on(slot, name, context, 7, start, len, latency);
}

/* g_lock held: keeps the `n` records of `stage` whose kind is enabled, in order (a kernel record under KERNEL or
 * CONCURRENT_KERNEL); returns how many. CUPTI records only what was enabled. */
static size_t enabled_only(uint8_t *stage, size_t n)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        CUpti_ActivityKind kind = ((const CUpti_Activity *)(const void *)(stage + i * KT_FAKE_RECORD_BYTES))->kind;
        uint64_t want = (unsigned)kind < 64 ? 1ull << kind : 0;
        if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            want |= 1ull << CUPTI_ACTIVITY_KIND_KERNEL;
        if (!(g_kinds & want))
            continue;
        if (kept != i)
            memcpy(stage + kept * KT_FAKE_RECORD_BYTES, stage + i * KT_FAKE_RECORD_BYTES, KT_FAKE_RECORD_BYTES);
        kept++;
    }
    return kept;
}

/* g_lock held: asks the tool for a buffer and puts it last in the list (taking records from now on). 0, or -1
 * when the tool declined (or gave one too small for a record, handed straight back empty). */
static int open_buffer(void)
{
    fake_buffer_t b = {0};
    size_t max_records = 0;
    g_request(&b.buf, &b.size, &max_records);
    if (!b.buf)
        return -1;
    b.cap = b.size / KT_FAKE_RECORD_BYTES;
    if (max_records && max_records < b.cap) /* "filled with at most that many records before it is returned" */
        b.cap = max_records;
    if (g_nbufs == g_bufs_cap) {
        size_t cap = g_bufs_cap ? 2 * g_bufs_cap : 16;
        fake_buffer_t *grown = realloc(g_bufs, cap * sizeof *grown);
        if (grown) {
            g_bufs = grown;
            g_bufs_cap = cap;
        }
    }
    if (!b.cap || g_nbufs == g_bufs_cap) {
        g_complete(NULL, 0, b.buf, b.size, 0);
        return -1;
    }
    g_bufs[g_nbufs++] = b;
    return 0;
}

/* g_lock held: puts one record in the last buffer, a new one when it is full (or none is held), in order as CUPTI
 * fills its buffers; a record the tool gave no buffer for is dropped and counted in the global queue, once. */
static void place(const uint8_t *rec, int incomplete, int stream)
{
    if ((!g_nbufs || g_bufs[g_nbufs - 1].count == g_bufs[g_nbufs - 1].cap) && open_buffer() != 0) {
        __atomic_add_fetch(&g_dropped, 1, __ATOMIC_ACQ_REL);
        return;
    }
    fake_buffer_t *b = &g_bufs[g_nbufs - 1];
    memcpy(b->buf + b->count * KT_FAKE_RECORD_BYTES, rec, KT_FAKE_RECORD_BYTES);
    b->count++;
    b->incomplete += incomplete != 0;
    b->stream += stream != 0;
}

/* g_lock held: makes a batch of `n` records with `make` and places those of enabled kinds in the tool's buffers;
 * KT_TEST_CUPTI_SHORT=N: only N of the batch find space, the rest are dropped and counted. `incomplete`: they are
 * still in flight; `stream`: they are "kt_fake_stream" kernels. */
static void make_batch(void (*make)(uint8_t *buf, uint64_t now), size_t n, int incomplete, int stream)
{
    uint8_t stage[8 * KT_FAKE_RECORD_BYTES];
    memset(stage, 0, sizeof stage);
    make(stage, stamp_now());
    n = enabled_only(stage, n);
    size_t keep = n;
    const char *short_env = getenv("KT_TEST_CUPTI_SHORT");
    if (short_env && short_env[0] && strtoul(short_env, NULL, 10) < keep)
        keep = strtoul(short_env, NULL, 10);
    __atomic_add_fetch(&g_dropped, n - keep, __ATOMIC_ACQ_REL);
    for (size_t i = 0; i < keep; i++)
        place(stage + i * KT_FAKE_RECORD_BYTES, incomplete, stream);
}

/* g_lock held: hands buffers to the tool, in order, with context NULL as CUPTI does since CUDA 6.0 (every buffer
 * global), as cuptiActivityFlushAll documents: flag 0 returns every buffer whose records are all complete, full or
 * not (an empty one stays), and keeps each buffer holding a record still in flight; forced returns them all, the
 * records in flight untimed. A buffer returned not full takes no more records: the next goes to a new one. */
static void hand_over(int forced)
{
    size_t kept = 0;
    for (size_t i = 0; i < g_nbufs; i++) {
        fake_buffer_t b = g_bufs[i];
        if (!forced && (b.incomplete || !b.count)) {
            g_bufs[kept++] = b;
            continue;
        }
        if (g_setting_aside) { /* the slow worker hands it over once g_lock is released */
            if (g_naside == g_aside_cap) {
                size_t cap = g_aside_cap ? 2 * g_aside_cap : 16;
                fake_buffer_t *grown = realloc(g_aside, cap * sizeof *grown);
                if (!grown)
                    abort();
                g_aside = grown;
                g_aside_cap = cap;
            }
            g_aside[g_naside++] = b;
        } else {
            g_complete(NULL, 0, b.buf, b.size, b.count * KT_FAKE_RECORD_BYTES); /* the tool frees buf */
        }
        g_records_out += b.count;
        g_stream_out += b.stream;
        g_forced_inflight += b.incomplete;
    }
    g_nbufs = kept;
}

/* A kernel name CUPTI hands out from memory it reuses: a module unloaded and another loaded (Triton, Inductor)
 * can give the same address to another kernel's name. */
static char g_reused_name[32];

static void first_buffer(uint8_t *buf, uint64_t now)
{
    kernel(buf, "_ZN2kt4fake12saxpy_kernelEifPfS1_", 1, now - 20000, 5000, g_latency);
    kernel(buf + KT_FAKE_RECORD_BYTES, "kt_fake_cupti_kernel", 2, now - 15000, 5000, g_latency);
    ((CUpti_ActivityKernel10 *)(void *)(buf + KT_FAKE_RECORD_BYTES))->deviceId = 1; /* the second GPU */
    strcpy(g_reused_name, "kt_fake_module_v1");
    kernel(buf + 2 * KT_FAKE_RECORD_BYTES, g_reused_name, 1, now - 14000, 1000, 0);
}

static void second_buffer(uint8_t *buf, uint64_t now)
{
    strcpy(g_reused_name, "kt_fake_module_v2"); /* same address, another kernel */
    kernel(buf + 3 * KT_FAKE_RECORD_BYTES, g_reused_name, 1, now - 12000, 1000, 0);
    kernel(buf, "kt_fake_untimed", 1, 0, 0, 0);
    CUpti_ActivityMemcpy6 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m.bytes = 4096;
    m.start = now - 9000;
    m.end = now - 8000;
    m.contextId = 1;
    m.streamId = 7;
    memcpy(buf + KT_FAKE_RECORD_BYTES, &m, sizeof m);
    CUpti_ActivityMemset4 s;
    memset(&s, 0, sizeof s);
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s.bytes = 1024;
    s.start = now - 7000;
    s.end = now - 6500;
    s.contextId = 1;
    s.streamId = 7;
    memcpy(buf + 2 * KT_FAKE_RECORD_BYTES, &s, sizeof s);
}

/* Graph 3's two launches (launch i runs [now - 5000 + 2500 i, + 2000), its nodes 1000 ns each inside), then the
 * peer-to-peer copy when MEMCPY2 is enabled. */
static void graph_buffer(uint8_t *buf, uint64_t now)
{
    for (int i = 0; i < 2; i++) {
        uint64_t start = now - 5000 + 2500 * (uint64_t)i;
        if (g_graph_trace) {
            CUpti_ActivityGraphTrace2 g;
            memset(&g, 0, sizeof g);
            g.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
            g.correlationId = 100 + (uint32_t)i;
            g.start = start;
            g.end = start + 2000;
            g.graphId = 3;
            g.contextId = 1;
            g.streamId = 9;
            memcpy(buf + (size_t)i * KT_FAKE_RECORD_BYTES, &g, sizeof g);
        } else {
            kernel_on(buf + (size_t)(2 * i) * KT_FAKE_RECORD_BYTES, "kt_fake_graph_node", 1, 9, start, 1000, 0);
            kernel_on(buf + (size_t)(2 * i + 1) * KT_FAKE_RECORD_BYTES, "kt_fake_graph_node", 1, 9, start + 1000,
                      1000, 0);
        }
    }
    if (g_memcpy2) {
        CUpti_ActivityMemcpyPtoP4 p;
        memset(&p, 0, sizeof p);
        p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
        p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
        p.bytes = 8192;
        p.start = now - 1500;
        p.end = now - 1000;
        p.contextId = 1;
        p.streamId = 7;
        p.dstDeviceId = 1;
        memcpy(buf + (size_t)(g_graph_trace ? 2 : 4) * KT_FAKE_RECORD_BYTES, &p, sizeof p);
    }
}

/* One kernel launched with two configurations (issue 40.2): grid 128x1x1 of 256x1x1 threads three times (1000 ns
 * each), grid 16x8x1 of 32x8x1 threads twice (2000 ns each, 4 KiB of dynamic shared memory), context 1, stream 7. */
static void config_buffer(uint8_t *buf, uint64_t now)
{
    for (int i = 0; i < 5; i++) {
        int wide = i >= 3;
        uint8_t *slot = buf + (size_t)i * KT_FAKE_RECORD_BYTES;
        kernel_on(slot, "kt_fake_configured", 1, 7, now - 22000 + 2000 * (uint64_t)i, wide ? 2000 : 1000, 0);
        CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)(void *)slot;
        k->gridX = wide ? 16 : 128;
        k->gridY = wide ? 8 : 1;
        k->gridZ = 1;
        k->blockX = wide ? 32 : 256;
        k->blockY = wide ? 8 : 1;
        k->blockZ = 1;
        k->dynamicSharedMemory = wide ? 4096 : 0;
    }
}

/* The command still running in context 2: handed over only by a forced flush, without timing. */
static void running_buffer(uint8_t *buf, uint64_t now)
{
    (void)now;
    kernel(buf, "kt_fake_running", 2, 0, 0, 0);
}

/* Two GPUs of one model (DEVICE records 0 and 1, one name, their own UUIDs; device 1 a MIG instance with its
 * instance UUID), as on a node of identical boards. */
static void device_buffer(uint8_t *buf, uint64_t now)
{
    (void)now;
    for (uint32_t i = 0; i < 2; i++) {
        CUpti_ActivityDevice5 d;
        memset(&d, 0, sizeof d);
        d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
        d.id = i;
        d.name = "kt fake GPU";
        for (int b = 0; b < 16; b++) /* each board its own UUID; CUPTI writes the bytes as the driver gives them */
            d.uuid.bytes[b] = (char)(0x10 * (i + 1) + b);
        if (i == 1) { /* device 1 is a MIG instance: its own UUID beside its GPU's */
            d.isMigEnabled = 1;
            for (int b = 0; b < 16; b++)
                d.migUuid.bytes[b] = (char)(0xc0 + b);
        }
        memcpy(buf + (size_t)i * KT_FAKE_RECORD_BYTES, &d, sizeof d);
    }
}

/* The program's kernels launched through kt_test_cupti_launch, completed: g_stream_batch of them (up to 8, one
 * buffer), 500 ns each, a microsecond apart, ending before `now`; context 1, stream 11. */
static void stream_buffer(uint8_t *buf, uint64_t now)
{
    for (size_t i = 0; i < g_stream_batch; i++)
        kernel_on(buf + i * KT_FAKE_RECORD_BYTES, "kt_fake_stream", 1, 11, now - 1000 * (g_stream_batch - i), 500, 0);
}

/* g_lock held: the command that stays in flight, placed once after the records in the buffers then (so it shares a
 * buffer with what completes after it). */
static void make_running(void)
{
    if (!g_running_made) {
        g_running_made = 1;
        make_batch(running_buffer, 1, 1, 0);
    }
}

/* g_lock held: one delivery (a flush, or the worker's turn). The records completed since the last one go into the
 * buffers (the fixed ones once, then the launched kernels, 8 a batch), then the buffers flag 0 (or forced) returns
 * are handed over. The command in flight is placed right after the first delivery's buffers went out (in a buffer
 * of its own then), or before a forced flush hands everything over. */
static void deliver(int forced, int aside)
{
    if (!g_made_all) {
        g_made_all = 1;
        make_batch(device_buffer, 2, 0, 0);
        make_batch(first_buffer, 3, 0, 0);
        hand_over(forced); /* out before the module is reloaded: its name's memory then holds another name */
        make_batch(second_buffer, 4, 0, 0);
        make_batch(config_buffer, 5, 0, 0);
        make_batch(graph_buffer, (g_graph_trace ? 2 : 4) + (g_memcpy2 ? 1 : 0), 0, 0);
    }
    while (g_stream_pending) {
        g_stream_batch = g_stream_pending < 8 ? g_stream_pending : 8;
        g_stream_pending -= g_stream_batch; /* placed or dropped: never again */
        make_batch(stream_buffer, g_stream_batch, 0, 1);
    }
    if (forced)
        make_running();
    g_setting_aside = aside;
    hand_over(forced);
    g_setting_aside = 0;
    make_running();
}

/* The program launches `n` kernels that complete at once ("kt_fake_stream"): CUPTI delivers them with the next
 * flush, or from its own thread (KT_TEST_CUPTI_WORKER_MS). */
KT_FAKE_CUPTI_API void kt_test_cupti_launch(size_t n)
{
    pthread_mutex_lock(&g_lock);
    g_stream_pending += n;
    pthread_mutex_unlock(&g_lock);
}

/* How many launched kernels' records the worker thread and cuptiActivityFlushAll have handed over so far. */
KT_FAKE_CUPTI_API void kt_test_cupti_stream_delivered(size_t *by_worker, size_t *by_flush)
{
    pthread_mutex_lock(&g_lock);
    *by_worker = g_stream_by_worker;
    *by_flush = g_stream_by_flush;
    pthread_mutex_unlock(&g_lock);
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
    pthread_mutex_lock(&g_lock);
    if (!g_request || !g_complete) {
        pthread_mutex_unlock(&g_lock);
        return CUPTI_ERROR_NOT_INITIALIZED;
    }
    size_t before = g_stream_out, inflight = g_forced_inflight;
    int forced = (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0;
    deliver(forced, 0);
    g_stream_by_flush += g_stream_out - before;
    const char *late = getenv("KT_TEST_CUPTI_LATE_DROPS"); /* lost after the last buffer went out */
    if (forced && g_forced_inflight > inflight && late && late[0])
        __atomic_add_fetch(&g_dropped, strtoull(late, NULL, 10), __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&g_lock);
    __atomic_add_fetch(&g_flushes, 1, __ATOMIC_ACQ_REL);
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API unsigned long kt_test_cupti_flushes(void)
{
    return __atomic_load_n(&g_flushes, __ATOMIC_ACQUIRE);
}

/* CUPTI's own worker thread (KT_TEST_CUPTI_WORKER_MS=N): every N ms it hands over the completed records not yet
 * delivered, as CUPTI's worker delivers buffers by its own heuristics, with no flush period set and no flush
 * asked for: records reach the tool from a thread that is neither the program's nor the tool's. */
static void *worker_main(void *arg)
{
    unsigned long ms = (unsigned long)(uintptr_t)arg;
    struct timespec nap = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    const char *slow = getenv("KT_TEST_CUPTI_WORKER_SLOW_MS");
    int outside = slow && slow[0];
    __atomic_store_n(&g_worker_tid, (long)syscall(SYS_gettid), __ATOMIC_RELEASE);
    for (;;) {
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&g_lock);
        CUpti_BuffersCallbackCompleteFunc complete = g_complete;
        fake_buffer_t *aside = NULL;
        size_t naside = 0;
        if (g_request && g_complete) {
            size_t before = g_stream_out;
            deliver(0, outside);
            g_stream_by_worker += g_stream_out - before;
            aside = g_aside; /* taken over: the next turn sets aside into a new array */
            naside = g_naside;
            g_aside = NULL;
            g_naside = g_aside_cap = 0;
        }
        pthread_mutex_unlock(&g_lock);
        __atomic_store_n(&g_slow_outside, naside > 0 && !g_slow_inside_once(), __ATOMIC_RELEASE);
        for (size_t i = 0; i < naside; i++)
            complete(NULL, 0, aside[i].buf, aside[i].size, aside[i].count * KT_FAKE_RECORD_BYTES);
        __atomic_store_n(&g_slow_outside, 0, __ATOMIC_RELEASE);
        free(aside);
    }
    return NULL;
}

/* The slow worker has been inside the tool's callback (KT_TEST_CUPTI_WORKER_SLOW_MS). */
static int g_slow_inside_once(void)
{
    pthread_mutex_lock(&g_slow_lock);
    int inside = g_slow_inside;
    pthread_mutex_unlock(&g_slow_lock);
    return inside;
}

/* Waits (at most 10 s) until the slow worker is inside the tool's buffer callback: 1 when it is. */
KT_FAKE_CUPTI_API int kt_test_cupti_wait_slow_delivery(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&g_slow_lock);
    int rc = 0;
    while (!g_slow_inside && rc == 0)
        rc = pthread_cond_timedwait(&g_slow_cond, &g_slow_lock, &until);
    int inside = g_slow_inside;
    pthread_mutex_unlock(&g_slow_lock);
    return inside;
}

/* Another CUPTI client (a profiler inside the program) registers its own activity callbacks: CUPTI then hands
 * every buffer, ktiming's held one included, to it. */
static void CUPTIAPI other_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = malloc(1 << 16);
    *size = *buffer ? 1 << 16 : 0;
    *max_records = 0;
}

static void CUPTIAPI other_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    (void)valid;
    free(buffer);
}

KT_FAKE_CUPTI_API void kt_test_cupti_other_client(void)
{
    pthread_mutex_lock(&g_lock);
    g_request = other_request;
    g_complete = other_complete;
    pthread_mutex_unlock(&g_lock);
}

/* CUPTI's one subscriber slot. A refused client learns the holder's name where it gave a buffer (cuptiSubscribe_v2):
 * "CUPTI for <name>" of a subscriber that named itself, "" of one that did not, and for the other client of
 * KT_TEST_CUPTI_OTHER_SUBSCRIBER its value unless that is "1" (a client with no name), as CUPTI names a tool. */
static CUptiResult subscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc f, void *user, const char *name,
                             char *holder_name, size_t holder_size)
{
    if (!sub)
        return CUPTI_ERROR_INVALID_PARAMETER;
    const char *other = getenv("KT_TEST_CUPTI_OTHER_SUBSCRIBER");
    const char *holder = g_callback ? g_callback_name : NULL;
    if (!holder && other && other[0] && strcmp(other, "0"))
        holder = strcmp(other, "1") ? other : "";
    if (holder) {
        if (holder_name && holder_size) {
            strncpy(holder_name, holder, holder_size - 1);
            holder_name[holder_size - 1] = '\0';
        }
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    g_callback = f;
    g_callback_user = user;
    g_callback_name[0] = '\0';
    if (name) /* CUPTI keeps CUPTI_SUBSCRIBER_NAME_MAX_LEN bytes of it */
        snprintf(g_callback_name, sizeof g_callback_name, "CUPTI for %.53s", name);
    *sub = (CUpti_SubscriberHandle)(void *)&g_callback;
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc f, void *user)
{
    return subscribe(sub, f, user, NULL, NULL, 0);
}

#ifdef CUpti_SubscriberParams_STRUCT_SIZE /* CUPTI 13's named subscribers */
KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc f,
                                                          void *user, CUpti_SubscriberParams *p)
{
    if (p && p->structSize < offsetof(CUpti_SubscriberParams, subscriberName) + sizeof p->subscriberName)
        return CUPTI_ERROR_INVALID_PARAMETER; /* the size must be filled in */
    int has_old = p && p->structSize >= CUpti_SubscriberParams_STRUCT_SIZE;
    return subscribe(sub, f, user, p ? p->subscriberName : NULL, has_old ? p->oldSubscriberName : NULL,
                     has_old ? p->oldSubscriberSize : 0);
}
#endif

/* The real CUPTI calls a subscriber's CONTEXT_DESTROY_STARTING callback from inside the driver's cuCtxDestroy and
 * cuDevicePrimaryCtxReset, on the destroying thread, before the context's resources go. When the CUDA driver double
 * is in the process (a test linking it), the double registers this with it while the callback is enabled. */
static void driver_destroy_starting(struct CUctx_st *ctx)
{
    CUpti_CallbackFunc cb = g_callback;
    if (!cb || !g_destroy_enabled)
        return;
    CUpti_ResourceData d;
    memset(&d, 0, sizeof d);
    d.context = (CUcontext)ctx;
    cb(g_callback_user, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, &d);
}

static void driver_destroy_hook(int on)
{
    void (*set)(void (*)(struct CUctx_st *)) = NULL;
    *(void **)&set = dlsym(RTLD_DEFAULT, "kt_test_cuda_driver_on_destroy");
    if (set)
        set(on ? driver_destroy_starting : NULL);
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
    if (!g_callback || sub != (CUpti_SubscriberHandle)(void *)&g_callback)
        return CUPTI_ERROR_INVALID_PARAMETER;
    g_callback = NULL;
    g_callback_name[0] = '\0';
    g_destroy_enabled = 0;
    driver_destroy_hook(0);
    memset(g_api_enabled, 0, sizeof g_api_enabled);
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
                                                            CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    if (!g_callback || sub != (CUpti_SubscriberHandle)(void *)&g_callback)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
        g_destroy_enabled = enable != 0;
        driver_destroy_hook(g_destroy_enabled);
    } else if ((domain == CUPTI_CB_DOMAIN_DRIVER_API || domain == CUPTI_CB_DOMAIN_RUNTIME_API) && cbid < 1024)
        g_api_enabled[domain == CUPTI_CB_DOMAIN_RUNTIME_API][cbid] = enable != 0;
    else
        return CUPTI_ERROR_INVALID_PARAMETER;
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API size_t kt_test_cupti_destroy_context(uint32_t context)
{
    size_t before = g_records_out, forced = g_forced_inflight;
    if (g_callback && g_destroy_enabled) {
        CUpti_ResourceData d;
        memset(&d, 0, sizeof d);
        d.context = (CUcontext)(uintptr_t)context;
        g_callback(g_callback_user, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, &d);
    }
    return g_records_out - before + 10 * (g_forced_inflight - forced);
}

/* One API call as the driver and runtime report it to the subscriber: an ENTER callback, `inner` (a call the
 * function makes itself, as cudaDeviceSynchronize calls cuCtxSynchronize), at least `wait_us` of waiting, an EXIT
 * callback; each callback only when enabled. Returns the callbacks made. */
static int api_call(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const char *name, int (*inner)(void),
                    unsigned wait_us)
{
    int on = g_callback && g_api_enabled[domain == CUPTI_CB_DOMAIN_RUNTIME_API][cbid];
    uint64_t corr = 0;
    CUpti_CallbackData d;
    memset(&d, 0, sizeof d);
    d.functionName = name;
    d.correlationData = &corr;
    d.callbackSite = CUPTI_API_ENTER;
    if (on)
        g_callback(g_callback_user, domain, cbid, &d);
    int made = on + (inner ? inner() : 0);
    if (wait_us)
        usleep(wait_us);
    d.callbackSite = CUPTI_API_EXIT;
    if (on)
        g_callback(g_callback_user, domain, cbid, &d);
    return made + on;
}

static int ctx_synchronize(void)
{
    return api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize", NULL,
                    1000);
}

/* What a program's waits look like to CUPTI, on the calling thread: cudaDeviceSynchronize (running
 * cuCtxSynchronize inside), cuStreamSynchronize twice, cuEventSynchronize, each waiting at least 1 ms, and a
 * cuLaunchKernel (no wait). Returns the callbacks made. */
KT_FAKE_CUPTI_API int kt_test_cupti_program_waits(void)
{
    int n = api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
                     "cudaDeviceSynchronize", ctx_synchronize, 0);
    for (int i = 0; i < 2; i++)
        n += api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, "cuStreamSynchronize",
                      NULL, 1000);
    n += api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize, "cuEventSynchronize", NULL,
                  1000);
    n += api_call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", NULL, 0);
    return n;
}
