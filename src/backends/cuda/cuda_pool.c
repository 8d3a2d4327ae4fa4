/* cuda_pool.c — CUDA backend: the per-context pool of event pairs and the per-stream queues of pending pairs. */
#include "cuda_internal.h"

#include "core/service.h"

#include <stdio.h>
#include <stdlib.h>

/* Creates max(pool_chunk, capacity) pairs (the pool doubles), bounded by max_pairs. Called without c->lock: the
 * driver calls (up to 65,536 events) run outside it, so kt_cuda_begin/end and the collector never wait behind
 * them; grow_lock makes one thread grow at a time (a thread that finds the pool grown meanwhile returns). */
static int pool_grow(kt__cuda_ctx_t *c)
{
    pthread_mutex_lock(&c->grow_lock);
    pthread_mutex_lock(&c->lock);
    uint32_t capacity = c->capacity;
    int grown = c->free_list != NULL;
    pthread_mutex_unlock(&c->lock);
    if (grown) {
        pthread_mutex_unlock(&c->grow_lock);
        return 0;
    }
    uint32_t want = capacity > kt__cuda_g.desc.pool_chunk ? capacity : kt__cuda_g.desc.pool_chunk;
    if (want > kt__cuda_g.desc.max_pairs - capacity)
        want = kt__cuda_g.desc.max_pairs - capacity;
    if (want == 0) {
        pthread_mutex_unlock(&c->grow_lock);
        return KT_EFULL;
    }
    kt__cuda_chunk_t *chunk = calloc(1, sizeof *chunk + (size_t)want * sizeof(kt__cuda_pair_t));
    if (!chunk) {
        pthread_mutex_unlock(&c->grow_lock);
        return KT_ENOMEM;
    }
    int pushed = 0;
    int rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc) {
        free(chunk);
        pthread_mutex_unlock(&c->grow_lock);
        return rc;
    }
    uint64_t created = 0;
    for (uint32_t i = 0; i < want; i++) {
        kt__cuda_pair_t *p = &chunk->pairs[i];
        kt__curesult r = kt__cu.cuEventCreate(&p->start, KT__CU_EVENT_DEFAULT);
        if (r == KT__CU_SUCCESS) {
            created++;
            r = kt__cu.cuEventCreate(&p->end, KT__CU_EVENT_DEFAULT);
            if (r == KT__CU_SUCCESS)
                created++;
            else
                kt__cu.cuEventDestroy_v2(p->start);
        }
        if (r) {
            rc = kt__cuda_fail("cuEventCreate", r);
            break;
        }
        chunk->count++;
    }
    if (chunk->count && !kt__cuda_ctx_alive(c)) {
        /* Reset (or destroyed) while growing: the events made before it were freed with the context, and which
         * ones those are cannot be told apart from any made after it, in the context's next life. Destroying them
         * would be a use after free, so none is touched: at most one chunk of the next life's events is left to
         * the driver (freed with that life), and the growth fails as the context's retirement will say. */
        chunk->count = 0;
        rc = KT_EBACKEND;
        kt__cuda_set_error(KT__CU_ERROR_CONTEXT_IS_DESTROYED, "CUDA context %p was reset", (void *)c->ctx);
    }
    kt__cuda_ctx_leave(pushed);
    pthread_mutex_lock(&c->lock);
    c->events_created += created;
    if (chunk->count) {
        chunk->next = c->chunks;
        c->chunks = chunk;
        for (uint32_t i = 0; i < chunk->count; i++) {
            chunk->pairs[i].next = c->free_list;
            c->free_list = &chunk->pairs[i];
        }
        c->capacity += chunk->count;
        c->free_count += chunk->count;
    }
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_unlock(&c->grow_lock);
    if (chunk->count == 0) {
        free(chunk);
        return rc ? rc : KT_EBACKEND;
    }
    return 0;
}

/* c->lock held (released while the pool grows). */
int kt__cuda_pool_take_locked(kt__cuda_ctx_t *c, kt__cuda_pair_t **out)
{
    while (!c->free_list) {
        pthread_mutex_unlock(&c->lock);
        int rc = pool_grow(c);
        pthread_mutex_lock(&c->lock);
        if (rc)
            return rc;
    }
    kt__cuda_pair_t *p = c->free_list;
    c->free_list = p->next;
    c->free_count--;
    p->next = NULL;
    *out = p;
    return 0;
}

void kt__cuda_pool_put(kt__cuda_ctx_t *c, kt__cuda_pair_t *p)
{
    pthread_mutex_lock(&c->lock);
    p->queue = NULL;
    p->next = c->free_list;
    c->free_list = p;
    c->free_count++;
    pthread_mutex_unlock(&c->lock);
}

/* c->lock held: the queue of a stream, created (and registered as a timeline track) on first sight. */
kt__cuda_squeue_t *kt__cuda_squeue_get_locked(kt__cuda_ctx_t *c, kt__custream stream, uint32_t thread)
{
    uint32_t owner = stream == KT__CU_STREAM_PER_THREAD ? thread : 0; /* one per-thread stream per thread */
    for (kt__cuda_squeue_t *q = c->queues; q; q = q->next)
        if (q->stream == stream && q->thread == owner)
            return q;
    kt__cuda_squeue_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->stream = stream;
    q->thread = owner;
    char label[64];
    if (stream == KT__CU_STREAM_PER_THREAD)
        snprintf(label, sizeof label, "stream per-thread default (thread %u)", owner);
    else if (stream == KT__CU_STREAM_LEGACY)
        snprintf(label, sizeof label, "stream default (ctx %p)", (void *)c->ctx);
    else if (stream)
        snprintf(label, sizeof label, "stream %p", (void *)stream);
    else
        snprintf(label, sizeof label, "stream default (ctx %p)", (void *)c->ctx);
    q->queue_id = kt_queue_register(KT_BACKEND_CUDA, c->device_key, label);
    q->next = c->queues;
    c->queues = q;
    return q;
}
