/* cl_track.c — attached queues and tracked events: completion callbacks, polling flush, verbose lines. */
#include "backends/opencl/cl_internal.h"
#include "core/internal.h"
#include "core/service.h"
#include "export/escape.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>

/* ---------------------------------------------------------------------------------------------------
 * Tracked-command records
 *
 * Records live in chunks that are never freed, indexed by slot. A callback gets a handle (slot plus the
 * record's generation) as an integer in user_data, so a late callback for a record that was already
 * collected by a flush, dropped, or reused for another event finds a different generation and does nothing.
 * Ownership moves by compare-and-swap on the tag: PENDING -> CLAIMED (a callback or a flush completes it)
 * or PENDING -> PEEKED (a flush looks at the event's status; a callback arriving meanwhile leaves its status
 * and flips PEEKED -> PEEKED_CB, and the flush completes the record for it). Whoever moves a record to
 * CLAIMED records it, releases the event (exactly once) and frees the slot. The tracking thread publishes a
 * record as PEEKED and holds it so through clSetEventCallback: no flush can claim it (and release what may be
 * the event's only reference) while the driver is still inside that call, and a callback that fires during it
 * leaves its status for the tracking thread, which finishes the record once the call has returned.
 *
 * Polled records (ST_POLLED) have no callback: on a profiling queue the stamps come from the event, not from
 * when completion was seen, so the collector polls the event instead (KTIMING_OPENCL_COMPLETION, default
 * poll): its end stamp, which exists once the command is complete, else its status. POLLED -> PEEKED while a
 * poller looks, back to POLLED if the command is still running, or -> CLAIMED. On PoCL a completion callback
 * runs on the worker that executes the commands, and registering and running one per command cost that worker
 * ~0.4 us of every 2 us dispatch; polling costs the program nothing but the event it keeps.
 * ------------------------------------------------------------------------------------------------- */

#define SLOT_BITS 24u
#define SLOT_MASK ((1u << SLOT_BITS) - 1u)
#define CHUNK_SHIFT 10u
#define CHUNK_SIZE (1u << CHUNK_SHIFT)
#define MAX_CHUNKS (1u << (SLOT_BITS - CHUNK_SHIFT))
#define NAME_CAP 96

enum { ST_FREE = 0, ST_PENDING = 1, ST_PEEKED = 2, ST_PEEKED_CB = 3, ST_CLAIMED = 4, ST_POLLED = 5 };
#define TAG(gen, st) (((uint64_t)(gen) << 3) | (uint64_t)(st))
#define TAG_GEN(t) ((t) >> 3)
#define TAG_ST(t) ((unsigned)((t)&7u))
/* Generation bits that fit in a pointer-sized handle next to the slot. */
#define HANDLE_GEN_MASK ((uint64_t)(UINTPTR_MAX >> SLOT_BITS))

/* One tracked command: one cache line, since it crosses from the enqueuing thread to the completion thread and
 * back for every command. */
typedef struct rec_t {
    _Alignas(64) _Atomic uint64_t tag; /* generation << 3 | state */
    _Atomic uint32_t next_free;        /* free-list link: slot + 1 of the next free record, 0 = end */
    _Atomic int cb_status;             /* status a callback delivered while the record was peeked */
    uint32_t slot;                     /* own index */
    kt_kernel_id_t kernel;             /* interned name */
    kt_cl_ctx_t *ctx;                  /* attached queue the command belongs to */
    cl_event event;                    /* retained by ktiming while tracked */
    uint64_t enqueue_ns;               /* host time of the enqueue */
    uint64_t observed_ns;              /* host-timed queues: when the callback saw the completion (0: unknown) */
    uint32_t thread;                   /* kt_thread_ordinal() of the enqueuing thread */
    _Atomic uint32_t qnext;            /* polled records: the next of its queue's FIFO (slot + 1, 0 = last) */
} rec_t;
_Static_assert(sizeof(rec_t) == 64, "a record is one cache line");

/* A chunk of records. */
typedef struct chunk_t {
    rec_t rec[CHUNK_SIZE];        /* the records */
    uint64_t bytes[CHUNK_SIZE];   /* bytes each record's command moves (transfers; 0 for kernels) */
    char (*names)[NAME_CAP];      /* verbose mode only: kernel name of each record, for its line */
} chunk_t;

static _Atomic(chunk_t *) g_chunks[MAX_CHUNKS]; /* allocated on demand, kept until exit */
static int g_verbose;                         /* KTIMING_VERBOSE=profile_exec (read once, before any record) */
static _Atomic uint32_t g_next_slot;          /* slots ever handed out (scan bound) */
static _Atomic uint32_t g_free_head;          /* freed records (slot + 1, 0 = none), pushed by completions */
static _Thread_local uint32_t t_free;         /* this thread's private free list (slot + 1), taken whole */
static pthread_once_t g_free_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_free_key;              /* returns a thread's private list to g_free_head at exit */

static rec_t *slot_rec(uint32_t slot)
{
    chunk_t *chunk = atomic_load_explicit(&g_chunks[slot >> CHUNK_SHIFT], memory_order_acquire);
    return chunk ? &chunk->rec[slot & (CHUNK_SIZE - 1)] : NULL;
}

static chunk_t *slot_chunk(uint32_t slot)
{
    return atomic_load_explicit(&g_chunks[slot >> CHUNK_SHIFT], memory_order_acquire);
}

/* The verbose-mode name buffer of a record ("" when verbose is off). */
static char *rec_name(const rec_t *r)
{
    static char none[1];
    chunk_t *chunk = atomic_load_explicit(&g_chunks[r->slot >> CHUNK_SHIFT], memory_order_acquire);
    return chunk->names ? chunk->names[r->slot & (CHUNK_SIZE - 1)] : none;
}

/* Push a linked run of free records first..last (slots + 1) onto the shared list. */
static void free_push(uint32_t first, rec_t *last)
{
    uint32_t h = atomic_load(&g_free_head);
    do
        atomic_store_explicit(&last->next_free, h, memory_order_relaxed);
    while (!atomic_compare_exchange_weak(&g_free_head, &h, first));
}

static _Thread_local int t_allocates; /* this thread tracks commands: the records it frees stay on its list */

static void free_list_return(void *unused)
{
    (void)unused;
    t_allocates = 0; /* anything it frees from now on goes to the shared list */
    if (!t_free)
        return;
    rec_t *last = slot_rec(t_free - 1), *next;
    uint32_t n;
    while (last && (n = atomic_load_explicit(&last->next_free, memory_order_relaxed)) != 0 &&
           (next = slot_rec(n - 1)) != NULL)
        last = next;
    if (last)
        free_push(t_free, last);
    t_free = 0;
}

static void free_key_create(void)
{
    pthread_key_create(&g_free_key, free_list_return);
}

/* Records recycle through the shared list in batches: an allocating thread takes the whole list at once (an
 * exchange, so no ABA), then pops privately; completions on other threads push one at a time. */

static rec_t *slot_alloc(void)
{
    if (!t_allocates) {
        t_allocates = 1;
        pthread_once(&g_free_key_once, free_key_create);
        pthread_setspecific(g_free_key, &t_free); /* its list goes back to the shared one at its exit */
    }
    if (!t_free && atomic_load_explicit(&g_free_head, memory_order_relaxed))
        t_free = atomic_exchange(&g_free_head, 0);
    rec_t *r = t_free ? slot_rec(t_free - 1) : NULL; /* a listed slot's chunk always exists */
    if (r) {
        t_free = atomic_load_explicit(&r->next_free, memory_order_relaxed);
        return r;
    }
    uint32_t slot = atomic_fetch_add(&g_next_slot, 1);
    if (slot >= MAX_CHUNKS * CHUNK_SIZE) {
        atomic_fetch_sub(&g_next_slot, 1);
        return NULL;
    }
    uint32_t ci = slot >> CHUNK_SHIFT;
    chunk_t *chunk = atomic_load_explicit(&g_chunks[ci], memory_order_acquire);
    if (!chunk) {
        chunk_t *fresh = aligned_alloc(64, sizeof *fresh);
        char(*names)[NAME_CAP] = g_verbose ? calloc(CHUNK_SIZE, NAME_CAP) : NULL;
        if (!fresh || (g_verbose && !names)) {
            free(fresh);
            free(names);
            return NULL; /* the slot stays unused (never published) */
        }
        memset(fresh, 0, sizeof *fresh);
        fresh->names = names;
        for (uint32_t i = 0; i < CHUNK_SIZE; i++)
            fresh->rec[i].slot = (ci << CHUNK_SHIFT) | i;
        chunk_t *expected = NULL;
        if (atomic_compare_exchange_strong(&g_chunks[ci], &expected, fresh)) {
            chunk = fresh;
        } else {
            free(fresh->names);
            free(fresh);
            chunk = expected;
        }
    }
    return &chunk->rec[slot & (CHUNK_SIZE - 1)];
}

/* Return a record (owned: CLAIMED or never published) to the free list, bumping its generation. A thread that
 * tracks commands keeps what it frees (it records at its synchronisation points) on its own list, first: its next
 * commands reuse those records while they are in its cache, instead of cold ones from the shared list (after a
 * burst of 100,000 commands, recording a sync point's 100 cost about twice as much, one cache miss per record). */
static void slot_free(rec_t *r)
{
    uint64_t t = atomic_load(&r->tag);
    atomic_store(&r->tag, TAG(TAG_GEN(t) + 1, ST_FREE));
    if (t_allocates) {
        atomic_store_explicit(&r->next_free, t_free, memory_order_relaxed);
        t_free = r->slot + 1;
        return;
    }
    free_push(r->slot + 1, r);
}

static void *rec_handle(const rec_t *r, uint64_t gen)
{
    return (void *)(uintptr_t)(((gen & HANDLE_GEN_MASK) << SLOT_BITS) | r->slot);
}

/* ---------------------------------------------------------------------------------------------------
 * Attached queues
 * ------------------------------------------------------------------------------------------------- */

struct kt_cl_ctx_t {
    cl_command_queue queue;       /* retained while attached */
    kt__cl_dev_t *dev;            /* its device (clock model) */
    char device_csv[128];         /* device name escaped as a -v line field (kt__escape_field) */
    uint32_t queue_id;            /* kt_queue_register() id */
    int profiling;                /* CL_QUEUE_PROFILING_ENABLE set */
    int out_of_order;             /* CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE set */
    kt_cl_mode_t mode;            /* ASYNC or SYNC */
    _Atomic int detaching;        /* set by kt_cl_detach / kt_cl_detach_async: new tracks are refused */
    struct kt_cl_ctx_t *hnext;    /* chain in g_hash while attached */
    struct kt_cl_ctx_t *rnext;    /* link in g_retired once detached */
    size_t index;                 /* position in g_ctxs while attached */
    /* In flight = tracked - finished. Two counters on their own cache lines, each written by one side (the
     * enqueuing threads, the completion paths), so tracking does not bounce a line between cores. */
    _Alignas(64) _Atomic uint64_t tracked; /* commands handed to kt_cl_track* since attach */
    _Alignas(64) _Atomic uint64_t finished; /* of those: recorded, dropped or refused */
    _Alignas(64) _Atomic uint64_t last_end_ns; /* host-timed fallback, in-order queues: latest command's end */
    /* Its polled records in the order they were tracked (slot + 1, 0 = none): a poll looks at a queue's oldest
     * first and, on an in-order queue, stops at the first one still running, so what a poll costs is what
     * finished since the last one, not what is pending (other queues' included). Appended under fifo_lock by
     * the enqueuing threads; unlinked only by the poller holding g_poll_lock (and fifo_lock to unlink). */
    pthread_mutex_t fifo_lock;
    _Atomic uint32_t fifo_head;
    uint32_t fifo_tail; /* under fifo_lock */
};

/* Attached queues: a hash from queue to context (lookups) and an array (flushes walk it). Detached contexts
 * wait on g_retired until their last record is finished and no flush holds a copy of the list (g_pins), then
 * the queue is released and the context freed. g_ctx_lock guards all of it and is never held across a driver
 * call or a wait. */
static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static kt_cl_ctx_t **g_ctxs;               /* attached contexts */
static size_t g_ctx_count, g_ctx_cap;      /* used / allocated entries of g_ctxs */
static kt_cl_ctx_t **g_hash;               /* buckets (power of two), chained through hnext */
static size_t g_hash_cap;                  /* number of buckets */
static kt_cl_ctx_t *g_retired;             /* detached contexts not yet freed */
static _Atomic size_t g_retired_count;     /* entries on g_retired (read without the lock by the collector) */
static unsigned g_pins;                    /* flushes walking a copy of the lists: nothing is freed meanwhile */

static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static int g_sync_default;     /* KTIMING_VERBOSE_SYNC=1 */
static int g_kernels_only;     /* KTIMING_OPENCL_COMMANDS=kernels: transfers and other commands untimed */
static int g_callbacks;        /* KTIMING_OPENCL_COMPLETION=callback: profiled commands use callbacks too */
static FILE *g_log;            /* verbose lines: KTIMING_LOG=path, else stderr (never the program's stdout) */
static _Atomic int g_last_error; /* the last failing cl_int ktiming saw (kt_cl_last_error) */

static void read_env(void)
{
    const char *v = kt__env("KTIMING_VERBOSE");
    if (v) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", v);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            if (!strcmp(tok, "profile_exec") || !strcmp(tok, "all"))
                g_verbose = 1;
    }
    const char *s = kt__env("KTIMING_VERBOSE_SYNC");
    g_sync_default = s && *s && strcmp(s, "0") != 0;
    const char *c = kt__env("KTIMING_OPENCL_COMMANDS");
    g_kernels_only = c && !strcmp(c, "kernels");
    const char *how = kt__env("KTIMING_OPENCL_COMPLETION");
    g_callbacks = how && !strcmp(how, "callback");
    g_log = stderr;
    const char *log = kt__env("KTIMING_LOG");
    char path[4096];
    if (g_verbose && log && *log && kt__path_expand(log, -1, path, sizeof path) == 0) {
        FILE *f = fopen(path, "a");
        if (f) {
            setvbuf(f, NULL, _IOLBF, 0);
            g_log = f;
        }
    }
}

/* One verbose line (already newline-terminated), written whole. */
static void log_line(const char *line)
{
    fputs(line, g_log);
    fflush(g_log);
}

int kt_cl_commands_all(void)
{
    pthread_once(&g_env_once, read_env);
    return !g_kernels_only;
}

int kt_cl_last_error(void)
{
    return atomic_load_explicit(&g_last_error, memory_order_relaxed);
}

static void note_error(cl_int rc)
{
    atomic_store_explicit(&g_last_error, (int)rc, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------------------------------
 * Recording an outcome (callback thread, flush thread, or the enqueuing thread in SYNC mode)
 * ------------------------------------------------------------------------------------------------- */

/* What a record needs to be recorded, whether it lives in a slot (async) or on the stack (sync). */
typedef struct outcome_t {
    kt_cl_ctx_t *ctx;      /* its queue */
    cl_event event;        /* its event (valid during the call) */
    kt_kernel_id_t kernel; /* interned name */
    uint32_t thread;       /* enqueuing thread ordinal */
    uint64_t enqueue_ns;   /* host time of the enqueue */
    const char *name;      /* kernel name for verbose lines (may be empty) */
    uint64_t bytes;        /* bytes the command moves (transfers), 0 for kernels */
    uint64_t end_stamp;    /* the command's device end stamp when the poll that found it done read it, else 0 */
} outcome_t;

static int prof(cl_event ev, cl_profiling_info what, uint64_t *out)
{
    cl_ulong v = 0;
    if (kt__cl.clGetEventProfilingInfo(ev, what, sizeof v, &v, NULL) != CL_SUCCESS)
        return 0;
    *out = (uint64_t)v;
    return 1;
}

static void map_stamp(kt__cl_dev_t *dev, uint64_t device_ns, uint64_t *host_ns, uint64_t *unc)
{
    uint64_t u = 0;
    if (kt__cl_dev_map(dev, device_ns, host_ns, &u) < 0)
        *host_ns = 0;
    else if (u > *unc)
        *unc = u;
}

/* A command's negative execution status, in words. It is no enqueue error: -1 is no CL_DEVICE_NOT_FOUND, only
 * "terminated abnormally" (the specification's words); a failed wait list has its own code; the resource codes
 * drivers use there keep their names. */
static void exec_status_name(cl_int status, char *out, size_t cap)
{
    if (status == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        snprintf(out, cap, "%s", kt_cl_error_name(status));
    else if (status == CL_OUT_OF_RESOURCES || status == CL_OUT_OF_HOST_MEMORY ||
             status == CL_MEM_OBJECT_ALLOCATION_FAILURE)
        snprintf(out, cap, "execution status %d (%s)", (int)status, kt_cl_error_name(status));
    else
        snprintf(out, cap, "execution status %d (terminated abnormally)", (int)status);
}

/* observed_ns: host time the completion was seen (0: now), used only by the host-timed fallback. */
static void record_outcome(const outcome_t *o, cl_int status, uint64_t observed_ns)
{
    kt_cl_ctx_t *c = o->ctx;
    if (status < 0) {
        note_error(status);
        char what[64]; /* last_error keeps 47 characters: every status from -99 to -1 fits */
        exec_status_name(status, what, sizeof what);
        kt_record_error_name(o->kernel, what);
        if (g_verbose) {
            char line[512];
            snprintf(line, sizeof line, "ktiming,error,opencl,%s,%s,%d,%s\n", c->device_csv, o->name, (int)status,
                     what);
            log_line(line);
        }
        return;
    }
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = o->kernel;
    d.queue = c->queue_id;
    d.thread = o->thread;
    d.enqueue_ns = o->enqueue_ns;
    d.bytes = o->bytes;
    uint64_t q = 0, s = 0, b = 0, e = o->end_stamp;
    int device = c->profiling && (e || prof(o->event, CL_PROFILING_COMMAND_END, &e)) &&
                 prof(o->event, CL_PROFILING_COMMAND_START, &b) && b != 0 && e >= b;
    if (device && (g_verbose || kt__span_room())) { /* only a span or a verbose line shows these two */
        prof(o->event, CL_PROFILING_COMMAND_QUEUED, &q);
        prof(o->event, CL_PROFILING_COMMAND_SUBMIT, &s);
    }
    if (device) {
        if (q > s)
            q = 0;
        if (s > b)
            s = 0;
        d.flags = KT_SPAN_DEVICE;
        d.duration_ns = e - b;
        map_stamp(c->dev, b, &d.start_ns, &d.uncertainty_ns);
        map_stamp(c->dev, e, &d.end_ns, &d.uncertainty_ns);
        if (!d.start_ns || !d.end_ns)
            d.start_ns = d.end_ns = 0;
        if (q)
            map_stamp(c->dev, q, &d.queued_ns, &d.uncertainty_ns);
        if (s)
            map_stamp(c->dev, s, &d.submit_ns, &d.uncertainty_ns);
    } else {
        uint64_t start = o->enqueue_ns;
        if (!observed_ns)
            observed_ns = kt_now_ns();
        uint64_t end = observed_ns > start ? observed_ns : start;
        if (!c->out_of_order) { /* in order: it could not start before the previous command ended */
            uint64_t prev = atomic_load(&c->last_end_ns);
            if (prev > start && prev <= end)
                start = prev;
            while (prev < end && !atomic_compare_exchange_weak(&c->last_end_ns, &prev, end)) {
            }
        }
        d.flags = KT_SPAN_HOST_TIMED;
        d.start_ns = start;
        d.end_ns = end;
        d.duration_ns = end - start;
    }
    kt_record_dispatch(&d);
    if (g_verbose) {
        char line[512];
        if (device)
            snprintf(line, sizeof line, "ktiming,exec,opencl,%s,%s,%.6f,%.6f,%.6f,device\n", c->device_csv, o->name,
                     (double)d.duration_ns / 1e6, q && s ? (double)(s - q) / 1e6 : 0.0,
                     s ? (double)(b - s) / 1e6 : 0.0);
        else
            snprintf(line, sizeof line, "ktiming,exec,opencl,%s,%s,%.6f,,,host\n", c->device_csv, o->name,
                     (double)d.duration_ns / 1e6);
        log_line(line);
    }
}

static void rec_outcome(const rec_t *r, outcome_t *o, uint64_t end_stamp)
{
    o->end_stamp = end_stamp;
    o->ctx = r->ctx;
    o->event = r->event;
    o->kernel = r->kernel;
    o->thread = r->thread;
    o->enqueue_ns = r->enqueue_ns;
    o->name = rec_name(r);
    o->bytes = slot_chunk(r->slot)->bytes[r->slot & (CHUNK_SIZE - 1)];
}

/* The owner (CLAIMED) finishes a record: record it (or count it dropped: drop is 1 + a kt_drop_reason_t),
 * release the event, free the slot. The context is touched last, by the `finished` increment that detaching
 * and freeing wait for. */
static void rec_finish_stamped(rec_t *r, cl_int status, uint64_t observed_ns, int drop, uint64_t end_stamp)
{
    outcome_t o;
    rec_outcome(r, &o, end_stamp);
    if (drop)
        kt_record_drop_reason(o.kernel, (kt_drop_reason_t)(drop - 1));
    else
        record_outcome(&o, status, observed_ns);
    kt__cl.clReleaseEvent(o.event);
    slot_free(r);
    atomic_fetch_add(&o.ctx->finished, 1);
}

static void rec_finish(rec_t *r, cl_int status, uint64_t observed_ns, int drop)
{
    rec_finish_stamped(r, status, observed_ns, drop, 0);
}

/* ---------------------------------------------------------------------------------------------------
 * Completion queue and collector thread
 *
 * The driver runs completion callbacks on its own execution thread (PoCL: the worker that ran the command),
 * so whatever a callback does delays the next command. A callback therefore only claims its record and
 * pushes the slot into a bounded lock-free ring (Vyukov's sequence-numbered cells; producers are any driver
 * threads). The collector (the core's collector helper, kt__collector_t) pops slots and does the rest:
 * profiling reads, clock mapping, kt_record_dispatch, the verbose line, clReleaseEvent; it also frees detached
 * queues whose last command is done. A flush drains the ring itself too, so nothing waits on the collector
 * being scheduled. A full ring, or no collector, means the callback finishes the record itself. The collector
 * polls every millisecond while completions keep coming and, after a quiet spell, sleeps until a callback
 * wakes it; a callback wakes it only then (no system call per command otherwise).
 * ------------------------------------------------------------------------------------------------- */

#define RING_CAP (1u << 13) /* callback completions buffered (host-timed queues; profiled ones are polled) */
#define COLLECT_POLL_NS 1000000u /* collector's nap between drains while completions keep coming */
#define COLLECT_IDLE_NAPS 100   /* empty naps before it sleeps until woken */

/* One ring cell: seq says whose turn it is (pos: free for the producer of pos; pos+1: holds pos's slot). */
typedef struct ring_cell_t {
    _Atomic uint64_t seq; /* turn counter */
    uint32_t slot;        /* the claimed record */
} ring_cell_t;

static ring_cell_t g_ring[RING_CAP];
static _Alignas(64) _Atomic uint64_t g_ring_head;         /* next position producers claim */
static _Alignas(64) uint64_t g_ring_tail;                 /* next position to pop (under g_drain_lock) */
static pthread_mutex_t g_drain_lock = PTHREAD_MUTEX_INITIALIZER; /* one consumer at a time */
static pthread_mutex_t g_poll_lock = PTHREAD_MUTEX_INITIALIZER; /* one FIFO poller at a time: records in order */
static _Atomic uint64_t g_collects;    /* poll passes made by kt_cl_collect (the program's synchronisation points) */
static uint64_t g_coll_seen_collects;  /* g_collects at the collector's last step (its thread only) */
static _Alignas(64) _Atomic int g_coll_deep;              /* the collector sleeps until woken */
static kt__collector_t g_coll = KT__COLLECTOR_INIT;       /* the collector thread */
static int g_coll_idle;                                   /* collector: empty naps in a row (its thread only) */
static _Atomic int g_coll_off;                            /* KTIMING_OPENCL_COLLECTOR=0 */
static _Atomic int g_stopped;                             /* stop ran: the next track registers again */
static pthread_once_t g_ring_once = PTHREAD_ONCE_INIT;

static void ring_init(void)
{
    for (uint64_t i = 0; i < RING_CAP; i++)
        atomic_store_explicit(&g_ring[i].seq, i, memory_order_relaxed);
    const char *v = kt__env("KTIMING_OPENCL_COLLECTOR");
    atomic_store(&g_coll_off, v && !strcmp(v, "0"));
}

/* Push a claimed slot; 0, or -1 when the ring is full. */
static int ring_push(uint32_t slot)
{
    uint64_t pos = atomic_load_explicit(&g_ring_head, memory_order_relaxed);
    ring_cell_t *cell;
    for (;;) {
        cell = &g_ring[pos & (RING_CAP - 1)];
        uint64_t seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            /* seq_cst: with the load in coll_wake and the collector's store + head load, either the collector
             * sees this position claimed or the producer sees it asleep */
            if (atomic_compare_exchange_weak_explicit(&g_ring_head, &pos, pos + 1, memory_order_seq_cst,
                                                      memory_order_relaxed))
                break;
        } else if (diff < 0) {
            return -1;
        } else {
            pos = atomic_load_explicit(&g_ring_head, memory_order_relaxed);
        }
    }
    cell->slot = slot;
    atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
    return 0;
}

/* Pop one slot (caller holds g_drain_lock); 0 when empty or the next producer has not finished writing. */
static int ring_pop(uint32_t *slot)
{
    ring_cell_t *cell = &g_ring[g_ring_tail & (RING_CAP - 1)];
    if (atomic_load_explicit(&cell->seq, memory_order_acquire) != g_ring_tail + 1)
        return 0;
    *slot = cell->slot;
    atomic_store_explicit(&cell->seq, g_ring_tail + RING_CAP, memory_order_release);
    g_ring_tail++;
    return 1;
}

static int ring_nonempty(void)
{
    pthread_mutex_lock(&g_drain_lock);
    int r = atomic_load(&g_ring_head) != g_ring_tail;
    pthread_mutex_unlock(&g_drain_lock);
    return r;
}

/* Finish the queued records (at most max); with `wait`, wait for another drainer instead of leaving. */
static unsigned ring_drain(unsigned max, int wait)
{
    if (wait)
        pthread_mutex_lock(&g_drain_lock);
    else if (pthread_mutex_trylock(&g_drain_lock) != 0)
        return 0;
    unsigned n = 0;
    uint32_t slot;
    while (n < max && ring_pop(&slot)) {
        rec_t *r = slot_rec(slot);
        rec_finish(r, (cl_int)atomic_load_explicit(&r->cb_status, memory_order_relaxed), r->observed_ns, 0);
        n++;
    }
    pthread_mutex_unlock(&g_drain_lock);
    return n;
}

static void retire_locked(kt_cl_ctx_t *c);

static uint64_t in_flight(kt_cl_ctx_t *c)
{
    uint64_t done = atomic_load(&c->finished); /* first: both only grow, so this never underflows */
    return atomic_load(&c->tracked) - done;
}

/* Frees the detached contexts whose last record is finished, unless a flush holds a copy of the lists: the
 * queue reference ktiming held is released outside the lock. */
static void reap(void)
{
    if (atomic_load_explicit(&g_retired_count, memory_order_relaxed) == 0)
        return;
    kt_cl_ctx_t *done = NULL;
    pthread_mutex_lock(&g_ctx_lock);
    if (g_pins == 0) {
        for (kt_cl_ctx_t **p = &g_retired; *p;) {
            kt_cl_ctx_t *c = *p;
            if (in_flight(c) == 0) {
                *p = c->rnext;
                c->rnext = done;
                done = c;
                atomic_fetch_sub(&g_retired_count, 1);
            } else {
                p = &c->rnext;
            }
        }
    }
    pthread_mutex_unlock(&g_ctx_lock);
    while (done) {
        kt_cl_ctx_t *next = done->rnext;
        kt__cl.clReleaseCommandQueue(done->queue);
        pthread_mutex_destroy(&done->fifo_lock);
        free(done);
        done = next;
    }
}

/* Polled records in the queues' FIFOs. seq_cst: with the tracker's seq_cst increment before its load of g_coll_deep,
 * either the collector sees the record or the tracker sees the collector asleep and wakes it. */
static _Atomic uint64_t g_polled;
/* Callback records (PENDING, or PEEKED by a flush): a flush scans the slots for them only while there are any. */
static _Atomic uint64_t g_pending_cb;

static int any_polled(void)
{
    return atomic_load(&g_polled) != 0;
}

/* Appends a record just published as POLLED to its queue's FIFO. */
static void fifo_append(kt_cl_ctx_t *c, rec_t *r)
{
    atomic_store_explicit(&r->qnext, 0, memory_order_relaxed);
    atomic_fetch_add(&g_polled, 1);
    pthread_mutex_lock(&c->fifo_lock);
    if (c->fifo_tail)
        atomic_store_explicit(&slot_rec(c->fifo_tail - 1)->qnext, r->slot + 1, memory_order_release);
    else
        atomic_store_explicit(&c->fifo_head, r->slot + 1, memory_order_release);
    c->fifo_tail = r->slot + 1;
    pthread_mutex_unlock(&c->fifo_lock);
}

/* Unlinks r (whose predecessor in the FIFO is prev, NULL for the head). Caller holds g_poll_lock. */
static void fifo_unlink(kt_cl_ctx_t *c, rec_t *prev, rec_t *r)
{
    pthread_mutex_lock(&c->fifo_lock);
    uint32_t next = atomic_load_explicit(&r->qnext, memory_order_acquire);
    if (prev)
        atomic_store_explicit(&prev->qnext, next, memory_order_relaxed);
    else
        atomic_store_explicit(&c->fifo_head, next, memory_order_relaxed);
    if (c->fifo_tail == r->slot + 1)
        c->fifo_tail = prev ? prev->slot + 1 : 0;
    pthread_mutex_unlock(&c->fifo_lock);
    atomic_fetch_sub(&g_polled, 1);
}

/* A finished record with its sort key beside it: sorting touches this array only, not a cache line per record. */
typedef struct done_t {
    uint64_t enqueue_ns; /* the record's */
    rec_t *r;
    uint64_t end_stamp;  /* its command's device end stamp, when the poll read it (else 0) */
} done_t;

static int cmp_enqueue(const void *a, const void *b)
{
    uint64_t x = ((const done_t *)a)->enqueue_ns, y = ((const done_t *)b)->enqueue_ns;
    return (x > y) - (x < y);
}

/* Claims a polled record (POLLED -> PEEKED) and finds out whether its command is done: 1 when it is (the
 * record is then CLAIMED, *status set), -1 when it is still running (back to POLLED; *ctx, *in_order and
 * *enqueue_ns say whose, on what kind of queue and since when, read while it was held), 0 when the record was
 * not polled, -2 when it was enqueued after `newest` (back to POLLED, for the next pass). The end stamp is asked
 * for first: it is available only once the command is CL_COMPLETE (the specification's rule for
 * clGetEventProfilingInfo), and the record needs it anyway (*end_stamp), so a finished command costs no status
 * query. Without it, the status says whether the command failed (done too), finished a moment ago, or is still
 * running. */
static int poll_claim(rec_t *r, cl_int *status, uint64_t *end_stamp, const kt_cl_ctx_t **ctx, int *in_order,
                      uint64_t *enqueue_ns, uint64_t newest)
{
    uint64_t t = atomic_load(&r->tag);
    if (TAG_ST(t) != ST_POLLED || !atomic_compare_exchange_strong(&r->tag, &t, TAG(TAG_GEN(t), ST_PEEKED)))
        return 0;
    if (r->enqueue_ns > newest) {
        atomic_store(&r->tag, t);
        return -2;
    }
    *ctx = r->ctx; /* alive while a record of it is unfinished */
    *in_order = !r->ctx->out_of_order;
    *enqueue_ns = r->enqueue_ns;
    cl_ulong end = 0;
    *end_stamp = 0;
    if (kt__cl.clGetEventProfilingInfo(r->event, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) == CL_SUCCESS &&
        end != 0) {
        *status = CL_COMPLETE;
        *end_stamp = (uint64_t)end;
    } else {
        *status = CL_QUEUED;
        if (kt__cl.clGetEventInfo(r->event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof *status, status, NULL) !=
            CL_SUCCESS)
            *status = CL_INVALID_EVENT;
    }
    atomic_store(&r->tag, TAG(TAG_GEN(t), *status <= CL_COMPLETE ? ST_CLAIMED : ST_POLLED));
    return *status <= CL_COMPLETE ? 1 : -1;
}

/* Claimed polled records waiting to be finished together, oldest enqueue first (so an entry's last duration is
 * its newest command's): on the stack up to 256, then on the heap. Each record's status waits in cb_status. */
typedef struct batch_t {
    done_t *v;          /* stack or heap */
    unsigned n, cap;    /* held / room */
    done_t stack[256];
} batch_t;

static void batch_init(batch_t *b)
{
    b->v = b->stack;
    b->n = 0;
    b->cap = 256;
}

/* Sorts v[0, n) by enqueue time, stably, through tmp (room for n): adjacent ascending runs are merged until one
 * is left. A pass's records are a few such runs (the free lists hand slots out in runs), so this is a few
 * linear passes, with the comparison inline: qsort's calls were ~1 ms of the collector per 20,000 commands. */
static void merge_sort_done(done_t *v, done_t *tmp, unsigned n)
{
    done_t *src = v, *dst = tmp;
    for (;;) {
        unsigned runs = 0, w = 0;
        for (unsigned i = 0; i < n; runs++) {
            unsigned mid = i + 1;
            while (mid < n && src[mid - 1].enqueue_ns <= src[mid].enqueue_ns)
                mid++;
            unsigned end = mid < n ? mid + 1 : n;
            while (end < n && src[end - 1].enqueue_ns <= src[end].enqueue_ns)
                end++;
            unsigned x = i, y = mid;
            while (x < mid && y < end)
                dst[w++] = src[y].enqueue_ns < src[x].enqueue_ns ? src[y++] : src[x++];
            while (x < mid)
                dst[w++] = src[x++];
            while (y < end)
                dst[w++] = src[y++];
            i = end;
        }
        done_t *t = src;
        src = dst;
        dst = t;
        if (runs <= 1)
            break;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
}

/* In enqueue order. A pass meets records in slot order, which the free lists make ascending or descending in
 * enqueue order as often as not: those are checked for first. */
static void batch_sort(batch_t *b)
{
    unsigned up = 1, down = 1;
    for (unsigned k = 1; k < b->n && (up || down); k++) {
        up = up && b->v[k - 1].enqueue_ns <= b->v[k].enqueue_ns;
        down = down && b->v[k - 1].enqueue_ns >= b->v[k].enqueue_ns;
    }
    if (up)
        return;
    if (down) {
        for (unsigned i = 0, j = b->n - 1; i < j; i++, j--) {
            done_t t = b->v[i];
            b->v[i] = b->v[j];
            b->v[j] = t;
        }
        return;
    }
    done_t stack[256];
    done_t *tmp = b->n <= 256 ? stack : malloc(b->n * sizeof *tmp);
    if (!tmp) {
        qsort(b->v, b->n, sizeof *b->v, cmp_enqueue);
        return;
    }
    merge_sort_done(b->v, tmp, b->n);
    if (tmp != stack)
        free(tmp);
}

static void batch_finish(batch_t *b)
{
    batch_sort(b);
    for (unsigned k = 0; k < b->n; k++)
        rec_finish_stamped(b->v[k].r, (cl_int)atomic_load_explicit(&b->v[k].r->cb_status, memory_order_relaxed), 0,
                           0, b->v[k].end_stamp);
    b->n = 0;
}

static void batch_push(batch_t *b, rec_t *r, cl_int status, uint64_t end_stamp)
{
    atomic_store_explicit(&r->cb_status, (int)status, memory_order_relaxed);
    if (b->n == b->cap) {
        done_t *grown = b->cap <= UINT_MAX / 2 ? malloc(2 * (size_t)b->cap * sizeof *grown) : NULL;
        if (!grown) {
            batch_finish(b); /* no memory: these in order among themselves */
        } else {
            memcpy(grown, b->v, b->n * sizeof *grown);
            if (b->v != b->stack)
                free(b->v);
            b->v = grown;
            b->cap *= 2;
        }
    }
    b->v[b->n++] = (done_t){r->enqueue_ns, r, end_stamp};
}

static void batch_done(batch_t *b)
{
    batch_finish(b);
    if (b->v != b->stack)
        free(b->v);
    b->v = b->stack;
}

/* How far a poll of a queue's FIFO goes. */
typedef enum walk_t {
    WALK_PREFIX, /* the finished records at its head (on an out-of-order queue too): a synchronisation point */
    WALK_DONE,   /* every finished record: an out-of-order queue's finish in any order (the collector) */
    WALK_ALL,    /* every record, the unfinished ones dropped for `abandon` (detach, exit) or left (flush) */
} walk_t;

/* Polls a queue's FIFO from its oldest record (caller holds g_poll_lock): finished ones go to b (recorded in
 * enqueue order by batch_done), unlinked; an in-order queue stops at its first record still running (newer ones
 * cannot be recorded before it), as does any walk at a record enqueued after `newest`. With `abandon` (1 + a
 * kt_drop_reason_t; WALK_ALL) the unfinished ones are counted dropped. Returns how many are still running. */
static unsigned fifo_walk(kt_cl_ctx_t *c, walk_t how, uint64_t newest, int abandon, batch_t *b, unsigned *finished)
{
    unsigned running = 0;
    rec_t *prev = NULL;
    uint32_t cur = atomic_load_explicit(&c->fifo_head, memory_order_acquire);
    int stop_at_running = how == WALK_PREFIX || (how == WALK_DONE && !c->out_of_order);
    while (cur) {
        rec_t *r = slot_rec(cur - 1);
        uint32_t next = atomic_load_explicit(&r->qnext, memory_order_acquire);
        cl_int st;
        uint64_t end_stamp, enq;
        const kt_cl_ctx_t *owner;
        int in_order;
        int got = poll_claim(r, &st, &end_stamp, &owner, &in_order, &enq, newest);
        if (got == 1) {
            fifo_unlink(c, prev, r);
            batch_push(b, r, st, end_stamp);
            ++*finished;
        } else if (got == -1 && abandon) {
            uint64_t t = atomic_load(&r->tag); /* POLLED again: ours while we hold g_poll_lock */
            atomic_store(&r->tag, TAG(TAG_GEN(t), ST_CLAIMED));
            fifo_unlink(c, prev, r);
            rec_finish(r, st, kt_now_ns(), abandon);
        } else {
            running++;
            if (got != -1 || stop_at_running) /* a newer record (-2): the rest are newer still */
                break;
            prev = r;
        }
        cur = next;
    }
    if (cur) /* not looked at: in flight too (one is enough for the collector to keep polling) */
        running++;
    return running;
}

/* Polls the FIFOs of the given contexts (caller holds g_poll_lock) and records what finished; *running gets how
 * many are still in flight. */
static unsigned poll_ctxs(kt_cl_ctx_t *const *ctxs, size_t n, walk_t how, uint64_t newest, int abandon,
                          unsigned *running)
{
    batch_t done;
    batch_init(&done);
    unsigned finished = 0;
    *running = 0;
    for (size_t i = 0; i < n; i++)
        if (atomic_load_explicit(&ctxs[i]->fifo_head, memory_order_acquire))
            *running += fifo_walk(ctxs[i], how, newest, abandon, &done, &finished);
    batch_done(&done);
    return finished;
}

static kt_cl_ctx_t **pin_all(size_t *n);
static void unpin(kt_cl_ctx_t **all);

/* One collector pass: poll the polled records and drain the callbacks' ring; while completions keep coming nap
 * 1 ms and look again (polled commands still running: 1, 2, 4, then every 8 ms while none finishes); after
 * COLLECT_IDLE_NAPS empty naps with nothing in flight return 0, and the helper sleeps until a new record or a
 * callback wakes it. Measured on PoCL (2 cores, loaded):
 * 1 ms naps beat 100-200 us ones, whose extra wake-ups cost more CPU than the shorter leftover for the flush
 * saved. */
/* The collector's next nap: twice the last one (`first` after a short one), at most 8 ms. */
static void nap_longer(uint64_t first)
{
    uint64_t nap = g_coll.nap_ns >= COLLECT_POLL_NS ? 2 * g_coll.nap_ns : first;
    g_coll.nap_ns = nap < 8ull * COLLECT_POLL_NS ? nap : 8ull * COLLECT_POLL_NS;
}

static int collector_step(void *unused)
{
    (void)unused;
    /* kt_cl_prepare's devices, before their commands come, and the core set up with them (the host clock's
     * calibration): here, off the program's threads */
    if (kt__cl_dev_any_pending()) {
        kt__ensure_init();
        kt__cl_dev_calibrate_pending();
        /* this thread records the commands' spans: its shard and span log (288 pages written once, ~0.45 ms of
         * CPU) are taken now, while the program builds its kernels, not at the first command of its loop; and
         * when a snapshot will be written at exit, the span array it copies into, likewise (~0.4 ms less in the
         * program's exit handler) */
        kt__shard_self();
        kt__snapshot_spare_reserve();
    }
    reap();
    uint64_t collects = atomic_load_explicit(&g_collects, memory_order_relaxed);
    if (collects != g_coll_seen_collects) {
        /* The program's thread polled at a synchronisation point since the last step (kt_cl_collect): it will
         * again at its next one. Polling here too, while the driver's threads run its commands and it enqueues
         * more, is what cost (their locks contended: +45 ms of CPU per 20,000 tiny kernels when the VM was slow).
         * Look less often (2, 4, then every 8 ms) while that goes on; callbacks are still drained. */
        g_coll_seen_collects = collects;
        g_coll_idle = 0;
        nap_longer(2 * COLLECT_POLL_NS);
        ring_drain(256, 1);
        return 0;
    }
    unsigned polled = 0, done = 0;
    if (any_polled()) {
        size_t n;
        kt_cl_ctx_t **all = pin_all(&n);
        pthread_mutex_lock(&g_poll_lock);
        done = poll_ctxs(all, n, WALK_DONE, kt_now_ns(), 0, &polled);
        pthread_mutex_unlock(&g_poll_lock);
        unpin(all);
    }
    unsigned drained = ring_drain(256, 1);
    if (drained || done) {
        g_coll_idle = 0;
        if (drained || !polled) /* more may come at once: look again before napping */
            return 1;
        g_coll.nap_ns = COLLECT_POLL_NS;
        return 0;
    }
    if (polled) { /* commands still running: keep polling, less often (up to 8 ms) while none finishes */
        g_coll_idle = 0;
        nap_longer(COLLECT_POLL_NS);
        return 0;
    }
    if (g_coll_idle++ < COLLECT_IDLE_NAPS) {
        /* the helper naps on its condition variable, not in nanosleep: a stop (exit, kt_shutdown) wakes it at once
         * instead of waiting out the nap (~1.1 ms at every exit); callbacks do not wake it (no system call per
         * command) */
        g_coll.nap_ns = COLLECT_POLL_NS;
        return 0;
    }
    atomic_store(&g_coll_deep, 1); /* seq_cst, before the head load in ring_nonempty and the tag loads */
    if (ring_nonempty() || atomic_load(&g_retired_count) || any_polled() || kt__cl_dev_any_pending()) {
        atomic_store(&g_coll_deep, 0);
        g_coll_idle = atomic_load(&g_retired_count) ? 0 : g_coll_idle;
        return 1;
    }
    g_coll_idle = 0;
    g_coll.nap_ns = 0; /* until a callback wakes it */
    return 0;
}

/* After a push: wake the collector if it went to sleep. */
static void coll_wake(void)
{
    if (atomic_load(&g_coll_deep) && atomic_exchange(&g_coll_deep, 0)) /* seq_cst, after the head CAS */
        kt__collector_wake(&g_coll);
}

static void coll_start(void)
{
    pthread_once(&g_ring_once, ring_init);
    if (!atomic_load(&g_coll_off) && !kt__collector_running(&g_coll))
        kt__collector_start(&g_coll, "kt-opencl", collector_step, NULL, 0);
}

static void CL_CALLBACK on_complete(cl_event event, cl_int status, void *user)
{
    (void)event;
    uintptr_t h = (uintptr_t)user;
    rec_t *r = slot_rec((uint32_t)(h & SLOT_MASK));
    uint64_t gen = ((uint64_t)h >> SLOT_BITS) & HANDLE_GEN_MASK;
    if (!r)
        return;
    uint64_t t = atomic_load(&r->tag);
    for (;;) {
        if ((TAG_GEN(t) & HANDLE_GEN_MASK) != gen)
            return; /* collected already; the slot moved on */
        unsigned st = TAG_ST(t);
        if (st == ST_PENDING) {
            if (atomic_compare_exchange_weak(&r->tag, &t, TAG(TAG_GEN(t), ST_CLAIMED))) {
                atomic_fetch_sub(&g_pending_cb, 1);
                r->observed_ns = r->ctx->profiling ? 0 : kt_now_ns();
                atomic_store_explicit(&r->cb_status, (int)status, memory_order_relaxed);
                if (kt__collector_running(&g_coll) && ring_push(r->slot) == 0)
                    coll_wake();
                else
                    rec_finish(r, status, r->observed_ns, 0);
                return;
            }
        } else if (st == ST_PEEKED) {
            atomic_store(&r->cb_status, (int)status);
            if (atomic_compare_exchange_weak(&r->tag, &t, TAG(TAG_GEN(t), ST_PEEKED_CB)))
                return; /* the peeking flush (or the tracking thread) completes it */
        } else {
            return;
        }
    }
}

/* ---------------------------------------------------------------------------------------------------
 * Polling (flush, detach, exit)
 * ------------------------------------------------------------------------------------------------- */

/* One pass over every record: complete those of `only` (NULL: any queue) that finished or failed; with
 * `abandon` (1 + a kt_drop_reason_t), count the unfinished ones as dropped for that reason. Callback records are
 * found by their slots, polled ones through their queues' FIFOs. */
static void collect_pass(kt_cl_ctx_t *only, int abandon)
{
    ring_drain(UINT32_MAX, 0); /* claimed by callbacks, queued for the collector: finish them here */
    /* callback records are found by a scan of the slots: only while there are any */
    uint32_t n = atomic_load(&g_pending_cb) ? atomic_load(&g_next_slot) : 0;
    if (n > MAX_CHUNKS * CHUNK_SIZE)
        n = MAX_CHUNKS * CHUNK_SIZE;
    for (uint32_t i = 0; i < n; i++) {
        rec_t *r = slot_rec(i);
        if (!r)
            continue;
        uint64_t t = atomic_load(&r->tag);
        if (TAG_ST(t) != ST_PENDING || !atomic_compare_exchange_strong(&r->tag, &t, TAG(TAG_GEN(t), ST_PEEKED)))
            continue;
        uint64_t gen = TAG_GEN(t);
        cl_int status = CL_QUEUED;
        int mine = !only || r->ctx == only;
        if (mine && kt__cl.clGetEventInfo(r->event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                                          NULL) != CL_SUCCESS)
            status = CL_INVALID_EVENT;
        if (mine && (status <= CL_COMPLETE || abandon)) {
            atomic_store(&r->tag, TAG(gen, ST_CLAIMED)); /* a callback that lands now finds it claimed */
            atomic_fetch_sub(&g_pending_cb, 1);
            rec_finish(r, status, kt_now_ns(), status > CL_COMPLETE ? abandon : 0);
            continue;
        }
        uint64_t peeked = TAG(gen, ST_PEEKED);
        if (!atomic_compare_exchange_strong(&r->tag, &peeked, TAG(gen, ST_PENDING))) {
            /* The callback came while we looked: it left its status for us. */
            atomic_store(&r->tag, TAG(gen, ST_CLAIMED));
            atomic_fetch_sub(&g_pending_cb, 1);
            rec_finish(r, (cl_int)atomic_load(&r->cb_status), kt_now_ns(), 0);
        }
    }
    if (!any_polled())
        return;
    size_t count = 1;
    kt_cl_ctx_t **all = only ? NULL : pin_all(&count);
    unsigned running;
    pthread_mutex_lock(&g_poll_lock);
    poll_ctxs(only ? &only : all, only ? 1 : count, WALK_ALL, UINT64_MAX, abandon, &running);
    pthread_mutex_unlock(&g_poll_lock);
    unpin(all);
}

static uint64_t pending_of(kt_cl_ctx_t *const *ctxs, size_t n)
{
    uint64_t p = 0;
    for (size_t i = 0; i < n; i++)
        p += in_flight(ctxs[i]);
    return p;
}

/* Collect for the given contexts until none is in flight or the deadline (kt_now_ns time) passes. */
static int flush_ctxs(kt_cl_ctx_t *const *ctxs, size_t n, kt_cl_ctx_t *only, uint64_t deadline)
{
    uint64_t start = kt_now_ns();
    uint64_t nap = 50000;
    for (size_t i = 0; i < n; i++) {
        kt__cl.clFlush(ctxs[i]->queue); /* commands never submitted would never finish */
        kt__cl_dev_refresh(ctxs[i]->dev);
    }
    for (;;) {
        if (pending_of(ctxs, n) == 0)
            return 0;
        collect_pass(only, 0);
        if (pending_of(ctxs, n) == 0)
            return 0;
        uint64_t now = kt_now_ns();
        if (now >= deadline)
            return KT_ETIMEDOUT;
        /* Usually only callbacks already running remain: yield for a moment before sleeping (a sleep is at
         * least 50 us plus timer slack, longer than a burst of small commands). */
        if (now - start < 1000000) {
            sched_yield();
            continue;
        }
        uint64_t left = deadline - now;
        kt__nap_ns(nap < left ? nap : left);
        if (nap < 2000000)
            nap *= 2;
    }
}

/* A copy of every context (attached and retired), pinned: none is freed until unpin. NULL when there is none
 * (or no memory: *n is then 0 too). */
static kt_cl_ctx_t **pin_all(size_t *n)
{
    pthread_mutex_lock(&g_ctx_lock);
    size_t count = g_ctx_count + atomic_load(&g_retired_count);
    kt_cl_ctx_t **all = count ? malloc(count * sizeof *all) : NULL;
    size_t k = 0;
    if (all) {
        for (size_t i = 0; i < g_ctx_count; i++)
            all[k++] = g_ctxs[i];
        for (kt_cl_ctx_t *c = g_retired; c; c = c->rnext)
            all[k++] = c;
        g_pins++;
    }
    pthread_mutex_unlock(&g_ctx_lock);
    *n = k;
    return all;
}

static void unpin(kt_cl_ctx_t **all)
{
    if (!all)
        return;
    pthread_mutex_lock(&g_ctx_lock);
    g_pins--;
    pthread_mutex_unlock(&g_ctx_lock);
    free(all);
    reap();
}

static uint64_t deadline_after(uint64_t timeout_ns)
{
    return kt_now_ns() + (timeout_ns ? timeout_ns : kt__cl_timeout_ns());
}

/* Every queue, until the deadline; no lock is held while waiting. */
static int flush_all(uint64_t deadline)
{
    size_t n;
    kt_cl_ctx_t **all = pin_all(&n);
    int rc = n ? flush_ctxs(all, n, NULL, deadline) : 0;
    if (!n)
        collect_pass(NULL, 0);
    unpin(all);
    return rc;
}

int kt_cl_collect(kt_cl_ctx_t *ctx, uint64_t enqueued_before_ns)
{
    if (kt_cl_load(NULL) < 0)
        return ctx ? KT_EUNAVAILABLE : 0;
    if (kt__forked_child() || atomic_load_explicit(&g_stopped, memory_order_relaxed) ||
        (ctx && in_flight(ctx) == 0))
        return 0;
    ring_drain(UINT32_MAX, 0); /* callbacks' completions, unless another thread is draining them */
    /* after a pass the collector may be making (a short wait: it looks less often while programs collect), so
     * that the commands within the bound that had finished before the call are recorded when it returns, in order */
    unsigned running = 0;
    uint64_t now = kt_now_ns();
    uint64_t newest = enqueued_before_ns && enqueued_before_ns < now ? enqueued_before_ns : now;
    if (ctx) { /* the caller's queue: only its finished prefix */
        pthread_mutex_lock(&g_poll_lock);
        poll_ctxs(&ctx, 1, WALK_PREFIX, newest, 0, &running);
        pthread_mutex_unlock(&g_poll_lock);
    } else if (any_polled()) { /* each queue's finished prefix: one look at a queue whose oldest still runs */
        size_t n;
        kt_cl_ctx_t **all = pin_all(&n);
        pthread_mutex_lock(&g_poll_lock);
        poll_ctxs(all, n, WALK_PREFIX, newest, 0, &running);
        pthread_mutex_unlock(&g_poll_lock);
        unpin(all);
    }
    atomic_fetch_add_explicit(&g_collects, 1, memory_order_relaxed);
    return 0;
}

int kt_cl_flush(kt_cl_ctx_t *ctx, uint64_t timeout_ns)
{
    if (kt_cl_load(NULL) < 0)
        return ctx ? KT_EUNAVAILABLE : 0;
    if (ctx)
        return flush_ctxs(&ctx, 1, ctx, deadline_after(timeout_ns));
    return flush_all(deadline_after(timeout_ns));
}

/* kt_flush / kt_snapshot: bounded by the core's deadline. Not in a forked child: the driver's state there is
 * the parent's. */
static void flush_hook(uint64_t deadline_ns)
{
    if (kt__forked_child())
        return;
    flush_all(deadline_ns);
}

/* Exit and kt_shutdown: one bounded wait, then whatever is still in flight is counted as dropped (in flight at
 * exit) and the collector ends. */
static void stop_hook(uint64_t deadline_ns)
{
    if (kt__forked_child())
        return;
    atomic_store(&g_stopped, 1);
    flush_all(deadline_ns);
    collect_pass(NULL, 1 + KT_DROP_IN_FLIGHT_AT_EXIT);
    kt__collector_stop(&g_coll);
    reap();
}

void kt_cl_shutdown(void)
{
    if (kt_cl_load(NULL) < 0 || kt__forked_child())
        return;
    stop_hook(kt_now_ns() + kt__exit_wait_ns());
    pthread_mutex_lock(&g_ctx_lock);
    while (g_ctx_count) {
        kt_cl_ctx_t *c = g_ctxs[g_ctx_count - 1];
        atomic_store(&c->detaching, 1);
        retire_locked(c);
    }
    pthread_mutex_unlock(&g_ctx_lock);
    reap();
}

/* fork: consistent poll and drain locks and registry in both processes (the helper ends the collector in the
 * child). */
/* Every context's FIFO lock, taken or released (under g_ctx_lock): an enqueuing thread may hold one. */
static void fifo_locks(int take)
{
    for (size_t i = 0; i < g_ctx_count; i++)
        (take ? pthread_mutex_lock : pthread_mutex_unlock)(&g_ctxs[i]->fifo_lock);
    for (kt_cl_ctx_t *c = g_retired; c; c = c->rnext)
        (take ? pthread_mutex_lock : pthread_mutex_unlock)(&c->fifo_lock);
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&g_poll_lock); /* first: a FIFO poller takes g_ctx_lock only before it */
    pthread_mutex_lock(&g_ctx_lock);
    fifo_locks(1);
    pthread_mutex_lock(&g_drain_lock);
}

static void fork_release(void)
{
    pthread_mutex_unlock(&g_drain_lock);
    fifo_locks(0);
    pthread_mutex_unlock(&g_ctx_lock);
    pthread_mutex_unlock(&g_poll_lock);
}

static void fork_child(void)
{
    fork_release();
    kt__cl_dev_fork_child();
}

static const kt__backend_ops_t kOps = {.name = "OpenCL",
                                       .flush = flush_hook,
                                       .stop = stop_hook,
                                       .fork_prepare = fork_prepare,
                                       .fork_parent = fork_release,
                                       .fork_child = fork_child};

/* ---------------------------------------------------------------------------------------------------
 * Attach / detach
 * ------------------------------------------------------------------------------------------------- */

static size_t hash_of(cl_command_queue q, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)q * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (cap - 1);
}

static kt_cl_ctx_t *find_locked(cl_command_queue queue)
{
    if (!g_hash_cap)
        return NULL;
    kt_cl_ctx_t *c = g_hash[hash_of(queue, g_hash_cap)];
    while (c && c->queue != queue)
        c = c->hnext;
    return c;
}

/* Adds an attached context to the array and the hash (growing both). 0 or KT_ENOMEM. */
static int list_add_locked(kt_cl_ctx_t *c)
{
    if (g_ctx_count == g_ctx_cap) {
        size_t cap = g_ctx_cap ? g_ctx_cap * 2 : 8;
        kt_cl_ctx_t **grown = realloc(g_ctxs, cap * sizeof *grown);
        if (!grown)
            return KT_ENOMEM;
        g_ctxs = grown;
        g_ctx_cap = cap;
    }
    if ((g_ctx_count + 1) * 4 > g_hash_cap * 3) {
        size_t cap = g_hash_cap ? g_hash_cap * 2 : 16;
        kt_cl_ctx_t **h = calloc(cap, sizeof *h);
        if (!h)
            return KT_ENOMEM;
        for (size_t i = 0; i < g_ctx_count; i++) {
            kt_cl_ctx_t *e = g_ctxs[i];
            size_t b = hash_of(e->queue, cap);
            e->hnext = h[b];
            h[b] = e;
        }
        free(g_hash);
        g_hash = h;
        g_hash_cap = cap;
    }
    size_t b = hash_of(c->queue, g_hash_cap);
    c->hnext = g_hash[b];
    g_hash[b] = c;
    c->index = g_ctx_count;
    g_ctxs[g_ctx_count++] = c;
    return 0;
}

/* Takes a context off the array and the hash and puts it on the retired list. */
static void retire_locked(kt_cl_ctx_t *c)
{
    kt_cl_ctx_t **p = &g_hash[hash_of(c->queue, g_hash_cap)];
    while (*p && *p != c)
        p = &(*p)->hnext;
    if (*p)
        *p = c->hnext;
    g_ctxs[c->index] = g_ctxs[--g_ctx_count];
    g_ctxs[c->index]->index = c->index;
    c->rnext = g_retired;
    g_retired = c;
    atomic_fetch_add(&g_retired_count, 1);
}

kt_cl_ctx_t *kt_cl_find(cl_command_queue queue)
{
    if (!queue || kt_cl_load(NULL) < 0)
        return NULL;
    pthread_mutex_lock(&g_ctx_lock);
    kt_cl_ctx_t *c = find_locked(queue);
    pthread_mutex_unlock(&g_ctx_lock);
    return c;
}

/* Registers with the core (again after a stop) and starts the collector. */
static void arm(void)
{
    atomic_store(&g_stopped, 0);
    kt__backend_register(&kOps); /* outside g_ctx_lock: the core may hold its own lock while flushing */
    coll_start();
}

/* The loader (kt_cl_load) and the environment, once; kt_cl_load's result. */
static int load_and_read_env(void)
{
    int rc = kt_cl_load(NULL);
    if (rc >= 0)
        pthread_once(&g_env_once, read_env);
    return rc;
}

int kt_cl_prepare(cl_device_id device)
{
    if (!device)
        return KT_EINVAL;
    int rc = load_and_read_env();
    if (rc < 0)
        return rc;
    rc = kt__cl_dev_prepare(device);
    if (rc < 0)
        return rc;
    arm(); /* registered, so exit stops (and joins) the collector even if nothing is ever attached */
    coll_wake(); /* one already asleep: the pending flag is read before it sleeps again (collector_step) */
    return 0;
}

int kt_cl_attach(cl_command_queue queue, const kt_cl_attach_desc_t *desc, kt_cl_ctx_t **out)
{
    static const kt_cl_attach_desc_t kDefault;
    if (!out)
        return KT_EINVAL;
    *out = NULL;
    if (!queue)
        return KT_EINVAL;
    int rc = load_and_read_env();
    if (rc < 0)
        return rc;
    if (!desc)
        desc = &kDefault;
    arm();

    pthread_mutex_lock(&g_ctx_lock);
    kt_cl_ctx_t *c = find_locked(queue);
    pthread_mutex_unlock(&g_ctx_lock);
    if (c) {
        *out = c;
        return 0;
    }
    reap();
    /* Driver queries and the device's first calibration run without g_ctx_lock: other threads' lookups,
     * releases and flushes go on meanwhile. A racing attach of the same queue is resolved below. */
    cl_device_id device = NULL;
    cl_command_queue_properties props = 0;
    cl_int err = kt__cl.clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof device, &device, NULL);
    if (err == CL_SUCCESS)
        err = kt__cl.clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (err != CL_SUCCESS) {
        note_error(err);
        return KT_EINVAL;
    }
    if (!(props & CL_QUEUE_PROFILING_ENABLE) && desc->require_profiling)
        return KT_ENOTSUP;
    c = calloc(1, sizeof *c);
    kt__cl_dev_t *dev = c ? kt__cl_dev_get(device) : NULL;
    if (!dev) {
        free(c);
        return KT_ENOMEM;
    }
    pthread_mutex_init(&c->fifo_lock, NULL);
    c->queue = queue;
    c->dev = dev;
    kt__escape_field(c->device_csv, sizeof c->device_csv, dev->name);
    c->profiling = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
    c->out_of_order = (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0;
    c->mode = desc->mode != KT_CL_MODE_DEFAULT ? desc->mode : g_sync_default ? KT_CL_MODE_SYNC : KT_CL_MODE_ASYNC;
    kt__cl.clRetainCommandQueue(queue);

    pthread_mutex_lock(&g_ctx_lock);
    kt_cl_ctx_t *other = find_locked(queue);
    rc = other ? 0 : list_add_locked(c);
    pthread_mutex_unlock(&g_ctx_lock);
    if (other || rc < 0) {
        kt__cl.clReleaseCommandQueue(queue);
        pthread_mutex_destroy(&c->fifo_lock);
        free(c);
        *out = other;
        return rc;
    }
    char label[64];
    if (desc->label)
        snprintf(label, sizeof label, "%s", desc->label);
    else
        snprintf(label, sizeof label, "queue %p", (void *)queue);
    c->queue_id = kt_queue_register(KT_BACKEND_OPENCL, dev->name, label);
    *out = c;
    return 0;
}

int kt_cl_detach(kt_cl_ctx_t *ctx)
{
    if (!ctx)
        return KT_EINVAL;
    atomic_store(&ctx->detaching, 1);
    int rc = flush_ctxs(&ctx, 1, ctx, deadline_after(0));
    /* Whatever is still unfinished is dropped (counted); records other threads hold are waited for. */
    for (int spins = 0; in_flight(ctx) != 0; spins++) {
        collect_pass(ctx, 1 + KT_DROP_UNSPECIFIED);
        if (in_flight(ctx) != 0)
            kt__nap_ns(spins < 100 ? 100000 : 1000000);
    }
    pthread_mutex_lock(&g_ctx_lock);
    if (find_locked(ctx->queue) == ctx)
        retire_locked(ctx);
    pthread_mutex_unlock(&g_ctx_lock);
    reap();
    return rc;
}

int kt_cl_detach_async(kt_cl_ctx_t *ctx)
{
    if (!ctx)
        return KT_EINVAL;
    atomic_store(&ctx->detaching, 1);
    pthread_mutex_lock(&g_ctx_lock);
    if (find_locked(ctx->queue) == ctx)
        retire_locked(ctx);
    pthread_mutex_unlock(&g_ctx_lock);
    if (in_flight(ctx) != 0) {
        kt__cl.clFlush(ctx->queue); /* a command never submitted would never complete */
        atomic_store(&g_coll_deep, 0);
        kt__collector_wake(&g_coll);
        return 0;
    }
    reap();
    return 0;
}

int kt_cl_stats(const kt_cl_ctx_t *ctx, kt_cl_stats_t *info)
{
    if (!ctx || !info)
        return KT_EINVAL;
    memset(info, 0, sizeof *info);
    info->queue = ctx->queue;
    info->device = ctx->dev->id;
    snprintf(info->device_name, sizeof info->device_name, "%s", ctx->dev->name);
    info->queue_id = ctx->queue_id;
    info->profiling = ctx->profiling;
    info->out_of_order = ctx->out_of_order;
    info->mode = ctx->mode;
    info->in_flight = in_flight((kt_cl_ctx_t *)ctx);
    info->tracked = atomic_load(&((kt_cl_ctx_t *)ctx)->tracked);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Tracking
 * ------------------------------------------------------------------------------------------------- */

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
static _Thread_local kcache_t t_kcache[KCACHE];
static _Thread_local unsigned t_kcache_next;

static kt_kernel_id_t intern_cached(cl_kernel kernel, const kt__cl_dev_t *dev, const char *name)
{
    if (!kernel || strlen(name) >= sizeof t_kcache[0].name)
        return kt_kernel_intern(name, KT_BACKEND_OPENCL, dev->name);
    for (unsigned i = 0; i < KCACHE; i++)
        if (t_kcache[i].kernel == kernel && t_kcache[i].dev == dev && !strcmp(t_kcache[i].name, name))
            return t_kcache[i].id;
    kcache_t *c = &t_kcache[t_kcache_next++ % KCACHE];
    c->id = kt_kernel_intern(name, KT_BACKEND_OPENCL, dev->name);
    c->kernel = kernel;
    c->dev = dev;
    snprintf(c->name, sizeof c->name, "%s", name);
    return c->id;
}

/* Blocking mode: wait here and record on this thread. */
static void track_sync(kt_cl_ctx_t *c, cl_event event, kt_kernel_id_t id, uint64_t enqueue_ns, const char *name,
                       uint64_t bytes)
{
    cl_int status = CL_COMPLETE;
    kt__cl.clWaitForEvents(1, &event);
    uint64_t observed = kt_now_ns();
    if (kt__cl.clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) != CL_SUCCESS)
        status = CL_INVALID_EVENT;
    outcome_t o = {c, event, id, kt_thread_ordinal(), enqueue_ns, name, bytes, 0};
    char csv[NAME_CAP];
    if (g_verbose) {
        kt__escape_field(csv, sizeof csv, name);
        o.name = csv;
    }
    atomic_fetch_add(&c->tracked, 1);
    record_outcome(&o, status, observed);
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
 * seq_cst count is raised before the load in coll_wake). */
static void publish_polled(kt_cl_ctx_t *ctx, rec_t *r, uint64_t gen)
{
    atomic_store(&r->tag, TAG(gen, ST_POLLED));
    fifo_append(ctx, r);
    coll_wake();
}

/* Track; with `owned` the caller hands over its reference (no retain here, and it is released on failure). */
static int track(kt_cl_ctx_t *ctx, cl_event event, cl_kernel kernel, const char *name, uint64_t enqueue_ns,
                 uint64_t bytes, int owned, cl_uint nwait, const cl_event *wait)
{
    if (!ctx || !event)
        return KT_EINVAL;
    if (!enqueue_ns)
        enqueue_ns = kt_now_ns();
    if (atomic_load_explicit(&g_stopped, memory_order_relaxed))
        arm(); /* used again after kt_shutdown (and kt_init) */
    char buf[128];
    char *heap = NULL;
    kt_kernel_id_t id;
    if (!name) {
        name = kernel ? kernel_name(kernel, buf, sizeof buf, &heap) : command_name(event);
        id = intern_cached(kernel, ctx->dev, name);
    } else {
        id = kt_kernel_intern(name, KT_BACKEND_OPENCL, ctx->dev->name);
    }
    int rc = 0;
    int force_poll = 0; /* no callback to rely on: the collector (or the next flush) polls it */
    if (ctx->mode == KT_CL_MODE_SYNC) {
        if (sync_may_wait(ctx, event, nwait, wait)) {
            track_sync(ctx, event, id, enqueue_ns, name, bytes);
            if (owned)
                kt__cl.clReleaseEvent(event);
            goto out;
        }
        force_poll = 1;
    }
    if (!kt__cl.clSetEventCallback)
        force_poll = 1;
    atomic_fetch_add(&ctx->tracked, 1);
    if (atomic_load(&ctx->detaching)) {
        atomic_fetch_add(&ctx->finished, 1);
        if (owned)
            kt__cl.clReleaseEvent(event);
        rc = KT_ESTATE;
        goto out;
    }
    rec_t *r = slot_alloc();
    if (!r || (!owned && kt__cl.clRetainEvent(event) != CL_SUCCESS)) {
        if (r)
            slot_free(r);
        else if (owned)
            kt__cl.clReleaseEvent(event);
        atomic_fetch_add(&ctx->finished, 1);
        kt_record_drop_reason(id, r ? KT_DROP_UNSPECIFIED : KT_DROP_RING_FULL);
        rc = r ? KT_EINVAL : KT_EFULL;
        goto out;
    }
    r->ctx = ctx;
    __atomic_store_n(&r->event, event, __ATOMIC_RELAXED); /* kt_cl_event_held reads it from any thread */
    r->kernel = id;
    r->thread = kt_thread_ordinal();
    r->enqueue_ns = enqueue_ns;
    slot_chunk(r->slot)->bytes[r->slot & (CHUNK_SIZE - 1)] = bytes;
    if (g_verbose)
        kt__escape_field(rec_name(r), NAME_CAP, name);
    uint64_t gen = TAG_GEN(atomic_load(&r->tag));
    if (force_poll || (ctx->profiling && !g_callbacks && kt__collector_running(&g_coll))) {
        /* polled: the stamps are the event's, so the collector reads them whenever it sees the command done */
        publish_polled(ctx, r, gen);
        goto out;
    }
    /* Published but held (PEEKED) through clSetEventCallback: flushes pass it by, a callback leaves its status. */
    atomic_store(&r->tag, TAG(gen, ST_PEEKED));
    cl_int set = kt__cl.clSetEventCallback(event, CL_COMPLETE, on_complete, rec_handle(r, gen));
    uint64_t t = TAG(gen, ST_PEEKED);
    atomic_fetch_add(&g_pending_cb, 1); /* before it can be claimed as PENDING */
    if (set == CL_SUCCESS && atomic_compare_exchange_strong(&r->tag, &t, TAG(gen, ST_PENDING)))
        goto out; /* from here its callback or a flush completes it */
    atomic_fetch_sub(&g_pending_cb, 1);
    if (set != CL_SUCCESS) {
        /* No callback will come: the collector polls the command instead. Never a wait here: the command may be
         * gated by a user event the program sets only after this enqueue returns. */
        publish_polled(ctx, r, gen);
        goto out;
    }
    /* The callback came during the call (inline, or on a driver thread): finish it here, now the driver is done
     * with the event. */
    atomic_store(&r->tag, TAG(gen, ST_CLAIMED));
    rec_finish(r, (cl_int)atomic_load(&r->cb_status), kt_now_ns(), 0);
out:
    free(heap);
    return rc;
}

int kt_cl_track_kernel(kt_cl_ctx_t *ctx, cl_event event, cl_kernel kernel, const char *name, uint64_t enqueue_ns)
{
    return track(ctx, event, kernel, name, enqueue_ns, 0, 0, 0, NULL);
}

int kt_cl_track(kt_cl_ctx_t *ctx, cl_event event, const char *name)
{
    return kt_cl_track_kernel(ctx, event, NULL, name, 0);
}

int kt_cl_track_command(kt_cl_ctx_t *ctx, cl_event event, const char *name, uint64_t bytes, uint64_t enqueue_ns)
{
    return track(ctx, event, NULL, name, enqueue_ns, bytes, 0, 0, NULL);
}

int kt_cl_event_held(cl_event event)
{
    if (!event)
        return 0;
    uint32_t n = atomic_load(&g_next_slot);
    if (n > MAX_CHUNKS * CHUNK_SIZE)
        n = MAX_CHUNKS * CHUNK_SIZE;
    for (uint32_t i = 0; i < n; i++) {
        rec_t *r = slot_rec(i);
        if (!r || TAG_ST(atomic_load(&r->tag)) == ST_FREE)
            continue;
        /* a record published (its tag set after its event) and not yet freed holds its event */
        if (__atomic_load_n(&r->event, __ATOMIC_RELAXED) == event && TAG_ST(atomic_load(&r->tag)) != ST_FREE)
            return 1;
    }
    return 0;
}

void kt_cl_enqueue_failed(kt_cl_ctx_t *ctx, cl_kernel kernel, const char *name, cl_int error)
{
    if (!ctx || error == CL_SUCCESS)
        return;
    note_error(error);
    char buf[128];
    char *heap = NULL;
    if (!name)
        name = kernel ? kernel_name(kernel, buf, sizeof buf, &heap) : "opencl_command";
    kt_kernel_id_t id = intern_cached(kernel, ctx->dev, name);
    kt_record_error_name(id, kt_cl_error_name(error));
    if (g_verbose) {
        char csv[NAME_CAP], line[512];
        kt__escape_field(csv, sizeof csv, name);
        snprintf(line, sizeof line, "ktiming,error,opencl,%s,%s,%d,%s\n", ctx->device_csv, csv, (int)error,
                 kt_cl_error_name(error));
        log_line(line);
    }
    free(heap);
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
    if (event) {
        *event = ev;
        track(ctx, ev, kernel, NULL, t0, 0, 0, num_events, wait_list);
    } else {
        /* the event exists only for ktiming: hand it over */
        track(ctx, ev, kernel, NULL, t0, 0, 1, num_events, wait_list);
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Helpers for shims
 * ------------------------------------------------------------------------------------------------- */

int kt_cl_queue_properties_profiled(const cl_queue_properties *in, cl_queue_properties *out, size_t cap)
{
    if (!out)
        return KT_EINVAL;
    size_t n = 0;
    int found = 0;
    for (size_t i = 0; in && in[i]; i += 2) {
        if (n + 2 > cap)
            return KT_EFULL;
        out[n] = in[i];
        out[n + 1] = in[i + 1];
        if (in[i] == CL_QUEUE_PROPERTIES) {
            out[n + 1] |= CL_QUEUE_PROFILING_ENABLE;
            found = 1;
        }
        n += 2;
    }
    if (!found) {
        if (n + 2 > cap)
            return KT_EFULL;
        out[n++] = CL_QUEUE_PROPERTIES;
        out[n++] = CL_QUEUE_PROFILING_ENABLE;
    }
    if (n + 1 > cap)
        return KT_EFULL;
    out[n] = 0;
    return 0;
}
