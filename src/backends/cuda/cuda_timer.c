/* cuda_timer.c — CUDA backend: the GPU timer (kt_cuda_timer_*) on a pooled event pair. */
#include "cuda_internal.h"

#include "core/service.h"

#include <string.h>

/* The timer's pair is usable: same backend generation, and its context neither retired nor reset since (the
 * context's id is asked: a reset no collector pass noticed freed the pair's events too). */
static int timer_valid(const kt_cuda_timer_t *t)
{
    return t->pair && kt__cuda_valid_ctx(t->context, t->generation) && kt__cuda_ctx_alive(t->context);
}

/* Why a timer is not valid, as the last error: its context was reset or destroyed, or the backend shut down. */
static void timer_invalid_error(const kt_cuda_timer_t *t)
{
    kt__cuda_ctx_t *c = t->context;
    if (c && t->generation == kt__cuda_generation() && atomic_load(&c->gone)) /* c is held until shutdown */
        kt__cuda_set_error(KT__CU_ERROR_CONTEXT_IS_DESTROYED,
                           "kt_cuda_timer: the CUDA context was reset or destroyed since the timer started");
    else
        kt__cuda_set_error(0, "kt_cuda_timer: the backend was shut down since start");
}

static int timer_acquire(kt_cuda_timer_t *t)
{
    kt__cuda_ctx_t *c;
    int rc = kt__cuda_ctx_get(t->ctx, &c);
    if (rc)
        return rc;
    kt__cuda_pair_t *p = NULL;
    pthread_mutex_lock(&c->lock);
    rc = kt__cuda_pool_take_locked(c, &p);
    pthread_mutex_unlock(&c->lock);
    if (rc)
        return rc;
    t->pair = p;
    t->context = c;
    t->generation = c->generation;
    t->running = 0;
    t->started = 0;
    return 0;
}

int(kt_cuda_timer_init)(kt_cuda_timer_t *t, struct CUctx_st *ctx, struct CUstream_st *stream)
{
    if (!t)
        return KT_EINVAL;
    memset(t, 0, sizeof *t);
    t->ctx = ctx;
    t->stream = stream;
    return timer_acquire(t);
}

/* Records the start or end event. KT_ESTATE, recording nothing, while the stream captures a graph (the event
 * would become a graph node) or is the legacy stream beside a capturing blocking stream (recording would
 * invalidate the program's capture). */
static int timer_record(const kt_cuda_timer_t *t, int end)
{
    kt__cuda_ctx_t *c = t->context;
    kt__cuda_pair_t *p = t->pair;
    kt__custream stream = kt__cuda_stream_resolve(t->stream);
    int pushed = 0;
    int rc = kt__cuda_ctx_enter(c, &pushed);
    if (rc)
        return rc;
    if (kt__cuda_stream_capturing(stream)) {
        kt__cuda_ctx_leave(pushed);
        kt__cuda_set_error(0, "kt_cuda_timer: its stream is capturing a graph (or is the legacy stream while a "
                              "blocking stream captures): nothing recorded, time the graph's launch instead");
        return KT_ESTATE;
    }
    kt__curesult r = kt__cu.cuEventRecord(end ? p->end : p->start, stream);
    kt__cuda_ctx_leave(pushed);
    return r ? kt__cuda_fail("cuEventRecord", r) : 0;
}

void(kt_cuda_timer_start)(kt_cuda_timer_t *t)
{
    if (!t)
        return;
    if (!timer_valid(t) && timer_acquire(t) != 0) {
        t->pair = NULL;
        t->started = -1; /* no events (pool full, context gone): elapsed() fails rather than reading 0 */
        return;
    }
    if (timer_record(t, 0) != 0) {
        t->started = -1; /* elapsed() says why instead of reading 0 */
        t->running = 0;
        return;
    }
    t->started = 1;
    t->running = 1;
}

void kt_cuda_timer_stop(kt_cuda_timer_t *t)
{
    if (!t || !t->running)
        return;
    t->running = 0;
    if (!timer_valid(t)) {
        timer_invalid_error(t);
        t->started = -1; /* no stop event: elapsed() fails */
    } else if (timer_record(t, 1) != 0) {
        t->started = -1;
    }
}

int kt_cuda_timer_elapsed(const kt_cuda_timer_t *t, double *ms)
{
    if (!t || !ms)
        return KT_EINVAL;
    *ms = 0.0;
    if (!t->started)
        return 0;
    if (t->started < 0) { /* the last start or stop recorded nothing */
        if (!t->pair)
            kt__cuda_set_error(0, "kt_cuda_timer: its last start got no events (the context's pool full, or the "
                                  "context unusable): no time to read");
        else if (!timer_valid(t))
            timer_invalid_error(t);
        else
            kt__cuda_set_error(0, "kt_cuda_timer: its last start or stop recorded nothing (its stream was capturing "
                                  "a graph, or the driver refused the record): no time to read");
        return KT_ESTATE;
    }
    if (!timer_valid(t)) {
        timer_invalid_error(t);
        return KT_ESTATE;
    }
    if (t->running) {
        int rc = timer_record(t, 1); /* lap: stream time since start, up to now */
        if (rc)
            return rc;
    }
    kt__cuda_pair_t *p = t->pair;
    int pushed = 0;
    int rc = kt__cuda_ctx_enter(t->context, &pushed);
    if (rc)
        return rc;
    float f = 0.0f;
    kt__curesult r = kt__cu.cuEventSynchronize(p->end);
    if (r == KT__CU_SUCCESS)
        r = kt__cu.cuEventElapsedTime(&f, p->start, p->end);
    kt__cuda_ctx_leave(pushed);
    if (r)
        return kt__cuda_fail("cuEventElapsedTime", r);
    *ms = (double)f;
    return 0;
}

double kt_cuda_timer_elapsed_ms(const kt_cuda_timer_t *t)
{
    double ms = 0.0;
    return kt_cuda_timer_elapsed(t, &ms) == 0 ? ms : 0.0;
}

void kt_cuda_timer_destroy(kt_cuda_timer_t *t)
{
    if (!t)
        return;
    if (timer_valid(t))
        kt__cuda_pool_put(t->context, t->pair);
    memset(t, 0, sizeof *t);
}
