/* cl_rec.c — tracked-command records: chunks of slots never freed, per-thread free lists, and the record state
 * machine (every change of a record's tag is here). */
#include "backends/opencl/cl_rec.h"
#include "core/service.h"
#include "shared/tool_cl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------
 * Slots
 *
 * Records live in chunks that are never freed, indexed by slot. Records recycle through the shared list in
 * batches: an allocating thread takes the whole list at once (an exchange, so no ABA), then pops privately;
 * completions on other threads push one at a time.
 * ------------------------------------------------------------------------------------------------- */

enum { ST_FREE = 0, ST_PENDING = 1, ST_PEEKED = 2, ST_PEEKED_CB = 3, ST_CLAIMED = 4, ST_POLLED = 5 };
#define TAG(gen, st) (((uint64_t)(gen) << 3) | (uint64_t)(st))
#define TAG_GEN(t) ((t) >> 3)
#define TAG_ST(t) ((unsigned)((t)&7u))
/* Generation bits that fit in a pointer-sized handle next to the slot. */
#define HANDLE_GEN_MASK ((uint64_t)(UINTPTR_MAX >> SLOT_BITS))

/* A chunk of records. */
typedef struct chunk_t {
    kt__cl_rec_t rec[CHUNK_SIZE]; /* the records */
    uint64_t bytes[CHUNK_SIZE];   /* bytes each record's command moves (transfers; 0 for kernels) */
    kt_launch_t launch[CHUNK_SIZE]; /* each record's launch configuration (kind 0: none) */
    char (*names)[NAME_CAP];      /* verbose mode only: kernel name of each record, for its line */
} chunk_t;

static _Atomic(chunk_t *) g_chunks[MAX_CHUNKS]; /* allocated on demand, kept until exit */
static _Atomic uint32_t g_next_slot;          /* slots ever handed out (scan bound) */
static _Atomic uint32_t g_free_head;          /* freed records (slot + 1, 0 = none), pushed by completions */
/* initial-exec, as the recorder's: a call to __tls_get_addr at each use otherwise (slot_alloc 3 a command, free 1) */
static __thread uint32_t t_free __attribute__((tls_model("initial-exec"))); /* this thread's private free list
                                                                               (slot + 1), taken whole */
static pthread_once_t g_free_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_free_key;              /* returns a thread's private list to g_free_head at exit */
/* Callback records (PENDING, or PEEKED by a flush): a flush scans the slots for them only while there are any. */
static _Atomic uint64_t g_pending_cb;

kt__cl_rec_t *kt__cl_slot_rec(uint32_t slot)
{
    chunk_t *chunk = atomic_load_explicit(&g_chunks[slot >> CHUNK_SHIFT], memory_order_acquire);
    return chunk ? &chunk->rec[slot & (CHUNK_SIZE - 1)] : NULL;
}

static chunk_t *slot_chunk(uint32_t slot)
{
    return atomic_load_explicit(&g_chunks[slot >> CHUNK_SHIFT], memory_order_acquire);
}

uint32_t kt__cl_slots_used(void)
{
    uint32_t n = atomic_load(&g_next_slot);
    return n > MAX_CHUNKS * CHUNK_SIZE ? MAX_CHUNKS * CHUNK_SIZE : n;
}

uint32_t kt__cl_slots_made(void)
{
    return kt__cl_slots_used();
}

char *kt__cl_rec_name(const kt__cl_rec_t *r)
{
    static char none[1];
    chunk_t *chunk = atomic_load_explicit(&g_chunks[r->slot >> CHUNK_SHIFT], memory_order_acquire);
    return chunk->names ? chunk->names[r->slot & (CHUNK_SIZE - 1)] : none;
}

uint64_t *kt__cl_rec_bytes(const kt__cl_rec_t *r)
{
    return &slot_chunk(r->slot)->bytes[r->slot & (CHUNK_SIZE - 1)];
}

kt_launch_t *kt__cl_rec_launch(const kt__cl_rec_t *r)
{
    return &slot_chunk(r->slot)->launch[r->slot & (CHUNK_SIZE - 1)];
}

/* Push a linked run of free records first..last (slots + 1) onto the shared list. */
static void free_push(uint32_t first, kt__cl_rec_t *last)
{
    uint32_t h = atomic_load(&g_free_head);
    do
        atomic_store_explicit(&last->next_free, h, memory_order_relaxed);
    while (!atomic_compare_exchange_weak(&g_free_head, &h, first));
}

static __thread int t_allocates __attribute__((tls_model("initial-exec"))); /* this thread tracks commands: the
                                                                             records it frees stay on its list */
static __thread uint32_t t_owner __attribute__((tls_model("initial-exec"))); /* its kt_thread_ordinal() + 1, once it
                                                                              tracks (the records it took say so) */

static void free_list_return(void *unused)
{
    (void)unused;
    t_allocates = 0; /* anything it frees from now on goes to the shared list */
    if (!t_free)
        return;
    kt__cl_rec_t *last = kt__cl_slot_rec(t_free - 1), *next;
    uint32_t n;
    while (last && (n = atomic_load_explicit(&last->next_free, memory_order_relaxed)) != 0 &&
           (next = kt__cl_slot_rec(n - 1)) != NULL)
        last = next;
    if (last)
        free_push(t_free, last);
    t_free = 0;
}

static void free_key_create(void)
{
    pthread_key_create(&g_free_key, free_list_return);
}

/* A new chunk for index ci, published (or the one another thread published first); NULL without memory. */
static chunk_t *chunk_make(uint32_t ci)
{
    chunk_t *fresh = aligned_alloc(64, sizeof *fresh);
    int verbose = kt__verbose_on();
    char(*names)[NAME_CAP] = verbose ? calloc(CHUNK_SIZE, NAME_CAP) : NULL;
    if (!fresh || (verbose && !names)) {
        free(fresh);
        free(names);
        return NULL;
    }
    memset(fresh, 0, sizeof *fresh);
    fresh->names = names;
    for (uint32_t i = 0; i < CHUNK_SIZE; i++)
        fresh->rec[i].slot = (ci << CHUNK_SHIFT) | i;
    chunk_t *expected = NULL;
    if (atomic_compare_exchange_strong(&g_chunks[ci], &expected, fresh))
        return fresh;
    free(fresh->names);
    free(fresh);
    return expected;
}

kt__cl_rec_t *kt__cl_slot_alloc(void)
{
    if (!t_allocates) {
        t_allocates = 1;
        t_owner = kt_thread_ordinal() + 1;
        pthread_once(&g_free_key_once, free_key_create);
        pthread_setspecific(g_free_key, &t_free); /* its list goes back to the shared one at its exit */
    }
    if (!t_free && atomic_load_explicit(&g_free_head, memory_order_relaxed))
        t_free = atomic_exchange(&g_free_head, 0);
    kt__cl_rec_t *r = t_free ? kt__cl_slot_rec(t_free - 1) : NULL; /* a listed slot's chunk always exists */
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
    if (!chunk && (chunk = chunk_make(ci)) == NULL)
        return NULL; /* the slot stays unused (never published) */
    return &chunk->rec[slot & (CHUNK_SIZE - 1)];
}

/* A thread that tracks commands keeps the records of its own commands it frees (it records at its synchronisation
 * points) on its own list, first: its next commands reuse those records while they are in its cache, instead of
 * cold ones from the shared list (after a burst of 100,000 commands, recording a sync point's 100 cost about twice
 * as much, one cache miss per record). Another thread's records go back to the shared list, where that thread takes
 * them again: kept here, by a thread that tracked once and then only synchronises, they were lost to the thread
 * that enqueues, which took new slots for every command until none was left (2^24) and every command was dropped. */
void kt__cl_slot_free(kt__cl_rec_t *r)
{
    uint64_t t = atomic_load(&r->tag);
    atomic_store(&r->tag, TAG(TAG_GEN(t) + 1, ST_FREE));
    if (t_allocates && r->thread + 1 == t_owner) {
        atomic_store_explicit(&r->next_free, t_free, memory_order_relaxed);
        t_free = r->slot + 1;
        return;
    }
    free_push(r->slot + 1, r);
}

int kt_cl_event_held(cl_event event)
{
    if (!event)
        return 0;
    uint32_t n = kt__cl_slots_used();
    for (uint32_t i = 0; i < n; i++) {
        kt__cl_rec_t *r = kt__cl_slot_rec(i);
        if (!r || TAG_ST(atomic_load(&r->tag)) == ST_FREE)
            continue;
        /* a record published (its tag set after its event) and not yet freed holds its event */
        if (__atomic_load_n(&r->event, __ATOMIC_RELAXED) == event && TAG_ST(atomic_load(&r->tag)) != ST_FREE)
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * States (see cl_rec.h)
 * ------------------------------------------------------------------------------------------------- */

uint64_t kt__cl_rec_gen(const kt__cl_rec_t *r)
{
    return TAG_GEN(atomic_load(&((kt__cl_rec_t *)r)->tag));
}

void kt__cl_rec_set_polled(kt__cl_rec_t *r, uint64_t gen)
{
    atomic_store(&r->tag, TAG(gen, ST_POLLED));
}

void kt__cl_rec_hold(kt__cl_rec_t *r, uint64_t gen)
{
    atomic_store(&r->tag, TAG(gen, ST_PEEKED));
}

int kt__cl_rec_hold_end(kt__cl_rec_t *r, uint64_t gen)
{
    uint64_t t = TAG(gen, ST_PEEKED);
    atomic_fetch_add(&g_pending_cb, 1); /* before it can be claimed as PENDING */
    if (atomic_compare_exchange_strong(&r->tag, &t, TAG(gen, ST_PENDING)))
        return 1; /* from here its callback or a flush completes it */
    atomic_fetch_sub(&g_pending_cb, 1);
    atomic_store(&r->tag, TAG(gen, ST_CLAIMED));
    return 0;
}

void *kt__cl_rec_handle(const kt__cl_rec_t *r, uint64_t gen)
{
    return (void *)(uintptr_t)(((gen & HANDLE_GEN_MASK) << SLOT_BITS) | r->slot);
}

int kt__cl_rec_callback(void *handle, cl_int status, kt__cl_rec_t **out)
{
    uintptr_t h = (uintptr_t)handle;
    kt__cl_rec_t *r = kt__cl_slot_rec((uint32_t)(h & SLOT_MASK));
    uint64_t gen = ((uint64_t)h >> SLOT_BITS) & HANDLE_GEN_MASK;
    if (!r)
        return 0;
    uint64_t t = atomic_load(&r->tag);
    for (;;) {
        if ((TAG_GEN(t) & HANDLE_GEN_MASK) != gen)
            return 0; /* collected already; the slot moved on */
        unsigned st = TAG_ST(t);
        if (st == ST_PENDING) {
            if (atomic_compare_exchange_weak(&r->tag, &t, TAG(TAG_GEN(t), ST_CLAIMED))) {
                atomic_fetch_sub(&g_pending_cb, 1);
                atomic_store_explicit(&r->cb_status, (int)status, memory_order_relaxed);
                *out = r;
                return 1;
            }
        } else if (st == ST_PEEKED) {
            atomic_store(&r->cb_status, (int)status);
            if (atomic_compare_exchange_weak(&r->tag, &t, TAG(TAG_GEN(t), ST_PEEKED_CB)))
                return 0; /* the peeking flush (or the tracking thread) completes it */
        } else {
            return 0;
        }
    }
}

/* A record in state `from` -> PEEKED (1, *gen set), or 0 when it is in another state. */
static int peek_from(kt__cl_rec_t *r, unsigned from, uint64_t *gen)
{
    uint64_t t = atomic_load(&r->tag);
    if (TAG_ST(t) != from || !atomic_compare_exchange_strong(&r->tag, &t, TAG(TAG_GEN(t), ST_PEEKED)))
        return 0;
    *gen = TAG_GEN(t);
    return 1;
}

int kt__cl_rec_peek(kt__cl_rec_t *r, uint64_t *gen)
{
    return peek_from(r, ST_PENDING, gen);
}

void kt__cl_rec_peek_claim(kt__cl_rec_t *r, uint64_t gen)
{
    atomic_store(&r->tag, TAG(gen, ST_CLAIMED)); /* a callback that lands now finds it claimed */
    atomic_fetch_sub(&g_pending_cb, 1);
}

int kt__cl_rec_unpeek(kt__cl_rec_t *r, uint64_t gen)
{
    uint64_t peeked = TAG(gen, ST_PEEKED);
    if (atomic_compare_exchange_strong(&r->tag, &peeked, TAG(gen, ST_PENDING)))
        return 1;
    /* The callback came while we looked: it left its status for us. */
    kt__cl_rec_peek_claim(r, gen);
    return 0;
}

int kt__cl_rec_poll_begin(kt__cl_rec_t *r, uint64_t *gen)
{
    return peek_from(r, ST_POLLED, gen);
}

void kt__cl_rec_poll_end(kt__cl_rec_t *r, uint64_t gen, int done)
{
    atomic_store(&r->tag, TAG(gen, done ? ST_CLAIMED : ST_POLLED));
}

void kt__cl_rec_poll_take(kt__cl_rec_t *r)
{
    uint64_t t = atomic_load(&r->tag); /* POLLED again: ours while the caller holds the poll lock */
    atomic_store(&r->tag, TAG(TAG_GEN(t), ST_CLAIMED));
}

int kt__cl_rec_any_callback(void)
{
    return atomic_load(&g_pending_cb) != 0;
}
