/* cl_ctx.c — the registry of attached queues: lookup by queue, the list flushes walk, retired contexts freed once
 * their last record is finished. */
#include "backends/opencl/cl_ctx.h"
#include "core/internal.h"

#include <stdlib.h>

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

uint64_t kt__cl_ctx_in_flight(const kt_cl_ctx_t *c)
{
    kt_cl_ctx_t *m = (kt_cl_ctx_t *)c;
    uint64_t done = atomic_load(&m->finished); /* first: both only grow, so this never underflows */
    return atomic_load(&m->tracked) - done;
}

size_t kt__cl_ctx_retired_count(void)
{
    return atomic_load(&g_retired_count);
}

void kt__cl_ctx_reap(void)
{
    if (atomic_load_explicit(&g_retired_count, memory_order_relaxed) == 0)
        return;
    kt_cl_ctx_t *done = NULL;
    pthread_mutex_lock(&g_ctx_lock);
    if (g_pins == 0) {
        for (kt_cl_ctx_t **p = &g_retired; *p;) {
            kt_cl_ctx_t *c = *p;
            if (kt__cl_ctx_in_flight(c) == 0) {
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
    while (done) { /* the queue reference ktiming held is released outside the lock */
        kt_cl_ctx_t *next = done->rnext;
        kt__cl.clReleaseCommandQueue(done->queue);
        pthread_mutex_destroy(&done->fifo_lock);
        free(done);
        done = next;
    }
}

kt_cl_ctx_t **kt__cl_ctx_pin_all(size_t *n)
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

void kt__cl_ctx_unpin(kt_cl_ctx_t **all)
{
    if (!all)
        return;
    pthread_mutex_lock(&g_ctx_lock);
    g_pins--;
    pthread_mutex_unlock(&g_ctx_lock);
    free(all);
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

kt_cl_ctx_t *kt__cl_ctx_find(cl_command_queue queue)
{
    pthread_mutex_lock(&g_ctx_lock);
    kt_cl_ctx_t *c = find_locked(queue);
    pthread_mutex_unlock(&g_ctx_lock);
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
    pthread_mutex_lock(&g_ctx_lock);
    *other = find_locked(c->queue);
    int rc = *other ? 0 : list_add_locked(c);
    pthread_mutex_unlock(&g_ctx_lock);
    return rc;
}

void kt__cl_ctx_retire(kt_cl_ctx_t *c)
{
    pthread_mutex_lock(&g_ctx_lock);
    if (find_locked(c->queue) == c)
        retire_locked(c);
    pthread_mutex_unlock(&g_ctx_lock);
}

void kt__cl_ctx_retire_all(void)
{
    pthread_mutex_lock(&g_ctx_lock);
    while (g_ctx_count) {
        kt_cl_ctx_t *c = g_ctxs[g_ctx_count - 1];
        atomic_store(&c->detaching, 1);
        retire_locked(c);
    }
    pthread_mutex_unlock(&g_ctx_lock);
}

/* Every context's FIFO lock, taken or released (under g_ctx_lock): an enqueuing thread may hold one. */
static void fifo_locks(int take)
{
    for (size_t i = 0; i < g_ctx_count; i++)
        (take ? pthread_mutex_lock : pthread_mutex_unlock)(&g_ctxs[i]->fifo_lock);
    for (kt_cl_ctx_t *c = g_retired; c; c = c->rnext)
        (take ? pthread_mutex_lock : pthread_mutex_unlock)(&c->fifo_lock);
}

void kt__cl_ctx_fork_lock(void)
{
    pthread_mutex_lock(&g_ctx_lock);
    fifo_locks(1);
}

void kt__cl_ctx_fork_unlock(void)
{
    fifo_locks(0);
    pthread_mutex_unlock(&g_ctx_lock);
}
