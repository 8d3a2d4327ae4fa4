/* cuda_span.c — CUDA backend: dispatch spans (kt_cuda_begin / kt_cuda_end, sync mode) and kt_cuda_stats. */
#include "cuda_internal.h"
#include "core/internal.h"

#include "core/service.h"

#include <string.h>

int kt__cuda_valid_ctx(const kt__cuda_ctx_t *c, uint32_t generation)
{
    return c && !kt__forked_child() && atomic_load(&kt__cuda_g.state) == KT__CUDA_READY && generation == atomic_load(&kt__cuda_g.generation) &&
           !atomic_load(&c->gone);
}

/* The stream ktiming records on for the user's `stream`: NULL is the per-thread default stream when the
 * program uses it (per_thread_default_stream, KTIMING_CUDA_PER_THREAD_STREAM=1, or ktiming/cuda.h compiled with
 * nvcc --default-stream per-thread), else the legacy default stream. */
kt__custream kt__cuda_stream_resolve(kt__custream stream)
{
    return !stream && kt__cuda_g.desc.per_thread_default_stream ? KT__CU_STREAM_PER_THREAD : stream;
}

/* Whether `stream` is capturing a graph (context current). Events recorded there would become graph nodes
 * (queries then fail with CUDA_ERROR_CAPTURED_EVENT), so such spans are skipped. A capture error from the query
 * itself (an implicit legacy-stream dependency on a capture) counts as capturing too. */
static int stream_capturing(kt__custream stream)
{
    if (!kt__cu.cuStreamIsCapturing)
        return 0;
    int status = KT__CU_STREAM_CAPTURE_STATUS_NONE;
    kt__curesult r = kt__cu.cuStreamIsCapturing(stream, &status);
    if (r >= KT__CU_ERROR_STREAM_CAPTURE_UNSUPPORTED && r <= KT__CU_ERROR_CAPTURED_EVENT + 1)
        return 1;
    return r == KT__CU_SUCCESS && status != KT__CU_STREAM_CAPTURE_STATUS_NONE;
}

int kt__cuda_stream_capturing(kt__custream stream)
{
    return stream_capturing(stream);
}

int(kt_cuda_begin)(kt_cuda_span_t *span, struct CUctx_st *ctx, struct CUstream_st *stream, const char *name)
{
    if (!span)
        return KT_EINVAL;
    span->pair = NULL;
    span->context = NULL;
    span->generation = 0;
    if (!kt_is_enabled())
        return 0;
    kt__backend_arm(&kt__cuda_ops); /* one atomic load once armed; registers again after the core's stop */
    kt__cuda_ctx_t *c;
    int rc = kt__cuda_ctx_get(ctx, &c);
    if (rc)
        return rc;
    stream = kt__cuda_stream_resolve(stream);
    kt_kernel_id_t id = kt_kernel_intern(name && name[0] ? name : "(unnamed)", KT_BACKEND_CUDA, c->device_key);
    uint32_t thread = kt_thread_ordinal();
    int pushed = 0;
    rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc)
        return rc;
    if (stream_capturing(stream)) {
        kt__cuda_ctx_leave(pushed);
        kt_record_drop(id, KT_DROP_GRAPH_CAPTURE);
        pthread_mutex_lock(&c->lock);
        c->dropped++;
        pthread_mutex_unlock(&c->lock);
        return 0; /* not an error: the span is skipped (kt_cuda_end does nothing) */
    }
    kt__cuda_pair_t *p = NULL;
    pthread_mutex_lock(&c->lock);
    kt__cuda_squeue_t *q = kt__cuda_squeue_get_locked(c, stream, thread);
    rc = q ? kt__cuda_pool_take_locked(c, &p) : KT_ENOMEM;
    if (rc == KT_EFULL)
        c->dropped++;
    pthread_mutex_unlock(&c->lock);
    if (rc) {
        kt__cuda_ctx_leave(pushed);
        if (rc == KT_EFULL) {
            kt_record_drop(id, KT_DROP_RING_FULL);
            kt__cuda_set_error(0, "CUDA event-pair pool full (%u pairs in flight)", kt__cuda_g.desc.max_pairs);
        }
        return rc;
    }
    p->kernel = id;
    p->queue = q;
    p->thread = thread;
    p->enqueue_ns = kt_now_ns();
    kt__curesult r = kt__cu.cuEventRecord(p->start, stream);
    kt__cuda_ctx_leave(pushed);
    if (r) {
        kt__cuda_pool_put(c, p);
        return kt__cuda_fail("cuEventRecord", r);
    }
    span->pair = p;
    span->context = c;
    span->generation = c->generation;
    return 0;
}

/* Sync mode (kt_cuda_desc_t.sync): waits for the span's end event, places and records the dispatch at once and
 * gives the pair back. */
static int end_sync(kt__cuda_ctx_t *c, kt__cuda_pair_t *p)
{
    int pushed = 0;
    kt_dispatch_t d;
    kt__inflight_begin(p->kernel); /* a program that dies (another thread) during the wait loses it */
    int rc = kt__cuda_ctx_enter(c, &pushed);
    kt__curesult r = rc == 0 ? kt__cu.cuEventSynchronize(p->end) : KT__CU_SUCCESS;
    kt__cuda_ctx_leave(pushed);
    pthread_mutex_lock(&kt__cuda_g.consumer);
    if (rc == 0)
        rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc == 0) {
        if (r)
            rc = kt__cuda_fail("cuEventSynchronize", r);
        else {
            kt__cuda_anchor_refresh(c);
            rc = kt__cuda_pair_place(c, p, &d);
        }
        kt__cuda_ctx_leave(pushed);
    }
    pthread_mutex_unlock(&kt__cuda_g.consumer);
    if (rc == 0) {
        kt_record_dispatch(&d);
        kt__cuda_verbose(c, p->kernel, &d, NULL);
    } else {
        kt_record_error(p->kernel, kt__cuda_result_name(kt_cuda_last_result()));
        kt__cuda_verbose(c, p->kernel, NULL, kt__cuda_result_name(kt_cuda_last_result()));
    }
    kt__inflight_end(p->kernel);
    pthread_mutex_lock(&c->lock);
    if (rc == 0)
        c->recorded++;
    else
        c->errors++;
    pthread_mutex_unlock(&c->lock);
    kt__cuda_pool_put(c, p);
    return rc;
}

int kt_cuda_end(kt_cuda_span_t *span)
{
    if (!span || !span->pair)
        return 0;
    if (kt__cuda_forked_child()) { /* a span begun in the parent: the child does not touch the parent's pool */
        span->pair = NULL;
        return KT_EUNAVAILABLE;
    }
    kt__cuda_pair_t *p = span->pair;
    kt__cuda_ctx_t *c = span->context;
    span->pair = NULL;
    if (!kt__cuda_valid_ctx(c, span->generation)) {
        /* Same backend generation: c's memory is still held (live or retired), so it may be read. */
        if (c && span->generation == atomic_load(&kt__cuda_g.generation) && atomic_load(&kt__cuda_g.state) == KT__CUDA_READY &&
            atomic_load(&c->gone)) {
            kt_record_drop(p->kernel, KT_DROP_CONTEXT_RESET);
            kt__cuda_set_error(KT__CU_ERROR_CONTEXT_IS_DESTROYED,
                               "kt_cuda_end: the CUDA context was reset or destroyed since kt_cuda_begin");
        } else {
            kt__cuda_set_error(0, "kt_cuda_end: the backend was shut down since kt_cuda_begin");
        }
        return KT_ESTATE;
    }
    int pushed = 0;
    int rc = kt__cuda_ctx_enter(c, &pushed);
    kt__curesult r = KT__CU_SUCCESS;
    int captured = 0;
    if (rc == 0) {
        captured = stream_capturing(p->queue->stream); /* capture began between begin and end */
        if (!captured)
            r = kt__cu.cuEventRecord(p->end, p->queue->stream);
        kt__cuda_ctx_leave(pushed);
        if (r)
            rc = kt__cuda_fail("cuEventRecord", r);
    }
    if (captured) {
        kt_record_drop(p->kernel, KT_DROP_GRAPH_CAPTURE);
        pthread_mutex_lock(&c->lock);
        c->dropped++;
        pthread_mutex_unlock(&c->lock);
        kt__cuda_pool_put(c, p);
        return 0;
    }
    if (rc) {
        kt_record_error(p->kernel, kt__cuda_result_name(r ? r : kt_cuda_last_result()));
        kt__cuda_verbose(c, p->kernel, NULL, kt__cuda_result_name(r ? r : kt_cuda_last_result()));
        pthread_mutex_lock(&c->lock);
        c->errors++;
        pthread_mutex_unlock(&c->lock);
        kt__cuda_pool_put(c, p);
        return rc;
    }
    if (kt__cuda_g.desc.sync)
        return end_sync(c, p);
    kt__inflight_begin(p->kernel); /* ended when collected or dropped (cuda_collect.c) */
    pthread_mutex_lock(&c->lock);
    kt__cuda_squeue_t *q = p->queue;
    p->next = NULL;
    if (q->tail)
        q->tail->next = p;
    else
        q->head = p;
    q->tail = p;
    c->pending++;
    pthread_mutex_unlock(&c->lock);
    if (atomic_fetch_add(&kt__cuda_g.pending, 1) == 0)
        kt__cuda_collector_kick();
    return 0;
}

int kt_cuda_stats(struct CUctx_st *ctx, kt_cuda_stats_t *out)
{
    if (!out)
        return KT_EINVAL;
    kt__cuda_ctx_t *c;
    int rc = kt__cuda_ctx_get(ctx, &c);
    if (rc)
        return rc;
    pthread_mutex_lock(&c->lock);
    out->pairs_capacity = c->capacity;
    out->pairs_free = c->free_count;
    out->pending = c->pending;
    out->events_created = c->events_created;
    out->recorded = c->recorded;
    out->errors = c->errors;
    out->dropped = c->dropped;
    out->anchors = c->anchors_made;
    out->model_samples = c->event_model_valid ? c->event_model.inliers : 0;
    pthread_mutex_unlock(&c->lock);
    return 0;
}
