/* cl_ctx.c — the registry of attached queues: the service layer's context set (attached and retired contexts,
 * pinned by flushes, freed once their last record is finished) and a hash from queue to context for lookups (the
 * shim looks a queue up on every enqueue). */
#include "backends/opencl/cl_ctx.h"
#include "core/internal.h"

#include <stdlib.h>

/* fork: each context's FIFO lock (an enqueuing thread may hold one) is taken with the set's lock and released in
 * the parent and the child. */
static void fifo_fork(void *ctx, int phase)
{
    kt_cl_ctx_t *c = ctx;
    if (phase == 0)
        pthread_mutex_lock(&c->fifo_lock);
    else
        pthread_mutex_unlock(&c->fifo_lock);
}

unsigned kt__cl_fork_gen;

/* In a forked child (one thread, before fork returns): a new generation. Installed with the first context, and not
 * through the core's backend registration: a child forked after kt_shutdown still tells its parent's contexts. */
static void fork_gen_child(void)
{
    kt__cl_fork_gen++;
}

static pthread_once_t g_fork_gen_once = PTHREAD_ONCE_INIT;
static void fork_gen_install(void)
{
    pthread_atfork(NULL, NULL, fork_gen_child);
}

static kt__ctx_set_t g_set = KT__CTX_SET_INIT_FORK(fifo_fork); /* attached and retired contexts */
/* The hash from queue to attached context: g_hash_lock guards it, never held across a driver call or a wait. */
static pthread_mutex_t g_hash_lock = PTHREAD_MUTEX_INITIALIZER;
static kt_cl_ctx_t **g_hash;  /* buckets (power of two), chained through hnext */
static size_t g_hash_cap;     /* number of buckets */
static size_t g_hash_count;   /* attached contexts in it */

uint64_t kt__cl_ctx_in_flight(const kt_cl_ctx_t *c)
{
    kt_cl_ctx_t *m = (kt_cl_ctx_t *)c;
    uint64_t done = atomic_load(&m->finished); /* first: both only grow, so this never underflows */
    return atomic_load(&m->tracked) - done;
}

size_t kt__cl_ctx_retired_count(void)
{
    return kt__ctx_set_retired(&g_set);
}

/* Done: its last command finished. A forked child never frees its parent's (their queue is the parent's). */
static int ctx_done(void *ctx)
{
    return kt__cl_ctx_mine(ctx) && kt__cl_ctx_in_flight(ctx) == 0;
}

/* A reaped context: the queue reference ktiming held is released (outside the set's lock), then it is freed. */
static void ctx_free(void *ctx)
{
    kt_cl_ctx_t *c = ctx;
    kt__cl.clReleaseCommandQueue(c->queue);
    pthread_mutex_destroy(&c->fifo_lock);
    free(c);
}

void kt__cl_ctx_reap(void)
{
    if (kt__ctx_set_retired(&g_set))
        kt__ctx_set_reap(&g_set, ctx_done, ctx_free);
}

void kt__cl_ctx_pin(kt__ctx_pin_t *pin)
{
    kt__ctx_set_pin(&g_set, pin, KT__CTX_PIN_ALL);
    if (!kt__cl_fork_gen)
        return; /* never forked: every context is this process's */
    size_t keep = 0; /* a forked child: its parent's contexts left out (the pin's array is its own) */
    for (size_t i = 0; i < pin->n; i++)
        if (kt__cl_ctx_mine(pin->ctx[i]))
            pin->ctx[keep++] = pin->ctx[i];
    pin->n = keep;
}

void kt__cl_ctx_unpin(kt__ctx_pin_t *pin)
{
    kt__ctx_set_unpin(pin);
    kt__cl_ctx_reap();
}

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

/* Room in the hash for one more context (grown at 3/4 load). 0 or KT_ENOMEM. */
static int hash_reserve_locked(void)
{
    if ((g_hash_count + 1) * 4 <= g_hash_cap * 3)
        return 0;
    size_t cap = g_hash_cap ? g_hash_cap * 2 : 16;
    kt_cl_ctx_t **h = calloc(cap, sizeof *h);
    if (!h)
        return KT_ENOMEM;
    for (size_t i = 0; i < g_hash_cap; i++)
        for (kt_cl_ctx_t *e = g_hash[i], *next; e; e = next) {
            next = e->hnext;
            size_t b = hash_of(e->queue, cap);
            e->hnext = h[b];
            h[b] = e;
        }
    free(g_hash);
    g_hash = h;
    g_hash_cap = cap;
    return 0;
}

kt_cl_ctx_t *kt__cl_ctx_find(cl_command_queue queue)
{
    pthread_mutex_lock(&g_hash_lock);
    kt_cl_ctx_t *c = find_locked(queue);
    pthread_mutex_unlock(&g_hash_lock);
    return c;
}

kt_cl_ctx_t *kt_cl_find(cl_command_queue queue)
{
    if (!queue || kt_cl_load(NULL) < 0)
        return NULL;
    return kt__cl_ctx_find(queue);
}

int kt__cl_ctx_add(kt_cl_ctx_t *c, kt_cl_ctx_t **other)
{
    pthread_once(&g_fork_gen_once, fork_gen_install);
    c->fork_gen = kt__cl_fork_gen;
    pthread_mutex_lock(&g_hash_lock);
    *other = find_locked(c->queue);
    int rc = 0;
    if (!*other && (rc = hash_reserve_locked()) == 0 && (rc = kt__ctx_set_add(&g_set, c)) == 0) {
        size_t b = hash_of(c->queue, g_hash_cap);
        c->hnext = g_hash[b];
        g_hash[b] = c;
        g_hash_count++;
    }
    pthread_mutex_unlock(&g_hash_lock);
    return rc;
}

void kt__cl_ctx_retire(kt_cl_ctx_t *c)
{
    pthread_mutex_lock(&g_hash_lock);
    if (find_locked(c->queue) == c) {
        kt_cl_ctx_t **p = &g_hash[hash_of(c->queue, g_hash_cap)];
        while (*p != c)
            p = &(*p)->hnext;
        *p = c->hnext;
        g_hash_count--;
        /* without memory for the retired list it stays in the set as attached: still flushed, never freed */
        kt__ctx_set_retire(&g_set, c);
    }
    pthread_mutex_unlock(&g_hash_lock);
}

void kt__cl_ctx_retire_all(void)
{
    kt__ctx_pin_t pin;
    kt__ctx_set_pin(&g_set, &pin, KT__CTX_PIN_LIVE);
    for (size_t i = 0; i < pin.n; i++) {
        kt_cl_ctx_t *c = pin.ctx[i];
        atomic_store(&c->detaching, 1);
        kt__cl_ctx_retire(c);
    }
    kt__ctx_set_unpin(&pin);
}

void kt__cl_ctx_fork_lock(void)
{
    pthread_mutex_lock(&g_hash_lock);
}

void kt__cl_ctx_fork_unlock(void)
{
    pthread_mutex_unlock(&g_hash_lock);
}
