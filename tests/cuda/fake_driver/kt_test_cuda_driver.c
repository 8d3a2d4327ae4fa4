/* kt_test_cuda_driver.c — TEST DOUBLE of the CUDA driver (libkt_test_cuda_driver.so), not a GPU driver: streams
 * run on host threads, events are stamped from a simulated device clock, kernels are simulated by name, and
 * every call is counted. See kt_test_cuda_driver.h. */
#include "kt_test_cuda_driver.h"
#include "shared/deadline.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
    OK = 0,
    E_INVALID_VALUE = 1,
    E_NOT_INITIALIZED = 3,
    E_DEINITIALIZED = 4,
    E_STUB = 34,
    E_NO_DEVICE = 100,
    E_INVALID_DEVICE = 101,
    E_INVALID_CONTEXT = 201,
    E_NO_BINARY_FOR_GPU = 209,
    E_UNSUPPORTED_PTX_VERSION = 222,
    E_INVALID_HANDLE = 400,
    E_NOT_FOUND = 500,
    E_NOT_READY = 600,
    E_ILLEGAL_STATE = 401,
    E_CONTEXT_IS_DESTROYED = 709,
    E_CAPTURE_UNSUPPORTED = 900,
    E_CAPTURE_IMPLICIT = 906,
    E_CAPTURE_INVALIDATED = 901,
    E_CAPTURED_EVENT = 907,
};

enum { CAPTURE_GLOBAL = 0, CAPTURE_THREAD_LOCAL = 1, CAPTURE_RELAXED = 2 };
#define STREAM_LEGACY ((struct CUstream_st *)0x1)
#define STREAM_PER_THREAD ((struct CUstream_st *)0x2)

#define MAGIC_EVENT 0x45564e54u
#define MAGIC_STREAM 0x5354524du
#define MAGIC_DEAD 0xdeadu
#define MAGIC_MODULE 0x4d4f4455u
#define MAX_DEVICES 4

/* ---------------------------------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------------------------------- */

struct CUctx_st;

/* A simulated event. Never freed (a destroyed one is marked dead); a use of a dead one ABORTS (on a real driver
 * it is a use after free), except the one use a context-id check just before could not prevent (a reset between
 * cuCtxGetId and the call): counted in raced_handle_uses. */
struct CUevent_st {
    uint32_t magic;        /* MAGIC_EVENT or MAGIC_DEAD */
    struct CUctx_st *ctx;  /* owning context */
    unsigned long long ctx_id; /* the context's id when it was created */
    int recorded;          /* cuEventRecord was called at least once */
    int done;              /* the latest record completed */
    uint64_t gen;          /* record generation: only the latest record completes the event */
    uint64_t ts;           /* device timestamp of the latest completed record */
    int captured;          /* the latest record was captured into a graph (queries fail) */
    struct CUevent_st *all_next; /* list of every event */
};

/* One queued stream operation. */
typedef struct op_t {
    enum { OP_RECORD, OP_WORK, OP_VWORK, OP_LAUNCH, OP_COPY } kind; /* what to do */
    struct CUevent_st *event; /* OP_RECORD */
    uint64_t gen;             /* OP_RECORD generation */
    uint64_t ready_host;      /* host CLOCK_MONOTONIC_RAW time before which it cannot start (launch latency) */
    uint64_t ns;              /* OP_WORK / OP_VWORK */
    struct CUfunc_st *fn;     /* OP_LAUNCH */
    unsigned char params[64]; /* OP_LAUNCH parameter values, packed in declaration order */
    void *dst;                /* OP_COPY destination */
    const void *src;          /* OP_COPY source (owned when staged) */
    void *staged;             /* OP_COPY staged source to free */
    size_t bytes;             /* OP_COPY size */
    struct op_t *next;        /* queue link */
} op_t;

/* A simulated stream: a worker thread executing ops in order. */
struct CUstream_st {
    uint32_t magic;          /* MAGIC_STREAM or MAGIC_DEAD */
    struct CUctx_st *ctx;    /* owning context */
    unsigned long long ctx_id; /* the context's id when it was created */
    op_t *head, *tail;       /* queued ops */
    int busy;                /* the worker is executing an op */
    int held;                /* kt_test_cuda_driver_hold */
    int stop;                /* worker exits when the queue drains */
    pthread_t worker;        /* the host thread */
    int joined;              /* the worker was joined (cuStreamDestroy) */
    int non_blocking;        /* created with CU_STREAM_NON_BLOCKING: no implicit sync with the legacy stream */
    int legacy;              /* the context's legacy default stream */
    int queued;              /* ops in head..tail */
    int holds_queued;        /* kt_hold_wait kernels launched on it and not finished */
    int capturing;           /* 1 while capturing a graph (ops are captured, not executed) */
    int cap_mode;            /* capture mode given to cuStreamBeginCapture */
    pthread_t cap_thread;    /* the thread that began the capture */
    int cap_invalid;         /* the capture was invalidated by an unsafe call elsewhere */
    uint64_t cap_work_ns;    /* simulated (slept) work captured so far */
    uint64_t cap_vwork_ns;   /* virtual work captured so far */
    uint64_t *log;           /* completed record timestamps */
    size_t log_len, log_cap; /* log size */
    struct CUstream_st *all_next; /* list of every stream */
};

/* A simulated (primary) context. */
struct CUctx_st {
    CUdevice device;                  /* device ordinal */
    int retains;                      /* primary-context retain count */
    struct CUstream_st *null_stream;  /* legacy default stream, made on first use */
    unsigned long long id;            /* cuCtxGetId: changes when a primary context is reset */
    int destroyed;                    /* cuCtxDestroy'ed (user context; the struct is kept, so misuse is an error) */
    struct CUctx_st *all_next;        /* list of user contexts */
};

/* A captured graph and its instantiation: the simulated work captured, replayed as one op per launch. */
struct CUgraph_st {
    uint64_t work_ns;     /* captured simulated (slept) work */
    uint64_t vwork_ns;    /* captured virtual work */
};
struct CUgraphExec_st {
    uint64_t work_ns;     /* from the graph */
    uint64_t vwork_ns;    /* from the graph */
};

/* A parsed module function. */
struct CUfunc_st {
    char name[64];         /* .entry name */
    int nparams;           /* parameters */
    int psize[8];          /* their sizes */
    struct CUmod_st *mod;  /* owning module */
    int launched;          /* launched before (lazy loading: the first launch loads it) */
};

/* A parsed module global. */
typedef struct fglobal_t {
    char name[64];   /* variable name */
    size_t bytes;    /* size */
    void *mem;       /* its "device" memory */
} fglobal_t;

/* A loaded module. */
struct CUmod_st {
    uint32_t magic;          /* MAGIC_MODULE, or MAGIC_DEAD once unloaded or freed with its context */
    struct CUctx_st *ctx;    /* owning context ... */
    unsigned long long ctx_id; /* ... and its id then */
    struct CUmod_st *all_next; /* list of every module (never freed: a later use is caught, not a silent UAF) */
    struct CUfunc_st fn[16]; /* entries */
    int nfn;                 /* entries used */
    fglobal_t glob[16];      /* globals */
    int nglob;               /* globals used */
};

/* A device allocation (cuMemAlloc) or mapped pinned host allocation (cuMemHostAlloc): freed by cuMemFree /
 * cuMemFreeHost or with its context (reset, destruction). A host allocation freed with its context is really
 * freed (ASan then catches a host read of it); any later use through the driver ABORTS like a destroyed event. */
typedef struct alloc_t {
    uintptr_t base;          /* address (the device's and, for host memory, the host's) */
    size_t bytes;            /* size */
    int host;                /* cuMemHostAlloc */
    int dead;                /* freed */
    struct CUctx_st *ctx;    /* owning context ... */
    unsigned long long ctx_id; /* ... and its id then */
    struct alloc_t *next;    /* every allocation */
} alloc_t;

static struct {
    pthread_mutex_t lock; /* everything below */
    pthread_cond_t cond;  /* any state change (op queued, op done, hold released) */
    int initialized;      /* cuInit succeeded */
    int mode;             /* 0 normal, 1 stub, 2 no device */
    int devices;          /* device count */
    uint64_t offset_ns;   /* device clock offset */
    double drift_ppm;     /* device clock rate error */
    uint64_t raw0;        /* host time at cuInit */
    uint64_t virt_ns;     /* accumulated virtual jumps */
    uint64_t event_res;   /* event timestamp resolution */
    uint64_t gt_gran;     /* globaltimer granularity */
    uint64_t kernel_ns;   /* default simulated kernel duration */
    uint64_t launch_ns;   /* launch latency: an op starts no earlier than this after it was enqueued */
    int driver_version;   /* cuDriverGetVersion */
    int cc;               /* compute capability of every device, e.g. 90 */
    int deinit;           /* the driver is torn down: calls return CUDA_ERROR_DEINITIALIZED */
    int global_captures;  /* streams capturing in global mode */
    int queue_depth;      /* ops a stream queues behind a hold kernel (pending or spinning) before enqueuing blocks */
    int block_queries;    /* kt_test_cuda_driver_block_queries: cuEventQuery waits until cleared */
    CUresult query_answer; /* kt_test_cuda_driver_query_answer: what the next query_answers queries answer */
    uint32_t query_answers;
    int reset_device;      /* kt_test_cuda_driver_reset_after_creates: this device's primary context is reset ... */
    uint32_t reset_creates; /* ... inside the cuEventCreate that makes this count reach 0 (0: disarmed) */
    int init_gate;         /* kt_test_cuda_driver_init_gate: the next cuInit waits ... */
    int init_waiting;      /* ... until the gate is opened */
    struct CUmod_st *modules; /* every module */
    alloc_t *allocs;       /* every allocation */
    unsigned long long next_ctx_id; /* cuCtxGetId source */
    struct CUctx_st *user_ctxs;      /* cuCtxCreate'd contexts */
    int frozen;           /* the device clock advances only by virtual work */
    uint64_t frozen_dev;  /* device time (without virtual jumps) when it was frozen */
    struct CUctx_st ctx[MAX_DEVICES]; /* primary contexts */
    struct CUevent_st *events;        /* every event */
    struct CUstream_st *streams;      /* every stream */
    kt_test_cuda_stats_t st;          /* counters */
    uint64_t live_events;             /* created - destroyed */
} F = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static _Thread_local struct CUctx_st *t_stack[16];
static _Thread_local int t_depth;
static _Thread_local int t_watched;
static _Thread_local int t_capture_mode;                /* cuThreadExchangeStreamCaptureMode (0 = global) */
static _Thread_local struct CUctx_st *t_checked_ctx;    /* the context of this thread's last cuCtxGetId ... */
static _Thread_local unsigned long long t_checked_id;   /* ... the id it answered ... */
static _Thread_local int t_check_fresh;                 /* ... and no event was used since */
static _Thread_local struct CUstream_st *t_ptds[MAX_DEVICES + 8]; /* per-thread default streams, by context slot */

static uint64_t host_raw(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* F.lock held. */
static uint64_t dev_now_locked(void)
{
    if (F.frozen)
        return F.frozen_dev + F.virt_ns;
    uint64_t raw = host_raw();
    double d = (double)(raw - F.raw0) * (1.0 + F.drift_ppm * 1e-6);
    return F.offset_ns + F.raw0 + (uint64_t)d + F.virt_ns;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *s = getenv(name);
    return s && s[0] ? strtoull(s, NULL, 10) : def;
}

static struct CUctx_st *current(void)
{
    return t_depth > 0 ? t_stack[t_depth - 1] : NULL;
}

/* ---------------------------------------------------------------------------------------------------
 * Stream workers
 * ------------------------------------------------------------------------------------------------- */

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    nanosleep(&ts, NULL);
}

/* F.lock held; returns with it held. */
static void run_launch(struct CUstream_st *s, op_t *op)
{
    struct CUfunc_st *fn = op->fn;
    const unsigned char *p = op->params;
    uint64_t gran = F.gt_gran ? F.gt_gran : 1;
    if (!strcmp(fn->name, "kt_globaltimer_read")) {
        uint64_t out;
        memcpy(&out, p, 8);
        uint64_t v = dev_now_locked() / gran * gran;
        memcpy((void *)(uintptr_t)out, &v, 8);
    } else if (!strcmp(fn->name, "kt_globaltimer_batch")) {
        uint64_t out;
        uint32_t n;
        memcpy(&out, p, 8);
        memcpy(&n, p + 8, 4);
        uint64_t *dst = (uint64_t *)(uintptr_t)out;
        for (uint32_t i = 0; i < n; i++)
            dst[i] = dev_now_locked() / gran * gran;
    } else if (!strcmp(fn->name, "kt_hold_wait")) {
        /* spins on the host-mapped word until the host releases it or the timeout passes (then flag[1] = 2); the
         * timeout runs on the host's clock, as a real %globaltimer does, which neither stops with a frozen device
         * clock nor jumps with virtual work */
        uint64_t flag, timeout;
        memcpy(&flag, p, 8);
        memcpy(&timeout, p + 8, 8);
        volatile uint32_t *w = (volatile uint32_t *)(uintptr_t)flag;
        uint64_t t0 = host_raw();
        F.st.holds++;
        while (!__atomic_load_n(&w[0], __ATOMIC_ACQUIRE)) {
            if (host_raw() - t0 >= timeout) {
                __atomic_store_n(&w[1], 2u, __ATOMIC_RELEASE);
                break;
            }
            pthread_mutex_unlock(&F.lock);
            sleep_ns(20000);
            pthread_mutex_lock(&F.lock);
        }
        s->holds_queued--;
        pthread_cond_broadcast(&F.cond);
    } else if (!strcmp(fn->name, "kt_test_stamp")) {
        uint64_t work;
        memcpy(&work, p, 8);
        uint64_t *slot = NULL;
        for (int i = 0; i < fn->mod->nglob; i++)
            if (!strcmp(fn->mod->glob[i].name, "kt_cuda_slot_ptr")) {
                uint64_t addr;
                memcpy(&addr, fn->mod->glob[i].mem, 8);
                slot = (uint64_t *)(uintptr_t)addr;
            }
        uint64_t t0 = dev_now_locked() / gran * gran;
        if (slot && slot[0] > t0)
            slot[0] = t0;
        pthread_mutex_unlock(&F.lock);
        sleep_ns(work);
        pthread_mutex_lock(&F.lock);
        uint64_t t1 = dev_now_locked() / gran * gran;
        if (slot && slot[1] < t1)
            slot[1] = t1;
    } else {
        uint64_t ns = F.kernel_ns;
        pthread_mutex_unlock(&F.lock);
        sleep_ns(ns);
        pthread_mutex_lock(&F.lock);
    }
    (void)s;
}

static void *worker_main(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&F.lock);
    for (;;) {
        while ((!s->head || s->held) && !(s->stop && !s->head))
            pthread_cond_wait(&F.cond, &F.lock);
        if (!s->head && s->stop)
            break;
        op_t *op = s->head;
        uint64_t now = host_raw();
        if (op->ready_host > now && !s->stop) { /* launch latency: the device sees the op this much later */
            s->busy = 1;
            pthread_mutex_unlock(&F.lock);
            sleep_ns(op->ready_host - now);
            pthread_mutex_lock(&F.lock);
            s->busy = 0;
            continue;
        }
        s->busy = 1;
        switch (op->kind) {
        case OP_RECORD:
            if (op->event->gen == op->gen && op->event->magic == MAGIC_EVENT && !op->event->captured) {
                uint64_t res = F.event_res ? F.event_res : 1;
                op->event->ts = dev_now_locked() / res * res;
                op->event->done = 1;
                if (s->log_len == s->log_cap) {
                    s->log_cap = s->log_cap ? s->log_cap * 2 : 64;
                    s->log = realloc(s->log, s->log_cap * sizeof *s->log);
                }
                s->log[s->log_len++] = op->event->ts;
            }
            break;
        case OP_WORK:
            pthread_mutex_unlock(&F.lock);
            sleep_ns(op->ns);
            pthread_mutex_lock(&F.lock);
            break;
        case OP_VWORK:
            F.virt_ns += op->ns;
            break;
        case OP_LAUNCH:
            run_launch(s, op);
            break;
        case OP_COPY:
            memcpy(op->dst, op->src, op->bytes);
            break;
        }
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->queued--;
        s->busy = 0;
        free(op->staged);
        free(op);
        pthread_cond_broadcast(&F.cond);
    }
    pthread_mutex_unlock(&F.lock);
    return NULL;
}

/* F.lock held. */
static struct CUstream_st *stream_new_locked(struct CUctx_st *ctx)
{
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->magic = MAGIC_STREAM;
    s->ctx = ctx;
    s->ctx_id = ctx->id;
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        free(s);
        return NULL;
    }
    s->all_next = F.streams;
    F.streams = s;
    return s;
}

static int handle_dead_use_locked(const char *what, void *h, struct CUctx_st *ctx, unsigned long long ctx_id);

/* F.lock held: the stream an operation goes to (NULL = current context's legacy default stream). A destroyed
 * stream (cuStreamDestroy, or freed by its context's reset or destruction) ABORTS the test as a destroyed event
 * does: on a real driver it is a use after free. The test's own calls (kt_test_cuda_driver_hold, ...) use
 * resolve_any_locked, which answers NULL for it. */
static struct CUstream_st *resolve_any_locked(struct CUstream_st *s);
static struct CUstream_st *resolve_locked(struct CUstream_st *s)
{
    if (s && s != STREAM_LEGACY && s != STREAM_PER_THREAD && s->magic != MAGIC_STREAM) {
        handle_dead_use_locked("stream", s, s->ctx, s->ctx_id);
        return NULL;
    }
    return resolve_any_locked(s);
}

static struct CUstream_st *resolve_any_locked(struct CUstream_st *s)
{
    if (s && s != STREAM_LEGACY && s != STREAM_PER_THREAD)
        return s->magic == MAGIC_STREAM ? s : NULL;
    struct CUctx_st *c = current();
    if (!c || c->destroyed)
        return NULL;
    if (s == STREAM_PER_THREAD) { /* the calling thread's own default stream in this context */
        size_t n = sizeof t_ptds / sizeof t_ptds[0];
        size_t slot = c >= F.ctx && c < F.ctx + MAX_DEVICES ? (size_t)(c - F.ctx) : MAX_DEVICES + ((uintptr_t)c >> 6) % 8;
        if (slot >= n)
            slot = n - 1;
        if (!t_ptds[slot] || t_ptds[slot]->magic != MAGIC_STREAM || t_ptds[slot]->ctx != c)
            t_ptds[slot] = stream_new_locked(c);
        return t_ptds[slot];
    }
    if (!c->null_stream || c->null_stream->magic != MAGIC_STREAM) {
        c->null_stream = stream_new_locked(c);
        if (c->null_stream)
            c->null_stream->legacy = 1;
    }
    return c->null_stream;
}

/* F.lock held: a call the CUDA headers call potentially unsafe during stream capture (synchronising, querying).
 * While a stream captures in global mode, such a call from a thread not in relaxed mode fails and invalidates
 * the capture, as the driver does. */
static CUresult capture_unsafe_locked(void)
{
    /* cuda.h's rules, by the calling thread's mode (cuThreadExchangeStreamCaptureMode): relaxed, never prohibited;
     * thread-local, prohibited while this thread has a capture of its own not begun relaxed; global (the
     * default), that or while any thread has a capture begun in global mode. The captures that prohibit the call
     * are invalidated. */
    if (t_capture_mode == CAPTURE_RELAXED)
        return OK;
    int prohibited = 0;
    for (struct CUstream_st *s = F.streams; s; s = s->all_next) {
        if (!s->capturing)
            continue;
        int own = s->cap_mode != CAPTURE_RELAXED && pthread_equal(s->cap_thread, pthread_self());
        int global = t_capture_mode == CAPTURE_GLOBAL && s->cap_mode == CAPTURE_GLOBAL;
        if (own || global) {
            s->cap_invalid = 1;
            prohibited = 1;
        }
    }
    if (!prohibited)
        return OK;
    F.st.capture_violations++;
    return E_CAPTURE_UNSUPPORTED;
}

/* capture_unsafe_locked for calls that do not otherwise take the lock: allocation, freeing, module loading. The
 * driver documents them as potentially unsafe during capture (they may synchronise the device). */
static CUresult capture_unsafe(void)
{
    pthread_mutex_lock(&F.lock);
    CUresult r = capture_unsafe_locked();
    pthread_mutex_unlock(&F.lock);
    return r;
}

/* F.lock held: whether a stream of `ctx` other than `s` captures in a mode that makes the legacy stream's implicit
 * synchronisation with it illegal (what CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, 906, answers). */
static int legacy_blocked_locked(struct CUstream_st *s)
{
    for (struct CUstream_st *o = F.streams; o; o = o->all_next)
        if (o != s && o->capturing && o->ctx == s->ctx && !o->non_blocking)
            return 1;
    return 0;
}

/* F.lock held: work or an event record on `s`. The legacy stream synchronises with every blocking stream of its
 * context, so while one of them captures, a use of the legacy stream is illegal: the driver answers
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and the capture is invalidated (its cuStreamEndCapture fails with 901), in
 * any capture mode (relaxed mode does not make it legal). */
static CUresult legacy_use_locked(struct CUstream_st *s)
{
    if (!s->legacy || s->capturing || !legacy_blocked_locked(s))
        return OK;
    F.st.capture_violations++;
    for (struct CUstream_st *o = F.streams; o; o = o->all_next)
        if (o != s && o->capturing && o->ctx == s->ctx && !o->non_blocking)
            o->cap_invalid = 1;
    return E_CAPTURE_IMPLICIT;
}

/* Whether the driver was torn down (kt_test_cuda_driver_deinit): counts the call. */
static int deinit_call(void)
{
    if (!__atomic_load_n(&F.deinit, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&F.lock);
    F.st.calls_after_deinit++;
    pthread_mutex_unlock(&F.lock);
    return 1;
}

/* F.lock held. */
static void push_locked(struct CUstream_st *s, op_t *op)
{
    /* Behind a kt_hold_wait kernel, pending or spinning, the launch queue fills: the enqueuing call then blocks
     * until the stream moves (as cuLaunchKernel does when the driver's push buffer is full). Pending counts too:
     * enqueues that outrun the stream's worker fill a real push buffer just the same. */
    if (s->holds_queued > 0 && s->queued > F.queue_depth) {
        F.st.queue_full_waits++;
        while (s->holds_queued > 0 && s->queued > F.queue_depth && !s->stop)
            pthread_cond_wait(&F.cond, &F.lock);
    }
    if (s->holds_queued > 0 && (uint64_t)s->queued > F.st.max_queued_behind_hold)
        F.st.max_queued_behind_hold = (uint64_t)s->queued;
    op->next = NULL;
    op->ready_host = host_raw() + F.launch_ns;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->queued++;
    pthread_cond_broadcast(&F.cond);
}

static CUresult enqueue(struct CUstream_st *stream, op_t *op)
{
    pthread_mutex_lock(&F.lock);
    struct CUstream_st *s = resolve_locked(stream);
    if (!s) {
        pthread_mutex_unlock(&F.lock);
        free(op->staged);
        free(op);
        return stream ? E_INVALID_HANDLE : E_INVALID_CONTEXT;
    }
    CUresult lr = legacy_use_locked(s);
    if (lr != OK) {
        pthread_mutex_unlock(&F.lock);
        free(op->staged);
        free(op);
        return lr;
    }
    if (s->capturing) { /* captured into the graph, not executed */
        if (op->kind == OP_VWORK)
            s->cap_vwork_ns += op->ns;
        else
            s->cap_work_ns += op->kind == OP_LAUNCH ? F.kernel_ns : op->kind == OP_COPY ? 0 : op->ns;
        pthread_mutex_unlock(&F.lock);
        free(op->staged);
        free(op);
        return OK;
    }
    push_locked(s, op);
    pthread_mutex_unlock(&F.lock);
    return OK;
}

/* Stop and join every worker when the double is unloaded (or the process exits). */
__attribute__((destructor)) static void fake_fini(void)
{
    pthread_mutex_lock(&F.lock);
    for (struct CUstream_st *s = F.streams; s; s = s->all_next) {
        s->stop = 1;
        s->held = 0;
    }
    pthread_cond_broadcast(&F.cond);
    pthread_mutex_unlock(&F.lock);
    for (struct CUstream_st *s = F.streams; s; s = s->all_next)
        if (!s->joined)
            pthread_join(s->worker, NULL);
}

/* ---------------------------------------------------------------------------------------------------
 * Initialisation, errors, devices
 * ------------------------------------------------------------------------------------------------- */

static const struct {
    int v;            /* CUresult */
    const char *name; /* its name */
} kNames[] = {
    {0, "CUDA_SUCCESS"},
    {1, "CUDA_ERROR_INVALID_VALUE"},
    {3, "CUDA_ERROR_NOT_INITIALIZED"},
    {4, "CUDA_ERROR_DEINITIALIZED"},
    {34, "CUDA_ERROR_STUB_LIBRARY"},
    {100, "CUDA_ERROR_NO_DEVICE"},
    {101, "CUDA_ERROR_INVALID_DEVICE"},
    {201, "CUDA_ERROR_INVALID_CONTEXT"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
    {218, "CUDA_ERROR_INVALID_PTX"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
    {401, "CUDA_ERROR_ILLEGAL_STATE"},
    {400, "CUDA_ERROR_INVALID_HANDLE"},
    {500, "CUDA_ERROR_NOT_FOUND"},
    {600, "CUDA_ERROR_NOT_READY"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
    {907, "CUDA_ERROR_CAPTURED_EVENT"},
};

EXPORT CUresult cuInit(unsigned int flags)
{
    (void)flags;
    const char *mode = getenv("KT_TEST_CUDA_MODE");
    pthread_mutex_lock(&F.lock);
    if (F.init_gate) { /* a slow cuInit (hundreds of ms on a real GPU): waits until the test opens the gate */
        F.init_gate = 0;
        F.st.init_gate_waits++;
        F.init_waiting = 1;
        pthread_cond_broadcast(&F.cond);
        while (F.init_waiting)
            pthread_cond_wait(&F.cond, &F.lock);
    }
    F.mode = !mode ? 0 : !strcmp(mode, "stub") ? 1 : !strcmp(mode, "nodevice") ? 2 : 0;
    if (F.mode) {
        pthread_mutex_unlock(&F.lock);
        return F.mode == 1 ? E_STUB : E_NO_DEVICE;
    }
    if (!F.initialized) {
        F.devices = (int)env_u64("KT_TEST_CUDA_DEVICES", 1);
        if (F.devices > MAX_DEVICES)
            F.devices = MAX_DEVICES;
        F.offset_ns = env_u64("KT_TEST_CUDA_CLOCK_OFFSET_NS", 1000000000000000ull);
        const char *d = getenv("KT_TEST_CUDA_DRIFT_PPM");
        F.drift_ppm = d ? strtod(d, NULL) : 0.0;
        F.event_res = env_u64("KT_TEST_CUDA_EVENT_RES_NS", 512);
        F.launch_ns = env_u64("KT_TEST_CUDA_LAUNCH_NS", 4000);
        F.cc = (int)env_u64("KT_TEST_CUDA_CC", 90);
        F.queue_depth = (int)env_u64("KT_TEST_CUDA_QUEUE_DEPTH", 64);
        F.gt_gran = env_u64("KT_TEST_CUDA_GT_GRANULARITY_NS", 1000);
        F.kernel_ns = env_u64("KT_TEST_CUDA_KERNEL_NS", 20000);
        F.raw0 = host_raw();
        for (int i = 0; i < MAX_DEVICES; i++) {
            F.ctx[i].device = i;
            F.ctx[i].id = ++F.next_ctx_id;
        }
        F.initialized = 1;
    }
    pthread_mutex_unlock(&F.lock);
    return F.devices > 0 ? OK : E_NO_DEVICE;
}

EXPORT CUresult cuGetErrorName(CUresult err, const char **name)
{
    if (F.mode == 1)
        return E_STUB; /* the stub cannot name its errors either */
    for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; i++)
        if (kNames[i].v == err) {
            *name = kNames[i].name;
            return OK;
        }
    return E_INVALID_VALUE;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
    *v = (int)env_u64("KT_TEST_CUDA_DRIVER_VERSION", 13000);
    return F.mode == 1 ? E_STUB : OK;
}

EXPORT CUresult cuDeviceGetCount(int *n)
{
    if (!F.initialized)
        return E_NOT_INITIALIZED;
    *n = F.devices;
    return OK;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    if (!F.initialized)
        return E_NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= F.devices)
        return E_INVALID_DEVICE;
    *d = ordinal;
    return OK;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    if (d < 0 || d >= F.devices)
        return E_INVALID_DEVICE;
    snprintf(name, (size_t)len, "ktiming test double (not a GPU)"); /* one model: every device has this name */
    return OK;
}

/* KT_TEST_CUDA_MIG=1: the devices are MIG instances of one GPU (as CUDA_VISIBLE_DEVICES=MIG-... enumerates
 * them): one PCI address, cuDeviceGetUuid (the original entry point) the GPU's UUID, cuDeviceGetUuid_v2 each
 * instance's own. */
static int mig_mode(void)
{
    const char *m = getenv("KT_TEST_CUDA_MIG");
    return m && m[0] == '1';
}

/* Each device's own UUID and PCI address (bus 0x17 + 0x10 per ordinal, as on a node of identical boards); under
 * MIG each instance's UUID. */
EXPORT CUresult cuDeviceGetUuid_v2(unsigned char *uuid, CUdevice d)
{
    if (!uuid)
        return E_INVALID_VALUE;
    if (d < 0 || d >= F.devices)
        return E_INVALID_DEVICE;
    for (int i = 0; i < 16; i++)
        uuid[i] = (unsigned char)(0xa0 + i * 7 + d * 0x31 + (mig_mode() ? 0x40 : 0));
    return OK;
}

/* The original entry point: the physical GPU's UUID (under MIG the parent GPU's, one for every instance). */
EXPORT CUresult cuDeviceGetUuid(unsigned char *uuid, CUdevice d)
{
    if (!mig_mode())
        return cuDeviceGetUuid_v2(uuid, d);
    if (!uuid)
        return E_INVALID_VALUE;
    if (d < 0 || d >= F.devices)
        return E_INVALID_DEVICE;
    for (int i = 0; i < 16; i++)
        uuid[i] = (unsigned char)(0xa0 + i * 7);
    return OK;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attrib, CUdevice d)
{
    if (d < 0 || d >= F.devices)
        return E_INVALID_DEVICE;
    switch (attrib) {
    case 75: *v = (F.cc ? F.cc : 90) / 10; break; /* compute capability major */
    case 76: *v = (F.cc ? F.cc : 90) % 10; break; /* minor */
    case 13: *v = 1500000; break; /* clock rate, kHz */
    case 16: *v = 4; break;       /* multiprocessors */
    case 33: *v = 0x17 + (mig_mode() ? 0 : 0x10 * d); break; /* PCI bus (MIG instances share their GPU's) */
    case 34: *v = 0; break;               /* PCI device */
    case 50: *v = (int)env_u64("KT_TEST_CUDA_PCI_DOMAIN", 0); break; /* PCI domain */
    default: *v = 0; break;
    }
    return OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Contexts
 * ------------------------------------------------------------------------------------------------- */

EXPORT CUresult cuDevicePrimaryCtxRetain(struct CUctx_st **ctx, CUdevice d)
{
    if (!F.initialized)
        return E_NOT_INITIALIZED;
    if (d < 0 || d >= F.devices)
        return E_INVALID_DEVICE;
    pthread_mutex_lock(&F.lock);
    F.ctx[d].retains++;
    F.st.primary_retains++;
    pthread_mutex_unlock(&F.lock);
    *ctx = &F.ctx[d];
    return OK;
}

static void ctx_kill_locked(struct CUctx_st *c);
static void destroy_starting(struct CUctx_st *c);

/* The last release destroys the primary context, as the driver documents ("regardless of how many threads it is
 * current to"): a tool that releases the last retain is told at CONTEXT_DESTROY_STARTING, on its own thread. The
 * handle stays usable (a later retain or use starts its next life, with a new id), as after a reset. */
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    if (d < 0 || d >= F.devices)
        return E_INVALID_DEVICE;
    pthread_mutex_lock(&F.lock);
    int last = F.ctx[d].retains == 1;
    if (F.ctx[d].retains > 0)
        F.ctx[d].retains--;
    F.st.primary_releases++;
    pthread_mutex_unlock(&F.lock);
    if (last) {
        t_check_fresh = 0;
        destroy_starting(&F.ctx[d]);
        pthread_mutex_lock(&F.lock);
        if (F.ctx[d].retains == 0) { /* not retained again meanwhile */
            ctx_kill_locked(&F.ctx[d]);
            F.ctx[d].id = ++F.next_ctx_id;
            F.st.primary_destroys++;
        }
        pthread_mutex_unlock(&F.lock);
    }
    return OK;
}

/* F.lock held: every event and stream of c is freed (marked dead; a later use is an error, counted). */
static void ctx_kill_locked(struct CUctx_st *c)
{
    for (struct CUevent_st *e = F.events; e; e = e->all_next)
        if (e->ctx == c && e->magic == MAGIC_EVENT) {
            e->magic = MAGIC_DEAD;
            F.live_events--;
            F.st.events_freed_by_reset++;
        }
    for (struct CUstream_st *s = F.streams; s; s = s->all_next)
        if (s->ctx == c && s->magic == MAGIC_STREAM) {
            s->magic = MAGIC_DEAD;
            s->stop = 1;
            s->held = 0;
            if (s->capturing && s->cap_mode == CAPTURE_GLOBAL)
                F.global_captures--;
            s->capturing = 0;
        }
    for (struct CUmod_st *m = F.modules; m; m = m->all_next)
        if (m->ctx == c && m->magic == MAGIC_MODULE)
            m->magic = MAGIC_DEAD;
    for (alloc_t *a = F.allocs; a; a = a->next)
        if (a->ctx == c && !a->dead) {
            a->dead = 1;
            if (a->host)
                free((void *)a->base);
        }
    c->null_stream = NULL;
    pthread_cond_broadcast(&F.cond);
}

/* ---------------------------------------------------------------------------------------------------
 * Context destruction as a tool sees it
 * ------------------------------------------------------------------------------------------------- */

/* CUPTI's resource callback at CONTEXT_DESTROY_STARTING: the CUPTI double registers its function here while a
 * subscriber has that callback enabled; the driver calls it on the destroying thread, before anything of the
 * context is freed (a tool may still use the context's handles inside it). */
static void (*g_destroy_hook)(struct CUctx_st *);

/* A reset landing inside a tool's context check (kt_test_cuda_driver_race_destroy). */
enum { RACE_IDLE = 0, RACE_STARTED = 1, RACE_IN_CALLBACK = 2, RACE_DONE = 3 };
static struct {
    struct CUctx_st *ctx; /* the context to reset (primary) or destroy (user) */
    pthread_t armer;      /* the thread that armed it: its own cuCtxGetId calls do not trigger */
    int armed;            /* waiting for another thread's cuCtxGetId of ctx */
    int state;            /* RACE_* */
    int joinable;         /* thread below was created and not joined */
    pthread_t thread;     /* the "program thread" that resets */
    pthread_cond_t cond;  /* state changes (with F.lock) */
} R = {.cond = PTHREAD_COND_INITIALIZER};

EXPORT void kt_test_cuda_driver_on_destroy(void (*fn)(struct CUctx_st *ctx))
{
    pthread_mutex_lock(&F.lock);
    g_destroy_hook = fn;
    pthread_mutex_unlock(&F.lock);
}

/* The destroying thread, before c's resources are freed: tell the tool, if one asked. */
static void destroy_starting(struct CUctx_st *c)
{
    pthread_mutex_lock(&F.lock);
    void (*fn)(struct CUctx_st *) = g_destroy_hook;
    if (fn && R.state == RACE_STARTED && R.joinable && pthread_equal(R.thread, pthread_self())) {
        R.state = RACE_IN_CALLBACK; /* the tool has been told: what it does now is its business */
        pthread_cond_broadcast(&R.cond);
    }
    pthread_mutex_unlock(&F.lock);
    if (fn)
        fn(c);
}

/* cudaDeviceReset: all resources of the primary context are destroyed, whoever retains it; the context
 * handle stays usable and gets a new id. */
EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice d)
{
    if (d < 0 || d >= F.devices)
        return E_INVALID_DEVICE;
    t_check_fresh = 0; /* this thread's own reset: a check it made before is not a race it lost */
    destroy_starting(&F.ctx[d]);
    pthread_mutex_lock(&F.lock);
    ctx_kill_locked(&F.ctx[d]);
    F.ctx[d].id = ++F.next_ctx_id;
    F.st.resets++;
    pthread_mutex_unlock(&F.lock);
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice d)
{
    return cuDevicePrimaryCtxReset(d);
}

EXPORT CUresult cuCtxCreate_v2(struct CUctx_st **out, unsigned int flags, CUdevice d)
{
    (void)flags;
    if (d < 0 || d >= F.devices || t_depth >= 16)
        return E_INVALID_DEVICE;
    struct CUctx_st *c = calloc(1, sizeof *c);
    if (!c)
        return 2;
    pthread_mutex_lock(&F.lock);
    c->device = d;
    c->id = ++F.next_ctx_id;
    c->all_next = F.user_ctxs;
    F.user_ctxs = c;
    pthread_mutex_unlock(&F.lock);
    t_stack[t_depth++] = c;
    *out = c;
    return OK;
}

EXPORT CUresult cuCtxDestroy_v2(struct CUctx_st *c)
{
    if (!c)
        return E_INVALID_CONTEXT;
    pthread_mutex_lock(&F.lock); /* `destroyed` is read by other threads' calls too (a collector's push) */
    int destroyed = c->destroyed;
    pthread_mutex_unlock(&F.lock);
    if (destroyed)
        return E_INVALID_CONTEXT;
    t_check_fresh = 0; /* this thread's own destruction: a check it made before is not a race it lost */
    destroy_starting(c);
    pthread_mutex_lock(&F.lock);
    if (c->destroyed) {
        pthread_mutex_unlock(&F.lock);
        return E_INVALID_CONTEXT;
    }
    ctx_kill_locked(c);
    c->destroyed = 1;
    pthread_mutex_unlock(&F.lock);
    for (int i = 0; i < t_depth; i++)
        if (t_stack[i] == c) {
            memmove(&t_stack[i], &t_stack[i + 1], (size_t)(t_depth - i - 1) * sizeof t_stack[0]);
            t_depth--;
            break;
        }
    return OK;
}

/* The program's thread of a raced reset: cudaDeviceReset for a primary context, cuCtxDestroy for a user one. */
static void *race_thread(void *arg)
{
    struct CUctx_st *c = arg;
    if (c >= &F.ctx[0] && c < &F.ctx[MAX_DEVICES])
        cuDevicePrimaryCtxReset(c->device);
    else
        cuCtxDestroy_v2(c);
    pthread_mutex_lock(&F.lock);
    R.state = RACE_DONE;
    F.st.raced_destroys++;
    pthread_cond_broadcast(&R.cond);
    pthread_mutex_unlock(&F.lock);
    return NULL;
}

/* Between a tool's cuCtxGetId that answered c's current id and its next use of an event: another thread resets
 * or destroys c now, and the use goes on once that is over, or once the tool's destroy callback runs (the tool
 * was told before anything was freed; a tool that waits there for its own check to finish never uses a freed
 * handle). Without a callback the use is the one unpreventable raced use. */
static void race_start(struct CUctx_st *c)
{
    pthread_t th;
    pthread_mutex_lock(&F.lock);
    if (pthread_create(&th, NULL, race_thread, c) != 0) {
        R.state = RACE_IDLE;
        pthread_mutex_unlock(&F.lock);
        return;
    }
    R.thread = th;
    R.joinable = 1;
    /* a stuck tool fails the test's own checks rather than hanging it */
    struct timespec until = kt__timespec_in(CLOCK_REALTIME, 30000000000ull);
    while (R.state == RACE_STARTED)
        if (pthread_cond_timedwait(&R.cond, &F.lock, &until) != 0)
            break;
    pthread_mutex_unlock(&F.lock);
}

/* At the top of each event call: the armed race lands here when this thread checked the event's context just
 * before (a collector's id check, then its query). */
static void race_point(struct CUevent_st *e)
{
    pthread_mutex_lock(&F.lock);
    struct CUctx_st *c = R.ctx;
    int go = R.armed && t_check_fresh && t_checked_ctx == c && e && e->magic == MAGIC_EVENT && e->ctx == c &&
             !pthread_equal(R.armer, pthread_self());
    if (go) {
        R.armed = 0;
        R.state = RACE_STARTED;
    }
    pthread_mutex_unlock(&F.lock);
    if (go)
        race_start(c);
}

EXPORT int kt_test_cuda_driver_race_destroy(struct CUctx_st *c)
{
    pthread_mutex_lock(&F.lock);
    int busy = R.armed || R.state == RACE_STARTED || R.state == RACE_IN_CALLBACK || !c;
    if (!busy) {
        R.ctx = c;
        R.armer = pthread_self();
        R.armed = 1;
        R.state = RACE_IDLE;
    }
    pthread_mutex_unlock(&F.lock);
    return busy ? -1 : 0;
}

EXPORT int kt_test_cuda_driver_race_wait(uint32_t timeout_ms)
{
    struct timespec until = kt__timespec_in(CLOCK_REALTIME, (uint64_t)timeout_ms * 1000000u);
    pthread_mutex_lock(&F.lock);
    while (R.state != RACE_DONE)
        if (pthread_cond_timedwait(&R.cond, &F.lock, &until) != 0)
            break;
    int done = R.state == RACE_DONE;
    int join = done && R.joinable;
    pthread_t th = R.thread;
    if (done) {
        R.joinable = 0;
        R.state = RACE_IDLE;
    }
    R.armed = 0;
    pthread_mutex_unlock(&F.lock);
    if (join)
        pthread_join(th, NULL);
    return done;
}

EXPORT CUresult cuCtxGetId(struct CUctx_st *c, unsigned long long *id)
{
    if (deinit_call())
        return E_DEINITIALIZED;
    if (!c)
        c = current();
    if (!c)
        return E_INVALID_CONTEXT;
    pthread_mutex_lock(&F.lock);
    CUresult r = c->destroyed ? E_CONTEXT_IS_DESTROYED : OK;
    if (r == OK)
        *id = c->id;
    t_checked_ctx = c;
    t_checked_id = c->id;
    t_check_fresh = r == OK;
    pthread_mutex_unlock(&F.lock);
    return r;
}

EXPORT CUresult cuCtxGetCurrent(struct CUctx_st **ctx)
{
    if (deinit_call())
        return E_DEINITIALIZED;
    if (!F.initialized)
        return E_NOT_INITIALIZED;
    *ctx = current();
    return OK;
}

EXPORT CUresult cuCtxPushCurrent_v2(struct CUctx_st *ctx)
{
    if (deinit_call())
        return E_DEINITIALIZED;
    if (!ctx || t_depth >= 16)
        return E_INVALID_CONTEXT;
    pthread_mutex_lock(&F.lock); /* another thread may be destroying it: the real driver answers either way */
    int destroyed = ctx->destroyed;
    pthread_mutex_unlock(&F.lock);
    if (destroyed)
        return E_INVALID_CONTEXT;
    t_stack[t_depth++] = ctx;
    return OK;
}

EXPORT CUresult cuCtxPopCurrent_v2(struct CUctx_st **ctx)
{
    if (t_depth == 0)
        return E_INVALID_CONTEXT;
    struct CUctx_st *c = t_stack[--t_depth];
    if (ctx)
        *ctx = c;
    return OK;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
    struct CUctx_st *c = current();
    if (!c)
        return E_INVALID_CONTEXT;
    *d = c->device;
    return OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Events
 * ------------------------------------------------------------------------------------------------- */

/* F.lock held: a use of destroyed handle h (of ctx when ctx had id ctx_id; ctx NULL: not a handle at all). The
 * one use a context-id check on this thread just before could not prevent (the check answered the handle's
 * context id, and no use or destruction of this thread's came between: a reset on another thread landed after
 * it) is counted in raced_handle_uses; any other ABORTS (KT_TEST_CUDA_LENIENT=1: only counted). */
static int handle_dead_use_locked(const char *what, void *h, struct CUctx_st *ctx, unsigned long long ctx_id)
{
    int fresh = t_check_fresh;
    t_check_fresh = 0;
    F.st.event_bad_handles++;
    if (ctx && fresh && t_checked_ctx == ctx && t_checked_id == ctx_id) {
        F.st.raced_handle_uses++; /* checked alive just before: the reset came between (unpreventable) */
        return 0;
    }
    if (!getenv("KT_TEST_CUDA_LENIENT")) {
        fprintf(stderr, "kt_test_cuda_driver: use of a destroyed or bogus %s %p: a use after free on a real "
                        "driver\n", what, h);
        abort();
    }
    return 0;
}

/* F.lock held: m is a loaded module (a dead one aborts, as handle_dead_use_locked says). */
static int module_ok_locked(struct CUmod_st *m)
{
    if (m && m->magic == MAGIC_MODULE)
        return 1;
    int dead = m && m->magic == MAGIC_DEAD;
    return handle_dead_use_locked(dead ? "module" : "non-module", m, dead ? m->ctx : NULL, dead ? m->ctx_id : 0);
}

/* F.lock held: the allocation holding [p, p + bytes), NULL if none (module globals, the test's own memory). */
static alloc_t *alloc_find_locked(uintptr_t p, size_t bytes)
{
    for (alloc_t *a = F.allocs; a; a = a->next)
        if (p >= a->base && p - a->base < (a->bytes ? a->bytes : 1) && bytes <= a->bytes - (p - a->base))
            return a;
    return NULL;
}

/* F.lock held: 1 unless [p, p + bytes) lies in a freed allocation (which aborts, or counts where it raced). */
static int memory_ok_locked(uintptr_t p, size_t bytes)
{
    alloc_t *a = NULL;
    for (alloc_t *x = F.allocs; x; x = x->next) /* the newest first: a freed range may be handed out again */
        if (p >= x->base && p - x->base < (x->bytes ? x->bytes : 1)) {
            a = x;
            break;
        }
    (void)bytes;
    if (!a || !a->dead)
        return 1;
    return handle_dead_use_locked(a->host ? "host allocation" : "device allocation", (void *)p, a->ctx, a->ctx_id);
}

/* F.lock held. */
static int event_ok_locked(struct CUevent_st *e)
{
    if (e && e->magic == MAGIC_EVENT) {
        t_check_fresh = 0;
        return 1;
    }
    int dead = e && e->magic == MAGIC_DEAD;
    return handle_dead_use_locked(dead ? "event" : "non-event", e, dead ? e->ctx : NULL, dead ? e->ctx_id : 0);
}

EXPORT CUresult cuEventCreate(struct CUevent_st **ev, unsigned int flags)
{
    (void)flags;
    struct CUctx_st *c = current();
    if (!c)
        return E_INVALID_CONTEXT;
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e)
        return 2;
    e->magic = MAGIC_EVENT;
    e->ctx = c;
    pthread_mutex_lock(&F.lock);
    e->ctx_id = c->id;
    e->all_next = F.events;
    F.events = e;
    F.st.event_creates++;
    F.live_events++;
    int reset = F.reset_creates && c == &F.ctx[F.reset_device] && --F.reset_creates == 0;
    pthread_mutex_unlock(&F.lock);
    *ev = e;
    if (reset) /* as if another thread's cudaDeviceReset landed now: this event dies with the rest */
        cuDevicePrimaryCtxReset(c->device);
    return OK;
}

EXPORT CUresult cuEventDestroy_v2(struct CUevent_st *e)
{
    if (deinit_call())
        return E_DEINITIALIZED;
    race_point(e);
    pthread_mutex_lock(&F.lock);
    if (!event_ok_locked(e)) {
        pthread_mutex_unlock(&F.lock);
        return E_INVALID_HANDLE;
    }
    e->magic = MAGIC_DEAD;
    F.st.event_destroys++;
    F.live_events--;
    pthread_mutex_unlock(&F.lock);
    return OK;
}

EXPORT CUresult cuEventRecord(struct CUevent_st *e, struct CUstream_st *stream)
{
    if (deinit_call())
        return E_DEINITIALIZED;
    race_point(e);
    pthread_mutex_lock(&F.lock);
    F.st.event_records++;
    if (!event_ok_locked(e)) {
        pthread_mutex_unlock(&F.lock);
        return E_INVALID_HANDLE;
    }
    struct CUstream_st *s = resolve_locked(stream);
    if (!s || s->ctx != e->ctx) {
        pthread_mutex_unlock(&F.lock);
        return s ? E_INVALID_HANDLE : E_INVALID_CONTEXT;
    }
    CUresult lr = legacy_use_locked(s);
    if (lr != OK) {
        pthread_mutex_unlock(&F.lock);
        return lr;
    }
    e->recorded = 1;
    e->done = 0;
    e->gen++;
    e->captured = s->capturing; /* an event record node of the graph: never completes on its own */
    if (s->capturing) {
        pthread_mutex_unlock(&F.lock);
        return OK;
    }
    op_t *op = calloc(1, sizeof *op);
    op->kind = OP_RECORD;
    op->event = e;
    op->gen = e->gen;
    push_locked(s, op);
    pthread_mutex_unlock(&F.lock);
    return OK;
}

EXPORT CUresult cuEventQuery(struct CUevent_st *e)
{
    if (deinit_call())
        return E_DEINITIALIZED;
    race_point(e);
    pthread_mutex_lock(&F.lock);
    if (F.block_queries) { /* kt_test_cuda_driver_block_queries: wait inside the call, as a slow driver does */
        F.st.blocked_queries++;
        pthread_cond_broadcast(&F.cond);
        while (F.block_queries)
            pthread_cond_wait(&F.cond, &F.lock);
    }
    F.st.event_queries++;
    if (t_watched)
        F.st.watched_queries++;
    CUresult r = capture_unsafe_locked();
    if (r == OK && F.query_answers && e && e->magic == MAGIC_EVENT) { /* kt_test_cuda_driver_query_answer */
        F.query_answers--;
        F.st.forced_query_answers++;
        t_check_fresh = 0;
        pthread_mutex_unlock(&F.lock);
        return F.query_answer;
    }
    if (r == OK)
        r = !event_ok_locked(e) ? E_INVALID_HANDLE : e->captured ? E_CAPTURED_EVENT
                                 : (!e->recorded || e->done) ? OK : E_NOT_READY;
    pthread_mutex_unlock(&F.lock);
    return r;
}

EXPORT CUresult cuEventSynchronize(struct CUevent_st *e)
{
    race_point(e);
    pthread_mutex_lock(&F.lock);
    F.st.event_syncs++;
    if (t_watched)
        F.st.watched_blocking++;
    CUresult cr = capture_unsafe_locked();
    if (cr != OK || !event_ok_locked(e) || e->captured) {
        pthread_mutex_unlock(&F.lock);
        return cr != OK ? cr : e->magic == MAGIC_EVENT ? E_CAPTURED_EVENT : E_INVALID_HANDLE;
    }
    while (e->recorded && !e->done && e->magic == MAGIC_EVENT)
        pthread_cond_wait(&F.cond, &F.lock);
    pthread_mutex_unlock(&F.lock);
    return OK;
}

static CUresult elapsed(float *ms, struct CUevent_st *a, struct CUevent_st *b)
{
    race_point(a);
    pthread_mutex_lock(&F.lock);
    F.st.elapsed_calls++;
    if (t_watched)
        F.st.watched_queries++;
    CUresult r = OK;
    if (!event_ok_locked(a) || !event_ok_locked(b) || !a->recorded || !b->recorded || a->ctx != b->ctx)
        r = E_INVALID_HANDLE;
    else if (a->captured || b->captured)
        r = E_CAPTURED_EVENT;
    else if (!a->done || !b->done)
        r = E_NOT_READY;
    else
        *ms = (float)((double)((int64_t)(b->ts - a->ts)) / 1e6); /* float ms, as the driver returns */
    pthread_mutex_unlock(&F.lock);
    return r;
}

EXPORT CUresult cuEventElapsedTime(float *ms, struct CUevent_st *a, struct CUevent_st *b)
{
    return elapsed(ms, a, b);
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, struct CUevent_st *a, struct CUevent_st *b)
{
    return elapsed(ms, a, b);
}

/* ---------------------------------------------------------------------------------------------------
 * Streams
 * ------------------------------------------------------------------------------------------------- */

EXPORT CUresult cuStreamCreate(struct CUstream_st **out, unsigned int flags)
{
    struct CUctx_st *c = current();
    if (!c)
        return E_INVALID_CONTEXT;
    pthread_mutex_lock(&F.lock);
    struct CUstream_st *s = stream_new_locked(c);
    if (s) {
        F.st.stream_creates++;
        s->non_blocking = (flags & 0x1) != 0;
    }
    pthread_mutex_unlock(&F.lock);
    if (!s)
        return 2;
    *out = s;
    return OK;
}

EXPORT CUresult cuStreamDestroy_v2(struct CUstream_st *s)
{
    pthread_mutex_lock(&F.lock);
    if (!s || s->magic != MAGIC_STREAM) {
        if (s && s->magic == MAGIC_DEAD)
            handle_dead_use_locked("stream", s, s->ctx, s->ctx_id);
        pthread_mutex_unlock(&F.lock);
        return E_INVALID_HANDLE;
    }
    s->stop = 1;
    s->held = 0;
    pthread_cond_broadcast(&F.cond);
    pthread_mutex_unlock(&F.lock);
    pthread_join(s->worker, NULL);
    pthread_mutex_lock(&F.lock);
    s->joined = 1;
    s->magic = MAGIC_DEAD;
    F.st.stream_destroys++;
    pthread_mutex_unlock(&F.lock);
    return OK;
}

EXPORT CUresult cuStreamSynchronize(struct CUstream_st *stream)
{
    pthread_mutex_lock(&F.lock);
    F.st.stream_syncs++;
    if (t_watched)
        F.st.watched_blocking++;
    CUresult cr = capture_unsafe_locked();
    struct CUstream_st *s = cr == OK ? resolve_locked(stream) : NULL;
    if (!s) {
        pthread_mutex_unlock(&F.lock);
        return cr != OK ? cr : E_INVALID_HANDLE;
    }
    while (s->head || s->busy)
        pthread_cond_wait(&F.cond, &F.lock);
    pthread_mutex_unlock(&F.lock);
    return OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Stream capture and graphs
 * ------------------------------------------------------------------------------------------------- */

EXPORT CUresult cuStreamBeginCapture_v2(struct CUstream_st *stream, int mode)
{
    pthread_mutex_lock(&F.lock);
    struct CUstream_st *s = stream && stream != STREAM_LEGACY ? resolve_locked(stream) : NULL;
    CUresult r = !s ? (stream ? E_INVALID_HANDLE : E_CAPTURE_UNSUPPORTED) : s->capturing ? E_ILLEGAL_STATE : OK;
    if (r == OK) {
        s->capturing = 1;
        s->cap_mode = mode;
        s->cap_thread = pthread_self();
        s->cap_invalid = 0;
        s->cap_work_ns = 0;
        s->cap_vwork_ns = 0;
        if (mode == CAPTURE_GLOBAL)
            F.global_captures++;
    }
    pthread_mutex_unlock(&F.lock);
    return r;
}

EXPORT CUresult cuStreamEndCapture(struct CUstream_st *stream, struct CUgraph_st **graph)
{
    pthread_mutex_lock(&F.lock);
    struct CUstream_st *s = resolve_locked(stream);
    if (!s || !s->capturing) {
        pthread_mutex_unlock(&F.lock);
        return E_ILLEGAL_STATE;
    }
    s->capturing = 0;
    if (s->cap_mode == CAPTURE_GLOBAL)
        F.global_captures--;
    int invalid = s->cap_invalid;
    uint64_t work = s->cap_work_ns, vwork = s->cap_vwork_ns;
    pthread_mutex_unlock(&F.lock);
    *graph = NULL;
    if (invalid)
        return E_CAPTURE_INVALIDATED;
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (!g)
        return 2;
    g->work_ns = work;
    g->vwork_ns = vwork;
    *graph = g;
    return OK;
}

EXPORT CUresult cuStreamIsCapturing(struct CUstream_st *stream, int *status)
{
    if (deinit_call())
        return E_DEINITIALIZED;
    pthread_mutex_lock(&F.lock);
    struct CUstream_st *s = resolve_locked(stream);
    CUresult r = s ? OK : E_INVALID_HANDLE;
    if (s && s->legacy && !s->capturing && legacy_blocked_locked(s))
        r = E_CAPTURE_IMPLICIT; /* the legacy stream would synchronise with a capturing blocking stream */
    else if (s)
        *status = !s->capturing ? 0 : s->cap_invalid ? 2 : 1;
    pthread_mutex_unlock(&F.lock);
    return r;
}

EXPORT CUresult cuThreadExchangeStreamCaptureMode(int *mode)
{
    if (!mode)
        return E_INVALID_VALUE;
    int old = t_capture_mode;
    t_capture_mode = *mode;
    *mode = old;
    return OK;
}

EXPORT CUresult cuGraphInstantiateWithFlags(struct CUgraphExec_st **exec, struct CUgraph_st *g,
                                            unsigned long long flags)
{
    (void)flags;
    if (!g)
        return E_INVALID_VALUE;
    struct CUgraphExec_st *x = calloc(1, sizeof *x);
    if (!x)
        return 2;
    x->work_ns = g->work_ns;
    x->vwork_ns = g->vwork_ns;
    *exec = x;
    return OK;
}

EXPORT CUresult cuGraphLaunch(struct CUgraphExec_st *exec, struct CUstream_st *stream)
{
    if (!exec)
        return E_INVALID_VALUE;
    op_t *op = calloc(1, sizeof *op); /* the whole graph as one op: slept work, then the virtual jump */
    op->kind = exec->vwork_ns ? OP_VWORK : OP_WORK;
    op->ns = exec->vwork_ns ? exec->vwork_ns : exec->work_ns;
    if (exec->vwork_ns && exec->work_ns) {
        op_t *w = calloc(1, sizeof *w);
        w->kind = OP_WORK;
        w->ns = exec->work_ns;
        CUresult r = enqueue(stream, w);
        if (r != OK) {
            free(op);
            return r;
        }
    }
    return enqueue(stream, op);
}

EXPORT CUresult cuGraphExecDestroy(struct CUgraphExec_st *exec)
{
    free(exec);
    return OK;
}

EXPORT CUresult cuGraphDestroy(struct CUgraph_st *g)
{
    free(g);
    return OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Modules and launches
 * ------------------------------------------------------------------------------------------------- */

static int type_size(const char *t)
{
    if (!strncmp(t, ".u64", 4) || !strncmp(t, ".b64", 4) || !strncmp(t, ".s64", 4) || !strncmp(t, ".f64", 4))
        return 8;
    if (!strncmp(t, ".u32", 4) || !strncmp(t, ".b32", 4) || !strncmp(t, ".s32", 4) || !strncmp(t, ".f32", 4))
        return 4;
    if (!strncmp(t, ".u16", 4) || !strncmp(t, ".b16", 4) || !strncmp(t, ".s16", 4))
        return 2;
    return 1;
}

static void read_ident(const char *p, char *out, size_t n)
{
    size_t i = 0;
    while (*p == ' ' || *p == '\t')
        p++;
    while (i + 1 < n && (p[i] == '_' || p[i] == '$' || (p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'z') ||
                         (p[i] >= 'A' && p[i] <= 'Z'))) {
        out[i] = p[i];
        i++;
    }
    out[i] = 0;
}

/* Parses the PTX text for `.entry NAME(.param .T a, ...)` and module-scope `.global .T NAME;`. */
/* Newest PTX ISA (x10) a driver version JIT-compiles (from the PTX ISA release notes; approximate). */
static int ptx_isa_max(int driver)
{
    static const int table[][2] = {{13000, 90}, {12090, 88}, {12080, 87}, {12070, 86}, {12050, 85}, {12040, 84},
                                   {12030, 83}, {12020, 82}, {12010, 81}, {12000, 80}, {11080, 78}, {11040, 74},
                                   {11000, 70}, {10020, 65}, {10000, 63}, {9000, 60}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (driver >= table[i][0])
            return table[i][1];
    return 0;
}

EXPORT CUresult cuModuleLoadData(struct CUmod_st **out, const void *image)
{
    if (!current())
        return E_INVALID_CONTEXT;
    if (capture_unsafe() != OK)
        return E_CAPTURE_UNSUPPORTED;
    const char *t = image;
    const char *ver = strstr(t, ".version");
    const char *tgt = strstr(t, ".target");
    if (!ver || !tgt)
        return 218; /* CUDA_ERROR_INVALID_PTX */
    unsigned vmaj = 0, vmin = 0, sm = 0;
    if (sscanf(ver, ".version %u.%u", &vmaj, &vmin) != 2 || sscanf(tgt, ".target sm_%u", &sm) != 1)
        return 218;
    if ((int)(vmaj * 10 + vmin) > ptx_isa_max((int)env_u64("KT_TEST_CUDA_DRIVER_VERSION", 13000)))
        return E_UNSUPPORTED_PTX_VERSION;
    if ((int)sm > (F.cc ? F.cc : 90))
        return E_NO_BINARY_FOR_GPU;
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m)
        return 2;
    for (const char *p = strstr(t, ".entry"); p && m->nfn < 16; p = strstr(p + 6, ".entry")) {
        struct CUfunc_st *f = &m->fn[m->nfn++];
        f->mod = m;
        read_ident(p + 6, f->name, sizeof f->name);
        const char *close = strchr(p, ')');
        for (const char *q = strstr(p, ".param"); q && close && q < close && f->nparams < 8;
             q = strstr(q + 6, ".param")) {
            const char *ty = q + 6;
            while (*ty == ' ' || *ty == '\t')
                ty++;
            f->psize[f->nparams++] = type_size(ty);
        }
    }
    for (const char *p = strstr(t, ".global"); p && m->nglob < 16; p = strstr(p + 7, ".global")) {
        const char *eol = strchr(p, '\n');
        const char *semi = strchr(p, ';');
        if (!semi || (eol && eol < semi) || (p > t && p[-1] != ' ' && p[-1] != '\t' && p[-1] != '\n'))
            continue; /* an instruction such as st.global.u64, not a declaration */
        const char *last = p;
        for (const char *q = p; q < semi; q++)
            if (*q == ' ' || *q == '\t')
                last = q + 1;
        fglobal_t *g = &m->glob[m->nglob++];
        read_ident(last, g->name, sizeof g->name);
        const char *ty = strstr(p, ".u");
        if (!ty || ty > semi)
            ty = strstr(p, ".b");
        g->bytes = ty && ty < semi ? (size_t)type_size(ty) : 8;
        g->mem = calloc(1, g->bytes);
    }
    m->magic = MAGIC_MODULE;
    m->ctx = current();
    pthread_mutex_lock(&F.lock);
    m->ctx_id = m->ctx->id;
    m->all_next = F.modules;
    F.modules = m;
    F.st.module_loads++;
    pthread_mutex_unlock(&F.lock);
    *out = m;
    return OK;
}

EXPORT CUresult cuModuleUnload(struct CUmod_st *m)
{
    if (!m)
        return E_INVALID_HANDLE;
    if (capture_unsafe() != OK)
        return E_CAPTURE_UNSUPPORTED;
    pthread_mutex_lock(&F.lock);
    if (!module_ok_locked(m)) {
        pthread_mutex_unlock(&F.lock);
        return E_INVALID_HANDLE;
    }
    m->magic = MAGIC_DEAD; /* the struct is kept, so a later use is caught */
    F.st.module_unloads++;
    pthread_mutex_unlock(&F.lock);
    return OK;
}

EXPORT CUresult cuModuleGetFunction(struct CUfunc_st **fn, struct CUmod_st *m, const char *name)
{
    pthread_mutex_lock(&F.lock);
    int ok = module_ok_locked(m);
    pthread_mutex_unlock(&F.lock);
    for (int i = 0; ok && m && i < m->nfn; i++)
        if (!strcmp(m->fn[i].name, name)) {
            *fn = &m->fn[i];
            return OK;
        }
    return ok ? E_NOT_FOUND : E_INVALID_HANDLE;
}

EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, struct CUmod_st *m, const char *name)
{
    pthread_mutex_lock(&F.lock);
    int ok = module_ok_locked(m);
    pthread_mutex_unlock(&F.lock);
    if (!ok)
        return E_INVALID_HANDLE;
    for (int i = 0; m && i < m->nglob; i++)
        if (!strcmp(m->glob[i].name, name)) {
            if (dptr)
                *dptr = (CUdeviceptr)(uintptr_t)m->glob[i].mem;
            if (bytes)
                *bytes = m->glob[i].bytes;
            return OK;
        }
    return E_NOT_FOUND;
}

EXPORT CUresult cuLaunchKernel(struct CUfunc_st *f, unsigned int gx, unsigned int gy, unsigned int gz,
                               unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                               struct CUstream_st *stream, void **params, void **extra)
{
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shmem; (void)extra;
    if (!f)
        return E_INVALID_HANDLE;
    pthread_mutex_lock(&F.lock);
    int live = module_ok_locked(f->mod); /* a function of an unloaded or freed module */
    pthread_mutex_unlock(&F.lock);
    if (!live)
        return E_INVALID_HANDLE;
    op_t *op = calloc(1, sizeof *op);
    op->kind = OP_LAUNCH;
    op->fn = f;
    size_t off = 0;
    for (int i = 0; i < f->nparams && params; i++) {
        memcpy(op->params + off, params[i], (size_t)f->psize[i]);
        off += (size_t)f->psize[i];
    }
    pthread_mutex_lock(&F.lock);
    F.st.launches++;
    struct CUstream_st *held = NULL; /* the stream a hold kernel is counted on, until it runs or fails to queue */
    if (!strcmp(f->name, "kt_hold_wait")) {
        struct CUstream_st *hs = resolve_locked(stream);
        if (hs && !hs->capturing) {
            hs->holds_queued++;
            held = hs;
        }
    } else if (!f->launched) {
        /* Lazy loading (CUDA 12.2+ default): a kernel's first launch loads it, which can synchronise the
         * context; modelled as waiting while a spinning kernel is queued or running on a stream of the context. */
        struct CUctx_st *c = current();
        f->launched = 1;
        for (;;) {
            int spinning = 0;
            for (struct CUstream_st *s = F.streams; s && !spinning; s = s->all_next)
                spinning = s->ctx == c && s->magic == MAGIC_STREAM && s->holds_queued > 0;
            if (!spinning)
                break;
            F.st.lazy_load_waits++;
            pthread_cond_wait(&F.cond, &F.lock);
        }
    }
    pthread_mutex_unlock(&F.lock);
    CUresult r = enqueue(stream, op);
    if (r != OK && held) { /* not queued (906 beside a capture, a stream gone): it will never run to uncount it */
        pthread_mutex_lock(&F.lock);
        held->holds_queued--;
        pthread_cond_broadcast(&F.cond);
        pthread_mutex_unlock(&F.lock);
    }
    return r;
}

/* ---------------------------------------------------------------------------------------------------
 * Memory ("device" memory is host memory; a CUdeviceptr is its address)
 * ------------------------------------------------------------------------------------------------- */

/* A new allocation of the current context (calloc'ed memory, recorded); NULL without memory. */
static void *alloc_new(size_t bytes, int host)
{
    alloc_t *a = calloc(1, sizeof *a);
    void *p = calloc(1, bytes ? bytes : 1);
    if (!a || !p) {
        free(a);
        free(p);
        return NULL;
    }
    a->base = (uintptr_t)p;
    a->bytes = bytes ? bytes : 1;
    a->host = host;
    pthread_mutex_lock(&F.lock);
    a->ctx = current();
    a->ctx_id = a->ctx ? a->ctx->id : 0;
    a->next = F.allocs;
    F.allocs = a;
    pthread_mutex_unlock(&F.lock);
    return p;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    if (!current())
        return E_INVALID_CONTEXT;
    if (capture_unsafe() != OK)
        return E_CAPTURE_UNSUPPORTED;
    void *p = alloc_new(bytes, 0);
    if (!p)
        return 2;
    pthread_mutex_lock(&F.lock);
    F.st.mem_allocs++;
    pthread_mutex_unlock(&F.lock);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return OK;
}

/* cuMemFree / cuMemFreeHost: a freed allocation aborts (handle_dead_use_locked). The device memory itself is kept
 * (the simulated device may still be copying into it); host memory is freed. */
static CUresult alloc_free(uintptr_t p, int host)
{
    pthread_mutex_lock(&F.lock);
    alloc_t *a = alloc_find_locked(p, 0);
    if (a && a->base == p && a->dead) {
        handle_dead_use_locked(host ? "host allocation" : "device allocation", (void *)p, a->ctx, a->ctx_id);
        pthread_mutex_unlock(&F.lock);
        return E_INVALID_VALUE;
    }
    if (!a || a->base != p || a->host != host) {
        pthread_mutex_unlock(&F.lock);
        return E_INVALID_VALUE;
    }
    a->dead = 1;
    if (!host)
        F.st.mem_frees++;
    pthread_mutex_unlock(&F.lock);
    if (host)
        free((void *)p);
    return OK;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    if (capture_unsafe() != OK)
        return E_CAPTURE_UNSUPPORTED;
    return alloc_free((uintptr_t)dptr, 0);
}

/* Mapped pinned host memory: the host address is the device address too. */
EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags)
{
    (void)flags;
    if (!pp)
        return E_INVALID_VALUE;
    if (!current())
        return E_INVALID_CONTEXT;
    if (capture_unsafe() != OK)
        return E_CAPTURE_UNSUPPORTED;
    *pp = alloc_new(bytes, 1);
    return *pp ? OK : 2;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *dptr, void *p, unsigned int flags)
{
    if (!dptr || !p || flags)
        return E_INVALID_VALUE;
    pthread_mutex_lock(&F.lock);
    int ok = memory_ok_locked((uintptr_t)p, 1);
    pthread_mutex_unlock(&F.lock);
    if (!ok)
        return E_INVALID_VALUE;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return OK;
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    if (capture_unsafe() != OK)
        return E_CAPTURE_UNSUPPORTED;
    return alloc_free((uintptr_t)p, 1);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, struct CUstream_st *stream)
{
    pthread_mutex_lock(&F.lock);
    int ok = memory_ok_locked((uintptr_t)dst, bytes);
    pthread_mutex_unlock(&F.lock);
    if (!ok)
        return E_INVALID_VALUE;
    op_t *op = calloc(1, sizeof *op);
    op->kind = OP_COPY;
    op->staged = malloc(bytes ? bytes : 1);
    memcpy(op->staged, src, bytes); /* pageable source: staged before returning, as the driver does */
    op->src = op->staged;
    op->dst = (void *)(uintptr_t)dst;
    op->bytes = bytes;
    return enqueue(stream, op);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, struct CUstream_st *stream)
{
    pthread_mutex_lock(&F.lock);
    int ok = memory_ok_locked((uintptr_t)src, bytes);
    pthread_mutex_unlock(&F.lock);
    if (!ok)
        return E_INVALID_VALUE;
    op_t *op = calloc(1, sizeof *op);
    op->kind = OP_COPY;
    op->src = (const void *)(uintptr_t)src;
    op->dst = dst;
    op->bytes = bytes;
    return enqueue(stream, op);
}

/* ---------------------------------------------------------------------------------------------------
 * Control API (tests only)
 * ------------------------------------------------------------------------------------------------- */

EXPORT void kt_test_cuda_driver_stats(kt_test_cuda_stats_t *out)
{
    pthread_mutex_lock(&F.lock);
    *out = F.st;
    pthread_mutex_unlock(&F.lock);
}

EXPORT void kt_test_cuda_driver_query_answer(int result, uint32_t n)
{
    pthread_mutex_lock(&F.lock);
    F.query_answer = result;
    F.query_answers = n;
    pthread_mutex_unlock(&F.lock);
}

EXPORT void kt_test_cuda_driver_reset_after_creates(int device, uint32_t n)
{
    pthread_mutex_lock(&F.lock);
    F.reset_device = device >= 0 && device < MAX_DEVICES ? device : 0;
    F.reset_creates = n;
    pthread_mutex_unlock(&F.lock);
}

EXPORT void kt_test_cuda_driver_init_gate(int closed)
{
    pthread_mutex_lock(&F.lock);
    F.init_gate = closed;
    if (!closed)
        F.init_waiting = 0;
    pthread_cond_broadcast(&F.cond);
    pthread_mutex_unlock(&F.lock);
}

EXPORT void kt_test_cuda_driver_block_queries(int on)
{
    pthread_mutex_lock(&F.lock);
    F.block_queries = on;
    pthread_cond_broadcast(&F.cond);
    pthread_mutex_unlock(&F.lock);
}

EXPORT void kt_test_cuda_driver_deinit(int on)
{
    __atomic_store_n(&F.deinit, on, __ATOMIC_RELEASE);
}

EXPORT uint64_t kt_test_cuda_driver_live_events(void)
{
    pthread_mutex_lock(&F.lock);
    uint64_t n = F.live_events;
    pthread_mutex_unlock(&F.lock);
    return n;
}

EXPORT void kt_test_cuda_driver_watch_thread(int on)
{
    t_watched = on;
}

EXPORT int kt_test_cuda_driver_hold(struct CUstream_st *stream, int hold)
{
    pthread_mutex_lock(&F.lock);
    struct CUstream_st *s = resolve_any_locked(stream);
    if (s) {
        s->held = hold;
        pthread_cond_broadcast(&F.cond);
    }
    pthread_mutex_unlock(&F.lock);
    return s ? 0 : -1;
}

EXPORT int kt_test_cuda_driver_work(struct CUstream_st *stream, uint64_t ns, int virtual_time)
{
    op_t *op = calloc(1, sizeof *op);
    op->kind = virtual_time ? OP_VWORK : OP_WORK;
    op->ns = ns;
    return enqueue(stream, op) == OK ? 0 : -1;
}

EXPORT uint64_t kt_test_cuda_driver_device_now(void)
{
    pthread_mutex_lock(&F.lock);
    uint64_t v = dev_now_locked();
    pthread_mutex_unlock(&F.lock);
    return v;
}

EXPORT uint64_t kt_test_cuda_driver_device_to_host(uint64_t device_ns)
{
    pthread_mutex_lock(&F.lock);
    double rel = (double)(int64_t)(device_ns - F.offset_ns - F.raw0) / (1.0 + F.drift_ppm * 1e-6);
    uint64_t v = F.raw0 + (uint64_t)(int64_t)rel;
    pthread_mutex_unlock(&F.lock);
    return v;
}

EXPORT size_t kt_test_cuda_driver_record_log(struct CUstream_st *stream, uint64_t *ts, size_t max)
{
    pthread_mutex_lock(&F.lock);
    struct CUstream_st *s = resolve_any_locked(stream);
    size_t n = 0;
    if (s) {
        n = s->log_len < max ? s->log_len : max;
        if (n)
            memcpy(ts, s->log, n * sizeof *ts);
    }
    pthread_mutex_unlock(&F.lock);
    return n;
}

EXPORT void kt_test_cuda_driver_set_clock(uint64_t offset_ns, double drift_ppm, uint64_t gt_granularity_ns)
{
    pthread_mutex_lock(&F.lock);
    F.offset_ns = offset_ns;
    F.drift_ppm = drift_ppm;
    F.gt_gran = gt_granularity_ns;
    F.virt_ns = 0;
    F.raw0 = host_raw();
    pthread_mutex_unlock(&F.lock);
}

EXPORT void kt_test_cuda_driver_freeze_clock(int on)
{
    pthread_mutex_lock(&F.lock);
    if (on && !F.frozen) {
        F.frozen_dev = dev_now_locked() - F.virt_ns;
    }
    F.frozen = on;
    pthread_mutex_unlock(&F.lock);
}
